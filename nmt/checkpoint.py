"""Atomic checkpoint files that load with ``torch.load(weights_only=True)``."""

import os
from pathlib import Path
from typing import Any

import torch

from nmt.errors import DataError


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


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` with the safe (weights-only) unpickler."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: checkpoint not found")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated or foreign file: say which one, in one line
        raise DataError(f"{path}: not a readable checkpoint ({type(e).__name__}: {str(e).splitlines()[0]})") from e
