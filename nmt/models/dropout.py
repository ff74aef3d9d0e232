"""Dropout (Srivastava et al. 2014) whose CPU masks cost a quarter of torch's.

torch's CPU dropout draws one number from its Mersenne Twister per element (``bernoulli_``), a
large share of a small model's training step on a CPU, where a multiplication over the same tensor
costs a small fraction of it (benchmarks/README.md, "Measurements behind the code"). Here each
element gets 16 random bits, four per 64-bit draw of the same generator, and is dropped where they
are below ``p * 2**16`` (so ``p`` is rounded to a multiple of 1/65,536; the scale of the kept
elements uses the rounded ``p``). The masks come from torch's default generator, so
``torch.manual_seed`` and the RNG state that checkpoints keep govern them as before.

On CUDA, torch's fused dropout is used unchanged.
"""

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 1 << 16


def keep_mask(shape: torch.Size, p: float) -> torch.Tensor:
    """A uint8 tensor of ``shape``, 0 where an element is dropped (probability ``round(p * 2**16) / 2**16``), else 1.

    uint8, not bool: multiplying by it is 2-4 times faster than ``masked_fill`` or a bool product.
    """
    n = shape.numel()
    bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(1 << 63), (1 << 63) - 1)  # 64 uniform bits
    return (bits.view(torch.int16)[:n].view(shape) >= round(p * _LEVELS) - _LEVELS // 2).view(torch.uint8)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        keep = keep_mask(x.shape, p)
        ctx.save_for_backward(keep)
        ctx.scale = _LEVELS / (_LEVELS - round(p * _LEVELS))
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``F.dropout(x, p, training)``, with cheaper masks on the CPU."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training)
    return _Dropout.apply(x, p)


class Dropout(nn.Dropout):
    """``nn.Dropout`` with the masks of :func:`dropout`; same parameters, same state dict."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)
