"""Models in ZIP archives, as the NLPL vector repository publishes them (http://vectors.nlpl.eu/repository/).

An archive holds, at any folder depth:

- the options: ``options.json``, else the one ``*.json`` that parses as ELMo options (NLPL archives also hold a
  ``meta.json``, which is not options);
- the weights in the released layout: ``model.hdf5`` (NLPL's name) or ``weights.hdf5``, else the one ``*.hdf5``
  (``softmax.hdf5`` aside) that holds the datasets the options need;
- optionally ``vocab.txt`` or ``vocab.txt.gz`` (bilm-tf format: most frequent words first), and ``softmax.hdf5``.

:func:`extract_archive` extracts those files once into ``CACHE/archives/<16 hex digits of the archive's sha256>/``
(``CACHE``: :func:`elmo_keras.io.download.cache_dir`) under the names of a model folder (``options.json``,
``weights.hdf5``, ``vocab.txt`` or ``vocab.txt.gz``, ``softmax.hdf5``), so the extracted folder is itself a model
folder; ``archive.json`` there records the archive and which members they were. An archive given by URL is downloaded
first (:func:`elmo_keras.io.download.fetch`: cached, resumable, checked to be a ZIP archive). The extraction is
written into a hidden temporary folder, renamed into place when complete, under a lock: a killed extraction leaves
that temporary folder, which the next extraction of the archive deletes, never a partial model folder.

Before anything is extracted, the members to extract are checked against limits on what they expand to: at most
:data:`MAX_BYTES` together (``$ELMO_KERAS_ARCHIVE_MAX_BYTES``), and a member of 1 MiB or more at most
:data:`MAX_RATIO` times its compressed size (``$ELMO_KERAS_ARCHIVE_MAX_RATIO``); a symbolic link, device, FIFO or
socket member is refused. Each extracted file is then checked as a download is (options parse as JSON, weights and
softmax open as HDF5, the vocabulary is UTF-8 text): a failing member is an :class:`InputError` naming the archive
and the member, and the extraction is deleted; only a folder whose files all pass is published. What the files
hold is checked when they are read (:meth:`elmo_keras.io.load.ModelFiles.read`: options validated, weights of the
right shapes and finite).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import posixpath
import shutil
import stat
import urllib.parse
import zipfile

from elmo_keras.errors import InputError
from elmo_keras.io.download import (
    CACHE_ENV,
    KINDS,
    cache_dir,
    cache_lock,
    cached_copy_hint,
    fetch,
    file_sha256,
    is_url,
    kind_problem,
    recorded_sha256,
)
from elmo_keras.io.options import normalize_options
from elmo_keras.io.weights import expected_shapes
from elmo_keras.utils.files import NO_ROOM, TMP_SUFFIX, atomic_dir, write_json

#: The record of an extraction, in the extracted folder: archive, sha256, and the member behind each file.
ARCHIVE_RECORD = "archive.json"
_OPTIONS = "options.json"
_WEIGHTS = ("model.hdf5", "weights.hdf5")
_VOCABS = ("vocab.txt", "vocab.txt.gz")
_SOFTMAX = "softmax.hdf5"
_MAX_OPTIONS_BYTES = 1 << 20  # a *.json member larger than this is not read as options (options are ~1 KB)
_ZIP_MAGIC = b"PK"
#: what each extracted file must be, checked as a download is (:func:`elmo_keras.io.download.kind_problem`)
_KIND_OF = {_OPTIONS: "json", "weights.hdf5": "hdf5", _VOCABS[0]: "text", _VOCABS[1]: "gzip", _SOFTMAX: "hdf5"}
#: The environment variables that change the limits on what an archive may expand to.
MAX_BYTES_ENV, MAX_RATIO_ENV = "ELMO_KERAS_ARCHIVE_MAX_BYTES", "ELMO_KERAS_ARCHIVE_MAX_RATIO"
#: The most bytes the extracted files of one archive may take together (default 4 GiB: the largest released ELMo,
#: weights and a softmax over an 800k-word vocabulary, is about 2 GB).
MAX_BYTES = 4 << 30
#: The most times a member of 1 MiB or more may be larger than its compressed bytes (float weights compress by
#: about 1.1, text by 3 to 5; a ZIP bomb by 1,000 and more).
MAX_RATIO = 100
_RATIO_FROM = 1 << 20  # smaller members are not held to the ratio: they cannot fill a disk
_NOT_FILES = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def is_archive(source: object) -> bool:
    """``source`` names a ZIP archive: a path or an http(s) URL whose path ends in ``.zip``.

    Args:
        source: anything; only a str or path can name an archive.

    Returns:
        bool.

    Example:

    >>> from elmo_keras.io.archive import is_archive
    >>> is_archive("http://vectors.nlpl.eu/repository/20/210.zip"), is_archive("brown-small")
    (True, False)
    """
    if not isinstance(source, (str, os.PathLike)):
        return False
    name = os.fspath(source)
    path = urllib.parse.urlparse(name).path if is_url(name) else name
    return path.lower().endswith(".zip")


def extract_archive(source: str | os.PathLike, sha256: str | None = None) -> str:
    """The model folder extracted from the ZIP archive ``source`` (see the module doc), extracting it unless that
    was done before.

    Args:
        source: the archive, a path or an http(s) URL (downloaded once into the cache).
        sha256: a URL's expected sha256 (hex), or `None` to trust the first download. Defaults to `None`.

    Returns:
        The extracted folder: ``options.json`` and ``weights.hdf5``, with ``vocab.txt`` or ``vocab.txt.gz`` and
        ``softmax.hdf5`` where the archive has them.

    Raises:
        InputError: naming the archive: not found, not a ZIP archive, truncated or damaged, no options or no weights
            inside, two candidates for one file; or a download that failed.

    Example:

    ```python
    import os, shutil, tempfile
    from elmo_keras.io.archive import extract_archive
    from elmo_keras.io.load import PRESETS_DIR

    os.environ["ELMO_KERAS_CACHE"] = cache = tempfile.mkdtemp()
    zip_base = os.path.join(tempfile.mkdtemp(), "model")  # a zip of the brown-small folder
    archive = shutil.make_archive(zip_base, "zip", PRESETS_DIR, "brown-small")
    folder = extract_archive(archive)
    assert sorted(os.listdir(folder)) == [
        "archive.json", "options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"
    ]
    assert extract_archive(archive) == folder  # extracted once
    del os.environ["ELMO_KERAS_CACHE"]
    ```
    """
    name = os.fspath(source)
    if is_url(name):
        path = fetch(name, sha256, kind="zip")
        digest = recorded_sha256(path) or file_sha256(path)
    else:
        path = name
        if not os.path.isfile(path):
            raise InputError(
                f"archive {path} not found: give the path of a .zip file holding options.json and the weights "
                "(model.hdf5 or weights.hdf5), or its http(s) URL"
            )
        stat = os.stat(path)
        digest = _local_sha256(os.path.realpath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    folder = os.path.join(cache_dir(), "archives", digest[:16])
    if not os.path.isfile(os.path.join(folder, ARCHIVE_RECORD)):
        with cache_lock(folder, "extract an archive"):
            if not os.path.isfile(os.path.join(folder, ARCHIVE_RECORD)):  # not done while this one waited
                _remove_unfinished(folder)
                _extract(path, name, digest, folder)
    return folder


def archive_options(path: str | os.PathLike) -> dict:
    """The options of the model in a local ZIP archive, read without extracting anything.

    Args:
        path: the archive.

    Returns:
        The normalised options dict.

    Example:

    ```python
    import os, shutil, tempfile
    from elmo_keras.io.archive import archive_options
    from elmo_keras.io.load import PRESETS_DIR

    archive = shutil.make_archive(os.path.join(tempfile.mkdtemp(), "m"), "zip", PRESETS_DIR, "brown-small")
    assert archive_options(archive)["lstm"]["n_layers"] == 2
    ```
    """
    name = os.fspath(path)
    with _open_zip(name, name) as zf:
        member = _options_member(zf, _files(zf), name)
        return _parse_options(zf, member, name)


@functools.lru_cache(maxsize=64)
def _local_sha256(path: str, size: int, mtime_ns: int, inode: int) -> str:
    """sha256 of a local archive, once per version of the file (size, mtime and inode are the cache key)."""
    return file_sha256(path)


def _remove_unfinished(folder: str) -> None:
    """Delete what a killed extraction of ``folder`` left (hidden ``.NAME.*.tmp`` folders next to it); the caller
    holds the folder's lock, so none of them is being written."""
    parent, name = os.path.split(folder)
    for entry in os.listdir(parent):
        if entry.startswith(f".{name}.") and entry.endswith(TMP_SUFFIX):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _open_zip(path: str, source: str) -> zipfile.ZipFile:
    """``zipfile.ZipFile(path)``, or InputError naming ``source``: not a ZIP archive, or a truncated one."""
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        with open(path, "rb") as f:
            starts_as_zip = f.read(len(_ZIP_MAGIC)) == _ZIP_MAGIC
        what = "is a truncated or damaged ZIP archive" if starts_as_zip else "is not a ZIP archive"
        raise InputError(
            f"archive {source} {what} ({err}); download it again, or give a .zip of options.json and the "
            f"weights{cached_copy_hint(path)}"
        ) from None


