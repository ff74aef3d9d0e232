"""Learning curves of trained models as PNG figures, drawn with matplotlib's Agg canvas (no display needed)."""

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.atomic import atomic_path
from nmt.errors import DataError

# The logs that training writes into a model directory, with their columns.
TRAIN_COLUMNS = ["step", "epoch", "loss", "lr", "tokens_per_second"]
VALID_COLUMNS = ["step", "loss", "ppl", "bleu", "chrf", "seconds"]  # seconds: the training time so far
# Up to this many points a curve gets a marker per point, and dev BLEU its value beside each point: a run
# validated a few times still shows where each number comes from.
FEW_POINTS = 12
COMPARISON_NOTE = (
    "Training loss as trained: label-smoothed where a system trains with label smoothing, and with dropout, so it "
    "sits above the dev cross-entropy. Training minutes: the training time at each validation (valid.tsv)."
)


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


def loss_note(label_smoothing: float | None) -> str:
    """What the two losses of a learning curve measure, and why the training loss sits above the dev loss."""
    dev = "dev loss: cross-entropy per target token, without smoothing or dropout"
    if label_smoothing is None:
        return f"Training loss: as trained, with label smoothing if any and with dropout; {dev}."
    if label_smoothing == 0:
        return f"Training loss: cross-entropy per target token (no label smoothing), with dropout; {dev}."
    return (
        f"Training loss: label-smoothed cross-entropy (smoothing {label_smoothing:g}) per target token, with "
        f"dropout; {dev}. The smoothing term keeps the training loss above the dev loss."
    )


def plot_learning_curves(
    model_dir: str | Path, title: str, png_path: str | Path, label_smoothing: float | None = None
) -> Figure:
    """One figure of two panels against the update step: the training and dev losses together (so that the gap
    between them shows), and dev BLEU; with a note on what the losses measure (:func:`loss_note`).

    Both panels span the whole training (update 0 to the last logged or validated one), and a run validated
    only a few times shows each point with a marker and, for BLEU, its value; the note says how many
    validations there were.

    :param model_dir: a model directory with ``train.tsv`` and ``valid.tsv`` (see :func:`nmt.training.loop.train`)
    :param label_smoothing: the training's ``label_smoothing``, named in the note; None when unknown
    :return: the figure, as written to ``png_path``
    """
    model_dir = Path(model_dir)
    train = read_log(model_dir / "train.tsv", TRAIN_COLUMNS)
    valid = read_log(model_dir / "valid.tsv", VALID_COLUMNS)
    last = max([0, *train["step"], *valid["step"]])
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    loss_ax, bleu_ax = fig.subplots(1, 2)
    smoothed = " (label-smoothed)" if label_smoothing else ""
    _curve(loss_ax, train["step"], train["loss"], label=f"training loss{smoothed}")
    _curve(loss_ax, valid["step"], valid["loss"], label="dev loss")
    loss_ax.legend(loc="best", fontsize="small")
    _curve(bleu_ax, valid["step"], valid["bleu"], values=True, color="C2")
    for ax, ylabel in ((loss_ax, "cross-entropy per target token"), (bleu_ax, "dev BLEU")):
        ax.set_xlim(0, max(last, 1) * 1.04)
        ax.margins(y=0.12)  # room for the values above the points
        ax.set_xlabel("update step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    bleu_ax.lines[0].set_label("BLEU")
    _curve(bleu_ax, valid["step"], valid["chrf"], values=True, color="C3", label="chrF")
    bleu_ax.set_ylabel("dev BLEU, chrF")
    bleu_ax.legend(loc="best", fontsize="small")  # "best": where it covers the fewest points and values
    fig.suptitle(title)
    validations = f"{len(valid)} validation{'s' if len(valid) != 1 else ''}"
    note = f"{loss_note(label_smoothing)} {validations} ({_every(valid)})."
    fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize="small", wrap=True)
    fig.get_layout_engine().set(rect=(0, 0.08, 1, 0.92))  # room for the note under the panels
    save_png(fig, Path(png_path))
    return fig


def _every(valid: pd.DataFrame) -> str:
    """How often a run validated, from its steps: ``every 100 updates``, or ``at the end`` for one validation."""
    steps = list(valid["step"])
    if len(steps) < 2:
        return "at the end" if steps else "none"
    return f"every {steps[1] - steps[0]} updates"


def _curve(ax: Axes, x: pd.Series, y: pd.Series, values: bool = False, **style) -> None:
    """A line through the points; with few points a marker on each, and with ``values`` the value beside it."""
    few = len(x) <= FEW_POINTS
    (line,) = ax.plot(x, y, marker="o" if few else None, markersize=4, **style)
    if few and values:
        for xi, yi in zip(x, y, strict=True):
            ax.annotate(
                f"{yi:.1f}",
                (xi, yi),
                textcoords="offset points",
                xytext=(0, 5),
                ha="center",
                fontsize="x-small",
                color=line.get_color(),
            )


def plot_comparison(runs: dict[str, str | Path], png_path: str | Path, title: str = "") -> Figure:
    """One figure comparing systems, a line per system: dev BLEU against the update step and against the training
    time (the ``seconds`` of ``valid.tsv``, in minutes), and the training loss against the update step, with a note
    on the loss (:data:`COMPARISON_NOTE`). The legend sits outside the panels, on the right, so that it covers no
    curve.

    :param runs: legend label -> model directory
    :param title: the figure's title, e.g. the language pair and the seed
    :return: the figure, as written to ``png_path``
    """
    if not runs:
        raise DataError(f"{png_path}: no runs to compare")
    fig = Figure(figsize=(15, 4.4), layout="constrained")
    bleu_ax, time_ax, loss_ax = fig.subplots(1, 3)
    for i, (label, model_dir) in enumerate(runs.items()):
        valid = read_log(Path(model_dir) / "valid.tsv", VALID_COLUMNS)
        train = read_log(Path(model_dir) / "train.tsv", TRAIN_COLUMNS)
        style = {"color": f"C{i % 10}", "label": label}
        _curve(bleu_ax, valid["step"], valid["bleu"], **style)
        _curve(time_ax, valid["seconds"] / 60, valid["bleu"], **style)
        _curve(loss_ax, train["step"], train["loss"], **style)
    for ax, xlabel, ylabel in (
        (bleu_ax, "update step", "dev BLEU"),
        (time_ax, "training minutes (validation not counted)", "dev BLEU"),
        (loss_ax, "update step", "training loss (as trained)"),
    ):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    handles, labels = bleu_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize="small", title="system")
    fig.suptitle(title or "Learning curves of the systems")
    fig.text(0.5, 0.005, COMPARISON_NOTE, ha="center", va="bottom", fontsize="small", wrap=True)
    fig.get_layout_engine().set(rect=(0, 0.06, 1, 0.94))  # room for the note under the panels
    save_png(fig, Path(png_path))
    return fig


def save_png(fig: Figure, path: Path) -> None:
    """Render with Agg to a temp file beside the target and rename, so that readers never see half a PNG."""
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
