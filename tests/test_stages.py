"""Staged training: the stages train one after the other, each from the weights of the one before; a kill at a stage
boundary resumes exactly, and a rerun trains again the stages that changed and those after them."""

import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import REPO, TOY_MODEL, tiny_train_config

from nmt.atomic import hash_file
from nmt.checkpoint import load_checkpoint
from nmt.training.files import TrainFiles
from nmt.training.identity import hash_weights
from nmt.training.loop import train

# Both corpora half and half, then the first alone at a lower rate.
STAGES = [{"mix": {"a": 0.5, "b": 0.5}, "max_steps": 10}, {"mix": {"a": 1}, "max_steps": 10, "lr": 1e-3}]
COMMON = {"valid_every": 10, "checkpoint_every": 10, "log_every": 5, "warmup_steps": 3}


def staged_files(toy_corpus, toy_spm, two_corpora, model_dir) -> TrainFiles:
    return TrainFiles(
        train_data=([str(p) for p in two_corpora["en"]], [str(p) for p in two_corpora["de"]]),
        dev_src=str(toy_corpus["dev.en"]),
        dev_ref=str(toy_corpus["dev.de"]),
        src_spm=str(toy_spm["en"]),
        trg_spm=str(toy_spm["de"]),
        model_dir=str(model_dir),
    )


def train_staged(files: TrainFiles, stages=STAGES) -> dict:
    return train(TOY_MODEL, tiny_train_config(stages=stages, **COMMON), files)


def assert_same_weights(a, b) -> None:
    a, b = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], rtol=0, atol=0, msg=name)


@pytest.fixture(scope="module")
def staged(toy_corpus, toy_spm, two_corpora, tmp_path_factory):
    """A model trained in the two stages of STAGES without interruption, its files and summary."""
    files = staged_files(toy_corpus, toy_spm, two_corpora, tmp_path_factory.mktemp("staged"))
    return files, train_staged(files)


def test_stages_train_one_after_the_other_from_each_others_weights(staged):
    files, summary = staged
    model_dir = Path(files.model_dir)
    first = json.loads((model_dir / "stages/0/summary.json").read_text())
    assert (model_dir / "stages/0/model.pt").is_file() and first["steps"] == 10
    assert not (model_dir / "stages/1").exists(), "the last stage trains into the model directory itself"
    # The summary lists both stages; steps, time and tokens are theirs together.
    assert json.loads((model_dir / "summary.json").read_text()) == summary
    assert [(s["stage"], s["steps"]) for s in summary["stages"]] == [(0, 10), (1, 10)]
    assert summary["steps"] == 20 and summary["train_tokens"] == sum(s["train_tokens"] for s in summary["stages"])
    assert summary["stages"][0]["valid"] == first["valid"] and "minutes" in summary["stages"][1]
    # The second stage started from the first's model, with its own settings.
    identity = load_checkpoint(model_dir / "checkpoints/last.pt")["identity"]
    assert identity["init_from"] == hash_weights(model_dir / "stages/0/model.pt")
    assert identity["training"]["lr"] == 1e-3 and identity["training"]["mix"] == {"a": 1}
    assert load_checkpoint(model_dir / "stages/0/checkpoints/last.pt")["identity"]["init_from"] is None


def test_the_mix_of_a_stage_reaches_its_batches(toy_corpus, toy_spm, two_corpora, tmp_path, caplog):
    """The log of a stage's mix: the realised shares, the corpus left out; a name the data lacks stops the run before
    the first stage trains."""
    caplog.set_level(logging.INFO, logger="nmt")
    files = staged_files(toy_corpus, toy_spm, two_corpora, tmp_path / "m")
    train(TOY_MODEL, tiny_train_config(mix={"a": 1, "b": 3}, max_steps=2, valid_every=2), files)
    assert "mix of each batch's target tokens: a 0.250 (realised 0.2" in caplog.text
    assert "b 0.750 (realised 0.7" in caplog.text
    caplog.clear()
    stages = [{"max_steps": 2, "valid_every": 2}, {"mix": {"real": 1}}]
    with pytest.raises(Exception, match=r"m/train.json: mix of \['real'\] but the corpora binarized are \['a', 'b'\]"):
        train(TOY_MODEL, tiny_train_config(stages=stages), dataclasses.replace(files, train_data=f"{tmp_path}/m/train"))
    assert "stage 1 of 2" not in caplog.text


