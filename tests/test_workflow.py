"""The real Snakefile: lint, dry run, config errors, and the whole tiny pipeline against the shared mirror."""

import base64
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import MIRROR, REPO, html_tables

from nmt.model_dir import read_model_file

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
TINY = REPO / "tests" / "integration"
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline mirror {MIRROR} not found")


def snakemake(*args, workdir: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True, timeout=timeout
    )


def planned_jobs(workdir: Path, *overrides: str) -> Counter:
    """Rule -> jobs of a dry run with the ``--config`` values ``overrides`` (besides the mirror)."""
    out = snakemake("-n", "--config", f"mirror={MIRROR}", *overrides, workdir=workdir)
    assert out.returncode == 0, out.stderr[-2000:]
    return Counter(re.findall(r"^(?:local)?rule (\w+):", out.stdout, flags=re.M))


# After the tiny run: a changed setting reruns exactly the jobs that depend on it, and what follows them.
SCORING = {"score_translations": 0, "compute_significance": 1, "collect_scores": 1, "all": 1}
# The distillation jobs after a new teacher: its 2 parts, the corpus, the student's export, the timing and the table.
DISTILLED = {
    "distill_part": 2,
    "build_distilled_corpus": 1,
    "binarize_corpus": 1,
    "export_model": 1,
    "translate_export": 1,
    "time_distillation": 1,
    "tabulate_distillation": 1,
}
RERUNS = {
    # The Transformer's trainings (2 seeds x baseline and 2 variants), their translations (with the ensembles)
    # ... and as the teacher: its translations of the training source, the students trained on them.
    "models={transformer: {training: {max_steps: 41}}}": {
        "train_model": 8,
        "translate_test": 12,
        **SCORING,
        "score_translations": 12,
        "plot_learning_curves": 8,
        "plot_comparison": 1,
        **DISTILLED,
    },
    # The students decode with distillation.decoding: only the others' translations (and the teacher's row, timed
    # again with its students).
    "decoding={beam_size: 4}": {
        "translate_test": 15,
        **SCORING,
        "score_translations": 15,
        "time_distillation": 1,
        "tabulate_distillation": 1,
    },
    # One variant's back-translation: its 3 parts, its corpus, its second round (a forward model, its translation
    # of the English sample, a new reverse model, its back-translation), and the Transformer trained on it.
    "backtranslation={variants: {bt_beam: {generation: {beam_size: 3}}}}": {
        "backtranslate_part": 3,
        "build_synthetic_corpus": 1,
        "render_synthetic_report": 1,
        "binarize_round_corpus": 2,
        "train_round_model": 2,
        "forward_translate_part": 3,
        "build_forward_corpus": 1,
        "backtranslate_round_part": 3,
        "build_round_corpus": 1,
        "tabulate_rounds": 1,
        "binarize_corpus": 1,
        "train_model": 2,
        "translate_test": 3,
        **SCORING,
        "score_translations": 3,
        "plot_learning_curves": 2,
        "plot_comparison": 1,
    },
}


def check_reruns(workdir: Path) -> None:
    """Every setting of a rule is recorded: changing one reruns its jobs and what follows, nothing else."""
    for override, jobs in RERUNS.items():
        assert planned_jobs(workdir, override) == Counter(jobs), override
    subword = planned_jobs(workdir, "subword={vocab_size: 301}")
    assert subword["train_subword"] == 1 and subword["train_model"] == 14 and subword["train_reverse_model"] == 1
    assert not subword.keys() & {"download_corpus", "clean_corpus", "clean_monolingual", "split_monolingual"}
    cleaning = planned_jobs(workdir, "cleaning={max_ratio: 8.5}")
    assert cleaning["clean_corpus"] == 1 and cleaning["clean_monolingual"] == 1 and cleaning["train_model"] == 14
    assert not cleaning.keys() & {"download_corpus", "prepare_eval_set"}
    # A training corpus's own cleaning key: its cleaning, not the monolingual one's.
    own = planned_jobs(workdir, "corpora={multi30k_train: {cleaning: {max_ratio: 8.5}}}")
    assert own["clean_corpus"] == 1 and own["render_cleaning_report"] == 1 and own["train_model"] == 14
    assert not own.keys() & {"download_corpus", "prepare_eval_set", "clean_monolingual"}
    # A corpus weight: the trainings on the parallel data (and the reverse model's, hence the variants' corpora,
    # their rounds and their binarized sets), but neither the cleaning nor the binarized parallel data; not the
    # Transformer's baseline either, whose stages mix its one real corpus by share (a weight changes no share), so
    # neither its translations of the training source nor the students distilled from them.
    weight = planned_jobs(workdir, "corpora={multi30k_train: {weight: 2}}")
    assert weight["train_reverse_model"] == 1 and weight["train_model"] == 10 and weight["binarize_corpus"] == 2
    assert weight["train_round_model"] == 4 and "distill_part" not in weight
    assert not weight.keys() & {"download_corpus", "clean_corpus", "train_subword", "binarize_reverse_corpus"}
    # The job's threads are not a setting of the experiment: fewer cores rerun nothing.
    assert planned_jobs(workdir, "--cores", "1") == Counter()


def test_lint():
    out = snakemake("--lint")
    assert out.returncode == 0, out.stdout + out.stderr


