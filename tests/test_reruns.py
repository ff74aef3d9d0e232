"""After a change of the config, a rerun trains what the new config says: each retrained model equals a run of the
new config from scratch, tensor for tensor, and nothing is resumed from the old one."""

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import MIRROR, REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
TASK1 = MIRROR / "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
needs_mirror = pytest.mark.skipif(not TASK1.is_dir(), reason=f"offline mirror {MIRROR} not found")


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = [*SNAKEMAKE, "--directory", str(workdir), "--config", f"mirror={MIRROR}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


def real_lines(name: str, start: int, stop: int) -> list[str]:
    with gzip.open(TASK1 / name, "rt", encoding="utf-8") as f:
        return f.read().splitlines()[start:stop]


def write_corpus(prefix: Path, name: str, start: int, stop: int) -> None:
    """Lines ``start:stop`` of a Multi30k task-1 split as a local corpus ``prefix.{en,de}``."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        Path(f"{prefix}.{lang}").write_text("\n".join(real_lines(f"{name}.{lang}.gz", start, stop)) + "\n")


def config(data: Path, order: list[str], max_pairs: int, teacher_lr: float, baseline: str) -> dict:
    """Two weighted training corpora (one on disk), a Transformer that teaches a student, and an RNN."""
    tiny = yaml.safe_load((REPO / "tests/integration/config.yaml").read_text())
    local = {"importer": "local"}
    return {
        "pairs": ["en-de"],
        "corpora": {
            "multi30k_train": tiny["corpora"]["multi30k_train"],
            "extra": {**local, "path": f"{data}/extra.{{lang}}", "weight": 3},
            "dev": {**local, "path": f"{data}/dev.{{lang}}"},
            "test": {**local, "path": f"{data}/test.{{lang}}"},
        },
        "data": {"train": order, "dev": "dev", "test": ["test"], "mono": []},
        "cleaning": {"max_pairs": max_pairs},
        "subword": {"vocab_size": 300},
        "models": {
            "transformer": {"arch": "transformer", "size": "tiny", "training": {"lr": teacher_lr}},
            "rnn": {"arch": "rnn", "size": "tiny"},
            "student": {"arch": "transformer", "size": "tiny", "d_model": 32},
        },
        "seeds": [1],
        "training": {
            "threads": 1,
            "batch_tokens": 1024,
            "max_steps": 20,
            "warmup_steps": 5,
            "lr": 0.002,
            "log_every": 10,
            "valid_every": 10,
            "checkpoint_every": 10,
        },
        "decoding": {"beam_size": 2, "batch_size": 200},
        "backtranslation": {"models": []},
        "distillation": {
            "teacher": "transformer",
            "students": ["student"],
            "generation": {"beam_size": 2, "batch_size": 200},
            "ctranslate2": [],
            "chunk_lines": 300,
            "repeats": 1,
            "filters": {"max_ratio": 50},
        },
        "tables": {"baseline": baseline, "bootstrap_samples": 100},
    }


def model_files(workdir: Path) -> dict[str, Path]:
    return {str(p.relative_to(workdir)): p for p in sorted(workdir.glob("results/en-de/*/*/seed1/model/model.pt"))}


@pytest.mark.slow
@needs_mirror
def test_a_rerun_after_config_changes_equals_a_run_from_scratch(tmp_path):
    """One rerun after a new learning rate of the teacher, a data key (max_pairs), the order of two weighted corpora,
    another significance baseline and a local corpus cut from 150 to 100 lines: no training resumes a checkpoint of
    the old settings or data, reordered corpora meet their own weights, and the baseline and the local file rerun
    what depends on them."""
    run, fresh = tmp_path / "run", tmp_path / "fresh"
    for workdir in (run, fresh):
        write_corpus(workdir / "data/extra", "train", 20000, 20150)
        write_corpus(workdir / "data/dev", "val", 0, 100)
        write_corpus(workdir / "data/test", "test_2016_flickr", 0, 60)
    old = config(run / "data", ["multi30k_train", "extra"], 400, 0.002, "transformer")
    (run / "config.yaml").write_text(yaml.safe_dump(old))
    out = snakemake(run, "--cores", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    before = {name: path.read_bytes() for name, path in model_files(run).items()}

    # Each change alone is planned: the order reruns the binarizing, the baseline the significance tests.
    swapped = old | {"data": old["data"] | {"train": ["extra", "multi30k_train"]}}
    (run / "config.yaml").write_text(yaml.safe_dump(swapped))
    assert "rule binarize_corpus:" in snakemake(run, "-n").stdout
    (run / "config.yaml").write_text(yaml.safe_dump(old | {"tables": old["tables"] | {"baseline": "rnn"}}))
    assert "rule compute_significance:" in snakemake(run, "-n").stdout

    for workdir in (run, fresh):
        write_corpus(workdir / "data/extra", "train", 20000, 20100)
        new = config(workdir / "data", ["extra", "multi30k_train"], 300, 0.004, "rnn")
        (workdir / "config.yaml").write_text(yaml.safe_dump(new))
        out = snakemake(workdir, "--cores", "2")
        assert out.returncode == 0, out.stderr[-3000:]

    logs = sorted((run / "results/logs/train_model").glob("*.log"))
    assert len(logs) == 4  # transformer, rnn and student on the parallel data, the distilled student
    for log in logs:
        text = log.read_text()
        assert "resumed" not in text and "another training" in text, log.name
    models, references = model_files(run), model_files(fresh)
    assert models.keys() == references.keys() == before.keys() and len(models) == 4
    for name, path in models.items():
        assert path.read_bytes() != before[name], name
        a, b = torch.load(path, weights_only=True)["model"], torch.load(references[name], weights_only=True)["model"]
        for key, tensor in a.items():
            torch.testing.assert_close(tensor, b[key], rtol=0, atol=0, msg=f"{name}: {key}")
    rnn = (run / "results/logs/train_model/en-de.rnn.baseline.seed1.log").read_text()
    assert re.search(r"corpus weights: extra \d+ pairs x 3, multi30k_train \d+ pairs x 1:", rnn)
    table = (run / "results/tables/table.md").read_text()
    assert table == (fresh / "results/tables/table.md").read_text() and "(RNN (tiny))" in table
    again = snakemake(run, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    shutil.rmtree(fresh)
