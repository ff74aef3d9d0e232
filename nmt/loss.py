"""Label-smoothed cross-entropy (Szegedy et al. 2016; used by Vaswani et al. 2017, section 5.4).

Legend: B batch, T target length, V vocabulary.
"""

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data import PAD


class LabelSmoothedCrossEntropy(nn.Module):
    """Summed cross-entropy over non-padding targets, with the smoothing mass spread over the vocabulary."""

    def __init__(self, smoothing: float) -> None:
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits: torch.Tensor, trg_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss of ``logits`` (B, T, V) against ``trg_out`` (B, T).

        :return: the smoothed loss summed over tokens (for the gradient) and the plain negative
            log-likelihood summed over tokens (for perplexity), both scalars in float32
        """
        lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))  # (B*T, V)
        target = trg_out.reshape(-1)
        keep = target != PAD
        nll = -lprobs.gather(1, target[:, None])[:, 0].masked_fill(~keep, 0.0).sum()
        smooth = -lprobs.mean(dim=-1).masked_fill(~keep, 0.0).sum()
        return (1.0 - self.smoothing) * nll + self.smoothing * smooth, nll.detach()
