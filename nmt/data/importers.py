"""Corpus importers of the data stage: archive members, TSV columns, OPUS corpora, sacrebleu test sets."""

import fcntl
import json
import logging
import lzma
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from nmt.atomic import atomic_path, atomic_text, hash_file
from nmt.config import CorpusConfig
from nmt.data.download import download
from nmt.data.rawtext import open_text
from nmt.errors import ConfigError, DataError, DownloadError

if TYPE_CHECKING:
    from sacrebleu.dataset.base import Dataset

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
# How many member names a "no such member" error lists.
LISTED_MEMBERS = 5
OPUS_URL = "https://object.pouta.csc.fi/OPUS-{corpus}/{version}/moses/{pair_dir}.txt.zip"
# Errors of a damaged archive or compressed stream, reported as DataError.
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError)


def extract_member(archive: str | Path, member: str, dest: str | Path) -> None:
    """Copy one member of a zip or tar (plain, gzip, bzip2 or xz) archive to ``dest``, streaming and atomically.

    The format is detected from the content, not the file name. Member names are matched after
    normalization, so ``dir/file`` also finds ``./dir/file``.

    :param archive: the zip or tar file
    :param member: the member's name inside the archive
    :param dest: where the member's bytes go; parent folders are created
    :raises DataError: if the archive is missing, not a zip or tar, or damaged; if ``member`` is an absolute
        path or has ``..`` components; if it is missing (the error lists some members that exist); or if it
        is not a regular file (directory, symlink, hardlink, device)
    """
    archive, dest = Path(archive), Path(dest)
    name = member.replace("\\", "/")
    if name.startswith("/") or ".." in name.split("/"):
        raise DataError(f"{archive}: refusing member '{member}', its path escapes the target folder")
    name = posixpath.normpath(name)
    if not archive.is_file():
        raise DataError(f"{archive}: no such file")
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                info = _find_zip_member(zf, archive, name, member)
                with zf.open(info) as stream:
                    _copy_atomically(stream, dest)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                info = _find_tar_member(tar, archive, name, member)
                with tar.extractfile(info) as stream:
                    _copy_atomically(stream, dest)
        else:
            raise DataError(f"{archive}: not a zip or tar archive")
    except ARCHIVE_ERRORS as e:
        raise DataError(f"{archive}: cannot extract member '{member}' ({' '.join(str(e).split())})") from None
    log.info("extracted %s from %s to %s", member, archive, dest)


def _find_zip_member(zf: zipfile.ZipFile, archive: Path, name: str, member: str) -> zipfile.ZipInfo:
    """Return the regular-file entry ``name`` of ``zf``; raise :class:`DataError` if missing or special."""
    for info in zf.infolist():
        if posixpath.normpath(info.filename) == name:
            if info.is_dir() or stat.S_ISLNK(info.external_attr >> 16):
                raise DataError(f"{archive}: member '{member}' is not a regular file")
            return info
    raise DataError(_missing_member(archive, member, zf.namelist()))


def _find_tar_member(tar: tarfile.TarFile, archive: Path, name: str, member: str) -> tarfile.TarInfo:
    """Return the regular-file entry ``name`` of ``tar``, reading headers only up to it."""
    for info in tar:
        if posixpath.normpath(info.name) == name:
            if not info.isfile():
                raise DataError(f"{archive}: member '{member}' is not a regular file (symlink, link, device or dir)")
            return info
    raise DataError(_missing_member(archive, member, tar.getnames()))


def _missing_member(archive: Path, member: str, names: list[str]) -> str:
    """The one-line message for a missing member, listing the first few names the archive has."""
    files = [n for n in names if not n.endswith("/")]
    shown = ", ".join(files[:LISTED_MEMBERS]) + (f", ... ({len(files)} in all)" if len(files) > LISTED_MEMBERS else "")
    return f"{archive}: no member '{member}' (members: {shown or 'none'})"


def _copy_atomically(stream: IO[bytes], dest: Path) -> None:
    """Copy ``stream`` to a temp file next to ``dest`` and move it to ``dest`` only once complete."""
    with atomic_path(dest) as tmp, open(tmp, "wb") as f:
        shutil.copyfileobj(stream, f, CHUNK_BYTES)


