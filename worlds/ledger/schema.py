"""Case schema of the evidence-ledger tool world (SafeActBench), validated on load.

A **case** (SafeActBench §2) gives the agent a task context and a tool interface; its hidden
**spec** says, for every expected consequential action *a*, the evidence requirements R(a), the
tool, the target entity, the exact arguments, which earlier action's returned value an argument
must carry, and the dependency chain (V2) or DAG (V3). Legacy cases carry a static candidate
action and the expected Allow/Block/Defer decision instead.

Everything is a pydantic model; :func:`load_suite_dict` validates a whole suite and raises
:class:`SuiteValidationError` whose message names the case id and the field (``case
V1-cust-003: spec.actions[0].tool: unknown tool 'refund'``).
"""

from __future__ import annotations

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

    Attributes:
        entity_type: table the created record goes to (e.g. ``refund``), readable afterwards.
        field: name of the returned id in the result (e.g. ``refund_id``).
        prefix: id prefix (``RF`` gives ``RF-4821``).
        status: ``status`` field of the created record.
    """

    entity_type: str
    field: str
    prefix: str
    status: str = "created"


class ToolDecl(_Strict):
    """One tool, declared once; the prompt text and the JSON tool schema derive from it.

    ``mode`` fixes the semantics the world executes:

    - ``get`` (information): returns the record of ``entity_type`` whose id is ``id_param``;
      establishes every non-free-text field of that entity.
    - ``list`` (information): returns every record whose ``filter_field`` equals ``id_param``'s
      value; establishes the same facts for each listed entity.
    - ``act`` (consequential): changes the target entity (``id_param``) by ``effects``; creates
      and returns an ``output`` record id. With ``confirm`` the result only says the change was
      submitted, so the new state must be observed by a later read; without it the result
      reports (and establishes) the new field values.
    - ``decide`` (Legacy structured decision) and ``final`` (final message): end the episode.
    """

    name: str
    kind: Literal["information", "consequential", "decision", "final"]
    mode: Literal["get", "list", "act", "decide", "final"]
    description: str
    params: tuple[Param, ...] = ()
    entity_type: Optional[str] = None
    id_param: Optional[str] = None
    filter_field: Optional[str] = None
    effects: dict[str, Any] = Field(default_factory=dict)
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
            if not self.entity_type or not self.id_param or self.id_param not in names:
                raise ValueError(f"tool {self.name}: {self.mode} needs entity_type and an id_param among its params")
            if not next(p for p in self.params if p.name == self.id_param).required:
                raise ValueError(f"tool {self.name}: id_param {self.id_param} must be a required parameter")
        if self.mode == "list" and not self.filter_field:
            raise ValueError(f"tool {self.name}: list needs filter_field")
        expected_kind = {"get": "information", "list": "information", "act": "consequential",
                         "decide": "decision", "final": "final"}[self.mode]
        if self.kind != expected_kind:
            raise ValueError(f"tool {self.name}: mode {self.mode} must have kind {expected_kind}")
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


class ArgSpec(_Strict):
    """Expected value of one argument: a literal ``value`` or the id returned by action ``from_output``."""

    value: Any = None
    from_output: Optional[str] = None


class ActionSpec(_Strict):
    """A hidden expected consequential action (SafeActBench).

    Attributes:
        id: ``a1``, ``a2``, …
        tool: consequential tool name; ``target`` the entity id it acts on.
        args: expected arguments other than the target parameter.
        requires: R(a), facts that must be established before the action.
        depends_on: actions that must have executed before this one.
    """

    id: str
    tool: str
    target: str
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
    """One SafeActBench case (see module docstring). ``reads``: specified reads of the reference."""

    id: str
    protocol: Literal["Legacy", "V0", "V1", "V2", "V3"]
    domain: Literal["customer_ops", "engineering_ops", "legal_finance_ops",
                    "research_assistance", "smart_home", "healthcare_ops"]
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
    for i, a in enumerate(case.spec.actions):
        decl = tools.get(a.tool)
        if decl is None or decl.mode != "act":
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].tool: unknown consequential tool '{a.tool}'")
        if a.tool not in case.tools:
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].tool: '{a.tool}' is not offered to the agent")
        if a.target not in case.database.get(decl.entity_type, {}):
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].target: no {decl.entity_type} '{a.target}'")
        params = {p.name for p in decl.params} - {decl.id_param}
        if set(a.args) != params:
            raise SuiteValidationError(f"case {cid}: spec.actions[{i}].args: expected {sorted(params)}, "
                                       f"got {sorted(a.args)}")
        for p, arg in a.args.items():
            if arg.from_output is not None:
                src = next(x for x in case.spec.actions if x.id == arg.from_output)
                if tools[src.tool].output is None:
                    raise SuiteValidationError(f"case {cid}: spec.actions[{i}].args.{p}: "
                                               f"{src.tool} returns no id")
    return case


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
