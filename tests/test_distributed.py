"""Data-parallel training with torchrun on CPU (gloo): 2 processes with half of each batch equal 1 process."""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import REPO, TOY_MODEL, assert_one_line, run_training, tiny_train_config, toy_files, write_lines

import nmt.training.loop as loop
import nmt.training.validation as validation
from nmt.checkpoint import load_checkpoint
from nmt.data.binarize import binarize
from nmt.errors import TrainingError
from nmt.training.distributed import (
    Rendezvous,
    World,
    launch_training,
    processes_per_node,
    shard,
    slurm_rendezvous,
    srun_command,
    torchrun_command,
)
from nmt.training.loop import train
from nmt.training.trainer import start_training

NO_DROPOUT = {**TOY_MODEL, "dropout": 0.0}  # dropout masks differ per process; the rest must not


def without_key_bias(name: str, tensor: torch.Tensor) -> slice | torch.Tensor:
    """All of ``tensor`` but the attention key bias: its gradient is 0 in exact arithmetic (softmax ignores a
    shift), so Adam turns the summation-order noise of two processes into updates of ~lr there."""
    keep = torch.ones_like(tensor, dtype=torch.bool)
    d = tensor.numel() // 3 if name.endswith("qkv.bias") else tensor.numel() // 2
    if name.endswith("qkv.bias"):  # [query, key, value]
        keep[d : 2 * d] = False
    elif name.endswith("cross_attn.kv.bias"):  # [key, value]
        keep[:d] = False
    return keep


def assert_same_parameters(a: dict, b: dict) -> None:
    """The parameters of two checkpoints, to the summation-order noise of data-parallel gradients.

    After 12 Adam updates that noise is up to about 1.3e-6 (fused Adam); a wrong share or normalisation
    moves parameters by about lr (1e-4 and more).
    """
    assert a["progress"]["step"] == b["progress"]["step"] and a["progress"]["tokens"] == b["progress"]["tokens"]
    for name, tensor in a["model"].items():
        keep = without_key_bias(name, tensor)
        torch.testing.assert_close(b["model"][name][keep], tensor[keep], rtol=1e-5, atol=3e-6, msg=name)


def test_shards_cover_the_batch_once():
    indices = np.arange(7) * 3
    shares = [shard(indices, World(rank=r, size=3)) for r in range(3)]
    assert sorted(np.concatenate(shares).tolist()) == indices.tolist()
    assert [len(s) for s in shares] == [3, 2, 2]
    assert shard(np.arange(1), World(rank=1, size=2)).size == 0


def test_torchrun_command_runs_the_nmt_cli():
    command = torchrun_command(4, ["train", "--log-file=x"])
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--standalone" in command and "--nproc-per-node=4" in command
    assert command[-4:] == ["-m", "nmt", "train", "--log-file=x"]
    command = torchrun_command(4, ["train"], Rendezvous(2, "node1:29417", "17"))
    assert "--standalone" not in command and command[-3:] == ["-m", "nmt", "train"]
    assert {"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node1:29417", "--rdzv-id=17"} < set(command)
    assert srun_command(2, command)[:6] == [
        "srun",
        "--overlap",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
    ]


