"""Binarized parallel data: a training set encoded once into memory-mapped token ids that every process shares.

A training set binarized to the prefix ``P`` is five files:

- ``P.src.ids``, ``P.trg.ids``: the token ids of all sentences one after the other, each closed by EOS
  (``uint16`` when the vocabulary fits, else ``int32``);
- ``P.src.offsets``, ``P.trg.offsets``: ``int64``; sentence ``i`` is ``ids[offsets[i] : offsets[i + 1]]``;
- ``P.json``: the header: format version, pair and token counts, dtypes, the sha256 of both subword
  models and of the token ids (what a training's identity compares, :mod:`nmt.training.identity`), the length
  limit and how many pairs it dropped, the text files and the pairs kept of each (``file_pairs``: the corpora
  that training may weight by name, see :func:`corpus_name` and :func:`nmt.data.batches.weighted_epoch`).

Training maps them read-only (``np.memmap``): the pages belong to the page cache, which all the
processes of a node share, so a process's own memory grows only by the sentence lengths and the
epoch's order (a few bytes per pair), and a resumed run starts without encoding anything.
"""

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any

import numpy as np

from nmt.atomic import atomic_paths, hash_file, not_utf8, write_text
from nmt.data.batches import EncodedCorpus
from nmt.data.subword import load_subword
from nmt.errors import DataError
from nmt.vocab import EOS

log = logging.getLogger(__name__)

FORMAT = 2  # of the files and the header; data of another format is binarized again
SIDES = ("src", "trg")
CHUNK_LINES = 32768  # pairs encoded at a time: a few MB of Python lists, whatever the corpus size


def read_pair_chunks(
    src_paths: list[Path], trg_paths: list[Path], chunk_lines: int = CHUNK_LINES
) -> Iterator[tuple[int, list[str], list[str]]]:
    """Aligned chunks of lines of each (source, target) file pair in turn, as ``read_lines`` reads them, each with
    the number of its file pair (0, 1, ...).

    :raises DataError: for a missing file, or a pair of files with different line counts (naming both)
    """
    for number, (src_path, trg_path) in enumerate(zip(src_paths, trg_paths, strict=True)):
        for path in (src_path, trg_path):
            if not Path(path).is_file():
                raise DataError(f"{path}: file not found")
        n_src = n_trg = 0
        with open(src_path, encoding="utf-8") as src_file, open(trg_path, encoding="utf-8") as trg_file:
            while True:
                src_lines = _chunk(src_file, src_path, chunk_lines)
                trg_lines = _chunk(trg_file, trg_path, chunk_lines)
                n_src, n_trg = n_src + len(src_lines), n_trg + len(trg_lines)
                if len(src_lines) != len(trg_lines):
                    n_src, n_trg = n_src + sum(1 for _ in src_file), n_trg + sum(1 for _ in trg_file)
                    raise DataError(f"{src_path} has {n_src} lines but {trg_path} has {n_trg}")
                if not src_lines:
                    break
                yield number, src_lines, trg_lines


def _chunk(f: IO[str], path: Path, lines: int) -> list[str]:
    """The next ``lines`` lines of ``f`` (at ``path``) without their LF; a :class:`DataError` if they are not UTF-8."""
    try:
        return [line.rstrip("\n") for line in islice(f, lines)]
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from e


