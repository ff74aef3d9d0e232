"""nmt.evaluation.distillation: the distillation table (quality against the teacher and of distillation, speed, size),
its plot, and the timing of its rows."""

import json
import logging
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, run_training

from nmt.config import DecodeConfig
from nmt.decoding.streaming import translate_file
from nmt.errors import DataError
from nmt.evaluation.distillation import (
    cpu_model,
    distillation_table,
    plot_distillation,
    read_timing,
    row_label,
    run_timed,
    time_rows,
    translate_command,
    write_distillation_table,
)

REF = [f"ein Hund läuft über die Wiese Nummer {i} ." for i in range(60)]
BEAM, GREEDY = {"method": "beam", "beam_size": 5}, {"method": "greedy"}
TIMING = {"cpu": "Toy CPU 3000", "threads": 1, "commit": "abc1234", "repeats": 3}


def write_run(tmp_path, name, hyps, role, model, stage, quantization=None, decoding=GREEDY, model_bytes=1):
    """A row as the workflow gives it (its first seed): a translation and its model file."""
    (tmp_path / f"{name}.de").write_text("\n".join(hyps) + "\n")
    (tmp_path / f"{name}.bin").write_bytes(b"\0" * model_bytes)
    what = {"role": role, "model": model, "stage": stage, "run": "seed1", "quantization": quantization}
    files = {"hyp": str(tmp_path / f"{name}.de"), "ref": str(tmp_path / "ref.de")}
    return {
        "pair": "en-de",
        "test": "test",
        **what,
        "decoding": decoding,
        **files,
        "models": [str(tmp_path / f"{name}.bin")],
    }


def timing_of(rows, seconds):
    """The times time_rows would have written for ``rows``: one median per row."""
    times = [
        {"pair": r["pair"], "test": r["test"], "system": row_label(r), "seconds": s}
        for r, s in zip(rows, seconds, strict=True)
    ]
    return {**TIMING, "rows": times}


