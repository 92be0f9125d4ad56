"""``advsim bench consistency|throughput --device cuda``: the bit-consistency contract and its cost
on an NVIDIA GPU (issue 15; *Bit-consistent RL*, ``../shared/sources/bit-consistent-rl.md``).

Every configuration runs in its own process (vLLM's batch-invariant mode is read at import and
is process-wide), on the embedded backbone (SmolLM2-135M-Instruct) in bfloat16 — or any backbone
:func:`policies.backbone.resolve_backbone` accepts, e.g. ``random:smollm2-1.7b`` (SmolLM2-1.7B's
shapes, random weights: where weights rather than per-step overhead bound a decode step) — with
three seeded random LoRA role adapters (r = 8, A, B ~ N(0, 0.05²)) and, later, a new executor version:

* :data:`CONFIGS` ``contract`` — :class:`policies.engines.VLLMEngine` with ``consistent=True``
  (``VLLM_BATCH_INVARIANT=1``, Triton attention, CUDA graphs and ``torch.compile``, the linear
  layers and LM head on cuBLAS without split-K once proven row-invariant,
  :mod:`policies.vllm_cuda_patches`, the batched seeded sampler, :mod:`policies.vllm_seeded_sampler`,
  no per-step detokenization, ``CUBLAS_WORKSPACE_CONFIG`` unset and 32,768 batched tokens per
  step: the engine's defaults, what training runs); ``contract-eager`` (the same, eager),
  ``contract-fa3`` (the same with FlashAttention 3) and ``contract-triton`` (the same with vLLM's
  batch-invariant Triton matmul for the linear layers): one choice of the contract changed each;
  ``default`` — vLLM as a user runs it (CUDA graphs, default attention backend, batch-invariant
  mode off): the **negative control**, which must differ. All keep vLLM's prefix caching on (the
  engine's default). Any of them takes engine overrides, ``contract+max_num_batched_tokens=8192``
  (:func:`engine_settings`, keys :data:`OVERRIDES`): one setting changed, in the same run; the
  labels of earlier measurements (``contract-full``, ``contract-mnbt8k``, ``default-mnbt32k``, …)
  are such overrides with names (:data:`EARLIER_LABELS`).
* Consistency rows (each: compared tokens, bit-equal tokens, max/mean/std |Δℓ|, k3 KL, the
  most requests vLLM put in one forward step):
  ``rollout vs score, N co-resident`` for N = 1, 16, 64, 256 mixed-length (5–700 token) prompts
  over no adapter and the three role adapters, 16 sampled tokens each;
  ``prefill vs decode, L = …`` — prompts of L = 1, 63, 64, 65, 1000, 2047 tokens, 4 tokens
  decoded, re-scored by one prefill;
  ``needle: alone vs among 128`` — one request alone vs the same request at a random position
  among 128 mixed-length, mixed-adapter requests (vLLM's own batch-invariance test);
  ``new adapter version`` — after ``executor@1`` (new weights) is registered, a mixed batch over
  both versions; ``recheck executor@0`` — the first batch's executor@0 requests again, after the
  switch: same tokens and log-probs as before.
  ``graphs vs eager`` (computed by :func:`run`): the same requests' log-probs from ``contract``
  and ``contract-eager``.
* Throughput rows: generated tokens/s for B = 64 and 256 prompts of 512 random tokens, 128 new
  tokens each (``ignore_eos``), the executor adapter on every request, median of 2 timed calls
  after a warm-up; and transformers ``generate`` with a static KV cache and ``torch.compile``
  (peft, the same adapter active). Diagnostics, only when named: ``default-base`` and
  ``transformers-base``, the same without any adapter. Each vLLM row also times the prefill
  alone (the same requests with one new token). Against the **roofline** (:func:`roofline`): the
  most tokens/s the card allows this row whatever the schedule — every FLOP of the prefill and the
  127 decoding steps at the card's bf16 matrix rate, or the weights read once per step (at least
  128 steps: each sequence's tokens follow one another) and every KV cache at its bandwidth,
  whichever takes longer, both ceilings measured first in the same call
  (:func:`measure_ceilings`; an H100 80 GB copies ~3.0 TB/s, an H200 ~4.3, both multiply bf16 at
  ~790 TFLOP/s) — and, when a ``transformers`` row ran, what 3× its rate (the issue's target) is as
  a share of that bound. The JSON keeps the decode-only bandwidth floor too
  (:func:`bandwidth_floor`; before 2026-12-06 the only bound, then computed with the H200's
  4.3 TB/s on every card).
* Rollout rows (``advsim bench throughput --device cuda --rollout``): the training workload
  instead of a fixed shape — :data:`ROLLOUT_EPISODES` whole web-world executor episodes per run,
  :data:`ROLLOUT_GROUP` per task as stage 1 plays its pool, at the warm start's level mix, one
  ``generate`` per turn over every live episode, completions stopping at end-of-sequence, prompts
  growing with the history (:func:`advsim.bench.throughput.rollout_workload`): episodes/s,
  generated tokens/s, turns per episode and tokens per turn, for each vLLM configuration and for
  :class:`policies.engines.TorchEngine` over the bf16 peft model with every live episode in one
  batch: ``transformers`` with its static KV cache and the decoding step compiled by transformers
  (``TorchEngine(static_cache=True)``: prompts left-padded to a multiple of
  :data:`ROLLOUT_LENGTH_BUCKET` tokens and batches to a power-of-two row count, so the compiled
  step sees a handful of shapes, not one per turn), as in the throughput rows;
  ``transformers-dynamic`` (only when named) with the dynamic cache and no compile — the engine
  ``engine.kind: torch`` runs (there in the config's dtype and batch). Every row first plays one
  full-size warm-up run (its compiles and caches are not timed).
* Profile (``advsim bench throughput --device cuda --profile``): per vLLM configuration, the GPU
  time of one B = 256 generate (512-token prompts, 32 new tokens, executor adapter) per kernel
  family — GEMM, LoRA, attention, RMSNorm, softmax, sampling, Inductor-fused… — side by side, to
  show where the contract's cost lies (:func:`summarise_kernels`); the host's recorded ops
  (:func:`summarise_host`) and, from a second such generate under :mod:`cProfile`, the host's
  Python time per family of vLLM's code (:func:`summarise_python`).

Raises ``RuntimeError`` on a machine without CUDA (before anything starts).
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from policies.backbone import DEFAULT_BACKBONE

CONFIGS = {
    "contract": dict(consistent=True, cuda_graphs=True),
    "contract-eager": dict(consistent=True, cuda_graphs=False),
    "contract-fa3": dict(consistent=True, cuda_graphs=True, attention_backend="FLASH_ATTN"),
    "contract-triton": dict(consistent=True, cuda_graphs=True, cublas_linear=False),
    "default": dict(consistent=False, cuda_graphs=True),
    "default-base": dict(consistent=False, cuda_graphs=True, enable_lora=False),
}
"""The base configurations, label → :class:`policies.engines.VLLMEngine` settings (everything not
named is the engine's default for vLLM on CUDA). ``contract``: the engine's defaults with
``consistent=True`` — batch-invariant mode, Triton attention, CUDA graphs + ``torch.compile``,
linear layers and LM head on cuBLAS without split-K where the engine proves it row-invariant at
start (:mod:`policies.vllm_cuda_patches`), every seeded request's sampling noise in one launch
(:mod:`policies.vllm_seeded_sampler`), no per-step detokenization (token ids and flat log-probs
only, text decoded once per completion), ``CUBLAS_WORKSPACE_CONFIG`` unset (vLLM sets ``:16:8``: up
to ~85 µs of host time per eager matmul), one 16-row × 256 LoRA shrink tile at every batch size
(:mod:`policies.vllm_lora_shrink`) and 32,768 batched tokens per engine step: what training
runs. ``contract-eager``, ``contract-fa3`` (FlashAttention 3) and ``contract-triton`` (vLLM 0.22's
batch-invariant Triton matmul for the linear layers, the contract's kernel before 2026-12-04)
change one of those choices each: they show whether it is needed, or what it costs, on a card.
``default`` is vLLM's own default configuration (CUDA graphs, default attention backend,
batch-invariant mode off, our patches off): the negative control, which must differ; it keeps
8,192 batched tokens per step. ``default-base`` is ``default`` with LoRA off and no adapter on
any request — a throughput diagnostic only (with ``transformers-base``), without consistency rows:
how much of every engine's distance from the roofline is the LoRA path.

Any of them takes engine overrides in its label, ``BASE+key=value[+key=value…]`` (keys
:data:`OVERRIDES`), e.g. ``contract+max_num_batched_tokens=8192`` — one setting changed, measured
in the same run as the others; :data:`EARLIER_LABELS` names the ones earlier measurements used."""
DEFAULT_LABELS = ("contract", "contract-eager", "contract-fa3", "contract-triton", "default")
"""What :func:`run` measures when no labels are given (with ``transformers`` for throughput and
``gradient`` for consistency); every other label runs only when named."""
CONTRACT_ATTENTION = (None, "TRITON_ATTN")
"""The attention backends of the contract (None: the engine's choice in batch-invariant mode,
Triton attention). The eager engine (from 16 co-resident requests and at L ≥ 1000) and
FlashAttention 3 (the needle) break it (H200, 2026-12-02): ``contract-eager`` and ``contract-fa3``
are diagnostics, whose rows may differ without failing a run (:func:`is_contract`)."""
OVERRIDES = {
    "max_num_batched_tokens": int,
    "cublas_linear": bool,
    "batched_sampler": bool,
    "detokenize": bool,
    "cublas_workspace_config": str,
    "cuda_graphs": bool,
    "attention_backend": str,
    "enable_prefix_caching": bool,
    "lora_shrink": str,
    "multiprocessing": bool,
    "model_runner": str,
}
"""The :class:`policies.engines.VLLMEngine` settings a label may override, and their types
(``true``/``false`` for bool; ``consistent`` is the choice of base, not an override). An int is
ASCII digits below 2**31; ``attention_backend`` a vLLM backend name (upper-case letters, digits,
``_``); ``cublas_workspace_config`` what the engine accepts; ``lora_shrink`` ``vllm`` or a tile
``ROWSxK`` (:func:`policies.vllm_lora_shrink.parse_tile`); ``multiprocessing``: vLLM's engine core in
a process of its own, as vLLM runs by default, with this process's patches installed there
(:mod:`policies.vllm_engine_core`); such a row is not profiled (the profiler sees this process only);
``model_runner``: ``v1`` or ``v2`` (:data:`policies.engines.vllm_engine.MODEL_RUNNERS`; ``v2`` takes the
batched sampler off unless the label sets it, and refuses it set true)."""
CONTRACT_ONLY = ("cublas_linear", "cublas_workspace_config", "lora_shrink")
"""Overrides the engine applies in batch-invariant mode only: refused on a ``default`` base,
where the engine would ignore them."""
EARLIER_LABELS = {
    "contract-cublas": "contract+cublas_linear=true+batched_sampler=false+detokenize=true"
                       "+cublas_workspace_config=vllm+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-full": "contract+cublas_linear=true+batched_sampler=false+detokenize=true"
                     "+cublas_workspace_config=vllm+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-sampler": "contract+cublas_linear=true+batched_sampler=true+detokenize=true"
                        "+cublas_workspace_config=vllm+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-light": "contract+cublas_linear=true+batched_sampler=true+detokenize=false"
                      "+cublas_workspace_config=vllm+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-ws16": "contract+cublas_linear=true+batched_sampler=true+detokenize=false"
                     "+cublas_workspace_config=vllm+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-nows": "contract+cublas_linear=true+batched_sampler=true+detokenize=false"
                     "+cublas_workspace_config=unset+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-mnbt8k": "contract+cublas_linear=true+batched_sampler=true+detokenize=false"
                       "+cublas_workspace_config=unset+max_num_batched_tokens=8192+lora_shrink=vllm",
    "contract-mnbt32k": "contract+cublas_linear=true+batched_sampler=true+detokenize=false"
                        "+cublas_workspace_config=unset+max_num_batched_tokens=32768+lora_shrink=vllm",
    "contract-ws4096": "contract+cublas_workspace_config=:4096:8",
    "contract-shrink-vllm": "contract+lora_shrink=vllm",
    "default-mnbt32k": "default+max_num_batched_tokens=32768",
}
"""Labels of earlier measurements (``results/``, ``docs/gpu.md``) → the engine they measured,
stated against today's defaults, so a label names the same engine whatever the defaults become.
``contract-cublas`` (2026-12-04) and ``contract-full``: the contract with vLLM's per-request
sampler, per-step detokenization, vLLM's ``CUBLAS_WORKSPACE_CONFIG=:16:8`` and 8,192 batched
tokens (the contract of 2026-12-04/05); ``contract-sampler``: that with the batched sampler alone
(never measured on a GPU); ``contract-light`` and ``contract-ws16``: that with no per-step
detokenization too (2026-12-05a); ``contract-nows`` and ``contract-mnbt8k``: with the variable
unset as well (2026-12-05b); ``contract-mnbt32k``: with 32,768 batched tokens (= ``contract``
since 2026-12-05c, ``results/h100-mnbt32k-2026-12-05``); ``contract-ws4096`` keeps ``:4096:8``
(unmeasured); ``default-mnbt32k``: vLLM's default at 32,768 batched tokens. Every measured contract
label up to 2026-12-06b ran vLLM's own LoRA shrink tile; ``contract-shrink-vllm`` is today's contract
with it (``contract`` runs ``16x256`` since 2026-12-06c, ``results/h100-lora-shrink-2026-12-06``) — and
so do ``contract-eager``, ``contract-fa3`` and ``contract-triton`` since: their earlier numbers ran
vLLM's tile."""
BENCH_MAX_MODEL_LEN = 4096  # tokens: every vLLM engine of the bench


_BACKEND_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _shown(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to ``limit`` characters (closing quote kept) for an error message: a
    label of thousands of overrides must not bury the reason."""
    r = repr(text)
    return r if len(r) <= limit else f"{r[:limit - 2]}…{r[-1]}"


def _override_value(label: str, key: str, text: str):
    """One ``key=value`` of a label, parsed and checked; ValueError naming the label."""
    kind = OVERRIDES[key]
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{_shown(label)}: {key} must be true or false; got {_shown(text, 40)}")
        return text.lower() == "true"
    if kind is int:
        if not (text.isascii() and text.isdigit()) or int(text) >= 2**31:
            raise ValueError(f"{_shown(label)}: {key} must be a positive integer below 2**31; got {_shown(text, 40)}")
        return int(text)
    if not text:
        raise ValueError(f"{_shown(label)}: {key} needs a value")
    if key == "attention_backend" and not _BACKEND_NAME.fullmatch(text):
        raise ValueError(f"{_shown(label)}: attention_backend must be a vLLM backend name such as TRITON_ATTN or "
                         f"FLASH_ATTN; got {_shown(text, 40)}")
    return text


def engine_settings(label: str) -> dict:
    """The :class:`policies.engines.VLLMEngine` settings a vLLM configuration label stands for: a
    base of :data:`CONFIGS` (or a label of :data:`EARLIER_LABELS`, which stands for its own
    overrides), then each ``+key=value`` override in order (keys :data:`OVERRIDES`; a later one
    replaces an earlier label's).

    >>> engine_settings("contract+max_num_batched_tokens=8192")
    {'consistent': True, 'cuda_graphs': True, 'max_num_batched_tokens': 8192}

    Raises:
        ValueError: an unknown base or key, a malformed or repeated override, a value of the wrong
            type, a ``cublas_workspace_config`` or ``model_runner`` the engine would refuse, or a
            batched-token budget below the bench engines' ``max_model_len`` (:data:`BENCH_MAX_MODEL_LEN`).
    """
    from policies.engines.vllm_engine import batched_tokens, check_model_runner
    from policies.vllm_cuda_patches import workspace_value
    from policies.vllm_lora_shrink import parse_tile

    head, *pairs = label.split("+")
    base, *inherited = EARLIER_LABELS.get(head, head).split("+")
    if base not in CONFIGS:
        raise ValueError(f"unknown configuration {_shown(label)}; known bases: {', '.join(CONFIGS)}"
                         f"; labels of earlier measurements: {', '.join(EARLIER_LABELS)}")
    out, seen = dict(CONFIGS[base]), set()
    for i, pair in enumerate([*inherited, *pairs]):
        key, eq, text = pair.partition("=")
        if not eq:
            raise ValueError(f"{_shown(label)}: override {_shown(pair, 40)} is not key=value")
        if key not in OVERRIDES:
            raise ValueError(f"{_shown(label)}: {_shown(key, 40)} cannot be overridden; keys: {', '.join(OVERRIDES)}")
        if i >= len(inherited):  # the label's own overrides (an earlier label's may be overridden once)
            if key in seen:
                raise ValueError(f"{_shown(label)}: {key} given twice")
            seen.add(key)
        out[key] = _override_value(label, key, text)
        if key in CONTRACT_ONLY and not out["consistent"]:
            raise ValueError(f"{_shown(label)}: {key} applies in batch-invariant mode only; the engine ignores it on "
                             f"{base!r}")
    try:
        if "cublas_workspace_config" in out:
            workspace_value(out["cublas_workspace_config"])
        if "lora_shrink" in out:
            parse_tile(out["lora_shrink"])
        if "max_num_batched_tokens" in out:
            batched_tokens("cuda", out["consistent"], out["max_num_batched_tokens"], BENCH_MAX_MODEL_LEN)
        if "model_runner" in out:
            if out["model_runner"] == "v2" and out.get("batched_sampler") and "batched_sampler" not in seen:
                raise ValueError(f"{head} sets batched_sampler=true, which model_runner 'v2' does not use: add "
                                 "+batched_sampler=false")
            check_model_runner(out["model_runner"], "cuda", out.get("batched_sampler"))
    except ValueError as exc:
        raise ValueError(f"{_shown(label)}: {exc}") from None
    return out


def base_label(label: str) -> str | None:
    """The :data:`CONFIGS` base of a vLLM configuration label (an earlier label resolved), or None
    for any other label (``transformers``, ``gradient``, …)."""
    head = label.split("+")[0]
    base = EARLIER_LABELS.get(head, head).split("+")[0]
    return base if base in CONFIGS else None


def is_contract(label: str) -> bool:
    """Whether a label names an engine that must keep the contract, judged from its resolved
    settings (:func:`engine_settings`), however the label is written: batch-invariant, CUDA
    graphs on and a contract attention backend (:data:`CONTRACT_ATTENTION`) — so
    ``contract+cuda_graphs=false`` is a diagnostic like ``contract-eager``, and
    ``contract-eager+cuda_graphs=true`` is the contract. Each consistency row of such an engine must
    be bit-identical (:func:`failures`), and its throughput is reported as a ratio to vLLM's
    default and to transformers. False for any other label (``transformers``, ``gradient``, one
    that does not resolve)."""
    if base_label(label) is None:
        return False
    try:
        s = engine_settings(label)
    except ValueError:
        return False
    return bool(s["consistent"] and s.get("cuda_graphs", True) and s.get("attention_backend") in CONTRACT_ATTENTION)


TRANSFORMERS_LABELS = ("transformers", "transformers-base", "transformers-dynamic")
FIXED_RATIOS = (("default", "default-base"), ("default-base", "transformers-base"),
                ("transformers", "transformers-base"), ("transformers", "transformers-dynamic"))


def ratio_pairs(labels) -> list[tuple[str, str]]:
    """The throughput ratios ``(numerator, denominator)`` :func:`run` prints for the measured
    ``labels``: every contract configuration (:func:`is_contract`) over every vLLM configuration
    without the contract that serves adapters, and over ``transformers`` and
    ``transformers-dynamic``; each such vLLM configuration over those two; a label with overrides
    over its plain base (what the overrides buy or cost); and :data:`FIXED_RATIOS` (the no-adapter
    diagnostics)."""
    labels = list(dict.fromkeys(labels))

    def plain_vllm(lb):
        base = base_label(lb)
        return base is not None and not CONFIGS[base]["consistent"] and engine_settings(lb).get("enable_lora", True)

    pairs = []
    for a in labels:
        for b in labels:
            if a == b:
                continue
            if ((is_contract(a) or plain_vllm(a)) and b in ("transformers", "transformers-dynamic")
                    or is_contract(a) and plain_vllm(b)
                    or base_label(a) is not None and a != base_label(a) and b == base_label(a)
                    or (a, b) in FIXED_RATIOS):
                pairs.append((a, b))
    return pairs


CORESIDENT = (1, 16, 64, 256)
PREFILL_DECODE_LENGTHS = (1, 63, 64, 65, 1000, 2047)
BATCHES = (64, 256)
PROMPT_TOKENS, NEW_TOKENS = 512, 128
ROLLOUT_EPISODES, ROLLOUT_GROUP = 256, 8  # 32 tasks × G = 8 (stage 1's pool of 128 × 8 is 1,024 episodes)
PREFILL_SEED = 1 << 40  # the prefill-only prompts' seeds start here, far from every timed set's
ROLLOUT_LENGTH_BUCKET = 128  # tokens: the static-cache transformers row pads each turn's prompts to a multiple
ADAPTERS = (None, "executor@0", "curriculum@0", "adversary@0")
MAX_LORA_RANK = 16  # the vLLM engines' max_lora_rank (VLLMEngine's default)


def executor_adapter_folder(path: str | os.PathLike) -> Path:
    """Check a saved executor adapter for the ``executor`` option of :func:`run`: a run's
    ``adapters/executor@N`` folder (peft's ``adapter_config.json`` and
    ``adapter_model.safetensors`` and advsim's ``advsim-manifest.json``, as
    :func:`policies.adapters.save_adapter` writes it), of LoRA rank ≤ :data:`MAX_LORA_RANK`.

    Returns:
        The folder, absolute.

    Raises:
        ValueError: not such a folder (the message names what is missing), or its rank is too high.
    """
    from policies.adapters import AdapterRef

    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(f"{path}: not a folder")
    try:
        ref = AdapterRef.parse(folder.name)
    except ValueError:
        ref = None
    if ref is None or ref.role != "executor" or ref.version is None:
        raise ValueError(f"{path}: expected a run's executor adapter folder named executor@N (e.g. "
                         "runs/demo/adapters/executor@2)")
    missing = [f for f in ("adapter_config.json", "adapter_model.safetensors", "advsim-manifest.json")
               if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    try:
        rank = int(json.loads((folder / "adapter_config.json").read_text())["r"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}/adapter_config.json: no LoRA rank r ({exc})") from None
    if rank > MAX_LORA_RANK:
        raise ValueError(f"{path}: LoRA rank {rank} above the bench engines' max_lora_rank {MAX_LORA_RANK}")
    return folder


def known_labels() -> tuple[str, ...]:
    """Every configuration :func:`run` can measure by name: :data:`CONFIGS`,
    :data:`EARLIER_LABELS`, then ``transformers``, ``transformers-base``, ``transformers-dynamic``
    and ``gradient`` (and any base of :data:`CONFIGS` with overrides, :func:`engine_settings`)."""
    return (*CONFIGS, *EARLIER_LABELS, *TRANSFORMERS_LABELS, "gradient")


def check_labels(labels) -> None:
    """Check configuration labels before anything runs.

    Raises:
        ValueError: an empty or repeated label; a label that is neither a vLLM configuration
            (:func:`engine_settings`: the message says what is wrong with it) nor one of ``transformers``,
            ``transformers-base``, ``transformers-dynamic`` and ``gradient``, which take no
            overrides; the message lists the known labels.
    """
    seen = set()
    for lb in labels:
        if not lb:
            raise ValueError("an empty configuration label (a comma too many?)")
        if lb in seen:
            raise ValueError(f"{_shown(lb)} is given twice (its second result would replace the first)")
        seen.add(lb)
        if lb in (*TRANSFORMERS_LABELS, "gradient"):
            continue
        if lb.split("+")[0] in (*TRANSFORMERS_LABELS, "gradient"):
            raise ValueError(f"{_shown(lb)}: only vLLM configurations take overrides")
        try:
            engine_settings(lb)
        except ValueError as exc:
            raise ValueError(f"{exc} (other labels: {', '.join((*TRANSFORMERS_LABELS, 'gradient'))}; a vLLM "
                             "configuration takes overrides, e.g. contract+max_num_batched_tokens=8192)") from None


def require_cuda() -> None:
    """Raise ``RuntimeError`` with a clear message when CUDA is not available here."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"--device cuda: CUDA is not available here (torch {torch.__version__}, "
                           "torch.cuda.is_available() is False); run it on a machine with an NVIDIA GPU, "
                           "or use --device cpu")


def _random_prompts(n: int, lengths, seed: int, vocab: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(200, vocab - 1) for _ in range(lengths[i % len(lengths)])] for i in range(n)]


def _mixed_lengths(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice((rng.randint(5, 60), rng.randint(60, 300), rng.randint(300, 700))) for _ in range(n)]


def _count_steps():
    """Context manager recording ``num_reqs`` of every attention-metadata build (one per forward
    step here: one KV-cache group) of vLLM's CUDA attention backends."""
    import contextlib

    @contextlib.contextmanager
    def cm():
        patched, sizes = [], []
        for mod, cls in (("vllm.v1.attention.backends.flash_attn", "FlashAttentionMetadataBuilder"),
                         ("vllm.v1.attention.backends.triton_attn", "TritonAttentionMetadataBuilder"),
                         ("vllm.v1.attention.backends.flashinfer", "FlashInferMetadataBuilder")):
            try:
                klass = getattr(__import__(mod, fromlist=[cls]), cls)
            except Exception:
                continue
            inner = klass.build

            def build(self, common_prefix_len, common_attn_metadata, *a, _inner=inner, **k):
                sizes.append(int(common_attn_metadata.num_reqs))
                return _inner(self, common_prefix_len, common_attn_metadata, *a, **k)

            klass.build = build
            patched.append((klass, inner))
        try:
            yield sizes
        finally:
            for klass, inner in patched:
                klass.build = inner
    return cm()


def _flat(xs):
    import torch

    return torch.tensor([x for row in xs for x in row], dtype=torch.float32)


def _diff(a, b) -> dict:
    from policies import numerics

    return numerics.diff_report(_flat(a), _flat(b)).as_dict()


class _Rows(dict):
    """A dict that calls ``on_set(self)`` after every row is added (partial results survive a crash)."""

    def __init__(self, on_set):
        super().__init__()
        self._on_set = on_set

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._on_set(self)


def _consistency_rows(engine, vocab: int, root: Path, pm, on_row=lambda rows: None) -> tuple[dict, dict]:
    """All consistency rows of one engine; returns (rows, log-probs of the reference requests).
    ``on_row(rows)`` is called after each row (the rows so far)."""
    from policies.adapters import randomize_adapter, save_adapter
    from policies.engines import GenerationRequest, completion_scores

    rows: dict[str, dict] = _Rows(on_row)

    def reqs_for(prompts, adapters=ADAPTERS, new=16, seed0=1000):
        return [GenerationRequest(tuple(p), adapters[i % len(adapters)], max_new_tokens=new, seed=seed0 + i,
                                  top_p=0.95) for i, p in enumerate(prompts)]

    def rollout_vs_score(reqs):
        with _count_steps() as sizes:
            gens = engine.generate(reqs)
        # counted in this process only: None ("–") where vLLM's engine core runs in its own
        # (engine.multiprocessing), whose attention-metadata builds this hook does not see
        return gens, {**_diff([g.logprobs for g in gens], completion_scores(engine, gens)),
                      "max_requests_per_step": max(sizes) if sizes else None}

    first = None
    for n in CORESIDENT:
        prompts = _random_prompts(n, _mixed_lengths(n, seed=n), seed=n, vocab=vocab)
        gens, rows[f"rollout vs score, {n} co-resident"] = rollout_vs_score(reqs_for(prompts))
        if n == 64:
            first = gens
    pd = reqs_for(_random_prompts(len(PREFILL_DECODE_LENGTHS), PREFILL_DECODE_LENGTHS, seed=7, vocab=vocab),
                  adapters=("executor@0",), new=4)
    for r in pd:  # each length alone: its own prefill and decode steps
        _, rows[f"prefill vs decode, L = {len(r.prompt_ids)}"] = rollout_vs_score([r])
    # the needle: one request alone, then among 128 mixed requests at a random position
    crowd = reqs_for(_random_prompts(128, _mixed_lengths(128, seed=5), seed=5, vocab=vocab), seed0=5000)
    needle = reqs_for(_random_prompts(1, (400,), seed=9, vocab=vocab), adapters=("executor@0",), seed0=9)[0]
    alone = engine.generate([needle])[0]
    pos = random.Random(3).randrange(len(crowd))
    among = engine.generate(crowd[:pos] + [needle] + crowd[pos:])[pos]
    rows["needle: alone vs among 128"] = {**_diff([alone.logprobs], [among.logprobs]),
                                          "same_tokens": alone.token_ids == among.token_ids}
    # a new adapter version, then the old one again
    randomize_adapter(pm, "executor", seed=77, scale=0.05)
    engine.add_adapter("executor@1", save_adapter(pm, "executor@1", root))
    prompts = _random_prompts(64, _mixed_lengths(64, seed=11), seed=11, vocab=vocab)
    _, rows["new adapter version (executor@0, @1, roles, none)"] = rollout_vs_score(
        reqs_for(prompts, adapters=(None, "executor@1", "curriculum@0", "adversary@0", "executor@0")))
    idx = [i for i, g in enumerate(first) if g.request.adapter == "executor@0"]
    again = engine.generate([first[i].request for i in idx])
    rows["recheck executor@0 after the switch"] = {
        **_diff([first[i].logprobs for i in idx], [g.logprobs for g in again]),
        "same_tokens": all(first[i].token_ids == g.token_ids for i, g in zip(idx, again))}
    reference = {"logprobs": [g.logprobs for g in first], "token_ids": [g.token_ids for g in first]}
    return rows, reference


def _output_options(engine) -> dict:
    """The engine's per-token output options (:meth:`policies.engines.VLLMEngine.output_options`):
    a row's timed requests skip detokenization where its engine's rollouts do (``contract``)."""
    return engine.output_options() if hasattr(engine, "output_options") else {}


def _throughput_vllm(engine, vocab: int, batches=BATCHES, repeats: int = 2, adapter: str | None = "executor@0") -> dict:
    """Generated tokens/s per batch size: a warm-up set, then ``repeats`` timed ``generate`` calls
    of ``b`` new 512-token prompts × 128 tokens (``ignore_eos``, a seed per request, ``adapter`` on
    every request), their median; and ``prefill_seconds``, the median time of ``repeats`` calls of
    the same shape with one new token (new prompts): the prefill timed alone (in a timed call vLLM
    may decode the first sequences while it prefills the last).

    Returns:
        ``{"64": {"tokens_per_s", "runs": [{"seconds", "tokens"}], "prefill_seconds"}, "256": …}``.
    """
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    out = {}
    lora = engine.lora_request(adapter) if adapter else None
    for b in batches:
        sets = [_random_prompts(b, (PROMPT_TOKENS,), seed=100 * b + k, vocab=vocab) for k in range(repeats + 1)]
        times = []
        for k, prompts in enumerate(sets):
            sp = [SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, temperature=1.0, top_p=0.95, seed=i,
                                 logprobs=0, **_output_options(engine)) for i in range(b)]
            t = time.perf_counter()
            outs = engine.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp,
                                       lora_request=[lora] * b if lora else None, use_tqdm=False)
            dt = time.perf_counter() - t
            n = sum(len(o.outputs[0].token_ids) for o in outs)
            if k:  # the first set warms up (and compiles) at this batch size
                times.append((dt, n))
        rate = statistics.median(n / s for s, n in times)
        # the prefill alone: the same shape with one new token, on prompts no run used (the prefix
        # cache would serve a repeat: seeds far from the timed sets' 100 b + k), as often as the timed runs
        one = [SamplingParams(max_tokens=1, ignore_eos=True, temperature=1.0, top_p=0.95, seed=i, logprobs=0,
                              **_output_options(engine)) for i in range(b)]
        prefill = []
        for k in range(repeats):
            prompts = _random_prompts(b, (PROMPT_TOKENS,), seed=PREFILL_SEED + 100 * b + k, vocab=vocab)
            t = time.perf_counter()
            engine.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], one,
                                lora_request=[lora] * b if lora else None, use_tqdm=False)
            prefill.append(time.perf_counter() - t)
        out[str(b)] = {"tokens_per_s": rate, "runs": [{"seconds": round(s, 3), "tokens": n} for s, n in times],
                       "prefill_seconds": round(statistics.median(prefill), 4)}
    return out


