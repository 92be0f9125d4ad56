"""Our vLLM patches in vLLM's engine-core process (``VLLMEngine(multiprocessing=True)``,
:mod:`policies.vllm_engine_core`): what the engine's process carries over, how a worker installs
it or refuses to start, how the engine checks each worker, and — on the CPU, end to end — that a
spawned engine core holds the contract's patches and keeps rollout = re-score bit for bit."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from policies import vllm_engine_core as vec


def test_payload_round_trips_and_malformed_values_are_refused():
    want = vec.payload("cuda", None, None, {"reason": "proven", "max_rows": 32768, "workspace_config": None},
                       "16x256", True)
    assert want == {"device": "cuda", "cpu_patches": None, "workspace_config": None,
                    "cublas_linear": {"reason": "proven", "max_rows": 32768, "workspace_config": None},
                    "lora_shrink": "16x256", "batched_sampler": True}
    assert vec.read_payload(json.dumps(want)) == want
    assert vec.expected(want) == {"cpu_patches": None, "lora_shrink": "16x256", "batched_sampler": True,
                                  "cublas_linear": True, "workspace_config": None}
    assert "workspace_config" not in vec.expected(vec.payload("cpu", "consistency"))
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'; got 'tpu'"):
        vec.payload("tpu")
    with pytest.raises(ValueError, match="cpu_patches must be None, 'consistency' or 'lora_kernels'"):
        vec.payload("cpu", "all")
    with pytest.raises(ValueError, match="ADVSIM_VLLM_PATCHES is not JSON"):
        vec.read_payload("{device: cpu")
    with pytest.raises(ValueError, match="must be an object with the keys device, cpu_patches"):
        vec.read_payload(json.dumps({**want, "extra": 1}))
    with pytest.raises(ValueError, match="must be an object with the keys"):
        vec.read_payload("[1, 2]")
    assert vec.install_from_env({}) is None  # not a worker of ours: nothing happens


def test_a_worker_installs_what_the_engine_asked_in_its_order_or_refuses_to_start(monkeypatch):
    """CUDA: the cuBLAS verdict adopted, then the engine's workspace setting (kept or left), the
    shrink tile, the sampler; CPU: the CPU fixes. A patch that refuses is a RuntimeError naming it (the
    worker's start fails) — never a worker running without it."""
    from policies import vllm_cpu_patches, vllm_cuda_patches, vllm_lora_shrink, vllm_seeded_sampler

    calls = []
    monkeypatch.setattr(vllm_cpu_patches, "install", lambda consistency: calls.append(("cpu", consistency)))
    monkeypatch.setattr(vllm_cuda_patches, "keep_workspace_config", lambda v: calls.append(("keep", v)))
    monkeypatch.setattr(vllm_cuda_patches, "leave_workspace_config", lambda: calls.append(("leave",)))
    monkeypatch.setattr(vllm_cuda_patches, "adopt", lambda r, m, w: calls.append(("adopt", r, m, w)) or (True, r))
    monkeypatch.setattr(vllm_lora_shrink, "install", lambda m, k: calls.append(("shrink", m, k)) or (True, ""))
    monkeypatch.setattr(vllm_seeded_sampler, "install", lambda: calls.append(("sampler",)) or (True, ""))
    monkeypatch.setattr(vec, "installed", lambda device: {"device": device})
    linear = {"reason": "cuBLAS row-invariant for 5 shapes", "max_rows": 32768, "workspace_config": None}
    assert vec.install(vec.payload("cuda", None, None, linear, "16x256", True)) == {"device": "cuda"}
    # the engine's workspace setting after the adopted proof's (which keeps its own), as in the engine's process
    assert calls == [("adopt", "cuBLAS row-invariant for 5 shapes", 32768, None), ("keep", None),
                     ("shrink", 16, 256), ("sampler",)]
    calls.clear()
    vec.install(vec.payload("cuda", None, "vllm", None, "vllm", False))  # vLLM's defaults: nothing but "leave"
    assert calls == [("leave",)]
    calls.clear()
    vec.install(vec.payload("cpu", "consistency"))
    assert calls == [("cpu", True)]
    calls.clear()
    environ = {vec.PATCHES_ENV: json.dumps(vec.payload("cpu", "lora_kernels"))}
    assert vec.install_from_env(environ) == {"device": "cpu"} and calls == [("cpu", False)]

    monkeypatch.setattr(vllm_cuda_patches, "adopt", lambda r, m, w: (False, "compute capability 8.0: only Hopper"))
    with pytest.raises(RuntimeError, match="cuBLAS linear layers in vLLM's engine core: compute capability 8.0"):
        vec.install(vec.payload("cuda", None, None, linear))
    monkeypatch.setattr(vllm_lora_shrink, "install", lambda m, k: (False, "LoRA shrink tile 16x64 is already"))
    with pytest.raises(RuntimeError, match="LoRA shrink tile 32x128 in vLLM's engine core: LoRA shrink tile 16x64"):
        vec.install(vec.payload("cuda", None, None, None, "32x128"))
    monkeypatch.setattr(vllm_seeded_sampler, "install", lambda: (False, "no CUDA device"))
    with pytest.raises(RuntimeError, match="batched seeded sampler in vLLM's engine core: no CUDA device"):
        vec.install(vec.payload("cuda", None, None, None, "vllm", True))


def _fake_engine_start(monkeypatch, tmp_path, holds):
    """A CUDA VLLMEngine start with vLLM faked: returns what ``LLM()`` saw."""
    import policies.backbone as pb
    import policies.engines.vllm_engine as ve
    import vllm

    seen = {}

    class FakeLLM:
        def __init__(self, **kw):
            seen.update(kw=kw, env=os.environ.get(vec.PATCHES_ENV),
                        mp=os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"],
                        method=os.environ.get("VLLM_WORKER_MULTIPROC_METHOD"),
                        runner=os.environ.get("VLLM_USE_V2_MODEL_RUNNER"))
            v2 = seen.pop("starts_v2", seen["runner"] == "1")  # what vLLM started: the variable, unless a test says

            self.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(
                shutdown=lambda: seen.update(shutdowns=seen.get("shutdowns", 0) + 1)),
                vllm_config=SimpleNamespace(use_v2_model_runner=v2))

        def collective_rpc(self, method):
            seen.setdefault("rpc", []).append(method)
            return holds(method)

    monkeypatch.setattr(ve, "check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(pb, "resolve_backbone", lambda m: tmp_path)
    monkeypatch.setattr(pb, "load_tokenizer", lambda p: None)
    monkeypatch.setattr(ve, "_set_batch_invariant", lambda consistent: None)
    monkeypatch.setattr(ve, "cuda_llm_settings", lambda *a, **k: {})
    monkeypatch.setattr(ve, "_linear_kernel", lambda *a: ("vllm default", "not consistent"))
    monkeypatch.setattr(vllm, "LLM", FakeLLM)
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    return ve, seen


def test_engine_hands_its_patches_to_the_engine_core_and_checks_every_worker(monkeypatch, tmp_path):
    """``multiprocessing=True``: vLLM gets the extension's name and, only while ``LLM()`` starts,
    the payload of what this process installed; the engine starts the core with ``spawn``, asks
    every worker what it holds and refuses (RuntimeError) a worker that differs; the sampler's
    call count comes from the workers. Without it the engine core stays in this process and no
    extension is named."""
    want = vec.payload("cuda", None, "vllm", None, "vllm", False)
    ok = {"advsim_patches": [vec.expected(want)], "advsim_sampler_calls": [3, 4]}
    ve, seen = _fake_engine_start(monkeypatch, tmp_path, ok.__getitem__)
    monkeypatch.setattr(ve.VLLMEngine, "_patches", lambda self: want)
    e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, multiprocessing=True)
    assert seen["kw"]["worker_extension_cls"] == "policies.vllm_engine_core.WorkerExtension"
    assert (json.loads(seen["env"]), seen["mp"], seen["method"]) == (want, "1", "spawn")
    assert vec.PATCHES_ENV not in os.environ  # only the spawned process keeps it
    assert e.engine_core_patches == vec.expected(want) and e.sampler_calls() == 7
    e.close()
    e.close()
    assert seen["shutdowns"] == 1  # the engine core's process stops at close, once

    seen.clear()
    e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False)
    assert "worker_extension_cls" not in seen["kw"] and seen["env"] is None and seen["mp"] == "0"
    assert e.engine_core_patches is None and "rpc" not in seen
    e.close()
    assert "shutdowns" not in seen  # in-process: nothing to stop

    _, seen = _fake_engine_start(monkeypatch, tmp_path, lambda m: [{**vec.expected(want), "lora_shrink": "16x256"}])
    with pytest.raises(RuntimeError, match="vLLM's engine core holds other patches than this process: asked for "
                                           r"\{'cpu_patches': None, 'lora_shrink': 'vllm'"):
        ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, multiprocessing=True)
    assert seen["shutdowns"] == 1  # a refused engine core does not linger

    def failed_start(**kw):
        raise RuntimeError("Engine core initialization failed. See root cause above.")

    import vllm

    monkeypatch.setattr(vllm, "LLM", failed_start)
    with pytest.raises(RuntimeError, match=r"vLLM's engine core did not start \(Engine core initialization failed"
                                           r".*if one of our patches refused to install there"):
        ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, multiprocessing=True)
    assert vec.PATCHES_ENV not in os.environ


