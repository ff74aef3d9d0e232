"""nmt.evaluation.backtranslation: the table of a variant's rounds of iterative back-translation."""

import json
from pathlib import Path

import pytest
from conftest import assert_one_line

from nmt.errors import DataError
from nmt.evaluation.backtranslation import tabulate_rounds


def write_json(path: Path, record: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def summary(path: Path, bleu: float, averaged: float | None = None) -> Path:
    """A training's summary.json as nmt.training.loop writes it (the keys the table reads)."""
    record = {"steps": 100, "valid": {"step": 100, "bleu": bleu}, "model": "best checkpoint"}
    if averaged is not None:
        record |= {"averaged": {"steps": [90, 100], "bleu": averaged}, "model": "average of the last 2 checkpoints"}
    return write_json(path / "summary.json", record)


def corpus(path: Path, kept: int, read: int) -> Path:
    return write_json(path / "report.json", {"synthetic_in": read, "synthetic_pairs": kept, "dropped": {}})


def test_a_row_per_round_with_the_dev_bleu_of_the_kept_models(tmp_path: Path) -> None:
    bt = tmp_path / "bt"
    reverse = [summary(tmp_path / "reverse", 20.5), summary(bt / "round2/reverse", 21.0, averaged=22.25)]
    synthetic = [corpus(bt, 900, 1000), corpus(bt / "round2", 950, 1000)]
    rows = tabulate_rounds(
        reverse,
        synthetic,
        [summary(bt / "round2/forward", 30.0)],
        [corpus(bt / "round2/forward_corpus", 800, 1000)],
        tmp_path / "rounds.json",
        tmp_path / "rounds.md",
    )
    assert [row["reverse_dev_bleu"] for row in rows] == [20.5, 22.25]  # model.pt is the average in round 2
    assert rows[1]["forward_dev_bleu"] == 30.0 and "forward_dev_bleu" not in rows[0]
    assert json.loads((tmp_path / "rounds.json").read_text()) == rows
    table = (tmp_path / "rounds.md").read_text().splitlines()
    assert table[2] == f"| 1 | – | – | `{tmp_path / 'reverse'}` | 20.50 | 900 of 1,000 |"
    assert table[3] == f"| 2 | 30.00 | 800 of 1,000 | `{bt / 'round2/reverse'}` | 22.25 | 950 of 1,000 |"


def test_a_report_of_another_kind_is_one_line(tmp_path: Path) -> None:
    not_a_summary = write_json(tmp_path / "reverse/summary.json", {"steps": 1})
    with pytest.raises(DataError) as excinfo:
        tabulate_rounds([not_a_summary], [corpus(tmp_path, 1, 1)], [], [], tmp_path / "r.json", tmp_path / "r.md")
    assert_one_line(excinfo, not_a_summary, "not a training summary")
