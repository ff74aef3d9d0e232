"""Translate sentences or files with a trained model directory (test sets and back-translation alike)."""

import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

import sentencepiece as spm
import torch

from nmt.atomic import atomic_text, write_text
from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig, ModelMeta
from nmt.data import EOS, pad
from nmt.errors import DataError, NmtError
from nmt.model import DecodingModel, Seq2Seq, model_from_spec
from nmt.progress import LOG_EVERY, Progress, count_lines
from nmt.search import beam_search, beam_search_nbest, greedy_search, sample_search
from nmt.subword import load_subword

log = logging.getLogger(__name__)

# Files of a model directory written by nmt.training.train and read here.
MODEL_FILE, SRC_SPM, TRG_SPM, META_FILE = "model.pt", "src.model", "trg.model", "meta.json"
# Lines sorted by length and translated together: memory stays bounded on inputs of any size.
CHUNK_LINES = 10_000
# Bad lines named one by one in warnings; the rest are counted.
MAX_WARNINGS = 10


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


def position_limit(model: DecodingModel) -> int | None:
    """The longest sequence (source with EOS, or output with EOS) the model can represent.

    That is ``max_positions`` for the Transformer and ConvS2S (the smallest one in an ensemble);
    an RNN has no limit (None).
    """
    members = getattr(model, "members", [model])
    limits = [m.spec["config"]["max_positions"] for m in members if "max_positions" in m.spec["config"]]
    return min(limits, default=None)


