"""Training on the toy task: it learns, it resumes exactly, it stops cleanly on SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch
from conftest import REPO, TOY_MODEL, assert_one_line, run_training, tiny_train_config

from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig, ModelMeta, SubwordConfig
from nmt.download import hash_file
from nmt.errors import ConfigError, DataError
from nmt.subword import train_subword
from nmt.training import lr_at_step, train
from nmt.translation import get_device, load_model, translate_lines


def test_lr_schedule():
    assert lr_at_step(1, 1.0, 100) == pytest.approx(0.01)
    assert lr_at_step(100, 1.0, 100) == pytest.approx(1.0)
    assert lr_at_step(400, 1.0, 100) == pytest.approx(0.5)
    assert lr_at_step(5, 1.0, 0) == 1.0


def test_training_learns_the_toy_task(trained_model):
    model_dir, summary = trained_model
    assert summary["valid"]["bleu"] > 60
    assert {"model.pt", "src.model", "trg.model", "summary.json", "valid.tsv", "train.tsv"} <= {
        p.name for p in model_dir.iterdir()
    }
    train_log = (model_dir / "train.tsv").read_text().splitlines()
    assert train_log[0] == "step\tepoch\tloss\tlr\ttokens_per_second" and len(train_log) == 1 + 500 // 20
    losses = [float(line.split("\t")[2]) for line in train_log[1:]]
    assert losses[-1] < losses[0] / 2
    assert json.loads((model_dir / "summary.json").read_text())["steps"] == 500
    device = get_device("cpu")
    model, src_sp, trg_sp = load_model(model_dir, device)
    hyps = translate_lines(model, src_sp, trg_sp, ["the big dog runs"], DecodeConfig(), device)
    assert hyps == ["der gross hund rennt"]


def test_checkpoints_load_weights_only(trained_model):
    model_dir, _ = trained_model
    for name in ("model.pt", "checkpoints/last.pt", "checkpoints/best.pt"):
        ckpt = torch.load(model_dir / name, weights_only=True)
        assert "model" in ckpt and "spec" in ckpt


def test_resume_continues_exactly(toy_corpus, toy_spm, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_training(toy_corpus, toy_spm, straight, max_steps=40, valid_every=1000)
    run_training(toy_corpus, toy_spm, resumed, max_steps=20, valid_every=1000)
    run_training(toy_corpus, toy_spm, resumed, max_steps=40, valid_every=1000)
    a = load_checkpoint(straight / "checkpoints/last.pt")
    b = load_checkpoint(resumed / "checkpoints/last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 40
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], rtol=0, atol=0, msg=name)


def test_resume_after_kill_9_continues_exactly(toy_corpus, toy_spm, tmp_path):
    """A run killed without warning (kill -9) after a periodic checkpoint and run again ends with the
    parameters of an uninterrupted run: nothing half-written is read, nothing is replayed twice."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run_training(toy_corpus, toy_spm, straight, max_steps=40, valid_every=1000, checkpoint_every=10, log_every=1)
    code = (
        "import json, logging, sys; from pathlib import Path; from conftest import run_training; "
        "logging.basicConfig(level=logging.INFO); a = json.loads(sys.argv[1]); "
        f"run_training(a['corpus'], a['spm'], Path({str(killed)!r}), "
        "max_steps=40, valid_every=1000, checkpoint_every=10, log_every=1)"
    )
    args = json.dumps(
        {"corpus": {k: str(v) for k, v in toy_corpus.items()}, "spm": {k: str(v) for k, v in toy_spm.items()}}
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.Popen([sys.executable, "-c", code, args], stderr=subprocess.PIPE, text=True, env=env)
    timer = threading.Timer(120.0, proc.kill)
    timer.start()
    for line in proc.stderr:
        if "checkpoint at step 20" in line:
            proc.kill()  # SIGKILL: no handler runs, the process ends mid-step
            break
    proc.communicate(timeout=60)
    timer.cancel()
    assert proc.returncode == -signal.SIGKILL
    step = load_checkpoint(killed / "checkpoints/last.pt")["progress"]["step"]
    assert 20 <= step < 40, step
    run_training(toy_corpus, toy_spm, killed, max_steps=40, valid_every=1000, checkpoint_every=10, log_every=1)
    a = load_checkpoint(straight / "checkpoints/last.pt")
    b = load_checkpoint(killed / "checkpoints/last.pt")
    assert b["progress"]["step"] == 40 and b["progress"]["tokens"] == a["progress"]["tokens"]
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], rtol=0, atol=0, msg=name)
    for x, y in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values(), strict=True):
        torch.testing.assert_close(x["exp_avg_sq"], y["exp_avg_sq"], rtol=0, atol=0)


