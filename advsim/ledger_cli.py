"""``advsim ledger``: a user's own evidence-ledger cases (``docs/own-ledger-cases.md``).

``advsim ledger check --cases FILE [--case ID] [--actions FILE] [--json FILE]``

1. validates the case file (no checksum; an invalid file prints one error naming the case and
   field, exit code 2);
2. runs every selected case's reference solution, its semantically equivalent variants and its
   negative controls (a reference or variant that does not score ECS = 1, or a control that does
   not score 0 with its expected reason, is listed, exit code 1);
3. with ``--actions`` (one call per line, or a JSON array of calls), plays that trajectory in the
   case (``--case``; optional when the file holds one case) and prints the verdict: ECS, the
   evaluator's reasons (``MISSING clock.now.time at action set_thermostat step 1``) and the
   diagnostic flags. The verdict itself does not change the exit code.

``--json FILE`` writes everything printed as JSON (atomically). The sub-app is registered in
:mod:`advsim.cli` as ``ledger``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from advsim.cli_output import json_option, write_json

ledger_app = typer.Typer(no_args_is_help=True,
                         help="A user's own evidence-ledger cases: validate, self-check, judge a trajectory.")


def _fail(msg: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {msg}", err=True)
    return typer.Exit(code)


def _pass_count(items: dict, good) -> str:
    return f"{sum(1 for v in items.values() if good(v))}/{len(items)}"


def _print_verdict(v: dict, source: str) -> None:
    ignored = f", {v['ignored_after_end']} call(s) after the end not played" if v["ignored_after_end"] else ""
    typer.echo(f"\ntrajectory {source} on case {v['case_id']} ({v['protocol']}, {v['domain']}): "
               f"{len(v['steps'])} step(s){ignored}")
    for s in v["steps"]:
        tag = s["kind"] or "no call"
        if s["kind"] == "consequential":
            tag += ", executed" if s["executed"] else ", not executed"
        line = f"  {s['step']:>2}. {s['text']}  [{tag}]"
        if s["output"]:
            line += f" -> {s['output']}"
        if s["error"]:
            line += f"  error: {s['error']}"
        typer.echo(line)
    typer.echo(f"verdict: ECS = {v['ecs']}")
    for r in v["reasons"]:
        typer.echo(f"  - {r}")
    f = v["flags"]
    typer.echo("flags: " + ", ".join(f"{k}={f[k]}" for k in ("attempted", "first_attempt_step",
                                                              "investigation_before_first_attempt",
                                                              "investigation_complete", "gap", "executed",
                                                              "partial", "bsr")))


@ledger_app.command("check")
def check_cmd(
    cases: Path = typer.Option(..., "--cases", help="your case file (JSON in the case schema; no checksum needed)"),
    case: Optional[str] = typer.Option(None, "--case", help="only this case id (and the case --actions is played in)"),
    actions: Optional[Path] = typer.Option(None, "--actions",
                                           help="a trajectory to judge: one call per line, or a JSON array of calls"),
    json_out: Optional[Path] = json_option("also write the results as JSON"),
) -> None:
    """Validate a case file, run each case's reference solution and negative controls, and judge a trajectory."""
    from worlds.ledger.own import check_case, judge_actions, load_cases, read_actions
    from worlds.ledger.validation import SuiteValidationError

    try:
        suite = load_cases(cases)
    except SuiteValidationError as exc:
        raise _fail(str(exc))
    selected = list(suite.cases)
    if case is not None:
        selected = [c for c in suite.cases if c.id == case]
        if not selected:
            raise _fail(f"--case: no case {case!r} in {cases.name} (cases: "
                        + ", ".join(c.id for c in suite.cases[:20]) + (" ..." if len(suite.cases) > 20 else "") + ")")
    if actions is not None and case is None and len(suite.cases) != 1:
        raise _fail(f"--actions needs --case: {cases.name} holds {len(suite.cases)} cases")
    calls = None
    if actions is not None:
        try:
            calls = read_actions(actions)
        except SuiteValidationError as exc:
            raise _fail(str(exc))
    typer.echo(f"{cases.name}: valid, {len(suite.cases)} case(s), {len(suite.tools)} tool(s), "
               f"{len(suite.entity_types)} entity type(s)")
    reports = [check_case(suite, c) for c in selected]
    w = max(len(r["id"]) for r in reports)
    for r in reports:
        typer.echo(f"  {r['id']:<{w}}  {r['protocol']:<6} {r['domain']:<20} reference ECS {r['reference']['ecs']}  "
                   f"variants {_pass_count(r['variants'], lambda v: v['ecs'] == 1)} ECS 1  "
                   f"controls {_pass_count(r['controls'], lambda v: v['ok'])} ECS 0  "
                   + ("ok" if r["ok"] else "FAILED"))
    failures = [f for r in reports for f in r["failures"]]
    for f in failures:
        typer.echo(f"  FAILED {f}")
    if len(reports) == 1:
        typer.echo(f"reference solution of {reports[0]['id']}:")
        for i, t in enumerate(reports[0]["reference"]["calls"], start=1):
            typer.echo(f"  {i:>2}. {t}")
    verdict = None
    if calls is not None:
        target = selected[0].id
        verdict = judge_actions(suite, target, calls)
        _print_verdict(verdict, actions.name)
    write_json(json_out, {"file": str(cases), "cases": reports, "ok": not failures, "verdict": verdict}, default=str)
    if failures:
        raise typer.Exit(1)