def test_teacher_and_students_side_by_side(tmp_path):
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    worse = [line if i % 2 else "ein Hund" for i, line in enumerate(REF)]
    rows = [
        write_run(tmp_path, "teacher", REF, "teacher", "transformer", "baseline", decoding=BEAM, model_bytes=2**21),
        write_run(tmp_path, "student", worse, "student", "student", "distilled", model_bytes=2**20),
        write_run(tmp_path, "int8", REF, "student", "student", "distilled", "int8", model_bytes=2**18),
    ]
    table = distillation_table(rows, timing_of(rows, [30.0, 10.0, 5.0]), n_samples=100, seed=1)
    # Each label names the search.
    assert list(table["system"]) == [
        "teacher transformer/baseline/seed1, torch, beam 5",
        "student student/distilled/seed1, torch, greedy",
        "student student/distilled/seed1, ctranslate2 int8, greedy",
    ]
    assert table["bleu_score"].iloc[0] == pytest.approx(100) and table["bleu_score"].iloc[1] < 80
    # The worse student is marked significantly worse on every metric, the identical output not at all.
    assert table["bleu"].iloc[1].endswith("‖") and table["ter"].iloc[1].endswith("‖")
    assert table["bleu"].iloc[2] == "100.00" and table["bleu"].iloc[0] == "100.00"
    assert list(table["sentences_per_second"]) == [2.0, 6.0, 12.0] and list(table["speedup"]) == [1.0, 3.0, 6.0]
    assert list(table["size_mb"]) == [2.0, 1.0, 0.2]
    assert table["bleu_of_teacher"].iloc[2] == 1.0
    write_distillation_table(table, TIMING, tmp_path / "d.csv", tmp_path / "d.md")
    csv = pd.read_csv(tmp_path / "d.csv")
    assert csv["speedup"].tolist() == [1.0, 3.0, 6.0] and set(csv["cpu"]) == {"Toy CPU 3000"}
    md = (tmp_path / "d.md").read_text()
    assert "| student student/distilled/seed1, ctranslate2 int8, greedy |" in md
    assert "than the teacher (first row)" in md
    # How the speed was measured: alone, repeated, on which CPU, threads and commit.
    assert "each row run with no other job of the workflow beside it (other processes" in md
    assert "are not stopped), the median of 3 runs" in md
    assert "CPU Toy CPU 3000, 1 thread, commit abc1234." in md
    plot_distillation(table, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes().startswith(b"\x89PNG")


def test_speedup_comes_from_the_unrounded_seconds(tmp_path):
    """60 sentences in 7 s (8.57/s, shown 8.6) and in 1 s: 7x, where the rounded speeds would give 6.98."""
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    rows = [write_run(tmp_path, name, REF, name, name, "baseline") for name in ("teacher", "student")]
    table = distillation_table(rows, timing_of(rows, [7.0, 1.0]), n_samples=10, seed=1)
    assert list(table["sentences_per_second"]) == [8.6, 60.0]
    assert list(table["speedup"]) == [1.0, 7.0] and list(table["seconds"]) == [7.0, 1.0]


def test_the_distilled_student_is_tested_against_the_student_on_the_original_pairs(tmp_path):
    """The row that claims distillation's gain is tested against the same student on the original pairs: a gain
    beyond chance is marked, one within it is not, and no other row gets the column."""
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    poor = [line if i % 3 else "ein Hund" for i, line in enumerate(REF)]
    close = [line if i % 3 or i == 0 else "ein Hund" for i, line in enumerate(REF)]  # one sentence better
    rows = [
        write_run(tmp_path, "teacher", REF, "teacher", "transformer", "baseline", decoding=BEAM),
        write_run(tmp_path, "a_base", poor, "student", "a", "baseline"),
        write_run(tmp_path, "a_kd", REF, "student", "a", "distilled"),
        write_run(tmp_path, "a_int8", REF, "student", "a", "distilled", "int8"),
        write_run(tmp_path, "b_base", poor, "student", "b", "baseline"),
        write_run(tmp_path, "b_kd", close, "student", "b", "distilled"),
    ]
    table = distillation_table(rows, timing_of(rows, [1.0] * 6), n_samples=200, seed=1)
    gains = dict(zip(table["system"], table["bleu_gain"].fillna(""), strict=True))
    a_gain = table["bleu_score"].iloc[2] - table["bleu_score"].iloc[1]
    assert gains["student a/distilled/seed1, torch, greedy"] == f"+{a_gain:.2f}†"
    assert table["bleu_gain_p"].iloc[2] < 0.05 and table["bleu_gain_score"].iloc[2] == pytest.approx(a_gain)
    b_gain = gains["student b/distilled/seed1, torch, greedy"]
    assert b_gain.startswith("+") and not b_gain.endswith(("†", "‖")) and table["bleu_gain_p"].iloc[5] >= 0.05
    assert [label for label, gain in gains.items() if gain] == [
        "student a/distilled/seed1, torch, greedy",
        "student b/distilled/seed1, torch, greedy",
    ]
    write_distillation_table(table, TIMING, tmp_path / "d.csv", tmp_path / "d.md")
    md = (tmp_path / "d.md").read_text()
    assert "bleu_gain" in md.splitlines()[0]
    assert f"| +{a_gain:.2f}†" in md and "the same student's on the original pairs" in md


def test_a_row_without_a_time_is_one_line(tmp_path):
    (tmp_path / "ref.de").write_text("\n".join(REF) + "\n")
    row = write_run(tmp_path, "teacher", REF, "teacher", "t", "baseline", decoding=BEAM)
    with pytest.raises(DataError, match=r"no row 'teacher t/baseline/seed1, torch, beam 5' .*time_distillation"):
        distillation_table([row], {**TIMING, "rows": []}, n_samples=10, seed=1)
    (tmp_path / "timing.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(DataError, match=r"timing.json: not the times of time_distillation \(KeyError: 'cpu, thr"):
        read_timing(tmp_path / "timing.json")


@pytest.fixture(scope="module")
def decoded_rows(toy_corpus, toy_spm, tmp_path_factory):
    """A teacher (beam 2) and a student (greedy) row of one small model, translated as their workflow jobs do."""
    root = tmp_path_factory.mktemp("rows")
    run_training(toy_corpus, toy_spm, root / "model", max_steps=4, valid_every=4)
    rows = []
    for role, decoding in (("teacher", DecodeConfig(beam_size=2)), ("student", DecodeConfig(method="greedy"))):
        hyp = root / f"{role}.de"
        translate_file(root / "model", toy_corpus["test.en"], hyp, decoding, device="cpu", threads=1)
        what = {"role": role, "model": "toy", "stage": "baseline", "run": "seed1", "quantization": None}
        files = {"src": str(toy_corpus["test.en"]), "hyp": str(hyp), "ref": str(toy_corpus["test.de"])}
        models = [str(root / "model/model.pt")]
        rows.append({"pair": "en-de", "test": "test", **what, **files, "models": models, "decoding": asdict(decoding)})
    return rows


def test_time_rows_runs_each_row_in_turn_and_records_the_machine(decoded_rows, tmp_path, caplog):
    """Every row's `python -m nmt translate` runs `repeats` times, the rows interleaved; the JSON holds the median
    and every run, with the CPU model, threads and commit; the table built from it says the same."""
    with caplog.at_level(logging.INFO, logger="nmt.evaluation.distillation"):
        timing = time_rows(decoded_rows, tmp_path / "timing.json", repeats=2, threads=1)
    assert read_timing(tmp_path / "timing.json") == timing
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert {key: timing[key] for key in ("cpu", "threads", "commit", "repeats")} == {
        "cpu": cpu_model(),
        "threads": 1,
        "commit": commit.stdout.strip(),
        "repeats": 2,
    }
    assert cpu_model() not in ("", "unknown")
    teacher, student = timing["rows"]
    assert teacher["system"] == "teacher toy/baseline/seed1, torch, beam 2"
    assert student["system"] == "student toy/baseline/seed1, torch, greedy"
    for row in timing["rows"]:
        assert len(row["repeats"]) == 2 and all(s > 0 for s in row["repeats"])
        assert row["seconds"] == pytest.approx(sum(row["repeats"]) / 2)
    runs = [r.getMessage().split(":")[0] for r in caplog.records if r.getMessage().startswith("round ")]
    assert runs == ["round 1/2", "round 1/2", "round 2/2", "round 2/2"]  # interleaved
    labels = [
        r.getMessage().split(": ")[1].removesuffix(" on test")
        for r in caplog.records
        if r.getMessage().startswith("round ")
    ]
    assert labels == [teacher["system"], student["system"]] * 2


def test_time_rows_refuses_an_output_that_is_not_the_rows_translation(decoded_rows, tmp_path):
    lines = Path(decoded_rows[1]["hyp"]).read_text().splitlines()
    lines[2] = "not what the student wrote"
    changed = tmp_path / "student.de"
    changed.write_text("".join(line + "\n" for line in lines))
    row = {**decoded_rows[1], "hyp": str(changed)}
    with pytest.raises(DataError, match=r"student toy/baseline/seed1, torch, greedy: .* \(from line 3\)"):
        time_rows([row], tmp_path / "timing.json", repeats=1, threads=1)
    assert not (tmp_path / "timing.json").exists()


def test_a_timed_process_decodes_on_the_given_threads(decoded_rows, tmp_path):
    """Each timed process gets the decoding jobs' threads with --threads, and a failure is one line."""
    command = translate_command(decoded_rows[0], tmp_path / "hyp", threads=3)
    assert command[command.index("--threads") + 1] == "3" and command[1:4] == ["-m", "nmt", "translate"]
    assert command[command.index("--beam-size") + 1] == "2" and "--sampling-topk" not in command  # a default
    with pytest.raises(DataError, match=r"failed \(exit 3\): boom"):
        run_timed([sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"], {})
