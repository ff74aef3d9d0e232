"""Binarized training data: the same ids as encoding the text, streamed in chunks, mapped read-only, checked."""

import dataclasses
import gzip
import json
import logging

import numpy as np
import pytest
from conftest import assert_one_line, write_lines

import nmt.data.binarize
from nmt.config import SubwordConfig, TrainConfig
from nmt.data.batches import ParallelData
from nmt.data.binarize import BinarizedData, binarize, open_training_data
from nmt.data.subword import load_subword, train_subword
from nmt.errors import DataError
from nmt.training.files import TrainFiles
from nmt.training.loop import train

TINY = {"arch": "transformer", "size": "tiny"}


def assert_same_pairs(binarized, encoded) -> None:
    assert len(binarized) == len(encoded)
    for side in ("src", "trg"):
        a, b = getattr(binarized, side), getattr(encoded, side)
        assert (np.asarray(a.lengths) == b.lengths).all()
        for i in range(len(encoded)):
            assert a[i].tolist() == b[i].tolist(), (side, i)


@pytest.mark.parametrize("max_length", [None, 12])
def test_binarized_ids_equal_encoding_the_text(toy_corpus, toy_spm, two_corpora, tmp_path, monkeypatch, max_length):
    """Two corpora, encoded 64 pairs at a time with 2 threads, give the pairs that ParallelData encodes in one go."""
    monkeypatch.setattr(nmt.data.binarize, "CHUNK_LINES", 64)
    sp = load_subword(toy_spm["en"])
    header = binarize(
        two_corpora["en"], two_corpora["de"], toy_spm["en"], toy_spm["de"], tmp_path / "train", max_length, threads=2
    )
    expected = ParallelData.from_files(toy_corpus["train.en"], toy_corpus["train.de"], sp, sp, max_length)
    data = BinarizedData.open(tmp_path / "train")
    assert_same_pairs(data, expected)
    assert isinstance(data.src.ids, np.memmap) and data.src.ids.dtype == np.uint16 and not data.src.ids.flags.writeable
    assert header == data.header == json.loads((tmp_path / "train.json").read_text())
    assert header["pairs"] == len(expected) and header["dropped_by_length"] == 600 - len(expected)
    assert (header["dropped_by_length"] > 0) == (max_length is not None)
    assert header["src"]["tokens"] == int(expected.src.lengths.sum()) and header["trg"]["dtype"] == "uint16"
    assert header["src"]["files"] == [str(p) for p in two_corpora["en"]] and len(header["src"]["spm_sha256"]) == 64
    # The pairs kept of each corpus (file pair): what corpus weights apply to.
    per_file = [
        len(ParallelData.from_files(two_corpora["en"][i], two_corpora["de"][i], sp, sp, max_length)) for i in (0, 1)
    ]
    assert header["file_pairs"] == per_file and data.parts.tolist() == per_file
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "train.json",
        "train.src.ids",
        "train.src.offsets",
        "train.trg.ids",
        "train.trg.offsets",
    ]


def test_training_data_is_cut_to_the_training_limit(toy_corpus, toy_spm, tmp_path):
    sp = load_subword(toy_spm["en"])
    binarize(toy_corpus["train.en"], toy_corpus["train.de"], toy_spm["en"], toy_spm["de"], tmp_path / "all")
    data = open_training_data(tmp_path / "all", toy_spm["en"], toy_spm["de"], max_length=12)
    expected = ParallelData.from_files(toy_corpus["train.en"], toy_corpus["train.de"], sp, sp, 12)
    assert 0 < len(data) < 600
    assert_same_pairs(data, expected)
    binarize(toy_corpus["train.en"], toy_corpus["train.de"], toy_spm["en"], toy_spm["de"], tmp_path / "short", 12)
    with pytest.raises(DataError) as excinfo:
        open_training_data(tmp_path / "short", toy_spm["en"], toy_spm["de"], max_length=100)
    assert_one_line(excinfo, tmp_path / "short.json", "binarized with max_length 12", "binarize again")


def test_corpora_of_a_set_cut_to_a_shorter_limit(toy_spm, two_corpora, tmp_path):
    """Cut at training time to a shorter max_length, each corpus keeps the pairs within it: the weights still
    apply to the right sentences."""
    sp = load_subword(toy_spm["en"])
    binarize(two_corpora["en"], two_corpora["de"], toy_spm["en"], toy_spm["de"], tmp_path / "t")
    data = open_training_data(tmp_path / "t", toy_spm["en"], toy_spm["de"], max_length=12)
    per_file = [len(ParallelData.from_files(two_corpora["en"][i], two_corpora["de"][i], sp, sp, 12)) for i in (0, 1)]
    assert data.parts.tolist() == per_file and sum(per_file) == len(data) < 600
    assert data.corpus_names == ["a", "b"]
    assert data.corpus_weights({"b": 2, "a": 1}) == [1.0, 2.0] and data.corpus_weights(None) is None
    with pytest.raises(DataError) as excinfo:
        data.corpus_weights({"b": 2})
    assert_one_line(excinfo, tmp_path / "t.json", "no weight for ['a']")
    with pytest.raises(DataError) as excinfo:
        data.corpus_weights({"a": 1, "b": 2, "c": 3})
    assert_one_line(excinfo, tmp_path / "t.json", "no corpus ['c']")


