"""Attention weights over the source: the part of attention that the architectures share.

Each architecture's attention lives in its own module: additive and multiplicative attention in
:mod:`nmt.models.rnn`, multi-step attention in :mod:`nmt.models.convs2s`, multi-head attention in
:mod:`nmt.models.transformer`.

Legend: B batch, S source length.
"""

import torch


def masked_softmax(scores: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """Attention weights: the softmax over source positions of ``scores``, exactly zero on padding.

    :param scores: alignment scores, shape (..., S), e.g. (B, S) or (B, T, S)
    :param src_mask: bool, True on real source tokens, broadcastable to ``scores``, e.g. (B, S) or (B, 1, S)
    :return: weights of the shape of ``scores`` that sum to 1 over S
    """
    return scores.masked_fill(~src_mask, float("-inf")).softmax(dim=-1)
