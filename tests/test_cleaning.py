"""Tests of nmt.data.cleaning and nmt.data.filters: normalization, filters, reports and eval-set preparation."""

import gzip
import json
import logging
import tracemalloc
from pathlib import Path

import pytest
from conftest import MIRROR, assert_one_line

from nmt.config import CleanConfig
from nmt.data.cleaning import FILTERS, clean_corpus, clean_monolingual
from nmt.data.eval_sets import prepare_eval_set
from nmt.data.filters import in_sentence_form
from nmt.data.normalize import Normalizer, moses_punct_normalizer
from nmt.data.rawtext import open_text
from nmt.errors import DataError

MULTI30K = MIRROR / "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
needs_mirror = pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"Multi30k not found in the mirror at {MIRROR}")


# "I want" in Persian: the zero-width non-joiner (U+200C) is part of the spelling and must survive.
PERSIAN_WITH_ZWNJ = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"


def write_lines(path: Path, lines: list[str | bytes]) -> Path:
    """Write ``lines`` (str as UTF-8, bytes as they are) with ``\\n`` terminators."""
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def run_clean(tmp_path: Path, src: list[str | bytes], trg: list[str | bytes], **config: object) -> dict:
    """Clean an in-memory corpus with ``CleanConfig(**config)`` (language identification off unless
    asked: toy sentences are no language); outputs go to ``tmp_path/out``."""
    threads = config.pop("threads", 1)
    exclude = config.pop("exclude", [])
    return clean_corpus(
        write_lines(tmp_path / "raw.de", src),
        write_lines(tmp_path / "raw.en", trg),
        tmp_path / "out" / "train.de",
        tmp_path / "out" / "train.en",
        tmp_path / "out" / "report.tsv",
        CleanConfig(**{"langid": False, **config}),
        "de",
        "en",
        exclude=exclude,
        threads=threads,
    )


@pytest.mark.parametrize(
    ("lang", "punctuation", "line", "expected"),
    [
        ("de", True, "Cafe\u0301 au lait", "Caf\u00e9 au lait"),  # NFC composes e + combining acute
        ("de", True, "\u201eHallo\u201c sagte er.", '"Hallo" sagte er.'),
        ("de", False, "\u201eHallo\u201c sagte er.", "\u201eHallo\u201c sagte er."),
        ("fr", True, "Il a dit \u00ab oui \u00bb ?", 'Il a dit " oui " ?'),
        ("en", True, "Wait\u2026", "Wait..."),
        ("en", True, "1 \u2013 2", "1 - 2"),
        ("de", True, "a\x00b", "ab"),
        ("de", True, "a\tb", "a b"),
        ("de", True, "a\u2028b", "a b"),
        ("de", True, "a\u200bb", "ab"),  # zero-width space (Cf)
        ("de", True, "Trenn\u00adstrich", "Trennstrich"),  # soft hyphen (Cf)
        ("de", True, "a\ufeffb", "ab"),  # BOM inside a line
        ("de", True, "a\ue000b", "ab"),  # private use (Co)
        ("fa", True, PERSIAN_WITH_ZWNJ, PERSIAN_WITH_ZWNJ),
        ("de", True, "a\x1b[0mb", "a[0mb"),
        ("de", True, "  a \u00a0  b\r ", "a b"),
        ("de", True, "\x00\x01 \x7f", ""),
        ("de", False, "plain line", "plain line"),
    ],
)
def test_normalizer(lang: str, punctuation: bool, line: str, expected: str) -> None:
    assert Normalizer(lang, punctuation)(line) == expected


