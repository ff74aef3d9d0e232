"""Tests of nmt.data.importers on archives, TSV files and mirror trees built in tmp_path."""

import gzip
import hashlib
import io
import json
import lzma
import os
import socket
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, assert_one_line
from sacrebleu.dataset import DATASETS
from sacrebleu.utils import SACREBLEU_DIR

from nmt import errors
from nmt.data.download import mirror_path
from nmt.data.importers import (
    extract_member,
    extract_tsv_column,
    fetch_opus,
    fetch_sacrebleu,
    import_plain,
    opus_member,
    opus_urls,
    sacrebleu_downloads,
)
from nmt.errors import ConfigError, DataError, DownloadError

WMT14_URL = "https://statmt.org/wmt14/test-filtered.tgz"
WMT14_MD5 = "84c597844c1542e29c2aff23aaee4310"


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def make_tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to open a network connection."""

    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"network access to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_extract_zip_member(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "corpus.zip", {"README": b"read me", "data/train.de": b"Hallo\nWelt\n"})
    dest = tmp_path / "out" / "train.de"
    extract_member(archive, "data/train.de", dest)
    assert dest.read_bytes() == b"Hallo\nWelt\n"
    assert list(dest.parent.iterdir()) == [dest]


@pytest.mark.parametrize("mode", ["w:gz", "w:xz", "w"])
def test_extract_tar_member_by_content(tmp_path: Path, mode: str) -> None:
    # The name says nothing about the format: it is detected from the bytes.
    archive = make_tar(tmp_path / "corpus.data", {"./test/news.en": b"one\ntwo\n", "test/news.de": b"x"}, mode)
    dest = tmp_path / "news.en"
    extract_member(archive, "test/news.en", dest)
    assert dest.read_bytes() == b"one\ntwo\n"


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_missing_member_lists_available(tmp_path: Path, kind: str) -> None:
    members = {f"X.de-en.{i}": b"" for i in range(7)}
    archive = make_zip(tmp_path / "a.zip", members) if kind == "zip" else make_tar(tmp_path / "a.tgz", members)
    with pytest.raises(DataError) as excinfo:
        extract_member(archive, "X.en-de.en", tmp_path / "out")
    message = assert_one_line(excinfo, archive, "X.en-de.en", "X.de-en.0", "X.de-en.4", "7 in all")
    assert "X.de-en.5" not in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("member", ["../evil", "a/../../evil", "/etc/passwd", "..\\evil"])
@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_escaping_member_names_refused(tmp_path: Path, kind: str, member: str) -> None:
    members = {member: b"pwned"}
    archive = make_zip(tmp_path / "a.zip", members) if kind == "zip" else make_tar(tmp_path / "a.tgz", members)
    with pytest.raises(DataError) as excinfo:
        extract_member(archive, member, tmp_path / "out" / "x")
    assert_one_line(excinfo, archive, member, "escapes")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("member_type", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE])
def test_tar_special_members_refused(tmp_path: Path, member_type: bytes) -> None:
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("corpus.en")
        info.type = member_type
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(DataError) as excinfo:
        extract_member(archive, "corpus.en", tmp_path / "corpus.en")
    assert_one_line(excinfo, archive, "corpus.en", "not a regular file")
    assert not (tmp_path / "corpus.en").exists()


def test_zip_symlink_member_refused(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("corpus.en")
        info.external_attr = 0o120777 << 16  # S_IFLNK: the entry's bytes are a link target
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(DataError) as excinfo:
        extract_member(archive, "corpus.en", tmp_path / "corpus.en")
    assert_one_line(excinfo, archive, "corpus.en", "not a regular file")


def test_not_an_archive(tmp_path: Path) -> None:
    archive = tmp_path / "corpus.zip"
    archive.write_bytes(gzip.compress(b"just text\n" * 100))
    with pytest.raises(DataError) as excinfo:
        extract_member(archive, "corpus.en", tmp_path / "corpus.en")
    assert assert_one_line(excinfo) == f"{archive}: not a zip or tar archive"


def test_missing_archive(tmp_path: Path) -> None:
    with pytest.raises(DataError) as excinfo:
        extract_member(tmp_path / "none.zip", "a", tmp_path / "a")
    assert_one_line(excinfo, tmp_path / "none.zip", "no such file")


@pytest.mark.parametrize("compress", [bytes, gzip.compress, lzma.compress], ids=["plain", "gzip", "xz"])
def test_extract_tsv_column_keeps_alignment(tmp_path: Path, compress) -> None:
    raw = b"a\tb\tc\nshort\n\xff\tbad utf-8\tz\n\nd\te\tf\n"
    path = tmp_path / "corpus.tsv"
    path.write_bytes(compress(raw))
    dest = tmp_path / "out" / "corpus.trg"
    assert extract_tsv_column(path, 1, dest) == 3
    assert dest.read_text(encoding="utf-8").split("\n") == ["b", "", "", "", "e", ""]
    # The short line lacks the other side: empty on this side too (an empty line is an empty pair, not counted).
    assert extract_tsv_column(path, 0, tmp_path / "corpus.src") == 2
    assert (tmp_path / "corpus.src").read_text(encoding="utf-8").split("\n") == ["a", "", "", "", "d", ""]


def test_a_tab_inside_a_field_empties_its_line_on_every_side(tmp_path: Path, caplog) -> None:
    """A line with more fields than the first (a tab inside a field) would give one side a cut sentence and the
    other the rest of it: every column writes it empty, so the cleaning drops the pair and counts it."""
    path = tmp_path / "c.tsv"
    text = "\na dog\tein Hund\nthe red\tcar\tdas rote Auto\ntwo cats\tzwei Katzen\n"  # the first line empty
    path.write_text(text, encoding="utf-8")
    sides = []
    for column in (0, 1):
        assert extract_tsv_column(path, column, tmp_path / f"{column}.txt", "corpus.tsv") == column + 1
        sides.append((tmp_path / f"{column}.txt").read_text(encoding="utf-8").splitlines())
    assert sides == [["", "a dog", "", "two cats"], ["", "ein Hund", "", "zwei Katzen"]]
    assert (
        "corpus.tsv: 1 of 4 lines have another number of tab-separated fields than the first line with text (2"
        in caplog.text
    )


def test_a_tsv_column_no_line_has_is_an_error(tmp_path: Path) -> None:
    """A column beyond every line (a wrong tsv_columns) is an error naming the configured file, not a corpus of
    empty lines (a dev set of empty references, a training set whose every pair the cleaning drops)."""
    path = tmp_path / "c.tsv"
    path.write_text("a dog\tein Hund\nthe red\tcar\tdas rote Auto\n", encoding="utf-8")
    with pytest.raises(DataError) as excinfo:
        extract_tsv_column(path, 2, tmp_path / "out.txt", "data/dev.tsv")
    assert_one_line(excinfo, "data/dev.tsv: no line has a column 2 (the first line has 2 tab-separated fields)")
    assert not (tmp_path / "out.txt").exists()


def test_extract_tsv_column_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.tsv.gz"
    path.write_bytes(gzip.compress(b""))
    with pytest.raises(DataError) as excinfo:
        extract_tsv_column(path, 0, tmp_path / "out.txt")
    assert_one_line(excinfo, path, "empty")
    assert list(tmp_path.iterdir()) == [path]


def test_extract_tsv_column_negative(tmp_path: Path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("a\tb\n")
    with pytest.raises(DataError) as excinfo:
        extract_tsv_column(path, -1, tmp_path / "out.txt")
    assert_one_line(excinfo, path, "-1")


def test_opus_urls_given_order_first() -> None:
    assert opus_urls("Europarl", "v8", "en", "de") == [
        ("https://object.pouta.csc.fi/OPUS-Europarl/v8/moses/en-de.txt.zip", "en-de"),
        ("https://object.pouta.csc.fi/OPUS-Europarl/v8/moses/de-en.txt.zip", "de-en"),
    ]
    assert opus_member("Europarl", "de-en", "en") == "Europarl.de-en.en"


@pytest.fixture
def opus_mirror(tmp_path: Path) -> Path:
    """A mirror holding corpus X v1 stored, as OPUS does, under the alphabetical pair de-en."""
    mirror = tmp_path / "mirror"
    members = {"X.de-en.de": b"Hallo Welt\n", "X.de-en.en": b"Hello world\n", "README": b"OPUS"}
    make_zip(mirror / "object.pouta.csc.fi/OPUS-X/v1/moses/de-en.txt.zip", members)
    return mirror


@pytest.mark.parametrize(("src", "trg"), [("en", "de"), ("de", "en")])
def test_fetch_opus_finds_either_order(tmp_path: Path, opus_mirror: Path, no_network: None, src: str, trg: str) -> None:
    dest = tmp_path / "raw" / "X.zip"
    manifest = fetch_opus("X", "v1", src, trg, dest, mirror=opus_mirror)
    assert manifest["pair_dir"] == "de-en"
    assert manifest["url"] == "https://object.pouta.csc.fi/OPUS-X/v1/moses/de-en.txt.zip"
    assert json.loads((tmp_path / "raw" / "X.zip.manifest.json").read_text()) == manifest
    extract_member(dest, opus_member("X", manifest["pair_dir"], src), tmp_path / f"train.{src}")
    extract_member(dest, opus_member("X", manifest["pair_dir"], trg), tmp_path / f"train.{trg}")
    assert (tmp_path / "train.en").read_text() == "Hello world\n"
    assert (tmp_path / "train.de").read_text() == "Hallo Welt\n"


def test_fetch_opus_neither_order(tmp_path: Path, opus_mirror: Path, no_network: None) -> None:
    dest = tmp_path / "raw" / "Y.zip"
    with pytest.raises(DownloadError) as excinfo:
        fetch_opus("Y", "v1", "en", "de", dest, mirror=opus_mirror)
    (en_de, _), (de_en, _) = opus_urls("Y", "v1", "en", "de")
    assert_one_line(excinfo, en_de, de_en, mirror_path(de_en, opus_mirror))
    assert not dest.exists()


# sacrebleu reads $SACREBLEU once, at import: a fetch into a test cache runs in a fresh interpreter whose
# $SACREBLEU is that cache, as in the download job; offline, with an optional toy dataset added to DATASETS.
OFFLINE_SACREBLEU = """
import json, socket, sys
from sacrebleu.dataset import DATASETS, FakeSGMLDataset
from nmt import errors
from nmt.config import CorpusConfig
from nmt.errors import NmtError
from nmt.data.importers import fetch_sacrebleu, import_corpus

