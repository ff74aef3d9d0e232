"""Every architecture: shapes, the incremental step contract, causality, over-fitting one batch."""

import logging
import weakref

import pytest
import torch
from conftest import ARCHS, stepwise_logits, tiny_model

from nmt.models.decoding_state import reorder_state
from nmt.models.seq2seq import build_model
from nmt.training.loss import LabelSmoothedCrossEntropy
from nmt.vocab import BOS, EOS, PAD

V = 40


def toy_batch(B=3, S=7, T=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, S), generator=g)
    src[:, -1] = EOS
    src[0, 4:] = PAD  # a shorter sentence: padding must not matter
    src[0, 3] = EOS
    trg_in = torch.randint(4, V, (B, T), generator=g)
    trg_in[:, 0] = BOS
    return src, trg_in


@pytest.mark.parametrize("arch", ARCHS)
def test_shapes(arch):
    model = tiny_model(arch, V)
    src, trg_in = toy_batch()
    assert model(src, trg_in).shape == (3, 6, V)
    logits, state = model.step(trg_in[:, 0], model.init_state(src))
    assert logits.shape == (3, V)


@pytest.mark.parametrize("arch", ARCHS)
def test_incremental_steps_equal_teacher_forcing(arch):
    model = tiny_model(arch, V)
    src, trg_in = toy_batch()
    full = model(src, trg_in)
    torch.testing.assert_close(stepwise_logits(model, src, trg_in), full, atol=1e-4, rtol=1e-4)


def first_step_state(model, src, trg_in):
    """The state after the first step; a new one at each call, as a state is stepped from once."""
    return model.step(trg_in[:, 0], model.init_state(src))[1]


@pytest.mark.parametrize("arch", ARCHS)
def test_reordered_state_follows_the_hypotheses(arch):
    model = tiny_model(arch, V)
    src, trg_in = toy_batch()
    index = torch.tensor([2, 0, 0])
    reordered = reorder_state(first_step_state(model, src, trg_in), index)
    logits_a, _ = model.step(trg_in[index, 1], reordered)
    logits_b, _ = model.step(trg_in[:, 1], first_step_state(model, src, trg_in))
    torch.testing.assert_close(logits_a, logits_b[index], atol=1e-5, rtol=1e-5)


def test_search_moves_the_index_of_the_transformer_caches_not_the_caches():
    """The key/value caches are Unmoved: a reorder or a selection of hypotheses copies none of them (the next step
    takes the rows it needs while extending them), and that step follows the moved hypotheses."""
    model = tiny_model("transformer", V)
    src, trg_in = toy_batch()
    state = first_step_state(model, src, trg_in)
    index = torch.tensor([2, 0])  # the third hypothesis, and the first, whose next step runs without the second
    moved = reorder_state(state, index)
    assert all(a is b for a, b in zip(state["cache"].value, moved["cache"].value, strict=True))
    logits_a, after = model.step(trg_in[index, 1], moved)
    logits_b, _ = model.step(trg_in[:, 1], first_step_state(model, src, trg_in))
    torch.testing.assert_close(logits_a, logits_b[index], atol=1e-5, rtol=1e-5)
    assert {(k.size(0), k.size(2)) for k, _ in after["cache"].value} == {(2, 2)}  # 2 hypotheses, 2 positions


@torch.no_grad()  # as search steps: with autograd the graph would hold every tensor for the backward
def test_a_transformer_step_releases_each_layers_cache_once_it_is_extended():
    """A step holds two copies of one layer's key/value cache at a time (the cache and its extension), not of every
    layer's: when a layer runs, the earlier layers' caches have left the state and memory."""
    model = tiny_model("transformer", V, dec_layers=3)
    src, trg_in = toy_batch()
    state = first_step_state(model, src, trg_in)
    earlier = [weakref.ref(k) for k, _ in state["cache"].value]
    alive: list[list[bool]] = []
    for layer in model.decoder.layers:
        layer.register_forward_pre_hook(lambda *_: alive.append([ref() is not None for ref in earlier]))
    model.step(trg_in[:, 1], state)
    assert alive == [[True, True, True], [False, True, True], [False, False, True]]


