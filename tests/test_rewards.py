"""Hand-computed values for AdvSim2Real's rewards and advantages."""

import math

import pytest

from advsim.rewards import (adversary_reward, cluster_sizes, curriculum_reward, difficulty_scale,
                            executor_advantages, executor_reward, family_sizes, group_normalize, lexical_clusters,
                            repeat_counts, uncertainty)


@pytest.mark.parametrize("p,q,f", [(0.5, 1.0, 1.0), (0.25, 0.5, 0.5), (0.75, 0.5, 0.5), (0.9, 0.2, 0.2),
                                   (0.0, 0.0, 0.1), (1.0, 0.0, 0.1), (0.97, 0.06, 0.1)])
def test_q_and_f(p, q, f):
    assert uncertainty(p) == pytest.approx(q, abs=1e-12)
    assert difficulty_scale(p) == pytest.approx(f, abs=1e-12)


def test_q_rejects_out_of_range():
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        uncertainty(1.5)


def test_curriculum_reward_gate_and_penalty():
    # p̂ = 0.5 -> q = 1; cluster of 3 in a pool of 12 with λ = 0.4: 1 − 0.4·3/12 = 0.9
    assert curriculum_reward(0.5, True, 3, 12, 0.4) == pytest.approx(0.9)
    # p̂ = 0.75 -> q = 0.5; 0.5 − 0.4·3/12 = 0.4
    assert curriculum_reward(0.75, True, 3, 12, 0.4) == pytest.approx(0.4)
    # gate ν: unparseable, not run, or p̂ <= 0.1 give 0
    assert curriculum_reward(0.5, False, 1, 12, 0.4) == 0.0
    assert curriculum_reward(None, True, 1, 12, 0.4) == 0.0
    assert curriculum_reward(0.1, True, 1, 12, 0.4) == 0.0
    # p̂ = 1 passes the gate but q = 0: max{0, 0 − …} = 0
    assert curriculum_reward(1.0, True, 1, 12, 0.4) == 0.0
    # a heavy penalty clips at 0: q(0.2)=0.4, 0.4 − 1.0·6/12 < 0
    assert curriculum_reward(0.2, True, 6, 12, 1.0) == 0.0


def test_executor_reward_both_cases():
    assert executor_reward(True) == 1.0
    assert executor_reward(False) == -1.0
    # attacked with a declared target: −w_g + w_r(1 − 2F)
    assert executor_reward(False, target_declared=True, took_target=True) == -1.0
    assert executor_reward(False, target_declared=True, took_target=False) == 0.0
    assert executor_reward(True, target_declared=True, took_target=False) == 1.0
    assert executor_reward(False, True, False, w_g=0.2, w_r=0.6) == pytest.approx(0.4)
    assert executor_reward(False, True, True, w_g=0.9, w_r=0.9) == -1.0  # clipped from −1.8


def test_group_normalize_and_executor_advantages():
    # rewards [1, 1, -1, -1]: mean 0, population std 1 -> ±1/(1+1e-6)
    adv = group_normalize([1, 1, -1, -1])
    assert adv == pytest.approx([1 / (1 + 1e-6)] * 2 + [-1 / (1 + 1e-6)] * 2, abs=1e-15)
    # G = 4, p̂ = 0.75 (3 of 4 good): rewards [1,1,1,-1], mean 0.5, std sqrt(0.75)
    s = math.sqrt(0.75)
    a = executor_advantages([1, 1, 1, -1], 0.75)
    assert a == pytest.approx([0.5 * 0.5 / (s + 1e-6)] * 3 + [0.5 * -1.5 / (s + 1e-6)], abs=1e-12)
    # all equal rewards: zero advantages (no signal), never NaN
    assert executor_advantages([1, 1, 1], 1.0) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        group_normalize([])


def test_adversary_reward_worked_example():
    # three controls: #1 good and flipped with the rendering accepted -> credit;
    # #2 not good (flipping a failure earns nothing); #3 good and flipped but the gate rejected it.
    c = [True, False, True]
    b = [True, True, True]
    v = [True, True, False]
    # Σ c·b·v / Σ c = 1/2; penalty λ_A (n_A − 1)/|P_x| = 0.1 · 2/4 = 0.05
    assert adversary_reward(c, b, v, repeats=3, pool_size=4, lambda_a=0.1) == pytest.approx(0.45)
    assert adversary_reward(c, b, v, repeats=1, pool_size=4, lambda_a=0.1) == pytest.approx(0.5)
    assert adversary_reward(c, b, v, 1, 4, 0.1, malformed=True) == -1.0
    # no good control: nothing to flip
    assert adversary_reward([False], [True], [True], 1, 1, 0.1) == 0.0
    with pytest.raises(ValueError):
        adversary_reward([True], [True, False], [True], 1, 1, 0.1)


def test_lexical_clusters_and_repeats():
    texts = ["Compute the payable amount for claim CLM-1 and submit",
             "Compute the payable amount for claim CLM-2 and submit",
             "Select the supplier with the lowest price",
             "compute THE payable amount for claim clm-1 and submit"]
    assert lexical_clusters(texts) == [0, 0, 2, 0]
    assert cluster_sizes(texts) == [3, 3, 1, 3]
    assert repeat_counts(["Press  Delete", "press delete", "Escalate"]) == [2, 2, 1]


def test_family_sizes_count_proposals_equal_but_for_the_seed():
    from forms_bench.proposal import TaskProposal
    from worlds.ledger.difficulty import LedgerProposal

    a = TaskProposal(stratum="derived_values", domain="hr_leave", level=1, seed=1)
    pool = [a, a.model_copy(update={"seed": 2}), a.model_copy(update={"level": 0}), None,
            a.model_copy(update={"seed": 3, "extras": False}), a.model_copy(update={"seed": 4}), None]
    # family of a: seeds 1, 2, 4 -> 3; level 0 and the extras override are families of their own;
    # each unparsed proposal is its own family
    assert family_sizes(pool) == [3, 3, 1, 1, 1, 3, 1]
    b = LedgerProposal(domain="customer_ops", level=1, seed=5)
    assert family_sizes([b, b.model_copy(update={"seed": 6}), b.model_copy(update={"level": 2})]) == [2, 2, 1]
    # R_C with λ_C = 0.5, |P| = 7, p̂ = 0.5 (q = 1): 1 − 0.5·3/7 for the family of three
    assert curriculum_reward(0.5, True, family_sizes(pool)[0], 7, 0.5) == pytest.approx(1 - 0.5 * 3 / 7)
