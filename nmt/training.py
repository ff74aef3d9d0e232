"""Training loop: token batches, Adam or Nesterov SGD and their schedules, validation, early stopping,
checkpoint averaging, resume."""

import contextlib
import json
import logging
import math
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import torch

from nmt.atomic import write_text
from nmt.binarize import binarize, open_training_data
from nmt.checkpoint import (
    TRAINING_KEYS,
    average_state_dicts,
    list_snapshots,
    load_checkpoint,
    save_checkpoint,
    save_snapshot,
)
from nmt.config import DecodeConfig, ModelMeta, TrainConfig
from nmt.curves import Curves
from nmt.data import ParallelData, make_batch, read_lines, token_batches
from nmt.distributed import close_world, init_world, shard
from nmt.errors import ConfigError, DataError, TrainingError
from nmt.loss import LabelSmoothedCrossEntropy
from nmt.metrics import get_metric, score_metric
from nmt.model import Seq2Seq, build_model
from nmt.progress import format_duration
from nmt.subword import load_subword
from nmt.translation import MODEL_FILE, SRC_SPM, TRG_SPM, autocast, get_device, grad_scaler, translate_lines, write_meta

log = logging.getLogger(__name__)


def lr_at_step(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warmup to ``peak_lr`` over ``warmup_steps``, then decay with 1/sqrt(step).

    Vaswani et al. (2017, eq. 3) use ``d_model ** -0.5`` as the peak scale; we take the peak
    learning rate itself from the config, which is easier to compare across model sizes.
    """
    step = max(step, 1)
    if warmup_steps == 0:
        return peak_lr
    return peak_lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam, or SGD with Nesterov momentum (Gehring et al. 2017, section 5.2: momentum 0.99, lr 0.25).

    torch's Nesterov SGD keeps its momentum buffer in gradient units, so changing the rate (warmup,
    annealing) needs no correction of the buffer.
    """
    if config.optimizer == "nesterov":
        return torch.optim.SGD(
            model.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            nesterov=True,
            weight_decay=config.weight_decay,
            fused=True,
        )
    return torch.optim.Adam(
        model.parameters(),
        lr=config.lr,
        betas=config.adam_betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        fused=True,  # one kernel for all parameters; the per-tensor loop was a tenth of a CPU step
    )


def get_lr(step: int, config: TrainConfig, lr_scale: float) -> float:
    """The learning rate of update ``step`` under ``config.lr_schedule``.

    :param lr_scale: product of the annealing factors applied so far (``anneal_on_plateau``; else 1)
    """
    if config.lr_schedule == "inverse_sqrt":
        return lr_at_step(step, config.lr, config.warmup_steps)
    warmup = min(max(step, 1) / config.warmup_steps, 1.0) if config.warmup_steps else 1.0
    return config.lr * warmup * lr_scale


def anneal_on_plateau(progress: dict[str, Any], dev_loss: float, config: TrainConfig) -> None:
    """Divide the rate by ``1 / anneal_factor`` when ``dev_loss`` (log perplexity) is no better than the best.

    Gehring et al. (2017) anneal "once the validation perplexity stops improving ... until it falls
    below 10^-4"; they check once per epoch, we at every validation (``valid_every``). The state lives in
    ``progress`` (``lr_scale``, ``best_dev_loss``), which the checkpoint holds, so a resumed run anneals
    where an uninterrupted one does.
    """
    if config.lr_schedule != "anneal_on_plateau":
        return
    if progress["best_dev_loss"] is None or dev_loss < progress["best_dev_loss"]:
        progress["best_dev_loss"] = dev_loss
        return
    progress["lr_scale"] *= config.anneal_factor
    log.info("dev perplexity did not improve: learning rate annealed to %.2e", config.lr * progress["lr_scale"])


def is_annealed_out(progress: dict[str, Any], config: TrainConfig) -> bool:
    """Whether annealing has taken the rate below ``min_lr``, which ends training."""
    return config.lr_schedule == "anneal_on_plateau" and config.lr * progress["lr_scale"] < config.min_lr


class Stop:
    """Remembers a SIGTERM/SIGINT (what SLURM sends before the walltime kill) until the next step."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __enter__(self) -> "Stop":
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def _handle(self, signum, frame) -> None:
        self.signal = signum

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@torch.no_grad()
def validate(
    model: Seq2Seq,
    dev: ParallelData,
    dev_src_lines: list[str],
    dev_ref_lines: list[str],
    src_sp,
    trg_sp,
    config: TrainConfig,
    device: torch.device,
) -> dict[str, float]:
    """Dev-set per-token loss and perplexity (teacher forcing), and BLEU as the test set is scored.

    The dev set is translated by :func:`valid_search` and scored with the BLEU tokenizer of the
    target language (:func:`nmt.metrics.score_metric`, as for the test sets), so the checkpoint
    is selected on the scale of the reported figure.

    :return: ``loss``, ``ppl``, ``bleu``, and ``bleu_signature`` (sacreBLEU's, with the search appended)
    """
    model.eval()
    criterion = LabelSmoothedCrossEntropy(0.0)
    nll_sum, n_tokens = 0.0, 0
    for indices in token_batches(dev.src.lengths, dev.trg.lengths, config.batch_tokens, seed=0, epoch=0):
        batch = make_batch(dev, indices).to(device)
        with autocast(device, config.bf16):
            logits = model(batch.src, batch.trg_in)
        _, nll = criterion(logits, batch.trg_out)
        nll_sum, n_tokens = nll_sum + float(nll), n_tokens + batch.n_trg_tokens
    search = valid_search(config)
    hyps = translate_lines(model, src_sp, trg_sp, dev_src_lines, search, device, config.bf16)
    bleu, signature = score_metric("bleu", hyps, dev_ref_lines, config.trg_lang)
    signature = f"{signature}|search:{search.describe()}"
    log.info("dev BLEU %.2f, sacreBLEU %s", bleu, signature)
    model.train()
    loss = nll_sum / max(n_tokens, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "bleu": bleu, "bleu_signature": signature}


def valid_search(config: TrainConfig) -> DecodeConfig:
    """Greedy search for ``valid_beam_size`` 1, else beam search with the test-set defaults (length penalty 1)."""
    if config.valid_beam_size == 1:
        return DecodeConfig(method="greedy")
    return DecodeConfig(method="beam", beam_size=config.valid_beam_size)


def train(
    model_options: dict[str, Any],
    config: TrainConfig,
    train_data: str | Path | tuple[list[str | Path], list[str | Path]],
    dev_src: str | Path,
    dev_ref: str | Path,
    src_spm: str | Path,
    trg_spm: str | Path,
    model_dir: str | Path,
    meta: ModelMeta | None = None,
) -> dict[str, Any]:
    """Train a model and write ``model_dir/{model.pt,src.model,trg.model,meta.json,summary.json,train.tsv,valid.tsv}``.

    ``train.tsv`` and ``valid.tsv`` (and with ``config.tensorboard`` the event files in
    ``model_dir/tensorboard``) grow a row per log line and per validation (:class:`nmt.curves.Curves`).

    Interrupted runs resume from ``model_dir/checkpoints/last.pt`` with the same optimizer,
    schedule, random state and position in the epoch, so they end where an uninterrupted run
    would. SIGTERM saves that checkpoint and exits with a message.

    Under ``torchrun`` (see :mod:`nmt.distributed`) every process trains on its share of each
    batch with DistributedDataParallel; rank 0 validates, logs and writes the files.

    :param model_options: ``arch``, ``preset`` and architecture keys (see :func:`nmt.model.build_model`)
    :param config: training settings
    :param train_data: the prefix of a binarized training set (:func:`nmt.binarize.binarize`), or
        (source files, target files) of aligned text, which rank 0 binarizes into ``model_dir/train`` first
    :param meta: languages and normalization of the training data, for ``meta.json`` (see
        :func:`nmt.translation.write_meta`)
    :return: the summary written to ``summary.json``
    """
    model_dir = Path(model_dir)
    ckpt_dir = model_dir / "checkpoints"
    device = get_device(config.device)
    world = init_world(device.type)
    try:
        if device.type == "cuda" and world.size > 1:
            device = torch.device("cuda", world.local_rank)
            torch.cuda.set_device(device)
        if not world.is_main:
            logging.getLogger("nmt").setLevel(logging.WARNING)
        if world.is_main:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
        summary = _train(model_options, config, train_data, dev_src, dev_ref, src_spm, trg_spm, model_dir,
                         device, world)  # fmt: skip
        if world.is_main:
            write_meta(model_dir, meta)
        world.barrier()  # gloo aborts a process whose peer tears the group down first
        return summary
    finally:
        close_world(world)


def _train(
    model_options, config, train_data, dev_src, dev_ref, src_spm, trg_spm, model_dir, device, world
) -> dict[str, Any]:
    ckpt_dir = model_dir / "checkpoints"
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    random.seed(config.seed)

    src_sp, trg_sp = load_subword(src_spm), load_subword(trg_spm)
    shared_vocab = src_sp.serialized_model_proto() == trg_sp.serialized_model_proto()
    if not isinstance(train_data, (str, Path)):  # text: encoded again at every start, by rank 0 only
        text, train_data = train_data, model_dir / "train"
        if world.is_main:
            binarize(*text, src_spm, trg_spm, train_data, config.max_length, max(1, config.threads))
        world.barrier()
    data = open_training_data(train_data, src_spm, trg_spm, config.max_length)  # memory-mapped, shared
    dev_src_lines, dev_ref_lines = read_lines(dev_src), read_lines(dev_ref)
    dev = ParallelData.from_lines(dev_src_lines, dev_ref_lines, src_sp, trg_sp, names=(str(dev_src), str(dev_ref)))
    get_metric("bleu", config.trg_lang)  # a missing tokenizer fails now, not at the first validation
    log.info("training pairs: %d (of at most %d subwords), dev pairs: %d", len(data), config.max_length, len(dev))
    if world.size > 1:
        log.info("data parallel: %d processes, each on 1/%d of every batch (%s)", world.size, world.size, device)

    model = build_model(model_options, src_sp.get_piece_size(), trg_sp.get_piece_size(), shared_vocab).to(device)
    if config.init_from is not None and not (ckpt_dir / "last.pt").exists():  # a resumed run has its own weights
        init_weights(model, config.init_from, src_spm, trg_spm, device)
    if world.rank > 0:  # the same initial weights everywhere, other dropout masks on other ranks
        torch.manual_seed(config.seed + world.rank)
    optimizer = make_optimizer(model, config)
    criterion = LabelSmoothedCrossEntropy(config.label_smoothing)
    scaler = grad_scaler(device, config.bf16)  # float16 on GPUs without bfloat16
    progress = {
        "step": 0,
        "epoch": 1,
        "batch": 0,
        "best": None,
        "bad_evals": 0,
        "train_seconds": 0.0,
        "tokens": 0,
        "lr_scale": 1.0,
        "best_dev_loss": None,
    }
    history: list[dict[str, float]] = []  # validations
    train_log: list[dict[str, float]] = []  # training loss every log_every updates (train.tsv)
    last = ckpt_dir / "last.pt"
    if last.exists():
        ckpt = load_checkpoint(last, map_location=device, keys=TRAINING_KEYS)
        if ckpt["spec"] != model.spec:
            raise DataError(
                f"{last}: checkpoint of a different model ({ckpt['spec']['arch']}, {ckpt['spec']['config']}); "
                "delete the model directory to train from scratch"
            )
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        progress, history, train_log = {**progress, **ckpt["progress"]}, ckpt["history"], ckpt.get("train_log", [])
        rng = ckpt["rng"] if isinstance(ckpt["rng"], list) else [ckpt["rng"]]
        if len(rng) == world.size:
            _set_rng_state(rng[world.rank])
        else:  # the data order does not depend on it; only dropout masks differ from an uninterrupted run
            log.warning("resuming %d processes from a checkpoint of %d: random state re-seeded", world.size, len(rng))
            torch.manual_seed(config.seed + world.rank + progress["step"])
        log.info(
            "resumed from %s at step %d (epoch %d, batch %d)",
            last,
            progress["step"],
            progress["epoch"],
            progress["batch"],
        )
    curves = Curves(model_dir, train_log, history, progress["step"], config.tensorboard) if world.is_main else None
    trained = model
    if world.size > 1:
        trained = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    def save_last() -> None:
        rng = world.gather(_rng_state())  # a collective: every rank calls save_last at the same step
        if world.is_main:
            save_checkpoint(
                last,
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "progress": progress,
                    "history": history,
                    "train_log": train_log,
                    "rng": rng,
                    "spec": model.spec,
                },
            )

    def evaluate_and_keep_best() -> None:
        scores = None
        if world.is_main:
            scores = validate(model, dev, dev_src_lines, dev_ref_lines, src_sp, trg_sp, config, device)
        scores = world.broadcast(scores)
        history.append({"step": progress["step"], **scores})
        if curves:
            curves.add_valid(history[-1])
        metric = scores[config.valid_metric]
        if progress["best"] is None or better(metric, progress["best"]):
            progress["best"], progress["bad_evals"] = metric, 0
            if world.is_main:
                save_checkpoint(ckpt_dir / "best.pt", {"spec": model.spec, "model": model.state_dict()})
        else:
            progress["bad_evals"] += 1
        log.info(
            "validation at step %d: loss %.3f | ppl %.2f | bleu %.2f | best %s %.3f (%d without gain)",
            progress["step"], scores["loss"], scores["ppl"], scores["bleu"], config.valid_metric, progress["best"],
            progress["bad_evals"],
        )  # fmt: skip

    def keep_snapshot() -> None:
        if config.average_last and world.is_main:
            payload = {"spec": model.spec, "model": model.state_dict(), "step": progress["step"]}
            save_snapshot(ckpt_dir, progress["step"], payload, config.average_last, config.checkpoint_every)

    better = (lambda a, b: a > b) if config.valid_metric == "bleu" else (lambda a, b: a < b)
    trg_lengths = data.trg.lengths  # EOS included: the number of target tokens of each sentence
    model.train()
    done = (
        progress["bad_evals"] >= config.patience
        or progress["step"] >= config.max_steps
        or is_annealed_out(progress, config)
    )
    window = {"loss": 0.0, "tokens": 0, "start": time.perf_counter()}
    with Stop() as stop:
        while not done and progress["epoch"] <= config.max_epochs:
            batches = token_batches(
                data.src.lengths, data.trg.lengths, config.batch_tokens, config.seed, progress["epoch"]
            )
            # One update consumes accum_steps batches; resume skips the batches already consumed.
            while progress["batch"] + config.accum_steps <= len(batches):
                tick = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                group = [batches[progress["batch"] + i] for i in range(config.accum_steps)]
                # The loss is a sum over the update's target tokens, counted over all processes' shares.
                n_tokens = int(sum(trg_lengths[indices].sum() for indices in group))
                loss_sum = 0.0
                for i, indices in enumerate(group):
                    share, weight = shard(indices, world), world.size / n_tokens
                    if len(share) == 0:  # fewer sentences than processes: take part in the all-reduce with 0
                        share, weight = indices[:1], 0.0
                    batch = make_batch(data, share).to(device)
                    # DDP averages gradients over processes; the all-reduce runs on the last batch only.
                    sync = i == len(group) - 1 or world.size == 1
                    with contextlib.nullcontext() if sync else trained.no_sync():
                        with autocast(device, config.bf16):
                            logits = trained(batch.src, batch.trg_in)
                        loss, _ = criterion(logits, batch.trg_out)
                        scaler.scale(loss * weight).backward()
                    if weight:
                        loss_sum += float(loss.detach())
                scaler.unscale_(optimizer)  # clipping and the update see the true gradients
                if config.clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
                lr = get_lr(progress["step"] + 1, config, progress["lr_scale"])
                for group_ in optimizer.param_groups:
                    group_["lr"] = lr
                scaler.step(optimizer)  # optimizer.step(), skipped when float16 gradients overflowed
                scaler.update()
                progress["step"] += 1
                progress["batch"] += config.accum_steps
                progress["tokens"] += n_tokens
                progress["train_seconds"] += time.perf_counter() - tick
                window["loss"] += loss_sum
                window["tokens"] += n_tokens
                step = progress["step"]
                if step % config.log_every == 0:
                    elapsed = time.perf_counter() - window["start"]
                    window["loss"] = world.sum([window["loss"]])[0]
                    train_log.append({
                        "step": step, "epoch": progress["epoch"], "loss": window["loss"] / window["tokens"], "lr": lr,
                        "tokens_per_second": window["tokens"] / elapsed,
                    })  # fmt: skip
                    if curves:
                        curves.add_train(train_log[-1])
                    eta = elapsed / config.log_every * updates_left(progress, config, len(batches))
                    log.info(
                        "step %d | epoch %d | loss %.3f | lr %.2e | %.0f tok/s | elapsed %s | ETA %s",
                        step, progress["epoch"], window["loss"] / window["tokens"], lr, window["tokens"] / elapsed,
                        format_duration(progress["train_seconds"]), format_duration(eta),
                    )  # fmt: skip
                    window = {"loss": 0.0, "tokens": 0, "start": time.perf_counter()}
                if step % config.valid_every == 0 or step >= config.max_steps:
                    evaluate_and_keep_best()
                    anneal_on_plateau(progress, history[-1]["loss"], config)
                    window["start"] = time.perf_counter()
                if step % config.checkpoint_every == 0:
                    keep_snapshot()  # before last.pt: a crash between the two redoes this step identically
                    save_last()
                    log.info("checkpoint at step %d: %s", step, last)
                if world.any(stop.signal is not None):
                    save_last()
                    raise TrainingError(
                        f"training stopped by signal {stop.signal or signal.SIGTERM} at step {step}; "
                        f"checkpoint saved to {last}; run the same command again to resume"
                    )
                if progress["bad_evals"] >= config.patience or step >= config.max_steps:
                    done = True
                    break
                if is_annealed_out(progress, config):
                    log.info("learning rate below min_lr %.1e: training stops", config.min_lr)
                    done = True
                    break
            if not done:
                progress["epoch"] += 1
                progress["batch"] = 0
        if not history or history[-1]["step"] != progress["step"]:  # stopped by max_epochs between validations
            evaluate_and_keep_best()
        keep_snapshot()
        save_last()
    if curves:
        curves.close()
    summary = None
    if world.is_main:
        averaged = None
        if config.average_last:
            averaged = average_snapshots(model, ckpt_dir, progress["step"], config.average_last)
            averaged["valid"] = validate(model, dev, dev_src_lines, dev_ref_lines, src_sp, trg_sp, config, device)
            log.info(
                "averaged model of steps %s: loss %.3f | ppl %.2f | bleu %.2f (best checkpoint: %s %.3f)",
                averaged["steps"], averaged["valid"]["loss"], averaged["valid"]["ppl"], averaged["valid"]["bleu"],
                config.valid_metric, progress["best"],
            )  # fmt: skip
        summary = _finish(model_dir, model, progress, history, src_spm, trg_spm, device, config, world, averaged)
    return world.broadcast(summary)


def updates_left(progress: dict[str, Any], config: TrainConfig, epoch_batches: int) -> int:
    """Updates until ``max_steps`` or ``max_epochs``, whichever comes first (later epochs taken to be as
    long as this one, of ``epoch_batches`` batches); early stopping can end training sooner."""
    per_epoch = epoch_batches // config.accum_steps
    by_epochs = (epoch_batches - progress["batch"]) // config.accum_steps
    by_epochs += (config.max_epochs - progress["epoch"]) * per_epoch
    return max(0, min(config.max_steps - progress["step"], by_epochs))


def average_snapshots(model: Seq2Seq, ckpt_dir: Path, step: int, n: int) -> dict[str, Any]:
    """Load into ``model`` the mean of the last ``n`` kept snapshots up to update ``step``.

    :return: ``{"steps": [...], "checkpoint": {"spec", "model"}}``, the snapshots' steps and the averaged weights
    """
    snapshots = {s: path for s, path in list_snapshots(ckpt_dir).items() if s <= step}
    steps = list(snapshots)[-n:]
    if len(steps) < n:
        log.warning("average_last %d: only %d checkpoints were kept (steps %s); averaging those", n, len(steps), steps)
    state = average_state_dicts([snapshots[s] for s in steps])
    model.load_state_dict(state)
    return {"steps": steps, "checkpoint": {"spec": model.spec, "model": state}}


def init_weights(
    model: Seq2Seq, init_from: str | Path, src_spm: str | Path, trg_spm: str | Path, device: torch.device
) -> None:
    """Load the weights of the model directory ``init_from`` into ``model``, for fine-tuning.

    Only the weights: the optimizer and the learning-rate schedule start anew.

    :raises ConfigError: if the subword models (compared by sha256) or the architecture differ
    """
    from nmt.download import hash_file

    init_from = Path(init_from)
    ckpt = load_checkpoint(init_from / MODEL_FILE, map_location=device)
    for side, ours, theirs in (("source", src_spm, init_from / SRC_SPM), ("target", trg_spm, init_from / TRG_SPM)):
        if not theirs.is_file() or hash_file(ours) != hash_file(theirs):
            raise ConfigError(
                f"training.init_from: {theirs} is not the {side} subword model {ours} of this run "
                "(fine-tuning needs the same vocabularies)"
            )
    spec = ckpt["spec"]
    if spec["arch"] != model.spec["arch"]:
        raise ConfigError(f"training.init_from: {init_from} holds a {spec['arch']}, not a {model.spec['arch']}")
    differ = [
        f"{key} {spec['config'].get(key)!r} != {value!r}"
        for key, value in model.spec["config"].items()
        if key != "dropout" and spec["config"].get(key) != value
    ]
    if differ:
        raise ConfigError(f"training.init_from: {init_from} has another architecture ({', '.join(differ)})")
    model.load_state_dict(ckpt["model"])
    log.info("initialized the weights from %s (fine-tuning; new optimizer and schedule)", init_from)


def _finish(model_dir, model, progress, history, src_spm, trg_spm, device, config, world, averaged) -> dict[str, Any]:
    """Write the model (the average of the last checkpoints, else the best), the subword models and the
    summary into ``model_dir``."""
    best = model_dir / "checkpoints" / "best.pt"
    if not best.exists():
        raise DataError(f"{best}: no validation was run, so there is no best model (check valid_every/max_steps)")
    save_checkpoint(model_dir / MODEL_FILE, averaged["checkpoint"] if averaged else load_checkpoint(best))
    for src, name in ((src_spm, SRC_SPM), (trg_spm, TRG_SPM)):
        tmp = model_dir / f".{name}.tmp"
        shutil.copyfile(src, tmp)
        os.replace(tmp, model_dir / name)
    best_entry = (
        max(history, key=lambda h: h["bleu"])
        if config.valid_metric == "bleu"
        else min(history, key=lambda h: h["loss"])
    )
    summary = {
        "arch": model.spec["arch"],
        "parameters": model.n_parameters(),
        "steps": progress["step"],
        "epochs": progress["epoch"],
        "train_seconds": round(progress["train_seconds"], 1),
        "train_tokens": progress["tokens"],
        "tokens_per_second": round(progress["tokens"] / max(progress["train_seconds"], 1e-9), 1),
        "device": str(device),
        "processes": world.size,
        "threads": torch.get_num_threads(),
        "best_step": best_entry["step"],
        "valid": best_entry,
        "model": f"average of the last {len(averaged['steps'])} checkpoints" if averaged else "best checkpoint",
        "config": model.spec["config"],
    }
    if averaged:
        summary["averaged"] = {"steps": averaged["steps"], **averaged["valid"]}
    write_text(model_dir / "summary.json", json.dumps(summary, indent=2))
    log.info("finished: %s", {k: v for k, v in summary.items() if k != "config"})
    return summary
