"""Guarded execution and crash recovery for :class:`worlds.web.browser.BrowserWorld`.

Every browser interaction runs under the world's watchdog (:meth:`_Recovery._guard`); work on the
current page runs through :meth:`_Recovery._run`, which on a crash, a dead browser or a failing or
hung interaction restores the page by opening the task again and replaying the episode's history,
then retries, at most ``max_restarts`` times in a row before :class:`BrowserWorldError` (the policy
is described in :mod:`worlds.web.browser`'s docstring). A Playwright timeout of an action on a page
that still answers is not a crash: it becomes an :class:`ActionError`.
"""

from __future__ import annotations

import logging
from typing import Callable, TypeVar

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from worlds.web.chromium import BrowserWorldError, _SharedPlaywright
from worlds.web.world import ActionError

# BrowserWorld's logger (as in worlds.web.chromium): its records keep the name they had when
# this code was part of worlds/web/browser.py.
log = logging.getLogger("worlds.web.browser")

T = TypeVar("T")


class _Restart(Exception):
    """Internal: an interaction failed and the page must be restored."""


class _Recovery:
    """:class:`BrowserWorld`'s guarded execution and page restoration (a mixin: it uses the
    world's browser, page, watchdog, history and its ``_open``, ``_apply``, ``_resolve``,
    ``_inject_now`` and ``_observe_now``)."""

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
