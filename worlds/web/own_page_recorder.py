"""Bid marking and event recording in a user's page, for :class:`worlds.web.own_page.PageWorld`.

:data:`_MARK_JS` gives a ``bid`` to every element of the page's ``<body>`` that has none (open
shadow roots included) and starts the document's recorder; :data:`_RECORDER_JS`, installed in
every document of the context before the page's scripts, reports every change of a form
control's value and every activation of a control through a function Playwright exposes. The
mixin :class:`_PageRecorder` runs them, keeps the reported values and events and returns them
as the episode's :class:`worlds.web.world.EpisodeRecord` (see :mod:`worlds.web.own_page`'s
docstring).
"""

from __future__ import annotations

import logging
from typing import Any

from playwright.sync_api import Error as PlaywrightError

from worlds.web.world import EpisodeRecord

# PageWorld's logger: its records keep the name they had when this code was part of
# worlds/web/own_page.py.
log = logging.getLogger("worlds.web.own_page")

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


def _navigating(e: BaseException) -> bool:
    msg = str(e)
    return "Execution context was destroyed" in msg or "navigat" in msg.lower()


class _PageRecorder:
    """:class:`PageWorld`'s marking and recording (a mixin: it uses the world's page, session,
    inventory, ``_guard``, ``_run`` and ``_require_task``, and keeps ``_raw``, ``_events``,
    ``_labels`` and ``_dup_warned``, which :class:`PageWorld` initializes)."""

    def _prepare_context(self, ctx: Any) -> None:
        session = self._session
        self._guard(lambda: ctx.expose_function(
            "__advsimReport", lambda ev: self._on_page_event(session, ev)), "exposing the event recorder")
        self._guard(lambda: ctx.add_init_script(script=_RECORDER_JS), "installing the event recorder")

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
