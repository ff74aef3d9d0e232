"""Training loop: token batches, updates (data-parallel under torchrun), validation, early stopping, checkpoints
and their average; a run starts or resumes in :mod:`nmt.training.trainer`."""

import contextlib
import functools
import json
import logging
import math
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt.atomic import write_text
from nmt.checkpoint import average_snapshots, load_checkpoint
from nmt.config import TrainConfig
from nmt.data.batches import Batch, epoch_batches, make_batch
from nmt.device import autocast, get_device
from nmt.errors import DataError, TrainingError
from nmt.model_config import ModelMeta
from nmt.model_dir import check_meta, write_meta, write_model
from nmt.models.seq2seq import Seq2Seq
from nmt.progress import format_duration
from nmt.training.distributed import World, close_world, init_world, shard
from nmt.training.files import TrainFiles
from nmt.training.identity import finished_summary, identity_digest
from nmt.training.optimizer import (
    anneal_on_plateau,
    get_lr,
    is_annealed_out,
    spent,
)
from nmt.training.stages import add_stages, train_stages
from nmt.training.state import TrainState
from nmt.training.trainer import Trainer, start_training
from nmt.training.validation import dev_batch_tokens, validate

log = logging.getLogger(__name__)


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


def train(
    model_options: dict[str, Any], config: TrainConfig, files: TrainFiles, meta: ModelMeta | None = None
) -> dict[str, Any]:
    """Train a model and write ``model_dir/{model.pt,src.model,trg.model,meta.json,summary.json,train.tsv,valid.tsv}``.

    ``train.tsv`` and ``valid.tsv`` (and with ``config.tensorboard`` the event files in
    ``model_dir/tensorboard``) grow a row per log line and per validation (:class:`nmt.training.curves.Curves`).

    Interrupted runs resume from ``model_dir/checkpoints/last.pt`` with the same optimizer,
    schedule, random state and position in the epoch, so they end where an uninterrupted run
    would. SIGTERM saves that checkpoint and exits with a message.

    Under ``torchrun`` (see :mod:`nmt.training.distributed`) every process trains on its share of each
    batch with DistributedDataParallel; rank 0 validates, logs and writes the files.

    With ``config.stages`` the stages train one after the other, each from the weights of the one before
    (:mod:`nmt.training.stages`). A training finished before (``model.pt`` and ``summary.json`` of its identity)
    is not trained again.

    :param model_options: ``arch``, ``size`` and architecture keys (see :func:`nmt.models.seq2seq.build_model`)
    :param config: training settings
    :param files: the training data, dev set, subword models and ``model_dir``
    :param meta: languages and normalization of the training data, for ``meta.json`` (see
        :func:`nmt.model_dir.write_meta`)
    :return: the summary written to ``summary.json``
    """
    check_meta(meta, files.src_spm)
    device = get_device(config.device)
    world = init_world(device.type)
    try:
        if device.type == "cuda" and world.size > 1:
            device = torch.device("cuda", world.local_rank)
            torch.cuda.set_device(device)
        if not world.is_main:
            logging.getLogger("nmt").setLevel(logging.WARNING)
        return train_stages(config, files, world, functools.partial(_train_stage, model_options, device, world, meta))
    finally:
        close_world(world)