def _files(zf: zipfile.ZipFile) -> list[str]:
    """The members that are files, without macOS metadata (``__MACOSX/``, ``._*``)."""
    return [
        info.filename
        for info in zf.infolist()
        if not info.is_dir()
        and "__MACOSX" not in info.filename.split("/")
        and not posixpath.basename(info.filename).startswith("._")
    ]


def _named(files: list[str], names: tuple[str, ...]) -> list[str]:
    return [f for f in files if posixpath.basename(f).lower() in names]


def _at_most_one(found: list[str], what: str, source: str) -> str | None:
    if len(found) > 1:
        raise InputError(
            f"archive {source} holds {len(found)} candidate {what} files ({', '.join(found)}): it must hold one "
            "model; extract the one you want and load its folder"
        )
    return found[0] if found else None


def _parse_options(zf: zipfile.ZipFile, member: str, source: str) -> dict:
    """The member's options, normalised (InputError naming the archive and the member when they are not)."""
    try:
        options = json.loads(zf.read(member).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"archive {source}: {member} is not valid JSON ({err})") from None
    return normalize_options(options, f"{source}:{member}")


def _options_member(zf: zipfile.ZipFile, files: list[str], source: str) -> str:
    """``options.json``, else the one small ``*.json`` that parses as ELMo options."""
    named = _at_most_one(_named(files, (_OPTIONS,)), "options", source)
    if named is not None:
        return named
    parsed = []
    for member in (f for f in files if f.lower().endswith(".json")):
        if zf.getinfo(member).file_size > _MAX_OPTIONS_BYTES:
            continue
        try:
            _parse_options(zf, member, source)
        except (InputError, ValueError, KeyError, TypeError, AttributeError):
            continue  # e.g. NLPL's meta.json
        parsed.append(member)
    found = _at_most_one(parsed, "options", source)
    if found is None:
        raise InputError(
            f"archive {source} has no options: no options.json, and no .json file in it holds ELMo options "
            f"(it holds {', '.join(files[:8]) or 'no files'}{' ...' if len(files) > 8 else ''}); an ELMo archive "
            "holds options.json and the weights (model.hdf5 or weights.hdf5)"
        )
    return found


