"""Paired bootstrap resampling with sacrebleu on real references: a degraded system, an exact copy, the records."""

import gzip
import os
import random

import pandas as pd
import pytest
from conftest import MIRROR, assert_one_line, write_lines

from nmt.errors import ConfigError, DataError
from nmt.evaluation.significance import paired_bootstrap, read_significance, significance_frame, write_significance

TEST_DE = MIRROR / "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/test_2016_flickr.de.gz"
needs_mirror = pytest.mark.skipif(not TEST_DE.is_file(), reason=f"Multi30k test set not found at {TEST_DE}")


def drop_words(sents: list[str], rate: float, seed: int) -> list[str]:
    """A worse "translation": every word dropped with probability ``rate`` (seeded)."""
    rng = random.Random(seed)
    return [" ".join(w for w in sent.split() if rng.random() >= rate) for sent in sents]


@pytest.fixture(scope="module")
def systems(tmp_path_factory) -> dict:
    """300 real German references; a baseline (5% of words dropped), a worse system (30%) and a copy."""
    if not TEST_DE.is_file():
        pytest.skip(f"Multi30k test set not found at {TEST_DE}")
    root = tmp_path_factory.mktemp("bootstrap")
    with gzip.open(TEST_DE, "rt", encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f][:300]
    baseline = drop_words(refs, 0.05, seed=1)
    return {
        "ref": write_lines(root / "ref.de", refs),
        "hyps": {
            "baseline": write_lines(root / "baseline.de", baseline),
            "worse": write_lines(root / "worse.de", drop_words(refs, 0.3, seed=2)),
            "copy": write_lines(root / "copy.de", baseline),
        },
    }


@pytest.fixture(scope="module")
def records(systems) -> list[dict]:
    return paired_bootstrap(systems["ref"], systems["hyps"], "baseline", trg_lang="de", n_samples=1000)


@needs_mirror
@pytest.mark.parametrize("metric", ["bleu", "chrf", "ter"])
def test_worse_system_is_significant_and_a_copy_is_not(records, metric):
    by_system = {r["system"]: r for r in records if r["metric"] == metric}
    assert list(by_system) == ["baseline", "worse", "copy"], "the baseline comes first"
    base, worse, copy = by_system["baseline"], by_system["worse"], by_system["copy"]
    assert base["p_value"] is None and base["significant"] is False and base["direction"] is None
    assert worse["significant"] and worse["p_value"] < 0.01
    assert worse["direction"] == "worse", "TER counts errors: a higher TER is worse"
    assert copy["p_value"] == 1.0 and not copy["significant"] and copy["direction"] is None
    assert copy["score"] == base["score"] and copy["mean"] == base["mean"] and copy["ci95"] == base["ci95"]
    # TER counts errors: the worse system has more; BLEU and chrF fall.
    assert (worse["score"] > base["score"]) if metric == "ter" else (worse["score"] < base["score"])
    assert base["mean"] - 3 * base["ci95"] < base["score"] < base["mean"] + 3 * base["ci95"]
    assert 0 < base["ci95"] < 5
    assert "bs:1000" in base["signature"] and "seed:12345" in base["signature"]


@needs_mirror
def test_a_better_system_is_marked_better(systems):
    """The test is two-sided: the record says which way the system differs, by each metric's direction."""
    records = paired_bootstrap(systems["ref"], systems["hyps"], "worse", trg_lang="de", n_samples=200)
    better = {r["metric"]: r for r in records if r["system"] == "baseline"}  # tested against "worse" this time
    worse = {r["metric"]: r for r in records if r["system"] == "worse"}
    assert [r["direction"] for r in better.values()] == ["better"] * 3
    # Significant, not only ahead: 200 resamples of 300 sentences never favour the system that drops 30% of the words.
    assert all(r["significant"] and r["p_value"] < 0.01 for r in better.values()), better
    assert all(r["p_value"] is None and not r["significant"] for r in worse.values()), "the baseline is not tested"
    assert better["ter"]["score"] < worse["ter"]["score"] and better["bleu"]["score"] > worse["bleu"]["score"]


@needs_mirror
def test_scores_match_the_metrics_module(systems, records):
    from nmt.evaluation.metrics import score_files

    plain = score_files(systems["hyps"]["worse"], systems["ref"], "de")
    for r in records:
        if r["system"] == "worse":
            assert round(r["score"], 2) == plain[r["metric"]]["score"]


def test_line_count_mismatch_names_both_files(tmp_path):
    ref = write_lines(tmp_path / "ref.de", ["a b", "c d"])
    hyp = write_lines(tmp_path / "hyp.de", ["a b"])
    with pytest.raises(DataError) as excinfo:
        paired_bootstrap(ref, {"base": ref, "sys": hyp}, "base")
    assert_one_line(excinfo, ref, hyp)


def test_unknown_baseline_is_one_line(tmp_path):
    ref = write_lines(tmp_path / "ref.de", ["a b"])
    with pytest.raises(DataError) as excinfo:
        paired_bootstrap(ref, {"base": ref}, "transformer")
    assert_one_line(excinfo, "transformer", "base")


