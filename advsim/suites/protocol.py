"""The task-suite protocol (:class:`TaskSuite`, :class:`CoevolutionSuite`), scripted oracles and the
suite self-check (:func:`check_suite`) that both worlds pass through it. See :mod:`advsim.suites`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import gymnasium as gym


class BatchedPrompt:
    """The executor's prompt builder a suite returns from ``executor_prompt(io)``:
    ``prompt(obs, previous_actions) -> ids`` for one episode, and :meth:`batch` for all the
    episodes of a rollout turn, tokenized in one call when the roles give the chat before
    tokenization (``chat(obs, previous_actions) -> (system, user)`` and ``encode_chats``).

    Args:
        one: ``(obs, previous actions) -> ids``.
        chat: ``(obs, previous actions) -> (system, user)``, or None (then :meth:`batch` calls ``one``).
        encode_chats: ``(system, user)`` pairs -> ids (:func:`policies.roles.encode_chats`), or None.
    """

    def __init__(self, one: Callable[[dict, Sequence[str]], list[int]],
                 chat: Callable[[dict, Sequence[str]], tuple[str, str]] | None = None,
                 encode_chats: Callable[[Sequence[tuple[str, str]]], list[list[int]]] | None = None):
        self.one, self.chat, self.encode_chats = one, chat, encode_chats

    def __call__(self, obs: dict, history: Sequence[str]) -> list[int]:
        return self.one(obs, history)

    def batch(self, items: Sequence[tuple[dict, Sequence[str]]]) -> list[list[int]]:
        """Ids for each ``(obs, previous actions)``, in order — the same ids as calling the
        builder on each (:func:`policies.roles.encode_chats`)."""
        if self.chat is None or self.encode_chats is None:
            return [self.one(o, h) for o, h in items]
        return self.encode_chats([self.chat(o, h) for o, h in items])


@runtime_checkable
class Oracle(Protocol):
    """A scripted policy: the next action text from the last observation and ``info``."""

    def act(self, obs: dict, info: dict) -> str:
        """The action to take now (an action string the env parses)."""


@runtime_checkable
class TaskSuite(Protocol):
    """What rollouts, rewards, stages and evaluation need from a world (see the module docstring).

    The environment :meth:`make_env` returns is a Gymnasium env whose action is the executor's text
    and whose ``info`` carries what rollouts (:func:`advsim.rollout.run_episodes`) read:

    - every step: ``"action"`` (the canonical text of the parsed action, or None when it did not
      parse) and ``"action_error"`` (the parse or execution error, ``""`` when none);
      ``"injected"`` (True once the injection α is on the injection surface and passed the render
      gate — an episode counts as attacked only then);
    - at episode end (``terminated`` or ``truncated``): ``"success"`` (the strict verdict; the
      reward is ``float(success)``) and ``"reasons"`` (list of str, why it failed);
    - optional, from a reactive wrapper: ``"adversary_injected_at"`` and ``"target_taken"``.

    An injection α (:meth:`reset_options`) has ``transition`` (d: the step it appears at) and
    ``target_action`` (ζ: the action it wants, or None); nothing acts after an episode has ended.

    Attributes:
        name: the suite's name (``"web-forms"``, ``"evidence-ledger"``).
        env_id: the Gymnasium id of its environment.
    """

    name: str
    env_id: str

    def tasks(self) -> list:
        """The suite's frozen tasks, in a fixed order."""

    def task_id(self, task: Any) -> str:
        """A task's id (unique within the suite)."""

    def make_env(self, max_steps: int | None = None) -> gym.Env:
        """A new environment of this world (``max_steps`` None: the env's default)."""

    def reset_options(self, task: Any, injection: Any = None) -> dict:
        """``reset(options=…)`` that plays ``task`` (with ``injection`` on its injection surface)."""

    def executor_prompt(self, io: Any) -> Callable[[dict, Sequence[str]], list[int]]:
        """The executor's prompt builder for this world: ``(observation, previous actions) -> ids``,
        from the roles' :class:`policies.roles.RoleIO`; a :class:`BatchedPrompt` also builds a
        whole rollout turn's prompts in one tokenizer call (its ``batch``, which rollouts use when
        present)."""

    def observation_text(self, obs: dict) -> str:
        """The part of an observation that changes with the agent's actions (web: the page;
        ledger: the last tool result), as an LM judge reads the final one."""

    def ground_truth(self, task: Any) -> Oracle:
        """An oracle that solves ``task``."""

    def negative_controls(self, task: Any) -> dict[str, tuple[Oracle, str]]:
        """Named oracles that must fail ``task``, each with a substring the verdict's reasons
        must contain."""

    def success(self, info: dict) -> bool:
        """The utility check at episode end, from the env's last ``info``."""


