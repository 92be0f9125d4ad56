"""The two co-evolution stages of AdvSim2Real (Section 4), one iteration per function.

Each stage reads top to bottom: collect → reward → advantage → update → log. A stage runs in
any world through its task suite (:class:`advsim.suites.CoevolutionSuite`: web forms or the
evidence ledger); the world's own verdict is the reward (``info["success"]``). Below, the web
world's words; in the ledger world a spec is ``{domain, level, seed}``, a task a case, α is
written into a record shown by tool results, and success is ECS = 1.

Stage 1 — curriculum ↔ executor:
    1. the curriculum proposes |P| task specs (:class:`forms_bench.proposal.TaskProposal`:
       stratum, domain, difficulty level, seed), seeing the recent specs with their p̂;
    2. each valid proposal is instantiated and run K times by the current executor → p̂_J(x);
    3. R_C(x) = ν(x) · max{0, q(p̂) − λ_C n(x)/|P|}, n(x) = proposals of x's spec family (equal
       but for the seed; ``stage1.repetition: lexical``: x's lexical cluster of task texts); the
       curriculum is updated on its proposals with group-normalised R_C;
    4. the executor pool (the best proposals by R_C) gets G rollouts per task (fresh, or with
       ``stage1.executor_groups: controls`` the K control runs themselves), R_E = 2j − 1,
       Â = f(p̂) · group-normalised R_E; the executor is updated.

Stage 2 — adversary ↔ executor (curriculum frozen):
    1. the curriculum's stage-1 tasks with p̂_J ≥ η (and fresh tasks of the same strata and
       levels) get K clean control trajectories; those whose control p̂ ≥ η are attacked — if
       there are none the stage says so in its log row and skips its updates;
    2. the adversary proposes |P_x| injections α per task; each α is replayed on every control
       (prefix up to transition d, α rendered, the executor continues) → success-flip R_A; the
       same replay with a benign text of similar length (:func:`advsim.attacks.benign_injection`)
       gives the null flip rate; the adversary is updated with R_A group-normalised per task;
    3. the executor trains on a mixed pool — fresh attacks, replayed historical attacks, clean
       tasks (0.50/0.25/0.25) — with G rollouts per item, R_E with target avoidance, and
       Â = f(p̂) · group-normalised R_E, p̂ taken from the item's G rollouts.

Every update's log row has the fraction of **informative groups** (a group with a non-zero
advantage), the advantage distribution, rewards, and per role the parse rate with up to three
failing outputs and the parser's message. Everything random derives from
``(cfg.seed, stage, iteration)``, so a resumed iteration repeats an interrupted one exactly.
"""

from __future__ import annotations

import contextlib
import logging
import random
import statistics
import time
from typing import Any, Sequence

from advsim.rewards import (adversary_reward, cluster_sizes, curriculum_reward, executor_advantages,
                            executor_reward, family_sizes, group_normalize, repeat_counts)
from advsim.rollout import Episode, EpisodeSpec, run_episodes
from advsim.run import run_digest
from advsim.suites import WebFormsSuite
from policies.engines import Generation, GenerationRequest
from policies.grpo import Sample
from policies.roles import RoleIO, curriculum_example

__all__ = ["stage1_iteration", "stage2_iteration", "RoleIO", "group_stats"]
log = logging.getLogger(__name__)


def _seed(cfg, stage: int, iteration: int, part: int) -> int:
    return (cfg.seed * 7919 + stage * 104_729 + iteration * 1_299_709 + part * 15_485_863) % (2**31 - 1)


def _episodes(learner, io: RoleIO, run, specs: Sequence[EpisodeSpec], seed: int, suite) -> list[Episode]:
    """The executor's episodes on ``specs``, saved chunk by chunk in ``run`` (a resumed phase reads them back)."""
    r = learner.cfg.rollout
    return run_episodes(learner.engine, suite.executor_prompt(io), specs, learner.ref("executor"), seed=seed,
                        suite=suite, max_steps=r.max_steps, max_new_tokens=r.max_new_tokens,
                        temperature=r.temperature, top_p=r.top_p,
                        store=run.episodes(r.chunk_episodes, salt=run_digest(learner.cfg)))