def test_a_mix_gives_each_corpus_by_name_its_share(toy_spm, two_corpora, tmp_path):
    """Shares keyed by corpus name, normalised; a corpus the mix leaves out gets 0; a name of no corpus is one line
    naming the header and the corpora there are."""
    binarize(two_corpora["en"][::-1], two_corpora["de"][::-1], toy_spm["en"], toy_spm["de"], tmp_path / "t")
    data = open_training_data(tmp_path / "t", toy_spm["en"], toy_spm["de"], max_length=128)
    assert data.corpus_shares({"a": 3, "b": 1}) == [0.25, 0.75] and data.corpus_shares({"b": 2}) == [1.0, 0.0]
    assert data.corpus_shares(None) is None
    with pytest.raises(DataError) as excinfo:
        data.corpus_shares({"a": 1, "real": 1})
    assert_one_line(excinfo, tmp_path / "t.json", "mix of ['a', 'real']", "corpora binarized are ['b', 'a']")


def test_weights_meet_their_corpora_whatever_the_binarized_order(toy_spm, two_corpora, tmp_path):
    """Weights are keyed by corpus name, so a set binarized in the other order gives each corpus its own weight
    (by position, a reordered config met the old order: the wrong corpus upsampled)."""
    binarize(two_corpora["en"][::-1], two_corpora["de"][::-1], toy_spm["en"], toy_spm["de"], tmp_path / "t")
    data = open_training_data(tmp_path / "t", toy_spm["en"], toy_spm["de"], max_length=128)
    assert data.corpus_names == ["b", "a"] and data.parts.tolist() == [350, 250]
    assert data.corpus_weights({"a": 3, "b": 1}) == [1.0, 3.0]


def test_training_draws_each_corpus_by_its_weight(toy_spm, two_corpora, tmp_path, caplog):
    """corpus_weights reach the epoch: the second corpus three times (a loop test runs the weighted epoch's
    batches; here the count of pairs an epoch draws), and a weight per corpus is required."""
    caplog.set_level(logging.INFO, logger="nmt")
    text = (two_corpora["en"], two_corpora["de"])
    files = TrainFiles(text, two_corpora["en"][0], two_corpora["de"][0], toy_spm["en"], toy_spm["de"], tmp_path / "m")
    config = TrainConfig(
        max_steps=2, valid_every=2, checkpoint_every=2, batch_tokens=200, threads=1, corpus_weights={"a": 1, "b": 3}
    )
    summary = train(TINY, config, files)
    assert summary["steps"] == 2
    assert "corpus weights: a 250 pairs x 1, b 350 pairs x 3: 1300 pairs per epoch" in caplog.text
    with pytest.raises(DataError) as excinfo:
        config = dataclasses.replace(config, corpus_weights={"a": 1})
        train(TINY, config, dataclasses.replace(files, train_data=tmp_path / "m/train", model_dir=tmp_path / "m2"))
    assert_one_line(excinfo, tmp_path / "m/train.json", "no weight for ['b']")


def test_misaligned_corpus_names_both_files_and_writes_nothing(toy_spm, two_corpora, tmp_path):
    src = write_lines(tmp_path / "c.en", ["a b", "c"])
    trg = write_lines(tmp_path / "c.de", ["a"])
    with pytest.raises(DataError) as excinfo:
        binarize([two_corpora["en"][0], src], [two_corpora["de"][0], trg], toy_spm["en"], toy_spm["de"], tmp_path / "x")
    assert_one_line(excinfo, f"{src} has 2 lines but {trg} has 1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.de", "c.en"]


def test_text_not_utf8_names_the_file_and_line_or_that_it_is_compressed(toy_spm, tmp_path):
    src = tmp_path / "c.en"
    src.write_bytes(b"a b\ncaf\xe9\nc\n")
    trg = write_lines(tmp_path / "c.de", ["a", "b", "c"])
    with pytest.raises(DataError) as excinfo:
        binarize([src], [trg], toy_spm["en"], toy_spm["de"], tmp_path / "x")
    assert assert_one_line(excinfo, src).startswith(f"{src}: line 2 is not UTF-8")
    packed = tmp_path / "c.de.gz"
    packed.write_bytes(gzip.compress(b"a\nb\nc\n" * 1000 + bytes(range(128, 256))))
    with pytest.raises(DataError) as excinfo:
        binarize([trg], [packed], toy_spm["en"], toy_spm["de"], tmp_path / "x")
    assert "compressed (gzip or xz); decompress it first" in assert_one_line(excinfo, packed)


def test_another_vocabulary_is_refused(toy_corpus, toy_spm, tmp_path):
    other = {"en": tmp_path / "o.en.model", "de": tmp_path / "o.de.model"}
    config = SubwordConfig(vocab_size=50)
    train_subword([toy_corpus["train.en"]], [toy_corpus["train.de"]], other["en"], other["de"], config)
    binarize(toy_corpus["train.en"], toy_corpus["train.de"], toy_spm["en"], toy_spm["de"], tmp_path / "t")
    with pytest.raises(DataError) as excinfo:
        open_training_data(tmp_path / "t", other["en"], toy_spm["de"], max_length=100)
    assert_one_line(excinfo, tmp_path / "t.json", "src side encoded with another subword model", other["en"])


def test_truncated_or_missing_files_are_one_line(toy_corpus, toy_spm, tmp_path):
    with pytest.raises(DataError) as excinfo:
        BinarizedData.open(tmp_path / "none")
    assert_one_line(excinfo, tmp_path / "none.json", "not found")
    binarize(toy_corpus["train.en"], toy_corpus["train.de"], toy_spm["en"], toy_spm["de"], tmp_path / "t")
    ids = tmp_path / "t.trg.ids"
    ids.write_bytes(ids.read_bytes()[:-2])
    with pytest.raises(DataError) as excinfo:
        BinarizedData.open(tmp_path / "t")
    assert_one_line(excinfo, ids, "binarize again")
