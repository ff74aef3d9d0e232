"""The recurrent model: every variant keeps the step contract, attention masks, the paper presets."""

import itertools

import pytest
import torch
from conftest import stepwise_logits, tiny_model

from nmt.errors import ConfigError
from nmt.models.decoding_state import reorder_state
from nmt.models.rnn import BahdanauAttention, LuongAttention
from nmt.models.seq2seq import resolve_model_options
from nmt.vocab import BOS, EOS, PAD

V = 30


def toy_batch(B=3, S=6, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, S), generator=g)
    src[:, -1] = EOS
    src[0, 3:] = PAD
    src[0, 2] = EOS
    trg_in = torch.randint(4, V, (B, T), generator=g)
    trg_in[:, 0] = BOS
    return src, trg_in


ENCODERS = {
    "bi-concat": {"bidirectional": True, "bidir_combine": "concat"},
    "bi-sum": {"bidirectional": True, "bidir_combine": "sum"},
    "uni": {"bidirectional": False},
}
VARIANTS = list(
    itertools.product(
        ["gru", "lstm"],
        ["additive", "dot", "general"],
        ["previous", "current"],
        [False, True],
        ["zeros", "final", "mean"],
        ["linear", "deep", "maxout"],
        list(ENCODERS),
    )
)


# The sizes of every variant: tiny.
SIZES = {"enc_layers": 2, "dec_layers": 2, "hidden_size": 8, "emb_dim": 6, "attention_dim": 5, "output_dim": 4}


@pytest.mark.parametrize(
    "cell, attention, query, feeding, init, output, encoder", VARIANTS, ids=["-".join(map(str, v)) for v in VARIANTS]
)
def test_every_variant_decodes_incrementally_as_teacher_forced(cell, attention, query, feeding, init, output, encoder):
    variant = {"cell": cell, "attention": attention, "attention_query": query, "input_feeding": feeding}
    options = {**variant, "init_state": init, "output_layer": output, **SIZES, **ENCODERS[encoder]}
    if attention == "dot" and encoder == "bi-concat":  # encoder outputs 2H, decoder states H
        with pytest.raises(ConfigError, match="'dot' needs encoder outputs of hidden_size 8, got 16"):
            tiny_model("rnn", V, **options)
        return
    model = tiny_model("rnn", V, **options)
    src, trg_in = toy_batch()
    full = model(src, trg_in)
    torch.testing.assert_close(stepwise_logits(model, src, trg_in), full, atol=1e-5, rtol=1e-5)


def test_state_is_batch_first_and_reorders():
    model = tiny_model("rnn", V, cell="lstm", dec_layers=3, input_feeding=True, attention="general")
    src, trg_in = toy_batch()
    _, state = model.step(trg_in[:, 0], model.init_state(src))
    assert set(state) == {"hidden", "cell", "feed", "keys", "values", "src_mask"}
    assert state["hidden"].shape == state["cell"].shape == (3, 3, 32)
    assert all(v.size(0) == 3 for v in state.values())
    index = torch.tensor([1, 1, 2])
    logits_a, _ = model.step(trg_in[index, 1], reorder_state(state, index))
    logits_b, _ = model.step(trg_in[:, 1], state)
    torch.testing.assert_close(logits_a, logits_b[index], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("attention", ["additive", "dot", "general"])
def test_attention_weights_are_zero_on_padding_and_sum_to_one(attention):
    torch.manual_seed(0)
    B, S, H = 3, 5, 8
    module = BahdanauAttention(H, H, 6) if attention == "additive" else LuongAttention(H, H, attention)
    values, query = torch.randn(B, S, H), torch.randn(B, H)
    lengths = torch.tensor([5, 2, 4])
    src_mask = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    values = values.masked_fill(~src_mask[..., None], 1e3)  # huge padding values must not leak in
    context, weights = module(query, module.project_keys(values), values, src_mask)
    assert context.shape == (B, H) and weights.shape == (B, S)
    assert bool((weights[~src_mask] == 0).all())
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(B))
    for i, n in enumerate(lengths.tolist()):
        trimmed = values[i : i + 1, :n]
        alone, _ = module(query[i : i + 1], module.project_keys(trimmed), trimmed, src_mask[i : i + 1, :n])
        torch.testing.assert_close(context[i : i + 1], alone)


def test_dot_attention_needs_equal_sizes():
    with pytest.raises(ValueError, match="equal decoder"):
        LuongAttention(8, 16, "dot")


@pytest.mark.parametrize("combine", ["concat", "sum"])
def test_encoder_final_state_is_the_backward_state_at_the_first_word(combine):
    model = tiny_model("rnn", V, bidir_combine=combine, enc_layers=2)
    src, _ = toy_batch()
    enc = model.encode(src)
    assert enc["outputs"].shape == (3, 6, 64 if combine == "concat" else 32)
    assert bool((enc["outputs"][0, 3:] == 0).all())
    if combine == "concat":
        torch.testing.assert_close(enc["final"], enc["outputs"][:, 0, 32:])  # Bahdanau's backward h_1
    uni = tiny_model("rnn", V, bidirectional=False).encode(src)
    torch.testing.assert_close(uni["final"][0], uni["outputs"][0, 2])  # last real word, not padding
    torch.testing.assert_close(uni["final"][1:], uni["outputs"][1:, -1])


def test_tied_and_shared_embeddings():
    model = tiny_model("rnn", V, tie_output=True, share_embeddings=True)
    assert model.decoder.output.weight is model.decoder.embedding.weight
    assert model.encoder.embedding is model.decoder.embedding
    untied = tiny_model("rnn", V, share_embeddings=False)
    assert untied.encoder.embedding is not untied.decoder.embedding
    assert untied.n_parameters() == model.n_parameters() + 2 * V * 32
    with pytest.raises(ConfigError, match="tie_output: the output projection reads 96 features but emb_dim is 32"):
        tiny_model("rnn", V, tie_output=True, output_layer="linear")


def test_presets_match_the_papers():
    _, rnnsearch = resolve_model_options({"arch": "rnn", "size": "rnnsearch"}, "m")
    assert (rnnsearch.cell, rnnsearch.bidirectional, rnnsearch.enc_layers, rnnsearch.dec_layers) == ("gru", True, 1, 1)
    assert (rnnsearch.hidden_size, rnnsearch.emb_dim, rnnsearch.attention_dim, rnnsearch.output_dim) == (
        1000,
        620,
        1000,
        500,
    )
    assert (rnnsearch.attention, rnnsearch.attention_query, rnnsearch.output_layer) == (
        "additive",
        "previous",
        "maxout",
    )
    assert (rnnsearch.init_state, rnnsearch.input_feeding, rnnsearch.enc_size) == ("final", False, 2000)
    _, luong = resolve_model_options({"arch": "rnn", "size": "luong"}, "m")
    assert (luong.cell, luong.bidirectional, luong.enc_layers, luong.dec_layers) == ("lstm", False, 4, 4)
    assert (luong.hidden_size, luong.emb_dim, luong.output_dim, luong.dropout) == (1000, 1000, 1000, 0.2)
    assert (luong.attention, luong.attention_query, luong.input_feeding, luong.output_layer) == (
        "general",
        "current",
        True,
        "deep",
    )
    _, small = resolve_model_options({"arch": "rnn", "size": "small"}, "m")
    assert (small.cell, small.bidirectional, small.emb_dim, small.hidden_size) == ("gru", True, 256, 256)
