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
``advsim suite check web|ledger`` runs it. Sources: BrowserGym (task and registry), AgentDojo
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
        tool_listing: ``"full"`` or ``"compact"`` tool list in the observation's context
            (:class:`~advsim.envs.ledger.EvidenceLedgerEnv`).
    """

    name = "evidence-ledger"
    env_id = "advsim/EvidenceLedger-v0"

    def __init__(self, cases=None, tool_listing: str = "full"):
        from worlds.ledger.own import load_cases
        from worlds.ledger.suite import load_suite

        self.cases_path = cases
        self.tool_listing = tool_listing
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


SUITES: dict[str, Callable[[], TaskSuite]] = {"web": WebFormsSuite, "ledger": EvidenceLedgerSuite}
"""The registry of built-in suites, by the short name ``advsim suite`` takes."""


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
