"""The two co-evolution stages of AdvSim2Real (Section 4), one iteration per function.

Stage 1 — curriculum ↔ executor:
    1. the curriculum proposes |P| task specs (:class:`forms_bench.proposal.TaskProposal`);
    2. each valid proposal is instantiated and run K times by the current executor → p̂_J(x);
    3. R_C(x) = ν(x) · max{0, q(p̂) − λ_C n(x)/|P|}; the curriculum is updated on its proposals
       with group-normalised R_C;
    4. the executor pool (the best proposals by R_C) gets G rollouts per task, R_E = 2j − 1,
       Â = f(p̂) · group-normalised R_E; the executor is updated.

Stage 2 — adversary ↔ executor (curriculum frozen):
    1. training tasks with p̂_J ≥ η get K clean control trajectories;
    2. the adversary proposes |P_x| injections α per task; each α is replayed on every control
       (prefix up to transition d, α rendered, the executor continues) → success-flip R_A;
       the adversary is updated with R_A group-normalised per task;
    3. the executor trains on a mixed pool — fresh attacks, replayed historical attacks, clean
       tasks (0.50/0.25/0.25) — with G rollouts per item, R_E with target avoidance, and
       Â = f(p̂) · group-normalised R_E, p̂ taken from the item's G rollouts.

Everything random derives from ``(cfg.seed, stage, iteration)``, so a resumed iteration
repeats an interrupted one exactly.
"""

from __future__ import annotations

import random
import statistics
from typing import Any, Sequence

from advsim.config import TrainConfig
from advsim.rewards import (adversary_reward, cluster_sizes, curriculum_reward, executor_advantages,
                            executor_reward, group_normalize, repeat_counts)
from advsim.rollout import Episode, EpisodeSpec, run_episodes
from forms_bench import STRATA, generate
from forms_bench.injection import Injection
from forms_bench.proposal import TaskProposal, instantiate
from forms_bench.schema import Task
from policies.engines import GenerationRequest
from policies.grpo import Sample
from policies.roles import RoleIO


def _seed(cfg: TrainConfig, stage: int, iteration: int, part: int) -> int:
    return (cfg.seed * 7919 + stage * 104_729 + iteration * 1_299_709 + part * 15_485_863) % (2**31 - 1)


def _episodes(learner, io: RoleIO, specs: Sequence[EpisodeSpec], seed: int) -> list[Episode]:
    r = learner.cfg.rollout
    return run_episodes(learner.engine, io.executor_prompt, specs, learner.ref("executor"), seed=seed,
                        max_steps=r.max_steps, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                        top_p=r.top_p)


def _executor_samples(episodes: Sequence[Episode], advantages: Sequence[float]) -> list[Sample]:
    out = []
    for ep, adv in zip(episodes, advantages):
        for t in ep.turns:
            out.append(Sample(t.prompt_ids, t.token_ids, t.logprobs, adv, t.adapter or ""))
    return out


def _propose(learner, prompts: Sequence[list[int]], role: str, seed: int) -> list:
    r = learner.cfg.rollout
    reqs = [GenerationRequest(prompt_ids=tuple(p), adapter=learner.ref(role), max_new_tokens=r.proposal_max_new_tokens,
                              temperature=r.temperature, top_p=r.top_p, seed=seed + i) for i, p in enumerate(prompts)]
    return learner.engine.generate(reqs)


def _executor_update(learner, groups: Sequence[tuple[Sequence[Episode], float, Sequence[float]]]) -> tuple[dict, dict]:
    """groups: (episodes of one task, p̂, rewards). Returns (update stats, reward stats)."""
    samples, rewards, advs = [], [], []
    for eps, p_hat, rs in groups:
        a = executor_advantages(rs, p_hat)
        samples += _executor_samples(eps, a)
        rewards += list(rs)
        advs += a
    stats = learner.update("executor", samples)
    return stats, {"reward_mean": statistics.fmean(rewards) if rewards else 0.0,
                   "adv_abs_mean": statistics.fmean(abs(x) for x in advs) if advs else 0.0}


