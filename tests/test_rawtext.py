"""Tests of nmt.data.rawtext: decompression, line ends, the byte order mark, control characters, invalid UTF-8."""

import gzip
import logging
import lzma
from pathlib import Path

import pytest
from conftest import assert_one_line

from nmt.data.rawtext import check_encoding, guess_encoding, open_text, zip_aligned
from nmt.errors import DataError


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read(tmp_path: Path, data: bytes, name: str = "x") -> list[str | None]:
    (tmp_path / name).write_bytes(data)
    return list(open_text(tmp_path / name))


def test_missing_input(tmp_path: Path) -> None:
    write_lines(tmp_path / "raw.en", ["x"])
    with pytest.raises(DataError) as excinfo:
        list(open_text(tmp_path / "raw.de"))
    assert_one_line(excinfo, tmp_path / "raw.de", "no such file")


TEXT = "Zwei Männer\nstehen am Herd.\n"
LONG_TEXT = "".join(f"Satz Nummer {i} über einen Hund.\n" for i in range(5000)).encode()


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("train.de", gzip.compress(TEXT.encode())),  # gzip without .gz in the name
        ("train.txt.gz", gzip.compress(TEXT.encode())),
        ("train.de.gz", gzip.compress(TEXT.encode()[:5]) + gzip.compress(TEXT.encode()[5:])),  # two members
        ("train.de", lzma.compress(TEXT.encode())),  # xz by magic
        ("train.de.gz", TEXT.encode()),  # named .gz but plain text
        ("train.de", TEXT.replace("\n", "\r\n").encode()),  # CRLF
        ("train.de", b"\xef\xbb\xbf" + TEXT.encode()),  # BOM
        ("train.de.gz", gzip.compress(b"\xef\xbb\xbf" + TEXT.replace("\n", "\r\n").encode())),
        ("train.de", TEXT.encode().rstrip(b"\n")),  # no final newline
    ],
    ids=[
        "gzip_magic",
        "gzip_ext",
        "gzip_members",
        "xz_magic",
        "text_named_gz",
        "crlf",
        "bom",
        "gzip_bom_crlf",
        "no_eol",
    ],
)
def test_open_text_formats(tmp_path: Path, name: str, data: bytes) -> None:
    (tmp_path / name).write_bytes(data)
    assert list(open_text(tmp_path / name)) == ["Zwei Männer", "stehen am Herd."]


def test_open_text_keeps_blank_lines_and_inner_separators(tmp_path: Path) -> None:
    # \r and U+2028 inside a line must not split it, or the two sides would fall out of step.
    (tmp_path / "x").write_bytes("a\rb\n\nc\u2028d\n".encode())
    assert list(open_text(tmp_path / "x")) == ["a\rb", "", "c\u2028d"]


def test_open_text_invalid_utf8_is_none(tmp_path: Path) -> None:
    (tmp_path / "x.gz").write_bytes(gzip.compress(b"ok\nbad \xff\nstill ok\n"))
    assert list(open_text(tmp_path / "x.gz")) == ["ok", None, "still ok"]


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("train.de.gz", b"PK\x03\x04\x00\x00binary zip, not gzip", "not a gzip file"),
        ("train.de.xz", b"\x00\x01\x02\x03", "not a xz file"),
        (
            "train.de.gz",
            gzip.compress(LONG_TEXT)[: len(gzip.compress(LONG_TEXT)) // 2],
            "truncated gzip stream",
        ),
        ("train.de", gzip.compress(TEXT.encode())[:-8], "truncated gzip stream"),
        ("train.de", lzma.compress(TEXT.encode())[:-20], "xz stream"),
    ],
    ids=["zip_named_gz", "binary_named_xz", "gzip_cut_in_half", "gzip_without_trailer", "xz_cut"],
)
def test_open_text_bad_files(tmp_path: Path, name: str, data: bytes, problem: str) -> None:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(DataError) as excinfo:
        list(open_text(tmp_path / name))
    assert_one_line(excinfo, f"{tmp_path / name}: ", problem)


def test_corrupt_gzip(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(("Ein Hund läuft. " * 200).encode()))
    data[-8] ^= 0xFF  # break the CRC
    (tmp_path / "x.gz").write_bytes(bytes(data))
    with pytest.raises(DataError) as excinfo:
        list(open_text(tmp_path / "x.gz"))
    assert_one_line(excinfo, tmp_path / "x.gz", "corrupt gzip stream")


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\r\nb\r\n", ["a", "b"]),  # CRLF
        (b"a\r\nb", ["a", "b"]),  # CRLF, last line without one
        (b"a\rb\rc\r", ["a", "b", "c"]),  # CR-only line ends (classic Mac OS) are line ends
        (b"a\rb\r\rc", ["a", "b", "", "c"]),  # also without one at the end, and around a blank line
        (b"a\rb\nc\n", ["a\rb", "c"]),  # a CR inside a line of an LF file does not split it
        (b"a\r", ["a"]),  # one line, CR-ended
        (b"a\r\r\n", ["a\r"]),  # only one CR is removed
        (b"a\n\r\n\n", ["a", "", ""]),  # blank lines, CRLF or LF, stay lines
        (b"", []),
        (b"\n", [""]),
        ("a\u0085b\x0bc\x0cd\x1ce\n".encode(), ["a\u0085b\x0bc\x0cd\x1ce"]),  # what str.splitlines() splits on
    ],
    ids=["crlf", "crlf_no_eol", "cr_only", "cr_only_no_eol", "cr_in_lf_file", "one_cr_line", "two_cr", "blank_lines"]
    + ["empty_file", "one_blank", "other_separators"],
)
def test_line_ends(tmp_path: Path, data: bytes, lines: list[str]) -> None:
    assert read(tmp_path, data) == lines
    assert read(tmp_path, gzip.compress(data), "x.gz") == lines


