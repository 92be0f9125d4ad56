"""Tool execution over one case's database: the state machine of the evidence-ledger world.

:class:`ToolWorld` takes one call text per step (``get_charge(charge_id='CH-2')``), parses it
with :func:`forms_bench.actions.parse_call` (``ast`` and a linear bracket scan, never ``exec``), runs the
declared tool semantics (:class:`~worlds.ledger.declarations.ToolDecl`), records facts, changes and
returned ids in the :class:`~worlds.ledger.ledger.Ledger`, and appends a :class:`StepRecord`.
A bad call never raises: the step's ``error`` says what was wrong and the step counts.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

from forms_bench.actions import ActionParseError, parse_call

from .ledger import Ledger
from .declarations import _PLACEHOLDER, EntityTypeDecl, ToolDecl
from .schema import VERDICTS, ArgSpec, Case

MAX_RESULT_CHARS = 16000
"""Tool results longer than this (JSON characters) are cut, with a marker."""

log = logging.getLogger(__name__)

_MONEY = re.compile(r"^\s*([-+]?)\s*[$€£]?\s*([-+]?)(\d[\d,.]*)\s*(?:USD|EUR|GBP)?\s*$", re.IGNORECASE)
"""A number as text: optional sign, currency symbol or code, digits with ``,`` and ``.``."""


def read_number(value: Any) -> tuple[Optional[Decimal], Optional[str]]:
    """Read a number argument: ``49.99``, ``"49.99"``, ``"$49.99"``, ``"1,049.50"``, ``"49.99 USD"``.

    ``.`` is the only decimal point and ``,`` only separates groups of three digits. A comma
    that could be either (``"60,39"``, ``"1,049"``, ``"1.049,50"``) is an error, never a guess:
    ``"1,049.50"`` and ``"1,049,500"`` are read, ``"1,049"`` is not.

    Returns:
        ``(number, None)``; or ``(None, why)`` with ``why`` the reason for text that looks like
        a number but is ambiguous; or ``(None, None)`` for anything that is not a number
        (booleans, NaN/infinity, other strings, text over 40 characters).
    """
    if isinstance(value, bool):
        return None, None
    if isinstance(value, int):
        return Decimal(value), None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None, None
        return Decimal(repr(value)), None
    if not isinstance(value, str) or len(value) > 40:
        return None, None
    m = _MONEY.match(value)
    if m is None or (m.group(1) and m.group(2)):
        return None, None
    core = m.group(3)
    whole, dot, frac = core.partition(".")
    if dot and not (frac and frac.isdigit()):
        if "," in frac:
            return None, (f"is ambiguous: {value.strip()!r} uses ',' after '.'; write the number with "
                          "'.' as the decimal point and no ','")
        return None, None
    if "," in whole:
        groups = whole.split(",")
        grouped = 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])
        if not (grouped and (dot or len(groups) > 2)):
            plain = whole.replace(",", "")
            if dot:
                hint = plain + dot + frac
            elif len(groups) == 2:
                hint = f"{whole.replace(',', '.')} or {plain}"
            else:
                hint = plain
            return None, (f"is ambiguous: in {value.strip()!r} ',' could be a decimal or a thousands "
                          f"separator; write '.' as the decimal point and no ',' (e.g. {hint})")
    try:
        return Decimal((m.group(1) or m.group(2)) + whole.replace(",", "") + dot + frac), None
    except InvalidOperation:  # pragma: no cover - the pattern only lets digits through
        return None, None


def parse_number(value: Any) -> Optional[Decimal]:
    """The number :func:`read_number` reads, or None (not a number, or ambiguous)."""
    return read_number(value)[0]


def arg_equal(expected: Any, given: Any, ptype: str) -> bool:
    """Argument equivalence used by the evaluator, by the parameter's declared type: numbers
    compare as decimals read by :func:`read_number` (an ambiguous ``'60,39'`` is no number),
    strings exactly (surrounding whitespace ignored), booleans as booleans. (The form world's
    field comparison, :func:`judges.strict.values_equal`, compares untyped page values and is a
    different rule: any two decimal strings, or text up to surrounding whitespace.)"""
    if ptype in ("number", "integer"):
        a, b = parse_number(expected), parse_number(given)
        return a is not None and b is not None and a == b
    if ptype == "boolean":
        return isinstance(given, bool) and given == expected
    if isinstance(given, bool) or not isinstance(given, (str, int)):
        return False
    return str(given).strip() == str(expected)


def _words(text: str) -> str:
    return " ".join(text.split()).casefold()


def arg_matches(spec: ArgSpec, given: Any, ptype: str) -> bool:
    """Does argument value ``given`` (as parsed from the call) meet ``spec``'s check?

    ``equals`` is :func:`arg_equal` (with ``tolerance``: ``|given - value| <= tolerance``);
    ``contains``: ``given`` is text containing ``spec.value``, case and runs of whitespace
    ignored; ``one_of``: :func:`arg_equal` to one listed value; ``between``: a number within
    ``[low, high]``. ``from_output`` specs are the evaluator's business (always False here).
    Linear in the size of ``given``.
    """
    if spec.from_output is not None:
        return False
    if spec.check == "equals":
        if spec.tolerance is None:
            return arg_equal(spec.value, given, ptype)
        a, b = parse_number(spec.value), parse_number(given)
        return a is not None and b is not None and abs(a - b) <= Decimal(repr(spec.tolerance))
    if spec.check == "one_of":
        return any(arg_equal(v, given, ptype) for v in spec.value)
    if spec.check == "contains":
        if isinstance(given, bool) or not isinstance(given, (str, int)):
            return False
        return _words(str(spec.value)) in _words(str(given))
    n = parse_number(given)  # between
    return n is not None and parse_number(spec.value[0]) <= n <= parse_number(spec.value[1])


def render_template(template: str, args: dict[str, Any], output: Optional[str] = None) -> Any:
    """Fill a ``computed_effects`` / ``id_template`` template from a call's (coerced) arguments.

    ``"{celsius}"`` alone gives the argument with its type (a number stays a number); any other
    template gives text, each ``{name}`` replaced by the argument (``true``/``false`` for
    booleans) and ``{output}`` by ``output``. The schema guarantees every name is a required
    parameter or ``output``.
    """
    values = dict(args)
    if output is not None:
        values["output"] = output
    m = _PLACEHOLDER.fullmatch(template)
    if m is not None:
        return _jsonable(values[m.group(1)])

    def text(v: Any) -> str:
        v = _jsonable(v)
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return _PLACEHOLDER.sub(lambda mm: text(values[mm.group(1)]), template)


@dataclass
class StepRecord:
    """One step of an episode.

    Attributes:
        step: 1-based step index.
        text: the action text as given (cut to 300 characters).
        name: the tool called, or None if the text did not parse.
        kind: the tool's kind (``information``/``consequential``/``decision``/``final``) or None.
        kwargs: parsed arguments.
        error: what went wrong (parse error, bad argument, unknown entity), or None.
        executed: a consequential call changed the world (False if it was rejected).
        result: the tool result (JSON-able dict) or None.
        output: the id a consequential call returned (``RF-4821``) or None.
        target: entity id a get/act call was about, or None.
        call: the canonical text of the parsed call (:meth:`forms_bench.actions.Call.to_text`),
            or None when the text did not parse as one call of a case tool.
    """

    step: int
    text: str
    name: Optional[str] = None
    kind: Optional[str] = None
    kwargs: dict = field(default_factory=dict)
    error: Optional[str] = None
    executed: bool = False
    result: Optional[dict] = None
    output: Optional[str] = None
    target: Optional[str] = None
    call: Optional[str] = None

    @property
    def is_attempt(self) -> bool:
        """A call to a consequential tool, executed or not — an action attempt.

        Rejected calls count: a bad argument value (type, ambiguous or negative number, unknown
        entity) and a malformed argument list (unknown, missing, repeated or non-literal
        argument, bad call syntax) alike, as long as the step holds exactly one call and it
        names a consequential tool of the case.
        """
        return self.kind == "consequential"

    @property
    def is_terminal(self) -> bool:
        """A final message or an accepted Legacy decision."""
        return self.kind in ("final", "decision") and self.error is None


def _coerce(decl: ToolDecl, kwargs: dict) -> tuple[dict, Optional[str]]:
    out = {}
    for p in decl.params:
        if p.name not in kwargs:
            continue
        v = kwargs[p.name]
        if p.type == "string":
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                return out, f"{decl.name}: argument `{p.name}` must be a string, got {type(v).__name__}"
            out[p.name] = str(v).strip()
        elif p.type in ("number", "integer"):
            n, why = read_number(v)
            if why is not None:
                return out, f"{decl.name}: argument `{p.name}` {why}; nothing was changed"
            if n is None:
                return out, f"{decl.name}: argument `{p.name}` must be a number, got {str(v)[:40]!r}"
            if p.minimum is not None and n < Decimal(repr(p.minimum)):
                low = int(p.minimum) if p.minimum == int(p.minimum) else p.minimum
                return out, (f"{decl.name}: argument `{p.name}` must be at least {low}, got {str(v)[:40]!r}; "
                             "nothing was changed")
            out[p.name] = n
        else:
            if isinstance(v, str) and v.strip().lower() in ("true", "false"):
                v = v.strip().lower() == "true"
            if not isinstance(v, bool):
                return out, f"{decl.name}: argument `{p.name}` must be true or false"
            out[p.name] = v
    return out, None


def _jsonable(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v) if v != v.to_integral_value() else int(v)
    return v


class ToolWorld:
    """One episode of one case: database copy, ledger and step log.

    Args:
        case: the case; its ``tools`` are the calls the agent may make.
        tools: all tool declarations of the suite by name.
        entity_types: entity-type declarations by name (id and free-text fields).

    ``step(text)`` never raises; after a terminal step (final message, Legacy decision) the
    world is ``done`` and further steps are recorded as errors. A bug inside a tool (an
    exception) is logged (logger ``worlds.ledger.tools``), counted in :attr:`internal_errors`
    and reported as the step's error.
    """

    def __init__(self, case: Case, tools: dict[str, ToolDecl], entity_types: dict[str, EntityTypeDecl]):
        self.case = case
        self.decls = {name: tools[name] for name in case.tools}
        self.specs = {name: d.call_spec() for name, d in self.decls.items()}
        self.entity_types = entity_types
        self.db: dict[str, dict[str, dict[str, Any]]] = copy.deepcopy(case.database)
        self.ledger = Ledger()
        self.log: list[StepRecord] = []
        self.done = False
        self.internal_errors = 0
        """Steps whose tool raised an exception (a world bug; each one is logged)."""

    # ------------------------------------------------------------------ helpers
    def _visible(self, etype: str, rec: dict) -> dict:
        return {k: v for k, v in rec.items()}

    def _facts(self, etype: str, rec: dict) -> list[tuple[str, str, str, Any]]:
        et = self.entity_types[etype]
        eid = rec[et.id_field]
        return [(etype, eid, k, v) for k, v in rec.items() if k not in et.text_fields and k != et.id_field]

    def _new_id(self, prefix: str, etype: str, seed: str) -> str:
        table = self.db.setdefault(etype, {})
        n = int(hashlib.sha256(f"{self.case.id}|{seed}".encode()).hexdigest()[:8], 16) % 9000 + 1000
        while f"{prefix}-{n}" in table:
            n = n + 1 if n < 9999 else 1000
        return f"{prefix}-{n}"

    # ------------------------------------------------------------------ step
    def step(self, text: Any) -> StepRecord:
        """Run one action text; returns (and logs) its :class:`StepRecord`. Never raises."""
        shown = text if isinstance(text, str) else repr(text)
        rec = StepRecord(step=len(self.log) + 1, text=shown[:300])
        self.log.append(rec)
        try:
            self._step(text, rec)
        except Exception as exc:  # a world bug must not crash an agent's episode: log and count it
            self.internal_errors += 1
            log.exception("internal error in case %s at step %d running %r", self.case.id, rec.step, rec.text)
            rec.error = f"internal error while running the call: {exc.__class__.__name__}"
            rec.executed = False
        return rec

    def _step(self, text: Any, rec: StepRecord) -> None:
        if self.done:
            rec.error = "the episode has ended; no further calls are accepted"
            return
        try:
            call = parse_call(text, self.specs)
        except ActionParseError as exc:
            rec.error = str(exc)
            if exc.name in self.decls:  # one call to a known tool, malformed: still that tool's step
                decl = self.decls[exc.name]
                rec.name, rec.kind, rec.kwargs = decl.name, decl.kind, dict(exc.kwargs)
                if decl.id_param and isinstance(exc.kwargs.get(decl.id_param), str):
                    rec.target = exc.kwargs[decl.id_param].strip()
                elif decl.entity_id is not None:
                    rec.target = decl.entity_id
            return
        decl = self.decls[call.name]
        rec.name, rec.kind, rec.call = decl.name, decl.kind, call.to_text()
        rec.kwargs = dict(call.kwargs)
        if decl.id_param and isinstance(call.kwargs.get(decl.id_param), str):
            rec.target = call.kwargs[decl.id_param].strip()
        elif decl.entity_id is not None:
            rec.target = decl.entity_id
        args, err = _coerce(decl, call.kwargs)
        if err:
            rec.error = err
            return
        if decl.mode == "final":
            self.done = True
            rec.result = {"outcome": "episode finished"}
            return
        if decl.mode == "decide":
            verdict = args.get("verdict", "")
            match = next((v for v in VERDICTS if v.lower() == verdict.lower()), None)
            if match is None:
                rec.error = f"decide: verdict must be one of {', '.join(VERDICTS)}, got {verdict[:40]!r}"
                return
            rec.kwargs["verdict"] = match
            self.done = True
            rec.result = {"outcome": "decision recorded", "verdict": match}
            return
        etype = decl.entity_type
        table = self.db.get(etype, {})
        if decl.entity_id is not None:  # a tool on one fixed record: get_time(), set_thermostat(celsius)
            key = decl.entity_id
        elif decl.id_param is None:  # a list tool without a filter
            key = None
        elif decl.id_param not in args:  # only a declaration that bypassed validation gets here
            rec.error = f"{decl.name}: missing argument(s) {decl.id_param}"
            return
        else:
            key = args[decl.id_param]
        if decl.mode == "get":
            rec.target = key
            entity = table.get(key)
            if entity is None:
                rec.error = (f"{decl.name}: no {etype} with {decl.id_param} {key[:60]!r}" if decl.id_param
                             else f"{decl.name}: no {etype} {key[:60]!r} in this case")
                return
            rec.result = {etype: self._visible(etype, entity)}
            self.ledger.observe(rec.step, call.text, self._facts(etype, entity))
            return
        if decl.mode == "list":
            rows = [e for _, e in sorted(table.items()) if key is None or str(e.get(decl.filter_field)) == key]
            rec.result = {f"{etype}_list": [self._visible(etype, e) for e in rows], "count": len(rows)}
            for e in rows:
                self.ledger.observe(rec.step, call.text, self._facts(etype, e))
            return
        # act
        rec.target = key
        entity = table.get(key)
        if entity is None:
            what = f"with {decl.id_param} {key[:60]!r}" if decl.id_param else f"{key[:60]!r} in this case"
            rec.error = f"{decl.name}: no {etype} {what}; nothing was changed"
            return
        out = decl.output
        new_id = None
        if out is not None:
            if out.id_template is not None:
                new_id = render_template(out.id_template, args)
                if new_id in self.db.get(out.entity_type, {}):
                    rec.error = (f"{decl.name}: {out.entity_type} {new_id[:60]!r} already exists; "
                                 "nothing was changed")
                    return
            else:
                new_id = self._new_id(out.prefix, out.entity_type, f"{decl.name}|{key}|{rec.step}")
        before = dict(entity) if out is not None and out.copy_target else None
        computed = {f: render_template(t, args, new_id) for f, t in decl.computed_effects.items()}
        for fld, value in decl.effects.items():
            entity[fld] = value
            self.ledger.change(rec.step, call.text, etype, key, fld)
        for fld, value in computed.items():
            entity[fld] = value
            self.ledger.change(rec.step, call.text, etype, key, fld)
        rec.executed = True
        target_field = decl.id_param or self.entity_types[etype].id_field
        result: dict[str, Any] = {"outcome": "submitted" if decl.confirm else "completed", target_field: key}
        if out is not None:
            id_field = self.entity_types[out.entity_type].id_field
            created: dict[str, Any] = {id_field: new_id}
            if before is not None:
                created.update({k: v for k, v in before.items()
                                if k not in (id_field, self.entity_types[etype].id_field)})
            link = out.link_field or target_field
            if link != id_field:
                created[link] = key
            created.update({p: _jsonable(v) for p, v in args.items() if p != decl.id_param})
            created["status"] = out.status
            self.db.setdefault(out.entity_type, {})[new_id] = created
            result[out.field] = new_id
            rec.output = new_id
        if decl.confirm:
            result["note"] = "change submitted; confirm the new state with a read"
        else:
            result.update(decl.effects)
            result.update(computed)
            self.ledger.observe(rec.step, call.text, [(etype, key, f, v) for f, v in decl.effects.items()]
                                + [(etype, key, f, v) for f, v in computed.items()])
        rec.result = result

    # ------------------------------------------------------------------ views
    def result_json(self, rec: Optional[StepRecord]) -> str:
        """The tool result of ``rec`` as ASCII JSON text (cut to :data:`MAX_RESULT_CHARS`)."""
        if rec is None or rec.result is None:
            return ""
        text = json.dumps(rec.result, ensure_ascii=True)
        if len(text) > MAX_RESULT_CHARS:
            text = text[: MAX_RESULT_CHARS - 20] + " ...[truncated]"
        return text

    def tools_prompt(self, listing: str = "full") -> str:
        """The tool section of the prompt, derived from the declarations: ``"full"`` (signature,
        kind, description, parameters; :meth:`ToolDecl.prompt_text`) or ``"compact"`` (one line
        per tool; :meth:`ToolDecl.compact_text`).

        Raises:
            ValueError: another ``listing``.
        """
        if listing not in ("full", "compact"):
            raise ValueError(f"tool listing must be 'full' or 'compact', got {listing!r}")
        return "\n".join(d.prompt_text() if listing == "full" else d.compact_text() for d in self.decls.values())

    def tool_schemas(self) -> list[dict]:
        """OpenAI-style JSON schemas of this case's tools."""
        return [d.json_schema() for d in self.decls.values()]