def test_in_batch_invariant_mode_this_process_still_gets_vllms_batch_invariant_ops(monkeypatch, tmp_path):
    """In-process, vLLM's worker calls ``init_batch_invariance`` in the engine's process (it
    replaces PyTorch's log-softmax, softmax, mean and bmm there: the learner computes with them).
    With the engine core elsewhere the engine calls it here after the start — on CUDA in
    batch-invariant mode only — through the wrapper that keeps the workspace variable."""
    import sys

    bi = SimpleNamespace(init_batch_invariance=None)  # vLLM 0.22's module; vllm-cpu 0.32 has none
    monkeypatch.setitem(sys.modules, "vllm.model_executor.layers.batch_invariant", bi)
    want = vec.payload("cuda", None, None, None, "vllm", False)
    ve, seen = _fake_engine_start(monkeypatch, tmp_path, lambda m: [vec.expected(want)])
    monkeypatch.setattr(ve.VLLMEngine, "_patches", lambda self: want)
    monkeypatch.setattr(ve, "_install_lora_shrink", lambda tile: "vllm")
    monkeypatch.setattr(ve, "_install_sampler", lambda asked: None)
    from policies import vllm_cuda_patches as vcp

    monkeypatch.setattr(vcp, "keep_workspace_config", lambda v, module=None: None)
    bi.init_batch_invariance = lambda: seen.update(here=seen.get("here", 0) + 1)
    ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=True, enable_lora=False, multiprocessing=True)
    assert seen["here"] == 1
    ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, multiprocessing=True)
    ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=True, enable_lora=False)  # in-process: vLLM's worker
    assert seen["here"] == 1


