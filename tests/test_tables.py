"""Result tables from score records."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import assert_one_line

from nmt.errors import ConfigError, DataError
from nmt.evaluation.stale_results import remove_stale_results, stale_results
from nmt.evaluation.tables import (
    budget_notes,
    collect_scores,
    decoding_notes,
    summarize_seeds,
    wide_table,
    write_tables,
    write_wide,
)


def record(model, bleu, pair="en-de", stage="baseline"):
    return {
        "pair": pair,
        "testset": "test_2016_flickr",
        "model": model,
        "arch": "transformer",
        "stage": stage,
        "data": "parallel" if stage == "baseline" else "parallel+bt (beam5)",
        "bleu": bleu,
        "bleu_signature": "nrefs:1",
        "chrf": 50.0,
        "ter": 60.0,
        "parameters": 5,
        "train_seconds": 1.0,
        "tokens_per_second": 9.0,
        "steps": 2,
        "device": "cpu",
    }


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


# BLEU and TER of two seeds per system and pair, and of the ensemble of both: (model, arch, preset) -> pair -> ...
RUNS = {
    ("convs2s", "convs2s", "wmt14_en_de"): {
        "en-de": ([25.0, 25.5], [60.0, 59.0], 26.1),
        "en-fr": ([40.0, 40.2], [45.0, 45.0], 41.0),
    },
    ("transformer_base", "transformer", "base"): {
        "en-de": ([27.0, 27.4], [55.0, 56.0], 28.0),
        "en-fr": ([38.1, 38.3], [47.0, 46.0], 39.0),
    },
}
VASWANI = [
    {
        "system": "Transformer (base)",
        "citation": "Vaswani et al. 2017",
        "pair": pair,
        "testset": "newstest2014",
        "bleu": bleu,
        "measurement": "tokenized BLEU (multi-bleu.perl), not sacreBLEU",
    }
    for pair, bleu in (("en-de", 27.3), ("en-fr", 38.1))
]


def seeded_records() -> list[dict]:
    records = []
    for (model, arch, preset), pairs in RUNS.items():
        for pair, (bleus, ters, ensemble) in pairs.items():
            system = {
                "pair": pair,
                "testset": "newstest2014",
                "model": model,
                "arch": arch,
                "size": preset,
                "stage": "baseline",
                "data": "parallel",
                "chrf": 50.0,
                "parameters": 60e6,
                "train_seconds": 100.0,
                "tokens_per_second": 9000.0,
            }
            for seed, bleu, ter in zip((1, 2), bleus, ters, strict=True):
                records.append({**system, "seed": seed, "bleu": bleu, "ter": ter, "hyp": f"{pair}/{model}/{seed}.txt"})
            records.append(
                {
                    **system,
                    "seed": "ensemble",
                    "bleu": ensemble,
                    "ter": 50.0,
                    "members": [1, 2],
                    "hyp": f"{pair}/{model}/ensemble.txt",
                }
            )
    return records


def collected(tmp_path, records) -> pd.DataFrame:
    for i, rec in enumerate(records):
        (tmp_path / f"{i}.json").write_text(json.dumps(rec))
    return collect_scores([tmp_path / f"{i}.json" for i in range(len(records))])


def test_long_table_orders_seeds_with_the_ensemble_last(tmp_path):
    df = collected(tmp_path, seeded_records()[::-1])
    assert list(df.columns[:11]) == [
        "pair",
        "testset",
        "model",
        "arch",
        "size",
        "stage",
        "data",
        "seed",
        "bleu",
        "chrf",
        "ter",
    ]
    assert list(df["seed"][:6]) == [1, 2, "ensemble"] * 2
    assert list(df["model"][:4]) == ["convs2s"] * 3 + ["transformer_base"]


def test_summarize_seeds(tmp_path):
    summary = summarize_seeds(collected(tmp_path, seeded_records()))
    assert len(summary) == 2 * 2 * 2, "pair x model x (single, ensemble)"
    assert list(summary["kind"][:2]) == ["single", "ensemble"]
    single = summary.iloc[2]
    assert (single["pair"], single["model"], single["n_seeds"]) == ("en-de", "transformer_base", 2)
    assert single["bleu_mean"] == pytest.approx(27.2)
    assert single["bleu_std"] == pytest.approx(0.282843, abs=1e-6), "sample std of 27.0 and 27.4: 0.2 * sqrt(2)"
    assert single["ter_std"] == pytest.approx(0.707107, abs=1e-6) and single["parameters"] == 60e6
    ensemble = summary.iloc[3]
    assert ensemble["kind"] == "ensemble" and ensemble["bleu_mean"] == 28.0 and ensemble["n_seeds"] == 2
    assert pd.isna(ensemble["bleu_std"])


def test_summarize_one_seed_and_old_records_without_seed(tmp_path):
    summary = summarize_seeds(collected(tmp_path, [record("m", 20.0), record("m", 22.0, stage="bt")]))
    assert list(summary["n_seeds"]) == [1, 1] and summary["bleu_std"].isna().all()
    assert list(summary["kind"]) == ["single", "single"] and list(summary["size"]) == ["", ""]


def test_duplicate_seed_is_one_line(tmp_path):
    records = seeded_records()
    with pytest.raises(DataError) as excinfo:
        summarize_seeds(collected(tmp_path, records + [records[0]]))
    assert_one_line(excinfo, "seed 1", "en-de", "convs2s")


def test_wide_table_shape_and_cells(tmp_path):
    long = collected(tmp_path, seeded_records())
    sig = pd.DataFrame(
        [
            # both ConvS2S seeds differ significantly on en-de BLEU; on en-fr BLEU only one of them does
            ("en-de", "convs2s", 1, "bleu", 0.001),
            ("en-de", "convs2s", 2, "bleu", 0.01),
            ("en-fr", "convs2s", 1, "bleu", 0.001),
            ("en-fr", "convs2s", 2, "bleu", 0.3),
            ("en-de", "transformer_base", "ensemble", "bleu", 0.002),
            ("en-de", "transformer_base", 1, "bleu", None),
        ],
        columns=["pair", "model", "seed", "metric", "p_value"],
    ).assign(
        testset="newstest2014",
        stage="baseline",
        direction="better",
        baseline_arch="transformer",
        baseline_size="base",
        baseline_data="parallel",
        baseline_seed=1,
    )
    table, notes = wide_table(summarize_seeds(long), significance=sig, published=VASWANI)
    assert list(table.index) == [
        "Transformer (base) [Vaswani et al. 2017]*",
        "ConvS2S (wmt14_en_de)",
        "ConvS2S (wmt14_en_de) ensemble",
        "Transformer (base)",
        "Transformer (base) ensemble",
    ]
    assert list(table.columns) == [("EN-DE", "BLEU"), ("EN-DE", "TER"), ("EN-FR", "BLEU"), ("EN-FR", "TER")]
    assert table.loc["Transformer (base)"].tolist() == ["27.20 ± 0.28", "55.50 ± 0.71", "38.20 ± 0.14", "46.50 ± 0.71"]
    convs2s = table.loc["ConvS2S (wmt14_en_de)"].tolist()
    assert convs2s == ["25.25 ± 0.35†", "59.50 ± 0.71", "40.10 ± 0.14", "45.00 ± 0.00"], "one seed significant: no †"
    assert table.loc["Transformer (base) ensemble"].tolist() == ["28.00†", "50.00", "39.00", "50.00"]
    assert table.loc["Transformer (base) [Vaswani et al. 2017]*"].tolist() == ["27.3", "", "38.1", ""]
    assert len(notes) == 2 and notes[0].startswith("* ") and "multi-bleu.perl" in notes[0]
    assert notes[1].startswith("† ") and "Transformer (base)" in notes[1] and "p < 0.05" in notes[1]

    write_wide(table, notes, tmp_path / "t/wide.md", tmp_path / "t/wide.tex")
    md, tex = (tmp_path / "t/wide.md").read_text(), (tmp_path / "t/wide.tex").read_text()
    assert "EN-DE BLEU |" in md and "|  27.20 ± 0.28 |" in md and "\n\\* As published" in md and "\n† signif" in md
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex and "\\multicolumn{2}{c}{EN-DE}" in tex
    assert "p $<$ 0.05" in tex
    assert "27.20 $\\pm$ 0.28" in tex and "25.25 $\\pm$ 0.35\\textsuperscript{\\dag}" in tex
    assert tex.index("multi-bleu.perl") > tex.index("\\end{tabular}"), "the footnotes follow the table"
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["wide.md", "wide.tex"]


def test_significance_marks_say_better_or_worse(tmp_path):
    """A system significantly worse than the baseline gets its own mark, never the dagger of a gain; for TER
    lower is better (the records say which way each run differs); runs that differ both ways get no mark."""
    long = collected(tmp_path, seeded_records())
    sig = pd.DataFrame(
        [
            ("en-de", "convs2s", 1, "bleu", 0.001, "worse"),
            ("en-de", "convs2s", 2, "bleu", 0.01, "worse"),
            ("en-de", "convs2s", 1, "ter", 0.001, "better"),
            ("en-de", "convs2s", 2, "ter", 0.002, "worse"),
            ("en-de", "transformer_base", "ensemble", "bleu", 0.002, "better"),
            ("en-de", "transformer_base", "ensemble", "ter", 0.001, "better"),
            ("en-de", "transformer_base", 1, "bleu", None, None),
        ],
        columns=["pair", "model", "seed", "metric", "p_value", "direction"],
    ).assign(
        testset="newstest2014",
        stage="baseline",
        baseline_arch="transformer",
        baseline_size="base",
        baseline_data="parallel",
        baseline_seed=1,
    )
    table, notes = wide_table(summarize_seeds(long), significance=sig)
    assert table.loc["ConvS2S (wmt14_en_de)"].tolist()[:2] == ["25.25 ± 0.35‖", "59.50 ± 0.71"]
    assert table.loc["Transformer (base) ensemble"].tolist()[:2] == ["28.00†", "50.00†"]
    assert notes == [
        "† significantly better, ‖ significantly worse than the baseline system (Transformer (base)) at p < 0.05 "
        "(better: a higher BLEU or chrF, a lower TER; sacreBLEU paired bootstrap resampling; over several seeds: "
        "for every seed, the same way)."
    ]
    worse_only = sig[sig["direction"] != "better"]
    assert wide_table(summarize_seeds(long), significance=worse_only)[1][0].startswith(
        "‖ significantly worse than the baseline system (Transformer (base)) at p < 0.05"
    )
    write_wide(table, notes, tmp_path / "w.md", tmp_path / "w.tex")
    tex = (tmp_path / "w.tex").read_text()
    assert "25.25 $\\pm$ 0.35\\textsuperscript{$\\|$}" in tex and "28.00\\textsuperscript{\\dag}" in tex


def test_wide_table_labels_data_and_several_test_sets(tmp_path):
    records = [
        {**record("tb", 30.0), "size": "base", "seed": 1},
        {**record("tb", 31.0, stage="bt_tagged"), "size": "base", "seed": 1},
        {**record("tb", 20.0), "size": "base", "seed": 1, "testset": "newstest2017"},
        {**record("tb", 10.0, pair="en-fr"), "size": "base", "seed": 1},
    ]
    table, notes = wide_table(summarize_seeds(collected(tmp_path, records)), metrics=("bleu",))
    assert list(table.index) == ["Transformer (base)", "Transformer (base), parallel+bt (beam5)"]
    assert list(table.columns) == [
        ("EN-DE newstest2017", "BLEU"),
        ("EN-DE test_2016_flickr", "BLEU"),
        ("EN-FR", "BLEU"),
    ]
    assert table.loc["Transformer (base)"].tolist() == ["20.00", "30.00", "10.00"]
    assert table.loc["Transformer (base), parallel+bt (beam5)"].tolist() == ["", "31.00", ""] and notes == []
    write_wide(table, notes, tmp_path / "w.md", tmp_path / "w.tex")
    assert "EN-DE test\\_2016\\_flickr" in (tmp_path / "w.tex").read_text()


def test_cost_columns_price_pivot_cascades_and_shared_multilingual_models(tmp_path):
    """Each pair's group: a bilingual model costs one model, a pivot cascade its two, a multilingual model one,
    shared by the pairs it serves and shown in each of their groups."""
    m2m = {"arch": "transformer", "size": "small", "stage": "multilingual", "data": "multilingual (m2m: 2 directions)"}
    records = [
        {**record("t", 30.0), "size": "small", "seed": 1, "models_trained": 1, "train_seconds": 600.0},
        {**record("m2m", 29.0), **m2m, "seed": 1, "models_trained": 1, "shared_by": 3, "train_seconds": 1500.0},
        {
            **record("m2m", 9.0, pair="de-fr"),
            **m2m,
            "stage": "zero_shot",
            "data": "zero-shot (m2m: 2 directions)",
            "seed": 1,
            "models_trained": 1,
            "shared_by": 3,
            "train_seconds": 1500.0,
        },
        {
            **record("t", 12.0, pair="de-fr", stage="pivot"),
            "size": "small",
            "data": "pivot via en",
            "seed": 1,
            "models_trained": 2,
            "train_seconds": 1230.0,
        },
    ]
    summary = summarize_seeds(collected(tmp_path, records))
    table, notes = wide_table(summary, metrics=("bleu",), costs=True)
    assert list(table.columns) == [
        (pair, name) for pair in ("DE-FR", "EN-DE") for name in ("BLEU", "models", "train min")
    ]
    assert table.loc["Transformer (small)"].tolist() == ["", "", "", "30.00", "1", "10.0"]
    assert table.loc["Transformer (small), multilingual (m2m: 2 directions)"].tolist() == [
        "",
        "",
        "",
        "29.00",
        "1, shared by 3 pairs",
        "25.0",
    ]
    assert table.loc["Transformer (small), pivot via en"].tolist()[:3] == ["12.00", "2", "20.5"]
    assert table.loc["Transformer (small), zero-shot (m2m: 2 directions)"].tolist()[:3] == [
        "9.00",
        "1, shared by 3 pairs",
        "25.0",
    ]
    assert notes[-1].startswith("models, train min: the models a row trained")
    assert list(wide_table(summary, metrics=("bleu",))[0].columns) == [("DE-FR", "BLEU"), ("EN-DE", "BLEU")]


def test_bleu_lc_tok_stands_beside_bleu_where_a_test_set_has_it(tmp_path):
    """Only the test set scored against an official tokenized reference gets the column; no marks, and a note."""
    records = [
        {**record("tb", 30.0), "size": "base", "seed": 1, "bleu_lc_tok": 38.5},
        {**record("tb", 31.0), "size": "base", "seed": 2, "bleu_lc_tok": 39.5},
        {**record("tb", 20.0), "size": "base", "seed": 1, "testset": "newstest2017"},
    ]
    long = collected(tmp_path, records)
    assert list(long.columns[8:12]) == ["bleu", "chrf", "ter", "bleu_lc_tok"]
    summary = summarize_seeds(long)
    flickr = summary[summary["testset"] == "test_2016_flickr"].iloc[0]
    assert (flickr["bleu_lc_tok_mean"], flickr["bleu_lc_tok_std"]) == pytest.approx((39.0, 0.7071), abs=1e-4)
    sig = pd.DataFrame(
        [("tb", 1, m, 0.001) for m in ("bleu", "chrf", "ter")], columns=["model", "seed", "metric", "p_value"]
    ).assign(pair="en-de", testset="test_2016_flickr", stage="baseline", direction="better")
    table, notes = wide_table(summary, metrics=("bleu", "chrf"), significance=sig)
    assert list(table.columns) == [
        ("EN-DE newstest2017", "BLEU"),
        ("EN-DE newstest2017", "chrF"),
        ("EN-DE test_2016_flickr", "BLEU"),
        ("EN-DE test_2016_flickr", "BLEU (lc tok)"),
        ("EN-DE test_2016_flickr", "chrF"),
    ]
    assert table.loc["Transformer (base)"].tolist()[2:] == ["30.50 ± 0.71†", "39.00 ± 0.71", "50.00 ± 0.00†"]
    assert notes[-1].startswith("BLEU (lc tok): ") and "multi-bleu.perl" in notes[-1]
    # Without BLEU among the metrics there is nothing to stand beside; without any score, no column and no note.
    assert [c for _, c in wide_table(summary, metrics=("ter",))[0].columns] == ["TER", "TER"]
    plain, plain_notes = wide_table(summarize_seeds(collected(tmp_path, [record("tb", 30.0)])))
    assert [c for _, c in plain.columns] == ["BLEU", "TER"] and plain_notes == []


def test_wide_table_errors_are_one_line(tmp_path):
    summary = summarize_seeds(collected(tmp_path, [record("m", 20.0)]))
    with pytest.raises(ConfigError) as excinfo:
        wide_table(summary, published=[{"system": "x", "pair": "en-de"}])
    assert_one_line(excinfo, "published result 1", "citation")
    with pytest.raises(ConfigError) as excinfo:
        wide_table(summary, metrics=("bleu", "meteor"))
    assert_one_line(excinfo, "meteor")


def test_the_long_table_says_where_each_translation_was_decoded_and_the_tables_warn_of_a_mix(tmp_path, caplog):
    """A run begun on a laptop and finished on a GPU node: the rows say which device and precision decoded them, and
    the tables' notes (and the log) name the runs of each."""
    scores, decodings = [], []
    runs = [("rnn", 1, "cpu", "float32"), ("tf", 1, "cuda", "bfloat16"), ("tf", "ensemble", "cuda", "bfloat16")]
    for model, seed, device, precision in runs:
        hyp = f"results/en-de/{model}/baseline/{seed}/translations/test.de"
        scores.append(tmp_path / f"{model}.{seed}.json")
        scores[-1].write_text(json.dumps({**record(model, 20.0), "seed": seed, "hyp": hyp}))
        decodings.append(tmp_path / f"{model}.{seed}.decoding.json")
        decodings[-1].write_text(json.dumps({"hyp": "./" + hyp, "device": device, "precision": precision}))
    long = collect_scores(scores, decodings[::-1])  # joined by the translation's path, not by position
    decoded = long[["model", "decode_device", "decode_precision"]].values.tolist()
    assert decoded == [[model, device, precision] for model, _, device, precision in runs]
    assert list(long.columns).index("decode_device") == list(long.columns).index("device") + 1
    with caplog.at_level("WARNING", logger="nmt.evaluation.tables"):
        (note,) = decoding_notes(long)
    assert "cpu float32: en-de rnn/baseline/seed1;" in note
    assert "cuda bfloat16: en-de tf/baseline/seed1, en-de tf/baseline/ensemble." in note
    assert note in caplog.text
    assert decoding_notes(long[long["model"] == "tf"]) == [], "one device and precision: nothing to say"
    assert decoding_notes(collect_scores(scores)) == [], "without decoding records, no columns"
    with pytest.raises(DataError) as excinfo:
        collect_scores(scores, decodings[:1])
    assert_one_line(excinfo, "results/en-de/tf/baseline/1/translations/test.de")


