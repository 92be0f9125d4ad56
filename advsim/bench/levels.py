"""``advsim bench levels``: what each difficulty level costs, in both worlds.

Web world (:mod:`forms_bench.difficulty`): per level, over ``n`` generated training tasks
(strata and domains in turn): the initial page's length in characters and in backbone tokens
(the embedded SmolLM2 tokenizer when its checkpoint is cached, else not measured), the
oracle's actions (:func:`forms_bench.oracle.solve`) and the number of target fields. A level
changes several knobs at once (:data:`forms_bench.difficulty.LEVELS`), so a column need not grow
with every level: level 2 asks for one value again (copied from a table, where level 1 stated two
in the goal), and level 4 drops the page extras to introduce the stratum's own reasoning, so its
page is shorter than level 3's. Difficulty is what the executor's success measures, not any one
column.

Ledger world (:mod:`worlds.ledger.difficulty`): per level, over ``n`` generated cases: the
reference plan's reads, actions and steps, the context length, and the protocols drawn.
"""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Console
from rich.table import Table

from advsim.terminal import make_console


def _tokenizer():
    """The embedded backbone's tokenizer if its converted checkpoint is cached (no conversion,
    no download), else None."""
    try:
        from policies.backbone import DEFAULT_BACKBONE, cache_root, load_tokenizer, verify_checkpoint

        folder = cache_root() / DEFAULT_BACKBONE
        return load_tokenizer(folder) if verify_checkpoint(folder) else None
    except Exception:  # noqa: BLE001 - tokens are optional in this benchmark
        return None


def web_levels(n: int = 30) -> list[dict[str, Any]]:
    """Per level 0…5: ``{"level", "n", "page_chars", "page_tokens" (or None), "actions", "targets"}``,
    means over ``n`` tasks."""
    from forms_bench.difficulty import LEVELS, level_knobs
    from forms_bench.generate import make_task
    from forms_bench.oracle import solve
    from forms_bench.proposal import DOMAIN_NAMES
    from forms_bench.schema import STRATA
    from worlds.web.sim import SimWebWorld

    tok = _tokenizer()
    world = SimWebWorld()
    rows = []
    for lv in LEVELS:
        chars, tokens, actions, targets = [], [], [], []
        for i in range(n):
            task = make_task(STRATA[i % len(STRATA)], DOMAIN_NAMES[(i // len(STRATA)) % len(DOMAIN_NAMES)],
                             50_000 + i, knobs=level_knobs(lv))
            page = world.reset(task)
            chars.append(len(page))
            if tok is not None:
                tokens.append(len(tok.encode(page, add_special_tokens=False)))
            actions.append(len(solve(task)))
            targets.append(len(task.spec.targets))
        rows.append({"level": lv, "n": n, "page_chars": statistics.mean(chars),
                     "page_tokens": statistics.mean(tokens) if tokens else None,
                     "actions": statistics.mean(actions), "targets": statistics.mean(targets)})
    return rows


def ledger_levels(n: int = 30) -> list[dict[str, Any]]:
    """Per level 0…5: :func:`worlds.ledger.difficulty.level_stats` plus ``context_chars``."""
    from worlds.ledger.difficulty import LEVELS, level_stats, make_case
    from worlds.ledger.schema import DOMAINS

    rows = []
    for lv in LEVELS:
        row = level_stats(lv, n=n)
        row["context_chars"] = statistics.mean(len(make_case(DOMAINS[i % len(DOMAINS)], lv, i).context)
                                               for i in range(n))
        rows.append(row)
    return rows


def run(world: str = "both", n: int = 30, console: Console | None = None) -> dict:
    """Measure the levels of ``world`` (``web``, ``ledger`` or ``both``), print one table per world.

    Returns:
        ``{"web": [...], "ledger": [...]}`` (the worlds measured).

    Raises:
        ValueError: an unknown world or ``n`` < 1.
    """
    if world not in ("web", "ledger", "both"):
        raise ValueError(f"world must be web, ledger or both, got {world!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    console = console or make_console()
    out: dict[str, Any] = {}
    if world in ("web", "both"):
        out["web"] = web_levels(n)
        t = Table(title=f"web world: cost per level (means over {n} generated tasks)")
        for c in ("level", "page chars", "page tokens", "oracle actions", "targets"):
            t.add_column(c, justify="right")
        for r in out["web"]:
            t.add_row(str(r["level"]), f"{r['page_chars']:.0f}",
                      "—" if r["page_tokens"] is None else f"{r['page_tokens']:.0f}",
                      f"{r['actions']:.1f}", f"{r['targets']:.1f}")
        console.print(t)
    if world in ("ledger", "both"):
        out["ledger"] = ledger_levels(n)
        t = Table(title=f"ledger world: cost per level (means over {n} generated cases)")
        for c in ("level", "protocols", "reads", "actions", "reference steps", "context chars"):
            t.add_column(c, justify="right")
        for r in out["ledger"]:
            t.add_row(str(r["level"]), ", ".join(f"{k} {v}" for k, v in sorted(r["protocols"].items())),
                      f"{r['reads_mean']:.1f}", f"{r['actions_mean']:.1f}", f"{r['steps_mean']:.1f}",
                      f"{r['context_chars']:.0f}")
        console.print(t)
    return out
