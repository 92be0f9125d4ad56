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

The work is split by job: guarded execution and crash recovery in :mod:`worlds.web.browser_recovery`,
acting on elements in :mod:`worlds.web.browser_actions`, reading the accessibility tree in
:mod:`worlds.web.browser_tree`, injection rendering in :mod:`worlds.web.browser_injection`, the
Chromium and Playwright processes in :mod:`worlds.web.chromium`; this module holds
:class:`BrowserWorld` itself: its options, the browser context and page of an episode, and the
WebWorld protocol.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import deque
from typing import Any, Sequence

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from forms_bench.actions import Action
from forms_bench.schema import Task
from forms_bench.server import PageServer
from worlds.web.axtree import AXNode, DomBids
from worlds.web.browser_actions import _ELEMENT_STATE_JS, _ActionRunner, _css_string
from worlds.web.browser_injection import _CLEAR_INJECTIONS_JS, _INJECT_JS, _Injection
from worlds.web.browser_recovery import T, _Recovery, _Restart
from worlds.web.browser_tree import _TreeReader
from worlds.web.chromium import (CHROMIUM_ARGS, CHROMIUM_PATH, BrowserWorldError, _cmdline,
                                 _descendants, _SharedPlaywright, _Watchdog)
from worlds.web.world import EpisodeRecord, Target, resolve

__all__ = ["BrowserWorld", "BrowserWorldError", "CHROMIUM_ARGS", "CHROMIUM_PATH",
           # re-exported from the modules this one was split into (tests and callers use them)
           "T", "_CLEAR_INJECTIONS_JS", "_ELEMENT_STATE_JS", "_INJECT_JS", "_Restart", "_cmdline",
           "_css_string", "_descendants"]

log = logging.getLogger(__name__)

_WORLD_IDS = itertools.count()


class BrowserWorld(_Injection, _ActionRunner, _TreeReader, _Recovery):
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
            page does not answer, the page is restored as after a crash. Default 10 s: an
            actionable element returns at once, and on a loaded machine 3 s was too short (a
            2-core machine at load 5 failed a ``select_option`` on a static test page).
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

    def __init__(self, server: PageServer | None = None, *, executable_path: str = CHROMIUM_PATH,
                 launch_args: Sequence[str] = CHROMIUM_ARGS, action_timeout_ms: float = 10000,
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
        page in log lines and errors (e.g. ``task form-001``). A page that times out loading
        twice in a row (the second time in a fresh Chromium) fails at once: its own scripts or
        resources never let it finish, and more restarts would only cost more timeouts.

        Raises:
            BrowserWorldError: the page could not be opened after ``max_restarts`` restarts, or
                timed out loading twice in a row.
        """
        world = type(self).__name__
        self._episode += 1
        self._attempt = 0
        self._session = None
        self._history = []
        self._message = None
        self._last_obs = None
        failures = timeouts = 0
        while True:
            try:
                self._open()
                return
            except (PlaywrightError, _Restart) as e:
                failures += 1
                timeouts = timeouts + 1 if isinstance(e, PlaywrightTimeoutError) else 0
                cause = str(e).splitlines()[0] if str(e) else type(e).__name__
                if timeouts == 2:  # again in a relaunched Chromium: the page itself never finishes loading
                    raise BrowserWorldError(
                        f"{world}: cannot open {what}: it did not finish loading within {self.navigation_timeout_ms:.0f} "
                        f"ms twice, Chromium relaunched in between (a script that never yields, a resource "
                        f"that never arrives?): {cause}") from e
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
