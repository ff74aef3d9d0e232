"""nmt.data.synthetic: splitting, degenerate-output filters, tagging and the data mix of synthetic corpora."""

import hashlib
import json
import random
import tracemalloc

import pytest
from conftest import write_lines

from nmt.config import SyntheticConfig
from nmt.data.subword import load_subword
from nmt.data.synthetic import build_synthetic_corpus, get_drop_reason, has_repeated_ngram, split_corpus
from nmt.errors import DataError
from nmt.vocab import BT_TAG


def test_split_corpus_keeps_every_line_in_order(tmp_path):
    lines = [f"satz {i}" for i in range(250)]
    src = write_lines(tmp_path / "mono.de", lines)
    assert split_corpus([src], tmp_path / "parts", 100, "de") == 3
    parts = sorted((tmp_path / "parts").iterdir())
    assert [p.name for p in parts] == ["0000.de", "0001.de", "0002.de"]
    assert [len(p.read_text().splitlines()) for p in parts] == [100, 100, 50]
    assert [line for p in parts for line in p.read_text().splitlines()] == lines
    assert not list(tmp_path.glob(".parts*.tmp"))
    assert split_corpus([src], tmp_path / "parts", 200, "de") == 2  # a new split replaces the old parts
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["0000.de", "0001.de"]


def test_split_empty_file_is_an_error(tmp_path):
    with pytest.raises(DataError, match="empty.de: nothing to split"):
        split_corpus([write_lines(tmp_path / "empty.de", [])], tmp_path / "parts", 10, "de")
    assert not list(tmp_path.glob(".parts*.tmp")) and not (tmp_path / "parts").exists()
    assert not (tmp_path / "parts").exists()


@pytest.mark.parametrize(
    "tokens, n, max_repeats, expected",
    [
        ("a man in a red shirt and a hat".split(), 1, 2, True),  # "a" three times
        ("a man in a red shirt and a hat".split(), 1, 3, False),
        ("the man is the man is the man is".split(), 3, 2, True),
        ("the man is the man is".split(), 3, 2, False),
        ([], 3, 2, False),
    ],
)
def test_has_repeated_ngram(tokens, n, max_repeats, expected):
    assert has_repeated_ngram(tokens, n, max_repeats) == expected


@pytest.mark.parametrize(
    "src, trg, reason",
    [
        ("", "ein Hund", "empty"),
        ("ein Hund", "ein Hund", "copy"),
        ("a dog a dog a dog a dog", "ein Hund rennt", "repeated_ngram"),
        ("a dog", "ein Hund rennt über die große grüne Wiese", "ratio"),
        ("a dog runs", "ein Hund rennt", None),
    ],
)
def test_drop_reasons(src, trg, reason):
    assert get_drop_reason(src, trg, SyntheticConfig(repeat_ngram=2, max_repeats=3)) == reason


def make_parts(tmp_path, n_synthetic=6):
    real_src = write_lines(tmp_path / "real.en", ["a dog", "a cat"])
    real_trg = write_lines(tmp_path / "real.de", ["ein Hund", "eine Katze"])
    hyps = [f"a man {i}" for i in range(n_synthetic)] + [""]  # the last one is degenerate
    monos = [f"ein Mann {i}" for i in range(n_synthetic)] + ["ein leerer Satz"]
    bt_src = [write_lines(tmp_path / "0.en", hyps[:3]), write_lines(tmp_path / "1.en", hyps[3:])]
    bt_trg = [write_lines(tmp_path / "0.de", monos[:3]), write_lines(tmp_path / "1.de", monos[3:])]
    return [real_src], [real_trg], bt_src, bt_trg


def build(tmp_path, config, parts=None, seed=1):
    out = tmp_path / "out"
    report = build_synthetic_corpus(
        *(parts or make_parts(tmp_path)), out / "train.en", out / "train.de", out / "report.json", config, seed=seed
    )
    src, trg = (out / "train.en").read_text().splitlines(), (out / "train.de").read_text().splitlines()
    assert len(src) == len(trg)
    assert json.loads((out / "report.json").read_text()) == report
    return src, trg, report


def test_real_then_filtered_synthetic_pairs(tmp_path):
    src, trg, report = build(tmp_path, SyntheticConfig())
    assert src == ["a dog", "a cat"] + [f"a man {i}" for i in range(6)]
    assert trg == ["ein Hund", "eine Katze"] + [f"ein Mann {i}" for i in range(6)]
    assert report["real_pairs"] == 2 and report["synthetic_pairs"] == 6 and report["synthetic_in"] == 7
    assert report["dropped"]["empty"] == 1


def test_tagging_and_upsampling(tmp_path):
    src, trg, report = build(tmp_path, SyntheticConfig(tagged=True, upsample_real=3))
    assert src[:6] == ["a dog", "a cat"] * 3 and trg[:6] == ["ein Hund", "eine Katze"] * 3
    assert all(line.startswith(f"{BT_TAG} a man ") for line in src[6:])
    assert not any(BT_TAG in line for line in src[:6] + trg)
    assert report["upsample_real"] == 3 and report["tagged"] is True


