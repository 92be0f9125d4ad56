"""``advsim eval``: did training work? Clean and attacked completion per checkpoint.

For every executor checkpoint of a run (``warmstart`` = the base, ``capability-iter-t``,
``robust-iter-t``) on a stratified sample of the 150 test tasks:

- **sim clean** — strict success in the simulated world, ``seeds`` repeats (mean and spread);
- **sim attacked (learned)** — under each learned adversary ``adv-v-t``: the adversary writes
  α for the task's initial page and a clean control trajectory (the oracle's actions — the same
  kind of prompt it sees in training), α is rendered at transition d. Only episodes whose α
  parsed *and* was rendered (passed the render gate) count as attacked: each attacked column
  reports ``proposals``, ``parsed``, ``rendered``, ``task_completed`` (strict success over the
  rendered episodes, with n and a 95 % Wilson interval) and ``attack_succeeded`` (the flip rate:
  rendered episodes that fail although the same task and seed succeeded clean, over those clean
  successes);
- **per-level pool** — every checkpoint on a fixed pool drawn from the training distribution at
  each difficulty level (``eval.levels``, ``eval.pool_per_level`` tasks per level, seeds ≥ 10⁶
  that no proposal or warm start uses), clean, under the last learned adversary and under the
  null injection (:func:`advsim.attacks.benign_injection`), with n and Wilson intervals;
- **sim attacked (corpus)** — under the built-in injection-style corpus (:mod:`advsim.attacks`),
  an adversary that took no part in training;
- **sim attacked (external)** — under a reactive adversary outside the project (e.g.
  :class:`advsim.attacks.OpenAIAdversary`, any OpenAI-compatible endpoint): before each
  transition it sees goal, page and pending action and may inject (AdvSim2Real's protocol:
  11 queries × 256 tokens, stop after the first accepted injection; :mod:`advsim.envs.reactive`);
- **browser clean** — strict success on the real pages in headless Chromium, no world model;
- **browser attacked** — the last learned adversary's α inserted into the live DOM (the paper
  could only check robustness inside its world model).

Results are per stratum and overall; the report (:mod:`advsim.report`) turns them into
``report.md`` and plots.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.table import Table

from advsim.config import TrainConfig, load_config
from advsim.report import checkpoint_order
from advsim.rollout import EpisodeSpec, run_episodes
from advsim.suites import WebFormsSuite
from forms_bench import STRATA
from forms_bench.suite import select_tasks
from forms_bench.injection import Injection
from forms_bench.schema import Task
from forms_bench.atomic import atomic_write_json

POOL_SEED = 1_000_000
"""Seeds of the per-level evaluation pool start here: above every seed a curriculum proposal
(≤ 999,999) or the warm start can draw, so the pool is never trained on."""


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float | None, float | None]:
    """95 % Wilson score interval of a binomial proportion k/n (Wilson 1927); (None, None) for n = 0."""
    if n == 0:
        return None, None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def rate(flags: Sequence[bool]) -> dict[str, Any]:
    """``{"rate", "k", "n", "ci_low", "ci_high"}`` of a list of booleans (rate None when empty)."""
    k, n = sum(bool(f) for f in flags), len(flags)
    lo, hi = wilson(k, n)
    return {"rate": k / n if n else None, "k": k, "n": n, "ci_low": lo, "ci_high": hi}


def mcnemar_exact(only_before: int, only_after: int) -> float:
    """Two-sided exact McNemar test (binomial test of the discordant pairs, McNemar 1947):
    under H0 "both checkpoints succeed equally often on the same slots", each of the
    ``b + c`` discordant slots is a fair coin, so ``p = min(1, 2 · Σ_{k ≤ min(b, c)} C(b+c, k) / 2^(b+c))``.
    Returns 1.0 when there is no discordant pair."""
    n = only_before + only_after
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_before, only_after) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_change(before: Sequence[bool], after: Sequence[bool]) -> dict[str, Any]:
    """The change in success between two checkpoints evaluated on the **same slots** (same
    task, same per-turn sampling seeds: common random numbers, so their outcomes are paired).

    Args:
        before, after: one success flag per slot, same length and order.

    Returns:
        ``{"n", "before", "after", "change", "both", "only_before", "only_after", "neither",
        "p_value"}`` — rates, their difference (after − before), the 2×2 counts and the exact
        McNemar p-value (:func:`mcnemar_exact`).

    Raises:
        ValueError: the two lists differ in length.
    """
    if len(before) != len(after):
        raise ValueError(f"paired_change: {len(before)} slots before, {len(after)} after")
    n = len(before)
    b = sum(bool(x) and not y for x, y in zip(before, after))
    c = sum(not x and bool(y) for x, y in zip(before, after))
    both = sum(bool(x) and bool(y) for x, y in zip(before, after))
    kb, ka = sum(map(bool, before)), sum(map(bool, after))
    return {"n": n, "before": kb / n if n else None, "after": ka / n if n else None,
            "change": (ka - kb) / n if n else None, "both": both, "only_before": b, "only_after": c,
            "neither": n - both - b - c, "p_value": mcnemar_exact(b, c)}


def eval_pool(levels: Sequence[int], per_level: int | dict[int, int]) -> dict[int, list[Task]]:
    """The fixed per-level evaluation pool: ``per_level`` training-split tasks per level (an int,
    or ``{level: n}``; levels with n = 0 are left out), cycling through strata and domains, seeds
    ``POOL_SEED + 1000·level + i`` — so a level's first n tasks are the same whatever n is."""
    from forms_bench.difficulty import level_knobs
    from forms_bench.generate import make_task
    from forms_bench.proposal import DOMAIN_NAMES

    sizes = {lv: (per_level.get(lv, 0) if isinstance(per_level, dict) else per_level) for lv in levels}
    return {lv: [make_task(STRATA[i % len(STRATA)], DOMAIN_NAMES[(i // len(STRATA)) % len(DOMAIN_NAMES)],
                           POOL_SEED + 1000 * lv + i, knobs=level_knobs(lv)) for i in range(n)]
            for lv, n in sizes.items() if n > 0}


def attacked_column(clean, alphas: Sequence[Injection | None], attacked) -> dict[str, Any]:
    """Honest attack metrics for one column.

    Args:
        clean: clean episodes, one per (task, seed) slot.
        alphas: the α of each slot (None = did not parse: no attacked episode there).
        attacked: the attacked episode of each slot whose α parsed (in slot order).

    Returns:
        ``proposals``, ``parsed``, ``rendered`` (counts), ``task_completed`` (:func:`rate` over
        rendered episodes), ``attack_succeeded`` (:func:`rate` of flips over rendered slots whose
        clean episode succeeded), ``took_target`` (:func:`rate` over rendered episodes).
    """
    it = iter(attacked)
    pairs = [(c, next(it)) for c, a in zip(clean, alphas) if a is not None]
    rendered = [(c, e) for c, e in pairs if e.rendered]
    return {"proposals": len(alphas), "parsed": len(pairs), "rendered": len(rendered),
            "task_completed": rate([e.success for _, e in rendered]),
            "attack_succeeded": rate([not e.success for c, e in rendered if c.success]),
            "took_target": rate([e.took_target for _, e in rendered])}


def _rates(episodes, tasks: Sequence[Task], seeds: int) -> dict[str, Any]:
    """Success per stratum and overall; ``spread`` = std over seeds of the overall rate."""
    per = {s: [] for s in STRATA}
    for ep in episodes:
        per[ep.spec.task.stratum].append(ep.success)
    n = len(tasks)
    by_seed = [statistics.fmean(e.success for e in episodes[k * n:(k + 1) * n]) for k in range(seeds)] if n else []
    return {"overall": statistics.fmean(e.success for e in episodes) if episodes else None,
            "spread": statistics.pstdev(by_seed) if len(by_seed) > 1 else 0.0,
            "per_stratum": {s: (statistics.fmean(v) if v else None) for s, v in per.items()},
            "episodes": len(episodes),
            "world_errors": sum(any(r.startswith("world error") for r in e.reasons) for e in episodes)}


def learned_injections(learner, io, tasks: Sequence[Task], adversary: str, seed: int) -> list[Injection | None]:
    """α per task from an adversary adapter version (None when its output does not parse).

    The prompt is the one the adversary trains on: goal, initial page and a successful clean
    trajectory (here the oracle's actions, standing in for the executor's good control)."""
    from forms_bench.oracle import solve
    from policies.engines import GenerationRequest
    from worlds.web.sim import SimWebWorld

    world = SimWebWorld()
    reqs = [GenerationRequest(prompt_ids=tuple(io.adversary_prompt(t.goal, world.reset(t),
                                                                   [a.to_text() for a in solve(t)])),
                              adapter=adversary,
                              max_new_tokens=learner.cfg.rollout.proposal_max_new_tokens,
                              temperature=learner.cfg.rollout.proposal_temp(), seed=seed + i)
            for i, t in enumerate(tasks)]
    out = []
    for g in learner.engine.generate(reqs):
        try:
            out.append(io.parse_adversary(g.text))
        except ValueError:
            out.append(None)
    return out


def judge_agreement(episodes, judge) -> dict[str, Any]:
    """An LM judge's verdicts on finished episodes next to the strict check's.

    Returns:
        ``{"judge_success": share the judge passes, "judge_pass_strict_fail": count,
        "judge_fail_strict_pass": count, "judge_parse_errors": count}`` — the two disagreement
        counts are the judge's false positives and false negatives against the world's true
        state (AdvSim2Real trains on J's verdicts; this shows how far J is from the truth).
    """
    verdicts = judge.judge_many([e.trajectory() for e in episodes]) if episodes else []
    return {"judge_success": statistics.fmean(v.success for v in verdicts) if verdicts else None,
            "judge_pass_strict_fail": sum(v.success and not e.success for v, e in zip(verdicts, episodes)),
            "judge_fail_strict_pass": sum(e.success and not v.success for v, e in zip(verdicts, episodes)),
            "judge_parse_errors": sum(getattr(v, "parse_error", None) is not None for v in verdicts)}


def evaluate(run_dir: str | Path, tasks: str = "sample:2", seeds: int = 1, browser: bool = True,
             attacked_browser: bool = True, corpus_attacks: bool = True, judge: str = "strict",
             external=None, learner=None, io=None, console: Console | None = None) -> dict:
    """Evaluate every checkpoint of a run; writes ``eval.json`` and returns the results.

    Success is always the strict check on the world's true state. ``judge="lm"`` also asks the
    LM judge J (the frozen backbone, greedy, through the run's engine; :class:`judges.lm.LMJudge`)
    about every simulated episode and adds its pass rate and its disagreements with the strict
    check (:func:`judge_agreement`) to each simulated column. ``external``: a reactive adversary
    ``(AdversaryQuery) -> AdversaryDecision`` for the "sim attacked (external)" column.

    Raises:
        FileNotFoundError: ``run_dir`` has no config or no complete checkpoint.
    """
    from advsim.attacks import corpus
    from advsim.run import RunDir
    from advsim.train import build_learner, role_io

    if judge not in ("strict", "lm"):
        raise ValueError(f"judge must be 'strict' or 'lm', got {judge!r}")
    console = console or Console()
    run = RunDir(run_dir)
    cfg: TrainConfig = load_config(run.path / "config.yaml")
    done = run.completed()
    if not done:
        raise FileNotFoundError(f"{run.path}: no complete checkpoint to evaluate")
    learner = learner or build_learner(cfg, run)
    io = io or role_io(learner.tokenizer)
    sample = select_tasks(tasks)
    states = {name: run.checkpoint_dir(name) for name in done}
    executors = [n for n in done if not n.startswith("adv-v-")]
    adversaries = [n for n in done if n.startswith("adv-v-")]
    import json

    def versions(name):
        return json.loads((states[name] / "state.json").read_text())["versions"]

    for name in done:  # make sure every version is registered with the engine
        learner.restore(versions(name), None)
    r = cfg.rollout
    lm_judge = None
    if judge == "lm":
        from judges.lm import LMJudge

        lm_judge = LMJudge(learner.engine, learner.tokenizer, k=1, temperature=0.0, seed=cfg.seed)

    def judged(eps) -> dict[str, Any]:
        return judge_agreement(eps, lm_judge) if lm_judge is not None else {}

    def run_set(executor_ref, specs, seed, world_factory=None, env_wrapper=None):
        suite = WebFormsSuite(world_factory=world_factory)  # the simulated world, or real pages
        return run_episodes(learner.engine, suite.executor_prompt(io), specs, executor_ref, seed=seed, suite=suite,
                            max_steps=r.max_steps, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                            top_p=r.top_p, world_errors="fail_episode" if world_factory else "raise",
                            env_wrapper=env_wrapper)

    adv_alphas = {a: learned_injections(learner, io, sample, f"adversary@{versions(a)['adversary']}", 9_001)
                  for a in (adversaries if cfg.eval.attacked_test else [])}
    rng = random.Random(cfg.seed)
    corpus_alphas = [rng.choice(list(corpus(t).values())) for t in sample]
    results: dict[str, Any] = {"tasks": [t.id for t in sample], "seeds": seeds, "judge": judge,
                               "order": list(executors), "checkpoints": {}}
    pool = eval_pool(cfg.eval.levels, cfg.eval.pool_per_level) if cfg.eval.pool_per_level else {}
    last_adv = adversaries[-1] if adversaries else None
    att_levels = cfg.eval.levels if cfg.eval.attacked_levels is None else cfg.eval.attacked_levels
    n_att = cfg.eval.attacked_per_level
    pool_alphas = ({lv: learned_injections(learner, io, ts[:n_att], f"adversary@{versions(last_adv)['adversary']}",
                                           9_101 + lv)
                    for lv, ts in pool.items() if lv in att_levels}
                   if pool and last_adv and cfg.eval.attacked_pool else {})
    if pool:
        results["pool"] = {str(lv): [t.id for t in ts] for lv, ts in pool.items()}
        results["pool_adversary"] = last_adv if pool_alphas else None
    for name in executors:
        ex = f"executor@{versions(name)['executor']}"
        res: dict[str, Any] = {"executor": ex}
        clean = run_set(ex, [EpisodeSpec(t) for _ in range(seeds) for t in sample], 101)
        res["sim_clean"] = {**_rates(clean, sample, seeds), **judged(clean)}
        res["parse_rate"] = statistics.fmean(e.parse_rate for e in clean)
        res["sim_attacked"] = {}
        for a, alphas in adv_alphas.items():
            slots = [alpha for _ in range(seeds) for alpha in alphas]
            specs = [EpisodeSpec(t, alpha) for _ in range(seeds) for t, alpha in zip(sample, alphas) if alpha is not None]
            eps = run_set(ex, specs, 101)
            res["sim_attacked"][a] = {**attacked_column(clean, slots, eps), **judged([e for e in eps if e.rendered])}
        if corpus_attacks:
            slots = [alpha for _ in range(seeds) for alpha in corpus_alphas]
            eps = run_set(ex, [EpisodeSpec(t, alpha) for _ in range(seeds) for t, alpha in zip(sample, corpus_alphas)],
                          101)
            res["sim_attacked_corpus"] = {**attacked_column(clean, slots, eps),
                                          **judged([e for e in eps if e.rendered])}
        if external is not None:
            from advsim.envs.reactive import ReactiveAdversaryEnv

            eps = run_set(ex, [EpisodeSpec(t) for _ in range(seeds) for t in sample], 101,
                          env_wrapper=lambda env: ReactiveAdversaryEnv(env, external))
            col = attacked_column(clean, [True] * len(eps), eps)
            if hasattr(external, "check"):  # endpoint errors of this column; raises past the threshold
                col["endpoint"] = external.check()
            res["sim_attacked_external"] = {**col, **judged([e for e in eps if e.rendered])}
        if pool:
            attacked_here = cfg.eval.attacked_checkpoints is None or name in cfg.eval.attacked_checkpoints
            reactive = None
            if pool_alphas and attacked_here and cfg.eval.reactive:
                from advsim.attacks import RoleAdversary

                v_adv = versions(last_adv)["adversary"]
                reactive = lambda lv, v=v_adv: RoleAdversary(  # noqa: E731
                    learner.engine, io, f"adversary@{v}", temperature=r.proposal_temp(),
                    max_new_tokens=min(256, r.proposal_max_new_tokens), seed=9_201 + lv)
            res["levels"] = _pool_columns(run_set, ex, pool, pool_alphas if attacked_here else {}, reactive)
        if browser:
            from worlds.web.browser import BrowserWorld

            worlds: list = []

            def factory():
                worlds.append(BrowserWorld())
                return worlds[-1]

            try:
                b_clean = run_set(ex, [EpisodeSpec(t) for t in sample], 101, factory)
                res["browser_clean"] = _rates(b_clean, sample, 1)
                if attacked_browser and adversaries and adv_alphas:
                    alphas = adv_alphas[adversaries[-1]]
                    eps = run_set(ex, [EpisodeSpec(t, a) for t, a in zip(sample, alphas) if a is not None], 101, factory)
                    res["browser_attacked"] = {**attacked_column(b_clean, alphas, eps), "adversary": adversaries[-1]}
            finally:
                for w in worlds:
                    w.close()
        results["checkpoints"][name] = res
        lv_txt = ", ".join(f"L{lv} {_fmt(v['clean']['rate'])}" for lv, v in res.get("levels", {}).items())
        console.log(f"eval {name} ({ex}): sim clean {_fmt(res['sim_clean']['overall'])}"
                    + (f", browser clean {_fmt(res['browser_clean']['overall'])}" if "browser_clean" in res else "")
                    + (f"; pool {lv_txt}" if lv_txt else ""))
    if pool:
        results["paired"] = paired_levels(results)
    atomic_write_json(run.path / "eval.json", results)
    print_headline(results, console)
    return results


def _pool_columns(run_set, ex: str, pool: dict[int, list[Task]], alphas: dict[int, list],
                  reactive: Callable[[int], Any] | None = None) -> dict[str, Any]:
    """Per level: clean success, and (when ``alphas``) the attacked and null-injection columns
    (:func:`attacked_column`). All episodes of all levels run as one batch (one engine call per
    step), each attacked/null episode on the same task as its clean slot.

    ``reactive``: level → a reactive adversary (:class:`advsim.attacks.RoleAdversary`); the
    levels in ``alphas`` then also get a ``"reactive"`` column — the same tasks under
    :class:`advsim.envs.reactive.ReactiveAdversaryEnv` (≤ 11 queries × ≤ 256 tokens, wait or
    inject before each transition), an episode counting as attacked only when an injection was
    accepted and rendered — with the adversary's query and parse counts."""
    from advsim.attacks import benign_injection

    specs, parts = [], []
    for lv, tasks in pool.items():
        parts.append((lv, "clean", None, len(specs), len(tasks)))
        specs += [EpisodeSpec(t) for t in tasks]
        if lv in alphas:
            for setting, injs in (("attacked", alphas[lv]),
                                  ("null", [benign_injection(a) if a is not None else None for a in alphas[lv]])):
                chosen = [(t, a) for t, a in zip(tasks, injs) if a is not None]
                parts.append((lv, setting, injs, len(specs), len(chosen)))
                specs += [EpisodeSpec(t, a) for t, a in chosen]
    eps = run_set(ex, specs, 505)
    out: dict[str, Any] = {}
    for lv, setting, injs, start, n in parts:
        chunk = eps[start:start + n]
        entry = out.setdefault(str(lv), {})
        if setting == "clean":
            entry["clean"] = {**rate([e.success for e in chunk]), "outcomes": [bool(e.success) for e in chunk]}
            entry["parse_rate"] = statistics.fmean(e.parse_rate for e in chunk) if chunk else None
            entry["_clean_eps"] = chunk
        else:
            entry[setting] = attacked_column(entry["_clean_eps"], injs, chunk)
    if reactive is not None:
        from advsim.envs.reactive import ReactiveAdversaryEnv

        for lv in alphas:
            adv = reactive(lv)
            r_eps = run_set(ex, [EpisodeSpec(t) for t in pool[lv][:len(alphas[lv])]], 505,
                            env_wrapper=lambda env, adv=adv: ReactiveAdversaryEnv(env, adv))
            entry = out[str(lv)]
            # proposals = parsed = episodes run reactively (the adversary's own parses: "queries")
            entry["reactive"] = {**attacked_column(entry["_clean_eps"], [True] * len(r_eps), r_eps),
                                 "queries": adv.check()}
    for entry in out.values():
        entry.pop("_clean_eps", None)
    return out


def paired_levels(results: dict) -> list[dict[str, Any]]:
    """Per pool level, :func:`paired_change` of clean success between consecutive checkpoints
    (``order``: warmstart → capability-iter-1 → robust-iter-1 …) and from the first to each
    later one; every checkpoint runs the pool with the same sampling seeds, so slots pair up."""
    order = [n for n in results.get("order", []) if "levels" in results["checkpoints"][n]]
    pairs = list(zip(order, order[1:])) + [(order[0], n) for n in order[2:]] if order else []
    out = []
    for a, b in pairs:
        la, lb = results["checkpoints"][a]["levels"], results["checkpoints"][b]["levels"]
        for lv in la:
            if lv in lb and "outcomes" in la[lv]["clean"] and "outcomes" in lb[lv]["clean"]:
                out.append({"level": int(lv), "before": a, "after": b,
                            **{k: v for k, v in paired_change(la[lv]["clean"]["outcomes"],
                                                              lb[lv]["clean"]["outcomes"]).items()
                               if k not in ("before", "after")},
                            "rate_before": la[lv]["clean"]["rate"], "rate_after": lb[lv]["clean"]["rate"]})
    return out


def _fmt(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def print_headline(results: dict, console: Console) -> None:
    """The headline table: completion per checkpoint, clean and attacked, sim and browser
    (columns without data, e.g. the corpus when it was skipped, are left out)."""
    def learned(res):
        cols = list(res["sim_attacked"].values())
        return cols[-1]["task_completed"]["rate"] if cols else None

    def completed(key):
        return lambda r: r.get(key, {}).get("task_completed", {}).get("rate")

    columns = {"sim\nclean": lambda r: r["sim_clean"]["overall"], "sim\nlearned α": learned,
               "sim\ncorpus": completed("sim_attacked_corpus"),
               "sim\nexternal": completed("sim_attacked_external"),
               "browser\nclean": lambda r: r.get("browser_clean", {}).get("overall"),
               "browser\nattacked": completed("browser_attacked"),
               "parse\nrate": lambda r: r["parse_rate"]}
    names = checkpoint_order(results)
    rows = {n: {c: f(results["checkpoints"][n]) for c, f in columns.items()} for n in names}
    shown = [c for c in columns if any(rows[n][c] is not None for n in names)]
    table = Table(title=f"advsim eval — {len(results['tasks'])} test tasks × {results['seeds']} seed(s), "
                        "strict success")
    table.add_column("checkpoint", no_wrap=True)
    for col in shown:
        table.add_column(col, justify="right")
    for n in names:
        table.add_row(n, *[_fmt(rows[n][c]) for c in shown])
    console.print(table)
