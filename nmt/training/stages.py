"""Staged training, a curriculum in the config (``training.stages``): each stage a training of its own settings that
starts from the weights of the stage before, as the teachers of Mozilla's translations pipeline train on original
and back-translated data first, then on the original alone (OpusTrainer's stages).

Stage ``i`` trains into ``model_dir/stages/{i}`` (a model directory of its own: checkpoints, curves, summary), the
last stage into ``model_dir`` itself, so that what reads the model sees an ordinary model directory. Each stage is a
training like any other (:func:`nmt.training.loop.train`): it resumes its own ``last.pt``, is not trained again once
finished, and is trained anew when its identity changed, which holds the sha256 of the model it starts from
(:mod:`nmt.training.identity`), so a changed stage trains itself and every later stage again.
"""

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt.config import TrainConfig
from nmt.data.binarize import BinarizedData
from nmt.training.distributed import World
from nmt.training.files import TrainFiles

log = logging.getLogger(__name__)

STAGES_DIR = "stages"  # model_dir/stages/{i}: the model directory of every stage but the last

# Trains one stage: its settings, its files, and the summary entries of the stages before it (None without stages).
TrainStage = Callable[[TrainConfig, TrainFiles, list[dict[str, Any]] | None], dict[str, Any]]


def stage_plan(config: TrainConfig, files: TrainFiles) -> list[tuple[TrainConfig, TrainFiles]]:
    """The settings and files of each stage, in order: stage ``i`` starts from the model of stage ``i - 1`` (the
    first from ``config.init_from``) and trains into ``model_dir/stages/{i}``, the last into ``model_dir``;
    ``[(config, files)]`` without stages."""
    if config.stages is None:
        return [(config, files)]
    model_dir, configs = Path(files.model_dir), config.stage_configs()
    plan, init_from = [], config.init_from
    for i, stage in enumerate(configs):
        stage_dir = model_dir if i == len(configs) - 1 else model_dir / STAGES_DIR / str(i)
        plan.append((dataclasses.replace(stage, init_from=init_from), dataclasses.replace(files, model_dir=stage_dir)))
        init_from = str(stage_dir)
    return plan


def train_stages(config: TrainConfig, files: TrainFiles, world: World, train_stage: TrainStage) -> dict[str, Any]:
    """Train the stages of ``config`` one after the other with ``train_stage`` (every process the same sequence),
    or ``config`` alone without stages.

    :return: the summary of the last stage; with stages, its ``stages`` lists every stage's own figures
    """
    plan = stage_plan(config, files)
    if world.is_main:
        remove_other_stages(Path(files.model_dir), len(plan) - 1)
    world.barrier()
    check_mixes(plan, files)
    entries = None if config.stages is None else []
    summary: dict[str, Any] = {}
    for i, (stage_config, stage_files) in enumerate(plan):
        if entries is not None:
            log.info("stage %d of %d: %s into %s", i + 1, len(plan), config.stages[i], stage_files.model_dir)
        summary = train_stage(stage_config, stage_files, entries)
        if entries is not None:
            entries = summary["stages"]
    return summary


def remove_other_stages(model_dir: Path, stages: int) -> None:
    """Remove ``model_dir/stages/{i}`` for ``i >= stages``: the stage directories of a config with more stages."""
    root = model_dir / STAGES_DIR
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.name.isdigit() and int(path.name) >= stages:
            log.info("%s: a stage of an earlier config with more stages; removed", path)
            shutil.rmtree(path)
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()


def check_mixes(plan: list[tuple[TrainConfig, TrainFiles]], files: TrainFiles) -> None:
    """Check every stage's ``mix`` against the corpora of a binarized training set before the first stage trains,
    so that a bad name in the last stage does not wait for the others (text is checked as each stage binarizes it).

    :raises DataError: naming the header, for a corpus name the data lacks
    """
    if not isinstance(files.train_data, (str, Path)) or not any(config.mix for config, _ in plan):
        return
    data = BinarizedData.open(files.train_data)
    for config, _ in plan:
        data.corpus_shares(config.mix)


def stage_entry(summary: dict[str, Any], stage: int) -> dict[str, Any]:
    """What the summary of a staged model records of one stage (``summary``: that stage's own figures)."""
    keys = ("steps", "epochs", "train_tokens", "train_seconds", "best_step", "valid")
    return {"stage": stage, **{key: summary[key] for key in keys}, "minutes": round(summary["train_seconds"] / 60, 1)}


def add_stages(summary: dict[str, Any], earlier: list[dict[str, Any]]) -> dict[str, Any]:
    """``summary`` of a stage with ``stages``, the entries of the ``earlier`` stages and its own, and ``steps``,
    ``train_seconds``, ``train_tokens`` and ``tokens_per_second`` of all stages together (what the model cost);
    ``epochs``, ``best_step`` and ``valid`` stay the stage's own."""
    stages = [*earlier, stage_entry(summary, len(earlier))]
    total = {key: sum(entry[key] for entry in stages) for key in ("steps", "train_seconds", "train_tokens")}
    total["train_seconds"] = round(total["train_seconds"], 1)
    total["tokens_per_second"] = round(total["train_tokens"] / max(total["train_seconds"], 1e-9), 1)
    return {**summary, **total, "stages": stages}
