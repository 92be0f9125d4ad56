"""A user's own evidence-ledger cases: one JSON file in the case schema, validated on load.

The file (documented with a full example in ``docs/own-ledger-cases.md``) is the frozen suite's
format with the bookkeeping made optional::

    {"version": "my-cases-1",                     # optional
     "tools": {"get_time": {...}, ...},           # declarations.ToolDecl; "name" optional
     "entity_types": {"clock": {...}, ...},       # declarations.EntityTypeDecl; "name" optional
     "cases": [{...}, ...]}                       # schema.Case; "template", "reads", "twin" optional

``final_answer`` and ``decide`` are the frozen suite's own declarations unless the file declares
them. No checksum is needed or read (a checksum is for the frozen suite only,
:func:`worlds.ledger.suite.load_suite`). Everything is validated before it is used and a bad
file raises :class:`~worlds.ledger.validation.SuiteValidationError` whose message names the file,
the case id and the field path (``my.json: case own-1: spec.actions[0].args.memo: check
'contains' needs a string parameter; memo is number``). Validation is linear in the file size.

- :func:`load_cases` / :func:`load_cases_dict` — the file → :class:`~worlds.ledger.schema.Suite`;
- :func:`check_case` — a case's reference solution, its equivalent variants and its negative
  controls (the self-check of the frozen suite, one case at a time);
- :func:`read_actions` / :func:`judge_actions` — a given trajectory (one call per line) played
  in a fresh world and judged by the deterministic evaluator.

``advsim ledger check --cases FILE [--case ID --actions FILE] [--json FILE]`` runs all three, and
``gym.make('advsim/EvidenceLedger-v0', cases=FILE)`` plays the cases as an environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence, Union

from forms_bench.unique_keys import DuplicateKeyError, check_json_depth, loads

from .evaluator import evaluate
from .schema import Case, Suite
from .suite import controls, count_reads, reference_plan, run_plan, variants
from .tools import ToolWorld
from .validation import SuiteValidationError, load_suite_dict

TOP_LEVEL_KEYS = ("version", "seed", "description", "tools", "entity_types", "cases")
"""Keys a case file may have (``tools``, ``entity_types`` and ``cases`` are required)."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A case or actions file larger than this is rejected before it is parsed."""


