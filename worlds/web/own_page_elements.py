"""What the elements of a user's page are, read from its normalized accessibility tree.

The roles of fields and controls, an element's kind (:func:`_kind`: text, drop-down list, radio
group, checkbox, radio button or other), the target of an action on the live page
(:class:`LiveTarget`) and the page's fields and controls as first shown (:func:`build_inventory`,
a :class:`forms_bench.page_spec.PageInventory`); see :mod:`worlds.web.own_page`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forms_bench.page_spec import PageControl, PageField, PageInventory, normalize_label
from worlds.web.axtree import FRAME_ROLES, AXNode

TEXT_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "slider", "Date", "DateTime", "InputTime"})
"""Roles of fields that hold text (a slider's value is its number as text)."""
FILL_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "Date", "DateTime", "InputTime"})
"""Roles ``fill`` acts on (plus a combo box without options: an editable one)."""
TOGGLE_ROLES = {"checkbox": "checkbox", "switch": "checkbox", "radio": "radio"}
CONTROL_ROLES = frozenset({"button", "link", "menuitem", "tab"})
"""Roles of controls: what a spec's ``final_control`` and ``forbidden`` name."""
FIELD_ROLES = TEXT_ROLES | {"combobox"} | set(TOGGLE_ROLES)


@dataclass(frozen=True)
class LiveTarget:
    """What an action's bid is on the live page.

    Attributes:
        bid: the action's bid.
        role: its accessibility role; name: its accessible name.
        kind: ``text`` (fill), ``select`` (a drop-down list), ``radiogroup``, ``checkbox``,
            ``radio`` or ``other`` (anything else: clicked).
        options: option texts (select, radio group).
        option_bid: for ``select_option`` on a radio group: the chosen radio button's bid.
        option: the chosen option's text (``select_option``).
    """

    bid: str
    role: str
    name: str
    kind: str
    options: tuple[str, ...] = ()
    option_bid: str | None = None
    option: str | None = None

    def describe(self) -> str:
        """``[bid] role 'name'``."""
        return f"[{self.bid}] {self.role} {self.name!r}"


def _field_roles_below(node: AXNode) -> list[AXNode]:
    return [n for n in node.walk() if n is not node and n.role in FIELD_ROLES]


def _is_radio_group(node: AXNode) -> bool:
    if node.role == "radiogroup":
        return True
    if node.role != "group":
        return False
    below = _field_roles_below(node)
    return bool(below) and all(n.role == "radio" for n in below)


def _radios(node: AXNode) -> list[AXNode]:
    return [n for n in node.walk() if n.role == "radio" and n.bid is not None]


def _options(node: AXNode) -> list[str]:
    return [normalize_label(n.name) for n in node.walk() if n.role == "option"]


def _kind(node: AXNode) -> str:
    role = node.role
    if role in TEXT_ROLES:
        return "text"
    if role == "combobox":
        return "select" if _options(node) else "text"
    if role in TOGGLE_ROLES:
        return TOGGLE_ROLES[role]
    if _is_radio_group(node):
        return "radiogroup"
    return "other"


def build_inventory(tree: AXNode, state: dict[str, Any], url: str) -> PageInventory:
    """The fields and controls of a page (see the module docstring), from its normalized
    accessibility tree and its raw state (element bid -> value, from the recorder). Content of
    frames is left out."""
    fields: list[PageField] = []
    controls: list[PageControl] = []

    def rec(node: AXNode) -> None:
        if node.role in FRAME_ROLES:
            return
        if node.bid is not None:
            label = normalize_label(node.name)
            kind = _kind(node)
            if kind == "radiogroup":
                radios = _radios(node)
                f = PageField(node.bid, label, node.role, "radiogroup",
                              tuple(normalize_label(r.name) for r in radios), tuple(r.bid for r in radios),
                              disabled=node.disabled)
                fields.append(PageField(f.bid, f.label, f.role, f.kind, f.options, f.option_bids,
                                        f.value_in(state), f.disabled))
            elif kind != "other":
                options = tuple(_options(node)) if kind == "select" else ()
                fields.append(PageField(node.bid, label, node.role, kind, options, (),  # type: ignore[arg-type]
                                        state.get(node.bid), node.disabled))
            elif node.role in CONTROL_ROLES:
                controls.append(PageControl(node.bid, label, node.role))
        for c in node.children:
            rec(c)

    rec(tree)
    return PageInventory(normalize_label(tree.name), url, tuple(fields), tuple(controls))
