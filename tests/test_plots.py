"""Learning-curve figures: valid PNGs from the logs training writes, one-line errors for missing or odd logs."""

import math
from pathlib import Path

import pytest
from conftest import assert_one_line

from nmt.errors import DataError
from nmt.evaluation.plots import plot_comparison, plot_learning_curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_model_dir(path: Path, speed: float, valid_every: int = 100) -> Path:
    """A model directory with train.tsv and valid.tsv in the format of :func:`nmt.training.loop.train` (chrF 20
    points above BLEU; the training time of each validation 0.6 s per update at ``speed`` 1)."""
    path.mkdir(parents=True)
    train = [(s, s // 200, 9.0 * math.exp(-s / (300 * speed)) + 2.0, 1e-3, 5000) for s in range(20, 1001, 20)]
    valid = [
        (s, 8.0 * math.exp(-s / (400 * speed)) + 2.5, 30 * (1 - math.exp(-s / (300 * speed))), 0.6 * s * speed)
        for s in range(valid_every, 1001, valid_every)
    ]
    (path / "train.tsv").write_text(
        "step\tepoch\tloss\tlr\ttokens_per_second\n"
        + "".join(f"{s}\t{e}\t{loss:.4f}\t{lr:.3e}\t{tps:.0f}\n" for s, e, loss, lr, tps in train)
    )
    rows = [
        f"{s}\t{loss:.4f}\t{math.exp(loss):.2f}\t{bleu:.2f}\t{bleu + 20:.2f}\t{sec:.1f}" for s, loss, bleu, sec in valid
    ]
    (path / "valid.tsv").write_text("step\tloss\tppl\tbleu\tchrf\tseconds\n" + "".join(f"{row}\n" for row in rows))
    return path


def assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert path.stat().st_size > 10_000, "a figure with axes, lines and labels"
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == [], "no temporary file left"


def test_learning_curves_png(tmp_path):
    model_dir = fake_model_dir(tmp_path / "model", speed=1.0)
    plot_learning_curves(model_dir, "en-de transformer baseline", tmp_path / "plots/curves.png")
    assert_png(tmp_path / "plots/curves.png")


def test_comparison_png(tmp_path):
    runs = {"Transformer": fake_model_dir(tmp_path / "a", 1.0), "RNN": fake_model_dir(tmp_path / "b", 2.0)}
    plot_comparison(runs, tmp_path / "compare.png")
    assert_png(tmp_path / "compare.png")


def test_missing_log_is_one_line(tmp_path):
    model_dir = fake_model_dir(tmp_path / "model", 1.0)
    (model_dir / "train.tsv").unlink()
    with pytest.raises(DataError) as excinfo:
        plot_learning_curves(model_dir, "t", tmp_path / "c.png")
    assert_one_line(excinfo, model_dir / "train.tsv", "not found")
    with pytest.raises(DataError) as excinfo:
        plot_comparison({"a": model_dir}, tmp_path / "c.png")
    assert_one_line(excinfo, model_dir / "train.tsv")
    assert not (tmp_path / "c.png").exists()


def test_unexpected_columns_are_one_line(tmp_path):
    model_dir = fake_model_dir(tmp_path / "model", 1.0)
    (model_dir / "valid.tsv").write_text("step\tloss\n100\t3.0\n")
    with pytest.raises(DataError) as excinfo:
        plot_learning_curves(model_dir, "t", tmp_path / "c.png")
    assert_one_line(excinfo, model_dir / "valid.tsv", "step, loss, ppl, bleu", "found step, loss")
    (model_dir / "valid.tsv").write_text("")
    with pytest.raises(DataError) as excinfo:
        plot_learning_curves(model_dir, "t", tmp_path / "c.png")
    assert_one_line(excinfo, model_dir / "valid.tsv")


def test_curves_of_a_real_training_run(trained_model, tmp_path):
    """The logs :func:`nmt.training.loop.train` writes are the ones the plots read (the fixture test_training uses)."""
    model_dir, _ = trained_model
    plot_learning_curves(model_dir, "toy", tmp_path / "toy.png")
    plot_comparison({"toy": model_dir}, tmp_path / "compare.png")
    assert_png(tmp_path / "toy.png")
    assert_png(tmp_path / "compare.png")


def bbox(artist, renderer):
    return artist.get_window_extent(renderer)


def test_comparison_has_a_title_a_legend_outside_the_curves_and_a_minutes_panel(tmp_path):
    runs = {
        "transformer/baseline": fake_model_dir(tmp_path / "a", 1.0),
        "rnn/baseline": fake_model_dir(tmp_path / "b", 2.0),
    }
    fig = plot_comparison(runs, tmp_path / "compare.png", title="en-de: the systems (seed 1)")
    assert_png(tmp_path / "compare.png")
    assert fig.get_suptitle() == "en-de: the systems (seed 1)"
    # One legend for the figure, beside the panels: it covers none of them.
    renderer = fig.canvas.get_renderer()
    [legend] = fig.legends
    assert [text.get_text() for text in legend.get_texts()] == list(runs)
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert all(not bbox(legend, renderer).overlaps(bbox(ax, renderer)) for ax in fig.axes)
    # Dev BLEU against the training minutes of valid.tsv (seconds / 60).
    [time_ax] = [ax for ax in fig.axes if "minutes" in ax.get_xlabel()]
    assert time_ax.get_ylabel() == "dev BLEU"
    slow = next(line for line in time_ax.get_lines() if line.get_label() == "rnn/baseline")
    assert list(slow.get_xdata()) == pytest.approx([1.2 * s / 60 for s in range(100, 1001, 100)])
    # No title given: a title all the same.
    assert plot_comparison(runs, tmp_path / "c2.png").get_suptitle()
    assert any("label-smoothed where a system trains with label smoothing" in text.get_text() for text in fig.texts)


@pytest.mark.parametrize(
    "label_smoothing, note",
    [
        (0.1, "label-smoothed cross-entropy (smoothing 0.1)"),
        (0.0, "(no label smoothing)"),
        (None, "with label smoothing if any"),
    ],
)
def test_learning_curves_say_what_the_losses_measure(tmp_path, label_smoothing, note):
    model_dir = fake_model_dir(tmp_path / "model", 1.0)
    fig = plot_learning_curves(model_dir, "en-de transformer", tmp_path / "c.png", label_smoothing=label_smoothing)
    [text] = [t.get_text() for t in fig.texts if t is not fig._suptitle]
    assert note in text and "dev loss: cross-entropy per target token, without smoothing or dropout" in text
    assert ("keeps the training loss above the dev loss" in text) == bool(label_smoothing)
    assert "10 validations (every 100 updates)" in text
    assert fig.get_suptitle() == "en-de transformer"


def test_a_run_validated_twice_still_shows_its_curve(tmp_path):
    """1000 updates validated every 500: each dev point has a marker and its BLEU and chrF beside it, every panel
    spans the whole training, and the training and dev losses share a panel."""
    model_dir = fake_model_dir(tmp_path / "model", 1.0, valid_every=500)
    fig = plot_learning_curves(model_dir, "t", tmp_path / "c.png", label_smoothing=0.1)
    loss_ax, bleu_ax = fig.axes
    bleu, chrf = bleu_ax.get_lines()
    assert [bleu.get_label(), chrf.get_label()] == ["BLEU", "chrF"]
    assert bleu.get_marker() == "o" and list(bleu.get_xdata()) == [500, 1000]
    values = [f"{v:.1f}" for line in (bleu, chrf) for v in line.get_ydata()]
    assert [t.get_text() for t in bleu_ax.texts] == values
    assert all(ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= 1000 for ax in fig.axes)
    assert any("2 validations (every 500 updates)" in t.get_text() for t in fig.texts)
    assert [line.get_label() for line in loss_ax.get_lines()] == ["training loss (label-smoothed)", "dev loss"]


def test_the_legends_cover_no_point_and_no_value(tmp_path):
    """A run whose BLEU stays low (a short or hard training) has its last points in a panel's lower right corner,
    where a fixed legend hid them and their values."""
    model_dir = fake_model_dir(tmp_path / "model", 1.0, valid_every=250)
    rows = [
        f"{s}\t3.0\t20.09\t{b}\t{c}\t{0.6 * s}\n"
        for s, b, c in ((250, 1, 30), (500, 2, 35), (750, 2.5, 38), (1000, 3, 40))
    ]
    (model_dir / "valid.tsv").write_text("step\tloss\tppl\tbleu\tchrf\tseconds\n" + "".join(rows))
    fig = plot_learning_curves(model_dir, "t", tmp_path / "c.png", label_smoothing=0.1)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = bbox(ax.get_legend(), renderer)
        points = [point for line in ax.get_lines() for point in ax.transData.transform(line.get_xydata())]
        assert not any(legend.contains(*point) for point in points), ax.get_ylabel()
        assert not any(legend.overlaps(bbox(text, renderer)) for text in ax.texts), ax.get_ylabel()
