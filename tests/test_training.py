"""Training on the toy task: it learns, it resumes exactly, it stops cleanly on SIGTERM."""

import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
import torch
from conftest import REPO, TOY_MODEL, assert_one_line, run_training, tiny_train_config, toy_files

import nmt.training.loop as loop
from nmt.atomic import hash_file, read_lines
from nmt.checkpoint import average_state_dicts, list_snapshots, load_checkpoint, save_checkpoint, save_snapshot
from nmt.config import DecodeConfig, SubwordConfig, TrainConfig
from nmt.data.subword import train_subword
from nmt.decoding.translation import Translator, translate_lines
from nmt.device import get_device
from nmt.errors import ConfigError, TrainingError
from nmt.evaluation.metrics import score_corpus
from nmt.model_config import ModelMeta
from nmt.model_dir import load_model
from nmt.training.loop import best_validation, is_better, train
from nmt.training.optimizer import anneal_on_plateau, get_lr, is_annealed_out, lr_at_step, spent, warn_about_schedule


def test_lr_schedule():
    assert lr_at_step(1, 1.0, 100) == pytest.approx(0.01)
    assert lr_at_step(100, 1.0, 100) == pytest.approx(1.0)
    assert lr_at_step(400, 1.0, 100) == pytest.approx(0.5)


def test_inverse_sqrt_without_warmup_decays_from_the_first_update():
    """warmup_steps 0 is the limit of the schedule as the warmup shrinks: 1/sqrt(step) from step 1, not a
    constant rate."""
    assert [lr_at_step(step, 1.0, 0) for step in (1, 4, 100)] == pytest.approx([1.0, 0.5, 0.1])
    config = TrainConfig(lr=1e-3, lr_schedule="inverse_sqrt", warmup_steps=0)
    assert get_lr({"step": 0}, config) == pytest.approx(1e-3)  # the first update runs at the peak
    assert get_lr({"step": 99}, config) == pytest.approx(1e-4)


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
    hyps = translate_lines(Translator(model, src_sp, trg_sp, DecodeConfig(), device), ["the big dog runs"])
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
    hyps = translate_lines(Translator(model, src_sp, trg_sp, DecodeConfig(method="beam", beam_size=3), device), src)
    test_scoring = score_corpus(hyps, ref, "zh")["bleu"]
    assert round(summary["valid"]["bleu"], 2) == test_scoring["score"]
    assert signature.startswith(test_scoring["signature"])


def test_model_selection_direction_per_metric():
    """BLEU and chrF are better higher, the loss lower; the first of equal scores is the one kept."""
    history = [
        {"step": 30, "loss": 2.0, "bleu": 10.0, "chrf": 50.0},
        {"step": 60, "loss": 1.5, "bleu": 12.0, "chrf": 40.0},
        {"step": 90, "loss": 1.5, "bleu": 12.0, "chrf": 50.0},
    ]
    assert [best_validation(history, m)["step"] for m in ("bleu", "chrf", "loss")] == [60, 30, 60]
    assert is_better("chrf", 41.0, 40.0) and not is_better("chrf", 39.0, 40.0) and is_better("chrf", 1.0, None)
    assert is_better("loss", 1.0, 2.0) and not is_better("loss", 3.0, 2.0)


def test_dev_chrf_picks_the_model(toy_corpus, toy_spm, tmp_path):
    """valid_metric chrf: the model is the checkpoint of the highest dev chrF in valid.tsv, and its dev chrF is what
    scoring its translation of the dev set as a test set gives."""
    summary = run_training(toy_corpus, toy_spm, tmp_path, max_steps=90, valid_every=30, valid_metric="chrf")
    header, *rows = [line.split("\t") for line in (tmp_path / "valid.tsv").read_text().splitlines()]
    assert header == ["step", "loss", "ppl", "bleu", "chrf", "seconds"] and len(rows) == 3
    chrfs = [float(row[4]) for row in rows]
    assert summary["best_step"] == int(rows[chrfs.index(max(chrfs))][0])
    assert round(summary["valid"]["chrf"], 2) == max(chrfs)
    signature = summary["valid"]["chrf_signature"]
    assert signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no")
    assert signature.endswith("|search:greedy")
    best = load_checkpoint(tmp_path / "checkpoints/best.pt")["model"]
    model = load_checkpoint(tmp_path / "model.pt")["model"]
    assert all(torch.equal(model[name], best[name]) for name in model)
    device = get_device("cpu")
    model, src_sp, trg_sp = load_model(tmp_path, device)
    src, ref = read_lines(toy_corpus["dev.en"]), read_lines(toy_corpus["dev.de"])
    hyps = translate_lines(Translator(model, src_sp, trg_sp, DecodeConfig(method="greedy"), device), src)
    assert round(summary["valid"]["chrf"], 2) == score_corpus(hyps, ref)["chrf"]["score"]