def extract_tsv_column(path: str | Path, column: int, dest: str | Path, name: str | None = None) -> int:
    """Write one column of a tab-separated file to ``dest``, one output line per input line, atomically.

    A line with too few columns, with another number of columns than the first line (a tab inside a field shifts
    or cuts the fields after it) or with invalid UTF-8 becomes an empty line rather than being skipped, so the
    column stays aligned with the other side of the corpus, which gets an empty line there too; the cleaning stage
    drops and counts empty pairs, and a warning counts them here.

    :param path: the TSV file (plain, gzip or xz, detected from the content)
    :param column: 0-based column index
    :param dest: the output text file
    :param name: what messages call the file (the configured location; default ``path``)
    :return: the number of lines written empty because they were short, ragged or not UTF-8
    :raises DataError: if the file is missing, unreadable or empty, ``column`` is negative, or no line has it
    """
    name = name or str(path)
    if column < 0:
        raise DataError(f"{name}: TSV column must be 0 or more, got {column}")
    lines = short = ragged = 0
    width = None  # the number of fields of the first line with text
    with atomic_text(dest) as f:
        for line in open_text(path):
            lines += 1
            fields = line.split("\t") if line is not None else []
            blank = not (line or "").strip()
            width = width or (None if blank else len(fields))  # of the first line with text
            if len(fields) <= column:
                short += 1
            elif not blank and len(fields) != width:
                ragged += 1
            else:
                f.write(fields[column])
            f.write("\n")
        if lines == 0:
            raise DataError(f"{path}: empty file")
        if short + ragged == lines:
            raise DataError(f"{name}: no line has a column {column} (the first line has {width} tab-separated fields)")
    if short:
        log.warning(
            "%s: %d of %d lines too short for column %d or not UTF-8, written empty", name, short, lines, column
        )
    if ragged:
        what = f"another number of tab-separated fields than the first line with text ({width}; a tab inside a field?)"
        log.warning("%s: %d of %d lines have %s, written empty", name, ragged, lines, what)
    return short + ragged


def opus_urls(corpus: str, version: str, src: str, trg: str) -> list[tuple[str, str]]:
    """The OPUS Moses download URLs for a language pair, the given order first, then the reversed one.

    OPUS usually stores a pair once, in alphabetical order (``de-en``), so either may exist.

    :param corpus: OPUS corpus name, e.g. ``Europarl``
    :param version: corpus release, e.g. ``v8``
    :param src: source language code
    :param trg: target language code
    :return: ``[(url, pair_dir), ...]``, where ``pair_dir`` is ``src-trg`` then ``trg-src``
    """
    return [
        (OPUS_URL.format(corpus=corpus, version=version, pair_dir=pair_dir), pair_dir)
        for pair_dir in (f"{src}-{trg}", f"{trg}-{src}")
    ]


def opus_member(corpus: str, pair_dir: str, lang: str) -> str:
    """The name of one language's text file inside an OPUS Moses zip, e.g. ``Europarl.de-en.en``.

    :param corpus: OPUS corpus name
    :param pair_dir: the pair the zip is stored under (``pair_dir`` from :func:`fetch_opus`)
    :param lang: language code of the side wanted
    """
    return f"{corpus}.{pair_dir}.{lang}"


def fetch_opus(
    corpus: str,
    version: str,
    src: str,
    trg: str,
    dest: str | Path,
    mirror: str | Path | None = None,
    sha256: str | None = None,
) -> dict:
    """Download an OPUS Moses zip for ``src``-``trg``, trying the reversed pair when the given one fails.

    :param corpus: OPUS corpus name, e.g. ``Europarl``
    :param version: corpus release, e.g. ``v8``
    :param src: source language code
    :param trg: target language code
    :param dest: where the zip goes; its manifest ``<dest>.manifest.json`` also gets the key ``pair_dir``
    :param mirror: mirror root, as for :func:`nmt.data.download.download`
    :param sha256: expected hex digest of the zip; None skips the check
    :return: the download manifest plus ``pair_dir``, the pair the zip was found under
    :raises DownloadError: if neither URL can be fetched; names both
    """
    dest = Path(dest)
    errors = []
    for url, pair_dir in opus_urls(corpus, version, src, trg):
        try:
            manifest = download(url, dest, sha256=sha256, mirror=mirror)
        except DownloadError as e:
            errors.append(str(e))
            continue
        manifest["pair_dir"] = pair_dir
        with atomic_text(dest.with_name(dest.name + ".manifest.json")) as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        return manifest
    raise DownloadError(f"OPUS {corpus} {version} {src}-{trg}: both pair orders failed: {'; '.join(errors)}")


