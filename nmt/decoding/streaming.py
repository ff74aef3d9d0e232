"""Translate inputs of any length with a :class:`~nmt.decoding.translation.Translator`: a stream window by window
(bounded memory), and files line by line into files written atomically (test sets and back-translation alike).
"""

import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from nmt.atomic import atomic_text, write_text
from nmt.config import DecodeConfig
from nmt.data.rawtext import split_lines
from nmt.decoding.translation import (
    LimitCount,
    Translator,
    decoding_record,
    load_decoding,
    translate_lines,
    translate_nbest,
)
from nmt.errors import MAX_WARNINGS, DataError, brief_list
from nmt.model_dir import normalize_input, tag_input
from nmt.progress import LOG_EVERY, Progress, count_lines

log = logging.getLogger(__name__)

# Lines sorted by length and translated together: memory stays bounded on inputs of any size.
CHUNK_LINES = 10_000


def read_source(stream: IO[bytes], name: str) -> Iterator[str]:
    """The lines of a UTF-8 byte stream without their line ends (LF or CRLF; CR-only as corpora,
    :func:`nmt.data.rawtext.split_lines`).

    Undecodable bytes become U+FFFD, with a warning naming the line (the first
    :data:`MAX_WARNINGS` lines) and a count at the end, so that every line still gets its output line.
    """
    bad: list[int] = []
    for number, raw in enumerate(split_lines(stream, name), 1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad.append(number)
            if len(bad) <= MAX_WARNINGS:
                log.warning("%s line %d: not UTF-8 (%s), bad bytes replaced by U+FFFD", name, number, e.reason)
            yield raw.decode("utf-8", errors="replace")
    if len(bad) > 1:
        what = "%s: %d lines not UTF-8, translated with bad bytes replaced: lines %s"
        log.warning(what, name, len(bad), brief_list(bad))


def check_source(path: str | Path, pipes: bool = False) -> Path:
    """``path`` as a :class:`Path` if it is a file, or with ``pipes`` anything that reads as one (``<(cmd)``, a named
    pipe, ``/dev/stdin``: read once, so not where the lines are counted first); else a :class:`DataError` saying what
    it is."""
    path = Path(path)
    if path.is_dir() or not (path.exists() if pipes else path.is_file()):
        raise DataError(f"{path}: {'is a directory, not a file' if path.is_dir() else 'file not found'}")
    return path


def translate_windows(
    translator: Translator,
    lines: Iterable[str],
    name: str = "input",
    window: int = CHUNK_LINES,
    nbest: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list]:
    """Translate ``lines`` of any number ``window`` lines at a time (bounded memory), as they arrive.

    Each window is read, sorted by length, translated and yielded as a list in input order: of
    strings (:func:`~nmt.decoding.translation.translate_lines`), or with ``nbest`` of n-best lists
    (:func:`~nmt.decoding.translation.translate_nbest`). A window of 1 answers every line before the next one is
    read (interactive use through a pipe). Every window is searched by the same search, so sampling draws on from
    one generator seeded once per call: windows of the same lines get other samples, and the noise of
    back-translation does not repeat every ``window`` lines; the whole input samples the same way twice.

    Once the input is done, one line logs how many outputs of all windows stopped at their length limit
    (:meth:`~nmt.decoding.translation.LimitCount.log`).

    :param progress: passed on to :func:`~nmt.decoding.translation.translate_lines` (lines done after each batch)
    """
    search = translator.new_search() if nbest is None else None
    lines = iter(lines)
    first_line = 1
    count = LimitCount()
    while chunk := list(itertools.islice(lines, window)):
        if nbest is None:
            yield translate_lines(translator, chunk, name, first_line, progress, search, count)
        else:
            yield translate_nbest(translator, chunk, nbest, name, first_line, count)
        first_line += len(chunk)
    count.log(name, translator.config)


def translate_stream(
    translator: Translator, lines: Iterable[str], name: str = "input", progress: Callable[[int], None] | None = None
) -> Iterator[str]:
    """:func:`~nmt.decoding.translation.translate_lines` over ``lines`` of any number, :data:`CHUNK_LINES` at a
    time (bounded memory)."""
    for hyps in translate_windows(translator, lines, name, progress=progress):
        yield from hyps


def translate_file(
    model_dirs: str | Path | list[str | Path],
    src_path: str | Path,
    hyp_path: str | Path,
    config: DecodeConfig,
    device: str = "auto",
    progress_every: float = LOG_EVERY,
    threads: int | None = None,
    bf16: str = "auto",
    record_path: str | Path | None = None,
    trg_lang: str | None = None,
    normalize: bool = False,
) -> int:
    """Translate ``src_path`` line by line into ``hyp_path`` (written atomically); returns the line count.

    The output has one line per input line, with the policies of :func:`read_source` (bytes that are
    not UTF-8) and :func:`~nmt.decoding.translation.translate_lines` (empty and overlong lines).

    :param model_dirs: a model directory, or several to decode with their ensemble
    :param device: and ``bf16``, ``threads``: as :func:`~nmt.decoding.translation.load_decoding` takes them
    :param record_path: where to write the :func:`~nmt.decoding.translation.decoding_record` (JSON) of the
        translation, with its ``hyp_path``
    :param progress_every: seconds between progress log lines when stderr is not a terminal (:class:`Progress`)
    :param trg_lang: the target language a multilingual model is asked for: its tag starts every line
        (:func:`nmt.model_dir.tag_input`)
    :param normalize: normalize the lines as the training sources were (:func:`nmt.model_dir.normalize_input`): a
        pivot cascade's translation into the pivot language, which the next model reads (test sets are normalized
        when they are prepared)
    """
    src_path = check_source(src_path)
    model_dirs = [model_dirs] if isinstance(model_dirs, (str, Path)) else list(model_dirs)
    translator = load_decoding(model_dirs, config, device, bf16, threads=threads)
    models = f"{len(model_dirs)} model{'s' if len(model_dirs) > 1 else ''}"
    log.info("translating %s with %s (device %s, %s)", src_path, config, device, models)
    n = 0
    with (
        open(src_path, "rb") as src,
        atomic_text(hyp_path) as out,
        Progress(f"translating {src_path}", count_lines(src_path), "lines", every=progress_every) as progress,
    ):
        lines = read_source(src, str(src_path))
        lines = tag_input(model_dirs[0], normalize_input(model_dirs[0], lines) if normalize else lines, trg_lang)
        for hyp in translate_stream(translator, lines, str(src_path), progress.update):
            out.write(hyp + "\n")
            n += 1
    if n == 0:
        log.warning("%s: empty, nothing to translate", src_path)
    if record_path is not None:
        record = {"hyp": str(hyp_path), **decoding_record(translator.model, device, bf16)}
        log.info("decoded on %s in %s (%s)", record["device"], record["precision"], record["runtime"])
        write_text(record_path, json.dumps(record, indent=2) + "\n")
    return n
