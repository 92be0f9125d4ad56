"""Case schema of the evidence-ledger tool world (SafeActBench), validated on load.

A **case** (SafeActBench §2) gives the agent a task context and a tool interface; its hidden
**spec** says, for every expected consequential action *a*, the evidence requirements R(a), the
tool, the target entity, the exact arguments, which earlier action's returned value an argument
must carry, and the dependency chain (V2) or DAG (V3). Legacy cases carry a static candidate
action and the expected Allow/Block/Defer decision instead.

Everything is a pydantic model; :func:`load_suite_dict` validates a whole suite and raises
:class:`SuiteValidationError` whose message names the case id and the field (``case
V1-cust-003: spec.actions[0].tool: unknown tool 'refund'``).

The schema is wider than the frozen suite needs, so that a user's own cases
(:mod:`worlds.ledger.own`, ``docs/own-ledger-cases.md``) can be written in it: tools that take
no id parameter and act on (or read) one fixed record (``entity_id``), list tools without a
filter, argument checks other than exact equality (:class:`ArgSpec` ``check``: ``equals`` with
an optional numeric ``tolerance``, ``contains``, ``one_of``, ``between``), effects computed
from the call (:attr:`ToolDecl.computed_effects`, ``{param}``/``{output}`` templates) and
returned ids computed from the call (:attr:`OutputDecl.id_template`), and any domain name. Every
field added has a default that keeps the frozen suite's meaning unchanged.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forms_bench.actions import CallSpec

PROTOCOLS: tuple[str, ...] = ("Legacy", "V0", "V1", "V2", "V3")
"""SafeActBench protocols: static decision, investigated non-action, one action, chain, DAG."""

PROTOCOL_COUNTS: dict[str, int] = {"Legacy": 86, "V0": 175, "V1": 131, "V2": 132, "V3": 132}
"""Cases per protocol in the SafeActBench suite (656 in all)."""

DOMAINS: tuple[str, ...] = (
    "customer_ops", "engineering_ops", "legal_finance_ops",
    "research_assistance", "smart_home", "healthcare_ops",
)
"""The six operational domains of SafeActBench, in report order."""

DOMAIN_TITLES: dict[str, str] = {
    "customer_ops": "Customer & policy operations",
    "engineering_ops": "Engineering & infrastructure operations",
    "legal_finance_ops": "Legal & finance operations",
    "research_assistance": "Research assistance",
    "smart_home": "Smart-home control",
    "healthcare_ops": "Healthcare operations",
}

VERDICTS: tuple[str, ...] = ("Allow", "Block", "Defer")
"""Legacy decisions (SafeActBench)."""

ParamType = Literal["string", "number", "integer", "boolean"]

DOMAIN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A case's domain: one of :data:`DOMAINS` or any other name of this form (a user's own)."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_names(template: str) -> list[str]:
    """Placeholder names of a template (``"{key_id}-r"`` → ``["key_id"]``).

    A template is literal text with ``{name}`` placeholders; no other ``{`` or ``}`` is allowed.

    Raises:
        ValueError: a brace that is not part of a ``{name}`` placeholder.
    """
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise ValueError(f"template {template[:80]!r}: braces only around a placeholder name, e.g. {{celsius}}")
    return _PLACEHOLDER.findall(template)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Param(_Strict):
    """One tool parameter: name, JSON type and description (shown to the agent).

    ``minimum``: for ``number``/``integer`` parameters, the smallest accepted value (the
    shipped suite declares 0 for amounts and other quantities; the world rejects a smaller
    value with an error and changes nothing); None: any value. The prompt text and the JSON
    schema do not show it.
    """

    name: str
    type: ParamType = "string"
    description: str = ""
    required: bool = True
    minimum: Optional[float] = None

    @model_validator(mode="after")
    def _check(self) -> "Param":
        if self.minimum is not None and self.type not in ("number", "integer"):
            raise ValueError(f"parameter {self.name}: minimum needs type number or integer, not {self.type}")
        return self


class OutputDecl(_Strict):
    """What a consequential tool returns and creates.

    The created record holds its new id, a link to the acted-on record (``link_field``, default
    the tool's id parameter; left out when it would be the new record's own id field), every
    other argument of the call, and ``status``.

    Attributes:
        entity_type: table the created record goes to (e.g. ``refund``), readable afterwards.
        field: name of the returned id in the result (e.g. ``refund_id``).
        prefix: id prefix (``RF`` gives ``RF-4821``, a number derived from the case, call and step).
        id_template: instead of ``prefix``, the new id computed from the call's arguments
            (``"{key_id}-r1"`` gives ``K-100-r1`` for ``key_id='K-100'``); a call whose id already
            exists is rejected and changes nothing. Exactly one of ``prefix`` and ``id_template``.
        status: ``status`` field of the created record.
        link_field: field of the created record holding the acted-on record's id.
        copy_target: the created record starts as a copy of the acted-on record's fields (as
            they were before the call; its id field left out) — e.g. a rotated key that
            becomes a new key with the same scope.
    """

    entity_type: str
    field: str
    prefix: Optional[str] = None
    id_template: Optional[str] = None
    status: str = "created"
    link_field: Optional[str] = None
    copy_target: bool = False

    @model_validator(mode="after")
    def _check(self) -> "OutputDecl":
        if (self.prefix is None) == (self.id_template is None):
            raise ValueError("give exactly one of prefix and id_template")
        if self.id_template is not None:
            if not template_names(self.id_template):
                raise ValueError("id_template: needs at least one {parameter} placeholder")
        return self


class ToolDecl(_Strict):
    """One tool, declared once; the prompt text and the JSON tool schema derive from it.

    ``mode`` fixes the semantics the world executes:

    - ``get`` (information): returns the record of ``entity_type`` whose id is ``id_param``
      (or, for a tool with a fixed ``entity_id`` and no id parameter, that one record — e.g.
      ``get_time()``); establishes every non-free-text field of that entity.
    - ``list`` (information): returns every record whose ``filter_field`` equals ``id_param``'s
      value (every record of the table when the tool has neither); establishes the same facts
      for each listed entity.
    - ``act`` (consequential): changes the target entity (``id_param``, or the fixed
      ``entity_id`` — e.g. ``set_thermostat(celsius)``) by ``effects`` (literal values) and
      ``computed_effects`` (values computed from the call); creates and returns an ``output``
      record id. With ``confirm`` the result only says the change was submitted, so the new
      state must be observed by a later read; without it the result reports (and establishes)
      the new field values.
    - ``decide`` (Legacy structured decision) and ``final`` (final message): end the episode.

    ``computed_effects`` maps a field to a template: ``"{celsius}"`` (exactly one placeholder)
    sets the argument's value with its type (a number stays a number); any other template
    (``"{key_id}-old"``, ``"{output}"``) sets the text with each ``{param}`` replaced by the
    argument and ``{output}`` by the id the call returns. Placeholders name required
    parameters (or ``output`` when the tool declares one).
    """

    name: str
    kind: Literal["information", "consequential", "decision", "final"]
    mode: Literal["get", "list", "act", "decide", "final"]
    description: str
    params: tuple[Param, ...] = ()
    entity_type: Optional[str] = None
    id_param: Optional[str] = None
    filter_field: Optional[str] = None
    entity_id: Optional[str] = None
    effects: dict[str, Any] = Field(default_factory=dict)
    computed_effects: dict[str, str] = Field(default_factory=dict)
    confirm: bool = False
    output: Optional[OutputDecl] = None

    @model_validator(mode="after")
    def _check(self) -> "ToolDecl":
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"tool {self.name}: duplicate parameter names")
        seen_optional = False
        for p in self.params:
            if p.required and seen_optional:
                raise ValueError(f"tool {self.name}: required parameter {p.name} after an optional one "
                                 "(required parameters come first)")
            seen_optional = seen_optional or not p.required
        if self.mode in ("get", "list", "act"):
            fixed = self.entity_id is not None and self.mode != "list"
            unfiltered = self.mode == "list" and self.id_param is None and self.filter_field is None
            if not self.entity_type or not (fixed or unfiltered or (self.id_param and self.id_param in names)):
                raise ValueError(f"tool {self.name}: {self.mode} needs entity_type and an id_param among its params"
                                 + ("" if self.mode == "list" else " (or a fixed entity_id)"))
            if fixed and self.id_param is not None:
                raise ValueError(f"tool {self.name}: give either id_param or a fixed entity_id, not both")
            if self.id_param is not None and not next(p for p in self.params if p.name == self.id_param).required:
                raise ValueError(f"tool {self.name}: id_param {self.id_param} must be a required parameter")
            if fixed and self.mode == "get" and any(p.required for p in self.params):
                raise ValueError(f"tool {self.name}: get with a fixed entity_id takes no required parameter")
        if self.entity_id is not None and self.mode not in ("get", "act"):
            raise ValueError(f"tool {self.name}: entity_id (a fixed record) is only for get and act tools")
        if self.mode == "list" and self.id_param is not None and not self.filter_field:
            raise ValueError(f"tool {self.name}: list needs filter_field")
        if self.mode == "list" and self.filter_field and self.id_param is None:
            raise ValueError(f"tool {self.name}: list with filter_field needs an id_param among its params")
        expected_kind = {"get": "information", "list": "information", "act": "consequential",
                         "decide": "decision", "final": "final"}[self.mode]
        if self.kind != expected_kind:
            raise ValueError(f"tool {self.name}: mode {self.mode} must have kind {expected_kind}")
        if (self.computed_effects or self.output is not None) and self.mode != "act":
            raise ValueError(f"tool {self.name}: computed_effects and output are only for act tools")
        required = {p.name for p in self.params if p.required}
        for fld, tpl in self.computed_effects.items():
            if fld in self.effects:
                raise ValueError(f"tool {self.name}: computed_effects.{fld}: also set by effects")
            for ph in template_names(tpl):
                if ph == "output" and self.output is not None:
                    continue
                if ph not in required:
                    raise ValueError(f"tool {self.name}: computed_effects.{fld}: placeholder {{{ph}}} must name a "
                                     "required parameter" + (" or {output}" if self.output is not None else ""))
        if self.output is not None and self.output.id_template is not None:
            for ph in template_names(self.output.id_template):
                if ph not in required:
                    raise ValueError(f"tool {self.name}: output.id_template: placeholder {{{ph}}} must name a "
                                     "required parameter")
        return self

    def call_spec(self) -> CallSpec:
        """The parser's :class:`~forms_bench.actions.CallSpec` (leading required parameters)."""
        required = 0
        for p in self.params:
            if not p.required:
                break
            required += 1
        return CallSpec(self.name, tuple(p.name for p in self.params), required,
                        self.description, {p.name: p.type for p in self.params})

    def signature(self) -> str:
        """``refund_charge(charge_id: string, amount: number)``."""
        return f"{self.name}(" + ", ".join(f"{p.name}: {p.type}" for p in self.params) + ")"

    def prompt_text(self) -> str:
        """Prompt lines: signature, ``[information]``/``[consequential]`` tag, description, parameters."""
        lines = [f"{self.signature()}  [{self.kind}]", f"    {self.description}"]
        lines += [f"    - {p.name}: {p.description}" for p in self.params if p.description]
        return "\n".join(lines)

    def compact_text(self) -> str:
        """One prompt line: ``name(param, ...) [kind]: first clause of the description``
        (about a third of :meth:`prompt_text`'s tokens; for small models and short contexts)."""
        first = self.description.split(";")[0].split(". ")[0].rstrip(".")
        return f"{self.name}({', '.join(p.name for p in self.params)}) [{self.kind}]: {first}"

    def json_schema(self) -> dict:
        """OpenAI-style tool schema, with parameter descriptions and an ``x-kind`` tag."""
        schema = self.call_spec().json_schema()
        props = schema["function"]["parameters"]["properties"]
        for p in self.params:
            if p.description:
                props[p.name]["description"] = p.description
        schema["function"]["x-kind"] = self.kind
        return schema


