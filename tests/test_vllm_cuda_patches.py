"""The cuBLAS linear patch for vLLM 0.22's batch-invariant mode (policies.vllm_cuda_patches):
its row-invariance proof, the shapes it proves, and where it refuses — checked on the CPU. The
patch itself runs on the GPU (tests/test_gpu_vllm.py::test_contract_is_bit_identical_in_every_scenario)."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from policies import vllm_cuda_patches as vcp


def _exact_rows(x, w):
    """x Wᵀ one row at a time in float64, rounded to float32: no row sees another."""
    return torch.stack([(r.double() @ w.double().T).float() for r in x])


def _different_when_alone(x, w):
    """Row-invariant for M ≥ 2, but a lone row is summed in float32 (another rounding): the
    shape of the failure the CPU GEMM had at M = 1 (policies.vllm_cpu_patches, fix 2)."""
    if x.shape[0] == 1:  # float32 products summed in float32
        return (x[:, None, :] * w[None]).sum(-1)
    return _exact_rows(x, w)


def test_row_invariance_proof_accepts_an_invariant_linear_and_names_each_failing_m():
    shapes = [(24, 40), (8, 16)]
    assert vcp.row_invariance_failures(shapes, (1, 2, 3, 17, 64), linear=_exact_rows, device="cpu",
                                       dtype=torch.float32) == []
    fails = vcp.row_invariance_failures(shapes, (1, 2, 3, 17, 64), linear=_different_when_alone, device="cpu",
                                        dtype=torch.float32)
    # M = 1 differs from row 0 of the 64-row product, and the last row alone from row 63, per shape
    assert fails == ["(24, 40) at M = 1: 1 of 1 rows differ from the same rows at M = 64",
                     "(24, 40): the last row alone differs from it at M = 64",
                     "(8, 16) at M = 1: 1 of 1 rows differ from the same rows at M = 64",
                     "(8, 16): the last row alone differs from it at M = 64"]
    with pytest.raises(ValueError, match="row_counts must be non-empty and >= 1"):
        vcp.row_invariance_failures(shapes, (0, 4), linear=_exact_rows, device="cpu")


def test_a_row_depending_on_its_neighbours_fails_at_every_smaller_m():
    """A linear whose K-reduction order depends on M (split-K when M is small) fails at those M."""
    def split_k_below_8(x, w):
        if x.shape[0] < 8:  # two halves of K summed separately, then added: another rounding
            k = x.shape[1] // 2
            return _exact_rows(x[:, :k], w[:, :k]) + _exact_rows(x[:, k:], w[:, k:])
        return _exact_rows(x, w)

    fails = vcp.row_invariance_failures([(32, 64)], (1, 4, 7, 8, 9, 16), linear=split_k_below_8, device="cpu",
                                        dtype=torch.float32)
    assert [f.split(":")[0] for f in fails] == ["(32, 64) at M = 1", "(32, 64) at M = 4", "(32, 64) at M = 7",
                                                "(32, 64)"]  # the last is the lone last row


def test_weight_shapes_are_the_fused_llama_projections():
    """SmolLM2-135M (576 hidden, 9 heads, 3 KV heads, 1536 MLP) and SmolLM2-1.7B (2048, 32, 32,
    8192): QKV, output, gate-up, down, LM head (vocabulary padded to 64)."""
    small = SimpleNamespace(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536,
                            vocab_size=49152)
    assert vcp.model_weight_shapes(small) == [(960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576)]
    big = SimpleNamespace(hidden_size=2048, num_attention_heads=32, num_key_value_heads=32, intermediate_size=8192,
                          vocab_size=49150, head_dim=64)
    assert vcp.model_weight_shapes(big) == [(6144, 2048), (2048, 2048), (16384, 2048), (2048, 8192), (49152, 2048)]


def test_row_counts_cover_every_decode_batch_and_sample_prefill_up_to_the_engine_limit():
    r = vcp.row_counts(8192)
    assert r[:512] == tuple(range(1, 513)) and r[512:515] == (575, 576, 577) and r[-3:] == (8129, 8191, 8192)
    assert vcp.row_counts(10_000)[-4:] == (9983, 9984, 9985, 10_000)  # max_num_batched_tokens above 8,192
    assert vcp.row_counts(100) == tuple(range(1, 101))
    assert vcp.ROW_COUNTS == r


def test_cublas_linear_is_an_opaque_op_with_the_bias_added_after_it():
    """``advsim::cublas_mm`` computes x Wᵀ (here on the CPU), has a fake implementation for
    torch.compile, and the bias is added outside the op, as vLLM's kernel does."""
    x, w, b = torch.randn(5, 3, 8), torch.randn(4, 8), torch.randn(4)
    assert torch.equal(vcp.cublas_linear(x, w), torch.nn.functional.linear(x, w))
    assert torch.equal(vcp.cublas_linear(x, w, b), torch.nn.functional.linear(x, w) + b)
    assert torch.ops.advsim.cublas_mm.default is not None
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        assert tuple(vcp.cublas_linear(fx, fw).shape) == (5, 3, 4)
    compiled = torch.compile(vcp.cublas_linear, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x, w, b), vcp.cublas_linear(x, w, b))


