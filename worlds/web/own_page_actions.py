"""Resolving and applying actions on a user's live page, for :class:`worlds.web.own_page.PageWorld`.

An action's bid is looked up in the page's current accessibility tree; the element's role and
state decide whether the action applies (the rules are in :mod:`worlds.web.own_page`'s
docstring), and a refused action raises :class:`worlds.web.world.ActionError` with a message in
the same form as on generated pages. An accepted action acts on the element through Playwright,
after the same element state check as :class:`worlds.web.browser.BrowserWorld`'s.
"""

from __future__ import annotations

from forms_bench.actions import Action
from forms_bench.page_spec import normalize_label
from worlds.web.axtree import FRAME_ROLES
from worlds.web.browser_actions import _css_string
from worlds.web.own_page_elements import FILL_ROLES, LiveTarget, _kind, _options, _radios
from worlds.web.world import ActionError


class _PageActions:
    """:class:`PageWorld`'s actions on the live page (a mixin: it uses the world's page,
    ``_tree_now``, ``_mark``, ``_eval``, ``_guard``, ``_run`` and ``_element_problem``)."""

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

    def _target(self, action: Action) -> LiveTarget | None:  # type: ignore[override]
        """:meth:`_resolve` against the live page, guarded (it reads the browser): what
        :meth:`BrowserWorld.step` acts on. ``step``, ``inject`` and ``clear_injections`` are
        BrowserWorld's."""
        return self._run(lambda: self._resolve(action), f"resolving {action.to_text()[:60]}")