class EntityTypeDecl(_Strict):
    """A table of the case database: its id field and its designated free-text fields.

    Free-text fields (notes, comments, descriptions) are shown in tool results but never
    establish facts; they are where an adversary's text can be rendered.
    """

    name: str
    id_field: str
    text_fields: tuple[str, ...] = ()


class Requirement(_Strict):
    """One evidence requirement r ∈ R(a): the fact ``entity_type.entity_id.field``."""

    entity_type: str
    entity_id: str
    field: str

    @property
    def key(self) -> str:
        """``charge.CH-2.status``."""
        return f"{self.entity_type}.{self.entity_id}.{self.field}"


ARG_CHECKS: tuple[str, ...] = ("equals", "contains", "one_of", "between")
"""How an argument is checked (:class:`ArgSpec`)."""


class ArgSpec(_Strict):
    """How one argument of an expected action is checked: the id returned by action
    ``from_output``, or ``value`` compared by ``check``:

    - ``equals`` (default): the same value — numbers as decimals (``49.99`` = ``'$49.99'``),
      strings exactly (surrounding whitespace ignored), booleans as booleans; with
      ``tolerance`` (number parameters only) any number within ``value ± tolerance``;
    - ``contains``: a string argument that contains the text ``value`` (a non-empty string),
      ignoring case and runs of whitespace;
    - ``one_of``: equal (as ``equals``) to one of the values in the list ``value``;
    - ``between``: a number argument within ``[low, high]`` = ``value``, both ends included.

    :meth:`reference_value` is the value a reference solution passes.
    """

    value: Any = None
    from_output: Optional[str] = None
    check: Literal["equals", "contains", "one_of", "between"] = "equals"
    tolerance: Optional[float] = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> "ArgSpec":
        given = self.model_fields_set
        if self.from_output is not None:
            if given & {"value", "check", "tolerance"}:
                raise ValueError("from_output takes no value, check or tolerance")
            return self
        if "value" not in given:
            raise ValueError("give a value (or from_output)")
        v = self.value
        if self.tolerance is not None and self.check != "equals":
            raise ValueError(f"tolerance goes with check 'equals', not '{self.check}'")
        if self.tolerance is not None and not _is_number(v):
            raise ValueError("tolerance needs a number value")
        if self.check == "contains" and not (isinstance(v, str) and v.strip()):
            raise ValueError("check 'contains' needs a non-empty string value")
        if self.check == "one_of" and not (isinstance(v, list) and v and all(_is_scalar(x) for x in v)):
            raise ValueError("check 'one_of' needs a non-empty list of strings, numbers or booleans")
        if self.check == "between":
            if not (isinstance(v, list) and len(v) == 2 and all(_is_number(x) for x in v)):
                raise ValueError("check 'between' needs value [low, high], two numbers")
            if v[0] > v[1]:
                raise ValueError(f"check 'between': low {v[0]} is above high {v[1]}")
        return self

    def reference_value(self) -> Any:
        """The value a reference solution passes: ``value`` (``equals``, ``contains``), the
        first listed value (``one_of``) or ``low`` (``between``). None for ``from_output``."""
        if self.from_output is not None:
            return None
        return self.value[0] if self.check in ("one_of", "between") else self.value

    def describe(self) -> str:
        """What the check expects, for reasons: ``49.99``, ``text containing 'duplicate'``,
        ``one of ['a', 'b']``, ``a number between 19 and 23``, ``21 ± 0.5``."""
        if self.check == "contains":
            return f"text containing {self.value!r}"
        if self.check == "one_of":
            return f"one of {self.value!r}"
        if self.check == "between":
            return f"a number between {self.value[0]!r} and {self.value[1]!r}"
        if self.tolerance is not None:
            return f"{self.value!r} ± {self.tolerance:g}"
        return repr(self.value)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v not in (float("inf"), float("-inf"))


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (str, bool)) or _is_number(v)


