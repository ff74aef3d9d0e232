"""Files of every stage: atomic output (readers and a resumed run never see half a file or half a folder),
checksums, and strict reading of the UTF-8 text files that earlier stages wrote."""

import codecs
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from nmt.errors import DataError, OutputError

log = logging.getLogger(__name__)

# ".{name}.{pid}.tmp": the temp file or folder of a writer with that process id (see temp_path).
TEMP_NAME = re.compile(r"^\..+\.(\d+)\.tmp$")
# The first bytes of a gzip and an xz file (nmt.data.rawtext opens them; read_lines names them).
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
# What a failed write says: the file system is full, or the file hit a size limit (ulimit -f, quota).
NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EFBIG: "file too large (file size limit)"}
if hasattr(errno, "EDQUOT"):
    NO_SPACE[errno.EDQUOT] = "disk quota exceeded"


@contextmanager
def atomic_text(path: str | Path) -> Iterator[IO[str]]:
    """Open a temp file next to ``path`` for writing UTF-8 text; move it to ``path`` only on success.

    The temp file sits in the same folder, so ``os.replace`` is a rename on one file system. On any
    error it is removed; a full disk or file size limit becomes an :class:`OutputError` naming ``path``.
    """
    with atomic_texts(path) as (f,):
        yield f


@contextmanager
def atomic_texts(*paths: str | Path) -> Iterator[list[IO[str]]]:
    """:func:`atomic_text` for files that belong together (the two sides of a corpus): all appear, or none.

    Every file is closed (flushed) before the first is moved into place, so a full disk while
    writing any of them leaves none behind.
    """
    with atomic_paths(*paths) as tmps:
        files: list[IO[str]] = []
        try:
            for tmp in tmps:
                files.append(open(tmp, "w", encoding="utf-8", newline="\n"))
            yield files
            for f in files:
                f.close()  # a full disk's last flush fails here, before anything is renamed
        except BaseException:
            for f in files:
                with suppress(OSError):  # flushing the rest of a full disk's buffer fails again
                    f.close()
            raise


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path next to ``path`` to write a file or a folder at; move it to ``path`` on success.

    The temp path sits in the same folder, so ``os.replace`` is a rename on one file system. On any
    error it is removed (file or folder); a full disk or file size limit becomes an
    :class:`OutputError` naming ``path``. A folder replaces an existing folder of that name.
    """
    with atomic_paths(path) as (tmp,):
        yield tmp


@contextmanager
def atomic_paths(*paths: str | Path) -> Iterator[list[Path]]:
    """:func:`atomic_path` for outputs that belong together: all appear, or none (the first error wins).

    A symbolic link is written through (its target is replaced, the link stays); a device or pipe (``/dev/null``,
    ``/dev/stdout``) is written to directly, since a rename would replace it by a file."""
    paths = [_write_target(Path(p)) for p in paths]
    tmps = [path if _is_special(path) else temp_path(path) for path in paths]
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
        yield tmps
        for tmp, path in zip(tmps, paths, strict=True):
            if tmp == path:
                continue
            if tmp.is_dir() and path.is_dir():
                shutil.rmtree(path)
            os.replace(tmp, path)
    except BaseException as e:
        for tmp, path in zip(tmps, paths, strict=True):
            if tmp != path:
                _remove(tmp)
        if isinstance(e, OSError) and e.errno in NO_SPACE:
            raise OutputError(f"{', '.join(map(str, paths))}: {NO_SPACE[e.errno]}") from None
        raise


def _is_special(path: Path) -> bool:
    """Whether ``path`` (followed, if a link) is neither a file nor a folder: a device, a pipe or a socket."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_target(path: Path) -> Path:
    """Where an output at ``path`` goes: the file a symbolic link points to (the link itself stays), else ``path``."""
    return path if _is_special(path) or not path.is_symlink() else path.resolve()


def temp_path(path: Path) -> Path:
    """The temp name ``.{name}.{pid}.tmp`` beside ``path`` that :func:`remove_stale_temp_files` knows."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _remove(path: Path) -> None:
    """Remove a file or a folder if it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def check_apart(outputs: list[str | Path | None], inputs: list[str | Path | None]) -> None:
    """Raise an :class:`OutputError` if an output is one of the inputs (the same file or folder, by any path): writing
    it would destroy what is being read. ``None`` stands for stdin or stdout."""
    for output in filter(None, outputs):
        for source in filter(None, inputs):
            if Path(output).exists() and Path(source).exists() and os.path.samefile(output, source):
                raise OutputError(f"{output}: is also an input ({source}); write the output elsewhere")