def _propose(learner, prompts: Sequence[list[int]], role: str, seed: int) -> list[Generation]:
    """One proposal per prompt from ``role``'s adapter (request seeds ``seed + i``), one engine call.

    A prompt too long for the engine's ``max_model_len`` with ``rollout.proposal_max_new_tokens``
    after it (a curriculum history or an adversary's control trajectory grown long) gets only the
    tokens that fit; one with no room at all is not sent: its generation is empty
    (``finish_reason "length"``, text ``""``), so it parses as a malformed proposal, is rewarded
    as one and adds nothing to the update (empty completions are left out). The run goes on
    instead of the engine refusing the whole batch; a warning counts such prompts.
    """
    r = learner.cfg.rollout
    limit = getattr(learner.engine, "max_model_len", None)
    reqs = [GenerationRequest(prompt_ids=tuple(p), adapter=learner.ref(role), max_new_tokens=r.proposal_max_new_tokens
                              if limit is None else min(r.proposal_max_new_tokens, limit - len(p)),
                              temperature=r.proposal_temp(), top_p=r.top_p, seed=seed + i)
            for i, p in enumerate(prompts)]
    cut = sum(0 < q.max_new_tokens < r.proposal_max_new_tokens for q in reqs)
    send = [q for q in reqs if q.max_new_tokens > 0]
    if len(send) < len(reqs) or cut:
        log.warning("%s: %d of %d prompts longer than engine.max_model_len %s allows (%d not sent, %d with fewer "
                    "new tokens); raise engine.max_model_len for a new run", role, len(reqs) - len(send) + cut,
                    len(reqs), limit, len(reqs) - len(send), cut)
    out = iter(learner.engine.generate(send) if send else [])
    return [next(out) if q.max_new_tokens > 0 else Generation(q, [], [], q.adapter_ref(), "length", "") for q in reqs]


def _parse_all(gens, parse) -> tuple[list, list[str]]:
    """(parsed object or None, error message or '') per generation."""
    out, errors = [], []
    for g in gens:
        try:
            out.append(parse(g.text))
            errors.append("")
        except ValueError as exc:
            out.append(None)
            errors.append(str(exc))
    return out, errors


def _parse_report(gens, errors: Sequence[str]) -> dict[str, Any]:
    """Parse rate of one role's outputs and up to three failures (output text + message)."""
    bad = [{"text": g.text[:300], "error": e} for g, e in zip(gens, errors) if e]
    return {"n": len(gens), "parsed": len(gens) - len(bad),
            "rate": (len(gens) - len(bad)) / len(gens) if gens else None, "failures": bad[:3]}


def group_stats(advantage_groups: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Informative-group fraction and advantage distribution of one update.

    A group is **informative** when at least one of its advantages is non-zero (GRPO learns
    nothing from a group whose rewards are all equal).

    Returns:
        ``{"groups", "informative", "informative_group_fraction", "adv_min", "adv_max",
        "adv_abs_mean", "adv_nonzero"}`` (``None`` statistics for no groups).
    """
    flat = [a for g in advantage_groups for a in g]
    inf = sum(any(a != 0.0 for a in g) for g in advantage_groups)
    n = len(advantage_groups)
    return {"groups": n, "informative": inf, "informative_group_fraction": inf / n if n else None,
            "adv_min": min(flat) if flat else None, "adv_max": max(flat) if flat else None,
            "adv_abs_mean": statistics.fmean(abs(a) for a in flat) if flat else None,
            "adv_nonzero": sum(a != 0.0 for a in flat)}


class PartTimer:
    """Wall seconds per named part of one training iteration: ``with parts("propose"): …`` adds
    the block's ``time.perf_counter`` span to ``parts.seconds["propose"]`` (a part entered twice
    sums). :meth:`as_dict` is what a metrics row logs as ``part_seconds`` (0.1 s resolution). A
    part served from a resumed run's saved episodes takes ~0 s: the row times what this process
    computed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def as_dict(self) -> dict[str, float]:
        """``{part: seconds}`` rounded to 0.1 s, in the order the parts first ran."""
        return {k: round(v, 1) for k, v in self.seconds.items()}


