"""Accessibility-tree nodes and the one serializer every web world prints through.

The text format follows BrowserGym's flattened accessibility tree: one node per line, indented
by one tab per depth, ``[bid] role 'name'`` (the bracketed id only when the element has a
``bid`` attribute) followed by the states that matter to an agent: ``value='…'`` (always for
text boxes, search boxes, spin buttons and combo boxes; for other roles when Chromium reports a
value, e.g. sliders, progress bars, date inputs), ``checked`` (``checked='mixed'`` for a mixed
checkbox), ``selected``, ``pressed``, ``disabled``, ``readonly``, ``required``. Names and
values are printed with Python's ``repr`` so quotes and newlines are unambiguous. The root is
``RootWebArea 'title'``.

:func:`from_cdp` turns Chromium's ``Accessibility.getFullAXTree`` into the same node model,
normalized so that it prints exactly what the simulated world prints for the same page state:

- ignored nodes and layout-only roles (``generic``, ``none``, ``rowgroup``, ``MenuListPopup``,
  ``InlineTextBox``, ``LineBreak``) are dropped and their children promoted;
- a label-like node (``LabelText``, ``Legend``, ``caption``) whose element gives another
  node its name (Chromium's ``labelledby`` relation: ``<label for>``, a wrapping ``<label>``, a
  fieldset's legend, a table's caption) is dropped with its text, which already is that name;
  the controls inside it are kept, promoted to its place — so ``<label>Full name
  <input></label>`` prints the text box ``'Full name'`` and ``<label>Agree <span><input
  type=checkbox></span></label>`` the checkbox. A label-like node that names nothing is
  printed (``LabelText ''`` with its text), as BrowserGym prints it;
- a ``StaticText`` child that repeats its parent's name, a ``StaticText`` of spaces only (the
  white space between inline elements), and the text inside a text box, search box or spin
  button (shown as ``value``), are dropped;
- an ``Iframe`` node gets the accessibility tree of its document as children (``frames``), so
  forms inside frames are observed; bids inside a frame carry the frame's id as a prefix, as in
  BrowserGym (:func:`dom_bids`).

Compared with BrowserGym's ``flatten_axtree_to_str`` on the same Chromium tree (from its
source; ``tests/test_axtree.py`` checks the idioms on hand-made pages), the interactive
elements, their names and the states above are the same; the differences are in bytes only:
no ``LabelText``/``Legend``/``caption`` lines for labels that name a control (their text is the
control's name), fewer properties (not printed: ``expanded``, ``hasPopup``, ``focused``,
``url``, ``level``, ``valuemin``/``valuemax``, ``orientation``, ``autocomplete``,
``invalid``), ``readonly`` marked (BrowserGym leaves it out), values printed as text
(``value='3.50'`` as typed, from Chromium's value text; ``value=''`` for an empty spin button,
where BrowserGym prints no value), and bids only for elements that carry a ``bid`` attribute
(BrowserGym numbers every element).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

PROMOTE_ROLES = frozenset({"generic", "none", "presentation", "rowgroup", "MenuListPopup",
                           "InlineTextBox", "LineBreak", "ListMarker"})
LABEL_ROLES = frozenset({"LabelText", "Legend", "caption"})
"""Label-like roles: dropped with their text when their element names another node."""
VALUE_ROLES = frozenset({"textbox", "combobox", "searchbox", "spinbutton"})
"""Roles whose value is always printed ('' when empty) and whose inner text is not."""
INTERACTIVE_ROLES = frozenset({
    "button", "checkbox", "combobox", "link", "listbox", "menu", "menubar", "menuitem",
    "menuitemcheckbox", "menuitemradio", "option", "radio", "radiogroup", "scrollbar", "searchbox",
    "slider", "spinbutton", "switch", "tab", "tablist", "textbox", "tree", "treeitem", "grid",
    "Iframe", "IframePresentational", "Date", "DateTime", "InputTime", "ColorWell", "PdfRoot"})
"""Roles kept (with their subtree) when they sit inside a label that names another node."""
FRAME_ROLES = frozenset({"Iframe", "IframePresentational"})


@dataclass
class AXNode:
    """One accessibility node.

    Attributes:
        role: ARIA/Chromium role (``textbox``, ``combobox``, ``option``, ``radio``, …).
        name: accessible name ('' when none).
        bid: the element's ``bid`` attribute (inside a frame: prefixed with the frame's id),
            or None.
        value: current value of a text box, search box, spin button or combo box ('' when
            empty), or of another role when the browser reports one; None otherwise.
        checked: True/False for checkboxes and radio buttons (``"mixed"`` for a mixed
            checkbox), None otherwise.
        selected: True/False for options (True for any selected node), None otherwise.
        pressed: True (``"mixed"``) for a pressed toggle button, None otherwise.
        disabled: whether the element is disabled.
        readonly: whether the element is read-only.
        required: whether the element is required.
        children: child nodes in document order.
    """

    role: str
    name: str = ""
    bid: str | None = None
    value: str | None = None
    checked: bool | str | None = None
    selected: bool | None = None
    disabled: bool = False
    children: list["AXNode"] = field(default_factory=list)
    readonly: bool = False
    required: bool = False
    pressed: bool | str | None = None

    def line(self) -> str:
        """This node's own line, without indentation."""
        head = f"[{self.bid}] " if self.bid is not None else ""
        parts = [f"{head}{self.role} {self.name!r}"]
        if self.value is not None:
            parts.append(f"value={self.value!r}")
        if self.checked is True:
            parts.append("checked")
        elif self.checked:
            parts.append(f"checked={self.checked!r}")
        if self.selected:
            parts.append("selected")
        if self.pressed is True:
            parts.append("pressed")
        elif self.pressed:
            parts.append(f"pressed={self.pressed!r}")
        if self.disabled:
            parts.append("disabled")
        if self.readonly:
            parts.append("readonly")
        if self.required:
            parts.append("required")
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


