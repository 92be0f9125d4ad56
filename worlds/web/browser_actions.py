"""Acting on the live page's elements for :class:`worlds.web.browser.BrowserWorld`.

Before an action touches the page, one script (:data:`_ELEMENT_STATE_JS`) reads the state of its
element, and an element that is gone, hidden, disabled, read-only or covered is refused with an
:class:`ActionError` naming the cause; otherwise the action runs through Playwright's own input
methods (``fill``, ``select_option(label=…)``, ``check``/``uncheck``, ``click``) on the element
with the action's bid. The policy is described in :mod:`worlds.web.browser`'s docstring.
"""

from __future__ import annotations

import logging

from forms_bench.actions import Action
from worlds.web.world import ActionError, Target, _describe

# BrowserWorld's logger (as in worlds.web.chromium): its records keep the name they had when
# this code was part of worlds/web/browser.py.
log = logging.getLogger("worlds.web.browser")

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


class _ActionRunner:
    """:class:`BrowserWorld`'s page operations on an action's element (a mixin: no recovery; its
    methods are called inside the world's ``_run`` and use its page, ``_guard`` and options)."""

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
