"""The model directory: its files, and the one place that reads and writes them for training, decoding and export.

Training writes it (:func:`write_model`, :func:`write_meta`); translation, ensembles, fine-tuning and the
CTranslate2 export read it (:func:`read_model_file`, :func:`load_model`, :func:`normalize_input`).

torch is imported by the functions that read or write weights, not with the module: a CTranslate2 decoding
process reads the file names and subword models here without loading torch (:mod:`nmt.decoding.translation`).
"""

import json
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sentencepiece as spm

from nmt.atomic import atomic_path, hash_file, write_text
from nmt.data.normalize import Normalizer
from nmt.data.subword import load_subword
from nmt.errors import ConfigError, DataError, NmtError
from nmt.model_config import ModelMeta
from nmt.vocab import BT_TAG, target_tag

if TYPE_CHECKING:
    import torch

    from nmt.models.seq2seq import Seq2Seq

log = logging.getLogger(__name__)

# Files of a model directory.
MODEL_FILE, SRC_SPM, TRG_SPM, META_FILE = "model.pt", "src.model", "trg.model", "meta.json"
SUMMARY_FILE = "summary.json"  # what training records of the model (nmt.training.loop), its arch among it
# CTranslate2's weights, in place of model.pt in an export (nmt export; nmt.decoding.ctranslate2).
EXPORT_FILE = "model.bin"


def read_model_file(model_dir: str | Path, device: "str | torch.device" = "cpu") -> dict[str, Any]:
    """The checkpoint of ``model_dir`` (``spec``: architecture and settings; ``model``: the weights).

    :raises DataError: one line naming the folder if it is not a model directory, saying what one holds (or, for
        a CTranslate2 export, how to translate with it)
    """
    model_dir = Path(model_dir)
    if not (model_dir / MODEL_FILE).is_file() and (model_dir / EXPORT_FILE).is_file():
        raise DataError(
            f"{model_dir}: a CTranslate2 export ({EXPORT_FILE}), not a model directory ({MODEL_FILE}): "
            "translate with it with --runtime ctranslate2"
        )
    if not (model_dir / MODEL_FILE).exists():  # a model.pt that is no file: load_checkpoint names it
        what = "is a file" if model_dir.is_file() else "not found" if not model_dir.exists() else f"has no {MODEL_FILE}"
        found = [str(p) for p in find_model_dirs(model_dir)] if model_dir.is_dir() else []
        hint = f"; model directories inside it: {', '.join(found[:3])}" if found else ""
        hint += f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise DataError(
            f"{model_dir}: {what}; expected a model directory ({MODEL_FILE}, {SRC_SPM}, {TRG_SPM}, {META_FILE}){hint}"
        )
    from nmt.checkpoint import load_checkpoint

    return load_checkpoint(model_dir / MODEL_FILE, map_location=device)


def read_arch(model_dir: str | Path) -> str:
    """The architecture (``transformer``, ``rnn``, ``convs2s``) of the model in ``model_dir``: from the summary.json
    that training writes beside model.pt (no torch needed), else from model.pt; a CTranslate2 export's is the
    Transformer, the one architecture it exports.

    :raises DataError: as :func:`read_model_file`, when the folder holds neither
    """
    model_dir = Path(model_dir)
    if (model_dir / EXPORT_FILE).is_file() and not (model_dir / MODEL_FILE).is_file():
        return "transformer"
    try:
        arch = json.loads((model_dir / SUMMARY_FILE).read_text(encoding="utf-8")).get("arch")
    except (OSError, ValueError, AttributeError):
        arch = None
    return arch if isinstance(arch, str) else read_model_file(model_dir)["spec"]["arch"]


def find_model_dirs(folder: str | Path, depth: int = 5) -> list[Path]:
    """The model directories inside ``folder`` (those holding a model.pt), relative to it and sorted, down to
    ``depth`` levels: from ``results`` to ``results/en-de/transformer/baseline/seed1/model``, a user's ``--model``
    that is a folder or a few too high finds them."""
    folder = Path(folder)
    found = (p.parent for level in range(1, depth + 1) for p in folder.glob("*/" * level + MODEL_FILE))
    return sorted(p.relative_to(folder) for p in found)