def test_a_kill_at_the_stage_boundary_resumes_exactly(staged, tmp_path, caplog):
    """Killed (SIGKILL) as the second stage starts and run again, the first stage is not trained again and the model
    is the uninterrupted run's, tensor for tensor; the run is `python -m nmt train` with stages."""
    straight, _ = staged
    files = dataclasses.replace(straight, model_dir=str(tmp_path / "killed"))
    options = [*files.options(), "--model-options", json.dumps(TOY_MODEL)]
    training = dataclasses.asdict(tiny_train_config(stages=STAGES, **COMMON))
    command = [sys.executable, "-m", "nmt", "train", *options, "--training", json.dumps(training)]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    timer = threading.Timer(240.0, proc.kill)
    timer.start()
    for line in proc.stderr:
        if "stage 2 of 2" in line:
            proc.kill()
            break
    proc.communicate(timeout=60)
    timer.cancel()
    assert proc.returncode == -signal.SIGKILL
    first = tmp_path / "killed/stages/0/model.pt"
    before = (hash_file(first), first.stat().st_mtime_ns)
    caplog.set_level(logging.INFO, logger="nmt")
    train_staged(files)
    assert (hash_file(first), first.stat().st_mtime_ns) == before
    assert f"{tmp_path}/killed/stages/0: finished before" in caplog.text
    assert_same_weights(Path(straight.model_dir) / "model.pt", tmp_path / "killed/model.pt")
    assert_same_weights(Path(straight.model_dir) / "checkpoints/last.pt", tmp_path / "killed/checkpoints/last.pt")


def test_a_rerun_trains_the_changed_stage_and_those_after_it(staged, tmp_path, caplog):
    """A new rate of the second stage trains the second stage again, not the first; a new rate of the first trains
    both."""
    caplog.set_level(logging.INFO, logger="nmt")
    shutil.copytree(staged[0].model_dir, tmp_path / "run")
    files = dataclasses.replace(staged[0], model_dir=tmp_path / "run")
    first = tmp_path / "run/stages/0/model.pt"
    before = (hash_file(first), first.stat().st_mtime_ns)
    train_staged(files, [STAGES[0], {**STAGES[1], "lr": 2e-3}])
    assert (hash_file(first), first.stat().st_mtime_ns) == before
    assert "stages/0: finished before" in caplog.text and "training.lr 0.001 -> 0.002" in caplog.text
    assert load_checkpoint(tmp_path / "run/checkpoints/last.pt")["identity"]["training"]["lr"] == 2e-3
    caplog.clear()
    train_staged(files, [{**STAGES[0], "lr": 2e-3}, {**STAGES[1], "lr": 2e-3}])
    assert hash_file(first) != before[0] and "finished before" not in caplog.text
    identity = load_checkpoint(tmp_path / "run/checkpoints/last.pt")["identity"]
    assert identity["init_from"] == hash_weights(first) and "init_from" in caplog.text


def test_the_weights_a_stage_starts_from_are_known_by_their_values_not_the_files_bytes(tmp_path):
    """torch names a file's records after the name it is written under: the same weights saved twice differ in
    bytes, and the next stage's identity must not (a stage trained again to the same weights resumes the next)."""
    state = {"spec": {}, "model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.bfloat16)}}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        torch.save(state, tmp_path / name / f"{name}.pt")
        (tmp_path / name / f"{name}.pt").rename(tmp_path / name / "model.pt")
    first, second = tmp_path / "a/model.pt", tmp_path / "b/model.pt"
    assert hash_file(first) != hash_file(second)
    assert hash_weights(first) == hash_weights(second)
    state["model"]["w"][0, 0] = 1.0
    torch.save(state, second)
    assert hash_weights(first) != hash_weights(second)
