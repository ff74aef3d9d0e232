"""Normalizing and filtering of raw parallel and monolingual corpora (dev and test sets: :mod:`nmt.data.eval_sets`).

Both kinds of corpus run one filter chain: the sentence filters of :mod:`nmt.data.filters` (on both
sides of a pair, then the pair filters), then the filters that need the whole corpus
(:class:`CorpusFilter`: ``in_eval``, ``duplicate``), then the cap on the size. Raw files are read
through :mod:`nmt.data.rawtext`.
"""

import hashlib
import json
import logging
import random
import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import IO

import numpy as np
from threadpoolctl import threadpool_limits

from nmt.atomic import atomic_text, atomic_texts
from nmt.config import CleanConfig
from nmt.data.filters import PAIR_FILTERS, SENTENCE_FILTERS, PairFilter, SentenceFilter
from nmt.data.normalize import Normalizer
from nmt.data.rawtext import check_encoding, file_name, open_text, zip_aligned
from nmt.errors import DataError

log = logging.getLogger(__name__)

# The filters that need the whole corpus, in the order they are tried (see CorpusFilter).
CORPUS_FILTERS = ("in_eval", "duplicate")
FILTERS = (*PAIR_FILTERS, *CORPUS_FILTERS, "max_pairs")
# Only when asked for (clean_monolingual): sentence_form (nmt.data.filters.in_sentence_form), and in_train (a training
# source, which a forward model of iterative back-translation would translate back into its own training target).
MONO_FILTERS = (*SENTENCE_FILTERS, "sentence_form", "in_eval", "in_train", "duplicate", "max_sentences")
# Pairs per chunk handed to a worker process.
CHUNK_PAIRS = 5000


def clean_corpus(
    src_in: str | Path,
    trg_in: str | Path,
    src_out: str | Path,
    trg_out: str | Path,
    report: str | Path,
    config: CleanConfig,
    src_lang: str,
    trg_lang: str,
    exclude: list[str | Path] = (),
    threads: int = 1,
    sources: tuple[str, str] | None = None,
) -> dict:
    """Normalize and filter a parallel training corpus, streaming both sides in lockstep.

    Each pair is dropped by the first filter that matches, in the order of :data:`FILTERS`: the
    filters of :class:`nmt.data.filters.PairFilter` (the sentence filters ``invalid_utf8``, ``empty``,
    ``ansi_code``, ``too_short``, ``too_long`` on either side, then ``long_token``, ``ratio``, ``copy``,
    ``alpha``, ``langid``), then those of :class:`CorpusFilter`: ``in_eval`` (with
    ``config.decontaminate``: the source or target sentence is a line of an ``exclude`` file, compared
    after normalization) and ``duplicate`` (the same pair seen before, if ``config.dedup``); last
    ``max_pairs`` (pairs after the first ``max_pairs`` kept). With ``config.shuffle`` the kept pairs
    are shuffled with ``config.seed``.

    The per-pair filters run in ``threads`` worker processes on chunks of :data:`CHUNK_PAIRS` pairs,
    with a bounded number of chunks in flight, so memory does not grow with the corpus (apart from
    8 to 16 bytes per kept pair for deduplication (:class:`DigestSet`), and 24 per pair when shuffling).

    :param src_in: raw source file (plain, gzip or xz)
    :param trg_in: raw target file, line-aligned with ``src_in``
    :param src_out: cleaned source, written atomically
    :param trg_out: cleaned target, written atomically
    :param report: the report as TSV (filter, pairs, share); a Markdown summary is written beside it (``.md``)
    :param config: the filter settings
    :param src_lang: source language code, for punctuation normalization and language identification
    :param trg_lang: target language code
    :param exclude: dev/test files (either language) whose sentences must not occur in the training data
    :param threads: worker processes for the per-pair filters
    :param sources: the user's source and target files as configured (URLs or paths), named in messages
    :return: the report: ``src``, ``trg``, ``lines_in``, ``kept`` and per-filter ``dropped``
    :raises DataError: if the files differ in line count, the corpus is empty, more than
        ``config.max_invalid_utf8`` of a side's lines are not UTF-8, or every pair is dropped
    """
    sources = sources or (str(src_in), str(trg_in))
    invalid = [0, 0]  # lines that are not UTF-8, per side
    dropped = dict.fromkeys(FILTERS, 0)
    held_out = _eval_digests(exclude, (src_lang, trg_lang), config) if config.decontaminate else set()
    corpus_filter = CorpusFilter(held_out, config.dedup)
    lines_in = kept = 0
    with atomic_texts(src_out, trg_out) as (src_f, trg_f):
        chunks = _filter_chunks(src_in, trg_in, config, src_lang, trg_lang, threads, invalid, sources)
        for reasons, src_lines, trg_lines in chunks:
            for reason, src, trg in zip(reasons, src_lines, trg_lines, strict=True):
                lines_in += 1
                if reason is None:
                    reason = corpus_filter(src, trg)
                if reason is None and config.max_pairs is not None and kept >= config.max_pairs:
                    reason = "max_pairs"
                if reason is not None:
                    dropped[reason] += 1
                    continue
                src_f.write(src + "\n")
                trg_f.write(trg + "\n")
                kept += 1
        if lines_in == 0:
            raise DataError(f"{file_name(src_in, sources[0])}: corpus is empty")
        for path, source, count in zip((src_in, trg_in), sources, invalid, strict=True):
            check_encoding(path, source, count, lines_in, config.max_invalid_utf8)
        if kept == 0:
            counts = ", ".join(f"{k}={v}" for k, v in dropped.items() if v)
            raise DataError(
                f"{file_name(src_in, sources[0])}: all {lines_in} lines were dropped by the filters ({counts})"
            )
    if config.shuffle:
        _shuffle_pairs(Path(src_out), Path(trg_out), config.seed)
    result = {"src": str(src_in), "trg": str(trg_in), "lines_in": lines_in, "kept": kept, "dropped": dropped}
    write_report(result, report)
    log.info("%s: kept %d of %d pairs, dropped %s", src_in, kept, lines_in, dropped)
    return result


