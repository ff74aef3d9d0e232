"""The files of a training run, one bundle for the library, ``python -m nmt train`` and the launcher under torchrun.

Imports nothing heavy: the command line builds it before torch is loaded.
"""

from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class TrainFiles:
    """What a training reads and where it writes: :func:`nmt.training.loop.train` takes it, ``python -m nmt train``
    reads it from options of the fields' names (``--dev-src``), :func:`nmt.training.distributed.launch_training`
    passes it on as those options (:meth:`options`).

    :param train_data: the prefix of a binarized training set (:func:`nmt.data.binarize.binarize`), or (source
        files, target files) of aligned text, which rank 0 binarizes into ``model_dir/train`` at each start
    :param dev_src: the dev set's source text, and ``dev_ref`` its reference translations
    :param src_spm: the source sentencepiece model, and ``trg_spm`` the target one
    :param model_dir: the model directory the training writes (:mod:`nmt.model_dir`), its checkpoints inside
    """

    train_data: str | Path | tuple[list[str | Path], list[str | Path]]
    dev_src: str | Path
    dev_ref: str | Path
    src_spm: str | Path
    trg_spm: str | Path
    model_dir: str | Path

    @property
    def ckpt_dir(self) -> Path:
        """``model_dir/checkpoints``: ``last.pt``, ``best.pt`` and the snapshots kept for averaging."""
        return Path(self.model_dir) / "checkpoints"

    def options(self) -> list[str]:
        """The options of ``python -m nmt train`` that give these files: ``--train-data=PREFIX`` or
        ``--train-src A B --train-trg C D``, then ``--dev-src=FILE`` and so on."""
        if isinstance(self.train_data, (str, Path)):
            args = [f"--train-data={self.train_data}"]
        else:  # several files follow one option ("--train-src=A B" would be one file)
            src, trg = self.train_data
            args = ["--train-src", *map(str, src), "--train-trg", *map(str, trg)]
        others = [field.name for field in fields(self) if field.name != "train_data"]
        return args + [f"--{name.replace('_', '-')}={getattr(self, name)}" for name in others]
