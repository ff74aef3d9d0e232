"""Encoded corpora, length-bucketed token batches and padding."""

import numpy as np
import pytest

from nmt.data import BOS, EOS, PAD, ParallelData, make_batch, pad, token_batches
from nmt.errors import DataError
from nmt.subword import load_subword


@pytest.fixture(scope="module")
def toy_data(toy_corpus, toy_spm):
    sp = load_subword(toy_spm["en"])
    return ParallelData.from_files(toy_corpus["train.en"], toy_corpus["train.de"], sp, sp), sp


def test_encoding_appends_eos(toy_data, toy_corpus):
    data, sp = toy_data
    first = toy_corpus["train.en"].read_text().splitlines()[0]
    assert list(data.src[0]) == sp.encode(first) + [EOS]
    assert len(data) == 600
    assert data.src.lengths.sum() == len(data.src.ids)


def test_max_length_drops_long_pairs(toy_corpus, toy_spm):
    sp = load_subword(toy_spm["en"])
    full = ParallelData.from_files(toy_corpus["train.en"], toy_corpus["train.de"], sp, sp)
    limit = int(np.median(full.trg.lengths))
    short = ParallelData.from_files(toy_corpus["train.en"], toy_corpus["train.de"], sp, sp, max_length=limit)
    assert 0 < len(short) < len(full)
    assert short.src.lengths.max() <= limit and short.trg.lengths.max() <= limit


def test_misaligned_files_name_both(tmp_path, toy_spm):
    sp = load_subword(toy_spm["en"])
    (tmp_path / "a.en").write_text("a\nb\n")
    (tmp_path / "a.de").write_text("a\n")
    with pytest.raises(DataError, match=r"a.en has 2 lines but .*a.de has 1"):
        ParallelData.from_files(tmp_path / "a.en", tmp_path / "a.de", sp, sp)


def test_token_batches_cover_every_sentence_once_within_budget(toy_data):
    data, _ = toy_data
    batches = token_batches(data.src.lengths, data.trg.lengths, batch_tokens=200, seed=1, epoch=1)
    seen = np.sort(np.concatenate(batches))
    assert (seen == np.arange(len(data))).all()
    for b in batches:
        longest = max(data.src.lengths[b].max(), data.trg.lengths[b].max())
        assert len(b) == 1 or longest * len(b) <= 200
    again = token_batches(data.src.lengths, data.trg.lengths, batch_tokens=200, seed=1, epoch=1)
    assert all((a == b).all() for a, b in zip(batches, again, strict=True))
    other = token_batches(data.src.lengths, data.trg.lengths, batch_tokens=200, seed=1, epoch=2)
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(batches, other, strict=False))


def test_bucketing_keeps_padding_low(toy_data):
    data, _ = toy_data
    batches = token_batches(data.src.lengths, data.trg.lengths, batch_tokens=300, seed=1, epoch=1)
    real = sum(int(data.trg.lengths[b].sum()) for b in batches)
    padded = sum(int(data.trg.lengths[b].max()) * len(b) for b in batches)
    assert real / padded > 0.9


def test_make_batch_shifts_target(toy_data):
    data, _ = toy_data
    batch = make_batch(data, np.array([0, 1, 2]))
    assert batch.trg_in.shape == batch.trg_out.shape
    assert (batch.trg_in[:, 0] == BOS).all()
    for row, i in enumerate([0, 1, 2]):
        n = len(data.trg[i])
        assert batch.trg_out[row, :n].tolist() == list(data.trg[i])
        assert batch.trg_in[row, 1:n].tolist() == list(data.trg[i][:-1])
        assert (batch.trg_out[row, n:] == PAD).all()
    assert batch.n_trg_tokens == sum(len(data.trg[i]) for i in [0, 1, 2])


def test_pad():
    out = pad([np.array([5, 6, 3]), np.array([7, 3])])
    assert out.tolist() == [[5, 6, 3], [7, 3, PAD]]
