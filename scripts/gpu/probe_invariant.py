"""Which part of vLLM 0.22's batch-invariant mode fails on this GPU? Each case runs in its own process:
    source scripts/gpu/setup.sh install; VLLM_USE_FLASHINFER_SAMPLER=0 python scripts/gpu/probe_invariant.py [FIRST_N]
Run on the H200 on 2026-12-02 (results/h200-vllm-2026-12-02/README.md): every case down to "bi, no lora,
eager" passed; VLLMEngine's own path (advsim.bench.cuda) hit an illegal memory access. The cases
marked "next" bisect the remaining differences (many requests with per-request seeds and mixed
lengths in one step, chunked prefill off) and were not run yet."""
import json
import os
import subprocess
import sys
import tempfile

FULL = dict(max_model_len=4096, max_num_seqs=256, kv_cache_memory_bytes=24 << 30, max_num_batched_tokens=8192,
            enable_chunked_prefill=False)
CASES = {
    "next: bi, engine settings, 16 mixed prompts, per-request seeds": dict(
        env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True, kw=dict(FULL, max_loras=4), mixed=16, seeds=True),
    "next: bi, engine settings, 16 mixed prompts, one seed": dict(
        env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True, kw=dict(FULL, max_loras=4), mixed=16),
    "next: bi, engine settings + chunked prefill, 16 mixed prompts, per-request seeds": dict(
        env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True, kw=dict(FULL, max_loras=4, enable_chunked_prefill=True),
        mixed=16, seeds=True),
    "bi, engine settings, max_loras 4, 256 seqs": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True,
                                                       kw=dict(FULL, max_loras=4)),
    "bi, engine settings, max_loras 4, 64 seqs": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True,
                                                      kw=dict(FULL, max_loras=4, max_num_seqs=64)),
    "bi, lora request, top_p 0.95": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True, top_p=0.95),
    "bi, lora request, 64 x 512 tokens": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True, n=64),
    "bi, lora request, prompt_logprobs": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True,
                                              prompt_logprobs=0),
    "bi, no lora, eager": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=False),
    "bi, lora slots, no adapter request, eager": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=False),
    "bi, lora request, eager": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True),
    "bi, lora request, eager, TRITON_ATTN": dict(env={"VLLM_BATCH_INVARIANT": "1"}, lora=True, use=True,
                                                  backend="TRITON_ATTN"),
}


def one(name):
    case = CASES[name]
    os.environ.update(case["env"])
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from policies.adapters import attach_role_adapters, lora_config, randomize_adapter, save_adapter
    from policies.backbone import load_backbone
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest

    model, tok, path = load_backbone()
    kw = dict(model=str(path), dtype="bfloat16", enforce_eager=True, max_model_len=1024, max_num_seqs=64,
              kv_cache_memory_bytes=4 << 30, seed=0)
    if case.get("backend"):
        kw["attention_config"] = {"backend": case["backend"]}
    lr = None
    if case["lora"]:
        kw.update(enable_lora=True, max_lora_rank=16, max_loras=2, max_cpu_loras=8)
        pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
        randomize_adapter(pm, "executor", seed=1, scale=0.05)
        d = tempfile.mkdtemp()
        lr = LoRARequest("ex", 1, str(save_adapter(pm, "executor@0", d))) if case.get("use") else None
    kw.update(case.get("kw", {}))
    llm = LLM(**kw)
    lengths = (512,) * case["n"] if case.get("n") else (5, 40, 300, 12)
    if case.get("mixed"):
        lengths = tuple((5, 650, 40, 300, 12, 520, 90, 260)[i % 8] + i for i in range(case["mixed"]))
    prompts = [TokensPrompt(prompt_token_ids=[300 + (i * 7 + j) % 40000 for j in range(n)])
               for i, n in enumerate(lengths)]
    sp = [SamplingParams(max_tokens=8, seed=1000 + i if case.get("seeds") else 0, logprobs=0,
                         top_p=case.get("top_p", 1.0), prompt_logprobs=case.get("prompt_logprobs"))
          for i in range(len(prompts))]
    outs = llm.generate(prompts, sp, lora_request=lr, use_tqdm=False)
    return [o.outputs[0].token_ids[:4] for o in outs]


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in CASES:
        print(json.dumps({"ok": [list(x) for x in one(sys.argv[1])]}))
        sys.exit(0)
    for name in list(CASES)[:int(sys.argv[1]) if len(sys.argv) > 1 else len(CASES)]:
        try:
            p = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True, timeout=110)
            lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
            err = [x for x in p.stderr.splitlines() if "Error" in x or "error" in x][-3:]
            print(name, "->", lines[-1] if lines else f"FAILED rc={p.returncode} {err}", flush=True)
        except subprocess.TimeoutExpired:
            print(name, "-> timeout", flush=True)
