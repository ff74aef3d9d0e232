"""Atomic text output: readers (and a resumed run) never see half a file."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_text(path: str | Path) -> Iterator[IO[str]]:
    """Open a temp file next to ``path`` for writing UTF-8 text; move it to ``path`` only on success.

    The temp file sits in the same folder, so ``os.replace`` is a rename on one file system.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_text`."""
    with atomic_text(path) as f:
        f.write(text)