def sacrebleu_downloads(test_set: str, out_dir: str | Path) -> list[tuple[str, Path, str | None]]:
    """The files sacrebleu downloads for a test set, and where sacrebleu keeps them in a cache rooted in ``out_dir``.

    sacrebleu keeps the file of each URL as ``<cache>/<test set>/raw/<test set, / as _>.<URL basename>``
    (e.g. ``wmt14/full/raw/wmt14_full.test-full.tgz``); a test pins this against sacrebleu's own download.

    :param test_set: a sacrebleu test set name, e.g. ``wmt14``
    :param out_dir: the cache root, sacrebleu's ``$SACREBLEU``
    :return: ``[(url, raw_path, md5 or None), ...]`` in sacrebleu's order
    :raises ConfigError: if the test set is unknown
    """
    dataset = _get_sacrebleu_dataset(test_set)
    raw_dir = Path(out_dir, dataset.name, "raw")
    prefix = dataset.name.replace("/", "_")
    md5s = dataset.md5 or [None] * len(dataset.data)
    return [
        (url, raw_dir / f"{prefix}.{posixpath.basename(url)}", md5)
        for url, md5 in zip(dataset.data, md5s, strict=False)
    ]


def fetch_sacrebleu(
    test_set: str, langpair: str, out_dir: str | Path, mirror: str | Path | None = None
) -> tuple[Path, Path]:
    """Fetch a test set the way sacrebleu does, but download with :func:`nmt.data.download.download`.

    sacrebleu fixes its cache folder from ``$SACREBLEU`` once, when it is imported, so the caller sets
    ``SACREBLEU=out_dir`` before the first import of sacrebleu (the download job's script does). The raw
    files land where sacrebleu's own download would put them, are checked against sacrebleu's md5 and
    unpacked as sacrebleu unpacks them; sacrebleu's own code then turns them into text, so the sentences
    equal those the MT community scores on. sacrebleu finds the raw files present and does not touch the
    network.

    :param test_set: a sacrebleu test set name, e.g. ``wmt14``
    :param langpair: e.g. ``en-de``
    :param out_dir: cache root, equal to ``$SACREBLEU``; files go to ``out_dir/<test_set>/``
    :param mirror: mirror root, as for :func:`nmt.data.download.download`
    :return: the source file and the first reference file
    :raises ConfigError: if the test set is unknown, does not offer ``langpair``, or sacrebleu's cache is
        not ``out_dir``
    :raises DownloadError: if a file cannot be fetched or fails its md5
    :raises DataError: if a raw file cannot be unpacked or processed
    """
    from sacrebleu.utils import SACREBLEU_DIR  # here, not at the top: the caller sets $SACREBLEU first

    dataset = _get_sacrebleu_dataset(test_set)
    if langpair not in dataset.langpairs:
        pairs = ", ".join(sorted(dataset.langpairs))
        raise ConfigError(f"sacrebleu test set '{test_set}' has no language pair '{langpair}' (available: {pairs})")
    if Path(SACREBLEU_DIR).resolve() != Path(out_dir).resolve():
        raise ConfigError(
            f"sacrebleu caches test sets in {SACREBLEU_DIR}, not {out_dir}: "
            f"set SACREBLEU={Path(out_dir).resolve()} before sacrebleu is imported"
        )
    for url, raw, md5 in sacrebleu_downloads(test_set, out_dir):
        cached = raw.is_file() and md5 is not None and hash_file(raw, "md5") == md5  # fetched by an earlier call
        if not cached:
            download(url, raw, mirror=mirror)
            if md5 is not None and (actual := hash_file(raw, "md5")) != md5:
                raw.unlink()
                raw.with_name(raw.name + ".manifest.json").unlink(missing_ok=True)
                message = f"md5 mismatch for sacrebleu test set '{test_set}', expected {md5} got {actual}"
                raise DownloadError(f"{url}: {message}")
        _unpack_like_sacrebleu(raw)
    try:
        src_file = dataset.get_source_file(langpair)
        ref_file = dataset.get_reference_files(langpair)[0]
    except (OSError, IndexError) as e:
        raise DataError(f"sacrebleu test set '{test_set}' {langpair}: cannot process raw files ({e})") from None
    return Path(src_file), Path(ref_file)


def _get_sacrebleu_dataset(test_set: str) -> "Dataset":
    """sacrebleu's dataset ``test_set``; sacrebleu is imported here, after the caller has set ``$SACREBLEU``."""
    from sacrebleu.dataset import DATASETS

    if test_set not in DATASETS:
        raise ConfigError(f"sacrebleu test set '{test_set}' is unknown")
    return DATASETS[test_set]


def _unpack_like_sacrebleu(raw: Path) -> None:
    """Unpack ``raw`` next to itself when sacrebleu's ``extract_tarball`` would, which goes by the file name."""
    try:
        if raw.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(raw) as tar:
                tar.extractall(raw.parent, filter="data")
        elif raw.name.endswith(".zip"):
            with zipfile.ZipFile(raw) as zf:
                zf.extractall(raw.parent)
    except ARCHIVE_ERRORS as e:
        raise DataError(f"{raw}: cannot unpack ({' '.join(str(e).split())})") from None


