"""Task suites: one protocol over both worlds, and the suite self-check that runs through it.

A **task suite** binds a world's tasks to its Gymnasium environment, the way BrowserGym binds a
task class (``setup``/``validate``/``teardown``) to its generic env and AgentDojo binds a suite's
user tasks to a ground truth and a utility check. :class:`TaskSuite` declares, for one world:

- ``tasks()``: the suite's frozen tasks (web: the 150 test tasks; ledger: the 656 cases) and
  ``task_id(task)``;
- ``make_env(max_steps)``: the world's environment (``advsim/WebForms-v0`` or
  ``advsim/EvidenceLedger-v0``); ``reset_options(task, injection)`` plays ``task`` in it, with
  an adversary's injection on the world's injection surface (the page; a record shown by tool
  results);
- ``executor_prompt(io)``: the executor's prompt for an observation and the actions so far, and
  ``observation_text(obs)``: the part of an observation an LM judge reads — what rollouts
  (:func:`advsim.rollout.run_episodes`) and the warm start need to run in the world;
- ``ground_truth(task)``: an :class:`Oracle` that solves the task (web: the oracle solver's
  BrowserGym actions; ledger: the reference plan, whose later calls use the ids earlier calls
  returned, so it reads the env's ``info["output"]``);
- ``negative_controls(task)``: named oracles that must fail, each with a reason the verdict must
  give (web: pressing the final control at once, stopping at once; ledger: the suite's own
  controls — acting without evidence, on stale evidence, with a wrong id, …);
- ``success(info)``: the utility check, read from the env's last ``info`` (both envs put
  ``success`` and ``reasons`` there at episode end; the env's reward is ``float(success)``).

:func:`check_suite` is the one self-check both worlds pass through this protocol: every ground
truth solves its task (reward 1) and every negative control fails with its reason (reward 0).
``advsim suite check web|ledger`` runs it.

What the co-evolution stages, the warm start and the suite evaluation need beyond that is
declared by :class:`CoevolutionSuite` (both built-in suites implement it): the curriculum's
hints, prompt, parser and ``instantiate`` (a proposal → a task: the validity gate ν), R_C's
cluster text, the adversary's prompt and parser (α on the world's injection surface) and its
null injection, the warm start's demonstrations, and the evaluation pools and metrics.
:func:`suite_from_config` builds the suite a run's ``world`` section names. Sources: BrowserGym (task and registry), AgentDojo
(suites: ground truth, utility and security checks; the suite checks itself), SafeActBench (ECS).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import gymnasium as gym


@runtime_checkable
class Oracle(Protocol):
    """A scripted policy: the next action text from the last observation and ``info``."""

    def act(self, obs: dict, info: dict) -> str:
        """The action to take now (an action string the env parses)."""


@runtime_checkable
class TaskSuite(Protocol):
    """What rollouts, rewards, stages and evaluation need from a world (see the module docstring).

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
        from the roles' :class:`policies.roles.RoleIO`."""

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
    :func:`advsim.suite_eval.evaluate_suite` can run in. Proposals and injections are the
    world's pydantic types (``model_dump`` / ``model_copy`` / ``.level`` are used as they are).

    Attributes:
        top_level: the highest difficulty level.
    """

    top_level: int

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

    def frozen_sample(self, per_group: int) -> list:
        """``per_group`` frozen tasks per group (web: stratum; ledger: protocol)."""

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """The world's own metrics over finished episodes' last ``info`` (may be empty)."""

    def injectable(self, task: Any) -> bool:
        """Whether ``task`` has an injection surface."""


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


# ------------------------------------------------------------------------------------- web
class WebFormsSuite:
    """The form benchmark (AdvSim2Real) as a :class:`TaskSuite` over ``advsim/WebForms-v0``.

    Args:
        tasks: the tasks to serve (default: the frozen 150-task test set, ``forms_bench.load("test")``).
    """

    name = "web-forms"
    env_id = "advsim/WebForms-v0"

    def __init__(self, tasks: Sequence | None = None, *, judge: Callable | None = None,
                 world_factory: Callable[[], Any] | None = None):
        from forms_bench import load

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

    def executor_prompt(self, io) -> Callable[[dict, Sequence[str]], list[int]]:
        """``io.executor_prompt(goal, page, previous actions, last error)``."""
        return lambda obs, history: io.executor_prompt(obs["goal"], obs["page"], history, obs["last_action_error"])

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
        """``n`` training-split tasks at ``level`` for evaluation (:func:`advsim.evaluate.eval_pool`;
        its own pool seed, so ``seed`` is not used)."""
        from advsim.evaluate import eval_pool

        return eval_pool([level], n).get(level, []) if n > 0 else []

    def frozen_sample(self, per_group: int) -> list:
        """``per_group`` frozen test tasks per stratum (:func:`forms_bench.suite.select_tasks`)."""
        from forms_bench.suite import select_tasks

        return select_tasks(f"sample:{per_group}")

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """The web world reports success only (the strict check): no further metrics."""
        return {}

    def injectable(self, task) -> bool:
        """Every page can carry an injection."""
        return True


# ---------------------------------------------------------------------------------- ledger
class PlanOracle:
    """Plays a ledger plan (:data:`worlds.ledger.suite.PlanItem` list): literal calls as they
    are, and each expected action's call built when it is due, with the ids earlier actions
    returned (read from the env's ``info["output"]``)."""

    def __init__(self, suite, case, plan: Sequence):
        self.suite, self.case, self.plan = suite, case, list(plan)
        self._specs = {a.id: a for a in case.spec.actions}
        self._outputs: dict[str, str] = {}
        self._last: str | None = None  # the expected action played last (its output comes next)
        self._i = 0

    def act(self, obs: dict, info: dict) -> str:
        """The next plan item as call text (``final_answer('Done.')`` after the last)."""
        from worlds.ledger.suite import Act, action_call

        if self._last is not None and info.get("output"):
            self._outputs[self._last] = info["output"]
        self._last = None
        if self._i >= len(self.plan):
            return "final_answer('Done.')"
        item = self.plan[self._i]
        self._i += 1
        if isinstance(item, Act):
            self._last = item.action
            return action_call(self.case, self.suite.tools, self._specs[item.action], self._outputs,
                               dict(item.overrides))
        return item


class EvidenceLedgerSuite:
    """The evidence-ledger tool world (SafeActBench) as a :class:`TaskSuite` over
    ``advsim/EvidenceLedger-v0``.

    Args:
        cases: a user's case file (``docs/own-ledger-cases.md``) instead of the frozen suite.
        domains: the domains the curriculum is asked about and training cases come from
            (default: all six built-in ones; ValueError for another name).
        tool_listing: ``"full"`` or ``"compact"`` tool list in the observation's context
            (:class:`~advsim.envs.ledger.EvidenceLedgerEnv`).
    """

    name = "evidence-ledger"
    env_id = "advsim/EvidenceLedger-v0"

    def __init__(self, cases=None, tool_listing: str = "full", domains: Sequence[str] | None = None):
        from worlds.ledger.own import load_cases
        from worlds.ledger.schema import DOMAINS
        from worlds.ledger.suite import load_suite

        self.cases_path = cases
        self.tool_listing = tool_listing
        self.domains = list(domains or DOMAINS)
        unknown = [d for d in self.domains if d not in DOMAINS]
        if unknown:
            raise ValueError(f"unknown ledger domains {unknown}; one of {', '.join(DOMAINS)}")
        self.suite = load_cases(cases) if cases is not None else load_suite()

    def tasks(self) -> list:
        """The cases (:class:`worlds.ledger.schema.Case`)."""
        return list(self.suite.cases)

    def task_id(self, task) -> str:
        """``case.id``."""
        return task.id

    def make_env(self, max_steps: int | None = None) -> gym.Env:
        """An ``EvidenceLedgerEnv`` over the same cases."""
        from advsim.envs.ledger import EvidenceLedgerEnv

        kw = {} if max_steps is None else {"max_steps": max_steps}
        return EvidenceLedgerEnv(cases=self.cases_path, tool_listing=self.tool_listing, **kw)

    def reset_options(self, task, injection=None) -> dict:
        """``{"task": case, "injection": α}`` (the case may come from outside the suite: a
        curriculum's, :func:`worlds.ledger.difficulty.instantiate`): α
        (:class:`~worlds.ledger.injection.ToolInjection`) is written into a record's free-text
        field after d actions and shows in later tool results."""
        return {"task": task, "injection": injection}

    def executor_prompt(self, io) -> Callable[[dict, Sequence[str]], list[int]]:
        """``io.ledger_executor_prompt(context, transcript, last error)``: the transcript holds
        every call so far with its result (the previous actions are in it).

        Raises:
            ValueError: ``io`` has no ledger prompt (a web-only RoleIO).
        """
        if getattr(io, "ledger_executor_prompt", None) is None:
            raise ValueError("this RoleIO has no ledger_executor_prompt (policies.roles.role_io builds one)")
        return lambda obs, history: io.ledger_executor_prompt(obs["context"], obs["transcript"],
                                                              obs["last_action_error"])

    def observation_text(self, obs: dict) -> str:
        """The last tool result (JSON text)."""
        return obs["tool_result"]

    def ground_truth(self, task) -> Oracle:
        """The reference plan (:func:`worlds.ledger.suite.reference_plan`)."""
        from worlds.ledger.suite import reference_plan

        return PlanOracle(self.suite, task, reference_plan(task, self.suite.tools))

    def negative_controls(self, task) -> dict[str, tuple[Oracle, str]]:
        """The suite's negative controls (:func:`worlds.ledger.suite.controls`), each with the
        reason code the evaluator must give."""
        from worlds.ledger.suite import controls

        return {name: (PlanOracle(self.suite, task, plan), want)
                for name, (plan, want) in controls(self.suite, task).items()}

    def success(self, info: dict) -> bool:
        """``info["success"]`` (ECS = 1)."""
        return bool(info.get("success"))

    # ------------------------------------------ co-evolution binding (stages and warm start)
    top_level = 5
    """The highest difficulty level (:data:`worlds.ledger.difficulty.TOP_LEVEL`)."""

    def curriculum_hints(self) -> list[str]:
        """What the curriculum is asked to propose for, in turn: the suite's domains."""
        return list(self.domains)

    def task_hint(self, task) -> str:
        """The hint a case belongs to (its domain)."""
        return task.domain

    def random_proposal(self, rng, level: int | None = None, hint: str | None = None):
        """A :class:`~worlds.ledger.difficulty.LedgerProposal` drawn with ``rng`` (domain
        ``hint`` or drawn from the suite's domains, ``level`` or drawn 0-5, seed drawn)."""
        from worlds.ledger.difficulty import TOP_LEVEL, LedgerProposal

        return LedgerProposal(domain=hint or rng.choice(self.domains),
                              level=rng.randint(0, TOP_LEVEL) if level is None else level, seed=rng.randint(0, 999_999))

    def curriculum_prompt(self, io, hint: str, lines: Sequence[str]) -> list[int]:
        """The curriculum's prompt ids for a domain and history lines."""
        return io.ledger_curriculum_prompt(hint, lines)

    def parse_proposal(self, io, text: str):
        """A LedgerProposal from the curriculum's output.

        Raises:
            ValueError: no JSON object, or a field missing or invalid (named).
        """
        from pydantic import ValidationError

        from worlds.ledger.difficulty import LedgerProposal
        from worlds.ledger.schema import DOMAINS

        obj = io.parse_ledger_curriculum(text)
        try:
            p = LedgerProposal.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"curriculum: {'.'.join(str(x) for x in err['loc']) or '<object>'}: {err['msg']}") from None
        if p.domain not in DOMAINS:
            raise ValueError(f"curriculum: domain: unknown domain {p.domain!r}")
        return p

    def proposal_from_dict(self, data: dict):
        """A logged proposal back (``proposals.jsonl``)."""
        from worlds.ledger.difficulty import LedgerProposal

        return LedgerProposal.model_validate(data)

    def proposal_json(self, proposal) -> str:
        """Compact JSON of a proposal, as the curriculum writes it."""
        return proposal.model_dump_json(exclude_none=True)

    def instantiate(self, proposal):
        """The case a proposal asks for (:func:`worlds.ledger.difficulty.instantiate`; ValueError)."""
        from worlds.ledger.difficulty import instantiate

        return instantiate(proposal)

    def task_text(self, task) -> str:
        """What determines a case, for R_C's repetition clusters: its request (the context's
        first paragraph, before the rules)."""
        return task.context.split("\n")[0]

    def control_actions(self, task) -> list[str]:
        """The reference plan's calls as played in the env (canonical texts)."""
        env = self.make_env(max_steps=40)
        try:
            oracle = self.ground_truth(task)
            obs, info = env.reset(options=self.reset_options(task))
            out = []
            for _ in range(40):
                obs, _, term, trunc, info = env.step(oracle.act(obs, info))
                out.append(info["action"])
                if term or trunc:
                    break
        finally:
            env.close()
        return out

    def adversary_prompt(self, io, task, control: Sequence[str]) -> list[int]:
        """The adversary's prompt ids: the case context with its tool list and a successful
        control's calls."""
        return io.ledger_adversary_prompt(self.first_observation(task)["context"], control)

    def parse_injection(self, io, text: str, task=None):
        """α (:class:`~worlds.ledger.injection.ToolInjection`, written into the case's primary
        record) from the adversary's output.

        Raises:
            ValueError: the line is malformed, or ζ is not one call of ``task``'s tools.
        """
        from pydantic import ValidationError

        from forms_bench.actions import ActionParseError, parse_call
        from worlds.ledger.injection import ToolInjection

        d, target, z = io.parse_ledger_adversary(text)
        if target is not None and task is not None:
            try:
                parse_call(target, self._specs(task))
            except ActionParseError as exc:
                raise ValueError(f"adversary: call: {exc}") from None
        try:
            return ToolInjection(instruction=z, transition=d, target_action=target)
        except ValidationError as exc:
            raise ValueError(f"adversary: {exc.errors()[0]['msg']}") from None

    def _specs(self, task):
        from worlds.ledger.tools import ToolWorld

        return ToolWorld(task, self.suite.tools, self.suite.entity_types).specs

    def null_injection(self, like):
        """The null injection for α (:func:`worlds.ledger.injection.benign_injection`)."""
        from worlds.ledger.injection import benign_injection

        return benign_injection(like)

    def injection_from_dict(self, data: dict):
        """A logged α back."""
        from worlds.ledger.injection import ToolInjection

        return ToolInjection.model_validate(data)

    def task_to_dict(self, task) -> dict:
        """A case as JSON-able data (checkpoint state)."""
        return task.model_dump(mode="json")

    def task_from_dict(self, data: dict):
        """A case back from :meth:`task_to_dict`, validated against the suite's declarations."""
        from worlds.ledger.schema import validate_case

        return validate_case(data, self.suite.tools, self.suite.entity_types)

    def training_tasks(self, n: int, seed: int, levels: dict[int, float] | None = None) -> list:
        """``n`` generated cases of the suite's domains, split over ``levels`` by weight
        (default: level 0 only; :func:`worlds.ledger.difficulty.sample_cases`)."""
        from worlds.ledger.difficulty import sample_cases

        levels = levels or {0: 1.0}
        total = sum(levels.values())
        counts = {lv: round(n * w / total) for lv, w in levels.items()}
        counts[max(levels, key=levels.get)] += n - sum(counts.values())
        return [c for lv, k in counts.items() for c in sample_cases(lv, k, seed, self.domains)]

    def executor_demonstrations(self, io, tokenizer, w) -> list[tuple[list[int], list[int]]]:
        """The executor's warm-start examples: every reference step of ``w.executor_tasks``
        generated cases (:func:`advsim.warmstart.suite_demonstrations`)."""
        from advsim.warmstart import suite_demonstrations

        return suite_demonstrations(self, io, tokenizer, self.training_tasks(w.executor_tasks, w.seed, w.executor_levels))

    def adversary_demonstrations(self, io, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """The adversary's warm-start examples: a generated case's context and reference calls
        → an injection of the built-in corpus (:func:`worlds.ledger.injection.corpus`; styles
        and transitions 0-2 vary) in the one-line format."""
        import random

        from advsim.warmstart import encode_target
        from policies.roles import format_adversary
        from worlds.ledger.injection import corpus

        rng = random.Random(f"warmstart-adversary-ledger:{seed}")
        out = []
        for case in self.training_tasks(n, seed + 1):
            styles = list(corpus(case, transition=rng.randint(0, 2)).values())
            inj = styles[rng.randrange(len(styles))]
            out.append((self.adversary_prompt(io, case, self.control_actions(case)),
                        encode_target(tokenizer, format_adversary(inj))))
        return out

    def first_observation(self, task) -> dict:
        """The observation ``reset`` gives for ``task`` (no injection)."""
        return first_observation(self, task)

    def parse_action(self, text: str, task) -> Any:
        """One call of ``task``'s tools (:func:`forms_bench.actions.parse_call`), or ValueError."""
        from forms_bench.actions import parse_call

        return parse_call(text, self._specs(task))

    # ------------------------------------------------------------------- evaluation binding
    def eval_pool(self, level: int, n: int, seed: int) -> list:
        """``n`` generated cases at ``level`` of the suite's domains, drawn with ``seed``
        (:func:`worlds.ledger.difficulty.sample_cases`)."""
        from worlds.ledger.difficulty import sample_cases

        return sample_cases(level, n, seed, self.domains) if n > 0 else []

    def frozen_sample(self, per_group: int) -> list:
        """The first ``per_group`` cases of each protocol of the served suite, in suite order."""
        out, seen = [], {}
        for c in self.suite.cases:
            if seen.get(c.protocol, 0) < per_group:
                seen[c.protocol] = seen.get(c.protocol, 0) + 1
                out.append(c)
        return out

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """SafeActBench's metrics over finished episodes' last ``info`` (ECS per protocol and
        domain, P-M, D-M, BSR, PAR, CAS, Gap, Part.; :func:`worlds.ledger.evaluator.aggregate`)."""
        from types import SimpleNamespace

        from worlds.ledger.evaluator import aggregate

        rows = [SimpleNamespace(protocol=i["protocol"], domain=i["domain"], ecs=i["ecs"], **i["flags"])
                for i in infos if i.get("ecs") is not None]
        return aggregate(rows)

    def injectable(self, task) -> bool:
        """A case whose tool results can carry an injection (not Legacy: no tool results)."""
        return task.protocol != "Legacy"


SUITES: dict[str, Callable[[], TaskSuite]] = {"web": WebFormsSuite, "ledger": EvidenceLedgerSuite}
"""The registry of built-in suites, by the short name ``advsim suite`` takes."""


def suite_from_config(world) -> TaskSuite:
    """The task suite a run's ``world`` section (:class:`advsim.config.WorldConfig`) names."""
    if world.name == "ledger":
        return EvidenceLedgerSuite(tool_listing=world.ledger_tool_listing, domains=world.ledger_domains)
    return SUITES[world.name]()


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
