"""The tiny pipeline submitted to a real single-node SLURM cluster through profiles/slurm; SLURM says what was asked."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import MACHINE_SLURM_CONF, MIRROR, REPO
from test_workflow import SNAKEMAKE, TINY, needs_mirror, snakemake

SLURM_SCRIPTS = REPO.parent / "shared" / "slurm"
GPU_RULES = {"train_model", "translate_test"}


def is_running(*names: str) -> bool:
    """Whether a process of one of these names runs on this machine (read from /proc, nothing is touched)."""
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in names:
                return True
        except OSError:  # the process ended while we looked
            continue
    return False


def why_no_cluster() -> str | None:
    """The reason slurm_up.sh cannot or must not run here, or None."""
    if not (SLURM_SCRIPTS / "slurm_up.sh").is_file():
        return f"{SLURM_SCRIPTS / 'slurm_up.sh'} not found"
    if os.geteuid() != 0:
        return "slurm_up.sh needs root (it installs and starts munge, slurmctld, slurmd)"
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        return "SLURM is not installed and there is no apt-get to install it"
    # An existing cluster is left alone rather than reused: its partitions, GPUs and accounting are unknown.
    if is_running("slurmctld", "slurmd"):
        return "SLURM daemons already run on this machine; the test does not touch an existing cluster"
    conf = Path("/etc/slurm/slurm.conf")
    if conf.exists() and "ClusterName=localcluster" not in conf.read_text():
        return f"{conf} belongs to another cluster; slurm_up.sh would overwrite it"
    return None


@pytest.fixture(scope="module")
def slurm_node(tmp_path_factory) -> dict[str, int]:
    """A SLURM 22.05 controller and node on localhost with one fake GPU (``../shared/slurm/slurm_up.sh``),
    stopped by ``slurm_down.sh`` afterwards; gives the node's CPUs and memory (MB)."""
    reason = why_no_cluster()
    if reason:
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as patch:
        if MACHINE_SLURM_CONF is None:
            patch.delenv("SLURM_CONF")
        else:
            patch.setenv("SLURM_CONF", MACHINE_SLURM_CONF)
        yield from started_cluster(tmp_path_factory.mktemp("slurm"))


def started_cluster(root: Path):
    """Bring the cluster up under ``root``, yield its node's CPUs and memory, and bring it down."""
    env = {**os.environ, "SLURM_TEST_ROOT": str(root)}
    try:
        up = subprocess.run(
            ["bash", str(SLURM_SCRIPTS / "slurm_up.sh")], env=env, capture_output=True, text=True, timeout=600
        )
        if up.returncode != 0:
            last = (up.stderr.strip().splitlines() or ["no message"])[-1]
            pytest.skip(f"slurm_up.sh failed (exit {up.returncode}): {last}")
        node = subprocess.run(["sinfo", "-h", "-o", "%T %c %m"], capture_output=True, text=True, timeout=30)
        state, cpus, mem = (node.stdout.split() + ["", "", ""])[:3]
        if state != "idle":
            pytest.skip(f"SLURM started but its node is not idle: {node.stdout.strip() or node.stderr.strip()}")
        yield {"cpus": int(cpus), "mem_mb": int(mem)}
    finally:
        subprocess.run(["bash", str(SLURM_SCRIPTS / "slurm_down.sh")], env=env, capture_output=True, timeout=300)


