"""Atomic outputs (nmt.atomic): a target appears complete or not at all, never half-written."""

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmt.atomic import (
    atomic_path,
    atomic_paths,
    atomic_text,
    atomic_texts,
    remove_stale_temp_files,
    temp_path,
    write_text,
)
from nmt.errors import OutputError

REPO = Path(__file__).resolve().parents[1]


def leftovers(folder: Path) -> list[str]:
    """Names of temp files or folders (``.{name}.{pid}.tmp``) in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_file_appears_only_on_success(tmp_path):
    out = tmp_path / "sub" / "out.txt"
    with atomic_path(out) as tmp:
        assert tmp == temp_path(out) and tmp.parent == out.parent  # beside the target: a rename, not a copy
        tmp.write_text("done\n")
        assert not out.exists()
    assert out.read_text() == "done\n"
    assert leftovers(out.parent) == []


def test_file_replaces_an_existing_file(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    with atomic_text(out) as f:
        f.write("new\n")
        assert out.read_text() == "old\n"  # readers see the old file until the end
    assert out.read_text() == "new\n"


@pytest.mark.parametrize("as_folder", [False, True])
def test_failure_removes_the_temp_and_keeps_the_old_target(tmp_path, as_folder):
    out = tmp_path / "out"
    out.write_text("old\n")
    with pytest.raises(ValueError, match="writer failed"):
        with atomic_path(out) as tmp:
            if as_folder:
                tmp.mkdir()
                (tmp / "part").write_text("half")
            else:
                tmp.write_text("half")
            raise ValueError("writer failed")
    assert out.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_several_files_all_or_none(tmp_path):
    src, trg = tmp_path / "train.de", tmp_path / "train.en"
    with pytest.raises(RuntimeError):
        with atomic_texts(src, trg) as (src_f, trg_f):
            src_f.write("a\n")
            trg_f.write("b\n")
            raise RuntimeError("second side failed")
    assert not src.exists() and not trg.exists() and leftovers(tmp_path) == []
    with atomic_paths(src, trg) as (src_tmp, trg_tmp):
        src_tmp.write_text("a\n")
        trg_tmp.write_text("b\n")
        assert not src.exists() and not trg.exists()
    assert (src.read_text(), trg.read_text()) == ("a\n", "b\n")


def test_folder_replaces_a_folder(tmp_path):
    out = tmp_path / "parts"
    out.mkdir()
    (out / "0000.src").write_text("old")
    (out / "0001.src").write_text("old")
    with atomic_path(out) as tmp:
        tmp.mkdir()
        (tmp / "0000.src").write_text("new")
        assert sorted(p.name for p in out.iterdir()) == ["0000.src", "0001.src"]
    assert sorted(p.name for p in out.iterdir()) == ["0000.src"]  # no part of the old folder survives
    assert (out / "0000.src").read_text() == "new"
    assert leftovers(tmp_path) == []


# Writes 64 KiB under a 16 KiB file size limit (ulimit -f); SIGXFSZ ignored, so write() fails with EFBIG.
FILE_SIZE_LIMIT = """
import resource, signal, sys
from nmt.atomic import {helper}
from nmt.errors import OutputError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
try:
    with {helper}(*sys.argv[1:]) as {names}:
        {write}
except OutputError as e:
    print(e)
"""


@pytest.mark.parametrize(
    "helper, names, write",
    [
        ("atomic_text", "f", "f.write('x' * 65536)"),
        ("atomic_texts", "(f, g)", "f.write('small'); g.write('x' * 65536)"),
        ("atomic_path", "tmp", "open(tmp, 'wb').write(b'x' * 65536)"),
    ],
)
def test_file_size_limit_is_an_output_error_naming_the_path(tmp_path, helper, names, write):
    """EFBIG (as ENOSPC) becomes one line naming the target(s); the old targets stay, no temp is left."""
    outs = [tmp_path / "out.de", tmp_path / "out.en"][: 2 if helper == "atomic_texts" else 1]
    for out in outs:
        out.write_text("old\n")
    code = FILE_SIZE_LIMIT.format(helper=helper, names=names, write=write)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code, *map(str, outs)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{', '.join(map(str, outs))}: file too large (file size limit)\n"
    assert [out.read_text() for out in outs] == ["old\n"] * len(outs)
    assert leftovers(tmp_path) == []


def test_output_error_is_raised_for_enospc(tmp_path):
    """A full disk while writing: the OSError becomes an OutputError naming the target."""
    out = tmp_path / "out.txt"
    with pytest.raises(OutputError, match=f"^{re.escape(str(out))}: no space left on device$"):
        with atomic_path(out):
            raise OSError(28, "No space left on device")  # errno.ENOSPC, as write() raises it
    assert leftovers(tmp_path) == []


def test_stale_temp_files_are_removed(tmp_path):
    """A temp file of a dead writer, unchanged for min_age, goes; a live or fresh one, or another name, stays."""
    dead_pid = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    folder = tmp_path / "results" / "de-en"
    folder.mkdir(parents=True)
    stale, live = folder / f".train.de.{dead_pid}.tmp", temp_path(folder / "train.en")
    fresh, other = folder / f".valid.de.{dead_pid}.tmp", folder / "notes.tmp"
    for path in (stale, live, fresh, other):
        path.write_text("half")
    old = time.time() - 3600
    for path in (stale, live, other):
        os.utime(path, (old, old))
    assert remove_stale_temp_files(tmp_path / "results") == [stale]
    assert [p.exists() for p in (stale, live, fresh, other)] == [False, True, True, True]


def test_stale_temp_folders_are_removed_whole(tmp_path):
    """A temp folder of a dead writer (a split, an export) goes with its contents once nothing in it changed."""
    dead_pid = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    stale, busy = tmp_path / f".bt_parts.{dead_pid}.tmp", tmp_path / f".export.{dead_pid}.tmp"
    for folder in (stale, busy):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "0000.src").write_text("half")
    old = time.time() - 3600
    for path in (stale, stale / "sub", stale / "sub" / "0000.src", busy, busy / "sub"):
        os.utime(path, (old, old))  # busy/sub/0000.src is fresh: a writer on another node still writes
    assert remove_stale_temp_files(tmp_path) == [stale]
    assert not stale.exists() and (busy / "sub" / "0000.src").exists()


def test_an_output_through_a_link_or_into_a_device_keeps_them(tmp_path):
    """A link's target gets the text and the link stays one; a pipe (as a device: /dev/null, /dev/stdout) is written
    to, not replaced by a file, which a rename would make of it."""
    target, link = tmp_path / "real" / "out.txt", tmp_path / "out.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)
    write_text(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    write_text(fifo, "through the pipe\n")
    assert reader.communicate(timeout=10)[0] == "through the pipe\n"
    assert stat.S_ISFIFO(fifo.stat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == [
        "fifo",
        "out.txt",
        "real",
    ]
