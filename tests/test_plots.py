"""Learning-curve figures: valid PNGs from the logs training writes, one-line errors for missing or odd logs."""

import math
from pathlib import Path

import pytest
from conftest import assert_one_line

from nmt.errors import DataError
from nmt.evaluation.plots import plot_comparison, plot_learning_curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_model_dir(path: Path, speed: float) -> Path:
    """A model directory with train.tsv and valid.tsv in the format of :func:`nmt.training.loop.train`."""
    path.mkdir(parents=True)
    train = [(s, s // 200, 9.0 * math.exp(-s / (300 * speed)) + 2.0, 1e-3, 5000) for s in range(20, 1001, 20)]
    valid = [
        (s, 8.0 * math.exp(-s / (400 * speed)) + 2.5, 30 * (1 - math.exp(-s / (300 * speed))))
        for s in range(100, 1001, 100)
    ]
    (path / "train.tsv").write_text(
        "step\tepoch\tloss\tlr\ttokens_per_second\n"
        + "".join(f"{s}\t{e}\t{loss:.4f}\t{lr:.3e}\t{tps:.0f}\n" for s, e, loss, lr, tps in train)
    )
    (path / "valid.tsv").write_text(
        "step\tloss\tppl\tbleu\n"
        + "".join(f"{s}\t{loss:.4f}\t{math.exp(loss):.2f}\t{bleu:.2f}\n" for s, loss, bleu in valid)
    )
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