def _filter_chunks(
    src_in: str | Path,
    trg_in: str | Path,
    config: CleanConfig,
    src_lang: str,
    trg_lang: str,
    threads: int,
    invalid: list[int],
    sources: tuple[str, str],
) -> Iterator[tuple[list[str | None], list[str], list[str]]]:
    """Yield (drop reasons, normalized sources, normalized targets) per chunk of pairs, in corpus order.

    ``invalid`` counts the lines of each side that are not valid UTF-8; errors name the user's ``sources``.
    """
    chunks = _chunked(_count_invalid(zip_aligned(src_in, trg_in, sources), invalid), CHUNK_PAIRS)
    if threads <= 1:
        pair_filter = PairFilter(config, src_lang, trg_lang)
        with threadpool_limits(limits=1):  # language identification's small products run faster on one BLAS thread
            for chunk in chunks:
                yield _apply(pair_filter, chunk)
        return
    with ProcessPoolExecutor(threads, initializer=_init_worker, initargs=(config, src_lang, trg_lang)) as pool:
        pending: deque[Future] = deque()
        for chunk in chunks:
            pending.append(pool.submit(_filter_in_worker, chunk))
            if len(pending) >= 2 * threads:  # a bounded window keeps memory flat
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _count_invalid(pairs: Iterator[tuple[str | None, str | None]], invalid: list[int]) -> Iterator:
    for src, trg in pairs:
        invalid[0] += src is None
        invalid[1] += trg is None
        yield src, trg


def _chunked(pairs: Iterator[tuple[str | None, str | None]], size: int) -> Iterator[list]:
    chunk = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _apply(pair_filter: PairFilter, chunk: list) -> tuple[list[str | None], list[str], list[str]]:
    reasons, srcs, trgs = [], [], []
    for src, trg in chunk:
        reason, src, trg = pair_filter(src, trg)
        reasons.append(reason)
        srcs.append(src)
        trgs.append(trg)
    return reasons, srcs, trgs


_worker_filter: PairFilter | None = None