def check_file_outputs(*paths: str | Path | None) -> None:
    """Raise an :class:`OutputError` if an output file's path names a folder, an existing one or by a final
    ``/`` (``Path`` drops the slash, so the file would be written beside the folder meant). ``None``: stdout."""
    for path in filter(None, paths):
        if str(path).endswith((os.sep, "/")) or Path(path).is_dir():
            raise OutputError(f"{path}: names a folder; give the path of the file to write")


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_text`."""
    with atomic_text(path) as f:
        f.write(text)


def remove_stale_temp_files(root: str | Path, min_age: float = 600.0) -> list[Path]:
    """Remove the temp files and folders ``.{name}.{pid}.tmp`` under ``root`` that a killed writer left behind.

    One is stale when no process with its pid runs on this machine and it has not changed for
    ``min_age`` seconds, a folder with everything in it (a writer on another node of a cluster has a pid
    that means nothing here, but it keeps its output fresh).

    :param root: the folder to search (``results``); nothing happens if it does not exist
    :param min_age: seconds since the last change before a temp output of a dead pid is removed
    :return: the removed files and folders
    """
    removed = []
    for folder, dirs, files in os.walk(root):
        temps = [name for name in [*dirs, *files] if TEMP_NAME.match(name)]
        dirs[:] = [name for name in dirs if name not in temps]  # a temp folder goes whole or stays whole
        for name in temps:
            path = Path(folder, name)
            if _is_running(int(TEMP_NAME.match(name).group(1))):
                continue
            try:
                if _last_change(path) <= time.time() - min_age:
                    _remove(path)
                    removed.append(path)
            except FileNotFoundError:  # its writer finished or removed it meanwhile
                continue
    if removed:
        log.info("removed %d stale temporary outputs under %s", len(removed), root)
    return removed


def _last_change(path: Path) -> float:
    """The newest modification time of ``path`` and, for a folder, of everything in it."""
    if not path.is_dir() or path.is_symlink():
        return os.path.getmtime(path)
    return max(os.path.getmtime(Path(folder, name)) for folder, _, files in os.walk(path) for name in [".", *files])


def _is_running(pid: int) -> bool:
    """Whether a process with this id runs on this machine (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    except OverflowError:
        return False
    return True


def hash_file(path: str | Path, algorithm: str = "sha256") -> str:
    """Return the lowercase hex digest (``sha256``, ``md5``, ...) of the file at ``path``."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


def read_json(path: str | Path) -> Any:
    """Read a JSON file that an earlier stage wrote (a report, a summary).

    :raises DataError: naming the file if it is missing or not JSON
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not JSON ({e})") from e


def read_lines(path: str | Path) -> list[str]:
    """Read a plain UTF-8 text file (one sentence per line) that earlier stages wrote, or a user's (a BOM at its
    start is not text: it goes).

    :raises DataError: naming the file (and line) if it is missing, a directory or not UTF-8
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {'is a directory, not a file' if path.is_dir() else 'file not found'}")
    try:
        with open(path, encoding="utf-8-sig") as f:
            return [line.rstrip("\n") for line in f]
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from e


def check_utf8(path: str | Path) -> None:
    """Raise :func:`not_utf8`'s error if the file ``path`` is not UTF-8 text (read in blocks of 1 MB)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as f:
        try:
            for block in iter(lambda: f.read(1 << 20), b""):
                decoder.decode(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise not_utf8(path, e) from e


def not_utf8(path: str | Path, error: UnicodeDecodeError) -> DataError:
    """The error of a text file that ``error`` found not UTF-8, naming its first line that is not (a compressed
    file is named as one: it must be decompressed first)."""
    with open(path, "rb") as f:
        if f.read(len(XZ_MAGIC)).startswith((GZIP_MAGIC, XZ_MAGIC)):
            return DataError(f"{path}: compressed (gzip or xz); decompress it first, this reads plain UTF-8 text")
        f.seek(0)
        number = next((n for n, raw in enumerate(f, 1) if not _is_utf8(raw)), "?")
    return DataError(f"{path}: line {number} is not UTF-8 ({error.reason})")


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
