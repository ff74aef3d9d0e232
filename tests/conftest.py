"""Shared fixtures: a synthetic toy translation task, its subword model, tiny configs, the shared mirror."""

import os
import random
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from nmt.config import SubwordConfig, TrainConfig
from nmt.data.download import MIRROR_ENV
from nmt.data.subword import train_subword
from nmt.models.seq2seq import build_model
from nmt.training.files import TrainFiles
from nmt.training.loop import train

REPO = Path(__file__).resolve().parents[1]
# The mirror of the public corpora (`make mirror` builds one): $NMT_MIRROR, else ../shared/data/mirror. Taken out
# of the environment, so that nmt.data.download does not use it where a test wants the network (a loopback server).
MIRROR = Path(os.environ.pop(MIRROR_ENV, "") or REPO.parent / "shared" / "data" / "mirror").resolve()
# No SLURM controller runs during the tests but test_slurm.py's, whose fixture brings one up and restores this. Where
# SLURM is installed, the SLURM executor plugin runs `scontrol show config` at every Snakemake start (for its --help
# text), and scontrol waits 9 s for the absent controller; with this config it gives up at once.
MACHINE_SLURM_CONF = os.environ.get("SLURM_CONF")
os.environ["SLURM_CONF"] = str(REPO / "tests" / "no_controller.slurm.conf")
ARCHS = ["rnn", "transformer", "convs2s"]

# The toy "language pair": every source word has one target word, and the order is kept, so a tiny
# model can learn it in seconds; enough to check that training and search really work.
LEXICON = {
    "house": "haus",
    "dog": "hund",
    "cat": "katze",
    "red": "rot",
    "big": "gross",
    "small": "klein",
    "man": "mann",
    "woman": "frau",
    "runs": "rennt",
    "sleeps": "schlaeft",
    "the": "der",
    "a": "ein",
    "green": "gruen",
    "tree": "baum",
    "water": "wasser",
    "eats": "isst",
}


def make_toy_corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = sorted(LEXICON)
    src = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(n)]
    return src, [" ".join(LEXICON[w] for w in s.split()) for s in src]


def assert_one_line(excinfo: pytest.ExceptionInfo, *names: str | Path) -> str:
    """Check that the error message is one line that contains every one of ``names``."""
    message = str(excinfo.value)
    assert "\n" not in message
    for name in names:
        assert str(name) in message
    return message


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def html_tables(text: str) -> list[list[list[str]]]:
    """The tables of an HTML page as a browser shows them: per table its rows, per row its cells' text (th, td)."""
    parser = _TableParser()
    parser.feed(text)
    return parser.tables


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> dict[str, Path]:
    """Files train/dev/test .en/.de of the toy task."""
    root = tmp_path_factory.mktemp("toy")
    files = {}
    for split, n, seed in (("train", 600, 1), ("dev", 40, 2), ("test", 40, 3)):
        src, trg = make_toy_corpus(n, seed)
        files[f"{split}.en"] = write_lines(root / f"{split}.en", src)
        files[f"{split}.de"] = write_lines(root / f"{split}.de", trg)
    return files


@pytest.fixture(scope="session")
def toy_spm(toy_corpus, tmp_path_factory) -> dict[str, Path]:
    """A joint sentencepiece BPE model of about 80 pieces, as ``{"en": path, "de": path}``."""
    root = tmp_path_factory.mktemp("spm")
    models = {"en": root / "en.model", "de": root / "de.model"}
    train_subword(
        [toy_corpus["train.en"]],
        [toy_corpus["train.de"]],
        models["en"],
        models["de"],
        SubwordConfig(vocab_size=81),  # 80 pieces plus the reserved <BT> tag
    )
    return models


@pytest.fixture(scope="session")
def two_corpora(toy_corpus, tmp_path_factory) -> dict[str, list]:
    """The toy training set cut into two corpora (files a and b), as the workflow's several cleaned corpora."""
    root = tmp_path_factory.mktemp("two")
    files = {"en": [], "de": []}
    for lang in files:
        lines = toy_corpus[f"train.{lang}"].read_text().splitlines()
        files[lang] = [write_lines(root / f"a.{lang}", lines[:250]), write_lines(root / f"b.{lang}", lines[250:])]
    return files


def tiny_model(arch: str, vocab: int = 40, seed: int = 0, **overrides):
    """An untrained tiny model of ``arch`` without dropout (deterministic outputs), initialised with ``seed``."""
    torch.manual_seed(seed)
    return build_model({"arch": arch, "size": "tiny", "dropout": 0.0, **overrides}, vocab, vocab, True).eval()


def stepwise_logits(model, src: torch.Tensor, trg_in: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) of ``trg_in`` computed one ``step()`` at a time, to compare with teacher forcing."""
    state, steps = model.init_state(src), []
    for t in range(trg_in.size(1)):
        logits, state = model.step(trg_in[:, t], state)
        steps.append(logits)
    return torch.stack(steps, dim=1)


def tiny_train_config(**overrides) -> TrainConfig:
    values = dict(
        batch_tokens=400,
        max_steps=60,
        warmup_steps=10,
        lr=3e-3,
        log_every=20,
        valid_every=30,
        checkpoint_every=10,
        threads=2,
    )
    values.update(overrides)
    return TrainConfig(**values)


# A 2+2-layer Transformer that learns the toy task in a few seconds.
TOY_MODEL = {"arch": "transformer", "size": "tiny", "d_model": 64, "ff_dim": 256, "enc_layers": 2, "dec_layers": 2}


def toy_files(toy_corpus, toy_spm, model_dir) -> TrainFiles:
    """The files of a training on the toy task (its text, binarized at each start) into ``model_dir``, as strings
    (``dataclasses.asdict`` of it is JSON for a subprocess)."""
    return TrainFiles(
        train_data=([str(toy_corpus["train.en"])], [str(toy_corpus["train.de"])]),
        dev_src=str(toy_corpus["dev.en"]),
        dev_ref=str(toy_corpus["dev.de"]),
        src_spm=str(toy_spm["en"]),
        trg_spm=str(toy_spm["de"]),
        model_dir=str(model_dir),
    )


def run_training(toy_corpus, toy_spm, model_dir, model=TOY_MODEL, **overrides):
    """Train ``model`` options into ``model_dir`` with :func:`tiny_train_config` plus ``overrides``."""
    return train(model, tiny_train_config(**overrides), toy_files(toy_corpus, toy_spm, model_dir))


@pytest.fixture(scope="session")
def trained_model(toy_corpus, toy_spm, tmp_path_factory):
    """A model directory trained on the toy task for 500 steps, and its summary."""
    model_dir = tmp_path_factory.mktemp("trained")
    return model_dir, run_training(toy_corpus, toy_spm, model_dir, max_steps=500, valid_every=250)
