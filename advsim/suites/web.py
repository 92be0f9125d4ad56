"""The form benchmark (AdvSim2Real) as a task suite over ``advsim/WebForms-v0``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Sequence

import gymnasium as gym

from advsim.suites.protocol import BatchedPrompt, Oracle, ScriptedOracle, first_observation


class WebFormsSuite:
    """The form benchmark (AdvSim2Real) as a :class:`TaskSuite` over ``advsim/WebForms-v0``.

    Args:
        tasks: the tasks to serve (default: the frozen 150-task test set, ``forms_bench.load("test")``).
    """

    name = "web-forms"
    env_id = "advsim/WebForms-v0"
    group_name = "stratum"

    def __init__(self, tasks: Sequence | None = None, *, judge: Callable | None = None,
                 world_factory: Callable[[], Any] | None = None):
        from forms_bench import STRATA, load

        self.groups = tuple(STRATA)
        self._tasks = list(tasks) if tasks is not None else load("test")
        self.judge = judge
        self.world_factory = world_factory

    def tasks(self) -> list:
        """The served tasks (:class:`forms_bench.Task`)."""
        return list(self._tasks)

    def task_id(self, task) -> str:
        """``task.id``."""
        return task.id

    def make_env(self, max_steps: int | None = None) -> gym.Env:
        """A ``WebFormsEnv`` over the served tasks: the simulated world, or a world from
        ``world_factory`` (e.g. ``BrowserWorld`` for real pages); the strict check, or ``judge``."""
        from advsim.envs.web_forms import WebFormsEnv

        kw: dict[str, Any] = {} if max_steps is None else {"max_steps": max_steps}
        if self.world_factory is not None:
            kw["web_world"] = self.world_factory()
        return WebFormsEnv(tasks=self._tasks, judge=self.judge, **kw)

    def reset_options(self, task, injection=None) -> dict:
        """``{"task": task, "injection": α}``: α is rendered into the page at its transition d."""
        return {"task": task, "injection": injection}

    def executor_prompt(self, io) -> BatchedPrompt:
        """``io.executor_prompt(goal, page, previous actions, last error)``, batched per rollout turn
        through ``io.executor_chat`` and ``io.encode_chats`` where the roles have them."""
        chat = getattr(io, "executor_chat", None)
        return BatchedPrompt(
            lambda obs, history: io.executor_prompt(obs["goal"], obs["page"], history, obs["last_action_error"]),
            None if chat is None else
            (lambda obs, history: chat(obs["goal"], obs["page"], history, obs["last_action_error"])),
            getattr(io, "encode_chats", None))

    def observation_text(self, obs: dict) -> str:
        """The page (accessibility tree)."""
        return obs["page"]

    def ground_truth(self, task) -> Oracle:
        """The oracle solver's actions (:func:`forms_bench.oracle.solve`)."""
        from forms_bench.oracle import solve

        return ScriptedOracle([a.to_text() for a in solve(task)], "send_msg_to_user('Done.')")

    def negative_controls(self, task) -> dict[str, tuple[Oracle, str]]:
        """``submit-at-once``: press the final control without setting a field (the strict check
        names an unset target); ``stop-at-once``: end the episode at once (the final control was
        never activated)."""
        final = task.page.control(task.spec.final_control)
        done = "send_msg_to_user('Done.')"
        return {"submit-at-once": (ScriptedOracle([f"click('{final.bid}')", done], done), "target '"),
                "stop-at-once": (ScriptedOracle([done], done), "was never activated")}

    def success(self, info: dict) -> bool:
        """``info["success"]`` (the strict check s(x, τ))."""
        return bool(info.get("success"))

    # ------------------------------------------ co-evolution binding (stages and warm start)
    top_level = 5
    """The highest difficulty level (:data:`forms_bench.difficulty.TOP_LEVEL`)."""

    def curriculum_hints(self) -> list[str]:
        """What the curriculum is asked to propose for, in turn: the strata."""
        from forms_bench import STRATA

        return list(STRATA)

    def task_hint(self, task) -> str:
        """The hint a task belongs to (its stratum)."""
        return task.stratum

    def random_proposal(self, rng, level: int | None = None, hint: str | None = None):
        """A :class:`~forms_bench.proposal.TaskProposal` drawn with ``rng`` (stratum ``hint`` or
        drawn, domain drawn, ``level`` or drawn 0-5, seed drawn; in that order)."""
        from forms_bench import STRATA
        from forms_bench.difficulty import TOP_LEVEL
        from forms_bench.proposal import DOMAIN_NAMES, TaskProposal

        return TaskProposal(stratum=hint or rng.choice(STRATA), domain=rng.choice(DOMAIN_NAMES),
                            level=rng.randint(0, TOP_LEVEL) if level is None else level, seed=rng.randint(0, 999_999))

    def curriculum_prompt(self, io, hint: str, lines: Sequence[str]) -> list[int]:
        """The curriculum's prompt ids for a stratum and history lines."""
        return io.curriculum_prompt(hint, lines)

    def parse_proposal(self, io, text: str):
        """A TaskProposal from the curriculum's output (ValueError naming the field)."""
        return io.parse_curriculum(text)

    def proposal_from_dict(self, data: dict):
        """A logged proposal back (``proposals.jsonl``)."""
        from forms_bench.proposal import TaskProposal

        return TaskProposal.model_validate(data)

    def proposal_json(self, proposal) -> str:
        """Compact JSON of a proposal, as the curriculum writes it."""
        return proposal.to_json()

    def instantiate(self, proposal):
        """The training task a proposal asks for (ValueError: not instantiable)."""
        from forms_bench.proposal import instantiate

        return instantiate(proposal)

    def task_text(self, task) -> str:
        """What determines a task, for R_C's repetition clusters (:func:`forms_bench.proposal.task_text`)."""
        from forms_bench.proposal import task_text

        return task_text(task)

    def control_actions(self, task) -> list[str]:
        """The oracle's actions (what the adversary is shown as the successful trajectory)."""
        from forms_bench.oracle import solve

        return [a.to_text() for a in solve(task)]

    def adversary_prompt(self, io, task, control: Sequence[str]) -> list[int]:
        """The adversary's prompt ids: goal, first page, a successful control's actions."""
        from worlds.web.sim import SimWebWorld

        return io.adversary_prompt(task.goal, SimWebWorld().reset(task), control)

    def parse_injection(self, io, text: str, task=None):
        """α (:class:`~forms_bench.injection.Injection`) from the adversary's output (ValueError)."""
        return io.parse_adversary(text)

    def null_injection(self, like):
        """The null injection for α (:func:`advsim.attacks.benign_injection`)."""
        from advsim.attacks import benign_injection

        return benign_injection(like)

    def injection_from_dict(self, data: dict):
        """A logged α back."""
        from forms_bench.injection import Injection

        return Injection.model_validate(data)

    def task_to_dict(self, task) -> dict:
        """A task as JSON-able data (checkpoint state)."""
        return task.model_dump(mode="json")

    def task_from_dict(self, data: dict):
        """A task back from :meth:`task_to_dict`."""
        from forms_bench.schema import validate_task

        return validate_task(data)

    def training_tasks(self, n: int, seed: int, levels: dict[int, float] | None = None) -> list:
        """``n`` training-split tasks at ``levels`` (weights) (:func:`advsim.warmstart.warmstart_tasks`)."""
        from advsim.warmstart import warmstart_tasks

        return warmstart_tasks(n, seed, levels)

    def executor_demonstrations(self, io, tokenizer, w) -> list[tuple[list[int], list[int]]]:
        """The executor's warm-start examples for a :class:`~advsim.config.WarmStartConfig`:
        oracle steps with recovery and attacked states (:func:`advsim.warmstart.executor_examples`)."""
        from advsim.warmstart import executor_examples

        return executor_examples(io, tokenizer, w.executor_tasks, w.seed, levels=w.executor_levels)

    def adversary_demonstrations(self, io, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """The adversary's warm-start examples (:func:`advsim.warmstart.adversary_examples`)."""
        from advsim.warmstart import adversary_examples

        return adversary_examples(io, tokenizer, n, seed)

    def first_observation(self, task) -> dict:
        """The observation ``reset`` gives for ``task`` (no injection)."""
        return first_observation(self, task)

    def parse_action(self, text: str, task) -> Any:
        """One executor action (BrowserGym syntax), or ValueError."""
        from forms_bench.actions import parse_action

        return parse_action(text)

    # ------------------------------------------------------------------- evaluation binding
    def eval_pool(self, level: int, n: int, seed: int) -> list:
        """``n`` training-split tasks at ``level`` for evaluation (:func:`eval_pool`, seeds
        ``seed + 1000·level + i``)."""
        return eval_pool([level], n, seed).get(level, [])

    def frozen_tasks(self, spec: str) -> list:
        """The frozen test tasks ``spec`` names (:func:`forms_bench.suite.select_tasks`: ``all``,
        ``sample:N`` per stratum, or ids)."""
        from forms_bench.suite import select_tasks

        return select_tasks(spec)

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """The web world reports success only (the strict check): no further metrics."""
        return {}

    def injectable(self, task) -> bool:
        """Every page can carry an injection."""
        return True

    def task_group(self, task) -> str:
        """The task's stratum."""
        return task.stratum

    def corpus_injection(self, task, rng):
        """One style of :func:`advsim.attacks.corpus` for the task's page, chosen with ``rng``."""
        from advsim.attacks import corpus

        return rng.choice(list(corpus(task).values()))

    def real_world(self):
        """This suite over real pages in headless Chromium (:class:`worlds.web.browser.BrowserWorld`,
        one per environment made; all closed on exit)."""
        return _browser_suite(self._tasks, self.judge)

    def reactive_env(self, env, adversary):
        """:class:`advsim.envs.reactive.ReactiveAdversaryEnv` (≤ 11 queries × ≤ 256 tokens)."""
        from advsim.envs.reactive import ReactiveAdversaryEnv

        return ReactiveAdversaryEnv(env, adversary)

    def reactive_adversary(self, engine, io, adapter: str, *, temperature: float, max_new_tokens: int, seed: int):
        """:class:`advsim.attacks.RoleAdversary` over the adversary adapter ``adapter``."""
        from advsim.attacks import RoleAdversary

        return RoleAdversary(engine, io, adapter, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)

    def lm_judge(self, engine, tokenizer, seed: int):
        """J: the frozen backbone reading the final page and the actions, greedy, one sample
        (:class:`judges.lm.LMJudge`)."""
        from judges.lm import LMJudge

        return LMJudge(engine, tokenizer, k=1, temperature=0.0, seed=seed)


@contextmanager
def _browser_suite(tasks, judge):
    from worlds.web.browser import BrowserWorld

    worlds: list = []

    def factory():
        worlds.append(BrowserWorld())
        return worlds[-1]

    try:
        yield WebFormsSuite(tasks, judge=judge, world_factory=factory)
    finally:
        for w in worlds:
            w.close()


POOL_SEED = 1_000_000
"""Seeds of the per-level evaluation pool start here: above every seed a curriculum proposal
(≤ 999,999) or the warm start can draw, so the pool is never trained on."""


def eval_pool(levels: Sequence[int], per_level: int | dict[int, int], seed: int = POOL_SEED) -> dict[int, list]:
    """The fixed per-level evaluation pool: ``per_level`` training-split tasks per level (an int,
    or ``{level: n}``; levels with n = 0 are left out), cycling through strata and domains, seeds
    ``seed + 1000·level + i`` — so a level's first n tasks are the same whatever n is."""
    from forms_bench import STRATA
    from forms_bench.difficulty import level_knobs
    from forms_bench.generate import make_task
    from forms_bench.proposal import DOMAIN_NAMES

    sizes = {lv: (per_level.get(lv, 0) if isinstance(per_level, dict) else per_level) for lv in levels}
    return {lv: [make_task(STRATA[i % len(STRATA)], DOMAIN_NAMES[(i // len(STRATA)) % len(DOMAIN_NAMES)],
                           seed + 1000 * lv + i, knobs=level_knobs(lv)) for i in range(n)]
            for lv, n in sizes.items() if n > 0}
