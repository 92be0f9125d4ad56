"""``advsim bench consistency`` and ``advsim bench throughput`` (issue 11, item 12).

* consistency: a row of 64 mixed-length, mixed-adapter requests co-resident in one engine step
  (``max_num_seqs`` = 64), rollout vs. score diff = 0 exactly (slow: vLLM + SmolLM2);
* throughput: a "LoRA kernels only, no consistency patches" row, so VLLMEngine's ratio over it
  isolates the contract's cost (vLLM-CPU as shipped also lacks the LoRA-kernel rewrite);
  ``policies.vllm_cpu_patches.install(consistency=False)`` installs that rewrite alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


# --------------------------------------------------------------------------- throughput
def test_throughput_ratio_is_over_the_lora_kernels_only_row(monkeypatch):
    from advsim.bench import throughput

    assert throughput.ENGINES[throughput.NO_CONTRACT] == ("vllm", False, True)
    assert throughput.ENGINES[throughput.SHIPPED] == ("vllm", False, False)
    assert throughput.ENGINES["VLLMEngine"] == ("vllm", True, True)
    assert throughput.NO_CONTRACT == "LoRA kernels only, no consistency patches"
    rates = {("vllm", "1", "1"): 11.4, ("vllm", "0", "1"): 10.1, ("vllm", "0", "0"): 5.0,
             ("torch", "1", "1"): 8.0}
    seen = []

    def fake_run(cmd, **kw):
        engine, cons, lk = cmd[3], cmd[4], cmd[9]
        seen.append((engine, cons, lk))
        r = {"tokens_per_s": rates[(engine, cons, lk)], "prompt_tokens": [500, 600],
             "runs": [{"seconds": 1.0, "tokens": 10}]}
        if engine == "vllm":
            r["patches"] = {"contract": cons == "1", "lora_kernels": lk == "1"}
        return subprocess.CompletedProcess(cmd, 0, stdout="log line\n" + json.dumps(r) + "\n", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    out = throughput.run(n_prompts=2, max_new_tokens=4, repeats=1, threads=1)
    assert sorted(seen) == sorted(rates)
    assert set(out["engines"]) == set(throughput.ENGINES)
    assert out["ratio_contract_over_no_contract"] == pytest.approx(11.4 / 10.1)
    assert out["ratio_contract_over_shipped"] == pytest.approx(11.4 / 5.0)
    assert out["ratio_vllm_over_torch"] == pytest.approx(11.4 / 8.0)

    # a row whose process did not run with the patches it names is an error, not a number
    def wrong_patches(cmd, **kw):
        p = fake_run(cmd, **kw)
        r = json.loads(p.stdout.splitlines()[-1])
        if "patches" in r:
            r["patches"] = {"contract": True, "lora_kernels": True}
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(r), stderr="")

    monkeypatch.setattr(subprocess, "run", wrong_patches)
    with pytest.raises(RuntimeError, match="LoRA kernels only, no consistency patches: ran with patches"):
        throughput.run(n_prompts=2, max_new_tokens=4, repeats=1, threads=1)


_PATCH_PROBE = r"""
import json, os
os.environ.pop("VLLM_CPU_ATTN_SPLIT_KV", None)
from policies import vllm_cpu_patches as p
import vllm.lora.ops.torch_ops.lora_ops as lops
import vllm.lora.punica_wrapper.punica_cpu as pcpu
import vllm.model_executor.layers.utils as vutils
from vllm.v1.attention.backends import cpu_attn as ca

def state():
    return {"lora": hasattr(lops.bgmv_shrink, "_advsim_original") and hasattr(pcpu.bgmv_expand, "_advsim_original"),
            "gemm": hasattr(vutils.dispatch_cpu_unquantized_gemm, "_advsim_original"),
            "attention": hasattr(ca.CPUAttentionMetadataBuilder.build, "_advsim_original"),
            "split_kv_off": os.environ.get("VLLM_CPU_ATTN_SPLIT_KV") == "0",
            "installed": p.installed(), "lora_ops_installed": p.lora_ops_installed()}

