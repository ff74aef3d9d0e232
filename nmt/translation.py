"""Translate sentences or files with a trained model directory (test sets and back-translation alike)."""

import logging
from pathlib import Path

import sentencepiece as spm
import torch

from nmt.atomic import write_text
from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig
from nmt.data import EOS, pad, read_lines
from nmt.errors import DataError
from nmt.model import DecodingModel, Seq2Seq, model_from_spec
from nmt.search import beam_search, greedy_search, sample_search
from nmt.subword import load_subword

log = logging.getLogger(__name__)

# Files of a model directory written by nmt.training.train and read here.
MODEL_FILE, SRC_SPM, TRG_SPM = "model.pt", "src.model", "trg.model"


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


def grad_scaler(device: torch.device, bf16: str = "auto") -> torch.amp.GradScaler:
    """Loss scaling for float16 training (its gradients underflow without); a pass-through otherwise."""
    return torch.amp.GradScaler("cuda", enabled=mixed_precision(device, bf16) == torch.float16)


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
