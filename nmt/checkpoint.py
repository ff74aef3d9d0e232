"""Atomic checkpoint files that load with ``torch.load(weights_only=True)``."""

import os
from pathlib import Path
from typing import Any

import torch

from nmt.errors import DataError

# What a model file (model.pt, best.pt) holds, and what a training checkpoint (last.pt) holds besides.
MODEL_KEYS = ("spec", "model")
TRAINING_KEYS = (*MODEL_KEYS, "optimizer", "progress", "history", "rng")


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, numbers, strings, lists, dicts only) to ``path`` atomically.

    The temporary file sits beside the target so that ``os.replace`` is a rename on one file
    system: a crash leaves either the old or the new checkpoint, never half of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


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
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
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
