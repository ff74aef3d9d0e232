"""HTML pages of the result tables and data reports: the numbers of the CSV/JSON files, as a browser shows them."""

import json

import pandas as pd
import pytest
from conftest import assert_one_line, html_tables

from nmt.data.cleaning import write_report
from nmt.errors import DataError
from nmt.evaluation.report import (
    html_page,
    render_cleaning_report,
    render_mono_report,
    render_synthetic_report,
    write_result_pages,
)
from nmt.evaluation.significance import direction, significance_frame
from nmt.evaluation.tables import collect_scores, summarize_seeds, wide_table, write_wide

PAIR, TEST = "en-de", "newstest2014"


def hyp(model: str, stage: str, run: str) -> str:
    return f"results/{PAIR}/{model}/{stage}/{run}/translations/{TEST}.de"


# (model, stage, seed) -> BLEU, chrF, TER
SCORES = {
    ("transformer", "baseline", 1): (27.31, 56.0, 60.2),
    ("transformer", "baseline", 2): (27.55, 56.3, 59.9),
    ("rnn", "baseline", 1): (21.07, 50.1, 66.0),
    ("rnn", "baseline", 2): (20.81, 49.9, 66.4),
    ("transformer", "bt", 1): (27.30, 56.1, 60.1),
    ("transformer", "bt", 2): (27.33, 56.0, 60.3),
}
BASELINE = hyp("transformer", "baseline", "seed1")


def score_record(model, stage, seed):
    bleu, chrf, ter = SCORES[model, stage, seed]
    return {
        "pair": PAIR,
        "testset": TEST,
        "model": model,
        "arch": model,
        "size": "base",
        "stage": stage,
        "data": "parallel" if stage == "baseline" else "parallel+bt (beam5)",
        "seed": seed,
        "bleu": bleu,
        "chrf": chrf,
        "ter": ter,
        "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|v:2.4",
        "parameters": 1_000_000,
        "train_seconds": 3600.5,
        "hyp": hyp(model, stage, f"seed{seed}"),
        "ref": f"results/{PAIR}/data/eval/{TEST}.de",
    }


def test_record(model, stage, seed, metric, p_value):
    """A record of :func:`nmt.evaluation.significance.paired_bootstrap` (the baseline: p_value None)."""
    score = SCORES[model, stage, seed][["bleu", "chrf", "ter"].index(metric)]
    baseline_score = SCORES["transformer", "baseline", 1][["bleu", "chrf", "ter"].index(metric)]
    return {
        "system": hyp(model, stage, f"seed{seed}"),
        "metric": metric,
        "score": score,
        "mean": score + 0.01,
        "ci95": 0.5,
        "p_value": p_value,
        "significant": p_value is not None and p_value < 0.05,
        "direction": None if p_value is None else direction(metric, score, baseline_score),
        "baseline": BASELINE,
        "n_samples": 1000,
        "seed": 12345,
        "hyp": hyp(model, stage, f"seed{seed}"),
        "baseline_hyp": BASELINE,
        "ref": f"results/{PAIR}/data/eval/{TEST}.de",
        "signature": "nrefs:1|bs:1000",
    }


test_record.__test__ = False  # a helper, not a test


@pytest.fixture
def pages(tmp_path):
    files = []
    for i, key in enumerate(SCORES):
        files.append(tmp_path / f"scores/{i}.json")
        files[-1].parent.mkdir(exist_ok=True)
        files[-1].write_text(json.dumps(score_record(*key)))
    long = collect_scores(files)
    summary = summarize_seeds(long)
    p_values = {("rnn", "baseline"): 0.001, ("transformer", "bt"): 0.62}
    tests = [test_record("transformer", "baseline", 1, m, None) for m in ("bleu", "chrf", "ter")] + [
        test_record(model, stage, seed, m, p_values[model, stage])
        for (model, stage, seed) in SCORES
        if (model, stage) != ("transformer", "baseline")
        for m in ("bleu", "chrf", "ter")
    ]
    wide, notes = wide_table(summary, ("bleu", "chrf", "ter"), significance_frame(tests, long))
    paths = {name: tmp_path / f"tables/{name}.html" for name in ("table", "summary", "scores", "significance")}
    write_wide(wide, notes, tmp_path / "tables/table.md", tmp_path / "tables/table.tex", tmp_path / "tables/table.csv")
    write_result_pages(long, summary, wide, notes, tests, *(paths[name] for name in paths))
    return {name: path.read_text(encoding="utf-8") for name, path in paths.items()} | {"dir": tmp_path / "tables"}