out = {"before": state(), "first": p.install(consistency=False), "lora_only": state(),
       "again": p.install(consistency=False), "full": p.install(), "after": state(), "last": p.install()}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_install_lora_kernels_without_the_consistency_patches():
    pytest.importorskip("vllm")
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run([sys.executable, "-c", _PATCH_PROBE], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    none = {"lora": False, "gemm": False, "attention": False, "split_kv_off": False, "installed": False,
            "lora_ops_installed": False}
    assert out["before"] == none
    assert out["lora_only"] == {**none, "lora": True, "lora_ops_installed": True}
    assert (out["first"], out["again"], out["full"], out["last"]) == (True, False, True, False)
    assert out["after"] == {k: True for k in none}


# --------------------------------------------------------------------------- consistency
def test_coresident_row_needs_64_seqs_per_step():
    from advsim.bench import consistency

    assert consistency.CORESIDENT == 64 == len(consistency.LENGTHS_64)
    assert len(set(consistency.LENGTHS_64)) == 64  # mixed lengths, no two alike
    assert min(consistency.LENGTHS_64) <= 10 and max(consistency.LENGTHS_64) >= 650

    class Small:
        max_num_seqs = 16

    with pytest.raises(ValueError, match="max_num_seqs ≥ 64"):
        consistency.coresident_row(Small(), None)


@pytest.mark.slow
def test_64_coresident_mixed_adapter_requests_are_bit_consistent(tmp_path):
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    from advsim.bench import consistency
    from policies.adapters import ROLES, attach_role_adapters, lora_config, randomize_adapter, save_adapter
    from policies.backbone import load_backbone
    from policies.engines import VLLMEngine

    torch.manual_seed(0)
    model, tok, path = load_backbone()
    pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
    for i, r in enumerate(ROLES):
        randomize_adapter(pm, r, seed=10 + i, scale=0.05)
        save_adapter(pm, f"{r}@0", tmp_path)
    engine = VLLMEngine(path, max_model_len=1024, max_num_seqs=64, max_loras=4,
                        threads=int(os.environ.get("OMP_NUM_THREADS") or 2), kv_cache_gib=2, seed=0)
    for r in ROLES:
        engine.add_adapter(f"{r}@0", tmp_path / f"{r}@0")
    randomize_adapter(pm, "executor", seed=77, scale=0.05)
    engine.add_adapter("executor@1", save_adapter(pm, "executor@1", tmp_path))

    row = consistency.coresident_row(engine, tok)
    assert row["max_requests_per_step"] == 64  # all 64 shared at least one engine step
    assert row["adapters"] == sorted(["None", "executor@0", "executor@1", "curriculum@0", "adversary@0"])
    assert row["n_tokens"] >= 64 * 4
    assert (row["max"], row["mean"], row["std"], row["k3"]) == (0.0, 0.0, 0.0, 0.0)
    assert row["n_equal"] == row["n_tokens"]
    # the step counter counts requests per step: one request alone is a step of one
    reqs = consistency._requests(tok, seed=3, lengths=(40,))
    assert consistency.generate_counted(engine, reqs)[1] == 1


def test_rollout_workload_counts_what_the_episodes_generated():
    """The rollout-shaped throughput row runs whole web-world episodes, each task played ``group``
    times in a row as stage 1 plays its pool, and its counts are those of the same episodes run
    directly: generated and prompt tokens, turns, generate calls (one per turn of the live episodes),
    success; rates are counts over wall seconds. The default seed works (Gymnasium refuses negative
    seeds: the warm-up uses seed + repeats)."""
    import torch

    from advsim.bench.throughput import rollout_digest, rollout_workload
    from advsim.rollout import EpisodeSpec, run_episodes
    from advsim.suites import WebFormsSuite
    from policies.adapters import attach_role_adapters, lora_config, randomize_adapter
    from policies.backbone import tiny_backbone
    from policies.engines import TorchEngine
    from tests.test_train import tiny_io

    torch.manual_seed(0)
    model, tok = tiny_backbone(seed=0)
    pm = attach_role_adapters(model, config=lora_config(r=4, alpha=8))
    randomize_adapter(pm, "executor", seed=3, scale=0.05)
    engine, io, suite = TorchEngine(pm, tok, batch_size=8), tiny_io(tok), WebFormsSuite()
    limits = dict(max_steps=3, max_new_tokens=6)
    res = rollout_workload(engine, tok, "executor@0", episodes=6, group=2, repeats=2, warmup_episodes=2, io=io,
                           suite=suite, **limits)
    assert res["episodes"] == 6 and res["group"] == 2 and res["level_weights"] == {"0": 6, "1": 3, "2": 2, "3": 1}
    assert len(res["runs"]) == 2
    for k, run in enumerate(res["runs"]):  # the same tasks (3, each twice in a row) and seeds, run directly
        calls: list[int] = []
        specs = [EpisodeSpec(t) for t in suite.training_tasks(3, k) for _ in range(2)]
        eps = run_episodes(engine, suite.executor_prompt(io), specs, "executor@0", seed=k, suite=suite,
                           progress=calls.append, temperature=1.0, top_p=1.0, **limits)
        turns = [t for e in eps for t in e.turns]
        assert run["turns"] == len(turns) == sum(calls) and 6 <= run["turns"] <= 18
        assert run["generated_tokens"] == sum(len(t.token_ids) for t in turns) > 0
        assert run["prompt_tokens"] == sum(len(t.prompt_ids) for t in turns)
        assert run["generate_calls"] == len(calls) and run["max_batch"] == max(calls) == 6  # every episode's first turn
        assert run["success"] == sum(e.success for e in eps) / 6
        assert eps[0].turns[0].prompt_ids == eps[1].turns[0].prompt_ids  # a task's G rollouts share the first prompt
        assert 0 < run["generate_seconds"] <= run["seconds"]  # the engine's share of the wall time
        assert run["digest"] == rollout_digest(eps)  # the same rollouts, bit for bit, run again directly
    assert res["runs"][0]["digest"] != res["runs"][1]["digest"]  # other tasks and seeds
    rates = [r["generated_tokens"] / r["seconds"] for r in res["runs"]]
    assert res["tokens_per_s"] == pytest.approx((rates[0] + rates[1]) / 2)  # the median of two
    assert res["turns_per_episode"] == sum(r["turns"] for r in res["runs"]) / 12
    assert res["generate_share"] == pytest.approx(sum(r["generate_seconds"] for r in res["runs"])
                                                  / sum(r["seconds"] for r in res["runs"]))
    for bad in (dict(episodes=0), dict(episodes=5, group=2), dict(seed=-1), dict(repeats=0)):
        with pytest.raises(ValueError, match="need episodes, group, repeats"):
            rollout_workload(engine, tok, "executor@0", io=io, suite=suite, **bad)


def test_rollout_digest_changes_with_any_token_log_prob_bit_or_verdict():
    """The rollout fingerprint: equal for the same rollouts (rebuilt from scratch), different when
    one log-prob moves by one ulp, a token moves from the prompt to the completion, the order of
    episodes changes or a verdict flips."""
    import math
    from types import SimpleNamespace as NS

    from advsim.bench.throughput import rollout_digest

    def eps(lp=-0.5, prompt=(1, 2), tokens=(3, 4), success=True):
        t1 = NS(prompt_ids=list(prompt), token_ids=list(tokens), logprobs=[lp, -1.25])
        t2 = NS(prompt_ids=[1, 2, 3, 4, 9], token_ids=[7], logprobs=[-2.0])
        return [NS(turns=[t1, t2], success=success), NS(turns=[], success=False)]

    base = rollout_digest(eps())
    assert len(base) == 64 and base == rollout_digest(eps())
    assert rollout_digest(eps(lp=math.nextafter(-0.5, 0.0))) != base
    assert rollout_digest(eps(prompt=(1, 2, 3), tokens=(4,))) != base
    assert rollout_digest(eps(success=False)) != base
    assert rollout_digest(list(reversed(eps()))) != base
