"""Model files by URL: downloaded once into a local cache, verified, then used with no network call at all.

The cache is ``$ELMO_KERAS_CACHE``, else ``$XDG_CACHE_HOME/elmo_keras``, else ``~/.cache/elmo_keras``. Each URL
has its own folder, ``<first 16 hex digits of sha256(URL)>/``, holding:

    NAME               the file, under the URL's own name: only ever put there whole and verified (or by hand)
    NAME.record.json   URL, size and sha256 of what was downloaded: a cached copy is checked against it
    NAME.part          an unfinished download; the next try resumes it with an HTTP Range request
    NAME.lock          serialises processes fetching the same URL (released by the OS if one is killed)

A download is checked against the size the server announced and, when one is given, a sha256, and against its
kind (:data:`KINDS`, :func:`kind_problem`: hdf5 opens as HDF5, json parses, text is UTF-8, zip opens as a ZIP
archive) while still ``NAME.part``: a file that fails a check is deleted, never cached. What it holds is then
checked by the reader (e.g. :func:`elmo_keras.io.weights.read_weights_hdf5`: the released layout, finite values).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import urllib.parse
import zipfile
from collections.abc import Iterator

import requests
from tqdm import tqdm

from elmo_keras.errors import InputError
from elmo_keras.utils.files import publish, write_json

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

CACHE_ENV = "ELMO_KERAS_CACHE"
#: (connect, read) timeouts in seconds: a network that does not answer fails soon instead of hanging.
TIMEOUT = (10.0, 60.0)
_CHUNK = 1 << 16  # bytes per read: a connection that breaks loses at most the read in progress
_MISSING = "is not there"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")
#: What a downloaded file of each kind must be (its check: HDF5 opens, JSON parses, text decodes as UTF-8, a ZIP
#: archive's table of contents reads; its members are checked when they are extracted, see
#: :mod:`elmo_keras.io.archive`).
KINDS = {
    "hdf5": "an HDF5 file",
    "json": "a JSON file",
    "text": "UTF-8 text",
    "gzip": "gzip-compressed UTF-8 text",
    "zip": "a ZIP archive",
}


class RemoteUnavailable(InputError):
    """A URL's file is not cached and cannot be downloaded now (offline, unreachable, or an HTTP error)."""


def is_url(path: object) -> bool:
    """``path`` is an http(s) URL (and not a local path).

    Args:
        path: anything; only a str can be a URL.

    Returns:
        bool.

    Example:

    >>> from elmo_keras.io.download import is_url
    >>> is_url("https://example.com/weights.hdf5"), is_url("weights.hdf5")
    (True, False)
    """
    return isinstance(path, str) and path.lower().startswith(("http://", "https://"))


def cache_dir() -> str:
    """The download cache folder (see the module doc)."""
    if os.environ.get(CACHE_ENV):
        return os.path.abspath(os.path.expanduser(os.environ[CACHE_ENV]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "elmo_keras")


def cache_path(url: str) -> str:
    """The file ``url`` is downloaded to, which is also where it can be placed by hand for offline use.

    Args:
        url: an http(s) URL.

    Returns:
        ``CACHE/<16 hex digits of the URL's sha256>/<the URL's file name>``.
    """
    name = os.path.basename(urllib.parse.urlparse(url).path) or "download"
    return os.path.join(cache_dir(), hashlib.sha256(url.encode("utf-8")).hexdigest()[:16], name)


def is_cached(url: str) -> bool:
    """A copy of ``url`` is in the cache (not verified: that happens when it is used).

    Args:
        url: an http(s) URL.

    Returns:
        bool.
    """
    return os.path.isfile(cache_path(url))


def local_file(path_or_url: str | os.PathLike, kind: str | None = None) -> str:
    """A model file's local path: a path is returned as it is, a URL is fetched once (:func:`fetch`, ``kind``
    checked).

    Args:
        path_or_url: a local path or an http(s) URL.
        kind: what a download must be, a key of :data:`KINDS`, or ``None`` for any bytes.

    Returns:
        A local path.
    """
    return fetch(path_or_url, kind=kind) if is_url(path_or_url) else os.fspath(path_or_url)


def fetch(url: str, sha256: str | None = None, progress: bool = True, kind: str | None = None) -> str:
    """The path of a verified cached copy of ``url``, downloading it first unless there is one.

    A cached copy is checked with no network call (the size and sha256 recorded when it was downloaded, and
    ``sha256`` when given); a bad copy is downloaded again. A download must also be of ``kind`` (a key of
    :data:`KINDS`; None: any bytes). Raises :class:`RemoteUnavailable` when the file is needed and cannot be
    downloaded (the message names the path where it can be placed by hand), and
    :class:`~elmo_keras.errors.InputError` when the server sends bytes that fail the checks (nothing is cached)
    or the cache folder cannot be written.

    Args:
        url: an http(s) URL.
        sha256: the expected hex digest, or ``None`` to trust the first download.
        progress: show a progress bar on stderr while downloading.
        kind: what the file must be, a key of :data:`KINDS`, or ``None`` for any bytes.

    Returns:
        The path of the cached copy (see :func:`cache_path`).
    """
    path = cache_path(url)
    if _cached_problem(path, sha256) is None:
        return path
    with cache_lock(path):
        problem = _cached_problem(path, sha256)
        if problem is None:  # another process finished it while this one waited for the lock
            return path
        try:
            _download(url, path, sha256, progress, kind)
        except RemoteUnavailable as err:
            damaged = "" if problem == _MISSING else f"the cached copy {problem}, and "
            raise RemoteUnavailable(
                f"{damaged}{err}. To use it offline, download it elsewhere and place it at {path}"
            ) from None
    return path


def cached_copy_hint(path: str) -> str:
    """For an error about the content of ``path``: how to download it again when it is a cached copy, else "".

    Args:
        path: a local file.

    Returns:
        A hint starting with ``"; "``, or ``""``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.dirname(folder) != cache_dir():
        return ""
    return f"; it is a cached download: delete the folder {folder} to download it again"


def file_sha256(path: str) -> str:
    """Hex sha256 of a file's bytes.

    Args:
        path: the file.

    Returns:
        The digest, 64 hex characters.
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _record_path(path: str) -> str:
    return path + ".record.json"


def recorded_sha256(path: str) -> str | None:
    """The sha256 recorded when ``path`` was downloaded (what :func:`fetch` checks a cached copy against).

    Args:
        path: a cached download (see :func:`cache_path`).

    Returns:
        The hex digest, or ``None`` when there is no record (a file placed by hand, or not a download).
    """
    try:
        with open(_record_path(path), encoding="utf-8") as f:
            digest = json.load(f).get("sha256")
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) else None