# (family, substrings of the kernel name, any of which puts a kernel there); the first match wins
KERNEL_FAMILIES = (
    ("LoRA", ("lora", "punica", "sgmv", "bgmv")),
    ("KV-cache write", ("reshape_and_cache",)),
    ("attention", ("attention", "attn", "flash", "reduce_segments", "fmha")),
    ("RMSNorm", ("rms_norm", "rmsnorm", "rsqrt")),
    ("softmax / log-softmax", ("softmax",)),
    ("sampling", ("topk", "top_k", "sort", "multinomial", "argmax", "exponential", "random", "philox")),
    ("GEMM (Triton)", ("matmul_kernel",)),
    ("GEMM (cuBLAS)", ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "s16816", "splitkreduce")),
    ("rotary", ("rotary",)),
    ("activation", ("act_and_mul", "silu", "gelu")),
    ("Inductor fused", ("triton_poi", "triton_red", "triton_per")),
    ("copy / elementwise", ("memcpy", "memset", "elementwise", "copy", "fill", "index", "gather", "scatter", "cat")),
)


def kernel_family(name: str) -> str:
    """The family of a CUDA kernel by its name (:data:`KERNEL_FAMILIES`, case-insensitive, first
    match wins), or ``"other"``. E.g. ``"nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN"`` → ``"GEMM (cuBLAS)"``,
    ``"_lora_shrink_kernel"`` → ``"LoRA"``, ``"kernel_unified_attention_2d"`` → ``"attention"``."""
    low = name.lower()
    return next((fam for fam, keys in KERNEL_FAMILIES if any(k in low for k in keys)), "other")


