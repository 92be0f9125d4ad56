"""Evaluation of a run through its task suite: any world, clean and attacked, with intervals.

:func:`evaluate_suite` evaluates every executor checkpoint of a run in the world its config
names (:func:`advsim.suites.suite_from_config`), through the suite protocol only:

- a **per-level pool** (``eval.levels`` × ``eval.pool_per_level``; :meth:`eval_pool` of the
  suite: generated tasks no training run uses), clean, and on ``eval.attacked_levels`` under the
  last learned adversary's α and under the null injection (:meth:`null_injection`);
- the **frozen suite's tasks** that ``eval.tasks`` names (:meth:`frozen_tasks`: ``all``,
  ``sample:N`` — N per group, the ledger's protocols V0–V3 and Legacy (spread over its
  domains), the web's strata — or task ids), clean and attacked.

Counting is honest (AdvSim2Real's protocol): an attacked episode counts only when its injection
was rendered where the executor reads it; every rate carries its numerator, denominator and a
95 % Wilson interval. Where the world reports more than success — the ledger's SafeActBench
metrics (ECS per protocol and domain, P-M, D-M, BSR, PAR, CAS, Gap, Part.;
:func:`worlds.ledger.evaluator.aggregate`) — :meth:`episode_metrics` of the suite adds them per
column. Writes ``eval.json`` and ``report.md`` into the run directory (atomically).

The web world's full evaluation (real browser, reactive adversary, corpus, LM judge) is
:func:`advsim.evaluate.evaluate`; this module is what every suite gets.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from advsim.evaluate import attacked_column, paired_change, rate, wilson
from advsim.rollout import EpisodeSpec, run_episodes
from forms_bench.atomic import atomic_write_json, atomic_write_text

POOL_SEED = 424_242
"""Seed of the per-level pools (no training run draws with it)."""


def with_intervals(obj: Any) -> Any:
    """Every ``{"num", "den", "value"}`` rate inside ``obj`` gains ``ci_low``/``ci_high`` (95 % Wilson)."""
    if isinstance(obj, dict):
        out = {k: with_intervals(v) for k, v in obj.items()}
        if {"num", "den", "value"} <= set(obj):
            out["ci_low"], out["ci_high"] = wilson(obj["num"], obj["den"])
        return out
    if isinstance(obj, list):
        return [with_intervals(x) for x in obj]
    return obj


def learned_alphas(learner, io, suite, tasks: Sequence, adversary: str, seed: int) -> list:
    """α per task from an adversary adapter version, on the prompt it trains on (the task and a
    successful control: here the ground truth's actions); None when the output does not parse
    or the task has no injection surface (:meth:`injectable`; not queried)."""
    from policies.engines import GenerationRequest

    r = learner.cfg.rollout
    targets = [(i, t) for i, t in enumerate(tasks) if suite.injectable(t)]
    reqs = [GenerationRequest(prompt_ids=tuple(suite.adversary_prompt(io, t, suite.control_actions(t))),
                              adapter=adversary, max_new_tokens=r.proposal_max_new_tokens,
                              temperature=r.proposal_temp(), seed=seed + i) for i, t in targets]
    out: list = [None] * len(tasks)
    for g, (i, t) in zip(learner.engine.generate(reqs), targets):
        try:
            out[i] = suite.parse_injection(io, g.text, t)
        except ValueError:
            pass
    return out


def _column(suite, clean, alphas, attacked, tasks) -> dict[str, Any]:
    col = attacked_column(clean, alphas, attacked)
    col["injectable"] = sum(map(suite.injectable, tasks))  # proposals asked; parsed <= injectable
    rendered = [e for e in attacked if e.rendered]
    col["metrics"] = with_intervals(suite.episode_metrics([e.final_info for e in rendered]))
    return col


def evaluate_suite(run_dir: str | Path, learner=None, io=None, console: Console | None = None) -> dict:
    """Evaluate every executor checkpoint of a run in its world; writes ``eval.json`` and
    ``report.md`` (see the module docstring).

    Returns:
        ``{"world", "order", "pool": {level: task ids}, "sample": task ids, "adversary",
        "checkpoints": {name: {"executor", "levels": {level: {"clean", "attacked", "null"}},
        "sample": {"clean", "attacked", "null"}}}, "paired": …}`` — clean columns are
        :func:`advsim.evaluate.rate` dicts plus ``metrics``; attacked and null columns
        :func:`advsim.evaluate.attacked_column` dicts plus ``metrics`` over rendered episodes.

    Raises:
        FileNotFoundError: the run has no config or no complete checkpoint.
    """
    from advsim.config import load_config
    from advsim.run import RunDir
    from advsim.suites import suite_from_config
    from advsim.train import build_learner, role_io

    console = console or Console()
    run = RunDir(run_dir)
    cfg = load_config(run.path / "config.yaml")
    done = run.completed()
    if not done:
        raise FileNotFoundError(f"{run.path}: no complete checkpoint to evaluate")
    suite = suite_from_config(cfg.world)
    learner = learner or build_learner(cfg, run)
    io = io or role_io(learner.tokenizer)
    states = {name: run.checkpoint_dir(name) for name in done}

    def versions(name):
        return json.loads((states[name] / "state.json").read_text())["versions"]

    for name in done:
        learner.restore(versions(name), None)
    executors = [n for n in done if not n.startswith("adv-v-")]
    adversaries = [n for n in done if n.startswith("adv-v-")]
    r = cfg.rollout

    def run_set(ex, specs, seed):
        return run_episodes(learner.engine, suite.executor_prompt(io), specs, ex, seed=seed, suite=suite,
                            max_steps=r.max_steps, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                            top_p=r.top_p)

    sizes = cfg.eval.pool_per_level
    pool = {lv: suite.eval_pool(lv, sizes.get(lv, 0) if isinstance(sizes, dict) else sizes, POOL_SEED)
            for lv in cfg.eval.levels}
    pool = {lv: ts for lv, ts in pool.items() if ts}
    sample = suite.frozen_tasks(cfg.eval.tasks)
    att_levels = cfg.eval.levels if cfg.eval.attacked_levels is None else cfg.eval.attacked_levels
    n_att = cfg.eval.attacked_per_level
    last_adv = adversaries[-1] if adversaries and cfg.eval.attacked_pool else None
    adv_ref = f"adversary@{versions(last_adv)['adversary']}" if last_adv else None
    alphas = {}
    if adv_ref:
        alphas = {str(lv): learned_alphas(learner, io, suite, ts[:n_att], adv_ref, 9_101 + lv)
                  for lv, ts in pool.items() if lv in att_levels}
        if sample:
            alphas["sample"] = learned_alphas(learner, io, suite, sample, adv_ref, 9_001)
    groups = {str(lv): ts for lv, ts in pool.items()}
    if sample:
        groups["sample"] = sample
    results: dict[str, Any] = {"world": suite.name, "order": executors, "adversary": last_adv,
                               "pool": {k: [suite.task_id(t) for t in ts] for k, ts in groups.items() if k != "sample"},
                               "sample": [suite.task_id(t) for t in sample], "checkpoints": {}}
    for name in executors:
        ex = f"executor@{versions(name)['executor']}"
        specs, parts = [], []
        for key, tasks in groups.items():
            parts.append((key, "clean", None, len(specs), len(tasks)))
            specs += [EpisodeSpec(t) for t in tasks]
            if key in alphas:
                for setting, injs in (("attacked", alphas[key]),
                                      ("null", [suite.null_injection(a) if a is not None else None for a in alphas[key]])):
                    chosen = [(t, a) for t, a in zip(tasks, injs) if a is not None]
                    parts.append((key, setting, injs, len(specs), len(chosen)))
                    specs += [EpisodeSpec(t, a) for t, a in chosen]
        eps = run_set(ex, specs, 505)
        res: dict[str, Any] = {"executor": ex, "levels": {}}
        clean_eps: dict[str, list] = {}
        for key, setting, injs, start, n in parts:
            chunk = eps[start:start + n]
            entry = res["levels"].setdefault(key, {})
            if setting == "clean":
                clean_eps[key] = chunk
                entry["clean"] = {**rate([e.success for e in chunk]), "outcomes": [bool(e.success) for e in chunk],
                                  "parse_rate": statistics.fmean(e.parse_rate for e in chunk) if chunk else None,
                                  "metrics": with_intervals(suite.episode_metrics([e.final_info for e in chunk]))}
            else:
                entry[setting] = _column(suite, clean_eps[key][:len(injs)], injs, chunk, groups[key][:len(injs)])
        if "sample" in res["levels"]:
            res["sample"] = res["levels"].pop("sample")
        results["checkpoints"][name] = res
        lv_txt = ", ".join(f"L{k} {v['clean']['k']}/{v['clean']['n']}" for k, v in res["levels"].items())
        smp = res.get("sample", {}).get("clean")
        console.log(f"eval {name} ({ex}): pool {lv_txt}" + (f"; frozen sample {smp['k']}/{smp['n']}" if smp else ""))
    results["paired"] = [
        {"level": k, "from": a, "to": b,
         **paired_change(results["checkpoints"][a]["levels"][k]["clean"]["outcomes"],
                         results["checkpoints"][b]["levels"][k]["clean"]["outcomes"])}
        for k in results["pool"] for a, b in zip(executors, executors[1:])]
    atomic_write_json(run.path / "eval.json", results)
    atomic_write_text(run.path / "report.md", suite_report(results))
    return results


def suite_summary(run_dir: str | Path, results: dict, minutes: float) -> dict:
    """Headline numbers of a run evaluated by :func:`evaluate_suite` (``advsim demo --json``):
    ``minutes``, the warm start's held-out ``parse_rate`` per role, per stage-1 iteration the
    executor's ``informative_group_fraction`` and ``curriculum_reward_max``, per stage-2 iteration
    the flip rates, per update the rollout/training ``diff_max``, and clean success per level and
    checkpoint (k, n, rate, Wilson interval)."""
    from advsim.run import RunDir

    events = RunDir(run_dir).read("events.jsonl")
    ws = next((e["warmstart"] for e in events if "warmstart" in e), {})
    fc = ws.get("format_check", {})
    s1 = [e for e in events if e.get("stage") == 1]
    s2 = [e for e in events if e.get("stage") == 2]
    diffs = [e[role]["diff"]["max"] for e in s1 + s2 for role in ("curriculum", "adversary", "executor")
             if isinstance(e.get(role), dict) and e[role].get("diff")]
    return {"world": results["world"], "minutes": round(minutes, 2),
            "parse_rate": {r: fc.get(f"{r}_parse_rate") for r in ("executor", "curriculum", "adversary")},
            "informative_group_fraction": [e["executor"].get("informative_group_fraction") for e in s1],
            "curriculum_reward_max": [e.get("curriculum_reward_max") for e in s1],
            "flip_rate": [e.get("flip_rate") for e in s2], "null_flip_rate": [e.get("null_flip_rate") for e in s2],
            "diff_max": max(diffs) if diffs else None,
            "levels": {name: {k: {x: v["clean"][x] for x in ("k", "n", "rate", "ci_low", "ci_high")}
                              for k, v in res["levels"].items()} for name, res in results["checkpoints"].items()}}


def _pct(x: dict | None) -> str:
    """``k/n = r % [lo–hi]`` of a :func:`rate` dict or an aggregate ``{"num", "den"}`` rate."""
    if not x:
        return "—"
    k, n = (x["k"], x["n"]) if "k" in x else (x["num"], x["den"])
    if not n:
        return "0/0"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.0f} % [{100 * lo:.0f}–{100 * hi:.0f}]"


def suite_report(results: dict) -> str:
    """``report.md`` of :func:`evaluate_suite`: per checkpoint and level, clean success and the
    attacked/null columns (rendered episodes only); per protocol where the world reports it."""
    lines = [f"# Evaluation — {results['world']}", "",
             "Success = the world's strict verdict (web: s(x, τ); ledger: ECS = 1). Attacked and null "
             "columns count rendered injections only; intervals are 95 % Wilson.", ""]
    adv = results.get("adversary")
    lines += [f"Learned adversary: {adv or 'none (no stage-2 checkpoint)'}.", "",
              "| checkpoint | pool | clean | attacked (rendered) | attack succeeded | null (rendered) |",
              "|---|---|---|---|---|---|"]
    for name, res in results["checkpoints"].items():
        for key, entry in list(res["levels"].items()) + ([("frozen sample", res["sample"])] if "sample" in res else []):
            att, nul = entry.get("attacked"), entry.get("null")
            label = f"level {key}" if key != "frozen sample" else key
            lines.append(f"| {name} | {label} | {_pct(entry['clean'])} | "
                         f"{_pct(att['task_completed']) if att else '—'} | "
                         f"{_pct(att['attack_succeeded']) if att else '—'} | "
                         f"{_pct(nul['task_completed']) if nul else '—'} |")
    proto = [(name, key, setting, entry[setting]["metrics"])
             for name, res in results["checkpoints"].items()
             for key, entry in list(res["levels"].items()) + ([("frozen sample", res["sample"])] if "sample" in res else [])
             for setting in ("clean", "attacked") if setting in entry and entry[setting].get("metrics")]
    if proto:
        lines += ["", "## Per protocol (SafeActBench)", "",
                  "| checkpoint | pool | setting | ECS V0 | ECS V1 | ECS V2 | ECS V3 | ECS Legacy | P-M | D-M | "
                  "BSR | PAR | CAS |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, key, setting, m in proto:
            by_p = m["ECS"]["by_protocol"]
            pm = "—" if m["P-M"] is None else f"{100 * m['P-M']:.0f} %"
            dm = "—" if m["D-M"] is None else f"{100 * m['D-M']:.0f} %"
            lines.append(f"| {name} | {key} | {setting} | "
                         + " | ".join(_pct(by_p.get(p)) if by_p.get(p, {}).get("den") else "—"
                                      for p in ("V0", "V1", "V2", "V3", "Legacy"))
                         + f" | {pm} | {dm} | {_pct(m['BSR'])} | {_pct(m['PAR'])} | {_pct(m['CAS'])} |")
        lines += ["", "Gap and Part. per protocol are in eval.json (`metrics`)."]
    if results.get("paired"):
        lines += ["", "## Paired change of clean success (same slots and sampling seeds)", "",
                  "| level | from → to | n | before | after | change | only before / only after | McNemar p |",
                  "|---|---|---|---|---|---|---|---|"]
        for p in results["paired"]:
            lines.append(f"| {p['level']} | {p['from']} → {p['to']} | {p['n']} | {100 * p['before']:.1f} % | "
                         f"{100 * p['after']:.1f} % | {100 * p['change']:+.1f} | {p['only_before']} / {p['only_after']} | "
                         f"{p['p_value']:.3g} |")
    return "\n".join(lines) + "\n"