def test_the_baseline_is_taken_by_name_wherever_it_is_among_the_systems(tmp_path):
    """The rule names its runs and its baseline (a new baseline may only reorder the same translations)."""
    ref = write_lines(tmp_path / "ref.de", ["ein Hund läuft", "eine Katze schläft", "ein Mann isst"])
    hyps = {
        "transformer/baseline/seed1": write_lines(tmp_path / "t.de", ["ein Hund", "eine Katze", "ein Mann"]),
        "rnn/baseline/seed1": write_lines(tmp_path / "r.de", ["ein Hund läuft", "eine Katze", "ein Mann isst"]),
    }
    records = paired_bootstrap(ref, hyps, "rnn/baseline/seed1", n_samples=20)
    tested = [r["system"] for r in records if r["metric"] == "bleu"]
    assert tested == ["rnn/baseline/seed1", "transformer/baseline/seed1"], "the baseline first"
    assert {r["baseline"] for r in records} == {"rnn/baseline/seed1"}
    assert {r["baseline_hyp"] for r in records} == {str(hyps["rnn/baseline/seed1"])}
    chrf = {r["system"]: r for r in records if r["metric"] == "chrf"}
    assert chrf["transformer/baseline/seed1"]["direction"] == "worse", "tested against the RNN, which has more words"


def test_records_round_trip_json_and_tsv(tmp_path):
    records = [
        {
            "system": "b",
            "metric": "bleu",
            "score": 30.5,
            "mean": 30.4,
            "ci95": 1.2,
            "p_value": None,
            "significant": False,
            "direction": None,
            "baseline": "b",
            "n_samples": 1000,
            "seed": 12345,
            "hyp": "b.de",
            "baseline_hyp": "b.de",
            "ref": "ref.de",
            "signature": "nrefs:1|bs:1000",
        },
        {
            "system": "s",
            "metric": "bleu",
            "score": 20.5,
            "mean": 20.4,
            "ci95": 1.1,
            "p_value": 0.001,
            "significant": True,
            "direction": "worse",
            "baseline": "b",
            "n_samples": 1000,
            "seed": 12345,
            "hyp": "s.de",
            "baseline_hyp": "b.de",
            "ref": "ref.de",
            "signature": "nrefs:1|bs:1000",
        },
    ]
    for name in ("sig.json", "sig.tsv"):
        write_significance(records, tmp_path / "out" / name)
        assert read_significance(tmp_path / "out" / name) == records
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["sig.json", "sig.tsv"], "no temporary files left"
    (tmp_path / "bad.tsv").write_text("system\tp\nb\t0.1\n")
    with pytest.raises(DataError) as excinfo:
        read_significance(tmp_path / "bad.tsv")
    assert_one_line(excinfo, "bad.tsv", "p_value")


def test_significance_frame_joins_records_to_scores_by_translation_path():
    long = pd.DataFrame(
        [
            {
                "pair": "en-de",
                "testset": "t",
                "model": "tb",
                "arch": "transformer",
                "size": "base",
                "stage": "baseline",
                "data": "parallel",
                "seed": 1,
                "hyp": "results/en-de/tb/baseline/1/t.de",
            },
            {
                "pair": "en-de",
                "testset": "t",
                "model": "tb",
                "arch": "transformer",
                "size": "base",
                "stage": "bt",
                "data": "parallel+bt",
                "seed": "ensemble",
                "hyp": "results/en-de/tb/bt/ensemble/t.de",
            },
        ]
    )
    base, ens = "results/en-de/tb/baseline/1/t.de", "./results/en-de/tb/bt/ensemble/t.de"
    records = [
        {"metric": "bleu", "p_value": None, "direction": None, "hyp": base, "baseline_hyp": base},
        {"metric": "bleu", "p_value": 0.01, "direction": "worse", "hyp": ens, "baseline_hyp": base},
    ]
    frame = significance_frame(records, long)
    assert frame[["model", "stage", "seed", "metric"]].values.tolist() == [
        ["tb", "baseline", 1, "bleu"],
        ["tb", "bt", "ensemble", "bleu"],
    ]
    assert pd.isna(frame["p_value"][0]) and frame["p_value"][1] == 0.01, "the baseline has no p-value"
    assert pd.isna(frame["direction"][0]) and frame["direction"][1] == "worse"
    assert set(frame["baseline_size"]) == {"base"} and set(frame["baseline_seed"]) == {1}
    with pytest.raises(DataError) as excinfo:
        significance_frame([{**records[0], "hyp": "other.de"}], long)
    assert_one_line(excinfo, "other.de")


def test_seed_reaches_sacrebleu_and_the_environment_is_restored(tmp_path, monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    ref = write_lines(tmp_path / "ref.de", ["ein Hund läuft", "eine Katze schläft", "ein Mann isst"])
    hyp = write_lines(tmp_path / "hyp.de", ["ein Hund", "eine Katze schläft", "ein Mann"])
    records = paired_bootstrap(ref, {"base": ref, "sys": hyp}, "base", n_samples=50, seed=7)
    assert {"bs:50", "seed:7"} <= set(records[0]["signature"].split("|"))
    assert "SACREBLEU_SEED" not in os.environ
    with pytest.raises(ConfigError) as excinfo:
        paired_bootstrap(ref, {"base": ref}, "base", seed=0)
    assert_one_line(excinfo, "seed")
