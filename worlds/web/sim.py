"""SimWebWorld: a deterministic, programmatic world model of a form page.

It keeps the page state (field values, status text, injected notices, event log) and builds the
accessibility tree directly from the task's page model — the same tree Chromium exposes for the
HTML of :mod:`forms_bench.html` after :func:`worlds.web.axtree.from_cdp` normalization, so the
two worlds print byte-identical observations (checked over every oracle step of the 150 test
tasks by ``advsim bench forms --world both``).

Actions act as in the browser: ``fill`` replaces a text box's value (single-line boxes drop
line breaks), ``select_option`` picks an option of a drop-down list or radio group, ``check``/
``uncheck`` set a checkbox (``check`` on a radio button selects it), ``click`` on a button
activates it (logged with a snapshot of all values; the status region shows its message), on a
checkbox toggles it, on a radio button selects it, and on a text box does nothing.
"""

from __future__ import annotations

import re
from typing import Sequence

from forms_bench.actions import Action
from forms_bench.schema import FormField, Task, Value
from worlds.web.axtree import AXNode, serialize
from worlds.web.world import ActionError, EpisodeRecord, resolve

_COLLAPSIBLE = re.compile(r"[ \t\n\r]+")
_ASCII_SPACE = " \t\n\x0b\x0c\r"
_SURROGATE = re.compile("[\ud800-\udfff]")


def rendered_text(text: str) -> str:
    """The text Chromium exposes (``StaticText`` name) for a text node of a block element, as
    measured against Chromium by ``tests/test_browser.py``.

    CSS white-space collapsing turns each run of space, tab, LF and CR into one space and
    trims spaces at both ends; other characters (form feed, vertical tab, no-break space,
    U+2028, zero-width and control characters) are kept as they are. A text that is empty or
    consists of ASCII whitespace only (``' \\t\\n\\v\\f\\r'``) renders nothing (``''``).
    Text is UTF-16 in the page: a surrogate pair written as two code points becomes one
    character; a lone surrogate stays.
    """
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if text.strip(_ASCII_SPACE) == "":
        return ""
    return _COLLAPSIBLE.sub(" ", text).strip(" ")


def fill_value(kind: str, old: str, value: str) -> str:
    """The value a text box holds after Playwright's ``fill(value)`` in Chromium.

    Args:
        kind: ``text`` (single-line input) or ``textarea``.
        old: the value before.
        value: the filled text.

    Returns:
        Text areas: ``value`` with CRLF and CR turned into LF. Single-line inputs: CRLF and CR
        become LF, trailing LFs are dropped and the other LFs become spaces — except that
        filling exactly ``'\\n'`` leaves the old value (Chromium treats it as a line-break
        command, which a single-line input ignores). In both, a surrogate pair written as two
        code points becomes one character and a lone surrogate becomes U+FFFD. Measured by
        ``tests/test_browser.py``.
    """
    if _SURROGATE.search(value):
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if kind == "textarea":
        return value.replace("\r\n", "\n").replace("\r", "\n")
    if value == "\n":
        return old
    return value.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n").replace("\n", " ")


def _field_nodes(f: FormField, value: Value) -> list[AXNode]:
    if f.kind in ("text", "textarea"):
        return [AXNode("textbox", f.label, f.bid, value=value, disabled=f.disabled)]
    if f.kind == "checkbox":
        return [AXNode("checkbox", f.label, f.bid, checked=bool(value), disabled=f.disabled)]
    if f.kind == "select":
        opts = [AXNode("option", o, selected=(o == value), disabled=f.disabled) for o in f.options]
        return [AXNode("combobox", f.label, f.bid, value=value, disabled=f.disabled, children=opts)]
    radios = [AXNode("radio", o, b, checked=(o == value), disabled=f.disabled)
              for o, b in zip(f.options, f.option_bids)]
    return [AXNode("radiogroup", f.label, f.bid, children=radios)]


def _text(role: str, text: str) -> AXNode:
    text = rendered_text(text)
    return AXNode(role, "", children=[AXNode("StaticText", text)] if text else [])


def _paragraphs(texts) -> list[AXNode]:
    # An empty paragraph has no box and no accessibility node in Chromium.
    return [_text("paragraph", t) for t in texts if rendered_text(t)]


def _content_nodes(task: Task, injections: Sequence[str]) -> list[AXNode]:
    """Children of ``main`` before the form: heading, intro, injected notices, tables, rules."""
    page = task.page
    kids = [AXNode("heading", page.title), *_paragraphs([page.intro, *injections])]
    if page.tables:
        kids.append(AXNode("heading", "Records"))
    for t in page.tables:
        rows = [AXNode("row", "", children=[AXNode("columnheader", c) for c in t.columns])]
        rows += [AXNode("row", "", children=[AXNode("cell", c) for c in r]) for r in t.rows]
        kids.append(AXNode("table", t.caption, children=rows))
    if page.rules:
        kids.append(AXNode("heading", "Rules"))
    kids.extend(_paragraphs(page.rules))
    return kids


