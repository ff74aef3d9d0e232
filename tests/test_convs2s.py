"""ConvS2S specifics: receptive fields, padding, incremental decoding, weight norm, the paper's sizes."""

import math

import pytest
import torch
from conftest import stepwise_logits, tiny_model
from torch.nn.utils import parametrize

from nmt.errors import ConfigError
from nmt.model_config import CONVS2S_SIZES as PRESETS
from nmt.model_config import ConvS2SConfig
from nmt.models.convs2s import per_layer
from nmt.models.decoding_state import reorder_state
from nmt.models.seq2seq import build_model, model_from_spec
from nmt.vocab import BOS, EOS, PAD

V = 40


def batch(B=3, S=8, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, S), generator=g)
    src[:, -1] = EOS
    src[0, 3] = EOS
    src[0, 4:] = PAD
    src[1, 6] = EOS
    src[1, 7:] = PAD
    trg_in = torch.randint(4, V, (B, T), generator=g)
    trg_in[:, 0] = BOS
    return src, trg_in


@pytest.mark.parametrize("kernel, layers", [(3, 2), (5, 1)])
def test_receptive_field_is_causal_and_bounded(kernel, layers):
    """Target token t reaches exactly the outputs t .. t + layers * (k - 1) (section 3.2)."""
    model = tiny_model("convs2s", V, kernel_size=(kernel,), dec_layers=layers)
    src, trg_in = batch()
    base = model(src, trg_in)
    reach = layers * (kernel - 1)
    for t in range(trg_in.size(1)):
        changed = trg_in.clone()
        changed[:, t] = (changed[:, t] + 1 - 4) % (V - 4) + 4
        diff = (model(src, changed) - base).abs().amax(dim=(0, 2))  # (T,)
        assert torch.all(diff[:t] == 0)
        assert torch.all(diff[t : t + reach + 1] > 0)
        assert torch.all(diff[t + reach + 1 :] == 0)


@pytest.mark.parametrize("kernel", [1, 3, 5, 7])
def test_source_padding_changes_nothing(kernel):
    model = tiny_model("convs2s", V, kernel_size=(kernel,), enc_layers=3)
    src, trg_in = batch()
    enc = model.encode(src)
    logits = model(src, trg_in)
    for i, n in enumerate((src != PAD).sum(dim=1).tolist()):
        alone = model.encode(src[i : i + 1, :n])
        for key in ("keys", "values"):
            torch.testing.assert_close(enc[key][i : i + 1, :n], alone[key], atol=1e-5, rtol=1e-5)
        alone_logits = model(src[i : i + 1, :n], trg_in[i : i + 1])
        torch.testing.assert_close(logits[i : i + 1], alone_logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        {"kernel_size": (3,), "dec_layers": 1},
        {"kernel_size": (3,), "dec_layers": 4},
        {"kernel_size": (5,), "dec_layers": 2},
        {"kernel_size": (5,), "dec_layers": 3, "enc_layers": 1},
        # a per-layer layout like the paper's WMT models: wider blocks, then width-1 linear blocks
        {"channels": (32, 48, 48, 64), "kernel_size": (3, 5, 3, 1), "enc_layers": 4, "dec_layers": 4},
    ],
)
def test_incremental_steps_equal_teacher_forcing(overrides):
    model = tiny_model("convs2s", V, **overrides)
    src, trg_in = batch()
    full = model(src, trg_in)
    torch.testing.assert_close(stepwise_logits(model, src, trg_in), full, atol=1e-4, rtol=1e-4)


def test_state_is_batch_first():
    model = tiny_model("convs2s", V, kernel_size=(5,))
    src, trg_in = batch()
    _, state = model.step(trg_in[:, 0], model.init_state(src))
    assert state["pos"] == 1
    assert [c.shape for c in state["contexts"]] == [(3, 4, 32), (3, 4, 32)]
    tensors = [v for v in state.values() if isinstance(v, torch.Tensor)] + state["contexts"]
    assert all(t.size(0) == 3 for t in tensors)
    assert set(reorder_state(state, torch.tensor([1]))) == set(state)


