"""``advsim bench forms``: a scripted policy over the form benchmark in the simulated world, the
real browser, or both in lockstep.

Prints strict successes per stratum, the simulated world's steps per second on one core, the
browser's median step latency, and — with ``--world both`` — how many observations differ
between the two worlds along the trajectories (target: 0) and how many verdicts disagree.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from forms_bench.oracle import solve
from forms_bench.schema import STRATA, Task
from forms_bench.suite import select_tasks
from judges.strict import check_record
from worlds.web.sim import SimWebWorld

from advsim.terminal import make_console


def _episode(world, task: Task, actions) -> tuple[list[str], bool, list[str], list[float]]:
    obs = [world.reset(task)]
    times = []
    for a in actions:
        t0 = time.perf_counter()
        obs.append(world.step(a))
        times.append(time.perf_counter() - t0)
    verdict = check_record(task, world.record())
    return obs, verdict.success, verdict.reasons, times


def sim_steps_per_second(tasks: list[Task], repeats: int = 5) -> float:
    """Median over ``repeats`` runs of simulated steps/s (oracle trajectories, resets excluded
    from the count but included in the time), on the calling thread (one core)."""
    world = SimWebWorld()
    plans = [(t, solve(t)) for t in tasks]
    rates = []
    for _ in range(repeats):
        n = 0
        t0 = time.perf_counter()
        for task, actions in plans:
            world.reset(task)
            for a in actions:
                world.step(a)
                n += 1
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def check_args(policy: str, world: str, tasks: str) -> list:
    """The tasks :func:`run` will play, after checking its arguments (nothing is started).

    Raises:
        ValueError: unknown policy, world or task id, or a malformed ``sample:N``.
    """
    if policy != "oracle":
        raise ValueError(f"unknown policy {policy!r}; available: oracle")
    if world not in ("sim", "browser", "both"):
        raise ValueError(f"unknown world {world!r}; expected sim, browser or both")
    return select_tasks(tasks)


def run(policy: str = "oracle", world: str = "sim", tasks: str = "all", console: Console | None = None) -> dict[str, Any]:
    """Run the benchmark; print the table; return the numbers.

    Args:
        policy: ``"oracle"`` (the only scripted policy).
        world: ``"sim"``, ``"browser"`` or ``"both"``.
        tasks: ``"all"``, ``"sample:N"`` (N per stratum) or comma-separated task ids.

    Raises:
        ValueError: unknown policy, world or task id.
    """
    selected = check_args(policy, world, tasks)
    console = console or make_console()
    worlds: dict[str, Any] = {}
    if world in ("sim", "both"):
        worlds["sim"] = SimWebWorld()
    if world in ("browser", "both"):
        from worlds.web.browser import BrowserWorld

        worlds["browser"] = BrowserWorld()
    per: dict[str, dict[str, dict[str, int]]] = {w: {s: {"ok": 0, "n": 0} for s in STRATA} for w in worlds}
    failures: dict[str, list] = {w: [] for w in worlds}
    step_times: dict[str, list[float]] = {w: [] for w in worlds}
    mismatches, verdict_disagreements, compared = 0, 0, 0
    first_mismatch = None
    try:
        for task in selected:
            actions = solve(task)
            results = {}
            for name, w in worlds.items():
                obs, ok, reasons, times = _episode(w, task, actions)
                results[name] = (obs, ok)
                per[name][task.stratum]["n"] += 1
                per[name][task.stratum]["ok"] += int(ok)
                step_times[name].extend(times)
                if not ok:
                    failures[name].append({"task": task.id, "reasons": reasons})
            if len(results) == 2:
                (so, sok), (bo, bok) = results["sim"], results["browser"]
                for i, (a, b) in enumerate(zip(so, bo)):
                    compared += 1
                    if a != b:
                        mismatches += 1
                        first_mismatch = first_mismatch or {"task": task.id, "step": i}
                verdict_disagreements += int(sok != bok)
    finally:
        for w in worlds.values():
            w.close()

    out: dict[str, Any] = {"policy": policy, "world": world, "tasks": len(selected), "per_stratum": per,
                           "failures": failures}
    table = Table(title=f"advsim bench forms — policy={policy}, {len(selected)} tasks")
    table.add_column("stratum")
    for name in worlds:
        table.add_column(f"strict success ({name})", justify="right")
    for s in STRATA + ("all",):
        row = [s]
        for name in worlds:
            ok = sum(v["ok"] for k, v in per[name].items() if s in ("all", k))
            n = sum(v["n"] for k, v in per[name].items() if s in ("all", k))
            row.append(f"{ok}/{n}")
        table.add_row(*row, end_section=(s == STRATA[-1]))
    console.print(table)
    if "sim" in worlds:
        sps = sim_steps_per_second(selected)
        out["sim_steps_per_second"] = sps
        console.print(f"simulated world: {sps:,.0f} steps/s on one core (target >= 10,000: "
                      f"{'met' if sps >= 10_000 else 'NOT met'})")
    if "browser" in worlds and step_times["browser"]:
        med = statistics.median(step_times["browser"]) * 1000
        out["browser_median_step_ms"] = med
        console.print(f"real browser: median step {med:.1f} ms over {len(step_times['browser'])} steps "
                      f"(target <= 100 ms: {'met' if med <= 100 else 'NOT met'})")
    if len(worlds) == 2:
        out.update(observations_compared=compared, observation_mismatches=mismatches,
                   verdict_disagreements=verdict_disagreements, first_mismatch=first_mismatch)
        console.print(f"sim vs browser: {mismatches} of {compared} observations differ (target 0: "
                      f"{'met' if mismatches == 0 else 'NOT met'}); {verdict_disagreements} verdicts disagree")
    for name, fails in failures.items():
        for f in fails[:5]:
            console.print(f"[red]{name} failure[/red] {f['task']}: {'; '.join(f['reasons'])}")
    return out