def test_byte_order_mark_is_removed_from_the_first_line_only(tmp_path: Path) -> None:
    assert read(tmp_path, b"\xef\xbb\xbfa\r\n\xef\xbb\xbfb\n") == ["a", "\ufeffb"]
    assert read(tmp_path, b"\xef\xbb\xbf\n") == [""]
    assert read(tmp_path, lzma.compress(b"\xef\xbb\xbf\xef\xbb\xbfa\n")) == ["\ufeffa"]  # one BOM removed


def test_control_characters_pass_through(tmp_path: Path) -> None:
    # Reading keeps every character but the line end; nmt.data.normalize.Normalizer removes control characters.
    lines = ["ok", "a\x00b", "\x1b[31mred\x1b[0m", "bell\x07 del\x7f", "tab\there", "\u200bzero\u200cwidth"]
    assert read(tmp_path, "\n".join(lines).encode()) == lines


def test_nul_bytes_on_the_first_line_mean_utf16(tmp_path: Path) -> None:
    assert read(tmp_path, b"abcdefgh\x00\nx\n") == ["abcdefgh\x00", "x"]  # one NUL in nine bytes: text
    with pytest.raises(DataError) as excinfo:
        read(tmp_path, b"a\x00b\x00\x00\nx\n")
    assert_one_line(excinfo, tmp_path / "x", "looks like UTF-16")
    with pytest.raises(DataError) as excinfo:
        read(tmp_path, b"\xff\xfea\n")
    assert_one_line(excinfo, tmp_path / "x", "looks like UTF-16")


def test_invalid_utf8_lines_are_none_and_keep_their_place(tmp_path: Path) -> None:
    data = [
        b"ok",
        b"overlong \xc0\xaf",
        b"surrogate \xed\xa0\x80",
        b"cut \xe2\x82",
        b"lone continuation \x80",
        "emoji \U0001f600".encode(),
        b"latin-1 \xe9\r",
    ]
    lines = read(tmp_path, b"\n".join(data) + b"\n")
    assert lines == ["ok", None, None, None, None, "emoji \U0001f600", None]
    assert sum(line is None for line in lines) == 5


def test_zip_aligned_keeps_invalid_lines_in_step_and_names_both_counts(tmp_path: Path) -> None:
    (tmp_path / "a.de").write_bytes(b"eins\n\xff\ndrei\n")
    write_lines(tmp_path / "a.en", ["one", "two", "three"])
    assert list(zip_aligned(tmp_path / "a.de", tmp_path / "a.en")) == [
        ("eins", "one"),
        (None, "two"),
        ("drei", "three"),
    ]
    write_lines(tmp_path / "b.en", ["one", "two"])
    with pytest.raises(DataError) as excinfo:
        list(zip_aligned(tmp_path / "a.de", tmp_path / "b.en"))
    assert str(excinfo.value) == f"{tmp_path / 'a.de'} has 3 lines but {tmp_path / 'b.en'} has 2"


def test_guess_encoding(tmp_path: Path) -> None:
    cp1252 = tmp_path / "cp1252.de.gz"
    cp1252.write_bytes(gzip.compress("ok\nSchöne Grüße\n€ 5\n".encode("cp1252")))
    assert guess_encoding(cp1252) == "; it looks like Latin-1/cp1252"
    other = tmp_path / "other.de"
    other.write_bytes("ok\nSchöne\n".encode("cp1252") + b"\x81\n")  # 0x81 is not a cp1252 character
    assert guess_encoding(other) == ""
    assert guess_encoding(other, sample=1) == "; it looks like Latin-1/cp1252"  # only the first bad line read
    assert guess_encoding(write_lines(tmp_path / "utf8.de", ["Grüße"])) == "; it looks like Latin-1/cp1252"


@pytest.mark.parametrize(
    ("invalid", "lines", "max_share", "outcome"),
    [
        (0, 100, 0.0, None),
        (1, 100, 0.5, None),  # 1% is not above the 1% that warns
        (2, 100, 0.5, "warning"),
        (2, 100, 0.02, "warning"),  # at the limit, not above it
        (3, 100, 0.02, "error"),
        (1, 200, 0.001, "error"),  # a limit under 1% stops without a warning first
        (5, 0, 0.5, "error"),  # no lines counts as one
    ],
)
def test_check_encoding_warns_then_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, invalid: int, lines: int, max_share: float, outcome: str | None
) -> None:
    path = tmp_path / "raw.de"
    path.write_bytes("Grüße\n".encode("cp1252"))
    with caplog.at_level(logging.WARNING):
        if outcome == "error":
            with pytest.raises(DataError) as excinfo:
                check_encoding(path, "https://example.org/c.de", invalid, lines, max_share)
            message = assert_one_line(excinfo, f"https://example.org/c.de (read from {path}): {invalid:,} of {lines:,}")
            assert message.endswith(
                "looks like Latin-1/cp1252; convert it to UTF-8 (e.g. iconv -f cp1252 -t utf-8) "
                "or raise cleaning.max_invalid_utf8"
            )
        else:
            check_encoding(path, str(path), invalid, lines, max_share)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if outcome == "warning":
        share = f"{invalid / lines:.1%}"
        expected = f"{path}: {invalid} of {lines} lines ({share}) are not valid UTF-8; it looks like Latin-1/cp1252"
        assert warnings == [f"{expected}; they are dropped"]
    else:
        assert warnings == []
