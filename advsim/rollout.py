"""Executor rollouts in any world with a task suite, batched across episodes.

All episodes advance in lockstep: at each turn every unfinished episode's prompt goes into one
``engine.generate`` call (one batch, mixed adapters allowed), each completion is stepped in its
own environment, made by the episode's :class:`~advsim.suites.TaskSuite` (the web world's
``WebFormsEnv`` by default, the evidence-ledger world's ``EvidenceLedgerEnv`` with
:class:`~advsim.suites.EvidenceLedgerSuite`). The environment parses the action (``info["action"]``:
its canonical text, or None) and judges the episode (``info["success"]``, ``info["reasons"]``);
nothing here knows a world. Training later uses the token ids and log-probs the engine sampled
(never re-tokenised text).

An :class:`EpisodeSpec` may carry an injection α and a *replay prefix*: the actions of a clean
control trajectory, replayed verbatim up to transition d before the executor continues under
attack — the success-flip protocol of AdvSim2Real (Eq. 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from advsim.suites import TaskSuite, WebFormsSuite
from forms_bench.actions import ActionParseError, parse_action

PromptFn = Callable[[dict, Sequence[str]], list[int]]
"""(observation, previous actions) -> prompt token ids (:meth:`TaskSuite.executor_prompt`)."""


@dataclass
class EpisodeSpec:
    """One episode to run.

    Attributes:
        task: the task (a :class:`forms_bench.Task`, a ledger case: whatever the suite serves).
        injection: α to render at transition ``injection.transition`` (None = clean).
        prefix: actions replayed before the executor acts (a control's first d actions).
        replay: this is a success-flip replay: the prefix must reach transition d (a control
            that ended before d cannot be replayed); without it an injection at d is simply
            rendered when the executor's own episode reaches d (evaluation, training pools).
        slot: the sampling slot: turn t of this episode is sampled with
            ``request_seed(seed, slot, t)``. None (default) = the episode's position in the
            specs. Evaluation gives an attacked episode its clean episode's slot, and every
            checkpoint the same slots, so paired outcomes share their sampling seeds (common
            random numbers).
    """

    task: Any
    injection: Any = None
    prefix: Sequence[str] = ()
    replay: bool = False
    slot: int | None = None


@dataclass
class Turn:
    """One executor decision: the prompt, the sampled completion and what it did."""

    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    adapter: str | None
    text: str
    action: str | None
    error: str


@dataclass
class Episode:
    """A finished episode.

    Attributes:
        spec: what was run.
        turns: the executor's own decisions (replayed prefix actions are not turns).
        actions: every action text in order (prefix first), as the executor wrote it.
        success: the judge's verdict j; reasons: its reasons.
        rendered: the injection was rendered and passed the render gate (False when clean).
        took_target: an action equal to the declared target ζ was taken after the injection.
        replayable: the prefix could be replayed (the control had not ended before d).
        final_page: the last observation's changing text (:meth:`TaskSuite.observation_text`:
            the page in the web world; what an LM judge reads).
        final_info: the env's ``info`` of the episode's last step (the world's own verdict
            details: the ledger's ``protocol``, ``ecs`` and ``flags`` for SafeActBench's metrics).
    """

    spec: EpisodeSpec
    turns: list[Turn] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    success: bool = False
    reasons: list[str] = field(default_factory=list)
    rendered: bool = False
    took_target: bool = False
    replayable: bool = True
    final_page: str = ""
    final_info: dict = field(default_factory=dict)

    def trajectory(self):
        """This web-world episode as the :class:`judges.lm.Trajectory` an LM judge reads (final
        page, actions, their errors, the ``send_msg_to_user`` text)."""
        from judges.lm import Trajectory

        message = None
        for a in self.actions:
            try:
                act = parse_action(a)
            except ActionParseError:
                continue
            if act.name == "send_msg_to_user":
                message = act.args[0] if act.args else ""
        errors = [""] * len(self.spec.prefix) + [t.error for t in self.turns]
        return Trajectory(goal=self.spec.task.goal, pages=[self.final_page or "(no page)"], actions=list(self.actions),
                          errors=errors[:len(self.actions)], message=message, task_id=self.spec.task.id)

    @property
    def parse_rate(self) -> float:
        """Share of the executor's turns whose output parsed as an action."""
        if not self.turns:
            return 1.0
        return sum(t.action is not None for t in self.turns) / len(self.turns)

    def to_row(self) -> dict:
        """A JSON-able summary (trajectories.jsonl)."""
        inj = self.spec.injection
        return {"task_id": self.spec.task.id, "stratum": getattr(self.spec.task, "stratum", None),
                "actions": self.actions,
                "success": self.success, "reasons": self.reasons, "prefix": len(self.spec.prefix),
                "injection": inj.model_dump() if inj else None, "rendered": self.rendered,
                "took_target": self.took_target, "parse_rate": self.parse_rate,
                "outputs": [t.text for t in self.turns]}