def test_filters_and_report(tmp_path: Path) -> None:
    pairs = [
        ("a b c", "x y z"),  # kept
        ("", "x y"),  # empty
        (" \x00 \t", "x y"),  # empty once normalized
        ("a", "x y"),  # too_short: 1 < min_length
        ("a b c d e f", "x y z"),  # too_long: 6 > max_length
        ("a b", "v w x y z"),  # ratio: 5 / 2 > 2
        ("a b c", "x y z"),  # duplicate
        ("a  b\tc ", "x y z"),  # duplicate once normalized
        ("a b c", "x y q"),  # kept: only the exact pair is a duplicate
        ("a b c d", "w x y z"),  # kept
    ]
    report = run_clean(
        tmp_path, [s for s, _ in pairs], [t for _, t in pairs], min_length=2, max_length=5, max_ratio=2.0
    )
    counts = {"empty": 2, "too_short": 1, "too_long": 1, "ratio": 1, "duplicate": 2}
    expected_dropped = dict.fromkeys(FILTERS, 0) | counts
    assert report == {
        "src": str(tmp_path / "raw.de"),
        "trg": str(tmp_path / "raw.en"),
        "lines_in": 10,
        "kept": 3,
        "dropped": expected_dropped,
    }
    tsv = read_lines(tmp_path / "out" / "report.tsv")
    assert tsv[0] == "filter\tpairs\tshare" and "lines_in\t10\t1.0000" in tsv and "duplicate\t2\t0.2000" in tsv
    assert "| kept | 3 | 30.00% |" in (tmp_path / "out" / "report.md").read_text()
    assert read_lines(tmp_path / "out" / "train.de") == ["a b c", "a b c", "a b c d"]
    assert read_lines(tmp_path / "out" / "train.en") == ["x y z", "x y q", "w x y z"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md", "report.tsv", "train.de", "train.en"]


def test_dedup_off_keeps_duplicates(tmp_path: Path) -> None:
    report = run_clean(tmp_path, ["a b", "a b"], ["x y", "x y"], dedup=False)
    assert report["kept"] == 2
    assert report["dropped"]["duplicate"] == 0


def test_one_megabyte_line_is_too_long(tmp_path: Path) -> None:
    huge = "wort " * 200_000
    report = run_clean(tmp_path, ["ein Satz", huge, "noch ein Satz"], ["a sentence", "x", "another sentence"])
    assert report["dropped"]["too_long"] == 1
    assert read_lines(tmp_path / "out" / "train.en") == ["a sentence", "another sentence"]


def test_invalid_utf8_dropped_without_misalignment(tmp_path: Path) -> None:
    src = ["eins zwei", b"kaputt \xff\xfe zeile", "drei vier", "f\xfcnf sechs"]
    trg = ["one two", "broken line", "three four", b"five \xc3 six"]
    report = run_clean(tmp_path, src, trg, max_invalid_utf8=0.5)
    assert report["dropped"]["invalid_utf8"] == 2
    assert read_lines(tmp_path / "out" / "train.de") == ["eins zwei", "drei vier"]
    assert read_lines(tmp_path / "out" / "train.en") == ["one two", "three four"]


# German sentences with umlauts, as a Latin-1 (cp1252) file: most lines are not UTF-8.
LATIN1 = ["Ein Mädchen läuft.", "Zwei Hunde spielen.", "Der Bär schläft.", "Grüße aus Köln.", "Ein Fußball."]


def test_latin1_corpus_stops_cleaning_naming_the_configured_file(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "raw.de", [line.encode("cp1252") for line in LATIN1 * 20])
    trg = write_lines(tmp_path / "raw.en", [f"sentence {i}" for i in range(100)])
    out = tmp_path / "out"
    url = "https://example.org/corpus.de.gz"
    with pytest.raises(DataError) as excinfo:
        clean_corpus(
            src, trg, out / "t.de", out / "t.en", out / "r.tsv", CleanConfig(langid=False), "de", "en",
            sources=(url, "https://example.org/corpus.en.gz"),
        )  # fmt: skip
    message = assert_one_line(excinfo, url, src, "80 of 100 lines (80.0%) are not valid UTF-8")
    assert "looks like Latin-1/cp1252" in message and "cleaning.max_invalid_utf8" in message
    assert list(out.iterdir()) == []


def test_few_invalid_lines_are_dropped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = [f"Satz Nummer {i}" for i in range(50)] + [b"kaputt \x81"]  # 0x81: not cp1252 either
    report = run_clean(tmp_path, src, [f"sentence number {i}" for i in range(51)])
    assert report["dropped"]["invalid_utf8"] == 1 and report["kept"] == 50
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [f"{tmp_path / 'raw.de'}: 1 of 51 lines (2.0%) are not valid UTF-8; they are dropped"]


def test_latin1_monolingual_corpus_stops_cleaning(tmp_path: Path) -> None:
    good = write_lines(tmp_path / "good.de", [f"Satz {i}" for i in range(100)])
    bad = write_lines(tmp_path / "bad.de", [line.encode("cp1252") for line in LATIN1 * 4])
    with pytest.raises(DataError) as excinfo:
        clean_monolingual(
            [good, bad], tmp_path / "o.de", tmp_path / "r.json", CleanConfig(), "de", sources=["g.de", "/data/bad.de"]
        )
    assert_one_line(excinfo, "/data/bad.de", bad, "16 of 20 lines", "looks like Latin-1/cp1252")
    assert not (tmp_path / "o.de").exists()


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_named_as_such(tmp_path: Path, codec: str) -> None:
    src = tmp_path / "raw.de"
    src.write_bytes("".join(f"Satz {i}\n" for i in range(10)).encode(codec))
    write_lines(tmp_path / "raw.en", [f"sentence {i}" for i in range(10)])
    with pytest.raises(DataError) as excinfo:
        clean_corpus(
            src, tmp_path / "raw.en", tmp_path / "a", tmp_path / "b", tmp_path / "r", CleanConfig(), "de", "en"
        )
    assert_one_line(excinfo, src, "looks like UTF-16")


def test_ansi_colour_codes_are_dropped_and_counted(tmp_path: Path) -> None:
    src = ["Ein \x1b[31mroter\x1b[0m Satz", "Ein [1;32mgrüner Satz", "Ein Satz [1] mit Zitat"]
    report = run_clean(tmp_path, src, ["a red sentence", "a green sentence", "a sentence [1] with a citation"])
    assert report["dropped"]["ansi_code"] == 2 and report["kept"] == 1
    assert read_lines(tmp_path / "out" / "train.de") == ["Ein Satz [1] mit Zitat"]
    mono = write_lines(tmp_path / "mono.de", src)
    report = clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", CleanConfig(), "de")
    assert report["dropped"]["ansi_code"] == 2 and report["kept"] == 1


def test_line_count_mismatch(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "raw.de", ["a", "b", "c"])
    trg = write_lines(tmp_path / "raw.en", ["x", "y"])
    out = tmp_path / "out"
    with pytest.raises(DataError) as excinfo:
        clean_corpus(src, trg, out / "t.de", out / "t.en", out / "r.tsv", CleanConfig(), "de", "en")
    assert assert_one_line(excinfo, src, trg) == f"{src} has 3 lines but {trg} has 2"
    assert list(out.iterdir()) == []  # temp files removed, nothing half-written


def test_empty_corpus(tmp_path: Path) -> None:
    (tmp_path / "raw.de").write_bytes(b"")
    (tmp_path / "raw.en").write_bytes(b"")
    with pytest.raises(DataError) as excinfo:
        clean_corpus(
            tmp_path / "raw.de",
            tmp_path / "raw.en",
            tmp_path / "a",
            tmp_path / "b",
            tmp_path / "r",
            CleanConfig(),
            "de",
            "en",
        )
    assert_one_line(excinfo, tmp_path / "raw.de", "corpus is empty")


def test_fully_filtered_corpus(tmp_path: Path) -> None:
    with pytest.raises(DataError) as excinfo:
        run_clean(tmp_path, ["a b c", "", "a b c d"], ["x", "x", "x"], max_ratio=2.0)
    message = assert_one_line(excinfo, tmp_path / "raw.de", "(empty=1, ratio=2)")
    assert "all 3 lines" in message
    assert not (tmp_path / "out" / "report.tsv").exists()
    assert not (tmp_path / "out" / "train.de").exists()


def test_clean_reads_gzip(tmp_path: Path) -> None:
    (tmp_path / "raw.de.gz").write_bytes(gzip.compress("\u201eJa\u201c , sagte er .\n".encode()))
    (tmp_path / "raw.en.gz").write_bytes(gzip.compress(b'" Yes , " he said .\n'))
    out = tmp_path / "out"
    report = clean_corpus(
        tmp_path / "raw.de.gz",
        tmp_path / "raw.en.gz",
        out / "t.de",
        out / "t.en",
        out / "r.json",
        CleanConfig(),
        "de",
        "en",
    )
    assert report["kept"] == 1
    assert read_lines(out / "t.de") == ['"Ja" , sagte er .']


def test_prepare_eval_set_keeps_ref_verbatim(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "test.de", ["\u201eHallo\u201c  Welt\x00", b"\xef\xbb\xbfzweite Zeile"])
    refs = ["  \u201cHello\u201d   world ", ""]
    (tmp_path / "test.en.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + "\r\n".join(refs).encode() + b"\r\n"))
    n = prepare_eval_set(src, tmp_path / "test.en.gz", tmp_path / "out" / "src", tmp_path / "out" / "ref", "de")
    assert n == 2
    assert read_lines(tmp_path / "out" / "ref") == refs
    # A BOM that is not at the start of the file is a stray U+FEFF, which the normalizer removes.
    assert read_lines(tmp_path / "out" / "src") == ['"Hallo" Welt', "zweite Zeile"]


def test_prepare_eval_set_reports_empty_lines_per_file(tmp_path: Path, caplog) -> None:
    """A blank line of a dev or test set is kept (the set is not changed) and named in one warning per file."""
    src = write_lines(tmp_path / "test.de", ["a", "", "c", ""])
    ref = write_lines(tmp_path / "test.en", ["x", "y", "z", ""])
    with caplog.at_level(logging.WARNING, logger="nmt.data.eval_sets"):
        assert prepare_eval_set(src, ref, tmp_path / "out" / "src", tmp_path / "out" / "ref", "de") == 4
    assert [r.getMessage().split(", kept")[0] for r in caplog.records] == [
        f"{src}: 2 of 4 lines empty (line 2, 4)",
        f"{ref}: 1 of 4 lines empty (line 4)",
    ]
    assert read_lines(tmp_path / "out" / "src") == ["a", "", "c", ""]
    caplog.clear()
    prepare_eval_set(ref, ref, tmp_path / "out" / "src", tmp_path / "out" / "ref", "en")
    assert len(caplog.records) == 2


def test_prepare_eval_set_mismatch(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "test.de", ["a", "b"])
    ref = write_lines(tmp_path / "test.en", ["x", "y", "z"])
    with pytest.raises(DataError) as excinfo:
        prepare_eval_set(src, ref, tmp_path / "out" / "src", tmp_path / "out" / "ref", "de")
    assert assert_one_line(excinfo, src, ref) == f"{src} has 2 lines but {ref} has 3"
    assert list((tmp_path / "out").iterdir()) == []


def test_prepare_eval_set_invalid_utf8(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "test.de", ["a", "b"])
    ref = write_lines(tmp_path / "test.en", ["x", b"y \xe9"])
    with pytest.raises(DataError) as excinfo:
        prepare_eval_set(src, ref, tmp_path / "out" / "src", tmp_path / "out" / "ref", "de")
    assert assert_one_line(excinfo, ref) == f"{ref}: line 2 is not valid UTF-8; it looks like Latin-1/cp1252"
    assert list((tmp_path / "out").iterdir()) == []


@needs_mirror
def test_prepare_real_multi30k_test_set(tmp_path: Path) -> None:
    ref_gz = MULTI30K / "test_2016_flickr.de.gz"
    n = prepare_eval_set(MULTI30K / "test_2016_flickr.en.gz", ref_gz, tmp_path / "src", tmp_path / "ref", "en")
    assert n == 1000
    assert (tmp_path / "ref").read_bytes() == gzip.decompress(ref_gz.read_bytes())
    assert len(read_lines(tmp_path / "src")) == 1000


@needs_mirror
def test_clean_real_multi30k_val(tmp_path: Path) -> None:
    report = clean_corpus(
        MULTI30K / "val.de.gz",
        MULTI30K / "val.en.gz",
        tmp_path / "val.de",
        tmp_path / "val.en",
        tmp_path / "report.tsv",
        CleanConfig(),
        "de",
        "en",
    )
    assert report["lines_in"] == 1014
    assert report["kept"] + sum(report["dropped"].values()) == 1014
    assert report["kept"] > 1000
    assert len(read_lines(tmp_path / "val.de")) == len(read_lines(tmp_path / "val.en")) == report["kept"]


def test_max_pairs_keeps_the_first_pairs(tmp_path: Path) -> None:
    src = [f"a b {i}" for i in range(10)]
    report = run_clean(tmp_path, src, [f"x y {i}" for i in range(10)], max_pairs=4)
    assert report["kept"] == 4 and report["dropped"]["max_pairs"] == 6
    assert (tmp_path / "out" / "train.de").read_text().splitlines() == src[:4]


def test_clean_monolingual_filters_and_excludes_eval_sentences(tmp_path: Path) -> None:
    lines = ["Ein Hund.", "", "Ein Hund.", "Zwei  Katzen «schlafen»", b"\xff", "x " * 200]
    mono = write_lines(tmp_path / "mono.de", lines)
    part2 = write_lines(tmp_path / "mono2.de", ["Ein Test-Satz.", "Noch einer."])
    ref = write_lines(tmp_path / "test.de", ["Zwei Katzen «schlafen»"])  # normalized, it equals line 4
    config = CleanConfig(max_invalid_utf8=0.2)
    report = clean_monolingual([mono, part2], tmp_path / "out.de", tmp_path / "r.json", config, "de", [ref])
    assert read_lines(tmp_path / "out.de") == ["Ein Hund.", "Ein Test-Satz.", "Noch einer."]
    assert report["lines_in"] == 8 and report["kept"] == 3
    expected = {"invalid_utf8": 1, "empty": 1, "duplicate": 1, "in_eval": 1, "too_long": 1}
    assert {k: v for k, v in report["dropped"].items() if v} == expected
    assert json.loads((tmp_path / "r.json").read_text()) == report


def test_monolingual_and_parallel_cleaning_run_one_filter_chain(tmp_path: Path) -> None:
    # Each sentence filter, then in_eval before duplicate: a dev sentence that occurs twice is in_eval twice.
    lines = ["", "Ein [1;32mgrüner Satz", "ein", "x " * 300, "Ein Hund rennt.", "Ein  Hund rennt.", b"\xff"]
    lines += ["Eine Katze schläft.", "Eine Katze schläft."]
    dev = write_lines(tmp_path / "dev.de", ["Ein Hund rennt."])
    config = {"min_length": 2, "max_invalid_utf8": 0.5}
    mono = clean_monolingual(
        [write_lines(tmp_path / "mono.de", lines)],
        tmp_path / "o.de",
        tmp_path / "r.json",
        CleanConfig(**config),
        "de",
        [dev],
    )
    trg = ["a sentence"] * 7 + ["a cat sleeps"] * 2
    pairs = run_clean(tmp_path, lines, trg, exclude=[dev], **config)
    expected = {"empty": 1, "ansi_code": 1, "too_short": 1, "too_long": 1, "in_eval": 2, "invalid_utf8": 1}
    expected["duplicate"] = 1
    assert {k: v for k, v in mono["dropped"].items() if v} == expected
    assert {k: v for k, v in pairs["dropped"].items() if v} == expected
    assert mono["kept"] == pairs["kept"] == 1
    assert read_lines(tmp_path / "o.de") == read_lines(tmp_path / "out" / "train.de") == ["Eine Katze schläft."]


def test_source_side_cleaning_drops_the_training_sources(tmp_path: Path) -> None:
    """Iterative back-translation's forward model translates source-language text: a sentence of the training
    corpora's source side (compared once normalized, as dev/test sentences are) is dropped and counted as in_train,
    after in_eval and before duplicate; a target-side cleaning has no such filter."""
    train = [write_lines(tmp_path / "train.en", ["A dog runs.", "Two cats sleep."])]
    train.append(write_lines(tmp_path / "extra.en", ["A bird sings."]))
    dev = write_lines(tmp_path / "dev.en", ["A man walks."])
    lines = ["A  dog runs.", "A man walks.", "A bird sings.", "A bird sings.", "Two dogs play.", "Two dogs play."]
    mono = write_lines(tmp_path / "mono.en", lines)
    config = CleanConfig()
    report = clean_monolingual([mono], tmp_path / "o.en", tmp_path / "r.json", config, "en", [dev], exclude_train=train)
    assert read_lines(tmp_path / "o.en") == ["Two dogs play."]
    assert {k: v for k, v in report["dropped"].items() if v} == {"in_train": 3, "in_eval": 1, "duplicate": 1}
    assert report["kept"] == 1 and json.loads((tmp_path / "r.json").read_text()) == report
    target_side = clean_monolingual([mono], tmp_path / "o.en", tmp_path / "r.json", config, "en", [dev])
    assert "in_train" not in target_side["dropped"] and target_side["kept"] == 3


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Ein Mann fährt Fahrrad.", True),
        ("ein Mann fährt Fahrrad.", False),  # lowercase start
        ("Ein Mann fährt Fahrrad", False),  # no final punctuation
        ("Fährt der Mann Fahrrad?", True),
        ('„Halt!", ruft der Mann."', True),  # closing quotes after the full stop
        ("Ein Mann (mit Helm).)", True),
        ("3 Männer fahren Rad.", True),  # digits begin sentences too
        ("Ein Mann fährt Fahrrad,", False),
        ("一个男人在骑自行车。", True),  # no case: the punctuation alone decides
        ("一个男人在骑自行车", False),
        ('"', False),
    ],
)
def test_in_sentence_form(line: str, expected: bool) -> None:
    assert in_sentence_form(line) is expected


