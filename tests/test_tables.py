"""Result tables from score records."""

import json

import pandas as pd

from nmt.tables import collect_scores, write_tables


def record(model, bleu, pair="en-de", stage="baseline"):
    return {
        "pair": pair, "testset": "test_2016_flickr", "model": model, "arch": "transformer", "stage": stage,
        "data": "parallel" if stage == "baseline" else "parallel+bt (beam5)",
        "bleu": bleu, "bleu_signature": "nrefs:1", "chrf": 50.0, "ter": 60.0, "parameters": 5, "train_seconds": 1.0,
        "tokens_per_second": 9.0, "steps": 2, "device": "cpu",
    }  # fmt: skip


def test_collect_and_write(tmp_path):
    files = []
    records = [
        record("b_model", 20.0),
        record("a_model", 31.0, stage="a_bt"),
        record("a_model", 30.0),
        record("a_model", 10.0, "en-fr"),
    ]
    for i, rec in enumerate(records):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps(rec))
    df = collect_scores(files)
    assert list(df["model"]) == ["a_model", "a_model", "b_model", "a_model"]
    assert list(df["stage"][:2]) == ["baseline", "a_bt"], "the baseline row comes before its back-translation rows"
    assert list(df.columns[:9]) == ["pair", "testset", "model", "arch", "stage", "data", "bleu", "chrf", "ter"]
    write_tables(df, tmp_path / "t/scores.csv", tmp_path / "t/scores.md")
    assert pd.read_csv(tmp_path / "t/scores.csv").shape == (4, len(df.columns))
    md = (tmp_path / "t/scores.md").read_text()
    assert md.count("\n") == 6 and "bleu_signature" not in md and "| en-fr" in md