def test_default_config_dry_run(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    out = snakemake("-n", "--config", f"mirror={MIRROR}", workdir=tmp_path)
    assert out.returncode == 0, out.stderr
    rules = ("download_corpus", "clean_corpus", "train_subword", "binarize_corpus", "train_model", "translate_test")
    for rule in (*rules, "collect_scores"):
        assert rule in out.stdout
    # The default includes back-translation (the jobs after the split checkpoint appear once it has run).
    for rule in ("clean_monolingual", "split_monolingual", "build_synthetic_corpus"):
        assert rule in out.stdout


@pytest.mark.parametrize("preset", sorted((REPO / "workflow/presets").glob("*.yaml")), ids=lambda p: p.stem)
def test_presets_validate_and_dry_run(tmp_path, preset):
    out = snakemake("-n", "--configfile", str(preset), "--replace-workflow-config", workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    for rule in ("download_corpus", "clean_corpus", "train_model", "compute_significance", "collect_scores"):
        assert rule in out.stdout
    if preset.stem.startswith("wmt14"):  # statmt.org archives, reference figures from the papers, a student
        assert "fetch_archive" in out.stdout and "split_distillation_source" in out.stdout
        assert yaml.safe_load(preset.read_text())["tables"]["published"]
    elif preset.stem == "multi30k_distill":  # the teacher, the student on the parallel data and on the distilled
        assert "split_distillation_source" in out.stdout and out.stdout.count("rule train_model:") == 3
    elif preset.stem == "multi30k_multilingual":  # 5 bilingual models, one-to-many, many-to-many, a pivot cascade
        assert out.stdout.count("rule train_model:") == 5 and out.stdout.count("rule train_multilingual_model:") == 2
        assert out.stdout.count("rule translate_pivot:") == 2 and out.stdout.count("rule translate_multilingual:") == 8
    else:  # Multi30k en-de and en-fr: Table I's shape on a CPU
        assert yaml.safe_load(preset.read_text())["pairs"] == ["en-de", "en-fr"]
        assert out.stdout.count("rule train_model:") == 6


@pytest.mark.parametrize(
    "override, message",
    [
        ({"corpora": {"x": {"importer": "hf", "url": "u{lang}"}}}, "key 'corpora.x.importer': 'hf' is not one of"),
        ({"corpora": {"x": {"importer": "opus", "corpus": "X"}}}, "corpora.x: importer 'opus' needs the key 'version'"),
        ({"corpora": {"x": {"url": "https://a/b.txt"}}}, "corpora.x: 'https://a/b.txt' needs a {lang} placeholder"),
        ({"training": {"lrr": 1}}, "key 'training': Additional properties are not allowed ('lrr' was unexpected)"),
        ({"decoding": {"beam_size": 0}}, "key 'decoding.beam_size': 0 is less than the minimum of 1"),
        ({"models": {"t": {"arch": "transformer", "d_modle": 8}}}, "models.t: unknown key 'd_modle'"),
        ({"models": {"t": {"arch": "rnn", "training": {"lr": "x"}}}}, "models.t.training.lr: expected float, got 'x'"),
        ({"data": {"train": ["nope"], "dev": "multi30k_val", "test": ["test_2016_flickr"]}}, "corpus 'nope' is not"),
        ({"backtranslation": {"models": ["lstm"]}}, "backtranslation.models: 'lstm' is not a key of models"),
        ({"training": {"seed": 3}}, "key 'training.seed': set the top-level list 'seeds' instead"),
        ({"seeds": [1, 1]}, "key 'seeds': [1, 1] has non-unique elements"),
        ({"tables": {"baseline": "lstm"}}, "tables.baseline: 'lstm' is not a key of models"),
        ({"tables": {"metrics": ["meteor"]}}, "key 'tables.metrics.0': 'meteor' is not one of"),
        ({"tables": {"published": [{"system": "x"}]}}, "key 'tables.published.0': 'citation' is a required property"),
        ({"backtranslation": {"models": ["rnn"], "variants": {"baseline": {}}}}, "key 'backtranslation.variants'"),
        (
            {"backtranslation": {"models": ["rnn"], "variants": {"bt": {"generation": {"method": "nucleus"}}}}},
            "backtranslation.variants.bt.generation.method: 'nucleus' is not one of",
        ),
        (
            {"backtranslation": {"models": ["rnn"], "reverse_model": {"arch": "rnn", "layers": 2}}},
            "backtranslation.reverse_model: unknown key 'layers'",
        ),
        ({"backtranslation": {"iterations": 0}}, "key 'backtranslation.iterations': 0 is less than the minimum of 1"),
        (
            {"multilingual": {"m": {"directions": ["en-de", "en-fr"], "model": "rnn"}}},
            "multilingual.m.directions: 'en-fr' has no data (neither en-fr nor fr-en is in pairs); add one of them to "
            "pairs, or translate it as a zero-shot direction (zero_shot)",
        ),
        (
            {"multilingual": {"m": {"directions": ["en-de", "de-en"], "model": "rnn", "zero_shot": ["de-fr"]}}},
            "multilingual.m.zero_shot: 'de-fr' needs the tag <2fr>, which is not in the subword model of m",
        ),
        (
            {"pivot": {"de-fr": "en"}},
            "pivot.de-fr: the chain de-en-fr needs a bilingual model for each step, but de-en, en-fr are not in pairs",
        ),
        (
            {
                "backtranslation": {"models": ["rnn"], "iterations": 2},
                "corpora": {"multi30k_mono1": {"url": "https://example.org/mono.tsv", "tsv_columns": {"de": 0}}},
            },
            "backtranslation.iterations: 2 rounds translate source-language (en) monolingual text, but "
            "corpora.multi30k_mono1 of data.mono has no 'en' side",
        ),
    ],
)
def test_config_errors_name_the_key(tmp_path, override, message):
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    for key, value in override.items():
        config[key] = {**config[key], **value} if key == "corpora" else value
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = snakemake("-n", workdir=tmp_path)
    assert out.returncode == 1
    assert out.stdout == ""
    # Nothing but Snakemake's notice that it applies profiles/default, and the one line.
    notice, line = out.stderr.strip().splitlines()
    assert notice.startswith("Using workflow specific profile") and "profiles/default" in notice, out.stderr
    assert line.startswith("config error: ") and message in line, out.stderr


def planned_inputs(stdout: str) -> dict[tuple[str, str], list[str]]:
    """(rule, first output) -> inputs of each job of a dry run's output."""
    jobs = {}
    for rule, block in re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):\n((?:    .*\n)+)", stdout, flags=re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, flags=re.M))
        jobs[rule, fields.get("output", "").split(", ")[0]] = fields.get("input", "").split(", ")
    return jobs


def test_iterative_backtranslation_plans_a_second_round(tmp_path):
    """iterations: 2: per variant, a forward model trains on the real corpora and round 1's synthetic corpus, a new
    reverse model on the real corpora and the forward-translated pairs reversed (the translations its sources), and
    the variant's systems on round 2's synthetic corpus; the source-language sample leaves out the training sources.
    (The jobs that translate parts join once the split checkpoints have run.)"""
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    out = snakemake("-n", "--config", f"mirror={MIRROR}", "backtranslation={iterations: 2}", workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    jobs = planned_inputs(out.stdout)
    counts = Counter(rule for rule, _ in jobs)
    rounds = {
        "clean_source_monolingual": 1,
        "split_source_monolingual": 1,
        "binarize_round_corpus": 4,
        "train_round_model": 4,
        "build_forward_corpus": 2,
        "build_round_corpus": 2,
        "tabulate_rounds": 2,
    }
    assert {rule: counts[rule] for rule in rounds} == rounds
    assert counts["train_model"] == 7 * 2 and counts["train_reverse_model"] == 1  # the systems and round 1 as before
    bt, clean = "results/en-de/backtranslation/bt_beam", "results/en-de/data/clean/multi30k_train"
    assert f"{clean}.en" in jobs["clean_source_monolingual", "results/en-de/data/mono/mono.en"]
    forward = jobs["binarize_round_corpus", "results/en-de/data/bin/bt_beam/round2/forward/train.json"]
    assert forward[:4] == [f"{clean}.en", f"{bt}/synthetic.en", f"{clean}.de", f"{bt}/synthetic.de"]
    reverse = jobs["binarize_round_corpus", "results/en-de/data/bin/bt_beam/round2/reverse/train.json"]
    translated = f"{bt}/round2/forward_corpus/synthetic"  # the forward model's German: the reverse model's sources
    assert reverse[:4] == [f"{clean}.de", f"{translated}.de", f"{clean}.en", f"{translated}.en"]
    assert (
        "results/en-de/data/bin/bt_beam/round2/reverse/train.json"
        in jobs["train_round_model", f"{bt}/round2/reverse/model.pt"]
    )
    systems = jobs["binarize_corpus", "results/en-de/data/bin/bt_beam/train.json"]
    assert systems[:4] == [f"{clean}.en", f"{bt}/round2/synthetic.en", f"{clean}.de", f"{bt}/round2/synthetic.de"]
    assert f"{bt}/rounds.md" in jobs["all", ""]


@pytest.mark.parametrize(
    "override, train_jobs",
    [
        # 4 models, 2 back-translation variants of the Transformer and the distilled student, per seed
        ("seeds=[1, 2, 3]", 7 * 3),
        ("training={max_steps: 100}", 7 * 2),
        ("models={t: {arch: transformer, size: tiny, d_model: 32}}", 8 * 2),
    ],
)
def test_nested_config_overrides(tmp_path, override, train_jobs):
    # Snakemake reads nested --config values as strings ('seeds=[1, 2]' gives ['1', '2']).
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    out = snakemake("-n", "--config", override, workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("rule train_model:") == train_jobs


def test_training_threads_set_how_many_trainings_share_the_cores(tmp_path):
    """``threads: 1`` in a training section: two single-thread trainings run side by side on two cores (more tokens
    per second in all than one training on both); unset, a training takes every core it may (up to 8)."""
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    for threads, expected in ((1, "1"), (0, "4")):  # 0: unset
        out = snakemake("-n", "--cores", "4", "--config", f"training={{threads: {threads}}}", workdir=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        jobs = re.findall(r"^rule (?:train_model|train_reverse_model):\n((?:    .*\n)+)", out.stdout, re.M)
        # A dry run names a job's threads when there are more than one.
        found = {(re.findall(r"^    threads: (\d+)$", job, re.M) or ["1"])[0] for job in jobs}
        assert len(jobs) == 7 * 2 + 1 and found == {expected}, jobs  # 14 systems' trainings and the reverse model
        # A data job fits beside single-thread trainings (else it waits for them: another pair's subword model).
        subword = re.findall(r"^rule train_subword:\n((?:    .*\n)+)", out.stdout, re.M)
        assert subword and all(("threads:" in job) == (threads == 0) for job in subword), subword


@pytest.mark.parametrize(
    "override, message",
    [
        ("training={max_steps: 0}", "key 'training.max_steps': 0 is less than the minimum of 1"),  # an int, not '0'
        ("seeds=[1, 2", "key 'seeds': --config value '[1, 2' is not YAML"),
    ],
)
def test_nested_config_override_errors(tmp_path, override, message):
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    out = snakemake("-n", "--config", override, workdir=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(f"config error: {message}"), out.stderr


def test_plain_yaml_switches_and_numbers(tmp_path):
    """YAML 1.1 reads `bf16: on` as True and `lr: 2e-3` as a string: the workflow reads them as the schema means
    them, in the config file, in a model's training section and in nested --config values."""
    text = (TINY / "config.yaml").read_text().replace("  lr: 0.002\n", "  lr: 2e-3\n  bf16: on\n")
    text = text.replace("    size: tiny\n  convs2s:", "    size: tiny\n    training: {bf16: off, lr: 1e-3}\n  convs2s:")
    assert "bf16: on" in text and "training: {bf16: off" in text
    (tmp_path / "config.yaml").write_text(text)
    overrides = ["decoding={max_len_a: 2e0}", "models={rnn: {arch: rnn, size: tiny, training: {bf16: on, lr: 5e-4}}}"]
    out = snakemake("-n", "--config", *overrides, workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("rule train_model:") == 7 * 2


@needs_mirror
def test_missing_mirror_file_is_one_clear_line(tmp_path):
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    config["corpora"]["multi30k_val"]["url"] = (
        "https://raw.githubusercontent.com/multi30k/dataset/master/nope.{lang}.gz"
    )
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(
        "--cores", "1", "results/data/download/multi30k_val.de", "--config", f"mirror={MIRROR}", workdir=tmp_path
    )
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "nope.de.gz" in errors[0], out.stderr


LANGS = ("en", "de")


@needs_mirror
def test_archive_and_tsv_importers(tmp_path):
    """Real Multi30k files served as a local tar.gz with members and as one TSV file, imported by the workflow."""
    raw = MIRROR / "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
    lines = {lang: gzip.decompress((raw / f"val.{lang}.gz").read_bytes()).decode().splitlines() for lang in LANGS}
    with tarfile.open(tmp_path / "val.tgz", "w:gz") as tar:
        for lang in LANGS:
            tar.add(raw / f"val.{lang}.gz", arcname=f"data/val.{lang}.gz")
    tsv = "".join(f"{en}\t{de}\n" for en, de in zip(lines["en"], lines["de"], strict=True))
    (tmp_path / "val.tsv").write_text(tsv, encoding="utf-8")
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    tar_spec = {"importer": "local", "path": str(tmp_path / "val.tgz"), "member": "data/val.{lang}.gz"}
    config["corpora"]["val_tar"] = tar_spec
    config["corpora"]["val_tsv"] = {"url": (tmp_path / "val.tsv").as_uri(), "tsv_columns": {"en": 0, "de": 1}}
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"results/data/download/{corpus}.{lang}" for corpus in ("val_tar", "val_tsv") for lang in ("en", "de")]
    out = snakemake("--cores", "2", *targets, workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    for lang in ("en", "de"):
        from_tar = workdir / f"results/data/download/val_tar.{lang}"
        assert gzip.decompress(from_tar.read_bytes()).decode().splitlines() == lines[lang]
        assert (workdir / f"results/data/download/val_tsv.{lang}").read_text().splitlines() == lines[lang]
        manifest = json.loads((workdir / f"results/data/download/val_tar.{lang}.manifest.json").read_text())
        assert manifest["member"] == f"data/val.{lang}.gz" and len(manifest["sha256"]) == 64
    assert (workdir / "results/data/archive/val_tar.manifest.json").exists()


@needs_mirror
def test_a_corpus_cleaning_key_reaches_only_that_corpus_jobs(tmp_path):
    """Two training corpora cleaned (Multi30k task 1, and task 2's independent descriptions as a stand-in for a
    second corpus): a cleaning key of one corpus changes the params of its clean_corpus job (and of its report
    page) and nothing else; a weight changes no data job."""
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    desc = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task2/raw/train.2.{lang}.gz"
    config["corpora"]["multi30k_desc"] = {"url": desc}
    config["data"]["train"] = ["multi30k_train", "multi30k_desc"]
    config["cleaning"] = {"max_pairs": 100}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    pages = [f"results/en-de/data/clean/{corpus}.report.html" for corpus in config["data"]["train"]]
    out = snakemake("--cores", "2", *pages, "--config", f"mirror={MIRROR}", workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    own = "corpora={multi30k_desc: {cleaning: {langid: false}}}"
    dry = snakemake("-n", *pages, "--config", f"mirror={MIRROR}", own, workdir=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = Counter(re.findall(r"^(?:local)?rule (\w+):", dry.stdout, flags=re.M))
    assert jobs == Counter({"clean_corpus": 1, "render_cleaning_report": 1}), dry.stdout
    assert re.findall(r"corpus=(\w+)", dry.stdout) == ["multi30k_desc", "multi30k_desc"]
    weight = snakemake(
        "-n", *pages, "--config", f"mirror={MIRROR}", "corpora={multi30k_desc: {weight: 2}}", workdir=tmp_path
    )
    assert weight.returncode == 0 and "Nothing to be done" in weight.stdout + weight.stderr
    # Cleaned with it: the report page lists the corpus's settings.
    out = snakemake("--cores", "2", *pages, "--config", f"mirror={MIRROR}", own, workdir=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    settings = [html_tables((tmp_path / page).read_text())[1] for page in pages]
    assert [dict(rows[1:])["langid"] for rows in settings] == ["true", "false"]


@pytest.mark.slow
@needs_mirror
def test_tiny_pipeline_end_to_end(tmp_path):
    """Download, clean, subword, train all three architectures, translate, score and tabulate on 400 real pairs;
    back-translate 300 German sentences in 3 parts and train the Transformer on two back-translation variants;
    distil the Transformer into a smaller student and decode its CTranslate2 int8 export."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    shutil.copy(TINY / "config.yaml", workdir / "config.yaml")
    # The reverse model trains data parallel: 2 processes under torchrun (gloo on CPU).
    two_processes = "train_reverse_model:processes=2"
    out = snakemake("--cores", "2", "--config", f"mirror={MIRROR}", "--set-resources", two_processes, workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    # The long table: every run (seeds 1 and 2, and their ensemble) of every system.
    table = pd.read_csv(workdir / "results/tables/scores.csv")
    systems = [
        ("convs2s", "baseline"),
        ("rnn", "baseline"),
        ("student", "baseline"),
        ("student", "distilled"),
        ("transformer", "baseline"),
        ("transformer", "bt_beam"),
        ("transformer", "bt_sample_tagged"),
    ]
    runs = ["1", "2", "ensemble"]
    assert list(zip(table["model"], table["stage"], table["seed"].astype(str), strict=True)) == [
        (model, stage, run) for model, stage in systems for run in runs
    ]
    assert list(table["data"]) == [
        *["parallel"] * 9,
        *["distilled (transformer tiny, beam2)"] * 3,
        *["parallel"] * 3,
        *["parallel+bt (beam2, 2 iterations)"] * 3,
        *["parallel+bt (sample-top5, tagged, 2 iterations)"] * 3,
    ]
    assert list(table["arch"]) == [m.replace("student", "transformer") for m in table["model"]]
    # The student sets d_model beside its size: its label says so.
    assert list(table["size"]) == ["tiny, d_model 32" if m == "student" else "tiny" for m in table["model"]]
    assert set(table["pair"]) == {"en-de"} and set(table["testset"]) == {"test_2016_flickr"}
    # 40 updates of a tiny model: scores are low, some systems may output nothing useful at all.
    assert table["bleu"].between(0, 100).all() and table["chrf"].between(0, 100).all() and table["chrf"].max() > 0
    assert (table["parameters"] > 0).all()
    ensembles = table[table["seed"] == "ensemble"]
    singles = table[table["seed"] != "ensemble"]
    assert list(ensembles["parameters"]) == list(singles.groupby(["model", "stage"], sort=False)["parameters"].sum())
    assert table["bleu_signature"].str.startswith("nrefs:1|case:mixed|eff:no|tok:13a").all()
    # test_2016_flickr has its official tokenized reference (tokenized_ref): BLEU as published papers count it too.
    assert table["bleu_lc_tok"].between(0, 100).all()
    assert table["bleu_lc_tok_signature"].str.startswith("nrefs:1|case:lc|eff:no|tok:none|smooth:none").all()
    seed1, seed2 = (
        json.loads((workdir / f"results/en-de/rnn/baseline/seed{n}/model/summary.json").read_text()) for n in (1, 2)
    )
    assert seed1["valid"]["loss"] != seed2["valid"]["loss"]  # two seeds, two different models
    for model in ("transformer", "rnn", "convs2s"):
        assert (workdir / f"results/benchmarks/train_model/en-de.{model}.baseline.seed1.tsv").exists()
    for run in ("seed1", "ensemble"):
        hyps = (workdir / f"results/en-de/transformer/baseline/{run}/translations/test_2016_flickr.de").read_text()
        assert len(hyps.splitlines()) == 1000
    # Per system: mean and sample std over the two seeds, and the ensemble rows.
    summary = pd.read_csv(workdir / "results/tables/summary.csv")
    assert len(summary) == 14 and list(summary["kind"]).count("ensemble") == 7
    rnn = summary[(summary["model"] == "rnn") & (summary["kind"] == "single")].iloc[0]
    bleus = table[(table["model"] == "rnn") & (table["seed"] != "ensemble")]["bleu"]
    assert rnn["bleu_mean"] == pytest.approx(bleus.mean()) and rnn["bleu_std"] == pytest.approx(
        bleus.std(), nan_ok=True
    )
    # Paired bootstrap: every run against the baseline's (transformer, the first model) first seed; the
    # baseline's second seed is not tested, its ensemble is.
    tests = json.loads((workdir / "results/en-de/significance/test_2016_flickr.json").read_text())
    assert len(tests) == 20 * 3 and {t["metric"] for t in tests} == {"bleu", "chrf", "ter"}
    assert not any("transformer/baseline/seed2" in t["hyp"] for t in tests)
    baseline = "results/en-de/transformer/baseline/seed1/translations/test_2016_flickr.de"
    assert {t["baseline_hyp"] for t in tests} == {baseline}
    assert all(t["p_value"] is None for t in tests if t["hyp"] == baseline)
    assert all(0 < t["p_value"] <= 1 for t in tests if t["hyp"] != baseline)
    # The wide table of papers: systems x (pair, metric), in Markdown and LaTeX.
    wide = (workdir / "results/tables/table.md").read_text()
    header = wide.splitlines()[0]
    columns = ["system", "EN-DE BLEU", "EN-DE BLEU (lc tok)", "EN-DE chrF", "EN-DE TER"]
    assert [c.strip() for c in header.strip("|").split("|")] == columns and "\nBLEU (lc tok): " in wide
    assert len([line for line in wide.splitlines() if line.startswith("| ")]) == 1 + 14
    assert "±" in wide and "ensemble" in wide
    assert "\\toprule" in (workdir / "results/tables/table.tex").read_text()
    plots = sorted(p.name for p in (workdir / "results/plots").iterdir())
    curves = [f"en-de.{m}.{s}.seed{n}.png" for m, s in systems for n in (1, 2)]
    assert plots == sorted(["distillation.png", "en-de.comparison.png", *curves])
    assert all((workdir / "results/plots" / p).read_bytes().startswith(b"\x89PNG") for p in plots)
    report = (workdir / "results/en-de/data/clean/multi30k_train.report.tsv").read_text().splitlines()
    assert "kept\t400\t" in "\n".join(report) and report[0] == "filter\tpairs\tshare"
    assert "| kept | 400 |" in (workdir / "results/en-de/data/clean/multi30k_train.report.md").read_text()
    assert (workdir / "results/data/download/multi30k_train.en.manifest.json").exists()
    # Back-translation: the monolingual sample, its 3 parts, and each variant's corpus (real + filtered synthetic).
    bt = workdir / "results/en-de/backtranslation"
    mono = json.loads((workdir / "results/en-de/data/mono/mono.report.json").read_text())
    assert mono["kept"] == 300 and mono["lines_in"] == 29000
    assert mono["dropped"]["sentence_form"] == 5091  # of train.1.de's 29,000 captions, once normalized
    assert not any(line[0].islower() for line in (workdir / "results/en-de/data/mono/mono.de").read_text().splitlines())
    assert sorted(p.name for p in (bt / "parts").glob("*.de")) == ["0000.de", "0001.de", "0002.de"]
    # Each training set encoded once: the parallel data both ways, each variant's real + synthetic corpora.
    synthetic = len((bt / "bt_sample_tagged/synthetic.en").read_text().splitlines())
    for stage, pairs in (("baseline", 400), ("reverse", 400), ("bt_sample_tagged", 400 + synthetic)):
        header = json.loads((workdir / f"results/en-de/data/bin/{stage}/train.json").read_text())
        assert header["pairs"] + header["dropped_by_length"] == pairs and header["src"]["dtype"] == "uint16"
    assert (bt / "reverse/model.pt").exists() and (bt / "reverse/src.model").exists()
    assert json.loads((bt / "reverse/summary.json").read_text())["processes"] == 2
    for variant in ("bt_beam", "bt_sample_tagged"):
        hyps = [line for part in sorted((bt / variant / "parts").iterdir()) for line in part.read_text().splitlines()]
        assert len(hyps) == 300
        report = json.loads((bt / variant / "report.json").read_text())
        assert report["synthetic_in"] == 300 and report["real_pairs"] == 400 and report["upsample_real"] == 1
        assert report["synthetic_pairs"] + sum(report["dropped"].values()) == 300
        src = (bt / variant / "synthetic.en").read_text().splitlines()
        assert len(src) == report["synthetic_pairs"]  # the real pairs train beside it, weighted by upsample_real
        assert sum(line.startswith("<BT> ") for line in src) == (report["synthetic_pairs"] if report["tagged"] else 0)
    check_iterations(workdir)
    assert "| en-de" in (workdir / "results/tables/scores.md").read_text()
    check_distillation(workdir)
    # Everything is up to date: a second run has nothing to do.
    again = snakemake("--cores", "2", "-n", "--config", f"mirror={MIRROR}", workdir=workdir)
    assert "Nothing to be done" in again.stdout + again.stderr
    check_reruns(workdir)
    check_report(workdir)


@pytest.mark.slow
@needs_mirror
def test_multilingual_pivot_and_zero_shot_rows_end_to_end(tmp_path):
    """tests/integration/multilingual/config.yaml: bilingual models of en-de, de-en and en-fr, a many-to-many model
    of de-en, en-de, en-fr and fr-en (fr-en from en-fr's data) asked for de-fr zero-shot, and the cascade de-en-fr:
    every row scored in its pair's group, tested against the pair's reference, with its cost."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    shutil.copy(TINY / "multilingual" / "config.yaml", workdir / "config.yaml")
    out = snakemake("--cores", "2", "--config", f"mirror={MIRROR}", workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(workdir / "results/tables/scores.csv")
    bilingual = [(pair, "transformer", "baseline") for pair in ("en-de", "de-en", "en-fr")]
    multilingual = [(pair, "m2m", "multilingual") for pair in ("en-de", "de-en", "en-fr", "fr-en")]
    others = [("de-fr", "m2m", "zero_shot"), ("de-fr", "transformer", "pivot")]
    assert sorted(zip(table["pair"], table["model"], table["stage"], strict=True)) == sorted(
        bilingual + multilingual + others
    )
    assert table["bleu"].between(0, 100).all() and table["chrf"].between(0, 100).all() and table["chrf"].max() > 0
    rows = table.set_index(["pair", "stage"])
    assert (
        rows.loc[("de-fr", "pivot"), "data"] == "pivot via en" and rows.loc[("de-fr", "pivot"), "models_trained"] == 2
    )
    assert rows.loc[("de-fr", "zero_shot"), "data"] == "zero-shot (m2m: 4 directions, T=2)"
    assert set(table[table["model"] == "m2m"]["shared_by"]) == {5} and set(table["models_trained"]) == {1, 2}
    # The cascade's German -> English translation is kept, and its English -> French one scored.
    for lang in ("en", "fr"):
        hyps = workdir / f"results/de-fr/transformer/pivot/seed1/translations/test_2016_flickr.{lang}"
        assert len(hyps.read_text().splitlines()) == 1000
    # The model records its directions and tags; its training data carries them.
    model = workdir / "results/multilingual/m2m/seed1/model"
    meta = json.loads((model / "meta.json").read_text())
    assert meta["multilingual"]["tags"] == {"de": "<2de>", "en": "<2en>", "fr": "<2fr>"}
    assert meta["multilingual"]["directions"] == ["de-en", "en-de", "en-fr", "fr-en"] and meta["src_lang"] is None
    sources = (workdir / "results/multilingual/data/train/fr-en.fr").read_text().splitlines()
    assert len(sources) == 400 and all(line.startswith("<2en> ") for line in sources)
    header = json.loads((workdir / "results/multilingual/m2m/data/bin/train.json").read_text())
    assert [Path(f).name for f in header["src"]["files"]] == ["de-en.de", "en-de.en", "en-fr.en", "fr-en.fr"]
    # A pair without a bilingual model is tested against the pivot cascade, one with it against that model.
    tests = json.loads((workdir / "results/de-fr/significance/test_2016_flickr.json").read_text())
    assert {t["baseline_hyp"] for t in tests} == {
        "results/de-fr/transformer/pivot/seed1/translations/test_2016_flickr.fr"
    }
    tests = json.loads((workdir / "results/en-de/significance/test_2016_flickr.json").read_text())
    assert any("m2m/multilingual/seed1" in t["hyp"] and t["p_value"] is not None for t in tests)
    wide = (workdir / "results/tables/table.md").read_text()
    header = [c.strip() for c in wide.splitlines()[0].strip("|").split("|")]
    assert {"DE-FR BLEU", "DE-FR models", "DE-FR train min", "FR-EN BLEU"} <= set(header)
    assert "1, shared by 5 pairs" in wide and "Transformer (tiny), pivot via en" in wide
    directions = json.loads((workdir / "results/multilingual/m2m/seed1/directions.json").read_text())
    assert [(d["direction"], d["kind"]) for d in directions][-2:] == [("fr-en", "trained"), ("de-fr", "zero-shot")]
    assert (workdir / "results/plots/multilingual.m2m.seed1.png").read_bytes().startswith(b"\x89PNG")
    # nmt translate asks the model for a language by its tag, the normalization by the source language.
    translate = [sys.executable, "-m", "nmt", "translate", "--model", str(model), "--method", "greedy"]
    out = subprocess.run(
        [*translate, "--trg-lang", "fr", "--src-lang", "de"], input="Ein Hund.\n", capture_output=True, text=True
    )
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1, out.stderr
    out = subprocess.run(translate, input="Ein Hund.\n", capture_output=True, text=True)  # the target asked first
    assert out.returncode == 1 and "tags: de <2de>, en <2en>, fr <2fr>): give the target language" in out.stderr
    out = subprocess.run([*translate, "--trg-lang", "fr"], input="Ein Hund.\n", capture_output=True, text=True)
    assert out.returncode == 1 and "translates from de, en, fr: give the source language (--src-lang)" in out.stderr
    again = snakemake("--cores", "2", "-n", "--config", f"mirror={MIRROR}", workdir=workdir)
    assert "Nothing to be done" in again.stdout + again.stderr


def check_iterations(workdir: Path) -> None:
    """Round 2 of each variant: the English sample (without the training sources) translated by a forward model,
    a new reverse model trained on the real pairs and those reversed, and the variant's systems on its corpus."""
    bt = workdir / "results/en-de/backtranslation"
    mono_en = json.loads((workdir / "results/en-de/data/mono/mono.en.report.json").read_text())
    assert mono_en["kept"] == 300 and mono_en["dropped"]["in_train"] > 0
    assert sorted(p.name for p in (bt / "source_parts").glob("*.en")) == ["0000.en", "0001.en", "0002.en"]
    for variant in ("bt_beam", "bt_sample_tagged"):
        round2 = f"results/en-de/backtranslation/{variant}/round2"
        assert all((workdir / round2 / d / "model.pt").exists() for d in ("forward", "reverse"))
        header = json.loads((workdir / f"results/en-de/data/bin/{variant}/round2/reverse/train.json").read_text())
        files = ["results/en-de/data/clean/multi30k_train.de", f"{round2}/forward_corpus/synthetic.de"]
        assert header["src"]["files"] == files
        forward = json.loads((workdir / round2 / "forward_corpus/report.json").read_text())
        assert forward["synthetic_in"] == 300 and forward["synthetic_pairs"] > 0
        rounds = json.loads((bt / variant / "rounds.json").read_text())
        assert [r["round"] for r in rounds] == [1, 2] and rounds[1]["reverse_model"] == f"{round2}/reverse"
        systems = json.loads((workdir / f"results/en-de/data/bin/{variant}/train.json").read_text())
        assert systems["src"]["files"][-1] == f"{round2}/synthetic.en"


def check_distillation(workdir: Path) -> None:
    """The teacher translated the 400 training sources in 2 parts, the student learned from its translations
    alone, and the distillation table has the teacher, the student twice and the student's int8 export, timed alone
    on the machine, and the distilled student tested against the student on the original pairs."""
    kd = workdir / "results/en-de/distillation"
    assert sorted(p.name for p in (kd / "parts").glob("*.en")) == ["0000.en", "0001.en"]
    assert [len((kd / "teacher" / f"{n}.de").read_text().splitlines()) for n in ("0000", "0001")] == [200, 200]
    report = json.loads((kd / "report.json").read_text())
    assert report["real_pairs"] == 0 and report["synthetic_in"] == 400 and not report["tagged"]
    # Each pair of the distilled corpus is a source with the teacher's translation of it, in the order of the
    # parts; the pairs the filters dropped are the only ones missing.
    sources, teacher = (
        [line for n in ("0000", "0001") for line in (kd / folder / f"{n}.{lang}").read_text().splitlines()]
        for folder, lang in (("parts", "en"), ("teacher", "de"))
    )
    kept = list(zip(*((kd / f"train.{lang}").read_text().splitlines() for lang in ("en", "de")), strict=True))
    pairs = iter(zip(sources, teacher, strict=True))
    assert all(pair in pairs for pair in kept)  # in order: each kept pair is found after the one before
    assert len(kept) == report["synthetic_pairs"] == 400 - sum(report["dropped"].values()) > 0
    export = workdir / "results/en-de/student/distilled/seed1/model/ctranslate2/int8"
    assert (export / "model.bin").exists() and (export / "src.model").exists()
    translation = workdir / "results/en-de/student/distilled/seed1/ctranslate2/int8/translations/test_2016_flickr.de"
    assert len(translation.read_text().splitlines()) == 1000
    table = pd.read_csv(workdir / "results/tables/distillation.csv", dtype={"bleu_gain": str})
    systems = [
        "teacher transformer/baseline/ensemble, torch, beam 3",
        "student student/baseline/seed1, torch, greedy",
        "student student/distilled/seed1, torch, greedy",
        "student student/distilled/seed1, ctranslate2 int8, greedy",
    ]
    assert list(table["system"]) == systems
    # One job timed every row 3 times (rows interleaved) on the decoding jobs' thread, nothing else running.
    timing = json.loads((workdir / "results/tables/distillation_timing.json").read_text())
    assert [row["system"] for row in timing["rows"]] == systems
    assert timing["repeats"] == 3 and timing["threads"] == 1 and re.fullmatch(r"[0-9a-f]{7,}", timing["commit"])
    assert timing["cpu"] not in ("", "unknown")
    for row in timing["rows"]:
        assert len(row["repeats"]) == 3 and row["seconds"] == sorted(row["repeats"])[1] > 0
    seconds = [row["seconds"] for row in timing["rows"]]
    assert list(table["seconds"]) == seconds
    assert list(table["sentences_per_second"]) == [round(1000 / s, 1) for s in seconds]
    assert list(table["speedup"]) == [round(seconds[0] / s, 2) for s in seconds]  # from the unrounded seconds
    assert (table["size_mb"] > 0).all()
    check_ran_alone(workdir, "time_distillation")
    # The claim of distillation: the distilled student against the same student on the original pairs.
    gain = table["bleu_gain_score"]
    assert gain.notna().tolist() == [False, False, True, False]
    assert gain[2] == pytest.approx(table["bleu_score"][2] - table["bleu_score"][1])
    assert 0 < table["bleu_gain_p"][2] <= 1 and table["bleu_gain"][2].startswith(f"{gain[2]:+.2f}")
    md = (workdir / "results/tables/distillation.md").read_text()
    assert f"CPU {timing['cpu']}, 1 thread, commit {timing['commit']}." in md and "bleu_gain" in md
    assert (workdir / "results/plots/distillation.png").read_bytes().startswith(b"\x89PNG")


def check_ran_alone(workdir: Path, rule: str) -> None:
    """The one job of ``rule`` started when no other job was running, and no job started until it finished (from
    the log of the run that ran it: a job starts with its 'rule NAME:' block and ends with 'Finished jobid')."""
    logs = [log.read_text() for log in sorted((workdir / ".snakemake/log").glob("*.snakemake.log"))]
    text = next(text for text in logs if f"(Rule: {rule})" in text)  # the run that finished it, not a dry run
    events = re.finditer(
        r"^(?:local)?(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    jobid: (\d+)$|^Finished jobid: (\d+)", text, re.M
    )
    running: set[str] = set()
    timed = None
    for event in events:
        name, started, finished = event.groups()
        if finished:
            running.discard(finished)
            continue
        assert timed not in running, f"job {name} started beside {rule}"
        if name == rule:
            assert not running, f"{rule} started beside jobs {running}"
            timed = started
        running.add(started)
    assert timed is not None


def report_items(html: str) -> dict[str, dict]:
    """The items of Snakemake's HTML report by path (``results/...``): name, labels, caption, mime type, and
    ``data_uri``, the file itself (embedded)."""
    start = html.index("var results = ", html.index('<script id="results">')) + len("var results = ")
    items, _ = json.JSONDecoder().raw_decode(html, start)
    return items


def embedded_text(item: dict) -> str:
    """The text of a report item's embedded file (a base64 data URI)."""
    header, data = item["data_uri"].split(",", 1)
    assert header.endswith(";base64"), header
    return base64.b64decode(data).decode("utf-8")


def check_report(workdir: Path) -> None:
    """Snakemake's HTML report of the tiny run shows the numbers on the page: each table and data report is an
    embedded HTML page (shown inline; a CSV or JSON item would be a download link) with the values of its file."""
    out = snakemake("--report", "report.html", "--config", f"mirror={MIRROR}", workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    html = (workdir / "report.html").read_text()
    items = report_items(html)
    pages = [f"results/tables/{name}.html" for name in ("table", "summary", "scores", "significance")]
    pages += ["results/en-de/data/clean/multi30k_train.report.html", "results/en-de/data/mono/mono.report.html"]
    pages += [f"results/en-de/backtranslation/{variant}/report.html" for variant in ("bt_beam", "bt_sample_tagged")]
    for page in pages:
        assert items.get(page, {}).get("mime_type") == "text/html", page
    plots = ["results/plots/en-de.comparison.png", "results/plots/distillation.png"]
    plots += [
        f"results/plots/en-de.{model}.baseline.seed{seed}.png" for model in ("transformer", "rnn") for seed in (1, 2)
    ]
    for plot in plots:
        assert items.get(plot, {}).get("mime_type") == "image/png", plot
    # The main table's page holds the cells of table.csv, as a browser shows them.
    wide = pd.read_csv(workdir / "results/tables/table.csv", dtype=str, keep_default_na=False)
    assert html_tables(embedded_text(items[pages[0]])) == [[list(wide.columns), *wide.values.tolist()]]
    # Significance: every tested run's score and p-value.
    significance = embedded_text(items["results/tables/significance.html"])
    cells = {cell for table in html_tables(significance) for row in table for cell in row}
    for record in json.loads((workdir / "results/en-de/significance/test_2016_flickr.json").read_text()):
        assert f"{record['score']:.2f}" in cells, record
        if record["p_value"] is not None:
            assert f"{record['p_value']:.4f}" in {cell.removesuffix(" †") for cell in cells}, record
    # The data reports: cleaning per filter, the monolingual sample, each variant's corpus.
    [counts, _] = html_tables(embedded_text(items[pages[4]]))
    assert ["kept", "400", f"{100 * 400 / 29000:.2f}%"] in counts and ["lines_in", "29,000", "100.00%"] in counts
    [mono] = html_tables(embedded_text(items[pages[5]]))
    assert mono[1][:2] == ["lines_in", "29,000"] and mono[-1][:2] == ["kept", "300"]
    mixture, _ = html_tables(embedded_text(items[pages[7]]))
    assert mixture[1][:4] == ["real pairs", "400", "×1", "400"]
    # The workflow description and the captions (rendered from workflow/report/*.rst).
    captions = (
        "Neural machine translation experiments",
        "The main result table, as papers print it",
        "Paired bootstrap resampling",
        "back-translation variant bt_sample_tagged",
        "Learning curves of rnn (baseline)",
        "monolingual de sample",
        "Sequence-level knowledge distillation",
    )
    for text in captions:
        assert text in html, text
    assert "significant gain" not in html, "† and ‖ mark a direction"
    assert "significantly better" in html and "significantly worse" in html, "the marks are explained"


@pytest.mark.slow
@needs_mirror
def test_preempted_training_job_resumes_when_the_command_is_run_again(tmp_path):
    """SIGTERM to a running training job (what SLURM sends before the time limit) in its second training stage
    fails the job with a saved checkpoint; the same snakemake command then resumes it there instead of starting
    over, without training the finished first stage again, and ends with the weights of an uninterrupted run."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    stages = [{"data": {"real": 1}, "max_steps": 20}, {"data": {"real": 1}, "max_steps": 130, "lr": 0.001}]
    config["models"] = {"transformer": {"arch": "transformer", "size": "tiny", "training": {"stages": stages}}}
    config["backtranslation"] = {"models": []}
    del config["distillation"]
    config["training"].update(valid_every=1000, log_every=5, checkpoint_every=1000)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    target = "results/en-de/transformer/baseline/seed1/model/model.pt"
    command = [*SNAKEMAKE, "--directory", str(workdir), target, "--cores", "2", "--config", f"mirror={MIRROR}"]
    log = workdir / "results/logs/train_model/en-de.transformer.baseline.seed1.log"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while "step 10 |" not in (log.read_text() if log.exists() else "").partition("stage 2 of 2")[2]:  # in stage 2
        assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    # The job's script process, as SLURM would signal it (snakemake itself keeps running).
    job = subprocess.run(
        ["pgrep", "-f", f"{workdir}/.snakemake/scripts/.*train_model.py"], capture_output=True, text=True
    )
    assert job.stdout.split(), "training job process not found"
    for pid in job.stdout.split():
        os.kill(int(pid), signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    text = log.read_text()
    assert "training stopped by signal 15" in text and "run the same command again to resume" in text
    stopped_at = int(text.split("training stopped by signal 15 at step ")[1].split(";")[0])
    assert 10 <= stopped_at < 130
    assert not (workdir / target).exists()
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    text = log.read_text()
    model_dir = "results/en-de/transformer/baseline/seed1/model"
    assert f"{model_dir}/stages/0: finished before" in text
    assert f"resumed from {model_dir}/checkpoints/last.pt at step {stopped_at}" in text
    summary = json.loads((workdir / model_dir / "summary.json").read_text())
    assert summary["steps"] == 150 and [stage["steps"] for stage in summary["stages"]] == [20, 130]
    # The same run uninterrupted ends with the same weights.
    other = tmp_path / "uninterrupted"
    other.mkdir()
    shutil.copy(workdir / "config.yaml", other / "config.yaml")
    rest = command[len(SNAKEMAKE) + 2 :]
    uninterrupted = subprocess.run([*SNAKEMAKE, "--directory", str(other), *rest], capture_output=True, text=True)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    weights = [read_model_file(d / model_dir, torch.device("cpu"))["model"] for d in (workdir, other)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


# The rules' output, log and benchmark patterns (wildcard constraints dropped), and the results/ folders they hand
# to a tool as params, from the parsed workflow: printed as JSON by a Python process that loads it.
RULE_PATHS = """
import json, re, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

def pattern(path):
    return re.sub(r"\\{(\\w+),[^{}]*\\}", r"{\\1}", str(path))

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(ResourceSettings(), ConfigSettings(), snakefile=Path(sys.argv[1]), workdir=Path("."))
    rules = {
        rule.name: {
            "files": [pattern(f) for f in rule.output if not f.flags.get("directory")]
            + [pattern(f) for f in rule.log] + ([pattern(rule.benchmark)] if rule.benchmark else []),
            "folders": [pattern(f) for f in rule.output if f.flags.get("directory")]
            + [p for p in rule.params if isinstance(p, str) and p.startswith("results/")],
        }
        for rule in workflow._workflow.rules
    }
print(json.dumps(rules))
"""


def documented_results_paths() -> list[tuple[str, str]]:
    """(path, content) of each row of the table "Results path scheme" in docs/results.md."""
    section = (REPO / "docs" / "results.md").read_text().split("## Results path scheme")[1].split("\n## ")[0]
    rows = [line.split(" | ", 1) for line in section.splitlines() if line.startswith("| `results/")]
    return [(path.removeprefix("| ").strip("`"), content) for path, content in rows]


def row_pattern(path: str, rule: str) -> re.Pattern:
    """A documented path as a regex over the rules' patterns: {a,b} is either, {N} the seed, {lang} a side of the pair,
    {rule} the rule's name, … or * anything; a path ending in / holds everything below it."""
    special = {"{N}": r"\{seed\}", "{lang}": r"\{(?:src|trg|lang)\}", "{rule}": re.escape(rule), "…": ".*", "*": ".*"}
    regex = ""
    for part in re.split(r"(\{[^}]*\}|…|\*)", path):
        if "," in part:
            regex += f"(?:{'|'.join(map(re.escape, part[1:-1].split(',')))})"
        else:
            regex += special.get(part, re.escape(part))
    return re.compile(regex + (".*" if path.endswith("/") else ""))


def row_files(path: str, content: str) -> list[str]:
    """The row's path, and the files its content names beside it (`.manifest.json`, `report.json`, ...)."""
    folder = path if path.endswith("/") else path.rsplit("/", 1)[0] + "/"
    names = re.findall(r"`(\.?[\w{},.-]+\.[\w{},]+)`", content)
    return [path] + [path + name if name.startswith(".") else folder + name for name in names]


def test_documented_results_paths_match_the_rules(tmp_path):
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    out = subprocess.run(
        [sys.executable, "-c", RULE_PATHS, str(REPO / "Snakefile")], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rules = json.loads(out.stdout.splitlines()[-1])
    rows = documented_results_paths()
    assert len(rows) > 20
    # Every file a rule writes is a row of docs/results.md (or a file that a row's description names).
    for rule, paths in rules.items():
        for file in paths["files"]:
            patterns = [row_pattern(p, rule) for path, content in rows for p in row_files(path, content)]
            assert any(p.fullmatch(file) for p in patterns), f"{file} (rule {rule}) is not in docs/results.md's table"
    # Every row is written by a rule: it matches one of its files, or lies in a folder a rule writes or fills.
    for path, _ in rows:
        written = [
            rule
            for rule, paths in rules.items()
            if any(row_pattern(path, rule).fullmatch(f) for f in paths["files"])
            or any(path.startswith(folder + "/") for folder in paths["folders"])
        ]
        assert written, f"docs/results.md row {path} is written by no rule"