def test_checkpoints_load_weights_only(trained_model):
    model_dir, _ = trained_model
    for name in ("model.pt", "checkpoints/last.pt", "checkpoints/best.pt"):
        ckpt = torch.load(model_dir / name, weights_only=True)
        assert "model" in ckpt and "spec" in ckpt


# Gehring et al. (2017): Nesterov SGD, lr 0.25, momentum 0.99, clipping at 0.1, annealing on a plateau.
NESTEROV = {
    "optimizer": "nesterov",
    "lr": 0.25,
    "clip_norm": 0.1,
    "lr_schedule": "anneal_on_plateau",
    "warmup_steps": 0,
}


@pytest.mark.parametrize(
    "options",
    [
        {"valid_every": 1000},
        # A rate too high for the toy task: the dev perplexity goes up and down, so validations every 5
        # updates anneal the rate before and after the resume point; model.pt averages 3 checkpoints.
        {**NESTEROV, "lr": 30.0, "valid_every": 5, "average_last": 3, "anneal_factor": 0.5},
    ],
    ids=["adam", "nesterov_anneal_average"],
)
def test_resume_continues_exactly(toy_corpus, toy_spm, tmp_path, options):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_training(toy_corpus, toy_spm, straight, max_steps=40, **options)
    run_training(toy_corpus, toy_spm, resumed, max_steps=20, **options)
    lr_scale = load_checkpoint(resumed / "checkpoints/last.pt")["progress"]["lr_scale"]
    run_training(toy_corpus, toy_spm, resumed, max_steps=40, **options)
    a = load_checkpoint(straight / "checkpoints/last.pt")
    b = load_checkpoint(resumed / "checkpoints/last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == 40
    assert_same_curves(straight, resumed, valid=False)  # the first run validated at its max_steps 20
    assert a["progress"] == b["progress"] | {"train_seconds": a["progress"]["train_seconds"]}
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], rtol=0, atol=0, msg=name)
    if "average_last" in options:
        assert a["progress"]["lr_scale"] < lr_scale < 1  # annealed before and after the resume
        assert list(list_snapshots(straight / "checkpoints")) == list(list_snapshots(resumed / "checkpoints"))
        for name, tensor in load_checkpoint(straight / "model.pt")["model"].items():
            torch.testing.assert_close(tensor, load_checkpoint(resumed / "model.pt")["model"][name], rtol=0, atol=0)


