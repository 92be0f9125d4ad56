"""Rewards and advantages of the three roles (AdvSim2Real, Sections 3–4; formulas in DESIGN.md).

All functions are pure and work on plain Python numbers or sequences; they raise ``ValueError``
on inputs outside their domain (a probability outside [0, 1], an empty group, …).

Symbols: p̂_J(x) — the executor's judged success rate on task x over K runs; q — uncertainty;
f — difficulty scale; λ_C, λ_A — repetition-penalty weights; |P| — proposal-pool size.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Sequence

from pydantic import BaseModel

EPS = 1e-6
"""The 1e-6 added to the group standard deviation in the executor advantage (AdvSim2Real Eq. 4)."""


def _check_p(p: float) -> None:
    if not (0.0 <= p <= 1.0) or math.isnan(p):
        raise ValueError(f"success rate must be in [0, 1], got {p}")


def uncertainty(p: float) -> float:
    """q(p) = 1 − 2|p − ½|: 1 at p = ½, 0 at p ∈ {0, 1} (AdvSim2Real Eq. 2, after R-Zero)."""
    _check_p(p)
    return 1.0 - 2.0 * abs(p - 0.5)


def difficulty_scale(p: float) -> float:
    """f(p) = max{0.1, q(p)}: weights executor advantages toward the capability frontier, with a
    floor of 0.1 so solved and unsolved tasks still give a gradient (AdvSim2Real Eq. 4)."""
    return max(0.1, uncertainty(p))


def curriculum_reward(p_hat: float | None, valid: bool, cluster_size: int, pool_size: int,
                      lambda_c: float) -> float:
    """R_C(x) = ν(x) · max{0, q(p̂_J(x)) − λ_C · n(x)/|P|} (AdvSim2Real Eq. 2).

    Args:
        p_hat: judged success rate of the current executor on x over K runs; None when x could
            not be run (then ν = 0).
        valid: the proposal parsed and instantiated in the simulated world.
        cluster_size: n(x), proposals in x's lexical-similarity cluster (x included, ≥ 1).
        pool_size: |P|, proposals in the pool (≥ 1).
        lambda_c: λ_C ≥ 0.

    Returns:
        The reward; 0 when ν(x) = 0, i.e. when the proposal is invalid or p̂ ≤ 0.1.
    """
    if pool_size < 1 or cluster_size < 1 or cluster_size > pool_size:
        raise ValueError(f"need 1 <= cluster_size <= pool_size, got {cluster_size}, {pool_size}")
    if lambda_c < 0:
        raise ValueError("lambda_c must be >= 0")
    if not valid or p_hat is None:
        return 0.0
    _check_p(p_hat)
    if p_hat <= 0.1:
        return 0.0
    return max(0.0, uncertainty(p_hat) - lambda_c * cluster_size / pool_size)


def executor_reward(success: bool, target_declared: bool = False, took_target: bool = False,
                    w_g: float = 0.5, w_r: float = 0.5) -> float:
    """R_E(τ) (AdvSim2Real Section 4, "executor training under attack").

    Clean or successful: 2j − 1 ∈ {−1, +1}. Under an attack that declared a target action ζ,
    a bad verdict gets clip[−1, 1](−w_g + w_r(1 − 2F)) with F = 1 if the executor took ζ —
    with the default weights −1 if it took the target and 0 if it avoided it.
    """
    if success:
        return 1.0
    if not target_declared:
        return -1.0
    f = 1.0 if took_target else 0.0
    return min(1.0, max(-1.0, -w_g + w_r * (1.0 - 2.0 * f)))


def group_normalize(rewards: Sequence[float]) -> list[float]:
    """(R_k − R̄)/(s + 1e-6) over one group, s the population standard deviation (ddof = 0).

    Raises:
        ValueError: on an empty group.
    """
    if len(rewards) == 0:
        raise ValueError("empty group")
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + EPS) for r in rewards]


def executor_advantages(rewards: Sequence[float], p_hat: float) -> list[float]:
    """Â_k = f(p̂_J(x)) · (R_E(τ_k) − R̄_x)/(s_x + 1e-6) for the G rollouts of one task
    (AdvSim2Real Eq. 4)."""
    scale = difficulty_scale(p_hat)
    return [scale * a for a in group_normalize(rewards)]


def adversary_reward(control_good: Sequence[bool], flipped: Sequence[bool], rendered: Sequence[bool],
                     repeats: int, pool_size: int, lambda_a: float, malformed: bool = False) -> float:
    """Success-flip reward R_A(α | x) (AdvSim2Real Eq. 5).

    R_A = Σ_i c_i b_i v_i / Σ_i c_i − λ_A (n_A(z) − 1)/|P_x|, where for each clean control
    trajectory i: c_i = it was judged good, b_i = its continuation after the injection was
    judged bad, v_i = the attacked rendering passed the render gate. Only flips of good
    controls whose rendering passed earn credit. If no control was good the first term is 0
    (there is no success to flip). A malformed proposal gets −1.

    Args:
        control_good, flipped, rendered: c, b, v, one entry per control (same length ≥ 1).
        repeats: n_A(z), proposals in the pool with the same (normalized) instruction, z included.
        pool_size: |P_x|, proposals for task x.
        lambda_a: λ_A ≥ 0.
        malformed: the proposal did not parse.
    """
    if malformed:
        return -1.0
    if not (len(control_good) == len(flipped) == len(rendered)) or not control_good:
        raise ValueError("control_good, flipped and rendered need the same non-zero length")
    if pool_size < 1 or repeats < 1 or repeats > pool_size:
        raise ValueError(f"need 1 <= repeats <= pool_size, got {repeats}, {pool_size}")
    good = sum(bool(c) for c in control_good)
    credit = sum(bool(c) and bool(b) and bool(v) for c, b, v in zip(control_good, flipped, rendered))
    flip_rate = credit / good if good else 0.0
    return flip_rate - lambda_a * (repeats - 1) / pool_size


_WORD = re.compile(r"[a-z0-9]+")


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    grams = {(w,) for w in words}
    grams.update(zip(words, words[1:]))
    return grams


def lexical_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the word unigram+bigram sets of two texts, in [0, 1]."""
    sa, sb = _shingles(a), _shingles(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def lexical_clusters(texts: Sequence[str], threshold: float = 0.5) -> list[int]:
    """Cluster id per text: single-linkage clusters of pairs with similarity ≥ ``threshold``.

    R-Zero (which AdvSim2Real's curriculum reward follows) clusters proposals by BLEU distance;
    we use word uni+bigram Jaccard (no extra dependency, deterministic, O(n²) for the pool
    sizes used here). Cluster ids are the index of each cluster's first member.
    """
    n = len(texts)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    shingles = [_shingles(t) for t in texts]
    for i in range(n):
        for j in range(i + 1, n):
            si, sj = shingles[i], shingles[j]
            sim = 1.0 if not si and not sj else len(si & sj) / len(si | sj)
            if sim >= threshold:
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    return [find(i) for i in range(n)]


def cluster_sizes(texts: Sequence[str], threshold: float = 0.5) -> list[int]:
    """n(x) for each text: the size of its lexical-similarity cluster."""
    ids = lexical_clusters(texts, threshold)
    counts: dict[int, int] = {}
    for c in ids:
        counts[c] = counts.get(c, 0) + 1
    return [counts[c] for c in ids]


def repeat_counts(instructions: Sequence[str]) -> list[int]:
    """n_A(z) for each instruction: how many in the pool have the same normalized text
    (lowercased, whitespace collapsed). Linear time."""
    norm = [" ".join(z.lower().split()) for z in instructions]
    counts = Counter(norm)
    return [counts[z] for z in norm]


def family_sizes(proposals: Sequence[BaseModel | None]) -> list[int]:
    """n(x) for R_C by spec family: how many proposals in the pool ask for the same task family
    as x, i.e. are equal to x in every field but ``seed`` (fields left unset count as unset).
    A ``None`` (unparsed) proposal is a family of its own (size 1; its R_C is 0 anyway). Linear time.

    Why not lexical clusters of the task text (R-Zero's choice for free-text questions, which
    AdvSim2Real's Eq. 2 follows): in a templated world the task text is mostly the level's
    template — rules, protected fields, forbidden buttons — so its similarity grows with the level
    rather than with repetition. On the 254 valid proposals of an H200 stage-1 iteration
    (results/h200-frontier-2026-12-03) single-linkage Jaccard ≥ 0.5 clusters of the task text
    averaged 67 proposals at level 0 and 119 at level 1 (98 % of level-1 pairs ≥ 0.5 similar), a
    penalty λ_C·n/|P| of 0.13 vs 0.23 that mostly taxed the harder level; by family, 24 vs 9.

    Args:
        proposals: the curriculum's parsed proposals (pydantic models with a ``seed`` field), or None.

    Returns:
        One size ≥ 1 per proposal, in order.
    """
    keys = [f"\x00unparsed-{i}" if p is None else
            json.dumps(p.model_dump(exclude={"seed"}, exclude_none=True), sort_keys=True)
            for i, p in enumerate(proposals)]
    counts = Counter(keys)
    return [counts[k] for k in keys]