def _holds_layout(zf: zipfile.ZipFile, member: str, names: list[str]) -> bool:
    """Whether the hdf5 member holds every dataset ``names`` (read in place, nothing extracted)."""
    import h5py

    try:
        with zf.open(member) as raw, h5py.File(raw, "r") as f:
            return all(name in f for name in names)
    except (OSError, ValueError):
        return False


def _weights_member(zf: zipfile.ZipFile, files: list[str], options_member: str, source: str) -> str:
    """``model.hdf5`` or ``weights.hdf5``, else the one other ``*.hdf5`` holding the released layout."""
    named = _at_most_one(_named(files, _WEIGHTS), "weight", source)
    if named is not None:
        return named
    others = [f for f in files if f.lower().endswith((".hdf5", ".h5")) and posixpath.basename(f) != _SOFTMAX]
    if others:
        names = list(expected_shapes(_parse_options(zf, options_member, source)))
        others = [f for f in others if _holds_layout(zf, f, names)]
    found = _at_most_one(others, "weight", source)
    if found is None:
        raise InputError(
            f"archive {source} has no weights: no model.hdf5 or weights.hdf5, and no other .hdf5 file in it holds "
            "the released ELMo layout that its options describe"
        )
    return found


def _members(zf: zipfile.ZipFile, source: str) -> dict[str, str]:
    """{file name in the extracted folder: archive member}."""
    files = _files(zf)
    options = _options_member(zf, files, source)
    members = {_OPTIONS: options, "weights.hdf5": _weights_member(zf, files, options, source)}
    vocab = _at_most_one(_named(files, _VOCABS), "vocabulary", source)
    if vocab is not None:
        members[_VOCABS[1] if vocab.lower().endswith(".gz") else _VOCABS[0]] = vocab
    softmax = _at_most_one(_named(files, (_SOFTMAX,)), "softmax", source)
    if softmax is not None:
        members[_SOFTMAX] = softmax
    return members


