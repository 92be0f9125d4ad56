"""The evidence-ledger tool world (SafeActBench).

Information tools read a small per-case database; consequential tools change it. Every
consequential action must be backed by evidence observed earlier in the episode, bound to the
exact entity it is about (provenance), not stale, and — for dependent actions — using the ids
earlier actions actually returned. Modules:

- :mod:`~worlds.ledger.schema` — case/tool schema, validated on load;
- :mod:`~worlds.ledger.tools` — :class:`ToolWorld`, the tool state machine;
- :mod:`~worlds.ledger.ledger` — the evidence ledger;
- :mod:`~worlds.ledger.evaluator` — deterministic ECS and SafeActBench metrics;
- :mod:`~worlds.ledger.catalog` / :mod:`~worlds.ledger.generate` — domains, templates, generator;
- :mod:`~worlds.ledger.difficulty` — difficulty knobs and levels 0…5, curriculum proposals
  (:class:`~worlds.ledger.difficulty.LedgerProposal`) and the cases they make;
- :mod:`~worlds.ledger.injection` — an adversary's injection into a record (tool results);
- :mod:`~worlds.ledger.suite` — the frozen 656-case suite, reference plans, self-check, agents;
- :mod:`~worlds.ledger.own` — a user's own case file (no checksum), its self-check, judging a
  given trajectory (``docs/own-ledger-cases.md``).
"""

from .evaluator import EpisodeResult, aggregate, evaluate
from .ledger import Evidence, Ledger
from .own import load_cases
from .schema import DOMAINS, PROTOCOLS, Case, Suite, ToolDecl
from .suite import AGENTS, check, load_suite, reference_plan, run_plan
from .tools import StepRecord, ToolWorld
from .validation import SuiteValidationError

__all__ = [
    "AGENTS", "DOMAINS", "PROTOCOLS", "Case", "EpisodeResult", "Evidence", "Ledger", "StepRecord", "Suite",
    "SuiteValidationError", "ToolDecl", "ToolWorld", "aggregate", "check", "evaluate", "load_cases", "load_suite",
    "reference_plan", "run_plan",
]
