"""Chromium and Playwright process lifecycle for :class:`worlds.web.browser.BrowserWorld`.

- :data:`CHROMIUM_PATH`, :data:`CHROMIUM_ARGS`: Debian's Chromium and the launch flags;
- :class:`_SharedPlaywright`: one Playwright driver per thread (the sync API allows one running
  instance per thread), started under a deadline — a driver that does not answer within
  :data:`DRIVER_START_TIMEOUT_S` is killed and :class:`BrowserWorldError` raised, instead of the
  caller blocking forever (seen once in CI while a vLLM demo held both cores);
- :class:`_Watchdog`: kills a world's Chromium when an armed deadline passes, so a hung
  Playwright call returns with an error.

Processes are found through Linux ``/proc`` (:func:`_descendants`, :func:`_cmdline`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from playwright.sync_api import sync_playwright

log = logging.getLogger("worlds.web.browser")

CHROMIUM_PATH = "/usr/bin/chromium"
"""Debian's Chromium (``apt-get install chromium``)."""

CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
"""Launch flags measured on these machines (ENVIRONMENT.md, "Browser")."""

DRIVER_START_TIMEOUT_S = 120.0
"""Seconds a new Playwright driver may take to start (it starts in ~1 s on these machines)."""


class BrowserWorldError(RuntimeError):
    """Chromium could not be (re)started or the page could not be restored after
    ``max_restarts`` consecutive attempts."""


def _descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (Linux ``/proc``); empty elsewhere."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for d in entries:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid: int) -> bytes:
    """The command line of a process, arguments joined by spaces (Chromium's child processes
    rewrite theirs into one string); b'' if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


class _Watchdog:
    """Kills this world's Chromium (by its pid, found through a unique command-line marker
    among this process's descendants) when an armed deadline passes, so a hung Playwright call
    returns with an error instead of blocking forever."""

    def __init__(self, name: str) -> None:
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._what = ""
        self.marker: str | None = None
        self.fired = False
        self.closed = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds: float, what: str) -> None:
        with self._cond:
            self._deadline = time.monotonic() + seconds
            self._what = what
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self.closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._deadline = None
                self.fired = True
                self._kill()

    def _kill(self) -> None:
        marker = (self.marker or "").encode()
        pids = [p for p in _descendants(os.getpid())
                if marker and marker in _cmdline(p) and b"--type=" not in _cmdline(p)]
        if not pids:
            log.error("BrowserWorld watchdog: %s hung and Chromium's process was not found", self._what)
            return
        log.warning("BrowserWorld watchdog: %s did not answer in time; killing Chromium (pid %s)",
                    self._what, ", ".join(map(str, pids)))
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _start_driver(timeout_s: float):
    """``sync_playwright().start()`` under a deadline: when it has not returned after
    ``timeout_s``, the driver processes it launched (new descendants whose command line has
    ``run-driver``) are killed, which makes ``start`` fail at once.

    Raises:
        BrowserWorldError: the driver did not start in time, or failed to start.
    """
    before = set(_descendants(os.getpid()))
    done = threading.Event()
    fired: list[int] = []

    def guard() -> None:
        if done.wait(timeout_s):
            return
        for p in _descendants(os.getpid()):
            if p not in before and b"run-driver" in _cmdline(p):
                fired.append(p)
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        log.error("BrowserWorld: the Playwright driver did not start within %g s; killed pid %s",
                  timeout_s, ", ".join(map(str, fired)) or "(none found)")

    threading.Thread(target=guard, name="playwright-start-guard", daemon=True).start()
    try:
        return sync_playwright().start()
    except Exception as exc:  # noqa: BLE001 - any start failure becomes the world's error
        raise BrowserWorldError(f"the Playwright driver did not start"
                                f"{f' within {timeout_s:g} s (killed)' if fired else ''}: {exc}") from exc
    finally:
        done.set()


class _SharedPlaywright:
    """One Playwright driver per thread, shared by the BrowserWorlds of that thread (the sync
    API allows only one running instance per thread); stopped when its last user releases it."""

    _lock = threading.Lock()
    _by_thread: dict[int, list] = {}

    @classmethod
    def acquire(cls):
        tid = threading.get_ident()
        with cls._lock:
            entry = cls._by_thread.get(tid)
            if entry is None:
                entry = cls._by_thread[tid] = [_start_driver(DRIVER_START_TIMEOUT_S), 0]
            entry[1] += 1
            return entry[0]

    @classmethod
    def is_current(cls, pw) -> bool:
        """Whether ``pw`` is still a registered (not discarded) driver."""
        with cls._lock:
            return any(entry[0] is pw for entry in cls._by_thread.values())

    @classmethod
    def discard(cls, pw) -> None:
        """Forget a driver that died (its users acquire a new one) and stop what is left of it."""
        with cls._lock:
            for tid, entry in list(cls._by_thread.items()):
                if entry[0] is pw:
                    del cls._by_thread[tid]
        try:
            pw.stop()
        except Exception as e:  # noqa: BLE001 - it is dead already
            log.debug("BrowserWorld: stopping a dead Playwright driver: %s", e)

    @classmethod
    def release(cls, pw) -> None:
        with cls._lock:
            for tid, entry in list(cls._by_thread.items()):
                if entry[0] is pw:
                    entry[1] -= 1
                    if entry[1] > 0:
                        return
                    del cls._by_thread[tid]
                    break
            else:
                return
        pw.stop()