def summarise_kernels(kernels, top: int = 25) -> dict:
    """GPU time per kernel family and the ``top`` kernels, from ``(name, microseconds)`` pairs
    (one per kernel launch).

    Returns:
        ``{"kernel_ms": total, "launches": n, "families": {family: ms, …} (descending),
        "top": [{"name", "family", "launches", "ms"}, …]}`` — times in milliseconds, rounded to 3 digits.
    """
    per: dict[str, list] = {}
    for name, us in kernels:
        row = per.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += us
    fams: dict[str, float] = {}
    for name, (_, us) in per.items():
        fams[kernel_family(name)] = fams.get(kernel_family(name), 0.0) + us
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])[:top]
    return {"kernel_ms": round(sum(us for _, us in per.values()) / 1e3, 3),
            "launches": sum(n for n, _ in per.values()),
            "families": {f: round(us / 1e3, 3) for f, us in sorted(fams.items(), key=lambda kv: -kv[1])},
            "top": [{"name": n[:160], "family": kernel_family(n), "launches": c, "ms": round(us / 1e3, 3)}
                    for n, (c, us) in rows]}


def summarise_host(ops, wall_ms: float, top: int = 15) -> dict:
    """The host side of a profile: ``(name, calls, self CPU microseconds)`` per recorded CPU op —
    ATen ops and CUDA runtime calls such as ``cudaLaunchKernel`` / ``cudaGraphLaunch``, as
    ``torch.profiler``'s ``key_averages()`` gives them — against the call's wall time. The
    profiler records no Python frames, so ``untraced_ms`` (wall minus every op's self time) is
    the host time spent in Python (vLLM's scheduler, input preparation, output processing) or
    waiting.

    Returns:
        ``{"cpu_op_ms": total self time, "untraced_ms": wall_ms - cpu_op_ms, "calls": n,
        "top": [{"name", "calls", "ms"}, …]}`` (``top`` ops by self time, descending; ms rounded to
        3 digits).
    """
    ops = [(str(n), int(c), float(us)) for n, c, us in ops]
    total = sum(us for _, _, us in ops) / 1e3
    rows = sorted(ops, key=lambda r: -r[2])[:top]
    return {"cpu_op_ms": round(total, 3), "untraced_ms": round(wall_ms - total, 3), "calls": sum(c for _, c, _ in ops),
            "top": [{"name": n[:160], "calls": c, "ms": round(us / 1e3, 3)} for n, c, us in rows]}


