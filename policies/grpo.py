"""The GRPO-style update of AdvSim2Real (Section 4, "policy optimisation"; DESIGN.md "Rewards").

    L(ϑ) = 1/N Σ_i Σ_u m_iu [ −Â_i ℓ_iu + β (e^{ℓ0_iu − ℓ_iu} − (ℓ0_iu − ℓ_iu) − 1) ]

with ℓ_iu the active adapter's log-prob of token u of sample i, ℓ0_iu the backbone's (every
adapter disabled), m_iu selecting the role's own generated tokens (prompts and world-model
observations are context only), Â_i the sample's group-normalized advantage and N the number
of samples. The KL term is the k3 estimator of KL(π_ϑ ‖ π_0). There is no old-policy ratio
and no clipping.

Numerics (*Bit-consistent RL*): the forward *values* of ℓ come from the rollout engine's
``score`` (bit-identical to the sampled log-probs), the gradient from the peft graph, joined as
``value + (graph − graph.detach())`` by :func:`policies.numerics.surrogate`. Every update reports
diff = |ℓ_rollout − ℓ_train| (max, mean, std) and the k3 KL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


def grpo_loss(logp: torch.Tensor, ref_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
              beta: float, n_samples: int | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss L(ϑ) above, for one (micro-)batch.

    Args:
        logp: ``[B, T]`` float, ℓ (with gradient).
        ref_logp: ``[B, T]`` float, ℓ0 (no gradient needed).
        advantages: ``[B]`` float, Â_i.
        mask: ``[B, T]`` bool or 0/1 float, m_iu.
        beta: β ≥ 0.
        n_samples: N in 1/N (default B; pass the full batch size when accumulating micro-batches).

    Returns:
        ``(loss, stats)``: the scalar loss and ``{"pg": …, "kl": …, "tokens": …}`` where ``pg``
        is the policy-gradient part and ``kl`` the mean k3 KL per masked token.

    Raises:
        ValueError: on mismatched shapes.
    """
    if logp.shape != ref_logp.shape or logp.shape != mask.shape or advantages.shape != logp.shape[:1]:
        raise ValueError(f"shapes: logp {tuple(logp.shape)}, ref {tuple(ref_logp.shape)}, "
                         f"mask {tuple(mask.shape)}, advantages {tuple(advantages.shape)}")
    n = n_samples if n_samples is not None else logp.shape[0]
    m = mask.to(logp.dtype)
    delta = ref_logp.to(logp.dtype) - logp
    k3 = torch.exp(delta) - delta - 1.0
    pg = -(advantages.to(logp.dtype)[:, None] * logp)
    loss = ((pg + beta * k3) * m).sum() / n
    tokens = float(m.sum())
    stats = {"pg": float((pg.detach() * m).sum() / n), "kl": float((k3.detach() * m).sum() / max(tokens, 1.0)),
             "tokens": tokens}
    return loss, stats


def sft_loss(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Supervised warm-start loss: mean negative log-likelihood of the masked (target) tokens."""
    m = mask.to(logp.dtype)
    return -(logp * m).sum() / m.sum().clamp_min(1.0)


@dataclass
class Sample:
    """One trainable completion: prompt + the role's generated tokens.

    Attributes:
        prompt_ids: context token ids (not trained).
        completion_ids: the role's generated token ids (trained; m = 1).
        rollout_logprobs: the engine's log-probs of ``completion_ids`` at sampling time.
        advantage: Â for this sample.
        adapter: adapter version that sampled (``"executor@3"``).
    """

    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    rollout_logprobs: Sequence[float]
    advantage: float
    adapter: str


def completion_tensor(rows: Sequence[Sequence[float]], lengths: Sequence[int], width: int,
                      dtype=torch.float32, device=None) -> torch.Tensor:
    """Right-pad per-sample float lists to ``[B, width]`` (zeros past each length), in ``dtype``
    on ``device`` (None: the CPU). The values are built on the CPU and copied once."""
    out = torch.zeros((len(rows), width), dtype=dtype)
    for b, (r, n) in enumerate(zip(rows, lengths)):
        if n:
            out[b, :n] = torch.tensor(list(r[:n]), dtype=dtype)
    return out if device is None else out.to(device)
