"""The evaluation's jobs rerun when what they depend on changes, where Snakemake sees neither the order of a job's
inputs (a new significance baseline) nor the machine (the device and precision of a decoding): tiny real runs of
translate_test and compute_significance on untrained toy models, then dry runs with other configs."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sentencepiece as spm
import yaml
from conftest import REPO, make_toy_corpus, tiny_model, write_lines

from nmt.decoding.translation import decoding_record
from nmt.model_dir import write_model

CONFIG = {
    "pairs": ["en-de"],
    "corpora": {name: {"url": f"https://example.org/{name}.{{lang}}.gz"} for name in ("train", "dev", "test")},
    "data": {"train": ["train"], "dev": "dev", "test": ["test"]},
    "models": {"transformer": {"arch": "transformer", "size": "tiny"}, "rnn": {"arch": "rnn", "size": "tiny"}},
    "seeds": [1],
    "backtranslation": {"models": []},
    "decoding": {"beam_size": 2, "max_len_a": 0.0, "max_len_b": 5},
    "tables": {"bootstrap_samples": 20},
}
SIGNIFICANCE = "results/en-de/significance/test.json"
# The jobs under test; the others' files (the models, the test set) are taken as they are.
RULES = ["translate_test", "compute_significance"]


def snakemake(workdir: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
        + ["--cores", "1", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + out.stderr  # a dry run prints its jobs to stdout, a run to stderr


def run(workdir: Path, config: dict, dry: bool = False) -> list[tuple[str, str]]:
    """(rule, reason) of each job that Snakemake runs (or with ``dry`` plans) for the significance tests of
    ``config``, with what each job's reason says."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    out = snakemake(workdir, *(["-n"] if dry else []), SIGNIFICANCE, "--allowed-rules", *RULES)
    return re.findall(r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    reason: (.*)$", out, flags=re.M)


def with_models(models: dict) -> dict:
    return {**CONFIG, "models": models}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, toy_spm) -> Path:
    """A run of the significance tests of CONFIG: its test set and two untrained models, translated and tested for
    real."""
    root = tmp_path_factory.mktemp("reruns")
    vocab = spm.SentencePieceProcessor(model_file=str(toy_spm["en"])).get_piece_size()
    for name, model in CONFIG["models"].items():
        model_dir = root / f"results/en-de/{name}/baseline/seed1/model"
        model_dir.mkdir(parents=True)
        weights = tiny_model(model["arch"], vocab=vocab, seed=1)
        write_model(model_dir, {"spec": weights.spec, "model": weights.state_dict()}, toy_spm["en"], toy_spm["de"])
    src, trg = make_toy_corpus(20, seed=5)
    (root / "results/en-de/data/eval").mkdir(parents=True)
    write_lines(root / "results/en-de/data/eval/test.en", src)
    write_lines(root / "results/en-de/data/eval/test.de", trg)
    jobs = run(root, CONFIG)
    assert sorted(rule for rule, _ in jobs) == ["compute_significance", "translate_test", "translate_test"], jobs
    assert run(root, CONFIG, dry=True) == [], "an unchanged config plans nothing"
    return root


@pytest.mark.parametrize("bf16, precision", [("auto", "float32"), ("on", "bfloat16"), ("off", "float32")])
def test_the_record_says_what_the_settings_resolve_to(bf16, precision):
    record = decoding_record(tiny_model("rnn"), "cpu", bf16)
    assert (record["runtime"], record["device"], record["precision"]) == ("torch", "cpu", precision)
    assert (record["device_setting"], record["bf16_setting"]) == ("cpu", bf16)
    export = SimpleNamespace(translator=SimpleNamespace(device="cpu", compute_type="int8"))  # CTranslate2's own
    assert decoding_record(export)["precision"] == "int8" and decoding_record(export)["runtime"] == "ctranslate2"


def test_each_decoding_records_its_device_and_precision_and_their_settings_rerun_it(workdir):
    for model in CONFIG["models"]:
        record = json.loads((workdir / f"results/en-de/{model}/baseline/seed1/translations/test.de.json").read_text())
        assert record == {
            "hyp": f"results/en-de/{model}/baseline/seed1/translations/test.de",
            "runtime": "torch",
            "device": "cpu",  # auto, on a machine without a GPU
            "precision": "float32",
            "device_setting": "auto",
            "bf16_setting": "auto",
        }
    # The settings that decide them are params: a changed one redecodes that model's test sets (and retests them).
    for training in ({"bf16": "off"}, {"device": "cpu"}):
        models = {**CONFIG["models"], "rnn": {**CONFIG["models"]["rnn"], "training": training}}
        jobs = run(workdir, with_models(models), dry=True)
        assert [rule for rule, _ in jobs] == ["translate_test", "compute_significance"], (training, jobs)
        assert "Params have changed" in jobs[0][1], jobs


def test_a_new_baseline_reruns_the_significance_tests_against_it(workdir, tmp_path):
    """With one seed, a new baseline only reorders the same translations, which Snakemake compares sorted: the
    job's params name the baseline."""
    workdir = Path(shutil.copytree(workdir, tmp_path / "run", symlinks=True))
    rnn_first = with_models({"rnn": CONFIG["models"]["rnn"], "transformer": CONFIG["models"]["transformer"]})
    for config in ({**CONFIG, "tables": {**CONFIG["tables"], "baseline": "rnn"}}, rnn_first):
        jobs = run(workdir, config, dry=True)
        assert [rule for rule, _ in jobs] == ["compute_significance"], jobs
        assert "Params have changed" in jobs[0][1], jobs
    assert [rule for rule, _ in run(workdir, rnn_first)] == ["compute_significance"]
    records = json.loads((workdir / SIGNIFICANCE).read_text())
    rnn = "results/en-de/rnn/baseline/seed1/translations/test.de"
    assert {r["baseline_hyp"] for r in records} == {rnn} and {r["baseline"] for r in records} == {"rnn/baseline/seed1"}
    tested = [r["system"] for r in records if r["metric"] == "bleu"]
    assert tested == ["rnn/baseline/seed1", "transformer/baseline/seed1"], "the baseline first"
    assert all(r["p_value"] is None for r in records if r["hyp"] == rnn)