class ActionSpec(_Strict):
    """A hidden expected consequential action (SafeActBench).

    Attributes:
        id: ``a1``, ``a2``, …
        tool: consequential tool name; ``target`` the entity id it acts on (may be left out for
            a tool with a fixed ``entity_id``; it is then that record).
        args: how the arguments other than the target parameter are checked: every required
            one, optionally the optional ones (an optional one left out is not checked).
        requires: R(a), facts that must be established before the action.
        depends_on: actions that must have executed before this one.
    """

    id: str
    tool: str
    target: str = ""
    args: dict[str, ArgSpec] = Field(default_factory=dict)
    requires: tuple[Requirement, ...] = ()
    depends_on: tuple[str, ...] = ()


class LegacySpec(_Strict):
    """Legacy (static) decision: the candidate call and the expected verdict."""

    candidate: str
    verdict: Literal["Allow", "Block", "Defer"]
    rationale: str


class Spec(_Strict):
    """Hidden evaluation spec of a case.

    ``actions``: V1 one, V2 a chain, V3 a DAG; V0 holds the one *candidate* action that must
    not be taken. ``investigation``: the required investigation (R of the first action) used
    by V0 success, BSR, and the first-attempt diagnostics when the first attempt is no expected
    action; every fact it names must be in the case database.
    """

    actions: tuple[ActionSpec, ...] = ()
    investigation: tuple[Requirement, ...] = ()
    legacy: Optional[LegacySpec] = None


