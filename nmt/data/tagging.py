"""A multilingual model's text: each source with the tag of its target language first (Johnson et al. 2017)."""

import logging
from itertools import zip_longest
from pathlib import Path

from nmt.atomic import atomic_texts
from nmt.errors import DataError
from nmt.vocab import target_tag

log = logging.getLogger(__name__)


def tag_corpus(
    src_files: list[str | Path],
    trg_files: list[str | Path],
    trg_langs: list[str],
    src_out: str | Path,
    trg_out: str | Path,
) -> int:
    """Write the pairs of the line-aligned files ``src_files[i]``/``trg_files[i]`` one after the other into
    ``src_out``/``trg_out`` (atomically, both or neither), every source starting with the tag of ``trg_langs[i]``
    (:func:`nmt.vocab.target_tag`), the piece that asks a multilingual model for that target language.

    A direction's training corpora (one ``trg_lang``) become one corpus this way, whose name its training weights by
    temperature; the dev sets of a system's directions (a ``trg_lang`` each) become its one dev set. Files are
    streamed line by line.

    :return: the number of pairs written
    :raises DataError: naming both files when a source and its target file differ in line count
    """
    if not len(src_files) == len(trg_files) == len(trg_langs):
        raise ValueError(f"{len(src_files)} source files, {len(trg_files)} target files, {len(trg_langs)} languages")
    pairs = 0
    with atomic_texts(src_out, trg_out) as (src_f, trg_f):
        for src_path, trg_path, trg_lang in zip(src_files, trg_files, trg_langs, strict=True):
            tag = target_tag(trg_lang)
            with open(src_path, encoding="utf-8") as src_in, open(trg_path, encoding="utf-8") as trg_in:
                for number, (src, trg) in enumerate(zip_longest(src_in, trg_in), 1):
                    if src is None or trg is None:
                        short = "source" if src is None else "target"
                        raise DataError(
                            f"{src_path} and {trg_path}: the {short} side ends after {number - 1} lines, the other "
                            "goes on"
                        )
                    src_f.write(f"{tag} {src.rstrip(chr(10))}\n")
                    trg_f.write(trg if trg.endswith("\n") else trg + "\n")
                    pairs += 1
    log.info("%s: %d pairs, each source tagged with its target language (%s)", src_out, pairs, ", ".join(trg_langs))
    return pairs
