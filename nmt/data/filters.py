"""The filters of one sentence and of one sentence pair: length, ratio, copies, script and language.

A :class:`SentenceFilter` normalizes a sentence (:mod:`nmt.data.normalize`) and names the filter that drops it, if
any: monolingual cleaning runs one; parallel cleaning runs a :class:`PairFilter`,
which runs the same sentence filters on both sides and then the filters of the pair. Neither holds
state across sentences, so cleaning can run them in worker processes on chunks of a corpus; what
needs the whole corpus (deduplication, decontamination, ``max_pairs``) stays in :mod:`nmt.data.cleaning`.
"""

import logging
import re

import numpy as np
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from nmt.config import CleanConfig
from nmt.data.normalize import Normalizer

log = logging.getLogger(__name__)

# Filter names in the order they are tried; the first that matches drops the sentence, or the pair.
SENTENCE_FILTERS = ("invalid_utf8", "empty", "ansi_code", "too_short", "too_long")
PAIR_FILTERS = (*SENTENCE_FILTERS, "long_token", "ratio", "copy", "alpha", "langid")
# A terminal colour code (SGR, e.g. ``[31m``, ``[1;32m``) whose ESC byte was removed as a control character:
# text copied from a terminal or a log, not a sentence.
ANSI_CODE = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
# What ends a sentence (Latin, Greek, Cyrillic, CJK, Arabic, Devanagari, Armenian, Ethiopic scripts), and the closing
# quotes and brackets that may follow it.
SENTENCE_END = frozenset(".!?…。！？؟۔।॥։።")
CLOSING = "\"'»«”’」』)]）"


def alpha_share(line: str) -> float:
    """Share of letters (Unicode category L*) among the non-space characters of ``line``."""
    chars = "".join(line.split())
    return sum(map(str.isalpha, chars)) / len(chars) if chars else 0.0


def in_sentence_form(line: str) -> bool:
    """Whether ``line`` is written as a sentence: it does not begin with a lowercase letter (scripts without case
    pass) and ends in sentence-final punctuation (:data:`SENTENCE_END`), closing quotes and brackets aside.

    Monolingual text written by crowd workers or scraped from the web has many lines in neither form (a quarter
    of Multi30k task 2's German, almost none of task 1's translations), and back-translation teaches the target
    side of its pairs to the model; what dropping them gave on dev: benchmarks/history.md, "Back-translation
    variants at 1e-3".
    """
    end = line.rstrip(CLOSING)
    return bool(end) and not line[0].islower() and end[-1] in SENTENCE_END


class LanguageCheck:
    """py3langid (Lui and Baldwin 2012; its model ships inside the package) on one language's sentences."""

    def __init__(self, lang: str, threshold: float):
        """
        :param lang: the expected ISO 639-1 code; a language py3langid does not know is not checked
        :param threshold: a sentence is rejected when the identifier gives at least this probability
            to one other language
        """
        self.identifier = LanguageIdentifier.from_pickled_model(MODEL_FILE, norm_probs=True)
        self.lang, self.threshold = lang, threshold
        self.known = lang in self.identifier.nb_classes
        if not self.known:
            log.warning("language identification cannot check '%s' (not among py3langid's languages)", lang)

    def __call__(self, line: str) -> bool:
        """Whether ``line`` may be in the expected language.

        The same decision as ``identifier.classify(line)`` in half the time: a sentence has a few dozen
        of the model's 7,480 features, so the product with the feature weights (7,480 x 97) takes only
        their rows, and the probability (97 x 97 exponentials) is computed only when the most likely
        language is another one. Scores differ from the dense product only in float32 rounding.
        """
        if not self.known:
            return True
        identifier = self.identifier
        features = identifier.instance2fv(line)
        present = np.flatnonzero(features)
        scores = features[present] @ identifier.nb_ptc[present] + identifier.nb_pc
        best = int(np.argmax(scores))
        return identifier.nb_classes[best] == self.lang or identifier.norm_probs(scores)[best] < self.threshold


class SentenceFilter:
    """Normalize a raw sentence and name the first filter of :data:`SENTENCE_FILTERS` that drops it, then
    ``sentence_form`` if asked for (:func:`in_sentence_form`; monolingual text only)."""

    def __init__(self, config: CleanConfig, lang: str, sentence_form: bool = False):
        self.config = config
        self.norm = Normalizer(lang, config.normalize_punctuation)
        self.sentence_form = sentence_form

    def __call__(self, raw: str | None) -> tuple[str | None, str]:
        """
        :param raw: raw sentence, None if it was not valid UTF-8
        :return: (the filter that drops the sentence or None, the normalized sentence)
        """
        if raw is None:
            return "invalid_utf8", ""
        line = self.norm(raw)
        return self.get_drop_reason(line, line.split()), line

    def get_drop_reason(self, line: str, tokens: list[str]) -> str | None:
        """The first filter that drops the normalized ``line`` (split into ``tokens``), or None."""
        return (
            "empty" if not line
            else "ansi_code" if ANSI_CODE.search(line)
            else "too_short" if len(tokens) < self.config.min_length
            else "too_long" if len(tokens) > self.config.max_length
            else "sentence_form" if self.sentence_form and not in_sentence_form(line)
            else None
        )  # fmt: skip


class PairFilter:
    """Normalize a raw sentence pair and name the first filter of :data:`PAIR_FILTERS` that drops it:
    the :class:`SentenceFilter` filters of either side, then those of the pair."""

    def __init__(self, config: CleanConfig, src_lang: str, trg_lang: str):
        self.config = config
        self.src_filter = SentenceFilter(config, src_lang)
        self.trg_filter = SentenceFilter(config, trg_lang)
        self.src_lid = LanguageCheck(src_lang, config.langid_threshold) if config.langid else None
        self.trg_lid = LanguageCheck(trg_lang, config.langid_threshold) if config.langid else None

    def __call__(self, src: str | None, trg: str | None) -> tuple[str | None, str, str]:
        """
        :param src: raw source sentence, None if it was not valid UTF-8
        :param trg: raw target sentence, likewise
        :return: (the filter that drops the pair or None, normalized source, normalized target)
        """
        if src is None or trg is None:
            return "invalid_utf8", "", ""
        src, trg = self.src_filter.norm(src), self.trg_filter.norm(trg)
        return self.get_drop_reason(src, trg), src, trg

    def get_drop_reason(self, src: str, trg: str) -> str | None:
        """The first filter that drops the normalized pair, or None."""
        config = self.config
        src_tokens, trg_tokens = src.split(), trg.split()
        src_reason = self.src_filter.get_drop_reason(src, src_tokens)
        trg_reason = self.trg_filter.get_drop_reason(trg, trg_tokens)
        if src_reason is not None or trg_reason is not None:
            return min(filter(None, (src_reason, trg_reason)), key=SENTENCE_FILTERS.index)
        src_len, trg_len = len(src_tokens), len(trg_tokens)
        if config.max_token_chars is not None and max(map(len, src_tokens + trg_tokens)) > config.max_token_chars:
            return "long_token"
        if max(src_len, trg_len) / min(src_len, trg_len) > config.max_ratio:
            return "ratio"
        if config.drop_copies and src == trg:
            return "copy"
        if config.min_alpha > 0 and min(alpha_share(src), alpha_share(trg)) < config.min_alpha:
            return "alpha"
        if self.src_lid is not None and not (self.src_lid(src) and self.trg_lid(trg)):
            return "langid"
        return None
