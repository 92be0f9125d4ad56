"""Accessibility-tree nodes and the one serializer every web world prints through.

The text format follows BrowserGym's flattened accessibility tree: one node per line, indented
by one tab per depth, ``[bid] role 'name'`` (the bracketed id only when the element has a
``bid`` attribute) followed by the properties that matter to an agent — ``value='…'`` for text
boxes and combo boxes, ``checked``, ``selected``, ``disabled``. Names and values are printed
with Python's ``repr`` so quotes and newlines are unambiguous. The root is
``RootWebArea 'title'``.

:func:`from_cdp` turns Chromium's ``Accessibility.getFullAXTree`` into the same node model,
normalized so that it prints exactly what the simulated world prints for the same page state:

- ignored nodes and layout-only roles (``generic``, ``none``, ``rowgroup``, ``MenuListPopup``,
  ``InlineTextBox``, ``LineBreak``) are dropped and their children promoted;
- label-like nodes whose text already is another node's name (``LabelText``, ``Legend``,
  ``caption``) are dropped with their subtree;
- a ``StaticText`` child that repeats its parent's name, and the text inside a text box (shown
  as ``value``), are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

PROMOTE_ROLES = frozenset({"generic", "none", "presentation", "rowgroup", "MenuListPopup",
                           "InlineTextBox", "LineBreak", "ListMarker"})
DROP_SUBTREE_ROLES = frozenset({"LabelText", "Legend", "caption"})
VALUE_ROLES = frozenset({"textbox", "combobox"})


@dataclass
class AXNode:
    """One accessibility node.

    Attributes:
        role: ARIA/Chromium role (``textbox``, ``combobox``, ``option``, ``radio``, …).
        name: accessible name ('' when none).
        bid: the element's ``bid`` attribute, or None.
        value: current value of a text box or combo box (None for other roles).
        checked: True/False for checkboxes and radio buttons, None otherwise.
        selected: True/False for options, None otherwise.
        disabled: whether the element is disabled.
        children: child nodes in document order.
    """

    role: str
    name: str = ""
    bid: str | None = None
    value: str | None = None
    checked: bool | None = None
    selected: bool | None = None
    disabled: bool = False
    children: list["AXNode"] = field(default_factory=list)

    def line(self) -> str:
        """This node's own line, without indentation."""
        head = f"[{self.bid}] " if self.bid is not None else ""
        parts = [f"{head}{self.role} {self.name!r}"]
        if self.value is not None:
            parts.append(f"value={self.value!r}")
        if self.checked:
            parts.append("checked")
        if self.selected:
            parts.append("selected")
        if self.disabled:
            parts.append("disabled")
        return " ".join(parts)

    def walk(self) -> Iterator["AXNode"]:
        """All nodes of the subtree, pre-order."""
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, bid: str) -> "AXNode | None":
        """The node with this bid in the subtree, or None."""
        for n in self.walk():
            if n.bid == bid:
                return n
        return None


def serialize(root: AXNode, depth: int = 0) -> str:
    """The flattened tree text: one line per node, a tab per depth level, ending without newline.

    ``depth`` indents the whole subtree (to print part of a page on its own).
    """
    lines: list[str] = []

    def rec(node: AXNode, level: int) -> None:
        lines.append("\t" * level + node.line())
        for c in node.children:
            rec(c, level + 1)

    rec(root, depth)
    return "\n".join(lines)


def _prop(node: Mapping, name: str):
    for p in node.get("properties", ()):
        if p.get("name") == name:
            return p.get("value", {}).get("value")
    return None


def from_cdp(nodes: Iterable[Mapping], bid_by_backend: Mapping[int, str]) -> AXNode:
    """Build the normalized tree from ``Accessibility.getFullAXTree`` output.

    Args:
        nodes: the ``nodes`` list of the CDP response.
        bid_by_backend: ``backendDOMNodeId`` -> value of the element's ``bid`` attribute.

    Returns:
        The ``RootWebArea`` node.

    Raises:
        ValueError: if the response has no ``RootWebArea``.
    """
    by_id = {n["nodeId"]: n for n in nodes}
    root = next((n for n in nodes if n.get("role", {}).get("value") == "RootWebArea"
                 and not n.get("parentId")), None)
    if root is None:
        root = next((n for n in nodes if n.get("role", {}).get("value") == "RootWebArea"), None)
    if root is None:
        raise ValueError("accessibility tree has no RootWebArea")

    def build(raw: Mapping) -> list[AXNode]:
        role = raw.get("role", {}).get("value", "")
        kids: list[AXNode] = []
        for cid in raw.get("childIds", ()):
            child = by_id.get(cid)
            if child is not None:
                kids.extend(build(child))
        if role in DROP_SUBTREE_ROLES:
            return []
        if raw.get("ignored") or role in PROMOTE_ROLES:
            return kids
        name = str(raw.get("name", {}).get("value", "") or "")
        node = AXNode(role=role, name=name, bid=bid_by_backend.get(raw.get("backendDOMNodeId")))
        if role in VALUE_ROLES:
            node.value = str(raw.get("value", {}).get("value", "") or "")
            kids = [k for k in kids if k.role != "StaticText"]
        if role in ("checkbox", "radio"):
            node.checked = _prop(raw, "checked") == "true"
        if role == "option":
            node.selected = bool(_prop(raw, "selected"))
        node.disabled = bool(_prop(raw, "disabled"))
        if role == "StaticText":
            kids = []
        node.children = [k for k in kids if not (k.role == "StaticText" and name and k.name == name)]
        return [node]

    built = build(root)
    return built[0]
