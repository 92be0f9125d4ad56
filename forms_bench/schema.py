"""Task schema of the form benchmark (AdvSim2Real, "150 form-filling tasks in five strata").

A task is ``x = (g, o_0)``: the goal text ``g`` shown to the agent and the initial page ``o_0``
(title, records tables, rules, a form with fields and controls). The :class:`HiddenSpec` is
never shown to a policy: it holds the target final values, the final control, two protected
fields, two forbidden controls and, for ordered repair, the order in which fields must be fixed.

Field values are ``str`` for text, textarea, select and radio fields (``""`` = empty / nothing
selected) and ``bool`` for checkboxes. Every interactive element carries a stable ``bid`` that
appears as an HTML attribute and in the accessibility tree.

:func:`Task.model_validate` checks every cross-reference; :func:`validate_task` wraps the
pydantic error into a :class:`TaskValidationError` naming the task id and the field.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

STRATA: tuple[str, ...] = (
    "conditional_policy",
    "derived_values",
    "conjunctive_selection",
    "relational_joins",
    "ordered_repair",
)
"""The five skill strata, in benchmark order (30 test tasks each)."""

Stratum = Literal["conditional_policy", "derived_values", "conjunctive_selection",
                  "relational_joins", "ordered_repair"]
FieldKind = Literal["text", "textarea", "select", "radio", "checkbox"]
Value = Union[bool, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Table(_Strict):
    """A records table: ``caption`` plus ``columns`` (header texts) and ``rows`` (cell texts)."""

    caption: str = Field(min_length=1)
    columns: list[str] = Field(min_length=1)
    rows: list[list[str]] = Field(min_length=1)

    @model_validator(mode="after")
    def _rectangular(self) -> "Table":
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.caption!r}: row {i} has {len(row)} cells, "
                                 f"expected {len(self.columns)}")
        return self


class FormField(_Strict):
    """One form field.

    Attributes:
        key: identifier used in specs and logs (``[a-z0-9_]+``), unique in the task.
        bid: element id of the control (for radio: of the radio group).
        label: visible label (the accessible name).
        kind: text | textarea | select | radio | checkbox.
        options: choices of a select or radio field (visible texts).
        option_bids: radio only: the bid of each radio button, aligned with ``options``.
        initial: initial value (``str``; ``bool`` for a checkbox).
        disabled: a read-only, disabled control (acting on it is an error).
    """

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    bid: str = Field(pattern=r"^[0-9]+$")
    label: str = Field(min_length=1)
    kind: FieldKind
    options: list[str] = Field(default_factory=list)
    option_bids: list[str] = Field(default_factory=list)
    initial: Value = ""
    disabled: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "FormField":
        if self.kind == "checkbox":
            if not isinstance(self.initial, bool):
                raise ValueError(f"field {self.key!r}: a checkbox's initial value must be true/false")
        elif not isinstance(self.initial, str):
            raise ValueError(f"field {self.key!r}: initial value must be a string")
        if self.kind in ("select", "radio"):
            if len(self.options) < 2:
                raise ValueError(f"field {self.key!r}: a {self.kind} needs at least two options")
            if len(set(self.options)) != len(self.options):
                raise ValueError(f"field {self.key!r}: duplicate options")
            if self.initial != "" and self.initial not in self.options:
                raise ValueError(f"field {self.key!r}: initial value {self.initial!r} is not an option")
            if self.kind == "select" and self.initial == "":
                raise ValueError(f"field {self.key!r}: a select always has a selected option")
        elif self.options:
            raise ValueError(f"field {self.key!r}: only select/radio fields have options")
        if self.kind == "radio":
            if len(self.option_bids) != len(self.options):
                raise ValueError(f"field {self.key!r}: option_bids must align with options")
        elif self.option_bids:
            raise ValueError(f"field {self.key!r}: only radio fields have option_bids")
        return self

    def accepts(self, value: Value) -> bool:
        """Whether ``value`` is a possible value of this field (type and option set)."""
        if self.kind == "checkbox":
            return isinstance(value, bool)
        if not isinstance(value, str):
            return False
        if self.kind in ("select", "radio"):
            return value in self.options
        return True


class Fieldset(_Strict):
    """A group of fields under a legend."""

    legend: str = Field(min_length=1)
    fields: list[FormField] = Field(min_length=1)


class Control(_Strict):
    """A button. ``message`` is the status text the page shows after it is activated."""

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    bid: str = Field(pattern=r"^[0-9]+$")
    label: str = Field(min_length=1)
    message: str = Field(min_length=1)


class Page(_Strict):
    """The initial page o_0.

    Attributes:
        title: page title (the ``RootWebArea`` name) and the main heading.
        intro: one paragraph under the heading.
        tables: records tables the answer is read from (may be empty: then the page has no
            "Records" heading).
        rules: rule sentences (one paragraph each) under a "Rules" heading (may be empty: then
            the heading is left out too).
        form_name: accessible name of the form.
        fieldsets: the form's field groups, in page order.
        controls: the form's buttons, in page order.
        status_bid: bid of the status region that shows the last control's message.
    """

    title: str = Field(min_length=1)
    intro: str = Field(min_length=1)
    tables: list[Table] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list)
    form_name: str = Field(min_length=1)
    fieldsets: list[Fieldset] = Field(min_length=1)
    controls: list[Control] = Field(min_length=1)
    status_bid: str = Field(pattern=r"^[0-9]+$")

    def fields(self) -> list[FormField]:
        """All fields in page order."""
        return [f for fs in self.fieldsets for f in fs.fields]

    def field(self, key: str) -> FormField:
        """The field with this key; KeyError if none."""
        for f in self.fields():
            if f.key == key:
                return f
        raise KeyError(key)

    def control(self, key: str) -> Control:
        """The control with this key; KeyError if none."""
        for c in self.controls:
            if c.key == key:
                return c
        raise KeyError(key)

    def initial_values(self) -> dict[str, Value]:
        """Field key -> initial value."""
        return {f.key: f.initial for f in self.fields()}


class HiddenSpec(_Strict):
    """What the strict check s(x, τ) compares against; never shown to a policy.

    Attributes:
        targets: field key -> required final value (at submission).
        final_control: key of the control that must be activated, last.
        protected: field keys that must keep their initial values (0–2; the benchmark's
            tasks have two, low difficulty levels none).
        forbidden: control keys that must never be activated (0–2, like ``protected``).
        order: ordered repair only: field keys in the order they must first reach their
            targets (empty for the other strata).
        rationale: one sentence on how the answer follows from the records and rules.
    """

    targets: dict[str, Value] = Field(min_length=1)
    final_control: str
    protected: list[str] = Field(default_factory=list, max_length=2)
    forbidden: list[str] = Field(default_factory=list, max_length=2)
    order: list[str] = Field(default_factory=list)
    rationale: str = ""


class Task(_Strict):
    """One benchmark task x = (g, o_0) with its hidden spec (AdvSim2Real, Section 3)."""

    id: str = Field(pattern=r"^[a-z0-9_-]+$")
    stratum: Stratum
    domain: str
    goal: str = Field(min_length=1)
    page: Page
    spec: HiddenSpec

    @model_validator(mode="after")
    def _cross_references(self) -> "Task":
        page, spec = self.page, self.spec
        fields = page.fields()
        keys = [f.key for f in fields]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate field keys")
        ckeys = [c.key for c in page.controls]
        if len(set(ckeys)) != len(ckeys):
            raise ValueError("duplicate control keys")
        bids = [f.bid for f in fields] + [b for f in fields for b in f.option_bids]
        bids += [c.bid for c in page.controls] + [page.status_bid]
        if len(set(bids)) != len(bids):
            raise ValueError("duplicate bids")
        by_key = {f.key: f for f in fields}
        for k, v in spec.targets.items():
            if k not in by_key:
                raise ValueError(f"spec.targets: unknown field {k!r}")
            if not by_key[k].accepts(v):
                raise ValueError(f"spec.targets[{k!r}]: {v!r} is not a valid value for a {by_key[k].kind}")
            if by_key[k].disabled:
                raise ValueError(f"spec.targets[{k!r}]: field is disabled")
        if spec.final_control not in ckeys:
            raise ValueError(f"spec.final_control: unknown control {spec.final_control!r}")
        for k in spec.protected:
            if k not in by_key:
                raise ValueError(f"spec.protected: unknown field {k!r}")
            if k in spec.targets and spec.targets[k] != by_key[k].initial:
                raise ValueError(f"spec.protected: {k!r} has a target different from its initial value")
        if len(set(spec.protected)) != len(spec.protected):
            raise ValueError("spec.protected: duplicate fields")
        for k in spec.forbidden:
            if k not in ckeys:
                raise ValueError(f"spec.forbidden: unknown control {k!r}")
            if k == spec.final_control:
                raise ValueError("spec.forbidden: the final control cannot be forbidden")
        if len(set(spec.forbidden)) != len(spec.forbidden):
            raise ValueError("spec.forbidden: duplicate controls")
        for k in spec.order:
            if k not in spec.targets:
                raise ValueError(f"spec.order: {k!r} has no target")
        if (self.stratum == "ordered_repair") != bool(spec.order):
            raise ValueError("spec.order is required for ordered_repair and only there")
        return self


class TaskValidationError(ValueError):
    """A task failed validation; the message names the task id and the offending field."""


def validate_task(data: Any) -> Task:
    """Validate a task from a dict (or JSON string).

    Raises:
        TaskValidationError: naming the task id and every offending field path.
    """
    try:
        if isinstance(data, (str, bytes)):
            return Task.model_validate_json(data)
        return Task.model_validate(data)
    except ValidationError as exc:
        tid = data.get("id", "?") if isinstance(data, dict) else "?"
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "<task>"
            parts.append(f"{loc}: {err['msg']}")
        raise TaskValidationError(f"task {tid!r}: " + "; ".join(parts)) from None
