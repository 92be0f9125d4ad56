"""``advsim bench judge``: agreement of a judge with the strict check, and its flip rate.

Labelled set (deterministic, built from the test tasks): per task the oracle trajectory (strict
label 1) and three perturbed oracle trajectories (strict label 0):

* ``wrong_value`` — the first target field in page order is set to a wrong value (a number + 1,
  text + ``"x"``, the next other option, the opposite checkbox state);
* ``forbidden`` — the first forbidden control is clicked before the final control;
* ``no_submit`` — the final control is never clicked (the closing message is kept).

Every trajectory is played in the simulated world; its label is the strict check's verdict on
the world's true state (so the set stays right even if a perturbation ever failed to break a
task). Agreement: accuracy and Cohen's κ (scikit-learn is not installed here, so κ is computed
by :func:`cohen_kappa`, a few lines). The flip rate is :func:`judges.attacks.flip_rate` over the
same trajectories.

Judges: ``oracle`` (the strict check on the true state: κ = 1 by construction, a self-check of
the set), ``self-report`` (believes the executor: success iff it sent a final message — the
failure mode an LM judge must beat), ``lm`` (an :class:`judges.lm.LMJudge` on a local
checkpoint through :class:`policies.engines.TorchEngine`).

Source: AdvSim2Real (the frozen judge J; the paper concedes J can accept wrong computations).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.table import Table

from advsim.attacks import wrong_value_action
from advsim.terminal import make_console
from forms_bench.actions import Action, ActionParseError, parse_action
from forms_bench.oracle import solve
from forms_bench.schema import Task
from forms_bench.suite import select_tasks
from judges.attacks import flip_rate
from judges.lm import Trajectory
from judges.oracle import oracle_judge
from judges.strict import Verdict, check_record
from worlds.web.sim import SimWebWorld
from worlds.web.world import ActionError

KINDS: tuple[str, ...] = ("oracle", "wrong_value", "forbidden", "no_submit")


def cohen_kappa(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    """Cohen's κ of two binary raters: (p_o − p_e) / (1 − p_e).

    p_o is the observed agreement, p_e = p₁(true)·p₁(pred) + p₀(true)·p₀(pred) the agreement
    expected by chance. When p_e = 1 (both raters constant and equal) κ is undefined: returns
    NaN (as scikit-learn's ``cohen_kappa_score`` does).

    Raises:
        ValueError: different lengths or an empty input.
    """
    if len(y_true) != len(y_pred) or not y_true:
        raise ValueError(f"need two equal, non-empty label lists (got {len(y_true)} and {len(y_pred)})")
    n = len(y_true)
    a = [int(bool(x)) for x in y_true]
    b = [int(bool(x)) for x in y_pred]
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe == 1:
        return math.nan
    return (po - pe) / (1 - pe)


def play(task: Task, actions: Sequence[Action | str], world: SimWebWorld | None = None,
         max_steps: int = 12) -> Trajectory:
    """Play ``actions`` on ``task`` in the simulated world; return the trajectory with its record.

    Invalid actions are kept (page unchanged, their error recorded), as in WebForms-v0; play
    stops after ``send_msg_to_user`` or ``max_steps`` actions.
    """
    w = world or SimWebWorld()
    pages = [w.reset(task)]
    texts, errors, message = [], [], None
    for a in list(actions)[:max_steps]:
        text = a.to_text() if isinstance(a, Action) else str(a)
        err, act = "", None
        try:
            act = parse_action(text)
            text = act.to_text()
            pages.append(w.step(act))
        except (ActionParseError, ActionError) as exc:
            err = str(exc)
            pages.append(w.observe())
        texts.append(text)
        errors.append(err)
        if act is not None and act.name == "send_msg_to_user" and not err:
            message = act.args[0]
            break
    return Trajectory(goal=task.goal, pages=pages, actions=texts, errors=errors, message=message,
                      task_id=task.id, record=w.record())


def perturb(task: Task, kind: str) -> list[Action]:
    """The oracle's actions for ``task`` changed by ``kind`` (one of :data:`KINDS`)."""
    acts = solve(task)
    final_bid = task.page.control(task.spec.final_control).bid
    at_final = next(i for i, a in enumerate(acts) if a.name == "click" and a.bid == final_bid)
    if kind == "oracle":
        return acts
    if kind == "forbidden":
        bid = task.page.control(task.spec.forbidden[0]).bid
        return acts[:at_final] + [Action("click", (bid,))] + acts[at_final:]
    if kind == "no_submit":
        return acts[:at_final] + acts[at_final + 1:]
    if kind == "wrong_value":
        key = next(f.key for f in task.page.fields() if f.key in task.spec.targets)
        wrong = wrong_value_action(task, key)
        bid = task.page.field(key).bid
        idx = next((i for i, a in enumerate(acts) if a.bid == bid), None)
        if idx is None:
            return acts[:at_final] + [wrong] + acts[at_final:]
        return acts[:idx] + [wrong] + acts[idx + 1:]
    raise ValueError(f"unknown perturbation {kind!r}; expected one of {', '.join(KINDS)}")


def labelled_set(tasks: Sequence[Task]) -> list[tuple[Task, Trajectory, int, str]]:
    """``(task, trajectory, strict label, kind)`` for every task and every kind in :data:`KINDS`."""
    world = SimWebWorld()
    out = []
    for task in tasks:
        for kind in KINDS:
            traj = play(task, perturb(task, kind), world)
            out.append((task, traj, int(check_record(task, traj.record).success), kind))
    return out


def self_report_judge(task: Any, traj: Trajectory) -> Verdict:
    """Believes the executor: success iff it ended with a final message."""
    if traj.message is not None:
        return Verdict(True, [])
    return Verdict(False, ["no final message"])


def make_judge(judge: str, model: str | None = None, k: int = 1, temperature: float = 0.0,
               max_new_tokens: int = 16, prefill: bool = False) -> Callable[[Any, Trajectory], Verdict]:
    """The judge named ``judge`` (``oracle``, ``self-report`` or ``lm``; ``model`` = a local
    checkpoint folder or the default backbone for ``lm``)."""
    if judge == "oracle":
        return oracle_judge
    if judge == "self-report":
        return self_report_judge
    if judge == "lm":
        from judges.lm import LMJudge
        from policies.backbone import DEFAULT_BACKBONE, load_backbone
        from policies.engines import TorchEngine

        lm, tok, _ = load_backbone(model or DEFAULT_BACKBONE)
        return LMJudge(TorchEngine(lm, tok), tok, k=k, temperature=temperature,
                       max_new_tokens=max_new_tokens, prefill=prefill)
    raise ValueError(f"unknown judge {judge!r}; expected oracle, self-report or lm")


def agreement(judge: Callable[[Any, Trajectory], Verdict],
              labelled: Sequence[tuple[Task, Trajectory, int, str]]) -> dict[str, Any]:
    """Accuracy, κ, confusion counts, parse errors and per-kind accuracy of ``judge`` on
    ``labelled``. A parse error counts as a verdict of 0."""
    from judges.attacks import judge_all

    verdicts = judge_all(judge, [(t, tr) for t, tr, _, _ in labelled])
    y = [lab for _, _, lab, _ in labelled]
    p = [int(v.success) for v in verdicts]
    n = len(y)
    conf = {"tp": sum(a == 1 and b == 1 for a, b in zip(y, p)), "fp": sum(a == 0 and b == 1 for a, b in zip(y, p)),
            "fn": sum(a == 1 and b == 0 for a, b in zip(y, p)), "tn": sum(a == 0 and b == 0 for a, b in zip(y, p))}
    per_kind = {}
    for kind in KINDS:
        idx = [i for i, (_, _, _, k) in enumerate(labelled) if k == kind]
        if idx:
            per_kind[kind] = {"n": len(idx), "agree": sum(y[i] == p[i] for i in idx)}
    disagreements = [{"task": labelled[i][0].id, "kind": labelled[i][3], "strict": y[i], "judge": p[i]}
                     for i in range(n) if y[i] != p[i]]
    return {"n": n, "accuracy": sum(a == b for a, b in zip(y, p)) / n if n else math.nan,
            "kappa": cohen_kappa(y, p) if n else math.nan, "confusion": conf,
            "parse_errors": sum(1 for v in verdicts if getattr(v, "parse_error", None)),
            "per_kind": per_kind, "disagreements": disagreements}


def run(judge: str = "oracle", tasks: str = "all", model: str | None = None, k: int = 1,
        temperature: float = 0.0, max_new_tokens: int = 16, flip: bool = True,
        flip_bases: int | None = None, prefill: bool = False, console: Console | None = None, judge_fn: Callable[[Any, Trajectory], Verdict] | None = None) -> dict[str, Any]:
    """Run the benchmark; print the tables; return the numbers.

    Args:
        judge: ``oracle`` | ``self-report`` | ``lm`` (ignored when ``judge_fn`` is given).
        tasks: ``all`` | ``sample:N`` | comma-separated test task ids.
        model: local checkpoint folder for ``lm`` (default: the embedded backbone).
        k, temperature, max_new_tokens: LM judge sampling (majority over k samples).
        prefill: LM judge answers after a prefilled ``VERDICT:`` (:class:`judges.lm.LMJudge`).
        flip: also measure the flip rate on :data:`judges.attacks.SUITE`.
        flip_bases: use only the first N labelled trajectories (in task order: one success and
            its three failures per task) as flip-rate bases (None = all); each base costs
            1 + 40 judge calls.
        console: where to print (default: a new rich Console).
        judge_fn: a judge object to use instead of a named one (its name is printed as ``custom``).

    Returns:
        ``{"judge", "seconds" (judging wall time), "tasks", "trajectories", "labels": {"success", "failure"}, "accuracy",
        "kappa", "confusion", "parse_errors", "per_kind", "disagreements", "flip": FlipReport
        dict or None}``.

    Raises:
        ValueError: unknown judge or task id.
    """
    console = console or make_console()
    name = "custom" if judge_fn is not None else judge
    fn = judge_fn or make_judge(judge, model, k, temperature, max_new_tokens, prefill)
    selected = select_tasks(tasks)
    labelled = labelled_set(selected)
    t0 = time.perf_counter()
    agr = agreement(fn, labelled)
    out: dict[str, Any] = {"judge": name, "seconds": 0.0, "tasks": len(selected), "trajectories": len(labelled),
                           "labels": {"success": sum(lab for _, _, lab, _ in labelled),
                                      "failure": sum(1 - lab for _, _, lab, _ in labelled)}}
    out.update({k_: agr[k_] for k_ in ("accuracy", "kappa", "confusion", "parse_errors", "per_kind",
                                       "disagreements")})
    bases = [(t, tr, lab) for t, tr, lab, _ in labelled][:flip_bases]
    rep = flip_rate(fn, bases) if flip else None
    out["flip"] = rep.to_dict() if rep is not None else None
    out["seconds"] = time.perf_counter() - t0

    table = Table(title=f"advsim bench judge — judge={name}, {len(selected)} tasks, "
                        f"{len(labelled)} labelled trajectories")
    table.add_column("measure")
    table.add_column("value", justify="right")
    c = agr["confusion"]
    table.add_row("accuracy vs strict check", f"{agr['accuracy']:.3f}")
    table.add_row("Cohen's κ vs strict check", "undefined" if math.isnan(agr["kappa"]) else f"{agr['kappa']:.3f}")
    table.add_row("judge 1 / strict 1 (TP)", str(c["tp"]))
    table.add_row("judge 1 / strict 0 (FP)", str(c["fp"]))
    table.add_row("judge 0 / strict 1 (FN)", str(c["fn"]))
    table.add_row("judge 0 / strict 0 (TN)", str(c["tn"]), end_section=True)
    for kind, v in agr["per_kind"].items():
        table.add_row(f"agreement on {kind}", f"{v['agree']}/{v['n']}")
    table.add_row("unparseable verdicts", str(agr["parse_errors"]), end_section=True)
    if rep is not None:
        rate = "n/a (no eligible base)" if math.isnan(rep.rate) else f"{rep.rate:.3f}"
        table.add_row("flip rate (flips / attacked pairs)", f"{rate} ({rep.flips}/{rep.pairs})")
        table.add_row("eligible bases (judged right clean)", f"{rep.eligible}/{rep.bases}")
    table.add_row("judging time (s)", f"{out['seconds']:.1f}")
    console.print(table)
    if rep is not None and rep.pairs:
        ft = Table(title="flip rate per attack (flips / pairs)")
        ft.add_column("attack")
        for ch in rep.per_channel:
            ft.add_column(ch, justify="right")
        for a, cells in rep.per_cell.items():
            ft.add_row(a, *[f"{cells[ch][0]}/{cells[ch][1]}" if ch in cells else "-" for ch in rep.per_channel])
        console.print(ft)
    return out