def test_slurm_rendezvous_is_the_first_host_of_the_allocation(monkeypatch):
    """Outside SLURM a job on several nodes needs an explicit endpoint; under SLURM (when scontrol is here) the
    first host of SLURM_JOB_NODELIST hosts it."""
    for name in ("SLURM_JOB_NODELIST", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(TrainingError) as excinfo:
        slurm_rendezvous(2)
    assert_one_line(excinfo, "training on 2 nodes", "SLURM_JOB_NODELIST")
    scontrol = subprocess.run(["which", "scontrol"], capture_output=True).returncode == 0
    monkeypatch.setenv("SLURM_JOB_NODELIST", "localhost")
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    with pytest.raises(TrainingError) as excinfo:
        slurm_rendezvous(2)
    assert_one_line(excinfo, "training on 2 nodes", "failed" if not scontrol else "has 1")


def test_processes_per_node_from_the_rule_resources():
    assert processes_per_node({}) == 1 and processes_per_node({"processes": 2}) == 2
    assert processes_per_node({"gpu": 4}) == 4
    assert processes_per_node({"gres": "gpu:4"}, nodes=2) == processes_per_node({"gres": "gpu:a100:4"}, 2) == 4
    assert processes_per_node({"gres": "gpu:a100"}) == processes_per_node({"gres": "gpu"}) == 1
    with pytest.raises(TrainingError, match="cannot read a GPU count from 'gpu:a100:x'"):
        processes_per_node({"gres": "gpu:a100:x"})
    with pytest.raises(TrainingError, match="on 2 nodes ask per node, e.g. gres=gpu:4"):
        processes_per_node({"gpu": 8}, nodes=2)


def test_two_processes_on_two_corpora_equal_one(toy_corpus, toy_spm, tmp_path):
    """Several training corpora (as every WMT preset has) reach every process as a list of files: two gloo
    processes end with the parameters of one process on the same two corpora."""
    overrides = dict(max_steps=12, accum_steps=2, valid_every=6, checkpoint_every=6, log_every=3, threads=2)
    corpora = {}
    for lang in ("en", "de"):
        lines = toy_corpus[f"train.{lang}"].read_text().splitlines()
        corpora[lang] = [
            write_lines(tmp_path / f"{name}.{lang}", part) for name, part in (("a", lines[:200]), ("b", lines[200:]))
        ]
    one = toy_files(toy_corpus, toy_spm, tmp_path / "one")
    one = dataclasses.replace(one, train_data=(corpora["en"], corpora["de"]))
    train(NO_DROPOUT, tiny_train_config(**overrides), one)
    two = dataclasses.replace(one, model_dir=tmp_path / "two")
    launch_training(2, NO_DROPOUT, tiny_train_config(**overrides), two, tmp_path / "two.log")
    a, b = load_checkpoint(tmp_path / "one/checkpoints/last.pt"), load_checkpoint(tmp_path / "two/checkpoints/last.pt")
    assert b["progress"]["step"] == 12 and len(b["rng"]) == 2
    assert_same_parameters(a, b)
    assert json.loads((tmp_path / "two/train.json").read_text())["pairs"] == 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_equal_one_process(toy_corpus, toy_spm, tmp_path):
    """Two torchrun agents ("nodes", 1 process each) meet at a c10d rendezvous on 127.0.0.1 and train on one
    binarized training set; they end with the parameters of one process."""
    overrides = dict(max_steps=12, accum_steps=2, valid_every=6, checkpoint_every=6, log_every=3, threads=1)
    prefix = tmp_path / "data/train"
    binarize(toy_corpus["train.en"], toy_corpus["train.de"], toy_spm["en"], toy_spm["de"], prefix, max_length=128)
    one = dataclasses.replace(toy_files(toy_corpus, toy_spm, tmp_path / "one"), train_data=str(prefix))
    train(NO_DROPOUT, tiny_train_config(**overrides), one)
    two = dataclasses.replace(one, model_dir=str(tmp_path / "two"))
    rendezvous = Rendezvous(2, f"127.0.0.1:{free_port()}", "test")
    code = (
        "import json, sys; from conftest import tiny_train_config; from nmt.training.distributed import Rendezvous, "
        "launch_training; from nmt.training.files import TrainFiles; from nmt.entry import entry_point; "
        "a = json.loads(sys.argv[1])\n"
        "with entry_point(a['log']):\n"
        "    launch_training(1, a['model'], tiny_train_config(**a['overrides']), TrainFiles(**a['files']), a['log'], "
        "2, Rendezvous(**a['rendezvous']))"
    )
    args = {"model": NO_DROPOUT, "overrides": overrides, "files": dataclasses.asdict(two)}
    args["rendezvous"] = rendezvous.__dict__
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    node2 = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps({**args, "log": str(tmp_path / "node2.log")})],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        launch_training(1, NO_DROPOUT, tiny_train_config(**overrides), two, tmp_path / "node1.log", 2, rendezvous)
    finally:
        _, err = node2.communicate(timeout=300)
    assert node2.returncode == 0, err[-2000:]
    a, b = load_checkpoint(tmp_path / "one/checkpoints/last.pt"), load_checkpoint(tmp_path / "two/checkpoints/last.pt")
    assert b["progress"]["step"] == 12 and len(b["rng"]) == 2
    assert_same_parameters(a, b)
    assert json.loads((tmp_path / "two/summary.json").read_text())["processes"] == 2


