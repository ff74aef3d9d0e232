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
