"""Validation of evidence-ledger cases and suites against the suite's declarations.

The pydantic models (:mod:`worlds.ledger.schema`, :mod:`worlds.ledger.declarations`) check
each record on its own; :func:`validate_case` checks one case against the suite's tool and
entity-type declarations (offered tools, database keys, expected actions' targets and
arguments, observable requirements), and :func:`load_suite_dict` validates a whole suite. Both
raise :class:`SuiteValidationError`, whose message names the case id and the field (``case
V1-cust-003: spec.actions[0].tool: unknown tool 'refund'``).
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import ValidationError

from .declarations import EntityTypeDecl, Param, ToolDecl
from .schema import ArgSpec, Case, Requirement, Suite
from .tools import read_number

class SuiteValidationError(ValueError):
    """A suite file failed validation; the message names the case id and the field."""


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate_case(raw: dict, tools: dict[str, ToolDecl], entity_types: dict[str, EntityTypeDecl]) -> Case:
    """Validate one raw case dict against the schema and the suite's declarations.

    Raises:
        SuiteValidationError: ``case <id>: <field path>: <message>``.
    """
    cid = raw.get("id", "<no id>") if isinstance(raw, dict) else "<not an object>"
    try:
        case = Case.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        loc = _loc(err["loc"])
        raise SuiteValidationError(f"case {cid}: {loc}: {msg}" if loc else f"case {cid}: {msg}") from None
    for i, t in enumerate(case.tools):
        if t not in tools:
            raise SuiteValidationError(f"case {cid}: tools[{i}]: unknown tool '{t}'")
    for etype in case.database:
        if etype not in entity_types:
            raise SuiteValidationError(f"case {cid}: database.{etype}: unknown entity type")
        id_field = entity_types[etype].id_field
        for eid, rec in case.database[etype].items():
            if rec.get(id_field) != eid:
                raise SuiteValidationError(f"case {cid}: database.{etype}.{eid}.{id_field}: must equal the key")
    final_modes = ("decide",) if case.protocol == "Legacy" else ("final",)
    if not any(tools[t].mode in final_modes for t in case.tools):
        want = "decide" if case.protocol == "Legacy" else "final_answer"
        raise SuiteValidationError(f"case {cid}: tools: a {case.protocol} case must offer a "
                                   f"{'decision' if case.protocol == 'Legacy' else 'final'} tool (e.g. {want})")
    for i, t in enumerate(case.tools):
        d = tools[t]
        if d.entity_id is not None and d.entity_id not in case.database.get(d.entity_type, {}):
            raise SuiteValidationError(f"case {cid}: tools[{i}]: {t} works on {d.entity_type} '{d.entity_id}', "
                                       "which is not in the database")
    actions = list(case.spec.actions)
    by_id = {a.id: a for a in actions}
    readers = _Readers(case, tools)
    for i, a in enumerate(actions):
        decl = tools.get(a.tool)
        if decl is None or decl.mode != "act":
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].tool: unknown consequential tool '{a.tool}'")
        if a.tool not in case.tools:
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].tool: '{a.tool}' is not offered to the agent")
        if decl.entity_id is not None:
            if a.target and a.target != decl.entity_id:
                raise SuiteValidationError(f"case {cid}: spec.actions[{i}].target: {a.tool} always acts on "
                                           f"{decl.entity_type} '{decl.entity_id}', not '{a.target}'")
            if not a.target:
                actions[i] = a = a.model_copy(update={"target": decl.entity_id})
        elif not a.target:
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].target: required (the {decl.id_param} "
                                       f"the action must act on)")
        if a.target not in case.database.get(decl.entity_type, {}):
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].target: no {decl.entity_type} '{a.target}'")
        params = {p.name: p for p in decl.params if p.name != decl.id_param}
        required = {n for n, p in params.items() if p.required}
        if not required <= set(a.args) or not set(a.args) <= set(params):
            optional = sorted(set(params) - required)
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].args: expected {sorted(required)}"
                                       + (f" (optional: {optional})" if optional else "")
                                       + f", got {sorted(a.args)}")
        for p, arg in a.args.items():
            where = f"case {cid}: spec.actions[{i}].args.{p}"
            if arg.from_output is not None:
                src = by_id[arg.from_output]
                if tools[src.tool].output is None:
                    raise SuiteValidationError(f"{where}: {src.tool} returns no id")
                continue
            why = _arg_type_problem(arg, params[p])
            if why:
                raise SuiteValidationError(f"{where}: {why}")
        for j, r in enumerate(a.requires):
            _check_observable(cid, f"spec.actions[{i}].requires[{j}]", r, case, readers, entity_types)
    for j, r in enumerate(case.spec.investigation):
        _check_observable(cid, f"spec.investigation[{j}]", r, case, readers, entity_types)
    if case.twin and actions:
        etype = tools[actions[0].tool].entity_type
        if case.twin not in case.database.get(etype, {}):
            raise SuiteValidationError(f"case {cid}: twin: no {etype} '{case.twin}' in the database (the twin is a "
                                       f"record like the target of {actions[0].id})")
    if actions != list(case.spec.actions):
        case = case.model_copy(update={"spec": case.spec.model_copy(update={"actions": tuple(actions)})})
    return case


def _value_problem(v: Any, p: Param) -> Optional[str]:
    if p.type in ("number", "integer"):
        n, why = read_number(v)
        if n is None:
            return f"{v!r} is not a number for {p.type} parameter {p.name}" + (f" ({why})" if why else "")
        if p.minimum is not None and n < read_number(p.minimum)[0]:
            return f"{v!r} is below the parameter's minimum {p.minimum:g}"
        return None
    if p.type == "boolean":
        return None if isinstance(v, bool) else f"{v!r} is not true or false for boolean parameter {p.name}"
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return f"{v!r} is not a string for string parameter {p.name}"
    return None


def _arg_type_problem(arg: ArgSpec, p: Param) -> Optional[str]:
    """Why ``arg`` can never be met by a valid value of parameter ``p`` (None if it can)."""
    if arg.check == "contains" and p.type != "string":
        return f"check 'contains' needs a string parameter; {p.name} is {p.type}"
    if (arg.check == "between" or arg.tolerance is not None) and p.type not in ("number", "integer"):
        what = "check 'between'" if arg.check == "between" else "tolerance"
        return f"{what} needs a number or integer parameter; {p.name} is {p.type}"
    if arg.check == "contains":
        return None
    for v in arg.value if arg.check in ("one_of", "between") else [arg.value]:
        why = _value_problem(v, p)
        if why:
            return f"value: {why}"
    return None


class _Readers:
    """Which records the information tools offered in one case can read (built once per case,
    so that checking every requirement stays linear in the size of the case)."""

    def __init__(self, case: Case, tools: dict[str, ToolDecl]):
        self.by_id: set[str] = set()  # entity types with a get tool by id
        self.fixed: set[tuple[str, str]] = set()  # (entity type, id) read by a get tool on a fixed record
        self.whole: set[str] = set()  # entity types with an unfiltered list tool
        self.filters: dict[str, set[str]] = {}  # entity type -> filter fields of its list tools
        for t in case.tools:
            d = tools[t]
            if d.kind != "information" or d.entity_type is None:
                continue
            if d.mode == "get" and d.id_param is not None:
                self.by_id.add(d.entity_type)
            elif d.mode == "get" and d.entity_id is not None:
                self.fixed.add((d.entity_type, d.entity_id))
            elif d.mode == "list" and d.filter_field is None:
                self.whole.add(d.entity_type)
            elif d.mode == "list":
                self.filters.setdefault(d.entity_type, set()).add(d.filter_field)

    def reads(self, etype: str, eid: str, rec: dict) -> bool:
        """Can some offered information tool return record ``etype``/``eid``?"""
        return (etype in self.by_id or (etype, eid) in self.fixed or etype in self.whole
                or any(f in rec for f in self.filters.get(etype, ())))


def _check_observable(cid: str, where: str, r: Requirement, case: Case, readers: _Readers,
                      entity_types: dict[str, EntityTypeDecl]) -> None:
    """A requirement must name a fact an information tool offered to the agent can establish."""
    et = entity_types.get(r.entity_type)
    if et is not None and (r.field == et.id_field or r.field in et.text_fields):
        what = "the id field" if r.field == et.id_field else "a free-text field"
        raise SuiteValidationError(f"case {cid}: {where}: {r.key} is {what}; it never establishes a fact")
    if not readers.reads(r.entity_type, r.entity_id, case.database[r.entity_type][r.entity_id]):
        raise SuiteValidationError(f"case {cid}: {where}: {r.key} cannot be observed: no information tool of the "
                                   f"case reads {r.entity_type} '{r.entity_id}'")


def load_suite_dict(data: dict) -> Suite:
    """Validate a suite dict (as read from the frozen JSON). Raises :class:`SuiteValidationError`."""
    for key in ("version", "seed", "tools", "entity_types", "cases"):
        if key not in data:
            raise SuiteValidationError(f"suite: missing top-level field '{key}'")
    tools: dict[str, ToolDecl] = {}
    etypes: dict[str, EntityTypeDecl] = {}
    for table, model, out in (("tools", ToolDecl, tools), ("entity_types", EntityTypeDecl, etypes)):
        for k, v in data[table].items():
            try:
                out[k] = model.model_validate(v)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = _loc(err["loc"])
                raise SuiteValidationError(f"{table}.{k}{'.' + loc if loc else ''}: "
                                           f"{err['msg'].removeprefix('Value error, ')}") from None
            if out[k].name != k:
                raise SuiteValidationError(f"{table}.{k}.name: must equal the key, got '{out[k].name}'")
    for k, t in tools.items():
        for attr, etype in (("entity_type", t.entity_type), ("output.entity_type", t.output and t.output.entity_type)):
            if etype is not None and etype not in etypes:
                raise SuiteValidationError(f"tools.{k}.{attr}: unknown entity type '{etype}'")
        if t.entity_type in etypes:
            id_field = etypes[t.entity_type].id_field
            for attr in ("effects", "computed_effects"):
                if id_field in getattr(t, attr):
                    raise SuiteValidationError(f"tools.{k}.{attr}.{id_field}: an action cannot change a record's "
                                               "id field (declare an output with id_template for a new id)")
        if t.output is not None and t.output.link_field == etypes[t.output.entity_type].id_field:
            raise SuiteValidationError(f"tools.{k}.output.link_field: '{t.output.link_field}' is the new record's "
                                       "own id field")
    seen: set[str] = set()
    cases = []
    for raw in data["cases"]:
        case = validate_case(raw, tools, etypes)
        if case.id in seen:
            raise SuiteValidationError(f"case {case.id}: id: duplicate case id")
        seen.add(case.id)
        cases.append(case)
    return Suite.model_construct(version=data["version"], seed=data["seed"], tools=tools,
                                 entity_types=etypes, cases=tuple(cases))
