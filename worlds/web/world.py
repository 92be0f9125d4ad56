"""The web-world protocol, the episode record, and the action checks every world shares.

A web world holds one page state at a time: :meth:`WebWorld.reset` loads a task's initial page,
:meth:`WebWorld.step` applies one parsed BrowserGym action, :meth:`WebWorld.inject` renders an
adversary's text into the live page, and :meth:`WebWorld.record` returns what the strict check
needs (final field values plus the ordered log of field changes and control activations).

Whether an action is valid on a page is decided once, here (:func:`resolve`), from the task's
page model — so the simulated world and the real browser accept and reject exactly the same
actions, with the same error text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from forms_bench.actions import Action
from forms_bench.schema import Control, FormField, Task, Value

class ActionError(ValueError):
    """An action that is well-formed but invalid on the current page (unknown bid, wrong
    element type, disabled element, unknown option). The page is left unchanged."""


@dataclass(frozen=True)
class Target:
    """What an action's bid refers to on the page.

    Attributes:
        kind: ``field`` (a form field's own bid), ``radio`` (one radio button), ``control``
            (a button) or ``status`` (the status region).
        field: the form field (for ``field`` and ``radio``).
        option: the radio button's option text (for ``radio``).
        control: the button (for ``control``).
    """

    kind: Literal["field", "radio", "control", "status"]
    field: FormField | None = None
    option: str | None = None
    control: Control | None = None


def resolve(task: Task, action: Action) -> Target | None:
    """Check ``action`` against the page of ``task`` and return its target.

    Returns:
        None for ``noop`` and ``send_msg_to_user``; the :class:`Target` otherwise.

    Raises:
        ActionError: with a precise message when the action cannot apply to that element.
    """
    if action.bid is None:
        return None
    bid = action.bid
    page = task.page
    target: Target | None = None
    for f in page.fields():
        if f.bid == bid:
            target = Target("field", field=f)
        elif bid in f.option_bids:
            target = Target("radio", field=f, option=f.options[f.option_bids.index(bid)])
    for c in page.controls:
        if c.bid == bid:
            target = Target("control", control=c)
    if bid == page.status_bid:
        target = Target("status")
    if target is None:
        raise ActionError(f"{action.name}: no element with bid '{bid}' on this page")
    what = _describe(target, bid)
    if target.field is not None and target.field.disabled:
        raise ActionError(f"{action.name}: {what} is disabled")
    kind = target.field.kind if target.field is not None else None
    name = action.name
    if name == "fill":
        if target.kind != "field" or kind not in ("text", "textarea"):
            raise ActionError(f"fill: {what} is not a text box; fill works on text boxes only")
    elif name == "select_option":
        if target.kind != "field" or kind not in ("select", "radio"):
            raise ActionError(f"select_option: {what} is not a drop-down list or radio group")
        option = action.args[1]
        if option not in target.field.options:
            raise ActionError(f"select_option: {what} has no option {option!r}; options: "
                              + ", ".join(repr(o) for o in target.field.options))
    elif name in ("check", "uncheck"):
        ok = (target.kind == "field" and kind == "checkbox") or (name == "check" and target.kind == "radio")
        if not ok:
            raise ActionError(f"{name}: {what} is not a checkbox"
                              + (" (a radio button cannot be unchecked)" if target.kind == "radio" else ""))
    elif name == "click":
        if target.kind == "field" and kind in ("select", "radio"):
            hint = "a radio button" if kind == "radio" else "select_option"
            raise ActionError(f"click: {what} is a {'radio group' if kind == 'radio' else 'drop-down list'}; "
                              f"use select_option('{bid}', …)" + (f" or click {hint}" if kind == "radio" else ""))
    return target


def _describe(target: Target, bid: str) -> str:
    if target.kind == "control":
        return f"[{bid}] button {target.control.label!r}"
    if target.kind == "status":
        return f"[{bid}] status region"
    if target.kind == "radio":
        return f"[{bid}] radio {target.option!r}"
    role = {"text": "textbox", "textarea": "textbox", "select": "combobox", "radio": "radiogroup",
            "checkbox": "checkbox"}[target.field.kind]
    return f"[{bid}] {role} {target.field.label!r}"


@dataclass
class EpisodeRecord:
    """What happened on the page during one episode, in order.

    Attributes:
        task_id: the task.
        values: field key -> current value.
        events: ordered log; ``{"kind": "change", "key": k, "value": v}`` when a field's value
            changes, ``{"kind": "activate", "key": c, "values": {...}}`` when a control is
            activated (with a snapshot of all field values at that moment).
        message: the text of ``send_msg_to_user`` if the episode ended with one.
    """

    task_id: str
    values: dict[str, Value]
    events: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "values": dict(self.values), "events": list(self.events),
                "message": self.message}


class WebWorld(Protocol):
    """A world model of a form page (simulated, LM-predicted or a real browser)."""

    def reset(self, task: Task) -> str:
        """Load the task's initial page; return the observation text."""

    def step(self, action: Action) -> str:
        """Apply one action; return the new observation. Raises :class:`ActionError` (page
        unchanged) when the action is invalid on the page."""

    def inject(self, text: str) -> str:
        """Render adversary text into the current page; return the new observation."""

    def clear_injections(self) -> str:
        """Remove every rendered injection from the page; return the new observation."""

    def observe(self) -> str:
        """The current observation text."""

    def record(self) -> EpisodeRecord:
        """Field values and the ordered event log so far."""

    def close(self) -> None:
        """Release resources."""
