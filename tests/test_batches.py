"""Encoded corpora, length-bucketed token batches and padding."""

import numpy as np
import pytest

from nmt.data.batches import (
    EncodedCorpus,
    ParallelData,
    corpus_tokens,
    epoch_batches,
    make_batch,
    pad,
    token_batches,
    weighted_epoch,
)
from nmt.data.subword import load_subword
from nmt.errors import DataError
from nmt.vocab import BOS, EOS, PAD


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


def test_weighted_epoch_draws_each_corpus_by_its_weight():
    """Three corpora of 100, 60 and 40 sentences, weighted 2, 0.5 and 1.5."""
    parts = np.array([100, 60, 40])
    sample = weighted_epoch(parts, [2, 0.5, 1.5], seed=1, epoch=1)
    assert sample.dtype == np.int32 and len(sample) == 200 + 30 + 60
    counts = np.bincount(sample, minlength=200)
    assert (counts[:100] == 2).all(), "weight 2: every pair twice"
    assert sorted(np.bincount(counts[100:160], minlength=2)) == [30, 30], "weight 0.5: a half, once each"
    assert (counts[160:] >= 1).all() and (counts[160:] == 2).sum() == 20, "weight 1.5: all once, a half twice"
    # Reproducible per (seed, epoch); another half the next epoch.
    assert (weighted_epoch(parts, [2, 0.5, 1.5], seed=1, epoch=1) == sample).all()
    other = weighted_epoch(parts, [2, 0.5, 1.5], seed=1, epoch=2)
    assert set(other[200:230]) != set(sample[200:230]) and len(other) == len(sample)
    # Every weight 1, or none: every sentence once (token_batches takes them all, as without weights).
    assert weighted_epoch(parts, [1, 1, 1], seed=1, epoch=1) is None
    assert weighted_epoch(parts, None, seed=1, epoch=1) is None
    with pytest.raises(ValueError):
        weighted_epoch(parts, [1, 2], seed=1, epoch=1)


def test_token_batches_of_a_weighted_epoch(toy_data):
    """The batches hold exactly the epoch's sentences (a sentence as often as drawn), within the budget."""
    data, _ = toy_data
    parts = np.array([250, len(data) - 250])
    sample = weighted_epoch(parts, [3, 0.5], seed=2, epoch=1)
    batches = token_batches(data.src.lengths, data.trg.lengths, batch_tokens=200, seed=2, epoch=1, sample=sample)
    assert (np.sort(np.concatenate(batches)) == np.sort(sample)).all()
    for b in batches:
        longest = max(data.src.lengths[b].max(), data.trg.lengths[b].max())
        assert len(b) == 1 or longest * len(b) <= 200
    assert len(np.concatenate(batches)) == 3 * 250 + round(0.5 * (len(data) - 250))


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


def loop_token_batches(src_lengths, trg_lengths, batch_tokens, seed, epoch):
    """token_batches as it was before it was vectorised: a Python loop over the sentences (the reference)."""
    rng = np.random.default_rng([seed, epoch])
    order = np.lexsort((rng.random(len(trg_lengths)), src_lengths, trg_lengths))
    batches, start, longest = [], 0, 0
    for pos, i in enumerate(order):
        longest_now = max(longest, int(trg_lengths[i]), int(src_lengths[i]))
        if pos > start and longest_now * (pos - start + 1) > batch_tokens:
            batches.append(order[start:pos])
            start, longest_now = pos, max(int(trg_lengths[i]), int(src_lengths[i]))
        longest = longest_now
    if start < len(order):
        batches.append(order[start:])
    rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("batch_tokens", [1, 7, 64, 300, 4096, 10**6])
@pytest.mark.parametrize("shape", ["uniform", "long_sources", "ties", "outliers"])
def test_token_batches_equal_the_sentence_loop(shape, batch_tokens):
    """The same batches, in the same order, as the loop over sentences, on random lengths of several shapes:
    a source longer than its target breaks the running maximum's order within the (target, source) sort."""
    rng = np.random.default_rng(len(shape) * 1000 + batch_tokens % 997)
    n = 3000
    trg = rng.integers(1, 120, n)
    src = {
        "uniform": rng.integers(1, 120, n),
        "long_sources": np.where(rng.random(n) < 0.3, rng.integers(100, 400, n), rng.integers(1, 20, n)),
        "ties": rng.integers(1, 4, n),
        "outliers": np.where(rng.random(n) < 0.01, 5000, rng.integers(1, 60, n)),
    }[shape]
    if shape == "ties":
        trg = rng.integers(1, 4, n)
    for lengths in ((src, trg), (src.astype(np.int32), trg.astype(np.int32))):
        for seed, epoch in ((1, 1), (7, 3)):
            new = token_batches(*lengths, batch_tokens, seed, epoch)
            old = loop_token_batches(*lengths, batch_tokens, seed, epoch)
            assert len(new) == len(old)
            assert all(np.array_equal(a, b) for a, b in zip(new, old, strict=True))
    assert token_batches(np.zeros(0, np.int32), np.zeros(0, np.int32), 100, 1, 1) == []