def test_installing_registers_the_op_before_vllm_compiles_the_model(tmp_path):
    """In a process that never ran the proof (vLLM's engine-core process, which adopts it), the
    first ``cublas_linear`` call comes inside Dynamo's trace of the model, where
    ``torch.library.custom_op`` cannot run ("Attempted to inline function marked as skipped":
    the engine core failed to start on an H100, 2026-12-06e). ``_rebind`` — what ``install`` and
    ``adopt`` end in — registers the op first, so a compiled first call works; without it the same
    fresh process fails (the control)."""
    import subprocess
    import sys

    prog = """
import sys, types, torch, policies.vllm_cuda_patches as vcp
if sys.argv[1] == "rebind":
    mod = types.SimpleNamespace(linear_batch_invariant=None)
    vcp._rebind([mod], vcp.VLLM_WORKSPACE_CONFIG, 8, "test")
    assert mod.linear_batch_invariant is vcp.cublas_linear
x, w = torch.randn(3, 8), torch.randn(4, 8)
try:
    y = torch.compile(vcp.cublas_linear, backend="eager", fullgraph=True)(x, w)
    print("ok", torch.equal(y, torch.nn.functional.linear(x, w)))
except Exception as e:
    print("failed", type(e).__name__)
"""
    got = {}
    for how in ("rebind", "lazy"):
        out = subprocess.run([sys.executable, "-c", prog, how], capture_output=True, text=True, timeout=300,
                             cwd=Path(__file__).resolve().parents[1])
        got[how] = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
    assert got == {"rebind": "ok True", "lazy": "failed Unsupported"}


def test_install_refuses_an_unproven_vllm_and_patches_nothing():
    """This machine has vllm-cpu 0.32: the patch is read against 0.22's layers, so it refuses."""
    import vllm

    ok, why = vcp.install([(8, 8)])
    assert not ok and not vcp.installed()
    assert why == f"vLLM {vllm.__version__}: the cuBLAS linear patch is proven on 0.22.x only"


def test_engine_reports_which_kernel_runs_the_linear_layers(monkeypatch, tmp_path):
    """VLLMEngine's choice (CPU-checkable part): without the contract vLLM's own kernels; without
    cublas_linear vLLM's batch-invariant Triton matmul; with it, whatever install() proved."""
    import json

    from policies.engines.vllm_engine import _linear_kernel

    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 100, "num_hidden_layers": 1}))
    assert _linear_kernel(tmp_path, False, True) == ("vllm default", "batch-invariant mode off")
    assert _linear_kernel(tmp_path, True, False) == ("triton", "vLLM's batch-invariant matmul (cublas_linear=False)")
    seen = []
    monkeypatch.setattr(vcp, "install", lambda shapes, max_rows, workspace_config: (
        seen.append((shapes, max_rows, workspace_config)), (False, "not row-invariant"))[1])
    assert _linear_kernel(tmp_path, True, True, 4096) == ("triton", "not row-invariant")
    assert _linear_kernel(tmp_path, True, True, 4096, None) == ("triton", "not row-invariant")
    assert seen == [([(128, 64), (64, 64), (256, 64), (64, 128), (128, 64)], 4096, ":16:8"),
                    ([(128, 64), (64, 64), (256, 64), (64, 128), (128, 64)], 4096, None)]
    monkeypatch.setattr(vcp, "install", lambda shapes, max_rows, workspace_config: (True, "proven"))
    assert _linear_kernel(tmp_path, True, True) == ("cublas", "proven")
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "qwen2"}))
    assert _linear_kernel(tmp_path, True, True) == (
        "triton", "model_weight_shapes knows Llama-family layouts only, got model_type 'qwen2'")


def _capture_vllm_engine_kwargs(monkeypatch) -> dict:
    """Make ``make_engine`` build a stand-in for VLLMEngine (no model, any device) and return the
    dict its keyword arguments land in."""
    import policies.engines.vllm_engine as ve
    from policies.engines import base

    got: dict = {}

    class Fake:
        def __init__(self, model, **kw):
            got.update(kw)

    monkeypatch.setattr(ve, "VLLMEngine", Fake)
    monkeypatch.setattr(base, "check_engine_settings", lambda *a, **k: None)
    return got


def test_config_and_make_engine_carry_cublas_linear(monkeypatch):
    from advsim.config import EngineConfig
    from policies.engines import base

    assert EngineConfig().cublas_linear is False  # vLLM on the CPU: no such kernel choice
    got = _capture_vllm_engine_kwargs(monkeypatch)
    settings = SimpleNamespace(kind="vllm", device="cuda", dtype="bfloat16", max_model_len=64, kv_cache_gib=1,
                               threads=1, max_num_seqs=4, cublas_linear=True)
    base.make_engine(settings, backbone="x")
    assert got["cublas_linear"] is True and got["device"] == "cuda"