def _flatten(pieces: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """One flat array of ``pieces`` with EOS after each sentence, and the sentence lengths (EOS included)."""
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    flat = np.fromiter(chain.from_iterable(pieces), dtype=dtype, count=int(lengths.sum()))
    return np.insert(flat, np.cumsum(lengths), EOS), lengths + 1


def _paths(prefix: Path) -> dict[str, Path]:
    names = {f"{side}.{kind}": f"{prefix.name}.{side}.{kind}" for side in SIDES for kind in ("ids", "offsets")}
    return {key: prefix.with_name(name) for key, name in names.items()}


def header_path(prefix: str | Path) -> Path:
    prefix = Path(prefix)
    return prefix.with_name(f"{prefix.name}.json")


def binarize(
    src_paths: str | Path | list[str | Path],
    trg_paths: str | Path | list[str | Path],
    src_spm: str | Path,
    trg_spm: str | Path,
    out_prefix: str | Path,
    max_length: int | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Encode aligned text files into the binarized files at ``out_prefix`` (see the module docstring).

    Streams ``CHUNK_LINES`` pairs at a time, so memory does not grow with the corpus. Pairs longer
    than ``max_length`` subwords (EOS included) on either side are dropped and counted, as
    :meth:`nmt.data.batches.ParallelData.from_lines` does. Every file is written to a temp file and renamed,
    the header last.

    :param src_paths: source-side text file(s); the i-th is aligned with the i-th of ``trg_paths``
    :param threads: sentencepiece encoding threads
    :return: the header written to ``out_prefix.json``
    :raises DataError: missing or misaligned files, or no pair left
    """
    src_paths = [src_paths] if isinstance(src_paths, (str, Path)) else list(src_paths)
    trg_paths = [trg_paths] if isinstance(trg_paths, (str, Path)) else list(trg_paths)
    if not src_paths or len(src_paths) != len(trg_paths):
        raise DataError(f"binarize: {len(src_paths)} source files but {len(trg_paths)} target files")
    sps = {"src": load_subword(src_spm), "trg": load_subword(trg_spm)}
    dtypes = {side: np.dtype(np.uint16 if sp.get_piece_size() <= 1 << 16 else np.int32) for side, sp in sps.items()}
    paths = _paths(Path(out_prefix))
    pairs = dropped = 0
    file_pairs = [0] * len(src_paths)
    tokens = dict.fromkeys(SIDES, 0)
    digest = hashlib.sha256()  # of the ids of both sides, chunk by chunk (EOS closes every sentence)
    with atomic_paths(*paths.values()) as tmps:
        with ExitStack() as stack:
            files = {key: stack.enter_context(open(tmp, "wb")) for key, tmp in zip(paths, tmps, strict=True)}
            for side in SIDES:
                files[f"{side}.offsets"].write(np.zeros(1, dtype=np.int64).tobytes())
            for number, src_lines, trg_lines in read_pair_chunks(src_paths, trg_paths, CHUNK_LINES):
                pieces = {"src": src_lines, "trg": trg_lines}
                pieces = {side: sps[side].encode(lines, num_threads=max(1, threads)) for side, lines in pieces.items()}
                if max_length is not None:
                    src_lengths, trg_lengths = (np.fromiter(map(len, pieces[side]), np.int64) + 1 for side in SIDES)
                    keep = np.flatnonzero((src_lengths <= max_length) & (trg_lengths <= max_length))
                    if len(keep) < len(src_lines):
                        dropped += len(src_lines) - len(keep)
                        pieces = {side: [p[i] for i in keep] for side, p in pieces.items()}
                pairs += len(pieces["src"])
                file_pairs[number] += len(pieces["src"])
                for side in SIDES:
                    ids, lengths = _flatten(pieces[side], dtypes[side])
                    files[f"{side}.ids"].write(ids.tobytes())
                    digest.update(ids.tobytes())
                    files[f"{side}.offsets"].write((tokens[side] + np.cumsum(lengths)).tobytes())
                    tokens[side] += len(ids)
        if pairs == 0:
            raise DataError(f"{src_paths[0]}: no sentence pairs left to train on ({dropped} longer than {max_length})")
    header = {
        "format": FORMAT,
        "pairs": pairs,
        "max_length": max_length,
        "dropped_by_length": dropped,
        "file_pairs": file_pairs,
        "sha256": digest.hexdigest(),
    }
    for side, spm_path, text_paths in (("src", src_spm, src_paths), ("trg", trg_spm, trg_paths)):
        header[side] = {
            "dtype": dtypes[side].name,
            "tokens": tokens[side],
            "vocab_size": sps[side].get_piece_size(),
            "spm_sha256": hash_file(spm_path),
            "files": [str(p) for p in text_paths],
        }
    write_text(header_path(out_prefix), json.dumps(header, indent=2) + "\n")
    log.info("binarized %d pairs into %s (%d longer than %s dropped)", pairs, out_prefix, dropped, max_length)
    return header


def _map(path: Path, dtype: np.dtype, count: int, header: Path) -> np.memmap:
    """Map ``count`` items of ``dtype`` read-only, after checking the file's size."""
    size = path.stat().st_size if path.is_file() else None
    if size != count * dtype.itemsize:
        found = "missing" if size is None else f"{size} bytes"
        raise DataError(f"{path}: {found}, but {header} says {count * dtype.itemsize} bytes; binarize again")
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


class CorpusSubset:
    """The sentences ``index`` of an encoded corpus (e.g. those within a length limit), without copying ids."""

    def __init__(self, corpus: EncodedCorpus, index: np.ndarray) -> None:
        self.corpus, self.index = corpus, index
        self.lengths = corpus.lengths[index]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.corpus[self.index[i]]


@dataclass
class BinarizedData:
    """A binarized training set mapped read-only; ``src`` and ``trg`` work like
    :class:`nmt.data.batches.ParallelData`'s. ``parts`` holds the pairs of each corpus (each pair of text files
    binarized, in order): the sentences ``0 .. parts[0] - 1`` are the first corpus's, and so on.
    """

    src: EncodedCorpus | CorpusSubset
    trg: EncodedCorpus | CorpusSubset
    header: dict[str, Any]
    prefix: Path
    parts: np.ndarray  # (corpora,) int64

    @classmethod
    def open(cls, prefix: str | Path) -> "BinarizedData":
        """Map the files of ``prefix`` (``prefix.json`` and the four arrays), checking their sizes against the header.

        :raises DataError: a missing or unreadable header, another format, or a file of the wrong size
        """
        prefix, path = Path(prefix), header_path(prefix)
        if not path.is_file():
            raise DataError(f"{path}: binarized training data not found (python -m nmt binarize writes it)")
        try:
            header = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: not a binarized data header ({e})") from e
        found = header.get("format") if isinstance(header, dict) else None
        if found != FORMAT:
            raise DataError(f"{path}: binarized data format {found!r}, expected {FORMAT}; binarize again")
        paths = _paths(prefix)
        sides = {}
        for side in SIDES:
            ids = _map(paths[f"{side}.ids"], np.dtype(header[side]["dtype"]), header[side]["tokens"], path)
            offsets = _map(paths[f"{side}.offsets"], np.dtype(np.int64), header["pairs"] + 1, path)
            sides[side] = EncodedCorpus(ids, offsets)
        parts = np.array(header["file_pairs"], dtype=np.int64)
        if parts.sum() != header["pairs"] or (parts < 0).any():
            raise DataError(f"{path}: file_pairs {parts.tolist()} do not add up to {header['pairs']} pairs")
        return cls(sides["src"], sides["trg"], header, prefix, parts)

    def __len__(self) -> int:
        return len(self.src)

    def check_vocabulary(self, src_spm: str | Path, trg_spm: str | Path) -> None:
        """Make sure the ids were encoded with these subword models (their sha256 is in the header)."""
        for side, spm_path in (("src", src_spm), ("trg", trg_spm)):
            if hash_file(spm_path) != self.header[side]["spm_sha256"]:
                raise DataError(
                    f"{header_path(self.prefix)}: {side} side encoded with another subword model than {spm_path}; "
                    "binarize again with the models the training uses"
                )

    def limit(self, max_length: int) -> "BinarizedData":
        """The pairs of at most ``max_length`` subwords (EOS included) on both sides.

        :raises DataError: when binarizing dropped pairs this limit would keep
        """
        binarized_with = self.header["max_length"]
        if binarized_with is not None and binarized_with <= max_length:
            if binarized_with < max_length and self.header["dropped_by_length"]:
                raise DataError(
                    f"{header_path(self.prefix)}: binarized with max_length {binarized_with}, which dropped pairs "
                    f"that max_length {max_length} keeps; binarize again with max_length {max_length}"
                )
            return self
        keep = np.flatnonzero((self.src.lengths <= max_length) & (self.trg.lengths <= max_length))
        if len(keep) == len(self):
            return self
        if len(keep) == 0:
            raise DataError(f"{header_path(self.prefix)}: no sentence pairs of at most {max_length} subwords")
        log.info("%d pairs longer than %d subwords left out", len(self) - len(keep), max_length)
        bounds = np.searchsorted(keep, np.concatenate([[0], np.cumsum(self.parts)]))  # kept pairs before each corpus
        return BinarizedData(
            CorpusSubset(self.src, keep), CorpusSubset(self.trg, keep), self.header, self.prefix, np.diff(bounds)
        )

    @property
    def corpus_names(self) -> list[str]:
        """The name of each corpus (:func:`corpus_name` of its source file), in the order of :attr:`parts`."""
        return [corpus_name(path) for path in self.header["src"]["files"]]

    def corpus_weights(self, weights: dict[str, float] | None) -> list[float] | None:
        """The weight of each corpus of :attr:`parts` from weights keyed by corpus name, so that the weights meet
        their corpora whatever order the files were binarized in.

        :raises DataError: naming the header, for a corpus without a weight or a weight of no corpus
        """
        if weights is None:
            return None
        names = self._distinct_names("weights need")
        unknown, missing = sorted(set(weights) - set(names)), [name for name in names if name not in weights]
        if unknown or missing:
            raise DataError(
                f"{header_path(self.prefix)}: corpus weights for {sorted(weights)} but the corpora binarized are "
                f"{names}"
                + (f" (no weight for {missing})" if missing else "")
                + (f" (no corpus {unknown})" if unknown else "")
            )
        return [float(weights[name]) for name in names]

    def corpus_shares(self, mix: dict[str, float] | None) -> list[float] | None:
        """The share of every batch's target tokens of each corpus of :attr:`parts`, from ``mix`` keyed by corpus
        name: normalised to sum 1, and 0 for a corpus the mix leaves out (not drawn).

        :raises DataError: naming the header, for a name of no corpus or a corpus without pairs within the length
            limit (it has nothing to give its share)
        """
        if mix is None:
            return None
        names = self._distinct_names("a mix needs")
        unknown = sorted(set(mix) - set(names))
        if unknown:
            raise DataError(f"{header_path(self.prefix)}: mix of {sorted(mix)} but the corpora binarized are {names}")
        empty = [name for name, n in zip(names, self.parts, strict=True) if name in mix and n == 0]
        if empty:
            raise DataError(f"{header_path(self.prefix)}: corpora {empty} of the mix have no pairs within max_length")
        total = sum(mix.values())
        return [mix.get(name, 0) / total for name in names]

    def _distinct_names(self, need: str) -> list[str]:
        """:attr:`corpus_names`, checked to be distinct (what keys weights or a mix by name needs)."""
        names = self.corpus_names
        if len(set(names)) != len(names):
            raise DataError(f"{header_path(self.prefix)}: corpora of the same name {names}; {need} distinct names")
        return names


def corpus_name(path: str | Path) -> str:
    """A corpus's name from one of its text files: the file name without its language suffix
    (``results/en-de/data/clean/multi30k_train.en`` -> ``multi30k_train``)."""
    name = Path(path).name
    return name.rsplit(".", 1)[0] if "." in name else name


def open_training_data(prefix: str | Path, src_spm: str | Path, trg_spm: str | Path, max_length: int) -> BinarizedData:
    """The binarized training set at ``prefix``, checked against the subword models and cut to ``max_length``."""
    data = BinarizedData.open(prefix)
    data.check_vocabulary(src_spm, trg_spm)
    return data.limit(max_length)
