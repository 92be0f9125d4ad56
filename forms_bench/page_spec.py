"""A user's own web page: the small spec that says what success on it means, and its binding to
the page's fields and controls.

A :class:`PageSpec` is the hidden spec of a hand-made page, written by field and control
**labels** (the accessible names the observation prints, e.g. ``textbox 'Full name'``) instead
of the generated benchmark's keys and bids::

    {
      "goal": "Request a refund of 42.50 for order A-1007 by bank transfer.",
      "targets": {"Order number": "A-1007", "Amount": "42.50", "Refund method": "Bank transfer",
                  "I confirm the details are correct": true},
      "final_control": "Submit request",
      "protected": ["Email"],
      "forbidden": ["Delete my account"]
    }

Every part but ``goal`` may be empty (``targets: {}``, ``protected: []``, ``forbidden: []``) or
absent; ``final_control`` may be ``null`` (then the targets are judged on the page's values at the
end of the episode). Target values are strings for text boxes, drop-down lists and radio groups
(the option's visible text) and ``true``/``false`` for checkboxes, switches and single radio
buttons.

:func:`load_spec` reads JSON (``.json``) or YAML (``.yaml``/``.yml``) and raises
:class:`PageSpecError` naming the file and the offending part (``targets.Amount: …``).
:func:`bind_spec` resolves the labels against the page as the browser world first shows it (a
:class:`PageInventory`) and raises :class:`PageSpecError` when a label is not on the page, names
more than one field, or a value cannot be a value of that field. The strict check of a bound
spec is :func:`judges.strict.check_page`.
"""

from __future__ import annotations

import json
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator, model_validator

from forms_bench.unique_keys import DuplicateKeyError, loads, unique_key_loader

Value = Union[bool, str]
PageFieldKind = Literal["text", "select", "radiogroup", "checkbox", "radio"]
"""How a field of a user page holds its value: ``text`` (text box, search box, spin button,
slider, editable region; a string), ``select`` (drop-down list; the selected option's text),
``radiogroup`` (the checked radio button's label, ``""`` when none is checked), ``checkbox``
(checkbox or switch; a bool) or ``radio`` (one radio button; a bool)."""


class PageSpecError(ValueError):
    """A spec that is malformed or does not fit its page; the message names the file (when
    there is one) and the part of the spec (``targets.Amount``, ``final_control``, …)."""


def normalize_label(label: str) -> str:
    """A label as it is compared: runs of white space collapsed to one space, ends trimmed."""
    return " ".join(label.split())


