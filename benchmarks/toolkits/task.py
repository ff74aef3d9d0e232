"""The benchmark task shared by every toolkit: data files, one sentencepiece model, and the model setup.

Every toolkit trains on the same subword pieces: the harness learns one joint sentencepiece model
and writes each split both as raw text (for us: we encode with the same model) and as
space-separated pieces (for the peers, which treat pieces as words with a fixed vocabulary).
Hypotheses in pieces are decoded back to text with the same model before scoring.
"""

import gzip
import random
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import sentencepiece as spm

from nmt.atomic import hash_file, write_text
from nmt.config import SubwordConfig
from nmt.data.download import download
from nmt.data.subword import load_subword, train_subword

MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
MULTI30K_FILES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Setup:
    """The model and optimisation every toolkit is configured with; the defaults are size ``tiny`` (issue 7)."""

    size: str = "tiny"
    enc_layers: int = 2
    dec_layers: int = 2
    d_model: int = 128
    heads: int = 4
    ff_dim: int = 512
    dropout: float = 0.1
    label_smoothing: float = 0.1
    lr: float = 7e-4  # peak, reached at the end of the linear warm-up, then inverse square root
    warmup: int = 500
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    clip_norm: float = 1.0
    batch_tokens: int = 1024  # padded max(source, target) length x sentences, as every toolkit counts it
    max_length: int = 128  # subwords; longer training pairs are left out
    beam_size: int = 5
    alpha: float = 1.0  # GNMT length penalty ((5 + |Y|) / 6) ** alpha
    decode_batch: int = 64  # sentences
    threads: int = 2
    seed: int = 1


# What each ``--size`` changes in Setup, for every system alike. "small" is the pipeline's default model:
# config.yaml's transformer (preset small of nmt/model_config.py at half its width, pre-norm, dropout 0.1) with
# config.yaml's training batch_tokens, lr and warmup_steps (tests/test_benchmarks.py checks both); every system
# decays the rate with the inverse square root, which all of them implement (config.yaml's linear decay: not all do).
SIZES: dict[str, dict] = {
    "tiny": {},
    "small": {
        "enc_layers": 3, "dec_layers": 3, "d_model": 128, "heads": 4, "ff_dim": 512,
        "batch_tokens": 512, "lr": 2e-3, "warmup": 100,
    },
}  # fmt: skip


def setup_of_size(size: str, threads: int) -> Setup:
    """The Setup of ``size`` (a key of SIZES) with ``threads`` threads per process."""
    return replace(Setup(), size=size, threads=threads, **SIZES[size])


@dataclass(frozen=True)
class Task:
    """Files of one benchmark task under ``root``; ``raw(split, side)`` and ``pieces(split, side)``."""

    name: str
    root: Path
    src_lang: str
    trg_lang: str

    def raw(self, split: str, side: str) -> Path:
        """Plain text of ``split`` (train, dev, test); side ``src`` or ``trg``."""
        return self.root / f"{split}.{self._lang(side)}"

    def pieces(self, split: str, side: str) -> Path:
        """The same sentences as space-separated sentencepiece pieces."""
        return self.root / f"{split}.{self._lang(side)}.pieces"

    @property
    def spm_model(self) -> Path:
        return self.root / "spm.model"

    @property
    def vocab(self) -> Path:
        """Every piece of the sentencepiece model except its four specials, one per line, in id order."""
        return self.root / "vocab.txt"

    def _lang(self, side: str) -> str:
        return {"src": self.src_lang, "trg": self.trg_lang}[side]

    def lines(self, split: str, side: str) -> list[str]:
        return self.raw(split, side).read_text(encoding="utf-8").splitlines()

    def decode_pieces(self, lines: list[str]) -> list[str]:
        """Turn hypotheses in space-separated pieces back into text."""
        sp = spm.SentencePieceProcessor(model_file=str(self.spm_model))
        return [sp.decode_pieces(line.split()) for line in lines]

    def read_hypotheses(self, out: Path) -> list[str]:
        """A peer's test output in pieces, one line per test sentence, as text."""
        lines = out.read_text(encoding="utf-8").splitlines()
        expected = len(self.lines("test", "src"))
        if len(lines) != expected:
            raise ValueError(f"{out} has {len(lines)} hypotheses for {expected} test sentences")
        return self.decode_pieces(lines)


