"""Dev and test sets: the source normalized like the training data, the reference verbatim, no line dropped.

Unlike a training corpus, an evaluation set is not cleaned: dropping or changing a line would change the set that
the scores are comparable on. An empty line is kept too, but reported: in a set that should hold a sentence on every
line it is most often the trace of a shifted file (a line lost or added on one side), which would misalign every line
after it, or of a blank line at the end of both files.
"""

import logging
from pathlib import Path

from nmt.atomic import atomic_texts
from nmt.data.normalize import Normalizer
from nmt.data.rawtext import file_name, guess_encoding, zip_aligned
from nmt.errors import DataError, brief_list

log = logging.getLogger(__name__)


def prepare_eval_set(
    src_in: str | Path,
    ref_in: str | Path,
    src_out: str | Path,
    ref_out: str | Path,
    src_lang: str,
    punctuation: bool = True,
    sources: tuple[str, str] | None = None,
) -> int:
    """Write a dev/test set: the source normalized like training data, the reference verbatim.

    No line is ever dropped: that would change the test set. The reference is only decompressed and
    stripped of BOM and CR, because sacrebleu must score against the real reference. Empty lines of either side
    are kept and reported in one warning per file (:func:`report_empty_lines`).

    :param src_in: raw source file (plain, gzip or xz)
    :param ref_in: raw reference file, line-aligned with ``src_in``
    :param src_out: normalized source, written atomically
    :param ref_out: reference, written atomically
    :param src_lang: source language code
    :param punctuation: whether to apply Moses punctuation normalization to the source
    :param sources: the user's source and reference files as configured (URLs or paths), named in messages
    :return: the number of lines
    :raises DataError: on different line counts, invalid UTF-8 or an empty set
    """
    src_norm = Normalizer(src_lang, punctuation)
    sources = sources or (str(src_in), str(ref_in))
    count = 0
    empty: tuple[list[int], list[int]] = ([], [])
    with atomic_texts(src_out, ref_out) as (src_f, ref_f):
        for count, (src, ref) in enumerate(zip_aligned(src_in, ref_in, sources), start=1):
            for side, (path, source, line) in enumerate(((src_in, sources[0], src), (ref_in, sources[1], ref))):
                if line is None:
                    name = file_name(path, source)
                    raise DataError(f"{name}: line {count} is not valid UTF-8{guess_encoding(path)}")
                if not line.strip():
                    empty[side].append(count)
            src_f.write(src_norm(src) + "\n")
            ref_f.write(ref + "\n")
        if count == 0:
            raise DataError(f"{file_name(src_in, sources[0])}: corpus is empty")
    for path, source, lines in zip((src_in, ref_in), sources, empty, strict=True):
        report_empty_lines(file_name(path, source), lines, count)
    log.info("%s: prepared %d lines", src_in, count)
    return count


def report_empty_lines(name: str, lines: list[int], count: int) -> None:
    """One warning naming the empty lines of an evaluation set's file (the first ten, :func:`brief_list`), if any."""
    if lines:
        log.warning(
            "%s: %d of %d lines empty (line %s), kept and scored as they are; a blank line in a dev or test set "
            "often means that one side lost or gained a line",
            name,
            len(lines),
            count,
            brief_list(lines),
        )