def test_model_is_the_average_of_the_last_checkpoints(toy_corpus, toy_spm, tmp_path, caplog):
    """With average_last 3, model.pt holds the mean of the three kept checkpoints when it scores at least as well
    on dev as the best checkpoint, and the averaged model's dev scores are logged and in summary.json beside those
    of the best checkpoint. Snapshots late in a linear decay, as Vaswani et al. averaged: the average wins here
    (dev BLEU 8.7 against 5.8; with seed 1 it loses, 5.4 against 7.1); of steps 40, 50 and 60 of the inverse square
    root it loses (4.9 against 6.0)."""
    caplog.set_level(logging.INFO, logger="nmt")
    options = dict(max_steps=60, valid_every=30, average_last=3, lr_schedule="linear", checkpoint_every=5, seed=3)
    summary = run_training(toy_corpus, toy_spm, tmp_path, **options)
    kept = list_snapshots(tmp_path / "checkpoints")
    assert list(kept) == [50, 55, 60]
    states = [load_checkpoint(path)["model"] for path in kept.values()]
    model = load_checkpoint(tmp_path / "model.pt")["model"]
    best = load_checkpoint(tmp_path / "checkpoints/best.pt")["model"]
    assert model.keys() == states[0].keys()
    for name, tensor in model.items():
        torch.testing.assert_close(tensor, torch.stack([s[name] for s in states]).mean(0), msg=name)
    assert any(not torch.equal(model[name], best[name]) for name in model)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved == summary and summary["model"] == "average of the last 3 checkpoints"
    assert summary["averaged"]["bleu"] >= summary["valid"]["bleu"]
    assert summary["averaged"]["steps"] == [50, 55, 60] and summary["valid"]["step"] in (30, 60)
    assert {"loss", "ppl", "bleu", "chrf"} <= set(summary["averaged"]) and summary["averaged"]["loss"] > 0
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if m.startswith(("averaged model of steps", "model.pt:"))] == [
        f"averaged model of steps [50, 55, 60]: loss {summary['averaged']['loss']:.3f} | ppl "
        f"{summary['averaged']['ppl']:.2f} | bleu {summary['averaged']['bleu']:.2f} | chrf "
        f"{summary['averaged']['chrf']:.2f} (best checkpoint: bleu {summary['valid']['bleu']:.3f})",
        f"model.pt: the average of the last 3 checkpoints (dev bleu {summary['averaged']['bleu']:.3f}), at least "
        f"as good as the best checkpoint (step {summary['best_step']}, {summary['valid']['bleu']:.3f})",
    ]
    device = get_device("cpu")
    loaded, src_sp, trg_sp = load_model(tmp_path, device)
    assert translate_lines(Translator(loaded, src_sp, trg_sp, DecodeConfig(), device), ["the dog"])  # model.pt loads


@pytest.mark.parametrize("valid_metric", ["bleu", "loss"])
def test_an_average_worse_than_the_best_checkpoint_is_not_the_model(
    toy_corpus, toy_spm, tmp_path, caplog, monkeypatch, valid_metric
):
    """model.pt is the better of the average and the best checkpoint by the dev valid_metric; summary.json and
    the log say which. The average here is of weights zeroed after averaging: far worse on dev."""
    caplog.set_level(logging.INFO, logger="nmt")
    average_snapshots = loop.average_snapshots

    def zeroed(*args):
        steps, weights = average_snapshots(*args)
        return steps, {name: torch.zeros_like(tensor) for name, tensor in weights.items()}

    monkeypatch.setattr(loop, "average_snapshots", zeroed)
    summary = run_training(
        toy_corpus, toy_spm, tmp_path, max_steps=60, valid_every=30, average_last=3, valid_metric=valid_metric
    )
    best = load_checkpoint(tmp_path / "checkpoints/best.pt")["model"]
    for name, tensor in load_checkpoint(tmp_path / "model.pt")["model"].items():
        torch.testing.assert_close(tensor, best[name], rtol=0, atol=0, msg=name)
    assert summary["model"] == "best checkpoint, better on dev than the average of the last 3 checkpoints"
    assert summary["averaged"]["steps"] == [40, 50, 60]
    if valid_metric == "bleu":
        assert summary["averaged"]["bleu"] < summary["valid"]["bleu"]
    else:
        assert summary["averaged"]["loss"] > summary["valid"]["loss"]
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model.pt:")]
    assert logged == [
        f"model.pt: the best checkpoint (step {summary['best_step']}, dev {valid_metric} "
        f"{summary['valid'][valid_metric]:.3f}), better than the average of the last 3 checkpoints "
        f"({summary['averaged'][valid_metric]:.3f})"
    ]


def test_snapshots_rotate_and_average(tmp_path):
    """The last ``keep`` snapshots stay; those of a redone future and an earlier run's off-interval final
    state go; the average is the float32 mean, tied weights (one storage, two names) counted once."""
    for step in (10, 20, 25, 30):  # 25: the final state of a shorter run, now trained further
        save_checkpoint(tmp_path / f"step{step}.pt", {"model": {}})
    for step in (10, 20):  # a run resumed from step 10 redoes step 20: the stale 25 and 30 go with it
        weight = torch.full((2,), float(step))
        save_snapshot(tmp_path, step, {"model": {"emb": weight, "out": weight, "n": torch.tensor(3)}}, 2, 10)
    assert list(list_snapshots(tmp_path)) == [10, 20]
    weight = torch.tensor([30.0, 60.0])
    save_snapshot(tmp_path, 30, {"model": {"emb": weight, "out": weight, "n": torch.tensor(3)}}, 2, 10)
    assert list(list_snapshots(tmp_path)) == [20, 30]
    average = average_state_dicts(list(list_snapshots(tmp_path).values()))
    assert average["emb"].tolist() == average["out"].tolist() == [25.0, 40.0] and average["n"].item() == 3