def test_main_table_page_shows_the_cells_of_table_csv(pages):
    csv = pd.read_csv(pages["dir"] / "table.csv", dtype=str, keep_default_na=False)
    [table] = html_tables(pages["table"])
    assert table[0] == list(csv.columns)
    assert table[1:] == csv.values.tolist()
    assert table[1] == ["RNN (base)", "20.94 ± 0.18‖", "50.00 ± 0.14‖", "66.20 ± 0.28‖"], "mean ± std, worse: ‖"
    # The notes under the table: what † means, in the wording of the wide table.
    assert "significantly worse" in pages["table"]
    assert pages["table"].startswith("<!DOCTYPE html>") and "<script" not in pages["table"]


def test_summary_and_long_pages(pages):
    [summary] = html_tables(pages["summary"])
    assert summary[0][:8] == ["pair", "testset", "model", "arch", "size", "stage", "data", "kind"]
    rows = {(row[2], row[5]): dict(zip(summary[0], row, strict=True)) for row in summary[1:]}
    assert rows["rnn", "baseline"]["bleu_mean"] == "20.94" and rows["rnn", "baseline"]["bleu_std"] == "0.18"
    assert rows["rnn", "baseline"]["parameters"] == "1,000,000"
    [long] = html_tables(pages["scores"])
    assert len(long) == 1 + len(SCORES) and "bleu_signature" not in long[0] and "hyp" not in long[0]
    assert [[row[long[0].index(c)] for c in ("model", "seed", "bleu")] for row in long[1:3]] == [
        ["rnn", "1", "21.07"],
        ["rnn", "2", "20.81"],
    ]
    assert "bleu: nrefs:1|case:mixed|eff:no|tok:13a|v:2.4" in pages["scores"], "the signature under the table"


def test_significance_page_shows_scores_differences_and_p_values(pages):
    [table] = html_tables(pages["significance"])
    assert f"{PAIR.upper()} {TEST}" in pages["significance"]
    # Two header rows (metric, then the values of each), then a row per tested run, the baseline first.
    assert table[0] == ["model", "stage", "run", "BLEU", "chrF", "TER"]
    assert table[1] == ["", "", ""] + ["score", "95% CI", "Δ", "p", "direction"] * 3
    runs = [row[:3] for row in table[2:]]
    assert table[2][:8] == ["transformer", "baseline", "seed1", "27.31", "27.32 ± 0.50", "baseline", "", ""]
    assert ["rnn", "baseline", "seed2"] in runs and len(runs) == 5
    rnn = next(row for row in table[2:] if row[:3] == ["rnn", "baseline", "seed1"])
    assert rnn[3:8] == ["21.07", "21.08 ± 0.50", "-6.24", "0.0010 ‖", "worse"]
    bt = next(row for row in table[2:] if row[:3] == ["transformer", "bt", "seed1"])
    assert bt[3:8] == ["27.30", "27.31 ± 0.50", "-0.01", "0.6200", "worse"], "not significant: no mark"
    # TER: a higher score is worse, and the note says so.
    assert rnn[-5:] == ["66.00", "66.01 ± 0.50", "+5.80", "0.0010 ‖", "worse"]
    assert "lower for TER" in pages["significance"] and "either direction" in pages["significance"]


def test_significance_page_shows_a_direction_when_the_records_have_one(tmp_path):
    long = pd.DataFrame([score_record("transformer", "baseline", 1), score_record("rnn", "baseline", 1)])
    tests = [test_record("transformer", "baseline", 1, "bleu", None), test_record("rnn", "baseline", 1, "bleu", 0.01)]
    tests = [{**tests[0], "direction": None}, {**tests[1], "direction": "worse"}]
    write_result_pages(long, summarize_seeds(long), pd.DataFrame(), [], tests, *(tmp_path / n for n in "abcd"))
    [table] = html_tables((tmp_path / "d").read_text())
    assert table[0][-1] == "BLEU" and "direction" in table[1] and table[-1][-1] == "worse"


