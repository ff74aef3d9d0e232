"""Presets that build on the default run: the distillation preset reuses the default run's teacher."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
TEACHER = "results/en-de/transformer/baseline/seed1/model/model.pt"
DISTILL = ["--configfile", str(REPO / "workflow/presets/multi30k_distill.yaml"), "--replace-workflow-config"]


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_distillation_preset_reuses_the_default_runs_teacher(tmp_path):
    """After a default run, the preset's dry run plans no job of its teacher: the teacher's download, cleaning,
    subword, binarizing and training jobs have the params and inputs they had under config.yaml.

    The default run is simulated: the outputs of the teacher's jobs under config.yaml, marked done with --touch, which
    records each job's params and inputs as a real run does.
    """
    shutil.copyfile(REPO / "config.yaml", tmp_path / "config.yaml")
    default = snakemake(tmp_path, "-n", TEACHER)
    lines = re.findall(r"^    output: (.+)$", default.stdout, flags=re.M)
    outputs = [path for line in lines for path in line.split(", ")]
    assert TEACHER in outputs and "results/en-de/subword/en.model" in outputs, default.stdout
    for path in outputs:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
    snakemake(tmp_path, "--touch", "--forceall", "--cores", "1", TEACHER)

    preset = snakemake(tmp_path, "-n", TEACHER, *DISTILL)
    text = preset.stdout + preset.stderr
    assert "missing provenance" not in text  # the params were recorded, so a changed one would show
    assert re.findall(r"^(?:local)?rule (\w+):", preset.stdout, flags=re.M) == [], preset.stdout[-3000:]
    assert "Nothing to be done" in text
