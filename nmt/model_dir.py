"""A trained model directory: its files, loading it onto a device, its meta.json, and the device's precision.

Training writes the directory (:func:`nmt.training.train`); translation, ensembles and export read it.
"""

import json
import logging
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
import torch

from nmt.atomic import write_text
from nmt.checkpoint import load_checkpoint
from nmt.config import ModelMeta
from nmt.download import hash_file
from nmt.errors import DataError, NmtError
from nmt.model import Seq2Seq, model_from_spec
from nmt.subword import BT_TAG, load_subword

log = logging.getLogger(__name__)

# Files of a model directory written by nmt.training.train.
MODEL_FILE, SRC_SPM, TRG_SPM, META_FILE = "model.pt", "src.model", "trg.model", "meta.json"


def get_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DataError("device 'cuda' was requested but no CUDA device is available")
    return torch.device(name)


def autocast_dtype(device_type: str, bf16: str, bf16_supported: bool) -> torch.dtype | None:
    """The reduced precision of autocast, None for float32.

    ``auto``: bfloat16 on CUDA GPUs that have it (Ampere and later), float16 on older ones (training then
    scales the loss, see :func:`grad_scaler`), float32 on CPU; ``on``: bfloat16 anywhere; ``off``: float32.
    """
    if bf16 == "off" or (bf16 == "auto" and device_type != "cuda"):
        return None
    return torch.bfloat16 if bf16 == "on" or bf16_supported else torch.float16


def mixed_precision(device: torch.device, bf16: str = "auto") -> torch.dtype | None:
    """:func:`autocast_dtype` of this device."""
    return autocast_dtype(device.type, bf16, device.type == "cuda" and torch.cuda.is_bf16_supported())


def autocast(device: torch.device, bf16: str = "auto"):
    """Autocast context of :func:`mixed_precision` (disabled for float32)."""
    dtype = mixed_precision(device, bf16)
    return torch.autocast(device_type=device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def for_decoding(model: torch.nn.Module, device: torch.device, bf16: str = "auto") -> torch.nn.Module:
    """``model`` in eval mode, with bfloat16 weights where :func:`mixed_precision` is bfloat16.

    Autocast casts each weight again at every decoding step (its cast cache lasts one ``with`` block)
    and keeps the activations between layers in float32; bfloat16 weights do neither. Beam search
    over test_2016_flickr with the default Transformer on 2 CPU cores: 11.5 s in float32, 8.3 s under
    autocast, 7.3 s with bfloat16 weights, BLEU 16.85 / 16.93 / 16.83. float16 stays under autocast,
    whose float32 operations guard its narrow range.
    """
    if mixed_precision(device, bf16) == torch.bfloat16:
        model = model.to(torch.bfloat16)
    return model.eval()


def grad_scaler(device: torch.device, bf16: str = "auto") -> torch.amp.GradScaler:
    """Loss scaling for float16 training (its gradients underflow without); a pass-through otherwise."""
    return torch.amp.GradScaler("cuda", enabled=mixed_precision(device, bf16) == torch.float16)


def load_model(
    model_dir: str | Path, device: torch.device
) -> tuple[Seq2Seq, spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """Load the model and its source/target subword models from ``model_dir``, checking that they fit together."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        what = "is a file" if model_dir.exists() else "not found"
        raise DataError(f"{model_dir}: {what}; expected a model directory ({MODEL_FILE}, {SRC_SPM}, {TRG_SPM})")
    path = model_dir / MODEL_FILE
    ckpt = load_checkpoint(path, map_location=device)
    try:
        model = model_from_spec(ckpt["spec"])
        model.load_state_dict(ckpt["model"])
    except (NmtError, KeyError, TypeError, RuntimeError) as e:  # a spec or weights of another program
        raise DataError(f"{path}: weights do not fit the model spec they came with ({_one_line(e)})") from e
    model.to(device).eval()
    src_sp, trg_sp = load_subword(model_dir / SRC_SPM), load_subword(model_dir / TRG_SPM)
    for name, sp, key in ((SRC_SPM, src_sp, "src_vocab"), (TRG_SPM, trg_sp, "trg_vocab")):
        if sp.get_piece_size() != ckpt["spec"][key]:
            raise DataError(
                f"{model_dir / name}: {sp.get_piece_size()} pieces, but {path} was trained with "
                f"{ckpt['spec'][key]}: the subword model belongs to another model"
            )
    return model, src_sp, trg_sp


def _one_line(e: Exception, limit: int = 200) -> str:
    """``e`` as ``Type: message`` on one line of at most about ``limit`` characters."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text if len(text) <= limit else text[:limit] + ' ...'}"


def write_meta(model_dir: str | Path, meta: ModelMeta | None) -> dict:
    """Write ``model_dir/meta.json``: what translation must repeat of the data preparation.

    ``source_normalization`` is what cleaning applied to the training sources (None when the model
    was trained outside the workflow, without ``meta``); ``bt_tag`` the back-translation tag
    convention; ``subword`` the sha256 of both subword models, which fine-tuning checks.

    :return: the written dict
    """
    model_dir = Path(model_dir)
    record = {
        "src_lang": meta.src_lang if meta else None,
        "trg_lang": meta.trg_lang if meta else None,
        "source_normalization": None,
        "bt_tag": {"tag": BT_TAG, "tagged_training_sources": bool(meta and meta.tagged_bt), "tag_inputs": False},
        "subword": {name: {"sha256": hash_file(model_dir / name)} for name in (SRC_SPM, TRG_SPM)},
    }
    if meta is not None:
        record["source_normalization"] = {
            "lang": meta.src_lang,
            "unicode": "NFC",
            "moses_punctuation": meta.normalize_punctuation,
            "control_characters": "removed",
            "whitespace": "collapsed",
        }
    write_text(model_dir / META_FILE, json.dumps(record, indent=2) + "\n")
    return record


def normalize_input(model_dir: str | Path, lines: Iterable[str]) -> Iterable[str]:
    """Normalize source ``lines`` as cleaning normalized the training sources of ``model_dir`` (its meta.json).

    Lines stay as they are for a model directory without a recorded normalization.
    """
    path = Path(model_dir) / META_FILE
    if not path.is_file():
        log.warning("%s: not found, so the input is not normalized like the training data", path)
        return lines
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))["source_normalization"]
        if settings is None:
            return lines
        from nmt.filters import Normalizer  # sacremoses and langid take 0.25 s to load: only when needed

        normalizer = Normalizer(settings["lang"], settings["moses_punctuation"])
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a model meta file ({type(e).__name__}: {e})") from None
    return map(normalizer, lines)  # lazily: the input may be a stream
