"""Oracle solver: reads the hidden spec and emits the shortest valid BrowserGym action sequence.

It proves every task solvable (``advsim bench forms --policy oracle`` must reach 150/150 strict
successes in the simulated world and in the browser) and produces warm-start demonstrations.
Targets are set in page order (in the rule's order for ordered repair), only where the initial
value differs; then the final control is clicked and a short message ends the episode.
"""

from __future__ import annotations

from forms_bench.actions import Action
from forms_bench.schema import Task


def solve(task: Task) -> list[Action]:
    """The oracle's action sequence for ``task`` (at most ``len(targets) + 2`` actions).

    Returns:
        Actions in order: one per target field that differs from its initial value
        (``fill`` for text boxes, ``select_option`` for drop-down lists and radio groups,
        ``check``/``uncheck`` for checkboxes), ``click`` on the final control, then
        ``send_msg_to_user``.
    """
    page, spec = task.page, task.spec
    keys = list(spec.order) + [f.key for f in page.fields() if f.key in spec.targets and f.key not in spec.order]
    actions: list[Action] = []
    for key in keys:
        f = page.field(key)
        want = spec.targets[key]
        if want == f.initial:
            continue
        if f.kind in ("text", "textarea"):
            actions.append(Action("fill", (f.bid, want)))
        elif f.kind in ("select", "radio"):
            actions.append(Action("select_option", (f.bid, want)))
        else:
            actions.append(Action("check" if want else "uncheck", (f.bid,)))
    final = page.control(spec.final_control)
    actions.append(Action("click", (final.bid,)))
    actions.append(Action("send_msg_to_user", (f"Done: pressed \"{final.label}\".",)))
    return actions