# -- DOM: bids and frames ----------------------------------------------------------------------


def frame_letters(n: int) -> str:
    """The ``n``-th (0-based) frame id BrowserGym gives frames: ``a`` … ``z``, ``aA`` … ``aZ``,
    ``bA`` …, ``zZ``, ``aAA`` …: lowercase first letter, uppercase others."""
    if n < 0:
        raise ValueError("n must be >= 0")
    length, block = 1, 26
    while n >= block:
        n -= block
        length += 1
        block *= 26
    digits = []
    for _ in range(length):
        n, d = divmod(n, 26)
        digits.append(d)
    digits.reverse()  # the last letter varies fastest, as in BrowserGym's generator
    return "".join(chr(ord("a" if i == 0 else "A") + d) for i, d in enumerate(digits))


@dataclass
class DomBids:
    """What the observation needs from ``DOM.getDocument``.

    Attributes:
        bids: backend node id -> bid of every element with a ``bid`` attribute, and of every
            frame element (``<iframe>``, ``<frame>``). An element inside a frame gets the
            frame's bid followed by its own ``bid`` attribute. A frame element's bid is its own
            ``bid`` attribute (after its frame's prefix), else a letter id (``a``, ``b``, …, in
            document order, skipping ids taken in that document) as BrowserGym gives frames.
        frames: backend node id of a frame element -> CDP frame id of its document.
        nodes: every backend node id of the document, frames and shadow trees included (to
            tell a stale index from a fresh one).
    """

    bids: dict[int, str] = field(default_factory=dict)
    frames: dict[int, str] = field(default_factory=dict)
    nodes: set[int] = field(default_factory=set)


def _attr(node: Mapping, name: str) -> str | None:
    a = node.get("attributes") or ()
    for i in range(0, len(a) - 1, 2):
        if a[i] == name:
            return a[i + 1]
    return None


