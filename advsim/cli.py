"""The ``advsim`` command line (typer).

Every ``bench`` and ``eval`` command prints a readable table and, with ``--json FILE``, writes
the same numbers as JSON (atomically).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: forms, ledger, consistency, throughput.")
app.add_typer(bench_app, name="bench")


def _write_json(path: Optional[Path], payload: dict) -> None:
    if path is None:
        return
    from forms_bench.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True))
    typer.echo(f"wrote {path}")


@bench_app.command("forms")
def bench_forms(
    policy: str = typer.Option("oracle", help="policy to run: oracle"),
    world: str = typer.Option("sim", help="sim | browser | both"),
    tasks: str = typer.Option("all", help="'all', or a comma-separated list of task ids"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Run a policy over the 150 test tasks; strict successes per stratum, speed, sim/browser mismatches."""
    from advsim.bench import forms

    _write_json(json_out, forms.run(policy=policy, world=world, tasks=tasks))


@bench_app.command("ledger")
def bench_ledger(
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Scripted agents over all 656 evidence-ledger cases; ECS, P-M, D-M, BSR, PAR, CAS, Gap, Part."""
    from advsim.bench import ledger

    _write_json(json_out, ledger.run())


@bench_app.command("consistency")
def bench_consistency(
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Rollout vs. training log-prob diff (max, mean, std, k3) for the consistent engine and a baseline."""
    from advsim.bench import consistency

    _write_json(json_out, consistency.run())


@bench_app.command("throughput")
def bench_throughput(
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Generated tokens/s of VLLMEngine and TorchEngine on the same executor prompts."""
    from advsim.bench import throughput

    _write_json(json_out, throughput.run())


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