@runtime_checkable
class CoevolutionSuite(TaskSuite, Protocol):
    """A :class:`TaskSuite` the two co-evolution stages, the warm start and
    :func:`advsim.evaluate.evaluate` can run in. Proposals and injections are the
    world's pydantic types (``model_dump`` / ``model_copy`` / ``.level`` are used as they are).

    Attributes:
        top_level: the highest difficulty level.
        groups: the groups frozen test tasks are stratified by, in report order (web: the five
            strata; ledger: the protocols V0–V3 and Legacy).
        group_name: what a group is called (``"stratum"``, ``"protocol"``).

    The evaluation binding ends with optional columns: a world without one returns None
    (:meth:`corpus_injection`, :meth:`real_world`, :meth:`reactive_env`,
    :meth:`reactive_adversary`, :meth:`lm_judge`) and the evaluation leaves that column out.
    """

    top_level: int
    groups: tuple[str, ...]
    group_name: str

    def curriculum_hints(self) -> list[str]:
        """What the curriculum is asked to propose for, in turn (web: strata; ledger: domains)."""

    def task_hint(self, task: Any) -> str:
        """The hint a task belongs to."""

    def random_proposal(self, rng: Any, level: int | None = None, hint: str | None = None) -> Any:
        """A proposal drawn with ``rng`` (probes, the curriculum's warm start)."""

    def curriculum_prompt(self, io: Any, hint: str, lines: Sequence[str]) -> list[int]:
        """The curriculum's prompt ids for a hint and history lines (spec -> p̂)."""

    def parse_proposal(self, io: Any, text: str) -> Any:
        """A proposal from the curriculum's output (ValueError naming the field)."""

    def proposal_from_dict(self, data: dict) -> Any:
        """A logged proposal back."""

    def proposal_json(self, proposal: Any) -> str:
        """A proposal as the curriculum writes it."""

    def instantiate(self, proposal: Any) -> Any:
        """The task a proposal asks for (ValueError: not instantiable; AdvSim2Real's ν = 0)."""

    def task_text(self, task: Any) -> str:
        """What determines a task, for R_C's lexical repetition clusters."""

    def control_actions(self, task: Any) -> list[str]:
        """The ground truth's actions (a successful control shown to the adversary)."""

    def adversary_prompt(self, io: Any, task: Any, control: Sequence[str]) -> list[int]:
        """The adversary's prompt ids for a task and a successful control's actions."""

    def parse_injection(self, io: Any, text: str, task: Any = None) -> Any:
        """α from the adversary's output (ValueError)."""

    def null_injection(self, like: Any) -> Any:
        """Benign text of α's length at α's transition (the null control of R_A)."""

    def injection_from_dict(self, data: dict) -> Any:
        """A logged α back."""

    def task_to_dict(self, task: Any) -> dict:
        """A task as JSON-able data (the stage-2 attack history in checkpoints)."""

    def task_from_dict(self, data: dict) -> Any:
        """A task back from :meth:`task_to_dict`."""

    def training_tasks(self, n: int, seed: int, levels: dict[int, float] | None = None) -> list:
        """``n`` training tasks at ``levels`` (weights), never the frozen test tasks."""

    def executor_demonstrations(self, io: Any, tokenizer: Any, w: Any) -> list[tuple[list[int], list[int]]]:
        """The executor's warm-start (prompt ids, target ids) for a ``WarmStartConfig``."""

    def adversary_demonstrations(self, io: Any, tokenizer: Any, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """The adversary's warm-start (prompt ids, target ids)."""

    def first_observation(self, task: Any) -> dict:
        """The observation ``reset`` gives for ``task``."""

    def parse_action(self, text: str, task: Any) -> Any:
        """One executor action for ``task`` (ValueError when it does not parse)."""

    def eval_pool(self, level: int, n: int, seed: int) -> list:
        """``n`` evaluation tasks at ``level`` (generated, unseen in training)."""

    def frozen_tasks(self, spec: str) -> list:
        """Frozen test tasks for ``eval.tasks``: ``"all"``, ``"sample:N"`` (N per group — web:
        stratum; ledger: protocol) or comma-separated task ids (ValueError for an unknown id)."""

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """The world's own metrics over finished episodes' last ``info`` (may be empty)."""

    def injectable(self, task: Any) -> bool:
        """Whether ``task`` has an injection surface."""

    def task_group(self, task: Any) -> str:
        """The group of :attr:`groups` a task belongs to."""

    def corpus_injection(self, task: Any, rng: Any) -> Any:
        """One α for ``task`` from the world's fixed injection-style corpus, drawn with ``rng``
        (an adversary that took no part in training); None: no corpus, or not injectable."""

    def real_world(self) -> Any:
        """A context manager that yields this suite over the *real* counterpart of the world model
        (web: pages in headless Chromium) and closes it on exit; None when there is none. It must
        start nothing until entered: the evaluation calls it once just to learn whether it exists."""

    def reactive_env(self, env: Any, adversary: Any) -> Any:
        """``env`` wrapped so ``adversary`` (query → decision) may inject before each transition
        (AdvSim2Real's reactive protocol); None when the world has no reactive protocol."""

    def reactive_adversary(self, engine: Any, io: Any, adapter: str, *, temperature: float,
                           max_new_tokens: int, seed: int) -> Any:
        """The learned adversary adapter as a reactive adversary for :meth:`reactive_env` (with a
        ``check()`` of its query and parse counts); None when the world has no reactive protocol."""

    def lm_judge(self, engine: Any, tokenizer: Any, seed: int) -> Any:
        """An LM judge of finished episodes (``judge_many(trajectories)`` over
        :meth:`advsim.rollout.Episode.trajectory`, which is web-shaped today: goal, pages,
        BrowserGym actions), compared with the strict verdict; None when the world has none."""


def first_observation(suite: TaskSuite, task) -> dict:
    """The observation ``suite``'s environment gives at ``reset`` for ``task`` (no injection)."""
    env = suite.make_env()
    try:
        obs, _ = env.reset(options=suite.reset_options(task))
    finally:
        env.close()
    return obs


class ScriptedOracle:
    """An :class:`Oracle` that plays a fixed list of action texts, then ``fallback``.

    Args:
        actions: action texts in order.
        fallback: what to play once the list is exhausted (an episode-ending action).
    """

    def __init__(self, actions: Sequence[str], fallback: str):
        self.actions = list(actions)
        self.fallback = fallback
        self._i = 0

    def act(self, obs: dict, info: dict) -> str:
        """The next action of the list (``fallback`` after the last)."""
        if self._i < len(self.actions):
            self._i += 1
            return self.actions[self._i - 1]
        return self.fallback


# ------------------------------------------------------------------------------ self-check
@dataclass
class SuiteCheck:
    """Result of :func:`check_suite`.

    Attributes:
        suite: the suite's name.
        runs: per category (``"ground_truth"``, ``"control:<name>"``) ``[passed, total]`` episodes.
        failures: one line per episode that did not behave (task id, category, what happened).
        seconds: wall time of the check.
    """

    suite: str
    runs: dict[str, list[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every ground truth succeeded and every negative control failed with its reason."""
        return not self.failures and bool(self.runs)

    def to_dict(self) -> dict:
        """JSON-able form (``advsim suite check --json``)."""
        return {"suite": self.suite, "ok": self.ok, "runs": self.runs, "failures": self.failures,
                "seconds": round(self.seconds, 3)}


def play(suite: TaskSuite, env: gym.Env, task, oracle: Oracle, max_steps: int) -> tuple[float, dict, int]:
    """Play one episode of ``task`` with ``oracle`` through the Gymnasium API.

    Returns:
        ``(reward, info, steps)``: the last step's reward and ``info`` and the number of steps.

    Raises:
        RuntimeError: the episode did not end within ``max_steps`` + 1 steps (the env must
            truncate by then: a broken step limit).
    """
    obs, info = env.reset(options=suite.reset_options(task))
    for n in range(1, max_steps + 2):
        obs, reward, terminated, truncated, info = env.step(oracle.act(obs, info))
        if terminated or truncated:
            return float(reward), info, n
    raise RuntimeError(f"{suite.task_id(task)}: the episode did not end after {max_steps + 1} steps")


def check_suite(suite: TaskSuite, tasks: Sequence | None = None, max_steps: int = 40) -> SuiteCheck:
    """The suite self-check through the shared protocol: play every task's ground truth and
    negative controls in the suite's own environment (Gymnasium API, nothing reached behind it).

    A ground truth passes when the episode succeeds (``suite.success(info)`` and reward 1); a
    negative control passes when it fails (reward 0) with its reason among ``info["reasons"]``.

    Args:
        suite: any :class:`TaskSuite`.
        tasks: the tasks to check (default: all of ``suite.tasks()``).
        max_steps: the env's step limit for the check.

    Returns:
        A :class:`SuiteCheck`; ``.ok`` is True when nothing failed.
    """
    t0 = time.perf_counter()
    report = SuiteCheck(suite.name)
    env = suite.make_env(max_steps=max_steps)
    try:
        for task in (suite.tasks() if tasks is None else tasks):
            tid = suite.task_id(task)
            runs = [("ground_truth", suite.ground_truth(task), None)]
            runs += [(f"control:{name}", oracle, want) for name, (oracle, want) in suite.negative_controls(task).items()]
            for cat, oracle, want in runs:
                reward, info, _ = play(suite, env, task, oracle, max_steps)
                ok_success = suite.success(info)
                reasons = list(info.get("reasons", []))
                if want is None:
                    good = ok_success and reward == 1.0
                    what = f"reward {reward}, reasons {reasons}"
                else:
                    good = not ok_success and reward == 0.0 and any(want in r for r in reasons)
                    what = f"reward {reward}, wanted a reason with {want!r}, got {reasons}"
                c = report.runs.setdefault(cat, [0, 0])
                c[0] += int(good)
                c[1] += 1
                if not good:
                    report.failures.append(f"{tid} {cat}: {what}")
    finally:
        env.close()
    report.seconds = time.perf_counter() - t0
    return report
