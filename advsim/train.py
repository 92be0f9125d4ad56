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

import pickle
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from safetensors import SafetensorError

from advsim.coevolution import RoleIO, stage1_iteration, stage2_iteration
from advsim.config import TrainConfig
from advsim.suites import suite_from_config
from advsim.run import LOGS, RunDir, RunFileError
from advsim.terminal import make_console
from policies.backbone import tokenizer_fingerprint


class RunExistsError(RuntimeError):
    """The run directory already holds checkpoints and ``resume`` was not requested, or it is
    resumed with a config that changes what the run computes (``RunDir.config_changes``)."""


def check_run_dir(cfg: TrainConfig, run: RunDir, resume: bool) -> None:
    """What :func:`train` checks before any work: a run with checkpoints continues only with
    ``resume`` and only under the config it was started with (up to
    :data:`advsim.run.RESUMABLE_CHANGES`), so a resumed run equals an uninterrupted one; a folder
    with a stopped run's log rows but no checkpoint is started over only with ``resume`` (a fresh
    start would silently drop those rows).

    Raises:
        RunExistsError: either rule is broken (the message lists every changed field).
        advsim.run.RunFileError: the run's checkpoint state or saved config cannot be read.
    """
    latest = run.latest()
    changes = run.config_changes(cfg) if latest else []
    if changes:  # first: with or without --resume, this config cannot continue the run
        from advsim.config import RUN_RECORD_DEFAULTS

        predates = run.fields_added_since()  # only those the saved config.yaml does not write
        added = [f"{s}.{k}: {v!r}" for s, fields in RUN_RECORD_DEFAULTS.items() for k, v in fields.items()
                 if f"{s}.{k}" in predates and any(c.startswith(f"{s}.{k}:") for c in changes)]
        hint = (f" ({', '.join(added)} is what this run used: its config.yaml predates the field, so write it "
                "out in the config you pass)") if added else ""
        raise RunExistsError(f"{run.path} was started with another config; resume it with its own "
                             f"({run.path / 'config.yaml'}) or start a new run directory. Changed: "
                             + "; ".join(changes) + hint)
    if latest and not resume and not remaining_phases(cfg, run):
        raise RunExistsError(f"{run.path} is complete: every phase of its config has a checkpoint (the last: "
                             f"{latest[0]!r}), so nothing is left to train; `advsim eval --run {run.path}` evaluates it "
                             "again, --resume reports it (a demo reuses its eval.json where up to date), or use another "
                             "run directory")
    if latest and not resume:
        raise RunExistsError(f"{run.path} already has checkpoint {latest[0]!r}; pass --resume to continue it")
    if not latest and not resume and any(run.count(log) for log in LOGS):
        raise RunExistsError(f"{run.path} holds the logs of a run that stopped before its first checkpoint; pass "
                             "--resume to start it over there (its rows are dropped, its saved rollouts reused) "
                             "or use another run directory")


def phases(cfg: TrainConfig) -> list[str]:
    """Names of the checkpoints a config produces, in order."""
    out = ["warmstart"] if cfg.warmstart.enabled else []
    if 1 in cfg.stages:
        out += [f"capability-iter-{t}" for t in range(1, cfg.stage1.iterations + 1)]
    if 2 in cfg.stages:
        out += [f"robust-iter-{t}" for t in range(1, cfg.stage2.iterations + 1)]
    return out


def remaining_phases(cfg: TrainConfig, run: RunDir) -> list[str]:
    """The phases of ``cfg`` (:func:`phases`) without a complete checkpoint in ``run`` yet, in order;
    [] when the run is complete.

    Raises:
        advsim.run.RunFileError: the run's checkpoint state cannot be read.
    """
    done = set(run.completed())
    return [p for p in phases(cfg) if p not in done]


def phase_order(name: str) -> tuple[int, int]:
    """Where a phase's checkpoint falls in training: warmstart (0, 0), ``capability-iter-t``
    (1, t), ``robust-iter-t`` and its ``adv-v-t`` (2, t).

    Raises:
        ValueError: not a checkpoint name (:data:`advsim.run.CHECKPOINT_NAME`).
    """
    if name == "warmstart":
        return (0, 0)
    for prefix, stage in (("capability-iter-", 1), ("robust-iter-", 2), ("adv-v-", 2)):
        if name.startswith(prefix) and name[len(prefix):].isascii() and name[len(prefix):].isdigit():
            return (stage, int(name[len(prefix):]))
    raise ValueError(f"{name!r} is not a checkpoint name")


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


