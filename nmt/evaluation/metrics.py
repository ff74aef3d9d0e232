"""Corpus-level BLEU, chrF and TER with sacrebleu, each with its signature."""

import json
import logging
import re
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from nmt.atomic import read_lines, write_text
from nmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# An ISO 639 code as sacreBLEU's test sets write them (every one of them is two or three lowercase letters).
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")

# Target languages written without spaces between words. TER splits them into characters (sacreBLEU's tercom
# tokenizer does so only with its normalization on): as one token per sentence, any edit would cost 100%.
UNSPACED = {"zh", "ja"}
# Han characters and kana: a reference mostly of them wants the zh or ja tokenizer.
HAN_OR_KANA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# name -> factory(trg_lang); BLEU picks its tokenizer from the target language (e.g. zh, ja).
METRICS = {
    "bleu": lambda trg_lang: BLEU(trg_lang=trg_lang),
    "chrf": lambda trg_lang: CHRF(),
    "ter": lambda trg_lang: TER(normalized=trg_lang in UNSPACED, asian_support=trg_lang in UNSPACED),
}
# Metrics whose lower scores are the better ones: TER counts edits.
LOWER_IS_BETTER = {"ter"}


def score_corpus(hyps: list[str], refs: list[str], trg_lang: str = "") -> dict[str, dict[str, Any]]:
    """Score detokenized hypotheses against one reference per sentence.

    :return: ``{metric: {"score": float, "signature": str}}`` for every metric in :data:`METRICS`
    """
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise DataError("no sentences to score")
    result = {}
    for name in METRICS:
        score, signature = score_metric(name, hyps, refs, trg_lang)
        result[name] = {"score": round(score, 2), "signature": signature}
    return result


def score_metric(name: str, hyps: list[str], refs: list[str], trg_lang: str = "") -> tuple[float, str]:
    """One metric of :data:`METRICS` with the test-set settings for ``trg_lang``: (unrounded score, signature).

    Validation during training scores dev BLEU with this too, so model selection and the reported
    test figure use the same tokenizer.
    """
    metric = get_metric(name, trg_lang)
    return metric.corpus_score(hyps, [refs]).score, str(metric.get_signature())


def get_metric(name: str, trg_lang: str = ""):
    """The sacrebleu metric ``name`` for ``trg_lang``; a tokenizer whose extra dependencies are missing
    (BLEU for ja and ko) is a :class:`ConfigError`, and so is a ``trg_lang`` that is no language code: sacreBLEU
    would score it silently with its default tokenizer (13a), not with the language's."""
    if trg_lang and not LANGUAGE_CODE.fullmatch(trg_lang):
        raise ConfigError(
            f"target language {trg_lang!r} is not a language code such as 'de', 'zh' or 'ja' (ISO 639), which "
            "picks the BLEU tokenizer"
        )
    try:
        return METRICS[name](trg_lang)
    except RuntimeError as e:  # sacrebleu's message is several lines; the first one says what is missing
        raise ConfigError(f"{name} for target language {trg_lang!r}: {str(e).strip().splitlines()[0]}") from e


def score_files(hyp_path: str | Path, ref_path: str | Path, trg_lang: str = "") -> dict[str, dict[str, Any]]:
    """:func:`score_corpus` on two plain-text files; differing line counts or empty files name both files."""
    hyps, refs = read_lines(hyp_path), read_lines(ref_path)
    if len(hyps) != len(refs):
        raise DataError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
    if not hyps:
        raise DataError(f"{hyp_path} and {ref_path}: no sentences to score (both files are empty)")
    if not trg_lang and is_han_or_kana(refs):
        log.warning(
            "%s is mostly Chinese or Japanese characters, but no target language was given: BLEU's default "
            "tokenizer (13a) and TER do not split them; give the language (nmt score --trg-lang zh or ja)",
            ref_path,
        )
    return score_corpus(hyps, refs, trg_lang)


def is_han_or_kana(lines: list[str]) -> bool:
    """Whether half the non-space characters of ``lines`` are Han characters or kana (see :data:`HAN_OR_KANA`)."""
    chars = sum(len(line) - line.count(" ") for line in lines)
    return sum(len(HAN_OR_KANA.findall(line)) for line in lines) * 2 >= max(chars, 1)


def write_scores(
    hyp_path: str | Path,
    ref_path: str | Path,
    trg_lang: str,
    system: dict[str, Any],
    training_summaries: list[str | Path],
    out_path: str | Path,
    tok_ref_path: str | Path | None = None,
) -> dict[str, Any]:
    """Score a translation and write one flat JSON record for the result table.

    :param system: what identifies the row: pair, model, arch, data, test set, seed
    :param training_summaries: the ``summary.json`` of the model that translated, or of each model of an
        ensemble or a pivot cascade (then parameters and training time are the sums, steps and tokens/s the means,
        and ``models_trained`` their number)
    :param tok_ref_path: the test set's official tokenized reference, if it has one: the record then also has
        ``bleu_lc_tok`` (:mod:`nmt.evaluation.tokenized_bleu`) and its signature
    """
    summaries = [json.loads(Path(f).read_text()) for f in training_summaries]
    record: dict[str, Any] = dict(system)
    for name, value in score_files(hyp_path, ref_path, trg_lang).items():
        record[name] = value["score"]
        record[f"{name}_signature"] = value["signature"]
    if tok_ref_path is not None:
        # Imported here: sacremoses' tokenizer takes a while to import, and dev validation, which imports this
        # module, never needs it.
        from nmt.evaluation.tokenized_bleu import score_tokenized_files

        score, signature = score_tokenized_files(hyp_path, tok_ref_path, trg_lang)
        record["bleu_lc_tok"], record["bleu_lc_tok_signature"] = round(score, 2), signature
    for key in ("parameters", "train_seconds"):
        record[key] = sum(s[key] for s in summaries)
    record["models_trained"] = len(summaries)  # an ensemble's seeds, a pivot cascade's steps
    for key in ("steps", "tokens_per_second"):
        values = [s[key] for s in summaries]
        record[key] = values[0] if len(values) == 1 else round(sum(values) / len(values), 1)
    record["device"] = summaries[0]["device"]
    write_text(out_path, json.dumps(record, indent=2))
    return record
