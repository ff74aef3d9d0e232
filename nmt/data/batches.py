"""Parallel data as pre-encoded integer arrays, length-bucketed token batches and padding.

Legend: B batch size, S source length, T target length.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch

from nmt.atomic import read_lines
from nmt.errors import DataError
from nmt.vocab import BOS, EOS, PAD


class EncodedCorpus:
    """Sentences of one language as one flat int32 array plus offsets (no per-step string work)."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids = ids
        self.offsets = offsets  # may be memory-mapped (nmt.data.binarize)
        self.lengths = _lengths(offsets)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    @classmethod
    def from_lines(cls, lines: list[str], sp: spm.SentencePieceProcessor) -> "EncodedCorpus":
        """Encode ``lines`` with ``sp`` and append EOS to every sentence."""
        pieces = sp.encode(lines)
        lengths = np.fromiter((len(p) + 1 for p in pieces), dtype=np.int64, count=len(pieces))
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.empty(offsets[-1], dtype=np.int32)
        for i, p in enumerate(pieces):
            ids[offsets[i] : offsets[i + 1] - 1] = p
            ids[offsets[i + 1] - 1] = EOS
        return cls(ids, offsets)


def _lengths(offsets: np.ndarray) -> np.ndarray:
    """Sentence lengths (N,) from ``offsets`` (N + 1,): uint16 when every length fits, else int32.

    Computed in chunks, so a memory-mapped ``offsets`` is never copied whole; 2 bytes per sentence
    is what a training process keeps of a corpus besides the memory-mapped files.
    """
    n, chunk = len(offsets) - 1, 1 << 20
    longest = max((int(np.diff(offsets[s : s + chunk + 1]).max()) for s in range(0, n, chunk)), default=0)
    lengths = np.empty(n, dtype=np.uint16 if longest <= np.iinfo(np.uint16).max else np.int32)
    for start in range(0, n, chunk):
        lengths[start : start + chunk] = np.diff(offsets[start : start + chunk + 1])
    return lengths


def read_corpus(paths: str | Path | list[str | Path]) -> list[str]:
    """The lines of one file, or of several files one after the other."""
    if isinstance(paths, (str, Path)):
        return read_lines(paths)
    return [line for path in paths for line in read_lines(path)]


@dataclass
class ParallelData:
    """Aligned encoded source and target sentences."""

    src: EncodedCorpus
    trg: EncodedCorpus

    @classmethod
    def from_files(
        cls,
        src_path: str | Path | list[str | Path],
        trg_path: str | Path | list[str | Path],
        src_sp: spm.SentencePieceProcessor,
        trg_sp: spm.SentencePieceProcessor,
        max_length: int | None = None,
    ) -> "ParallelData":
        """Encode aligned files (or lists of files); see :meth:`from_lines`."""
        src_lines, trg_lines = read_corpus(src_path), read_corpus(trg_path)
        return cls.from_lines(src_lines, trg_lines, src_sp, trg_sp, max_length, names=(str(src_path), str(trg_path)))

    @classmethod
    def from_lines(
        cls,
        src_lines: list[str],
        trg_lines: list[str],
        src_sp: spm.SentencePieceProcessor,
        trg_sp: spm.SentencePieceProcessor,
        max_length: int | None = None,
        names: tuple[str, str] = ("source", "target"),
    ) -> "ParallelData":
        """Encode aligned sentences.

        Pairs longer than ``max_length`` subwords (EOS included) on either side are left out.

        :param names: what error messages call the two sides (their files)
        """
        if len(src_lines) != len(trg_lines):
            raise DataError(f"{names[0]} has {len(src_lines)} lines but {names[1]} has {len(trg_lines)}")
        src, trg = EncodedCorpus.from_lines(src_lines, src_sp), EncodedCorpus.from_lines(trg_lines, trg_sp)
        if max_length is not None:
            keep = np.flatnonzero((src.lengths <= max_length) & (trg.lengths <= max_length))
            if len(keep) < len(src):
                src, trg = _subset(src, keep), _subset(trg, keep)
        if len(src) == 0:
            raise DataError(f"{names[0]}: no sentence pairs left to train on")
        return cls(src, trg)

    def __len__(self) -> int:
        return len(self.src)


def _subset(corpus: EncodedCorpus, keep: np.ndarray) -> EncodedCorpus:
    lines = [corpus[i] for i in keep]
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lines], out=offsets[1:])
    ids = np.concatenate(lines) if lines else np.empty(0, dtype=np.int32)
    return EncodedCorpus(ids, offsets)


