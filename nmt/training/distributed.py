"""Data-parallel training on torch.distributed: the process group, batch sharding and the torchrun command.

One update always consumes the same global batches, whatever the number of processes: each
process takes every ``size``-th sentence of a batch, and the gradients are summed across
processes (DistributedDataParallel). So a run with 2 processes ends where a run with 1 process
ends, to floating-point tolerance, and a resumed run may use another number of processes.

A job on several nodes runs one torchrun agent per node; the agents meet at a c10d rendezvous on
the first node (under SLURM: the first host of the allocation) and start the processes of their node.
"""

import dataclasses
import datetime
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

import nmt
from nmt.config import TrainConfig
from nmt.errors import TrainingError
from nmt.model_config import ModelMeta
from nmt.training.files import TrainFiles

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


@dataclass(frozen=True)
class Rendezvous:
    """Where the torchrun agents of a job on several nodes meet (c10d): ``nodes`` agents at ``endpoint``.

    :param endpoint: ``HOST:PORT`` of the first node, where the agents' key-value store listens
    :param job_id: the same on every node, different for jobs that share an endpoint
    """

    nodes: int
    endpoint: str
    job_id: str


# torchrun's c10d default port; a job adds its SLURM job id modulo 1000, so jobs that share a first node differ.
RDZV_PORT = 29400


def slurm_rendezvous(nodes: int) -> Rendezvous:
    """The rendezvous of a SLURM job on ``nodes`` nodes: at the first host of the allocation.

    :raises TrainingError: outside a SLURM job, or in one with fewer nodes
    """
    nodelist, job_id = os.environ.get("SLURM_JOB_NODELIST"), os.environ.get("SLURM_JOB_ID")
    if not nodelist or not job_id:
        raise TrainingError(
            f"training on {nodes} nodes: not in a SLURM job (no SLURM_JOB_NODELIST); give the rendezvous endpoint"
        )
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise TrainingError(f"training on {nodes} nodes: scontrol show hostnames {nodelist} failed ({e})") from e
    hosts = out.stdout.split()
    allocated = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or len(hosts))
    if min(allocated, len(hosts)) < nodes:
        raise TrainingError(f"training on {nodes} nodes, but SLURM job {job_id} has {allocated} ({nodelist})")
    return Rendezvous(nodes, f"{hosts[0]}:{RDZV_PORT + int(job_id) % 1000}", job_id)


def torchrun_command(processes: int, args: list[str], rendezvous: Rendezvous | None = None) -> list[str]:
    """The command that trains with ``processes`` processes on this node: ``python -m nmt ARGS`` under torchrun.

    Without ``rendezvous`` the job is this node alone, and ``--standalone`` picks a free port, so several
    jobs may share a node; with it, this node's agent joins the others at the rendezvous.
    """
    launch = ["--standalone"]
    if rendezvous is not None:
        launch = [
            f"--nnodes={rendezvous.nodes}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rendezvous.endpoint}",
            f"--rdzv-id={rendezvous.job_id}",
        ]
    return [sys.executable, "-m", "torch.distributed.run", *launch, f"--nproc-per-node={processes}", "-m", "nmt", *args]


def srun_command(nodes: int, command: list[str]) -> list[str]:
    """``command`` once on each of ``nodes`` nodes of this SLURM job.

    The rule's own job step (Snakemake's ``srun -n1``) holds the first node's CPUs and GPUs: ``--overlap``
    lets this step share them.
    """
    return [
        "srun",
        "--overlap",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        *command,
    ]


def processes_per_node(resources: Mapping[str, Any], nodes: int = 1) -> int:
    """Training processes on each node from a job's resources: one per GPU, else ``processes`` (CPU).

    ``gres: gpu:4`` (or ``gpu:a100:4``) counts the GPUs of each node; ``gpu: 4`` those of the whole job
    (sbatch ``--gpus``), which SLURM may place unevenly, so a job on several nodes must use ``gres``.

    :raises TrainingError: for ``gpu`` on several nodes, or an unreadable ``gres``
    """
    gres = str(resources.get("gres") or "")
    gpus_per_node = 0
    if gres.split(":")[0] == "gpu":
        parts = gres.split(":")  # gpu, gpu:4, gpu:a100 (one), gpu:a100:4
        if len(parts) > 3 or (len(parts) == 3 and not parts[2].isdigit()):
            raise TrainingError(f"resources.gres: cannot read a GPU count from {gres!r} (e.g. gpu:4, gpu:a100:4)")
        gpus_per_node = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    elif int(resources.get("gpu") or 0) > 0:
        if nodes > 1:
            raise TrainingError(f"resources: gpu counts GPUs per job; on {nodes} nodes ask per node, e.g. gres=gpu:4")
        gpus_per_node = int(resources["gpu"])
    return max(gpus_per_node, int(resources.get("processes") or 1))


