"""PageWorld: the browser world on a user's own web page (an HTML file or a local URL).

:class:`PageWorld` is a :class:`worlds.web.browser.BrowserWorld` whose page is not a generated
``forms_bench`` task: everything it knows about the page it reads from the live page.

- **Opening.** :meth:`PageWorld.reset` takes an HTML file (served, with the files next to it, by a
  private :class:`LocalFileServer` bound to 127.0.0.1; directory listings and other methods than
  GET/HEAD are refused) or an ``http(s)://`` URL on ``127.0.0.1``, ``localhost`` or ``[::1]``
  (checked to answer before Chromium is started). Any other address is refused.
- **Bids.** As BrowserGym marks elements before reading the accessibility tree, the world gives
  every element of the page's ``<body>`` (open shadow roots included; not ``<script>``,
  ``<style>``, ``<template>``, ``<noscript>``, nor frame elements, which keep BrowserGym's letter
  ids) a ``bid`` attribute when it has none: ``1``, ``2``, … in document order, skipping ids the
  page already uses, so an author's own bids are kept. A repeated bid keeps its first element;
  later ones get fresh ids (logged once). Elements a script adds later are marked, with the
  next numbers, before the next observation or action. Pages are marked the same way every
  time they are opened, so a trajectory written against one observation replays.
- **Actions** are resolved against the live page (:meth:`PageWorld._resolve`): the element with
  the bid in the current accessibility tree, its role and state decide whether the action
  applies (``fill``: text boxes, search boxes, spin buttons, date/time inputs, editable combo
  boxes; ``select_option``: a drop-down list's option or a radio group's radio button, by visible
  text; ``check``: checkboxes, switches, radio buttons; ``uncheck``: checkboxes, switches;
  ``click``: anything but a drop-down list or radio group). A bid that is not on the page, a
  disabled element or a wrong element type raises :class:`worlds.web.world.ActionError` with a
  message in the same form as on generated pages, e.g. ``fill: [7] checkbox 'I agree' is not a
  text box; fill works on text boxes only``; a hidden, covered or read-only element is refused as
  in :class:`BrowserWorld`. Elements inside frames are observed but cannot be acted on.
- **Recording.** An init script in every document of the page's context reports, through a
  function exposed by Playwright (so reports survive navigations), every change of a form
  control's value (``input``/``change`` events, plus a comparison after every action for
  changes made by scripts) and every activation of a control — a click on a ``button``, a
  submit/reset/button/image input, a link with ``href`` or an element with role ``button``,
  ``link``, ``menuitem`` or ``tab`` — with a snapshot of every field's value taken before the
  page's own handlers run. :meth:`PageWorld.record` returns them as an
  :class:`worlds.web.world.EpisodeRecord` keyed by field and control bids (events also carry the
  ``label``), with values per field of :attr:`PageWorld.inventory`; a field that is no longer on
  the page (after a navigation) keeps its last recorded value.
- **The page's fields and controls** as first shown are :attr:`PageWorld.inventory`
  (:class:`forms_bench.page_spec.PageInventory`): fields by accessible name — text boxes, search
  boxes, spin buttons, sliders, date inputs, combo boxes (drop-down lists with their options),
  checkboxes, switches, radio buttons, and radio groups (``radiogroup`` elements, and groups such
  as a ``<fieldset>`` whose only fields are radio buttons; value: the checked radio's label) —
  and controls (buttons, links, menu items, tabs). A spec's labels are bound to it
  (:func:`forms_bench.page_spec.bind_spec`) and judged by :func:`judges.strict.check_page`.

Everything else — one Chromium per world, a fresh context per episode, the watchdog, crash
recovery by replaying the episode in a new context, the accessibility-tree serializer — is
:class:`BrowserWorld`'s.
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

from playwright.sync_api import Error as PlaywrightError

from forms_bench.actions import Action
from forms_bench.page_spec import PageControl, PageField, PageInventory, normalize_label
from forms_bench.server import serve_in_thread, stop_serving
from worlds.web.axtree import FRAME_ROLES, AXNode
from worlds.web.browser import BrowserWorld
from worlds.web.browser_actions import _css_string
from worlds.web.world import ActionError, EpisodeRecord

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts a page URL may name."""

