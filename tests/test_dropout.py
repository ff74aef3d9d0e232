"""nmt.models.dropout: CPU masks of 16 random bits per element from torch's generator; attention written out
for them."""

import pytest
import torch
import torch.nn.functional as F

from nmt.models.dropout import Dropout, dropout, keep_mask
from nmt.models.transformer import attend


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_masks_drop_a_share_p_and_keep_the_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(1000, 1000)
    y = dropout(x, p, training=True)
    assert abs(float((y == 0).float().mean()) - p) < 0.003
    assert abs(float(y.mean()) - 1.0) < 0.005
    values = torch.unique(y).tolist()
    assert values[0] == 0.0 and len(values) == 2 and values[1] == pytest.approx(1 / (1 - p), rel=1e-4)


def test_odd_shapes_and_independent_elements():
    torch.manual_seed(0)
    keep = keep_mask(torch.Size([3, 7, 5]), 0.5)
    assert keep.shape == (3, 7, 5) and keep.dtype == torch.uint8
    big = keep_mask(torch.Size([200_000]), 0.5).float()
    # neighbours (the four 16-bit pieces of one 64-bit draw) are uncorrelated
    assert abs(float((big[1:] * big[:-1]).mean()) - 0.25) < 0.005


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(0)
    x = torch.randn(64, 33, requires_grad=True)
    y = dropout(x, 0.2, training=True)
    y.backward(torch.ones_like(y))
    kept = y != 0
    assert torch.equal(kept, x.grad != 0)
    torch.testing.assert_close(y[kept], x.detach()[kept] * x.grad[kept])


def test_masks_follow_the_seed_and_eval_is_identity():
    x = torch.randn(10, 10)
    torch.manual_seed(3)
    a = Dropout(0.1)(x)
    torch.manual_seed(3)
    b = Dropout(0.1)(x)
    assert torch.equal(a, b)
    module = Dropout(0.1).eval()
    assert module(x) is x
    assert dropout(x, 0.0, training=True) is x


def test_bf16_keeps_its_dtype():
    x = torch.randn(8, 16, dtype=torch.bfloat16, requires_grad=True)
    y = dropout(x, 0.1, training=True)
    y.sum().backward()
    assert y.dtype == x.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("causal", [False, True])
def test_written_out_attention_equals_torchs(causal):
    """p below 2**-17 rounds to 0: the written-out path keeps every weight and must equal the fused one."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask, is_causal=causal)
    got = attend(q, k, v, None if causal else mask, causal, p=1e-9)
    torch.testing.assert_close(got, want)
