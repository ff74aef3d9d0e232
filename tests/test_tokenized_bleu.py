"""BLEU as a test set's literature counts it: hypotheses lowercased and Moses-tokenized as the official tokenized
references were made, scored as multi-bleu.perl -lc scores them."""

import gzip
import json

import pytest
from conftest import MIRROR, assert_one_line

from nmt.errors import DataError
from nmt.evaluation.metrics import write_scores
from nmt.evaluation.tokenized_bleu import score_tokenized_bleu, score_tokenized_files, tokenize_like_reference

TASK1 = MIRROR / "raw.githubusercontent.com/multi30k/dataset/master/data/task1"
needs_mirror = pytest.mark.skipif(not (TASK1 / "tok").is_dir(), reason=f"offline mirror {MIRROR} not found")

# (language, detokenized sentence, the line the official Multi30k files have for it)
TOKENIZED = [
    # lowercased; punctuation split off; hyphenated words kept whole (no -a)
    ("de", "Ein Boston Terrier läuft über saftig-grünes Gras.", "ein boston terrier läuft über saftig-grünes gras ."),
    # German quotes normalized to ", escaped as tokenizer.perl does, the full stop moved out of the closing quote
    ("de", "Auf dem Schild steht: „Come on now.“", "auf dem schild steht : &quot; come on now &quot; ."),
    # the French elision keeps its apostrophe, escaped
    ("fr", "L'homme qui s'appelle Jean.", "l&apos; homme qui s&apos; appelle jean ."),
    ("en", "A man's hat.", "a man &apos;s hat ."),
]


@pytest.mark.parametrize("lang, line, official", TOKENIZED)
def test_hypotheses_are_tokenized_as_the_official_references(lang, line, official):
    assert list(tokenize_like_reference([line], lang)) == [official]


# (hypotheses, tokenized references, BLEU): lowercased before counting, no smoothing (as multi-bleu.perl)
CASES = [
    (["The cat sat on the mat."], ["the cat sat on the mat ."], 100.0),
    # n-gram precisions 5/6, 3/5, 2/4, 1/3, brevity penalty 1: BLEU = (5/6*3/5*2/4*1/3)^(1/4) = 0.5373
    (["The Cat sat on a mat"], ["the cat sat on the mat"], 53.73),
    # no 4-gram in common: multi-bleu.perl gives 0, where sacreBLEU's default (exp) smoothing would not
    (["the cat sat on a dog"], ["the cat on the mat"], 0.0),
]


@pytest.mark.parametrize("hyps, tok_refs, bleu", CASES)
def test_bleu_counts_lowercased_whitespace_tokens_without_smoothing(hyps, tok_refs, bleu):
    score, signature = score_tokenized_bleu(hyps, tok_refs, "en")
    assert score == pytest.approx(bleu, abs=0.01)
    assert signature.startswith("nrefs:1|case:lc|eff:no|tok:none|smooth:none|version:")


@needs_mirror
def test_the_raw_test2016_reference_scores_100_against_the_official_tokenized_one():
    """Every line of the raw German test2016 reference, tokenized, equals its official line (docs/results.md gives
    the share for the other files)."""
    raw = gzip.open(TASK1 / "raw/test_2016_flickr.de.gz", "rt", encoding="utf-8").read().splitlines()
    official = (TASK1 / "tok/test_2016_flickr.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()
    assert list(tokenize_like_reference(iter(raw), "de")) == official
    assert score_tokenized_bleu(raw, official, "de")[0] == pytest.approx(100.0)


def test_write_scores_adds_bleu_lc_tok_only_with_a_tokenized_reference(tmp_path):
    (tmp_path / "hyp.de").write_text("Ein Hund läuft über die Wiese.\nZwei Männer.\n")
    (tmp_path / "ref.de").write_text("Ein kleiner Hund läuft über die Wiese.\nZwei Männer.\n")
    (tmp_path / "tok.de").write_text("ein hund läuft über die wiese .\nzwei männer .\n")
    summary = {"parameters": 10, "train_seconds": 1.5, "tokens_per_second": 100.0, "steps": 3, "device": "cpu"}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    args = (tmp_path / "hyp.de", tmp_path / "ref.de", "de", {"pair": "en-de"}, [tmp_path / "summary.json"])
    record = write_scores(*args, tmp_path / "s.json", tok_ref_path=tmp_path / "tok.de")
    assert record["bleu_lc_tok"] == 100.0 and record["bleu"] < 100
    assert "tok:none" in record["bleu_lc_tok_signature"]
    assert json.loads((tmp_path / "s.json").read_text()) == record
    assert not any(key.startswith("bleu_lc_tok") for key in write_scores(*args, tmp_path / "plain.json"))


def test_a_tokenized_reference_of_another_length_names_both_files(tmp_path):
    (tmp_path / "hyp.de").write_text("ein hund\nzwei\n")
    (tmp_path / "tok.de").write_text("ein hund\n")
    with pytest.raises(DataError) as excinfo:
        score_tokenized_files(tmp_path / "hyp.de", tmp_path / "tok.de", "de")
    assert_one_line(excinfo, "hyp.de has 2 lines", "tok.de has 1")