def _read_text(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SuiteValidationError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if not path.is_file():
        raise SuiteValidationError(f"{path}: the {what} is not a file")
    if size > MAX_FILE_BYTES:
        raise SuiteValidationError(f"{path}: the {what} is {size} bytes; at most {MAX_FILE_BYTES}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteValidationError(f"{path}: the {what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SuiteValidationError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def load_cases(path: Union[str, Path]) -> Suite:
    """Load and validate a user's case file (no checksum).

    Args:
        path: the JSON file.

    Returns:
        A :class:`~worlds.ledger.schema.Suite` holding the file's tools, entity types and cases
        (``version`` defaults to ``"own"``, ``seed`` to 0).

    Raises:
        SuiteValidationError: unreadable file, bad JSON (with line and column), duplicate keys,
            or an invalid declaration or case; the message starts with the file name and names
            the case id and field.
    """
    path = Path(path)
    text = _read_text(path, "case file")
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        raise SuiteValidationError(f"{path.name}: not valid JSON: {exc.msg} (line {exc.lineno}, "
                                   f"column {exc.colno})") from None
    except DuplicateKeyError as exc:
        raise SuiteValidationError(f"{path.name}: {exc} in one JSON object") from None
    return load_cases_dict(data, source=path.name)


def load_cases_dict(data: Any, source: str = "cases") -> Suite:
    """Validate a case file already parsed from JSON (see :func:`load_cases`).

    Args:
        data: the parsed document (not modified).
        source: the name error messages start with.

    Raises:
        SuiteValidationError: ``<source>: <where>: <what is wrong>``.
    """
    from .generate import BASE_TOOLS  # here, not at import: `python -m worlds.ledger.generate` stays clean

    def fail(msg: str) -> SuiteValidationError:
        return SuiteValidationError(f"{source}: {msg}")

    if not isinstance(data, dict):
        raise fail(f"the top level must be a JSON object, got {type(data).__name__}")
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise fail(f"unknown top-level field {unknown[0]!r} (allowed: {', '.join(TOP_LEVEL_KEYS)})")
    for key, kind in (("tools", dict), ("entity_types", dict), ("cases", list)):
        if key not in data:
            raise fail(f"missing top-level field '{key}'")
        if not isinstance(data[key], kind):
            raise fail(f"{key}: must be a JSON {'object' if kind is dict else 'array'}")
    if not data["cases"]:
        raise fail("cases: the file holds no case")
    if not isinstance(data.get("version", ""), str):
        raise fail("version: must be a string")
    if isinstance(data.get("seed", 0), bool) or not isinstance(data.get("seed", 0), int):
        raise fail("seed: must be an integer")
    tools: dict[str, Any] = {}
    for table in ("tools", "entity_types"):
        for k, v in data[table].items():
            if not isinstance(v, dict):
                raise fail(f"{table}.{k}: must be a JSON object")
    for k, v in data["tools"].items():
        tools[k] = {"name": k, **v}
    for k, v in BASE_TOOLS.items():
        tools.setdefault(k, v)
    etypes = {k: {"name": k, **v} for k, v in data["entity_types"].items()}
    cases = []
    computed_reads: list[bool] = []
    for i, raw in enumerate(data["cases"]):
        if not isinstance(raw, dict):
            raise fail(f"cases[{i}]: must be a JSON object")
        c = dict(raw)
        c.setdefault("template", "own")
        computed_reads.append("reads" not in c)
        c.setdefault("reads", 0)
        cases.append(c)
    doc = {"version": data.get("version", "own"), "seed": data.get("seed", 0), "tools": tools,
           "entity_types": etypes, "cases": cases}
    try:
        suite = load_suite_dict(doc)
    except SuiteValidationError as exc:
        raise fail(str(exc)) from None
    final = []
    for case, compute in zip(suite.cases, computed_reads):
        final.append(case.model_copy(update={"reads": count_reads(case, suite.tools)}) if compute else case)
    return Suite.model_construct(version=suite.version, seed=suite.seed, tools=suite.tools,
                                 entity_types=suite.entity_types, cases=tuple(final))


# ------------------------------------------------------------------------------- self-check
def check_case(suite: Suite, case: Case) -> dict:
    """Run a case's reference solution, its semantically equivalent variants and its negative
    controls (:func:`worlds.ledger.suite.reference_plan`, ``variants``, ``controls``).

    Returns:
        ``{"id", "protocol", "domain", "ok", "reference": {"ecs", "reasons", "calls"},
        "variants": {name: {"ecs", "reasons"}}, "controls": {name: {"ecs", "expected", "ok",
        "reasons"}}, "failures": [text]}`` — ``ok`` when the reference and every variant score
        ECS = 1, every control scores 0 with its expected reason and the ``twin`` (if any) is
        another record of a1's table sharing a value a1 requires; ``calls`` are the
        reference's call texts with the ids its actions actually returned.
    """
    failures: list[str] = []
    ref_plan = reference_plan(case, suite.tools)
    world, res = run_plan(suite, case, ref_plan)
    out: dict[str, Any] = {"id": case.id, "protocol": case.protocol, "domain": case.domain,
                           "reference": {"ecs": res.ecs, "reasons": list(res.reasons),
                                         "calls": [r.text for r in world.log]},
                           "variants": {}, "controls": {}}
    if res.ecs != 1:
        failures.append(f"{case.id} reference: ECS 0: {'; '.join(res.reasons)}")
    for name, plan in variants(suite, case).items():
        _, r = run_plan(suite, case, plan)
        out["variants"][name] = {"ecs": r.ecs, "reasons": list(r.reasons)}
        if r.ecs != 1:
            failures.append(f"{case.id} variant {name}: ECS 0: {'; '.join(r.reasons)}")
    for name, (plan, want) in controls(suite, case).items():
        _, r = run_plan(suite, case, plan)
        good = r.ecs == 0 and any(want in x for x in r.reasons)
        out["controls"][name] = {"ecs": r.ecs, "expected": want, "ok": good, "reasons": list(r.reasons)}
        if not good:
            failures.append(f"{case.id} control {name}: ECS {r.ecs}, expected a reason with {want!r}, "
                            f"got {r.reasons}")
    if case.protocol != "Legacy" and case.twin:
        a1 = case.spec.actions[0]
        etype, target = suite.tools[a1.tool].entity_type, a1.target
        twin = case.database.get(etype, {}).get(case.twin)
        fields = [q.field for q in a1.requires if q.entity_type == etype and q.entity_id == target]
        if twin is None or case.twin == target or not any(twin.get(f) == case.database[etype][target].get(f)
                                                          for f in fields):
            failures.append(f"{case.id} twin: {etype} {case.twin!r} is no wrong-entity trap: it must be another "
                            f"{etype} record sharing a value a1 requires of {target!r}")
    out["failures"] = failures
    out["ok"] = not failures
    return out


# ------------------------------------------------------------------------------- trajectories
def read_actions(path: Union[str, Path]) -> list[str]:
    """Read a trajectory: one call per line (blank lines and lines starting with ``#`` are
    skipped), or a JSON array of strings (for calls that span lines).

    Raises:
        SuiteValidationError: unreadable file, not UTF-8, a JSON array holding a non-string, or
            no call at all.
    """
    path = Path(path)
    text = _read_text(path, "actions file")
    if text.lstrip().startswith("["):
        try:
            check_json_depth(text)
            calls = json.loads(text)
        except json.JSONDecodeError as exc:
            why = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
            raise SuiteValidationError(f"{path.name}: not a valid JSON array of calls: {why}") from None
        bad = next((i for i, c in enumerate(calls) if not isinstance(c, str)), None) if isinstance(calls, list) else 0
        if bad is not None:
            raise SuiteValidationError(f"{path.name}: [{bad}]: every call must be a string")
    else:
        calls = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not calls:
        raise SuiteValidationError(f"{path.name}: no call in the actions file")
    return calls


def judge_actions(suite: Suite, case_id: str, actions: Sequence[str]) -> dict:
    """Play ``actions`` (call texts, in order) in a fresh world of case ``case_id`` and judge them.

    Calls after the episode ended (``final_answer``/``decide``) are not played; they are counted
    in ``ignored_after_end``. A trajectory without a final call is judged as it stands (and
    fails V0–V3 with ``NO_FINAL_ANSWER``).

    Returns:
        ``{"case_id", "protocol", "domain", "ecs", "reasons", "flags", "steps":
        [{"step", "text", "tool", "kind", "executed", "error", "output", "result"}],
        "ignored_after_end"}``.

    Raises:
        KeyError: no case with that id in ``suite`` (the message lists the ids).
    """
    case = next((c for c in suite.cases if c.id == case_id), None)
    if case is None:
        known = ", ".join(c.id for c in suite.cases[:20]) + (" ..." if len(suite.cases) > 20 else "")
        raise KeyError(f"no case {case_id!r} in the file (cases: {known})")
    world = ToolWorld(case, suite.tools, suite.entity_types)
    played = 0
    for text in actions:
        if world.done:
            break
        world.step(text)
        played += 1
    res = evaluate(case, world.log, suite.tools, world.ledger)
    return {"case_id": case.id, "protocol": case.protocol, "domain": case.domain, "ecs": res.ecs,
            "reasons": list(res.reasons), "flags": res.flags(),
            "steps": [{"step": r.step, "text": r.text, "tool": r.name, "kind": r.kind, "executed": r.executed,
                       "error": r.error, "output": r.output, "result": r.result} for r in world.log],
            "ignored_after_end": len(actions) - played}


__all__ = ["TOP_LEVEL_KEYS", "check_case", "judge_actions", "load_cases", "load_cases_dict",
           "read_actions"]