TEXT_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "slider", "Date", "DateTime", "InputTime"})
"""Roles of fields that hold text (a slider's value is its number as text)."""
FILL_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "Date", "DateTime", "InputTime"})
"""Roles ``fill`` acts on (plus a combo box without options: an editable one)."""
TOGGLE_ROLES = {"checkbox": "checkbox", "switch": "checkbox", "radio": "radio"}
CONTROL_ROLES = frozenset({"button", "link", "menuitem", "tab"})
"""Roles of controls: what a spec's ``final_control`` and ``forbidden`` name."""
FIELD_ROLES = TEXT_ROLES | {"combobox"} | set(TOGGLE_ROLES)

# Marks every element of <body> (open shadow roots included) that has no bid, or a bid already
# used earlier in document order, with the next free number; then starts the recorder of this
# document if it has not started (its first state is returned).
_MARK_JS = """() => {
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'IFRAME', 'FRAME']);
  const els = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      els.push(el);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  if (document.body) walk(document.body);
  const seen = new Set();
  const fresh = [];
  let duplicates = 0;
  for (const el of els) {
    if (SKIP.has(el.tagName)) continue;
    const b = el.getAttribute('bid');
    if (b !== null && b !== '' && !seen.has(b)) { seen.add(b); continue; }
    if (b !== null && b !== '') duplicates++;
    fresh.push(el);
  }
  let next = window.__advsimNextBid || 1;
  for (const el of fresh) {
    while (seen.has(String(next))) next++;
    el.setAttribute('bid', String(next));
    seen.add(String(next));
    next++;
  }
  window.__advsimNextBid = next;
  const rec = window.__advsimRecorder;
  const state = rec && !rec.started ? rec.start() : null;
  return {marked: fresh.length, duplicates: duplicates, state: state};
}"""

# Installed in every document before the page's scripts (main frame only). Reports go to the
# exposed function __advsimReport: {kind: 'change', values: {bid: value}} with every element
# changed since the last report (one report, so a radio group moves from one option to the
# other without passing through none), {kind: 'activate', key: bid, values: {bid: value}};
# `pending` holds their promises for flush().
_RECORDER_JS = r"""(() => {
  if (window.top !== window || window.__advsimRecorder) return;
  const CONTROL = 'button, input[type=submit], input[type=button], input[type=reset], ' +
    'input[type=image], a[href], [role=button], [role=link], [role=menuitem], [role=tab]';
  const NOT_FIELD = new Set(['button', 'submit', 'reset', 'image', 'hidden']);
  const ARIA_TOGGLE = /^(checkbox|switch|radio)$/;
  const pending = [];
  let last = null;
  function isField(el) {
    const t = el.tagName;
    if (t === 'INPUT') return !NOT_FIELD.has(el.type);
    if (t === 'TEXTAREA' || t === 'SELECT') return true;
    if (el.getAttribute('aria-checked') !== null && ARIA_TOGGLE.test(el.getAttribute('role') || '')) return true;
    const ce = el.getAttribute('contenteditable');
    return ce === '' || ce === 'true' || ce === 'plaintext-only';
  }
  function valueOf(el) {
    const t = el.tagName;
    if (t === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) return el.checked;
    if (t === 'INPUT' || t === 'TEXTAREA') return el.value;
    if (t === 'SELECT') {
      const o = el.options[el.selectedIndex];
      return o ? o.label.replace(/\s+/g, ' ').trim() : '';
    }
    if (el.getAttribute('aria-checked') !== null && el.getAttribute('contenteditable') === null) {
      return el.getAttribute('aria-checked') === 'true';
    }
    return el.innerText;
  }
  function state() {
    const out = {};
    const walk = (root) => {
      for (const el of root.querySelectorAll('[bid]')) {
        if (isField(el)) out[el.getAttribute('bid')] = valueOf(el);
      }
      for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
    };
    walk(document);
    return out;
  }
  function send(ev) {
    const report = window.__advsimReport;
    if (typeof report !== 'function') return;
    try { pending.push(Promise.resolve(report(ev)).catch(() => null)); } catch (e) { /* gone */ }
  }
  function sync() {
    if (last === null) return;
    const now = state();
    const changed = {};
    let any = false;
    for (const k of Object.keys(now)) {
      if (last[k] !== now[k]) { changed[k] = now[k]; any = true; }
    }
    last = now;
    if (any) send({kind: 'change', values: changed});
  }
  window.addEventListener('input', sync, true);
  window.addEventListener('change', sync, true);
  window.addEventListener('click', (e) => {
    if (last === null) return;
    let ctl = null;
    for (const n of e.composedPath()) {
      if (n === document || n === window) break;
      if (n.nodeType === 1 && n.matches(CONTROL)) { ctl = n; break; }
    }
    sync();
    if (ctl && ctl.hasAttribute('bid')) {
      send({kind: 'activate', key: ctl.getAttribute('bid'), values: state()});
    }
  }, true);
  const rec = {
    started: false,
    start() { this.started = true; last = state(); return last; },
    sync: sync,
    state: state,
    flush() { const n = pending.length; return Promise.all(pending).then(() => n); },
  };
  Object.defineProperty(window, '__advsimRecorder', {value: rec, configurable: false, writable: false});
})();"""

