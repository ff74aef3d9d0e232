"""Fetching of corpus files from http(s), file:// or a local mirror, with retries, resume and checksums."""

import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from nmt import __version__
from nmt.atomic import hash_file, write_text
from nmt.errors import DownloadError
from nmt.progress import Progress

log = logging.getLogger(__name__)

# Environment variable naming the mirror when none is passed (the workflow sets it from config["mirror"]).
MIRROR_ENV = "NMT_MIRROR"

USER_AGENT = f"nmt/{__version__} (Python urllib; corpus download)"
CHUNK_BYTES = 1 << 20
# Client errors worth retrying: the server timed out waiting for us, or asks us to slow down.
RETRY_CLIENT_STATUS = {408, 429}


def mirror_path(url: str, mirror: str | Path) -> Path:
    """Map ``https://HOST/PATH`` to ``MIRROR/HOST/PATH``, the layout of ``wget -x``.

    :param url: an http(s) URL
    :param mirror: root folder of the mirror
    :return: the path the URL's file has inside the mirror (it need not exist)
    :raises DownloadError: if the URL is not http(s) or its path leaves the mirror
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DownloadError(f"{url}: only http(s) URLs can be looked up in a mirror")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    segments = [s for s in urllib.parse.unquote(parts.path).split("/") if s]
    if not segments or ".." in segments:
        raise DownloadError(f"{url}: URL path does not name a file inside the mirror")
    return Path(mirror, host, *segments)


def download(
    url: str,
    dest: str | Path,
    sha256: str | None = None,
    mirror: str | Path | None = None,
    retries: int = 4,
    backoff: float = 1.0,
    timeout: float = 60.0,
) -> dict:
    """Fetch ``url`` to ``dest`` atomically and write the provenance manifest ``<dest>.manifest.json``.

    Bytes go to a ``.part`` file beside ``dest`` first, named after the URL (:func:`part_path`); an
    interrupted http(s) download of the same URL is resumed from it with a Range request, and ``dest``
    appears only once the file is complete and its checksum matches. The ``.part`` files of other URLs
    (another release, the other language order of an OPUS pair) are never appended to, and are deleted
    once ``dest`` is complete.

    :param url: an http(s) URL, a ``file://`` URL or a local path
    :param dest: where the file goes; parent folders are created
    :param sha256: expected hex digest (any case); None skips the check
    :param mirror: root of a ``wget -x`` mirror; if given, http(s) URLs are read from it, not the network;
        None falls back to the environment variable ``NMT_MIRROR`` (unset or empty: the network)
    :param retries: further attempts after the first on 5xx, 408, 429, timeouts and connection errors
    :param backoff: seconds before the first retry; doubled for each later one
    :param timeout: socket timeout in seconds for connecting and for each read
    :return: the manifest: ``url``, ``source`` (mirror path, local path or url), ``size``, ``sha256``,
        ``date``
    :raises DownloadError: on a missing source, an HTTP client error, exhausted retries or a checksum mismatch
    """
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest, url)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in ("http", "https") and mirror is None:
        source = url
        _fetch_http(url, part, retries, backoff, timeout, checked=sha256 is not None)
    else:
        source_path = _get_local_source(url, mirror)
        source = str(source_path)
        log.info("copying %s from %s", url, source_path)
        try:
            shutil.copyfile(source_path, part)
        except OSError as e:
            part.unlink(missing_ok=True)
            raise DownloadError(f"{url}: cannot copy {source_path}: {e.strerror or e}") from None

    actual = hash_file(part)
    if sha256 is not None and actual != sha256.strip().lower():
        part.unlink()
        raise DownloadError(f"{url}: sha256 mismatch, expected {sha256.strip().lower()} but got {actual}")
    os.replace(part, dest)
    validator_path(part).unlink(missing_ok=True)
    _remove_stale_parts(dest)
    manifest = {
        "url": url,
        "source": source,
        "size": dest.stat().st_size,
        "sha256": actual,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_text(dest.with_name(dest.name + ".manifest.json"), json.dumps(manifest, indent=2) + "\n")
    log.info("downloaded %s to %s (%d bytes, sha256 %s)", url, dest, manifest["size"], actual)
    return manifest


def part_path(dest: str | Path, url: str) -> Path:
    """The partial file of a download of ``url`` to ``dest``: ``<dest>.<12 hex digits of sha256(url)>.part``.

    Keying it by URL keeps the bytes of one URL from being resumed as those of another.
    """
    dest = Path(dest)
    return dest.with_name(f"{dest.name}.{hashlib.sha256(url.encode()).hexdigest()[:12]}.part")


def validator_path(part: Path) -> Path:
    """Where the server's validator of a partial download is kept (``<part>.json``: its ETag or Last-Modified), which
    a resume sends as ``If-Range`` so that the server sends the whole file again if it changed since."""
    return part.with_name(part.name + ".json")


def _remove_stale_parts(dest: Path) -> None:
    """Delete the ``.part`` files (and their validators) of ``dest`` left by other URLs."""
    stale = re.compile(re.escape(dest.name) + r"\.[0-9a-f]{12}\.part(\.json)?")
    for path in dest.parent.iterdir():
        if stale.fullmatch(path.name):
            log.info("removing %s, the partial download of another URL", path)
            path.unlink(missing_ok=True)


def local_file(url: str) -> Path | None:
    """The file on disk that a ``file://`` URL (of this host) or a plain path names, whether or not it exists; a
    path's ``~`` is the user's home, as in a shell.

    :param url: a corpus location as configured
    :return: its path, or None for an http(s) URL (fetched, or read from the mirror) or another scheme
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path)) if parts.netloc in ("", "localhost") else None
    return None if "://" in url else Path(url).expanduser()