def _train_stage(
    model_options: dict[str, Any],
    device: torch.device,
    world: World,
    meta: ModelMeta | None,
    config: TrainConfig,
    files: TrainFiles,
    stages: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """:func:`train` of one stage (or of a training without stages) into ``files.model_dir``.

    :param stages: the summary entries of the stages before this one (None: no stages)
    """
    if world.is_main:
        files.ckpt_dir.mkdir(parents=True, exist_ok=True)
    summary = _train(model_options, config, files, device, world, stages)
    if world.is_main:
        write_meta(Path(files.model_dir), meta)
    world.barrier()  # gloo aborts a process whose peer tears the group down first
    return summary


def _train(
    model_options: dict[str, Any],
    config: TrainConfig,
    files: TrainFiles,
    device: torch.device,
    world: World,
    stages: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`train` in one process of ``world``: start or resume, train, validate last, average, finish; or return
    the summary of this very training, finished before."""
    trainer, state = start_training(model_options, config, files, device, world)
    finished = world.broadcast(finished_summary(Path(files.model_dir), state.identity) if world.is_main else None)
    if finished is not None:
        log.info("%s: finished before (its model.pt and summary.json), not trained again", files.model_dir)
        if trainer.curves:
            trainer.curves.close()
        return finished
    with Stop() as stop:
        train_epochs(trainer, state, stop)
        if not state.history or state.history[-1]["step"] != state.progress["step"]:  # max_epochs between validations
            validate_and_keep_best(trainer, state)
        keep_snapshot(trainer, state)
        state.save(trainer.last, world)
    if trainer.curves:
        trainer.curves.close()
    summary = None
    if world.is_main:
        averaged = average_last(trainer, state) if config.average_last else None
        summary = _finish(trainer, state, averaged, stages)
    return world.broadcast(summary)


def train_epochs(trainer: Trainer, state: TrainState, stop: Stop) -> None:
    """Update from the state's position until early stopping, the budget (``max_steps``, ``max_minutes``),
    ``max_epochs`` or annealing ends it.

    An update that float16 overflow skipped consumed its batches and its time but is not counted, as in
    fairseq: the step, the schedule and the tokens trained on advance with real updates only.
    """
    config, progress, data = trainer.config, state.progress, trainer.data
    state.model.train()
    done = progress["bad_evals"] >= config.patience or spent(progress, config) >= 1 or is_annealed_out(progress, config)
    window = state.window  # since the last log line
    window["start"] = time.perf_counter()
    while not done and progress["epoch"] <= config.max_epochs:
        epoch = progress["epoch"]
        lengths, corpora = (data.src.lengths, data.trg.lengths), (trainer.weights, trainer.shares)
        batches = epoch_batches(*lengths, data.parts, config.batch_tokens, config.seed, epoch, *corpora)
        # One update consumes accum_steps batches (the epoch's last one what is left); resume skips those consumed.
        while progress["batch"] < len(batches):
            tick = time.perf_counter()
            group = batches[progress["batch"] : progress["batch"] + config.accum_steps]
            loss_sum, n_tokens, lr, applied = update(trainer, state, group)
            progress["batch"] += len(group)
            progress["train_seconds"] += time.perf_counter() - tick
            if config.max_minutes and trainer.world.size > 1:  # one clock for all: the schedule and the stop
                progress["train_seconds"] = trainer.world.sum([progress["train_seconds"]])[0] / trainer.world.size
            if applied:
                progress["step"] += 1
                progress["tokens"] += n_tokens
                window["loss"] += loss_sum
                window["tokens"] += n_tokens
                after_update(trainer, state, window, lr, len(batches), stop)
            else:
                progress["skipped"] += 1
                log.info(
                    "float16 gradients overflowed: update skipped (%d so far), loss scale lowered to %g",
                    progress["skipped"],
                    state.scaler.get_scale(),
                )
                stop_on_signal(trainer, state, stop)
            if progress["bad_evals"] >= config.patience or spent(progress, config) >= 1:
                done = True
                break
            if is_annealed_out(progress, config):
                log.info("learning rate below min_lr %.1e: training stops", config.min_lr)
                done = True
                break
        if not done:
            progress["epoch"] += 1
            progress["batch"] = 0


def update(trainer: Trainer, state: TrainState, group: list[np.ndarray]) -> tuple[float, int, float, bool]:
    """One optimizer update on the ``accum_steps`` batches of ``group``, each shared among the processes.

    The loss is a sum over the update's target tokens, divided by their number over all processes'
    shares, so the gradient is the same for any number of processes.

    :param group: sentence indices of each batch
    :return: this process's summed loss, the update's target tokens (all processes), the learning rate, and
        whether the update was made (False: float16 gradients overflowed, so the scaler skipped it and lowered
        its scale; every process sees the same summed gradients, so all skip together)
    """
    config, world, optimizer, scaler = trainer.config, trainer.world, state.optimizer, state.scaler
    optimizer.zero_grad(set_to_none=True)
    n_tokens = int(sum(trainer.data.trg.lengths[indices].sum() for indices in group))  # EOS included
    loss_sum = 0.0
    for i, indices in enumerate(group):
        share, weight = shard(indices, world), world.size / n_tokens
        if len(share) == 0:  # fewer sentences than processes: take part in the all-reduce with 0
            share, weight = indices[:1], 0.0
        batch = make_batch(trainer.data, share).to(trainer.device)
        # DDP averages gradients over processes; the all-reduce runs on the last batch only.
        sync = i == len(group) - 1 or world.size == 1
        with contextlib.nullcontext() if sync else trainer.trained.no_sync():
            loss = batch_loss(trainer, batch)
            scaler.scale(loss * weight).backward()
        if weight:
            loss_sum += float(loss.detach())
    scaler.unscale_(optimizer)  # clipping and the update see the true gradients
    lr = get_lr(state.progress, config)
    if config.clip_norm > 0:
        norm = float(torch.nn.utils.clip_grad_norm_(state.model.parameters(), config.clip_norm))
        check_diverged(norm, scaler.is_enabled(), state.progress["step"] + 1, lr)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    scale = scaler.get_scale() if scaler.is_enabled() else None  # a host sync, with float16 only
    scaler.step(optimizer)  # optimizer.step(), skipped when float16 gradients overflowed
    scaler.update()  # lowers the scale after an overflow, and only then
    return loss_sum, n_tokens, lr, scale is None or scaler.get_scale() >= scale


def check_diverged(norm: float, scaled: bool, step: int, lr: float) -> None:
    """Stop before an update whose gradient norm is not finite (the weights would all become NaN, and every later
    checkpoint with them): the training diverged. Every process has the same all-reduced gradients, so all stop
    together. Float16 training's loss scaler skips such an update instead (``scaled``), and lowers its scale."""
    if not scaled and not math.isfinite(norm):
        raise TrainingError(
            f"training diverged at update {step}: the gradient norm is {norm} at lr {lr:.3g}; lower training.lr or "
            "raise warmup_steps (a changed lr trains anew; the checkpoints before this update are kept)"
        )


def batch_loss(trainer: Trainer, batch: Batch) -> torch.Tensor:
    """The label-smoothed loss of ``batch`` summed over its target tokens, a scalar.

    Only the loss leaves: the logits (B, T, V), the largest tensor of a step, are freed before the
    backward pass, which needs only the log-probabilities that the loss saved.
    """
    with autocast(trainer.device, trainer.config.bf16):
        logits = trainer.trained(batch.src, batch.trg_in)  # (B, T, V)
    loss, _ = trainer.criterion(logits, batch.trg_out)
    return loss


def after_update(
    trainer: Trainer, state: TrainState, window: dict[str, float], lr: float, epoch_batches: int, stop: Stop
) -> None:
    """Log, validate and save a checkpoint where their intervals say; on a signal save ``last.pt`` and stop."""
    config, step = trainer.config, state.progress["step"]
    if step % config.log_every == 0:
        log_train(trainer, state, window, lr, epoch_batches)
    if step % config.valid_every == 0 or spent(state.progress, config) >= 1:
        tick = time.perf_counter()
        validate_and_keep_best(trainer, state)
        anneal_on_plateau(state.progress, state.history[-1]["loss"], config)
        window["start"] += time.perf_counter() - tick  # the log's speed leaves the validation out, not the updates
    if step % config.checkpoint_every == 0:
        keep_snapshot(trainer, state)  # before last.pt: a crash between the two redoes this step identically
        state.save(trainer.last, trainer.world)
        log.info("checkpoint at step %d: %s", step, trainer.last)
    stop_on_signal(trainer, state, stop)


def stop_on_signal(trainer: Trainer, state: TrainState, stop: Stop) -> None:
    """If any process got SIGTERM/SIGINT: save ``last.pt`` and stop with a message (a collective)."""
    if trainer.world.any(stop.signal is not None):
        state.save(trainer.last, trainer.world)
        raise TrainingError(
            f"training stopped by signal {stop.signal or signal.SIGTERM} at step {state.progress['step']}; "
            f"checkpoint saved to {trainer.last}; run the same command again to resume"
        )


def log_train(trainer: Trainer, state: TrainState, window: dict[str, float], lr: float, epoch_batches: int) -> None:
    """Add the mean loss of the updates in ``window`` to ``train.tsv`` and log it with the time left; restart it.

    :param epoch_batches: batches of this epoch, to estimate the updates left
    """
    progress, config = state.progress, trainer.config
    elapsed = time.perf_counter() - window["start"]
    window["loss"] = trainer.world.sum([window["loss"]])[0]
    loss, speed = window["loss"] / window["tokens"], window["tokens"] / elapsed
    row = {"step": progress["step"], "epoch": progress["epoch"], "loss": loss, "lr": lr, "tokens_per_second": speed}
    state.train_log.append(row)
    if trainer.curves:
        trainer.curves.add_train(row)
    eta = elapsed / config.log_every * updates_left(progress, config, epoch_batches)
    log.info(
        "step %d | epoch %d | loss %.3f | lr %.2e | %.0f tok/s | elapsed %s | ETA %s",
        progress["step"],
        progress["epoch"],
        loss,
        lr,
        speed,
        format_duration(progress["train_seconds"]),
        format_duration(eta),
    )
    window.update(loss=0.0, tokens=0, start=time.perf_counter())


def validate_and_keep_best(trainer: Trainer, state: TrainState) -> None:
    """Score the dev set (rank 0), add the scores to ``valid.tsv``, and save ``best.pt`` if ``valid_metric``
    improved; else count a validation without gain (early stopping)."""
    config, progress = trainer.config, state.progress
    world = trainer.world
    scores = world.broadcast(score_dev(trainer, state.model) if world.is_main else None)
    state.history.append({"step": progress["step"], **scores, "seconds": round(progress["train_seconds"], 1)})
    if trainer.curves:
        trainer.curves.add_valid(state.history[-1])
    if is_better(config.valid_metric, scores[config.valid_metric], progress["best"]):
        progress["best"], progress["bad_evals"] = scores[config.valid_metric], 0
        if world.is_main:
            state.save_best(trainer.files.ckpt_dir)
    else:
        progress["bad_evals"] += 1
    log.info(
        "validation at step %d: loss %.3f | ppl %.2f | bleu %.2f | chrf %.2f | best %s %.3f (%d without gain)",
        progress["step"],
        scores["loss"],
        scores["ppl"],
        scores["bleu"],
        scores["chrf"],
        config.valid_metric,
        progress["best"],
        progress["bad_evals"],
    )


def score_dev(trainer: Trainer, model: Seq2Seq) -> dict[str, Any]:
    """:func:`nmt.training.validation.validate` of ``model`` by this process alone, on dev batches of one
    process's share of a training batch (:func:`nmt.training.validation.dev_batch_tokens`)."""
    config = trainer.config
    return validate(model, trainer.dev, config, trainer.device, dev_batch_tokens(config, trainer.world.size))


def is_better(metric: str, value: float, best: float | None) -> bool:
    """Whether a dev ``value`` of ``metric`` beats the ``best`` so far (None: nothing yet): a higher BLEU or chrF,
    a lower loss."""
    return best is None or (value < best if metric == "loss" else value > best)


def best_validation(history: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """The validation of ``history`` with the best ``metric``: the highest BLEU or chrF, or the lowest loss (the
    first of equal ones, the one whose checkpoint was kept)."""
    if metric == "loss":
        return min(history, key=lambda h: h["loss"])
    return max(history, key=lambda h: h[metric])


def keep_snapshot(trainer: Trainer, state: TrainState) -> None:
    """Keep this step's weights for averaging (rank 0, with ``average_last``)."""
    if trainer.config.average_last and trainer.world.is_main:
        state.save_snapshot(trainer.files.ckpt_dir, trainer.config.average_last, trainer.config.checkpoint_every)


def updates_left(progress: dict[str, Any], config: TrainConfig, epoch_batches: int) -> int:
    """Updates until ``max_steps`` or ``max_epochs``, whichever comes first (later epochs taken to be as
    long as this one, of ``epoch_batches`` batches); early stopping can end training sooner."""
    per_epoch = math.ceil(epoch_batches / config.accum_steps)
    by_epochs = math.ceil((epoch_batches - progress["batch"]) / config.accum_steps)
    by_epochs += (config.max_epochs - progress["epoch"]) * per_epoch
    left = min(config.max_steps - progress["step"], by_epochs)
    if config.max_minutes and progress["step"]:  # at the pace so far
        pace = progress["train_seconds"] / progress["step"]
        left = min(left, int((60 * config.max_minutes - progress["train_seconds"]) / pace))
    return max(0, left)


def average_last(trainer: Trainer, state: TrainState) -> dict[str, Any]:
    """Load into the model the mean of the last ``average_last`` kept snapshots and score it on the dev set.

    :return: ``steps`` (the snapshots'), ``checkpoint`` (``spec`` and the averaged ``model``) and ``valid`` (its scores)
    """
    config, model = trainer.config, state.model
    steps, weights = average_snapshots(trainer.files.ckpt_dir, state.progress["step"], config.average_last)
    model.load_state_dict(weights)
    valid = score_dev(trainer, model)
    log.info(
        "averaged model of steps %s: loss %.3f | ppl %.2f | bleu %.2f | chrf %.2f (best checkpoint: %s %.3f)",
        steps,
        valid["loss"],
        valid["ppl"],
        valid["bleu"],
        valid["chrf"],
        config.valid_metric,
        state.progress["best"],
    )
    return {"steps": steps, "checkpoint": {"spec": model.spec, "model": weights}, "valid": valid}


def _finish(
    trainer: Trainer, state: TrainState, averaged: dict | None, stages: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """Write the model, the subword models and the summary into the model directory.

    The model is the average of the last checkpoints (``averaged``) unless the best checkpoint scores better
    on dev by ``valid_metric``; then, or without an average, the best checkpoint. ``summary["model"]`` and
    the log say which.

    :param stages: the summary entries of the stages before this one (:func:`nmt.training.stages.add_stages`)
    """
    config, progress, history = trainer.config, state.progress, state.history
    best = trainer.files.ckpt_dir / "best.pt"
    if not best.exists():
        raise DataError(f"{best}: no validation was run, so there is no best model (check valid_every/max_steps)")
    best_entry = best_validation(history, config.valid_metric)
    metric = config.valid_metric
    use_average = averaged is not None and not is_better(metric, progress["best"], averaged["valid"][metric])
    chosen = "best checkpoint"
    if averaged:
        average = f"average of the last {len(averaged['steps'])} checkpoints"
        chosen = average if use_average else f"best checkpoint, better on dev than the {average}"
        if use_average:
            log.info(
                "model.pt: the %s (dev %s %.3f), at least as good as the best checkpoint (step %d, %.3f)",
                average,
                metric,
                averaged["valid"][metric],
                best_entry["step"],
                progress["best"],
            )
        else:
            log.info(
                "model.pt: the best checkpoint (step %d, dev %s %.3f), better than the %s (%.3f)",
                best_entry["step"],
                metric,
                progress["best"],
                average,
                averaged["valid"][metric],
            )
    chosen_weights = averaged["checkpoint"] if use_average else load_checkpoint(best)
    write_model(trainer.files.model_dir, chosen_weights, trainer.files.src_spm, trainer.files.trg_spm)
    summary = _summary(trainer, state, best_entry, chosen)
    if averaged:
        summary["averaged"] = {"steps": averaged["steps"], **averaged["valid"]}
    if stages is not None:
        summary = add_stages(summary, stages)
    # Last: a summary of this identity says that model.pt is this training's (nmt.training.identity).
    write_text(Path(trainer.files.model_dir) / "summary.json", json.dumps(summary, indent=2))
    log.info("finished: %s", {k: v for k, v in summary.items() if k not in ("config", "stages")})
    return summary


def _summary(trainer: Trainer, state: TrainState, best_entry: dict[str, Any], chosen: str) -> dict[str, Any]:
    """What ``summary.json`` records of a finished training: the model, its cost, the best validation."""
    model, progress = state.model, state.progress
    return {
        "arch": model.spec["arch"],
        "parameters": model.n_parameters(),
        "steps": progress["step"],
        "skipped_updates": progress["skipped"],  # float16 overflows
        "epochs": progress["epoch"],
        "train_seconds": round(progress["train_seconds"], 1),
        "train_tokens": progress["tokens"],
        "tokens_per_second": round(progress["tokens"] / max(progress["train_seconds"], 1e-9), 1),
        "device": str(trainer.device),
        "processes": trainer.world.size,
        "threads": torch.get_num_threads(),
        "best_step": best_entry["step"],
        "valid": best_entry,
        "model": chosen,
        "config": model.spec["config"],
        "identity": identity_digest(state.identity),
    }
