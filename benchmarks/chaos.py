"""Kill it anywhere and it finishes the same: a tiny pipeline's Snakemake killed at random moments, then resumed.

    python benchmarks/chaos.py --mirror ../shared/data/mirror --workdir /tmp/chaos --kills 30 --seed 1

First runs a tiny pipeline uninterrupted, the reference (:func:`chaos_config`: the integration test's data, a
Transformer, an RNN and the reverse model trained side by side with one thread each, two back-translation parts,
a Transformer on the back-translated data, test translation, scoring, the tables and plots). Then ``--kills``
runs, each in a fresh folder: Snakemake starts in its own process group, and the whole group (Snakemake and every
job) gets SIGKILL at a random moment (seeded), ``--kills-per-run`` times; after each kill the run recovers with
the command of docs/cluster.md ("Resuming"): the same command with ``--unlock``, then the same command. The last
attempt runs to its end. Every output is then compared with the reference's: files byte for byte, checkpoints
tensor by tensor, and JSON, CSV, TSV, Markdown and HTML tables without the fields that record wall time
(:data:`TIMING`); what is left out is printed first. ``--lines`` makes a quick run on the corpora's first lines.
"""

import argparse
import csv
import gzip
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nmt.atomic import TEMP_NAME  # noqa: E402

TINY = REPO / "tests" / "integration" / "config.yaml"
# Fields and columns that record wall time, so that no two runs share them; left out wherever they appear.
TIMING = {
    "date": "when a download was made (results/data/download/*.manifest.json)",
    "train_seconds": "training time (summary.json, scores JSON, tables/scores.*, tables/summary.*)",
    "tokens_per_second": "training speed (summary.json, train.tsv, scores JSON, tables)",
    "seconds": "training time at each validation (valid.tsv, summary.json, checkpoints' history)",
}
# Files under results/ that are not compared at all (fnmatch patterns; * matches / too).
SKIPPED = {
    "logs/*": "job logs: timestamps, and a killed job's lines before the resumed job's",
    "benchmarks/*": "Snakemake's wall time and memory of each job",
    "plots/*.comparison.png": "dev BLEU against training minutes",
}