def launch_training(
    processes: int,
    model_options: dict[str, Any],
    config: TrainConfig,
    files: TrainFiles,
    log_path: str | Path,
    nodes: int = 1,
    rendezvous: Rendezvous | None = None,
    meta: ModelMeta | None = None,
) -> None:
    """Train with ``processes`` data-parallel processes per node (``python -m nmt train`` under torchrun).

    On several nodes, without ``rendezvous`` this must run in a SLURM job: ``srun`` starts one torchrun
    agent per node and they meet at the first node (:func:`slurm_rendezvous`). With ``rendezvous`` it
    starts this node's agent only; run the same call on every node.

    On CPU the ``threads`` are split among the processes of a node. SIGTERM (SLURM's warning before
    the time limit) is passed on, so every process saves the checkpoint before the job ends.

    :param files: what the training reads and writes, passed on as options (:meth:`TrainFiles.options`)
    :param log_path: the log file all processes append to (rank 0 logs progress, the others warnings)
    :param meta: what :func:`nmt.training.loop.train` records in ``meta.json``
    :raises TrainingError: when a process fails, with its one-line error
    """
    training = dataclasses.asdict(config)
    if config.threads > 0:
        training["threads"] = max(1, config.threads // processes)
    args = ["train", "--model-options", json.dumps(model_options), "--training", json.dumps(training)]
    args += files.options()
    if meta is not None:
        args += ["--meta", json.dumps(dataclasses.asdict(meta))]
    args += [f"--log-file={log_path}"]  # not --log: torchrun would take it for its --log-dir
    if nodes > 1 and rendezvous is None:
        command = srun_command(nodes, torchrun_command(processes, args, slurm_rendezvous(nodes)))
    else:
        command = torchrun_command(processes, args, rendezvous)
    # The processes import this nmt: in a rule's conda env it is on the script's sys.path, not installed.
    paths = [str(Path(nmt.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]  # nmt's folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        output, _ = proc.communicate()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if output.strip():
        log.info("torchrun output:\n%s", output.rstrip())
    if proc.returncode != 0:
        where = f"{processes} processes" if nodes == 1 else f"{nodes} nodes x {processes} processes"
        raise TrainingError(f"training with {where} failed (exit status {proc.returncode}): {why(output, log_path)}")


# A failed process in torchrun's summary: "rank : 1 (local_rank: 1)", "exitcode : -9 (pid: 123) SIGKILL", ...
FAILED_RANK = re.compile(r"^\s*rank\s*: (\d+) .*\n\s*exitcode\s*: (-?\d+) .*\n(?:.*\n)*?\s*traceback : (.*)$", re.M)


def why(output: str, log_path: str | Path) -> str:
    """Why a torchrun job failed, in one line: a process killed by a signal (the OOM killer, a node's
    failure, ``kill -9``) names its rank, since the errors of the others that lost it follow from it;
    else the first ``error:`` line of our own, else torchrun's exit codes."""
    killed = [(int(rank), message.strip()) for rank, code, message in FAILED_RANK.findall(output) if int(code) < 0]
    errors = [line.removeprefix("error: ") for line in output.splitlines() if line.startswith("error: ")]
    # torchrun ends the others with SIGTERM once one process fails: that names the failure only without an error.
    culprits = [k for k in killed if "SIGTERM" not in k[1]] or ([] if errors else killed)
    if culprits:
        rank, message = culprits[0]
        return f"rank {rank} was killed ({message}), the others stopped; run the same command again to resume"
    causes = [line.strip() for line in output.splitlines() if line.strip().startswith(("exitcode", "traceback"))]
    return (errors or [f"{'; '.join(causes) or 'no error message'} (see {log_path})"])[0]