def refuse(self, address):
    raise AssertionError(f"network access to {address}")

socket.socket.connect = refuse
expression, toy = json.loads(sys.argv[1])
if toy:
    DATASETS["toy"] = FakeSGMLDataset("toy", **toy)
try:
    print(json.dumps({"result": eval(expression)}, default=str))
except NmtError as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


def run_with_sacrebleu_cache(cache: Path, expression: str, toy: dict | None = None) -> object:
    """Evaluate ``expression`` (over fetch_sacrebleu, import_corpus, CorpusConfig) there, with ``SACREBLEU=cache``.

    :return: its result as JSON data (paths as strings)
    :raises NmtError: the error it raised there, the same type and message
    """
    env = {**os.environ, "SACREBLEU": str(cache), "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    argv = [sys.executable, "-c", OFFLINE_SACREBLEU, json.dumps([expression, toy])]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.splitlines()[-1])
    if "error" in answer:
        raise getattr(errors, answer["error"])(answer["message"])
    return answer["result"]


def test_sacrebleu_unknown_test_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        fetch_sacrebleu("xyz", "en-de", tmp_path)
    assert assert_one_line(excinfo) == "sacrebleu test set 'xyz' is unknown"


def test_sacrebleu_unknown_langpair(tmp_path: Path, no_network: None) -> None:
    with pytest.raises(ConfigError) as excinfo:
        fetch_sacrebleu("wmt14", "en-xx", tmp_path, mirror=tmp_path)
    assert_one_line(excinfo, "wmt14", "en-xx", "en-de", "de-en", "fr-en")
    assert list(tmp_path.iterdir()) == []


def test_sacrebleu_cache_other_than_out_dir(tmp_path: Path, no_network: None) -> None:
    # This process imported sacrebleu with its own $SACREBLEU, which is not tmp_path.
    with pytest.raises(ConfigError) as excinfo:
        fetch_sacrebleu("wmt14", "en-de", tmp_path, mirror=tmp_path)
    assert_one_line(excinfo, SACREBLEU_DIR, f"SACREBLEU={tmp_path}")
    assert list(tmp_path.iterdir()) == []


def test_sacrebleu_download_locations(tmp_path: Path) -> None:
    raw = tmp_path / "wmt14/raw/wmt14.test-filtered.tgz"
    assert sacrebleu_downloads("wmt14", tmp_path) == [(WMT14_URL, raw, WMT14_MD5)]
    full = "https://statmt.org/wmt14/test-full.tgz"
    assert sacrebleu_downloads("wmt14/full", tmp_path)[0][:2] == (
        full,
        tmp_path / "wmt14/full/raw/wmt14_full.test-full.tgz",
    )
    assert mirror_path(WMT14_URL, tmp_path / "mirror") == tmp_path / "mirror/statmt.org/wmt14/test-filtered.tgz"


@pytest.mark.parametrize("test_set", sorted(DATASETS))
def test_sacrebleu_download_locations_are_sacrebleus_own(test_set: str) -> None:
    # Where sacrebleu's maybe_download puts each file (private names, used here only to check that ours agree):
    # there sacrebleu finds the files we fetched and does not download them again.
    dataset = DATASETS[test_set]
    theirs = [Path(dataset._rawdir, dataset._get_tarball_filename(url)) for url in dataset.data]
    assert [raw for _, raw, _ in sacrebleu_downloads(test_set, SACREBLEU_DIR)] == theirs


def test_product_code_uses_no_private_sacrebleu_names() -> None:
    private = ("._outdir", "._rawdir", "_get_tarball_filename", "_get_txt_file_path", "_get_langpair_metadata")
    for path in sorted([*(REPO / "nmt").rglob("*.py"), *(REPO / "workflow/scripts").glob("*.py")]):
        used = [name for name in private if name in path.read_text()]
        assert not used, f"{path} uses sacrebleu's private {', '.join(used)}"


def test_sacrebleu_missing_mirror_file(tmp_path: Path) -> None:
    out, mirror = tmp_path / "out", tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(DownloadError) as excinfo:
        run_with_sacrebleu_cache(out, f"fetch_sacrebleu('wmt14', 'en-de', {str(out)!r}, {str(mirror)!r})")
    assert_one_line(excinfo, WMT14_URL, mirror / "statmt.org/wmt14/test-filtered.tgz")


def test_sacrebleu_md5_mismatch(tmp_path: Path) -> None:
    out, mirror = tmp_path / "out", tmp_path / "mirror"
    make_tar(mirror / "statmt.org/wmt14/test-filtered.tgz", {"test/newstest2014-deen-src.en.sgm": b"fake"})
    with pytest.raises(DownloadError) as excinfo:
        run_with_sacrebleu_cache(out, f"fetch_sacrebleu('wmt14', 'en-de', {str(out)!r}, {str(mirror)!r})")
    assert_one_line(excinfo, WMT14_URL, "md5", WMT14_MD5)
    assert not (out / "wmt14/raw/wmt14.test-filtered.tgz").exists()


def sgm(lang: str, sents: list[str]) -> bytes:
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(sents, 1))
    doc = f'<doc sysid="ref" docid="d1" genre="news" origlang="en">\n{segs}</doc>\n'
    return f'<srcset setid="toy" srclang="{lang}">\n{doc}</srcset>\n'.encode()