def dom_bids(root: Mapping, prefix: str = "") -> DomBids:
    """Index the result of ``DOM.getDocument`` (``depth=-1, pierce=True``; pass its ``root``).

    Shadow trees, pseudo-elements and the documents of same-process frames are walked; see
    :class:`DomBids` for how bids and frame prefixes are assigned. ``prefix``: the bid of the
    frame element when ``root`` is the document of an out-of-process frame (read through its
    own CDP session).
    """
    out = DomBids()

    def document(doc: Mapping, prefix: str) -> None:
        # elements of one document, not descending into its frames' documents
        members: list[Mapping] = []
        stack = [doc]
        while stack:
            n = stack.pop()
            members.append(n)
            stack.extend(reversed(n.get("children") or ()))
            stack.extend(reversed(n.get("shadowRoots") or ()))
            stack.extend(reversed(n.get("pseudoElements") or ()))
        taken = {v for v in (_attr(n, "bid") for n in members) if v is not None}
        letters = (frame_letters(i) for i in range(10**9))
        for n in members:
            be = n.get("backendNodeId")
            if be is not None:
                out.nodes.add(be)
            own = _attr(n, "bid")
            is_frame = n.get("nodeName") in ("IFRAME", "FRAME")
            if is_frame and own is None:
                own = next(x for x in letters if x not in taken)
            if own is not None and be is not None:
                out.bids[be] = prefix + own
            if is_frame:
                sub = n.get("contentDocument")
                fid = n.get("frameId") or (sub or {}).get("frameId")
                if fid and be is not None:
                    out.frames[be] = fid
                if sub is not None:
                    document(sub, prefix + own)

    document(root, prefix)
    return out


# -- CDP accessibility tree --------------------------------------------------------------------


def _prop(node: Mapping, name: str):
    for p in node.get("properties", ()):
        if p.get("name") == name:
            return p.get("value", {}).get("value")
    return None


def _root(nodes: Sequence[Mapping]) -> Mapping | None:
    root = next((n for n in nodes if n.get("role", {}).get("value") == "RootWebArea"
                 and not n.get("parentId")), None)
    if root is None:
        root = next((n for n in nodes if n.get("role", {}).get("value") == "RootWebArea"), None)
    return root


def _labelling_elements(nodes: Iterable[Mapping]) -> set[int]:
    """Backend ids of the elements that give some node of one document its name
    (``labelledby``, plus the related nodes of the name source Chromium used)."""
    out: set[int] = set()
    for n in nodes:
        related = []
        for p in n.get("properties") or ():
            if p.get("name") == "labelledby":
                related.extend((p.get("value") or {}).get("relatedNodes") or ())
        for src in (n.get("name") or {}).get("sources") or ():
            if not src.get("superseded") and "value" in src:
                for key in ("nativeSourceValue", "attributeValue"):
                    related.extend((src.get(key) or {}).get("relatedNodes") or ())
        out.update(r["backendDOMNodeId"] for r in related if r.get("backendDOMNodeId") is not None)
    return out


