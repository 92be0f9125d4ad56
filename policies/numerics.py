"""The numerics contract between rollout and training (*Bit-consistent RL*; DESIGN.md "Engines and numerics").

* **Values from the engine.** The trainer's per-token log-probs ℓ take their forward *values*
  from ``engine.score`` (the inference kernels define the numbers) and their *gradient* from
  the peft graph: ``ℓ = value + (graph − graph.detach())`` (:func:`surrogate`). In floating
  point ``g − g.detach()`` is exactly 0 for finite g, so ℓ equals the engine's value bit for
  bit, and ∂ℓ/∂θ = ∂graph/∂θ.
* **diff.** For every sampled token (the role's own generated tokens), with the same weights
  and prefix: ``|ℓ_rollout − ℓ_train|``; report max, mean, std and the k3 KL estimator
  ``r − 1 − log r`` with ``r = exp(ℓ_train − ℓ_rollout)`` (mean over tokens), each update.
  ``consistency="strict"`` raises :class:`ConsistencyError` on any non-zero value;
  ``"measure"`` logs; ``"off"`` skips the check (still reports).
* **Token ids are never re-derived from text**: :func:`rollout_batch` takes the ids the engine
  sampled (:attr:`policies.engines.Generation.token_ids`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence

log = logging.getLogger(__name__)

Consistency = Literal["strict", "measure", "off"]


class ConsistencyError(RuntimeError):
    """Rollout and training log-probs differ under ``consistency="strict"``; carries the report."""

    def __init__(self, report: "DiffReport") -> None:
        super().__init__(f"rollout/training log-probs differ: {report.summary()}")
        self.report = report


@dataclass(frozen=True)
class DiffReport:
    """Rollout-vs-training log-prob difference over all sampled tokens of an update.

    Attributes:
        n_tokens: number of compared tokens.
        n_equal: tokens whose two log-probs are bit-identical.
        max, mean, std: of |ℓ_rollout − ℓ_train| (nats; std is the population std).
        k3: mean of ``r − 1 − log r``, ``r = exp(ℓ_train − ℓ_rollout)`` (KL(rollout‖train) estimate).
    """

    n_tokens: int
    n_equal: int
    max: float
    mean: float
    std: float
    k3: float

    @property
    def exact(self) -> bool:
        """True iff every compared token is bit-identical (max = mean = std = k3 = 0)."""
        return self.n_equal == self.n_tokens and self.max == 0.0 and self.k3 == 0.0

    def summary(self) -> str:
        return (f"{self.n_equal}/{self.n_tokens} equal, max={self.max:.3g}, mean={self.mean:.3g}, "
                f"std={self.std:.3g}, k3={self.k3:.3g}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff_report(rollout, train, mask=None) -> DiffReport:
    """Compare two log-prob tensors over the tokens selected by ``mask``.

    Args:
        rollout, train: same-shape float tensors (or nested lists) of log-probs (nats).
        mask: optional bool/0-1 tensor of the same shape; default all tokens.

    Returns:
        :class:`DiffReport`; statistics computed in float64 from the given values.
    """
    import torch

    r = torch.as_tensor(rollout).detach()
    t = torch.as_tensor(train).detach()
    if r.shape != t.shape:
        raise ValueError(f"shape mismatch: rollout {tuple(r.shape)} vs train {tuple(t.shape)}")
    if mask is not None:
        m = torch.as_tensor(mask).bool()
        r, t = r[m], t[m]
    r, t = r.reshape(-1), t.reshape(-1)
    n = int(r.numel())
    if n == 0:
        return DiffReport(0, 0, 0.0, 0.0, 0.0, 0.0)
    n_equal = int((r == t).sum())
    d = (r.double() - t.double()).abs()
    log_ratio = t.double() - r.double()
    k3 = (torch.expm1(log_ratio) - log_ratio).mean()
    return DiffReport(n, n_equal, float(d.max()), float(d.mean()), float(d.std(unbiased=False)),
                      float(k3))


def check(report: DiffReport, consistency: Consistency = "strict") -> DiffReport:
    """Apply the consistency policy to a report: raise (strict), log (measure) or nothing (off).

    Raises:
        ConsistencyError: ``strict`` and the report is not exact.
    """
    if consistency not in ("strict", "measure", "off"):
        raise ValueError(f"consistency must be strict, measure or off, got {consistency!r}")
    if consistency == "strict" and not report.exact:
        raise ConsistencyError(report)
    if consistency == "measure":
        log.info("log-prob diff: %s", report.summary())
    return report


def surrogate(value, graph):
    """Per-token log-probs whose value is ``value`` (bit for bit) and whose gradient is ``graph``'s.

    Args:
        value: tensor of engine log-probs (no grad), shape S.
        graph: differentiable log-probs of the same tokens from the peft model, shape S.

    Returns:
        ``value + (graph − graph.detach())`` in ``graph``'s dtype.
    """
    v = value.to(graph.dtype).detach()
    return v + (graph - graph.detach())


@dataclass
class RolloutBatch:
    """Tensors for one update, built from engine generations (right-padded).

    Attributes:
        input_ids: long ``[B, T]`` prompt + completion ids (padding 0).
        attention_mask: long ``[B, T]`` (1 on real tokens).
        completion_mask: bool ``[B, T-1]``; True where position i predicts a sampled token
            (``input_ids[b, i+1]`` is a completion token).
        rollout_logprobs: float32 ``[B, T-1]``, the engine's sampled log-probs at masked
            positions, 0 elsewhere.
        adapters: the adapter of each row (``AdapterRef`` or None).
    """

    input_ids: Any
    attention_mask: Any
    completion_mask: Any
    rollout_logprobs: Any
    adapters: list


def rollout_batch(generations: Sequence) -> RolloutBatch:
    """Pack :class:`policies.engines.Generation` objects into padded tensors (ids as sampled)."""
    import torch

    B = len(generations)
    T = max(len(g.request.prompt_ids) + len(g.token_ids) for g in generations)
    ids = torch.zeros((B, T), dtype=torch.long)
    att = torch.zeros((B, T), dtype=torch.long)
    cmask = torch.zeros((B, T - 1), dtype=torch.bool)
    lps = torch.zeros((B, T - 1), dtype=torch.float32)
    for b, g in enumerate(generations):
        seq = list(g.request.prompt_ids) + list(g.token_ids)
        P, n = len(g.request.prompt_ids), len(g.token_ids)
        if len(g.logprobs) != n:
            raise ValueError(f"generation {b}: {n} tokens but {len(g.logprobs)} log-probs")
        ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        att[b, : len(seq)] = 1
        cmask[b, P - 1: P - 1 + n] = True
        lps[b, P - 1: P - 1 + n] = torch.tensor(g.logprobs, dtype=torch.float32)
    return RolloutBatch(ids, att, cmask, lps, [g.adapter for g in generations])


def engine_logprobs(engine, batch: RolloutBatch):
    """``engine.score`` of every row of ``batch`` (with its own adapter), as float32 ``[B, T-1]`` (0 past the end)."""
    import torch

    seqs = [batch.input_ids[b, : int(batch.attention_mask[b].sum())].tolist()
            for b in range(batch.input_ids.shape[0])]
    scores = engine.score(seqs, batch.adapters)
    out = torch.zeros(batch.completion_mask.shape, dtype=torch.float32)
    for b, s in enumerate(scores):
        out[b, : len(s)] = torch.tensor(s, dtype=torch.float32)
    return out


def graph_logprobs(model, batch: RolloutBatch):
    """Differentiable ``[B, T-1]`` log-probs of ``batch`` under ``model``'s *active* adapter.

    All rows must use the model's active adapter (the role being trained); the backbone
    reference (adapters disabled) is taken with :func:`policies.adapters.reference_policy`.
    """
    from policies.engines import token_logprobs_batch

    seqs = [batch.input_ids[b, : int(batch.attention_mask[b].sum())].tolist()
            for b in range(batch.input_ids.shape[0])]
    lp = token_logprobs_batch(model, seqs, grad=True)
    T1 = batch.completion_mask.shape[1]
    if lp.shape[1] < T1:
        lp = __import__("torch").nn.functional.pad(lp, (0, T1 - lp.shape[1]))
    return lp


@dataclass
class TrainLogprobs:
    """Output of :func:`train_logprobs`.

    Attributes:
        logprobs: ``[B, T-1]`` tensor: value = the engine's score bit for bit, gradient = the
            peft graph's; use it only where ``mask`` is True.
        mask: bool ``[B, T-1]``, the sampled tokens.
        diff: rollout-vs-training :class:`DiffReport` (``engine.generate`` vs ``engine.score``).
        graph_gap: :class:`DiffReport` of the engine's score vs the peft graph's own values
            (how far the differentiable path is from the inference numbers; not required to be 0).
    """

    logprobs: Any
    mask: Any
    diff: DiffReport
    graph_gap: DiffReport


def train_logprobs(engine, model, generations: Sequence, consistency: Consistency = "strict",
                   graph: Any = None) -> TrainLogprobs:
    """Training log-probs for one update: engine values, peft-graph gradient, and the diff check.

    Args:
        engine: the engine that sampled ``generations`` (its ``score`` defines the values).
        model: the PeftModel whose active adapter is the one that sampled every generation.
        generations: :class:`policies.engines.Generation` list (token ids as sampled).
        consistency: ``strict`` (raise :class:`ConsistencyError` unless diff = 0 exactly),
            ``measure`` (log it) or ``off``.
        graph: optional precomputed differentiable ``[B, T-1]`` log-probs (else
            :func:`graph_logprobs`).

    Returns:
        :class:`TrainLogprobs`.

    Source: *Bit-consistent RL* ("the inference kernels define the numbers; training only adds
    the backward pass"; ``visible + (graph − graph.detach())``).
    """
    batch = rollout_batch(generations)
    values = engine_logprobs(engine, batch)
    diff = check(diff_report(batch.rollout_logprobs, values, batch.completion_mask), consistency)
    g = graph if graph is not None else graph_logprobs(model, batch)
    lp = surrogate(values, g)
    gap = diff_report(values, g.detach().float(), batch.completion_mask)
    return TrainLogprobs(lp, batch.completion_mask, diff, gap)
