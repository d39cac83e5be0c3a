"""Crash-safe writing: every file or folder is written under a temporary name, fsync'd, then renamed into place.

A process killed at any moment leaves either the old content or the new one, plus at worst a hidden ``*.tmp``
entry that :func:`remove_stale_temporaries` (or the next :func:`atomic_file` on the same path) clears.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

TMP_SUFFIX = ".tmp"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def usual_permissions(path: str) -> None:
    """Give a ``tempfile``-made (private, 0600/0700) entry the permissions a plain open()/mkdir() would have."""
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~_UMASK)


def fsync_path(path: str) -> None:
    """Flush a file's (or a folder's entries') data to disk."""
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
    on any exception (KeyboardInterrupt included) it is removed and ``path`` is left as it was."""
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
    exception it is removed and ``path`` is left as it was."""
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
    """Write ``obj`` as JSON to ``path`` atomically."""
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)


def publish(src: str, dst: str) -> None:
    """Move a finished file or folder ``src`` to ``dst`` (same file system), replacing what is there.

    A file replaces a file in one atomic rename. A folder that replaces an existing ``dst`` is swapped with two
    renames (the old one is moved aside to a hidden ``*.tmp`` name first, then deleted): a kill between them
    leaves the new output in ``src`` and the old one aside, never a half-written ``dst``.
    """
    parent = os.path.dirname(os.path.abspath(dst))
    if os.path.isdir(src) and os.path.lexists(dst):
        aside = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.old.", suffix=TMP_SUFFIX, dir=parent)
        os.replace(dst, aside if os.path.isdir(dst) else os.path.join(aside, "old"))
        os.replace(src, dst)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(src, dst)
    fsync_path(parent)


def remove_stale_temporaries(folder: str) -> None:
    """Delete the ``*.tmp`` entries a killed writer left in ``folder``."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not name.endswith(TMP_SUFFIX):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