def _init_worker(config: CleanConfig, src_lang: str, trg_lang: str) -> None:
    global _worker_filter
    # One BLAS thread per worker: with one per core each, the workers' BLAS threads fight over the cores.
    threadpool_limits(limits=1)
    _worker_filter = PairFilter(config, src_lang, trg_lang)


def _filter_in_worker(chunk: list) -> tuple[list[str | None], list[str], list[str]]:
    return _apply(_worker_filter, chunk)


def _eval_digests(paths: list[str | Path], langs: tuple[str, str], config: CleanConfig) -> set[bytes]:
    """Digests of the normalized lines of dev/test files (named ``*.{lang}``), for decontamination."""
    digests = set()
    for path in paths:
        lang = Path(path).suffix.lstrip(".")
        norm = Normalizer(lang if lang in langs else langs[0], config.normalize_punctuation)
        digests.update(_digest(norm(line)) for line in open_text(path) if line)
    return digests


def _train_digests(paths: list[str | Path], lang: str, config: CleanConfig) -> "DigestSet":
    """The normalized lines of training files of ``lang``, 8 to 16 bytes each (a WMT corpus has millions)."""
    seen, norm = DigestSet(), Normalizer(lang, config.normalize_punctuation)
    for line in (line for path in paths for line in open_text(path) if line):
        seen.add(norm(line))
    return seen


class CorpusFilter:
    """The filters that need the whole corpus: ``in_eval`` (a side, normalized, is a line of a dev/test
    file), ``in_train`` (a monolingual sentence is one of the training corpora's) and ``duplicate`` (the same
    sentence or pair seen before), tried in this order."""

    def __init__(self, held_out: set[bytes], dedup: bool, train: "DigestSet | None" = None) -> None:
        """
        :param held_out: :func:`_digest` of the normalized dev/test lines; empty for no decontamination
        :param dedup: whether to drop duplicates
        :param train: the normalized training sentences of the text's language; None for no such filter
        """
        self.held_out, self.train = held_out, train
        self.seen = DigestSet() if dedup else None

    def __call__(self, *sides: str) -> str | None:
        """The filter that drops the normalized sentence (one side) or pair (two sides), or None."""
        if self.held_out and any(_digest(side) in self.held_out for side in sides):
            return "in_eval"
        if self.train is not None and any(side in self.train for side in sides):
            return "in_train"
        if self.seen is not None and not self.seen.add("\n".join(sides)):
            return "duplicate"
        return None


class DigestSet:
    """The set of texts seen so far, held as 8-byte blake2b digests: 8 to 16 bytes per text.

    A Python set of strings (or of 16-byte ``bytes`` digests) costs 80 to 200 bytes per pair, several
    GB on WMT14 en-fr (36M pairs). Here new digests go to a small Python set; every
    :data:`RECENT` digests it is merged into one sorted int64 array (a linear merge of two sorted
    runs), searched with binary search.

    Collision odds: two different texts share a 64-bit digest with chance 2**-64, so among n texts
    some pair collides with chance about n**2 / 2**65: 5.5e-7 for WMT14 en-de (4.5M pairs), 3.5e-5
    for en-fr (36M). A collision drops one distinct pair as a duplicate; nothing else goes wrong.
    """

    RECENT = 1 << 16

    def __init__(self) -> None:
        self._recent: set[int] = set()
        self._sorted = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._recent) + len(self._sorted)

    def __contains__(self, text: str) -> bool:
        key = self._key(text)
        i = int(self._sorted.searchsorted(key))
        return key in self._recent or (i < len(self._sorted) and self._sorted[i] == key)

    def add(self, text: str) -> bool:
        """Add ``text``; return whether it was new."""
        if text in self:
            return False
        self._recent.add(self._key(text))
        if len(self._recent) >= self.RECENT:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            recent.sort()
            merged = np.concatenate([self._sorted, recent])
            merged.sort(kind="stable")  # timsort: two sorted runs merge in linear time
            self._sorted, self._recent = merged, set()
        return True

    @staticmethod
    def _key(text: str) -> int:
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True)