def test_weight_norm_everywhere_but_lookup_tables():
    model = tiny_model("convs2s", V, tie_output=False, channels=(32, 48), enc_layers=2, dec_layers=2)
    layers = [m for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv1d))]
    # 4 convolutions, 2 residual projections, 3 maps between embeddings and channels, 4 attention maps,
    # the map to the output embedding and the output layer
    assert len(layers) == 4 + 2 + 3 + 4 + 1 + 1
    assert all(parametrize.is_parametrized(m, "weight") for m in layers)
    tables = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    assert tables and not any(parametrize.is_parametrized(m) for m in tables)


def test_initialisation_follows_section_3_5():
    torch.manual_seed(0)
    model = build_model({"arch": "convs2s", "size": "small", "dropout": 0.2}, 1000, 1000, True)
    conv = model.encoder.layers[0].conv
    assert conv.weight.std().item() == pytest.approx(math.sqrt(4 * 0.8 / (3 * 256)), rel=0.02)
    query = model.decoder.layers[0].attention.query
    assert query.weight.std().item() == pytest.approx(math.sqrt(1 / 256), rel=0.02)
    assert model.encoder.to_channels.weight.std().item() == pytest.approx(math.sqrt(0.8 / 256), rel=0.02)
    assert model.encoder.embedding.tokens.weight[1:].std().item() == pytest.approx(0.1, rel=0.02)
    assert bool((model.encoder.embedding.tokens.weight[PAD] == 0).all())


def test_encoder_gradient_is_scaled_per_attention_layer():
    model = tiny_model("convs2s", V)
    src, trg_in = batch()

    def grad_of_encoder_output_layer():
        model.zero_grad()
        model(src, trg_in).square().sum().backward()
        return model.encoder.to_emb.parametrizations.weight.original1.grad.clone()

    scaled = grad_of_encoder_output_layer()
    model.encoder.grad_scale = 1.0
    torch.testing.assert_close(scaled, grad_of_encoder_output_layer() / (2 * 2))


def test_shared_and_tied_embeddings():
    model = tiny_model("convs2s", V)
    assert model.decoder.output.weight is model.decoder.embedding.tokens.weight
    assert model.encoder.embedding.tokens is model.decoder.embedding.tokens
    assert model.encoder.embedding.positions is not model.decoder.embedding.positions
    untied = tiny_model("convs2s", V, tie_output=False, share_embeddings=False)
    assert untied.decoder.output.weight is not untied.decoder.embedding.tokens.weight
    assert untied.encoder.embedding.tokens is not untied.decoder.embedding.tokens


def test_presets_have_the_papers_sizes():
    de, fr, ro = PRESETS["wmt14_en_de"], PRESETS["wmt14_en_fr"], PRESETS["wmt16_en_ro"]
    assert de["enc_layers"] == de["dec_layers"] == 15
    assert de["channels"] == (512,) * 10 + (768,) * 3 + (2048,) * 2
    assert de["kernel_size"] == (3,) * 13 + (1,) * 2
    assert fr["channels"] == (512,) * 5 + (768,) * 4 + (1024,) * 3 + (2048, 4096)
    assert fr["kernel_size"] == (3,) * 12 + (1,) * 2
    assert 1 + sum(k - 1 for k in fr["kernel_size"]) == 25  # "an effective context size of only 25 words"
    assert per_layer(ro["channels"], ro["enc_layers"]) == (512,) * 20
    assert all(p["emb_dim"] == p["out_emb_dim"] == 512 for p in (de, fr, ro))
    with torch.device("meta"):
        small = build_model({"arch": "convs2s", "size": "small"}, 8000, 8000, True)
    assert 6e6 < small.n_parameters() < 8e6


def test_per_layer_options_roundtrip_and_errors():
    options = {"arch": "convs2s", "size": "tiny", "channels": [32, 64], "kernel_size": [3, 1]}
    model = build_model(options, V, V, True)
    assert model.spec["config"]["channels"] == (32, 64)
    assert model_from_spec(model.spec).n_parameters() == model.n_parameters()
    bad = [
        ({"channels": (32, 32, 32)}, "channels"),
        ({"kernel_size": (4,)}, "odd"),
        ({"tie_output": True, "out_emb_dim": 16}, "tie_output"),
        ({"channels": 32}, "expected a list"),
    ]
    for overrides, message in bad:
        with pytest.raises(ConfigError, match=message):
            build_model({"arch": "convs2s", "size": "tiny", **overrides}, V, V, True)
    assert all(getattr(ConvS2SConfig(), key) == value for key, value in PRESETS["small"].items())