def read_source(stream: IO[bytes], name: str) -> Iterator[str]:
    """The lines of a UTF-8 byte stream without their line ends (LF or CRLF).

    Undecodable bytes become U+FFFD, with a warning naming the line (the first
    :data:`MAX_WARNINGS` lines) and a count at the end, so that every line still gets its output line.
    """
    bad: list[int] = []
    for number, raw in enumerate(stream, 1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad.append(number)
            if len(bad) <= MAX_WARNINGS:
                log.warning("%s line %d: not UTF-8 (%s), bad bytes replaced by U+FFFD", name, number, e.reason)
            yield raw.decode("utf-8", errors="replace")
    if len(bad) > 1:
        log.warning("%s: %d lines not UTF-8, translated with bad bytes replaced: lines %s", name, len(bad),
                    _some(bad))  # fmt: skip


def _some(numbers: list[int]) -> str:
    """``1, 5, 9`` or ``1, 5, 9, ... (12 in all)``: line numbers for a warning of bounded length."""
    shown = ", ".join(map(str, numbers[:MAX_WARNINGS]))
    return shown if len(numbers) <= MAX_WARNINGS else f"{shown}, ... ({len(numbers)} in all)"


def encode_sources(
    sp: spm.SentencePieceProcessor, lines: list[str], limit: int | None, name: str, first_line: int
) -> list[list[int]]:
    """Subword ids of ``lines`` with EOS, each cut to ``limit`` ids (EOS kept) with a warning naming the line."""
    ids = [p + [EOS] for p in sp.encode(lines)]
    if limit is None:
        return ids
    long = [i for i, x in enumerate(ids) if len(x) > limit]
    for i in long[:MAX_WARNINGS]:
        log.warning("%s line %d: %d subwords, cut to the model's limit of %d", name, first_line + i, len(ids[i]), limit)
    if len(long) > 1:
        log.warning("%s: %d lines longer than the model's limit of %d subwords were cut: lines %s", name, len(long),
                    limit, _some([first_line + i for i in long]))  # fmt: skip
    for i in long:
        ids[i] = ids[i][: limit - 1] + [EOS]
    return ids


def length_limits(src_len: int, config: DecodeConfig, limit: int | None) -> tuple[float, int]:
    """``(a, b)`` of the output limit ``a * S + b`` for a source of ``src_len`` ids, clamped to ``limit``.

    Output positions run up to the limit, so ``a * S + b`` may not pass ``max_positions``; where it
    would, ``(0, limit)`` is the clamped limit (a 700-word line must not end the file in an error).
    """
    if limit is not None and config.max_len_a * src_len + config.max_len_b > limit:
        return 0.0, limit
    return config.max_len_a, config.max_len_b


def _batches(ids: list[list[int]], config: DecodeConfig, limit: int | None) -> Iterator[tuple[list[int], float, int]]:
    """Batches of line indices (the non-empty lines, sorted by length) with the ``(a, b)`` of their output limit."""
    order = sorted((i for i in range(len(ids)) if len(ids[i]) > 1), key=lambda i: len(ids[i]))
    for start in range(0, len(order), config.batch_size):
        batch = order[start : start + config.batch_size]
        # A clamped limit holds for the longest sentences only: give them batches of their own.
        groups = itertools.groupby(batch, key=lambda i: length_limits(len(ids[i]), config, limit))
        for (max_len_a, max_len_b), chunk in groups:
            yield list(chunk), max_len_a, max_len_b


@torch.no_grad()
def translate_lines(
    model: DecodingModel,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    lines: list[str],
    config: DecodeConfig,
    device: torch.device,
    bf16: str = "auto",
    name: str = "input",
    first_line: int = 1,
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Translate plain-text ``lines`` into detokenized plain text, one output line per input line, in order.

    ``model`` is a :class:`~nmt.model.Seq2Seq` or an :class:`~nmt.ensemble.Ensemble` of them.

    Policies: an empty (or all-whitespace) line gives an empty line without running the model; a
    line longer than the model's :func:`position_limit` is cut to it, with a warning naming the line
    (``name`` and ``first_line`` number the lines in warnings).

    Sentences are sorted by length so that each batch holds similar lengths (little padding).
    Sampling draws from a generator seeded with ``config.seed``, so a file translates the same way twice.

    :param progress: called with the number of lines done after each batch (e.g. :meth:`nmt.progress.Progress.update`)
    """
    was_training = model.training
    model.eval()
    limit = position_limit(model)
    ids = encode_sources(src_sp, lines, limit, name, first_line)
    hyps: list[str] = [""] * len(ids)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    if progress:
        progress(sum(len(x) <= 1 for x in ids))  # the empty lines
    for chunk, max_len_a, max_len_b in _batches(ids, config, limit):
        src = pad([ids[i] for i in chunk]).to(device)
        with autocast(device, bf16):
            if config.method == "greedy":
                out = greedy_search(model, src, max_len_a, max_len_b)
            elif config.method == "sample":
                out = sample_search(model, src, config.sampling_topk, generator, max_len_a, max_len_b)
            else:
                out = beam_search(model, src, config.beam_size, config.length_penalty, max_len_a, max_len_b)
        for i, hyp in zip(chunk, out, strict=True):
            hyps[i] = trg_sp.decode(hyp)
        if progress:
            progress(len(chunk))
    model.train(was_training)
    return hyps


@torch.no_grad()
def translate_nbest(
    model: DecodingModel,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    lines: list[str],
    config: DecodeConfig,
    device: torch.device,
    nbest: int,
    bf16: str = "auto",
    name: str = "input",
    first_line: int = 1,
) -> list[list[tuple[str, float, float]]]:
    """The ``nbest`` best beam search translations of each line as ``(hyp, score, logprob)``, best first.

    ``score`` is what the beam ranks by: ``logprob`` (the sum of the log-probabilities of the
    output's subwords and EOS) divided by the length penalty. An empty line gives one entry
    ``("", 0.0, 0.0)``; otherwise the policies of :func:`translate_lines`.
    """
    was_training = model.training
    model.eval()
    limit = position_limit(model)
    ids = encode_sources(src_sp, lines, limit, name, first_line)
    result: list[list[tuple[str, float, float]]] = [[("", 0.0, 0.0)] for _ in ids]
    for chunk, max_len_a, max_len_b in _batches(ids, config, limit):
        src = pad([ids[i] for i in chunk]).to(device)
        with autocast(device, bf16):
            out = beam_search_nbest(model, src, config.beam_size, config.length_penalty, max_len_a, max_len_b,
                                    nbest=nbest)  # fmt: skip
        for i, hyps in zip(chunk, out, strict=True):
            result[i] = [(trg_sp.decode(h.ids), h.score, h.logprob) for h in hyps]
    model.train(was_training)
    return result


def translate_windows(
    model: DecodingModel,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    lines: Iterable[str],
    config: DecodeConfig,
    device: torch.device,
    name: str = "input",
    window: int = CHUNK_LINES,
    bf16: str = "auto",
    nbest: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list]:
    """Translate ``lines`` of any number ``window`` lines at a time (bounded memory), as they arrive.

    Each window is read, sorted by length, translated and yielded as a list in input order: of
    strings (:func:`translate_lines`), or with ``nbest`` of n-best lists (:func:`translate_nbest`).
    A window of 1 answers every line before the next one is read (interactive use through a pipe).

    :param progress: passed on to :func:`translate_lines` (lines done after each batch)
    """
    lines = iter(lines)
    first_line = 1
    while chunk := list(itertools.islice(lines, window)):
        if nbest is None:
            yield translate_lines(model, src_sp, trg_sp, chunk, config, device, bf16, name, first_line, progress)
        else:
            yield translate_nbest(model, src_sp, trg_sp, chunk, config, device, nbest, bf16, name, first_line)
        first_line += len(chunk)


def translate_stream(
    model: DecodingModel,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    lines: Iterable[str],
    config: DecodeConfig,
    device: torch.device,
    name: str = "input",
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """:func:`translate_lines` over ``lines`` of any number, :data:`CHUNK_LINES` at a time (bounded memory)."""
    for hyps in translate_windows(model, src_sp, trg_sp, lines, config, device, name, progress=progress):
        yield from hyps


def check_source(path: str | Path) -> Path:
    """``path`` as a :class:`Path` if it is a file; else a :class:`DataError` saying what it is."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {'is a directory, not a file' if path.is_dir() else 'file not found'}")
    return path


def translate_file(
    model_dirs: str | Path | list[str | Path],
    src_path: str | Path,
    hyp_path: str | Path,
    config: DecodeConfig,
    device: str = "auto",
    progress_every: float = LOG_EVERY,
) -> int:
    """Translate ``src_path`` line by line into ``hyp_path`` (written atomically); returns the line count.

    The output has one line per input line, with the policies of :func:`read_source` (bytes that are
    not UTF-8) and :func:`translate_lines` (empty and overlong lines).

    :param model_dirs: a model directory, or several to decode with their ensemble
    :param progress_every: seconds between progress log lines when stderr is not a terminal (:class:`Progress`)
    """
    from nmt.ensemble import load_ensemble  # nmt.ensemble builds on load_model above

    src_path = check_source(src_path)
    dev = get_device(device)
    model_dirs = [model_dirs] if isinstance(model_dirs, (str, Path)) else list(model_dirs)
    model, src_sp, trg_sp = load_ensemble(model_dirs, dev)
    log.info(
        "translating %s with %s (%s, %d model%s)",
        src_path, config, dev, len(model_dirs), "s" if len(model_dirs) > 1 else "",
    )  # fmt: skip
    n = 0
    with (
        open(src_path, "rb") as src,
        atomic_text(hyp_path) as out,
        Progress(f"translating {src_path}", count_lines(src_path), "lines", every=progress_every) as progress,
    ):
        lines = read_source(src, str(src_path))
        for hyp in translate_stream(model, src_sp, trg_sp, lines, config, dev, str(src_path), progress.update):
            out.write(hyp + "\n")
            n += 1
    if n == 0:
        log.warning("%s: empty, nothing to translate", src_path)
    return n


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


def normalize_input(model_dir: str | Path, lines: Iterable[str]) -> Iterable[str]:
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
    return map(normalizer, lines)  # lazily: the input may be a stream
