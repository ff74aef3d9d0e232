"""What a toolkit adapter gives the harness: the commands to run, and how to read their results.

Every adapter module of a training system (``ours``, ``joeynmt``, ``opennmt``, ``fairseq``) defines a
class with the methods of :class:`Toolkit` (``ct2`` is a decoding peer, run by the harness on its own).
The harness runs the commands itself, so wall time and peak RSS are measured
the same way for every toolkit (see :func:`run_measured`).
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from toolkits.task import Setup, Task


@dataclass
class Command:
    """A process to run: ``argv`` with ``env`` added to the harness's environment.

    ``stdin``/``stdout`` are files (None: no input; stdout goes to the log with stderr).
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: Path | None = None
    stdout: Path | None = None
    cwd: Path | None = None


@dataclass
class Measured:
    seconds: float
    peak_rss_mb: float
    cpu_seconds: float  # user + system, the process's children included


class Toolkit(Protocol):
    name: str

    def install(self, venvs: Path) -> None:
        """Create the toolkit's own virtual environment under ``venvs`` (once; later calls return at once)."""

    def train(self, task: Task, setup: Setup, updates: int, run_dir: Path) -> Command:
        """Train for exactly ``updates`` updates into ``run_dir`` (validating once, at the end)."""

    def throughput(self, run_dir: Path) -> tuple[int, float]:
        """Target tokens (EOS included, padding excluded) and seconds of training, validation excluded."""

    def translate(self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path) -> Command:
        """Translate the test source with the trained model; beam size 1 is greedy search."""

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        """The detokenized hypotheses written by :meth:`translate`, one per test sentence."""


class CommandFailed(RuntimeError):
    pass


def thread_env(threads: int) -> dict[str, str]:
    """The same thread settings for every toolkit (torch reads OMP_NUM_THREADS), and no GPU."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}


MEASURE = Path(__file__).with_name("measure.py")


def run_measured(command: Command, log: Path) -> Measured:
    """Run ``command`` and return its wall time, CPU time and the peak RSS of its process.

    All are measured by ``measure.py``, a small process that starts the command: a process forked by the
    harness itself would report at least the harness's RSS as its peak.

    :raises CommandFailed: with the end of ``log`` if the command exits non-zero
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **command.env}
    measured = log.with_name(log.name + ".measured.json")
    stdin = open(command.stdin, "rb") if command.stdin else subprocess.DEVNULL
    with open(log, "wb") as log_file:
        stdout = open(command.stdout, "wb") if command.stdout else log_file
        try:
            argv = [sys.executable, "-S", str(MEASURE), str(measured), *command.argv]
            done = subprocess.run(argv, stdin=stdin, stdout=stdout, stderr=log_file, env=env, cwd=command.cwd)
        finally:
            if command.stdout:
                stdout.close()
            if command.stdin:
                stdin.close()
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise CommandFailed(f"{command.argv[0]} ... exited with {done.returncode}; {log}:\n" + "\n".join(tail))
    result = json.loads(measured.read_text(encoding="utf-8"))
    return Measured(result["seconds"], result["peak_rss_mb"], result["cpu_seconds"])


TORCH = "torch==2.13.0"


def install_venv(venv: Path, probe: str, *installs: list[str]) -> None:
    """Create (or complete) a virtual environment with our CPU torch and a peer toolkit; once.

    torch goes in first and is held by a constraints file: a peer's bare (or old) torch requirement
    would otherwise pull a CUDA build of several GB.

    :param probe: Python code that runs without error once the environment is complete
    :param installs: pip arguments of each further install, in order
    """
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return
    if python.exists() and _succeeds([str(python), "-c", probe]):
        marker.touch()
        return
    print(f"installing {' '.join(installs[0])} into {venv}", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, TORCH], check=True)
    constraints = venv / "constraints.txt"
    constraints.write_text(TORCH + "\n", encoding="utf-8")
    for args in installs:
        subprocess.run([*pip, "-c", str(constraints), *args], check=True)
    marker.touch()


def report_every(updates: int) -> int:
    """About 20 training reports, the last one at the final update (so that no report interval spans validation)."""
    return next(d for d in range(max(1, updates // 20), 0, -1) if updates % d == 0)


def log_time(stamp: str) -> datetime:
    """A log time stamp such as ``2026-11-22 07:32:15,315``."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")


def _succeeds(argv: list[str]) -> bool:
    return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