def test_clean_monolingual_sentence_form(tmp_path: Path) -> None:
    """With sentence_form, the lines not written as sentences (Multi30k task 2's German has a quarter of them) are
    dropped and counted after the sentence filters and before in_eval; without it, the filter is not in the report."""
    lines = ["Ein Hund rennt.", "ein hund rennt", "Zwei Katzen schlafen", "Ein Mann geht.", "", "Ein Vogel singt!"]
    mono = write_lines(tmp_path / "mono.de", lines)
    dev = write_lines(tmp_path / "dev.de", ["Ein Mann geht."])
    config = CleanConfig()
    report = clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", config, "de", [dev], sentence_form=True)
    assert read_lines(tmp_path / "o.de") == ["Ein Hund rennt.", "Ein Vogel singt!"]
    assert {k: v for k, v in report["dropped"].items() if v} == {"empty": 1, "sentence_form": 2, "in_eval": 1}
    plain = clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", config, "de", [dev])
    assert "sentence_form" not in plain["dropped"] and plain["kept"] == 4


def test_clean_monolingual_sample_is_seeded_and_keeps_order(tmp_path: Path) -> None:
    mono = write_lines(tmp_path / "mono.de", [f"Satz {i}" for i in range(1000)])

    def sample(seed: int) -> list[str]:
        clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", CleanConfig(), "de", [], 100, seed)
        return read_lines(tmp_path / "o.de")

    first = sample(1)
    assert len(first) == 100 and first == sample(1) and first != sample(2)
    numbers = [int(line.split()[1]) for line in first]
    assert numbers == sorted(numbers), "the sample keeps the original order"
    assert numbers[-1] > 500, "the sample is drawn from the whole corpus, not its head"


