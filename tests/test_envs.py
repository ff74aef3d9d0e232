"""Environments: the login node parses the workflow without torch; the rules' env imports this checkout's nmt."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

TINY = REPO / "tests" / "integration"


def run_without_torch(tmp_path: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run Python with a ``torch`` package first on the path whose import fails, as on a login node without it."""
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("torch imported while parsing")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(REPO)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_dry_run_parses_the_workflow_without_torch(tmp_path):
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    args = ["-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-n"]
    out = run_without_torch(tmp_path, args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "train_model" in out.stdout


def test_config_modules_do_not_import_torch(tmp_path):
    # What the Snakefile imports of nmt (workflow/rules/common.smk); a model with a bad preset still fails loudly.
    code = (
        "import nmt.config, nmt.download, nmt.errors, nmt.model_config as m\n"
        "m.resolve_model_options({'arch': 'transformer', 'preset': 'big'}, 'models.t')\n"
        "m.resolve_model_options({'arch': 'rnn', 'preset': 'huge'}, 'models.r')\n"
    )
    out = run_without_torch(tmp_path, ["-c", code], tmp_path)
    assert "torch imported" not in out.stderr, out.stderr
    assert "models.r.preset: 'huge' is not a rnn preset" in out.stderr.strip().splitlines()[-1], out.stderr