def slurm_jobs(workdir: Path) -> dict[str, dict[str, str]]:
    """The jobs SLURM lists (finished ones for MinJobAge = 300 s) that ran in ``workdir``, by job id."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, timeout=30)
    jobs = {}
    for line in out.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("WorkDir") == str(workdir):
            jobs[fields["JobId"]] = fields
    return jobs


def minutes(limit: str) -> int:
    """Minutes of a SLURM time limit written [D-]HH:MM:SS."""
    days, _, clock = limit.rpartition("-")
    hours, mins, _ = clock.split(":")
    return (int(days or 0) * 24 + int(hours)) * 60 + int(mins)


def tiny_transformer_config() -> dict:
    """The tiny config's Transformer alone, in one training stage (the training section's max_steps), one seed: no
    back-translation, no distillation, no monolingual data."""
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    config["models"] = {"transformer": {"arch": "transformer", "size": "tiny"}}
    config["backtranslation"] = {"models": []}
    config.pop("distillation", None)
    del config["data"]["mono"], config["corpora"]["multi30k_mono1"]
    config["seeds"] = [1]
    return config


def slurm_options(slurm_node: dict[str, int]) -> list[str]:
    """profiles/slurm with what the test cluster needs: no accounting (sacct fails), quick answers, one small node."""
    return [
        "--workflow-profile",
        str(REPO / "profiles" / "slurm"),
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "2",
        "--max-threads",
        str(slurm_node["cpus"]),
        "--resources",
        f"mem_mb={slurm_node['mem_mb']}",
    ]


def export_to_jobs(monkeypatch) -> None:
    """Jobs start `python -m snakemake` on the node with this environment (sbatch --export=ALL): this Python, and
    the nmt of this clone."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def wait_for(condition, what: str, timeout: float = 300):
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
@needs_mirror
def test_tiny_pipeline_on_slurm(slurm_node, tmp_path, monkeypatch):
    """The Transformer of the tiny config, without back-translation: downloads run locally, cleaning, subwords,
    training and translation as SLURM jobs, and training and translation ask SLURM for a GPU."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    config = tiny_transformer_config()
    config["cleaning"]["langid"] = False  # most of the cleaning job's time; the job is submitted all the same
    config["training"].update(max_steps=20, valid_every=20)
    config["decoding"] = {"method": "greedy", "batch_size": 200}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    export_to_jobs(monkeypatch)
    out = snakemake(*slurm_options(slurm_node), "--config", f"mirror={MIRROR}", workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(workdir / "results/tables/scores.csv")
    assert list(zip(table["model"], table["stage"], table["testset"], strict=True)) == [
        ("transformer", "baseline", "test_2016_flickr")
    ]
    assert table["chrf"].between(0, 100).all() and table["bleu_signature"].str.startswith("nrefs:1").all()

    # What Snakemake submitted: the rule of each SLURM job id (from the plugin's log path); downloads,
    # scoring, the tables and the plots are local rules.
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/", out.stderr))
    assert sorted(submitted.values()) == [
        "binarize_corpus",
        "clean_corpus",
        "compute_significance",
        "prepare_eval_set",
        "prepare_eval_set",
        "train_model",
        "train_subword",
        "translate_test",
    ], out.stderr[-3000:]
    # What SLURM itself recorded. It lists a finished job for MinJobAge = 300 s: surely the last jobs
    # (translation, training and the CPU job before it), perhaps not the first ones.
    listed = slurm_jobs(workdir)
    assert set(listed) <= set(submitted), listed
    for job_id, job in listed.items():
        rule = submitted[job_id]
        assert job["Comment"].startswith(f"rule_{rule}") and job["JobState"] == "COMPLETED", job
        if rule in GPU_RULES:
            assert re.fullmatch(r"gres:gpu(:\w+)?:1", job.get("TresPerJob", "")), job
        else:
            assert "gpu" not in job.get("TresPerJob", "") + job.get("TresPerNode", ""), job
    jobs = {submitted[job_id]: job for job_id, job in listed.items()}
    assert GPU_RULES < set(jobs), f"SLURM lists no GPU or no CPU job of the run: {listed}"
    # Each rule's own time limit (per_attempt in common.smk) reached sbatch: hours for training.
    assert minutes(jobs["train_model"]["TimeLimit"]) > minutes(jobs["translate_test"]["TimeLimit"]), jobs


@pytest.mark.slow
@needs_mirror
def test_a_requeued_training_job_resumes_from_its_checkpoint(slurm_node, tmp_path, monkeypatch):
    """``scontrol requeue`` of a running training job (what preemption and a failed node do): SLURM sends SIGTERM,
    which saves last.pt, and starts the job again under the same id; Snakemake waits for it through PENDING, the
    training resumes from its checkpoint, and the model equals an uninterrupted run's, tensor by tensor."""
    config = tiny_transformer_config()
    config["cleaning"]["langid"] = False  # most of the data preparation's time, which this test does not check
    # One thread everywhere: the arithmetic, hence the model, does not depend on where the job runs.
    config["training"].update(threads=1, max_steps=150, valid_every=1000, log_every=5, checkpoint_every=10)
    workdir, straight = tmp_path / "slurm", tmp_path / "straight"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    model_dir = "results/en-de/transformer/baseline/seed1/model"
    target = [f"{model_dir}/model.pt", "--config", f"mirror={MIRROR}"]
    # The training's inputs locally, once; then the same training here without SLURM, and on SLURM.
    prepared = snakemake(*target, "--cores", "2", "--omit-from", "train_model", workdir=workdir)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    shutil.copytree(workdir, straight)
    local = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(straight), *target, "--cores", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    export_to_jobs(monkeypatch)
    submitted = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(workdir), *target, *slurm_options(slurm_node)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = workdir / "results/logs/train_model/en-de.transformer.baseline.seed1.log"
    wait_for(lambda: log.exists() and "checkpoint at step" in log.read_text(), "a checkpoint of the SLURM job")
    (job_id, job), *others = slurm_jobs(workdir).items()
    assert not others and job["JobState"] == "RUNNING", (job, others)
    requeue = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=30)
    assert requeue.returncode == 0, requeue.stderr
    wait_for(lambda: slurm_jobs(workdir)[job_id]["JobState"] == "PENDING", "the requeued job to be pending")
    stopped = re.search(r"training stopped by signal 15 at step (\d+)", log.read_text())
    assert stopped, log.read_text()[-3000:]  # read now: Snakemake removes a job's log before it runs it again
    # SLURM holds a requeued job for about 2 minutes (its BeginTime); an administrator's release, to save them. Not
    # within the second of the requeue: slurmd refuses a credential issued in the second in which it revoked the
    # job's last one ("Killing non-startable batch JobId=N: Job credential revoked" in slurmctld's log; the job
    # then ends FAILED), and the revocation came before the job was seen pending.
    time.sleep(1.05 - time.time() % 1)
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "StartTime=now"], check=True, timeout=30)
    _, err = submitted.communicate(timeout=600)
    assert submitted.returncode == 0, err[-3000:]
    again = slurm_jobs(workdir)[job_id]
    assert again["Restarts"] == "1" and again["StartTime"] > job["StartTime"] and again["JobState"] == "COMPLETED"
    assert f"resumed from {model_dir}/checkpoints/last.pt at step {stopped[1]} " in log.read_text()
    _, err = local.communicate(timeout=600)
    assert local.returncode == 0, err[-3000:]
    ours, theirs = (torch.load(w / model_dir / "model.pt", weights_only=True)["model"] for w in (workdir, straight))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
