"""Data-parallel training with torchrun on CPU (gloo): 2 processes with half of each batch equal 1 process."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from conftest import REPO, TOY_MODEL, assert_one_line, run_training, tiny_train_config

from nmt.checkpoint import load_checkpoint
from nmt.distributed import World, launch_training, shard, torchrun_command
from nmt.errors import TrainingError

NO_DROPOUT = {**TOY_MODEL, "dropout": 0.0}  # dropout masks differ per process; the rest must not


def files(toy_corpus, toy_spm, model_dir) -> dict[str, str]:
    return {
        "train_src": str(toy_corpus["train.en"]),
        "train_trg": str(toy_corpus["train.de"]),
        "dev_src": str(toy_corpus["dev.en"]),
        "dev_ref": str(toy_corpus["dev.de"]),
        "src_spm": str(toy_spm["en"]),
        "trg_spm": str(toy_spm["de"]),
        "model_dir": str(model_dir),
    }


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


@pytest.mark.parametrize(
    "model", [NO_DROPOUT, {"arch": "rnn", "preset": "tiny", "dropout": 0.0}], ids=["transformer", "rnn"]
)
def test_two_processes_equal_one(toy_corpus, toy_spm, tmp_path, model):
    """Two gloo processes with half of every batch (and gradient accumulation) end with the parameters
    of one process with the whole batch, and write the same files."""
    overrides = dict(max_steps=12, accum_steps=2, valid_every=6, checkpoint_every=6, log_every=3, threads=2)
    one, two = tmp_path / "one", tmp_path / "two"
    run_training(toy_corpus, toy_spm, one, model=model, **overrides)
    log = tmp_path / "two.log"
    launch_training(2, model, tiny_train_config(**overrides), files(toy_corpus, toy_spm, two), log)
    a, b = load_checkpoint(one / "checkpoints/last.pt"), load_checkpoint(two / "checkpoints/last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 12
    assert a["progress"]["tokens"] == b["progress"]["tokens"]
    assert len(b["rng"]) == 2  # the random state of each process, for an exact resume
    for name, tensor in a["model"].items():
        keep = without_key_bias(name, tensor)
        # Summation-order noise of the two processes' gradients, after 12 Adam updates: up to about 1.3e-6
        # (fused Adam); a wrong share or normalisation moves parameters by about lr (1e-4 and more).
        torch.testing.assert_close(b["model"][name][keep], tensor[keep], rtol=1e-5, atol=3e-6, msg=name)
    summary = json.loads((two / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 12
    assert [h["step"] for h in b["history"]] == [6, 12]
    text = log.read_text()
    assert "data parallel: 2 processes" in text and "step 12 |" in text
    assert text.count("validation at step 12") == 1  # rank 0 logs, the other rank only warnings


def test_resume_with_two_processes_continues_a_one_process_run(toy_corpus, toy_spm, tmp_path):
    """The position in the data is global, so a run may resume with another number of processes."""
    model_dir = tmp_path / "m"
    run_training(toy_corpus, toy_spm, model_dir, model=NO_DROPOUT, max_steps=4, valid_every=1000, threads=2)
    launch_training(
        2, NO_DROPOUT, tiny_train_config(max_steps=8, valid_every=1000), files(toy_corpus, toy_spm, model_dir),
        tmp_path / "log",
    )  # fmt: skip
    assert load_checkpoint(model_dir / "checkpoints/last.pt")["progress"]["step"] == 8
    assert "resumed from" in (tmp_path / "log").read_text()


def test_a_failing_process_is_one_line(toy_corpus, toy_spm, tmp_path):
    paths = {**files(toy_corpus, toy_spm, tmp_path / "m"), "train_src": str(tmp_path / "missing.en")}
    with pytest.raises(TrainingError) as excinfo:
        launch_training(2, NO_DROPOUT, tiny_train_config(), paths, tmp_path / "log")
    assert_one_line(excinfo, "training with 2 processes failed", tmp_path / "missing.en", "file not found")


def test_sigterm_stops_all_processes_with_a_checkpoint(toy_corpus, toy_spm, tmp_path):
    """SIGTERM to the launcher (what SLURM sends before the time limit) reaches every process; they agree on
    the step, save one checkpoint and the launcher ends with one line."""
    log = tmp_path / "log"
    code = (
        "import json, sys; from conftest import tiny_train_config; from nmt.distributed import launch_training; "
        "from nmt.entry import entry_point; a = json.loads(sys.argv[1])\n"
        "with entry_point(a['log']):\n"
        "    launch_training(2, a['model'], tiny_train_config(max_steps=100000, valid_every=100000, "
        "checkpoint_every=100000, log_every=5), a['files'], a['log'])"
    )
    args = json.dumps({"model": NO_DROPOUT, "files": files(toy_corpus, toy_spm, tmp_path / "m"), "log": str(log)})
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