def _start_engine(learner, parts: PartTimer) -> None:
    """Start the rollout engine first, as its own part (``engine_start``: minutes for vLLM on a
    GPU, which would otherwise land in whichever part first samples), where it has not started
    yet (a run without a warm start, or a resumed one); on a resume this also checks it before any
    saved rollout is read (:meth:`advsim.learner.Learner.check_resume_engine`)."""
    if not getattr(learner, "engine_started", True):
        with parts("engine_start"):
            learner.engine


def _executor_update(learner, groups: Sequence[tuple[Sequence[Episode], float, Sequence[float]]]) -> dict:
    """groups: (episodes of one task, p̂, rewards) → one executor update; returns its stats
    with rewards, advantages and informative groups."""
    samples, rewards, adv_groups = [], [], []
    for eps, p_hat, rs in groups:
        a = executor_advantages(rs, p_hat)
        adv_groups.append(a)
        rewards += list(rs)
        for ep, adv in zip(eps, a):
            samples += [Sample(t.prompt_ids, t.token_ids, t.logprobs, adv, t.adapter or "") for t in ep.turns]
    stats = learner.update("executor", samples) if samples else {"samples": 0}
    return {**stats, "reward_mean": statistics.fmean(rewards) if rewards else None, **group_stats(adv_groups)}


def _executor_parse(eps: Sequence[Episode]) -> dict[str, Any]:
    turns = [t for e in eps for t in e.turns]
    bad = [{"text": t.text[:200], "error": t.error} for t in turns if t.action is None]
    return {"n": len(turns), "parsed": len(turns) - len(bad),
            "rate": (len(turns) - len(bad)) / len(turns) if turns else None, "failures": bad[:3]}


# ------------------------------------------------------------------------------------------
# stage 1
# ------------------------------------------------------------------------------------------

def curriculum_history(learner, io: RoleIO, run, t: int, rng: random.Random, suite) -> list[str]:
    """The curriculum's context: its last ``stage1.history`` valid stage-1 proposals (probes
    included) with their p̂, from ``proposals.jsonl``.

    Before any exists (the first iteration), the current executor is **probed**: one random
    spec per level in ``stage1.probe_levels``, run K times, logged as ``role: "probe"`` rows —
    so the curriculum starts from measured success rates, not from untested guesses."""
    s1 = learner.cfg.stage1
    rows = [r for r in run.read("proposals.jsonl") if r.get("stage") == 1 and r.get("proposal")]
    if not rows and s1.probe_levels:
        probes = [suite.random_proposal(rng, lv) for lv in s1.probe_levels]
        tasks = [suite.instantiate(p) for p in probes]
        K = s1.control_runs
        eps = _episodes(learner, io, run, [EpisodeSpec(task) for task in tasks for _ in range(K)], _seed(learner.cfg, 1, t, 9),
                        suite)
        rows = [{"stage": 1, "iteration": t, "role": "probe", "text": suite.proposal_json(p),
                 "proposal": p.model_dump(exclude_none=True), "task_id": task.id, "level": p.level, "valid": True,
                 "error": "", "p_hat": sum(e.success for e in eps[k * K:(k + 1) * K]) / K, "reward": None}
                for k, (p, task) in enumerate(zip(probes, tasks))]
        run.log("proposals.jsonl", rows)
        run.log("trajectories.jsonl", [{"stage": 1, "iteration": t, "kind": "probe", **e.to_row()} for e in eps])
    return [curriculum_example(suite.proposal_json(suite.proposal_from_dict(r["proposal"])), r.get("p_hat"))
            for r in rows[-s1.history:]]