def import_plain(url: str, dest: str | Path, sha256: str | None = None, mirror: str | Path | None = None) -> dict:
    """Fetch a corpus file as it is, for the ``url`` and ``local`` importers.

    :param url: an http(s) URL, a ``file://`` URL or a local path
    :param dest: where the file goes
    :param sha256: expected hex digest; None skips the check
    :param mirror: mirror root, as for :func:`nmt.data.download.download`
    :return: the download manifest
    :raises DownloadError: if the file cannot be fetched or fails its checksum
    """
    return download(url, dest, sha256=sha256, mirror=mirror)


def fetch_archive(config: CorpusConfig, dest: str | Path, mirror: str | Path | None = None) -> dict:
    """Fetch the one file that holds every language of an archived corpus (zip, tar, TSV or OPUS zip).

    :param config: a corpus with ``config.archived``
    :param dest: where the file goes (with ``<dest>.manifest.json``)
    :return: the download manifest (for OPUS with ``pair_dir``)
    """
    if config.importer == "opus":
        src, trg = config.pair.split("-")
        return fetch_opus(config.corpus, config.version, src, trg, dest, mirror, config.sha256.get("archive"))
    return download(config.location, dest, sha256=config.sha256.get("archive"), mirror=mirror)


def import_corpus(
    config: CorpusConfig,
    lang: str,
    dest: str | Path,
    archive: str | Path | None = None,
    sacrebleu_dir: str | Path | None = None,
    mirror: str | Path | None = None,
) -> dict:
    """Put the ``lang`` side of a corpus at ``dest`` (as served: plain or compressed) with a provenance manifest.

    :param config: the corpus
    :param lang: the language wanted
    :param dest: output file; ``<dest>.manifest.json`` is written beside it
    :param archive: the file :func:`fetch_archive` fetched, for archived corpora
    :param sacrebleu_dir: cache root of sacrebleu test sets, equal to ``$SACREBLEU`` (see :func:`fetch_sacrebleu`;
        shared by the jobs of one test set, which take turns through a lock file)
    :param mirror: mirror root, as for :func:`nmt.data.download.download`
    :return: the manifest
    """
    dest = Path(dest)
    if config.importer in ("url", "local") and not config.archived:
        return download(config.location.replace("{lang}", lang), dest, config.sha256.get(lang), mirror)
    if config.importer == "sacrebleu":
        return _import_sacrebleu(config, lang, dest, Path(sacrebleu_dir), mirror)
    archive = Path(archive)
    if config.tsv_columns:
        if lang not in config.tsv_columns:
            raise ConfigError(f"{archive}: tsv_columns has no column for '{lang}'")
        bad = extract_tsv_column(archive, config.tsv_columns[lang], dest, config.location)
        origin = {"archive": str(archive), "column": config.tsv_columns[lang], "lines_written_empty": bad}
    else:
        if config.importer == "opus":
            pair_dir = json.loads(archive.with_name(archive.name + ".manifest.json").read_text())["pair_dir"]
            member = opus_member(config.corpus, pair_dir, lang)
        else:
            member = config.member.replace("{lang}", lang)
        extract_member(archive, member, dest)
        origin = {"archive": str(archive), "member": member}
    return _write_manifest(dest, origin, config.sha256.get(lang))


def _import_sacrebleu(config: CorpusConfig, lang: str, dest: Path, cache: Path, mirror: str | Path | None) -> dict:
    """Copy the source or the reference of a sacrebleu test set, whichever is in ``lang``."""
    langs = config.langpair.split("-")
    if lang not in langs:
        raise ConfigError(f"sacrebleu test set '{config.test_set}' {config.langpair} has no side in '{lang}'")
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{config.test_set.replace('/', '_')}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the source and reference jobs must not download at once
        src_file, ref_file = fetch_sacrebleu(config.test_set, config.langpair, cache, mirror)
    with open(src_file if lang == langs[0] else ref_file, "rb") as f:
        _copy_atomically(f, dest)
    origin = {
        "test_set": config.test_set,
        "langpair": config.langpair,
        "file": str(src_file if lang == langs[0] else ref_file),
    }
    return _write_manifest(dest, origin, config.sha256.get(lang))


def _write_manifest(dest: Path, origin: dict, sha256: str | None) -> dict:
    """Check ``dest`` against ``sha256`` (if given) and write its manifest: origin, size, sha256, date."""
    actual = hash_file(dest)
    if sha256 is not None and actual != sha256.strip().lower():
        dest.unlink()
        raise DataError(f"{dest}: sha256 mismatch, expected {sha256.strip().lower()} but got {actual}")
    manifest = {
        **origin,
        "size": dest.stat().st_size,
        "sha256": actual,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with atomic_text(dest.with_name(dest.name + ".manifest.json")) as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest
