"""Label-smoothed cross-entropy (Szegedy et al. 2016; used by Vaswani et al. 2017, section 5.4).

Convention: the target distribution gives ``1 - eps`` to the reference token and spreads ``eps``
uniformly over the ``V - 1`` tokens other than PAD (the reference token included), so PAD, which
the model never has to emit, gets no mass and the distribution sums to 1. This is PyTorch's
``label_smoothing`` with PAD left out of the vocabulary.

The gradient with respect to the logits has the closed form
``softmax - (1 - eps) * onehot - eps / (V - 1) * not_pad``, so the backward pass is written out
instead of chaining autograd through log_softmax, gather and mean: three passes over the (tokens x
vocabulary) matrix instead of about eight.

Legend: B batch, T target length, V vocabulary, N = B*T.
"""

import torch
import torch.nn.functional as F
from torch import nn

from nmt.vocab import PAD

# Other toolkits: fairseq's label_smoothed_nll_loss gives every token but the reference
# eps / (V - 1), PAD included, and the reference 1 - eps; OpenNMT-py's LabelSmoothingLoss gives
# eps / (V - 2) to every token but PAD and the reference, and the reference 1 - eps. Ours
# differs from OpenNMT-py's only in whether the reference shares the spread mass.


class _SmoothedNll(torch.autograd.Function):
    """Summed label-smoothed loss and plain NLL of ``logits`` (N, V) against ``target`` (N,), PAD ignored."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
        lprobs = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (N, V)
        keep = target != PAD
        nll_tok = -lprobs.gather(1, target[:, None])[:, 0]  # (N,)
        V = lprobs.size(-1)
        smooth_tok = -(lprobs.sum(dim=-1) - lprobs[:, PAD]) / (V - 1)  # mean over the non-PAD tokens
        loss = ((1.0 - smoothing) * nll_tok + smoothing * smooth_tok).masked_fill(~keep, 0.0).sum()
        nll = nll_tok.masked_fill(~keep, 0.0).sum()
        ctx.save_for_backward(lprobs, target, keep)
        ctx.smoothing, ctx.logits_dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_nll: torch.Tensor):
        lprobs, target, keep = ctx.saved_tensors
        eps, V = ctx.smoothing, lprobs.size(-1)
        grad = lprobs.exp()  # softmax
        grad.sub_(eps / (V - 1))
        grad[:, PAD] += eps / (V - 1)  # PAD has no smoothing mass
        grad.scatter_add_(1, target[:, None], grad.new_full((target.size(0), 1), -(1.0 - eps)))
        grad.mul_((keep.to(grad.dtype) * grad_loss)[:, None])
        return grad.to(ctx.logits_dtype), None, None


class LabelSmoothedCrossEntropy(nn.Module):
    """Summed cross-entropy over non-padding targets, with the smoothing mass spread over the non-PAD vocabulary."""

    def __init__(self, smoothing: float) -> None:
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits: torch.Tensor, trg_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss of ``logits`` (B, T, V) against ``trg_out`` (B, T).

        :return: the smoothed loss summed over tokens (for the gradient) and the plain negative
            log-likelihood summed over tokens (for perplexity, no gradient), both scalars in float32
        """
        return _SmoothedNll.apply(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1), self.smoothing)
