"""``report.md`` and PNG plots of a run, written atomically into the run directory.

Plots (matplotlib, Agg backend):

- ``completion.png`` — completion per checkpoint: sim clean, sim attacked (learned adversaries,
  mean), sim attacked (corpus), browser clean, browser attacked;
- ``groups.png`` — completion per group (web: stratum; ledger: protocol) of the last checkpoint,
  sim clean vs browser clean;
- ``training.png`` — reward and success curves per role over updates, and the p̂ histogram of
  the curriculum's proposals.
"""

from __future__ import annotations

import io
from pathlib import Path

from forms_bench.atomic import atomic_write_bytes, atomic_write_text


def _save(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def _legend(ax, **kw) -> None:
    """A legend when the axes have labelled series (none: no legend, no matplotlib warning)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **kw)


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def checkpoint_order(results: dict) -> list[str]:
    """Checkpoint names in training order (``eval.json`` is written with sorted keys, so the
    order is kept in ``results["order"]``)."""
    return list(results.get("order") or results["checkpoints"])


def _completed(col: dict | None):
    """Task completion over the rendered (really attacked) episodes of an attacked column."""
    return None if not col else col.get("task_completed", {}).get("rate")


def _attacked_mean(res: dict):
    """Completion under the last learned adversary (rendered episodes only)."""
    cols = list(res.get("sim_attacked", {}).values())
    return _completed(cols[-1]) if cols else None


def _ci(r: dict | None) -> str:
    """``'45.0 (n=20, 25.8–65.8)'`` from a :func:`advsim.evaluate.rate` dict."""
    if not r or r.get("rate") is None:
        return "— (n=0)"
    return f"{100 * r['rate']:.1f} (n={r['n']}, {100 * r['ci_low']:.1f}–{100 * r['ci_high']:.1f})"


def plot_completion(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = checkpoint_order(results)
    series = {
        "sim clean": [results["checkpoints"][n]["sim_clean"]["overall"] for n in names],
        "sim attacked (learned)": [_attacked_mean(results["checkpoints"][n]) for n in names],
        "sim attacked (corpus)": [_completed(results["checkpoints"][n].get("sim_attacked_corpus")) for n in names],
        "sim attacked (external)": [_completed(results["checkpoints"][n].get("sim_attacked_external"))
                                    for n in names],
        "browser clean": [results["checkpoints"][n].get("browser_clean", {}).get("overall") for n in names],
        "browser attacked": [_completed(results["checkpoints"][n].get("browser_attacked")) for n in names],
    }
    fig, ax = plt.subplots(figsize=(8, 4.2))
    # series are shifted sideways a little so equal values (e.g. all 0 %) stay visible
    for k, ((label, ys), style) in enumerate(zip(series.items(), ("o-", "s--", "^:", "x-.", "D-", "v--"))):
        pts = [(i + 0.04 * (k - 2.5), 100 * y) for i, y in enumerate(ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel("completion (%)")
    ax.set_ylim(-3, 103)
    ax.set_title("Completion per checkpoint, clean vs attacked, sim vs browser")
    ax.grid(alpha=0.3)
    _legend(ax, loc="best")
    _save(fig, path)
    plt.close(fig)


def plot_groups(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last = checkpoint_order(results)[-1]
    res = results["checkpoints"][last]
    names = results["groups"]
    groups = {"sim clean": res["sim_clean"]["per_group"]}
    if "browser_clean" in res:
        groups["browser clean"] = res["browser_clean"]["per_group"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(groups)
    for k, (label, per) in enumerate(groups.items()):
        xs = [i + k * width for i in range(len(names))]
        bars = ax.bar(xs, [100 * (per.get(s) or 0.0) for s in names], width, label=label)
        # every bar carries its value, so 0 % is visibly 0 and "no data" is visibly "—"
        ax.bar_label(bars, labels=["—" if per.get(s) is None else f"{100 * per[s]:.0f}" for s in names],
                     fontsize=7, padding=1)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], [s.replace("_", "\n") for s in names])
    ax.set_ylabel("completion (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Completion per {results['group_name']} — {last}")
    _legend(ax)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def plot_training(events: list[dict], proposals: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    rows = [e for e in events if "stage" in e]
    xs = list(range(1, len(rows) + 1))
    labels = [f"s{e['stage']}.{e['iteration']}" for e in rows]
    ax = axes[0]
    for key, label in (("curriculum_reward_mean", "curriculum R_C"), ("adversary_reward_mean", "adversary R_A"),
                       ("executor.reward_mean", "executor R_E")):
        get = (lambda e, k=key: (e.get("executor") or {}).get("reward_mean")) if "." in key else \
            (lambda e, k=key: e.get(k))
        pts = [(x, get(e)) for x, e in zip(xs, rows) if get(e) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    ax.set_title("Mean reward per update")
    ax.set_xticks(xs, labels)
    _legend(ax)
    ax.grid(alpha=0.3)
    ax = axes[1]
    for key, label in (("executor_success", "stage-1 rollouts"), ("executor_clean_success", "stage-2 clean"),
                       ("executor_attacked_success", "stage-2 attacked"), ("parse_rate", "parse rate")):
        pts = [(x, e[key]) for x, e in zip(xs, rows) if e.get(key) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "o-", label=label)
    ax.set_title("Executor success during training (%)")
    ax.set_xticks(xs, labels)
    ax.set_ylim(-3, 103)
    _legend(ax)
    ax.grid(alpha=0.3)
    ax = axes[2]
    cur = [p for p in proposals if p.get("role") == "curriculum" and p.get("p_hat") is not None]
    for it in sorted({p["iteration"] for p in cur}):
        pts = [(p["level"], p["p_hat"]) for p in cur if p["iteration"] == it]
        ax.scatter([x + 0.08 * (it - 1) for x, _ in pts], [y for _, y in pts], label=f"iteration {it}", alpha=0.7)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_title(f"p̂_J of curriculum proposals by level (n={len(cur)})")
    ax.set_xlabel("difficulty level")
    ax.set_ylim(-0.05, 1.05)
    if cur:
        _legend(ax)
    ax.grid(alpha=0.3)
    ax = axes[3]
    for role in ("curriculum", "adversary", "executor"):
        pts = [(x, e[role].get("informative_group_fraction")) for x, e in zip(xs, rows)
               if isinstance(e.get(role), dict) and e[role].get("informative_group_fraction") is not None]
        if pts:
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "o-", label=role)
    ax.set_title("Informative groups (non-zero advantage, %)")
    ax.set_xticks(xs, labels)
    ax.set_ylim(-3, 103)
    _legend(ax)
    ax.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def _rate_cell(x: dict | None) -> str:
    """``k/n = r % [lo–hi]`` of an aggregate ``{"num", "den", …}`` rate (Wilson interval attached)."""
    if not x or not x.get("den"):
        return "—"
    return (f"{x['num']}/{x['den']} = {100 * x['num'] / x['den']:.0f} % "
            f"[{100 * x['ci_low']:.0f}–{100 * x['ci_high']:.0f}]")


def metrics_table(ck: dict) -> list[str]:
    """SafeActBench's metrics (the ledger's ``episode_metrics``: ECS per protocol, P-M, D-M, BSR,
    PAR, CAS) per checkpoint and column, as report lines; none when no column has them (another
    world's own metrics are left to ``eval.json``)."""
    rows = []
    for name, res in ck.items():
        cols = [("test sample", "clean", res["sim_clean"])]
        cols += [("test sample", f"attacked ({a})", v) for a, v in res.get("sim_attacked", {}).items()]
        if "sim_attacked_corpus" in res:
            cols.append(("test sample", "attacked (corpus)", res["sim_attacked_corpus"]))
        for lv, v in res.get("levels", {}).items():
            cols += [(f"level {lv}", s, v[s]) for s in ("clean", "attacked", "null") if s in v]
        for where, setting, col in cols:
            m = col.get("metrics")
            if not m or "ECS" not in m:  # this table is SafeActBench's; other metrics stay in eval.json
                continue
            by_p = m["ECS"]["by_protocol"]
            pm = "—" if m["P-M"] is None else f"{100 * m['P-M']:.0f} %"
            dm = "—" if m["D-M"] is None else f"{100 * m['D-M']:.0f} %"
            rows.append(f"| {name} | {where} | {setting} | "
                        + " | ".join(_rate_cell(by_p.get(p)) for p in ("V0", "V1", "V2", "V3", "Legacy"))
                        + f" | {pm} | {dm} | {_rate_cell(m['BSR'])} | {_rate_cell(m['PAR'])} | {_rate_cell(m['CAS'])} |")
    if not rows:
        return []
    return ["", "## Per protocol (SafeActBench)", "",
            "ECS = 1 when every consequential action was backed by evidence observed earlier (the world's "
            "strict verdict); attacked columns over rendered episodes only; 95 % Wilson intervals. Gap and "
            "Part. per protocol are in eval.json (`metrics`).", "",
            "| checkpoint | tasks | setting | ECS V0 | ECS V1 | ECS V2 | ECS V3 | ECS Legacy | P-M | D-M | BSR | PAR "
            "| CAS |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows


def wall_time_lines(events: list[dict], results: dict) -> list[str]:
    """The report's "Wall time per phase" table: seconds of the warm start and of each training
    iteration (``events.jsonl``: from the phase's start to its metrics row, checkpoint write not
    included) and of each checkpoint's evaluation (``eval.json``). [] when no row has a time
    (runs from before these were recorded)."""
    rows = []
    for e in events:
        if "seconds" not in e:
            continue
        if "warmstart" in e:
            rows.append(("warmstart", "training", e["seconds"]))
        elif "stage" in e:
            name = ("capability-iter-" if e["stage"] == 1 else "robust-iter-") + str(e["iteration"])
            rows.append((name, "training", e["seconds"]))
    for name in checkpoint_order(results):
        sec = results["checkpoints"][name].get("seconds")
        if sec is not None:
            rows.append((name, "evaluation", sec))
    if not rows:
        return []
    out = ["", "## Wall time per phase", "", "| phase | part | seconds |", "|---|---|---|"]
    out += [f"| {name} | {part} | {sec:.0f} |" for name, part, sec in rows]
    total = {part: sum(sec for _, p, sec in rows if p == part) for part in ("training", "evaluation")}
    out.append(f"| total | training {total['training']:.0f} s, evaluation {total['evaluation']:.0f} s | "
               f"{total['training'] + total['evaluation']:.0f} |")
    return out


UPDATE_PARTS = {"curriculum_update": "curriculum", "adversary_update": "adversary", "executor_update": "executor"}
"""A part of an iteration's ``part_seconds`` that is one role's update → that role's stats key."""


PART_ORDER = ("engine_start", "history", "control_runs", "propose", "replays", "curriculum_update",
              "adversary_update", "executor_rollouts", "executor_update")
"""The table's columns: the parts of :class:`advsim.coevolution.PartTimer` in stage 2's order
(engine start where it happened, control runs, proposals, replays, updates, rollouts); stage 1
runs its history and proposals before its control runs."""


def part_time_lines(events: list[dict]) -> list[str]:
    """The report's "Where a training iteration's time goes" table: per stage-1/2 iteration with
    ``part_seconds`` (:class:`advsim.coevolution.PartTimer`), the seconds of each part (columns in
    :data:`PART_ORDER`) — history
    (stage 1's probes), proposals, control runs, replays, rollouts, each role's update split into
    the engine's score (the forward values ℓ) and the learner's gradient steps — and the rest of
    the iteration (``other``: rewards, logging, parsing). [] when no row has the key (runs from
    before it was recorded)."""
    rows = [e for e in events if "stage" in e and isinstance(e.get("part_seconds"), dict)]
    if not rows:
        return []
    seen = {k for e in rows for k in e["part_seconds"]}  # events.jsonl sorts keys: put them back in run order
    names = [k for k in PART_ORDER if k in seen] + sorted(seen - set(PART_ORDER))

    def cell(e: dict, name: str) -> str:
        sec = e["part_seconds"].get(name)
        if sec is None:
            return "—"
        stats = e.get(UPDATE_PARTS.get(name, ""), {})
        if isinstance(stats, dict) and "score_seconds" in stats:
            return f"{sec:.1f} (score {stats['score_seconds']:.1f}, steps {stats['step_seconds']:.1f})"
        return f"{sec:.1f}"

    out = ["", "## Where a training iteration's time goes (seconds)", "",
           "| phase | total | " + " | ".join(n.replace("_", " ") for n in names) + " | other |",
           "|---|---|" + "---|" * (len(names) + 1)]
    for e in rows:
        name = ("capability-iter-" if e["stage"] == 1 else "robust-iter-") + str(e["iteration"])
        other = e.get("seconds", 0.0) - sum(e["part_seconds"].values())
        out.append(f"| {name} | {e.get('seconds', 0.0):.1f} | " + " | ".join(cell(e, n) for n in names)
                   + f" | {max(other, 0.0):.1f} |")
    return out


def _mean_cell(xs: list[float], digits: int) -> str:
    return f"{sum(xs) / len(xs):.{digits}f}" if xs else "—"


def curriculum_level_lines(proposals: list[dict]) -> list[str]:
    """The report's "Curriculum proposals per level" table, from ``proposals.jsonl``'s stage-1
    ``role: curriculum`` rows: per iteration and level, the valid proposals, their mean p̂, how many
    had 0.1 < p̂ < 1 (ν = 1 and q > 0, the only ones R_C rewards), the mean R_C and the mean n(x) of
    the repetition penalty (AdvSim2Real Eq. 2). Shows where the curriculum puts its mass and whether
    it collapses onto one level. [] when there are no such rows."""
    rows = [r for r in proposals if r.get("stage") == 1 and r.get("role") == "curriculum" and r.get("valid")]
    if not rows:
        return []
    cells: dict[tuple[int, int], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["iteration"], r["level"]), []).append(r)
    out = ["", "## Curriculum proposals per level (stage 1)", "",
           "| iteration | level | valid proposals | mean p̂ | 0.1 < p̂ < 1 | mean R_C | mean n(x) |",
           "|---|---|---|---|---|---|---|"]
    for (it, lv), rs in sorted(cells.items()):
        ps = [r["p_hat"] for r in rs if r.get("p_hat") is not None]
        rc = [r["reward"] for r in rs if r.get("reward") is not None]
        n = [r["cluster"] for r in rs if r.get("cluster") is not None]
        out.append(f"| {it} | {lv} | {len(rs)} | {_mean_cell(ps, 3)} | {sum(0.1 < p < 1 for p in ps)} | "
                   f"{_mean_cell(rc, 3)} | {_mean_cell(n, 1)} |")
    return out


def engine_lines(events: list[dict]) -> list[str]:
    """The report's lines naming the rollout engine of the training updates (the ``"engine"`` key
    :meth:`advsim.learner.Learner.engine_record` puts in each stage row): one sentence when every
    update recorded the same engine and kernels, else one bullet per engine with the updates
    (``stage.iteration``) it served, updates without a record (written before the key existed)
    listed as such; ``[]`` when no update has one. On a resumed run the record names the engine
    of the process that wrote the row; episodes read back from chunks saved before the restart
    came from the earlier process's engine."""
    engines: dict[str, list[str]] = {}
    for e in events:
        if "stage" not in e or e.get("skipped"):
            continue
        eng = e.get("engine")
        text = ((f"{eng['kind']} engine (`{eng.get('class', '?')}`) on {eng['device']}, {eng['dtype']}"
                 + (f"; linear layers: {eng['linear_kernel']} ({eng.get('linear_kernel_reason', '')})"
                    if eng.get("linear_kernel") else "")
                 + (f"; LoRA shrink tile: {eng['lora_shrink']}" if eng.get("lora_shrink") else "")
                 + (f"; vLLM model runner {eng['model_runner']}" if eng.get("model_runner", "v1") != "v1" else ""))
                if eng else "engine not recorded")
        engines.setdefault(text, []).append(f"{e['stage']}.{e['iteration']}")
    if list(engines) == ["engine not recorded"] or not engines:
        return []
    if len(engines) == 1:
        return [f"Rollouts: {next(iter(engines))}.", ""]
    return ["Rollouts:", ""] + [f"- {', '.join(its)}: {text}" for text, its in engines.items()] + [""]


def write_report(run_dir: str | Path, results: dict) -> Path:
    """Write ``report.md`` and the plots into ``run_dir``; returns the report path."""
    from advsim.run import RunDir

    run = RunDir(run_dir)
    # what the last complete checkpoint covers: rows of a phase still running (or killed) are not results
    events, proposals = run.read_committed("events.jsonl"), run.read_committed("proposals.jsonl")
    plot_completion(results, run.path / "completion.png")
    plot_groups(results, run.path / "groups.png")
    plot_training(events, proposals, run.path / "training.png")
    ck = {name: results["checkpoints"][name] for name in checkpoint_order(results)}
    groups, gname = results["groups"], results["group_name"]
    lines = [f"# advsim report — {run.path.name} ({results['world']})", "",
             f"Evaluated on {len(results['tasks'])} frozen test tasks (stratified by {gname}), {results['seeds']} "
             "seed(s) in the world model; browser columns (where the world has them) are strict success on the "
             "real pages in headless Chromium. An attacked column counts only episodes whose injection parsed "
             "and was rendered (passed the render gate); its completion is over those episodes, with n.", "",
             "## Completion per checkpoint, test sample (%)", "",
             "| checkpoint | executor | sim clean | ± | sim attacked (learned) | sim attacked (corpus) | "
             "sim attacked (external) | browser clean | browser attacked | parse rate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in ck.items():
        learned = list(res.get("sim_attacked", {}).values())
        lines.append(f"| {name} | {res['executor']} | {_pct(res['sim_clean']['overall'])} | "
                     f"{_pct(res['sim_clean']['spread'])} | "
                     f"{_ci(learned[-1]['task_completed']) if learned else '—'} | "
                     f"{_ci(res['sim_attacked_corpus']['task_completed']) if 'sim_attacked_corpus' in res else '—'} | "
                     f"{_ci(res['sim_attacked_external']['task_completed']) if 'sim_attacked_external' in res else '—'} | "
                     f"{_pct(res.get('browser_clean', {}).get('overall'))} | "
                     f"{_ci(res['browser_attacked']['task_completed']) if 'browser_attacked' in res else '—'} | "
                     f"{_pct(res['parse_rate'])} |")
    att_rows = []
    for name, res in ck.items():
        cols = [(f"sim, {a}", v) for a, v in res.get("sim_attacked", {}).items()]
        cols += [(label, res[key]) for key, label in (("sim_attacked_corpus", "sim, corpus"),
                                                      ("sim_attacked_external", "sim, external"),
                                                      ("browser_attacked", "browser, last adversary")) if key in res]
        for label, v in cols:
            att_rows.append(f"| {name} | {label} | {v['proposals']} | {v['parsed']} | {v['rendered']} | "
                            f"{_ci(v['task_completed'])} | {_ci(v['attack_succeeded'])} |")
    if att_rows:
        lines += ["", "## Attacks, test sample", "",
                  "attack_succeeded = flip rate: rendered episodes that failed although the same task and seed "
                  "succeeded clean, over those clean successes.", "",
                  "| checkpoint | column | proposals | parsed | rendered | task_completed % | attack_succeeded % |",
                  "|---|---|---|---|---|---|---|"] + att_rows
    lv_rows = []
    for name, res in ck.items():
        for lv, v in res.get("levels", {}).items():
            rx = v.get("reactive")
            lv_rows.append(f"| {lv} | {name} | {_ci(v['clean'])} | "
                           + (f"{_ci(v['attacked']['task_completed'])} | {_ci(v['attacked']['attack_succeeded'])} | "
                              f"{_ci(v['null']['attack_succeeded'])} |" if "attacked" in v else "— | — | — |")
                           + (f" {rx['rendered']}/{rx['proposals']} | "
                              f"{_ci(rx['task_completed'])} | {_ci(rx['attack_succeeded'])} |" if rx else " — | — | — |"))
    if lv_rows:
        lines += ["", "## Per-level evaluation pool (%, n, 95 % Wilson interval)", "",
                  "A fixed pool drawn from the training distribution at each difficulty level with its own "
                  f"seed, the same for every checkpoint; attacked under {results.get('pool_adversary') or '—'}; null = a benign "
                  "text of similar length at the same transition (the executor's own noise); reactive = the same "
                  "adversary through the reactive protocol (wait or inject before each transition, ≤ 11 queries "
                  "× ≤ 256 tokens), rendered = episodes in which it injected and the injection rendered.", "",
                  "| level | checkpoint | clean | attacked: task_completed | attacked: flip rate | null: flip rate "
                  "| reactive: rendered | reactive: task_completed | reactive: flip rate |",
                  "|---|---|---|---|---|---|---|---|---|"] + sorted(lv_rows, key=lambda r: int(r.split("|")[1]))
    paired = results.get("paired") or []
    if paired:
        lines += ["", "## Change in clean success, paired (same pool slots, same sampling seeds)", "",
                  "Every checkpoint plays each pool slot with the same per-turn sampling seeds (common random "
                  "numbers), so outcomes pair up: only before / only after count the slots that one checkpoint "
                  "solved and the other did not; p = exact two-sided McNemar test on those discordant slots.", "",
                  "| level | before → after | n | before % | after % | change (points) | both | only before "
                  "| only after | neither | p (McNemar) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for pr in paired:
            lines.append(f"| {pr['level']} | {pr['before']} → {pr['after']} | {pr['n']} | {_pct(pr['rate_before'])} | "
                         f"{_pct(pr['rate_after'])} | {100 * pr['change']:+.1f} | {pr['both']} | {pr['only_before']} | "
                         f"{pr['only_after']} | {pr['neither']} | {pr['p_value']:.3f} |")
    lines += ["", f"## Per {gname}, test sample (%)", ""]
    lines += ["| checkpoint | setting | " + " | ".join(groups) + " |", "|---|---|" + "---|" * len(groups)]
    for name, res in ck.items():
        settings = [("sim clean", res["sim_clean"])]
        if "browser_clean" in res:
            settings.append(("browser clean", res["browser_clean"]))
        for label, v in settings:
            lines.append(f"| {name} | {label} | " + " | ".join(_pct(v["per_group"].get(g)) for g in groups) + " |")
    lines += metrics_table(ck)
    if results.get("judge") == "lm":
        lines += ["", "## LM judge J vs the strict check (simulated episodes)", "",
                  "Success above is the strict check on the world's true state; J is the frozen backbone "
                  "reading the final page and the actions.", "",
                  "| checkpoint | setting | J pass % | J pass, strict fail | J fail, strict pass | J unparsed |",
                  "|---|---|---|---|---|---|"]
        for name, res in ck.items():
            settings = [("sim clean", res["sim_clean"])] + [(f"sim attacked ({a})", v)
                                                            for a, v in res["sim_attacked"].items()]
            if "sim_attacked_corpus" in res:
                settings.append(("sim attacked (corpus)", res["sim_attacked_corpus"]))
            if "sim_attacked_external" in res:
                settings.append(("sim attacked (external)", res["sim_attacked_external"]))
            for label, v in settings:
                if "judge_success" in v:
                    lines.append(f"| {name} | {label} | {_pct(v['judge_success'])} | {v['judge_pass_strict_fail']} | "
                                 f"{v['judge_fail_strict_pass']} | {v['judge_parse_errors']} |")
    warm = next((e["warmstart"] for e in events if "warmstart" in e), None)
    if warm:
        lines += ["", "## Warm start", "", "| role | examples | loss per epoch | seconds |", "|---|---|---|---|"]
        for role in ("executor", "curriculum", "adversary"):
            w = warm.get(role)
            if w:
                losses = " → ".join(f"{x:.3f}" for x in w.get("loss_epochs", [w["loss_first"], w["loss_last"]]))
                lines.append(f"| {role} | {w['examples']} | {losses} | {w['seconds']:.0f} |")
        chk = warm.get("format_check")
        if chk:
            lines += ["", f"Format check on {int(chk['samples'])} held-out prompts per role (sampled at the "
                      "rollout temperature): " + ", ".join(f"{role} {_pct(chk[f'{role}_parse_rate'])} % parse"
                                                          for role in ("executor", "curriculum", "adversary"))
                      + (f"; the curriculum's level equals the warm-start prior (the history's level closest to "
                         f"p̂ = ½, one step toward it) in {_pct(chk['curriculum_prior_agreement'])} %"
                         if "curriculum_prior_agreement" in chk else "") + "."]
    train_rows = [e for e in events if "stage" in e]
    if train_rows:
        lines += ["", "## Training updates", ""]
        lines += engine_lines(train_rows)
        lines += [
                  "| stage.iter | tasks | executor success (rollouts) | parse: executor / curriculum / adversary | "
                  "informative groups: executor / curriculum / adversary | R_C max / R_A mean | flip (n) vs null (n) | "
                  "executor update: diff max (samples trained / given, optimizer steps) |", "|---|---|---|---|---|---|---|---|"]
        for e in train_rows:
            if e.get("skipped"):
                lines.append(f"| {e['stage']}.{e['iteration']} | {e.get('tasks', 0)} | {e['skipped']} | | | | | |")
                continue
            parse = e.get("parse", {})
            ptxt = " / ".join(_pct((parse.get(r) or {}).get("rate")) for r in ("executor", "curriculum", "adversary"))
            inf = " / ".join(_pct((e.get(r) or {}).get("informative_group_fraction"))
                             for r in ("executor", "curriculum", "adversary"))
            succ = e.get("executor_success", e.get("executor_clean_success"))
            r = e.get("curriculum_reward_max", e.get("adversary_reward_mean"))
            flip = (f"{_pct(e.get('flip_rate'))} ({e.get('flip_n')}) vs {_pct(e.get('null_flip_rate'))} "
                    f"({e.get('null_flip_n')})") if e["stage"] == 2 else "—"
            ex = e.get("executor") or {}
            diff = ex.get("diff", {}).get("max", "—")
            if ex.get("skipped"):
                diff = f"update skipped: {ex['skipped']}"
            elif "samples_given" in ex:
                diff = f"{diff} ({ex['samples']}/{ex['samples_given']} samples, {ex.get('optimizer_steps', 1)} steps)"
            lines.append(f"| {e['stage']}.{e['iteration']} | {e.get('tasks') if e['stage'] == 2 else e.get('valid')} | {_pct(succ)} | {ptxt} | "
                         f"{inf} | {'—' if r is None else f'{r:.3f}'} | {flip} | {diff} |")
        fails = [(e["stage"], e["iteration"], role, f) for e in train_rows for role, v in (e.get("parse") or {}).items()
                 for f in (v.get("failures") or [])[:1]]
        if fails:
            lines += ["", "Parse failures (one sample per role and update):", ""]
            lines += [f"- {s}.{i} {role}: `{f['text'][:120]!r}` — {f['error'][:160]}" for s, i, role, f in fails]
    lines += curriculum_level_lines(proposals)
    lines += wall_time_lines(events, results)
    lines += part_time_lines(events)
    lines += ["", "![completion per checkpoint](completion.png)", "", f"![per {gname}](groups.png)", "",
              "![training curves](training.png)", ""]
    path = run.path / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path
