"""What entry points (rule scripts and ``python -m nmt``) share: a log file and one-line errors."""

import gc
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nmt.atomic import NO_SPACE
from nmt.errors import NmtError


@contextmanager
def entry_point(log_path: str | Path | None = None) -> Iterator[None]:
    """Log to ``log_path`` (stderr when None) and turn an :class:`NmtError` or a full disk into one line.

    The error goes, as ``error: <message>``, to stderr with exit status 1, so the user sees the
    reason instead of a traceback, once; a log file gets it too. So does an :class:`OSError` that names a file (a
    path the user gave that cannot be read or written). Other exceptions are bugs and keep theirs.
    A warning (a dropped line counted, an input cut, a checkpoint set aside) goes to stderr too, as
    ``warning: <message>``, where Snakemake shows a job's output: the user sees it without opening the log.

    The objects alive on entry and on exit (torch's import alone makes about 170,000) are frozen out of the
    cyclic garbage collector, whose full collections would otherwise traverse them during the job and again as
    the interpreter exits, a fraction of a second of every process that imports torch (benchmarks/README.md,
    "What made it faster"). Garbage made later is still collected.
    """
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=log_path,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    if log_path is not None:
        logging.getLogger().addHandler(_warnings_to_stderr())
    gc.freeze()
    try:
        yield
    except NmtError as e:
        _exit_with(str(e), log_path)
    except OSError as e:
        if e.errno in NO_SPACE:
            # A full disk where no atomic writer caught it (torch.save, sentencepiece, plots): still one line.
            where = f"{e.filename}: " if e.filename else ""
            _exit_with(f"{where}{NO_SPACE[e.errno]} (writing the job's outputs)", log_path)
        if e.filename is None:
            raise
        # A path the user gave that cannot be read or written (no permission, a file where a folder must be, a
        # folder where a file must be): the path and the system's reason.
        _exit_with(f"{e.filename}: {e.strerror or e}", log_path)
    finally:
        gc.freeze()


def _warnings_to_stderr() -> logging.Handler:
    """A handler that writes the records of level WARNING (not the errors, which exit) to stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(lambda record: record.levelno == logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    return handler


def _exit_with(message: str, log_path: str | Path | None) -> None:
    if log_path is not None:  # else the log is stderr, where the line below goes
        logging.getLogger("nmt").error("%s", message)
    sys.exit(f"error: {message}")