def test_sacrebleu_through_mirror(tmp_path: Path) -> None:
    # A toy test set in sacrebleu's own format, so that sacrebleu's processing runs end to end offline.
    url = "https://example.org/toy/toy-test.tgz"
    mirror = tmp_path / "mirror"
    members = {
        "test/toy-src.en.sgm": sgm("en", ["Hello  world .", "Good morning"]),
        "test/toy-ref.de.sgm": sgm("de", ["Hallo Welt .", "Guten Morgen"]),
    }
    tarball = make_tar(mirror_path(url, mirror), members)
    md5 = hashlib.md5(tarball.read_bytes()).hexdigest()
    toy = {"data": [url], "md5": [md5], "langpairs": {"en-de": ["test/toy-src.en.sgm", "test/toy-ref.de.sgm"]}}
    out = tmp_path / "sacrebleu"
    files = run_with_sacrebleu_cache(out, f"fetch_sacrebleu('toy', 'en-de', {str(out)!r}, {str(mirror)!r})", toy)
    src, ref = map(Path, files)
    assert (src, ref) == (out / "toy/toy.en-de.src", out / "toy/toy.en-de.ref")
    assert src.read_text().splitlines() == ["Hello world .", "Good morning"]
    assert ref.read_text().splitlines() == ["Hallo Welt .", "Guten Morgen"]
    assert (out / "toy/raw/toy.toy-test.tgz").read_bytes() == tarball.read_bytes()