def weighted_epoch(parts: np.ndarray, weights: list[float] | None, seed: int, epoch: int) -> np.ndarray | None:
    """The sentences of one epoch when the corpora of a training set are weighted (upsampled or downsampled).

    The corpora are consecutive runs of sentences, ``parts[k]`` of them for corpus k. A corpus of weight ``w``
    takes part ``floor(w)`` times whole, plus a random ``round((w - floor(w)) * parts[k])`` of its sentences,
    drawn again each epoch: weight 2 shows every pair twice per epoch, 0.5 a different half each epoch, 1.5 every
    pair once and half of them twice. The draw depends only on ``(seed, epoch)``, so a resumed run replays it.
    Only index arrays are built (4 bytes per drawn sentence when they fit in int32), never a copy of the corpus.

    :param parts: shape (corpora,) sentences per corpus, in the order of the training set
    :param weights: one weight > 0 per corpus; None (or all 1) for every sentence once
    :return: shape (M,) the sentence indices of the epoch, a corpus after the other (:func:`token_batches`
        sorts them); None when every weight is 1 (the epoch is every sentence once)
    """
    if weights is None or all(weight == 1 for weight in weights):
        return None
    if len(weights) != len(parts):
        raise ValueError(f"{len(weights)} weights for {len(parts)} corpora")
    rng = np.random.default_rng([seed, epoch, 1])  # not the stream of the batches' tie-break
    total = int(sum(int(w) * n + round((w - int(w)) * n) for w, n in zip(weights, parts, strict=True)))
    dtype = np.int32 if int(np.sum(parts)) < 2**31 else np.int64
    sample, filled = np.empty(total, dtype=dtype), 0
    starts = np.concatenate([[0], np.cumsum(parts)[:-1]])
    for start, n, weight in zip(starts, parts, weights, strict=True):
        whole, extra = int(weight), round((weight - int(weight)) * int(n))
        for _ in range(whole):
            sample[filled : filled + n] = np.arange(start, start + n, dtype=dtype)
            filled += n
        sample[filled : filled + extra] = start + rng.choice(int(n), size=extra, replace=False)
        filled += extra
    return sample


def temperature_weights(parts: np.ndarray, temperature: float) -> list[float] | None:
    """Corpus weights (:func:`weighted_epoch`) that draw corpus k with probability ``n_k^(1/T) / sum_j n_j^(1/T)``
    (temperature sampling, Arivazhagan et al. 2019), ``n_k = parts[k]``, in an epoch of as many sentences as the
    corpora hold: weight ``w_k = N n_k^(1/T - 1) / sum_j n_j^(1/T)``. T = 1 draws every sentence once (None); a
    larger T draws the small corpora (a multilingual model's smaller directions) more often and the large ones less,
    up to a uniform draw of the corpora as T grows. A corpus with no sentence keeps weight 1 (nothing to draw).

    :param parts: shape (corpora,) sentences per corpus
    :return: one weight > 0 per corpus, or None when every weight is 1
    """
    sizes = np.asarray(parts, dtype=np.float64)
    drawn = sizes > 0
    if temperature == 1 or drawn.sum() < 2:
        return None
    scaled = np.where(drawn, sizes, 1.0) ** (1 / temperature)
    weights = np.where(drawn, sizes.sum() * scaled / np.where(drawn, sizes, 1.0) / scaled[drawn].sum(), 1.0)
    return None if np.allclose(weights, 1) else [float(w) for w in weights]  # equal sizes: every pair once