def stage1_iteration(learner, io: RoleIO, run, t: int) -> dict[str, Any]:
    """One curriculum ↔ executor iteration; returns its metrics row (also logged)."""
    cfg, s1 = learner.cfg, learner.cfg.stage1
    rng = random.Random(_seed(cfg, 1, t, 0))
    examples = [p.model_dump_json() for p in _example_proposals(rng, 3)]
    hints = [STRATA[i % len(STRATA)] for i in range(s1.proposals)]
    prompts = [io.curriculum_prompt(h, examples) for h in hints]
    gens = _propose(learner, prompts, "curriculum", _seed(cfg, 1, t, 1))
    proposals: list[TaskProposal | None] = []
    tasks: list[Task | None] = []
    errors = []
    for g in gens:
        try:
            p = io.parse_curriculum(g.text)
            tasks.append(instantiate(p))
            proposals.append(p)
            errors.append("")
        except ValueError as exc:
            proposals.append(None)
            tasks.append(None)
            errors.append(str(exc))
    # K executor runs per valid proposal -> p̂_J
    valid = [i for i, task in enumerate(tasks) if task is not None]
    specs = [EpisodeSpec(tasks[i]) for i in valid for _ in range(s1.control_runs)]
    eps = _episodes(learner, io, specs, _seed(cfg, 1, t, 2))
    p_hat: dict[int, float] = {}
    for k, i in enumerate(valid):
        chunk = eps[k * s1.control_runs:(k + 1) * s1.control_runs]
        p_hat[i] = sum(e.success for e in chunk) / len(chunk)
    texts = [p.text() if p is not None else g.text for p, g in zip(proposals, gens)]
    clusters = cluster_sizes(texts, s1.cluster_threshold)
    r_c = [curriculum_reward(p_hat.get(i), tasks[i] is not None, clusters[i], len(gens), s1.lambda_c)
           for i in range(len(gens))]
    adv_c = group_normalize(r_c)
    cur_stats = learner.update("curriculum", [Sample(g.request.prompt_ids, g.token_ids, g.logprobs, a, str(g.adapter))
                                              for g, a in zip(gens, adv_c)])
    run.log("proposals.jsonl", [{"stage": 1, "iteration": t, "role": "curriculum", "text": g.text,
                                 "valid": tasks[i] is not None, "error": errors[i], "p_hat": p_hat.get(i),
                                 "cluster": clusters[i], "reward": r_c[i]} for i, g in enumerate(gens)])
    # executor pool: best proposals by R_C (ties: proposal order)
    pool = sorted(valid, key=lambda i: (-r_c[i], i))[: s1.executor_pool]
    specs = [EpisodeSpec(tasks[i]) for i in pool for _ in range(s1.rollouts_per_task)]
    eps = _episodes(learner, io, specs, _seed(cfg, 1, t, 3))
    groups = []
    for k, i in enumerate(pool):
        chunk = eps[k * s1.rollouts_per_task:(k + 1) * s1.rollouts_per_task]
        groups.append((chunk, p_hat[i], [executor_reward(e.success) for e in chunk]))
    ex_stats, ex_r = _executor_update(learner, groups) if groups else ({"samples": 0}, {})
    run.log("trajectories.jsonl", [{"stage": 1, "iteration": t, **e.to_row()} for e in eps])
    turns = [tt for e in eps for tt in e.turns]
    row = {"stage": 1, "iteration": t, "proposals": len(gens), "valid": len(valid),
           "p_hat": [p_hat[i] for i in valid], "curriculum_reward_mean": statistics.fmean(r_c),
           "executor_success": statistics.fmean(e.success for e in eps) if eps else None,
           "parse_rate": (sum(tt.action is not None for tt in turns) / len(turns)) if turns else None,
           "curriculum": cur_stats, "executor": ex_stats, **{f"executor_{k}": v for k, v in ex_r.items()}}
    run.log("events.jsonl", [row])
    return row


def _example_proposals(rng: random.Random, n: int) -> list[TaskProposal]:
    from forms_bench.proposal import DOMAIN_NAMES

    return [TaskProposal(stratum=rng.choice(STRATA), domain=rng.choice(DOMAIN_NAMES), seed=rng.randint(0, 999_999))
            for _ in range(n)]