def test_clean_monolingual_all_dropped(tmp_path: Path) -> None:
    mono = write_lines(tmp_path / "mono.de", ["", " "])
    with pytest.raises(DataError) as excinfo:
        clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", CleanConfig(), "de")
    assert_one_line(excinfo, mono, "all 2 lines were dropped")
    assert not (tmp_path / "o.de").exists()


@pytest.mark.parametrize(
    "src, trg, config, reason",
    [
        ("ein Wort", "a " + "x" * 101, {}, "long_token"),
        ("ein Wort", "a " + "x" * 101, {"max_token_chars": None}, None),
        ("Hello world", "Hello world", {}, "copy"),
        ("Hello world", "Hello world", {"drop_copies": False}, None),
        ("12 345 678 !", "12 345 678 !", {"drop_copies": False}, "alpha"),
        ("Seite 12 von 345", "page 12 of 345", {}, None),
    ],
)
def test_pair_filters(tmp_path: Path, src: str, trg: str, config: dict, reason: str | None) -> None:
    report = run_clean(tmp_path, [src, "ein Satz"], [trg, "a sentence"], **config)
    assert report["kept"] == (2 if reason is None else 1)
    if reason is not None:
        assert report["dropped"][reason] == 1


def test_language_identification_drops_the_wrong_language(tmp_path: Path) -> None:
    src = ["Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Zwei Hunde spielen im Schnee."]
    trg = ["A man rides his bicycle through the city.", "Deux chiens jouent dans la neige avec un ballon rouge."]
    report = run_clean(tmp_path, src, trg, langid=True)
    assert report["dropped"]["langid"] == 1 and report["kept"] == 1
    assert read_lines(tmp_path / "out" / "train.en") == [trg[0]]


