"""Data-parallel training on torch.distributed: the process group, batch sharding and the torchrun command.

One update always consumes the same global batches, whatever the number of processes: each
process takes every ``size``-th sentence of a batch, and the gradients are summed across
processes (DistributedDataParallel). So a run with 2 processes ends where a run with 1 process
ends, to floating-point tolerance, and a resumed run may use another number of processes.
"""

import dataclasses
import datetime
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from nmt.config import ModelMeta, TrainConfig
from nmt.errors import TrainingError

log = logging.getLogger(__name__)

# Validation runs on rank 0 while the others wait; give it time on large dev sets.
TIMEOUT = datetime.timedelta(hours=2)


@dataclass(frozen=True)
class World:
    """This process's place among the training processes; ``size == 1`` means no process group."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    group: Any = None  # a gloo group for small control messages (CPU objects), also under NCCL

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def any(self, flag: bool) -> bool:
        """True on every process when ``flag`` is true on at least one (e.g. a SIGTERM seen by one)."""
        if self.size == 1:
            return flag
        t = torch.tensor([int(flag)])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return bool(t.item())

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over all processes."""
        if self.size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return t.tolist()

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every process."""
        if self.size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order, on every process."""
        if self.size == 1:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier(group=self.group)


def init_world(device_type: str) -> World:
    """Join the process group that ``torchrun`` describes in the environment (none without it).

    :param device_type: ``cuda`` uses NCCL for the gradients, ``cpu`` uses gloo
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo", timeout=TIMEOUT)
    group = dist.new_group(backend="gloo", timeout=TIMEOUT) if device_type == "cuda" else dist.group.WORLD
    return World(rank=rank, size=size, local_rank=local_rank, group=group)


def close_world(world: World) -> None:
    if world.size > 1 and dist.is_initialized():
        dist.destroy_process_group()


def shard(indices: np.ndarray, world: World) -> np.ndarray:
    """This process's share of one global batch: every ``size``-th sentence, starting at ``rank``.

    Batches are sorted by length, so the shares have about the same number of tokens.

    :param indices: shape (B,) sentence indices of the global batch
    :return: shape (about B / size,) the indices this process trains on (may be empty when B < size)
    """
    return indices[world.rank :: world.size]


def torchrun_command(processes: int, args: list[str]) -> list[str]:
    """The command that trains with ``processes`` processes on this node: ``python -m nmt ARGS`` under torchrun.

    ``--standalone`` picks a free port for the rendezvous, so several jobs may share a node.
    """
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "-m",
        "nmt",
        *args,
    ]


def launch_training(
    processes: int,
    model_options: dict[str, Any],
    config: TrainConfig,
    files: dict[str, str | Path],
    log_path: str | Path,
    meta: ModelMeta | None = None,
) -> None:
    """Train with ``processes`` data-parallel processes on this node (``python -m nmt train`` under torchrun).

    On CPU the ``threads`` are split among the processes. SIGTERM (SLURM's warning before the time
    limit) is passed on, so every process saves the checkpoint before the job ends.

    :param files: the path arguments of :func:`nmt.training.train` (``train_src`` ... ``model_dir``)
    :param log_path: the log file all processes append to (rank 0 logs progress, the others warnings)
    :param meta: what :func:`nmt.training.train` records in ``meta.json``
    :raises TrainingError: when a process fails, with its one-line error
    """
    training = dataclasses.asdict(config)
    if config.threads > 0:
        training["threads"] = max(1, config.threads // processes)
    args = ["train", "--model-options", json.dumps(model_options), "--training", json.dumps(training)]
    args += [f"--{name.replace('_', '-')}={path}" for name, path in files.items()]
    if meta is not None:
        args += ["--meta", json.dumps(dataclasses.asdict(meta))]
    args += [f"--log-file={log_path}"]  # not --log: torchrun would take it for its --log-dir
    command = torchrun_command(processes, args)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        output, _ = proc.communicate()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if output.strip():
        log.info("torchrun output:\n%s", output.rstrip())
    if proc.returncode != 0:
        errors = [line.removeprefix("error: ") for line in output.splitlines() if line.startswith("error: ")]
        causes = [line.strip() for line in output.splitlines() if line.strip().startswith(("exitcode", "traceback"))]
        reason = (errors or [f"{'; '.join(causes) or 'no error message'} (see {log_path})"])[0]
        raise TrainingError(f"training with {processes} processes failed (exit status {proc.returncode}): {reason}")