def _cached_problem(path: str, sha256: str | None) -> str | None:
    """None when ``path`` is there and matches its download record (and ``sha256``); else what is wrong."""
    if not os.path.isfile(path):
        return _MISSING
    try:
        with open(_record_path(path), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}  # placed by hand: only a given sha256 can be checked
    size, expected_size = os.path.getsize(path), record.get("size")
    if expected_size is not None and size != expected_size:
        return f"has {size} bytes instead of {expected_size} (truncated or damaged)"
    expected_sha = sha256 or record.get("sha256")
    if expected_sha and file_sha256(path) != expected_sha:
        return f"does not have the sha256 {expected_sha} (damaged)"
    return None


@contextlib.contextmanager
def cache_lock(path: str, what: str = "download") -> Iterator[None]:
    """Hold an exclusive lock on ``path + ".lock"`` for the ``with`` block, waiting for another process that holds
    it (released on exit, or by the OS when the process dies), creating the folder; serialises the processes that
    fill one cache entry (a download, an archive's extraction).

    Args:
        path: the cache entry (file or folder) being made.
        what: what is being put in the cache, for the error message.

    Returns:
        A context manager; InputError naming the cache when its folder cannot be written.
    """
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = open(path + ".lock", "a")
    except OSError as err:  # NotADirectoryError, PermissionError, read-only file system ...
        where = f"{CACHE_ENV}={os.environ[CACHE_ENV]}" if os.environ.get(CACHE_ENV) else f"the cache {cache_dir()}"
        raise InputError(
            f"cannot {what} into {where}: {err.strerror} ({err.filename}); set {CACHE_ENV} to a writable folder"
        ) from None
    with lock:
        if fcntl is not None:  # POSIX; elsewhere (Windows) downloads of one URL are not serialised
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _download(url: str, path: str, sha256: str | None, progress: bool, kind: str | None) -> None:
    """Download ``url`` to ``path.part`` (resuming what is there), verify it, record it, rename it to ``path``."""
    part = path + ".part"
    total = _fetch_resuming(url, part, progress)
    try:
        digest = _verified_sha256(part, total, sha256)
    except InputError as err:
        os.remove(part)
        raise InputError(f"the download of {url} is not the expected file: {err}; it was deleted, try again") from None
    problem = None if kind is None else kind_problem(part, kind)
    if problem:
        os.remove(part)
        raise InputError(
            f"the download of {url} is not {KINDS[kind]}: {problem}; it was deleted, nothing was cached: check the URL"
        )
    write_json(_record_path(path), {"url": url, "size": os.path.getsize(part), "sha256": digest})
    publish(part, path)


def _verified_sha256(part: str, total: int | None, sha256: str | None) -> str:
    """The sha256 of a finished download, after checking its size (``total``) and ``sha256`` (when given)."""
    size = os.path.getsize(part)
    if total is not None and size != total:
        raise InputError(f"{size} bytes arrived, the server announced {total}")
    digest = file_sha256(part)
    if sha256 and digest != sha256:
        raise InputError(f"its sha256 is {digest}, expected {sha256} (changed on the server or damaged on the way)")
    return digest