def test_cublas_linear_outside_vllm_on_cuda_is_a_config_error():
    from advsim.config import ConfigError, config_from_dict

    for engine in ({"kind": "vllm", "device": "cpu"}, {"kind": "torch", "device": "cpu"}):
        with pytest.raises(ConfigError, match=r"engine.cublas_linear is for vLLM on CUDA \(engine.kind 'vllm', "
                                              r"engine.device 'cuda'\); this engine is kind '(vllm|torch)' on 'cpu'"):
            config_from_dict({"engine": {**engine, "cublas_linear": True}})


def test_cublas_linear_defaults_on_for_vllm_on_cuda_and_old_runs_keep_their_kernel(monkeypatch, tmp_path):
    """Default null resolves to on for vLLM on CUDA (the contract's fastest proven kernel), off for
    the torch engine, once (the engine section is frozen). A run saved before the field existed ran
    vLLM's Triton matmul: its saved config reads back with it false (``RunDir.saved_config``, what
    ``advsim eval --run`` uses), so resuming it under today's default is a config change whose
    error says what to write."""
    import dataclasses

    import yaml

    import advsim.config as config_mod
    from advsim.config import EngineConfig, config_from_dict
    from advsim.run import RunDir
    from advsim.train import RunExistsError, check_run_dir
    from tests.test_train import TINY

    monkeypatch.setattr("policies.engines.check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(config_mod, "_memory_gib", lambda device="cpu": 141)  # an H200, as seen from here
    e = EngineConfig(kind="vllm", device="cuda", dtype="bfloat16")
    assert e.cublas_linear is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.kind = "torch"  # would leave cublas_linear stale
    assert EngineConfig(kind="vllm", device="cuda", dtype="bfloat16", cublas_linear=False).cublas_linear is False
    assert EngineConfig(kind="torch", device="cuda", dtype="bfloat16").cublas_linear is False
    cuda = {"kind": "vllm", "device": "cuda", "dtype": "bfloat16"}
    cfg = config_from_dict({**TINY, "engine": {**TINY["engine"], **cuda}})
    assert cfg.to_dict()["engine"]["cublas_linear"] is True
    run = RunDir(tmp_path / "run")
    legacy = cfg.to_dict()
    del legacy["engine"]["cublas_linear"]  # a config.yaml saved before the field existed
    (run.path / "config.yaml").write_text(yaml.safe_dump(legacy))
    assert run.saved_config().engine.cublas_linear is False
    assert run.config_changes(cfg) == ["engine.cublas_linear: False -> True"]
    assert run.config_changes(config_from_dict({**legacy, "engine": {**legacy["engine"], "cublas_linear": False}})) == []
    monkeypatch.setattr(run, "latest", lambda: ("capability-iter-1", {}))
    with pytest.raises(RunExistsError, match=r"Changed: engine.cublas_linear: False -> True \(engine.cublas_linear: "
                                             r"False is what this run used: its config.yaml predates the field"):
        check_run_dir(cfg, run, resume=True)
    (run.path / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))  # saved since: the resolved value
    assert run.config_changes(cfg) == [] and run.saved_config().engine.cublas_linear is True


