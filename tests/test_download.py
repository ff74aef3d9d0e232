"""Tests of nmt.data.download against the shared mirror and a loopback HTTP server."""

import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import MIRROR

from nmt.data.download import download, mirror_path, part_path, validator_path
from nmt.errors import DownloadError

needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=f"data mirror not found at {MIRROR}")
MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
TEST_DE_SHA256 = "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"
BODY = b"".join(b"line %d of a corpus served over loopback\n" % i for i in range(2000))
# The file of another URL (another release, the other language order of an OPUS pair), as long as BODY.
OTHER = BODY.upper()


def assert_one_line(excinfo: pytest.ExceptionInfo, *names: str) -> str:
    """Check that the error message is one line that contains every one of ``names``."""
    message = str(excinfo.value)
    assert "\n" not in message
    for name in names:
        assert name in message
    return message


def assert_nothing_left(dest: Path) -> None:
    assert not dest.exists()
    assert not dest.with_name(dest.name + ".manifest.json").exists()


class CorpusHandler(BaseHTTPRequestHandler):
    """Serves ``BODY`` under paths that each simulate one server behaviour."""

    def do_GET(self) -> None:
        server = self.server
        server.requests.append((self.path, dict(self.headers)))
        hits = server.hits[self.path] = server.hits.get(self.path, 0) + 1
        if self.path == "/missing.gz":
            self.send_error(404, "Not Found")
        elif self.path == "/forbidden.gz":
            self.send_error(403, "Forbidden")
        elif self.path == "/always500.gz" or (self.path == "/flaky.gz" and hits <= 2):
            self.send_error(500, "Internal Server Error")
        elif self.path == "/slow.gz":
            time.sleep(0.5)
            self.send_body(BODY)
        elif self.path == "/drop.gz" and hits == 1:
            # Promise the whole file, send half, hang up: the client must keep the half and resume.
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY[: len(BODY) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/etag.gz":
            # A file that changed from BODY (ETag "v1") to OTHER ("v2"); a range of a stale version is refused by
            # sending the whole file, as If-Range asks (RFC 9110, 13.1.5).
            ranged = self.headers.get("Range") and self.headers.get("If-Range") in (None, '"v2"')
            start = int(self.headers["Range"].removeprefix("bytes=").removesuffix("-")) if ranged else 0
            self.send_response(206 if ranged else 200)
            self.send_header("ETag", '"v2"')
            if ranged:
                self.send_header("Content-Range", f"bytes {start}-{len(OTHER) - 1}/{len(OTHER)}")
            self.send_header("Content-Length", str(len(OTHER) - start))
            self.end_headers()
            self.wfile.write(OTHER[start:])
        elif self.path in ("/data.gz", "/flaky.gz", "/drop.gz", "/norange.gz", "/other.gz"):
            body = OTHER if self.path == "/other.gz" else BODY
            ranged = self.headers.get("Range") and self.path != "/norange.gz"
            start = int(self.headers["Range"].removeprefix("bytes=").removesuffix("-")) if ranged else 0
            if start >= len(body):
                self.send_error(416, "Range Not Satisfiable")
            elif ranged:
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                self.wfile.write(body[start:])
            else:
                self.send_body(body)
        else:
            self.send_error(404, "Not Found")

    def send_body(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    """An HTTP server on a free loopback port; ``server.url`` is its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), CorpusHandler)
    httpd.daemon_threads = True
    httpd.requests, httpd.hits = [], {}
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.org/a/b.gz", "example.org/a/b.gz"),
        ("http://example.org:8080/a/b.gz", "example.org:8080/a/b.gz"),
        ("https://Example.ORG/data%20set/x.gz", "example.org/data set/x.gz"),
        (
            f"{MULTI30K}/val.de.gz",
            "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/val.de.gz",
        ),
    ],
)
def test_mirror_path(tmp_path: Path, url: str, expected: str) -> None:
    assert mirror_path(url, tmp_path) == tmp_path / expected


@pytest.mark.parametrize("url", ["https://example.org/../etc/passwd", "https://example.org/", "ftp://x/y"])
def test_mirror_path_rejects(tmp_path: Path, url: str) -> None:
    with pytest.raises(DownloadError) as excinfo:
        mirror_path(url, tmp_path)
    assert_one_line(excinfo, url)


@needs_mirror
def test_download_from_mirror_with_real_checksum(tmp_path: Path) -> None:
    url = f"{MULTI30K}/test_2016_flickr.de.gz"
    dest = tmp_path / "raw" / "test.de.gz"
    manifest = download(url, dest, sha256=TEST_DE_SHA256.upper(), mirror=MIRROR)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == TEST_DE_SHA256
    assert len(gzip.decompress(dest.read_bytes()).splitlines()) == 1000
    assert manifest["source"] == str(mirror_path(url, MIRROR))
    assert manifest["sha256"] == TEST_DE_SHA256
    assert not dest.with_name("test.de.gz.part").exists()


@needs_mirror
def test_mirror_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_MIRROR", str(MIRROR))
    manifest = download(f"{MULTI30K}/test_2016_flickr.de.gz", tmp_path / "t.gz", sha256=TEST_DE_SHA256)
    assert manifest["source"] == str(mirror_path(f"{MULTI30K}/test_2016_flickr.de.gz", MIRROR))


@needs_mirror
def test_missing_mirror_file(tmp_path: Path) -> None:
    url = f"{MULTI30K}/test_2099.de.gz"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", mirror=MIRROR)
    assert_one_line(excinfo, url, str(mirror_path(url, MIRROR)))
    assert_nothing_left(tmp_path / "x.gz")


def test_missing_mirror_root(tmp_path: Path) -> None:
    url = "https://example.org/corpus.gz"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", mirror=tmp_path / "no_mirror")
    assert_one_line(excinfo, url, str(tmp_path / "no_mirror" / "example.org" / "corpus.gz"))


@pytest.mark.parametrize("as_uri", [True, False], ids=["file_url", "local_path"])
def test_local_sources(tmp_path: Path, as_uri: bool) -> None:
    src = tmp_path / "my corpus.txt"
    src.write_bytes(BODY)
    url = src.as_uri() if as_uri else str(src)
    dest = tmp_path / "out" / "corpus.txt"
    manifest = download(url, dest, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY
    assert manifest["url"] == url
    assert manifest["source"] == str(src)


def test_a_local_path_under_home_and_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~`` is the home folder, as in a shell; a folder where the corpus file should be is named as one."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.txt").write_bytes(BODY)
    manifest = download("~/data/corpus.txt", tmp_path / "out" / "corpus.txt")
    assert manifest["source"] == str(tmp_path / "data" / "corpus.txt")
    assert (tmp_path / "out" / "corpus.txt").read_bytes() == BODY
    with pytest.raises(DownloadError) as excinfo:
        download("~/data", tmp_path / "out" / "dir.txt")
    assert assert_one_line(excinfo, "~/data") == f"~/data: {tmp_path / 'data'} is a directory, not a corpus file"


def test_manifest_contents(tmp_path: Path) -> None:
    src = tmp_path / "corpus.txt"
    src.write_bytes(BODY)
    dest = tmp_path / "corpus.copy"
    before = datetime.now(UTC).replace(microsecond=0)
    manifest = download(str(src), dest)
    on_disk = json.loads((tmp_path / "corpus.copy.manifest.json").read_text())
    assert on_disk == manifest
    assert set(manifest) == {"url", "source", "size", "sha256", "date"}
    assert manifest["size"] == len(BODY)
    assert manifest["sha256"] == hashlib.sha256(BODY).hexdigest()
    date = datetime.fromisoformat(manifest["date"])
    assert date.utcoffset().total_seconds() == 0
    assert before <= date <= datetime.now(UTC)


def test_checksum_mismatch(tmp_path: Path) -> None:
    src = tmp_path / "corpus.txt"
    src.write_bytes(BODY)
    dest = tmp_path / "dest.txt"
    wrong = "0" * 64
    with pytest.raises(DownloadError) as excinfo:
        download(src.as_uri(), dest, sha256=wrong)
    assert_one_line(excinfo, src.as_uri(), wrong, hashlib.sha256(BODY).hexdigest())
    assert_nothing_left(dest)
    assert list(tmp_path.iterdir()) == [src]


@pytest.mark.parametrize("url", ["/no/such/corpus.gz", "file:///no/such/corpus.gz", "ftp://example.org/c.gz"])
def test_bad_local_source(tmp_path: Path, url: str) -> None:
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz")
    assert_one_line(excinfo, url)
    assert list(tmp_path.iterdir()) == []


def test_http_download_sets_user_agent(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    url = f"{server.url}/data.gz"
    manifest = download(url, tmp_path / "data.gz", sha256=hashlib.sha256(BODY).hexdigest())
    assert (tmp_path / "data.gz").read_bytes() == BODY
    assert manifest["source"] == url
    assert server.requests[0][1]["User-Agent"].startswith("nmt/")


@pytest.mark.parametrize(("path", "status"), [("/missing.gz", "HTTP 404 Not Found"), ("/forbidden.gz", "HTTP 403")])
def test_http_client_error_fails_at_once(tmp_path: Path, server: ThreadingHTTPServer, path: str, status: str) -> None:
    url = f"{server.url}{path}"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", backoff=0.01)
    assert_one_line(excinfo, status, url)
    assert server.hits[path] == 1
    assert_nothing_left(tmp_path / "x.gz")


def test_http_500_then_success(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    download(f"{server.url}/flaky.gz", tmp_path / "x.gz", retries=4, backoff=0.01)
    assert (tmp_path / "x.gz").read_bytes() == BODY
    assert server.hits["/flaky.gz"] == 3


def test_http_500_exhausts_retries(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    url = f"{server.url}/always500.gz"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", retries=2, backoff=0.01)
    assert_one_line(excinfo, url, "HTTP 500")
    assert server.hits["/always500.gz"] == 3
    assert_nothing_left(tmp_path / "x.gz")


def test_timeout_is_retried_then_fails(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    url = f"{server.url}/slow.gz"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", retries=1, backoff=0.01, timeout=0.1)
    assert "timed out" in assert_one_line(excinfo, url)
    assert server.hits["/slow.gz"] == 2


def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/corpus.gz"
    with pytest.raises(DownloadError) as excinfo:
        download(url, tmp_path / "x.gz", retries=1, backoff=0.01)
    assert_one_line(excinfo, url, "failed after 2 attempts")


def test_resume_with_range(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    dest = tmp_path / "data.gz"
    part_path(dest, f"{server.url}/data.gz").write_bytes(BODY[:1000])
    download(f"{server.url}/data.gz", dest, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY
    assert server.requests[0][1]["Range"] == "bytes=1000-"
    assert not list(tmp_path.glob("*.part"))


def test_restart_when_range_ignored(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    dest = tmp_path / "data.gz"
    part_path(dest, f"{server.url}/norange.gz").write_bytes(b"stale bytes from another version")
    download(f"{server.url}/norange.gz", dest)
    assert dest.read_bytes() == BODY


def test_resume_after_dropped_connection(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    dest = tmp_path / "data.gz"
    download(f"{server.url}/drop.gz", dest, backoff=0.01, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY
    assert server.requests[1][1]["Range"] == f"bytes={len(BODY) // 2}-"


def test_restart_when_part_is_too_long(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    dest = tmp_path / "data.gz"
    part_path(dest, f"{server.url}/data.gz").write_bytes(BODY + b"junk")
    download(f"{server.url}/data.gz", dest, backoff=0.01, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY
    assert server.hits["/data.gz"] == 2


def test_part_of_another_url_is_not_resumed(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    """A download that broke off leaves a .part; a later download of another URL to the same file must not
    append to those bytes (fetch_opus tries both language orders of a pair into one destination)."""
    dest = tmp_path / "data.gz"
    with pytest.raises(DownloadError):
        download(f"{server.url}/drop.gz", dest, retries=0)
    assert [p.stat().st_size for p in tmp_path.glob("data.gz*.part")] == [len(BODY) // 2]
    download(f"{server.url}/other.gz", dest, sha256=hashlib.sha256(OTHER).hexdigest())
    assert dest.read_bytes() == OTHER
    assert "Range" not in server.requests[-1][1]
    assert not list(tmp_path.glob("data.gz*.part"))  # the other URL's part is gone once dest is complete


def test_a_part_of_a_file_that_changed_on_the_server_is_not_resumed(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    """The validator of a partial download goes with the resume as If-Range: the server sends the new version
    whole (before, its tail was appended to the old version's head)."""
    dest, url = tmp_path / "data.gz", f"{server.url}/etag.gz"
    part = part_path(dest, url)
    part.write_bytes(BODY[:1000])
    validator_path(part).write_text(json.dumps({"if_range": '"v1"'}))
    download(url, dest)
    assert dest.read_bytes() == OTHER and server.requests[0][1]["If-Range"] == '"v1"'
    assert not list(tmp_path.glob("data.gz*.part*"))
    # Broken off once more, the part of the new version resumes under its own validator.
    part.write_bytes(OTHER[:1000])
    validator_path(part).write_text(json.dumps({"if_range": '"v2"'}))
    download(url, dest)
    assert dest.read_bytes() == OTHER and server.requests[-1][1]["Range"] == "bytes=1000-"


def test_a_part_without_validator_or_sha256_starts_over(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    """Nothing can tell whether such a part is of the file the server has now: it is downloaded again whole."""
    dest = tmp_path / "data.gz"
    part_path(dest, f"{server.url}/data.gz").write_bytes(OTHER[:1000])
    download(f"{server.url}/data.gz", dest)
    assert dest.read_bytes() == BODY and "Range" not in server.requests[0][1]