def write_model(model_dir: str | Path, checkpoint: dict[str, Any], src_spm: str | Path, trg_spm: str | Path) -> None:
    """Write ``checkpoint`` (``spec`` and ``model``) as ``model_dir/model.pt`` beside copies of both subword models."""
    from nmt.checkpoint import save_checkpoint

    model_dir = Path(model_dir)
    save_checkpoint(model_dir / MODEL_FILE, checkpoint)
    for src, name in ((src_spm, SRC_SPM), (trg_spm, TRG_SPM)):
        with atomic_path(model_dir / name) as tmp:
            shutil.copyfile(src, tmp)


def differing_subword_models(model_dir: str | Path, src_spm: str | Path, trg_spm: str | Path) -> list[str]:
    """The sides (``source``, ``target``) whose subword model in ``model_dir`` differs from ``src_spm``/``trg_spm``."""
    model_dir = Path(model_dir)
    return [
        side
        for side, ours, theirs in (("source", src_spm, model_dir / SRC_SPM), ("target", trg_spm, model_dir / TRG_SPM))
        if not theirs.is_file() or hash_file(ours) != hash_file(theirs)
    ]


def load_model(
    model_dir: str | Path, device: "torch.device"
) -> tuple["Seq2Seq", spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """Load the model and its source/target subword models from ``model_dir``, checking that they fit together: the
    number of pieces, and the sha256 that meta.json recorded when the model was written."""
    from nmt.models.seq2seq import model_from_spec

    model_dir = Path(model_dir)
    path = model_dir / MODEL_FILE
    ckpt = read_model_file(model_dir, device)
    try:
        model = model_from_spec(ckpt["spec"], weights=ckpt["model"])
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
    recorded = (read_meta(model_dir) or {}).get("subword") or {}
    for name in (SRC_SPM, TRG_SPM):
        sha256 = recorded.get(name, {}).get("sha256")
        if sha256 is not None and sha256 != hash_file(model_dir / name):
            raise DataError(
                f"{model_dir / name}: not the subword model {model_dir / META_FILE} records (its sha256 differs): the "
                "subword model belongs to another model"
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
    convention; ``subword`` the sha256 of both subword models, which fine-tuning checks; ``multilingual`` (a
    multilingual model's) its directions and the tag of each target language, which every source starts with
    (:func:`tag_input`), and ``source_normalization.langs`` its source languages.

    :return: the written dict
    """
    model_dir = Path(model_dir)
    record = {
        "src_lang": (meta.src_lang or None) if meta else None,
        "trg_lang": (meta.trg_lang or None) if meta else None,
        "source_normalization": None,
        "bt_tag": {"tag": BT_TAG, "tagged_training_sources": bool(meta and meta.tagged_bt), "tag_inputs": False},
        "subword": {name: {"sha256": hash_file(model_dir / name)} for name in (SRC_SPM, TRG_SPM)},
    }
    if meta is not None:
        record["source_normalization"] = {
            "lang": meta.src_lang or None,
            "unicode": "NFC",
            "moses_punctuation": meta.normalize_punctuation,
            "control_characters": "removed",
            "whitespace": "collapsed",
        }
    if meta is not None and meta.directions:
        pairs = [direction.split("-") for direction in meta.directions]
        record["source_normalization"]["langs"] = sorted({src for src, _ in pairs})
        record["multilingual"] = {
            "directions": list(meta.directions),
            "tags": {trg: target_tag(trg) for trg in sorted({trg for _, trg in pairs})},
            "tag_inputs": True,  # every source starts with the tag of the target language asked for
        }
    write_text(model_dir / META_FILE, json.dumps(record, indent=2) + "\n")
    return record


def check_meta(meta: ModelMeta | None, src_spm: str | Path) -> None:
    """Raise ConfigError, before a multilingual model trains, when the target-language tag of one of ``meta``'s
    directions is no piece of its source subword model: translation could not ask for that language."""
    if meta is None or not meta.directions:
        return
    tags = list(dict.fromkeys(target_tag(direction.split("-")[1]) for direction in meta.directions))
    missing = missing_pieces(src_spm, tags)
    if missing:
        raise ConfigError(
            f"{src_spm}: {', '.join(missing)} of the directions {', '.join(meta.directions)} (the meta) are no pieces "
            "of this source subword model; a multilingual model's subword model holds its target languages' tags"
        )


def missing_pieces(spm_path: str | Path, pieces: list[str]) -> list[str]:
    """The ``pieces`` (tags) that the subword model ``spm_path`` does not have as pieces of their own."""
    sp = load_subword(spm_path)
    return [piece for piece in pieces if sp.piece_to_id(piece) == sp.unk_id()]


def read_meta(model_dir: str | Path) -> dict[str, Any] | None:
    """The meta.json of ``model_dir`` as written by :func:`write_meta`; None where there is none.

    :raises DataError: naming the file if it is not JSON
    """
    path = Path(model_dir) / META_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise DataError(f"{path}: not a model meta file ({type(e).__name__}: {e})") from None


def normalize_input(model_dir: str | Path, lines: Iterable[str], src_lang: str | None = None) -> Iterable[str]:
    """Normalize source ``lines`` as cleaning normalized the training sources of ``model_dir`` (its meta.json), in
    the source language ``src_lang``, which a multilingual model from several source languages needs.

    Lines stay as they are for a model directory without a recorded normalization.

    :raises ConfigError: for a ``src_lang`` the model does not translate from, or none where it has several
    """
    meta = read_meta(model_dir)
    path = Path(model_dir) / META_FILE
    if meta is None:
        log.warning("%s: not found, so the input is not normalized like the training data", path)
        return lines
    try:
        settings = meta["source_normalization"]
        if settings is None:
            return lines
        langs = settings.get("langs") or [settings["lang"]]
        lang = src_lang or (langs[0] if len(langs) == 1 else None)
        if lang not in langs:
            asked = f"not from '{src_lang}'" if src_lang else "give the source language (--src-lang)"
            raise ConfigError(f"{path}: the model translates from {', '.join(langs)}: {asked}")
        normalizer = Normalizer(lang, settings["moses_punctuation"])
    except (KeyError, TypeError) as e:
        raise DataError(f"{path}: not a model meta file ({type(e).__name__}: {e})") from None
    return map(normalizer, lines)  # lazily: the input may be a stream


def tag_input(model_dir: str | Path, lines: Iterable[str], trg_lang: str | None = None) -> Iterable[str]:
    """``lines`` each with :func:`input_tag` first, as a multilingual model's training sources (Johnson et al.
    2017); an empty line stays empty (it is not translated). The lines of a bilingual model stay as they are."""
    return with_tag(lines, input_tag(model_dir, trg_lang))


def with_tag(lines: Iterable[str], tag: str | None) -> Iterable[str]:
    """``lines`` each with ``tag`` first (an empty line stays empty); as they are without one."""
    return lines if tag is None else (f"{tag} {line}" if line.strip() else line for line in lines)


def input_tag(model_dir: str | Path, trg_lang: str | None = None) -> str | None:
    """The tag of the target language ``trg_lang`` that starts every source of the multilingual model ``model_dir``
    (its meta.json's tags); None for a bilingual model.

    :raises ConfigError: naming the meta file for a multilingual model without ``trg_lang`` or without its tag, or a
        bilingual model into another language
    :raises DataError: when the tag is not one piece of the model's source subword model (another model's file)
    """
    meta = read_meta(model_dir) or {}
    tags = (meta.get("multilingual") or {}).get("tags")
    path = Path(model_dir) / META_FILE
    if not tags:
        if trg_lang and meta.get("trg_lang") not in (None, trg_lang):
            raise ConfigError(f"{path}: the model translates into {meta['trg_lang']}, not into '{trg_lang}'")
        return None
    known = ", ".join(f"{lang} {tag}" for lang, tag in tags.items())
    if trg_lang not in tags:
        asked = f"no tag for '{trg_lang}'" if trg_lang else "give the target language (--trg-lang)"
        raise ConfigError(f"{path}: a multilingual model (target languages and tags: {known}): {asked}")
    tag = tags[trg_lang]
    if missing_pieces(Path(model_dir) / SRC_SPM, [tag]):
        raise DataError(f"{Path(model_dir) / SRC_SPM}: the tag {tag} of {path} is no piece of the source subword model")
    return tag