def kind_problem(path: str, kind: str) -> str | None:
    """What is wrong with the file at ``path`` as a file of ``kind`` (see :data:`KINDS`): the check of a download,
    and of each file extracted from an archive (:mod:`elmo_keras.io.archive`).

    Args:
        path: the file.
        kind: a key of :data:`KINDS`.

    Returns:
        `None` when the file is of ``kind``, else what is wrong.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.io.download import kind_problem

    path = os.path.join(tempfile.mkdtemp(), "options.json")
    with open(path, "w") as f:
        f.write('{"lstm": {}}')
    assert kind_problem(path, "json") is None and kind_problem(path, "hdf5") is not None
    ```
    """
    with open(path, "rb") as f:
        if f.read(64).lstrip().lower().startswith((b"<!doctype html", b"<html")):
            return "the server sent an HTML page (an error or sign-in page?)"
    try:
        if kind == "hdf5":
            import h5py

            h5py.File(path, "r").close()
        elif kind == "zip":
            zipfile.ZipFile(path).close()
        elif kind == "json":
            with open(path, encoding="utf-8") as f:
                json.loads(f.read())
        else:  # UTF-8 text, plain or gzip-compressed: decoded a block at a time (memory stays bounded)
            with (gzip.open if kind == "gzip" else open)(path, "rt", encoding="utf-8") as f:
                while f.read(1 << 20):
                    pass
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:  # not HDF5 / gzip; JSON, UTF-8; not a ZIP
        return str(err)
    return None


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def _fetch_resuming(url: str, part: str, progress: bool) -> int | None:
    """Fill ``part`` from ``url``, resuming after a broken connection as long as each try gets further.

    Returns the file size the server announced (None if it did not say).
    """
    while True:
        before = _size(part)
        try:
            return _fetch_once(url, part, before, progress)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
            if _size(part) <= before:  # no progress: offline, or the server stopped sending
                kept = f"; {_size(part)} bytes are kept in {part}, the next try resumes" if _size(part) else ""
                raise RemoteUnavailable(f"cannot download {url} ({_root_cause(err)}{kept})") from None


def _root_cause(err: BaseException) -> str:
    """The first cause of a chain of network errors, e.g. 'ConnectionRefusedError: [Errno 111] Connection refused'."""
    while err.__cause__ or err.__context__:
        err = err.__cause__ or err.__context__
    return f"{type(err).__name__}: {err}"


def _fetch_once(url: str, part: str, have: int, progress: bool) -> int | None:
    """One request: ask for the bytes after the ``have`` already in ``part`` (Range), write what arrives.

    A 206 answer is appended; a 200 (a server that ignores Range) restarts the file from its first byte.
    """
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={have}-"} if have else {})}
    with requests.get(url, headers=headers, stream=True, timeout=TIMEOUT) as response:
        if response.status_code == 416 and have:  # asked past the end: the part is whole, or from another file
            if _announced_total(response) == have:
                return have
            os.remove(part)
            return _fetch_once(url, part, 0, progress)
        if response.status_code >= 400:
            raise RemoteUnavailable(f"cannot download {url}: HTTP {response.status_code} {response.reason}")
        start, total = 0, _int_header(response, "Content-Length")
        if response.status_code == 206:
            start, total = _content_range(response)
            if start != have:
                raise InputError(
                    f"{url}: asked for the bytes from {have} on, the server sent them from {start}; "
                    f"delete {part} and try again"
                )
        _write_body(response, part, start, total, progress)
        return total


def _write_body(response: requests.Response, part: str, start: int, total: int | None, progress: bool) -> None:
    """Append the body to ``part`` at ``start`` (0: truncate first), with a progress bar (bytes, rate, ETA)."""
    name = os.path.basename(part[: -len(".part")])
    with (
        open(part, "ab" if start else "wb") as f,
        tqdm(
            total=total, initial=start, unit="B", unit_scale=True, unit_divisor=1024, desc=name, disable=not progress
        ) as bar,
    ):
        for chunk in response.iter_content(_CHUNK):
            f.write(chunk)
            bar.update(len(chunk))
        f.flush()
        os.fsync(f.fileno())


def _int_header(response: requests.Response, name: str) -> int | None:
    value = response.headers.get(name, "")
    return int(value) if value.isdigit() else None


def _content_range(response: requests.Response) -> tuple[int, int | None]:
    """'Content-Range: bytes START-END/TOTAL' -> (START, TOTAL or None when '*')."""
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if not match:
        raise InputError(
            f"{response.url}: a 206 answer without a valid Content-Range "
            f"({response.headers.get('Content-Range')!r}); the server is misconfigured"
        )
    return int(match.group(1)), None if match.group(2) == "*" else int(match.group(2))


def _announced_total(response: requests.Response) -> int | None:
    """The TOTAL of a 416 answer's 'Content-Range: bytes */TOTAL'."""
    match = re.fullmatch(r"bytes \*/(\d+)", response.headers.get("Content-Range", "").strip())
    return int(match.group(1)) if match else None
