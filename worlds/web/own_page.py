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

The work is split by job: where a page comes from in :mod:`worlds.web.own_page_source`, serving a
page's files in :mod:`worlds.web.own_page_server`, what the page's elements are (roles, kinds,
targets, the inventory) in :mod:`worlds.web.own_page_elements`, bid marking and event recording in
:mod:`worlds.web.own_page_recorder`, resolving and applying actions in
:mod:`worlds.web.own_page_actions`; this module holds :class:`PageWorld` itself: its page, its
browser context and the WebWorld protocol's ``reset``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from forms_bench.page_spec import PageInventory, normalize_label
from worlds.web.axtree import AXNode
from worlds.web.browser import BrowserWorld
from worlds.web.own_page_actions import _PageActions
from worlds.web.own_page_elements import (CONTROL_ROLES, FIELD_ROLES, FILL_ROLES, TEXT_ROLES, TOGGLE_ROLES, LiveTarget,
                                          _field_roles_below, _is_radio_group, _kind, _options, _radios,
                                          build_inventory)
from worlds.web.own_page_recorder import _MARK_JS, _RECORDER_JS, _navigating, _PageRecorder
from worlds.web.own_page_server import HOST, LocalFileServer, _FileHandler
from worlds.web.own_page_source import LOCAL_HOSTS, PageError, PageSource, _check_url, page_source

__all__ = ["PageWorld", "PageError", "PageSource", "page_source", "LocalFileServer", "LiveTarget", "build_inventory",
           "HOST", "LOCAL_HOSTS", "TEXT_ROLES", "FILL_ROLES", "TOGGLE_ROLES", "CONTROL_ROLES", "FIELD_ROLES",
           # re-exported from the modules this one was split into
           "_CLEAR_INJECTIONS_JS", "_INJECT_JS", "_MARK_JS", "_RECORDER_JS", "_FileHandler", "_check_url",
           "_field_roles_below", "_is_radio_group", "_kind", "_navigating", "_options", "_radios"]

log = logging.getLogger(__name__)

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


class PageWorld(_PageRecorder, _PageActions, BrowserWorld):
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

    def _tree_now(self) -> AXNode:
        self._mark()
        tree = super()._tree_now()
        for n in tree.walk():
            if n.bid is not None:
                self._labels[n.bid] = normalize_label(n.name)
        return tree

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