def stage1_iteration(learner, io: RoleIO, run, t: int, suite=None) -> dict[str, Any]:
    """One curriculum ↔ executor iteration in ``suite``'s world (default: the web forms);
    returns its metrics row (also logged)."""
    started, parts = time.perf_counter(), PartTimer()
    _start_engine(learner, parts)
    cfg, s1 = learner.cfg, learner.cfg.stage1
    suite = suite if suite is not None else WebFormsSuite()
    rng = random.Random(_seed(cfg, 1, t, 0))

    # collect: proposals -> tasks -> K control runs each -> p̂
    with parts("history"):  # the first iteration probes the executor here
        lines = curriculum_history(learner, io, run, t, rng, suite)
    all_hints = suite.curriculum_hints()
    hints = [all_hints[(i + t) % len(all_hints)] for i in range(s1.proposals)]
    with parts("propose"):
        gens = _propose(learner, [suite.curriculum_prompt(io, h, lines) for h in hints], "curriculum",
                        _seed(cfg, 1, t, 1))
    proposals, errors = _parse_all(gens, lambda text: suite.parse_proposal(io, text))
    tasks: list = []
    for i, p in enumerate(proposals):
        try:
            tasks.append(suite.instantiate(p) if p is not None else None)
        except ValueError as exc:
            tasks.append(None)
            proposals[i], errors[i] = None, f"curriculum: not instantiable: {exc}"
    valid = [i for i, task in enumerate(tasks) if task is not None]
    K = s1.control_runs
    with parts("control_runs"):
        ctrl = _episodes(learner, io, run, [EpisodeSpec(tasks[i]) for i in valid for _ in range(K)], _seed(cfg, 1, t, 2),
                         suite)
    p_hat = {i: sum(e.success for e in ctrl[k * K:(k + 1) * K]) / K for k, i in enumerate(valid)}

    # reward R_C (AdvSim2Real Eq. 2) and the curriculum's update
    if s1.repetition == "family":
        clusters = family_sizes([p if tasks[i] is not None else None for i, p in enumerate(proposals)])
    else:
        texts = [suite.task_text(tasks[i]) if tasks[i] is not None else g.text for i, g in enumerate(gens)]
        clusters = cluster_sizes(texts, s1.cluster_threshold)
    r_c = [curriculum_reward(p_hat.get(i), tasks[i] is not None, clusters[i], len(gens), s1.lambda_c)
           for i in range(len(gens))]
    adv_c = group_normalize(r_c)
    with parts("curriculum_update"):
        cur_stats = learner.update("curriculum", [Sample(g.request.prompt_ids, g.token_ids, g.logprobs, a, str(g.adapter))
                                                  for g, a in zip(gens, adv_c)])
    cur_stats.update(group_stats([adv_c]))

    # executor pool: the best proposals by R_C (ties: proposal order), G rollouts each —
    # fresh ones, or (executor_groups: controls) the K control runs that gave p̂
    pool = sorted(valid, key=lambda i: (-r_c[i], i))[: s1.executor_pool]
    G = s1.rollouts_per_task
    if s1.executor_groups == "controls":
        at = {i: k for k, i in enumerate(valid)}
        eps = []
        chunks = [ctrl[at[i] * K:(at[i] + 1) * K] for i in pool]
    else:
        with parts("executor_rollouts"):
            eps = _episodes(learner, io, run, [EpisodeSpec(tasks[i]) for i in pool for _ in range(G)], _seed(cfg, 1, t, 3),
                            suite)
        chunks = [eps[k * G:(k + 1) * G] for k in range(len(pool))]
    groups = [(chunk, p_hat[i], [executor_reward(e.success) for e in chunk]) for chunk, i in zip(chunks, pool)]
    with parts("executor_update"):
        ex_stats = _executor_update(learner, groups)

    # log
    run.log("proposals.jsonl", [{"stage": 1, "iteration": t, "role": "curriculum", "text": g.text,
                                 "proposal": proposals[i].model_dump(exclude_none=True) if proposals[i] else None,
                                 "task_id": tasks[i].id if tasks[i] else None,
                                 "level": proposals[i].level if proposals[i] else None,
                                 "valid": tasks[i] is not None, "error": errors[i], "p_hat": p_hat.get(i),
                                 "cluster": clusters[i], "reward": r_c[i]} for i, g in enumerate(gens)])
    run.log("trajectories.jsonl", [{"stage": 1, "iteration": t, "kind": "control", **e.to_row()} for e in ctrl]
            + [{"stage": 1, "iteration": t, "kind": "train", **e.to_row()} for e in eps])
    row = {"stage": 1, "iteration": t, "proposals": len(gens), "valid": len(valid),
           "p_hat": [p_hat[i] for i in valid], "levels": [proposals[i].level for i in valid],
           "curriculum_reward_mean": statistics.fmean(r_c), "curriculum_reward_max": max(r_c),
           "control_success": statistics.fmean(e.success for e in ctrl) if ctrl else None,
           "executor_success": statistics.fmean(e.success for c in chunks for e in c) if chunks else None,
           "executor_groups": s1.executor_groups,
           "parse": {"curriculum": _parse_report(gens, errors), "executor": _executor_parse(list(ctrl) + list(eps))},
           "curriculum": cur_stats, "executor": ex_stats, "engine": learner.engine_record(),
           "seconds": round(time.perf_counter() - started, 1), "part_seconds": parts.as_dict()}
    run.log("events.jsonl", [row])
    return row