def epoch_progress(console: Console, role: str, n_examples: int, epochs: int, t0: float):
    """A ``progress`` callback for :meth:`advsim.learner.Learner.sft` (called with the examples
    each step used) that logs one line per finished epoch but the last — ``warm start executor:
    epoch 1/3 done (93 s)``, seconds since ``t0`` — so a run logging to a file shows the warm
    start moving (the last epoch is the role's own summary line)."""
    seen = [0]

    def progress(k: int) -> None:
        before, seen[0] = seen[0] // max(1, n_examples), seen[0] + k
        done = seen[0] // max(1, n_examples)
        if done > before and done < epochs:
            console.log(f"warm start {role}: epoch {done}/{epochs} done ({time.perf_counter() - t0:.0f} s)")

    return progress


def _warmstart(learner, io: RoleIO, cfg: TrainConfig, console: Console, suite) -> dict[str, Any]:
    from advsim.warmstart import curriculum_examples, format_check

    w = cfg.warmstart
    tok = learner.tokenizer
    out = {}
    for role, examples in (("executor", suite.executor_demonstrations(io, tok, w)),
                           ("curriculum", curriculum_examples(io, tok, w.curriculum_examples, w.seed, suite)),
                           ("adversary", suite.adversary_demonstrations(io, tok, w.adversary_examples, w.seed))):
        t0 = time.perf_counter()
        stats = learner.sft(role, examples, w.epochs, w.learning_rate, seed=w.seed, micro_batch=w.micro_batch,
                            progress=epoch_progress(console, role, len(examples), w.epochs, t0))
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
        RunExistsError: checkpoints exist and ``resume`` is False, or the config changed (:func:`check_run_dir`),
            or the backbone's tokenizer differs from the one the run started with
            (:meth:`advsim.run.RunDir.tokenizer_changes`).
        advsim.learner.EngineChangedError: a resumed run's engine starts with another linear-layer
            kernel than its earlier updates recorded (another card, or a start-up proof that failed).
        advsim.run.RunFileError: a file of the run directory cannot be read back (the checkpoint
            to resume from included: its state, adapters or optimizer state).
        advsim.run.RunInUseError: another process works in ``run_dir`` (:meth:`advsim.run.RunDir.lock`).
    """
    console = console or make_console()
    run = RunDir(run_dir)
    with run.lock():
        return _train(cfg, run, resume, console, learner, io, stop_after)


def _train(cfg: TrainConfig, run: RunDir, resume: bool, console: Console, learner, io: RoleIO | None,
           stop_after: str | None) -> RunDir:
    """The body of :func:`train`, inside the run directory's lock."""
    check_run_dir(cfg, run, resume)
    latest = run.latest()
    done = set(run.completed())
    todo = remaining_phases(cfg, run)
    last = max((n for n in done if not n.startswith("adv-v-")), key=phase_order, default=None)
    early = [p for p in todo if last is not None and phase_order(p) < phase_order(last)]
    if early:  # e.g. a `stages: [2]` run resumed with [1, 2]: stage 1 would train after stage 2
        raise RunExistsError(f"{run.path} completed {last!r}, but this "
                             f"config would now run {', '.join(early)} before it ('stages' changed: a stage cannot be added "
                             "before one the run already trained); start a new run directory")
    run.rollback_logs()  # rows of a phase that never committed (a crash after its log, before its checkpoint)
    if latest and not todo:  # nothing to train: no engine, no config rewritten
        console.log(f"{run.path} is complete: every phase of its config has a checkpoint (the last: {latest[0]!r})")
        return run
    run.write_config(cfg)
    learner = learner or build_learner(cfg, run)
    changed = run.tokenizer_changes(tokenizer_fingerprint(learner.tokenizer))
    if changed:
        raise RunExistsError(f"{run.path} was started with another tokenizer (its adapters end their turns with "
                             f"that tokenizer's end-of-sequence token); start a new run directory. Changed: "
                             + "; ".join(changed))
    io = io or role_io(learner.tokenizer)
    suite = suite_from_config(cfg.world)
    history: list[dict] = []
    if latest:
        name, state = latest
        try:
            learner.restore(state["versions"], run.checkpoint_dir(name) / "optimizer.pt")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, pickle.UnpicklingError, SafetensorError) as exc:
            raise RunFileError(f"{run.checkpoint_dir(name)}: checkpoint {name!r} cannot be restored "
                               f"({type(exc).__name__}: {str(exc)[:300]}); its adapters or optimizer state are "
                               "missing or damaged") from None
        history = list(state.get("history", []))
        records = [e["engine"] for e in run.read("events.jsonl") if isinstance(e.get("engine"), dict)]
        learner.resume_engine = records[-1] if records else None  # checked when the engine starts (or now)
        learner.check_resume_engine()
        console.log(f"resuming {run.path} after checkpoint {name!r}")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bars:
        ids = {p: bars.add_task(p, total=1, start=False) for p in todo}
        for phase in todo:
            bars.start_task(ids[phase])
            _phase(phase, cfg, run, learner, io, history, console, suite)
            bars.update(ids[phase], completed=1)
            if stop_after == phase:
                break
    learner.resume_engine = None  # a guard of training: an evaluation afterwards measures on whatever engine runs
    return run


