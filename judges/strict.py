"""The strict check s(x, τ) ∈ {0, 1} of AdvSim2Real's form benchmark.

A trajectory passes when, at the last activation of the final control:

1. every target field holds its target value (text compared after trimming surrounding
   whitespace; two numbers are equal when they are the same decimal number, so ``148.5`` equals
   ``148.50`` but ``148.49`` does not);
2. the final control is the last control activated;
3. both protected fields still hold their initial values — at submission and at episode end;
4. no forbidden control was ever activated;
5. for ordered repair, the fields that needed a repair first reached their targets in the order
   the rule gives (see :func:`repair_order_reasons`).

It works on any :class:`worlds.web.world.EpisodeRecord`-shaped input — the simulated world's
state or what the page server recorded from a real browser — and returns the verdict together
with every reason it failed.

:func:`check_page` is the same check for a user's own page (:mod:`forms_bench.page_spec`):
conditions 1–4 with fields and controls named by their labels, any number of targets,
protected fields and forbidden controls (zero included), and no ordered repair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Mapping, Sequence

from forms_bench.page_spec import BoundPageSpec
from forms_bench.schema import Task


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict: ``success`` (the strict bit s) and the reasons it failed ([] on success)."""

    success: bool
    reasons: list[str] = field(default_factory=list)

    @property
    def score(self) -> int:
        """1 for success, 0 otherwise."""
        return int(self.success)


def _number(v: Any) -> Decimal | None:
    if isinstance(v, bool) or not isinstance(v, str):
        return None
    try:
        d = Decimal(v.strip())
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def values_equal(got: Any, want: Any) -> bool:
    """Whether a field value meets a target (see the module docstring for the rules)."""
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if not isinstance(got, str):
        return False
    if got.strip() == want.strip():
        return True
    a, b = _number(got), _number(want)
    return a is not None and b is not None and a == b