def test_decontamination_against_dev_and_test(tmp_path: Path) -> None:
    dev = write_lines(tmp_path / "dev.de", ["Ein  Hund rennt."])  # equal once whitespace is normalized
    test = write_lines(tmp_path / "test.en", ["A cat sleeps."])
    src = ["Ein Hund rennt.", "Eine Katze schläft.", "Ein Vogel singt."]
    trg = ["A dog runs.", "A cat sleeps.", "A bird sings."]
    report = run_clean(tmp_path, src, trg, exclude=[dev, test])
    assert report["dropped"]["in_eval"] == 2
    assert read_lines(tmp_path / "out" / "train.de") == ["Ein Vogel singt."]
    assert run_clean(tmp_path, src, trg, exclude=[dev, test], decontaminate=False)["kept"] == 3


def test_parallel_chunks_and_shuffle_keep_pairs_aligned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nmt.data.cleaning

    monkeypatch.setattr(nmt.data.cleaning, "CHUNK_PAIRS", 7)  # many chunks from a small corpus
    src = [f"Satz Nummer {i}" for i in range(100)] + ["", b"\xff"]
    trg = [f"sentence number {i}" for i in range(100)] + ["x", "y"]
    serial = run_clean(tmp_path, src, trg)
    serial_out = read_lines(tmp_path / "out" / "train.de")
    parallel = run_clean(tmp_path, src, trg, threads=2)
    assert parallel == serial and read_lines(tmp_path / "out" / "train.de") == serial_out
    shuffled = run_clean(tmp_path, src, trg, threads=2, shuffle=True, seed=3)
    de, en = read_lines(tmp_path / "out" / "train.de"), read_lines(tmp_path / "out" / "train.en")
    assert shuffled["kept"] == 100 and sorted(de) == sorted(serial_out) and de != serial_out
    assert all(d.split()[-1] == e.split()[-1] for d, e in zip(de, en, strict=True))
    run_clean(tmp_path, src, trg, shuffle=True, seed=3)
    assert read_lines(tmp_path / "out" / "train.de") == de, "the same seed gives the same order"