# ------------------------------------------------------------------------------------------
# stage 2
# ------------------------------------------------------------------------------------------

def _stage2_candidates(run, cfg, rng: random.Random, n: int, suite) -> list:
    """Tasks to attack: the curriculum's stage-1 tasks with p̂ ≥ η (most recent first), then
    fresh tasks of the same stratum, domain and level (new seeds), up to ``n``."""
    s2 = cfg.stage2
    rows = [r for r in run.read("proposals.jsonl") if r.get("stage") == 1 and r.get("proposal")
            and r.get("p_hat") is not None and r["p_hat"] >= s2.eta]
    props = [suite.proposal_from_dict(r["proposal"]) for r in reversed(rows)]
    out, seen = [], set()
    for p in props:
        task = suite.instantiate(p)
        if task.id not in seen:
            seen.add(task.id)
            out.append(task)
    k = 0
    while props and len(out) < n and k < 4 * n:
        p = props[k % len(props)].model_copy(update={"seed": rng.randint(0, 999_999)})
        task = suite.instantiate(p)
        if task.id not in seen:
            seen.add(task.id)
            out.append(task)
        k += 1
    return out[:n]


def _replay(learner, io, run, chosen, injections: Sequence, owners: Sequence[int], seed: int, suite):
    """Replay every parsed α of task j on each of its controls: {(proposal i, control c): Episode}."""
    specs, index = [], []
    for i, (inj, j) in enumerate(zip(injections, owners)):
        if inj is None:
            continue
        task, controls, _ = chosen[j]
        for c_i, c in enumerate(controls):
            specs.append(EpisodeSpec(task, inj, prefix=c.actions[: inj.transition], replay=True))
            index.append((i, c_i))
    return dict(zip(index, _episodes(learner, io, run, specs, seed, suite))), specs


def flip_counts(controls: Sequence[Episode], replays: Sequence[Episode]) -> tuple[int, int]:
    """(flips, eligible) for one α over its task's controls: eligible = the control was judged
    good and the replay rendered the injection; a flip = eligible and the replay judged bad."""
    elig = [(c, e) for c, e in zip(controls, replays) if c.success and e.rendered]
    return sum(not e.success for _, e in elig), len(elig)