def test_the_payload_is_what_this_process_installed(monkeypatch, tmp_path):
    """``VLLMEngine._patches``: the process's installed patches (process-wide, as an in-process
    engine would run them) and the engine's workspace setting, in :func:`payload`'s terms."""
    from policies import vllm_cuda_patches

    ve, _ = _fake_engine_start(monkeypatch, tmp_path, lambda m: [])
    e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False)
    monkeypatch.setattr(vec, "installed", lambda device: {"cpu_patches": None, "lora_shrink": "16x256",
                                                          "batched_sampler": True, "cublas_linear": True})
    monkeypatch.setitem(vllm_cuda_patches._STATE, "reason", "cuBLAS row-invariant for 5 shapes")
    monkeypatch.setitem(vllm_cuda_patches._STATE, "proven_max_rows", 32768)
    monkeypatch.setitem(vllm_cuda_patches._STATE, "proven_workspace_config", None)
    e.cublas_workspace_config = "unset"
    assert e._patches() == vec.payload("cuda", None, None, {"reason": "cuBLAS row-invariant for 5 shapes",
                                                            "max_rows": 32768, "workspace_config": None},
                                       "16x256", True)
    e.cublas_workspace_config = "vllm"
    assert e._patches()["workspace_config"] == "vllm"


@pytest.mark.slow
def test_on_the_cpu_a_spawned_engine_core_holds_the_contract_and_rollout_equals_score(tmp_path):
    """vllm-cpu 0.32, SmolLM2-135M, three LoRA adapters and none in one batch of 16 mixed-length
    requests: the engine core runs in another process, holds the four CPU fixes, every sampled
    token's log-prob equals its re-score (diff = 0), and an in-process engine then samples the
    same tokens with the same log-probs, bit for bit (the same kernels either way)."""
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    from policies.adapters import ROLES
    from policies.engines import VLLMEngine
    from tests.test_policies_vllm import _diff, _requests, role_adapters

    _, tok, path = role_adapters(tmp_path)
    engine = VLLMEngine(path, max_model_len=1024, max_num_seqs=16, max_loras=4, threads=2, kv_cache_gib=1,
                        seed=0, multiprocessing=True)
    try:
        assert engine.engine_core_patches == {"cpu_patches": "consistency", "lora_shrink": "vllm",
                                              "batched_sampler": False, "cublas_linear": False}
        pids = engine.llm.collective_rpc("advsim_pid")
        assert pids and os.getpid() not in pids  # the model runs in another process
        threads = engine.llm.collective_rpc("advsim_threads")
        for r in ROLES:
            engine.add_adapter(f"{r}@0", tmp_path / f"{r}@0")
        gens = engine.generate(_requests(tok))
        assert sum(len(g.token_ids) for g in gens) >= 100
        rep = _diff(engine, gens)
        assert (rep.max, rep.mean, rep.std, rep.k3) == (0.0, 0.0, 0.0, 0.0) and rep.n_equal == rep.n_tokens
    finally:
        engine.close()
    inproc = VLLMEngine(path, max_model_len=1024, max_num_seqs=16, max_loras=4, threads=2, kv_cache_gib=1, seed=0)
    try:
        assert inproc.engine_core_patches is None
        for r in ROLES:
            inproc.add_adapter(f"{r}@0", tmp_path / f"{r}@0")
        again = inproc.generate(_requests(tok))
        assert [g.token_ids for g in again] == [g.token_ids for g in gens]
        worst = max(abs(a - b) for x, y in zip(again, gens) for a, b in zip(x.logprobs, y.logprobs))
        print(f"in-process vs engine core in its own process: threads {torch.get_num_threads()} vs {threads}, "
              f"max |log-prob difference| {worst:.3g}")
        assert [g.logprobs for g in again] == [g.logprobs for g in gens]  # exact float equality
    finally:
        inproc.close()