# (family, path fragments of the Python file a function lives in); the first match wins. Paths are
# normalised to start at the package (``vllm/v1/core/sched/scheduler.py``).
PYTHON_FAMILIES = (
    ("output processing (detokenizer, log-probs)", ("vllm/v1/engine/output_processor", "vllm/v1/engine/detokenizer",
                                                    "vllm/v1/engine/logprobs", "vllm/logprobs", "vllm/outputs",
                                                    "vllm/tokenizers", "vllm/transformers_utils", "tokenizers/")),
    ("scheduler, KV-cache manager", ("vllm/v1/core/",)),
    ("sampler (host side)", ("vllm/v1/sample/", "vllm/v1/worker/gpu/sample/", "policies/vllm_seeded_sampler")),
    ("LoRA (host side)", ("vllm/lora/", "vllm/v1/worker/gpu/lora_utils")),
    ("input preparation (model runner)", ("vllm/v1/worker/",)),
    ("model forward, CUDA graph replay (host side)", ("vllm/model_executor/", "vllm/compilation/", "vllm/attention",
                                                      "vllm/v1/attention", "vllm/forward_context", "torch/")),
    ("engine loop", ("vllm/",)),
)
WAITING = "waiting for the GPU (synchronising copies)"
# torch tensor methods that block until the GPU has finished (a device-to-host copy); numpy's own
# tolist/item are host work (vLLM's log-prob processing calls them per request per step)
_SYNCING = ("'tolist'", "'item'", "'cpu'", "'numpy'", "'nonzero'")


def _waits_for_gpu(name: str) -> bool:
    """Whether a built-in (cProfile's name for it) blocks on the GPU: any ``synchronize``
    (``torch.cuda.synchronize``'s ``_cuda_synchronize``, an event's or stream's), or a copying
    method of a torch tensor."""
    return "synchronize" in name or ("of 'torch._C." in name and any(s in name for s in _SYNCING))


def _python_path(file: str) -> str:
    """``/tmp/site/vllm/v1/core/x.py`` -> ``vllm/v1/core/x.py`` (from the last ``site-packages/`` or
    ``/site/``, else from the first known package folder, else the file name)."""
    f = file.replace("\\", "/")
    for marker in ("site-packages/", "/site/"):
        if marker in f:
            return f.rsplit(marker, 1)[1]
    for pkg in ("vllm/", "torch/", "policies/", "advsim/", "tokenizers/", "transformers/"):
        i = f.find("/" + pkg)
        if i >= 0:
            return f[i + 1:]
    return f.rsplit("/", 1)[-1]


def python_family(file: str, name: str) -> str | None:
    """The :data:`PYTHON_FAMILIES` family of a profiled function (``file``, ``name`` as
    :mod:`cProfile` records them); built-ins (``file == "~"``) that synchronise with the GPU are
    :data:`WAITING`, other built-ins ``None`` (their time belongs to the caller's family)."""
    if file == "~":
        return WAITING if _waits_for_gpu(name) else None
    path = _python_path(file)
    for fam, frags in PYTHON_FAMILIES:
        if any(path.startswith(fr) or "/" + fr in path for fr in frags):
            return fam
    return "other"


def summarise_python(stats: dict, wall_ms: float, top: int = 15) -> dict:
    """The Python side of a profile, from :mod:`cProfile`'s table (``pstats.Stats(p).stats``:
    ``{(file, line, name): (primitive calls, calls, self s, cumulative s, {caller: (…, self s, …)})}``).

    Every function's self time goes to its family (:func:`python_family`); a built-in's self time
    goes to the family of each caller in proportion to what that caller spent in it (its per-caller
    self time), unless the built-in waits for the GPU (:data:`WAITING`). Under cProfile Python runs
    slower than without it, so read the shares, not the milliseconds.

    Returns:
        ``{"profiled_ms": sum of self times, "wall_ms", "families": {family: ms} (descending),
        "top_self": [{"function", "calls", "ms"}], "top_cumulative": [{"function", "calls", "ms"}]}``
        (``function`` is ``path:line(name)``; ms rounded to 3 digits).
    """
    fams: dict[str, float] = {}
    total = 0.0
    for (file, line, name), (_, nc, tt, ct, callers) in stats.items():
        total += tt
        fam = python_family(file, name)
        if fam is not None:
            fams[fam] = fams.get(fam, 0.0) + tt
            continue
        spent = {c: v[2] for c, v in (callers or {}).items()}
        shared = sum(spent.values())
        for (cf, _, cn), t in spent.items():
            cfam = python_family(cf, cn) or "other"
            fams[cfam] = fams.get(cfam, 0.0) + (t / shared * tt if shared else 0.0)
        if not shared:
            fams["other"] = fams.get("other", 0.0) + tt

    def row(key, v, i):
        file, line, name = key
        where = name if file == "~" else f"{_python_path(file)}:{line}({name})"
        return {"function": where[:160], "calls": int(v[1]), "ms": round(v[i] * 1e3, 3)}

    by = lambda i: [row(k, v, i) for k, v in sorted(stats.items(), key=lambda kv: -kv[1][i])[:top]]  # noqa: E731
    return {"profiled_ms": round(total * 1e3, 3), "wall_ms": round(wall_ms, 3),
            "families": {f: round(ms * 1e3, 3) for f, ms in sorted(fams.items(), key=lambda kv: -kv[1])},
            "top_self": by(2), "top_cumulative": by(3)}


DECODE_PAIRS = 3  # the decode-alone part's timed (new_tokens, 2 x new_tokens) pairs


