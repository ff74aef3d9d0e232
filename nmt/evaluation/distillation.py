"""The distillation table: a teacher and its students side by side in quality (with significance against the
teacher, and of the distilled student against the same student on the original pairs), decoding speed of the whole
process and model size on disk, and a plot of quality against speed.

Speed is what :func:`time_rows` measures: each row's ``python -m nmt translate`` run in a fresh process (start-up,
model loading and search of the whole test set, as a user sees it), alone on the machine, with the decoding jobs'
threads, several times interleaved; the median counts.
"""

import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from nmt.atomic import read_lines, write_text
from nmt.config import DecodeConfig
from nmt.errors import DataError
from nmt.evaluation.plots import save_png
from nmt.evaluation.significance import paired_bootstrap
from nmt.evaluation.tables import SIGNIFICANCE_MARKS, write_tables
from nmt.experiment import BASELINE, DISTILLED

log = logging.getLogger(__name__)

METRICS = ("bleu", "chrf", "ter")
REPO = Path(__file__).resolve().parents[2]


def search_label(decoding: dict[str, Any]) -> str:
    """The search of a row as the table names it: ``beam 5``, ``greedy``, ``sampling`` or ``sampling top 10``."""
    if decoding["method"] == "beam":
        return f"beam {decoding['beam_size']}"
    if decoding["method"] == "sample":
        return f"sampling top {decoding['sampling_topk']}" if decoding["sampling_topk"] else "sampling"
    return decoding["method"]


def row_label(row: dict[str, Any]) -> str:
    """E.g. ``teacher transformer/baseline/ensemble, torch, beam 5`` or
    ``student tiny/distilled/seed1, ctranslate2 int8, greedy``."""
    runtime = f"ctranslate2 {row['quantization']}" if row["quantization"] else "torch"
    return f"{row['role']} {row['model']}/{row['stage']}/{row['run']}, {runtime}, {search_label(row['decoding'])}"


def megabytes(paths: list[str | Path]) -> float:
    return sum(Path(path).stat().st_size for path in paths) / 2**20


def translate_command(row: dict[str, Any], hyp: str | Path, threads: int) -> list[str]:
    """The ``python -m nmt translate`` command that decodes a row's test set into ``hyp`` as its job did: the same
    model directories (an export's folder for CTranslate2), its search (method and runtime, and each setting that is
    not the default of the command line, :class:`DecodeConfig`'s) and ``threads``."""
    models = [arg for model in row["models"] for arg in ("--model", str(Path(model).parent))]
    default = asdict(DecodeConfig())
    given = {
        key: value for key, value in row["decoding"].items() if key in ("method", "runtime") or value != default[key]
    }
    search = [arg for key, value in given.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
    files = ["--input", row["src"], "--output", str(hyp)]
    return [sys.executable, "-m", "nmt", "translate", *models, *search, "--threads", str(threads), *files]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what :func:`platform.processor` says, or ``unknown``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def code_commit() -> str:
    """The commit of the code that runs (``git rev-parse --short HEAD`` in its repository), or ``unknown``."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def time_rows(rows: list[dict[str, Any]], timing_path: str | Path, repeats: int, threads: int) -> dict[str, Any]:
    """Time each row's decoding as a user runs it and write the times as JSON: ``python -m nmt translate`` with the
    row's models and search on its test set, in a fresh process, one process at a time; ``repeats`` rounds of every
    row in turn (interleaved, so that a slow spell of the machine touches every row alike). Each output must equal
    the row's translation. The caller holds the machine (the workflow's time_distillation job asks for every core).

    :param rows: as :func:`distillation_table` takes them, each also with ``src`` (the test set's source) and
        ``decoding`` (its search: a :class:`nmt.config.DecodeConfig` as a dict)
    :param threads: each process's computing threads (``--threads``): the decoding jobs'
    :return: what ``timing_path`` holds: cpu, threads, commit, repeats, and per row pair, test, system
        (:func:`row_label`), seconds (the median wall time) and repeats (every wall time, in the order run)
    :raises DataError: when a process fails, or its output is not the row's translation
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    timing = {"cpu": cpu_model(), "threads": threads, "commit": code_commit(), "repeats": repeats}
    log.info("timing %d rows %d times each, %s", len(rows), repeats, json.dumps(timing))
    seconds: list[list[float]] = [[] for _ in rows]
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, repeats + 1):
            for i, row in enumerate(rows):
                hyp = Path(tmp) / f"{i}.hyp"
                seconds[i].append(run_timed(translate_command(row, hyp, threads), env))
                check_same_output(hyp, row)
                log.info("round %d/%d: %s on %s: %.2f s", round_, repeats, row_label(row), row["test"], seconds[i][-1])
    timing["rows"] = [
        {
            "pair": row["pair"],
            "test": row["test"],
            "system": row_label(row),
            "seconds": statistics.median(times),
            "repeats": times,
        }
        for row, times in zip(rows, seconds, strict=True)
    ]
    write_text(timing_path, json.dumps(timing, indent=2) + "\n")
    return timing