def chaos_config(max_steps: int = 40, models: tuple[str, ...] = ("transformer", "rnn")) -> dict:
    """The tiny pipeline: the integration test's corpora, cleaning and subwords, ``models`` of its models, the
    reverse model trained beside them, two back-translation parts and the Transformer trained on them.

    ``threads: 1`` fixes every job's threads (a training's arithmetic depends on them) and lets two trainings
    run side by side on ``--cores 2``. Sampling back-translation, since a tiny model's greedy output is all
    repeated words, which the synthetic-corpus filter drops. No sha256 sums: :func:`truncated_mirror`'s files
    are shorter.
    """
    tiny = yaml.safe_load(TINY.read_text(encoding="utf-8"))
    config = {key: tiny[key] for key in ("pairs", "data", "cleaning", "subword")}
    config["corpora"] = {name: {"url": corpus["url"]} for name, corpus in tiny["corpora"].items()}
    config["models"] = {name: tiny["models"][name] for name in models}
    config["seeds"] = [1]
    config["training"] = {
        **tiny["training"],
        "threads": 1,
        "max_steps": max_steps,
        "valid_every": max_steps // 2,
        "checkpoint_every": max(1, max_steps // 4),
    }
    config["decoding"] = {"method": "greedy", "batch_size": 200}
    config["backtranslation"] = {
        "models": ["transformer"],
        "reverse_model": tiny["backtranslation"]["reverse_model"],
        "max_sentences": 200,
        "chunk_lines": 100,
        "variants": {"bt_sample": {"generation": {"method": "sample", "sampling_topk": 5, "batch_size": 200}}},
    }
    return config


def truncated_mirror(mirror: Path, config: dict, lines: int, out: Path) -> Path:
    """A mirror at ``out`` with the first ``lines`` lines of each of ``config``'s corpora in ``mirror``: every
    stage of a quick run reads less (cleaning reads all 29,000 Multi30k pairs before it keeps 400)."""
    langs = {lang for pair in config["pairs"] for lang in pair.split("-")}
    for corpus in config["corpora"].values():
        for lang in langs:
            path = corpus["url"].format(lang=lang).split("://", 1)[1]
            if (mirror / path).is_file():
                (out / path).parent.mkdir(parents=True, exist_ok=True)
                with gzip.open(mirror / path, "rt", encoding="utf-8") as f, gzip.open(out / path, "wt") as g:
                    g.writelines(itertools.islice(f, lines))
    return out


def snakemake_command(workdir: Path, mirror: Path) -> list[str]:
    """The run's command, the same for the first start and every restart."""
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    return [*snakemake, "--directory", str(workdir), "--cores", "2", "--config", f"mirror={mirror}"]


def recovery_commands(command: list[str]) -> list[list[str]]:
    """docs/cluster.md, "Resuming", after Snakemake itself was killed: the same command with ``--unlock``, then
    the same command (``rerun-incomplete`` comes from profiles/default)."""
    return [[*command, "--unlock"], command]


def new_workdir(workdir: Path, config: dict) -> None:
    workdir.mkdir(parents=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def run(command: list[str], log: Path, kill_after: float | None = None, timeout: float = 3600) -> tuple[str, float]:
    """Run ``command`` in its own process group, SIGKILL the whole group after ``kill_after`` seconds.

    :return: ``("killed" | "done" | "failed" | "timed out", seconds)``; the output goes to ``log``
    """
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=kill_after if kill_after is not None else timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            wait_for_group(proc.pid)
            return ("killed" if kill_after is not None else "timed out"), time.monotonic() - start
    return ("done" if proc.returncode == 0 else "failed"), time.monotonic() - start


def wait_for_group(pgid: int, timeout: float = 60) -> None:
    """Wait until no live process of the group is left, as after a power loss (a job's child may take a moment)."""
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {group_members(pgid)} of group {pgid} survived SIGKILL")
        time.sleep(0.1)


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def running_rules(log: Path) -> list[str]:
    """The rules of the jobs that had started and not finished when Snakemake's output ``log`` ends."""
    started, rule = {}, None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(("rule ", "localrule ", "checkpoint ")):
            rule = line.split()[1].rstrip(":")
        elif line.strip().startswith("jobid:") and rule:
            started[line.split()[1]], rule = rule, None
        elif line.startswith("Finished jobid:"):
            started.pop(line.split()[2], None)
    return sorted(started.values())


def last_error(log: Path) -> str:
    """The first error line of a failed Snakemake's output, else its last line."""
    lines = log.read_text(errors="replace").splitlines() or ["no output"]
    errors = [line for line in lines if "error" in line.lower() and "job did not complete" not in line]
    return (errors[0] if errors else lines[-1]).strip()


def run_with_kills(
    workdir: Path, command: list[str], duration: float, rng: random.Random, kills: int
) -> tuple[list[str], str | None]:
    """Start the run and kill it ``kills`` times, each attempt at a moment drawn uniformly from its first
    ``duration / kills`` seconds, recovering each time with :func:`recovery_commands`; then let it end.

    Every attempt redoes at least what the last kill interrupted, so the kills fall at moments spread over the
    whole run, and the last attempt has work left (unless the reference ``duration`` was slow).

    :return: a description of each kill, and the error of a failed run (None when it completed)
    """
    done, attempt, current = [], 0, command
    while True:
        attempt += 1
        kill_after = rng.uniform(0, duration / kills) if len(done) < kills else None
        log = workdir / f"chaos.attempt{attempt}.log"
        outcome, seconds = run(current, log, kill_after, timeout=10 * duration)
        if outcome == "done":
            return done, None
        if outcome == "timed out":
            return done, f"attempt {attempt}: no end after {seconds:.0f} s"
        if outcome == "failed":
            return done, f"attempt {attempt}: {last_error(log)}"
        done.append(f"{seconds:.0f} s ({', '.join(running_rules(log)) or 'no job running'})")
        unlock, current = recovery_commands(command)
        unlock_log = workdir / f"chaos.unlock{attempt}.log"
        if run(unlock, unlock_log, timeout=600)[0] != "done":
            return done, f"--unlock after kill {len(done)}: {last_error(unlock_log)}"


def compared_files(results: Path) -> set[str]:
    """The files under ``results`` to compare, relative to it: all but :data:`SKIPPED` and temp files
    (``.NAME.PID.tmp`` of killed writers, removed by a later run once old; never an output)."""
    files = set()
    for path in results.rglob("*"):
        name = str(path.relative_to(results))
        if path.is_file() and not any(TEMP_NAME.match(part) for part in path.relative_to(results).parts):
            if not any(fnmatch(name, pattern) for pattern in SKIPPED):
                files.add(name)
    return files


def differing_files(reference: Path, other: Path) -> list[str]:
    """The files of ``reference/results`` and ``other/results`` that differ (or exist in one only)."""
    ours, theirs = compared_files(reference / "results"), compared_files(other / "results")
    differ = [f"{name} (only in the reference)" for name in sorted(ours - theirs)]
    differ += [f"{name} (not in the reference)" for name in sorted(theirs - ours)]
    for name in sorted(ours & theirs):
        if not is_same(reference / "results" / name, other / "results" / name):
            differ.append(name)
    return differ


def is_same(a: Path, b: Path) -> bool:
    """Whether two outputs are equal but for :data:`TIMING` (bytes first; then the file's content as read)."""
    if a.read_bytes() == b.read_bytes():
        return True
    return is_equal(comparable(a), comparable(b))


def comparable(path: Path) -> Any:
    """The content of ``path`` without :data:`TIMING` fields, for files that can hold them; else its bytes.

    A checkpoint (``.pt``) never has the same bytes twice: torch names its zip records after the file, here the
    writer's temp name with its process id.
    """
    if path.suffix == ".pt":
        import torch

        return without_timing(torch.load(path, map_location="cpu", weights_only=True))
    if path.suffix == ".json":
        return without_timing(json.loads(path.read_text(encoding="utf-8")))
    if path.suffix in (".csv", ".tsv"):
        rows = list(
            csv.reader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t" if path.suffix == ".tsv" else ",")
        )
        return without_timing_columns(rows)
    if path.suffix == ".md":
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in path.read_text().splitlines()]
        return without_timing_columns(rows)
    if path.suffix == ".html":
        return without_timing_columns(html_rows(path.read_text(encoding="utf-8")))
    return path.read_bytes()


def without_timing(value: Any) -> Any:
    """``value`` (nested dicts and lists) without the dict keys of :data:`TIMING`."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, (list, tuple)):
        return [without_timing(v) for v in value]
    return value


def without_timing_columns(rows: list[list[str]]) -> list[list[str]]:
    """Table rows without the columns whose header (in any row: a file may hold several tables) is in
    :data:`TIMING`; rows of another width, such as text between tables, stay whole."""
    drop: set[int] = set()
    width, kept = 0, []
    for row in rows:
        named = {i for i, cell in enumerate(row) if cell in TIMING}
        if named:
            drop, width = named, len(row)
        kept.append([cell for i, cell in enumerate(row) if not (drop and len(row) == width and i in drop)])
    return kept


class _Rows(HTMLParser):
    """An HTML page as rows: the cells of each table row, and each piece of text or tag with attributes (an image,
    a link) outside tables as a row of one."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.row: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.row.append("")
        elif attrs and tag not in ("tr", "td", "th"):
            self.add(f"<{tag} {attrs}>")

    def handle_endtag(self, tag):
        if tag == "tr" and self.row is not None:
            self.rows.append(self.row)
            self.row = None

    def handle_data(self, data):
        self.add(data.strip())

    def add(self, text: str) -> None:
        if self.row:
            self.row[-1] += text
        elif self.row is None and text:
            self.rows.append([text])


def html_rows(html: str) -> list[list[str]]:
    parser = _Rows()
    parser.feed(html)
    return parser.rows


def is_equal(a: Any, b: Any) -> bool:
    """Equality that compares tensors element by element (and their dtypes), inside dicts and lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(is_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(is_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a).__name__ == "Tensor" and type(b).__name__ == "Tensor":
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


def run_reference(workdir: Path, config: dict, mirror: Path) -> float:
    """The uninterrupted run; its duration in seconds."""
    new_workdir(workdir, config)
    outcome, seconds = run(snakemake_command(workdir, mirror), workdir / "chaos.attempt1.log")
    if outcome != "done":
        sys.exit(f"the reference run failed: {last_error(workdir / 'chaos.attempt1.log')}")
    return seconds


def run_chaos(workdir: Path, mirror: Path, config: dict, runs: int, kills_per_run: int, seed: int) -> list[dict]:
    """The reference run, then ``runs`` runs killed ``kills_per_run`` times each; each compared with the reference.

    :return: per run: ``kills`` (their descriptions), ``error`` (None if it completed), ``differing`` files
    """
    print("not compared: results/" + "; results/".join(f"{name} ({why})" for name, why in SKIPPED.items()))
    print(
        "left out of JSON, CSV, TSV, Markdown and HTML tables and of checkpoints:",
        "; ".join(f"{name} ({why})" for name, why in TIMING.items()),
        flush=True,
    )
    reference = workdir / "reference"
    duration = run_reference(reference, config, mirror)
    print(f"reference: {duration:.0f} s", flush=True)
    outcomes = []
    for n in range(1, runs + 1):
        folder = workdir / f"run{n}"
        new_workdir(folder, config)
        rng = random.Random(seed * 100_003 + n)
        kills, error = run_with_kills(folder, snakemake_command(folder, mirror), duration, rng, kills_per_run)
        outcomes.append(
            {"kills": kills, "error": error, "differing": [] if error else differing_files(reference, folder)}
        )
        print(
            f"run {n}: killed at {'; '.join(kills) or 'no moment (it ended first)'}: {verdict(outcomes[-1])}",
            flush=True,
        )
    print(f"{sum(map(is_identical, outcomes))} of {runs} runs ended identical", flush=True)
    return outcomes


def is_identical(outcome: dict) -> bool:
    return outcome["error"] is None and not outcome["differing"]


def verdict(outcome: dict) -> str:
    if outcome["error"] is not None:
        return f"failed: {outcome['error']}"
    return "identical" if not outcome["differing"] else "differing: " + ", ".join(outcome["differing"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "data" / "mirror")
    parser.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "work" / "chaos")
    parser.add_argument("--kills", type=int, default=10, help="runs that are killed and recovered")
    parser.add_argument("--kills-per-run", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1, help="seeds the moments of the kills")
    parser.add_argument("--max-steps", type=int, default=40, help="updates of each training")
    parser.add_argument("--lines", type=int, help="read only the first lines of each corpus (a quick run)")
    args = parser.parse_args()
    if args.workdir.exists() and any(args.workdir.iterdir()):
        sys.exit(f"--workdir {args.workdir} is not empty")
    config, mirror = chaos_config(args.max_steps), args.mirror.resolve()
    if args.lines:
        mirror = truncated_mirror(mirror, config, args.lines, args.workdir / "mirror")
    outcomes = run_chaos(args.workdir, mirror, config, args.kills, args.kills_per_run, args.seed)
    sys.exit(0 if all(map(is_identical, outcomes)) else 1)


if __name__ == "__main__":
    main()
