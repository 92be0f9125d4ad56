"""Evaluate a trajectory on a user's own web page with the strict check (``advsim page check``).

:func:`check_trajectory` opens the page in the real browser world
(:class:`worlds.web.own_page.PageWorld`: bids assigned to elements that have none, actions
resolved against the live page, changes and activations recorded from the page), binds the spec's
labels to the page (:func:`forms_bench.page_spec.bind_spec`), replays the actions one by one as
the ``WebForms-v0`` environment would (an action that does not parse or does not apply is not
fatal: the step records the error, the page stays, the step counts; the episode ends on
``send_msg_to_user`` or after ``max_steps`` actions) and judges the episode with
:func:`judges.strict.check_page`. :func:`show_page` prints what an agent sees (the observation
with bids) and the fields and controls a spec can name, to write a trajectory against.

The actions file has one BrowserGym action per line (``fill('6', 'A-1007')``); blank lines and
lines starting with ``#`` are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from forms_bench.actions import ActionParseError, parse_action
from forms_bench.page_spec import BoundPageSpec, PageInventory, PageSpec, bind_spec, load_spec
from judges.strict import Verdict, check_page
from worlds.web.world import ActionError

MAX_STEPS = 12
"""Actions per episode, as in ``WebForms-v0``."""


class ActionsFileError(ValueError):
    """An actions file that cannot be read."""


def read_actions(path: str | Path) -> list[tuple[int, str]]:
    """The actions of a trajectory file: ``(line number, text)`` per non-blank line that does not
    start with ``#``. The text is not parsed here (a malformed action is a step with an error).

    Raises:
        ActionsFileError: the file is missing or not UTF-8 text.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ActionsFileError(f"{path}: no such actions file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ActionsFileError(f"{path}: cannot read the actions: {e}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s and not s.startswith("#"):
            out.append((i, s))
    return out


@dataclass
class Step:
    """One replayed action: its ``line`` in the file, the ``action`` text, the ``error`` it
    raised ('' when it applied)."""

    line: int
    action: str
    error: str = ""


@dataclass
class PageCheck:
    """The result of :func:`check_trajectory`.

    Attributes:
        page: the page argument; goal: the spec's goal.
        verdict: the strict verdict with its reasons.
        steps: the replayed actions.
        ended: ``send_msg_to_user``, ``max_steps`` (truncated) or ``actions`` (the file ended).
        ignored: actions after the episode ended (not replayed).
        bound: the spec bound to the page.
        values: field bid -> value at the end; events: the recorded events; message: the
            ``send_msg_to_user`` text or None.
        observation: the last observation.
    """

    page: str
    goal: str
    verdict: Verdict
    steps: list[Step]
    ended: str
    ignored: int
    bound: BoundPageSpec
    values: dict[str, Any]
    events: list[dict]
    message: str | None
    observation: str = ""

    def to_dict(self) -> dict:
        """The result as JSON-ready data: ``success``, ``reasons``, ``page``, ``goal``,
        ``steps`` [{line, action, error}], ``ended``, ``ignored_actions``, ``fields``
        [{bid, label, role, initial, final}], ``activations`` [{bid, label}], ``message``."""
        inv = self.bound.inventory
        return {
            "success": self.verdict.success,
            "reasons": list(self.verdict.reasons),
            "page": self.page,
            "goal": self.goal,
            "steps": [{"line": s.line, "action": s.action, "error": s.error} for s in self.steps],
            "ended": self.ended,
            "ignored_actions": self.ignored,
            "fields": [{"bid": f.bid, "label": f.label, "role": f.role, "initial": f.initial,
                        "final": self.values.get(f.bid)} for f in inv.fields],
            "activations": [{"bid": e["key"], "label": e.get("label", "")}
                            for e in self.events if e.get("kind") == "activate"],
            "message": self.message,
        }


def _spec(spec: PageSpec | str | Path) -> PageSpec:
    return spec if isinstance(spec, PageSpec) else load_spec(spec)


def check_trajectory(page: str | Path, spec: PageSpec | str | Path, actions: Sequence[str | tuple[int, str]],
                     *, max_steps: int = MAX_STEPS, world: Any = None) -> PageCheck:
    """Replay ``actions`` on ``page`` in the browser world and judge the episode strictly.

    Args:
        page: an HTML file or a local URL (see :func:`worlds.web.own_page.page_source`).
        spec: a :class:`PageSpec` or the path of a spec file (JSON/YAML).
        actions: action texts, or ``(line, text)`` pairs as :func:`read_actions` returns.
        max_steps: the episode's action budget (>= 1).
        world: a :class:`worlds.web.own_page.PageWorld` to use (left open); None starts one and
            closes it.

    Returns:
        :class:`PageCheck`.

    Raises:
        PageSpecError: the spec is malformed or does not fit the page (a label not on it, …).
        PageError: the page cannot be opened. ValueError: ``max_steps`` < 1.
        BrowserWorldError: Chromium cannot be started.
    """
    from worlds.web.own_page import PageWorld

    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    spec = _spec(spec)
    numbered = [a if isinstance(a, tuple) else (i, a) for i, a in enumerate(actions, 1)]
    own = world is None
    w = PageWorld() if own else world
    try:
        obs = w.reset(page)
        bound = bind_spec(spec, w.inventory)
        steps: list[Step] = []
        ended = "actions"
        for line, text in numbered:
            if len(steps) >= max_steps:
                ended = "max_steps"
                break
            step = Step(line, text)
            steps.append(step)
            try:
                action = parse_action(text)
            except ActionParseError as e:
                step.error = f"parse error: {e}"
                continue
            step.action = action.to_text()
            try:
                obs = w.step(action)
            except ActionError as e:
                step.error = str(e)
            if action.name == "send_msg_to_user":
                ended = "send_msg_to_user"
                break
        else:
            if len(steps) >= max_steps:
                ended = "max_steps"
        record = w.record()
    finally:
        if own:
            w.close()
    verdict = check_page(bound, record.values, record.events)
    return PageCheck(str(page), spec.goal, verdict, steps, ended, len(numbered) - len(steps), bound,
                     dict(record.values), list(record.events), record.message, obs)


@dataclass
class PageView:
    """What :func:`show_page` returns: the ``observation`` (with bids), the page's
    ``inventory`` and, with a spec, the ``bound`` spec."""

    observation: str
    inventory: PageInventory
    bound: BoundPageSpec | None = None


def show_page(page: str | Path, spec: PageSpec | str | Path | None = None) -> PageView:
    """Open ``page`` and return its first observation and fields/controls; with ``spec``, also
    bind it (so a spec that does not fit the page raises here).

    Raises:
        PageSpecError, PageError, BrowserWorldError: as :func:`check_trajectory`.
    """
    from worlds.web.own_page import PageWorld

    parsed = None if spec is None else _spec(spec)
    with PageWorld() as w:
        obs = w.reset(page)
        inv = w.inventory
    return PageView(obs, inv, None if parsed is None else bind_spec(parsed, inv))