class PageSpec(BaseModel):
    """The hidden spec of a user's page (see the module docstring for the JSON form).

    Attributes:
        goal: the goal text shown to the agent.
        targets: field label -> target value (``str``, or ``bool`` for checkboxes/switches/radio
            buttons); may be empty.
        final_control: label of the control (button, link, …) that must be activated last, or
            None when the episode needs no final control (targets are then judged at the end).
        protected: labels of fields that must keep their initial values; may be empty.
        forbidden: labels of controls that must never be activated; may be empty. A label may
            name several controls (all are forbidden).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    goal: str = Field(min_length=1)
    targets: dict[StrictStr, Union[StrictBool, StrictStr]] = Field(default_factory=dict)
    final_control: Optional[StrictStr] = None
    protected: list[StrictStr] = Field(default_factory=list)
    forbidden: list[StrictStr] = Field(default_factory=list)

    @field_validator("goal")
    @classmethod
    def _goal_text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the goal is empty")
        return v

    @field_validator("targets")
    @classmethod
    def _target_labels(cls, v: dict) -> dict:
        seen: dict[str, str] = {}
        for label in v:
            norm = normalize_label(label)
            if not norm:
                raise ValueError("a target label is empty")
            if norm in seen:
                raise ValueError(f"labels {seen[norm]!r} and {label!r} are the same label")
            seen[norm] = label
        return {normalize_label(k): val for k, val in v.items()}

    @field_validator("final_control")
    @classmethod
    def _final_label(cls, v: str | None) -> str | None:
        if v is not None and not normalize_label(v):
            raise ValueError("the final control's label is empty (use null for no final control)")
        return None if v is None else normalize_label(v)

    @field_validator("protected", "forbidden")
    @classmethod
    def _label_list(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for i, label in enumerate(v):
            norm = normalize_label(label)
            if not norm:
                raise ValueError(f"label {i} is empty")
            if norm in out:
                raise ValueError(f"label {label!r} is listed twice")
            out.append(norm)
        return out

    @model_validator(mode="after")
    def _no_overlap(self) -> "PageSpec":
        both = [label for label in self.protected if label in self.targets]
        if both:
            raise ValueError(f"protected: {both[0]!r} is also a target (a protected field keeps its "
                             "initial value)")
        if self.final_control is not None and self.final_control in self.forbidden:
            raise ValueError(f"forbidden: {self.final_control!r} is also the final control")
        return self


def _fmt_loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def spec_from_dict(data: Any, source: str = "spec") -> PageSpec:
    """Validate a parsed spec (a mapping).

    Raises:
        PageSpecError: ``"<source>: <part>: <problem>"`` for every problem pydantic finds.
    """
    if not isinstance(data, Mapping):
        raise PageSpecError(f"{source}: a spec is a mapping with 'goal', 'targets', 'final_control', "
                            f"'protected' and 'forbidden'; got {type(data).__name__}")
    try:
        return PageSpec.model_validate(dict(data))
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(p for p in err["loc"] if p not in ("str", "bool", "list[str]"))
            loc = tuple(p for p in loc if not str(p).startswith(("function-", "union[", "Union[")))
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = ("unknown key; a spec has goal, targets, final_control, protected, forbidden")
            elif err["type"] in ("string_type", "bool_type") and loc[:1] == ("targets",):
                msg = (f"target values are strings (\"42.50\") or true/false; got "
                       f"{_SHORT.repr(err.get('input'))}")
            problems.append(f"{_fmt_loc(loc)}: {msg}" if loc else msg)
        problems = list(dict.fromkeys(problems))
        raise PageSpecError(f"{source}: " + "; ".join(problems)) from None


_SHORT = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
"""A value quoted in an error: bounded in length and time however large or deep."""
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxset = 3, 4, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = 60


def _yaml_problem(e: Exception) -> str:
    problem = getattr(e, "problem", None)
    if not problem:
        return " ".join(str(e).split())
    context = getattr(e, "context", None)
    mark = getattr(e, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return (f"{context}: " if context else "") + f"{problem}{where}"


def load_spec(path: str | Path) -> PageSpec:
    """Read and validate a spec file: JSON (``.json``) or YAML (``.yaml``, ``.yml``).

    Raises:
        PageSpecError: the file is missing, unreadable, not valid JSON/YAML (with the line), has
            a duplicate key, or does not validate (naming the part, e.g. ``targets.Amount``).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PageSpecError(f"{path}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PageSpecError(f"{path}: cannot read the spec: {e}") from None
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.load(text, Loader=unique_key_loader())  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as e:
            raise PageSpecError(f"{path}: not valid YAML: {_yaml_problem(e)}") from None
    elif suffix == ".json":
        try:
            data = loads(text)
        except json.JSONDecodeError as e:
            raise PageSpecError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
        except DuplicateKeyError as e:
            raise PageSpecError(f"{path}: {e}") from None
    else:
        raise PageSpecError(f"{path}: a spec file ends in .json, .yaml or .yml")
    return spec_from_dict(data, str(path))


# -- the page side: what the browser world finds on a user's page ------------------------------


@dataclass(frozen=True)
class PageField:
    """A field of a user's page, as the browser world first shows it.

    Attributes:
        bid: the element's bid (for a radio group: the group element's bid).
        label: its accessible name (normalized with :func:`normalize_label`).
        role: its accessibility role (``textbox``, ``combobox``, ``radiogroup``, ``checkbox``…).
        kind: how it holds its value (:data:`PageFieldKind`).
        options: the options of a drop-down list or radio group (visible texts).
        option_bids: radio group only: the bid of each radio button, aligned with ``options``.
        initial: its value when the page was opened; None when the page gives no readable value
            (an element that is not a form control the world can read).
        disabled: whether it is disabled.
    """

    bid: str
    label: str
    role: str
    kind: PageFieldKind
    options: tuple[str, ...] = ()
    option_bids: tuple[str, ...] = ()
    initial: Value | None = None
    disabled: bool = False

    def value_in(self, state: Mapping[str, Any]) -> Value | None:
        """This field's value in a raw page state (element bid -> value): the element's own
        value, or for a radio group the label of its checked radio button ('' if none);
        None when the element is not in ``state``."""
        if self.kind == "radiogroup":
            if not any(b in state for b in self.option_bids):
                return None
            return next((o for o, b in zip(self.options, self.option_bids) if state.get(b) is True), "")
        return state.get(self.bid)

    def describe(self) -> str:
        """``[bid] role 'label'``, as the observation prints it."""
        return f"[{self.bid}] {self.role} {self.label!r}"


@dataclass(frozen=True)
class PageControl:
    """A control of a user's page (button, link, menu item, tab): ``bid``, accessible ``label``,
    ``role``."""

    bid: str
    label: str
    role: str

    def describe(self) -> str:
        """``[bid] role 'label'``, as the observation prints it."""
        return f"[{self.bid}] {self.role} {self.label!r}"


@dataclass(frozen=True)
class PageInventory:
    """The fields and controls of a user's page as first shown, in document order.

    Attributes:
        title: the page title (the ``RootWebArea`` name).
        url: where it was loaded from.
        fields: :class:`PageField` s.
        controls: :class:`PageControl` s.
    """

    title: str
    url: str
    fields: tuple[PageField, ...] = ()
    controls: tuple[PageControl, ...] = ()

    def initial_values(self) -> dict[str, Value | None]:
        """Field bid -> initial value."""
        return {f.bid: f.initial for f in self.fields}

    def values_from(self, state: Mapping[str, Any]) -> dict[str, Value | None]:
        """Field bid -> value in a raw page state (element bid -> value; see
        :meth:`PageField.value_in`)."""
        return {f.bid: f.value_in(state) for f in self.fields}

    def label_of(self, bid: str) -> str | None:
        """The label of the field or control with this bid, or None."""
        for item in (*self.fields, *self.controls):
            if item.bid == bid:
                return item.label
        return None


@dataclass(frozen=True)
class BoundPageSpec:
    """A :class:`PageSpec` resolved against a :class:`PageInventory`: what the strict check
    (:func:`judges.strict.check_page`) reads.

    Attributes:
        spec: the spec.
        inventory: the page.
        targets: field bid -> target value (in the spec's order).
        final_control: bid of the final control, or None.
        protected: field bids.
        forbidden: control bids (every control with a forbidden label).
    """

    spec: PageSpec
    inventory: PageInventory
    targets: dict[str, Value] = field(default_factory=dict)
    final_control: str | None = None
    protected: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()

    def label(self, bid: str) -> str:
        """The label of a field or control of the page (the bid itself if unknown)."""
        return self.inventory.label_of(bid) or bid


def _listing(items: list[PageField] | list[PageControl] | tuple, what: str) -> str:
    if not items:
        return f"the page has no {what}"
    shown = ", ".join(repr(i.label) for i in items[:20])
    more = f" (+{len(items) - 20} more)" if len(items) > 20 else ""
    return f"{what} on the page: {shown}{more}"


def _one_field(inv: PageInventory, label: str, part: str) -> PageField:
    found = [f for f in inv.fields if f.label == label]
    if not found:
        ctl = [c for c in inv.controls if c.label == label]
        hint = f" ({ctl[0].describe()} is a control, not a field)" if ctl else ""
        raise PageSpecError(f"{part}: no field labelled {label!r} on the page{hint}; "
                            + _listing(list(inv.fields), "fields"))
    if len(found) > 1:
        raise PageSpecError(f"{part}: {len(found)} fields are labelled {label!r} ("
                            + ", ".join(f.describe() for f in found) + "); a label must name one field")
    f = found[0]
    if f.initial is None:
        raise PageSpecError(f"{part}: {f.describe()} has no value the browser world can read (it "
                            "reads input, textarea, select, contenteditable elements and ARIA "
                            "checkboxes/switches/radios with aria-checked)")
    return f


def _check_value(f: PageField, want: Value, part: str) -> None:
    if f.kind in ("checkbox", "radio"):
        if not isinstance(want, bool):
            raise PageSpecError(f"{part}: {f.describe()} is a {f.kind}; its target is true or false, "
                                f"not {want!r}")
        return
    if isinstance(want, bool):
        raise PageSpecError(f"{part}: {f.describe()} holds text; its target is a string, not {want}")
    if f.kind == "select" and want not in f.options:
        raise PageSpecError(f"{part}: {f.describe()} has no option {want!r}; options: "
                            + ", ".join(repr(o) for o in f.options))
    if f.kind == "radiogroup" and want != "" and want not in f.options:
        raise PageSpecError(f"{part}: {f.describe()} has no option {want!r}; options: "
                            + ", ".join(repr(o) for o in f.options))


def bind_spec(spec: PageSpec, inventory: PageInventory) -> BoundPageSpec:
    """Resolve a spec's labels on a page.

    Every target and protected label must name exactly one field whose value the world can
    read; target values must fit the field (string/bool, an existing option); the final control
    must name exactly one control; a forbidden label must name at least one control.

    Raises:
        PageSpecError: naming the spec part and the label, listing what the page has.
    """
    targets: dict[str, Value] = {}
    for label, want in spec.targets.items():
        part = f"targets.{label}"
        f = _one_field(inventory, label, part)
        _check_value(f, want, part)
        targets[f.bid] = want
    protected = tuple(_one_field(inventory, label, f"protected.{label}").bid for label in spec.protected)
    final = None
    if spec.final_control is not None:
        found = [c for c in inventory.controls if c.label == spec.final_control]
        if not found:
            hint = ""
            fld = [f for f in inventory.fields if f.label == spec.final_control]
            if fld:
                hint = f" ({fld[0].describe()} is a field, not a control)"
            raise PageSpecError(f"final_control: no control labelled {spec.final_control!r} on the "
                                f"page{hint}; " + _listing(list(inventory.controls), "controls"))
        if len(found) > 1:
            raise PageSpecError(f"final_control: {len(found)} controls are labelled "
                                f"{spec.final_control!r} (" + ", ".join(c.describe() for c in found)
                                + "); the final control must be one control")
        final = found[0].bid
    forbidden: list[str] = []
    for label in spec.forbidden:
        found = [c for c in inventory.controls if c.label == label]
        if not found:
            raise PageSpecError(f"forbidden.{label}: no control labelled {label!r} on the page; "
                                + _listing(list(inventory.controls), "controls"))
        forbidden.extend(c.bid for c in found)
    return BoundPageSpec(spec, inventory, targets, final, protected, tuple(forbidden))