def token_batches(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    batch_tokens: int,
    seed: int,
    epoch: int,
    sample: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Group sentence indices into batches of about ``batch_tokens`` padded target tokens.

    Sentences are sorted by (target, source) length with a random tie-break, cut into batches
    whose padded size ``B * max(T, S)`` stays within the budget, and the batch order is
    shuffled. The result depends only on ``(seed, epoch)``, so a resumed run can replay it.

    :param src_lengths: shape (N,) source lengths
    :param trg_lengths: shape (N,) target lengths
    :param sample: shape (M,) the sentences of the epoch, a sentence possibly several times
        (:func:`weighted_epoch`); None for every sentence once
    :return: list of index arrays, one per batch
    """
    rng = np.random.default_rng([seed, epoch])
    batches = sorted_batches(src_lengths, trg_lengths, batch_tokens, rng, sample)
    rng.shuffle(batches)
    return batches


def sorted_batches(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    batch_tokens: int,
    rng: np.random.Generator,
    sample: np.ndarray | None = None,
) -> list[np.ndarray]:
    """:func:`token_batches` before the shuffle: the batches in the order of their sentences' (target, source)
    length, ties broken by ``rng``."""
    if sample is not None:
        src_lengths, trg_lengths = src_lengths[sample], trg_lengths[sample]  # (M,) each
    order = np.lexsort((rng.random(len(trg_lengths)), src_lengths, trg_lengths))
    if len(order) < 2**31:  # the epoch's order stays alive with its batches: 4 bytes per sentence, not 8
        order = order.astype(np.int32)
    longest = np.maximum(src_lengths, trg_lengths)[order]  # (N,) padded length of each sentence, in sorted order
    if sample is not None:
        order = sample[order]  # positions in the sample -> sentence indices
    batches, start = [], 0
    while start < len(order):  # a loop over batches; numpy does the sentences
        size = _batch_size(longest[start:], batch_tokens)
        batches.append(order[start : start + size])
        start += size
    return batches


def epoch_batches(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    parts: np.ndarray,
    batch_tokens: int,
    seed: int,
    epoch: int,
    weights: list[float] | None = None,
    shares: list[float] | None = None,
) -> list[np.ndarray]:
    """The token batches of one epoch of a training set of corpora: every sentence once (neither ``weights`` nor
    ``shares``), the epoch's weighted draw of the corpora (:func:`weighted_epoch`), or batches of which each corpus
    fills a fixed share (:func:`mixed_batches`). They depend only on ``(seed, epoch)``, so a resumed run replays them.

    :param parts: shape (corpora,) sentences per corpus, in the order of the training set
    :param weights: one weight > 0 per corpus
    :param shares: one share >= 0 per corpus, summing to 1 (not with ``weights``)
    :return: list of index arrays, one per batch, in training order
    """
    if shares is not None:
        return mixed_batches(src_lengths, trg_lengths, parts, shares, batch_tokens, seed, epoch)
    sample = weighted_epoch(parts, weights, seed, epoch)
    return token_batches(src_lengths, trg_lengths, batch_tokens, seed, epoch, sample)


def mixed_batches(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    parts: np.ndarray,
    shares: list[float],
    batch_tokens: int,
    seed: int,
    epoch: int,
) -> list[np.ndarray]:
    """Batches of which corpus k fills ``shares[k]`` of the tokens: a mix that holds in every batch, as OpusTrainer's
    stages mix their corpora, rather than over the epoch only.

    Each drawn corpus is cut into token batches of its own (:func:`sorted_batches` with ``batch_tokens * share``
    padded tokens), these are sorted by padded length, and the i-th shortest of every corpus make up one batch, so
    that sentences of like length meet (little padding). An epoch is one pass over the corpus that needs the most
    batches; the others run through their sentences again, a new draw each round (:func:`_corpus_batches`). Each
    round's last batch of a corpus (its longest sentences, what is left) can be small, so its batch holds less of
    that corpus. Where the corpora's lengths differ at the same rank, the shorter pairs pad to the longer, and a batch
    can exceed ``batch_tokens`` by that padding. Only index arrays are built, never a copy of the corpus.

    :param shares: one share >= 0 per corpus, summing to 1; a corpus of share 0 is not drawn
    :return: list of index arrays, one per batch, shuffled
    """
    bounds = np.concatenate([[0], np.cumsum(parts)])
    drawn = [k for k, share in enumerate(shares) if share > 0]
    budgets = {k: max(1, round(batch_tokens * shares[k])) for k in drawn}
    firsts = {k: _corpus_round(src_lengths, trg_lengths, bounds, k, budgets[k], seed, epoch, 0) for k in drawn}
    n = max(len(batches) for batches in firsts.values())
    columns = [
        _corpus_batches(src_lengths, trg_lengths, bounds, k, budgets[k], seed, epoch, firsts[k], n) for k in drawn
    ]
    batches = [np.concatenate(row) for row in zip(*columns, strict=True)]
    np.random.default_rng([seed, epoch, 2]).shuffle(batches)  # not the stream of weighted_epoch's draw
    return batches


def _corpus_round(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    bounds: np.ndarray,
    k: int,
    budget: int,
    seed: int,
    epoch: int,
    round_: int,
) -> list[np.ndarray]:
    """One pass over corpus k (sentences ``bounds[k]`` to ``bounds[k + 1]``) in token batches of ``budget``, a draw
    of its own for each ``(seed, epoch, k, round_)``, in the order of length."""
    rng = np.random.default_rng([seed, epoch, 3, k + 1, round_ + 1])  # no trailing 0: [a, 0] seeds as [a]
    start, stop = int(bounds[k]), int(bounds[k + 1])
    sample = np.arange(start, stop, dtype=np.int32 if stop < 2**31 else np.int64)
    return sorted_batches(src_lengths, trg_lengths, budget, rng, sample)


def _corpus_batches(
    src_lengths: np.ndarray,
    trg_lengths: np.ndarray,
    bounds: np.ndarray,
    k: int,
    budget: int,
    seed: int,
    epoch: int,
    first: list[np.ndarray],
    n: int,
) -> list[np.ndarray]:
    """``n`` batches of corpus k sorted by padded length: its ``first`` round, then further rounds as needed, of the
    last round a random choice of batches (so that it does not favour short sentences)."""
    batches, round_ = list(first), 1
    while len(batches) < n:
        found = _corpus_round(src_lengths, trg_lengths, bounds, k, budget, seed, epoch, round_)
        if len(batches) + len(found) > n:
            rng = np.random.default_rng([seed, epoch, 4, k + 1, round_ + 1])
            found = [found[i] for i in np.sort(rng.choice(len(found), n - len(batches), replace=False))]
        batches += found
        round_ += 1
    padded = [max(int(src_lengths[b].max()), int(trg_lengths[b].max())) for b in batches]
    return [batches[i] for i in np.argsort(padded, kind="stable")]


def corpus_tokens(batches: list[np.ndarray], trg_lengths: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Target tokens of each corpus in ``batches``, shape (corpora,): the realised mix of an epoch."""
    indices = np.concatenate(batches)
    corpus = np.searchsorted(np.cumsum(parts), indices, side="right")
    return np.bincount(corpus, weights=trg_lengths[indices], minlength=len(parts))


def _batch_size(longest: np.ndarray, batch_tokens: int) -> int:
    """How many of the next sentences (padded lengths ``longest``, in batch order) the next batch takes.

    Greedy: the most sentences whose number times their running maximum stays within ``batch_tokens``,
    at least one. That product only grows along the sentences, so the cut is a binary search in a
    window, which doubles until the cut falls inside it (cost proportional to the batch, not the corpus).
    """
    window = 64
    while True:
        cost = np.maximum.accumulate(longest[:window]) * np.arange(1, min(window, len(longest)) + 1)
        size = max(1, int(np.searchsorted(cost, batch_tokens, side="right")))
        if size < len(cost) or window >= len(longest):
            return size
        window *= 2


@dataclass
class Batch:
    """A padded batch; ``trg_in`` starts with BOS, ``trg_out`` ends with EOS."""

    src: torch.Tensor  # (B, S)
    trg_in: torch.Tensor  # (B, T)
    trg_out: torch.Tensor  # (B, T)

    @property
    def n_trg_tokens(self) -> int:
        return int((self.trg_out != PAD).sum())

    def to(self, device: torch.device) -> "Batch":
        return Batch(*(t.to(device, non_blocking=True) for t in (self.src, self.trg_in, self.trg_out)))


def pad(seqs: list[np.ndarray], prefix: int | None = None) -> torch.Tensor:
    """Right-pad integer sequences into a (B, L) LongTensor, optionally prefixing each with ``prefix``."""
    extra = 0 if prefix is None else 1
    out = np.full((len(seqs), max(len(s) for s in seqs) + extra), PAD, dtype=np.int64)
    for row, s in enumerate(seqs):
        if prefix is not None:
            out[row, 0] = prefix
        out[row, extra : extra + len(s)] = s
    return torch.from_numpy(out)


def make_batch(data: ParallelData, indices: np.ndarray) -> Batch:
    """Collate the pairs at ``indices`` into a :class:`Batch`."""
    trg = [data.trg[i] for i in indices]
    trg_in = pad([t[:-1] for t in trg], prefix=BOS)  # BOS y1 .. yn
    return Batch(src=pad([data.src[i] for i in indices]), trg_in=trg_in, trg_out=pad(trg))
