"""Atomic checkpoint files that load with ``torch.load(weights_only=True)``; kept snapshots and their average."""

import logging
import os
from pathlib import Path
from typing import Any

import torch

from nmt.atomic import atomic_path
from nmt.errors import DataError

log = logging.getLogger(__name__)

# What a model file (model.pt, best.pt) holds, and what a training checkpoint (last.pt) holds besides.
MODEL_KEYS = ("spec", "model")
TRAINING_KEYS = (*MODEL_KEYS, "optimizer", "scaler", "progress", "history", "train_log", "rng", "window", "identity")


def save_checkpoint(path: str | Path, payload: dict[str, Any], keep_previous: bool = False) -> None:
    """Write ``payload`` (tensors, numbers, strings, lists, dicts only) to ``path`` atomically.

    A crash leaves either the old or the new checkpoint, never half of one (:func:`nmt.atomic.atomic_path`).

    :param keep_previous: move the file this one replaces to :func:`previous_path` (once the new one is
        written), so that a damaged ``last.pt`` still leaves one intact state to resume from
    """
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
        if keep_previous and path.is_file():
            os.replace(path, previous_path(path))  # a crash here leaves the previous one, which resumes


def previous_path(path: str | Path) -> Path:
    """Where ``save_checkpoint(path, ..., keep_previous=True)`` keeps the file it replaced: ``last.prev.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def load_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", keys: tuple[str, ...] = MODEL_KEYS
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` with the safe (weights-only) unpickler.

    :param keys: what the caller needs in it: :data:`MODEL_KEYS` (a model file such as ``model.pt``
        or ``best.pt``) or :data:`TRAINING_KEYS` (``last.pt``, to resume training)
    :raises DataError: one line naming the file if it is missing, unreadable or lacks ``keys``
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {'is a directory, not a checkpoint' if path.is_dir() else 'checkpoint not found'}")
    try:
        # mmap: the tensors are the file's pages, not a copy of them (nmt.model_dir.load_model makes them the model's)
        ckpt = torch.load(path, map_location=map_location, weights_only=True, mmap=True)
    except Exception as e:  # a truncated or foreign file: say which one, in one line
        message = (str(e).strip().splitlines() or [""])[0]
        raise DataError(f"{path}: not a readable checkpoint ({type(e).__name__}: {message})") from e
    if not isinstance(ckpt, dict):
        raise DataError(f"{path}: not a checkpoint of this toolkit (it holds a {type(ckpt).__name__})")
    missing = [key for key in keys if key not in ckpt]
    if missing and keys == TRAINING_KEYS and all(key in ckpt for key in MODEL_KEYS):
        raise DataError(
            f"{path}: is a final model file, not a training checkpoint (no {', '.join(missing)} to resume from)"
        )
    if missing:
        raise DataError(f"{path}: not a checkpoint of this toolkit (it lacks {', '.join(missing)})")
    return ckpt


def snapshot_path(ckpt_dir: str | Path, step: int) -> Path:
    """The kept weights of update ``step``: ``ckpt_dir/step{step}.pt``."""
    return Path(ckpt_dir) / f"step{step}.pt"


def list_snapshots(ckpt_dir: str | Path) -> dict[int, Path]:
    """The kept weight snapshots in ``ckpt_dir`` by update step, oldest first."""
    found = {}
    for path in Path(ckpt_dir).glob("step*.pt"):
        if path.stem.removeprefix("step").isdigit():
            found[int(path.stem.removeprefix("step"))] = path
    return dict(sorted(found.items()))


def save_snapshot(ckpt_dir: str | Path, step: int, payload: dict[str, Any], keep: int, every: int) -> None:
    """Write the weights of update ``step`` and delete snapshots that are no longer among the last ``keep``.

    Also deleted: snapshots after ``step`` (from a run that went further before a crash and is being
    redone) and off-interval ones (the final state of a run that is now trained further), so a resumed
    run keeps exactly the snapshots of an uninterrupted one.

    :param payload: what :func:`save_checkpoint` writes, e.g. ``{"spec": ..., "model": ..., "step": ...}``
    :param keep: snapshots kept, this one included
    :param every: the checkpoint interval in updates; ``step`` itself need not be a multiple
    """
    save_checkpoint(snapshot_path(ckpt_dir, step), payload)
    others = [s for s in list_snapshots(ckpt_dir) if s != step]
    stale = [s for s in others if s > step or s % every != 0]
    kept = [s for s in others if s not in stale]
    for s in stale + kept[: max(len(kept) - (keep - 1), 0)]:
        snapshot_path(ckpt_dir, s).unlink(missing_ok=True)


def average_snapshots(ckpt_dir: str | Path, step: int, n: int) -> tuple[list[int], dict[str, torch.Tensor]]:
    """The mean of the weights of the last ``n`` snapshots in ``ckpt_dir`` up to update ``step``.

    :return: the snapshots' steps (fewer than ``n`` if fewer were kept, with a warning) and the averaged state dict
    """
    snapshots = {s: path for s, path in list_snapshots(ckpt_dir).items() if s <= step}
    steps = list(snapshots)[-n:]
    if len(steps) < n:
        log.warning("average_last %d: only %d checkpoints were kept (steps %s); averaging those", n, len(steps), steps)
    return steps, average_state_dicts([snapshots[s] for s in steps])


def average_state_dicts(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the ``model`` state dicts of the checkpoints at ``paths``.

    Sums run in float32 (one checkpoint in memory besides the sum) and are cast back to each tensor's
    dtype; integer tensors must agree across checkpoints and are kept as they are.

    :param paths: checkpoints of one model, each with a ``model`` state dict
    :return: the averaged state dict
    :raises DataError: on an empty list or checkpoints of different models
    """
    if not paths:
        raise DataError("no checkpoints to average")
    total = load_checkpoint(paths[0], keys=("model",))["model"]
    dtypes = {name: t.dtype for name, t in total.items()}
    # A copy per name: tied weights (shared embeddings) load as one storage, which must not be summed twice.
    total = {name: t.to(torch.float32, copy=True) if t.is_floating_point() else t for name, t in total.items()}
    for path in paths[1:]:
        state = load_checkpoint(path, keys=("model",))["model"]
        if state.keys() != total.keys():
            raise DataError(f"{path}: parameters differ from those of {paths[0]}, cannot average")
        for name, tensor in state.items():
            if tensor.is_floating_point():
                total[name] += tensor.float()
            elif not torch.equal(tensor, total[name]):
                raise DataError(f"{path}: integer tensor {name} differs from that of {paths[0]}, cannot average")
    return {name: (t / len(paths)).to(dtypes[name]) if t.is_floating_point() else t for name, t in total.items()}
