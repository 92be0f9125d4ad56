"""Is the learner's LoRA training step run-to-run deterministic on this GPU? (issue 15)

Three warm starts of configs/h200-frontier.yaml with one seed gave level-0 pool success 82, 87 and
91 % on the H200, so the GPU warm start is not reproducible. This script isolates the cause without
advsim (only torch, transformers and peft, as installed on the GPU image): SmolLM2-135M's shapes
with random weights in float32 (as the learner holds them beside a vLLM engine), LoRA r = 8 on the
last 6 layers, right-padded batches with an attention mask, AdamW; every setting runs the same
steps twice from the same initial state and compares the LoRA weights bit for bit.

    python3 scripts/gpu/sft_determinism.py OUT.json
Settings: sdpa (transformers' default attention), sdpa under torch.use_deterministic_algorithms
with warn_only=True and with warn_only=False, eager attention. Prints max |Δ| of the LoRA weights between the two runs of each setting.
"""
import json
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # needed by use_deterministic_algorithms on CUDA
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

CFG = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
           num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
           tie_word_embeddings=True, rms_norm_eps=1e-5)


def run(attn: str, deterministic: bool, warn_only: bool = False, steps: int = 8, B: int = 8, T: int = 512) -> torch.Tensor:
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CFG, attn_implementation=attn)).to(torch.float32).cuda()
    lcfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                          "up_proj", "down_proj"], layers_to_transform=list(range(24, 30)))
    torch.manual_seed(1)
    model = get_peft_model(model, lcfg)
    for n, p in model.named_parameters():  # LoRA B non-zero so every path carries gradient from step 1
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.02)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    g = torch.Generator().manual_seed(2)
    for _ in range(steps):
        ids = torch.randint(0, CFG["vocab_size"], (B, T), generator=g).cuda()
        lens = torch.randint(T // 2, T + 1, (B,), generator=g)
        att = (torch.arange(T)[None, :] < lens[:, None]).long().cuda()
        labels = ids.masked_fill(att == 0, -100)
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return torch.cat([p.detach().flatten() for n, p in model.named_parameters() if "lora_" in n]).cpu()


def main(out: str) -> None:
    rows = []
    for attn, det, warn in [("sdpa", False, False), ("sdpa", True, True), ("sdpa", True, False), ("eager", False, False)]:
        t0 = time.perf_counter()
        try:
            a, b = run(attn, det, warn), run(attn, det, warn)
            d = (a - b).abs()
            row = {"attention": attn, "deterministic_algorithms": det, "warn_only": warn, "max_abs_diff": d.max().item(),
                   "differing": int((d != 0).sum()), "params": a.numel(), "bit_identical": bool(torch.equal(a, b))}
        except Exception as exc:  # e.g. an op without a deterministic implementation
            row = {"attention": attn, "deterministic_algorithms": det, "error": f"{type(exc).__name__}: {exc}"[:400]}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    torch.use_deterministic_algorithms(False)
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sft-determinism.json")
