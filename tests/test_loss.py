"""Label-smoothed cross-entropy."""

import pytest
import torch
import torch.nn.functional as F

from nmt.training.loss import LabelSmoothedCrossEntropy
from nmt.vocab import PAD


def smoothed_targets(target: torch.Tensor, V: int, eps: float) -> torch.Tensor:
    """The explicit target distribution (N, V): 1 - eps on the reference, eps / (V - 1) on every non-PAD
    token; rows of PAD targets are all zero."""
    dist = torch.full((target.numel(), V), eps / (V - 1), dtype=torch.float64)
    dist[:, PAD] = 0.0
    dist[torch.arange(target.numel()), target.view(-1)] += 1.0 - eps
    dist[target.view(-1) == PAD] = 0.0
    return dist


def reference_loss(logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """Cross-entropy against :func:`smoothed_targets`, by PyTorch's soft-target cross_entropy."""
    V = logits.size(-1)
    dist = smoothed_targets(target, V, eps).to(logits.dtype)
    return F.cross_entropy(logits.reshape(-1, V), dist, reduction="sum")


def batch(dtype=torch.float32):
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, dtype=dtype)
    target = torch.randint(4, 11, (2, 5))
    target[1, 3:] = PAD
    return logits, target


def test_the_target_distribution_leaves_pad_out():
    _, target = batch()
    dist = smoothed_targets(target, 11, 0.1)
    keep = target.view(-1) != PAD
    torch.testing.assert_close(dist[keep].sum(dim=1), torch.ones(int(keep.sum()), dtype=torch.float64))
    assert dist[:, PAD].abs().sum() == 0


def test_matches_the_explicit_distribution_and_ignores_padding():
    logits, target = batch()
    loss, nll = LabelSmoothedCrossEntropy(0.1)(logits, target)
    expected_nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, reference_loss(logits, target, 0.1))
    torch.testing.assert_close(nll, expected_nll)
    torch_convention = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    )  # spreads the mass over PAD too
    assert float(loss) != pytest.approx(float(torch_convention))


def test_no_smoothing_equals_nll():
    logits, target = torch.randn(3, 4, 9), torch.randint(4, 9, (3, 4))
    loss, nll = LabelSmoothedCrossEntropy(0.0)(logits, target)
    torch.testing.assert_close(loss, nll)


def test_closed_form_gradient_matches_the_explicit_distribution_and_finite_differences():
    logits, target = batch(torch.float64)
    logits.requires_grad_()
    criterion = LabelSmoothedCrossEntropy(0.1)
    assert torch.autograd.gradcheck(lambda x: criterion(x, target)[0], (logits,))
    (2.0 * criterion(logits, target)[0]).backward()
    ours, logits.grad = logits.grad, None
    (2.0 * reference_loss(logits, target, 0.1)).backward()
    torch.testing.assert_close(ours, logits.grad)
    assert ours[1, 3:].abs().sum() == 0  # padding gets no gradient
    bf16 = logits.detach().to(torch.bfloat16).requires_grad_()
    criterion(bf16, target)[0].backward()
    assert bf16.grad.dtype == torch.bfloat16
