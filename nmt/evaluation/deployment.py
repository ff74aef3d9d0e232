"""The distillation table: a teacher and its students side by side in quality (with significance against the
teacher), decoding speed of the whole process and model size on disk, and a plot of quality against speed.

Speed is the wall time of the decoding job as Snakemake's benchmark measured it (start-up, model loading and
search of the whole test set, on the threads every decoding job gets), so a faster runtime shows with its fixed
costs, as a user would see it.
"""

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from nmt.atomic import read_lines, write_text
from nmt.errors import DataError
from nmt.evaluation.plots import save_png
from nmt.evaluation.significance import paired_bootstrap
from nmt.evaluation.tables import SIGNIFICANCE_MARKS, write_tables

METRICS = ("bleu", "chrf", "ter")


def row_label(row: dict[str, Any]) -> str:
    """E.g. ``teacher transformer/baseline/ensemble, torch`` or ``student tiny/distilled/seed1, ctranslate2 int8``."""
    runtime = f"ctranslate2 {row['quantization']}" if row["quantization"] else "torch"
    return f"{row['role']} {row['model']}/{row['stage']}/{row['run']}, {runtime}"


def job_seconds(benchmark: str | Path) -> float:
    """The wall time (s) of a job from its Snakemake benchmark file."""
    try:
        return float(pd.read_csv(benchmark, sep="\t")["s"].iloc[0])
    except (OSError, KeyError, IndexError, ValueError, pd.errors.ParserError) as e:
        raise DataError(f"{benchmark}: no job wall time in column 's' ({type(e).__name__})") from e


def megabytes(paths: list[str | Path]) -> float:
    return sum(Path(path).stat().st_size for path in paths) / 2**20


def deployment_rows(rows: list[dict[str, Any]], n_samples: int, seed: int) -> pd.DataFrame:
    """Score each row and test it against the teacher (the first row of its pair and test set).

    :param rows: per pair and test set, the teacher first: role, model, stage, run, quantization (None for torch),
        pair, test, hyp, ref, benchmark (of the job that wrote hyp) and models (its model files)
    :return: one line per row: scores with ``†``/``‖`` marks of a significant difference to the teacher, the
        share of the teacher's BLEU, sentences per second and the speed-up over the teacher, size in MB
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["pair"], row["test"]), []).append(row)
    frames = []
    for (pair, test), group in groups.items():
        labels = [row_label(row) for row in group]
        hyps = {label: row["hyp"] for label, row in zip(labels, group, strict=True)}
        ref = group[0]["ref"]
        records = paired_bootstrap(ref, hyps, labels[0], pair.split("-")[1], n_samples, seed)
        sentences = len(read_lines(ref))
        lines = []
        for label, row in zip(labels, group, strict=True):
            line = {"pair": pair, "test": test, "system": label}
            for r in (r for r in records if r["system"] == label):
                mark = SIGNIFICANCE_MARKS[r["direction"]] if r["significant"] else ""
                line[r["metric"]] = f"{r['score']:.2f}{mark}"
                line[f"{r['metric']}_score"] = r["score"]
            line["sentences_per_second"] = round(sentences / job_seconds(row["benchmark"]), 1)
            line["size_mb"] = round(megabytes(row["models"]), 1)
            lines.append(line)
        frame = pd.DataFrame(lines)
        frame["bleu_of_teacher"] = (frame["bleu_score"] / frame["bleu_score"].iloc[0]).round(3)
        frame["speedup"] = (frame["sentences_per_second"] / frame["sentences_per_second"].iloc[0]).round(2)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def write_deployment(table: pd.DataFrame, csv_path: str | Path, md_path: str | Path) -> None:
    """The table as CSV (every column) and Markdown (marked scores, speed and size)."""
    write_tables(table, csv_path)
    shown = ["pair", "test", "system", *METRICS, "bleu_of_teacher", "sentences_per_second", "speedup", "size_mb"]
    note = (
        f"\n{SIGNIFICANCE_MARKS['better']} significantly better, {SIGNIFICANCE_MARKS['worse']} significantly worse "
        "than the teacher (first row) at p < 0.05, sacreBLEU paired bootstrap; speed: sentences per second of the "
        "whole decoding job (start-up included), same threads.\n"
    )
    write_text(md_path, table[shown].to_markdown(index=False, disable_numparse=True) + "\n" + note)


def plot_deployment(table: pd.DataFrame, png_path: str | Path) -> Figure:
    """BLEU against sentences per second (log scale), one point per system, per pair and test set."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    for (pair, test), group in table.groupby(["pair", "test"], sort=False):
        ax.plot(group["sentences_per_second"], group["bleu_score"], "o", label=f"{pair} {test}")
        for _, row in group.iterrows():
            ax.annotate(row["system"], (row["sentences_per_second"], row["bleu_score"]), fontsize="x-small")
    ax.set(xscale="log", xlabel="sentences per second (whole decoding job)", ylabel="BLEU", title="Quality and speed")
    ax.legend(loc="lower left", fontsize="small")
    save_png(fig, Path(png_path))
    return fig