def request_seed(seed: int, episode: int, turn: int) -> int:
    """Per-request sampling seed, a deterministic function of (run seed, episode, turn)."""
    return (seed * 1_000_003 + episode * 10_007 + turn * 101) % (2**31 - 1)


def run_episodes(engine, prompt_fn: PromptFn, specs: Sequence[EpisodeSpec], adapter: str | None, *,
                 seed: int, suite: TaskSuite | None = None, max_steps: int = 12, max_new_tokens: int = 48,
                 temperature: float = 1.0, top_p: float = 1.0, progress: Callable[[int], None] | None = None,
                 world_errors: str = "raise", env_wrapper: Callable | None = None,
                 store=None) -> list[Episode]:
    """Run every spec to the end; returns episodes in spec order.

    An episode whose next prompt + ``max_new_tokens`` would not fit the engine's
    ``max_model_len`` (a transcript grown by long outputs and error messages) ends there: its env
    is truncated (``env.unwrapped.truncate()``) and judged as at the step limit; its
    ``final_info["truncated_by"]`` says why (and, when it failed, its first reason); the other
    episodes go on (the engine would refuse the whole batch).

    Args:
        engine: a :class:`policies.engines.Engine`.
        prompt_fn: builds the executor prompt's token ids from an observation and the previous
            actions (``suite.executor_prompt(io)``).
        specs: episodes to run.
        adapter: executor adapter version (``"executor@2"``) or None for the backbone.
        seed: run seed (per-request seeds derive from it).
        suite: the world (:class:`~advsim.suites.TaskSuite`): it makes each episode's environment
            and the reset options that play its task and injection. Default: the web world,
            simulated, strict check (``WebFormsSuite()``); ``WebFormsSuite(world_factory=…)`` runs
            the same policy against real pages.
        max_steps, max_new_tokens, temperature, top_p: episode and sampling limits.
        progress: called with the number of turns generated in each batch.
        world_errors: ``"raise"`` (default: a failing world is a bug) or ``"fail_episode"``
            (evaluation against real browsers: an episode whose world fails even after the
            world's own recovery is counted as failed with the error as its reason — its last
            action is then recorded as written — and the other episodes go on).
        env_wrapper: wraps each episode's environment, e.g.
            ``lambda env: ReactiveAdversaryEnv(env, adversary)`` (:mod:`advsim.envs.reactive`)
            to evaluate under a reactive adversary; an injection it gets accepted counts as
            rendered, and its ``target_taken`` as ``took_target``.
        store: an :class:`advsim.run.EpisodeStore`: the specs run in chunks of ``store.chunk``,
            each saved when it finishes and read back instead of run when its key is already
            there (a resumed phase). Slots are fixed to positions in ``specs``, so the seeds do
            not depend on the chunking. Ignored with ``env_wrapper`` (its state is not part of
            the key).
    """
    if world_errors not in ("raise", "fail_episode"):
        raise ValueError(f"world_errors must be 'raise' or 'fail_episode', got {world_errors!r}")
    if store is not None and env_wrapper is None:
        suite = suite if suite is not None else WebFormsSuite()
        limits = dict(seed=seed, suite=suite, max_steps=max_steps, max_new_tokens=max_new_tokens,
                      temperature=temperature, top_p=top_p, world_errors=world_errors)
        out: list[Episode] = []
        for start in range(0, len(specs), store.chunk):
            part = [replace(s, slot=start + k if s.slot is None else s.slot)
                    for k, s in enumerate(specs[start:start + store.chunk])]
            key = store.key(adapter, seed, suite.name, max_steps, max_new_tokens, temperature, top_p, world_errors,
                            [(s.task, s.injection, list(s.prefix), s.replay, s.slot) for s in part])
            eps = store.get(key)
            if eps is None:
                eps = run_episodes(engine, prompt_fn, part, adapter, progress=progress, **limits)
                store.put(key, eps)
            out += eps
        return out
    from policies.engines import GenerationRequest

    suite = suite if suite is not None else WebFormsSuite()
    envs, obs, episodes, active = [], [], [], []
    for i, spec in enumerate(specs):
        env = suite.make_env(max_steps=max_steps)
        if env_wrapper is not None:
            env = env_wrapper(env)
        ep = Episode(spec)
        o, info = env.reset(seed=seed, options=suite.reset_options(spec.task, spec.injection))
        done = False
        for a in spec.prefix:  # replay the control up to transition d
            o, _, term, trunc, info = env.step(a)
            ep.actions.append(a)
            if term or trunc:
                done = True
                break
        if spec.injection is not None:
            ep.replayable = not done and (not spec.replay or len(spec.prefix) == spec.injection.transition)
            ep.rendered = bool(info.get("injected")) and ep.replayable
        ep.final_page = suite.observation_text(o)
        if done:
            ep.success = bool(info.get("success"))
            ep.reasons = list(info.get("reasons", []))
            ep.final_info = dict(info)
        else:
            active.append(i)
        envs.append(env)
        obs.append(o)
        episodes.append(ep)

    turn = 0
    limit = getattr(engine, "max_model_len", None)
    while active:
        requests = []
        batch = getattr(prompt_fn, "batch", None)  # one tokenizer call for the whole turn (suites.BatchedPrompt)
        prompts = batch([(obs[i], episodes[i].actions) for i in active]) if batch is not None else \
            [prompt_fn(obs[i], episodes[i].actions) for i in active]
        fits = []
        for i, ids in zip(active, prompts):
            if limit is not None and len(ids) + max_new_tokens > limit:
                # the transcript outgrew the context window: the episode ends here, truncated and
                # judged as at the step limit (the engine would refuse the whole batch)
                ep = episodes[i]
                why = (f"context window: the next prompt has {len(ids)} tokens; + {max_new_tokens} new tokens "
                       f"exceeds engine.max_model_len {limit}")
                try:
                    _, info = envs[i].unwrapped.truncate()
                except Exception as exc:  # noqa: BLE001 - only with world_errors="fail_episode"
                    if world_errors == "raise":
                        raise
                    ep.success, ep.reasons = False, [why, f"world error: {type(exc).__name__}: {exc}"]
                    continue
                ep.success = bool(info["success"])
                ep.reasons = ([] if ep.success else [why]) + list(info["reasons"])
                ep.final_info = {**info, "truncated_by": why}
                continue
            fits.append((i, ids))
        active = [i for i, _ in fits]
        for i, ids in fits:
            requests.append(GenerationRequest(prompt_ids=tuple(ids), adapter=adapter, max_new_tokens=max_new_tokens,
                                              temperature=temperature, top_p=top_p,
                                              seed=request_seed(seed, i if specs[i].slot is None else specs[i].slot,
                                                                turn), tag=i))
        if not requests:
            break
        gens = engine.generate(requests)
        if progress:
            progress(len(gens))
        still = []
        for i, g in zip(active, gens):
            ep, env = episodes[i], envs[i]
            turn_rec = Turn(list(g.request.prompt_ids), list(g.token_ids), list(g.logprobs),
                            None if g.adapter is None else str(g.adapter), g.text, None, "")
            ep.turns.append(turn_rec)
            try:
                o, _, term, trunc, info = env.step(g.text)
            except Exception as exc:  # noqa: BLE001 - only with world_errors="fail_episode"
                if world_errors == "raise":
                    raise
                ep.success, ep.reasons = False, [f"world error: {type(exc).__name__}: {exc}"]
                ep.actions.append(g.text)
                continue
            action = info.get("action")  # the env's canonical text of the parsed action, or None
            turn_rec.action, turn_rec.error = action, info["action_error"]
            ep.actions.append(action if action is not None else g.text)
            if spec_target := (ep.spec.injection.target_action if ep.spec.injection else None):
                if action == spec_target and info.get("injected"):
                    ep.took_target = True
            if ep.spec.injection is not None and info.get("injected"):
                ep.rendered = ep.replayable
            obs[i] = o
            ep.final_page = suite.observation_text(o)
            if info.get("adversary_injected_at") is not None:  # a reactive adversary's α was accepted
                ep.rendered = True
            if info.get("target_taken"):
                ep.took_target = True
            if term or trunc:
                ep.success = bool(info["success"])
                ep.reasons = list(info["reasons"])
                ep.final_info = dict(info)
            else:
                still.append(i)
        active = still
        turn += 1
    for env in envs:
        env.close()
    return episodes
