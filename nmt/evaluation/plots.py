"""Learning curves of trained models as PNG figures, drawn with matplotlib's Agg canvas (no display needed)."""

from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.atomic import atomic_path
from nmt.errors import DataError

# The logs that training writes into a model directory, with their columns.
TRAIN_COLUMNS = ["step", "epoch", "loss", "lr", "tokens_per_second"]
VALID_COLUMNS = ["step", "loss", "ppl", "bleu"]  # and ``seconds`` (training time) since it was added


def read_log(path: str | Path, columns: list[str]) -> pd.DataFrame:
    """Read ``train.tsv`` or ``valid.tsv`` of a model directory, checking that it has ``columns``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        df = pd.read_csv(path, sep="\t")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: unreadable as a tab-separated table ({type(e).__name__})") from e
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{path}: expected columns {', '.join(columns)}, found {', '.join(map(str, df.columns))}")
    return df


def plot_learning_curves(model_dir: str | Path, title: str, png_path: str | Path) -> None:
    """One figure of three panels: training loss, validation loss and validation BLEU (and chrF) against the update
    step.

    :param model_dir: a model directory with ``train.tsv`` and ``valid.tsv`` (see :func:`nmt.training.loop.train`)
    """
    model_dir = Path(model_dir)
    train = read_log(model_dir / "train.tsv", TRAIN_COLUMNS)
    valid = read_log(model_dir / "valid.tsv", VALID_COLUMNS)
    fig = Figure(figsize=(12, 3.6), layout="constrained")
    panels = fig.subplots(1, 3)
    for ax, df, column, ylabel in (
        (panels[0], train, "loss", "training loss"),
        (panels[1], valid, "loss", "validation loss"),
        (panels[2], valid, "bleu", "validation BLEU"),
    ):
        ax.plot(df["step"], df[column], marker="." if len(df) < 30 else None)
        ax.set_xlabel("update step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    if "chrf" in valid.columns and valid["chrf"].notna().any():  # the valid.tsv of a run before chrF has none
        scores = panels[2]
        scores.lines[0].set_label("BLEU")
        scores.plot(valid["step"], valid["chrf"], marker="." if len(valid) < 30 else None, label="chrF")
        scores.set_ylabel("validation BLEU, chrF")
        scores.legend(fontsize="small")
    fig.suptitle(title)
    _save_png(fig, Path(png_path))


def plot_comparison(runs: dict[str, str | Path], png_path: str | Path) -> None:
    """One figure comparing systems: validation BLEU and training loss against the update step, a line per system.

    :param runs: legend label -> model directory
    """
    if not runs:
        raise DataError(f"{png_path}: no runs to compare")
    fig = Figure(figsize=(10, 4), layout="constrained")
    bleu_ax, loss_ax = fig.subplots(1, 2)
    for label, model_dir in runs.items():
        valid = read_log(Path(model_dir) / "valid.tsv", VALID_COLUMNS)
        train = read_log(Path(model_dir) / "train.tsv", TRAIN_COLUMNS)
        bleu_ax.plot(valid["step"], valid["bleu"], label=label)
        loss_ax.plot(train["step"], train["loss"], label=label)
    for ax, ylabel in ((bleu_ax, "validation BLEU"), (loss_ax, "training loss")):
        ax.set_xlabel("update step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    bleu_ax.legend(fontsize="small")
    _save_png(fig, Path(png_path))


def _save_png(fig: Figure, path: Path) -> None:
    """Render with Agg to a temp file beside the target and rename, so that readers never see half a PNG."""
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
