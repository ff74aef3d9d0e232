"""BLEU as a test set's literature counts it: lowercased, Moses-tokenized text against its official tokenized reference.

Papers on Multi30k (and on many older test sets) report multi-bleu.perl on lowercased, punctuation-normalized,
tokenized text, scored against the ``*.lc.norm.tok.*`` files the dataset ships. Cased sacreBLEU on detokenized text
gives other figures, so a table that is to be held against those papers needs both.
How closely :func:`tokenize_like_reference` reproduces the official files: docs/results.md.
"""

from collections.abc import Iterable, Iterator
from pathlib import Path

from sacrebleu.metrics import BLEU
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from nmt.atomic import read_lines
from nmt.errors import DataError


def tokenize_like_reference(lines: Iterable[str], lang: str) -> Iterator[str]:
    """Lowercase, punctuation-normalize and Moses-tokenize each line, as Moses' ``lowercase.perl |
    normalize-punctuation.perl -l LANG | tokenizer.perl -l LANG`` made the official Multi30k references.

    The tokenizer escapes XML specials (``&apos;``, ``&quot;``) as tokenizer.perl does by default, and splits no
    hyphens (no ``-a``): the official files keep both so. Each line is normalized with its line end, as the Perl
    script reads it: its rule that moves a full stop out of closing quotes (``."`` to ``".``, in every language but
    English) matches only before another character, which a sentence's last quote lacks without the line end.

    :param lines: detokenized sentences, one per item (an iterator is read lazily)
    :param lang: the language code, which selects the normalizer's and tokenizer's rules (French quotes, German
        nonbreaking prefixes)
    :return: the tokenized lines, in order
    """
    normalizer = MosesPunctNormalizer(lang=lang)
    tokenizer = MosesTokenizer(lang=lang)
    for line in lines:
        normalized = normalizer.normalize(line.lower() + "\n")
        yield tokenizer.tokenize(normalized, escape=True, aggressive_dash_splits=False, return_str=True)


def get_tokenized_bleu() -> BLEU:
    """BLEU on whitespace tokens of lowercased text without smoothing: what ``multi-bleu.perl -lc`` computes.

    ``force`` keeps sacrebleu from warning that the input looks tokenized: here it is meant to be.
    """
    return BLEU(tokenize="none", lowercase=True, smooth_method="none", force=True)


def score_tokenized_bleu(hyps: Iterable[str], tok_refs: list[str], lang: str) -> tuple[float, str]:
    """BLEU of detokenized hypotheses, tokenized by :func:`tokenize_like_reference`, against tokenized references.

    :param hyps: the detokenized translations
    :param tok_refs: the official tokenized reference, one line per hypothesis
    :param lang: the target language
    :return: (unrounded score, sacrebleu signature)
    """
    tok_hyps = list(tokenize_like_reference(hyps, lang))
    if len(tok_hyps) != len(tok_refs):
        raise DataError(f"{len(tok_hyps)} hypotheses but {len(tok_refs)} tokenized references")
    bleu = get_tokenized_bleu()
    return bleu.corpus_score(tok_hyps, [tok_refs]).score, str(bleu.get_signature())


def score_tokenized_files(hyp_path: str | Path, tok_ref_path: str | Path, lang: str) -> tuple[float, str]:
    """:func:`score_tokenized_bleu` of two plain-text files; differing line counts name both files."""
    hyps, tok_refs = read_lines(hyp_path), read_lines(tok_ref_path)
    if len(hyps) != len(tok_refs):
        raise DataError(
            f"{hyp_path} has {len(hyps)} lines but the tokenized reference {tok_ref_path} has {len(tok_refs)}"
        )
    if not hyps:
        raise DataError(f"{hyp_path} and {tok_ref_path}: no sentences to score (both files are empty)")
    return score_tokenized_bleu(hyps, tok_refs, lang)