def stage2_iteration(learner, io: RoleIO, run, t: int, history: list[dict]) -> dict[str, Any]:
    """One adversary ↔ executor iteration. ``history`` (list of {"task": …, "injection": …})
    is extended with this iteration's accepted attacks. Returns the metrics row (also logged)."""
    cfg, s2 = learner.cfg, learner.cfg.stage2
    rng = random.Random(_seed(cfg, 2, t, 0))
    # 1. candidate training tasks and their clean controls
    candidates = [task for s in STRATA for task in generate(s, max(1, s2.tasks), seed=_seed(cfg, 2, t, 1) % 100_000)]
    rng.shuffle(candidates)
    candidates = candidates[: max(s2.tasks * 2, s2.tasks)]
    specs = [EpisodeSpec(task) for task in candidates for _ in range(s2.control_runs)]
    ctrl = _episodes(learner, io, specs, _seed(cfg, 2, t, 2))
    per_task = []
    for k, task in enumerate(candidates):
        chunk = ctrl[k * s2.control_runs:(k + 1) * s2.control_runs]
        per_task.append((task, chunk, sum(e.success for e in chunk) / len(chunk)))
    per_task.sort(key=lambda x: -x[2])
    chosen = [x for x in per_task if x[2] >= s2.eta][: s2.tasks] or per_task[: s2.tasks]
    # 2. adversary proposals and success-flip replay
    prompts, owners = [], []
    for j, (task, controls, _) in enumerate(chosen):
        page = _initial_page(task)
        good = next((c for c in controls if c.success), controls[0])
        for _ in range(s2.proposals_per_task):
            prompts.append(io.adversary_prompt(task.goal, page, good.actions))
            owners.append(j)
    gens = _propose(learner, prompts, "adversary", _seed(cfg, 2, t, 3))
    parsed: list[Injection | None] = []
    for g in gens:
        try:
            parsed.append(io.parse_adversary(g.text))
        except ValueError:
            parsed.append(None)
    replay_specs, replay_index = [], []
    for i, (inj, j) in enumerate(zip(parsed, owners)):
        if inj is None:
            continue
        task, controls, _ = chosen[j]
        for c_i, c in enumerate(controls):
            replay_specs.append(EpisodeSpec(task, inj, prefix=c.actions[: inj.transition]))
            replay_index.append((i, c_i))
    replays = _episodes(learner, io, replay_specs, _seed(cfg, 2, t, 4))
    by_prop: dict[int, dict[int, Episode]] = {}
    for (i, c_i), ep in zip(replay_index, replays):
        by_prop.setdefault(i, {})[c_i] = ep
    r_a = [0.0] * len(gens)
    for j in range(len(chosen)):
        idx = [i for i, o in enumerate(owners) if o == j]
        reps = repeat_counts([parsed[i].instruction if parsed[i] else gens[i].text for i in idx])
        task, controls, _ = chosen[j]
        for i, n_a in zip(idx, reps):
            if parsed[i] is None:
                r_a[i] = adversary_reward([True], [False], [False], 1, 1, s2.lambda_a, malformed=True)
                continue
            eps = [by_prop[i][c] for c in range(len(controls))]
            r_a[i] = adversary_reward([c.success for c in controls], [not e.success for e in eps],
                                      [e.rendered for e in eps], n_a, len(idx), s2.lambda_a)
    adv_a = [0.0] * len(gens)
    for j in range(len(chosen)):
        idx = [i for i, o in enumerate(owners) if o == j]
        for i, a in zip(idx, group_normalize([r_a[i] for i in idx])):
            adv_a[i] = a
    adv_stats = learner.update("adversary", [Sample(g.request.prompt_ids, g.token_ids, g.logprobs, a, str(g.adapter))
                                             for g, a in zip(gens, adv_a)])
    run.log("proposals.jsonl", [{"stage": 2, "iteration": t, "role": "adversary", "task_id": chosen[o][0].id,
                                 "text": g.text, "valid": p is not None, "reward": r}
                                for g, p, o, r in zip(gens, parsed, owners, r_a)])
    # 3. executor on the mixed pool
    fresh = [{"task": chosen[o][0], "injection": p} for p, o, r in zip(parsed, owners, r_a) if p is not None and r > 0]
    fresh = fresh or [{"task": chosen[o][0], "injection": p} for p, o in zip(parsed, owners) if p is not None]
    n_items = max(1, s2.tasks)
    n_fresh = round(n_items * s2.mix_fresh)
    n_hist = round(n_items * s2.mix_history) if history else 0
    n_clean = max(0, n_items - n_fresh - n_hist)
    items = [rng.choice(fresh) for _ in range(n_fresh)] if fresh else []
    items += [_history_item(rng.choice(history)) for _ in range(n_hist)]
    items += [{"task": rng.choice(chosen)[0], "injection": None} for _ in range(n_clean)]
    specs = [EpisodeSpec(it["task"], it["injection"]) for it in items for _ in range(s2.rollouts_per_task)]
    eps = _episodes(learner, io, specs, _seed(cfg, 2, t, 5))
    groups = []
    G = s2.rollouts_per_task
    for k, it in enumerate(items):
        chunk = eps[k * G:(k + 1) * G]
        target = it["injection"] is not None and it["injection"].target_action is not None
        rs = [executor_reward(e.success, target and e.rendered, e.took_target, s2.w_g, s2.w_r) for e in chunk]
        groups.append((chunk, sum(e.success for e in chunk) / G, rs))
    ex_stats, ex_r = _executor_update(learner, groups) if groups else ({"samples": 0}, {})
    history.extend({"task_id": f["task"].id, "task": f["task"].model_dump(mode="json"),
                    "injection": f["injection"].model_dump()} for f in fresh)
    run.log("trajectories.jsonl", [{"stage": 2, "iteration": t, **e.to_row()} for e in eps])
    attacked = [e for e in eps if e.spec.injection is not None]
    clean = [e for e in eps if e.spec.injection is None]
    row = {"stage": 2, "iteration": t, "tasks": len(chosen), "proposals": len(gens),
           "valid": sum(p is not None for p in parsed), "adversary_reward_mean": statistics.fmean(r_a) if r_a else 0.0,
           "flip_rate": statistics.fmean(r > 0 for r in r_a) if r_a else 0.0,
           "control_success": statistics.fmean(e.success for e in ctrl),
           "executor_attacked_success": statistics.fmean(e.success for e in attacked) if attacked else None,
           "executor_clean_success": statistics.fmean(e.success for e in clean) if clean else None,
           "adversary": adv_stats, "executor": ex_stats, **{f"executor_{k}": v for k, v in ex_r.items()}}
    run.log("events.jsonl", [row])
    return row


def _history_item(h: dict) -> dict:
    from forms_bench.schema import validate_task

    return {"task": validate_task(h["task"]), "injection": Injection.model_validate(h["injection"])}


def _initial_page(task: Task) -> str:
    from worlds.web.sim import SimWebWorld

    return SimWebWorld().reset(task)
