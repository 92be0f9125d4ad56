"""vLLM on an NVIDIA GPU keeps the contract: rollout log-probs equal the training forward's values
bit for bit (issue 15). Skipped without CUDA or without vLLM's CUDA build (requirements-gpu-vllm.txt).

Run on the GPU machine: ``python -m pytest -q -s tests/test_gpu_vllm.py`` (``-s`` prints the
measured numbers). Each vLLM configuration runs in its own process (the batch-invariant mode is
process-wide), through :func:`advsim.bench.cuda.measure_in_subprocess` — the same measurement as
``advsim bench consistency --device cuda``. CPU CI covers the configuration errors
(``tests/test_config_validation.py``, ``test_bench_cuda_without_cuda_is_a_clear_error``).
"""

import pytest

torch = pytest.importorskip("torch")

from policies.engines import vllm_build  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (an NVIDIA GPU)"),
              pytest.mark.skipif(vllm_build() != "cuda", reason="needs vLLM's CUDA build (requirements-gpu-vllm.txt)")]

_CACHE: dict = {}


def _measure(label: str) -> dict:
    from advsim.bench.cuda import measure_in_subprocess

    if label not in _CACHE:
        _CACHE[label] = measure_in_subprocess(label, ("consistency",))
    res = _CACHE[label]
    assert "error" not in res, res["error"]
    return res


def _show(label, rows):
    for name, r in rows.items():
        print(f"{label:16s} {name:48s} tokens {r['n_tokens']:6d} equal {r['n_equal']:6d} max {r['max']:.3g} "
              f"k3 {r['k3']:.3g} reqs/step {r.get('max_requests_per_step', '-')}")


def _assert_bit_identical(rows: dict) -> None:
    from advsim.bench.cuda import CORESIDENT, PREFILL_DECODE_LENGTHS

    names = {f"rollout vs score, {n} co-resident" for n in CORESIDENT} | \
        {f"prefill vs decode, L = {n}" for n in PREFILL_DECODE_LENGTHS} | \
        {"needle: alone vs among 128", "new adapter version (executor@0, @1, roles, none)",
         "recheck executor@0 after the switch"}
    assert names <= set(rows)
    for name, r in rows.items():
        assert r["n_tokens"] > 0, name
        assert (r["n_equal"], r["max"], r["mean"], r["std"], r["k3"]) == (r["n_tokens"], 0.0, 0.0, 0.0, 0.0), name
        assert r.get("same_tokens", True), name
    assert rows["rollout vs score, 256 co-resident"]["max_requests_per_step"] == 256


def test_contract_is_bit_identical_in_every_scenario():
    """Batch-invariant vLLM with Triton attention, CUDA graphs and torch.compile, the linear layers
    and LM head on cuBLAS once proven row-invariant (the engine's defaults with
    ``consistent=True``): rollout vs score at 1, 16, 64 and 256 co-resident mixed-length,
    mixed-adapter requests; decode vs prefill at L = 1, 63, 64, 65, 1000, 2047; the needle alone vs
    among 128; a new adapter version; and the old version rechecked after it: every compared token
    bit-identical (max = mean = std = k3 = 0), the same tokens sampled, and the 256 requests
    co-resident in one engine step. On Hopper the engine must have installed cuBLAS (its proof
    passed on the H200 for 5 shapes x 871 row counts, 2026-12-04); elsewhere it keeps vLLM's kernel
    and says why; the LoRA shrink runs one 16 x 256 tile at every batch size (the default since
    2026-12-06c: all rows 0 in the bench on an H100, ``results/h100-lora-shrink-2026-12-06``).
    (All rows 0 on the H200: Triton linear 2026-12-02, cuBLAS linear 2026-12-04.)"""
    res = _measure("contract")
    _show("contract", res["rows"])
    print("linear layers:", res["linear_kernel"], "LoRA shrink tile:", res["lora_shrink"])
    assert res["lora_shrink"] == "16x256"
    if torch.cuda.get_device_capability() == (9, 0):
        assert res["linear_kernel"]["kernel"] == "cublas", res["linear_kernel"]
    _assert_bit_identical(res["rows"])


def test_contract_with_vllms_triton_matmul_is_bit_identical_in_every_scenario():
    """The same contract with vLLM 0.22's own batch-invariant Triton matmul for the linear layers
    (``contract-triton``, ``engine.cublas_linear: false``): what the engine falls back to where
    cuBLAS cannot be proven row-invariant, and what the H200 runs before 2026-12-04 used."""
    res = _measure("contract-triton")
    _show("contract-triton", res["rows"])
    assert res["linear_kernel"]["kernel"] == "triton", res["linear_kernel"]
    _assert_bit_identical(res["rows"])


def test_contract_with_vllms_v2_model_runner_is_bit_identical_in_every_scenario():
    """The same contract on vLLM 0.22's v2 model runner (``contract+model_runner=v2``,
    ``engine.model_runner: v2``): v2 samples with its own Gumbel kernel (noise from the request's
    seed and position, so the batched seeded sampler is off) and takes the sampled tokens' and the
    prompt's log-probs from one Triton log-softmax per row; attention, linear layers and LoRA keep
    the contract's kernels. Every scenario bit-identical, as measured in the bench on an H100 on
    2026-12-06f (all 13 rows 0, ``results/h100-v2-runner-2026-12-06``), and the engine really ran v2
    (it reads vLLM's ``use_v2_model_runner`` back after start)."""
    res = _measure("contract+model_runner=v2")
    _show("contract+v2", res["rows"])
    print("model runner:", res["model_runner"], "sampler:", res["sampler"])
    assert res["model_runner"] == "v2" and res["sampler"].startswith("vllm v2 runner"), (res["model_runner"], res["sampler"])
    _assert_bit_identical(res["rows"])


