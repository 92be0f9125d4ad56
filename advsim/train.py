"""``advsim train``: warm start, stage 1, stage 2 — resumable, one phase per checkpoint.

Phases run in order and each ends with a complete checkpoint (adapters versions, optimizer
states, attack history) named as in AdvSim2Real: ``warmstart``, ``capability-iter-t`` (stage
1), ``robust-iter-t`` and ``adv-v-t`` (stage 2). A run killed at any point and started again
with ``resume=True`` rolls its logs back to the last complete checkpoint and repeats the
interrupted phase from its start with the same seeds, reading back the rollout chunks that phase
had already saved (:class:`advsim.run.EpisodeStore`, ``rollout.chunk_episodes``) instead of
sampling them again — so a phase longer than a job's time limit still finishes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from advsim.coevolution import RoleIO, stage1_iteration, stage2_iteration
from advsim.config import TrainConfig
from advsim.suites import suite_from_config
from advsim.run import RunDir


class RunExistsError(RuntimeError):
    """The run directory already holds checkpoints and ``resume`` was not requested, or it is
    resumed with a config that changes what the run computes (``RunDir.config_changes``)."""


def check_run_dir(cfg: TrainConfig, run: RunDir, resume: bool) -> None:
    """What :func:`train` checks before any work: a run with checkpoints continues only with
    ``resume`` and only under the config it was started with (up to
    :data:`advsim.run.RESUMABLE_CHANGES`), so a resumed run equals an uninterrupted one.

    Raises:
        RunExistsError: either rule is broken (the message lists every changed field).
        advsim.run.RunFileError: the run's checkpoint state or saved config cannot be read.
    """
    latest = run.latest()
    if latest and not resume:
        raise RunExistsError(f"{run.path} already has checkpoint {latest[0]!r}; pass --resume to continue it")
    if latest:
        changes = run.config_changes(cfg)
        if changes:
            raise RunExistsError(f"{run.path} was started with another config; resume it with its own "
                                 f"({run.path / 'config.yaml'}) or start a new run directory. Changed: "
                                 + "; ".join(changes))


def phases(cfg: TrainConfig) -> list[str]:
    """Names of the checkpoints a config produces, in order."""
    out = ["warmstart"] if cfg.warmstart.enabled else []
    if 1 in cfg.stages:
        out += [f"capability-iter-{t}" for t in range(1, cfg.stage1.iterations + 1)]
    if 2 in cfg.stages:
        out += [f"robust-iter-{t}" for t in range(1, cfg.stage2.iterations + 1)]
    return out


def role_io(tokenizer) -> RoleIO:
    """The roles' prompts and parsers from :mod:`policies.roles` and :mod:`policies.ledger_roles`,
    bound to a tokenizer (the ledger curriculum's prompt names the world's domains and levels)."""
    from policies.roles import role_io as make
    from worlds.ledger.difficulty import TOP_LEVEL
    from worlds.ledger.schema import DOMAINS

    return make(tokenizer, ledger_domains=DOMAINS, ledger_top_level=TOP_LEVEL)


def build_learner(cfg: TrainConfig, run: RunDir):
    from advsim.learner import Learner

    return Learner(cfg, run.path / "adapters")


def _warmstart(learner, io: RoleIO, cfg: TrainConfig, console: Console, suite) -> dict[str, Any]:
    from advsim.warmstart import curriculum_examples, format_check

    w = cfg.warmstart
    tok = learner.tokenizer
    out = {}
    for role, examples in (("executor", suite.executor_demonstrations(io, tok, w)),
                           ("curriculum", curriculum_examples(io, tok, w.curriculum_examples, w.seed, suite)),
                           ("adversary", suite.adversary_demonstrations(io, tok, w.adversary_examples, w.seed))):
        t0 = time.perf_counter()
        stats = learner.sft(role, examples, w.epochs, w.learning_rate, seed=w.seed, micro_batch=w.micro_batch)
        stats.update(examples=len(examples), seconds=time.perf_counter() - t0)
        console.log(f"warm start {role}: {len(examples)} examples, loss per epoch "
                    f"{' '.join(f'{x:.3f}' for x in stats['loss_epochs'])} ({stats['seconds']:.0f} s)")
        out[role] = stats
    if w.check_tasks:
        t0 = time.perf_counter()
        check = format_check(learner, io, w.check_tasks, w.seed, levels=w.executor_levels, suite=suite)
        check["seconds"] = time.perf_counter() - t0
        console.log("warm start format check on held-out prompts: " + ", ".join(
            f"{role} {check[f'{role}_parse_rate']:.0%}" for role in ("executor", "curriculum", "adversary")))
        out["format_check"] = check
    return out


def train(cfg: TrainConfig, run_dir: str | Path, resume: bool = False, console: Console | None = None,
          learner=None, io: RoleIO | None = None, stop_after: str | None = None) -> RunDir:
    """Run (or resume) every phase of ``cfg`` in ``run_dir``.

    Args:
        cfg: validated config.
        run_dir: the run directory.
        resume: continue from the last complete checkpoint (required if one exists).
        learner, io: injected for tests (default: built from ``cfg``).
        stop_after: stop once this phase's checkpoint is complete (tests of resume).

    Raises:
        RunExistsError: checkpoints exist and ``resume`` is False, or the config changed (:func:`check_run_dir`).
        advsim.run.RunFileError: a file of the run directory cannot be read back.
    """
    console = console or Console()
    run = RunDir(run_dir)
    check_run_dir(cfg, run, resume)
    latest = run.latest()
    run.rollback_logs()
    run.write_config(cfg)
    learner = learner or build_learner(cfg, run)
    io = io or role_io(learner.tokenizer)
    suite = suite_from_config(cfg.world)
    history: list[dict] = []
    done = set(run.completed())
    if latest:
        name, state = latest
        learner.restore(state["versions"], run.checkpoint_dir(name) / "optimizer.pt")
        history = list(state.get("history", []))
        console.log(f"resuming {run.path} after checkpoint {name!r}")
    todo = [p for p in phases(cfg) if p not in done]
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bars:
        ids = {p: bars.add_task(p, total=1, start=False) for p in todo}
        for phase in todo:
            bars.start_task(ids[phase])
            _phase(phase, cfg, run, learner, io, history, console, suite)
            bars.update(ids[phase], completed=1)
            if stop_after == phase:
                break
    return run


def _phase(phase: str, cfg: TrainConfig, run: RunDir, learner, io: RoleIO, history: list, console: Console,
           suite) -> None:
    """Run one phase and commit its checkpoint (the body of :func:`train`'s loop, one progress
    bar per phase)."""
    t0 = time.perf_counter()
    if phase == "warmstart":
        stats = _warmstart(learner, io, cfg, console, suite)
        run.log("events.jsonl", [{"phase": phase, "warmstart": stats, "seconds": round(time.perf_counter() - t0, 1)}])
    elif phase.startswith("capability-iter-"):
        t = int(phase.rsplit("-", 1)[1])
        row = stage1_iteration(learner, io, run, t, suite)
        console.log(f"{phase}: p̂ {row['p_hat']} at levels {row['levels']}, R_C max {row['curriculum_reward_max']:.3f}, "
                    f"executor success {row['executor_success']}, informative groups "
                    f"{row['executor'].get('informative_group_fraction')}, "
                    f"diff max {row['executor'].get('diff', {}).get('max')}")
    else:
        t = int(phase.rsplit("-", 1)[1])
        row = stage2_iteration(learner, io, run, t, history, suite)
        if row.get("skipped"):
            console.log(f"{phase}: {row['skipped']}")
        else:
            console.log(f"{phase}: adversary parsed {row['valid']}/{row['proposals']}, flip rate {row['flip_rate']} "
                        f"(n={row['flip_n']}) vs null {row['null_flip_rate']} (n={row['null_flip_n']}), "
                        f"attacked success {row['executor_attacked_success']}, "
                        f"diff max {row['executor'].get('diff', {}).get('max')}")
    state = {"versions": dict(learner.versions), "history": history, "seconds": time.perf_counter() - t0}
    also = [f"adv-v-{phase.rsplit('-', 1)[1]}"] if phase.startswith("robust-iter-") else []
    for name in [*also, phase]:
        learner.save_optimizers(run.checkpoint_dir(name) / "optimizer.pt")
    run.commit_checkpoint(phase, state, also=also)
    console.log(f"checkpoint {' + '.join([phase, *also])} ({state['seconds']:.0f} s)")
