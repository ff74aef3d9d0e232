"""Transformer encoder-decoder (Vaswani et al. 2017), post-norm as in the paper or pre-norm.

Legend: B batch, S source length, T target length, D model size, H heads, L query length, V vocabulary.
"""

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nmt.model_config import TransformerConfig
from nmt.models.decoding_state import PerSentence, Unmoved
from nmt.models.dropout import Dropout, dropout
from nmt.vocab import PAD


def sinusoid_table(length: int, d_model: int) -> torch.Tensor:
    """Sinusoidal position encodings with base 10000 (section 3.5), shape (length, D).

    Computed on the CPU even where the model is built on the meta device to receive its weights
    (:func:`nmt.models.seq2seq.model_from_spec`): the table is no weight, and the file does not hold it.
    """
    pos = torch.arange(length, dtype=torch.float32, device="cpu")[:, None]
    inv_freq = torch.arange(0, d_model, 2, dtype=torch.float32, device="cpu") * (-math.log(10000.0) / d_model)
    inv_freq = torch.exp(inv_freq)
    table = torch.zeros(length, d_model, device="cpu")
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq)
    return table


class TransformerEmbedding(nn.Module):
    """Token embedding scaled by sqrt(D) plus sinusoidal positions, then dropout."""

    def __init__(self, vocab_size: int, config: TransformerConfig) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, config.d_model, padding_idx=PAD)
        nn.init.normal_(self.tokens.weight, std=config.d_model**-0.5)
        nn.init.zeros_(self.tokens.weight[PAD])
        self.scale = math.sqrt(config.d_model)
        self.register_buffer("positions", sinusoid_table(config.max_positions, config.d_model), persistent=False)
        self.dropout = Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Embed ``ids`` (B, L) whose first position is ``start``; returns (B, L, D)."""
        L = ids.size(1)
        if start + L > self.positions.size(0):
            raise ValueError(f"sequence of length {start + L} exceeds max_positions {self.positions.size(0)}")
        return self.dropout(self.tokens(ids) * self.scale + self.positions[start : start + L])


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017, section 3.2.2).

    Self-attention projects queries, keys and values with one fused matrix; cross-attention
    projects the keys and values of the encoder memory once per sentence (see :meth:`project_kv`),
    so incremental decoding reuses them at every step. The attention itself is torch's fused
    ``scaled_dot_product_attention``.
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
        rows: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """Attend from ``x`` (B, L, D).

        :param mask: bool, True where attention is allowed; shape (B, 1, 1, S) for key padding
        :param causal: hide future positions (self-attention over a full target sequence)
        :param kv: precomputed cross-attention keys/values from :meth:`project_kv`
        :param cache: self-attention keys/values of earlier steps, each (B', H, t, D/H)
        :param rows: the row of ``cache`` that each row of ``x`` continues (B,); None: the cache's rows in order
        :return: output (B, L, D) and the updated self-attention cache (None for cross-attention)
        """
        B, L, D = x.shape
        if self.self_attention:
            q, k, v = (self._heads(t) for t in self.qkv(x).chunk(3, dim=-1))
            if cache is not None:
                k, v = extend(cache[0], rows, k), extend(cache[1], rows, v)
            new_cache = (k, v)
        else:
            q, (k, v) = self._heads(self.q(x)), kv
            new_cache = None
        # B, or B / K in beam search: keys and values per sentence (nmt.models.decoding_state.PerSentence)
        n = k.size(0)
        if n != B:  # the K queries of a sentence's hypotheses as one query block: (n, H, K*L, D/H)
            q = q.reshape(n, B // n, self.n_heads, L, D // self.n_heads).transpose(1, 2).flatten(2, 3)
        # With a cache the single new query may see every cached key, so no causal mask is needed.
        y = attend(q, k, v, mask, causal and cache is None and L > 1, self.dropout if self.training else 0.0)
        if n != B:
            y = y.unflatten(2, (B // n, L)).transpose(1, 2).flatten(0, 1)  # (B, H, L, D/H)
        y = y.transpose(1, 2).reshape(B, L, D)
        return self.out(y), new_cache


def extend(cache: torch.Tensor, rows: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """``cache``'s ``rows`` followed by ``new`` along the length: (B', H, t, D/H), (B, H, L, D/H) -> (B, H, t+L, D/H).

    One copy, the selected rows straight into the result, where ``torch.cat`` after search's reordering makes two
    (see :class:`nmt.models.decoding_state.Unmoved`). The result's dtype is ``torch.cat``'s: under autocast ``new`` is
    bfloat16 or float16 and the first, empty cache float32 (the encoder's), so the caches stay float32.
    """
    if rows is not None and torch.is_grad_enabled() and (cache.requires_grad or new.requires_grad):
        cache, rows = cache.index_select(0, rows), None  # out= below has no derivative
    if rows is None:  # the cache's rows in their order
        return torch.cat([cache, new], dim=2)
    t = cache.size(2)
    dtype = torch.promote_types(cache.dtype, new.dtype)
    out = new.new_empty(new.size(0), new.size(1), t + new.size(2), new.size(3), dtype=dtype)
    torch.index_select(cache, 0, rows, out=out[:, :, :t])
    out[:, :, t:] = new
    return out


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool, p: float
) -> torch.Tensor:
    """softmax(q k^T / sqrt(D/H)) v with dropout ``p`` on the weights; q (B, H, L, D/H), k and v (B, H, S, D/H).

    torch's fused ``scaled_dot_product_attention``, except with dropout on the CPU: there torch
    computes the weights anyway, and writing it out lets them take :func:`nmt.models.dropout.dropout`'s masks.

    :param mask: bool, True where attention is allowed, broadcastable to (B, H, L, S)
    :return: (B, H, L, D/H)
    """
    if q.device.type != "cpu" or (p == 0.0 and q.size(-2) > 8):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
    # CPU: with dropout, or few queries (a search step), where two matrix products beat the fused kernel
    # (benchmarks/README.md, "What made it faster").
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (B, H, L, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if causal:
        future = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return dropout(scores.softmax(dim=-1), p, training=True) @ v


class FeedForward(nn.Sequential):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(
            nn.Linear(config.d_model, config.ff_dim),
            nn.ReLU(),
            Dropout(config.dropout),
            nn.Linear(config.ff_dim, config.d_model),
        )


class Sublayer(nn.Module):
    """Residual wrapper: ``x + drop(f(norm(x)))`` (pre-norm) or ``norm(x + drop(f(x)))`` (post-norm)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"

    def forward(self, x: torch.Tensor, f, *args, **kwargs) -> tuple[torch.Tensor, Any]:
        y, extra = f(self.norm(x) if self.pre_norm else x, *args, **kwargs)
        x = x + self.dropout(y)
        return (x if self.pre_norm else self.norm(x)), extra


def _plain(module: nn.Module):
    """Adapt a module returning one tensor to the (output, extra) convention of :class:`Sublayer`."""
    return lambda x: (module(x), None)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, self_attention=True)
        self.ff = FeedForward(config)
        self.attn_sub, self.ff_sub = Sublayer(config), Sublayer(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x, _ = self.attn_sub(x, self.self_attn, mask)
        x, _ = self.ff_sub(x, _plain(self.ff))
        return x


class TransformerDecoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, self_attention=True)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, self_attention=False)
        self.ff = FeedForward(config)
        self.self_sub, self.cross_sub, self.ff_sub = Sublayer(config), Sublayer(config), Sublayer(config)

    def forward(self, x, src_mask, kv, cache=None, rows=None):
        """``x`` (B, L, D); ``kv`` cross keys/values; ``cache`` self keys/values of earlier steps, whose ``rows`` (B,)
        the rows of ``x`` continue."""
        x, cache = self.self_sub(x, self.self_attn, None, causal=True, cache=cache, rows=rows)
        x, _ = self.cross_sub(x, self.cross_attn, src_mask, kv=kv)
        x, _ = self.ff_sub(x, _plain(self.ff))
        return x, cache


