"""Reading raw text files: decompression, line ends, the byte order mark, UTF-8 decoding and encoding checks.

Every corpus file (plain, gzip or xz) is read through :func:`open_text`, which keeps lines aligned
across the two sides of a parallel corpus: a line that is not valid UTF-8 becomes None, not an error
and not a shift. :func:`check_encoding` then judges the share of such lines per file. Control
characters pass through unchanged; :class:`nmt.data.normalize.Normalizer` removes them.

Errors name the user's file as configured (a URL or path) beside the copy that was read
(:func:`file_name`): the downloaded copy under ``results/data/download`` is not the file the user knows.
"""

import codecs
import gzip
import logging
import lzma
import zlib
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import IO

from nmt.atomic import GZIP_MAGIC, XZ_MAGIC
from nmt.errors import DataError

log = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# Bytes of a non-gzip file named .gz/.xz that must be text before we read it as plain text.
SNIFF_BYTES = 1 << 16
# Share of a file's lines that are not valid UTF-8 above which a warning names the file.
WARN_INVALID_UTF8 = 0.01
_MISSING = object()


def file_name(path: str | Path, source: str | None = None) -> str:
    """How messages name a file: the user's ``source`` as configured (URL or path), and the copy ``path`` that
    was read when it is another file, e.g. ``https://host/train.de (read from results/data/download/c.de)``."""
    if source is None or str(source) == str(path):
        return str(path)
    return f"{source} (read from {path})"


def open_text(path: str | Path, source: str | None = None) -> Iterator[str | None]:
    """Yield the lines of a plain, gzip or xz text file, without line terminators.

    Compression is detected from the magic bytes, not the file name. Lines are split on ``b"\\n"``
    before decoding, so a line that is not valid UTF-8 yields None and the lines after it stay aligned
    with the other side of the corpus. A UTF-8 BOM on the first line and a trailing ``\\r`` are removed.
    A file with CR-only line ends (as classic Mac OS wrote them: CRs and no LF in its first 64 KiB) is
    split on ``b"\\r"`` instead.

    :param path: the file
    :param source: the user's file as configured (URL or path), named in errors beside ``path``
    :return: an iterator over the lines; None for a line that is not valid UTF-8
    :raises DataError: if the file is missing or unreadable, or a compressed stream is corrupt
    """
    path = Path(path)
    name = file_name(path, source)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as e:
        raise DataError(f"{name}: cannot open ({e.strerror or e})") from None
    with f:
        stream, kind = _open_stream(f, path, name)
        with stream:
            yield from _read_lines(stream, name, kind)


def split_lines(stream: IO[bytes], name: str) -> Iterator[bytes]:
    """The lines of ``stream``: split on LF (with CRLF's CR left for the caller), or on CR if its first
    :data:`SNIFF_BYTES` hold a CR before their end and no LF at all (a stray CR inside a line of an LF file
    must not split it: web-crawled corpora have them). A stream that cannot seek (a pipe) is sniffed in what its
    buffer holds, without waiting for more (``peek``)."""
    if stream.seekable():
        head = stream.read(SNIFF_BYTES)
        stream.seek(0)
    else:  # a stream without a buffer to peek into is read as LF lines
        head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(stream, "peek") else b""
    if b"\n" in head or b"\r" not in head.rstrip(b"\r"):
        yield from stream
        return
    log.info("%s: CR-only line ends (classic Mac OS); read as lines", name)
    rest = b""
    while block := stream.read(1 << 20):
        *lines, rest = (rest + block).split(b"\r")
        yield from lines
    if rest:
        yield rest


def _read_lines(stream: IO[bytes], name: str, kind: str) -> Iterator[str | None]:
    """Split ``stream`` into lines, strip BOM and CR, decode; map stream errors to :class:`DataError`."""
    try:
        for number, raw in enumerate(split_lines(stream, name)):
            if number == 0 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if number == 0 and (raw.startswith(UTF16_BOMS) or 4 * raw.count(b"\x00") > len(raw)):
                raise DataError(f"{name}: looks like UTF-16 (byte order mark or NUL bytes), not UTF-8; convert it")
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                yield None
    except EOFError:
        raise DataError(f"{name}: truncated {kind} stream") from None
    except (OSError, zlib.error, lzma.LZMAError) as e:
        problem = "read error" if kind == "text" else f"corrupt {kind} stream"
        raise DataError(f"{name}: {problem} ({e})") from None


