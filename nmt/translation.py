"""Translate sentences or files with a trained model directory (test sets and back-translation alike)."""

import json
import logging
from pathlib import Path

import sentencepiece as spm
import torch

from nmt.atomic import write_text
from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig, ModelMeta
from nmt.data import EOS, pad, read_lines
from nmt.errors import DataError
from nmt.model import DecodingModel, Seq2Seq, model_from_spec
from nmt.search import beam_search, greedy_search, sample_search
from nmt.subword import load_subword

log = logging.getLogger(__name__)

# Files of a model directory written by nmt.training.train and read here.
MODEL_FILE, SRC_SPM, TRG_SPM, META_FILE = "model.pt", "src.model", "trg.model", "meta.json"


def get_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DataError("device 'cuda' was requested but no CUDA device is available")
    return torch.device(name)


def autocast(device: torch.device, bf16: str = "auto"):
    """bf16 autocast context: on by default on CUDA, opt-in on CPU (``bf16: on``)."""
    enabled = bf16 == "on" or (bf16 == "auto" and device.type == "cuda")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def load_model(
    model_dir: str | Path, device: torch.device
) -> tuple[Seq2Seq, spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """Load the model and its source/target subword models from ``model_dir``."""
    model_dir = Path(model_dir)
    ckpt = load_checkpoint(model_dir / MODEL_FILE, map_location=device)
    model = model_from_spec(ckpt["spec"])
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    return model, load_subword(model_dir / SRC_SPM), load_subword(model_dir / TRG_SPM)


@torch.no_grad()
def translate_lines(
    model: DecodingModel,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    lines: list[str],
    config: DecodeConfig,
    device: torch.device,
    bf16: str = "auto",
) -> list[str]:
    """Translate plain-text ``lines`` into detokenized plain text, in input order.

    ``model`` is a :class:`~nmt.model.Seq2Seq` or an :class:`~nmt.ensemble.Ensemble` of them.

    Sentences are sorted by length so that each batch holds similar lengths (little padding).
    Sampling draws from a generator seeded with ``config.seed``, so a file translates the same way twice.
    """
    was_training = model.training
    model.eval()
    ids = [p + [EOS] for p in src_sp.encode(lines)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    hyps: list[str] = [""] * len(ids)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    for start in range(0, len(order), config.batch_size):
        chunk = order[start : start + config.batch_size]
        src = pad([ids[i] for i in chunk]).to(device)
        with autocast(device, bf16):
            if config.method == "greedy":
                out = greedy_search(model, src, config.max_len_a, config.max_len_b)
            elif config.method == "sample":
                out = sample_search(model, src, config.sampling_topk, generator, config.max_len_a, config.max_len_b)
            else:
                out = beam_search(
                    model, src, config.beam_size, config.length_penalty, config.max_len_a, config.max_len_b
                )
        for i, hyp in zip(chunk, out, strict=True):
            hyps[i] = trg_sp.decode(hyp)
    model.train(was_training)
    return hyps


def translate_file(
    model_dirs: str | Path | list[str | Path],
    src_path: str | Path,
    hyp_path: str | Path,
    config: DecodeConfig,
    device: str = "auto",
) -> int:
    """Translate ``src_path`` line by line into ``hyp_path`` (written atomically); returns the line count.

    :param model_dirs: a model directory, or several to decode with their ensemble
    """
    from nmt.ensemble import load_ensemble  # nmt.ensemble builds on load_model above

    dev = get_device(device)
    model_dirs = [model_dirs] if isinstance(model_dirs, (str, Path)) else list(model_dirs)
    model, src_sp, trg_sp = load_ensemble(model_dirs, dev)
    lines = read_lines(src_path)
    log.info(
        "translating %d lines of %s with %s (%s, %d model%s)",
        len(lines), src_path, config, dev, len(model_dirs), "s" if len(model_dirs) > 1 else "",
    )  # fmt: skip
    hyps = translate_lines(model, src_sp, trg_sp, lines, config, dev)
    write_text(hyp_path, "".join(h + "\n" for h in hyps))
    return len(hyps)


def write_meta(model_dir: str | Path, meta: ModelMeta | None) -> dict:
    """Write ``model_dir/meta.json``: what translation must repeat of the data preparation.

    ``source_normalization`` is what cleaning applied to the training sources (None when the model
    was trained outside the workflow, without ``meta``); ``bt_tag`` the back-translation tag
    convention; ``subword`` the sha256 of both subword models, which fine-tuning checks.

    :return: the written dict
    """
    from nmt.download import hash_file
    from nmt.subword import BT_TAG

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


def normalize_input(model_dir: str | Path, lines: list[str]) -> list[str]:
    """Normalize source ``lines`` as cleaning normalized the training sources of ``model_dir`` (its meta.json).

    Lines stay as they are for a model directory without a recorded normalization.
    """
    from nmt.filters import Normalizer

    path = Path(model_dir) / META_FILE
    if not path.is_file():
        log.warning("%s: not found, so the input is not normalized like the training data", path)
        return lines
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))["source_normalization"]
        if settings is None:
            return lines
        normalizer = Normalizer(settings["lang"], settings["moses_punctuation"])
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a model meta file ({type(e).__name__}: {e})") from None
    return [normalizer(line) for line in lines]
