"""``advsim bench parser``: time of the action parser on adversarial inputs (issue 11, item 1).

A looping model output or a hostile external agent can send megabytes of ``fill(fill(fill(…``;
the parser must stay linear in the length of the text. Each row repeats one adversarial pattern
to 25k, 50k, 100k and 200k characters and times one parse through a real entry point:

* ``parse_action <pattern>`` — :func:`forms_bench.actions.parse_action` (what
  ``WebForms-v0.step``, the rollout and the executor parser call) on ``"fill(" * n``,
  ``"click(" * n``, unbalanced quotes, brackets, triple quotes, backslashes and a mix;
* ``WebForms env step`` — ``env.step("fill(" * n)`` in the simulated world;
* ``Ledger env step`` — ``env.step("get_charge(" * n)`` (the ledger's tool parser);
* ``Injection(target_action=…)`` — ``Injection(instruction=…, target_action="noop(" * n)``.

Every input is rejected (no complete call), which is the slow path of a scan that tries every
candidate. Each cell is the best of ``repeats`` runs, measured as CPU time of this thread
(``time.thread_time``; on a machine shared with a training run, wall time mostly measures the
scheduler) and as wall time. ``ratio`` = CPU time at 200k / at 25k: about 8 for a linear scan,
64 for a quadratic one. ``linear`` is true when every ratio is at most :data:`MAX_RATIO` and
every 200k CPU time is under :data:`MAX_SECONDS`. Before the fix the scan was quadratic:
``env.step("fill(" * 8000)`` (40k characters) took 154 s.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from rich.console import Console
from rich.table import Table

from advsim.terminal import make_console

SIZES = (25_000, 50_000, 100_000, 200_000)
"""Input lengths in characters; each is twice the previous one."""
MAX_RATIO = 10.0
"""Verdict: 200k characters take at most this many times the CPU time of 25k. Linear growth is
8x; on this 2-core machine caches add ~0–25 % at 200k (measured 7.7–9.8x for the parser, ~9x
for a bare Python loop over a list); a quadratic scan is ~64x."""
MAX_SECONDS = 1.0
"""Target: a 200k input is parsed (and rejected) in well under this many CPU seconds."""

WEB_PATTERNS: tuple[str, ...] = (
    "fill(", "click(", "fill('", "click([{", "click('''", "fill('\\", "fill('a', \"b(", "click('\n",
)
"""Patterns for :func:`forms_bench.actions.parse_action`, each repeated and cut to each size:
calls that never close, unbalanced quotes and brackets, triple quotes, backslashes, a mix."""


def adversarial(pattern: str, n: int) -> str:
    """``pattern`` repeated and cut to exactly ``n`` characters."""
    return (pattern * (n // len(pattern) + 1))[:n]


def _time_once(fn: Callable[[str], object], text: str,
               setup: Optional[Callable[[], object]] = None) -> tuple[float, float]:
    """``(cpu_seconds, wall_seconds)`` of one call ``fn(text)``; ``setup()`` runs untimed first."""
    if setup is not None:
        setup()
    c0, w0 = time.thread_time(), time.perf_counter()
    fn(text)
    return time.thread_time() - c0, time.perf_counter() - w0


Case = tuple[str, Callable[[str], str], Optional[Callable[[], object]]]
"""(pattern, run one parse of a text and return its error text, untimed set-up before a run)."""


def _cases() -> dict[str, Case]:
    """Row label -> :data:`Case`. Every benchmark input must be rejected: ``run`` raises
    AssertionError if one parses."""
    import gymnasium as gym
    from pydantic import ValidationError

    import advsim  # noqa: F401  (registers the environments)
    from forms_bench.actions import ActionParseError, parse_action
    from forms_bench.injection import Injection

    def web(text: str) -> str:
        try:
            parse_action(text)
        except ActionParseError as exc:
            return str(exc)
        raise AssertionError("a benchmark input parsed")

    cases: dict[str, Case] = {f"parse_action {p!r}": (p, web, None) for p in WEB_PATTERNS}

    web_env = gym.make("advsim/WebForms-v0").unwrapped

    def web_step(text: str) -> str:
        return web_env.step(text)[0]["last_action_error"]

    ledger_env = gym.make("advsim/EvidenceLedger-v0").unwrapped
    case_id = next(c.id for c in ledger_env.suite.cases if "get_charge" in c.tools)

    def ledger_step(text: str) -> str:
        return ledger_env.step(text)[0]["last_action_error"]

    def injection(text: str) -> str:
        try:
            Injection(instruction="hello world", target_action=text)
        except ValidationError as exc:
            return exc.errors()[0]["msg"]
        raise AssertionError("a benchmark target_action parsed")

    cases["WebForms env step 'fill('"] = ("fill(", web_step, lambda: web_env.reset(seed=0))
    cases["Ledger env step 'get_charge('"] = (
        "get_charge(", ledger_step, lambda: ledger_env.reset(options={"case_id": case_id}))
    cases["Injection(target_action='noop(')"] = ("noop(", injection, None)
    return cases


def measure(repeats: int = 5, sizes: tuple[int, ...] = SIZES) -> dict:
    """Time every row at every size.

    Args:
        repeats: runs per cell, the sizes taken in turn; the best run counts (>= 1).
        sizes: input lengths in characters, increasing (at least two).

    Returns:
        ``{"sizes": [...], "repeats", "max_ratio", "max_seconds", "linear": bool,
        "rows": {label: {"pattern", "cpu_s": [...], "wall_s": [...], "ratio": float,
        "error": str}}}``: one time per size, ``ratio`` = CPU time at the largest size / at the
        smallest, ``error`` the start of the error text the largest input got.

    Raises:
        ValueError: ``repeats`` < 1 or fewer than two sizes.
        AssertionError: a benchmark input was accepted (each must be rejected).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if len(sizes) < 2:
        raise ValueError("need at least two sizes")
    rows: dict[str, dict] = {}
    for label, (pattern, fn, setup) in _cases().items():
        _time_once(fn, adversarial(pattern, 1000), setup)  # warm-up (compiled patterns, env paths)
        texts = [adversarial(pattern, n) for n in sizes]
        cpu = [float("inf")] * len(sizes)
        wall = [float("inf")] * len(sizes)
        for _ in range(repeats):  # round robin: a slow moment of a shared machine hits every size
            for i, text in enumerate(texts):
                c, w = _time_once(fn, text, setup)
                cpu[i], wall[i] = min(cpu[i], c), min(wall[i], w)
        if setup is not None:
            setup()
        error = fn(texts[-1])
        if not error:
            raise AssertionError(f"{label}: the {sizes[-1]}-character input gave no error")
        ratio = cpu[-1] / max(cpu[0], 1e-6)
        rows[label] = {"pattern": pattern, "cpu_s": [round(c, 6) for c in cpu],
                       "wall_s": [round(w, 6) for w in wall], "ratio": round(ratio, 2), "error": error[:120]}
    linear = all(r["ratio"] <= MAX_RATIO and r["cpu_s"][-1] < MAX_SECONDS for r in rows.values())
    return {"sizes": list(sizes), "repeats": repeats, "max_ratio": MAX_RATIO,
            "max_seconds": MAX_SECONDS, "linear": linear, "rows": rows}


