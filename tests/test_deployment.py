"""nmt.evaluation.deployment: the distillation table (quality against the teacher, speed, size) and its plot."""

import pandas as pd
import pytest

from nmt.errors import DataError
from nmt.evaluation.deployment import deployment_rows, plot_deployment, write_deployment

REF = [f"ein Hund läuft über die Wiese Nummer {i} ." for i in range(60)]


def write_run(tmp_path, name, hyps, seconds, model_bytes, **row):
    """A row as the workflow gives it: a translation, the Snakemake benchmark of its job, its model file."""
    (tmp_path / f"{name}.de").write_text("\n".join(hyps) + "\n")
    (tmp_path / f"{name}.tsv").write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:{seconds}\t300.0\n")
    (tmp_path / f"{name}.bin").write_bytes(b"\0" * model_bytes)
    return {"pair": "en-de", "test": "test", "ref": str(tmp_path / "ref.de"), "hyp": str(tmp_path / f"{name}.de"),
            "benchmark": str(tmp_path / f"{name}.tsv"), "models": [str(tmp_path / f"{name}.bin")], **row}  # fmt: skip


def test_teacher_and_students_side_by_side(tmp_path):
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    worse = [line if i % 2 else "ein Hund" for i, line in enumerate(REF)]
    rows = [
        write_run(tmp_path, "teacher", REF, 30.0, 2**21, role="teacher", model="transformer", stage="baseline",
                  run="seed1", quantization=None),
        write_run(tmp_path, "student", worse, 10.0, 2**20, role="student", model="student", stage="distilled",
                  run="seed1", quantization=None),
        write_run(tmp_path, "int8", REF, 5.0, 2**18, role="student", model="student", stage="distilled",
                  run="seed1", quantization="int8"),
    ]  # fmt: skip
    table = deployment_rows(rows, n_samples=100, seed=1)
    assert list(table["system"]) == [
        "teacher transformer/baseline/seed1, torch",
        "student student/distilled/seed1, torch",
        "student student/distilled/seed1, ctranslate2 int8",
    ]
    assert table["bleu_score"].iloc[0] == pytest.approx(100) and table["bleu_score"].iloc[1] < 80
    # The worse student is marked significantly worse on every metric, the identical output not at all.
    assert table["bleu"].iloc[1].endswith("‖") and table["ter"].iloc[1].endswith("‖")
    assert table["bleu"].iloc[2] == "100.00" and table["bleu"].iloc[0] == "100.00"
    assert list(table["sentences_per_second"]) == [2.0, 6.0, 12.0] and list(table["speedup"]) == [1.0, 3.0, 6.0]
    assert list(table["size_mb"]) == [2.0, 1.0, 0.2]
    assert table["bleu_of_teacher"].iloc[2] == 1.0
    write_deployment(table, tmp_path / "d.csv", tmp_path / "d.md")
    assert pd.read_csv(tmp_path / "d.csv")["speedup"].tolist() == [1.0, 3.0, 6.0]
    md = (tmp_path / "d.md").read_text()
    assert "| student student/distilled/seed1, ctranslate2 int8 |" in md and "than the teacher (first row)" in md
    plot_deployment(table, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes().startswith(b"\x89PNG")


def test_a_benchmark_without_the_wall_time_is_one_line(tmp_path):
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    row = write_run(tmp_path, "teacher", REF, 1.0, 1, role="teacher", model="t", stage="baseline", run="seed1",
                    quantization=None)  # fmt: skip
    (tmp_path / "teacher.tsv").write_text("h:m:s\n0:00:01\n")
    with pytest.raises(DataError, match=r"teacher.tsv: no job wall time in column 's'"):
        deployment_rows([row], n_samples=10, seed=1)
