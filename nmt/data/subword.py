"""Subword segmentation with sentencepiece (BPE or unigram), joint or per language."""

import io
import logging
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from nmt.atomic import atomic_path
from nmt.config import SubwordConfig
from nmt.errors import ConfigError, DataError, NmtError
from nmt.vocab import BT_TAG, SPECIAL_IDS

log = logging.getLogger(__name__)

# sentencepiece's unigram EM gives each trainer thread a share of the sentences and adds up the shares' float counts,
# so the scores, and with them the order of the pieces, depend on the number of threads: it trains with this fixed
# number (sentencepiece's default), whatever threads the job has. BPE's threads change only its speed.
UNIGRAM_THREADS = 16


def train_subword_model(
    inputs: list[Path],
    model_out: Path,
    config: SubwordConfig,
    threads: int = 1,
    symbols: Iterable[str] = (),
    where: str = "subword",
) -> None:
    """Train one sentencepiece model on ``inputs`` and write it atomically to ``model_out``.

    The back-translation tag and ``symbols`` (a multilingual model's target-language tags,
    :func:`nmt.vocab.target_tag`) are user-defined pieces: always one piece, wherever they stand. ``where``: the
    config path of ``config``, named in errors.

    The trainer writes the model to memory (``model_writer``) rather than to ``{prefix}.model`` and
    ``{prefix}.vocab``; the file gets it without the input paths and thread count (:func:`strip_machine_fields`),
    so the same data and settings give the same bytes (and sha256) on any machine and under any ``--cores``.
    """
    for path in inputs:
        if not Path(path).is_file() or Path(path).stat().st_size == 0:
            raise DataError(f"{path}: subword training input is missing or empty")
    spm.set_random_generator_seed(config.seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            input=[str(p) for p in inputs],
            model_writer=model,
            model_type=config.model_type,
            vocab_size=config.vocab_size,
            character_coverage=config.character_coverage,
            input_sentence_size=config.input_sentence_size,
            shuffle_input_sentence=True,
            # A small corpus cannot always fill the vocabulary; take what it gives rather than fail.
            hard_vocab_limit=False,
            num_threads=UNIGRAM_THREADS if config.model_type == "unigram" else max(1, threads),
            minloglevel=2,
            user_defined_symbols=[BT_TAG, *symbols],
            **SPECIAL_IDS,
        )
    except RuntimeError as e:
        raise training_error(str(e), inputs, config, where) from e
    with atomic_path(model_out) as tmp:
        tmp.write_bytes(strip_machine_fields(model.getvalue()))
    pieces = len(load_subword(model_out))
    log.info("trained %s model %s (%d pieces)", config.model_type, model_out, pieces)
    if pieces < config.vocab_size:
        log.warning("%s.vocab_size: %d asked, the data gave %d pieces, all it has", where, config.vocab_size, pieces)


def training_error(message: str, inputs: list[Path], config: SubwordConfig, where: str) -> NmtError:
    """sentencepiece's error as one line: a vocabulary smaller than the characters it must cover (plus the reserved
    pieces) names ``{where}.vocab_size`` and the smallest size that works; any other names the inputs."""
    too_small = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", message)
    files = ", ".join(str(path) for path in inputs)
    if too_small:
        return ConfigError(
            f"{where}.vocab_size: {too_small[1]} pieces cannot hold the {too_small[2]} that the characters of {files} "
            f"and the reserved pieces need (character_coverage {config.character_coverage}): set at least "
            f"{too_small[2]}, or a lower {where}.character_coverage"
        )
    detail = " ".join(message.split("] ", 1)[-1].split())
    return DataError(f"{files}: sentencepiece could not learn a subword model: {detail}")


def strip_machine_fields(model: bytes) -> bytes:
    """A serialized sentencepiece model without what records the machine that learned it: the paths of the
    training files (``trainer_spec.input``) and the thread count (``trainer_spec.num_threads``).

    :param model: the bytes of a ``.model`` file
    """
    from sentencepiece import sentencepiece_model_pb2  # protobuf: only where models are learned, not loaded

    proto = sentencepiece_model_pb2.ModelProto.FromString(model)
    proto.trainer_spec.ClearField("input")
    proto.trainer_spec.ClearField("num_threads")
    return proto.SerializeToString(deterministic=True)


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
    :param threads: sentencepiece trainer threads (of BPE; unigram always uses :data:`UNIGRAM_THREADS`)
    """
    src_model, trg_model = Path(src_model), Path(trg_model)
    if config.joint:
        train_subword_model([*src_inputs, *trg_inputs], src_model, config, threads)
        with atomic_path(trg_model) as tmp:
            shutil.copyfile(src_model, tmp)
    else:
        train_subword_model(list(src_inputs), src_model, config, threads)
        train_subword_model(list(trg_inputs), trg_model, config, threads)


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