def prepare_multi30k(
    work: Path,
    mirror: Path | None,
    vocab_size: int = 8000,
    dev_sentences: int | None = 100,
    spm_model: Path | None = None,
) -> Task:
    """Multi30k en->de (train, the first ``dev_sentences`` of val, test_2016_flickr) through nmt's download code.

    :param mirror: a ``wget -x`` mirror (e.g. ``../shared/data/mirror``); None downloads from the web
    :param dev_sentences: None: all of val
    :param spm_model: a joint sentencepiece model to cut the pieces with (e.g. a pipeline run's, so that a peer
        trains on that run's pieces) instead of one learnt here with ``vocab_size`` pieces
    """
    name = f"multi30k-bpe{vocab_size}" if spm_model is None else f"multi30k-spm{hash_file(spm_model)[:12]}"
    task = Task(
        "multi30k", work / (name if dev_sentences == 100 else f"{name}-dev{dev_sentences or 'all'}"), "en", "de"
    )
    if spm_model is not None and not task.spm_model.exists():
        task.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(spm_model, task.spm_model)
    for split, name in MULTI30K_FILES.items():
        for side in ("src", "trg"):
            out = task.raw(split, side)
            if out.exists():
                continue
            lang = task._lang(side)
            packed = work / "download" / f"{name}.{lang}.gz"
            if not packed.exists():
                download(f"{MULTI30K}/{name}.{lang}.gz", packed, mirror=mirror)
            with gzip.open(packed, "rt", encoding="utf-8") as f:
                lines = f.read().splitlines()
            _write_lines(out, lines[:dev_sentences] if split == "dev" and dev_sentences is not None else lines)
    _prepare_subwords(task, vocab_size)
    return task


def prepare_synthetic(work: Path, train_pairs: int = 4000, seed: int = 1) -> Task:
    """A tiny deterministic task for quick runs: translate made-up words one by one through a fixed lexicon."""
    task = Task("synthetic", work / "synthetic", "xx", "yy")
    if not task.raw("test", "trg").exists():
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = sorted({"".join(rng.choices(letters, k=rng.randint(2, 6))) for _ in range(120)})
        lexicon = {w: "".join(rng.choices(letters, k=rng.randint(2, 6))) for w in words}
        sizes = {"train": train_pairs, "dev": 50, "test": 200}
        for split, n in sizes.items():
            src = [" ".join(rng.choices(words, k=rng.randint(3, 12))) for _ in range(n)]
            trg = [" ".join(lexicon[w] for w in s.split()) for s in src]
            _write_lines(task.raw(split, "src"), src)
            _write_lines(task.raw(split, "trg"), trg)
    _prepare_subwords(task, vocab_size=400)
    return task


def _prepare_subwords(task: Task, vocab_size: int) -> None:
    """Learn the joint sentencepiece model and write the piece files and the vocabulary (once)."""
    if task.vocab.exists():
        return
    if not task.spm_model.exists():  # a given model was copied here by the caller
        train_subword(
            [task.raw("train", "src")],
            [task.raw("train", "trg")],
            task.spm_model,
            task.root / "spm.trg.model",
            SubwordConfig(vocab_size=vocab_size),
        )
    sp = load_subword(task.spm_model)
    for split in SPLITS:
        for side in ("src", "trg"):
            pieces = sp.encode(task.lines(split, side), out_type=str)
            _write_lines(task.pieces(split, side), [" ".join(p) for p in pieces])
    specials = {sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()}
    _write_lines(task.vocab, [sp.id_to_piece(i) for i in range(len(sp)) if i not in specials])


def _write_lines(path: Path, lines: list[str]) -> None:
    write_text(path, "".join(line + "\n" for line in lines))
