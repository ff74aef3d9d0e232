"""Recurrent encoder-decoder with attention: RNNsearch (Bahdanau et al. 2015) and Luong et al. (2015).

The encoder is a stack of (bi-directional) GRUs or LSTMs over the source. The decoder takes one
step per target token, attending in one of the two orders of the papers:

- ``attention_query: previous`` (Bahdanau, section 3.1): the context c_t is computed from the
  previous state s_{t-1} and enters the RNN with the previous word, s_t = RNN(s_{t-1}, [E y_{t-1}; c_t]);
- ``attention_query: current`` (Luong, section 3): s_t = RNN(s_{t-1}, E y_{t-1}) first, then c_t from s_t.

An output layer turns s_t, c_t (and E y_{t-1}) into the vector o_t that is projected to the
vocabulary; with ``input_feeding`` o_{t-1} is also an input of the RNN (Luong, section 3.3).

Legend: B batch, S source length, T target length, E embedding size, H hidden size (one direction),
K encoder output size (2H or H), A attention size, L decoder layers, R output layer (readout) size, V vocabulary.
"""

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.model_config import RnnConfig
from nmt.models.attention import masked_softmax
from nmt.models.dropout import Dropout
from nmt.vocab import PAD


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
        """Alignment scores (B, S) of the decoder state ``query`` (B, H) against ``keys``."""
        raise NotImplementedError

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from the decoder state ``query`` (B, H).

        :param keys: from :meth:`project_keys`, shape (B, S, A or H)
        :param values: encoder outputs, shape (B, S, K)
        :param src_mask: bool, True on real source tokens, shape (B, S)
        :return: context (B, K) and attention weights (B, S), exactly zero on padding
        """
        weights = masked_softmax(self.score(query, keys), src_mask)
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
        """``s^T h_j`` with ``keys`` = ``W h`` (general) or ``h`` (dot), shape (B, S, H)."""
        return torch.bmm(keys, query.unsqueeze(2).to(keys.dtype)).squeeze(2)  # (B, S)


def make_rnn(config: RnnConfig, input_size: int, layers: int, bidirectional: bool = False) -> nn.RNNBase:
    """A batch-first GRU or LSTM stack with dropout between its layers."""
    rnn = nn.GRU if config.cell == "gru" else nn.LSTM
    dropout = config.dropout if layers > 1 else 0.0  # torch warns about dropout on one layer
    return rnn(input_size, config.hidden_size, layers, batch_first=True, dropout=dropout, bidirectional=bidirectional)


class RnnEncoder(nn.Module):
    """Stacked (bi-directional) RNN over the embedded source (Bahdanau et al. 2015, section 3.2).

    The source is packed, so each sentence's states do not depend on the padding of its batch.
    """

    def __init__(self, embedding: nn.Embedding, config: RnnConfig) -> None:
        super().__init__()
        self.embedding = embedding
        self.dropout = Dropout(config.dropout)
        self.rnn = make_rnn(config, config.emb_dim, config.enc_layers, config.bidirectional)
        self.sum_directions = config.bidirectional and config.bidir_combine == "sum"

    def forward(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode ``src`` (B, S), right-padded.

        :return: ``outputs`` (B, S, K), zero on padding; ``src_mask`` (B, S), True on real tokens;
            ``final`` (B, H), the top layer's last state, of the backward RNN when bi-directional
            (it has read the whole sentence, ending at the first word: Bahdanau's backward h_1)
        """
        src_mask = src != PAD
        lengths = src_mask.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(
            self.dropout(self.embedding(src)), lengths, batch_first=True, enforce_sorted=False
        )
        outputs, last = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))  # (B, S, 2H or H)
        if isinstance(last, tuple):  # LSTM (h, c): the hidden state h summarises the sentence
            last = last[0]
        if self.sum_directions:
            fwd, bwd = outputs.chunk(2, dim=-1)
            outputs = fwd + bwd  # (B, S, H)
        return {"outputs": self.dropout(outputs), "src_mask": src_mask, "final": last[-1]}


