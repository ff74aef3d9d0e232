"""Learning curves written as training goes: ``train.tsv`` and ``valid.tsv`` of a model directory,
appended a row per log line and per validation, and optionally TensorBoard event files."""

from pathlib import Path
from typing import Any

from nmt.atomic import write_text
from nmt.errors import ConfigError

TRAIN_HEADER = "step\tepoch\tloss\tlr\ttokens_per_second\n"
VALID_HEADER = "step\tloss\tppl\tbleu\tchrf\tseconds\n"  # seconds: training time so far (validation not counted)


def train_row(h: dict[str, Any]) -> str:
    return f"{h['step']}\t{h['epoch']}\t{h['loss']:.4f}\t{h['lr']:.3e}\t{h['tokens_per_second']:.0f}\n"


def valid_row(h: dict[str, Any]) -> str:
    scores = f"{h['loss']:.4f}\t{h['ppl']:.2f}\t{h['bleu']:.2f}\t{h['chrf']:.2f}"
    return f"{h['step']}\t{scores}\t{h['seconds']:.1f}\n"


class Curves:
    """``model_dir/train.tsv`` and ``valid.tsv``, rewritten once from a resumed checkpoint's rows, then appended.

    A run killed by the scheduler leaves the rows up to its last log line; the resumed run drops the
    rows written after its checkpoint (they are redone), so its files equal an uninterrupted run's.
    With ``tensorboard``, the same scalars go to ``model_dir/tensorboard`` (events after the resumed
    step are purged, as TensorBoard's ``purge_step`` does).
    """

    def __init__(self, model_dir: Path, train_log: list[dict], history: list[dict], step: int, tensorboard: bool):
        self.train_path, self.valid_path = model_dir / "train.tsv", model_dir / "valid.tsv"
        write_text(self.train_path, TRAIN_HEADER + "".join(map(train_row, train_log)))
        write_text(self.valid_path, VALID_HEADER + "".join(map(valid_row, history)))
        self.writer = open_summary_writer(model_dir / "tensorboard", step) if tensorboard else None

    def add_train(self, h: dict[str, Any]) -> None:
        _append(self.train_path, train_row(h))
        if self.writer:
            for key in ("loss", "lr", "tokens_per_second"):
                self.writer.add_scalar(f"train/{key}", h[key], h["step"])
            self.writer.flush()

    def add_valid(self, h: dict[str, Any]) -> None:
        _append(self.valid_path, valid_row(h))
        if self.writer:
            for key in ("loss", "ppl", "bleu", "chrf"):
                self.writer.add_scalar(f"valid/{key}", h[key], h["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer:
            self.writer.close()


def _append(path: Path, row: str) -> None:
    """One whole row per write and flush, so a killed process leaves whole rows."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(row)


def open_summary_writer(log_dir: Path, step: int):
    """A TensorBoard ``SummaryWriter`` on ``log_dir`` that drops events after ``step`` (a resume point)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise ConfigError(
            'training.tensorboard: needs the tensorboard package (pip install -e ".[tensorboard]")'
        ) from e
    return SummaryWriter(log_dir=str(log_dir), purge_step=step + 1 if step else None)