def test_tables_and_figures_of_systems_no_longer_configured_are_removed(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    current = ["results/plots/en-de.comparison.png", "results/plots/en-de.rnn.baseline.seed1.png"]
    gone = [
        "results/plots/en-fr.comparison.png",  # a pair removed
        "results/plots/en-de.convs2s.baseline.seed1.png",  # a model removed
        "results/plots/en-de.rnn.baseline.seed2.png",  # a seed removed
        "results/plots/en-de.rnn.bt_beam.seed1.png",  # a back-translation variant removed
        "results/plots/multilingual.m2m.seed1.png",  # a multilingual system removed
    ]
    distillation = [f"results/tables/distillation.{ext}" for ext in ("md", "csv")] + ["results/plots/distillation.png"]
    distillation.append("results/tables/distillation_timing.json")
    others = ["results/plots/notes.png", "results/tables/table.md", "results/tables/scores.csv"]  # not a system's
    for path in current + gone + distillation + others:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("")
    assert sorted(map(str, stale_results("results", current, distillation=True))) == sorted(gone)
    assert sorted(map(str, stale_results("results", current, distillation=False))) == sorted(gone + distillation)
    with caplog.at_level("WARNING", logger="nmt.evaluation.tables"):
        removed = remove_stale_results("results", [str(tmp_path / p) for p in current], distillation=False)
    assert sorted(map(str, removed)) == sorted(gone + distillation)
    assert all(Path(p).is_file() for p in current + others) and not any(Path(p).exists() for p in gone + distillation)
    assert all(f"removing {p}" in caplog.text for p in gone + distillation)
    assert remove_stale_results("results", current, distillation=False) == [], "nothing left to remove"


def test_budget_notes_say_what_a_models_systems_held_equal():
    """A model trained on the parallel data and with back-translation gets a note: the updates held equal (or each
    system's), and each system's training minutes; a model with one system gets none."""
    row = dict(pair="en-de", testset="t", model="transformer", arch="transformer", size="small", seed=1)
    long = pd.DataFrame(
        [
            {**row, "stage": "baseline", "data": "parallel", "steps": 5000, "train_seconds": 1800},
            {**row, "stage": "baseline", "data": "parallel", "steps": 5000, "train_seconds": 1700, "seed": 2},
            {**row, "stage": "bt", "data": "parallel+bt (greedy)", "steps": 5000, "train_seconds": 1902},
            {
                **row,
                "model": "rnn",
                "arch": "rnn",
                "stage": "baseline",
                "data": "parallel",
                "steps": 1,
                "train_seconds": 6,
            },
        ]
    )
    assert budget_notes(long) == [
        "EN-DE Transformer (small): the systems trained 5,000 updates each (held equal); "
        "training minutes: parallel 30.0; parallel+bt (greedy) 31.7."
    ]
    long.loc[2, "steps"] = 6000
    assert "different numbers of updates: parallel 5,000; parallel+bt (greedy) 6,000" in budget_notes(long)[0]
    # A second model of the same architecture and size (a student): each note names its model, as the rows do.
    student = long.iloc[:3].assign(model="student", steps=20)
    assert [note.split(":")[0] for note in budget_notes(pd.concat([long, student]))] == [
        "EN-DE Transformer (small) (transformer)",
        "EN-DE Transformer (small) (student)",
    ]


def test_the_significance_note_names_each_pairs_baseline_by_its_row():
    """Pairs tested against different systems (a pivot row where no bilingual model exists) are named per pair, and
    a baseline whose label other rows share is named by its row's label, model and stage included."""
    row = dict(testset="t", arch="transformer", size="small", seed=1, bleu=30.0, data="parallel")
    summary = summarize_seeds(
        pd.DataFrame(
            [
                {**row, "pair": "en-de", "model": "transformer", "stage": "baseline"},
                {**row, "pair": "en-de", "model": "student", "stage": "baseline"},
                {**row, "pair": "de-fr", "model": "transformer", "stage": "pivot", "data": "pivot via en"},
                {**row, "pair": "de-fr", "model": "m2m", "stage": "multilingual", "data": "zero-shot"},
            ]
        )
    )
    tested = dict(testset="t", seed=1, metric="bleu", p_value=0.001, direction="better", baseline_seed=1)
    base = dict(baseline_arch="transformer", baseline_size="small")
    significance = pd.DataFrame(
        [
            {**tested, **base, "pair": "en-de", "model": "student", "stage": "baseline", "baseline_data": "parallel",
             "baseline_model": "transformer", "baseline_stage": "baseline"},
            {**tested, **base, "pair": "de-fr", "model": "m2m", "stage": "multilingual",
             "baseline_data": "pivot via en", "baseline_model": "transformer", "baseline_stage": "pivot"},
        ]
    )  # fmt: skip
    _, notes = wide_table(summary, significance=significance)
    assert notes[0].startswith(
        "† significantly better than the baseline system (EN-DE: Transformer (small) (transformer, baseline); "
        "DE-FR: Transformer (small), pivot via en) at p < 0.05"
    ), notes