def test_max_num_batched_tokens_by_device_and_a_run_resumes_with_it_changed(monkeypatch, tmp_path):
    """engine.max_num_batched_tokens: null resolves to 32,768 for vLLM on CUDA and 8,192 elsewhere
    (the engine's value before the field, so a CPU run's config and digest stay as they were), at
    least max_model_len; a value below max_model_len is a clear error for kind vllm; VLLMEngine
    resolves None the same way for the contract only (the bench's ``default`` row keeps 8,192);
    make_engine passes it; a run may resume with it changed (a scheduling choice under the
    batch-invariant contract), and the rollout digest does not see it."""
    import yaml

    import advsim.config as config_mod
    from advsim.config import ConfigError, EngineConfig, config_from_dict
    from advsim.run import RunDir, run_digest
    from advsim.train import check_run_dir
    from policies.engines import base
    from policies.engines.vllm_engine import CUDA_BATCHED_TOKENS, batched_tokens
    from tests.test_train import TINY

    assert CUDA_BATCHED_TOKENS == 32768
    assert EngineConfig().max_num_batched_tokens == 8192
    assert EngineConfig(max_model_len=10_000).max_num_batched_tokens == 10_000
    assert EngineConfig(max_num_batched_tokens=20_000).max_num_batched_tokens == 20_000
    with pytest.raises(ConfigError, match=r"engine.max_num_batched_tokens \(1000\) is below engine.max_model_len "
                                         r"\(2048\): the engine schedules a prompt whole"):
        config_from_dict({"engine": {"max_num_batched_tokens": 1000}})
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        config_from_dict({"engine": {"max_num_batched_tokens": 0}})
    assert batched_tokens("cuda", True, None, 4096) == 32768
    assert batched_tokens("cuda", False, None, 4096) == 8192  # the negative control: the engine's earlier value
    assert batched_tokens("cpu", True, None, 2048) == 8192
    assert batched_tokens("cuda", True, 8192, 4096) == 8192  # contract-mnbt8k
    assert batched_tokens("cuda", True, None, 40_000) == 40_000  # a step holds a whole prompt
    with pytest.raises(ValueError, match=r"max_num_batched_tokens \(100\) is below max_model_len \(2048\)"):
        batched_tokens("cpu", True, 100, 2048)
    with pytest.raises(ValueError, match="below max_model_len"):
        batched_tokens("cuda", True, 0, 4096)

    monkeypatch.setattr("policies.engines.check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(config_mod, "_memory_gib", lambda device="cpu": 141)
    e = EngineConfig(kind="vllm", device="cuda", dtype="bfloat16", max_model_len=4096)
    assert e.max_num_batched_tokens == 32768
    assert EngineConfig(kind="torch", device="cuda", dtype="bfloat16").max_num_batched_tokens == 8192
    got = _capture_vllm_engine_kwargs(monkeypatch)
    base.make_engine(e, backbone="x")
    assert got["max_num_batched_tokens"] == 32768

    cuda = {**TINY["engine"], "kind": "vllm", "device": "cuda", "dtype": "bfloat16"}
    cfg = config_from_dict({**TINY, "engine": cuda})
    run = RunDir(tmp_path / "run")
    legacy = cfg.to_dict()
    del legacy["engine"]["max_num_batched_tokens"]  # saved before the field existed (ran with 8,192)
    (run.path / "config.yaml").write_text(yaml.safe_dump(legacy))
    assert run.saved_config().engine.max_num_batched_tokens == 32768  # the field's doc: such a run ran 8,192
    changed = config_from_dict({**TINY, "engine": {**cuda, "max_num_batched_tokens": 8192}})
    (run.path / "config.yaml").write_text(yaml.safe_dump(changed.to_dict()))
    assert run.config_changes(cfg) == []  # 8,192 -> 32,768: resumable
    monkeypatch.setattr(run, "latest", lambda: ("capability-iter-1", {}))
    check_run_dir(cfg, run, resume=True)
    assert run_digest(changed) == run_digest(cfg)


def test_batched_sampler_and_detokenize_defaults_by_device_and_old_runs_keep_theirs(monkeypatch, tmp_path):
    """The engine section's null resolves, once, to the measured choice: the batched seeded sampler
    on and per-step detokenization off for vLLM on CUDA, vLLM's own behaviour elsewhere (the CPU
    record keeps its engine); VLLMEngine resolves its own None the same way for the contract only
    (``default`` stays vLLM's default, the bench's negative control); make_engine passes both on.
    A CUDA run saved before the fields existed sampled with vLLM's sampler and detokenized every
    step: resuming it under today's defaults is a config change whose error says what to write,
    and writing it lets the run resume; a CPU run saved before resumes as it is, with the same
    rollout digest (its saved chunks stay valid)."""
    import yaml

    import advsim.config as config_mod
    from advsim.config import ConfigError, EngineConfig, config_from_dict
    from advsim.run import RunDir, run_digest
    from advsim.train import RunExistsError, check_run_dir
    from policies.engines import base
    from policies.engines.vllm_engine import _speed_options
    from tests.test_train import TINY

    assert (EngineConfig().batched_sampler, EngineConfig().detokenize) == (False, True)
    assert _speed_options("cpu", True, None, None) == (False, True)
    assert _speed_options("cuda", True, None, None) == (True, False)
    assert _speed_options("cuda", False, None, None) == (False, True)  # vLLM's default: the negative control
    assert _speed_options("cuda", True, False, True) == (False, True)  # contract-full
    assert _speed_options("cpu", True, None, False) == (False, False)
    with pytest.raises(ConfigError, match=r"engine.batched_sampler is for vLLM on CUDA .*kind 'vllm' on 'cpu'"):
        config_from_dict({"engine": {"kind": "vllm", "device": "cpu", "batched_sampler": True}})
    assert config_from_dict({"engine": {"kind": "vllm", "device": "cpu", "detokenize": False}}).engine.detokenize is False

    cpu = config_from_dict(TINY)
    cpu_run = RunDir(tmp_path / "cpu")
    legacy_cpu = cpu.to_dict()
    for k in ("batched_sampler", "detokenize", "cublas_linear", "cublas_workspace_config", "lora_shrink",
              "max_num_batched_tokens", "multiprocessing", "model_runner"):
        del legacy_cpu["engine"][k]
    (cpu_run.path / "config.yaml").write_text(yaml.safe_dump(legacy_cpu))
    assert cpu_run.config_changes(cpu) == []
    assert cpu_run.fields_added_since() == ["engine.cublas_linear", "engine.batched_sampler", "engine.detokenize",
                                            "engine.cublas_workspace_config", "engine.lora_shrink",
                                            "engine.multiprocessing", "engine.model_runner"]
    # the digest drops fields at their legacy value: by hand, the config without them (and without
    # the resumable fields) and advsim's version, as a run saved before the fields existed hashed it
    import hashlib
    import json

    from advsim import __version__

    d = cpu.to_dict()
    for k in ("batched_sampler", "detokenize", "cublas_linear", "cublas_workspace_config", "lora_shrink",
              "kv_cache_gib", "gpu_memory_utilization", "max_num_batched_tokens", "multiprocessing", "model_runner"):
        del d["engine"][k]
    del d["name"], d["stages"]
    by_hand = hashlib.sha256(json.dumps([d, __version__], sort_keys=True, default=repr).encode()).hexdigest()[:16]
    assert run_digest(cpu) == by_hand
    assert run_digest(config_from_dict({**TINY, "engine": {**TINY["engine"], "detokenize": False}})) != run_digest(cpu)

    monkeypatch.setattr("policies.engines.check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(config_mod, "_memory_gib", lambda device="cpu": 141)
    e = EngineConfig(kind="vllm", device="cuda", dtype="bfloat16")
    assert (e.batched_sampler, e.detokenize) == (True, False)
    assert EngineConfig(kind="torch", device="cuda", dtype="bfloat16").batched_sampler is False

    got = _capture_vllm_engine_kwargs(monkeypatch)
    base.make_engine(e, backbone="x")
    assert (got["batched_sampler"], got["detokenize"]) == (True, False)

    cuda = {**TINY["engine"], "kind": "vllm", "device": "cuda", "dtype": "bfloat16"}
    cfg = config_from_dict({**TINY, "engine": cuda})
    run = RunDir(tmp_path / "run")
    legacy = cfg.to_dict()
    del legacy["engine"]["batched_sampler"], legacy["engine"]["detokenize"]  # saved before the fields existed
    (run.path / "config.yaml").write_text(yaml.safe_dump(legacy))
    saved = run.saved_config().engine
    assert (saved.batched_sampler, saved.detokenize) == (False, True)
    assert run.config_changes(cfg) == ["engine.batched_sampler: False -> True", "engine.detokenize: True -> False"]
    monkeypatch.setattr(run, "latest", lambda: ("capability-iter-1", {}))
    with pytest.raises(RunExistsError, match=r"Changed: engine.batched_sampler: False -> True; engine.detokenize: "
                                             r"True -> False \(engine.batched_sampler: False, engine.detokenize: "
                                             r"True is what this run used: its config.yaml predates the field"):
        check_run_dir(cfg, run, resume=True)
    written = config_from_dict({**TINY, "engine": {**cuda, "batched_sampler": False, "detokenize": True}})
    check_run_dir(written, run, resume=True)  # what the message says to write lets it resume

    # a run saved since, with the field written out: a change is refused without the "predates" hint
    (run.path / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    assert run.fields_added_since() == []
    with pytest.raises(RunExistsError) as err:
        check_run_dir(written, run, resume=True)
    assert "engine.batched_sampler: True -> False" in str(err.value) and "predates" not in str(err.value)


def test_batched_sampler_falls_back_only_when_not_asked_for(monkeypatch):
    """Where the batched sampler cannot install, VLLMEngine's default (None) keeps vLLM's sampler
    with a warning, but an explicit True — what a config's resolved engine.batched_sampler passes —
    is an error that says how to turn it off (the run's record would be wrong otherwise)."""
    import logging

    from policies import vllm_seeded_sampler
    from policies.engines.vllm_engine import _install_sampler

    monkeypatch.setattr(vllm_seeded_sampler, "install", lambda: (False, "vLLM 0.23.0: read against 0.22.x only"))
    with pytest.raises(ValueError, match=r"batched_sampler: vLLM 0.23.0: read against 0.22.x only; set "
                                         r"engine.batched_sampler: false"):
        _install_sampler(asked=True)
    with _caplog_at(logging.WARNING) as records:
        assert _install_sampler(asked=False) is None
    assert any("not available here (vLLM 0.23.0" in r.getMessage() for r in records)
    monkeypatch.setattr(vllm_seeded_sampler, "install", lambda: (True, "one Philox launch for every seeded row"))
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    assert _install_sampler(asked=True) == "batched: one Philox launch for every seeded row"
    import os

    assert os.environ.pop("VLLM_USE_V2_MODEL_RUNNER") == "0"


class _caplog_at:
    """Collect the records of policies.engines.vllm_engine's logger at ``level`` (a small caplog
    that does not depend on logging's propagation settings)."""

    def __init__(self, level):
        import logging

        self.level, self.records = level, []
        self.logger = logging.getLogger("policies.engines.vllm_engine")
        self.handler = logging.Handler(level)
        self.handler.emit = self.records.append

    def __enter__(self):
        self.logger.addHandler(self.handler)
        return self.records

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)


def test_workspace_config_is_checked_and_kept_after_vllms_init(monkeypatch):
    """A CUBLAS_WORKSPACE_CONFIG PyTorch cannot parse is a ValueError before anything changes
    (also from VLLMEngine, before a model loads); keep_workspace_config makes vLLM's
    init_batch_invariance (which sets :16:8) leave the chosen value — or no variable at all —
    wrapping once, a later call changing the value; the bench's two workspace rows are contract
    rows measured only when named."""
    import os
    import types

    import policies.backbone as pb
    from advsim.bench import cuda
    from policies import vllm_cuda_patches as vcp
    from policies.engines import VLLMEngine

    for bad in ("16:8", ":16", ":16:8 ", "", 16):
        with pytest.raises(ValueError, match="is not None or ':SIZE:COUNT'"):
            vcp.check_workspace_config(bad)
    for good in (None, ":16:8", ":4096:8", ":4096:2:16:8"):
        vcp.check_workspace_config(good)
    # an engine's setting: two names and the variable's own syntax
    assert [vcp.workspace_value(v) for v in ("unset", "vllm", ":4096:8", ":4096:2:16:8")] == [
        None, ":16:8", ":4096:8", ":4096:2:16:8"]
    for bad in (None, "Unset", "none", "16:8", ":16:8 ", ""):
        with pytest.raises(ValueError, match="is not 'unset', 'vllm' or ':SIZE:COUNT'"):
            vcp.workspace_value(bad)
    monkeypatch.setattr(pb, "resolve_backbone", lambda *a, **k: pytest.fail("loaded a model before refusing"))
    with pytest.raises(ValueError, match="cublas_workspace_config '4096' is not"):
        VLLMEngine(cublas_workspace_config="4096")

    def init_batch_invariance():  # vLLM 0.22's, as far as the variable goes
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
        return "ran"

    fake = types.SimpleNamespace(init_batch_invariance=init_batch_invariance)
    monkeypatch.setitem(vcp._STATE, "workspace_config", vcp._STATE.get("workspace_config"))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    vcp.keep_workspace_config(":4096:8", module=fake)
    assert fake.init_batch_invariance() == "ran" and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    wrapped = fake.init_batch_invariance
    vcp.keep_workspace_config(None, module=fake)
    assert fake.init_batch_invariance is wrapped  # wrapped once
    fake.init_batch_invariance()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    with pytest.raises(ValueError):
        vcp.keep_workspace_config(":x:8", module=fake)
    es = cuda.engine_settings
    assert es("contract-ws4096") == {**cuda.CONFIGS["contract"], "cublas_workspace_config": ":4096:8"}
    assert es("contract-ws16") == {**es("contract-mnbt8k"), "cublas_workspace_config": "vllm"}
    assert es("contract-nows") == {**es("contract-mnbt8k"), "cublas_workspace_config": "unset"}
    # the labels of earlier measurements keep the 8,192 batched tokens per step they were measured with
    for label in ("contract-full", "contract-cublas", "contract-light", "contract-sampler", "contract-ws16",
                  "contract-nows", "contract-mnbt8k"):
        assert es(label)["max_num_batched_tokens"] == 8192, label
    assert "max_num_batched_tokens" not in cuda.CONFIGS["contract"]  # the engine's default: 32,768 on CUDA
    import inspect

    assert inspect.signature(VLLMEngine).parameters["cublas_workspace_config"].default == "unset"  # = contract-nows
    # the earlier labels keep vLLM's :16:8, as when they were measured
    for label in ("contract-full", "contract-cublas", "contract-light", "contract-sampler"):
        assert es(label)["cublas_workspace_config"] == "vllm"
    for label in ("contract-ws4096", "contract-nows", "contract-ws16"):
        assert cuda.is_contract(label) and label not in cuda.DEFAULT_LABELS


def assert_a_run_saved_before_the_field_resumes_with_its_value(monkeypatch, tmp_path, cfg, field: str, legacy: str,
                                                               default: str):
    """A run whose ``config.yaml`` lacks ``engine.<field>`` (saved before it existed) reads back
    with ``legacy``, the value it ran; resuming it under ``cfg`` (where the field is ``default``)
    is a change whose error names the legacy value, and writing ``legacy`` resumes. Returns the
    RunDir."""
    import yaml

    from advsim.config import config_from_dict
    from advsim.run import RunDir
    from advsim.train import RunExistsError, check_run_dir

    run = RunDir(tmp_path / "run")
    saved = cfg.to_dict()
    del saved["engine"][field]  # saved before the field existed
    (run.path / "config.yaml").write_text(yaml.safe_dump(saved))
    assert getattr(run.saved_config().engine, field) == legacy
    assert run.config_changes(cfg) == [f"engine.{field}: {legacy!r} -> {default!r}"]
    monkeypatch.setattr(run, "latest", lambda: ("capability-iter-1", {}))
    with pytest.raises(RunExistsError, match=rf"\(engine.{field}: {legacy!r} is what this run used: its config.yaml "
                                             r"predates the field"):
        check_run_dir(cfg, run, resume=True)
    data = cfg.to_dict()
    data["engine"][field] = legacy
    check_run_dir(config_from_dict(data), run, resume=True)
    return run


def assert_a_cuda_only_text_field(monkeypatch, field: str, cuda_choice: str, other: str, bad: str,
                                  bad_message: str) -> dict:
    """``engine.<field>``, a vLLM-on-CUDA setting written as text: null is 'vllm' off vLLM + CUDA
    (where 'vllm' may be written and ``other`` is refused) and ``cuda_choice`` on it (torch on CUDA:
    'vllm'); 'vllm' and ``other`` are kept there and ``bad`` refused with ``bad_message``. Leaves
    the CUDA checks patched out (``monkeypatch``) and returns a TINY vLLM + CUDA engine section."""
    import advsim.config as config_mod
    from advsim.config import ConfigError, EngineConfig, config_from_dict
    from tests.test_train import TINY

    assert getattr(EngineConfig(), field) == "vllm"
    assert getattr(config_from_dict({"engine": {"kind": "vllm", "device": "cpu", field: "vllm"}}).engine, field) == "vllm"
    with pytest.raises(ConfigError, match=rf"engine.{field} is for vLLM on CUDA .*kind 'vllm' on 'cpu', where it "
                                          r"stays 'vllm'"):
        config_from_dict({"engine": {"kind": "vllm", "device": "cpu", field: other}})
    monkeypatch.setattr("policies.engines.check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(config_mod, "_memory_gib", lambda device="cpu": 141)
    cuda = {**TINY["engine"], "kind": "vllm", "device": "cuda", "dtype": "bfloat16"}
    assert getattr(EngineConfig(kind="vllm", device="cuda", dtype="bfloat16"), field) == cuda_choice
    assert getattr(EngineConfig(kind="torch", device="cuda", dtype="bfloat16"), field) == "vllm"
    for good in ("vllm", other):
        assert getattr(config_from_dict({**TINY, "engine": {**cuda, field: good}}).engine, field) == good
    with pytest.raises(ConfigError, match=bad_message):
        config_from_dict({**TINY, "engine": {**cuda, field: bad}})
    return cuda


def test_workspace_config_field_defaults_unset_on_vllm_cuda_and_old_runs_keep_vllms(monkeypatch, tmp_path):
    """engine.cublas_workspace_config: null resolves to 'unset' for vLLM on CUDA (the measured
    choice) and to 'vllm' (untouched) elsewhere, where another value is an error; a value must be
    'unset', 'vllm' or ':SIZE:COUNT'; make_engine passes it on. A CUDA run saved before the field
    existed ran vLLM's :16:8: resuming it under today's default is a change whose error says to
    write 'vllm', which then resumes; a CPU run saved before has nothing to change."""
    import yaml

    import advsim.config as config_mod
    from advsim.config import ConfigError, config_from_dict
    from policies.engines import base
    from tests.test_train import TINY

    cuda = assert_a_cuda_only_text_field(monkeypatch, "cublas_workspace_config", "unset", ":4096:8",
                                         "16:8", r"engine.cublas_workspace_config '16:8' is not 'unset', 'vllm' or")
    unquoted = yaml.load("cublas_workspace_config: 16:8", Loader=config_mod.unique_key_loader())  # YAML 1.1: 968
    with pytest.raises(ConfigError, match=r"engine.cublas_workspace_config: 968 is not 'unset', 'vllm' or "
                                          r"':SIZE:COUNT' \(write it with its leading colon"):
        config_from_dict({**TINY, "engine": {**cuda, **unquoted}})

    got = _capture_vllm_engine_kwargs(monkeypatch)
    cfg = config_from_dict({**TINY, "engine": cuda})
    base.make_engine(cfg.engine, backbone="x")
    assert got["cublas_workspace_config"] == "unset"

    run = assert_a_run_saved_before_the_field_resumes_with_its_value(monkeypatch, tmp_path, cfg,
                                                                     "cublas_workspace_config", "vllm", "unset")
    # the written file round-trips the ':SIZE:COUNT' form as a string
    ws = config_from_dict({**TINY, "engine": {**cuda, "cublas_workspace_config": ":16:8"}})
    (run.path / "config.yaml").write_text(yaml.safe_dump(ws.to_dict()))
    assert run.saved_config().engine.cublas_workspace_config == ":16:8" and run.config_changes(ws) == []


def test_engine_keeps_or_leaves_the_workspace_before_vllm_starts_and_a_later_vllm_engine_gets_vllms(
        monkeypatch, tmp_path, caplog):
    """On CUDA VLLMEngine tells vLLM's init what to do with CUBLAS_WORKSPACE_CONFIG before the
    row-invariance proof and before ``LLM()``: keep the engine's value, or — for ``"vllm"``,
    including the negative control, which records ``"vllm"`` — leave vLLM's own. A ``"vllm"``
    engine after an ``"unset"`` one in the same process therefore gets vLLM's :16:8 (the wrapper
    stays, its state changes); a second engine whose value differs from the one the cuBLAS patch
    was proven with is warned about and says so in its reason."""
    import logging
    import os
    import types

    import policies.backbone as pb
    import policies.engines.vllm_engine as ve
    import vllm
    from policies import vllm_cuda_patches as vcp

    calls = []
    monkeypatch.setattr(ve, "check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(pb, "resolve_backbone", lambda m: tmp_path)
    monkeypatch.setattr(pb, "load_tokenizer", lambda p: None)
    monkeypatch.setattr(ve, "_set_batch_invariant", lambda consistent: None)
    monkeypatch.setattr(ve, "_install_sampler", lambda asked: "batched")
    monkeypatch.setattr(ve, "cuda_llm_settings", lambda *a, **k: {})
    real_linear_kernel = ve._linear_kernel
    monkeypatch.setattr(ve, "_linear_kernel", lambda path, consistent, cublas, rows, ws: (
        calls.append(("proof", ws)), ("cublas", "proven"))[1])
    keep, leave = vcp.keep_workspace_config, vcp.leave_workspace_config
    monkeypatch.setattr(vcp, "keep_workspace_config", lambda v, module=None: calls.append(("keep", v)))
    monkeypatch.setattr(vcp, "leave_workspace_config", lambda: calls.append(("leave",)))
    monkeypatch.setattr(vllm, "LLM", lambda **kw: calls.append(("LLM",)))
    for setting, consistent, want in (("unset", True, [("keep", None), ("proof", None)]),
                                      (":4096:8", True, [("keep", ":4096:8"), ("proof", ":4096:8")]),
                                      ("vllm", True, [("leave",), ("proof", ":16:8")]),
                                      ("unset", False, [("leave",), ("proof", None)])):
        calls.clear()
        e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=consistent, enable_lora=False,
                          cublas_workspace_config=setting)
        assert calls == want + [("LLM",)], setting
        assert e.cublas_workspace_config == (setting if consistent else "vllm")
    def no_such_module(v, module=None):
        raise ModuleNotFoundError("No module named 'vllm.model_executor.layers.batch_invariant'")

    monkeypatch.setattr(vcp, "keep_workspace_config", no_such_module)  # another vLLM layout
    with pytest.raises(ValueError, match=r"cublas_workspace_config 'unset' needs vLLM 0.22's .*set "
                                         r"engine.cublas_workspace_config: vllm"):
        ve.VLLMEngine(device="cuda", dtype="bfloat16", enable_lora=False)
    ve.VLLMEngine(device="cuda", dtype="bfloat16", enable_lora=False, cublas_workspace_config="vllm")  # starts
    calls.clear()
    ve.VLLMEngine(device="cpu", enable_lora=False, consistent=False, cublas_workspace_config="unset")
    assert calls == [("LLM",)]  # ignored on the CPU

    # the real wrapper: unset for one engine, then vLLM's value again for the next
    def init_batch_invariance():
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"

    fake = types.SimpleNamespace(init_batch_invariance=init_batch_invariance)
    monkeypatch.setitem(vcp._STATE, "workspace_config", vcp._STATE.get("workspace_config"))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    keep(None, module=fake)
    fake.init_batch_invariance()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    leave()
    fake.init_batch_invariance()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"

    # a second engine with another value than the proof's
    monkeypatch.setitem(vcp._STATE, "installed", True)
    monkeypatch.setitem(vcp._STATE, "proven_workspace_config", None)
    monkeypatch.setitem(vcp._STATE, "proven_max_rows", 8192)
    caplog.clear()  # the CPU engine above may have warned (consistency patches installed by an earlier test)
    with caplog.at_level(logging.WARNING, logger=ve.log.name):
        assert real_linear_kernel(tmp_path, True, True, 8192, None) == ("cublas", "installed earlier in this process")
        assert not [r for r in caplog.records if r.name == ve.log.name]
        assert real_linear_kernel(tmp_path, True, True, 8192, ":16:8") == (
            "cublas", "installed earlier in this process (proven with CUBLAS_WORKSPACE_CONFIG=unset)")
    assert "proven with CUBLAS_WORKSPACE_CONFIG=unset; this engine keeps :16:8" in caplog.text
    assert "proven for up to" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=ve.log.name):  # a later engine with larger steps than the proof's
        assert real_linear_kernel(tmp_path, True, True, 32768, None) == ("cublas", "installed earlier in this process")
    assert "proven for up to 8192 rows; this engine's steps hold up to 32768 tokens" in caplog.text