class TransformerEncoder(nn.Module):
    """Stack of self-attention layers over the embedded source."""

    def __init__(self, embedding: TransformerEmbedding, config: TransformerConfig) -> None:
        super().__init__()
        self.embedding = embedding
        self.layers = nn.ModuleList(TransformerEncoderLayer(config) for _ in range(config.enc_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()

    def forward(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode ``src`` (B, S); returns ``memory`` (B, S, D) and ``src_mask`` (B, 1, 1, S)."""
        mask = (src != PAD)[:, None, None, :]
        x = self.embedding(src)
        for layer in self.layers:
            x = layer(x, mask)
        return {"memory": self.final_norm(x), "src_mask": mask}


class TransformerDecoder(nn.Module):
    """Causal self-attention, cross-attention and feed-forward layers; a key/value cache for steps."""

    def __init__(self, embedding: TransformerEmbedding, vocab_size: int, config: TransformerConfig) -> None:
        super().__init__()
        self.embedding = embedding
        self.layers = nn.ModuleList(TransformerDecoderLayer(config) for _ in range(config.dec_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        self.output = nn.Linear(config.d_model, vocab_size, bias=False)
        if config.tie_output:
            self.output.weight = embedding.tokens.weight
        self.n_heads = config.n_heads

    def forward(self, trg_in: torch.Tensor, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for ``trg_in`` (B, T)."""
        x = self.embedding(trg_in)
        for layer in self.layers:
            x, _ = layer(x, enc["src_mask"], layer.cross_attn.project_kv(enc["memory"]))
        return self.output(self.final_norm(x))

    def init_state(self, enc: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Cross keys/values of every layer, computed once, and an empty self-attention cache.

        The cache is :class:`~nmt.models.decoding_state.Unmoved`: each step takes the rows that ``rows`` (B,) names,
        which search reorders and selects in its place.
        """
        memory = enc["memory"]
        B, _, D = memory.shape
        empty = memory.new_zeros(B, self.n_heads, 0, D // self.n_heads)
        # contiguous once here, else every step's attention copies them to fold (B, H) into one batch dimension
        cross = [tuple(t.contiguous() for t in layer.cross_attn.project_kv(memory)) for layer in self.layers]
        return {
            "sentence": PerSentence({"src_mask": enc["src_mask"], "cross": cross}),
            "cache": Unmoved([(empty, empty) for _ in self.layers]),
            "rows": torch.arange(B, device=memory.device),
            "pos": 0,
        }

    def step(self, trg_prev: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Logits (B, V) for the next position given the previous token ``trg_prev`` (B,).

        Each layer's cache leaves ``state`` once the layer has extended it, so that a step holds two copies of one
        layer's cache at a time, not of every layer's (benchmarks/README.md, "What made it faster"): ``state``
        cannot be stepped from again.
        """
        x = self.embedding(trg_prev[:, None], start=state["pos"])  # (B, 1, D)
        sentence, old, caches = state["sentence"].value, state["cache"].value, []
        for i, (layer, kv) in enumerate(zip(self.layers, sentence["cross"], strict=True)):
            x, cache = layer(x, sentence["src_mask"], kv, old[i], state["rows"])
            old[i] = None  # released: the extension holds what later steps need
            caches.append(cache)
        logits = self.output(self.final_norm(x))[:, 0]
        rows = torch.arange(x.size(0), device=x.device)  # the new caches' rows are the hypotheses' own
        return logits, {**state, "cache": Unmoved(caches), "rows": rows, "pos": state["pos"] + 1}


def build_transformer(
    config: TransformerConfig, src_vocab: int, trg_vocab: int, shared_vocab: bool
) -> tuple[TransformerEncoder, TransformerDecoder]:
    """Encoder and decoder; source and target embeddings are one matrix when ``share_embeddings``."""
    trg_embedding = TransformerEmbedding(trg_vocab, config)
    src_embedding = (
        trg_embedding if config.share_embeddings and shared_vocab else TransformerEmbedding(src_vocab, config)
    )
    encoder = TransformerEncoder(src_embedding, config)
    decoder = TransformerDecoder(trg_embedding, trg_vocab, config)
    for name, p in [*encoder.named_parameters(), *decoder.named_parameters()]:
        if p.dim() == 2 and "embedding" not in name:
            nn.init.xavier_uniform_(p)
    return encoder, decoder