def _profile_vllm(engine, vocab: int, batch: int = 256, new_tokens: int = 32, adapter: str | None = "executor@0") -> dict:
    """One ``generate`` of ``batch`` new 512-token prompts × ``new_tokens`` tokens (executor adapter
    on every request, after a warm-up call on other prompts, so the profiled call prefills its
    prompts as the timed throughput runs do — the first profile, in
    ``results/h200-rollout-bench-2026-12-04c/``, re-used the warm-up's prompts, which the prefix
    cache served: decode only) under ``torch.profiler``: GPU time per kernel family
    (:func:`summarise_kernels`) and the call's wall time. The engine runs in this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so its kernels are recorded, including those replayed
    from CUDA graphs where CUPTI reports them (compare ``kernel_ms`` with ``wall_ms``); and the
    host side's recorded ops (``host``, :func:`summarise_host`). Then one more such generate (new
    prompts) under :mod:`cProfile` alone: the host's Python time per family — vLLM's scheduler,
    input preparation, sampler, output processing (detokenizer, log-probs), waiting for the GPU
    (``python``, :func:`summarise_python`). Last, **decode alone** (``decode``): one more set of new
    prompts, one token longer (513: with vLLM's 16-token blocks the prefix cache then serves 512 of
    them and only the last is computed again — a hit stops one token short and at a block edge), is
    generated unprofiled, then the same prompts again, served from the prefix cache, so nearly all
    of a call's steps decode: :data:`DECODE_PAIRS` times a call of ``new_tokens`` and one of
    ``2 × new_tokens``, alternating, timed without any profiler (``wall_ms``, the median of the
    first, and ``per_step_ms`` = it / ``new_tokens``; ``marginal_step_ms`` = the median difference
    of a pair / ``new_tokens``: a decode step without the requests' admission and the last prompt
    token's prefill, which ``per_step_ms`` spreads over its steps — at 135M, B = 256 on an H100,
    10.9 ms a step against ~8.2 ms implied by the timed throughput rows, 2026-12-06e; None when
    the difference is not positive; ``gpu_busy_marginal_pct`` = kernel time per step / the
    marginal step), then once more with only the GPU's activity recorded (kernel
    time per family, ``profiled_wall_ms``: CUPTI's tracing of CUDA-graph replays slows the host).
    ``gpu_busy_pct`` = kernel time (memory copies and sets included) / the unprofiled wall: near
    100 % a decode step waits for the GPU, far below it for the host. Skipped, with the reason in
    ``decode_error``, when the engine runs without prefix caching; a failure is kept there too."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    lora = engine.lora_request(adapter) if adapter else None
    sp = [SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=1.0, top_p=0.95, seed=i, logprobs=0,
                         **_output_options(engine)) for i in range(batch)]

    def prompts(seed: int, length: int = PROMPT_TOKENS):  # new prompts each time: a repeat would be served from
        return [TokensPrompt(prompt_token_ids=p)              # the prefix cache (no prefill)
                for p in _random_prompts(batch, (length,), seed=seed, vocab=vocab)]

    def gen(ps, params=sp):  # the prompts are built before any clock or profiler starts (256 x 512 random
        # tokens took ~220 ms under cProfile, in the timed walls until 2026-12-06e)
        return engine.llm.generate(ps, params, lora_request=[lora] * batch if lora else None, use_tqdm=False)

    gen(prompts(7))
    torch.cuda.synchronize()
    ps = prompts(8)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        gen(ps)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernels = [(e.name, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == DeviceType.CUDA]
    host = [(a.key, a.count, a.self_cpu_time_total) for a in prof.key_averages() if a.self_cpu_time_total > 0]
    # the same generate again (new prompts) under cProfile alone: where the host's Python time goes
    py, ps = cProfile.Profile(), prompts(9)
    t0 = time.perf_counter()
    py.enable()
    gen(ps)
    torch.cuda.synchronize()
    py.disable()
    py_wall = time.perf_counter() - t0
    out = {"batch": batch, "prompt_tokens": PROMPT_TOKENS, "new_tokens": new_tokens, "wall_ms": round(wall * 1e3, 1),
           **summarise_kernels(kernels), "host": summarise_host(host, wall * 1e3),
           "python": summarise_python(pstats.Stats(py).stats, py_wall * 1e3)}
    if not getattr(engine, "enable_prefix_caching", True):
        out["decode_error"] = "prefix caching is off: a repeated prompt would be prefilled again, not decoded alone"
        return out
    try:
        ps = prompts(10, PROMPT_TOKENS + 1)  # 512 of them served from the prefix cache, the last computed again
        gen(ps)  # prefills these prompts, unprofiled
        torch.cuda.synchronize()
        # decode alone, timed without any profiler; and with twice the tokens, also from the cache:
        # the difference is new_tokens decode steps alone, without the requests' admission and the
        # last prompt token's prefill that both calls share. Three alternating pairs, the medians
        # (runs in one process differ by up to ~35 % at 135M)
        longer = [SamplingParams(max_tokens=2 * new_tokens, ignore_eos=True, temperature=1.0, top_p=0.95, seed=i,
                                 logprobs=0, **_output_options(engine)) for i in range(batch)]
        shorts, longs = [], []
        for _ in range(DECODE_PAIRS):
            for params, walls in ((sp, shorts), (longer, longs)):
                t0 = time.perf_counter()
                gen(ps, params)
                torch.cuda.synchronize()
                walls.append(time.perf_counter() - t0)
        dwall = statistics.median(shorts)
        marginal = statistics.median(b - a for a, b in zip(shorts, longs)) / new_tokens
        gpu_only = [ProfilerActivity.CUDA] if torch.cuda.is_available() else [ProfilerActivity.CPU]  # CPU: tests
        with profile(activities=gpu_only) as dprof:
            t0 = time.perf_counter()
            gen(ps)  # the same again, its kernels recorded
            torch.cuda.synchronize()
            pwall = time.perf_counter() - t0
        dk = [(e.name, e.time_range.elapsed_us()) for e in dprof.events() if e.device_type == DeviceType.CUDA]
        dec = {"prompt_tokens": PROMPT_TOKENS + 1, "wall_ms": round(dwall * 1e3, 1),
               "per_step_ms": round(dwall * 1e3 / new_tokens, 3), "profiled_wall_ms": round(pwall * 1e3, 1),
               **summarise_kernels(dk)}
        dec["gpu_busy_pct"] = round(100 * dec["kernel_ms"] / dec["wall_ms"], 1) if dec["wall_ms"] else 0.0
        dec["marginal_step_ms"] = round(marginal * 1e3, 3) if marginal > 0 else None  # None: noise won
        if dec["marginal_step_ms"]:
            dec["gpu_busy_marginal_pct"] = round(100 * dec["kernel_ms"] / new_tokens / dec["marginal_step_ms"], 1)
        out["decode"] = dec
    except Exception as exc:  # noqa: BLE001 - the rest of the profile stands; the failure is recorded
        out["decode_error"] = f"{type(exc).__name__}: {exc}"[:500]
    return out


def _transformers_model(backbone: str, adapter: bool, executor: Path | None = None, device: str = "cuda"):
    """(model, tokenizer): the backbone in bf16 on ``device``, in eval mode; with ``adapter`` the
    peft model with the executor adapter active — the random one (seed 10, the vLLM rows'
    executor@0 weights), or the saved folder ``executor`` (:func:`executor_adapter_folder`) with
    its own LoRA configuration (rank, layers)."""
    import torch

    from policies.adapters import activate, attach_role_adapters, load_adapter, lora_config, randomize_adapter
    from policies.backbone import load_backbone

    torch.manual_seed(0)
    model, tok, _ = load_backbone(backbone, dtype=torch.bfloat16)
    if adapter:
        pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
        if executor is None:
            randomize_adapter(pm, "executor", seed=10, scale=0.05)
        else:  # the saved adapter's own LoraConfig, not the random slot's
            activate(pm, "curriculum")  # peft warns when the active adapter is deleted
            pm.delete_adapter("executor")
            load_adapter(pm, executor.name, executor.parent)
        activate(pm, "executor")
        pm = pm.to(device)
    else:
        pm = model.to(device)
    pm.eval()
    return pm, tok


def _rollout_transformers(backbone: str, adapter: bool, static_cache: bool = True, executor: Path | None = None,
                          repeats: int = 2) -> dict:
    """:func:`advsim.bench.throughput.rollout_workload` on :class:`policies.engines.TorchEngine`
    (transformers ``generate`` over the bf16 peft model on CUDA, every live episode in one batch;
    ``static_cache``: transformers' static cache with its compiled decoding step, prompts padded to
    a multiple of :data:`ROLLOUT_LENGTH_BUCKET`; otherwise the dynamic cache, no compile, as
    ``configs/h200-torch.yaml`` runs the engine, there in fp32 with batches of 64). One full-size
    warm-up run first, then ``repeats`` timed runs; ``executor``: a saved executor adapter instead
    of the random one."""
    from advsim.bench.throughput import rollout_workload
    from policies.engines import TorchEngine

    pm, tok = _transformers_model(backbone, adapter, executor)
    engine = TorchEngine(pm, tok, batch_size=ROLLOUT_EPISODES, static_cache=static_cache,
                         length_bucket=ROLLOUT_LENGTH_BUCKET)
    return rollout_workload(engine, tok, "executor@0" if adapter else None, episodes=ROLLOUT_EPISODES,
                            group=ROLLOUT_GROUP, repeats=repeats, warmup_episodes=ROLLOUT_EPISODES)


def _throughput_transformers(batches=BATCHES, repeats: int = 2, backbone: str = DEFAULT_BACKBONE,
                             adapter: bool = True, static_cache: bool = True, executor: Path | None = None) -> dict:
    """transformers ``generate`` with a static cache and ``torch.compile`` of the decoding step
    (``static_cache=False``: the dynamic cache, no compile), bf16, the executor adapter active
    through peft (``adapter=False``: the bare backbone; ``executor``: a saved one)."""
    import torch

    pm, tok = _transformers_model(backbone, adapter, executor)
    vocab = pm.config.vocab_size
    out = {}
    for b in batches:
        times = []
        for k in range(repeats + 1):
            ids = torch.tensor(_random_prompts(b, (PROMPT_TOKENS,), seed=100 * b + k, vocab=vocab), device="cuda")
            torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.no_grad():
                res = pm.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                  min_new_tokens=NEW_TOKENS, do_sample=True, top_p=0.95, temperature=1.0,
                                  cache_implementation="static" if static_cache else None,
                                  pad_token_id=tok.eos_token_id)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            if k:
                times.append((dt, int(res.shape[0] * (res.shape[1] - PROMPT_TOKENS))))
        out[str(b)] = {"tokens_per_s": statistics.median(n / s for s, n in times),
                       "runs": [{"seconds": round(s, 3), "tokens": n} for s, n in times]}
    return out


def measure_ceilings(copy_bytes: int = 2**30, n: int = 8192, warmups: int = 3, timed: int = 10) -> dict:
    """The card's two ceilings, measured here as the device notes ask (``METHOD.md``): memory
    bandwidth from a large device-to-device copy (bytes read plus bytes written) and from a
    read-only pass (a sum over the same tensor: the decoding steps mostly read), and the bf16
    matrix rate from an ``n × n × n`` product on random data; each the best of ``timed`` runs after
    ``warmups`` (a ceiling is the best the card did), timed with CUDA events, under PyTorch's
    default cuBLAS settings. :func:`run` measures them in a process of their own before the
    configurations (``measure("ceilings", …)``): PyTorch reads the cuBLAS workspace variables once,
    at its first matrix product, and a configuration's engine sets its own.

    Args:
        copy_bytes: bytes of the bf16 tensor copied and summed.
        n: the product's size (``2 n³`` FLOPs).

    Returns:
        ``{"device": name, "copy_bytes_per_s", "read_bytes_per_s", "bf16_flops_per_s"}`` (floats) —
        a copy on the H100 80 GB HBM3 of ``KINDS.md`` moves about 3.0e12 B/s (the median of 10 on
        2026-12-06: 3.00e12), the H200 4.3e12; both multiply bf16 at about 7.9e14 FLOP/s (datasheets:
        3.35 and 4.8 TB/s, 989 TFLOP/s dense).

    Raises:
        RuntimeError: no CUDA (from torch).
    """
    import torch

    def best_ms(fn) -> float:
        for _ in range(warmups):
            fn()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(timed)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return min(start.elapsed_time(end) for start, end in events)

    x = torch.ones(copy_bytes // 2, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    size = x.numel() * 2
    copy_ms = best_ms(lambda: y.copy_(x))
    read_ms = best_ms(lambda: x.sum(dtype=torch.float32))
    del x, y
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    mm_ms = best_ms(lambda: a @ b)
    del a, b
    torch.cuda.empty_cache()
    return {"device": torch.cuda.get_device_name(), "copy_bytes_per_s": 2 * size / (copy_ms / 1e3),
            "read_bytes_per_s": size / (read_ms / 1e3), "bf16_flops_per_s": 2 * n**3 / (mm_ms / 1e3)}


def bandwidth_ceiling(ceilings: dict) -> float:
    """Bytes/s a row's memory traffic may move at most: the larger of the measured copy and read
    rates (:func:`measure_ceilings`; a copy only where the read was not measured)."""
    return max(ceilings["copy_bytes_per_s"], ceilings.get("read_bytes_per_s", 0.0))


def workload_shape(backbone: str = DEFAULT_BACKBONE, executor: str | os.PathLike | None = None) -> dict:
    """What the throughput rows' work is made of, counted on a ``meta``-device copy of the backbone
    (no weights are read; a ``random:<shape>`` backbone needs no checkpoint at all): the model's
    sizes, its parameters, those of the linear layers a token passes through (every ``nn.Linear``
    but the LM head) and the executor adapter's LoRA parameters (the random rank-8 one of the rows,
    or ``executor``'s own configuration).

    Returns:
        ``{"params", "untied_embedding_params", "linear_params", "lora_params", "hidden", "vocab",
        "layers", "heads", "kv_heads", "head_dim"}`` (ints; a tied LM head is counted once in
        ``params``; an untied model's input embedding, of which a step reads only its tokens' rows,
        is ``untied_embedding_params``, else 0).

    Raises:
        FileNotFoundError, ValueError: a backbone :func:`policies.backbone.resolve_backbone` refuses,
            a LoRA configuration peft cannot place, or a model without ``nn.Linear`` layers
            (GPT-2's ``Conv1D``: its work would count as none).
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    from policies.adapters import lora_config
    from policies.backbone import random_shape_config, resolve_backbone

    config = random_shape_config(str(backbone).split(":", 1)[1]) if str(backbone).startswith("random:") \
        else AutoConfig.from_pretrained(resolve_backbone(backbone))  # a random shape: its config, no weights built
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
        params = sum(p.numel() for p in model.parameters())  # a tied LM head once
        embedding, head = model.get_input_embeddings().weight, model.get_output_embeddings()
        untied = embedding.numel() if head is not None and head.weight is not embedding else 0
        linear = sum(m.weight.numel() for name, m in model.named_modules()
                     if isinstance(m, torch.nn.Linear) and name != "lm_head")
        if not linear:
            raise ValueError(f"{backbone}: no nn.Linear layers ({type(model).__name__}): its work is not counted here")
        peft_model = get_peft_model(model, LoraConfig.from_pretrained(str(executor)) if executor
                                    else lora_config(r=8, alpha=16))
        lora = sum(p.numel() for name, p in peft_model.named_parameters() if "lora_" in name)
    return {"params": params, "untied_embedding_params": untied, "linear_params": linear, "lora_params": lora,
            "hidden": config.hidden_size,
            "vocab": config.vocab_size, "layers": config.num_hidden_layers, "heads": config.num_attention_heads,
            "kv_heads": config.num_key_value_heads,
            "head_dim": getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads}


def _step_bytes(shape: dict) -> tuple[int, int]:
    """(bytes of weights one forward step reads, K and V bytes per cached token), bf16: the model
    less an untied input embedding (a step reads only its tokens' rows) plus the active adapter;
    ``2 · layers · kv_heads · head_dim · 2``."""
    weights = 2 * (shape["params"] - shape.get("untied_embedding_params", 0) + shape["lora_params"])
    return weights, 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * 2


def prefill_then_decode(bound: dict, batch: int, new: int = NEW_TOKENS) -> float:
    """The most generated tokens/s a schedule that prefills every prompt of the row before it decodes
    any can reach: ``batch · new / (prefill_s + decode_s)``, each phase at its own bound
    (``bound`` from :func:`roofline`). Not a bound on every engine — one that overlaps the
    compute-bound prefill with memory-bound decoding (chunked prefill beside running sequences) can
    go beyond it, up to :func:`roofline`'s ``tokens_per_s`` — but the one that applies to an engine
    whose whole batch arrives at once and is prefilled first (vLLM prefills a 256-request row in a
    few steps of 32,768 tokens, with little decoding beside them).

    Raises:
        KeyError: ``bound`` without ``prefill_s`` or ``decode_s``.
    """
    return batch * new / (bound["prefill_s"] + bound["decode_s"])


def roofline(shape: dict, batch: int, ceilings: dict, prompt: int = PROMPT_TOKENS, new: int = NEW_TOKENS) -> dict:
    """The most generated tokens/s any engine can reach on a throughput row: ``batch`` prompts of
    ``prompt`` tokens, ``new`` tokens each, the adapter on every request, timed from the request to
    the last token as the rows are (the roofline model over the whole row; ``ceilings`` from
    :func:`measure_ceilings`, ``shape`` from :func:`workload_shape`).

    Whatever the schedule — prefills whole or in chunks beside decoding sequences — the row needs
    every FLOP below at the card's matrix rate and every byte below at its bandwidth
    (:func:`bandwidth_ceiling`), with compute and memory at best fully overlapped: it takes at
    least ``max(FLOPs / rate, bytes / bandwidth)``. FLOPs, in bf16: ``2 (P_lin + P_lora)`` per token
    through the layers (every linear layer and the LoRA factors: several adapters share the engine
    in training, so none is merged), ``2 · hidden · vocab`` for the LM head of one token per
    sequence and step, attention ``4 · layers · heads · head_dim`` per (query, key) pair (``QKᵀ``
    and ``PV``; causal: ``L (L + 1) / 2`` pairs in a prefill of ``L``; decoding step ``j`` attends
    to ``prompt + j`` keys). Bytes: each sequence needs ``new`` forwards one after the other (the
    prefill, then ``new − 1`` decoding steps), so at least ``new`` steps, each reading the weights
    once (``2 (P − P_untied_embedding + P_lora)``) — plus each sequence's K and V
    (``2 · layers · kv_heads · head_dim · 2`` per token), written by the prefill and read whole by
    every decoding step. Left out, so the bound stays an upper one: activations, norms, rotary,
    sampling, launches and the host.

    Returns:
        ``{"tokens_per_s", "compute_s", "memory_s", "prefill_s", "decode_s"}`` (floats; seconds for
        the whole row): ``compute_s`` and ``memory_s`` the row's FLOPs and bytes at the ceilings
        (the bound is ``batch · new / max`` of the two); ``prefill_s`` and ``decode_s`` each phase's
        own bound when it runs alone — what a prefill timed alone compares with (the row's bound is
        not their sum: a schedule may overlap the compute-bound prefill with memory-bound decoding).
    """
    flops_s, bytes_s = ceilings["bf16_flops_per_s"], bandwidth_ceiling(ceilings)
    per_token = 2 * (shape["linear_params"] + shape["lora_params"])
    head = 2 * shape["hidden"] * shape["vocab"]
    pair = 4 * shape["layers"] * shape["heads"] * shape["head_dim"]
    weights, kv = _step_bytes(shape)
    steps = range(1, new)  # decoding step j: the prompt and j generated tokens in the cache
    prefill_flops = batch * (prompt * per_token + head + pair * prompt * (prompt + 1) // 2)
    prefill_bytes = weights + batch * prompt * kv
    decode_flops = sum(batch * (per_token + head + pair * (prompt + j)) for j in steps)
    decode_bytes = sum(weights + batch * (prompt + j) * kv for j in steps)
    compute, memory = (prefill_flops + decode_flops) / flops_s, (prefill_bytes + decode_bytes) / bytes_s
    return {"tokens_per_s": batch * new / max(compute, memory), "compute_s": compute, "memory_s": memory,
            "prefill_s": max(prefill_flops / flops_s, prefill_bytes / bytes_s),
            "decode_s": max(decode_flops / flops_s, decode_bytes / bytes_s)}


def bandwidth_floor(shape: dict, batch: int, bandwidth: float, context: float = PROMPT_TOKENS + NEW_TOKENS / 2) -> float:
    """Most generated tokens/s the memory bandwidth allows a decoding step alone (see the module
    docstring): ``batch / ((W + batch · context · kv) / bandwidth)``. It leaves out the prefill's
    FLOPs, which :func:`roofline` counts too (at these shapes the two are within 0.1 %: the rows are
    memory-bound); the measurements before 2026-12-06 quoted it with the H200's 4.3 TB/s on every
    card.

    Args:
        shape: :func:`workload_shape`'s sizes (W = 2 · (params − untied_embedding_params +
            lora_params) bytes in bf16).
        batch: sequences decoded per step.
        bandwidth: bytes/s (:func:`bandwidth_ceiling`).
        context: mean tokens in each sequence's KV cache during decoding.
    """
    weights, kv = _step_bytes(shape)
    return batch / ((weights + batch * context * kv) / bandwidth)


def gradient_agreement(n_seqs: int = 8, length: int = 256, completion: int = 64, seed: int = 0,
                       device: str = "cuda", dtypes=("bfloat16", "float32")) -> dict:
    """How far the learner's gradient graph in each of ``dtypes`` is from the same graph in float64.

    Every graph holds the same backbone weights — the bf16-rounded ones the engine computes with,
    exactly representable in every dtype — and the same executor adapter (seeded random, r = 8,
    fp32 master weights as in training). The loss is the learner's policy-gradient surrogate,
    −Σ A_b · log π(token) / n over the last ``completion`` tokens of ``n_seqs`` random sequences
    of ``length`` tokens with A_b = ±1 (seeded), log π from
    :func:`policies.engines.token_logprobs_batch` (the learner's forward).

    Returns:
        ``{dtype: {"rel_l2": ‖g − g_fp64‖ / ‖g_fp64‖, "cosine": cos(g, g_fp64), "max_abs": …}}``
        over every executor LoRA weight, plus ``"params"`` (their number).
    """
    import torch

    from policies.adapters import activate, attach_role_adapters, lora_config, randomize_adapter
    from policies.backbone import load_backbone
    from policies.engines import token_logprobs_batch

    ref, _, _ = load_backbone(dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(seed)
    vocab = ref.config.vocab_size
    seqs = torch.randint(200, vocab - 1, (n_seqs, length), generator=g).tolist()
    adv = (torch.randint(0, 2, (n_seqs,), generator=g).double() * 2 - 1).to(device)
    grads = {}
    for name in (*dtypes, "float64"):
        dt = getattr(torch, name)
        base, _, _ = load_backbone(dtype=dt)
        with torch.no_grad():
            for p, q in zip(base.parameters(), ref.parameters()):
                p.copy_(q.to(dt))
        pm = attach_role_adapters(base, config=lora_config(r=8, alpha=16)).to(device)
        randomize_adapter(pm, "executor", seed=10, scale=0.05)
        activate(pm, "executor")
        params = [p for n, p in pm.named_parameters() if ".executor." in n and "lora_" in n]
        if name == "float64":  # the reference: adapter weights in fp64 too (same values)
            for p in params:
                p.data = p.data.double()
        for p in params:
            p.requires_grad_(True)
        lp = token_logprobs_batch(pm, seqs, grad=True)[:, -completion:]
        loss = -(adv[:, None].to(lp.dtype) * lp).sum() / lp.numel()
        loss.backward()
        grads[name] = torch.cat([p.grad.detach().double().reshape(-1) for p in params])
        del pm, base
    g64 = grads.pop("float64")
    out: dict = {"params": int(g64.numel())}
    for name, gr in grads.items():
        out[name] = {"rel_l2": float((gr - g64).norm() / g64.norm()),
                     "cosine": float(torch.nn.functional.cosine_similarity(gr, g64, dim=0)),
                     "max_abs": float((gr - g64).abs().max())}
    return out


def kv_cache_gib(config, tokens: int = 256 * 1024) -> int:
    """Whole GiB of KV cache for ``tokens`` tokens of this model (bf16 K and V in every layer),
    with 20 % headroom, and at least the 24 GiB the 135M benchmark was measured with: 256
    co-resident sequences of up to 1,024 tokens never wait for cache."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 2
    return max(24, -(-int(per_token * tokens * 1.2) // 2**30))


def measure(label: str, parts: tuple[str, ...], backbone: str = DEFAULT_BACKBONE,
            executor: str | os.PathLike | None = None, repeats: int = 2) -> dict:
    """One configuration of :data:`CONFIGS` (or ``"transformers"``, ``"transformers-base"``,
    ``"transformers-dynamic"``, ``"gradient"``) in this
    process, on ``backbone`` (a name or folder for :func:`policies.backbone.load_backbone`; the
    gradient comparison always uses the embedded backbone); ``executor``: a saved executor adapter
    folder (:func:`executor_adapter_folder`) every row with an adapter samples from as
    ``executor@0`` instead of the random one; ``repeats``: timed runs per throughput batch size and
    per rollout row (each after its warm-up), whose median is the rate."""
    import torch

    require_cuda()
    if label == "ceilings":  # a process of its own: PyTorch reads the cuBLAS workspace settings once, at first use
        return {"ceilings": measure_ceilings()}
    executor = executor_adapter_folder(executor) if executor else None
    if label in ("transformers", "transformers-base", "transformers-dynamic"):
        res = {}
        adapter, static = label != "transformers-base", label != "transformers-dynamic"
        if "throughput" in parts:
            res["throughput"] = _throughput_transformers(repeats=repeats, backbone=backbone, adapter=adapter,
                                                         static_cache=static, executor=executor)
            print(json.dumps({"partial": res}), flush=True)  # kept if a later part fails
        if "rollout" in parts:
            t0 = time.perf_counter()
            res["rollout"] = _rollout_transformers(backbone, adapter=adapter, static_cache=static, executor=executor,
                                                   repeats=repeats)
            res["rollout_seconds"] = round(time.perf_counter() - t0, 1)
        return res
    if label == "gradient" and "consistency" not in parts:
        return {}
    if label == "gradient":
        return {"gradient": gradient_agreement()}
    from policies.adapters import ROLES, attach_role_adapters, lora_config, randomize_adapter, save_adapter
    from policies.backbone import load_backbone
    from policies.engines import VLLMEngine

    torch.manual_seed(0)
    model, tok, path = load_backbone(backbone)
    pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
    settings = engine_settings(label)
    out: dict = {"config": settings, "backbone": backbone, "kv_cache_gib": kv_cache_gib(model.config)}
    with tempfile.TemporaryDirectory(prefix="advsim-cuda-bench-") as tmp:
        root = Path(tmp)
        lora = settings.get("enable_lora", True)
        for i, r in enumerate(ROLES if lora else ()):
            randomize_adapter(pm, r, seed=10 + i, scale=0.05)
            save_adapter(pm, f"{r}@0", root)
        t0 = time.perf_counter()
        engine = VLLMEngine(path, max_model_len=4096, max_num_seqs=256, max_loras=4, kv_cache_gib=out["kv_cache_gib"],
                            device="cuda", dtype="bfloat16", seed=0, **settings)
        out["start_seconds"] = round(time.perf_counter() - t0, 1)
        out["linear_kernel"] = {"kernel": engine.linear_kernel, "reason": engine.linear_kernel_reason}
        out["sampler"] = engine.sampler
        out["model_runner"] = engine.model_runner
        out["detokenize"] = engine.detokenize
        out["cublas_workspace_config"] = engine.cublas_workspace_config
        out["lora_shrink"] = engine.lora_shrink
        if engine.multiprocessing:
            out["engine_core_patches"] = engine.engine_core_patches
        for r in ROLES if lora else ():
            engine.add_adapter(f"{r}@0", executor if r == "executor" and executor else root / f"{r}@0")
        vocab = model.config.vocab_size
        if "throughput" in parts:
            t0 = time.perf_counter()
            out["throughput"] = _throughput_vllm(engine, vocab, repeats=repeats, adapter="executor@0" if lora else None)
            out["throughput_seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps({"partial": out}), flush=True)  # kept if a later part fails
        if "rollout" in parts:
            from advsim.bench.throughput import rollout_workload

            t0 = time.perf_counter()
            out["rollout"] = rollout_workload(engine, tok, "executor@0" if lora else None, episodes=ROLLOUT_EPISODES,
                                              group=ROLLOUT_GROUP, repeats=repeats, warmup_episodes=ROLLOUT_EPISODES)
            out["rollout_seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps({"partial": out}), flush=True)
        if "profile" in parts and engine.multiprocessing:
            out["profile_skipped"] = "the engine core runs in another process (multiprocessing): not profiled"
        elif "profile" in parts:
            out["profile"] = _profile_vllm(engine, vocab, adapter="executor@0" if lora else None)
            print(json.dumps({"partial": out}), flush=True)
        if "consistency" in parts and lora:  # its rows mix adapters; the no-LoRA diagnostic has none
            t0 = time.perf_counter()
            out["rows"], out["reference"] = _consistency_rows(
                engine, vocab, root, pm,
                on_row=lambda rows: print(json.dumps({"partial": {**out, "rows": dict(rows)}}), flush=True))
            out["rows"] = dict(out["rows"])
            out["consistency_seconds"] = round(time.perf_counter() - t0, 1)
        if engine.sampler.startswith("batched"):
            out["sampler_calls"] = engine.sampler_calls()  # 0: vLLM did not sample through it
    return out


def _last_partial(lines) -> dict:
    """The last ``{"partial": …}`` a measurement printed (what it finished before failing), or {}."""
    return next((json.loads(x)["partial"] for x in reversed(lines) if x.startswith('{"partial"')), {})


def measure_in_subprocess(label: str, parts: tuple[str, ...], timeout: float = 900,
                          backbone: str = DEFAULT_BACKBONE, executor: str | os.PathLike | None = None,
                          repeats: int = 2, log_dir: str | os.PathLike | None = None) -> dict:
    """:func:`measure` in a fresh Python process (its own vLLM mode); the error, if it failed.

    The process's output (its JSON lines, vLLM's log, a traceback) is streamed to
    ``<log_dir>/<label>.log`` as it runs (a temporary folder without ``log_dir``), so a measurement
    killed from outside — a device call running out — leaves what it printed. The file is
    removed when the configuration finishes; a failed or timed-out one keeps it and names it in
    ``"log"``.
    """
    cmd = [sys.executable, "-m", "advsim.bench.cuda", label, ",".join(parts), backbone, str(executor or ""), str(repeats)]
    folder = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="advsim-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    # letters, digits, '_', '.' and '-' only: a device machine's file transfer refuses names with '+' or '='
    log = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '-', label)}.log"
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as sink:
        try:
            proc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc = None
    text = log.read_text(encoding="utf-8", errors="replace")
    json_lines = [x for x in text.splitlines() if x.startswith("{")]
    if proc is None:  # keep the parts that finished before the limit
        # where it was: a first configuration on a fresh machine spends minutes compiling (vLLM's
        # torch.compile, Triton kernels, the cuBLAS proof) before it measures anything
        last = [x.strip()[:200] for x in text.splitlines() if x.strip() and not x.startswith("{")][-3:]
        return {**_last_partial(json_lines), "error": f"timed out after {timeout} s"
                + (f"; last output: {' | '.join(last)}" if last else ""), "log": str(log)}
    if proc.returncode != 0 or not json_lines:
        first = first_exception(text)
        return {**_last_partial(json_lines), "error": f"exit {proc.returncode}: {text[-6000:]}", "log": str(log),
                **({"first_exception": first} if first else {})}
    res = json.loads(json_lines[-1])
    res["wall_seconds"] = round(time.perf_counter() - t0, 1)
    res["engine_log"] = engine_log(text)
    log.unlink()
    if log_dir is None:
        folder.rmdir()
    return res


_LOG_PREFIX = re.compile(r"^\(\w+ pid=\d+\) ?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                         r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] )?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Unsupported|Interrupt|Exit)\b(?::.*)?$")


def first_exception(text: str) -> str | None:
    """The first exception in a process's output: the line that ends the first traceback (the
    first unindented line after ``Traceback (most recent call last):``, whatever the exception's
    class — ``torch._dynamo.exc.Unsupported: …``, ``triton.runtime.errors.OutOfResources: …``), else
    the first line shaped like one (``RuntimeError: …``); prefixes like ``(EngineCore pid=…) ERROR
    12-06 10:35:00 [core.py:1165]`` removed, cut at 300 characters; None if there is none. vLLM's
    engine-core process prints the root cause first and the parent's "Engine core initialization
    failed. See root cause above" last, so the tail of a failed configuration's output misses it."""
    in_traceback, shaped = False, None
    for line in text.splitlines():
        msg = _LOG_PREFIX.sub("", line.rstrip())
        if msg.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and msg and not msg[0].isspace():
            return msg[:300]
        elif shaped is None and _EXCEPTION.match(msg.strip()):
            shaped = msg.strip()[:300]
    return shaped


def engine_log(text: str) -> list[str]:
    """What vLLM chose, from its log: the lines naming the attention backend or the LoRA kernels'
    configuration, and each kind of CUDA graph it captured (``Capturing CUDA graphs (decode,
    FULL)``, without tqdm's progress), prefixes like ``(EngineCore pid=…) INFO … [file:line]``
    removed; sorted, unique, each cut at 200 characters, at most 20."""
    out = set()
    for line in text.splitlines():  # tqdm's \r-separated updates are lines here too
        msg = line.split("] ", 1)[-1]
        low = msg.lower()
        if "capturing cuda graphs (" in low:
            start = low.index("capturing cuda graphs (")
            out.add(msg[start:msg.index(")", start) + 1] if ")" in msg[start:] else msg[start:][:200])
        elif "backend" in low or "lora kernel" in low or "model runner" in low:
            out.add(msg[:200])
    return sorted(out)[:20]


def failures(results: dict) -> list[str]:
    """What makes a :func:`run` a failure: a configuration that did not finish, a row of a
    contract configuration (:func:`is_contract`) whose values are not all bit-identical (or
    whose tokens differ), or a configuration with the batched sampler that vLLM never sampled
    through (``sampler_calls`` 0)."""
    out = [f"{lb}: {r['error'].strip().splitlines()[-1] if r['error'].strip() else 'failed'}"
           for lb, r in results.get("configs", {}).items() if "error" in r]
    for lb, r in results.get("configs", {}).items():
        if r.get("sampler", "").startswith("batched") and not r.get("sampler_calls", 1):
            out.append(f"{lb}: the batched sampler was installed but vLLM never sampled through it")
    for lb, r in results.get("configs", {}).items():
        if not is_contract(lb):
            continue
        for name, row in r.get("rows", {}).items():
            if row["n_equal"] != row["n_tokens"] or not row.get("same_tokens", True):
                out.append(f"{lb}: {name}: {row['n_equal']}/{row['n_tokens']} bit-equal, max {row['max']:.3g}")
    return out


def run(parts: tuple[str, ...] = ("consistency", "throughput"), labels=None, partial: Path | None = None,
        timeout: float = 900, backbone: str = DEFAULT_BACKBONE, executor: str | os.PathLike | None = None,
        repeats: int = 2) -> dict:
    """Measure every configuration, print the tables, return everything (the ``--json`` content).

    Args:
        parts: ``consistency``, ``throughput``, ``rollout`` (whole web-world episodes: the training
            workload) and/or ``profile`` (GPU time per kernel family of one B = 256 generate per
            vLLM configuration: where the contract's cost lies).
        labels: configurations to measure (default: :data:`DEFAULT_LABELS`, plus ``transformers``
            for throughput and ``gradient`` for consistency); a vLLM one may carry overrides,
            ``contract+max_num_batched_tokens=8192`` (:func:`engine_settings`).
        partial: where to write the results so far (atomically) after each configuration, so a
            run cut short keeps what it measured; beside it, the folder ``<partial>.logs`` holds the
            running configuration's output as it is printed, and afterwards each failed one's
            (:func:`measure_in_subprocess`; removed when empty).
        timeout: seconds per configuration.
        backbone: the model every configuration runs (default the embedded SmolLM2-135M-Instruct;
            ``random:smollm2-1.7b`` for SmolLM2-1.7B's shapes with random weights).
        executor: a run's saved executor adapter folder (``adapters/executor@N``, trained on this
            backbone) that every row with an adapter samples from instead of the random one: on
            the rollout workload a trained executor ends episodes at their own length.
        repeats: timed runs per throughput batch size and per rollout row, each configuration's
            rate being their median (vLLM's rate moved 6–50 % from one call to the next at 135M on
            the H200: more runs per row narrow what one call can tell).

    Raises:
        ValueError: a label that is not a configuration (:func:`check_labels`), ``executor`` not such a folder
            (:func:`executor_adapter_folder`), or ``repeats`` below 1, before anything runs.
        RuntimeError: no CUDA here.
    """
    from rich.table import Table

    from advsim.terminal import make_console
    from forms_bench.atomic import atomic_write_text

    check_labels(labels or ())
    executor = executor_adapter_folder(executor) if executor else None
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1; got {repeats!r}")
    require_cuda()
    labels = list(labels or ([*DEFAULT_LABELS]
                             + (["transformers"] if "throughput" in parts or "rollout" in parts else [])
                             + (["gradient"] if "consistency" in parts else [])))
    results = {}
    logs = partial.with_suffix(".logs") if partial is not None else None  # each running configuration's output
    bound: dict = {}  # the card's ceilings and the rows' work, before any configuration runs
    if "throughput" in parts:
        try:
            bound["workload"] = workload_shape(backbone, executor)
        except Exception as exc:  # the rates matter more than their bound: measure them anyway
            bound["workload_error"] = f"{type(exc).__name__}: {exc}"
        card = measure_in_subprocess("ceilings", ("throughput",), timeout=300, backbone=backbone, log_dir=logs)
        bound.update({"ceilings": card["ceilings"]} if "ceilings" in card
                     else {"ceilings_error": card.get("error", f"no ceilings in {sorted(card)}")})
    for lb in labels:
        results[lb] = measure_in_subprocess(lb, parts, timeout=timeout, backbone=backbone, executor=executor,
                                            repeats=repeats, log_dir=logs)
        print(f"{lb}: {'failed' if 'error' in results[lb] else 'done'} in {results[lb].get('wall_seconds', '?')} s",
              flush=True)
        if partial is not None:
            atomic_write_text(partial, json.dumps({**bound, "configs": results}, indent=1))
    if logs is not None and logs.is_dir() and not any(logs.iterdir()):
        logs.rmdir()  # every configuration finished: nothing to keep
    out: dict = {"model": f"{backbone} bf16 + LoRA r=8 role adapters (none in the -base rows)", "backbone": backbone,
                 "executor_adapter": str(executor) if executor else "random (r 8, seed 10, scale 0.05)",
                 "repeats": repeats, **bound, "configs": results}
    con = make_console()  # 132 columns in a log (the device machine's output): rich's 80 cut the headers
    for lb, r in results.items():
        if "error" in r:
            con.print(f"[red]{lb}: failed: {r['error'][-1500:]}[/red]")
            if "first_exception" in r:
                con.print(f"[red]{lb}: first exception: {r['first_exception']}[/red]")
    if "consistency" in parts:
        a, b = results.get("contract-eager", {}), results.get("contract", {})
        if "reference" in a and "reference" in b:
            out["graphs_vs_eager"] = {**_diff(a["reference"]["logprobs"], b["reference"]["logprobs"]),
                                      "same_tokens": a["reference"]["token_ids"] == b["reference"]["token_ids"]}
        table = Table(title="Rollout vs. training log-probs on CUDA (consistent rows must be 0)")
        for col in ("config", "scenario", "tokens", "bit-equal", "max |Δℓ|", "mean", "std", "k3 KL", "reqs/step"):
            table.add_column(col, justify="left" if col in ("config", "scenario") else "right", no_wrap=col == "config")
        for lb, r in results.items():
            for name, row in r.get("rows", {}).items():
                table.add_row(lb, name, str(row["n_tokens"]), str(row["n_equal"]), f"{row['max']:.3g}",
                              f"{row['mean']:.3g}", f"{row['std']:.3g}", f"{row['k3']:.3g}",
                              str(row.get("max_requests_per_step") or "–"))
        if results.get("gradient", {}).get("gradient"):
            gr = results["gradient"]["gradient"]
            out["gradient_vs_fp64"] = gr
            for name, v in gr.items():
                if name != "params":
                    con.print(f"learner graph in {name}: adapter gradient vs fp64 rel L2 {v['rel_l2']:.3g}, "
                              f"cosine {v['cosine']:.6f} ({gr['params']} weights)")
        if "graphs_vs_eager" in out:
            g = out["graphs_vs_eager"]
            table.add_row("contract vs contract-eager", "same requests, 64 co-resident", str(g["n_tokens"]),
                          str(g["n_equal"]), f"{g['max']:.3g}", f"{g['mean']:.3g}", f"{g['std']:.3g}",
                          f"{g['k3']:.3g}", "–")
        con.print(table)
    if "throughput" in parts:
        rate = {lb: r["throughput"] for lb, r in results.items() if r.get("throughput")}
        for key, what in (("ceilings_error", "the card's ceilings"), ("workload_error", "the rows' work")):
            if key in out:
                con.print(f"[red]{what} could not be measured, so no roofline: {out[key][-500:]}[/red]")
        limits = {}
        if "ceilings" in out and "workload" in out:
            card, shape = out["ceilings"], out["workload"]
            limits = {str(b): roofline(shape, b, card) for b in BATCHES}
            out.update(roofline=limits, floor={str(b): bandwidth_floor(shape, b, bandwidth_ceiling(card)) for b in BATCHES})
            read = f", read {card['read_bytes_per_s'] / 1e12:.2f} TB/s" if "read_bytes_per_s" in card else ""
            con.print(f"roofline on {card['device']} (measured: copy {card['copy_bytes_per_s'] / 1e12:.2f} TB/s{read}, "
                      f"bf16 matrix product {card['bf16_flops_per_s'] / 1e12:.0f} TFLOP/s): " + "; ".join(
                          f"B = {b}: {v['tokens_per_s']:,.0f} tokens/s (compute >= {v['compute_s'] * 1e3:,.0f} ms, "
                          f"memory >= {v['memory_s'] * 1e3:,.0f} ms; a prefill alone >= {v['prefill_s'] * 1e3:,.0f} ms)"
                          for b, v in limits.items()))
        table = Table(title=f"Generated tokens/s on CUDA: {PROMPT_TOKENS}-token prompts, {NEW_TOKENS} new tokens, "
                            f"executor adapter on every request (none in -base rows), median of {repeats}; "
                            "prefill: the same requests with one new token")
        for col in ("engine", *(f"B = {b}" for b in BATCHES), *(f"of roofline, B = {b}" for b in BATCHES),
                    *(f"prefill s, B = {b}" for b in BATCHES)):
            table.add_column(col, justify="left" if col == "engine" else "right", no_wrap=col == "engine")
        for lb, t in rate.items():
            table.add_row(lb, *(f"{t[str(b)]['tokens_per_s']:,.0f}" for b in BATCHES),
                          *(f"{t[str(b)]['tokens_per_s'] / limits[str(b)]['tokens_per_s']:.1%}" if limits else "–"
                            for b in BATCHES),
                          *(f"{t[str(b)]['prefill_seconds']:.3f}" if "prefill_seconds" in t[str(b)] else "–"
                            for b in BATCHES))
        con.print(table)
        if limits and "transformers" in rate:  # the issue's target, against what the card allows
            out["three_times_transformers"] = {}
            for b in map(str, BATCHES):
                want = 3 * rate["transformers"][b]["tokens_per_s"]
                share = want / limits[b]["tokens_per_s"]
                in_turn = want / prefill_then_decode(limits[b], int(b))
                out["three_times_transformers"][b] = {"tokens_per_s": want, "of_roofline": share,
                                                      "of_prefill_then_decode": in_turn}
                con.print(f"3 x transformers, B = {b}: {want:,.0f} tokens/s = {share:.0%} of the roofline, "
                          f"{in_turn:.0%} of what a schedule that prefills every prompt before decoding allows")
        ratios = {}
        for b in map(str, BATCHES):
            for num, den in ratio_pairs(rate):
                if num in rate and den in rate:
                    ratios[f"{num} / {den}, B = {b}"] = rate[num][b]["tokens_per_s"] / rate[den][b]["tokens_per_s"]
        out["ratios"] = ratios
        for k, v in ratios.items():
            con.print(f"{k}: {v:.2f}")
    roll = {lb: r["rollout"] for lb, r in results.items() if r.get("rollout")}
    if roll:
        table = Table(title=f"Rollouts on CUDA: {ROLLOUT_EPISODES} web-world executor episodes per run ({ROLLOUT_GROUP} "
                            "per task, the warm start's level mix), one generate per turn, stop at end-of-sequence; "
                            f"rates: median of {repeats} runs, the rest over all; tokens are generated tokens, 'in generate' "
                            "the share of wall time inside engine.generate")
        for col in ("engine", "episodes / s", "tokens / s", "turns / episode", "tokens / turn", "in generate", "success",
                    "digest per run"):
            table.add_column(col, justify="left" if col == "engine" else "right", no_wrap=col == "engine",
                             min_width=8 if col == "in generate" else None)
        for lb, r in roll.items():
            table.add_row(lb, f"{r['episodes_per_s']:.2f}", f"{r['tokens_per_s']:,.0f}", f"{r['turns_per_episode']:.2f}",
                          f"{r['tokens_per_turn']:.1f}", f"{r['generate_share']:.0%}",
                          f"{statistics.fmean(x['success'] for x in r['runs']):.1%}",
                          " ".join(x.get("digest", "–")[:8] for x in r["runs"]))
        con.print(table)
        out["rollout_ratios"] = {f"{num} / {den}, episodes/s": roll[num]["episodes_per_s"] / roll[den]["episodes_per_s"]
                                 for num, den in ratio_pairs(roll)}
        for k, v in out["rollout_ratios"].items():
            con.print(f"{k}: {v:.2f}")
    prof = {lb: r["profile"] for lb, r in results.items() if r.get("profile")}
    if prof:
        first = next(iter(prof.values()))
        con.print(_family_table(f"GPU time per kernel family (ms), one generate of B = {first['batch']}, "
                                f"{first['prompt_tokens']}-token prompts, {first['new_tokens']} new tokens, "
                                "executor adapter", prof, (("all kernels", "kernel_ms"), ("wall", "wall_ms"))))
        for lb, p in prof.items():
            if "host" not in p:
                continue
            h = p["host"]
            table = Table(title=f"{lb}: host side of the same generate — recorded CPU ops {h['cpu_op_ms']:,.1f} ms "
                                f"({h['calls']:,} calls), untraced (Python, waiting) {h['untraced_ms']:,.1f} ms "
                                f"of {p['wall_ms']:,.1f} ms")
            for col in ("op (self CPU time)", "calls", "ms"):
                table.add_column(col, justify="left" if col.startswith("op") else "right")
            for r in h["top"][:10]:
                table.add_row(r["name"][:90], f"{r['calls']:,}", f"{r['ms']:,.1f}")
            con.print(table)
        dec = {lb: p["decode"] for lb, p in prof.items() if "decode" in p}
        if dec:
            con.print(_family_table(f"decode alone: GPU time per kernel family (ms), one generate of B = "
                                    f"{first['batch']} x {first['new_tokens']} new tokens whose prompts the prefix "
                                    "cache serves (all but their last token); wall timed without a profiler",
                                    dec, (("all kernels", "kernel_ms"), ("wall (under the GPU profiler)",
                                                                         "profiled_wall_ms"),
                                          ("wall", "wall_ms"), ("wall per step", "per_step_ms"),
                                          ("GPU busy, % of wall", "gpu_busy_pct"),
                                          (f"a step, marginal ({2 * first['new_tokens']} tokens less "
                                           f"{first['new_tokens']})", "marginal_step_ms"),
                                          ("GPU busy, % of the marginal step", "gpu_busy_marginal_pct"))))
        for lb, p in prof.items():
            if "decode_error" in p:
                con.print(f"{lb}: decode-alone profile failed: {p['decode_error']}")
        py = {lb: p["python"] for lb, p in prof.items() if "python" in p}
        if py:
            con.print(_family_table("host Python time per family (ms, self time under cProfile; a second generate of "
                                    "the same shape)", py,
                                    (("all profiled", "profiled_ms"), ("wall (under cProfile)", "wall_ms"))))
    return out


def _family_table(title: str, per_config: dict[str, dict], totals) -> "Table":
    """A rich table of milliseconds per family (rows) and configuration (columns): each
    ``per_config[label]["families"]`` (families in first-seen order, 0 where a configuration has
    none), then one row per ``(row name, key)`` of ``totals`` read from each configuration ("–"
    where one lacks it or holds None: a result saved before the key existed, a marginal step lost
    in noise)."""
    from rich.table import Table

    fams = list(dict.fromkeys(f for p in per_config.values() for f in p["families"]))
    table = Table(title=title)
    table.add_column("family")
    for lb in per_config:
        table.add_column(lb, justify="right")
    for f in fams:
        table.add_row(f, *(f"{p['families'].get(f, 0.0):,.1f}" for p in per_config.values()))
    for name, key in totals:
        table.add_row(name, *(f"{p[key]:,.1f}" if p.get(key) is not None else "–" for p in per_config.values()))
    return table


def _positive_int(text: str, name: str) -> int:
    """``text`` as an integer >= 1, or ValueError naming ``name``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {text!r}")
    return value


def main(argv: list[str]) -> int:
    """The module's command line; returns the exit status.

    ``LABEL PARTS [BACKBONE [EXECUTOR [REPEATS]]]``: one configuration's :func:`measure`, printed
    as JSON on the last line (how :func:`measure_in_subprocess` runs it; an empty EXECUTOR is the
    random adapter); 1 on an exception.
    ``OUT.json [label,…|all] [timeout_s] [backbone] [part,…] [executor] [repeats]``: a whole :func:`run`,
    written to OUT.json; 2 on bad input or no CUDA (one line, no traceback), 1 when a configuration
    failed or a contract row differs (:func:`failures`, as ``advsim bench … --device cuda``), else 0.
    """
    if 2 <= len(argv) <= 5 and not argv[0].endswith(".json"):
        try:
            kw = {"backbone": argv[2]} if len(argv) > 2 else {}
            kw.update({"executor": argv[3] or None} if len(argv) > 3 else {})
            kw.update({"repeats": _positive_int(argv[4], "repeats")} if len(argv) > 4 else {})
            print(json.dumps(measure(argv[0], tuple(argv[1].split(",")), **kw)))
        except Exception:
            traceback.print_exc()
            return 1
        return 0
    from forms_bench.atomic import atomic_write_text

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    out_path = Path(argv[0])
    chosen = argv[1].split(",") if len(argv) > 1 and argv[1] != "all" else None
    try:
        res = run(labels=chosen, partial=out_path.with_suffix(".partial.json"),
                  timeout=float(argv[2]) if len(argv) > 2 else 900,
                  backbone=argv[3] if len(argv) > 3 else DEFAULT_BACKBONE,
                  **({"parts": tuple(argv[4].split(","))} if len(argv) > 4 else {}),
                  executor=argv[5] if len(argv) > 5 and argv[5] else None,
                  repeats=_positive_int(argv[6], "repeats") if len(argv) > 6 else 2)
    except (ValueError, RuntimeError) as exc:  # an unknown label, no CUDA, a bad executor folder
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write_text(out_path, json.dumps(res, indent=1))
    bad = failures(res)
    if bad:
        print("FAILED: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
