"""The state of a training run that ``last.pt`` holds, so that a resumed run ends where an uninterrupted one would."""

import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.checkpoint import TRAINING_KEYS, load_checkpoint, previous_path, save_checkpoint, save_snapshot
from nmt.errors import DataError
from nmt.models.seq2seq import Seq2Seq
from nmt.training.distributed import World
from nmt.training.identity import changed

log = logging.getLogger(__name__)

BEST = "best.pt"  # the weights of the best validation so far, beside last.pt


def new_progress() -> dict[str, Any]:
    """The counters of a run that has not started; a checkpoint saves and restores them as one dict."""
    return {
        "step": 0,  # updates done (not those that float16 overflow skipped)
        "skipped": 0,  # updates skipped because float16 gradients overflowed
        "epoch": 1,
        "batch": 0,  # batches of the epoch consumed
        "best": None,  # the best valid_metric so far
        "best_step": None,  # the step of that validation, whose weights best.pt holds
        "bad_evals": 0,  # validations since it last improved (early stopping)
        "train_seconds": 0.0,
        "tokens": 0,  # target tokens trained on
        "lr_scale": 1.0,  # the annealing factors so far (anneal_on_plateau)
        "best_dev_loss": None,  # what annealing compares with
    }


@dataclass
class TrainState:
    """Model, optimizer, loss scale, schedule, position in the data, random state and best score of a training run.

    The learning rate is a function of ``progress`` (``step``, ``lr_scale``; :func:`nmt.training.optimizer.get_lr`),
    so it needs no state of its own. The loss scaler of float16 training lowers its scale after an
    overflow and raises it after a run of good updates (:func:`nmt.device.grad_scaler`); a disabled one
    has no state. ``history`` and ``train_log`` are the rows of ``valid.tsv`` and ``train.tsv``, which a
    resumed run writes anew (:class:`nmt.training.curves.Curves`). ``window`` sums this process's training loss
    and the target tokens (of all processes) since the last log line: a run stopped between two lines (SIGTERM
    saves at any step) logs at the next one the mean over the same updates as an uninterrupted run.
    """

    model: Seq2Seq
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler = field(default_factory=lambda: torch.amp.GradScaler("cpu", enabled=False))
    progress: dict[str, Any] = field(default_factory=new_progress)
    history: list[dict[str, Any]] = field(default_factory=list)  # validations
    train_log: list[dict[str, Any]] = field(default_factory=list)  # training loss every log_every updates
    window: dict[str, float] = field(default_factory=lambda: {"loss": 0.0, "tokens": 0})  # since the last log line
    saved_step: int = -1  # of the checkpoint last written or read: the one a new step's save keeps as previous
    identity: dict[str, Any] = field(default_factory=dict)  # what decides the weights (nmt.training.identity)

    def weights(self) -> dict[str, Any]:
        """What a model file holds (``best.pt``, ``model.pt``): the spec and the weights."""
        return {"spec": self.model.spec, "model": self.model.state_dict()}

    def save(self, path: Path, world: World) -> None:
        """Write the state and every process's random state to ``path`` (rank 0 writes).

        A collective (the random states are gathered): every process calls it at the same step.
        """
        rng = world.gather(_rng_state())
        window = {"loss": world.gather(self.window["loss"]), "tokens": self.window["tokens"]}  # a loss per process
        if world.is_main:
            save_checkpoint(
                path,
                {
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "scaler": self.scaler.state_dict(),  # {} when disabled
                    "progress": self.progress,
                    "history": self.history,
                    "train_log": self.train_log,
                    "rng": rng,
                    "window": window,
                    "spec": self.model.spec,
                    "identity": self.identity,
                },
                keep_previous=self.saved_step != self.progress["step"],
            )
            previous_path(path.with_name(BEST)).unlink(missing_ok=True)  # best.pt is the best up to this state
        self.saved_step = self.progress["step"]

    def save_best(self, ckpt_dir: Path) -> None:
        """Write this step's weights to ``best.pt`` (rank 0). The best.pt that ``last.pt`` counts on is kept as
        ``best.prev.pt`` until the next ``last.pt``: a crash in between resumes a state whose best that is."""
        progress = self.progress
        kept = progress["best_step"] is not None and progress["best_step"] <= self.saved_step
        save_checkpoint(ckpt_dir / BEST, {**self.weights(), "step": progress["step"]}, keep_previous=kept)
        progress["best_step"] = progress["step"]

    def resume(self, last: Path, device: torch.device, world: World, seed: int) -> None:
        """Continue from ``last`` or, if it is damaged or of another model, from the checkpoint it replaced.

        A damaged ``last.pt`` (truncated by a full disk or a copy, or another run's) costs the updates
        since the checkpoint before it, not the run; the redone updates are those an uninterrupted run made.

        :raises DataError: one line naming what is wrong with each file when neither can be resumed from
        """
        errors = []
        for path in (p for p in (last, previous_path(last)) if p.exists()):
            try:
                self.restore(path, device, world, seed)
            except DataError as e:
                errors.append(str(e))
                continue
            if errors:
                log.warning("%s; resuming from the checkpoint before it, %s", errors[0], path.name)
            if world.is_main:
                self.restore_best(last.parent)
            progress = self.progress  # as rank 0 left it, on every process
            progress["best"], progress["best_step"] = world.broadcast((progress["best"], progress["best_step"]))
            return
        raise DataError(f"{'; '.join(errors)}; delete the model directory {last.parent.parent} to train from scratch")

    def restore_best(self, ckpt_dir: Path) -> None:
        """Make ``best.pt`` the best of the resumed state: a run that went further before it stopped may have
        written a better one since, of updates that are now redone (with another number of processes, not
        identically)."""
        best, step = ckpt_dir / BEST, self.progress["best_step"]
        for path in (best, previous_path(best)):
            if step is not None and path.exists() and _step_of(path) == step:
                os.replace(path, best)
                break
        else:
            if step is not None:
                log.warning("%s: no best checkpoint of step %d; the next better validation writes one", best, step)
                self.progress["best"] = self.progress["best_step"] = None
            best.unlink(missing_ok=True)
        previous_path(best).unlink(missing_ok=True)

    def restore(self, path: Path, device: torch.device, world: World, seed: int) -> None:
        """Continue from the checkpoint at ``path``, this process's random state included.

        With another number of processes than the checkpoint's, the random state is seeded from ``seed``
        and the step: the data order does not depend on it, only the dropout masks differ.

        :raises DataError: if the checkpoint is unreadable or of a different model
        """
        ckpt = load_checkpoint(path, map_location=device, keys=TRAINING_KEYS)
        if ckpt["spec"] != self.model.spec:
            differ = ", ".join(f"{key} {a} -> {b}" for key, a, b in changed(ckpt["spec"], self.model.spec))
            raise DataError(f"{path}: checkpoint of another model ({differ})")
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if ckpt["scaler"]:  # a float16 run's; a disabled scaler saves {}, which an enabled one cannot load
            self.scaler.load_state_dict(ckpt["scaler"])
        self.progress, self.history, self.train_log = ckpt["progress"], ckpt["history"], ckpt["train_log"]
        self.window.update(loss=_own_loss(ckpt["window"]["loss"], world), tokens=ckpt["window"]["tokens"])
        self.saved_step = self.progress["step"]
        rng = ckpt["rng"]
        if len(rng) == world.size:
            _set_rng_state(rng[world.rank])
        else:
            log.warning("resuming %d processes from a checkpoint of %d: random state re-seeded", world.size, len(rng))
            torch.manual_seed(seed + world.rank + self.progress["step"])
        progress = self.progress
        log.info(
            "resumed from %s at step %d (epoch %d, batch %d)",
            path,
            progress["step"],
            progress["epoch"],
            progress["batch"],
        )

    def save_snapshot(self, ckpt_dir: Path, keep: int, every: int) -> None:
        """Keep the weights of this step for averaging (:func:`nmt.checkpoint.save_snapshot`)."""
        step = self.progress["step"]
        save_snapshot(ckpt_dir, step, {**self.weights(), "step": step}, keep, every)


def _step_of(path: Path) -> int | None:
    """The step of the weights in a best.pt, None if it is unreadable."""
    try:
        return load_checkpoint(path).get("step")
    except DataError:
        return None


def _own_loss(losses: list[float], world: World) -> float:
    """This process's part of the saved window loss; with another number of processes, rank 0 takes their sum
    (log lines add the processes' parts)."""
    if len(losses) == world.size:
        return losses[world.rank]
    return sum(losses) if world.is_main else 0.0


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
