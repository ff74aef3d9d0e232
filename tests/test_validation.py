"""Validation during training: the dev loss, and the dev set translated and scored."""

import dataclasses
import logging
import math

import pytest
from conftest import TOY_MODEL, tiny_model, tiny_train_config, toy_files, write_lines

from nmt.atomic import read_lines
from nmt.data.subword import load_subword
from nmt.device import get_device
from nmt.errors import DataError
from nmt.training.loop import train
from nmt.training.validation import DevSet, validate

# A Transformer of 24 positions: the toy sentences (2 to 6 words) fit, a dev pair of 40 words does not.
SHORT_MODEL = {**TOY_MODEL, "max_positions": 24}
LONG_SRC = " ".join(["the big red dog runs"] * 8)
LONG_TRG = " ".join(["der gross rot hund rennt"] * 8)


@pytest.fixture
def long_dev(toy_corpus, tmp_path) -> tuple:
    """The toy dev set with a pair longer than :data:`SHORT_MODEL` takes as its line 21 (of 41)."""
    src, trg = read_lines(toy_corpus["dev.en"]), read_lines(toy_corpus["dev.de"])
    src.insert(20, LONG_SRC)
    trg.insert(20, LONG_TRG)
    return write_lines(tmp_path / "dev.en", src), write_lines(tmp_path / "dev.de", trg)


def test_a_dev_pair_longer_than_the_model_takes_is_left_out_of_the_dev_loss(
    toy_corpus, toy_spm, long_dev, tmp_path, caplog
):
    """Such a pair, which the model cannot read whole, is left out of the loss, with one warning however often the
    run validates, and its source is still translated (cut to the model's positions) for BLEU."""
    caplog.set_level(logging.WARNING, logger="nmt")
    dev_src, dev_ref = long_dev
    config = tiny_train_config(max_steps=4, valid_every=2, max_length=24, checkpoint_every=4)
    files = dataclasses.replace(toy_files(toy_corpus, toy_spm, tmp_path / "model"), dev_src=dev_src, dev_ref=dev_ref)
    summary = train(SHORT_MODEL, config, files)
    assert len((tmp_path / "model" / "valid.tsv").read_text().splitlines()) == 1 + 2  # steps 2 and 4
    assert math.isfinite(summary["valid"]["loss"]) and summary["valid"]["step"] in (2, 4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "nmt.training.validation"]
    assert warnings == [
        f"{dev_src}, {dev_ref}: 1 of 41 dev pairs longer than the model's 24 positions (line 21) are left out of the "
        "dev loss; BLEU and chrF still translate every source, cut to that length"
    ]
    cut = [r.getMessage() for r in caplog.records if r.name == "nmt.decoding.translation"]
    assert cut and all(m.startswith(f"{dev_src} line 21: ") for m in cut)  # translated at every validation


def test_the_dev_loss_is_that_of_the_pairs_the_model_takes(toy_corpus, toy_spm, long_dev):
    src_sp, trg_sp = load_subword(toy_spm["en"]), load_subword(toy_spm["de"])
    model = tiny_model("transformer", src_sp.get_piece_size(), max_positions=24)
    config, device = tiny_train_config(), get_device("cpu")
    with_long = validate(model, DevSet.load(*long_dev, src_sp, trg_sp), config, device)
    without = validate(model, DevSet.load(toy_corpus["dev.en"], toy_corpus["dev.de"], src_sp, trg_sp), config, device)
    assert with_long["loss"] == pytest.approx(without["loss"], rel=1e-5)
    tiny = tiny_model("transformer", src_sp.get_piece_size(), max_positions=2)
    with pytest.raises(DataError, match="no dev pair fits the model's 2 positions"):
        validate(tiny, DevSet.load(*long_dev, src_sp, trg_sp), config, device)