def run_timed(command: list[str], env: dict[str, str]) -> float:
    """The wall time (s) of ``command`` from its start to its exit."""
    start = time.perf_counter()
    streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    done = subprocess.run(command, env=env, text=True, **streams)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise DataError(f"timing: `{' '.join(command)}` failed (exit {done.returncode}): {last}")
    return seconds


def check_same_output(hyp: Path, row: dict[str, Any]) -> None:
    """Raise DataError unless the timed process wrote the row's translation, line for line."""
    timed, given = read_lines(hyp), read_lines(row["hyp"])
    if timed != given:
        line = next(n for n, (a, b) in enumerate(zip_longest(timed, given), 1) if a != b)
        raise DataError(
            f"timing: {row_label(row)}: python -m nmt translate wrote another translation than {row['hyp']} "
            f"(from line {line}): the timed decoding is not the row's; rerun its decoding job"
        )


def read_timing(path: str | Path) -> dict[str, Any]:
    """The times :func:`time_rows` wrote."""
    try:
        timing = json.loads(Path(path).read_text(encoding="utf-8"))
        missing = [key for key in ("cpu", "threads", "commit", "repeats", "rows") if key not in timing]
        if missing:
            raise KeyError(", ".join(missing))
        return {**timing, "rows": [{**row, "seconds": float(row["seconds"])} for row in timing["rows"]]}
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise DataError(f"{path}: not the times of time_distillation ({type(e).__name__}: {e})") from e


def distillation_table(rows: list[dict[str, Any]], timing: dict[str, Any], n_samples: int, seed: int) -> pd.DataFrame:
    """Score each row and test it against the teacher (the first row of its pair and test set), and each distilled
    student in torch against the same student on the original pairs (the row whose gain distillation claims).

    :param rows: per pair and test set, the teacher first: role, model, stage, run, quantization (None for torch),
        pair, test, hyp, ref, decoding (its search) and models (its model files)
    :param timing: what :func:`read_timing` reads: the rows' decoding times
    :return: one line per row: scores with ``†``/``‖`` marks of a significant difference to the teacher, the
        share of the teacher's BLEU, the median seconds of its decoding, sentences per second and the speed-up
        over the teacher (from the unrounded seconds), size in MB; on a distilled student's torch row, its gain
        over the student on the original pairs (``{metric}_gain``, marked as above, with ``{metric}_gain_p``)
    """
    seconds = {(t["pair"], t["test"], t["system"]): t["seconds"] for t in timing["rows"]}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["pair"], row["test"]), []).append(row)
    frames = []
    for (pair, test), group in groups.items():
        labels = [row_label(row) for row in group]
        hyps = {label: row["hyp"] for label, row in zip(labels, group, strict=True)}
        ref, trg = group[0]["ref"], pair.split("-")[1]
        records = paired_bootstrap(ref, hyps, labels[0], trg, n_samples, seed)
        sentences = len(read_lines(ref))
        lines = []
        for label, row in zip(labels, group, strict=True):
            if (pair, test, label) not in seconds:
                raise DataError(f"the decoding times have no row '{label}' of {pair} {test}: rerun time_distillation")
            line = {"pair": pair, "test": test, "system": label, **marked(records, label)}
            line["seconds"] = seconds[pair, test, label]
            line["sentences_per_second"] = round(sentences / line["seconds"], 1)
            line["speedup"] = round(seconds[pair, test, labels[0]] / line["seconds"], 2)
            line["size_mb"] = round(megabytes(row["models"]), 1)
            baseline = original_pairs_row(row, group)
            if baseline is not None:
                base = row_label(baseline)
                gain = paired_bootstrap(ref, {base: baseline["hyp"], label: row["hyp"]}, base, trg, n_samples, seed)
                line.update(gain_columns(gain, label, base))
            lines.append(line)
        frame = pd.DataFrame(lines)
        frame["bleu_of_teacher"] = (frame["bleu_score"] / frame["bleu_score"].iloc[0]).round(3)
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    return table.assign(cpu=timing["cpu"], threads=timing["threads"], commit=timing["commit"])