@pytest.mark.parametrize("arch", ARCHS)
def test_decoder_never_sees_future_tokens(arch):
    model = tiny_model(arch, V)
    src, trg_in = toy_batch()
    changed = trg_in.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % V
    a, b = model(src, trg_in), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("arch", ARCHS)
def test_padding_does_not_change_the_output(arch):
    model = tiny_model(arch, V)
    src, trg_in = toy_batch()
    alone = model(src[:1, :4], trg_in[:1])
    torch.testing.assert_close(model(src, trg_in)[:1], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_one_batch_can_be_overfitted(arch):
    torch.manual_seed(0)
    model = tiny_model(arch, V).train()
    src, trg_in = toy_batch(B=4)
    trg_out = torch.cat([trg_in[:, 1:], torch.full((4, 1), EOS)], dim=1)
    criterion = LabelSmoothedCrossEntropy(0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        optimizer.zero_grad()
        loss, _ = criterion(model(src, trg_in), trg_out)
        (loss / trg_out.numel()).backward()
        optimizer.step()
        losses.append(float(loss.detach()) / trg_out.numel())
    assert losses[-1] < 0.1 * losses[0]


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_transformer_norm_options_and_tied_embeddings(norm):
    model = tiny_model("transformer", V, norm=norm)
    assert model.decoder.output.weight is model.decoder.embedding.tokens.weight
    assert model.encoder.embedding is model.decoder.embedding
    untied = tiny_model("transformer", V, norm=norm, tie_output=False, share_embeddings=False)
    assert untied.decoder.output.weight is not untied.decoder.embedding.tokens.weight
    assert untied.encoder.embedding is not untied.decoder.embedding
    assert untied.n_parameters() == model.n_parameters() + 2 * V * 64


@pytest.mark.parametrize(
    "arch, options",
    [(arch, {}) for arch in ARCHS] + [("rnn", {"cell": "lstm"}), ("transformer", {"tie_output": False})],
)
def test_a_model_loaded_from_its_file_equals_the_saved_one(arch, options, tmp_path):
    """model_from_spec with weights: the file's tensors become the parameters, tied ones stay one tensor."""
    from nmt.checkpoint import load_checkpoint, save_checkpoint
    from nmt.models.seq2seq import model_from_spec

    saved = tiny_model(arch, V, seed=3, **options)
    save_checkpoint(tmp_path / "model.pt", {"spec": saved.spec, "model": saved.state_dict()})
    ckpt = load_checkpoint(tmp_path / "model.pt")
    loaded = model_from_spec(ckpt["spec"], weights=ckpt["model"]).eval()
    assert not [name for name, t in [*loaded.named_parameters(), *loaded.named_buffers()] if t.is_meta]
    assert len(list(loaded.parameters())) == len(list(saved.parameters()))  # ties kept: as many distinct tensors
    for name, param in loaded.named_parameters(remove_duplicate=False):
        assert param.data_ptr() == ckpt["model"][name].data_ptr(), f"{name} is a copy of the file's tensor"
    halved = model_from_spec(ckpt["spec"], weights={k: v.half() for k, v in ckpt["model"].items()})
    assert {p.dtype for p in halved.parameters()} == {torch.float32}  # the model's dtype, whatever the file's
    src, trg_in = toy_batch()
    with torch.no_grad():
        torch.testing.assert_close(loaded(src, trg_in), saved(src, trg_in), rtol=0, atol=0)
        torch.testing.assert_close(stepwise_logits(loaded, src, trg_in), stepwise_logits(saved, src, trg_in))


@pytest.mark.parametrize("shared_vocab", [True, False])
def test_the_build_log_says_when_embeddings_cannot_be_shared(caplog, shared_vocab):
    """share_embeddings (the sizes' default) needs one subword model for both sides: without one the log says so."""
    with caplog.at_level(logging.INFO, logger="nmt.models.seq2seq"):
        model = build_model({"arch": "transformer", "size": "tiny"}, 40, 40, shared_vocab)
    shared = model.encoder.embedding is model.decoder.embedding
    assert shared == shared_vocab
    assert ("embeddings not shared" in caplog.text) != shared_vocab
