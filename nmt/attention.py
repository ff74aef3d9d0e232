"""Attention mechanisms; multi-head attention runs on torch's fused scaled_dot_product_attention.

Legend: B batch, S source length, T target length, D model size, H heads.
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