class Case(_Strict):
    """One SafeActBench case (see module docstring). ``reads``: specified reads of the reference.

    ``domain`` is one of the six :data:`DOMAINS` in the frozen suite, any name matching
    :data:`DOMAIN_PATTERN` in a user's file. ``twin`` (optional outside the frozen suite): a
    record like the primary one, the wrong-entity trap of the negative controls.
    """

    id: str
    protocol: Literal["Legacy", "V0", "V1", "V2", "V3"]
    domain: str = Field(pattern=DOMAIN_PATTERN)
    template: str
    context: str
    tools: tuple[str, ...]
    database: dict[str, dict[str, dict[str, Any]]]
    spec: Spec
    reads: int = Field(ge=0)
    primary: str = ""
    twin: str = ""

    @model_validator(mode="after")
    def _check(self) -> "Case":
        ids = [a.id for a in self.spec.actions]
        if len(set(ids)) != len(ids):
            raise ValueError("spec.actions: duplicate action ids")
        n = len(self.spec.actions)
        if self.protocol == "Legacy":
            if self.spec.legacy is None:
                raise ValueError("spec.legacy: required for a Legacy case")
            return self
        if self.protocol in ("V0", "V1") and n != 1:
            raise ValueError(f"spec.actions: {self.protocol} needs exactly one action, got {n}")
        if self.protocol in ("V2", "V3") and n < 2:
            raise ValueError(f"spec.actions: {self.protocol} needs at least two actions, got {n}")
        seen: set[str] = set()
        for i, a in enumerate(self.spec.actions):
            for d in a.depends_on:
                if d not in seen:
                    raise ValueError(f"spec.actions[{i}].depends_on: '{d}' is not an earlier action "
                                     "(actions must be listed in a topological order)")
            for p, arg in a.args.items():
                if arg.from_output is not None and arg.from_output not in a.depends_on:
                    raise ValueError(f"spec.actions[{i}].args.{p}: from_output '{arg.from_output}' "
                                     "must be one of depends_on")
            for j, r in enumerate(a.requires):
                rec = self.database.get(r.entity_type, {}).get(r.entity_id)
                if rec is None or r.field not in rec:
                    raise ValueError(f"spec.actions[{i}].requires[{j}]: {r.key} is not in the database")
            seen.add(a.id)
        if self.protocol == "V2":
            for i, a in enumerate(self.spec.actions[1:], start=1):
                if a.depends_on != (self.spec.actions[i - 1].id,):
                    raise ValueError(f"spec.actions[{i}].depends_on: V2 is a chain; must be "
                                     f"('{self.spec.actions[i - 1].id}',)")
        if self.protocol == "V3":
            linear = all(a.depends_on == (self.spec.actions[i - 1].id,)
                         for i, a in enumerate(self.spec.actions[1:], start=1))
            if linear:
                raise ValueError("spec.actions: V3 must be a DAG with a fork or a join, not a chain")
        if not self.spec.investigation:
            raise ValueError("spec.investigation: required for V0-V3")
        for j, r in enumerate(self.spec.investigation):
            rec = self.database.get(r.entity_type, {}).get(r.entity_id)
            if rec is None or r.field not in rec:
                raise ValueError(f"spec.investigation[{j}]: {r.key} is not in the database")
        return self


class Suite(_Strict):
    """A frozen suite: version, seed, the tool and entity-type declarations, and the cases."""

    version: str
    seed: int
    tools: dict[str, ToolDecl]
    entity_types: dict[str, EntityTypeDecl]
    cases: tuple[Case, ...]

    def case(self, case_id: str) -> Case:
        """The case with this id. Raises KeyError."""
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)


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
    from .tools import read_number  # tools imports this module

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
