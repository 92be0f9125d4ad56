"""Rendering an adversary's text into the live page for :class:`worlds.web.browser.BrowserWorld`.

An injection is a paragraph inserted right after the intro paragraph of ``<main>`` (after
earlier injections, in order), where :class:`worlds.web.sim.SimWebWorld` renders it; injected
paragraphs are replayed after a crash and can all be removed again.
"""

from __future__ import annotations

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


class _Injection:
    """:class:`BrowserWorld`'s injection rendering (a mixin: it uses the world's page, history,
    ``_require_task``, ``_run``, ``_guard`` and ``observe``)."""

    INJECT_JS = _INJECT_JS
    """Page script that inserts an injected paragraph (after the intro paragraph of ``<main>``)."""
    CLEAR_INJECTIONS_JS = _CLEAR_INJECTIONS_JS
    """Page script that removes every injected paragraph."""

    def _inject_now(self, text: str) -> None:
        self._guard(lambda: self._page.evaluate(self.INJECT_JS, text), "injecting text")

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
