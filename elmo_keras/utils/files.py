"""Crash-safe writing: every file or folder is written under a temporary name, fsync'd, then renamed into place.

A process killed at any moment leaves either the old content or the new one, plus at worst a hidden ``*.tmp``
entry that :func:`remove_stale_temporaries` clears (the next run that holds the output's lock calls it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from elmo_keras.errors import InputError

TMP_SUFFIX = ".tmp"
#: errno of a write refused until space is freed or a limit raised: disk full, file too large (``ulimit -f``), quota
NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
#: an errno in an error's text: Python's OSError text, HDF5's (h5py), Beam's worker errors passed on as text
_ERRNO_IN_TEXT = re.compile(r"\[Errno (\d+)\]|errno = (\d+)")
LOCK = ".lock"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def usual_permissions(path: str) -> None:
    """Give a ``tempfile``-made (private, 0600/0700) entry the permissions a plain open()/mkdir() would have.

    Args:
        path: file or folder.
    """
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~_UMASK)


def fsync_path(path: str) -> None:
    """Flush a file's (or a folder's entries') data to disk.

    Args:
        path: file or folder.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary_name(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=TMP_SUFFIX, dir=folder)
    os.close(fd)
    usual_permissions(tmp)
    return tmp


@contextlib.contextmanager
def atomic_file(path: str) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success it is fsync'd and renamed to ``path`` (replacing it),
    on any exception (KeyboardInterrupt included) it is removed and ``path`` is left as it was.

    Args:
        path: the file to write.

    Returns:
        A context manager yielding the temporary path to write to.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.utils.files import atomic_file

    path = os.path.join(tempfile.mkdtemp(), "out.txt")
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        f.write("done")
    assert open(path).read() == "done"
    ```
    """
    tmp = _temporary_name(path)
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
        fsync_path(os.path.dirname(os.path.abspath(path)))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str) -> Iterator[str]:
    """Yield a temporary folder next to ``path``; on success it replaces ``path`` (see :func:`publish`), on any
    exception it is removed and ``path`` is left as it was.

    Args:
        path: the folder to write.

    Returns:
        A context manager yielding the temporary folder to fill.
    """
    parent, name = os.path.split(os.path.abspath(path))
    tmp = tempfile.mkdtemp(prefix=f".{name}.", suffix=TMP_SUFFIX, dir=parent)
    usual_permissions(tmp)
    try:
        yield tmp
        publish(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically.

    Args:
        path: the file to write.
        obj: a JSON-serialisable object.
    """
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)


def publish(src: str, dst: str) -> None:
    """Move a finished file or folder ``src`` to ``dst`` (same file system), replacing what is there.

    A file replaces a file in one atomic rename. A folder that replaces an existing ``dst`` is swapped with two
    renames (the old one is moved aside to a hidden ``*.tmp`` name first, then deleted): a kill between them
    leaves the new output in ``src`` and the old one aside, never a half-written ``dst``.

    Args:
        src: the finished file or folder.
        dst: where it goes.
    """
    parent = os.path.dirname(os.path.abspath(dst))
    if os.path.isdir(src) and os.path.lexists(dst):
        aside = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.old.", suffix=TMP_SUFFIX, dir=parent)
        # a symbolic link (even to a folder) is moved aside itself: what it points to is never touched
        real_folder = os.path.isdir(dst) and not os.path.islink(dst)
        os.replace(dst, aside if real_folder else os.path.join(aside, "old"))
        os.replace(src, dst)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(src, dst)
    fsync_path(parent)


def remove_stale_temporaries(folder: str, of: str | None = None) -> None:
    """Delete the ``*.tmp`` entries a killed writer left in ``folder``: all of them, or only the temporaries that
    :func:`atomic_file` and :func:`atomic_dir` make for the entry named ``of`` (``.OF.XXXXXXXX.tmp``). The caller
    must know that no live process writes them, e.g. by holding :func:`exclusive_lock` for that entry.

    Args:
        folder: the folder to clean.
        of: the name (in ``folder``) of the file or folder whose temporaries to delete, or ``None`` for all.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.utils.files import remove_stale_temporaries

    folder = tempfile.mkdtemp()
    for name in (".out.jsonl.k3j_x9a2.tmp", ".other.jsonl.b7c1m0q4.tmp"):
        open(os.path.join(folder, name), "w").close()
    remove_stale_temporaries(folder, of="out.jsonl")
    assert os.listdir(folder) == [".other.jsonl.b7c1m0q4.tmp"]
    ```
    """
    prefix = "" if of is None else f".{of}."
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not name.endswith(TMP_SUFFIX) or not name.startswith(prefix):
            continue
        if of is not None and "." in name[len(prefix) : -len(TMP_SUFFIX)]:  # another entry's (".OF.x.XXXX.tmp")
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def file_sha256(path: str) -> str:
    """The sha256 hex digest of a file's bytes.

    Args:
        path: the file.

    Returns:
        The digest, 64 hex characters.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def exclusive_lock(folder: str, what: str, name: str = LOCK) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (created if missing) for the ``with`` block, or fail at once.

    The lock is a non-blocking ``flock`` on the file ``name`` in ``folder``; the file stays, the lock ends with the
    block or the process (SIGKILL included). A second holder gets :class:`InputError` "another ``what`` run is
    writing ``folder``; wait for it to finish"; a folder that cannot be created or written, one naming the folder.
    When the block raises and ``folder`` was created here and holds only the lock file, it is removed again:
    input refused inside the block leaves nothing behind.

    Args:
        folder: the folder to lock.
        what: the kind of run, for the error message (e.g. ``"embed"``).
        name: the lock file's name in ``folder``.

    Returns:
        A context manager holding the lock.
    """
    created = not os.path.isdir(folder)
    path = os.path.join(folder, name)
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    except OSError as err:
        raise InputError(
            f"cannot create or write into {folder}: {err.strerror}; choose a folder you can write into"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(f"another {what} run is writing {folder}; wait for it to finish") from None
    try:
        yield
    except BaseException:
        if created and os.listdir(folder) == [name]:
            os.remove(path)
            os.rmdir(folder)
        raise
    finally:
        os.close(fd)


def no_room_errno(err: BaseException | None) -> int | None:
    """The errno of a write refused for lack of room (:data:`NO_ROOM`) that ``err``, or an error it was raised in
    handling (e.g. h5py's failed close after a failed write), reports: an ``OSError``'s errno, an errno in its text
    (HDF5, Beam), or the error's own words (TensorFlow's op errors: "No space left on device", "File too large").

    Args:
        err: an exception, or `None`.

    Returns:
        One of :data:`NO_ROOM`, or `None` when ``err`` is not about room.

    Example:

    ```python
    import errno
    from elmo_keras.utils.files import no_room_errno

    assert no_room_errno(OSError(errno.ENOSPC, "No space left on device")) == errno.ENOSPC
    assert no_room_errno(RuntimeError("write failed: File too large")) == errno.EFBIG
    assert no_room_errno(ValueError("bad value")) is None
    ```
    """
    while err is not None:
        text = str(err)
        numbers = [err.errno] if isinstance(err, OSError) and err.errno else []
        numbers += [int(a or b) for a, b in _ERRNO_IN_TEXT.findall(text)]
        numbers += [code for code in NO_ROOM if os.strerror(code) in text]
        found = next((number for number in numbers if number in NO_ROOM), None)
        if found is not None:
            return found
        err = err.__cause__ or err.__context__
    return None