# Adversary text goes after the intro paragraph of <main> (or of <body>), after earlier
# injections; at the top of <main>/<body> when there is no paragraph.
_INJECT_JS = """(text) => {
  const root = document.querySelector('main') || document.body;
  const injected = document.querySelectorAll('p[data-advsim-injection]');
  const anchor = injected.length ? injected[injected.length - 1] : root.querySelector(':scope > p');
  const p = document.createElement('p');
  p.setAttribute('data-advsim-injection', String(injected.length));
  p.textContent = text;
  if (anchor) anchor.after(p); else root.prepend(p);
}"""

_CLEAR_INJECTIONS_JS = """() => {
  document.querySelectorAll('p[data-advsim-injection]').forEach((p) => p.remove());
}"""


class PageError(ValueError):
    """A page that cannot be opened: not an existing file, not a local URL, or a URL that does
    not answer with a page."""


@dataclass(frozen=True)
class PageSource:
    """Where a user's page comes from.

    Attributes:
        kind: ``file`` (an HTML file served by a :class:`LocalFileServer`) or ``url``.
        name: a short name for logs (the file name, or the URL).
        path: the file (``file``).
        url: the URL (``url``).
    """

    kind: Literal["file", "url"]
    name: str
    path: Path | None = None
    url: str | None = None

    # the world's id of the page in log lines (BrowserWorld names tasks by `.id`)
    @property
    def id(self) -> str:
        """The name (BrowserWorld's log lines name a task by its id)."""
        return self.name


def page_source(page: str | Path) -> PageSource:
    """Parse a page argument: a path to an HTML file (or a ``file://`` URL), or an
    ``http(s)://`` URL on 127.0.0.1 / localhost / [::1].

    Raises:
        PageError: the file does not exist, or the URL is not local.
    """
    text = str(page)
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if parts.hostname not in LOCAL_HOSTS:
            raise PageError(f"{text}: only local pages are opened (http://127.0.0.1:…, "
                            f"http://localhost:… or http://[::1]:…); got host {parts.hostname!r}")
        return PageSource("url", text, url=text)
    if "://" in text and not text.startswith("file://"):
        raise PageError(f"{text}: a page is an HTML file or an http(s) URL on 127.0.0.1/localhost")
    path = Path(unquote(urlsplit(text).path)) if text.startswith("file://") else Path(text)
    if not path.is_file():
        raise PageError(f"{path}: no such HTML file")
    return PageSource("file", path.name, path=path.resolve())