def marked(records: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """A system's scores of a paired bootstrap: ``bleu`` as text with its mark (``31.15‖``), ``bleu_score``."""
    line = {}
    for r in (r for r in records if r["system"] == label):
        mark = SIGNIFICANCE_MARKS[r["direction"]] if r["significant"] else ""
        line[r["metric"]] = f"{r['score']:.2f}{mark}"
        line[f"{r['metric']}_score"] = r["score"]
    return line


def original_pairs_row(row: dict[str, Any], group: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For a distilled student decoded in torch, the same student trained on the original pairs; else None."""
    if row["role"] != "student" or row["stage"] != DISTILLED or row["quantization"]:
        return None
    same = (r for r in group if r["role"] == "student" and r["model"] == row["model"] and r["stage"] == BASELINE)
    return next((r for r in same if not r["quantization"]), None)


def gain_columns(records: list[dict[str, Any]], label: str, baseline: str) -> dict[str, Any]:
    """The difference of ``label`` to ``baseline`` per metric (``+1.18†``), its number and its p-value."""
    scores = {r["metric"]: r["score"] for r in records if r["system"] == baseline}
    line = {}
    for r in (r for r in records if r["system"] == label):
        mark = SIGNIFICANCE_MARKS[r["direction"]] if r["significant"] else ""
        gain = r["score"] - scores[r["metric"]]
        line[f"{r['metric']}_gain"] = f"{gain:+.2f}{mark}"
        line[f"{r['metric']}_gain_score"] = gain
        line[f"{r['metric']}_gain_p"] = r["p_value"]
    return line


def write_distillation_table(
    table: pd.DataFrame, timing: dict[str, Any], csv_path: str | Path, md_path: str | Path
) -> None:
    """The table as CSV (every column) and Markdown (marked scores, speed and size, and how they were measured)."""
    write_tables(table, csv_path)
    shown = ["pair", "test", "system", *METRICS, "bleu_of_teacher", "sentences_per_second", "speedup", "size_mb"]
    if "bleu_gain" in table:
        shown.insert(shown.index("bleu_of_teacher"), "bleu_gain")
    better, worse = SIGNIFICANCE_MARKS["better"], SIGNIFICANCE_MARKS["worse"]
    runs = f"the median of {timing['repeats']} runs" if timing["repeats"] > 1 else "one run"
    note = (
        f"\n{better} significantly better, {worse} significantly worse than the teacher (first row) at p < 0.05, "
        "sacreBLEU paired bootstrap. bleu_gain: the distilled student's BLEU minus the same student's on the "
        f"original pairs, {better}/{worse} if the paired bootstrap between the two finds it significantly better/"
        "worse.\n\n"
        "Speed: sentences per second of the whole `python -m nmt translate` process (start-up, model loading and "
        "search), each row run with no other job of the workflow beside it (other processes on the machine are not "
        f"stopped), {runs} interleaved with the other rows'; speed-up: the "
        f"teacher's seconds over the row's. CPU {timing['cpu']}, {timing['threads']} thread"
        f"{'s' if timing['threads'] > 1 else ''}, commit {timing['commit']}.\n"
    )
    shown_table = table[shown].fillna("")
    write_text(md_path, shown_table.to_markdown(index=False, disable_numparse=True) + "\n" + note)


def plot_distillation(table: pd.DataFrame, png_path: str | Path) -> Figure:
    """BLEU against sentences per second (log scale), one point per system, per pair and test set."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    for (pair, test), group in table.groupby(["pair", "test"], sort=False):
        ax.plot(group["sentences_per_second"], group["bleu_score"], "o", label=f"{pair} {test}")
        for _, row in group.iterrows():
            ax.annotate(row["system"], (row["sentences_per_second"], row["bleu_score"]), fontsize="x-small")
    ax.set(
        xscale="log", xlabel="sentences per second (whole decoding process)", ylabel="BLEU", title="Quality and speed"
    )
    ax.legend(loc="lower left", fontsize="small")
    save_png(fig, Path(png_path))
    return fig
