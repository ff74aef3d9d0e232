"""Attention of the three architectures: shapes, masks, and the papers' formulas on tiny examples.

The classes are imported from the architecture modules that use them.

Legend: B batch, S source length, T target length, D model size, H hidden size.
"""

import math

import pytest
import torch

from nmt.models.convs2s import ConvS2SAttention
from nmt.models.rnn import BahdanauAttention, LuongAttention
from nmt.models.transformer import MultiHeadAttention

B, S, T, D, H = 2, 5, 4, 8, 6


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def padding_mask() -> torch.Tensor:
    """(B, S): the first sentence has all 5 tokens, the second 3 and 2 padding positions."""
    return torch.tensor([[True] * 5, [True] * 3 + [False] * 2])


def recurrent(kind: str) -> torch.nn.Module:
    return BahdanauAttention(H, H, 7) if kind == "additive" else LuongAttention(H, H, kind)


def mha(self_attention: bool) -> MultiHeadAttention:
    return MultiHeadAttention(D, 2, dropout=0.0, self_attention=self_attention).eval()


@pytest.mark.parametrize("kind", ["additive", "dot", "general"])
def test_recurrent_attention_shapes_and_padding(kind):
    attention, mask = recurrent(kind), padding_mask()
    query, memory = torch.randn(B, H), torch.randn(B, S, H)
    context, weights = attention(query, attention.project_keys(memory), memory, mask)
    assert context.shape == (B, H) and weights.shape == (B, S)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(B))
    assert torch.all(weights[~mask] == 0)  # exactly zero, not just small
    changed = memory.clone()
    changed[1, 3:] = 100.0  # what lies under the padding does not matter
    context2, _ = attention(query, attention.project_keys(changed), changed, mask)
    assert torch.equal(context, context2)


def test_bahdanau_equals_its_formula():
    """e_j = v^T tanh(W s + U h_j), a = softmax(e), c = sum_j a_j h_j (Bahdanau et al. 2015, A.1.2)."""
    attention, mask = recurrent("additive"), torch.ones(B, S, dtype=torch.bool)
    s, h = torch.randn(B, H), torch.randn(B, S, H)
    W, U, b_U, v = attention.query.weight, attention.key.weight, attention.key.bias, attention.energy.weight
    context, weights = attention(s, attention.project_keys(h), h, mask)
    for i in range(B):
        e = torch.stack([(v @ torch.tanh(W @ s[i] + U @ h[i, j] + b_U)).squeeze() for j in range(S)])
        a = torch.softmax(e, dim=0)
        assert torch.allclose(weights[i], a, atol=1e-6)
        assert torch.allclose(context[i], (a[:, None] * h[i]).sum(dim=0), atol=1e-6)


@pytest.mark.parametrize("kind", ["dot", "general"])
def test_luong_equals_its_formula(kind):
    """score(s, h_j) = s^T h_j (dot) or s^T W h_j (general) (Luong et al. 2015, section 3.1)."""
    attention, mask = recurrent(kind), torch.ones(B, S, dtype=torch.bool)
    s, h = torch.randn(B, H), torch.randn(B, S, H)
    W = attention.key.weight if kind == "general" else torch.eye(H)
    context, weights = attention(s, attention.project_keys(h), h, mask)
    for i in range(B):
        a = torch.softmax(torch.stack([s[i] @ W @ h[i, j] for j in range(S)]), dim=0)
        assert torch.allclose(weights[i], a, atol=1e-6)
        assert torch.allclose(context[i], a @ h[i], atol=1e-6)


def test_luong_dot_needs_equal_sizes():
    with pytest.raises(ValueError, match="dot attention needs equal"):
        LuongAttention(8, 16, "dot")