@pytest.mark.parametrize("as_uri", [True, False], ids=["file_url", "local_path"])
def test_import_plain_local_file(tmp_path: Path, as_uri: bool) -> None:
    src = tmp_path / "my corpus.en.gz"
    src.write_bytes(gzip.compress(b"a local corpus\n"))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = tmp_path / "raw" / "train.en.gz"
    manifest = import_plain(src.as_uri() if as_uri else str(src), dest, sha256=digest)
    assert dest.read_bytes() == src.read_bytes()
    assert manifest["source"] == str(src)
    assert manifest["sha256"] == digest


def test_import_plain_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DownloadError) as excinfo:
        import_plain(str(tmp_path / "none.gz"), tmp_path / "raw" / "x.gz")
    assert_one_line(excinfo, tmp_path / "none.gz")


def test_import_corpus_sacrebleu_test_set_with_a_slash_in_its_name(tmp_path: Path) -> None:
    config = "CorpusConfig(importer='sacrebleu', test_set='wmt14/full', langpair='en-de')"
    cache, mirror = tmp_path / "sb", tmp_path / "mirror"
    call = f"import_corpus({config}, 'en', {str(tmp_path / 'x.en')!r}, None, {str(cache)!r}, {str(mirror)!r})"
    with pytest.raises(DownloadError) as excinfo:
        run_with_sacrebleu_cache(cache, call)
    mirror_file = tmp_path / "mirror/statmt.org/wmt14/test-full.tgz"
    assert_one_line(excinfo, "https://statmt.org/wmt14/test-full.tgz", mirror_file)
    assert (cache / ".wmt14_full.lock").is_file()


def test_download_job_sets_sacrebleu_cache(tmp_path: Path) -> None:
    # The real rule: its script points $SACREBLEU at results/data/sacrebleu before sacrebleu is imported, so the
    # job gets as far as the download (the mirror is empty) instead of stopping at a cache mismatch.
    config = yaml.safe_load((REPO / "tests/integration/config.yaml").read_text())
    config["corpora"]["wmt14_test"] = {"importer": "sacrebleu", "test_set": "wmt14", "langpair": "en-de"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "mirror").mkdir()
    target = "results/data/download/wmt14_test.en"
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "1"]
    argv = [*snakemake, "--directory", str(tmp_path), target, "--config", f"mirror={tmp_path / 'mirror'}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "statmt.org/wmt14/test-filtered.tgz" in lines[0], out.stderr
    assert (tmp_path / "results/data/sacrebleu/.wmt14.lock").is_file()
