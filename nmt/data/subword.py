"""Subword segmentation with sentencepiece (BPE or unigram), joint or per language."""

import logging
import shutil
from pathlib import Path

import sentencepiece as spm

from nmt.atomic import atomic_path
from nmt.config import SubwordConfig
from nmt.errors import DataError
from nmt.vocab import BT_TAG, SPECIAL_IDS

log = logging.getLogger(__name__)


def _train_one(inputs: list[Path], model_out: Path, config: SubwordConfig, threads: int) -> None:
    """Train one sentencepiece model on ``inputs`` and write it atomically to ``model_out``.

    The trainer writes the model to an open file (``model_writer``) rather than to ``{prefix}.model``
    and ``{prefix}.vocab``, so the one temp file of :func:`nmt.atomic.atomic_path` is all there is.
    """
    for path in inputs:
        if not Path(path).is_file() or Path(path).stat().st_size == 0:
            raise DataError(f"{path}: subword training input is missing or empty")
    spm.set_random_generator_seed(config.seed)
    with atomic_path(model_out) as tmp, open(tmp, "wb") as model_writer:
        spm.SentencePieceTrainer.train(
            input=[str(p) for p in inputs],
            model_writer=model_writer,
            model_type=config.model_type,
            vocab_size=config.vocab_size,
            character_coverage=config.character_coverage,
            input_sentence_size=config.input_sentence_size,
            shuffle_input_sentence=True,
            # A small corpus cannot always fill the vocabulary; take what it gives rather than fail.
            hard_vocab_limit=False,
            num_threads=max(1, threads),
            minloglevel=2,
            user_defined_symbols=[BT_TAG],
            **SPECIAL_IDS,
        )
    log.info("trained %s model %s (%d pieces)", config.model_type, model_out, len(load_subword(model_out)))


def train_subword(
    src_inputs: list[Path],
    trg_inputs: list[Path],
    src_model: Path,
    trg_model: Path,
    config: SubwordConfig,
    threads: int = 1,
) -> None:
    """Learn the source and target subword models.

    With ``config.joint`` one model is learned on both sides and written to both paths, so
    that later stages always find one model per language.

    :param src_inputs: cleaned source-side training files
    :param trg_inputs: cleaned target-side training files
    :param src_model: output path of the source model (``.model``)
    :param trg_model: output path of the target model
    :param config: subword settings
    :param threads: sentencepiece trainer threads
    """
    src_model, trg_model = Path(src_model), Path(trg_model)
    if config.joint:
        _train_one([*src_inputs, *trg_inputs], src_model, config, threads)
        with atomic_path(trg_model) as tmp:
            shutil.copyfile(src_model, tmp)
    else:
        _train_one(list(src_inputs), src_model, config, threads)
        _train_one(list(trg_inputs), trg_model, config, threads)


def load_subword(path: str | Path) -> spm.SentencePieceProcessor:
    """Load a sentencepiece model, checking that it uses our special ids."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: subword model not found")
    try:
        sp = spm.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as e:
        raise DataError(f"{path}: not a sentencepiece model ({str(e).strip().splitlines()[0]})") from e
    ids = {"pad_id": sp.pad_id(), "unk_id": sp.unk_id(), "bos_id": sp.bos_id(), "eos_id": sp.eos_id()}
    if ids != SPECIAL_IDS:
        expected = " ".join(f"{k}={v}" for k, v in SPECIAL_IDS.items())
        raise DataError(
            f"{path}: special ids {ids} differ from the expected {SPECIAL_IDS}: learn the model with "
            f"`nmt subword` (or sentencepiece with {expected})"
        )
    return sp
