"""Synthetic training corpora: a text split in parts for translation, and its translations paired with the
original sentences, filtered and mixed with the real pairs. Back-translation (Sennrich et al. 2016) generates the
source side; sequence-level knowledge distillation (Kim and Rush 2016) generates the target side.

The models and the translation itself are the ordinary :func:`nmt.training.loop.train` and
:func:`nmt.decoding.streaming.translate_file`; this module holds what is particular to synthetic data.
"""

import json
import logging
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import zip_longest
from pathlib import Path
from typing import TextIO

from nmt.atomic import atomic_path, atomic_text, atomic_texts
from nmt.config import SyntheticConfig
from nmt.errors import DataError
from nmt.progress import Progress
from nmt.vocab import BT_TAG

log = logging.getLogger(__name__)

SYNTHETIC_FILTERS = ("empty", "copy", "repeated_ngram", "ratio", "synthetic_ratio")


def split_corpus(paths: str | Path | list[str | Path], out_dir: str | Path, chunk_lines: int, suffix: str) -> int:
    """Cut a text file (or several, one after the other) into parts of ``chunk_lines`` lines,
    ``out_dir/0000.{suffix}``, ``0001.{suffix}``, ...

    The directory is written under a temporary name and renamed when complete (replacing an older
    one), so an interrupted split leaves no partial set of parts.

    :return: the number of parts
    :raises DataError: if the files are empty or ``chunk_lines`` < 1
    """
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    named = " + ".join(map(str, paths))
    if chunk_lines < 1:
        raise DataError(f"{named}: chunk_lines must be >= 1, got {chunk_lines}")
    parts = 0
    with atomic_path(out_dir) as tmp, ExitStack() as part:
        tmp.mkdir()
        for i, line in enumerate(_lines(paths)):
            if i % chunk_lines == 0:
                part.close()
                f = part.enter_context(open(tmp / f"{parts:04d}.{suffix}", "w", encoding="utf-8"))
                parts += 1
            f.write(line + "\n")
        if parts == 0:
            raise DataError(f"{named}: nothing to split, the file is empty")
    log.info("split %s into %d parts of at most %d lines", named, parts, chunk_lines)
    return parts


def has_repeated_ngram(tokens: list[str], n: int, max_repeats: int) -> bool:
    """Whether some n-gram of ``tokens`` occurs more than ``max_repeats`` times (a decoder stuck in a loop)."""
    if len(tokens) < n * (max_repeats + 1):
        return False
    counts = Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return max(counts.values()) > max_repeats


def get_drop_reason(src: str, trg: str, config: SyntheticConfig) -> str | None:
    """The first filter that drops the synthetic pair (generated ``src``, real ``trg``), or None."""
    src_tokens, trg_tokens = src.split(), trg.split()
    if not src_tokens:
        return "empty"
    if src == trg:
        return "copy"
    if has_repeated_ngram(src_tokens, config.repeat_ngram, config.max_repeats):
        return "repeated_ngram"
    if max(len(src_tokens), len(trg_tokens)) / min(len(src_tokens), len(trg_tokens)) > config.max_ratio:
        return "ratio"
    return None


def build_synthetic_corpus(
    real_src: list[str | Path],
    real_trg: list[str | Path],
    bt_src: list[str | Path],
    bt_trg: list[str | Path],
    src_out: str | Path,
    trg_out: str | Path,
    report: str | Path,
    config: SyntheticConfig,
    seed: int = 1,
    generated_side: str = "src",
    write_real: bool = True,
) -> dict:
    """Write the training corpus of a back-translation system: real pairs plus filtered synthetic pairs.

    The real pairs are written ``config.upsample_real`` times, or with ``write_real`` False only counted (a
    back-translation system trains on the real corpora and this synthetic one side by side, the real ones
    weighted by ``upsample_real`` or mixed per batch by its training stages). Synthetic pairs (a back-translated
    source from ``bt_src`` with its monolingual target from ``bt_trg``) that pass the filters of
    :class:`~nmt.config.SyntheticConfig` follow; with ``config.synthetic_ratio`` at most that many
    synthetic pairs per (upsampled) real pair are kept, a uniform random sample reproducible by ``seed``
    (selection sampling, Knuth's Algorithm S, in a second pass over the parts).
    With ``config.tagged`` every synthetic source starts with :data:`nmt.vocab.BT_TAG`.
    Training shuffles the batches, so the order of the lines does not matter. Every file is streamed
    line by line: memory does not grow with the corpus.

    :param real_src: cleaned source-side training files
    :param real_trg: cleaned target-side training files, line-aligned
    :param bt_src: back-translated parts, in the order of ``bt_trg``
    :param bt_trg: the monolingual parts that were translated
    :param src_out: source side of the mixture, written atomically
    :param trg_out: target side of the mixture, written atomically
    :param report: JSON report: real and synthetic pair counts, and the synthetic pairs dropped per filter
    :param generated_side: ``"trg"`` for a distilled corpus: ``bt_src`` holds the teacher's translations (targets),
        ``bt_trg`` the source sentences it translated (``config.upsample_real`` 0 leaves the original pairs out)
    :return: the report dict
    :raises DataError: if the real sides, or a translated part and its monolingual part, differ in line count
    """
    dropped = dict.fromkeys(SYNTHETIC_FILTERS, 0)
    with ExitStack() as stack:
        src_f, trg_f = stack.enter_context(atomic_texts(src_out, trg_out))
        if write_real:
            real_pairs = _write_real_pairs(real_src, real_trg, config.upsample_real, src_f, trg_f)
        else:
            real_pairs = sum(1 for _ in _real_pairs(real_src, real_trg))
        passed = sum(1 for _ in _passing_pairs(bt_src, bt_trg, config, dropped))
        synthetic_in = passed + sum(dropped.values())
        keep = _synthetic_quota(passed, real_pairs, config, dropped, bt_src[0] if bt_src else src_out)
        tag = f"{BT_TAG} " if config.tagged else ""
        rng, chosen = random.Random(seed), 0
        progress = stack.enter_context(Progress(f"sampling synthetic pairs into {src_out}", passed, "pairs"))
        for seen, (hyp, mono) in enumerate(_passing_pairs(bt_src, bt_trg, config, dict(dropped))):
            progress.update(1)
            if keep < passed and rng.random() * (passed - seen) >= keep - chosen:
                continue  # Algorithm S: take each of the remaining ones with chance (still needed / still left)
            src, trg = (f"{tag}{hyp}", mono) if generated_side == "src" else (mono, hyp)
            src_f.write(f"{src}\n")
            trg_f.write(f"{trg}\n")
            chosen += 1
    result = {
        "real_pairs": real_pairs,
        "upsample_real": config.upsample_real,
        "synthetic_in": synthetic_in,
        "synthetic_pairs": keep,
        "tagged": config.tagged,
        "dropped": dropped,
    }
    with atomic_text(report) as f:
        f.write(json.dumps(result, indent=2) + "\n")
    log.info(
        "%s: %d real pairs x%d + %d synthetic pairs; dropped %s",
        src_out,
        real_pairs,
        config.upsample_real,
        keep,
        dropped,
    )
    return result


