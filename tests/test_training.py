"""Training on the toy task: it learns, it resumes exactly, it stops cleanly on SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch
from conftest import REPO, TOY_MODEL, run_training

from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig
from nmt.data import read_lines
from nmt.errors import DataError
from nmt.metrics import score_corpus
from nmt.training import lr_at_step
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


def test_dev_bleu_is_scored_like_the_test_set(toy_corpus, toy_spm, tmp_path, caplog):
    """Model selection decodes the dev set with the configured search and scores it with the test
    sets' tokenizer for the target language: the kept model's dev BLEU is what scoring its
    translation as a test set gives, and the signature says how it was computed."""
    caplog.set_level("INFO", logger="nmt")
    summary = run_training(
        toy_corpus, toy_spm, tmp_path, max_steps=90, valid_every=30, valid_beam_size=3, trg_lang="zh"
    )
    signature = summary["valid"]["bleu_signature"]
    assert "|tok:zh|" in signature and signature.endswith("|search:beam3")
    assert f"sacreBLEU {signature}" in caplog.text
    device = get_device("cpu")
    model, src_sp, trg_sp = load_model(tmp_path, device)
    src, ref = read_lines(toy_corpus["dev.en"]), read_lines(toy_corpus["dev.de"])
    hyps = translate_lines(model, src_sp, trg_sp, src, DecodeConfig(method="beam", beam_size=3), device)
    test_scoring = score_corpus(hyps, ref, "zh")["bleu"]
    assert round(summary["valid"]["bleu"], 2) == test_scoring["score"]
    assert signature.startswith(test_scoring["signature"])


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