def test_nesterov_sgd_learns_the_toy_task(toy_corpus, toy_spm, tmp_path):
    run_training(toy_corpus, toy_spm, tmp_path, max_steps=100, valid_every=50, log_every=10, **NESTEROV)
    losses = [float(line.split("\t")[2]) for line in (tmp_path / "train.tsv").read_text().splitlines()[1:]]
    assert losses[-1] < losses[0] / 2, losses
    dev_losses = [float(line.split("\t")[1]) for line in (tmp_path / "valid.tsv").read_text().splitlines()[1:]]
    assert dev_losses[0] < 3.0 and dev_losses[1] < dev_losses[0] - 0.5, dev_losses  # uniform: log(81) = 4.4
    optimizer = load_checkpoint(tmp_path / "checkpoints/last.pt")["optimizer"]
    assert optimizer["param_groups"][0]["nesterov"] and optimizer["param_groups"][0]["momentum"] == 0.99


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_decay_schedules_warm_up_to_lr_and_reach_zero_where_the_budget_ends(schedule):
    """Warmup to lr itself, then decay over the rest of the budget to zero at max_steps, or at max_minutes of
    training time if that comes first (a decay that also ran during the warmup would peak below lr)."""
    config = TrainConfig(lr=1e-3, lr_schedule=schedule, warmup_steps=10, max_steps=100)
    rates = [get_lr({"step": step, "train_seconds": 0.0}, config) for step in range(101)]  # of update step + 1
    assert rates[0] == pytest.approx(1e-4)  # warmup: a tenth of the peak
    assert rates[9] == pytest.approx(1e-3, rel=1e-12) and max(rates) == rates[9]  # update 10 runs at lr
    assert all(a > b for a, b in zip(rates[9:], rates[10:], strict=False)) and rates[99] < 1e-3 / 50
    assert rates[100] == 0.0  # where the budget ends
    decayed = (54 - 9) / (100 - 9)  # update 55: the share of the decay from update 10 to the budget's end
    assert rates[54] == pytest.approx(
        1e-3 * (1 - decayed if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * decayed)))
    )
    timed = TrainConfig(lr=1e-3, lr_schedule=schedule, warmup_steps=10, max_steps=100, max_minutes=1.0)
    assert get_lr({"step": 20, "train_seconds": 30.0}, timed) == pytest.approx(rates[50])  # half the minute
    assert get_lr({"step": 9, "train_seconds": 3.0}, timed) == pytest.approx(1e-3, rel=1e-12)  # the steps' share
    assert get_lr({"step": 20, "train_seconds": 60.0}, timed) == 0.0
    assert spent({"step": 20, "train_seconds": 60.0}, timed) == 1.0 == spent({"step": 100, "train_seconds": 1}, timed)


def test_a_warmup_as_long_as_the_budget_is_warned_of(caplog):
    """A budget within the warmup (a tiny config, or nmt train with only max_steps and the default warmup of 1000
    updates) trains at a fraction of lr: a warning says so."""
    with caplog.at_level(logging.WARNING, logger="nmt.training.optimizer"):
        warn_about_schedule(TrainConfig(lr=1e-3, max_steps=999, warmup_steps=100))
        warn_about_schedule(TrainConfig(lr=1e-3, max_steps=1, warmup_steps=0))
        assert not caplog.records
        warn_about_schedule(TrainConfig(lr=1e-3, max_steps=60))  # warmup_steps 1000 by default
        [record] = caplog.records
        message = record.getMessage()
        assert record.levelno == logging.WARNING and "\n" not in message
        assert "warmup_steps 1000 >= max_steps 60" in message and "at most 6e-05, not lr 0.001" in message
        warn_about_schedule(TrainConfig(lr=1e-3, max_steps=100, warmup_steps=100))  # lr at the last update only
        assert len(caplog.records) == 2