def multi_head_formula(x: torch.Tensor, memory: torch.Tensor, attention: MultiHeadAttention, mask, causal):
    """Concat_h softmax(Q_h K_h^T / sqrt(d) + M) V_h, then W_o (Vaswani et al. 2017, section 3.2), one sentence."""
    if attention.self_attention:
        q, k, v = (x @ attention.qkv.weight.T + attention.qkv.bias).chunk(3, dim=-1)
    else:
        q = x @ attention.q.weight.T + attention.q.bias
        k, v = (memory @ attention.kv.weight.T + attention.kv.bias).chunk(2, dim=-1)
    d = D // attention.n_heads
    heads = []
    for h in range(attention.n_heads):
        part = slice(h * d, (h + 1) * d)
        scores = q[:, part] @ k[:, part].T / math.sqrt(d)  # (L, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v[:, part])
    return torch.cat(heads, dim=-1) @ attention.out.weight.T + attention.out.bias


def test_self_attention_equals_its_formula_with_causal_mask():
    attention, x = mha(True), torch.randn(B, T, D)
    y, cache = attention(x, causal=True)
    assert y.shape == (B, T, D)
    assert [c.shape for c in cache] == [(B, 2, T, D // 2)] * 2
    for i in range(B):
        assert torch.allclose(y[i], multi_head_formula(x[i], x[i], attention, None, causal=True), atol=1e-5)


def test_cross_attention_equals_its_formula_with_padding():
    attention, x, memory = mha(False), torch.randn(B, T, D), torch.randn(B, S, D)
    mask = padding_mask()
    y, cache = attention(x, mask[:, None, None, :], kv=attention.project_kv(memory))
    assert y.shape == (B, T, D) and cache is None
    for i in range(B):
        expected = multi_head_formula(x[i], memory[i], attention, mask[i], causal=False)
        assert torch.allclose(y[i], expected, atol=1e-5)


def test_cross_attention_ignores_padded_keys():
    attention, x, memory = mha(False), torch.randn(B, T, D), torch.randn(B, S, D)
    mask = padding_mask()[:, None, None, :]
    y, _ = attention(x, mask, kv=attention.project_kv(memory))
    changed = memory.clone()
    changed[1, 3:] = 100.0
    y2, _ = attention(x, mask, kv=attention.project_kv(changed))
    assert torch.allclose(y, y2, atol=1e-6)


def test_causal_self_attention_does_not_see_the_future():
    attention, x = mha(True), torch.randn(B, T, D)
    y, _ = attention(x, causal=True)
    changed = x.clone()
    changed[:, -1] = 100.0
    y2, _ = attention(changed, causal=True)
    assert torch.allclose(y[:, :-1], y2[:, :-1], atol=1e-6)
    assert not torch.allclose(y[:, -1], y2[:, -1])


def test_incremental_self_attention_equals_the_full_causal_one():
    """One query at a time with a key/value cache gives the outputs of the causal pass over all positions."""
    attention, x = mha(True), torch.randn(B, T, D)
    full, _ = attention(x, causal=True)
    cache = (torch.zeros(B, 2, 0, D // 2), torch.zeros(B, 2, 0, D // 2))
    steps = []
    for t in range(T):
        y, cache = attention(x[:, t : t + 1], causal=True, cache=cache)
        steps.append(y)
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_heads_must_divide_the_model_size():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(10, 3, 0.0, self_attention=True)


def test_convs2s_attention_equals_its_formula_with_padding():
    """c = W_o (scale * sum_j softmax_j(d . z_j) (z_j + e_j)), d = W_d h + b_d + g (Gehring et al. 2017, 3.3)."""
    C, E = 6, 4
    attention, mask = ConvS2SAttention(C, E), padding_mask()
    h, g = torch.randn(B, T, C), torch.randn(B, T, E)
    keys, values = torch.randn(B, S, E), torch.randn(B, S, E)
    m = mask.sum(dim=1).float()
    enc = {"keys": keys, "values": values, "src_mask": mask, "src_scale": m * torch.sqrt(1.0 / m)}
    out = attention(h, g, enc)
    assert out.shape == (B, T, C)
    for i in range(B):
        n = int(m[i])
        d = attention.query(h[i]) + g[i]  # (T, E)
        a = torch.softmax(d @ keys[i, :n].T, dim=-1)  # only the real source positions
        assert torch.allclose(out[i], attention.out(a @ values[i, :n] * enc["src_scale"][i]), atol=1e-5)