def test_negative_control_vllm_default_differs():
    """vLLM's default configuration (batch-invariant mode off, CUDA graphs, prefix caching): the
    same measurement shows diff ≠ 0 somewhere, so the contract test above can fail."""
    rows = _measure("default")["rows"]
    _show("default", rows)
    assert any(r["max"] > 0 for r in rows.values())


def test_eager_batch_invariant_mode_differs_so_the_contract_compiles():
    """The same batch-invariant engine without CUDA graphs and torch.compile (``contract-eager``)
    is not consistent — rollout vs score differs from 16 co-resident requests on, and prefill vs
    decode at L = 1000 (H200, 2026-12-02: 29/256 and 2/4 tokens bit-equal) — so compiling is part
    of the contract, and this test fails if a vLLM release makes eager consistent (then the
    contract can drop the compile time, ~95 s per engine start)."""
    rows = _measure("contract-eager")["rows"]
    _show("contract-eager", rows)
    assert rows["rollout vs score, 1 co-resident"]["max"] == 0.0
    assert any(r["max"] > 0 for r in rows.values())


def test_learner_graph_in_fp32_matches_fp64_and_bf16_does_not():
    """The learner's gradient graph (what carries the gradient; the values come from vLLM): in
    fp32, on the bf16 weights vLLM computes with, the executor adapter's gradient is within
    1e-4 relative L2 of a float64 graph on the same weights; a bf16 graph is printed for the
    record (0.194 relative L2 vs fp32 on the H200 on 2026-12-02), which is why the graph is fp32."""
    from advsim.bench.cuda import gradient_agreement

    res = gradient_agreement()
    print("adapter gradient vs fp64:", res)
    assert res["float32"]["rel_l2"] <= 1e-4 and res["float32"]["cosine"] >= 1 - 1e-8
    assert res["bfloat16"]["rel_l2"] > res["float32"]["rel_l2"]


def test_learner_builds_its_graph_in_fp32_beside_a_bf16_vllm_engine(tmp_path):
    """``engine: {kind: vllm, device: cuda, dtype: bfloat16}``: the learner's model is on the GPU in
    float32 and holds exactly the bf16 weights (every weight round-trips through bf16)."""
    from advsim.config import config_from_dict
    from advsim.learner import Learner
    from tests.test_train import TINY

    cfg = config_from_dict({**TINY, "engine": {"kind": "vllm", "device": "cuda", "dtype": "bfloat16"}})
    from policies.backbone import tiny_backbone

    model, tok = tiny_backbone(seed=0, dtype=torch.bfloat16)
    learner = Learner(cfg, tmp_path / "adapters", model=model, tokenizer=tok)
    w = [p for n, p in learner.model.named_parameters() if "lora_" not in n]
    assert all(p.dtype == torch.float32 and p.device.type == "cuda" for p in w)
    assert all(torch.equal(p, p.bfloat16().float()) for p in w)


def test_batched_seeded_sampler_on_cuda_is_batch_invariant_and_exponential():
    """The batched seeded sampler's kernel compiled for the GPU (:mod:`policies.vllm_seeded_sampler`):
    a request's noise is the same alone as in row 200 of 256 rows, positive, and Exp(1) (over the
    finite ones of 256 × 49,152 draws, mean 1 within 4 standard errors, 4 / √n = 0.00113; +∞, at
    u = 0, has probability 2⁻³¹ a draw: a handful at most); ``random_sample`` gives a seeded request
    the same tokens alone and in a batch of 256, its step counted in the generator's offset."""
    from policies import vllm_seeded_sampler as vss

    V = 49152
    alone = torch.empty(1, V, device="cuda")
    vss.seeded_exponential_(alone, *(torch.tensor([x], device="cuda") for x in (0, 77, 5)))
    many = torch.empty(256, V, device="cuda")
    seeds = torch.arange(1000, 1256, device="cuda")
    seeds[200] = 77
    steps = torch.full((256,), 5, device="cuda")
    vss.seeded_exponential_(many, torch.arange(256, device="cuda"), seeds, steps)
    assert torch.equal(many[200], alone[0])
    finite = many[torch.isfinite(many)]
    assert many.min().item() > 0 and many.numel() - finite.numel() <= 5
    assert abs(finite.mean().item() - 1.0) < 4 / many.numel() ** 0.5
    probs = torch.softmax(torch.randn(256, V, device="cuda"), dim=-1)

    def gens():
        out = {}
        for i in range(256):
            g = torch.Generator(device="cuda")
            g.manual_seed(i)
            out[i] = g
        return out

    g1, g256 = gens(), gens()
    one = [vss.random_sample(probs[7:8].clone(), {0: g1[7]}).item() for _ in range(5)]
    batch = [vss.random_sample(probs.clone(), g256)[7].item() for _ in range(5)]
    assert one == batch and g1[7].get_offset() == g256[7].get_offset() == 5 * vss.OFFSET_PER_DRAW
