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

What the co-evolution stages, the warm start and the evaluation (:func:`advsim.evaluate.evaluate`) need beyond that is
declared by :class:`CoevolutionSuite` (both built-in suites implement it): the curriculum's
hints, prompt, parser and ``instantiate`` (a proposal → a task: the validity gate ν), R_C's
cluster text, the adversary's prompt and parser (α on the world's injection surface) and its
null injection, the warm start's demonstrations, and the evaluation pools and metrics.
:func:`suite_from_config` builds the suite a run's ``world`` section names. Sources: BrowserGym (task and registry), AgentDojo
(suites: ground truth, utility and security checks; the suite checks itself), SafeActBench (ECS).
"""

from __future__ import annotations

from typing import Callable

from advsim.suites.ledger import EvidenceLedgerSuite, PlanOracle
from advsim.suites.protocol import (CoevolutionSuite, Oracle, ScriptedOracle, SuiteCheck, TaskSuite, check_suite,
                                    first_observation, play)
from advsim.suites.web import WebFormsSuite

__all__ = ["TaskSuite", "CoevolutionSuite", "Oracle", "ScriptedOracle", "PlanOracle", "WebFormsSuite",
           "EvidenceLedgerSuite", "SUITES", "suite_from_config", "SuiteCheck", "check_suite", "play",
           "first_observation"]


SUITES: dict[str, Callable[[], TaskSuite]] = {"web": WebFormsSuite, "ledger": EvidenceLedgerSuite}
"""The registry of built-in suites, by the short name ``advsim suite`` takes."""


def suite_from_config(world) -> TaskSuite:
    """The task suite a run's ``world`` section (:class:`advsim.config.WorldConfig`) names."""
    if world.name == "ledger":
        return EvidenceLedgerSuite(tool_listing=world.ledger_tool_listing, domains=world.ledger_domains)
    return SUITES[world.name]()
