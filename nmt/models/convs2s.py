"""Convolutional sequence to sequence model, ConvS2S (Gehring et al. 2017).

Legend: B batch, S source length, T target length, E embedding size, C channels of a
convolutional block, V vocabulary.
"""

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from nmt.model_config import ConvS2SConfig
from nmt.models.attention import masked_softmax
from nmt.models.dropout import Dropout
from nmt.vocab import PAD


def per_layer(values: tuple[int, ...], n_layers: int) -> tuple[int, ...]:
    """``values`` with one entry per layer (a single value is repeated)."""
    return tuple(values) * n_layers if len(values) == 1 else tuple(values)


def linear(n_in: int, n_out: int, dropout: float = 0.0) -> nn.Module:
    """Weight-normalised linear layer initialised to keep the variance of its (dropped-out) input (section 3.5)."""
    layer = nn.Linear(n_in, n_out)
    nn.init.normal_(layer.weight, std=math.sqrt((1 - dropout) / n_in))
    nn.init.zeros_(layer.bias)
    return weight_norm(layer)


def glu_conv(n_in: int, n_out: int, kernel_size: int, dropout: float) -> nn.Module:
    """Weight-normalised convolution to ``2 * n_out`` channels feeding a GLU (section 3.5: std sqrt(4p/n))."""
    conv = nn.Conv1d(n_in, 2 * n_out, kernel_size)
    nn.init.normal_(conv.weight, std=math.sqrt(4 * (1 - dropout) / (kernel_size * n_in)))
    nn.init.zeros_(conv.bias)
    return weight_norm(conv)


def embedding(vocab_size: int, dim: int) -> nn.Embedding:
    table = nn.Embedding(vocab_size, dim, padding_idx=PAD)
    nn.init.normal_(table.weight, std=0.1)
    nn.init.zeros_(table.weight[PAD])
    return table