def _shuffle_pairs(src_path: Path, trg_path: Path, seed: int) -> None:
    """Shuffle two line-aligned files in the same order, holding only the line offsets in memory."""
    offsets = [_line_offsets(src_path), _line_offsets(trg_path)]
    order = np.random.default_rng(seed).permutation(len(offsets[0]) - 1)
    # Both sides in one atomic_texts: a failure never leaves one side shuffled and the other not.
    with open(src_path, "rb") as src_f, open(trg_path, "rb") as trg_f, atomic_texts(src_path, trg_path) as outs:
        for i in order:
            for f, starts, out in zip((src_f, trg_f), offsets, outs, strict=True):
                f.seek(starts[i])
                out.write(f.read(starts[i + 1] - starts[i]).decode("utf-8"))


def _line_offsets(path: Path, block: int = 1 << 24) -> np.ndarray:
    """Byte offsets of the line starts of ``path``, plus its size; read in blocks, 8 bytes per line."""
    parts, position = [np.zeros(1, dtype=np.int64)], 0
    with open(path, "rb") as f:
        while data := f.read(block):
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
            parts.append(ends.astype(np.int64) + position + 1)
            position += len(data)
    offsets = np.concatenate(parts)
    if offsets[-1] < position:  # a last line without a newline
        offsets = np.append(offsets, position)
    return offsets


def write_report(result: dict, report: str | Path) -> None:
    """Write the filter counts of ``result`` as TSV to ``report`` and as a Markdown table beside it."""
    report = Path(report)
    rows = [("lines_in", result["lines_in"]), *result["dropped"].items(), ("kept", result["kept"])]
    with atomic_text(report) as f:
        f.write("filter\tpairs\tshare\n")
        for name, count in rows:
            f.write(f"{name}\t{count}\t{count / max(result['lines_in'], 1):.4f}\n")
    with atomic_text(report.with_suffix(".md")) as f:
        f.write(f"Cleaning of `{result['src']}` and `{result['trg']}`\n\n| filter | pairs | share |\n|---|---:|---:|\n")
        for name, count in rows:
            if count or name in ("lines_in", "kept"):
                f.write(f"| {name} | {count:,} | {100 * count / max(result['lines_in'], 1):.2f}% |\n")


def clean_monolingual(
    inputs: list[str | Path],
    output: str | Path,
    report: str | Path,
    config: CleanConfig,
    lang: str,
    exclude: list[str | Path] = (),
    max_sentences: int | None = None,
    seed: int = 1,
    sources: list[str] | None = None,
    exclude_train: list[str | Path] = (),
    sentence_form: bool = False,
) -> dict:
    """Normalize and filter monolingual corpora into one file, e.g. target-language text to back-translate.

    Sentences are normalized like parallel data and dropped by the first matching filter of the same
    chain: the sentence filters of :class:`nmt.data.filters.SentenceFilter` (``invalid_utf8``, ``empty``,
    ``ansi_code``, ``too_short``, ``too_long``: ``config`` token limits), ``sentence_form`` (only when asked for),
    ``in_eval`` (the sentence, once normalized, is a line of an ``exclude`` file: dev and test references must not
    leak into training), ``in_train`` (a line of an ``exclude_train`` file: source-language text that a forward
    model would translate into its own training targets; counted only when ``exclude_train`` is given),
    ``duplicate`` (if ``config.dedup``), ``max_sentences`` (a uniform random sample of that size is kept,
    reservoir-style, in the original order; reproducible by ``seed``).

    :param inputs: raw files (plain, gzip or xz), read one after the other
    :param output: cleaned sentences, written atomically
    :param report: JSON report: ``inputs``, ``lines_in``, ``kept`` and per-filter ``dropped``
    :param config: normalization and length settings (``max_ratio`` and ``max_pairs`` do not apply)
    :param lang: language code, for punctuation normalization
    :param exclude: files whose (normalized) lines are removed
    :param exclude_train: the training corpora's files of ``lang``, whose (normalized) lines are removed
    :param sentence_form: drop the lines not written as sentences (lowercase start, no final punctuation)
    :param max_sentences: keep at most this many sentences; None keeps all
    :param seed: seed of the sample
    :param sources: the user's files as configured (URLs or paths), one per input, named in messages
    :return: the report dict
    :raises DataError: if the inputs are empty, more than ``config.max_invalid_utf8`` of a file's lines
        are not UTF-8, or every sentence is dropped
    """
    sources = sources or [str(p) for p in inputs]
    held_out = _eval_digests(exclude, (lang, lang), config)
    train = _train_digests(exclude_train, lang, config) if exclude_train else None
    optional = {"in_train": train is not None, "sentence_form": sentence_form}
    dropped = {name: 0 for name in MONO_FILTERS if optional.get(name, True)}
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    # The sentences that pass go to a temp file, so that memory holds only the sampled positions.
    with tempfile.TemporaryFile("w+", encoding="utf-8", dir=Path(output).parent) as passed_f:
        corpus_filter = CorpusFilter(held_out, config.dedup, train)
        line_filter = SentenceFilter(config, lang, sentence_form)
        lines_in, passed = _filter_monolingual(inputs, sources, passed_f, line_filter, corpus_filter, config, dropped)
        names = ", ".join(file_name(path, source) for path, source in zip(inputs, sources, strict=True))
        if lines_in == 0:
            raise DataError(f"{names}: corpus is empty")
        if passed == 0:
            counts = ", ".join(f"{k}={v}" for k, v in dropped.items())
            raise DataError(f"{names}: all {lines_in} lines were dropped by the filters ({counts})")
        chosen = _reservoir_positions(passed, max_sentences, seed)
        dropped["max_sentences"] = passed - len(chosen)
        passed_f.seek(0)
        with atomic_text(output) as f:
            f.writelines(line for i, line in enumerate(passed_f) if chosen.contains(i))
    result = {"inputs": [str(p) for p in inputs], "lines_in": lines_in, "kept": len(chosen), "dropped": dropped}
    with atomic_text(report) as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    log.info("%s: kept %d of %d sentences, dropped %s", output, len(chosen), lines_in, dropped)
    return result


