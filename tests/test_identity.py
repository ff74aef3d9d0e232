"""A rerun trains what its settings say: a checkpoint of another training is set aside, never resumed."""

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, run_training, write_lines

from nmt.checkpoint import load_checkpoint
from nmt.config import SubwordConfig
from nmt.data.subword import train_subword
from nmt.training.identity import differences


def assert_same_weights(a, b) -> None:
    a, b = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    assert a.keys() == b.keys()
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], rtol=0, atol=0, msg=name)


def rerun(toy_corpus, toy_spm, model_dir, caplog, **overrides):
    """Train into ``model_dir`` again and return the log of that run."""
    caplog.clear()
    run_training(toy_corpus, toy_spm, model_dir, **overrides)
    return caplog.text


@pytest.mark.parametrize(
    "first, second, differ",
    [
        ({"lr": 3e-3}, {"lr": 6e-3}, "training.lr 0.003 -> 0.006"),
        # linear decays over max_steps: a longer run is another schedule from the first update on
        (
            {"lr_schedule": "linear", "max_steps": 20},
            {"lr_schedule": "linear", "max_steps": 30},
            "training.max_steps 20 -> 30",
        ),
        # a shorter budget than the checkpoint's step: the old run went past the new end
        ({"max_steps": 30}, {"max_steps": 20}, "training.max_steps 30 -> 20"),
        ({"label_smoothing": 0.1}, {"label_smoothing": 0.2}, "training.label_smoothing 0.1 -> 0.2"),
    ],
    ids=["lr", "linear_longer", "shorter", "label_smoothing"],
)
def test_a_changed_setting_trains_from_scratch(toy_corpus, toy_spm, tmp_path, caplog, first, second, differ):
    """The checkpoint of the first settings is set aside with one line naming what differs, and the model is the one
    a run of the new settings from scratch makes, tensor for tensor."""
    caplog.set_level(logging.INFO, logger="nmt")
    common = {"max_steps": 20, "valid_every": 10}
    rerun(toy_corpus, toy_spm, tmp_path / "run", caplog, **{**common, **first})
    text = rerun(toy_corpus, toy_spm, tmp_path / "run", caplog, **{**common, **second})
    rerun(toy_corpus, toy_spm, tmp_path / "fresh", caplog, **{**common, **second})
    assert "resumed" not in text and differ in text and "training from scratch" in text
    assert (tmp_path / "run/checkpoints.replaced/last.pt").is_file()
    assert_same_weights(tmp_path / "run/model.pt", tmp_path / "fresh/model.pt")
    dirs = ("run", "fresh")
    steps = [[line.split("\t")[:5] for line in (tmp_path / d / "valid.tsv").read_text().splitlines()] for d in dirs]
    assert steps[0] == steps[1] and len(steps[0]) > 1  # the old run's validations are gone with it


def test_new_training_data_trains_from_scratch(toy_corpus, toy_spm, tmp_path, caplog):
    """Other data under the same settings (fewer pairs after a cleaning change) is another training, not a resume of
    the old weights."""
    caplog.set_level(logging.INFO, logger="nmt")
    half = {
        lang: write_lines(tmp_path / f"half.{lang}", toy_corpus[f"train.{lang}"].read_text().splitlines()[:300])
        for lang in ("en", "de")
    }
    half_corpus = {**toy_corpus, "train.en": half["en"], "train.de": half["de"]}
    run_training(toy_corpus, toy_spm, tmp_path / "run", max_steps=20, valid_every=10)
    caplog.clear()
    run_training(half_corpus, toy_spm, tmp_path / "run", max_steps=20, valid_every=10)
    assert "data.sha256" in caplog.text and "resumed" not in caplog.text
    run_training(half_corpus, toy_spm, tmp_path / "fresh", max_steps=20, valid_every=10)
    assert_same_weights(tmp_path / "run/model.pt", tmp_path / "fresh/model.pt")


def test_a_new_vocabulary_trains_from_scratch(toy_corpus, toy_spm, tmp_path, caplog):
    """Another subword model (another vocabulary size) is named with the sizes that differ, and trains anew."""
    caplog.set_level(logging.INFO, logger="nmt")
    run_training(toy_corpus, toy_spm, tmp_path / "run", max_steps=10, valid_every=10)
    spm = {"en": tmp_path / "spm/en.model", "de": tmp_path / "spm/de.model"}
    spm["en"].parent.mkdir()
    train_subword(
        [toy_corpus["train.en"]], [toy_corpus["train.de"]], spm["en"], spm["de"], SubwordConfig(vocab_size=60)
    )
    caplog.clear()
    run_training(toy_corpus, spm, tmp_path / "run", max_steps=10, valid_every=10)
    assert "model.src_vocab 81 -> 60" in caplog.text and "files.src_spm" in caplog.text
    assert "resumed" not in caplog.text