def test_engine_multiprocessing_in_the_config(monkeypatch, tmp_path):
    """``engine.multiprocessing``: false by default, handed to VLLMEngine by ``make_engine``, an
    error with kind 'torch' (no engine core); a run cannot resume with it changed (not yet shown to
    change no value on a GPU), and one saved before the field existed reads back false."""
    import yaml

    from advsim.config import ConfigError, EngineConfig, config_from_dict
    from advsim.run import RunDir, run_digest
    from policies.engines import base
    from tests.test_train import TINY
    from tests.test_vllm_cuda_patches import _capture_vllm_engine_kwargs

    assert EngineConfig().multiprocessing is False
    with pytest.raises(ConfigError, match="engine.multiprocessing is for kind 'vllm' .vLLM's engine core.; this "
                                          "engine is kind 'torch'"):
        config_from_dict({**TINY, "engine": {**TINY["engine"], "multiprocessing": True}})  # TINY runs kind 'torch'
    vllm = {"kind": "vllm", "consistency": "strict"}
    on = config_from_dict({**TINY, "engine": {**vllm, "multiprocessing": True}})
    got = _capture_vllm_engine_kwargs(monkeypatch)
    base.make_engine(on.engine, backbone="x")
    assert got["multiprocessing"] is True
    off = config_from_dict({**TINY, "engine": vllm})
    base.make_engine(off.engine, backbone="x")
    assert got["multiprocessing"] is False
    run = RunDir(tmp_path / "run")
    run.path.mkdir(exist_ok=True)
    (run.path / "config.yaml").write_text(yaml.safe_dump(off.to_dict()))
    assert run.config_changes(on) == ["engine.multiprocessing: False -> True"]  # unmeasured on a GPU: not resumable
    assert run_digest(on) != run_digest(off)
    # a run saved before the field existed ran false: its digest and saved config are what they were
    legacy = off.to_dict()
    del legacy["engine"]["multiprocessing"]
    (run.path / "config.yaml").write_text(yaml.safe_dump(legacy))
    assert run.saved_config().engine.multiprocessing is False and run.config_changes(off) == []
    assert "engine.multiprocessing" in run.fields_added_since()