def print_table(payload: dict, console: Optional[Console] = None) -> None:
    """Print one row per input: CPU ms per size, the largest/smallest ratio, wall ms at the largest."""
    console = console or make_console()
    sizes = payload["sizes"]
    t = Table(title=f"Action parser, adversarial inputs (pattern repeated to n chars; CPU ms, best of "
                    f"{payload['repeats']})", title_justify="left")
    t.add_column("entry point, pattern")
    for n in sizes:
        t.add_column(f"{n // 1000}k", justify="right")
    t.add_column("ratio", justify="right")
    t.add_column("wall", justify="right")
    for label, r in payload["rows"].items():
        t.add_row(label, *[f"{1000 * s:.1f}" for s in r["cpu_s"]], f"{r['ratio']:.1f}",
                  f"{1000 * r['wall_s'][-1]:.1f}")
    console.print(t)
    console.print(f"ratio: CPU time at {sizes[-1] // 1000}k / at {sizes[0] // 1000}k (linear "
                  f"~{sizes[-1] / sizes[0]:g}, quadratic ~{(sizes[-1] / sizes[0]) ** 2:g}); wall: ms at "
                  f"{sizes[-1] // 1000}k. Every input is rejected. linear: {payload['linear']} (every ratio "
                  f"<= {payload['max_ratio']:g} and every {sizes[-1] // 1000}k input < "
                  f"{payload['max_seconds']:g} s CPU)")


def run(repeats: int = 5) -> dict:
    """Measure, print the table, return the numbers (JSON-able; see :func:`measure`)."""
    payload = measure(repeats=repeats)
    print_table(payload)
    return payload
