"""The AdvSim2Real loss: a hand-computed value and the gradient direction on a tiny model."""

import math

import pytest
import torch

from policies.grpo import grpo_loss, sft_loss


def test_loss_value_by_hand():
    # two samples, three positions; mask selects (0,0),(0,1) and (1,2)
    logp = torch.tensor([[-1.0, -2.0, -9.0], [-9.0, -9.0, -0.5]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0, 0.0], [0.0, 0.0, -0.25]])
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1, 1, 0], [0, 0, 1]])
    beta = 0.1
    loss, stats = grpo_loss(logp, ref, adv, mask, beta)
    # pg terms: -2·(-1) + -2·(-2) + 1·(-0.5) = 2 + 4 - 0.5 = 5.5
    # k3 terms (δ = ℓ0 − ℓ): δ=-0.5 -> e^-0.5 + 0.5 - 1; δ=0 -> 0; δ=0.25 -> e^0.25 - 0.25 - 1
    k3 = (math.exp(-0.5) - 0.5) + (math.exp(0.25) - 1.25)
    expected = (5.5 + beta * k3) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["tokens"] == 3.0
    assert stats["pg"] == pytest.approx(5.5 / 2, abs=1e-6)
    assert stats["kl"] == pytest.approx(k3 / 3, abs=1e-6)
    loss.backward()
    # d/dℓ of [−Â ℓ + β(e^{ℓ0−ℓ} − (ℓ0−ℓ) − 1)] = −Â + β(1 − e^{ℓ0−ℓ}), divided by N = 2
    g = logp.grad
    assert g[0, 0].item() == pytest.approx((-2 + beta * (1 - math.exp(-0.5))) / 2, abs=1e-6)
    assert g[0, 2].item() == 0.0 and g[1, 0].item() == 0.0
    assert g[1, 2].item() == pytest.approx((1 + beta * (1 - math.exp(0.25))) / 2, abs=1e-6)


def test_shape_errors():
    with pytest.raises(ValueError, match="shapes"):
        grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3), 0.1)


def test_gradient_direction_on_a_tiny_model():
    """One SGD step on the loss raises ℓ of a positively advantaged completion and lowers ℓ of a
    negatively advantaged one (β = 0)."""
    torch.manual_seed(0)
    vocab, dim = 11, 8
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, vocab))
    seqs = torch.tensor([[1, 2, 3, 4], [1, 5, 6, 7]])

    def logps():
        lp = torch.log_softmax(model(seqs[:, :-1]), -1)
        return lp.gather(-1, seqs[:, 1:, None]).squeeze(-1)

    mask = torch.tensor([[0, 1, 1], [0, 1, 1]])  # the first next-token is prompt context
    before = logps().detach()
    loss, _ = grpo_loss(logps(), before, torch.tensor([1.0, -1.0]), mask, beta=0.0)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.5 * p.grad
    after = logps().detach()
    gain = ((after - before) * mask).sum(-1)
    assert gain[0] > 0 and gain[1] < 0


def test_sft_loss_is_masked_mean_nll():
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -4.0]])
    mask = torch.tensor([[1, 0], [1, 1]])
    assert sft_loss(logp, mask).item() == pytest.approx((1 + 2 + 4) / 3)
