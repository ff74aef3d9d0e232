"""Our pipeline's ``python -m nmt train`` and ``python -m nmt translate``, run in the harness's own environment."""

import json
import sys
from pathlib import Path

from toolkits.command import Command, thread_env
from toolkits.task import Setup, Task


class Ours:
    """Ours in fp32 (``ours``), or with bf16 autocast on the CPU (``ours-bf16``: ``bf16: on``), an extra row."""

    def __init__(self, bf16: str = "off") -> None:
        self.bf16 = bf16
        self.name = "ours-bf16" if bf16 == "on" else "ours"

    def install(self, venvs: Path) -> None:
        """Nothing to install: the harness runs in the environment that has ``nmt``."""

    def train(self, task: Task, setup: Setup, updates: int, run_dir: Path) -> Command:
        model = {
            "arch": "transformer",
            "d_model": setup.d_model,
            "n_heads": setup.heads,
            "ff_dim": setup.ff_dim,
            "enc_layers": setup.enc_layers,
            "dec_layers": setup.dec_layers,
            "dropout": setup.dropout,
            "norm": "pre",
            "share_embeddings": True,
            "tie_output": True,
        }
        training = {
            "seed": setup.seed,
            "batch_tokens": setup.batch_tokens,
            "max_steps": updates,
            "max_length": setup.max_length,
            "lr": setup.lr,
            "warmup_steps": setup.warmup,
            "adam_betas": list(setup.adam_betas),
            "adam_eps": setup.adam_eps,
            "label_smoothing": setup.label_smoothing,
            "clip_norm": setup.clip_norm,
            "log_every": max(1, updates // 20),
            "valid_every": updates,
            "checkpoint_every": updates,
            "device": "cpu",
            "bf16": self.bf16,
            "threads": setup.threads,
        }
        files = {
            "--train-src": task.raw("train", "src"),
            "--train-trg": task.raw("train", "trg"),
            "--dev-src": task.raw("dev", "src"),
            "--dev-ref": task.raw("dev", "trg"),
            "--src-spm": task.spm_model,
            "--trg-spm": task.spm_model,
            "--model-dir": run_dir / "model",
        }
        argv = [sys.executable, "-m", "nmt", "train", "--model-options", json.dumps(model)]
        argv += ["--training", json.dumps(training), "--log-file", str(run_dir / "nmt.log")]
        for option, path in files.items():
            argv += [option, str(path)]
        return Command(argv, env=thread_env(setup.threads))

    def throughput(self, run_dir: Path) -> tuple[int, float]:
        """From ``summary.json``: target tokens with EOS over the update time (validation excluded)."""
        summary = json.loads((run_dir / "model" / "summary.json").read_text(encoding="utf-8"))
        return summary["train_tokens"], summary["train_seconds"]

    def translate(self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path) -> Command:
        method = ["--method", "beam", "--beam-size", str(beam_size)] if beam_size > 1 else ["--method", "greedy"]
        argv = [sys.executable, "-m", "nmt", "translate", "--model", str(run_dir / "model"), *method]
        argv += ["--length-penalty", str(setup.alpha), "--batch-size", str(setup.decode_batch), "--device", "cpu"]
        argv += ["--bf16", self.bf16]
        return Command(argv, env=thread_env(setup.threads), stdin=task.raw("test", "src"), stdout=out)

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        return out.read_text(encoding="utf-8").splitlines()