def _filter_monolingual(
    inputs: list[str | Path],
    sources: list[str],
    out: IO[str],
    sentence_filter: SentenceFilter,
    corpus_filter: CorpusFilter,
    config: CleanConfig,
    dropped: dict,
) -> tuple[int, int]:
    """Write the normalized sentences of ``inputs`` that pass the filters to ``out``, counting drops in
    ``dropped``; return the lines read and the sentences passed."""
    lines_in = passed = 0
    for path, source in zip(inputs, sources, strict=True):
        file_lines = file_invalid = 0
        for raw in open_text(path, source):
            file_lines += 1
            file_invalid += raw is None
            reason, line = sentence_filter(raw)
            if reason is None:
                reason = corpus_filter(line)
            if reason is not None:
                dropped[reason] += 1
                continue
            out.write(line + "\n")
            passed += 1
        check_encoding(path, source, file_invalid, file_lines, config.max_invalid_utf8)
        lines_in += file_lines
    return lines_in, passed


class _Positions:
    """A sorted array of line positions, asked in increasing order whether it holds each position."""

    def __init__(self, positions: np.ndarray | None, count: int) -> None:
        self._positions, self._count, self._next = positions, count, 0

    def __len__(self) -> int:
        return self._count

    def contains(self, i: int) -> bool:
        if self._positions is None:
            return True
        if self._next < len(self._positions) and self._positions[self._next] == i:
            self._next += 1
            return True
        return False


def _reservoir_positions(passed: int, max_sentences: int | None, seed: int) -> _Positions:
    """Positions of a uniform sample of ``max_sentences`` of ``passed`` sentences (reservoir sampling,
    Algorithm R, on positions only: 8 bytes per sampled sentence); all of them if None."""
    if max_sentences is None or passed <= max_sentences:
        return _Positions(None, passed)
    rng = random.Random(seed)
    sample = np.arange(max_sentences, dtype=np.int64)
    for position in range(max_sentences, passed):
        j = rng.randrange(position + 1)
        if j < max_sentences:
            sample[j] = position
    sample.sort()
    return _Positions(sample, max_sentences)


def _digest(text: str) -> bytes:
    """A 16-byte key per sentence keeps the memory of dedup small on large corpora."""
    return hashlib.blake2b(text.encode(), digest_size=16).digest()
