"""Sentencepiece training: joint and separate models, BPE and unigram, fixed special ids."""

import pytest

from nmt.config import SubwordConfig
from nmt.data.subword import load_subword, train_subword
from nmt.errors import DataError
from nmt.vocab import BOS, EOS, PAD, UNK


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
@pytest.mark.parametrize("joint", [True, False])
def test_train_subword(toy_corpus, tmp_path, model_type, joint):
    src_model, trg_model = tmp_path / "en.model", tmp_path / "de.model"
    config = SubwordConfig(model_type=model_type, vocab_size=60, joint=joint)
    train_subword([toy_corpus["train.en"]], [toy_corpus["train.de"]], src_model, trg_model, config)
    src_sp = load_subword(src_model)
    assert load_subword(trg_model).get_piece_size() > 20
    assert (src_sp.pad_id(), src_sp.unk_id(), src_sp.bos_id(), src_sp.eos_id()) == (PAD, UNK, BOS, EOS)
    assert (src_model.read_bytes() == trg_model.read_bytes()) == joint
    sentence = "the big dog runs"
    assert src_sp.decode(src_sp.encode(sentence)) == sentence
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_input_is_one_line(tmp_path):
    with pytest.raises(DataError, match="missing.en: subword training input is missing or empty"):
        train_subword([tmp_path / "missing.en"], [tmp_path / "x.de"], tmp_path / "a", tmp_path / "b", SubwordConfig())


def test_load_missing_model(tmp_path):
    with pytest.raises(DataError, match="subword model not found"):
        load_subword(tmp_path / "none.model")