def _number_text(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@dataclass
class AXDocument:
    """The accessibility tree of a document read through its own CDP session (an
    out-of-process frame), with what :func:`from_cdp` needs to print it.

    Attributes:
        nodes: ``Accessibility.getFullAXTree`` nodes of the document.
        bids: backend node id -> bid in that session (:attr:`DomBids.bids`, made with the
            frame's bid as prefix).
        frames: the frames inside it, as for :func:`from_cdp` (keyed by backend ids of that
            session).
    """

    nodes: Sequence[Mapping]
    bids: Mapping[int, str] = field(default_factory=dict)
    frames: Mapping[int, "Sequence[Mapping] | AXDocument"] = field(default_factory=dict)


@dataclass
class _Doc:
    """One document's lookups while :func:`from_cdp` builds its nodes."""

    by_id: dict
    bids: Mapping[int, str]
    frames: Mapping
    labelling: set[int]


def from_cdp(nodes: Iterable[Mapping], bid_by_backend: Mapping[int, str],
             frames: Mapping[int, Sequence[Mapping] | AXDocument] | None = None) -> AXNode:
    """Build the normalized tree from ``Accessibility.getFullAXTree`` output.

    Args:
        nodes: the ``nodes`` list of the CDP response (the main frame).
        bid_by_backend: ``backendDOMNodeId`` -> bid (:attr:`DomBids.bids`).
        frames: ``backendDOMNodeId`` of a frame element -> its document's tree, printed under
            the ``Iframe`` node: the ``nodes`` of ``Accessibility.getFullAXTree(frameId=…)``
            for a frame of the same process (same backend ids, same ``bid_by_backend`` and
            ``frames``), or an :class:`AXDocument` for a frame read through its own session. A
            frame not in it prints as an empty ``Iframe``.

    Returns:
        The ``RootWebArea`` node.

    Raises:
        ValueError: if the response has no ``RootWebArea``.
    """
    nodes = list(nodes)
    root = _root(nodes)
    if root is None:
        raise ValueError("accessibility tree has no RootWebArea")
    entered: set[tuple[int, int]] = set()

    def doc_of(tree: Sequence[Mapping], bids: Mapping[int, str], frames_: Mapping) -> _Doc:
        return _Doc({n["nodeId"]: n for n in tree}, bids, frames_, _labelling_elements(tree))

    def build(raw: Mapping, doc: _Doc, in_label: bool) -> list[AXNode]:
        role = raw.get("role", {}).get("value", "")
        backend = raw.get("backendDOMNodeId")
        name = str(raw.get("name", {}).get("value", "") or "")
        bid = doc.bids.get(backend)
        is_label = role in LABEL_ROLES and backend in doc.labelling
        promoted = bool(raw.get("ignored")) or role in PROMOTE_ROLES
        keep = not in_label or (not promoted and (role in INTERACTIVE_ROLES or bid is not None
                                                  or _prop(raw, "focusable") is True))
        # inside a label that names another node, only controls survive (its text is that name)
        child_in_label = is_label or (in_label and not keep)
        kids: list[AXNode] = []
        for cid in raw.get("childIds", ()):
            child = doc.by_id.get(cid)
            if child is not None:
                kids.extend(build(child, doc, child_in_label))
        sub = doc.frames.get(backend) if role in FRAME_ROLES else None
        if sub is not None and (id(doc.frames), backend) not in entered:
            entered.add((id(doc.frames), backend))
            if isinstance(sub, AXDocument):
                sub_doc = doc_of(sub.nodes, sub.bids, sub.frames)
            else:
                sub_doc = doc_of(sub, doc.bids, doc.frames)
            sub_root = _root(list(sub_doc.by_id.values()))
            if sub_root is not None:
                kids.extend(build(sub_root, sub_doc, False))
        if is_label or promoted or not keep:
            return kids
        if role in LABEL_ROLES and not kids:
            return []  # an empty label names nothing and shows nothing
        if role == "StaticText" and not name.strip(" "):
            return []  # collapsed white space between inline elements
        node = AXNode(role=role, name=name, bid=bid)
        if role in VALUE_ROLES or raw.get("value"):
            v = (raw.get("value") or {}).get("value", "")
            if isinstance(v, (int, float)):
                v = _prop(raw, "valuetext") or _number_text(v)
            node.value = str(v if v is not None else "")
        if role in VALUE_ROLES:
            kids = [k for k in kids if k.role != "StaticText"]
        checked = _prop(raw, "checked")
        if role in ("checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"):
            node.checked = "mixed" if checked == "mixed" else checked == "true"
        if role == "option":
            node.selected = bool(_prop(raw, "selected"))
        elif _prop(raw, "selected") is True:
            node.selected = True
        pressed = _prop(raw, "pressed")
        if pressed in ("true", "mixed"):
            node.pressed = True if pressed == "true" else "mixed"
        node.disabled = bool(_prop(raw, "disabled"))
        node.readonly = _prop(raw, "readonly") is True
        node.required = _prop(raw, "required") is True
        if role == "StaticText":
            kids = []
        node.children = [k for k in kids if not (k.role == "StaticText" and name and k.name == name)]
        return [node]

    built = build(root, doc_of(nodes, bid_by_backend, dict(frames or {})), False)
    return built[0]