def _write_real_pairs(
    real_src: list[str | Path], real_trg: list[str | Path], times: int, src_f: TextIO, trg_f: TextIO
) -> int:
    """Write the real pairs ``times`` times; return the number of pairs of the real corpus (0 for ``times`` 0)."""
    real_pairs = 0
    for _ in range(times):
        real_pairs = 0
        for src, trg in _real_pairs(real_src, real_trg):
            src_f.write(src + "\n")
            trg_f.write(trg + "\n")
            real_pairs += 1
    return real_pairs


def _synthetic_quota(passed: int, real_pairs: int, config: SyntheticConfig, dropped: dict, where: str | Path) -> int:
    """How many of the ``passed`` synthetic pairs to keep: all, or ``config.synthetic_ratio`` per written real pair;
    counts the rest in ``dropped``.

    :raises DataError: naming ``where`` and the drops per filter, when none is left
    """
    keep = passed
    if config.synthetic_ratio is not None and passed > config.synthetic_ratio * real_pairs * config.upsample_real:
        keep = int(config.synthetic_ratio * real_pairs * config.upsample_real)
    dropped["synthetic_ratio"] = passed - keep
    if keep == 0:
        counts = ", ".join(f"{k}={v}" for k, v in dropped.items())
        raise DataError(
            f"{where}: no synthetic pair is left after the filters ({counts}); "
            "the model that translated them writes no usable output (train it longer), or the filters' "
            "max_ratio / max_repeats are too strict"
        )
    return keep


def _lines(paths: list[str | Path]) -> Iterator[str]:
    """The lines of files written by earlier stages, one after the other, without line terminators."""
    for path in paths:
        if not Path(path).is_file():
            raise DataError(f"{path}: file not found")
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


def _real_pairs(real_src: list[str | Path], real_trg: list[str | Path]) -> Iterator[tuple[str, str]]:
    """The pairs of the real corpus; :class:`DataError` with both line counts if the sides differ."""
    for src, trg in zip_longest(_lines(real_src), _lines(real_trg)):
        if src is None or trg is None:
            counts = [sum(1 for _ in _lines(paths)) for paths in (real_src, real_trg)]
            raise DataError(f"{real_src[0]} and {real_trg[0]}: {counts[0]} source but {counts[1]} target lines")
        yield src, trg


def _passing_pairs(
    bt_src: list[str | Path], bt_trg: list[str | Path], config: SyntheticConfig, dropped: dict
) -> Iterator[tuple[str, str]]:
    """The synthetic pairs (hypothesis, monolingual sentence) that pass the filters, counting drops in ``dropped``."""
    for hyp_path, mono_path in zip(bt_src, bt_trg, strict=True):
        for hyp, mono in zip_longest(_lines([hyp_path]), _lines([mono_path])):
            if hyp is None or mono is None:
                counts = [sum(1 for _ in _lines([path])) for path in (hyp_path, mono_path)]
                raise DataError(
                    f"{hyp_path} has {counts[0]} lines but its monolingual part {mono_path} has {counts[1]}"
                )
            reason = get_drop_reason(hyp, mono, config)
            if reason is None:
                yield hyp, mono
            else:
                dropped[reason] += 1
