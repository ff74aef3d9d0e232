"""Corpora on disk (a local path, a plain path URL, a file:// URL, a local TSV file) are inputs of the jobs that read
them: an edited file is fetched again, an unchanged one is not."""

import re
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO, write_lines

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "1"]


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True, timeout=300)


def write_corpora(folder: Path, n: int) -> None:
    """``n`` pairs as one file per language and as one TSV file."""
    lines = {lang: [f"{lang} sentence {i}" for i in range(n)] for lang in ("en", "de")}
    for lang, text in lines.items():
        write_lines(folder / f"corpus.{lang}", text)
    write_lines(folder / "corpus.tsv", [f"{en}\t{de}" for en, de in zip(lines["en"], lines["de"], strict=True)])


def test_edited_local_corpus_is_fetched_again(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_corpora(data, 150)
    config = yaml.safe_load((REPO / "tests" / "integration" / "config.yaml").read_text())
    config["corpora"].update(
        local_path={"importer": "local", "path": str(data / "corpus.{lang}")},
        plain_path={"url": str(data / "corpus.{lang}")},
        file_url={"url": data.as_uri() + "/corpus.{lang}"},
        local_tsv={"importer": "local", "path": str(data / "corpus.tsv"), "tsv_columns": {"en": 0, "de": 1}},
    )
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    corpora = ["local_path", "plain_path", "file_url", "local_tsv"]
    targets = [f"results/data/download/{corpus}.{lang}" for corpus in corpora for lang in ("en", "de")]
    out = snakemake(workdir, *targets)
    assert out.returncode == 0, out.stderr[-3000:]
    unchanged = snakemake(workdir, "-n", *targets)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr, unchanged.stdout

    write_corpora(data, 50)
    dry = snakemake(workdir, "-n", *targets)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert sorted(re.findall(r"^(?:local)?rule (\w+):", dry.stdout, flags=re.M)) == [
        *["download_corpus"] * 8,
        "fetch_archive",
    ], dry.stdout
    out = snakemake(workdir, *targets)
    assert out.returncode == 0, out.stderr[-3000:]
    for target in targets:
        assert len((workdir / target).read_text().splitlines()) == 50, target


def test_missing_local_corpus_is_one_line(tmp_path):
    config = yaml.safe_load((REPO / "tests" / "integration" / "config.yaml").read_text())
    config["corpora"]["gone"] = {"importer": "local", "path": str(tmp_path / "gone.{lang}")}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(tmp_path, "results/data/download/gone.de")
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"{tmp_path}/gone.de" in errors[0], out.stderr
