"""sacrebleu metrics with signatures, and the one-line errors of the scoring step."""

import json
import logging

import pytest
from conftest import assert_one_line

from nmt.errors import ConfigError, DataError
from nmt.evaluation.metrics import get_metric, score_corpus, score_files, score_metric, write_scores

# (hypotheses, references, BLEU, chrF, TER): identical text, nothing in common, and a known partial case
CASES = [
    (["the cat sat on the mat"], ["the cat sat on the mat"], 100.0, 100.0, 0.0),
    (["xyz qqq"], ["the cat sat on the mat"], 0.0, None, 100.0),
    # n-gram precisions 5/6, 3/5, 2/4, 1/3, brevity penalty 1: BLEU = (5/6*3/5*2/4*1/3)^(1/4) = 0.5373;
    # TER: one substitution in six words
    (["the cat sat on a mat"], ["the cat sat on the mat"], 53.73, None, 16.67),
]


@pytest.mark.parametrize("hyps, refs, bleu, chrf, ter", CASES)
def test_score_corpus(hyps, refs, bleu, chrf, ter):
    scores = score_corpus(hyps, refs, "en")
    assert scores["bleu"]["score"] == pytest.approx(bleu, abs=0.01)
    assert scores["ter"]["score"] == pytest.approx(ter, abs=0.01)
    if chrf is not None:
        assert scores["chrf"]["score"] == pytest.approx(chrf, abs=0.01)
    assert scores["bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert "chrF2" in scores["chrf"]["signature"] or "nc:6" in scores["chrf"]["signature"]


def test_bleu_tokenizer_follows_the_target_language():
    assert "tok:zh" in score_corpus(["我爱你"], ["我爱你"], "zh")["bleu"]["signature"]


@pytest.mark.parametrize("trg_lang", ["german", "German", "DE", "de-DE", "zh_TW", "1"])
def test_a_target_language_that_is_no_code_is_one_line(trg_lang):
    """sacreBLEU would score a name it does not know with its default tokenizer (13a), silently."""
    with pytest.raises(ConfigError) as excinfo:
        score_corpus(["我爱你"], ["我爱你"], trg_lang)
    assert_one_line(excinfo, f"target language {trg_lang!r} is not a language code such as 'de', 'zh' or 'ja'")


@pytest.mark.parametrize("trg_lang, tokenizer", [("", "13a"), ("de", "13a"), ("fil", "13a"), ("zh", "zh")])
def test_language_codes_pick_the_tokenizer(trg_lang, tokenizer):
    assert f"tok:{tokenizer}|" in score_corpus(["我爱你"], ["我爱你"], trg_lang)["bleu"]["signature"]


@pytest.mark.parametrize(
    ("trg_lang", "hyp", "ref", "ter"),
    [
        ("zh", "我今天很高兴见到你们大家", "我今天很开心见到你们大家", 16.67),  # 2 of 12 characters
        ("ja", "今日はとても良い天気ですね。", "今日はとても悪い天気ですね。", 11.11),  # 1 of 9 after tercom's split
        ("de", "Ein Hund läuft über die Wiese", "Ein Hund rennt über die Wiese", 16.67),  # 1 of 6 words
    ],
)
def test_ter_counts_characters_of_chinese_and_japanese(trg_lang, hyp, ref, ter):
    """Without spaces a sentence is one tercom token, so any difference would be 100% of the edits (Japanese BLEU
    needs sacrebleu[ja], not installed here: TER alone)."""
    assert round(score_metric("ter", [hyp], [ref], trg_lang)[0], 2) == ter


def test_a_tokenizer_without_its_dependencies_is_one_line():
    try:
        import mecab_ko  # noqa: F401

        pytest.skip("the Korean tokenizer's dependencies are installed")
    except ImportError:
        pass
    with pytest.raises(ConfigError) as excinfo:
        get_metric("bleu", "ko")
    assert_one_line(excinfo, "bleu for target language 'ko'")


@pytest.mark.parametrize(
    ("ref", "trg_lang", "warned"),
    [("我爱你。", "", True), ("我爱你。", "zh", False), ("今日は良い天気です", "", True), ("Ein Hund.", "", False)],
)
def test_scoring_chinese_or_japanese_without_the_language_warns(tmp_path, caplog, ref, trg_lang, warned):
    (tmp_path / "hyp").write_text(f"{ref}\n", encoding="utf-8")
    (tmp_path / "ref").write_text(f"{ref}\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="nmt"):
        score_files(tmp_path / "hyp", tmp_path / "ref", trg_lang)
    expected = [f"{tmp_path / 'ref'} is mostly Chinese or Japanese characters, but no target language was given"]
    assert [r.getMessage()[: len(expected[0])] for r in caplog.records] == (expected if warned else [])


def test_line_count_mismatch_names_both_files(tmp_path):
    (tmp_path / "hyp.de").write_text("a\nb\n")
    (tmp_path / "ref.de").write_text("a\n")
    with pytest.raises(DataError, match=r"hyp.de has 2 lines but .*ref.de has 1"):
        score_files(tmp_path / "hyp.de", tmp_path / "ref.de")


def test_write_scores_record(tmp_path):
    (tmp_path / "hyp.de").write_text("ein kleiner Hund läuft über die Wiese\n")
    (tmp_path / "ref.de").write_text("ein kleiner Hund läuft über die Wiese\n")
    summary = {"parameters": 10, "train_seconds": 1.5, "tokens_per_second": 100.0, "steps": 3, "device": "cpu"}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    system = {"pair": "en-de", "testset": "t", "model": "m", "arch": "transformer", "data": "parallel"}
    write_scores(
        tmp_path / "hyp.de", tmp_path / "ref.de", "de", system, [tmp_path / "summary.json"], tmp_path / "s.json"
    )
    record = json.loads((tmp_path / "s.json").read_text())
    assert record["bleu"] == 100.0 and record["parameters"] == 10 and record["pair"] == "en-de"
    assert record["steps"] == 3 and record["train_seconds"] == 1.5
    assert "bleu_signature" in record and "ter_signature" in record
    # An ensemble of two models: the sizes and training times add up, steps and speed are averaged.
    other = {"parameters": 20, "train_seconds": 2.5, "tokens_per_second": 200.0, "steps": 4, "device": "cpu"}
    (tmp_path / "other.json").write_text(json.dumps(other))
    summaries = [tmp_path / "summary.json", tmp_path / "other.json"]
    record = write_scores(tmp_path / "hyp.de", tmp_path / "ref.de", "de", system, summaries, tmp_path / "e.json")
    assert (record["parameters"], record["train_seconds"], record["steps"], record["tokens_per_second"]) == (
        30,
        4.0,
        3.5,
        150.0,
    )


def test_empty_files_have_nothing_to_score(tmp_path):
    (tmp_path / "hyp.de").write_text("")
    (tmp_path / "ref.de").write_text("")
    with pytest.raises(DataError) as excinfo:
        score_files(tmp_path / "hyp.de", tmp_path / "ref.de")
    assert_one_line(excinfo, tmp_path / "hyp.de", tmp_path / "ref.de", "no sentences to score")
    with pytest.raises(DataError, match="^no sentences to score$"):
        score_corpus([], [])


def test_hypotheses_not_utf8_name_file_and_line(tmp_path):
    (tmp_path / "hyp.de").write_bytes(b"ein Haus\nein gro\xdfes Haus\n")  # Latin-1, not UTF-8
    (tmp_path / "ref.de").write_text("ein Haus\nein großes Haus\n")
    with pytest.raises(DataError) as excinfo:
        score_files(tmp_path / "hyp.de", tmp_path / "ref.de")
    assert_one_line(excinfo, f"{tmp_path / 'hyp.de'}: line 2 is not UTF-8")
