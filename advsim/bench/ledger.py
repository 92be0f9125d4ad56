"""``advsim bench ledger``: three scripted agents over all 656 evidence-ledger cases.

Agents (:data:`worlds.ledger.suite.AGENTS`): ``reference`` (the reference solutions),
``act-immediately`` (exact actions with no investigation; Legacy: Allow) and
``read-everything-then-act`` (reads every record, then acts; Legacy: Defer). Every episode is
played in a :class:`~worlds.ledger.tools.ToolWorld` and scored by the deterministic evaluator;
the metrics are SafeActBench's ECS by protocol and domain, P-M, D-M, BSR, PAR, CAS, Gap and
Part. (definitions in :mod:`worlds.ledger.evaluator`). The whole run must take < 10 s.
"""

from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.table import Table

from worlds.ledger.evaluator import aggregate
from worlds.ledger.generate import SHORT
from worlds.ledger.schema import DOMAINS, PROTOCOLS
from worlds.ledger.suite import AGENTS, load_suite, run_plan

from advsim.terminal import make_console


def _pct(rate: dict | float | None) -> str:
    if isinstance(rate, dict):
        if not rate["den"]:
            return "n/a"
        return f"{100 * rate['value']:.1f}% ({rate['num']}/{rate['den']})"
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def evaluate_agents(agents: Optional[list[str]] = None) -> dict:
    """Run agents over the whole suite; returns ``{"suite", "seconds", "cpu_seconds", "agents": {name: metrics}}``
    where ``metrics`` is :func:`worlds.ledger.evaluator.aggregate`'s dict plus ``seconds``."""
    t_all, cpu_all = time.perf_counter(), time.process_time()
    suite = load_suite()
    out = {"suite": {"version": suite.version, "cases": len(suite.cases)}, "agents": {}}
    for name in agents or list(AGENTS):
        t0 = time.perf_counter()
        results = [run_plan(suite, case, AGENTS[name](suite, case))[1] for case in suite.cases]
        metrics = aggregate(results)
        metrics["seconds"] = round(time.perf_counter() - t0, 3)
        out["agents"][name] = metrics
    out["seconds"] = round(time.perf_counter() - t_all, 3)
    out["cpu_seconds"] = round(time.process_time() - cpu_all, 3)
    return out


def print_tables(payload: dict, console: Optional[Console] = None) -> None:
    """Print two rich tables, one column per agent: ECS (by protocol, overall, P-M, D-M, by
    domain) and the diagnostics (BSR, PAR, CAS, Gap and Part. per protocol) as % (num/den)."""
    console = console or make_console()
    agents = payload["agents"]
    names = list(agents)

    def table(title: str, rows: list[tuple[str, list[str]]]) -> Table:
        t = Table(title=title, title_justify="left")
        t.add_column("metric", no_wrap=True)
        for n in names:
            t.add_column(n.replace("-then-", "-then- "), justify="right", min_width=16)
        for label, cells in rows:
            t.add_row(label, *cells)
        return t

    ecs_rows = [(f"ECS {p}", [_pct(agents[n]["ECS"]["by_protocol"][p]) for n in names]) for p in PROTOCOLS]
    ecs_rows.append(("ECS overall", [_pct(agents[n]["ECS"]["overall"]) for n in names]))
    ecs_rows.append(("P-M", [_pct(agents[n]["P-M"]) for n in names]))
    ecs_rows.append(("D-M", [_pct(agents[n]["D-M"]) for n in names]))
    ecs_rows += [(f"ECS {SHORT[d]}", [_pct(agents[n]["ECS"]["by_domain"][d]) for n in names]) for d in DOMAINS]
    console.print(table(f"Evidence ledger, {payload['suite']['cases']} cases x {len(names)} agents, "
                        f"{payload['seconds']:.2f} s: ECS (SafeActBench)", ecs_rows))
    diag = [("BSR (V0)", [_pct(agents[n]["BSR"]) for n in names]),
            ("PAR (V1)", [_pct(agents[n]["PAR"]) for n in names]),
            ("CAS (V1)", [_pct(agents[n]["CAS"]) for n in names])]
    diag += [(f"Gap {p}", [_pct(agents[n]["Gap"][p]) for n in names]) for p in PROTOCOLS[1:]]
    diag += [(f"Part. {p}", [_pct(agents[n]["Part."][p]) for n in names]) for p in PROTOCOLS[1:]]
    console.print(table("Diagnostics (SafeActBench), % (num/den)", diag))
    console.print("P-M / D-M: macro means of ECS over protocols / domains. BSR: V0 ended without action, "
                  "investigation incomplete. PAR: V1 first attempt before investigation complete / V1 with an "
                  "attempt. CAS: ECS among V1 first attempts after investigation. Gap: >=1 action checkpoint "
                  "with a MISSING/STALE requirement. Part.: >=1 executed action, workflow failed.")


def run(agents: Optional[list[str]] = None) -> dict:
    """Evaluate the scripted agents over all cases, print the tables, return the numbers (JSON-able)."""
    payload = evaluate_agents(agents)
    print_tables(payload)
    return payload
