"""Case schema of the evidence-ledger tool world (SafeActBench).

A **case** (SafeActBench §2) gives the agent a task context and a tool interface; its hidden
**spec** says, for every expected consequential action *a*, the evidence requirements R(a), the
tool, the target entity, the exact arguments, which earlier action's returned value an argument
must carry, and the dependency chain (V2) or DAG (V3). Legacy cases carry a static candidate
action and the expected Allow/Block/Defer decision instead.

Everything is a pydantic model that checks itself on validation. The tool and entity-type
declarations a suite carries are in :mod:`worlds.ledger.declarations` (re-exported here); the
checks of a case against them, and the loading of a whole suite, are in
:mod:`worlds.ledger.validation`: :func:`~worlds.ledger.validation.load_suite_dict` validates a
whole suite and raises :class:`~worlds.ledger.validation.SuiteValidationError` whose message
names the case id and the field (``case V1-cust-003: spec.actions[0].tool: unknown tool
'refund'``).

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

from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from .declarations import EntityTypeDecl, OutputDecl, Param, ParamType, ToolDecl, _Strict, template_names

__all__ = [
    "PROTOCOLS", "PROTOCOL_COUNTS", "DOMAINS", "DOMAIN_TITLES", "VERDICTS", "DOMAIN_PATTERN", "ARG_CHECKS",
    "Requirement", "ArgSpec", "ActionSpec", "LegacySpec", "Spec", "Case", "Suite",
    # declarations (worlds.ledger.declarations)
    "ParamType", "Param", "OutputDecl", "ToolDecl", "EntityTypeDecl", "template_names",
]

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

DOMAIN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A case's domain: one of :data:`DOMAINS` or any other name of this form (a user's own)."""


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


_VALIDATION = ("SuiteValidationError", "validate_case", "load_suite_dict")


def __getattr__(name: str):
    """:mod:`worlds.ledger.validation`'s public names, still importable from here (it imports this
    module, so they are looked up on first use)."""
    if name in _VALIDATION:
        from . import validation

        return getattr(validation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