def test_vllm_model_runner_v2_in_the_engine_the_config_and_the_bench(monkeypatch, tmp_path):
    """``engine.model_runner``: vLLM's v1 runner by default everywhere; 'v2' (vLLM's GPU runner,
    VLLM_USE_V2_MODEL_RUNNER) only for vLLM on CUDA, where it takes the batched sampler off unless
    set — and refuses it set true (that sampler patches the v1 runner's, which v2 never calls).
    ``make_engine`` hands it to VLLMEngine, which refuses 'v2' on the CPU before anything starts; a
    run cannot resume with it changed (other tokens for the same seeds), and one saved before the
    field existed ran 'v1'. The bench takes it as an override with the same checks."""
    import yaml

    from advsim import config as config_mod
    from advsim.bench import cuda
    from advsim.config import ConfigError, EngineConfig, config_from_dict
    from advsim.run import RunDir, run_digest
    from policies.engines import base
    from policies.engines.vllm_engine import VLLMEngine, _speed_options, check_model_runner
    from tests.test_train import TINY
    from tests.test_vllm_cuda_patches import _capture_vllm_engine_kwargs

    assert EngineConfig().model_runner == "v1" and EngineConfig(kind="vllm").model_runner == "v1"
    with pytest.raises(ConfigError, match=r"engine.model_runner 'v2' is for vLLM on CUDA .*kind 'vllm' on 'cpu'"):
        config_from_dict({**TINY, "engine": {"kind": "vllm", "model_runner": "v2"}})
    with pytest.raises(ConfigError, match=r"engine.model_runner: 'v2 ' is not 'v1' or 'v2' \(vLLM's model runners\)"):
        config_from_dict({**TINY, "engine": {"kind": "vllm", "model_runner": "v2 "}})  # the value shown, space and all
    with pytest.raises(ValueError, match=r"model_runner 'v2' is vLLM's GPU model runner .*the device is 'cpu'"):
        VLLMEngine("x", model_runner="v2")  # refused before any model is looked up
    with pytest.raises(ValueError, match=r"model_runner must be one of v1, v2; got 'V2'"):
        check_model_runner("V2", "cuda", None)
    assert _speed_options("cuda", True, None, None, "v2") == (False, False)
    assert _speed_options("cuda", True, None, None, "v1") == (True, False)

    monkeypatch.setattr("policies.engines.check_engine_settings", lambda *a, **k: None)
    monkeypatch.setattr(config_mod, "_memory_gib", lambda device="cpu": 141)
    cuda_v2 = EngineConfig(kind="vllm", device="cuda", dtype="bfloat16", model_runner="v2")
    assert cuda_v2.batched_sampler is False and cuda_v2.detokenize is False
    assert EngineConfig(kind="vllm", device="cuda", dtype="bfloat16").batched_sampler is True
    with pytest.raises(ValueError, match=r"engine.batched_sampler replaces the v1 model runner's sampler, which "
                                         r"engine.model_runner 'v2' does not use"):
        EngineConfig(kind="vllm", device="cuda", dtype="bfloat16", model_runner="v2", batched_sampler=True)
    got = _capture_vllm_engine_kwargs(monkeypatch)
    base.make_engine(cuda_v2, backbone="x")
    assert got["model_runner"] == "v2" and got["batched_sampler"] is False

    on_cuda = {"kind": "vllm", "device": "cuda", "dtype": "bfloat16", "consistency": "strict"}
    v1 = config_from_dict({**TINY, "engine": on_cuda})
    v2 = config_from_dict({**TINY, "engine": {**on_cuda, "model_runner": "v2"}})
    run = RunDir(tmp_path / "run")
    run.path.mkdir(exist_ok=True)
    (run.path / "config.yaml").write_text(yaml.safe_dump(v1.to_dict()))
    assert run.config_changes(v2) == ["engine.batched_sampler: True -> False", "engine.model_runner: 'v1' -> 'v2'"]
    assert run_digest(v1) != run_digest(v2)
    legacy = v1.to_dict()
    del legacy["engine"]["model_runner"]  # saved before the field existed: it ran vLLM's v1 runner
    (run.path / "config.yaml").write_text(yaml.safe_dump(legacy))
    assert run.saved_config().engine.model_runner == "v1" and run.config_changes(v1) == []
    assert run_digest(v1) == run_digest(run.saved_config())

    assert cuda.engine_settings("contract+model_runner=v2") == {"consistent": True, "cuda_graphs": True,
                                                               "model_runner": "v2"}
    assert cuda.is_contract("contract+model_runner=v2")
    with pytest.raises(ValueError, match=r"'contract\+model_runner=v3': model_runner must be one of v1, v2"):
        cuda.engine_settings("contract+model_runner=v3")
    with pytest.raises(ValueError, match=r"batched_sampler replaces the v1 model runner's sampler"):
        cuda.engine_settings("contract+model_runner=v2+batched_sampler=true")
    assert cuda.engine_settings("contract+model_runner=v2+batched_sampler=false")["batched_sampler"] is False
    # an earlier label that sets the batched sampler itself: the message says so, and the way out
    with pytest.raises(ValueError, match=r"contract-sampler sets batched_sampler=true, which model_runner 'v2' does "
                                         r"not use: add \+batched_sampler=false"):
        cuda.engine_settings("contract-sampler+model_runner=v2")
    assert cuda.engine_settings("contract-sampler+model_runner=v2+batched_sampler=false")["model_runner"] == "v2"