def test_what_a_training_process_keeps_per_pair_is_narrow():
    """Lengths are uint16 and the epoch's order int32 (4.8M WMT pairs: 13 bytes per pair kept, not 25),
    with the same batches; a length beyond uint16 widens to int32 instead of wrapping."""
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(1, 100, 5000))]).astype(np.int64)
    corpus = EncodedCorpus(np.zeros(offsets[-1], dtype=np.int32), offsets)
    assert corpus.lengths.dtype == np.uint16
    np.testing.assert_array_equal(corpus.lengths, np.diff(offsets))
    wide = np.array([0, 3, 3 + 70_000], dtype=np.int64)
    assert EncodedCorpus(np.zeros(wide[-1], dtype=np.int32), wide).lengths.tolist() == [3, 70_000]
    trg = rng.integers(1, 100, 5000).astype(np.uint16)
    batches = token_batches(corpus.lengths, trg, 2000, seed=1, epoch=2)
    assert all(b.dtype == np.int32 for b in batches)
    wide_batches = token_batches(corpus.lengths.astype(np.int64), trg.astype(np.int64), 2000, seed=1, epoch=2)
    assert [b.tolist() for b in batches] == [b.tolist() for b in wide_batches]


def two_corpus_lengths(longer: int = 15, sizes: tuple[int, int] = (3000, 500)):
    """Lengths of two corpora of ``sizes`` pairs, the second's up to ``longer`` subwords longer (its sources a little
    longer still), as real and back-translated data of another kind."""
    rng = np.random.default_rng(5)
    trg = np.concatenate([rng.integers(3, 30, sizes[0]), rng.integers(3 + longer // 3, 30 + longer, sizes[1])])
    src = trg + rng.integers(0, 4, len(trg))
    return src.astype(np.uint16), trg.astype(np.uint16), np.array(sizes)


def filled(batches, src, trg) -> float:
    """The share of the padded batches (B * max(S, T) each) that is tokens."""
    longest = np.maximum(src, trg).astype(int)
    return sum(longest[b].sum() for b in batches) / sum(longest[b].max() * len(b) for b in batches)


def test_a_mix_holds_in_every_batch():
    """Each batch's target tokens are 70% the first corpus's and 30% the second's, within a few sentences (a batch
    of each round's longest leftovers aside); the corpus that needs the most batches is seen once, the other cycles
    through all its pairs; the batches depend only on (seed, epoch)."""
    src, trg, parts = two_corpus_lengths()
    batches = epoch_batches(src, trg, parts, 3000, seed=1, epoch=1, shares=[0.7, 0.3])
    shares = np.array([trg[b[b < 3000]].astype(int).sum() / trg[b].astype(int).sum() for b in batches])
    assert len(batches) > 20 and np.mean(np.abs(shares - 0.7) < 0.05) > 0.9, np.round(np.sort(shares), 2)
    tokens = corpus_tokens(batches, trg, parts)
    assert tokens[0] / tokens.sum() == pytest.approx(0.7, abs=0.01)
    seen = np.concatenate(batches)
    assert (np.bincount(seen[seen < 3000], minlength=3000) == 1).all(), "the first corpus: every pair once"
    cycled = np.bincount(seen[seen >= 3000] - 3000, minlength=500)
    assert cycled.min() >= 1 and cycled.max() > 1, "the second corpus: every pair, some again"

    again = epoch_batches(src, trg, parts, 3000, seed=1, epoch=1, shares=[0.7, 0.3])
    assert len(again) == len(batches) and all(np.array_equal(a, b) for a, b in zip(again, batches, strict=True))
    other = epoch_batches(src, trg, parts, 3000, seed=1, epoch=2, shares=[0.7, 0.3])
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(batches, other, strict=False))


def test_a_corpus_out_of_the_mix_is_not_drawn_and_no_mix_is_the_plain_epoch():
    src, trg, parts = two_corpus_lengths()
    batches = epoch_batches(src, trg, parts, 3000, seed=1, epoch=1, shares=[0.0, 1.0])
    seen = np.sort(np.concatenate(batches))
    assert np.array_equal(seen, np.arange(3000, 3500)), "the second corpus alone, every pair once"
    plain, same = epoch_batches(src, trg, parts, 3000, 1, 1), token_batches(src, trg, 3000, 1, 1)
    assert all(np.array_equal(a, b) for a, b in zip(plain, same, strict=True))
    weighted = epoch_batches(src, trg, parts, 3000, 1, 1, weights=[1, 2])
    assert len(np.concatenate(weighted)) == 3000 + 2 * 500


def test_mixed_batches_of_corpora_of_like_lengths_pad_little():
    """The i-th shortest batches of each corpus meet: of corpora with the same lengths, a mixed batch pads about as
    little as a batch of one corpus (where their lengths differ, the shorter pairs pad to the longer; corpora of a
    few batches a round pad more, each batch spanning more lengths)."""
    src, trg, parts = two_corpus_lengths(longer=0, sizes=(30000, 5000))
    mixed = epoch_batches(src, trg, parts, 3000, seed=1, epoch=1, shares=[0.5, 0.5])
    assert filled(mixed, src, trg) > 0.95 * filled(token_batches(src, trg, 3000, seed=1, epoch=1), src, trg)