def test_html_page_escapes_text_and_aligns_text_left():
    page = html_page("<b>", [("x & y", pd.DataFrame({"system": ["<i>a</i>"], "bleu": ["27.31 ± 0.12 †"]}))], ["1 < 2"])
    assert "<b>" not in page.split("<style>")[1] and "&lt;i&gt;a&lt;/i&gt;" in page and "1 &lt; 2" in page
    assert '<td class="text">&lt;i&gt;a&lt;/i&gt;</td>' in page and "<td>27.31 ± 0.12 †</td>" in page
    assert html_tables(page) == [[["system", "bleu"], ["<i>a</i>", "27.31 ± 0.12 †"]]]


def test_cleaning_report_page(tmp_path):
    result = {
        "src": "a.en",
        "trg": "a.de",
        "lines_in": 29000,
        "kept": 400,
        "dropped": {"empty": 0, "ratio": 12, "langid": 88, "duplicate": 0, "max_pairs": 28500},
    }
    write_report(result, tmp_path / "c.report.tsv")
    settings = {"langid": False, "max_pairs": 400, "max_token_chars": None}
    render_cleaning_report(tmp_path / "c.report.tsv", tmp_path / "c.report.html", "Cleaning of c (en-de)", settings)
    page = (tmp_path / "c.report.html").read_text()
    counts, shown = html_tables(page)
    assert counts == [
        ["filter", "pairs", "share"],
        ["lines_in", "29,000", "100.00%"],
        ["ratio", "12", "0.04%"],
        ["langid", "88", "0.30%"],
        ["max_pairs", "28,500", "98.28%"],
        ["kept", "400", "1.38%"],
    ]
    assert shown == [["setting", "value"], ["langid", "false"], ["max_pairs", "400"], ["max_token_chars", "null"]]
    assert "<h1>Cleaning of c (en-de)</h1>" in page


def test_monolingual_and_back_translation_report_pages(tmp_path):
    mono = {
        "inputs": ["results/data/download/m.de"],
        "lines_in": 29000,
        "kept": 300,
        "dropped": {"empty": 10, "in_eval": 0, "duplicate": 690, "max_sentences": 28000},
    }
    (tmp_path / "mono.report.json").write_text(json.dumps(mono))
    render_mono_report(tmp_path / "mono.report.json", tmp_path / "mono.html", "Monolingual de")
    [table] = html_tables((tmp_path / "mono.html").read_text())
    assert table[0] == ["filter", "sentences", "share"]
    assert [row[:2] for row in table[1:]] == [
        ["lines_in", "29,000"],
        ["empty", "10"],
        ["duplicate", "690"],
        ["max_sentences", "28,000"],
        ["kept", "300"],
    ]
    assert "results/data/download/m.de" in (tmp_path / "mono.html").read_text()
    synthetic = {
        "real_pairs": 400,
        "upsample_real": 2,
        "synthetic_in": 300,
        "synthetic_pairs": 290,
        "tagged": True,
        "dropped": {"empty": 4, "copy": 6, "repeated_ngram": 0, "ratio": 0, "synthetic_ratio": 0},
    }
    (tmp_path / "report.json").write_text(json.dumps(synthetic))
    render_synthetic_report(tmp_path / "report.json", tmp_path / "report.html", "bt_sample_tagged")
    mixture, filters = html_tables((tmp_path / "report.html").read_text())
    assert mixture[1] == ["real pairs", "400", "×2", "800", "73.4%"]
    assert mixture[2] == ["synthetic pairs (tagged)", "290", "×1", "290", "26.6%"]
    assert mixture[3][0] == "training corpus" and mixture[3][3] == "1,090"
    assert [row[:2] for row in filters[1:]] == [["synthetic_in", "300"], ["empty", "4"], ["copy", "6"], ["kept", "290"]]


def test_bad_report_files_are_one_line(tmp_path):
    with pytest.raises(DataError) as excinfo:
        render_mono_report(tmp_path / "missing.json", tmp_path / "x.html", "t")
    assert_one_line(excinfo, tmp_path / "missing.json", "not found")
    (tmp_path / "other.json").write_text('{"kept": 1}')
    with pytest.raises(DataError) as excinfo:
        render_synthetic_report(tmp_path / "other.json", tmp_path / "x.html", "t")
    assert_one_line(excinfo, tmp_path / "other.json", "not a back-translation report")
    (tmp_path / "r.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(DataError) as excinfo:
        render_cleaning_report(tmp_path / "r.tsv", tmp_path / "x.html", "t", {})
    assert_one_line(excinfo, tmp_path / "r.tsv", "expected columns filter, pairs, share")
    assert not (tmp_path / "x.html").exists()