def traced_peak_mb(run) -> float:
    """Peak of Python allocations (MB) while ``run()`` runs."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_dedup_memory_does_not_hold_a_set_of_strings_or_digests(tmp_path: Path) -> None:
    # 300,000 distinct pairs and their duplicates: a Python set of 16-byte digests held about 95 bytes per
    # pair (28 MB here); the 8-byte digests in a sorted array hold 8, plus the small recent set and chunks.
    n = 300_000
    src = write_lines(tmp_path / "raw.de", [f"a{i} b" for i in range(n)] + ["a7 b", "a299999 b"])
    trg = write_lines(tmp_path / "raw.en", [f"x{i} y" for i in range(n)] + ["x7 y", "x299998 y"])
    config = CleanConfig(langid=False, normalize_punctuation=False, min_alpha=0)
    out = tmp_path / "out"
    report = {}

    def run() -> None:
        report.update(clean_corpus(src, trg, out / "c.de", out / "c.en", out / "r.tsv", config, "de", "en"))

    peak = traced_peak_mb(run)
    assert report["kept"] == n + 1 and report["dropped"]["duplicate"] == 1  # ("a7 b", "x7 y") only
    assert read_lines(out / "c.en")[-1] == "x299998 y"
    assert peak < 16, f"cleaning {n:,} pairs with dedup peaked at {peak:.1f} MB of Python allocations"


def test_digest_set_keeps_distinct_and_finds_duplicates_across_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    from nmt.data.cleaning import DigestSet

    monkeypatch.setattr(DigestSet, "RECENT", 100)  # many merges into the sorted array
    seen = DigestSet()
    assert all(seen.add(f"s{i}") for i in range(1000))
    assert len(seen) == 1000
    assert not any(seen.add(f"s{i}") for i in range(0, 1000, 7))  # old (merged) and recent ones
    assert seen.add("s1000") and not seen.add("s1000")


def test_clean_monolingual_streams_without_holding_the_sentences(tmp_path: Path) -> None:
    # Without max_sentences every sentence used to be held in a list (with a 16-byte digest each).
    n = 200_000
    mono = write_lines(tmp_path / "mono.de", [f"Satz Nummer {i} ist da." for i in range(n)] + ["Satz Nummer 5 ist da."])
    config = CleanConfig(normalize_punctuation=False)
    report = {}

    def run() -> None:
        report.update(clean_monolingual([mono], tmp_path / "o.de", tmp_path / "r.json", config, "de"))

    peak = traced_peak_mb(run)
    assert report["kept"] == n and report["dropped"]["duplicate"] == 1
    assert read_lines(tmp_path / "o.de")[n - 1] == f"Satz Nummer {n - 1} ist da."
    assert peak < 12, f"cleaning {n:,} monolingual sentences peaked at {peak:.1f} MB of Python allocations"


@needs_mirror
def test_language_check_decides_as_py3langid_classify() -> None:
    # LanguageCheck takes only the weight rows of a sentence's features: the same decisions as classify().
    from nmt.data.filters import LanguageCheck

    sentences = [line for lang in ("en", "de", "fr", "cs") for line in open_text(MULTI30K / f"val.{lang}.gz")][::20]
    sentences += ["12 345", "OK", "Hello Welt", "x", "www.example.org"]
    for lang in ("en", "de"):
        for threshold in (0.5, 0.9, 0.999):
            check = LanguageCheck(lang, threshold)
            for line in sentences:
                best, prob = check.identifier.classify(line)
                assert check(line) == (best == lang or prob < threshold), (lang, threshold, line)


# Lines where sacremoses' rules differ by language: quotes, guillemets, spaces before punctuation, numbers.
PUNCTUATION_LINES = [
    "\u201eHallo\u201c, sagte er \u2013 \u00ab oui \u00bb ; 1 000,5 %",
    "\u2018It\u2019s\u2019 \u201cok\u201d ,he said\u2026 ( yes ) 25 \u00b0C",
    "Er sagte: \u201aja\u2018 \u2014 und\u00a0dann ?!",
]


@pytest.mark.parametrize("lang", ["en", "de", "fr", "cs", "es"])
def test_the_normalizer_loaded_alone_normalizes_as_the_sacremoses_package_does(lang: str) -> None:
    import sacremoses

    ours = moses_punct_normalizer()(lang=lang)
    theirs = sacremoses.MosesPunctNormalizer(lang=lang)
    assert [ours.normalize(line) for line in PUNCTUATION_LINES] == [
        theirs.normalize(line) for line in PUNCTUATION_LINES
    ]