def test_synthetic_ratio_caps_a_seeded_sample(tmp_path):
    # 2 real pairs x2 upsampled, ratio 1: at most 4 of the 6 synthetic pairs, the same 4 for the same seed.
    config = SyntheticConfig(synthetic_ratio=1.0, upsample_real=2)
    src, trg, report = build(tmp_path, config)
    assert report["synthetic_pairs"] == 4 and report["dropped"]["synthetic_ratio"] == 2
    synthetic = list(zip(src[4:], trg[4:], strict=True))
    assert all(s.replace("a man", "ein Mann") == t for s, t in synthetic), "pairs stay aligned"
    assert build(tmp_path, config)[0] == src
    others = {tuple(build(tmp_path, config, seed=seed)[0]) for seed in range(2, 12)}
    assert len(others) > 1


def test_misaligned_part_names_both_files(tmp_path):
    real_src, real_trg, bt_src, bt_trg = make_parts(tmp_path)
    write_lines(bt_src[1], ["only one line"])
    with pytest.raises(DataError, match=r"1.en has 1 lines but its monolingual part .*1.de has 4"):
        build(tmp_path, SyntheticConfig(), (real_src, real_trg, bt_src, bt_trg))
    assert not (tmp_path / "out" / "train.en").exists()


def test_nothing_left_is_an_error(tmp_path):
    real_src, real_trg, bt_src, bt_trg = make_parts(tmp_path)
    for path in bt_src:
        write_lines(path, [""] * len(path.read_text().splitlines()))
    expected = r"no synthetic pair is left after the filters \(empty=7, .*\(train it longer\), or .* too strict$"
    with pytest.raises(DataError, match=expected):
        build(tmp_path, SyntheticConfig(), (real_src, real_trg, bt_src, bt_trg))


def test_tag_is_one_subword_piece(toy_spm):
    sp = load_subword(toy_spm["en"])
    assert BT_TAG in sp.encode(f"{BT_TAG} the dog", out_type=str)
    assert sp.decode(sp.encode(f"{BT_TAG} the dog")) == f"{BT_TAG} the dog"


def characterisation_parts(tmp_path, n=600):
    """Real and synthetic parts with every kind of degenerate hypothesis, deterministic from a seed."""
    rng = random.Random(0)
    words = "a man dog cat in the red shirt walks runs over park street with his hat".split()

    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))

    real = [(sentence(), sentence()) for _ in range(40)]
    pairs = []
    for _ in range(n):
        mono, kind = sentence(), rng.random()
        hyp = "" if kind < 0.05 else mono if kind < 0.1 else "the man is " * 4 if kind < 0.15 else sentence()
        pairs.append((hyp, mono))
    real_src = [write_lines(tmp_path / f"real{i}.en", [s for s, _ in real[i * 20 : i * 20 + 20]]) for i in (0, 1)]
    real_trg = [write_lines(tmp_path / f"real{i}.de", [t for _, t in real[i * 20 : i * 20 + 20]]) for i in (0, 1)]
    bt_src = [write_lines(tmp_path / f"{i}.en", [h for h, _ in pairs[i * 200 : i * 200 + 200]]) for i in range(3)]
    bt_trg = [write_lines(tmp_path / f"{i}.de", [m for _, m in pairs[i * 200 : i * 200 + 200]]) for i in range(3)]
    return real_src, real_trg, bt_src, bt_trg


def test_synthetic_corpus_characterisation(tmp_path):
    # The digest of the corpus built from this input: a change of the builder's output shows here.
    src, trg, report = build(tmp_path, SyntheticConfig(tagged=True, upsample_real=2), characterisation_parts(tmp_path))
    digest = hashlib.sha256("\n".join(src + ["---"] + trg).encode()).hexdigest()
    assert digest == "0b3be8e4758113173a98c1f05ceb1cb52e7a5f4cfbf19ac06960be79fbdda14d"
    expected = {"empty": 23, "copy": 24, "repeated_ngram": 26, "ratio": 114, "synthetic_ratio": 0}
    assert report["synthetic_pairs"] == 413 and report["dropped"] == expected


def test_synthetic_corpus_streams_without_holding_the_corpus(tmp_path):
    # 100,000 real and 100,000 synthetic pairs: the list-based builder held all of them (about 30 MB of
    # Python objects); streaming holds a line at a time, also when the ratio caps the synthetic sample.
    n = 100_000
    real_src = write_lines(tmp_path / "real.en", [f"a real dog number {i}" for i in range(n)])
    real_trg = write_lines(tmp_path / "real.de", [f"ein echter Hund Nummer {i}" for i in range(n)])
    bt_src = write_lines(tmp_path / "0.en", [f"a man number {i}" for i in range(n)])
    bt_trg = write_lines(tmp_path / "0.de", [f"ein Mann Nummer {i}" for i in range(n)])
    config = SyntheticConfig(synthetic_ratio=0.5)
    out = tmp_path / "out"
    tracemalloc.start()
    try:
        report = build_synthetic_corpus(
            [real_src], [real_trg], [bt_src], [bt_trg], out / "t.en", out / "t.de", out / "r.json", config
        )
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert report["synthetic_pairs"] == n // 2 and report["dropped"]["synthetic_ratio"] == n // 2
    src = (out / "t.en").read_text().splitlines()
    trg = (out / "t.de").read_text().splitlines()
    assert len(src) == len(trg) == n + n // 2
    assert all(s.split()[-1] == t.split()[-1] for s, t in zip(src, trg, strict=True)), "pairs stay aligned"
    assert peak < 2, f"building a corpus of {n:,} real and {n:,} synthetic pairs peaked at {peak:.1f} MB"
