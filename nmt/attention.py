"""Attention mechanisms: additive and multiplicative attention for RNNs, and multi-head attention.

Multi-head attention runs on torch's fused scaled_dot_product_attention.

Legend: B batch, S source length, T target length, D model size, H heads; for the recurrent
attentions Q query (decoder state) size, K key (encoder output) size, A additive attention size.
"""

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017, section 3.2.2).

    Self-attention projects queries, keys and values with one fused matrix; cross-attention
    projects the keys and values of the encoder memory once per sentence (see :meth:`project_kv`),
    so incremental decoding reuses them at every step.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, self_attention: bool) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.dropout = dropout
        self.self_attention = self_attention
        if self_attention:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        return x.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, L, D/H)

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the encoder memory (B, S, D), each shaped (B, H, S, D/H)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """Attend from ``x`` (B, L, D).

        :param mask: bool, True where attention is allowed; shape (B, 1, 1, S) for key padding
        :param causal: hide future positions (self-attention over a full target sequence)
        :param kv: precomputed cross-attention keys/values from :meth:`project_kv`
        :param cache: self-attention keys/values of earlier steps, each (B, H, t, D/H)
        :return: output (B, L, D) and the updated self-attention cache (None for cross-attention)
        """
        B, L, D = x.shape
        if self.self_attention:
            q, k, v = (self._heads(t) for t in self.qkv(x).chunk(3, dim=-1))
            if cache is not None:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            new_cache = (k, v)
        else:
            q, (k, v) = self._heads(self.q(x)), kv
            new_cache = None
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            # With a cache the single new query may see every cached key, so no causal mask is needed.
            is_causal=causal and cache is None and L > 1,
        )
        y = y.transpose(1, 2).reshape(B, L, D)
        return self.out(y), new_cache


class RecurrentAttention(nn.Module):
    """Attention of an RNN decoder state over the encoder outputs, one step at a time.

    Subclasses define ``self.key``, the part of the score that depends only on the encoder outputs
    (computed once per sentence by :meth:`project_keys`), and :meth:`score`, the per-step part.
    """

    key: nn.Module

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor:
        """Keys of the encoder outputs ``memory`` (B, S, K), computed once per sentence."""
        return self.key(memory)

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Alignment scores (B, S) of the decoder state ``query`` (B, Q) against ``keys``."""
        raise NotImplementedError

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from the decoder state ``query`` (B, Q).

        :param keys: from :meth:`project_keys`, shape (B, S, A or Q)
        :param values: encoder outputs, shape (B, S, K)
        :param src_mask: bool, True on real source tokens, shape (B, S)
        :return: context (B, K) and attention weights (B, S), exactly zero on padding
        """
        weights = self.score(query, keys).masked_fill(~src_mask, float("-inf")).softmax(dim=-1)
        context = torch.bmm(weights.unsqueeze(1).to(values.dtype), values).squeeze(1)
        return context, weights


class BahdanauAttention(RecurrentAttention):
    """Additive attention ``e_j = v^T tanh(W s + U h_j)`` (Bahdanau et al. 2015, section 3.1, appendix A.1.2).

    ``U h_j`` does not depend on the decoder state, so :meth:`project_keys` computes it once per
    sentence and each decoding step only adds ``W s``. The bias of ``U`` is the bias inside the tanh.
    The same scorer is Luong et al.'s "concat" score (section 3.1).
    """

    def __init__(self, query_size: int, key_size: int, attention_dim: int) -> None:
        super().__init__()
        self.query = nn.Linear(query_size, attention_dim, bias=False)  # W
        self.key = nn.Linear(key_size, attention_dim)  # U
        self.energy = nn.Linear(attention_dim, 1, bias=False)  # v

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``v^T tanh(W s + U h_j)`` with ``keys`` = ``U h`` (B, S, A)."""
        return self.energy(torch.tanh(keys + self.query(query).unsqueeze(1))).squeeze(-1)  # (B, S)


class LuongAttention(RecurrentAttention):
    """Multiplicative attention (Luong et al. 2015, section 3.1): ``dot`` ``s^T h_j`` or ``general`` ``s^T W h_j``.

    For ``general`` :meth:`project_keys` computes ``W h_j`` once per sentence, so each step is one
    batched dot product. ``dot`` needs the decoder state and encoder outputs to have one size.
    """

    def __init__(self, query_size: int, key_size: int, method: str) -> None:
        super().__init__()
        if method not in ("dot", "general"):
            raise ValueError(f"Luong attention method must be 'dot' or 'general', got {method!r}")
        if method == "dot" and query_size != key_size:
            raise ValueError(f"dot attention needs equal decoder ({query_size}) and encoder ({key_size}) sizes")
        self.key = nn.Linear(key_size, query_size, bias=False) if method == "general" else nn.Identity()  # W

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``s^T h_j`` with ``keys`` = ``W h`` (general) or ``h`` (dot), shape (B, S, Q)."""
        return torch.bmm(keys, query.unsqueeze(2).to(keys.dtype)).squeeze(2)  # (B, S)