@pytest.mark.parametrize(
    "model", [NO_DROPOUT, {"arch": "rnn", "size": "tiny", "dropout": 0.0}], ids=["transformer", "rnn"]
)
def test_two_processes_equal_one(toy_corpus, toy_spm, tmp_path, model):
    """Two gloo processes with half of every batch (and gradient accumulation) end with the parameters
    of one process with the whole batch, and write the same files."""
    overrides = dict(max_steps=12, accum_steps=2, valid_every=6, checkpoint_every=6, log_every=3, threads=2)
    one, two = tmp_path / "one", tmp_path / "two"
    run_training(toy_corpus, toy_spm, one, model=model, **overrides)
    log = tmp_path / "two.log"
    launch_training(2, model, tiny_train_config(**overrides), toy_files(toy_corpus, toy_spm, two), log)
    a, b = load_checkpoint(one / "checkpoints/last.pt"), load_checkpoint(two / "checkpoints/last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 12
    assert len(b["rng"]) == 2  # the random state of each process, for an exact resume
    assert_same_parameters(a, b)
    summary = json.loads((two / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 12
    assert [h["step"] for h in b["history"]] == [6, 12]
    text = log.read_text()
    assert "data parallel: 2 processes" in text and "step 12 |" in text
    assert text.count("validation at step 12") == 1  # rank 0 logs, the other rank only warnings


def test_rank_0_validates_on_batches_of_one_process_share(toy_corpus, toy_spm, tmp_path, monkeypatch):
    """Rank 0 scores the dev set alone: with 2 processes its dev batches hold batch_tokens / 2 tokens, the forward
    pass each process makes in training, not the whole batch_tokens (8 GPUs at 65k tokens: 12 GB of logits).

    Rank 0 of 2 alone in a gloo group of 1: validation runs as in a job of 2 processes without a second one.
    """
    seen = []
    token_batches = validation.token_batches

    def recorded(src_lengths, trg_lengths, batch_tokens, **kwargs):
        seen.append(batch_tokens)
        return token_batches(src_lengths, trg_lengths, batch_tokens, **kwargs)

    monkeypatch.setattr(validation, "token_batches", recorded)
    files = toy_files(toy_corpus, toy_spm, tmp_path)
    config = tiny_train_config(batch_tokens=400, average_last=1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        world = World(rank=0, size=2, group=dist.group.WORLD)
        trainer, state = start_training(NO_DROPOUT, config, files, torch.device("cpu"), world)
        loop.validate_and_keep_best(trainer, state)
        loop.keep_snapshot(trainer, state)
        loop.average_last(trainer, state)
    finally:
        dist.destroy_process_group()
    assert seen == [200, 200] and state.history[0]["loss"] > 0


def test_resume_with_two_processes_continues_a_one_process_run(toy_corpus, toy_spm, tmp_path):
    """The position in the data is global, so a run may resume with another number of processes."""
    model_dir = tmp_path / "m"
    # It ends at a regular validation: a longer run of the same training continues it (docs/cli.md).
    run_training(toy_corpus, toy_spm, model_dir, model=NO_DROPOUT, max_steps=4, valid_every=4, threads=2)
    files = toy_files(toy_corpus, toy_spm, model_dir)
    launch_training(2, NO_DROPOUT, tiny_train_config(max_steps=8, valid_every=4), files, tmp_path / "log")
    assert load_checkpoint(model_dir / "checkpoints/last.pt")["progress"]["step"] == 8
    assert "resumed from" in (tmp_path / "log").read_text()


def test_a_failing_process_is_one_line(toy_corpus, toy_spm, tmp_path):
    files = toy_files(toy_corpus, toy_spm, tmp_path / "m")
    files = dataclasses.replace(files, train_data=([tmp_path / "missing.en"], files.train_data[1]))
    with pytest.raises(TrainingError) as excinfo:
        launch_training(2, NO_DROPOUT, tiny_train_config(), files, tmp_path / "log")
    assert_one_line(excinfo, "training with 2 processes failed", tmp_path / "missing.en", "file not found")


def test_sigterm_stops_all_processes_with_a_checkpoint(toy_corpus, toy_spm, tmp_path):
    """SIGTERM to the launcher (what SLURM sends before the time limit) reaches every process; they agree on
    the step, save one checkpoint and the launcher ends with one line."""
    log = tmp_path / "log"
    code = (
        "import json, sys; from conftest import tiny_train_config; "
        "from nmt.training.distributed import launch_training; from nmt.training.files import TrainFiles; "
        "from nmt.entry import entry_point; a = json.loads(sys.argv[1])\n"
        "with entry_point(a['log']):\n"
        "    launch_training(2, a['model'], tiny_train_config(max_steps=100000, valid_every=100000, "
        "checkpoint_every=100000, log_every=5), TrainFiles(**a['files']), a['log'])"
    )
    files = dataclasses.asdict(toy_files(toy_corpus, toy_spm, tmp_path / "m"))
    args = json.dumps({"model": NO_DROPOUT, "files": files, "log": str(log)})
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.Popen([sys.executable, "-c", code, args], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while not (log.exists() and "| epoch" in log.read_text()):  # training is under way on both processes
        assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: training with 2 processes failed") and "training stopped by signal 15" in err
    assert "run the same command again to resume" in err
    assert load_checkpoint(tmp_path / "m/checkpoints/last.pt")["progress"]["step"] > 0


def rank_pids(marker: str) -> dict[int, int]:
    """rank -> pid of the training processes whose environment holds ``NMT_TEST_MARKER=marker`` (torchrun's
    workers have ``RANK``, its agent has not)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            env = dict(v.split("=", 1) for v in (proc / "environ").read_bytes().decode().split("\0") if "=" in v)
        except (OSError, UnicodeDecodeError):
            continue  # not a process, gone, or not ours
        if env.get("NMT_TEST_MARKER") == marker and "RANK" in env:
            found[int(env["RANK"])] = int(proc.name)
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the ranks' processes in /proc")
def test_a_killed_rank_is_one_line_and_the_rerun_ends_as_an_uninterrupted_run(toy_corpus, toy_spm, tmp_path):
    """SIGKILL of one of two processes mid-epoch (the OOM killer, a lost node): torchrun ends the other, the job
    fails with one line naming the killed rank, and the same command resumes from the last checkpoint and ends
    where an uninterrupted run ends."""
    code = (
        "import json, sys; from conftest import tiny_train_config; "
        "from nmt.training.distributed import launch_training; from nmt.training.files import TrainFiles; "
        "from nmt.entry import entry_point; a = json.loads(sys.argv[1])\n"
        "with entry_point(a['log']):\n"
        "    launch_training(2, a['model'], tiny_train_config(**a['config']), TrainFiles(**a['files']), a['log'])"
    )
    overrides = {"max_steps": 60, "valid_every": 1000, "checkpoint_every": 10, "log_every": 5}
    killed, log = tmp_path / "killed", tmp_path / "log"
    files = dataclasses.asdict(toy_files(toy_corpus, toy_spm, killed))
    args = json.dumps({"model": NO_DROPOUT, "files": files, "log": str(log), "config": overrides})
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests"), "NMT_TEST_MARKER": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code, args], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while not (killed / "checkpoints/last.pt").exists():  # past the first checkpoint, mid-epoch
        assert proc.poll() is None and time.monotonic() < deadline, "training did not reach its first checkpoint"
        time.sleep(0.1)
    os.kill(rank_pids(str(tmp_path))[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, err
    assert lines[0].startswith("error: training with 2 processes failed") and "rank 1 was killed (Signal 9" in err, err
    assert "SIGKILL" in err and "run the same command again to resume" in err
    config = tiny_train_config(**overrides)
    launch_training(2, NO_DROPOUT, config, toy_files(toy_corpus, toy_spm, killed), log)
    straight = tmp_path / "straight"
    launch_training(2, NO_DROPOUT, config, toy_files(toy_corpus, toy_spm, straight), tmp_path / "straight.log")
    a, b = (load_checkpoint(d / "checkpoints/last.pt") for d in (straight, killed))
    assert a["progress"]["step"] == b["progress"]["step"] == 60
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], msg=name)
