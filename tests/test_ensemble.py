"""Ensemble decoding: the mean of the members' log-probabilities through the unchanged search."""

import copy
import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import ARCHS, assert_one_line, run_training, tiny_model

from nmt.atomic import hash_file, read_lines
from nmt.config import DecodeConfig, SubwordConfig
from nmt.data.subword import train_subword
from nmt.decoding.beam import beam_search
from nmt.decoding.ensemble import Ensemble, load_ensemble
from nmt.decoding.search import greedy_search
from nmt.decoding.translation import Translator, translate_lines
from nmt.device import get_device
from nmt.errors import DataError
from nmt.evaluation.metrics import score_corpus
from nmt.model_dir import TRG_SPM
from nmt.models.decoding_state import reorder_state
from nmt.vocab import BOS, EOS, PAD

V = 40


def sources(B=6, S=9):
    """Random source ids (B, S) with EOS, the first row shorter and padded."""
    src = torch.randint(4, V, (B, S), generator=torch.Generator().manual_seed(0))
    src[:, -1] = EOS
    src[0, 5:] = PAD
    src[0, 4] = EOS
    return src


@pytest.fixture(scope="module")
def second_model(toy_corpus, toy_spm, tmp_path_factory):
    """Another toy model directory: other seed, fewer steps, so it differs from ``trained_model``."""
    model_dir = tmp_path_factory.mktemp("second")
    return model_dir, run_training(toy_corpus, toy_spm, model_dir, seed=2, max_steps=200, valid_every=200)


@pytest.mark.parametrize("arch", ARCHS)
def test_ensemble_of_one_or_of_copies_decodes_like_the_model(arch):
    model = tiny_model(arch, V)
    src = sources()
    expected = beam_search(model, src, beam_size=4)
    assert beam_search(Ensemble([model]), src, beam_size=4) == expected
    assert beam_search(Ensemble([model, copy.deepcopy(model)]), src, beam_size=4) == expected
    assert greedy_search(Ensemble([model, copy.deepcopy(model)]), src) == greedy_search(model, src)


@pytest.mark.parametrize("archs", [("transformer", "rnn"), ("convs2s", "transformer")])
@torch.no_grad()
def test_step_is_the_mean_of_the_members_log_probabilities(archs):
    members = [tiny_model(arch, V) for arch in archs]
    ensemble = Ensemble(members)
    src = sources()
    B = src.size(0)
    state = ensemble.init_state(src)
    member_states = [m.init_state(src) for m in members]
    prev = torch.full((B,), BOS)
    g = torch.Generator().manual_seed(1)
    for t in range(5):
        if t == 3:  # as beam search does: duplicate some rows, drop others
            index = torch.tensor([2, 0, 0, 5, 1, 3])
            state = reorder_state(state, index)
            member_states = [reorder_state(s, index) for s in member_states]
            prev = prev.index_select(0, index)
        lprobs, state = ensemble.step(prev, state)
        expected = []
        for i, member in enumerate(members):
            logits, member_states[i] = member.step(prev, member_states[i])
            expected.append(torch.log_softmax(logits, dim=-1))
        assert lprobs.shape == (B, V)
        torch.testing.assert_close(lprobs, (expected[0] + expected[1]) / 2)
        assert not torch.allclose(expected[0], expected[1]), "the members really differ"
        prev = torch.randint(4, V, (B,), generator=g)


def test_members_must_agree_on_vocabulary_sizes():
    with pytest.raises(DataError) as excinfo:
        Ensemble([tiny_model("rnn", V), tiny_model("rnn", V + 1)])
    assert_one_line(excinfo, "vocabulary sizes", f"({V}, {V})", f"({V + 1}, {V + 1})")


def test_ensemble_of_two_trained_models(trained_model, second_model, toy_corpus):
    """Beam search with two trained models gives valid translations, as good as the weaker member's or close.

    Averaging log-probabilities can lose a little to the better member, but an ensemble far below
    its weaker member would mean the combination or the state handling is broken.
    """
    device = get_device("cpu")
    config = DecodeConfig(beam_size=4)
    src, ref = read_lines(toy_corpus["dev.en"]), read_lines(toy_corpus["dev.de"])
    hyps, bleu = {}, {}
    for name, dirs in (
        ("first", [trained_model[0]]),
        ("second", [second_model[0]]),
        ("ensemble", [trained_model[0], second_model[0]]),
        ("first twice", [trained_model[0], trained_model[0]]),
    ):
        model, src_sp, trg_sp = load_ensemble(dirs, device)
        assert isinstance(model, Ensemble) == (len(dirs) == 2)
        hyps[name] = translate_lines(Translator(model, src_sp, trg_sp, config, device), src)
        assert len(hyps[name]) == len(src) and all(hyps[name])
        bleu[name] = score_corpus(hyps[name], ref)["bleu"]["score"]
    assert bleu["ensemble"] >= min(bleu["first"], bleu["second"]) - 5, bleu
    assert hyps["ensemble"] not in (hyps["first"], hyps["second"]), "both members take part"
    assert hyps["first twice"] == hyps["first"], "two copies of one model decode as the model"


def test_different_subword_models_are_one_line_errors(trained_model, toy_corpus, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(trained_model[0], other)
    spm_dir = tmp_path / "spm"
    train_subword(
        [toy_corpus["train.en"]],
        [toy_corpus["train.de"]],
        spm_dir / "en.model",
        spm_dir / "de.model",
        SubwordConfig(vocab_size=81, joint=False),  # as many pieces as the model's (else load_model objects first)
    )
    shutil.copyfile(spm_dir / "de.model", other / TRG_SPM)
    meta = json.loads((other / "meta.json").read_text())  # a model of its own: its meta.json records that model
    meta["subword"][TRG_SPM]["sha256"] = hash_file(other / TRG_SPM)
    (other / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataError) as excinfo:
        load_ensemble([trained_model[0], other], get_device("cpu"))
    assert_one_line(excinfo, trained_model[0], other, "target subword model")


def test_cli_translates_with_two_models(trained_model, second_model):
    src = ["the big red dog runs", "a small woman eats", "the cat sleeps"]
    dirs = [str(trained_model[0]), str(second_model[0])]
    out = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--model", dirs[0], "--model", dirs[1], "--beam-size", "3"],
        input="".join(s + "\n" for s in src),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    device = get_device("cpu")
    model, src_sp, trg_sp = load_ensemble(dirs, device)
    assert isinstance(model, Ensemble)
    translator = Translator(model, src_sp, trg_sp, DecodeConfig(beam_size=3), device)
    assert out.stdout.splitlines() == translate_lines(translator, src)