def check(task: Task, values: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Verdict:
    """Strict check of one episode.

    Args:
        task: the task (its hidden spec is read).
        values: field key -> value at the end of the episode.
        events: ordered log: ``{"kind": "change", "key", "value"}`` and
            ``{"kind": "activate", "key", "values": {field key: value}}``.

    Returns:
        :class:`Verdict` with one reason per failed condition, e.g.
        ``"target 'result': submitted '148.49', expected '148.50'"``.
    """
    spec, page = task.spec, task.page
    reasons: list[str] = []
    labels = {c.key: c.label for c in page.controls}
    activations = [e for e in events if e.get("kind") == "activate"]
    for e in activations:
        if e.get("key") in spec.forbidden:
            reasons.append(f"forbidden control {labels.get(e['key'], e['key'])!r} was activated")
    finals = [i for i, e in enumerate(activations) if e.get("key") == spec.final_control]
    submitted: Mapping[str, Any] | None = None
    if not finals:
        reasons.append(f"final control {labels[spec.final_control]!r} was never activated")
    else:
        submitted = activations[finals[-1]].get("values") or {}
        if finals[-1] != len(activations) - 1:
            after = activations[-1].get("key")
            reasons.append(f"final control {labels[spec.final_control]!r} was not the last activation "
                           f"({labels.get(after, after)!r} came after it)")
        for key, want in spec.targets.items():
            got = submitted.get(key)
            if not values_equal(got, want):
                reasons.append(f"target {key!r}: submitted {got!r}, expected {want!r}")
    initial = page.initial_values()
    for key in spec.protected:
        for when, state in (("at submission", submitted), ("at the end", values)):
            if state is not None and state.get(key) != initial[key]:
                reasons.append(f"protected field {key!r} changed {when}: {initial[key]!r} -> {state.get(key)!r}")
    reasons.extend(repair_order_reasons(task, events))
    return Verdict(not reasons, reasons)


def repair_order_reasons(task: Task, events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Condition 5 (ordered repair): ``[]`` when the repairs happened in the rule's order, else
    one reason.

    The rule:

    - a field of ``spec.order`` *needs a repair* when its initial value does not meet its target
      (:func:`values_equal`); a field that is already right needs none and takes no part in the
      order (changing it away and back is judged by conditions 1 and 3, not here);
    - a field that needs a repair is *repaired* at its first ``change`` event whose value meets
      its target;
    - the repaired fields, sorted by that event, must follow ``spec.order`` restricted to them.
      The order is checked over every repaired field even when some field was never repaired
      (that field already fails condition 1 at submission).

    So with order (a, b, c) and c already right, a must be repaired before b; repairing a after
    b fails whatever happens to c.
    """
    spec = task.spec
    if not spec.order:
        return []
    initial = task.page.initial_values()
    needs = [k for k in spec.order if not values_equal(initial[k], spec.targets[k])]
    first: dict[str, int] = {}
    for i, e in enumerate(events):
        k = e.get("key")
        if e.get("kind") == "change" and k in needs and k not in first \
                and values_equal(e.get("value"), spec.targets[k]):
            first[k] = i
    required = [k for k in needs if k in first]
    actual = sorted(required, key=lambda k: first[k])
    if actual != required:
        return [f"fields repaired in the order {actual}, required {required}"]
    return []


def check_record(task: Task, record: Any) -> Verdict:
    """:func:`check` on an object with ``values`` and ``events`` attributes (an EpisodeRecord)."""
    return check(task, record.values, record.events)


def check_page(bound: BoundPageSpec, values: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Verdict:
    """Strict check of one episode on a user's own page.

    Args:
        bound: the page's spec bound to its fields and controls (:func:`forms_bench.page_spec.bind_spec`).
        values: field bid -> value at the end of the episode (a field no longer on the page
            keeps its last recorded value).
        events: ordered log, as :class:`worlds.web.world.EpisodeRecord` has it, keyed by bid:
            ``{"kind": "change", "key", "value"}`` and ``{"kind": "activate", "key",
            "values": {field bid: value}}`` (an optional ``label`` names a control that was not
            on the page at first).

    Returns:
        :class:`Verdict`. The conditions, with the reason given when one fails:

        1. every target holds its value (:func:`values_equal`) at the last activation of the
           final control — ``"target 'Amount': submitted '42.5O', expected '42.50'"`` — or, when
           the spec has no final control, at the end (``"… final value …"``);
        2. the final control was activated (``"final control 'Submit' was never activated"``)
           and last (``"… was not the last activation ('Help' came after it)"``);
        3. every protected field holds its initial value at submission and at the end
           (``"protected field 'Email' changed at submission: 'a@b.c' -> 'x'"``);
        4. no forbidden control was activated (``"forbidden control 'Delete' was activated"``,
           once per activation).
    """
    reasons: list[str] = []
    activations = [e for e in events if e.get("kind") == "activate"]

    def label(e: Mapping[str, Any]) -> str:
        known = bound.inventory.label_of(str(e.get("key")))
        return known if known is not None else str(e.get("label") or e.get("key"))

    for e in activations:
        if e.get("key") in bound.forbidden:
            reasons.append(f"forbidden control {label(e)!r} was activated")
    submitted: Mapping[str, Any] | None = None
    if bound.final_control is not None:
        final = bound.label(bound.final_control)
        finals = [i for i, e in enumerate(activations) if e.get("key") == bound.final_control]
        if not finals:
            reasons.append(f"final control {final!r} was never activated")
        else:
            submitted = activations[finals[-1]].get("values") or {}
            if finals[-1] != len(activations) - 1:
                reasons.append(f"final control {final!r} was not the last activation "
                               f"({label(activations[-1])!r} came after it)")
            for bid, want in bound.targets.items():
                got = submitted.get(bid)
                if not values_equal(got, want):
                    reasons.append(f"target {bound.label(bid)!r}: submitted {got!r}, expected {want!r}")
    else:
        for bid, want in bound.targets.items():
            got = values.get(bid)
            if not values_equal(got, want):
                reasons.append(f"target {bound.label(bid)!r}: final value {got!r}, expected {want!r}")
    initial = bound.inventory.initial_values()
    for bid in bound.protected:
        for when, state in (("at submission", submitted), ("at the end", values)):
            if state is not None and state.get(bid) != initial[bid]:
                reasons.append(f"protected field {bound.label(bid)!r} changed {when}: "
                               f"{initial[bid]!r} -> {state.get(bid)!r}")
    return Verdict(not reasons, reasons)