class RnnDecoder(nn.Module):
    """Attentional RNN decoder; the state holds batch-first tensors only (see :mod:`nmt.models.seq2seq`).

    State: ``hidden`` (B, L, H) and, for LSTMs, ``cell`` (B, L, H); ``feed`` o_{t-1} (B, R) with
    input feeding; attention ``keys`` (B, S, A or H) computed once per sentence, ``values`` (B, S, K)
    and ``src_mask`` (B, S).
    """

    def __init__(self, embedding: nn.Embedding, vocab_size: int, config: RnnConfig) -> None:
        super().__init__()
        E, H, K, R = config.emb_dim, config.hidden_size, config.enc_size, config.out_size
        self.embedding = embedding
        self.dropout = Dropout(config.dropout)
        self.previous_query = config.attention_query == "previous"
        self.input_feeding = config.input_feeding
        self.rnn = make_rnn(config, E + K * self.previous_query + R * self.input_feeding, config.dec_layers)
        if config.attention == "additive":
            self.attention = BahdanauAttention(H, K, config.attention_dim)
        else:
            self.attention = LuongAttention(H, K, config.attention)
        self.init_kind = config.init_state
        if config.init_state != "zeros":
            self.bridge = nn.Linear(H if config.init_state == "final" else K, config.dec_layers * H)
        self.output_layer = config.output_layer
        if config.output_layer == "maxout":
            self.readout = nn.Linear(H + K + E, 2 * R)
        elif config.output_layer == "deep":
            self.readout = nn.Linear(H + K, R)
        self.output = nn.Linear(R, vocab_size)
        if config.tie_output:
            self.output.weight = embedding.weight
        self.is_lstm = config.cell == "lstm"
        self.layers, self.hidden_size, self.out_size = config.dec_layers, H, R

    def init_state(self, enc: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The state before the first target token: s_0 (LSTM cells start at zero) and the attention keys."""
        outputs, src_mask = enc["outputs"], enc["src_mask"]
        B = outputs.size(0)
        if self.init_kind == "zeros":
            hidden = outputs.new_zeros(B, self.layers, self.hidden_size)
        else:
            if self.init_kind == "final":
                summary = enc["final"]  # (B, H)
            else:
                mask = src_mask.unsqueeze(-1)
                summary = (outputs * mask).sum(dim=1) / mask.sum(dim=1)  # (B, K)
            hidden = torch.tanh(self.bridge(summary)).view(B, self.layers, self.hidden_size)
        state = {
            "hidden": hidden,
            "keys": self.attention.project_keys(outputs),
            "values": outputs,
            "src_mask": src_mask,
        }
        if self.is_lstm:
            state["cell"] = torch.zeros_like(hidden)
        if self.input_feeding:
            state["feed"] = outputs.new_zeros(B, self.out_size)
        return state

    def forward(self, trg_in: torch.Tensor, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for ``trg_in`` (B, T)."""
        emb = self.dropout(self.embedding(trg_in))  # (B, T, E)
        state = self.init_state(enc)
        outs = []
        for t in range(trg_in.size(1)):
            out, state = self._advance(emb[:, t], state)
            outs.append(out)
        return self.output(self.dropout(torch.stack(outs, dim=1)))

    def step(self, trg_prev: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Logits (B, V) for the next position given the previous token ``trg_prev`` (B,)."""
        out, state = self._advance(self.dropout(self.embedding(trg_prev)), state)
        return self.output(self.dropout(out)), state

    def _advance(self, emb: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """One decoder step from the embedded previous token ``emb`` (B, E); returns o_t (B, R) and the state."""
        memory = (state["keys"], state["values"], state["src_mask"])
        inputs = [emb]
        if self.previous_query:
            context, _ = self.attention(state["hidden"][:, -1], *memory)  # c_t from s_{t-1}, (B, K)
            inputs.append(context)
        if self.input_feeding:
            inputs.append(state["feed"])
        # torch's RNNs want (L, B, H) states; the search needs the batch first.
        hx = state["hidden"].transpose(0, 1).contiguous()
        if self.is_lstm:
            hx = (hx, state["cell"].transpose(0, 1).contiguous())
        s, hx = self.rnn(torch.cat(inputs, dim=-1).unsqueeze(1), hx)
        s = s.squeeze(1)  # (B, H), the top layer's s_t
        if not self.previous_query:
            context, _ = self.attention(s, *memory)  # c_t from s_t
        if self.output_layer == "maxout":  # t_t = max over pairs of U_o s_t + V_o E y_{t-1} + C_o c_t (A.2.2)
            out = self.readout(torch.cat([s, context, emb], dim=-1)).unflatten(-1, (-1, 2)).amax(dim=-1)
        elif self.output_layer == "deep":  # attentional vector tanh(W_c [c_t; s_t])
            out = torch.tanh(self.readout(torch.cat([s, context], dim=-1)))
        else:
            out = torch.cat([s, context], dim=-1)  # (B, R)
        state = {**state, "hidden": (hx[0] if self.is_lstm else hx).transpose(0, 1)}
        if self.is_lstm:
            state["cell"] = hx[1].transpose(0, 1)
        if self.input_feeding:
            state["feed"] = out
        return out, state


def build_rnn(config: RnnConfig, src_vocab: int, trg_vocab: int, shared_vocab: bool) -> tuple[RnnEncoder, RnnDecoder]:
    """Encoder and decoder; source and target embeddings are one matrix when ``share_embeddings``.

    Initialisation follows :func:`nmt.models.transformer.build_transformer` (Xavier matrices, embeddings with
    std emb_dim^-0.5) rather than the papers' fixed ranges (Luong's uniform [-0.1, 0.1], section 4.1),
    which leave small models almost insensitive to their input.
    """
    trg_embedding = nn.Embedding(trg_vocab, config.emb_dim, padding_idx=PAD)
    src_embedding = (
        trg_embedding
        if config.share_embeddings and shared_vocab
        else nn.Embedding(src_vocab, config.emb_dim, padding_idx=PAD)
    )
    encoder, decoder = RnnEncoder(src_embedding, config), RnnDecoder(trg_embedding, trg_vocab, config)
    with torch.no_grad():
        for embedding in (src_embedding, trg_embedding):
            nn.init.normal_(embedding.weight, std=config.emb_dim**-0.5)
            embedding.weight[PAD].zero_()
    for name, p in [*encoder.named_parameters(), *decoder.named_parameters()]:
        if p.dim() == 2 and "embedding" not in name:
            nn.init.xavier_uniform_(p)
    return encoder, decoder