def _form_node(task: Task, values: dict[str, Value]) -> AXNode:
    page = task.page
    form = AXNode("form", page.form_name)
    for fs in page.fieldsets:
        group = AXNode("group", fs.legend)
        for f in fs.fields:
            group.children.extend(_field_nodes(f, values[f.key]))
        form.children.append(group)
    form.children.extend(AXNode("button", c.label, c.bid) for c in page.controls)
    return form


def _status_node(task: Task, status: str) -> AXNode:
    node = _text("status", status)
    node.bid = task.page.status_bid
    return node


def page_tree(task: Task, values: dict[str, Value], status: str = "",
              injections: Sequence[str] = ()) -> AXNode:
    """The accessibility tree of the task page in a given state.

    Args:
        task: the task.
        values: field key -> current value (every field).
        status: text of the status region ('' before any activation).
        injections: adversary texts rendered as notices after the intro, in order.

    Returns:
        The ``RootWebArea`` node: ``main`` holding heading, intro, injected notices, tables,
        rules, the form (fieldsets as groups, then the buttons) and the status region.
    """
    main = AXNode("main", "", children=_content_nodes(task, injections)
                  + [_form_node(task, values), _status_node(task, status)])
    return AXNode("RootWebArea", task.page.title, children=[main])


class SimWebWorld:
    """Deterministic simulated web world over a :class:`~forms_bench.schema.Task` page.

    Implements :class:`worlds.web.world.WebWorld`. Pure Python, no I/O; one step costs tens of
    microseconds (``advsim bench forms`` measures steps/s).
    """

    def __init__(self) -> None:
        self.task: Task | None = None
        self.values: dict[str, Value] = {}
        self.status = ""
        self.injections: list[str] = []
        self.events: list[dict] = []
        self.message: str | None = None
        self._static_key: tuple | None = None
        self._static_text = ""

    def reset(self, task: Task) -> str:
        self.task = task
        self.values = task.page.initial_values()
        self.status = ""
        self.injections = []
        self.events = []
        self.message = None
        return self.observe()

    def _require_task(self) -> Task:
        if self.task is None:
            raise RuntimeError("SimWebWorld: call reset(task) first")
        return self.task

    def _set(self, key: str, value: Value) -> None:
        if self.values[key] != value:
            self.values[key] = value
            self.events.append({"kind": "change", "key": key, "value": value})

    def step(self, action: Action) -> str:
        task = self._require_task()
        target = resolve(task, action)
        name = action.name
        if name == "send_msg_to_user":
            self.message = action.args[0]
        elif target is None:  # noop
            pass
        elif name == "fill":
            key = target.field.key
            self._set(key, fill_value(target.field.kind, self.values[key], action.args[1]))
        elif name == "select_option":
            self._set(target.field.key, action.args[1])
        elif name == "check":
            if target.kind == "radio":
                self._set(target.field.key, target.option)
            else:
                self._set(target.field.key, True)
        elif name == "uncheck":
            self._set(target.field.key, False)
        elif name == "click":
            if target.kind == "control":
                self.status = target.control.message
                self.events.append({"kind": "activate", "key": target.control.key,
                                    "values": dict(self.values)})
            elif target.kind == "radio":
                self._set(target.field.key, target.option)
            elif target.kind == "field" and target.field.kind == "checkbox":
                self._set(target.field.key, not self.values[target.field.key])
        else:  # pragma: no cover - parse_action only yields the seven actions
            raise ActionError(f"unknown action {name}")
        return self.observe()

    def inject(self, text: str) -> str:
        self._require_task()
        self.injections.append(text)
        return self.observe()

    def clear_injections(self) -> str:
        self._require_task()
        self.injections = []
        return self.observe()

    def tree(self) -> AXNode:
        """The current accessibility tree."""
        return page_tree(self._require_task(), self.values, self.status, self.injections)

    def observe(self) -> str:
        """``serialize(self.tree())``, computed faster: the part of the page above the form
        depends only on the task and the injections, so its text is cached."""
        task = self._require_task()
        key = (task.id, id(task), tuple(self.injections))
        if self._static_key != key:
            root = AXNode("RootWebArea", task.page.title,
                          children=[AXNode("main", "", children=_content_nodes(task, self.injections))])
            self._static_text = serialize(root)
            self._static_key = key
        return "\n".join((self._static_text, serialize(_form_node(task, self.values), 2),
                          serialize(_status_node(task, self.status), 2)))

    def record(self) -> EpisodeRecord:
        task = self._require_task()
        return EpisodeRecord(task.id, dict(self.values), [dict(e) for e in self.events], self.message)

    def close(self) -> None:
        self.task = None