def expansion_limits() -> tuple[int, float]:
    """The limits on what an archive may expand to: (:data:`MAX_BYTES`, :data:`MAX_RATIO`), or the values of
    ``$ELMO_KERAS_ARCHIVE_MAX_BYTES`` (an integer number of bytes) and ``$ELMO_KERAS_ARCHIVE_MAX_RATIO`` (a number)
    where they are set.

    Returns:
        ``(max_bytes, max_ratio)``.

    Raises:
        InputError: a variable that is not a positive number, naming it.

    Example:

    ```python
    import os
    from elmo_keras.io.archive import MAX_BYTES, expansion_limits

    os.environ["ELMO_KERAS_ARCHIVE_MAX_RATIO"] = "1000"
    assert expansion_limits() == (MAX_BYTES, 1000.0)
    del os.environ["ELMO_KERAS_ARCHIVE_MAX_RATIO"]
    ```
    """
    limits = []
    for name, default, kind in ((MAX_BYTES_ENV, MAX_BYTES, int), (MAX_RATIO_ENV, MAX_RATIO, float)):
        text = os.environ.get(name, "").strip()
        try:
            value = kind(text) if text else default
        except ValueError:
            value = 0
        if not value > 0:
            raise InputError(f"{name}={text!r} must be a positive {'integer (bytes)' if kind is int else 'number'}")
        limits.append(value)
    return limits[0], limits[1]


def _check_members(zf: zipfile.ZipFile, members: dict[str, str], source: str) -> None:
    """Refuse, before extracting, a member that is not a plain file and members that expand past the limits of
    :func:`expansion_limits` (the sizes the archive declares: zipfile stops at them, a member whose data runs past
    its size fails its CRC check)."""
    max_bytes, max_ratio = expansion_limits()
    infos = [zf.getinfo(member) for member in members.values()]
    for info in infos:
        kind = _NOT_FILES.get(stat.S_IFMT(info.external_attr >> 16))  # 0 (no Unix mode, e.g. zipped on Windows): a file
        if kind:
            raise InputError(
                f"archive {source}: member {info.filename} is {kind}, not a file; nothing was extracted: an ELMo "
                "archive holds plain files (repack it with the files themselves)"
            )
        if info.file_size >= _RATIO_FROM and info.file_size > max_ratio * max(info.compress_size, 1):
            raise InputError(
                f"archive {source}: member {info.filename} expands from {info.compress_size:,} to "
                f"{info.file_size:,} bytes, a ratio of {info.file_size / max(info.compress_size, 1):,.0f}, over the "
                f"limit of {max_ratio:g} (a ZIP bomb?); nothing was extracted: if you trust the archive, set "
                f"{MAX_RATIO_ENV} higher"
            )
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise InputError(
            f"archive {source}: its model files expand to {total:,} bytes, over the limit of {max_bytes:,} bytes; "
            f"nothing was extracted: if you trust the archive, set {MAX_BYTES_ENV} higher"
        )


def _extract(path: str, source: str, digest: str, folder: str) -> None:
    """Extract the model's members of the archive at ``path`` into ``folder`` (atomically: a temporary folder,
    renamed when every member is extracted and passes its check; see the module doc)."""
    with _open_zip(path, source) as zf:
        members = _members(zf, source)
        _check_members(zf, members, source)
        try:
            with atomic_dir(folder) as tmp:
                for target, member in members.items():
                    with zf.open(member) as src, open(os.path.join(tmp, target), "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                        dst.flush()
                        os.fsync(dst.fileno())
                    problem = kind_problem(os.path.join(tmp, target), _KIND_OF[target])
                    if problem:
                        raise InputError(
                            f"archive {source}: member {member} is not {KINDS[_KIND_OF[target]]} ({problem}); "
                            "nothing was extracted: the archive is damaged or holds no ELMo model there, fix or "
                            "replace it"
                        )
                record = {"archive": source, "sha256": digest, "members": members}
                write_json(os.path.join(tmp, ARCHIVE_RECORD), record)
        except zipfile.BadZipFile as err:  # a member's data does not match its CRC: damaged on disk or on the way
            raise InputError(
                f"archive {source}: member {member} is damaged ({err}); download it again{cached_copy_hint(path)}"
            ) from None
        except (NotImplementedError, RuntimeError) as err:  # a compression method zipfile lacks; an encrypted member
            raise InputError(
                f"archive {source}: member {member} cannot be extracted ({err}); repack it as a plain .zip"
            ) from None
        except OSError as err:
            if err.errno not in NO_ROOM and err.errno != errno.EACCES:
                raise
            raise InputError(
                f"cannot extract archive {source} into {folder}: {err.strerror}; free space there or set "
                f"{CACHE_ENV} to a folder with room"
            ) from None
