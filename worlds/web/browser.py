"""BrowserWorld: the web-world protocol over a real Chromium driven by Playwright.

The task page is served by :class:`forms_bench.server.PageServer` on 127.0.0.1 and opened in
Debian's Chromium (``/usr/bin/chromium``) through Playwright's sync API. Actions act on the
element whose ``bid`` attribute is the action's bid, with Playwright's own input methods
(``fill``, ``select_option(label=…)``, ``check``/``uncheck``, ``click``) — for a radio group,
``select_option`` checks the radio whose ``data-option`` is the option. The observation is
Chromium's accessibility tree (CDP ``Accessibility.getFullAXTree`` of the page and of each of
its frames; a cross-site frame, which site isolation puts in its own process, is read through
its own CDP session), mapped to bids through ``DOM.getDocument`` backend node ids (shadow trees
and frames included; bids inside a frame get the frame's id as a prefix, see
:func:`worlds.web.axtree.dom_bids`), normalized by :func:`worlds.web.axtree.from_cdp` and
printed by the one serializer :func:`worlds.web.axtree.serialize` — byte-identical to
:class:`worlds.web.sim.SimWebWorld` for the same page state. The DOM index is rebuilt when the
accessibility tree shows an element it does not know (injected text, content a script added).
A frame whose tree cannot be read is logged as a WARNING (once per page) and printed empty.

Whether an action is valid is decided by :func:`worlds.web.world.resolve` before the browser is
touched, so both worlds reject the same actions with the same :class:`ActionError` message and
an invalid action never reaches the page.

Lifecycle: one Chromium per world, launched on the first :meth:`BrowserWorld.reset` and reused;
a fresh browser context (cookies, storage, connections) and page per episode; everything is
closed by :meth:`BrowserWorld.close` or on leaving a ``with`` block. Use a world from the thread
that created it, outside any running asyncio loop (Playwright's sync API).

Crash recovery (chosen policy): every browser interaction runs under a watchdog. If the page
crashes, the browser dies, or an interaction fails or hangs (a Playwright error, or no answer
within ``hang_timeout_s``, in which case the watchdog kills this world's Chromium process), the
world logs one WARNING line naming the task, episode, step and cause, relaunches Chromium if it
is gone, opens the task in a new context under a new session, replays the episode's history
(actions and injections, in order) and then retries the interrupted operation. Because the
pages are deterministic, the replayed page equals the lost one; the replayed observation is
compared with the last one returned and a mismatch is logged as an ERROR. A failed recovery
escalates: the next attempt relaunches Chromium, and replaces the thread's Playwright driver if
that died too (worlds of one thread share one driver). The events of the
lost session are discarded; the new session re-records them from the replay, so
:meth:`BrowserWorld.record` stays exact. Only when ``max_restarts`` consecutive recoveries fail
does the world raise :class:`BrowserWorldError` (Chromium cannot be started at all) — the one
exception besides :class:`ActionError` that :meth:`BrowserWorld.step` lets out.

An action whose element cannot be acted on in the live page is not a crash: before acting, one
script reads the element's state and a step on an element that is **gone** (no longer in the
DOM), **hidden** (no box, ``display:none``, ``visibility:hidden``), **disabled** (``:disabled``
or ``aria-disabled``), **read-only** (``fill`` only) or **covered** (for pointer actions: another
element receives the pointer at its centre, as Playwright's hit-target check would find) raises
:class:`ActionError` at once naming the cause, e.g. ``click: [22] button 'Escalate to manager' is
hidden`` — the same form as the sim's ``… is disabled`` — and leaves the page unchanged. If the
element passes that check but still does not become actionable within ``action_timeout_ms``
(e.g. it keeps moving), the step raises :class:`ActionError` with the cause read again then, or
``… did not become actionable within N ms``. Both are logged as an ERROR: on a generated page
they mean the sim and Chromium disagree on that element.
A click on the status region does nothing in either world and is not sent to Chromium (the
empty region has no box a pointer could hit).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import deque
from typing import Any, Callable, Sequence, TypeVar

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from forms_bench.actions import Action
from forms_bench.schema import Task
from forms_bench.server import PageServer
from worlds.web.axtree import FRAME_ROLES, AXDocument, AXNode, DomBids, dom_bids, from_cdp, serialize
from worlds.web.chromium import (CHROMIUM_ARGS, CHROMIUM_PATH, BrowserWorldError, _cmdline,  # noqa: F401
                                 _descendants, _SharedPlaywright, _Watchdog)
from worlds.web.world import ActionError, EpisodeRecord, Target, _describe, resolve

log = logging.getLogger(__name__)

_WORLD_IDS = itertools.count()
T = TypeVar("T")

# Inserts an adversary text as a paragraph right after the intro paragraph of <main> (after
# earlier injections, in order) — where SimWebWorld renders injections.
_INJECT_JS = """(text) => {
  const main = document.querySelector('main');
  const injected = main.querySelectorAll(':scope > p[data-advsim-injection]');
  const anchor = injected.length ? injected[injected.length - 1] : main.querySelector(':scope > p');
  const p = document.createElement('p');
  p.setAttribute('data-advsim-injection', String(injected.length));
  p.textContent = text;
  anchor.after(p);
}"""


_CLEAR_INJECTIONS_JS = """() => {
  document.querySelectorAll('main > p[data-advsim-injection]').forEach((p) => p.remove());
}"""

# The state of an action's element, read before acting: null when it can be acted on, else
# {cause, by}; the element is found in open shadow roots too (Playwright's locators pierce them). `pointer`: the action clicks (hit-target check at the element's centre, after
# scrolling it into view if needed); `editable`: the action types (read-only check).
_ELEMENT_STATE_JS = """([selector, pointer, editable]) => {
  const find = (root) => {
    const hit = root.querySelector(selector);
    if (hit) return hit;
    for (const h of root.querySelectorAll('*')) {
      if (h.shadowRoot) { const x = find(h.shadowRoot); if (x) return x; }
    }
    return null;
  };
  const el = find(document);
  if (!el || !el.isConnected) return {cause: 'gone'};
  const shown = el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : true;
  let r = el.getBoundingClientRect();
  if (!shown || r.width <= 0 || r.height <= 0) return {cause: 'hidden'};
  if (el.matches(':disabled') || el.getAttribute('aria-disabled') === 'true') return {cause: 'disabled'};
  if (editable && (el.readOnly === true || el.getAttribute('aria-readonly') === 'true')) {
    return {cause: 'read-only'};
  }
  if (!pointer) return null;
  let x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (x < 0 || y < 0 || x >= window.innerWidth || y >= window.innerHeight) {
    el.scrollIntoView({block: 'center', inline: 'center'});
    r = el.getBoundingClientRect();
    x = r.left + r.width / 2;
    y = r.top + r.height / 2;
  }
  const root = el.getRootNode();
  const hit = (root.elementFromPoint ? root : document).elementFromPoint(x, y);
  if (!hit || hit === el || el.contains(hit)) return null;
  const label = hit.closest('label');
  if (label && label.control === el) return null;
  let by = '<' + hit.tagName.toLowerCase();
  for (const a of ['id', 'class', 'bid']) {
    const v = hit.getAttribute(a);
    if (v !== null) by += ' ' + a + '="' + v + '"';
  }
  by = by.length > 80 ? by.slice(0, 79) + '…>' : by + '>';
  return {cause: 'covered', by: by};
}"""


class _Restart(Exception):
    """Internal: an interaction failed and the page must be restored."""


def _css_string(s: str) -> str:
    """A double-quoted CSS string literal for any text (hex escapes for quotes, backslashes,
    control and non-printable characters)."""
    out = []
    for ch in s:
        if ch in '"\\' or not ch.isprintable():
            out.append(f"\\{ord(ch):x} ")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class BrowserWorld:
    """The web world in a real Chromium (implements :class:`worlds.web.world.WebWorld`).

    Args:
        server: the page server to load tasks from; None (default) starts a private one on
            127.0.0.1 (stopped by :meth:`close`). Tasks passed to :meth:`reset` are added to it.
        executable_path: the Chromium binary.
        launch_args: Chromium command-line flags.
        action_timeout_ms: Playwright timeout of one action (ms). An element that is gone,
            hidden, disabled, read-only or covered is rejected before acting, without waiting;
            one that still does not become actionable within this time while the page answers
            makes the step raise :class:`ActionError` (no effect; an ERROR is logged); if the
            page does not answer, the page is restored as after a crash.
        navigation_timeout_ms: timeout of loading the task page (ms).
        hang_timeout_s: watchdog limit of one browser interaction (s); beyond it Chromium is
            killed and restarted.
        max_restarts: consecutive failed recoveries tolerated before :class:`BrowserWorldError`.
        actionability_checks: True (default) lets Playwright wait until the element is visible,
            stable, enabled and hit by the pointer, as for a real user (click ~45 ms); False
            passes ``force=True`` (click ~12 ms) — the target is still resolved, and the state
            check before acting (gone / hidden / disabled / read-only / covered) still applies.

    Attributes:
        restarts: number of recoveries performed so far (all episodes).
        latencies_ms: wall time of the last 100,000 :meth:`step` calls that reached the page
            (ms), for latency reports.
    """

    INJECT_JS = _INJECT_JS
    """Page script that inserts an injected paragraph (after the intro paragraph of ``<main>``)."""
    CLEAR_INJECTIONS_JS = _CLEAR_INJECTIONS_JS
    """Page script that removes every injected paragraph."""

    def __init__(self, server: PageServer | None = None, *, executable_path: str = CHROMIUM_PATH,
                 launch_args: Sequence[str] = CHROMIUM_ARGS, action_timeout_ms: float = 3000,
                 navigation_timeout_ms: float = 10000, hang_timeout_s: float = 20.0,
                 max_restarts: int = 3, actionability_checks: bool = True) -> None:
        self._uid = f"bw{os.getpid()}x{next(_WORLD_IDS)}"
        self._own_server = server is None
        self.server = server if server is not None else PageServer()
        self.executable_path = executable_path
        self.launch_args = tuple(launch_args)
        self.action_timeout_ms = action_timeout_ms
        self.navigation_timeout_ms = navigation_timeout_ms
        self.hang_timeout_s = hang_timeout_s
        self.max_restarts = max_restarts
        self.force = not actionability_checks
        self.restarts = 0
        self.latencies_ms: deque[float] = deque(maxlen=100_000)
        self.task: Task | None = None
        self._pw = None
        self._browser = None
        self._context = None
        self._page = None
        self._cdp = None
        self._crashed = False
        self._dom: DomBids | None = None
        self._frames_warned: set[str] = set()
        self._oopif: dict[Any, Any] = {}
        self._oopif_dom: dict[str, DomBids] = {}
        self._launches = 0
        self._episode = 0
        self._attempt = 0
        self._session: str | None = None
        self._history: list[tuple[str, Any]] = []
        self._message: str | None = None
        self._last_obs: str | None = None
        self._obs_history_len = 0
        self._watchdog = _Watchdog(self._uid)

    # -- introspection (tests, debugging) ----------------------------------------------------

    @property
    def page(self):
        """The live Playwright page of the current episode (None before :meth:`reset`). For
        tests and debugging: acting through it bypasses the action history used for replay."""
        return self._page

    @property
    def session(self) -> str | None:
        """The page server session id of the current page (changes when a page is restored)."""
        return self._session

    def process_ids(self) -> dict[str, list[int]]:
        """This world's Chromium processes (Linux ``/proc``): ``{"browser": [pid],
        "renderers": [pid, ...]}``; empty lists when none is running."""
        marker = (self._watchdog.marker or "").encode()
        if not marker:
            return {"browser": [], "renderers": []}
        browser = [p for p in _descendants(os.getpid())
                   if marker in _cmdline(p) and b"--type=" not in _cmdline(p)]
        renderers = [p for p in (_descendants(browser[0]) if browser else ())
                     if b"--type=renderer" in _cmdline(p)]
        return {"browser": browser, "renderers": renderers}

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "BrowserWorld":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the page, context and browser, stop Playwright and (if private) the server.
        Idempotent; never raises."""
        self._close_context()
        if self._browser is not None:
            try:
                self._guard(self._browser.close, "closing Chromium")
            except Exception as e:  # noqa: BLE001 - closing must not raise
                log.debug("BrowserWorld.close: closing Chromium failed: %s", e)
        if self._pw is not None:
            try:
                self._guard(lambda: _SharedPlaywright.release(self._pw), "stopping Playwright")
            except Exception as e:  # noqa: BLE001 - closing must not raise
                log.debug("BrowserWorld.close: stopping Playwright failed: %s", e)
        self._browser = None
        self._pw = None
        if self.task is not None and self._session is not None:
            self.server.discard(self.task.id, self._session)
        if self._own_server:
            self.server.stop()
        self._watchdog.close()
        self.task = None

    def _launch(self) -> None:
        if self._watchdog.closed:  # reused after close()
            self._watchdog = _Watchdog(self._uid)
        if self._pw is not None and not _SharedPlaywright.is_current(self._pw):
            self._pw = None  # another world found this thread's driver dead and replaced it
        if self._pw is None:
            self._pw = _SharedPlaywright.acquire()
        self._launches += 1
        self._watchdog.marker = f"--advsim-browser={self._uid}-{self._launches}"
        self._browser = self._guard(lambda: self._pw.chromium.launch(
            executable_path=self.executable_path,
            args=[*self.launch_args, self._watchdog.marker]), "launching Chromium",
            max(self.hang_timeout_s, 60.0))
        log.debug("BrowserWorld %s: launched Chromium %s", self._uid, self._browser.version)

    def _close_context(self) -> None:
        ctx, self._context, self._page, self._cdp, self._dom = self._context, None, None, None, None
        self._frames_warned, self._oopif, self._oopif_dom = set(), {}, {}
        if ctx is not None:
            try:
                self._guard(ctx.close, "closing the browser context")
            except Exception as e:  # noqa: BLE001 - a dead context is closed already
                log.debug("BrowserWorld: closing context failed: %s", e)

    def _open(self) -> None:
        """A new context and page showing the current task under a new session."""
        self._require_task()
        self._close_context()
        if self._browser is None or not self._browser.is_connected():
            if self._browser is not None:
                try:
                    self._guard(self._browser.close, "closing a disconnected Chromium")
                except Exception:  # noqa: BLE001 - it is dead already
                    pass
            self._launch()
        self._start_session()
        self._crashed = False
        ctx = self._guard(self._browser.new_context, "opening a browser context")
        self._context = ctx
        ctx.set_default_timeout(self.action_timeout_ms)
        ctx.set_default_navigation_timeout(self.navigation_timeout_ms)
        self._prepare_context(ctx)
        page = self._guard(ctx.new_page, "opening a page")
        page.on("crash", self._on_crash)
        self._page = page
        url = self._page_url()
        resp = self._guard(lambda: page.goto(url, wait_until="load"), f"loading {url}")
        if resp is None or resp.status != 200:
            raise PlaywrightError(f"loading {url} gave HTTP {resp.status if resp else 'no response'}")
        self._cdp = self._guard(lambda: ctx.new_cdp_session(page), "opening a CDP session")

    # Hooks for worlds that open other pages (worlds.web.own_page.PageWorld overrides them).

    def _start_session(self) -> None:
        """Begin a new page-server session for the page about to be opened."""
        task = self._require_task()
        if not self.server.running:
            self.server.start()
        if self._session is not None:
            self.server.discard(task.id, self._session)
        self._attempt += 1
        self._session = f"{self._uid}-e{self._episode}-a{self._attempt}"

    def _prepare_context(self, ctx: Any) -> None:
        """Called with each new browser context before its page is opened (nothing here)."""

    def _page_url(self) -> str:
        """The URL :meth:`_open` loads: the task's page under the current session."""
        return self.server.task_url(self._require_task().id, self._session)

    def _resolve(self, action: Action) -> Target | None:
        """The action's target (:func:`worlds.web.world.resolve` on the task's page model)."""
        return resolve(self._require_task(), action)

    def _target(self, action: Action) -> Target | None:
        """The target :meth:`step` acts on: :meth:`_resolve` (the task's page model needs no
        browser; a world that resolves against the live page runs it guarded)."""
        return self._resolve(action)

    def _on_crash(self, *_: Any) -> None:
        self._crashed = True

    # -- guarded execution -------------------------------------------------------------------

    def _guard(self, fn: Callable[[], T], what: str, seconds: float | None = None) -> T:
        """Run one browser interaction under the watchdog (``seconds``, default
        ``hang_timeout_s``)."""
        self._watchdog.arm(self.hang_timeout_s if seconds is None else seconds, what)
        try:
            return fn()
        finally:
            self._watchdog.disarm()

    def _cdp_send(self, method: str, params: dict | None = None) -> dict:
        # A CDP command to a crashed renderer never returns: refuse it up front (the watchdog
        # covers a crash that happens while the command is in flight).
        if self._crashed or self._cdp is None:
            raise _Restart("the page crashed")
        return self._guard(lambda: self._cdp.send(method, params or {}), f"CDP {method}")

    def _page_healthy(self) -> bool:
        """Whether the page still runs scripts (answers within 2 s; a hung page gets Chromium
        killed by the watchdog and reports False)."""
        try:
            return self._guard(lambda: self._page.evaluate("() => 1"), "checking the page", 2.0) == 1
        except PlaywrightError:
            return False

    def _run(self, fn: Callable[[], T], what: str,
             on_timeout: Callable[[], str] | None = None) -> T | None:
        """Run ``fn`` (browser work on the current page); on failure restore the page from the
        history and retry, at most ``max_restarts`` times in a row.

        With ``on_timeout`` (actions), a Playwright timeout on a page that still answers means
        the element never became actionable: no restart; the action has no effect, the message
        ``on_timeout()`` returns is logged as an ERROR (the sim and the browser disagree on the
        element) and raised as :class:`ActionError`."""
        failures = 0
        cause = None
        while True:
            try:
                if cause is not None:
                    self._recover(what, cause)
                if self._crashed:
                    raise _Restart("the page crashed")
                if self._page is None:
                    raise _Restart("no page is open")
                return fn()
            except (PlaywrightError, _Restart) as e:
                if (on_timeout is not None and isinstance(e, PlaywrightTimeoutError)
                        and not self._crashed and self._page_healthy()):
                    msg = on_timeout()
                    log.error("BrowserWorld: %s on task %s: %s; the action had no effect", what,
                              self._task_id(), msg)
                    raise ActionError(msg) from None
                failures += 1
                msg = str(e).splitlines()[0] if str(e) else ""
                cause = "the page crashed" if self._crashed else f"{type(e).__name__}: {msg}"
                if self._watchdog.fired:
                    cause += " (hung; Chromium killed by the watchdog)"
                    self._watchdog.fired = False
                if failures > self.max_restarts:
                    raise BrowserWorldError(
                        f"BrowserWorld: {what} on task {self._task_id()} failed {failures} times in a "
                        f"row; last cause: {cause}") from e

    def _recover(self, what: str, cause: str) -> None:
        self.restarts += 1
        browser_alive = self._browser is not None and self._browser.is_connected()
        log.warning("BrowserWorld: %s failed on task %s (episode %d, after %d history entries): %s; "
                    "%s and replaying the episode (restart #%d)", what, self._task_id(), self._episode,
                    len(self._history), cause,
                    "opening a new page" if browser_alive else "relaunching Chromium", self.restarts)
        try:
            self._open()
            for kind, item in self._history:
                if kind == "inject":
                    self._inject_now(item)
                else:
                    self._apply(item, self._resolve(item))
            if self._last_obs is not None and self._obs_history_len == len(self._history):
                obs = self._observe_now()
                if obs != self._last_obs:
                    log.error("BrowserWorld: replay of task %s did not restore the page: the "
                              "observation differs from the last one returned", self._task_id())
        except (PlaywrightError, _Restart) as e:
            again = self._drop_after_failure(e)
            log.warning("BrowserWorld: recovery of task %s failed (%s); the next attempt restarts %s",
                        self._task_id(), str(e).splitlines()[0] if str(e) else type(e).__name__, again)
            raise _Restart("recovery failed") from e

    def _drop_after_failure(self, err: BaseException) -> str:
        """After a failed attempt to open or restore a page: close the page and Chromium so the
        next attempt relaunches it; if the Playwright driver itself is gone ("connection
        closed"), drop it too so the next attempt starts a new one. Returns what is restarted."""
        self._close_context()
        if self._browser is not None:
            try:
                self._guard(self._browser.close, "closing Chromium", 10.0)
            except Exception:  # noqa: BLE001 - it may be dead already
                pass
            self._browser = None
        msg = str(err).lower()
        if self._pw is not None and ("connection closed" in msg or "event loop is closed" in msg
                                     or not _SharedPlaywright.is_current(self._pw)):
            _SharedPlaywright.discard(self._pw)
            self._pw = None
            return "the Playwright driver and Chromium"
        return "Chromium"

    # -- page operations (no recovery; called inside _run) ----------------------------------

    def _loc(self, bid: str):
        return self._page.locator(f'[bid="{bid}"]')

    @staticmethod
    def _element(action: Action, target: Target) -> tuple[str, str]:
        """The CSS selector of the element an action acts on and its description in error
        messages (as :func:`worlds.web.world.resolve` describes it)."""
        f = target.field
        if action.name == "select_option" and f is not None and f.kind == "radio":
            option = action.args[1]
            bid = f.option_bids[f.options.index(option)]
            return (f'[bid="{f.bid}"] input[type=radio][data-option={_css_string(option)}]',
                    _describe(Target("radio", field=f, option=option), bid))
        return f"[bid={_css_string(action.bid)}]", _describe(target, action.bid)

    def _clicks(self, action: Action, target: Target) -> bool:
        """The action clicks its element (so the state check tests the hit target): click,
        check, uncheck, and choosing a radio option."""
        return action.name in ("click", "check", "uncheck") or (
            action.name == "select_option" and target.field is not None and target.field.kind == "radio")

    def _element_problem(self, action: Action, target: Target) -> str | None:
        """Why the action's element cannot be acted on right now (the :class:`ActionError`
        message: gone / hidden / disabled / read-only / covered), or None."""
        selector, desc = self._element(action, target)
        state = self._guard(lambda: self._page.evaluate(
            _ELEMENT_STATE_JS, [selector, self._clicks(action, target), action.name == "fill"]),
            "checking the element")
        if not state:
            return None
        cause = state.get("cause")
        if cause == "gone":
            return f"{action.name}: {desc} is gone (no longer on the page)"
        if cause == "covered":
            return f"{action.name}: {desc} is covered by another element ({state.get('by')})"
        return f"{action.name}: {desc} is {cause}"

    def _not_actionable(self, action: Action, target: Target) -> str:
        """The message for an element that passed the state check but then timed out."""
        problem = self._element_problem(action, target)
        if problem is not None:
            return problem
        return (f"{action.name}: {self._element(action, target)[1]} did not become actionable "
                f"within {self.action_timeout_ms:g} ms")

    def _apply(self, action: Action, target: Target | None) -> None:
        name, force = action.name, self.force
        if target is None:  # noop / send_msg_to_user: nothing happens on the page
            return
        if target.kind == "status":
            # The status region has no behaviour (and no box while it is empty, so a pointer
            # could not hit it): a click does nothing, as in the simulated world.
            return
        problem = self._element_problem(action, target)
        if problem is not None:  # fail fast, naming the cause; the page is untouched
            log.error("BrowserWorld: %s on task %s: %s; the action had no effect",
                      action.to_text()[:60], self._task_id(), problem)
            raise ActionError(problem)
        what = f"{action.to_text()[:60]}"
        if name == "fill":
            self._guard(lambda: self._loc(action.bid).fill(action.args[1], force=force), what)
        elif name == "select_option":
            f = target.field
            if f.kind == "radio":
                loc = self._page.locator(f'[bid="{f.bid}"] input[type=radio]'
                                         f'[data-option={_css_string(action.args[1])}]')
                self._guard(lambda: loc.check(force=force), what)
            else:
                self._guard(lambda: self._loc(action.bid).select_option(label=action.args[1], force=force), what)
        elif name == "check":
            self._guard(lambda: self._loc(action.bid).check(force=force), what)
        elif name == "uncheck":
            self._guard(lambda: self._loc(action.bid).uncheck(force=force), what)
        elif name == "click":
            self._guard(lambda: self._loc(action.bid).click(force=force), what)
        else:  # pragma: no cover - parse_action yields the seven actions only
            raise ActionError(f"unknown action {name}")

    def _inject_now(self, text: str) -> None:
        self._guard(lambda: self._page.evaluate(self.INJECT_JS, text), "injecting text")

    def _dom_index(self) -> DomBids:
        """Bids, frames and node ids of the live DOM of the page's process (frames of that
        process and shadow trees included)."""
        doc = self._cdp_send("DOM.getDocument", {"depth": -1, "pierce": True})
        self._dom = dom_bids(doc["root"])
        return self._dom

    @staticmethod
    def _unindexed(nodes: Sequence[dict], dom: DomBids) -> bool:
        """Whether the AX tree has an element (not text) or a frame the DOM index does not know
        (the page changed since the index was built: injected text, script-made content)."""
        for n in nodes:
            be = n.get("backendDOMNodeId")
            if be is None or n.get("ignored"):
                continue
            role = (n.get("role") or {}).get("value")
            if role in FRAME_ROLES and be not in dom.frames:
                return True
            if role not in ("StaticText", "InlineTextBox", "LineBreak") and be not in dom.nodes:
                return True
        return False

    def _frame_sessions(self) -> dict[str, Any]:
        """CDP sessions of the page's out-of-process frames (cross-site frames under site
        isolation), by CDP frame id; a frame of the page's own process has none and is read
        through the page's session. Sessions are opened once per frame."""
        live = [f for f in self._page.frames[1:] if not f.is_detached()]
        for f in live:
            if f in self._oopif:
                continue
            self._oopif[f] = None
            try:
                sess = self._guard(lambda: self._context.new_cdp_session(f), "opening a frame's CDP session")
            except PlaywrightError:
                continue  # part of the page's process
            try:
                tree = self._guard(lambda: sess.send("Page.getFrameTree"), "reading a frame's id")
            except PlaywrightError as e:  # the frame went away meanwhile; its tree is reported missing
                log.debug("BrowserWorld: a frame's CDP session does not answer: %s", e)
                continue
            self._oopif[f] = (tree["frameTree"]["frame"]["id"], sess)
        return {v[0]: v[1] for f, v in self._oopif.items() if v is not None and f in live}

    def _read_document(self, send: Callable[[str, dict], dict], get_dom: Callable[[], DomBids | None],
                       index: Callable[[], DomBids], sessions: dict[str, Any],
                       failed: list[tuple[str, str]]) -> AXDocument:
        """One CDP target's accessibility tree with its frames: frames of the same process
        through ``send`` (``Accessibility.getFullAXTree(frameId)``), out-of-process frames
        through their own session (recursively). ``get_dom`` is the target's cached DOM index,
        ``index`` rebuilds it (once, when the tree shows an element it does not know). Frames
        whose tree cannot be read are appended to ``failed`` as (frame bid, cause)."""
        nodes = send("Accessibility.getFullAXTree", {})["nodes"]
        dom = get_dom()
        if dom is None or self._unindexed(nodes, dom):
            dom = index()
        for attempt in (0, 1):
            frames: dict[int, Any] = {}
            errors: list[tuple[str, str]] = []
            todo = [nodes]
            while todo:
                for n in todo.pop():
                    be = n.get("backendDOMNodeId")
                    if (n.get("role") or {}).get("value") not in FRAME_ROLES or be in frames:
                        continue
                    fid, frame = dom.frames.get(be), dom.bids.get(be, "?")
                    frames[be] = []
                    if fid is None:
                        errors.append((frame, "it has no document in the DOM"))
                        continue
                    try:
                        if fid in sessions:
                            frames[be] = self._read_oopif(fid, frame, sessions, errors)
                        else:
                            frames[be] = send("Accessibility.getFullAXTree", {"frameId": fid})["nodes"]
                            todo.append(frames[be])
                    except PlaywrightError as e:
                        if self._crashed:
                            raise
                        errors.append((frame, str(e).splitlines()[0] if str(e) else type(e).__name__))
            same = [t for t in frames.values() if not isinstance(t, AXDocument)]
            if attempt == 0 and any(self._unindexed(t, dom) for t in same):
                dom = index()
                continue
            failed.extend(errors)
            return AXDocument(nodes, dom.bids, frames)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_oopif(self, fid: str, prefix: str, sessions: dict[str, Any],
                    failed: list[tuple[str, str]]) -> AXDocument:
        """The document of an out-of-process frame, through its own session; its bids get the
        frame element's bid ``prefix``."""
        sess = sessions[fid]

        def send(method: str, params: dict) -> dict:
            return self._guard(lambda: sess.send(method, params), f"CDP {method} (frame [{prefix}])")

        def index() -> DomBids:
            dom = dom_bids(send("DOM.getDocument", {"depth": -1, "pierce": True})["root"], prefix)
            self._oopif_dom[fid] = dom
            return dom

        return self._read_document(send, lambda: self._oopif_dom.get(fid), index, sessions, failed)

    def _tree_now(self) -> AXNode:
        failed: list[tuple[str, str]] = []
        sessions = self._frame_sessions() if len(self._page.frames) > 1 else {}
        doc = self._read_document(lambda m, p: self._cdp_send(m, p), lambda: self._dom,
                                  self._dom_index, sessions, failed)
        for frame, why in failed:
            if frame not in self._frames_warned:  # once per page
                self._frames_warned.add(frame)
                log.warning("BrowserWorld: task %s: the accessibility tree of frame [%s] cannot be "
                            "read (%s); its content is not observed", self._task_id(), frame, why)
        return from_cdp(doc.nodes, doc.bids, doc.frames)

    def _observe_now(self) -> str:
        return serialize(self._tree_now())

    # -- the WebWorld protocol ---------------------------------------------------------------

    def _require_task(self) -> Task:
        if self.task is None:
            raise RuntimeError("BrowserWorld: call reset(task) first")
        return self.task

    def _task_id(self) -> str:
        return self.task.id if self.task is not None else "?"

    def reset(self, task: Task) -> str:
        """Open the task's initial page in a fresh browser context; return the observation.

        Args:
            task: the task; it is added to the page server.

        Returns:
            The serialized accessibility tree of the initial page.

        Raises:
            BrowserWorldError: Chromium cannot be started or the page cannot be loaded after
                ``max_restarts`` attempts.
        """
        if self.task is not None and self._session is not None:
            self.server.discard(self.task.id, self._session)
        self.server.add(task)
        self.task = task
        self._open_new_episode(f"task {task.id}")
        return self.observe()

    def _open_new_episode(self, what: str) -> None:
        """Start a new episode (fresh history, session and last observation) and open its page,
        relaunching Chromium after a failure up to ``max_restarts`` times; ``what`` names the
        page in log lines and errors (e.g. ``task form-001``).

        Raises:
            BrowserWorldError: the page could not be opened after ``max_restarts`` restarts.
        """
        world = type(self).__name__
        self._episode += 1
        self._attempt = 0
        self._session = None
        self._history = []
        self._message = None
        self._last_obs = None
        failures = 0
        while True:
            try:
                self._open()
                return
            except (PlaywrightError, _Restart) as e:
                failures += 1
                cause = str(e).splitlines()[0] if str(e) else type(e).__name__
                if failures > self.max_restarts:
                    raise BrowserWorldError(f"{world}: cannot open {what}: {cause}") from e
                self.restarts += 1
                again = self._drop_after_failure(e)
                log.warning("%s: opening %s failed (%s); restarting %s (restart #%d)",
                            world, what, cause, again, self.restarts)

    def step(self, action: Action) -> str:
        """Apply one action in the browser; return the new observation.

        ``send_msg_to_user`` stores its message (see :meth:`record`); ``noop`` does nothing.

        Raises:
            ActionError: the action is invalid on this page (from :func:`resolve`; the browser
                is not touched), or its element is gone, hidden, disabled, read-only or covered
                in the live page, or never became actionable (the message names the cause; see
                the module docstring). The page is unchanged.
            RuntimeError: no task was reset.
            BrowserWorldError: the page could not be restored after a crash.
        """
        t0 = time.perf_counter()
        self._require_task()
        target = self._target(action)
        if action.name == "send_msg_to_user":
            self._message = action.args[0]
        self._run(lambda: self._apply(action, target), action.to_text()[:60],
                  on_timeout=lambda: self._not_actionable(action, target))
        if target is not None:
            self._history.append(("act", action))
        obs = self.observe()
        self.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
        return obs

    def inject(self, text: str) -> str:
        """Insert ``text`` as a paragraph right after the page's intro paragraph (after earlier
        injections), as :class:`SimWebWorld` renders it; return the new observation."""
        self._require_task()
        self._run(lambda: self._inject_now(text), "injecting text")
        self._history.append(("inject", text))
        return self.observe()

    def clear_injections(self) -> str:
        """Remove every injected paragraph from the live page (and from the replay history);
        return the new observation."""
        self._require_task()
        self._run(lambda: self._guard(lambda: self._page.evaluate(self.CLEAR_INJECTIONS_JS), "clearing injections"),
                  "clearing injections")
        self._history = [(k, v) for k, v in self._history if k != "inject"]
        return self.observe()

    def observe(self) -> str:
        """The current observation: Chromium's normalized accessibility tree, serialized."""
        self._require_task()
        obs = self._run(self._observe_now, "reading the accessibility tree")
        self._last_obs, self._obs_history_len = obs, len(self._history)
        return obs

    def tree(self) -> AXNode:
        """The current normalized accessibility tree."""
        self._require_task()
        return self._run(self._tree_now, "reading the accessibility tree")

    def record(self) -> EpisodeRecord:
        """The episode as the page server recorded it.

        Waits until every report of the page has been answered (``window.__advsimFlush()``),
        then reads the (task, session) events from the server, in ``seq`` order, without their
        ``seq``. Values are the page's current field values (``window.__advsimState()``).

        Raises:
            RuntimeError: no task was reset.
            BrowserWorldError: the page could not be restored after a crash.
        """
        task = self._require_task()

        def read() -> tuple[int, dict]:
            sent = self._guard(lambda: self._page.evaluate("() => window.__advsimFlush()"),
                               "flushing event reports")
            values = self._guard(lambda: self._page.evaluate("() => window.__advsimState()"),
                                 "reading field values")
            return int(sent), values

        sent, values = self._run(read, "reading the episode record")
        events = self.server.events(task.id, self._session)
        if len(events) != sent or [e["seq"] for e in events] != list(range(sent)):
            log.error("BrowserWorld: task %s session %s: the page sent %d events but the server "
                      "holds %d (seq %s)", task.id, self._session, sent, len(events),
                      [e["seq"] for e in events])
        out = [{k: v for k, v in e.items() if k != "seq"} for e in events]
        return EpisodeRecord(task.id, dict(values), out, self._message)