def test_a_time_budget_stops_training_and_ends_the_schedule(toy_corpus, toy_spm, tmp_path):
    budget = dict(max_steps=100000, max_minutes=0.05, lr_schedule="linear", warmup_steps=0)
    summary = run_training(toy_corpus, toy_spm, tmp_path, **budget, valid_every=10**6, log_every=1)
    assert 1 < summary["steps"] < 100000 and 3.0 <= summary["train_seconds"] < 3.0 + 5
    lrs = [float(line.split("\t")[3]) for line in (tmp_path / "train.tsv").read_text().splitlines()[1:]]
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] < lrs[0]  # decaying with the time spent
    valid = (tmp_path / "valid.tsv").read_text().splitlines()
    assert valid[0].split("\t")[-1] == "seconds" and float(valid[-1].split("\t")[-1]) >= 3.0


def test_anneal_on_plateau_divides_the_rate_and_stops_below_min_lr():
    config = TrainConfig(lr=0.25, lr_schedule="anneal_on_plateau", warmup_steps=0, min_lr=1e-3)
    progress = {"step": 99, "lr_scale": 1.0, "best_dev_loss": None}
    rates = []
    for dev_loss in (3.0, 2.0, 2.0, 1.5, 1.6, 1.7):  # a plateau (equal is no gain), a gain, two losses
        anneal_on_plateau(progress, dev_loss, config)
        rates.append(get_lr(progress, config))
    assert rates == pytest.approx([0.25, 0.25, 0.025, 0.025, 0.0025, 0.00025])
    assert progress["best_dev_loss"] == 1.5 and is_annealed_out(progress, config)
    first = {"step": 0, "lr_scale": 1.0}
    assert get_lr(first, TrainConfig(lr=0.25, lr_schedule="anneal_on_plateau", warmup_steps=4)) == 0.0625
    inverse_sqrt = TrainConfig()
    anneal_on_plateau(progress := {"lr_scale": 1.0, "best_dev_loss": 1.0}, 2.0, inverse_sqrt)
    assert progress["lr_scale"] == 1.0 and not is_annealed_out(progress, inverse_sqrt)


def test_training_stops_when_annealing_reaches_min_lr(toy_corpus, toy_spm, tmp_path):
    """A rate too small to change any float32 weight keeps the dev perplexity flat: the second validation
    anneals the rate below min_lr and training stops there, long before max_steps."""
    schedule = dict(lr=1e-12, lr_schedule="anneal_on_plateau", warmup_steps=0, min_lr=5e-13)
    summary = run_training(toy_corpus, toy_spm, tmp_path, max_steps=1000, valid_every=5, log_every=5, **schedule)
    assert summary["steps"] == 10
    ckpt = load_checkpoint(tmp_path / "checkpoints/last.pt")
    assert ckpt["progress"]["lr_scale"] == pytest.approx(0.1)
    assert [h["loss"] for h in ckpt["history"]][0] == ckpt["history"][1]["loss"]


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
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "checkpoint at step 20" in line:
            proc.kill()  # SIGKILL: no handler runs, the process ends mid-step
            break
    _, err = proc.communicate(timeout=60)
    timer.cancel()
    assert proc.returncode == -signal.SIGKILL
    step = load_checkpoint(killed / "checkpoints/last.pt")["progress"]["step"]
    assert 20 <= step < 40, step
    # The curves so far are on disk, a row per logged step (written before its log line).
    logged = [int(m) for m in re.findall(r"step (\d+) \| epoch", "".join(seen) + err)]
    rows = read_tsv(killed / "train.tsv")
    assert [r["step"] for r in rows] == [str(s) for s in range(1, len(rows) + 1)] and len(rows) >= max(logged)
    run_training(toy_corpus, toy_spm, killed, max_steps=40, valid_every=1000, checkpoint_every=10, log_every=1)
    assert_same_curves(straight, killed)
    a = load_checkpoint(straight / "checkpoints/last.pt")
    b = load_checkpoint(killed / "checkpoints/last.pt")
    assert b["progress"]["step"] == 40 and b["progress"]["tokens"] == a["progress"]["tokens"]
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], rtol=0, atol=0, msg=name)
    for x, y in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values(), strict=True):
        torch.testing.assert_close(x["exp_avg_sq"], y["exp_avg_sq"], rtol=0, atol=0)