def test_an_unchanged_rerun_and_a_longer_budget_free_schedule_resume(toy_corpus, toy_spm, tmp_path, caplog):
    """Settings that leave the weights alone (the log cadence) resume, and so does a larger max_steps under
    inverse_sqrt from a checkpoint at a regular validation, which continues exactly; other threads resume too."""
    caplog.set_level(logging.INFO, logger="nmt")
    run_training(toy_corpus, toy_spm, tmp_path / "run", max_steps=20, valid_every=10)
    text = rerun(toy_corpus, toy_spm, tmp_path / "run", caplog, max_steps=40, valid_every=10, log_every=5)
    assert "resumed from" in text and "another training" not in text
    run_training(toy_corpus, toy_spm, tmp_path / "straight", max_steps=40, valid_every=10)
    assert_same_weights(tmp_path / "run/checkpoints/last.pt", tmp_path / "straight/checkpoints/last.pt")
    text = rerun(toy_corpus, toy_spm, tmp_path / "run", caplog, max_steps=40, valid_every=10, threads=1)
    assert "resumed from" in text and "another training" not in text


def test_max_steps_extends_only_where_the_run_would_be_the_same():
    saved = {"training": {"lr_schedule": "inverse_sqrt", "max_minutes": None, "max_steps": 20, "valid_every": 7}}
    longer = {"training": {**saved["training"], "max_steps": 40}}
    assert differences(saved, longer, {"step": 14}) == []  # before the old end: what a 40-step run did too
    assert differences(saved, longer, {"step": 20}) == ["training.max_steps 20 -> 40"]  # an extra validation at 20
    linear = {"training": {**saved["training"], "lr_schedule": "linear"}}
    assert differences(linear, {"training": {**linear["training"], "max_steps": 40}}, {"step": 14})


def test_a_fresh_start_removes_the_tensorboard_events_of_another_run(toy_corpus, toy_spm, tmp_path, caplog):
    pytest.importorskip("tensorboard")
    run_training(toy_corpus, toy_spm, tmp_path, max_steps=10, valid_every=10, tensorboard=True)
    events = set((tmp_path / "tensorboard").iterdir())
    run_training(toy_corpus, toy_spm, tmp_path, max_steps=10, valid_every=10, tensorboard=True, lr=1e-3)
    assert events and not events & set((tmp_path / "tensorboard").iterdir())


CRASH_AFTER_BEST = """
import json, os, sys
from pathlib import Path
import nmt.training.state as state
from conftest import run_training

save = state.save_checkpoint
def save_then_crash(path, payload, keep_previous=False):
    save(path, payload, keep_previous)
    if Path(path).name == "best.pt" and payload["step"] == 30:
        os._exit(3)  # a crash after best.pt of step 30, before last.pt of step 30
state.save_checkpoint = save_then_crash
a = json.loads(sys.argv[1])
options = {"max_steps": 40, "valid_every": 10, "checkpoint_every": 20, "valid_metric": "loss"}
run_training(a["corpus"], a["spm"], Path(a["dir"]), **options)
"""


def test_best_checkpoint_of_updates_that_are_redone_is_not_kept(toy_corpus, toy_spm, tmp_path):
    """A run that wrote best.pt at step 30 and crashed before last.pt of step 30 resumes at step 20 with the best of
    steps 10 and 20, not the weights of step 30 that another number of processes would not redo identically: stopped
    at step 20, its model is the one of a run that ended there."""
    args = {"corpus": {k: str(v) for k, v in toy_corpus.items()}, "spm": {k: str(v) for k, v in toy_spm.items()}}
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_AFTER_BEST, json.dumps({**args, "dir": str(tmp_path / "a")})],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    assert load_checkpoint(tmp_path / "a/checkpoints/best.pt")["step"] == 30
    options = {"max_steps": 20, "valid_every": 10, "checkpoint_every": 20, "valid_metric": "loss"}
    run_training(toy_corpus, toy_spm, tmp_path / "a", **options)
    run_training(toy_corpus, toy_spm, tmp_path / "b", **options)
    assert_same_weights(tmp_path / "a/model.pt", tmp_path / "b/model.pt")
    assert not (tmp_path / "a/checkpoints/best.prev.pt").exists()