def stage2_iteration(learner, io: RoleIO, run, t: int, history: list[dict], suite=None) -> dict[str, Any]:
    """One adversary ↔ executor iteration in ``suite``'s world (default: the web forms).
    ``history`` (list of {"task": …, "injection": …}) is extended with this iteration's accepted
    attacks. Returns the metrics row (also logged)."""
    started, parts = time.perf_counter(), PartTimer()
    _start_engine(learner, parts)
    cfg, s2 = learner.cfg, learner.cfg.stage2
    suite = suite if suite is not None else WebFormsSuite()
    rng = random.Random(_seed(cfg, 2, t, 0))
    K = s2.control_runs

    # 1. collect clean controls on candidate tasks; keep p̂ ≥ η
    candidates = _stage2_candidates(run, cfg, rng, 2 * s2.tasks, suite)
    with parts("control_runs"):
        ctrl = _episodes(learner, io, run, [EpisodeSpec(task) for task in candidates for _ in range(K)],
                         _seed(cfg, 2, t, 2), suite)
    per_task = [(task, ctrl[k * K:(k + 1) * K], sum(e.success for e in ctrl[k * K:(k + 1) * K]) / K)
                for k, task in enumerate(candidates)]
    per_task.sort(key=lambda x: -x[2])
    chosen = [x for x in per_task if x[2] >= s2.eta][: s2.tasks]
    base = {"stage": 2, "iteration": t, "candidates": len(candidates), "tasks": len(chosen),
            "control_success": statistics.fmean(e.success for e in ctrl) if ctrl else None}
    if not chosen:
        row = {**base, "skipped": f"no task with control p̂ >= eta = {s2.eta} among {len(candidates)} candidates; "
                                  "adversary and executor not updated", "engine": learner.engine_record(),
               "seconds": round(time.perf_counter() - started, 1), "part_seconds": parts.as_dict()}
        run.log("trajectories.jsonl", [{"stage": 2, "iteration": t, "kind": "control", **e.to_row()} for e in ctrl])
        run.log("events.jsonl", [row])
        return row

    # 2. adversary proposals, success-flip replay and its null control
    prompts, owners = [], []
    for j, (task, controls, _) in enumerate(chosen):
        good = next((c for c in controls if c.success), controls[0])
        prompt = suite.adversary_prompt(io, task, good.actions)
        for _ in range(s2.proposals_per_task):
            prompts.append(prompt)
            owners.append(j)
    with parts("propose"):
        gens = _propose(learner, prompts, "adversary", _seed(cfg, 2, t, 3))
    parsed, errors = [], []
    for g, j in zip(gens, owners):  # the owner task checks ζ against its tools (ledger world)
        p, e = _parse_all([g], lambda text: suite.parse_injection(io, text, chosen[j][0]))
        parsed += p
        errors += e
    with parts("replays"):  # the attacks and their null controls
        by_prop, _ = _replay(learner, io, run, chosen, parsed, owners, _seed(cfg, 2, t, 4), suite)
        nulls = [suite.null_injection(p) if p is not None else None for p in parsed]
        by_null, _ = _replay(learner, io, run, chosen, nulls, owners, _seed(cfg, 2, t, 4), suite)

    # reward R_A (AdvSim2Real Eq. 5), advantages per task, the adversary's update
    r_a = [0.0] * len(gens)
    flips = {"attack": [0, 0], "null": [0, 0]}
    rendered = 0
    for j, (task, controls, _) in enumerate(chosen):
        idx = [i for i, o in enumerate(owners) if o == j]
        reps = repeat_counts([parsed[i].instruction if parsed[i] else gens[i].text for i in idx])
        for i, n_a in zip(idx, reps):
            if parsed[i] is None:
                r_a[i] = adversary_reward([True], [False], [False], 1, 1, s2.lambda_a, malformed=True)
                continue
            eps = [by_prop[(i, c)] for c in range(len(controls))]
            nul = [by_null[(i, c)] for c in range(len(controls))]
            rendered += sum(e.rendered for e in eps)
            r_a[i] = adversary_reward([c.success for c in controls], [not e.success for e in eps],
                                      [e.rendered for e in eps], n_a, len(idx), s2.lambda_a)
            for key, rr in (("attack", eps), ("null", nul)):
                f, n = flip_counts(controls, rr)
                flips[key][0] += f
                flips[key][1] += n
    adv_a = [0.0] * len(gens)
    adv_groups = []
    for j in range(len(chosen)):
        idx = [i for i, o in enumerate(owners) if o == j]
        g_adv = group_normalize([r_a[i] for i in idx])
        adv_groups.append(g_adv)
        for i, a in zip(idx, g_adv):
            adv_a[i] = a
    with parts("adversary_update"):
        adv_stats = learner.update("adversary", [Sample(g.request.prompt_ids, g.token_ids, g.logprobs, a, str(g.adapter))
                                                 for g, a in zip(gens, adv_a)])
    adv_stats.update(group_stats(adv_groups))

    # 3. the executor on the mixed pool (fresh attacks, history, clean)
    fresh = [{"task": chosen[o][0], "injection": p} for p, o, r in zip(parsed, owners, r_a) if p is not None and r > 0]
    fresh = fresh or [{"task": chosen[o][0], "injection": p} for p, o in zip(parsed, owners) if p is not None]
    n_items = max(1, s2.tasks)
    n_fresh = round(n_items * s2.mix_fresh) if fresh else 0
    n_hist = round(n_items * s2.mix_history) if history else 0
    n_clean = max(0, n_items - n_fresh - n_hist)
    items = [rng.choice(fresh) for _ in range(n_fresh)]
    items += [_history_item(rng.choice(history), suite) for _ in range(n_hist)]
    items += [{"task": rng.choice(chosen)[0], "injection": None} for _ in range(n_clean)]
    G = s2.rollouts_per_task
    with parts("executor_rollouts"):
        eps = _episodes(learner, io, run, [EpisodeSpec(it["task"], it["injection"]) for it in items for _ in range(G)],
                        _seed(cfg, 2, t, 5), suite)
    groups = []
    for k, it in enumerate(items):
        chunk = eps[k * G:(k + 1) * G]
        target = it["injection"] is not None and it["injection"].target_action is not None
        rs = [executor_reward(e.success, target and e.rendered, e.took_target, s2.w_g, s2.w_r) for e in chunk]
        groups.append((chunk, sum(e.success for e in chunk) / G, rs))
    with parts("executor_update"):
        ex_stats = _executor_update(learner, groups)
    history.extend({"task_id": f["task"].id, "task": suite.task_to_dict(f["task"]),
                    "injection": f["injection"].model_dump()} for f in fresh)

    # log
    run.log("proposals.jsonl", [{"stage": 2, "iteration": t, "role": "adversary", "task_id": chosen[o][0].id,
                                 "text": g.text, "valid": p is not None, "error": e, "reward": r}
                                for g, p, o, r, e in zip(gens, parsed, owners, r_a, errors)])
    run.log("trajectories.jsonl", [{"stage": 2, "iteration": t, "kind": "control", **e.to_row()} for e in ctrl]
            + [{"stage": 2, "iteration": t, "kind": "replay", **e.to_row()} for e in by_prop.values()]
            + [{"stage": 2, "iteration": t, "kind": "null_replay", **e.to_row()} for e in by_null.values()]
            + [{"stage": 2, "iteration": t, "kind": "train", **e.to_row()} for e in eps])
    attacked = [e for e in eps if e.spec.injection is not None and e.rendered]
    clean = [e for e in eps if e.spec.injection is None]
    (fa, na), (fn, nn) = flips["attack"], flips["null"]
    row = {**base, "proposals": len(gens), "valid": sum(p is not None for p in parsed), "rendered_replays": rendered,
           "adversary_reward_mean": statistics.fmean(r_a), "adversary_reward_max": max(r_a),
           "flip_rate": fa / na if na else None, "flip_n": na, "flips": fa,
           "null_flip_rate": fn / nn if nn else None, "null_flip_n": nn, "null_flips": fn,
           "executor_attacked_success": statistics.fmean(e.success for e in attacked) if attacked else None,
           "executor_clean_success": statistics.fmean(e.success for e in clean) if clean else None,
           "parse": {"adversary": _parse_report(gens, errors), "executor": _executor_parse(list(ctrl) + list(eps))},
           "adversary": adv_stats, "executor": ex_stats, "engine": learner.engine_record(),
           "seconds": round(time.perf_counter() - started, 1), "part_seconds": parts.as_dict()}
    run.log("events.jsonl", [row])
    return row


def _history_item(h: dict, suite) -> dict:
    return {"task": suite.task_from_dict(h["task"]), "injection": suite.injection_from_dict(h["injection"])}