def _pct(x: float | None, digits: int = 1) -> str:
    """A rate in [0, 1] as a percentage ("88.3 %"), or "–" where it is None (no denominator)."""
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def _update_text(update: dict) -> str:
    """An update's stats as console text: ``diff max X``, or why it was skipped."""
    if "diff" in update:
        return f"diff max {update['diff'].get('max')}"
    if update.get("skipped"):
        return f"executor update skipped ({update['skipped']})"
    return "no executor update"


def stage1_summary(phase: str, row: dict) -> str:
    """One console line for a stage-1 iteration's event row (``coevolution.stage1_iteration``):
    per curriculum level the number of valid proposals, their mean p̂ and how many lie on the
    frontier of R_C (0.1 < p̂ < 1, AdvSim2Real Eq. 2's ν), then R_C's maximum, the executor's success and informative-group
    fraction and the update's max diff. The full lists stay in ``events.jsonl``.

    >>> stage1_summary("capability-iter-1", {"levels": [0, 0, 2], "p_hat": [1.0, 0.5, 0.0],
    ...     "curriculum_reward_max": 0.9, "executor_success": 0.5,
    ...     "executor": {"informative_group_fraction": 0.25, "diff": {"max": 0.0}}})
    'capability-iter-1: level 0: 2 tasks, mean p̂ 0.75, 1 at 0.1<p̂<1; level 2: 1 task, mean p̂ 0.00, 0 at 0.1<p̂<1; R_C max 0.900, executor success 50.0 %, informative groups 25.0 %, diff max 0.0'
    """
    by_level: dict = {}
    for level, p in zip(row.get("levels", []), row.get("p_hat", [])):
        by_level.setdefault(level, []).append(p)
    parts = [f"level {lv}: {len(ps)} task{'s' if len(ps) != 1 else ''}, mean p̂ {sum(ps) / len(ps):.2f}, "
             f"{sum(0.1 < p < 1 for p in ps)} at 0.1<p̂<1" for lv, ps in sorted(by_level.items())]
    ex = row.get("executor", {})
    return (f"{phase}: {'; '.join(parts) or 'no valid proposal'}; R_C max {row['curriculum_reward_max']:.3f}, "
            f"executor success {_pct(row['executor_success'])}, informative groups "
            f"{_pct(ex.get('informative_group_fraction'))}, {_update_text(ex)}")


def stage2_summary(phase: str, row: dict) -> str:
    """One console line for a stage-2 iteration's event row (``coevolution.stage2_iteration``):
    the adversary's parse count, the flip rate against the null injection (each with its n), the
    executor's attacked success and the update's max diff (or why the update was skipped).

    >>> stage2_summary("robust-iter-1", {"valid": 966, "proposals": 1024, "flip_rate": 0.007246, "flip_n": 7728,
    ...     "null_flip_rate": 0.00414, "null_flip_n": 7728, "executor_attacked_success": 0.8828125,
    ...     "executor": {"diff": {"max": 0.0}}})
    'robust-iter-1: adversary parsed 966/1024, flip rate 0.72 % (n=7728) vs null 0.41 % (n=7728), attacked success 88.3 %, diff max 0.0'
    >>> stage2_summary("robust-iter-1", {"valid": 6, "proposals": 6, "flip_rate": 1 / 6, "flip_n": 12,
    ...     "null_flip_rate": 0.0, "null_flip_n": 12, "executor_attacked_success": 0.0,
    ...     "executor": {"skipped": "no sample with a non-zero advantage"}})
    'robust-iter-1: adversary parsed 6/6, flip rate 16.67 % (n=12) vs null 0.00 % (n=12), attacked success 0.0 %, executor update skipped (no sample with a non-zero advantage)'
    """
    return (f"{phase}: adversary parsed {row['valid']}/{row['proposals']}, flip rate {_pct(row['flip_rate'], 2)} "
            f"(n={row['flip_n']}) vs null {_pct(row['null_flip_rate'], 2)} (n={row['null_flip_n']}), "
            f"attacked success {_pct(row['executor_attacked_success'])}, "
            f"{_update_text(row['executor'])}")


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
        console.log(stage1_summary(phase, row))
    else:
        t = int(phase.rsplit("-", 1)[1])
        row = stage2_iteration(learner, io, run, t, history, suite)
        console.log(f"{phase}: {row['skipped']}" if row.get("skipped") else stage2_summary(phase, row))
    state = {"versions": dict(learner.versions), "history": history, "seconds": time.perf_counter() - t0}
    also = [f"adv-v-{phase.rsplit('-', 1)[1]}"] if phase.startswith("robust-iter-") else []
    for name in [*also, phase]:
        learner.save_optimizers(run.checkpoint_dir(name) / "optimizer.pt")
    run.commit_checkpoint(phase, state, also=also)
    console.log(f"checkpoint {' + '.join([phase, *also])} ({state['seconds']:.0f} s)")