def test_a_resume_between_log_lines_logs_the_loss_of_the_whole_interval(toy_corpus, toy_spm, tmp_path):
    """A run stopped between two log lines (SIGTERM saves last.pt at any step) and resumed logs at the next line the
    mean loss of every update since the line before, as an uninterrupted run does, not of those after the resume."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_training(toy_corpus, toy_spm, straight, max_steps=40, valid_every=1000, log_every=10)
    run_training(toy_corpus, toy_spm, resumed, max_steps=15, valid_every=1000, log_every=10)
    run_training(toy_corpus, toy_spm, resumed, max_steps=40, valid_every=1000, log_every=10)
    assert_same_curves(straight, resumed, valid=False)  # the first run validated at its max_steps 15
    logs = [load_checkpoint(run / "checkpoints/last.pt")["train_log"] for run in (straight, resumed)]
    assert [{**r, "tokens_per_second": 0} for r in logs[0]] == [{**r, "tokens_per_second": 0} for r in logs[1]]


def read_tsv(path):
    header, *rows = path.read_text().splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"), strict=True)) for row in rows]


def assert_same_curves(straight, resumed, valid=True):
    """train.tsv (and valid.tsv) of a resumed run equal an uninterrupted run's, but for the measured speed and
    training time."""
    if valid:
        untimed = [[{**r, "seconds": ""} for r in read_tsv(run / "valid.tsv")] for run in (straight, resumed)]
        assert untimed[0] == untimed[1]
    a, b = read_tsv(straight / "train.tsv"), read_tsv(resumed / "train.tsv")
    assert a and a[-1]["step"] == "40"
    assert [{**r, "tokens_per_second": ""} for r in a] == [{**r, "tokens_per_second": ""} for r in b]


def test_log_line_has_eta_and_tensorboard_has_the_curves(toy_corpus, toy_spm, tmp_path, caplog):
    """Each log line says the time spent and the time left; the TensorBoard events hold train.tsv's loss."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with caplog.at_level(logging.INFO, logger="nmt"):
        run_training(toy_corpus, toy_spm, tmp_path, max_steps=40, log_every=10, valid_every=20, tensorboard=True)
    etas = re.findall(r"step (\d+) \| .* \| elapsed (\d+s|\d+m\d\ds) \| ETA (\d+s|\d+m\d\ds)", caplog.text)
    assert [int(step) for step, _, _ in etas] == [10, 20, 30, 40] and etas[-1][2] == "0s", caplog.text
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    loss = {e.step: e.value for e in events.Scalars("train/loss")}
    assert loss == pytest.approx({int(r["step"]): float(r["loss"]) for r in read_tsv(tmp_path / "train.tsv")}, abs=1e-4)
    assert [e.step for e in events.Scalars("valid/bleu")] == [20, 40]


def test_tensorboard_without_the_package_is_one_line(toy_corpus, toy_spm, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    with pytest.raises(ConfigError, match=r"^training.tensorboard: needs the tensorboard package \(pip install"):
        run_training(toy_corpus, toy_spm, tmp_path, max_steps=2, tensorboard=True)


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


def test_a_checkpoint_of_another_model_is_set_aside(toy_corpus, toy_spm, tmp_path, caplog):
    """Another architecture in the same directory trains from scratch, with one line naming the setting that
    differs."""
    run_training(toy_corpus, toy_spm, tmp_path, max_steps=20, valid_every=1000)
    caplog.set_level(logging.INFO, logger="nmt")
    run_training(toy_corpus, toy_spm, tmp_path, model={**TOY_MODEL, "d_model": 32}, max_steps=20, valid_every=20)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "model.config.d_model 64 -> 32" in warnings[0], warnings
    assert warnings[0].endswith(
        f"{tmp_path / 'model.pt'}, the model of another training, is replaced when this one ends"
    ), warnings
    assert "resumed" not in caplog.text and (tmp_path / "checkpoints.replaced/last.pt").is_file()


DAMAGES = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[:1000]),
    "of another model": lambda p: save_checkpoint(p, {**load_checkpoint(p), "spec": {"arch": "rnn", "config": 1}}),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_last_checkpoint_resumes_from_the_one_before(damage, toy_corpus, toy_spm, tmp_path, caplog):
    """A truncated last.pt (a full disk, a bad copy) or another run's costs the updates since the checkpoint
    before it, with one line saying so, and the run ends where an uninterrupted one does; not a failure, nor a
    run from scratch."""
    straight, damaged = tmp_path / "straight", tmp_path / "damaged"
    run_training(toy_corpus, toy_spm, straight, max_steps=40)
    run_training(toy_corpus, toy_spm, damaged, max_steps=30)
    assert load_checkpoint(damaged / "checkpoints/last.prev.pt")["progress"]["step"] == 20
    DAMAGES[damage](damaged / "checkpoints/last.pt")
    caplog.set_level(logging.INFO, logger="nmt")
    run_training(toy_corpus, toy_spm, damaged, max_steps=40)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert warnings[0].startswith(str(damaged / "checkpoints/last.pt")) and "last.prev.pt" in warnings[0]
    assert any("resumed from" in r.getMessage() and "at step 20" in r.getMessage() for r in caplog.records)
    a, b = (load_checkpoint(d / "checkpoints/last.pt") for d in (straight, damaged))
    assert a["progress"]["step"] == b["progress"]["step"] == 40
    for name, tensor in a["model"].items():
        torch.testing.assert_close(tensor, b["model"][name], rtol=0, atol=0, msg=name)