def _open_stream(f: IO[bytes], path: Path, name: str | None = None) -> tuple[IO[bytes], str]:
    """Wrap the binary file ``f`` in a decompressor chosen by its magic bytes; return it and its kind.

    :param name: how errors name the file (:func:`file_name`); ``path`` by default
    """
    head = f.read(SNIFF_BYTES)
    f.seek(0)
    if head.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=f, mode="rb"), "gzip"
    if head.startswith(XZ_MAGIC):
        return lzma.LZMAFile(f, mode="rb"), "xz"
    suffix = path.suffix.lower()
    if suffix in (".gz", ".xz") and not _looks_like_text(head):
        kind = "gzip" if suffix == ".gz" else "xz"
        raise DataError(f"{name or path}: not a {kind} file")
    return f, "text"


def _looks_like_text(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file, is UTF-8 text without NUL bytes."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        # final=False: the sniffed prefix may end inside a multi-byte character.
        decoder.decode(head, final=len(head) < SNIFF_BYTES)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


def check_encoding(path: str | Path, source: str, invalid: int, lines: int, max_share: float) -> None:
    """Warn (above 1%) or stop (above ``max_share``) when ``invalid`` of the ``lines`` of a file are not UTF-8.

    :param path: the file as read (the downloaded copy)
    :param source: the user's file as configured (URL or path), named first in the message
    :param invalid: lines that are not valid UTF-8
    :param lines: all lines of the file
    :param max_share: ``cleaning.max_invalid_utf8``
    :raises DataError: if the share of invalid lines is above ``max_share``
    """
    share = invalid / max(lines, 1)
    if invalid == 0 or share <= min(WARN_INVALID_UTF8, max_share):
        return
    name = file_name(path, source)
    message = f"{name}: {invalid:,} of {lines:,} lines ({share:.1%}) are not valid UTF-8{guess_encoding(path)}"
    if share > max_share:
        advice = "convert it to UTF-8 (e.g. iconv -f cp1252 -t utf-8) or raise cleaning.max_invalid_utf8"
        raise DataError(f"{message}; {advice}")
    log.warning("%s; they are dropped", message)


def guess_encoding(path: str | Path, sample: int = 200) -> str:
    """A hint at the encoding of a file whose lines are not UTF-8, from the first ``sample`` such lines.

    :return: ``"; it looks like Latin-1/cp1252"`` if every such line decodes as cp1252, else ``""``
    """
    bad = []
    with open(path, "rb") as f:
        stream, _ = _open_stream(f, Path(path))
        with stream:
            for raw in split_lines(stream, str(path)):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    bad.append(raw)
                    if len(bad) == sample:
                        break
    try:
        for raw in bad:
            raw.decode("cp1252")
    except UnicodeDecodeError:
        return ""
    return "; it looks like Latin-1/cp1252"


def zip_aligned(
    src_in: str | Path, trg_in: str | Path, sources: tuple[str, str] | None = None
) -> Iterator[tuple[str | None, str | None]]:
    """Yield line pairs of two files, raising :class:`DataError` with both line counts if they differ.

    :param sources: the user's source and target files as configured (URLs or paths), named in errors
    """
    src_source, trg_source = sources or (None, None)
    pairs = zip_longest(open_text(src_in, src_source), open_text(trg_in, trg_source), fillvalue=_MISSING)
    for src, trg in pairs:
        if src is _MISSING or trg is _MISSING:
            src_count = sum(1 for _ in open_text(src_in, src_source))
            trg_count = sum(1 for _ in open_text(trg_in, trg_source))
            raise DataError(
                f"{file_name(src_in, src_source)} has {src_count} lines but {file_name(trg_in, trg_source)} has "
                f"{trg_count}"
            )
        yield src, trg
