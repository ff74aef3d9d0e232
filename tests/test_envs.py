"""Environments: the login node parses the workflow without torch; the rules' env imports this checkout's nmt."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import MIRROR, REPO

from nmt.atomic import hash_file
from nmt.data.download import mirror_path
from nmt.training.files import TrainFiles

TINY = REPO / "tests" / "integration"


def run_without_torch(tmp_path: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run Python with a ``torch`` package first on the path whose import fails, as on a login node without it."""
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True, exist_ok=True)
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
        "import nmt.atomic, nmt.config, nmt.config_file, nmt.data.download, nmt.errors, nmt.experiment\n"
        "import nmt.multilingual\n"
        "import nmt.runtime\n"
        "import nmt.model_config as m\n"
        "m.resolve_model_options({'arch': 'transformer', 'size': 'big'}, 'models.t')\n"
        "m.resolve_model_options({'arch': 'rnn', 'size': 'huge'}, 'models.r')\n"
    )
    out = run_without_torch(tmp_path, ["-c", code], tmp_path)
    assert "torch imported" not in out.stderr, out.stderr
    assert "models.r.size: 'huge' is not a rnn size" in out.stderr.strip().splitlines()[-1], out.stderr


def make_rules_env(tmp_path: Path) -> Path:
    """A stand-in for the rules' conda env (conda channels are out of reach here): a venv whose packages are
    this interpreter's, without nmt (the editable install's .pth is not read through a plain path entry)."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    site = Path(
        subprocess.check_output(
            [env / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site / "deps.pth").write_text(purelib + "\n")
    return env / "bin" / "python"


def env_without_pythonpath(python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PATH": os.pathsep.join([str(python.parent), env["PATH"]])}


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline mirror {MIRROR} not found")
def test_rules_env_deploys_and_runs_this_checkout(tmp_path):
    python = make_rules_env(tmp_path)
    env = env_without_pythonpath(python)
    assert subprocess.run([python, "-c", "import nmt"], cwd=tmp_path, env=env).returncode != 0
    work = tmp_path / "work"
    (work / ".snakemake" / "conda").mkdir(parents=True)
    # Snakemake runs envs/<env>.post-deploy.sh (if any) as a copy next to the env, .snakemake/conda/<hash>,
    # from the working directory, with the interpreter of its #! line, in the activated env.
    for script in (REPO / "envs").glob("*.post-deploy.sh"):
        copy = work / ".snakemake" / "conda" / "0123456789abcdef0123456789abcdef_.post-deploy.sh"
        shutil.copy(script, copy)
        interpreter = script.read_text().splitlines()[0].removeprefix("#!").split()
        out = subprocess.run([*interpreter, str(copy)], cwd=work, env=env, capture_output=True, text=True)
        assert out.returncode == 0, f"{script.name}: {out.stdout}{out.stderr}"
    # A rule script in that env imports nmt from the Snakefile's folder.
    (work / "config.yaml").write_text((TINY / "config.yaml").read_text())
    target = "results/data/download/multi30k_val.de"
    args = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1", target]
    out = subprocess.run(
        [python, "-m", "snakemake", *args, "--config", f"mirror={MIRROR}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (work / target).stat().st_size > 0


def test_torchrun_processes_import_the_same_nmt(tmp_path):
    # As in a rule script of a conda env: nmt is on sys.path, not installed; the torchrun processes must find it too.
    python = make_rules_env(tmp_path)
    missing = {name: str(tmp_path / f"missing.{name}") for name in ("dev_src", "dev_ref", "src_spm", "trg_spm")}
    text = ([str(tmp_path / "missing.en")], [str(tmp_path / "missing.de")])
    files = TrainFiles(train_data=text, **missing, model_dir=str(tmp_path / "model"))
    code = (
        f"import sys; sys.path.append({str(REPO)!r})\n"
        "from nmt.config import TrainConfig\n"
        "from nmt.training.distributed import launch_training\n"
        "from nmt.training.files import TrainFiles\n"
        f"launch_training(1, {{'arch': 'transformer'}}, TrainConfig(), {files!r}, {str(tmp_path / 'log')!r})\n"
    )
    env = env_without_pythonpath(python)
    out = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "No module named nmt" not in out.stderr, out.stderr[-2000:]
    assert "missing.src_spm: subword model not found" in out.stderr.strip().splitlines()[-1], out.stderr[-2000:]


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline mirror {MIRROR} not found")
def test_make_mirror_builds_a_mirror_the_tests_use(tmp_path):
    # The public URLs cannot be reached here: the files come from another mirror (make mirror MIRROR_FROM=...).
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    build = [sys.executable, str(REPO / "tests" / "make_mirror.py"), "--out"]
    out = subprocess.run(
        [*build, str(tmp_path / "mirror"), "--from", str(MIRROR)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    listed = [line.split() for line in (REPO / "tests" / "mirror.sha256").read_text().splitlines()]
    assert len(listed) == 23
    for sha256, url in listed:
        assert hash_file(mirror_path(url, tmp_path / "mirror")) == sha256
    # The tests read $NMT_MIRROR.
    probe = [sys.executable, "-c", "from conftest import MIRROR; print(MIRROR)"]
    env |= {"NMT_MIRROR": str(tmp_path / "mirror")}
    assert subprocess.check_output(probe, cwd=REPO / "tests", env=env, text=True).strip() == str(tmp_path / "mirror")
    # A file with another sum is one line naming its URL.
    shutil.copytree(MIRROR, tmp_path / "bad")
    sha256, url = listed[-1]
    mirror_path(url, tmp_path / "bad").write_bytes(b"not the corpus")
    out = subprocess.run(
        [*build, str(tmp_path / "new"), "--from", str(tmp_path / "bad")], env=env, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(f"error: {url}: sha256 mismatch, expected {sha256}")