def train_with_meta(toy_corpus, toy_spm, model_dir, spm=None, model=TOY_MODEL, **overrides):
    """:func:`run_training` with the languages and normalization recorded, as the workflow trains."""
    files = toy_files(toy_corpus, spm or toy_spm, model_dir)
    return train(model, tiny_train_config(**overrides), files, meta=ModelMeta("en", "de", normalize_punctuation=True))


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
        "lang": "en",
        "unicode": "NFC",
        "moses_punctuation": True,
        "control_characters": "removed",
        "whitespace": "collapsed",
    }
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


def test_accumulation_trains_on_the_batches_left_at_the_end_of_an_epoch(toy_corpus, toy_spm, tmp_path):
    """With accum_steps batches an update, an epoch of a number of batches that is no multiple of it ends with a
    smaller update on the batches left, none dropped."""
    one = run_training(toy_corpus, toy_spm, tmp_path / "one", max_steps=10000, max_epochs=1, valid_every=1000)
    batches = one["steps"]
    accum = next(a for a in (2, 3, 4, 5) if batches % a)
    summary = run_training(
        toy_corpus, toy_spm, tmp_path / "acc", max_steps=10000, max_epochs=1, valid_every=1000, accum_steps=accum
    )
    assert summary["steps"] == math.ceil(batches / accum) and summary["train_tokens"] == one["train_tokens"]


def test_a_diverged_training_stops_with_one_line_before_its_weights_are_lost(toy_corpus, toy_spm, tmp_path):
    """At lr 1e6 the gradients turn to inf or NaN within a few updates: the training stops there with an error that
    says what to change (it used to finish, with NaN weights, as a success)."""
    config = tiny_train_config(lr=1e6, warmup_steps=1, max_steps=30, checkpoint_every=100, valid_every=100)
    with pytest.raises(TrainingError, match=r"^training diverged at update \d+: the gradient norm is (nan|inf)"):
        train(TOY_MODEL, config, toy_files(toy_corpus, toy_spm, tmp_path / "model"))
    assert not (tmp_path / "model" / "model.pt").exists()


def test_the_logged_speed_leaves_validations_out_but_not_the_updates_before_them(toy_corpus, toy_spm, tmp_path):
    """A validation inside a logging window: the window's speed is its tokens over its update time. Restarting the
    clock at the validation (as before) counted the window's earlier tokens in no time: a speed several times too
    high, here about three times the training's mean."""
    summary = run_training(toy_corpus, toy_spm, tmp_path / "m", max_steps=60, log_every=30, valid_every=10)
    rows = [line.split("\t") for line in read_lines(tmp_path / "m" / "train.tsv")]
    speeds = [float(row[rows[0].index("tokens_per_second")]) for row in rows[1:]]
    assert len(speeds) == 2 and max(speeds) < 2 * summary["tokens_per_second"], (speeds, summary["tokens_per_second"])
