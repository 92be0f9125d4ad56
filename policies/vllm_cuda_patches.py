"""Batch-invariance patch for vLLM 0.22.0 on CUDA, applied in-process before ``LLM()``.

vLLM's batch-invariant mode (``VLLM_BATCH_INVARIANT=1``) makes its GEMMs, attention and
reductions independent of the batch, but one LoRA choice still depends on it in 0.22.0:
``vllm.lora.ops.triton_ops.utils.get_lora_op_configs("shrink", batch=M, …)`` forces
``split_k = 1`` in that mode and yet picks the K tile from the step's token count —
``block_k = 256`` when ``M < 128`` and ``32`` otherwise. A token's LoRA-A product (hidden 576 →
rank 8) is then accumulated in 256-wide or 32-wide K steps depending on how many *other* tokens
share its engine step (a lone decode step vs a 256-sequence step or a long prefill).
Whether Triton's accumulation order actually differs between the two tilings is measured by
``advsim bench consistency --device cuda`` (configurations ``contract`` and
``contract-unpatched``; results/ says what was found).

:func:`install` wraps the function where the shrink op looks it up and fixes ``block_k`` at 32
(the value vLLM itself uses from 128 tokens up) for every ``M``; the expand op's config is
already batch-independent (``block_k = 32``; its K is the rank). Only numerics change, never
what is computed. The patch is keyed to the version it was written against: on any other vLLM
it is not installed and :func:`install` returns False with a warning.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

PROVEN_ON = "0.22.0"
"""The vLLM release this patch was written against (its source was read, not assumed)."""
SHRINK_BLOCK_K = 32
"""The LoRA shrink kernel's fixed K tile (vLLM 0.22.0's own value for ``M >= 128``)."""

_STATE = {"installed": False}


def fixed_shrink_config(inner):
    """Wrap ``get_lora_op_configs`` so the ``"shrink"`` config has ``block_k = SHRINK_BLOCK_K`` and
    ``split_k = 1`` for every batch size; other ops pass through. Returns a fresh dict (the wrapped
    function is ``lru_cache``-d, its dicts are shared)."""

    def get_lora_op_configs(op_type, *args, **kwargs):
        cfg = inner(op_type, *args, **kwargs)
        if op_type == "shrink":
            cfg = {**cfg, "block_k": SHRINK_BLOCK_K, "split_k": 1}
        return cfg

    get_lora_op_configs.__wrapped__ = inner
    return get_lora_op_configs


def install() -> bool:
    """Install the fixed shrink tile into ``vllm.lora.ops.triton_ops.lora_shrink_op``; idempotent.

    Returns:
        True when installed (now or before); False when the installed vLLM is not
        :data:`PROVEN_ON` (nothing is changed).
    """
    if _STATE["installed"]:
        return True
    import vllm

    if vllm.__version__ != PROVEN_ON:
        log.warning("vllm_cuda_patches: written for vLLM %s, found %s: not installed",
                    PROVEN_ON, vllm.__version__)
        return False
    from vllm.lora.ops.triton_ops import lora_shrink_op

    lora_shrink_op.get_lora_op_configs = fixed_shrink_config(lora_shrink_op.get_lora_op_configs)
    _STATE["installed"] = True
    return True


def installed() -> bool:
    """Whether :func:`install` has patched this process."""
    return _STATE["installed"]
