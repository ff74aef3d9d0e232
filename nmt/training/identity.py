"""A training's identity: what decides the weights it reaches, recorded in its checkpoints, so that a run resumes
only the training that its settings and files describe and otherwise starts anew (docs/cli.md, "Resuming and
rerunning")."""

import dataclasses
import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch

from nmt.atomic import hash_file
from nmt.checkpoint import load_checkpoint, previous_path
from nmt.config import TrainConfig
from nmt.data.binarize import BinarizedData
from nmt.errors import DataError
from nmt.model_dir import MODEL_FILE
from nmt.training.files import TrainFiles

log = logging.getLogger(__name__)

# Settings that leave the weights as they are: resources and the cadence of logs (checkpoint_every too, unless
# average_last averages the checkpoints it keeps).
RESOURCES = ("threads", "device", "log_every", "tensorboard")
# Schedules whose rate does not depend on the budget: a run of them to a larger max_steps continues one to a smaller.
BUDGET_FREE = ("inverse_sqrt", "anneal_on_plateau")
REPLACED = "checkpoints.replaced"  # where the checkpoints of another training are set aside
# The files of a TrainFiles hashed into the identity (the training data counts by its token ids, data.sha256).
FILE_ROLES = ("dev_ref", "dev_src", "src_spm", "trg_spm")


def training_identity(
    spec: dict[str, Any], config: TrainConfig, data: BinarizedData, files: TrainFiles
) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed: the model, the settings that change the result,
    the binarized data (the sha256 of its token ids), the subword models, the dev set and the weights fine-tuned."""
    training = dataclasses.asdict(config)
    for key in RESOURCES if config.average_last else (*RESOURCES, "checkpoint_every"):
        del training[key]
    init_from = training.pop("init_from")
    return {
        "model": spec,
        "training": training,
        "data": {
            "sha256": data.header["sha256"],
            "corpora": dict(zip(data.corpus_names, data.parts.tolist(), strict=True)),
        },
        "files": {role: hash_file(getattr(files, role)) for role in FILE_ROLES},
        "init_from": hash_weights(Path(init_from) / MODEL_FILE) if init_from else None,
    }


def hash_weights(model_file: Path) -> str:
    """The sha256 of a model file's weights (names, dtypes, shapes and values), not of its bytes: torch names a
    file's zip records after the temporary name it was written under, so equal weights written twice differ in
    bytes, and a stage trained again to the same weights would otherwise give the next stage another identity."""
    state = torch.load(model_file, map_location="cpu", weights_only=True)["model"]
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def differences(saved: dict[str, Any], identity: dict[str, Any], progress: dict[str, Any]) -> list[str]:
    """What differs between a checkpoint's identity (``saved``, at ``progress``) and this run's, one item a key.

    A larger or smaller ``max_steps`` is no difference where the run continues exactly: a schedule that does not
    depend on the budget (:data:`BUDGET_FREE`), without ``max_minutes``, from a checkpoint before the new end and
    either before the old end or at a regular validation (the old end's extra validation would choose the best
    checkpoint and, on a plateau, the rate differently).
    """
    found = [f"{key} {old} -> {new}" for key, old, new in changed(saved, identity)]
    old, new, step = saved["training"], identity["training"], progress["step"]
    extends = (
        new["lr_schedule"] in BUDGET_FREE
        and new["max_minutes"] is None
        and step <= new["max_steps"]
        and (step < old["max_steps"] or step % new["valid_every"] == 0)
    )
    if extends:
        found = [item for item in found if not item.startswith("training.max_steps ")]
    return found


def changed(old: Any, new: Any, key: str = "") -> list[tuple[str, str, str]]:
    """The keys (dotted) whose values differ between two nested dicts, with the values shown short."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            change
            for name in sorted(set(old) | set(new), key=str)
            for change in changed(old.get(name), new.get(name), f"{key}.{name}" if key else str(name))
        ]
    if old == new:
        return []
    return [(key, _short(old), _short(new))]


def _short(value: Any) -> str:
    text = repr(value)
    return text[:12] + "..." if isinstance(value, str) and len(value) == 64 else text  # a sha256


def set_aside_other_training(model_dir: Path, identity: dict[str, Any]) -> bool:
    """Move ``model_dir/checkpoints`` to ``model_dir/checkpoints.replaced`` when its ``last.pt`` (or, damaged, the one
    before it) is of another training than ``identity``, logging what differs (and that a ``model.pt`` of another
    training will be replaced, with or without checkpoints); remove TensorBoard events of a run that starts anew.

    :return: whether there is a checkpoint of this training to resume
    """
    ckpt_dir = model_dir / "checkpoints"
    last = ckpt_dir / "last.pt"
    found = _saved_identity(last)
    other_model = (model_dir / MODEL_FILE).is_file() and finished_summary(model_dir, identity) is None
    replaces = f"; {model_dir / MODEL_FILE}, the model of another training, is replaced when this one ends"
    if found is not None:
        saved, progress = found
        differ = differences(saved, identity, progress)
        if not differ:
            return True
        replaced = model_dir / REPLACED
        shutil.rmtree(replaced, ignore_errors=True)
        ckpt_dir.rename(replaced)
        ckpt_dir.mkdir()
        what, then = "; ".join(differ), replaces if other_model else ""
        moved = f"checkpoints moved to {replaced}{then}"
        log.warning("%s is of another training (%s): training from scratch; %s", last, what, moved)
    elif last.exists() or previous_path(last).exists():
        return True  # unreadable: resuming says what is wrong with each file
    elif other_model:  # and no checkpoints, which would say whose it is
        log.warning("%s: training from scratch%s", model_dir, replaces)
    shutil.rmtree(model_dir / "tensorboard", ignore_errors=True)  # events of another run
    return False


def _saved_identity(last: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The identity and progress of ``last`` or, if it is unreadable, of the checkpoint before it; None if neither
    can be read."""
    for path in (last, previous_path(last)):
        if path.exists():
            try:
                ckpt = load_checkpoint(path, keys=("progress", "identity"))
            except DataError:
                continue
            return ckpt["identity"], ckpt["progress"]
    return None


def identity_digest(identity: dict[str, Any]) -> str:
    """The sha256 of ``identity``, which ``summary.json`` records so that a finished training is known by it."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def finished_summary(model_dir: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of ``model_dir`` if it finished the training of ``identity``: ``model.pt`` there and
    ``summary.json`` of that identity (written after the model); None otherwise (then the training runs, resuming
    its checkpoint)."""
    path = model_dir / "summary.json"
    if not (model_dir / MODEL_FILE).is_file() or not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return summary if isinstance(summary, dict) and summary.get("identity") == identity_digest(identity) else None