def _get_local_source(url: str, mirror: str | Path | None) -> Path:
    """Return the existing local file that stands for ``url`` (mirror copy, file:// URL or plain path)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("http", "https"):
        path = mirror_path(url, mirror)
        if not path.is_file():
            raise DownloadError(f"{url}: not in the mirror ({path} does not exist)")
        return path
    path = local_file(url)
    if path is None and parts.scheme == "file":
        raise DownloadError(f"{url}: file:// URLs on another host are not supported")
    if path is None:
        raise DownloadError(f"{url}: unsupported URL scheme '{parts.scheme}'")
    if path.is_dir():
        raise DownloadError(f"{url}: {path} is a directory, not a corpus file")
    if not path.is_file():
        raise DownloadError(f"{url}: no such file {path}")
    return path


def _fetch_http(url: str, part: Path, retries: int, backoff: float, timeout: float, checked: bool) -> None:
    """Download ``url`` into ``part``, appending to an existing ``part`` when the server honours Range.

    A part is resumed only if it can be checked to be of the file the server has now: with the validator the
    server gave when it was started (``If-Range``: a changed file comes whole), or when the caller checks the sha256
    of the result (``checked``); otherwise it is downloaded again from the start.
    """
    reason = "no attempt made"
    for attempt in range(retries + 1):
        validator = _read_validator(part)
        if part.exists() and validator is None and not checked:
            log.info("%s: the partial download has no validator and no sha256 to check it: starting over", url)
            part.unlink()
        offset = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        if offset:
            request.add_header("Range", f"bytes={offset}-")
            if validator:
                request.add_header("If-Range", validator)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                resume = offset > 0 and response.status == 206
                if not resume:
                    _write_validator(part, response.headers)
                if resume and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
                    # A 206 for some other range cannot be appended; drop the part and retry from zero.
                    part.unlink()
                    raise http.client.HTTPException(f"unexpected Content-Range for offset {offset}")
                if offset and not resume:
                    log.info("%s: the server sent the whole file (changed since, or no ranges), restarting", url)
                elif resume:
                    log.info("%s: resuming at byte %d", url, offset)
                with (
                    open(part, "ab" if resume else "wb") as f,
                    Progress(f"downloading {url}", response.length, "bytes") as progress,  # what is left of it
                ):
                    while block := response.read(CHUNK_BYTES):
                        f.write(block)
                        progress.update(len(block))
                # read(n) returns b"" when the server hangs up early; what arrived stays in the part.
                if response.length:
                    raise http.client.IncompleteRead(b"", response.length)
            return
        except urllib.error.HTTPError as e:
            e.close()
            if e.code == 416:
                # The part is already as long as (or longer than) the file: it is stale, start over.
                part.unlink(missing_ok=True)
                validator_path(part).unlink(missing_ok=True)
            elif 400 <= e.code < 500 and e.code not in RETRY_CLIENT_STATUS:
                raise DownloadError(f"HTTP {e.code} {e.reason}: {url}") from None
            reason = f"HTTP {e.code} {e.reason}"
        except urllib.error.URLError as e:
            reason = str(e.reason)
        except (OSError, http.client.HTTPException) as e:
            reason = str(e) or type(e).__name__
        if attempt < retries:
            delay = backoff * 2**attempt
            log.warning("%s: %s; retry %d/%d in %.1f s", url, reason, attempt + 1, retries, delay)
            time.sleep(delay)
    reason = " ".join(reason.split())
    raise DownloadError(f"{url}: failed after {retries + 1} attempts, last error: {reason}")


def _write_validator(part: Path, headers) -> None:
    """Keep the response's strong ETag, else its Last-Modified (what ``If-Range`` takes), beside the part."""
    etag = headers.get("ETag")
    validator = etag if etag and not etag.startswith("W/") else headers.get("Last-Modified")
    if validator:
        write_text(validator_path(part), json.dumps({"if_range": validator}))
    else:
        validator_path(part).unlink(missing_ok=True)


def _read_validator(part: Path) -> str | None:
    try:
        return json.loads(validator_path(part).read_text(encoding="utf-8"))["if_range"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
