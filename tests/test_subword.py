"""Sentencepiece training: joint and separate models, BPE and unigram, fixed special ids."""

import random
import re
import string

import pytest
from conftest import write_lines

from nmt.config import SubwordConfig
from nmt.data.subword import load_subword, train_subword
from nmt.errors import ConfigError, DataError
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


def test_a_vocabulary_smaller_than_the_characters_names_the_key_and_the_size_that_works(toy_corpus, tmp_path):
    config = SubwordConfig(vocab_size=10)
    message = r"^subword\.vocab_size: 10 pieces cannot hold the (\d+) that the characters of .*train\.en.* set at least"
    with pytest.raises(ConfigError, match=message) as excinfo:
        train_subword([toy_corpus["train.en"]], [toy_corpus["train.de"]], tmp_path / "a", tmp_path / "b", config)
    assert "\n" not in str(excinfo.value)
    least = int(re.match(message, str(excinfo.value))[1])
    config = SubwordConfig(vocab_size=least)
    train_subword([toy_corpus["train.en"]], [toy_corpus["train.de"]], tmp_path / "a", tmp_path / "b", config)
    assert not list(tmp_path.glob("*.tmp"))


def test_load_missing_model(tmp_path):
    with pytest.raises(DataError, match="subword model not found"):
        load_subword(tmp_path / "none.model")


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_model_bytes_depend_on_data_not_threads_or_paths(tmp_path, model_type):
    """The same data gives the same model file under any --cores and from any folder (its sha256 keys what follows).

    Words of random letters, unlike the toy task's few words, give unigram EM counts whose sums depend on how the
    sentences are shared out among threads.
    """
    rng = random.Random(1)
    words = ["".join(rng.choices(string.ascii_lowercase[:16], k=rng.randint(2, 8))) for _ in range(300)]
    lines = [" ".join(rng.choices(words, k=rng.randint(3, 10))) for _ in range(300)]
    config = SubwordConfig(model_type=model_type, vocab_size=100, joint=False)
    models = []
    for threads, folder in ((1, "a"), (2, "a"), (3, "b")):
        inputs = tmp_path / folder / "inputs"
        inputs.mkdir(parents=True, exist_ok=True)
        src = write_lines(inputs / f"{folder}.src", lines)
        model = tmp_path / folder / f"{threads}.model"
        train_subword([src], [src], model, tmp_path / folder / f"{threads}.trg.model", config, threads=threads)
        models.append(model.read_bytes())
    assert models[0] == models[1] == models[2]
    assert b"inputs" not in models[0]
    assert len(load_subword(tmp_path / "a" / "1.model")) > 50
