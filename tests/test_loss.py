"""Label-smoothed cross-entropy."""

import torch
import torch.nn.functional as F

from nmt.data import PAD
from nmt.loss import LabelSmoothedCrossEntropy


def test_matches_torch_and_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)
    target = torch.randint(4, 11, (2, 5))
    target[1, 3:] = PAD
    loss, nll = LabelSmoothedCrossEntropy(0.1)(logits, target)
    expected = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    )
    expected_nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected_nll)


def test_no_smoothing_equals_nll():
    logits, target = torch.randn(3, 4, 9), torch.randint(4, 9, (3, 4))
    loss, nll = LabelSmoothedCrossEntropy(0.0)(logits, target)
    torch.testing.assert_close(loss, nll)


def test_closed_form_gradient_matches_torch_and_finite_differences():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(4, 11, (2, 5))
    target[1, 3:] = PAD
    criterion = LabelSmoothedCrossEntropy(0.1)
    assert torch.autograd.gradcheck(lambda x: criterion(x, target)[0], (logits,))
    (2.0 * criterion(logits, target)[0]).backward()
    ours, logits.grad = logits.grad, None
    expected = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    )
    (2.0 * expected).backward()
    torch.testing.assert_close(ours, logits.grad)
    assert ours[1, 3:].abs().sum() == 0  # padding gets no gradient
    bf16 = logits.detach().to(torch.bfloat16).requires_grad_()
    criterion(bf16, target)[0].backward()
    assert bf16.grad.dtype == torch.bfloat16