class _FileHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files under one folder; no listings; other methods 405."""

    server_version = "advsim-pages"
    sys_version = ""

    def list_directory(self, path):  # noqa: D401 - stdlib hook
        self.send_error(404, "directory listings are not served")
        return None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("file server: " + format, *args)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def _refuse(self) -> None:
        self.send_error(405, f"{self.command} is not handled: this server only serves the page's files")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse


class LocalFileServer:
    """Serves the files of one folder on ``http://127.0.0.1:<port>`` (an ephemeral port; never
    another interface), GET and HEAD only, without directory listings, from a daemon thread.

    Args:
        root: the folder.

    Raises:
        NotADirectoryError: ``root`` is not a folder (from :meth:`start`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "LocalFileServer":
        """Bind 127.0.0.1 and serve. Idempotent; returns self."""
        if self._httpd is not None:
            return self
        if not self.root.is_dir():
            raise NotADirectoryError(f"{self.root}: not a folder")
        httpd = ThreadingHTTPServer((HOST, 0), partial(_FileHandler, directory=str(self.root)))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = serve_in_thread(httpd, "LocalFileServer")
        return self

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        httpd, self._httpd = self._httpd, None
        stop_serving(httpd, self._thread)
        self._thread = None

    @property
    def running(self) -> bool:
        """Whether it serves."""
        return self._httpd is not None

    def url(self, path: str | Path) -> str:
        """The URL of a file under the folder.

        Raises:
            RuntimeError: not started. ValueError: ``path`` is not under the folder.
        """
        if self._httpd is None:
            raise RuntimeError("LocalFileServer is not running; call start()")
        rel = Path(path).resolve().relative_to(self.root)
        return f"http://{HOST}:{self._httpd.server_address[1]}/{quote(rel.as_posix())}"


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


def _navigating(e: BaseException) -> bool:
    msg = str(e)
    return "Execution context was destroyed" in msg or "navigat" in msg.lower()


class PageWorld(BrowserWorld):
    """The browser world on a user's own page (module docstring). Implements the
    :class:`worlds.web.world.WebWorld` methods, with :meth:`reset` taking a page instead of a
    generated task.

    Args:
        **options: :class:`BrowserWorld`'s browser options (``executable_path``,
            ``launch_args``, ``action_timeout_ms``, ``navigation_timeout_ms``,
            ``hang_timeout_s``, ``max_restarts``, ``actionability_checks``); no ``server``.

    Attributes:
        source: the current page (:class:`PageSource`), None before :meth:`reset`.
        inventory: its fields and controls as first shown, None before :meth:`reset`.
    """

    INJECT_JS = _INJECT_JS  # a user's page may have no <main>: after the first paragraph of <main> or <body>
    CLEAR_INJECTIONS_JS = _CLEAR_INJECTIONS_JS

    def __init__(self, **options: Any) -> None:
        if "server" in options:
            raise TypeError("PageWorld serves its own pages; it takes no 'server'")
        super().__init__(**options)
        self.source: PageSource | None = None
        self.inventory: PageInventory | None = None
        self._files: LocalFileServer | None = None
        self._raw: dict[str, Any] | None = None
        self._events: list[dict] = []
        self._labels: dict[str, str] = {}
        self._dup_warned = False

    # -- page source -------------------------------------------------------------------------

    def _require_task(self) -> PageSource:  # type: ignore[override]
        if self.source is None:
            raise RuntimeError("PageWorld: call reset(page) first")
        return self.source

    def _task_id(self) -> str:
        return self.source.name if self.source is not None else "?"

    def _start_session(self) -> None:
        self._attempt += 1
        self._session = f"{self._uid}-e{self._episode}-a{self._attempt}"
        self._events = []
        self._raw = None

    def _prepare_context(self, ctx: Any) -> None:
        session = self._session
        self._guard(lambda: ctx.expose_function(
            "__advsimReport", lambda ev: self._on_page_event(session, ev)), "exposing the event recorder")
        self._guard(lambda: ctx.add_init_script(script=_RECORDER_JS), "installing the event recorder")

    def _page_url(self) -> str:
        src = self._require_task()
        if src.kind == "url":
            return src.url  # type: ignore[return-value]
        if self._files is None or self._files.root != src.path.parent:  # type: ignore[union-attr]
            if self._files is not None:
                self._files.stop()
            self._files = LocalFileServer(src.path.parent)  # type: ignore[union-attr]
        self._files.start()
        return self._files.url(src.path)  # type: ignore[arg-type]

    def _open(self) -> None:
        super()._open()
        self._mark()

    def close(self) -> None:
        """Close the browser and the file server. Idempotent; never raises."""
        super().close()
        if self._files is not None:
            self._files.stop()
            self._files = None
        self.source = None

    # -- marking and recording ---------------------------------------------------------------

    def _eval(self, js: str, arg: Any = None, what: str = "evaluating a script") -> Any:
        """``page.evaluate`` under the watchdog; a script cut off by a navigation is run again
        once the new document has loaded."""
        for attempt in (0, 1):
            try:
                return self._guard(lambda: self._page.evaluate(js, arg), what)
            except PlaywrightError as e:
                if attempt or self._crashed or not _navigating(e):
                    raise
                self._guard(lambda: self._page.wait_for_load_state("load"), "waiting for the page to load")
        raise AssertionError("unreachable")  # pragma: no cover

    def _mark(self) -> None:
        """Give bids to the elements that have none; start the recorder of a new document."""
        res = self._eval(_MARK_JS, None, "marking elements with bids")
        if res.get("marked"):
            self._dom = None  # the DOM index maps backend ids to bids: rebuild it
        if res.get("duplicates") and not self._dup_warned:
            self._dup_warned = True
            log.warning("PageWorld: page %s: %d elements repeat a bid used earlier on the page; they "
                        "were given new bids", self._task_id(), res["duplicates"])
        if res.get("state") is not None:
            if self._raw is None:
                self._raw = dict(res["state"])
            else:  # a new document (navigation): its values are changes
                self._raw_update(res["state"])

    def _field_values(self) -> dict[str, Any]:
        return self.inventory.values_from(self._raw or {}) if self.inventory is not None else {}

    def _raw_update(self, updates: dict[str, Any]) -> None:
        """Apply reported element values; append a ``change`` event per field whose value changed."""
        before = self._field_values()
        self._raw = {**(self._raw or {}), **updates}
        if self.inventory is None:
            return
        after = self._field_values()
        for f in self.inventory.fields:
            if before.get(f.bid) != after.get(f.bid):
                self._events.append({"kind": "change", "key": f.bid, "label": f.label, "value": after[f.bid]})

    def _on_page_event(self, session: str | None, ev: Any) -> None:
        """A report from the page's recorder (called by Playwright)."""
        if session != self._session or not isinstance(ev, dict):
            return
        kind = ev.get("kind")
        if kind == "change" and isinstance(ev.get("values"), dict):
            self._raw_update(ev["values"])
        elif kind == "activate" and isinstance(ev.get("key"), str) and isinstance(ev.get("values"), dict):
            self._raw_update(ev["values"])
            bid = ev["key"]
            label = (self.inventory.label_of(bid) if self.inventory is not None else None) or self._labels.get(bid, "")
            self._events.append({"kind": "activate", "key": bid, "label": label, "values": self._field_values()})
        else:
            log.debug("PageWorld: ignored a malformed report %r", ev)

    def _tree_now(self) -> AXNode:
        self._mark()
        tree = super()._tree_now()
        for n in tree.walk():
            if n.bid is not None:
                self._labels[n.bid] = normalize_label(n.name)
        return tree

    # -- actions -----------------------------------------------------------------------------

    def _resolve(self, action: Action) -> LiveTarget | None:  # type: ignore[override]
        """Resolve ``action`` against the live page (marks new elements, reads the tree).

        Raises:
            ActionError: no element with that bid, an element inside a frame, a disabled
                element, or an element the action does not apply to (module docstring).
        """
        if action.bid is None:
            return None
        bid, name = action.bid, action.name
        tree = self._tree_now()
        node = None
        stack = [(tree, False)]
        in_frame = False
        while stack:
            n, framed = stack.pop()
            if n.bid == bid:
                node, in_frame = n, framed
                break
            stack.extend((c, framed or n.role in FRAME_ROLES) for c in reversed(n.children))
        if node is None:
            count = self._guard(lambda: self._page.locator(f"[bid={_css_string(bid)}]").count(),
                                "looking for an element")
            if count:
                raise ActionError(f"{name}: the element with bid '{bid}' is hidden (not in the "
                                  "accessibility tree)")
            raise ActionError(f"{name}: no element with bid '{bid}' on this page")
        kind = _kind(node)
        target = LiveTarget(bid, node.role, node.name, kind)
        what = target.describe()
        if in_frame:
            raise ActionError(f"{name}: {what} is inside a frame; PageWorld acts on the main page only")
        if node.disabled:
            raise ActionError(f"{name}: {what} is disabled")
        if name == "fill":
            if not (node.role in FILL_ROLES or (node.role == "combobox" and kind == "text")):
                raise ActionError(f"fill: {what} is not a text box; fill works on text boxes only")
        elif name == "select_option":
            if kind not in ("select", "radiogroup"):
                raise ActionError(f"select_option: {what} is not a drop-down list or radio group")
            option = action.args[1]
            if kind == "select":
                options = tuple(_options(node))
                if option not in options:
                    raise ActionError(f"select_option: {what} has no option {option!r}; options: "
                                      + ", ".join(repr(o) for o in options))
                return LiveTarget(bid, node.role, node.name, kind, options, option=option)
            radios = _radios(node)
            options = tuple(normalize_label(r.name) for r in radios)
            if option not in options:
                raise ActionError(f"select_option: {what} has no option {option!r}; options: "
                                  + ", ".join(repr(o) for o in options))
            radio = radios[options.index(option)]
            if radio.disabled:
                raise ActionError(f"select_option: [{radio.bid}] radio {radio.name!r} is disabled")
            return LiveTarget(bid, node.role, node.name, kind, options, option_bid=radio.bid, option=option)
        elif name in ("check", "uncheck"):
            ok = kind == "checkbox" or (name == "check" and kind == "radio")
            if not ok:
                raise ActionError(f"{name}: {what} is not a checkbox"
                                  + (" (a radio button cannot be unchecked)" if kind == "radio" else ""))
        elif name == "click":
            if kind in ("select", "radiogroup"):
                raise ActionError(f"click: {what} is a {'radio group' if kind == 'radiogroup' else 'drop-down list'}; "
                                  f"use select_option('{bid}', …)" + (" or click a radio button" if kind == "radiogroup" else ""))
        return target

    def _element(self, action: Action, target: LiveTarget) -> tuple[str, str]:  # type: ignore[override]
        if target.option_bid is not None:
            return (f"[bid={_css_string(target.option_bid)}]", f"[{target.option_bid}] radio {target.option!r}")
        return f"[bid={_css_string(target.bid)}]", target.describe()

    def _clicks(self, action: Action, target: LiveTarget) -> bool:  # type: ignore[override]
        """Click, check, uncheck, or choosing a radio option (a live target names its option)."""
        return action.name in ("click", "check", "uncheck") or target.option_bid is not None

    def _apply(self, action: Action, target: LiveTarget | None) -> None:  # type: ignore[override]
        if target is None:  # noop / send_msg_to_user
            return
        self._mark()  # a replay marks late elements when the original episode did
        problem = self._element_problem(action, target)
        if problem is not None:
            raise ActionError(problem)
        selector = self._element(action, target)[0]
        loc = self._page.locator(selector)
        force, name, what = self.force, action.name, action.to_text()[:60]
        if name == "fill":
            self._guard(lambda: loc.fill(action.args[1], force=force), what)
        elif name == "select_option" and target.option_bid is not None:
            self._guard(lambda: loc.check(force=force), what)
        elif name == "select_option":
            self._guard(lambda: loc.select_option(label=action.args[1], force=force), what)
        elif name == "check":
            self._guard(lambda: loc.check(force=force), what)
        elif name == "uncheck":
            self._guard(lambda: loc.uncheck(force=force), what)
        elif name == "click":
            self._guard(lambda: loc.click(force=force), what)
        else:  # pragma: no cover - parse_action yields the seven actions only
            raise ActionError(f"unknown action {name}")
        self._guard(lambda: self._page.wait_for_load_state("load"), "waiting for the page to load")
        self._mark()  # a new document (the action navigated) starts its recorder here
        self._eval("() => window.__advsimRecorder && window.__advsimRecorder.sync()", None,
                   "reading changes made by the page")

    # -- the WebWorld protocol ---------------------------------------------------------------

    def reset(self, page: str | Path) -> str:  # type: ignore[override]
        """Open a user's page in a fresh browser context, mark its elements, read its fields and
        controls (:attr:`inventory`); return the observation.

        Args:
            page: an HTML file (path or ``file://`` URL) or an ``http(s)://`` URL on
                127.0.0.1 / localhost / [::1].

        Raises:
            PageError: the file does not exist, the URL is not local or does not answer with
                a page (HTTP status ≥ 400, connection refused).
            BrowserWorldError: Chromium cannot be started or the page cannot be loaded after
                ``max_restarts`` attempts.
        """

        source = page_source(page)
        if source.kind == "url":
            _check_url(source.url)  # type: ignore[arg-type]
        self.source = source
        self.inventory = None
        self._labels = {}
        self._dup_warned = False
        self._open_new_episode(source.name)
        tree = self._run(self._tree_now, "reading the accessibility tree")
        self.inventory = build_inventory(tree, dict(self._raw or {}), self._page_url())
        return self.observe()

    def _target(self, action: Action) -> LiveTarget | None:  # type: ignore[override]
        """:meth:`_resolve` against the live page, guarded (it reads the browser): what
        :meth:`BrowserWorld.step` acts on. ``step``, ``inject`` and ``clear_injections`` are
        BrowserWorld's."""
        return self._run(lambda: self._resolve(action), f"resolving {action.to_text()[:60]}")

    def record(self) -> EpisodeRecord:
        """The episode as the page reported it: ``values`` (field bid -> value; a field no longer
        on the page keeps its last recorded value), ``events`` (``change`` per field,
        ``activate`` per control with every field's value at that moment; each with the
        ``label``), and the ``send_msg_to_user`` message.

        Raises:
            RuntimeError: no page was reset.
            BrowserWorldError: the page could not be restored after a crash.
        """
        src = self._require_task()

        def read() -> dict:
            self._mark()
            self._eval("() => window.__advsimRecorder && window.__advsimRecorder.sync()", None,
                       "reading changes made by the page")
            self._eval("() => window.__advsimRecorder ? window.__advsimRecorder.flush() : 0", None,
                       "flushing event reports")
            return self._eval("() => window.__advsimRecorder ? window.__advsimRecorder.state() : {}", None,
                              "reading field values")

        current = self._run(read, "reading the episode record")
        self._raw_update(current or {})
        return EpisodeRecord(src.name, self._field_values(), [dict(e) for e in self._events], self._message)


def _check_url(url: str, timeout_s: float = 10.0) -> None:
    """Raise :class:`PageError` unless ``url`` answers a GET with a status below 400."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, method="GET"), timeout=timeout_s) as resp:
            resp.read(1)
    except urllib.error.HTTPError as e:
        raise PageError(f"{url}: the server answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PageError(f"{url}: cannot load the page ({reason})") from None