def test_the_learners_engine_record_names_the_v2_runner_and_the_engine_core_process():
    """Each update's engine record (events.jsonl, the report's rollout line) says when rollouts came
    from vLLM's v2 model runner or an engine core in its own process; a v1 in-process engine's
    record has neither key (as every record before them)."""
    from types import SimpleNamespace as NS

    from advsim.learner import Learner

    cfg = NS(engine=NS(kind="vllm", device="cuda", dtype="bfloat16"))
    eng = NS(linear_kernel="cublas", linear_kernel_reason="proof", lora_shrink="16x256", max_num_batched_tokens=32768,
             multiprocessing=False, model_runner="v1")
    base = {"kind": "vllm", "device": "cuda", "dtype": "bfloat16", "class": "SimpleNamespace", "linear_kernel": "cublas",
            "linear_kernel_reason": "proof", "lora_shrink": "16x256", "max_num_batched_tokens": 32768}
    assert Learner.engine_record(NS(_engine=eng, cfg=cfg)) == base
    eng.model_runner, eng.multiprocessing = "v2", True
    assert Learner.engine_record(NS(_engine=eng, cfg=cfg)) == {**base, "engine_core": "own process", "model_runner": "v2"}
    assert Learner.engine_record(NS(_engine=None, cfg=cfg)) is None


def test_each_engine_makes_vllm_read_the_variables_it_set(monkeypatch):
    """vLLM freezes its environment variables when its first engine of a process has started
    (``enable_envs_cache``); a later VLLMEngine drops that cache before it starts vLLM, so vLLM
    reads what that engine wrote (its model runner, engine-core process, CPU KV cache), not the
    first engine's values."""
    from vllm import envs

    from policies.engines.vllm_engine import _fresh_vllm_envs

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    envs.enable_envs_cache()
    try:
        monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "5")
        assert envs.VLLM_CPU_KVCACHE_SPACE == 3  # frozen: what an engine started after the first one read
        _fresh_vllm_envs()
        assert envs.VLLM_CPU_KVCACHE_SPACE == 5
    finally:
        envs.disable_envs_cache()


def test_the_engine_starts_the_model_runner_it_was_asked_for(monkeypatch, tmp_path):
    """On CUDA the engine writes VLLM_USE_V2_MODEL_RUNNER either way (1 for 'v2', 0 for 'v1'),
    names v2's own sampler, leaves an earlier engine's batched sampler out of a v2 engine's
    engine-core payload, and refuses to run when vLLM started another runner than asked."""
    from policies import vllm_engine_core

    ve, seen = _fake_engine_start(monkeypatch, tmp_path, lambda m: None)
    e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, model_runner="v2")
    assert (seen["runner"], e.model_runner) == ("1", "v2") and e.sampler.startswith("vllm v2 runner (one Gumbel launch")
    have = {"cpu_patches": None, "lora_shrink": "vllm", "batched_sampler": True, "cublas_linear": False}
    monkeypatch.setattr(vllm_engine_core, "installed", lambda device: have)
    assert e._patches()["batched_sampler"] is False
    e = ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False)
    assert (seen["runner"], e.model_runner) == ("0", "v1") and e._patches()["batched_sampler"] is True
    seen["starts_v2"] = False  # e.g. vLLM read a frozen environment
    with pytest.raises(RuntimeError, match=r"asked vLLM for model runner 'v2' but it started v1; "
                                           r"VLLM_USE_V2_MODEL_RUNNER is '1' here"):
        ve.VLLMEngine(device="cuda", dtype="bfloat16", consistent=False, enable_lora=False, model_runner="v2")