class ConvS2SEmbedding(nn.Module):
    """Token plus learned position embeddings, then dropout (section 3.1).

    :param tokens: the token table, possibly shared between source and target
    """

    def __init__(self, tokens: nn.Embedding, config: ConvS2SConfig) -> None:
        super().__init__()
        self.tokens = tokens
        self.positions = nn.Embedding(config.max_positions, tokens.embedding_dim)
        nn.init.normal_(self.positions.weight, std=0.1)
        self.dropout = Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Embed ``ids`` (B, L) whose first position is ``start``; returns (B, L, E)."""
        L = ids.size(1)
        if start + L > self.positions.num_embeddings:
            raise ValueError(f"sequence of length {start + L} exceeds max_positions {self.positions.num_embeddings}")
        positions = torch.arange(start, start + L, device=ids.device)
        return self.dropout(self.tokens(ids) + self.positions(positions))


class ConvBlock(nn.Module):
    """One convolution with a GLU and a residual connection scaled by sqrt(0.5) (sections 3.2, 3.4).

    The residual is linearly projected when the block changes the number of channels.
    """

    def __init__(self, n_in: int, n_out: int, kernel_size: int, dropout: float) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.conv = glu_conv(n_in, n_out, kernel_size, dropout)
        self.residual = linear(n_in, n_out) if n_in != n_out else nn.Identity()
        self.kernel_size = kernel_size

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        """GLU of the convolution over ``x`` (B, L + k - 1, C_in), already padded; returns (B, L, C_out)."""
        return F.glu(self.conv(x.transpose(1, 2)), dim=1).transpose(1, 2)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """Centred convolution over ``x`` (B, S, C_in); padded positions ``pad_mask`` (B, S, 1) read as zeros."""
        h = self.dropout(x).masked_fill(pad_mask, 0.0)
        side = (self.kernel_size - 1) // 2
        h = self.convolve(F.pad(h, (0, 0, side, side)))  # (B, S, C_out)
        return (h + self.residual(x)) * math.sqrt(0.5)


class ConvS2SEncoder(nn.Module):
    """Embeddings, a linear map to the channels, centred convolutional blocks, a map back (section 3.2).

    The gradient reaching the encoder output is divided by twice the number of decoder attention
    layers (section 3.4, scaled as in the authors' code); the source embeddings ``e`` are excluded.
    """

    def __init__(self, embedding: ConvS2SEmbedding, config: ConvS2SConfig) -> None:
        super().__init__()
        channels = per_layer(config.channels, config.enc_layers)
        kernels = per_layer(config.kernel_size, config.enc_layers)
        self.embedding = embedding
        self.to_channels = linear(config.emb_dim, channels[0], config.dropout)
        self.layers = nn.ModuleList(
            ConvBlock(n_in, n_out, k, config.dropout)
            for n_in, n_out, k in zip((channels[0], *channels[:-1]), channels, kernels, strict=True)
        )
        self.to_emb = linear(channels[-1], config.emb_dim)
        self.grad_scale = 1.0 / (2.0 * config.dec_layers)

    def forward(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode ``src`` (B, S).

        :return: ``keys`` z (B, S, E), ``values`` z + e (B, S, E), ``src_mask`` (B, S) true at real
            tokens and ``src_scale`` (B,), the attention scaling m * sqrt(1/m) for source length m
        """
        src_mask = src != PAD
        e = self.embedding(src)  # (B, S, E)
        x = self.to_channels(e)  # (B, S, C)
        pad_mask = ~src_mask[:, :, None]
        for layer in self.layers:
            x = layer(x, pad_mask)
        z = self.to_emb(x)  # (B, S, E)
        if z.requires_grad:
            z.register_hook(lambda grad: grad * self.grad_scale)
        m = src_mask.sum(dim=1).to(z.dtype)
        return {"keys": z, "values": z + e, "src_mask": src_mask, "src_scale": m * torch.sqrt(1.0 / m)}


class ConvS2SAttention(nn.Module):
    """Multi-step attention of one decoder layer (section 3.3).

    The query is the layer output mapped to the embedding size plus the target embedding,
    d = W_d h + b_d + g; keys are the encoder outputs z, values z + e.
    """

    def __init__(self, channels: int, emb_dim: int) -> None:
        super().__init__()
        self.query = linear(channels, emb_dim)
        self.out = linear(emb_dim, channels)

    def forward(self, h: torch.Tensor, g: torch.Tensor, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Conditional input c (B, T, C) for layer outputs ``h`` (B, T, C) and target embeddings ``g`` (B, T, E)."""
        d = self.query(h) + g  # (B, T, E)
        scores = d @ enc["keys"].transpose(1, 2)  # (B, T, S)
        c = masked_softmax(scores, enc["src_mask"][:, None, :]) @ enc["values"]  # (B, T, E)
        return self.out(c * enc["src_scale"][:, None, None])


class ConvS2SDecoderLayer(nn.Module):
    """A causal convolutional block whose output gets its own attention's conditional input (section 3.3)."""

    def __init__(self, n_in: int, n_out: int, kernel_size: int, config: ConvS2SConfig) -> None:
        super().__init__()
        self.block = ConvBlock(n_in, n_out, kernel_size, config.dropout)
        self.attention = ConvS2SAttention(n_out, config.emb_dim)

    def forward(
        self, x: torch.Tensor, g: torch.Tensor, enc: dict[str, torch.Tensor], context: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the layer on ``x`` (B, T, C_in) after ``context`` (B, k - 1, C_in), its earlier inputs.

        The context is all zeros at the start of a sentence: the causal left padding (section 3.2).

        :return: the output (B, T, C_out) and the context for the next position (B, k - 1, C_in)
        """
        block = self.block
        window = torch.cat([context, block.dropout(x)], dim=1)  # (B, k - 1 + T, C_in)
        h = block.convolve(window)  # (B, T, C_out)
        h = (h + self.attention(h, g, enc)) * math.sqrt(0.5)
        out = (h + block.residual(x)) * math.sqrt(0.5)
        return out, window[:, window.size(1) - context.size(1) :]


class ConvS2SDecoder(nn.Module):
    """Causal convolutional blocks with attention in every layer, then the output layers (sections 3.2, 3.3).

    For incremental decoding each layer keeps its last k - 1 inputs, so a step convolves only
    one new position per layer (section 5.3).
    """

    def __init__(self, embedding: ConvS2SEmbedding, vocab_size: int, config: ConvS2SConfig) -> None:
        super().__init__()
        channels = per_layer(config.channels, config.dec_layers)
        kernels = per_layer(config.kernel_size, config.dec_layers)
        self.embedding = embedding
        self.to_channels = linear(config.emb_dim, channels[0], config.dropout)
        self.layers = nn.ModuleList(
            ConvS2SDecoderLayer(n_in, n_out, k, config)
            for n_in, n_out, k in zip((channels[0], *channels[:-1]), channels, kernels, strict=True)
        )
        self.to_out_emb = linear(channels[-1], config.out_emb_dim)
        self.dropout = Dropout(config.dropout)
        if config.tie_output:
            self.output = nn.Linear(config.out_emb_dim, vocab_size)
            self.output.weight = embedding.tokens.weight
            nn.init.zeros_(self.output.bias)
        else:
            self.output = linear(config.out_emb_dim, vocab_size, config.dropout)

    def run(
        self, trg: torch.Tensor, enc: dict[str, torch.Tensor], contexts: list[torch.Tensor], start: int
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (B, L, V) of ``trg`` (B, L) starting at position ``start``, and the next contexts."""
        g = self.embedding(trg, start)  # (B, L, E)
        x = self.to_channels(g)  # (B, L, C)
        next_contexts = []
        for layer, context in zip(self.layers, contexts, strict=True):
            x, context = layer(x, g, enc, context)
            next_contexts.append(context)
        return self.output(self.dropout(self.to_out_emb(x))), next_contexts

    def empty_contexts(self, enc: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Zero contexts (B, k - 1, C_in) of every layer: the causal padding before the first position."""
        keys = enc["keys"]
        return [
            keys.new_zeros(keys.size(0), layer.block.kernel_size - 1, layer.block.conv.in_channels)
            for layer in self.layers
        ]

    def forward(self, trg_in: torch.Tensor, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for ``trg_in`` (B, T), all positions at once."""
        logits, _ = self.run(trg_in, enc, self.empty_contexts(enc), start=0)
        return logits

    def init_state(self, enc: dict[str, torch.Tensor]) -> dict[str, Any]:
        """The encoder outputs, each layer's zero context and the position 0."""
        return {**enc, "contexts": self.empty_contexts(enc), "pos": 0}

    def step(self, trg_prev: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Logits (B, V) for the next position given the previous token ``trg_prev`` (B,)."""
        logits, contexts = self.run(trg_prev[:, None], state, state["contexts"], state["pos"])
        return logits[:, 0], {**state, "contexts": contexts, "pos": state["pos"] + 1}


def build_convs2s(
    config: ConvS2SConfig, src_vocab: int, trg_vocab: int, shared_vocab: bool
) -> tuple[ConvS2SEncoder, ConvS2SDecoder]:
    """Encoder and decoder; one token table for both sides when ``share_embeddings`` and the vocabulary is joint.

    Positions are learned separately for source and target.
    """
    trg_tokens = embedding(trg_vocab, config.emb_dim)
    src_tokens = trg_tokens if config.share_embeddings and shared_vocab else embedding(src_vocab, config.emb_dim)
    encoder = ConvS2SEncoder(ConvS2SEmbedding(src_tokens, config), config)
    decoder = ConvS2SDecoder(ConvS2SEmbedding(trg_tokens, config), trg_vocab, config)
    return encoder, decoder
