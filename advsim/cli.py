"""The ``advsim`` command line (typer).

Every ``bench`` and ``eval`` command prints a readable table and, with ``--json FILE``, writes
the same numbers as JSON (atomically).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="advsim: co-evolve curriculum, adversary and executor LoRA adapters; benchmark and evaluate.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: forms, ledger, judge, consistency, throughput.")
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


@bench_app.command("judge")
def bench_judge(
    judge: str = typer.Option("oracle", help="oracle | self-report | lm"),
    tasks: str = typer.Option("all", help="'all', 'sample:N' or task ids"),
    model: Optional[str] = typer.Option(None, help="judge backbone for --judge lm (local checkpoint or default)"),
    k: int = typer.Option(1, help="majority over k samples (lm judge)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Judge vs strict check on labelled trajectories (accuracy, Cohen's kappa) and the judge's flip rate."""
    from advsim.bench import judge as bench

    _write_json(json_out, bench.run(judge=judge, tasks=tasks, model=model, k=k))


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


@bench_app.command("parser")
def bench_parser(
    repeats: int = typer.Option(5, min=1, help="runs per input size (the best counts)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
) -> None:
    """Action-parser time on adversarial inputs of 25k-200k characters (linear growth check)."""
    from advsim.bench import parser

    _write_json(json_out, parser.run(repeats=repeats))


REPO_ROOT = Path(__file__).resolve().parent.parent


def _setup_logging() -> None:
    import logging
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _load(config: Path):
    from advsim.config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as exc:
        typer.echo(f"error: {config}: {exc}", err=True)
        raise typer.Exit(2)


@app.command("train")
def train_cmd(
    config: Path = typer.Option(..., "--config", help="YAML config (see configs/)"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="run directory (default runs/<name>)"),
    resume: bool = typer.Option(False, "--resume", help="continue from the last complete checkpoint"),
    stages: Optional[str] = typer.Option(None, "--stages", help="override the config's stages: '1', '2' or '1,2'"),
) -> None:
    """Warm start, stage 1 (curriculum <-> executor) and stage 2 (adversary <-> executor)."""
    _setup_logging()
    cfg = _load(config)
    if stages is not None:
        from advsim.config import ConfigError, config_from_dict

        try:
            cfg = config_from_dict({**cfg.to_dict(), "stages": [int(x) for x in stages.split(",") if x.strip()]})
        except (ConfigError, ValueError) as exc:
            typer.echo(f"error: --stages: {exc}", err=True)
            raise typer.Exit(2)
    from advsim.train import RunExistsError, train

    try:
        run = train(cfg, run_dir or Path("runs") / cfg.name, resume=resume)
    except RunExistsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(f"run directory: {run.path}")


@app.command("eval")
def eval_cmd(
    run: Path = typer.Option(..., "--run", help="run directory"),
    tasks: str = typer.Option("sample:2", help="'all', 'sample:N' (N per stratum) or task ids"),
    seeds: int = typer.Option(3, help="repeats per task in the simulated world (mean and spread)"),
    world: str = typer.Option("both", help="sim | both: the simulated columns, plus the real-browser ones "
                                            "(`browser` = both; the simulated columns are always computed)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the numbers as JSON"),
    judge: str = typer.Option("strict", help="strict | lm (also ask the LM judge J and count its "
                                             "disagreements with the strict check)"),
    corpus: bool = typer.Option(True, "--corpus/--no-corpus", help="completion under the injection-style corpus"),
    adversary_url: Optional[str] = typer.Option(None, "--adversary-url",
                                                help="OpenAI-compatible endpoint of an external reactive adversary"),
    adversary_model: str = typer.Option("default", "--adversary-model", help="its `model` field"),
) -> None:
    """Clean and attacked completion of every checkpoint (sim and real browser) and the report."""
    _setup_logging()
    from advsim.evaluate import evaluate
    from advsim.report import write_report

    if world not in ("sim", "browser", "both"):
        typer.echo("error: --world must be sim, browser or both", err=True)
        raise typer.Exit(2)
    if judge not in ("strict", "lm"):
        typer.echo("error: --judge must be strict or lm", err=True)
        raise typer.Exit(2)
    external = None
    if adversary_url:
        import os

        from advsim.attacks import OpenAIAdversary

        external = OpenAIAdversary(adversary_url, adversary_model, api_key=os.environ.get("OPENAI_API_KEY"))
    results = evaluate(run, tasks=tasks, seeds=seeds, browser=world != "sim", corpus_attacks=corpus, judge=judge,
                       external=external)
    report = write_report(run, results)
    typer.echo(f"report: {report}")
    _write_json(json_out, results)


@app.command("demo")
def demo_cmd(
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="run directory (default runs/demo-<time>)"),
    full: bool = typer.Option(False, "--full", help="evaluate on all 150 test tasks"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted demo run (needs --run-dir)"),
) -> None:
    """The main job on the embedded default: SmolLM2-135M-Instruct, vLLM rollouts, warm start, one
    stage-1 and one stage-2 iteration, then evaluation (sim clean/attacked, real browser) and the report."""
    import time

    _setup_logging()
    cfg = _load(REPO_ROOT / "configs" / "demo.yaml")
    from advsim.evaluate import evaluate
    from advsim.report import write_report
    from advsim.run import RunDir
    from advsim.train import build_learner, train

    run_dir = run_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    t0 = time.perf_counter()
    learner = build_learner(cfg, RunDir(run_dir))  # one engine for training and evaluation
    run = train(cfg, run_dir, resume=resume, learner=learner)
    t1 = time.perf_counter()
    results = evaluate(run.path, tasks="all" if full else cfg.eval.tasks, seeds=cfg.eval.seeds,
                       browser=cfg.eval.browser, attacked_browser=cfg.eval.attacked_browser,
                       corpus_attacks=cfg.eval.corpus, learner=learner)
    report = write_report(run.path, results)
    typer.echo(f"training {t1 - t0:.0f} s, evaluation {time.perf_counter() - t1:.0f} s")
    typer.echo(f"report: {report}")


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
