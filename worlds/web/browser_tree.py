"""Reading the live page's accessibility tree through CDP for :class:`worlds.web.browser.BrowserWorld`.

Chromium's accessibility tree (CDP ``Accessibility.getFullAXTree`` of the page and of each of its
frames; a cross-site frame, which site isolation puts in its own process, is read through its own
CDP session) is mapped to bids through ``DOM.getDocument`` backend node ids
(:func:`worlds.web.axtree.dom_bids`), normalized by :func:`worlds.web.axtree.from_cdp` and printed
by :func:`worlds.web.axtree.serialize`. The DOM index is rebuilt when the tree shows an element it
does not know; a frame whose tree cannot be read is logged as a WARNING (once per page) and
printed empty.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from playwright.sync_api import Error as PlaywrightError

from worlds.web.axtree import FRAME_ROLES, AXDocument, AXNode, DomBids, dom_bids, from_cdp, serialize
from worlds.web.chromium import BrowserWorldError
from worlds.web.own_page_source import MAX_PAGE_DEPTH, MAX_PAGE_ELEMENTS

_SIZE_JS = """([limit, maxDepth]) => {
  let n = 0, deepest = 0;
  const stack = [[document.documentElement, 0]];
  while (stack.length) {
    const [el, d] = stack.pop();
    if (!el) continue;
    n += 1;
    if (d > deepest) deepest = d;
    if (n > limit || deepest > maxDepth) break;
    for (const c of el.children) stack.push([c, d + 1]);
    if (el.shadowRoot) for (const c of el.shadowRoot.children) stack.push([c, d + 1]);
  }
  return [n, deepest];
}"""
"""(elements, deepest level) of the main document, shadow trees included; stops past either limit."""

# BrowserWorld's logger (as in worlds.web.chromium): its records keep the name they had when
# this code was part of worlds/web/browser.py.
log = logging.getLogger("worlds.web.browser")


class _TreeReader:
    """:class:`BrowserWorld`'s observation of the live page (a mixin: no recovery; its methods
    are called inside the world's ``_run`` and use its page, context, CDP sessions, DOM index
    caches and ``_guard``)."""

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

    def _check_size(self) -> None:
        """Refuse a live page past :data:`~worlds.web.own_page_source.MAX_PAGE_ELEMENTS` elements or
        :data:`~worlds.web.own_page_source.MAX_PAGE_DEPTH` levels (shadow trees included; a script
        may have built it after the file was checked): Chromium's accessibility tree of such a page
        does not come back before the watchdog, and every restart would rebuild it.

        Raises:
            BrowserWorldError: naming the count or depth (not retried: the page is the problem).
        """
        n, depth = self._guard(lambda: self._page.evaluate(_SIZE_JS, [MAX_PAGE_ELEMENTS, MAX_PAGE_DEPTH]),
                               "counting the page's elements", 10.0)
        if n > MAX_PAGE_ELEMENTS or depth > MAX_PAGE_DEPTH:
            what = (f"over {MAX_PAGE_ELEMENTS:,} elements" if n > MAX_PAGE_ELEMENTS
                    else f"elements nested over {MAX_PAGE_DEPTH} deep")
            raise BrowserWorldError(f"BrowserWorld: the page of task {self._task_id()} has {what} (built by its "
                                    "scripts after it loaded?); the browser world cannot observe it")

    def _tree_now(self) -> AXNode:
        self._check_size()
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
