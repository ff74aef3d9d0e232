"""Progress of long jobs (translation, back-translation, downloads): a tqdm bar on stderr when it is a
terminal, else a log line every ``every`` seconds, which is what a cluster job's log file can show."""

import logging
import math
import sys
import time
from pathlib import Path

from tqdm import tqdm

log = logging.getLogger(__name__)

# Seconds between progress log lines when stderr is not a terminal (a job's log file).
LOG_EVERY = 30.0


def format_duration(seconds: float) -> str:
    """``seconds`` as ``1h02m``, ``4m05s`` or ``12s`` (``?`` when not known)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def count_lines(path: str | Path) -> int:
    """The number of lines of ``path`` (a last line without newline counts), read 1 MiB at a time."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n, last = n + block.count(b"\n"), block[-1:]
    return n + (last != b"\n")


class Progress:
    """Counts ``unit``s of ``what`` done out of ``total`` (None: not known) and reports them.

    A context manager: ``with Progress("translating x.en", 3000, "lines") as progress: progress.update(n)``.
    On a terminal a tqdm bar; otherwise ``what: 1200/3000 lines (40%), 35.1 lines/s, ETA 51s`` every
    ``every`` seconds, and a last line with the total when it ends.
    """

    def __init__(self, what: str, total: int | None, unit: str, every: float = LOG_EVERY) -> None:
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.done, self.start = 0, time.monotonic()
        self.last_report = self.start
        self.bar = None
        if sys.stderr.isatty():
            scale = unit == "bytes"
            self.bar = tqdm(total=total, desc=what, unit="B" if scale else f" {unit}", unit_scale=scale,
                            file=sys.stderr, leave=False)  # fmt: skip

    def __enter__(self) -> "Progress":
        return self

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.monotonic()
        if now - self.last_report >= self.every:
            self.last_report = now
            log.info("%s", self.describe(now))

    def describe(self, now: float) -> str:
        """``what: done/total unit (percent), rate unit/s, ETA`` (without total, percent and ETA when not known)."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            eta = (self.total - self.done) / rate if rate > 0 else math.inf
            return (
                f"{self.what}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%), "
                f"{rate:.1f} {self.unit}/s, elapsed {format_duration(elapsed)}, ETA {format_duration(eta)}"
            )
        return f"{self.what}: {self.done} {self.unit}, {rate:.1f} {self.unit}/s, elapsed {format_duration(elapsed)}"

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
        elif time.monotonic() - self.start >= self.every:  # a short job needs no summary line
            log.info("%s (done)", self.describe(time.monotonic()))