def test_sigterm_saves_a_checkpoint_and_says_so(toy_corpus, toy_spm, tmp_path):
    """A training process that gets SIGTERM writes last.pt and exits with a one-line message."""
    args = json.dumps(
        {"corpus": {k: str(v) for k, v in toy_corpus.items()}, "spm": {k: str(v) for k, v in toy_spm.items()}}
    )
    code = (
        "import json, sys; from pathlib import Path; from conftest import run_training; "
        "from nmt.entry import entry_point; a = json.loads(sys.argv[1])\n"
        "with entry_point():\n"
        f"    run_training(a['corpus'], a['spm'], Path({str(tmp_path / 'm')!r}), "
        "max_steps=100000, valid_every=100000, checkpoint_every=100000)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.Popen([sys.executable, "-c", code, args], stderr=subprocess.PIPE, text=True, env=env)
    timer = threading.Timer(120.0, proc.kill)  # a safety net, should the child never log a step
    timer.start()
    seen = []
    for line in proc.stderr:  # signal once training is under way, however long the start took
        seen.append(line)
        if "| epoch" in line:
            os.kill(proc.pid, signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=120)
    timer.cancel()
    err = "".join(seen) + err
    assert proc.returncode == 1, err[-2000:]
    assert "training stopped by signal 15" in err and "run the same command again to resume" in err
    assert "Traceback" not in err and err.rstrip().splitlines()[-1].startswith("error: training stopped by signal 15")
    ckpt = load_checkpoint(tmp_path / "m/checkpoints/last.pt")
    assert ckpt["progress"]["step"] > 0


def test_resume_refuses_a_checkpoint_of_another_model(toy_corpus, toy_spm, tmp_path):
    run_training(toy_corpus, toy_spm, tmp_path, max_steps=2, valid_every=1000)
    with pytest.raises(DataError, match=r"last.pt: checkpoint of a different model .* delete the model directory"):
        run_training(toy_corpus, toy_spm, tmp_path, model={**TOY_MODEL, "d_model": 32}, max_steps=4)


def train_with_meta(toy_corpus, toy_spm, model_dir, spm=None, model=TOY_MODEL, **overrides):
    """:func:`run_training` with the languages and normalization recorded, as the workflow trains."""
    spm = spm or toy_spm
    return train(
        model, tiny_train_config(**overrides), toy_corpus["train.en"], toy_corpus["train.de"], toy_corpus["dev.en"],
        toy_corpus["dev.de"], spm["en"], spm["de"], model_dir, meta=ModelMeta("en", "de", normalize_punctuation=True),
    )  # fmt: skip


def test_fine_tuning_starts_from_the_trained_model(trained_model, toy_corpus, toy_spm, tmp_path):
    model_dir, summary = trained_model
    # Warmup over 1000 steps keeps the first update tiny, so its dev loss is the starting point's.
    first_step = {"max_steps": 1, "valid_every": 1, "warmup_steps": 1000}
    tuned = train_with_meta(toy_corpus, toy_spm, tmp_path / "tuned", init_from=str(model_dir), **first_step)
    scratch = train_with_meta(toy_corpus, toy_spm, tmp_path / "scratch", **first_step)
    assert tuned["valid"]["loss"] == pytest.approx(summary["valid"]["loss"], abs=0.05)
    assert scratch["valid"]["loss"] > 3 > 10 * tuned["valid"]["loss"]
    # Weights only: a new optimizer (one Adam step taken) and the schedule from its start.
    last = load_checkpoint(tmp_path / "tuned" / "checkpoints" / "last.pt")
    assert last["progress"]["step"] == 1
    assert all(int(state["step"]) == 1 for state in last["optimizer"]["state"].values())
    # The model directory records what translation needs.
    meta = json.loads((tmp_path / "tuned" / "meta.json").read_text())
    assert meta["src_lang"] == "en" and meta["trg_lang"] == "de"
    assert meta["source_normalization"] == {
        "lang": "en", "unicode": "NFC", "moses_punctuation": True, "control_characters": "removed",
        "whitespace": "collapsed",
    }  # fmt: skip
    assert meta["bt_tag"] == {"tag": "<BT>", "tagged_training_sources": False, "tag_inputs": False}
    assert meta["subword"]["src.model"]["sha256"] == hash_file(toy_spm["en"])


def test_fine_tuning_refuses_other_vocabularies_and_architectures(trained_model, toy_corpus, toy_spm, tmp_path):
    model_dir, _ = trained_model
    other = {"en": tmp_path / "spm" / "en.model", "de": tmp_path / "spm" / "de.model"}
    train_subword(
        [toy_corpus["train.en"]], [toy_corpus["train.de"]], other["en"], other["de"], SubwordConfig(vocab_size=60)
    )
    with pytest.raises(ConfigError) as excinfo:
        train_with_meta(toy_corpus, toy_spm, tmp_path / "a", spm=other, init_from=str(model_dir), max_steps=1)
    assert_one_line(excinfo, "training.init_from", model_dir / "src.model", other["en"], "same vocabularies")
    with pytest.raises(ConfigError) as excinfo:
        train_with_meta(
            toy_corpus, toy_spm, tmp_path / "b", model={**TOY_MODEL, "d_model": 32}, init_from=str(model_dir)
        )
    assert_one_line(excinfo, "training.init_from", model_dir, "d_model 64 != 32")
