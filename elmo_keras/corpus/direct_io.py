"""Writing array bytes into a file past the page cache (``O_DIRECT``) where the file system allows it.

Embeddings are written once and not read back soon. Through the page cache every byte is copied into kernel
pages taken for the purpose; on virtual machines that hand freed memory back to the host, taking those pages is
the dearest part of a corpus run's writing. With ``O_DIRECT`` the disk reads the bytes from our buffer instead.
Only whole :data:`BLOCK`-byte blocks at block-aligned file offsets, from block-aligned memory, can go that way:
the rest of an array (and all of it where the platform or file system refuses ``O_DIRECT``) is written through
the page cache as usual. Either way the caller fsyncs the file before it counts as written.
"""

from __future__ import annotations

import errno
import os

import numpy as np

BLOCK = 4096  # bytes: a multiple of every common disk sector and file-system block size


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


class RawWriter:
    """Writes arrays' bytes at given offsets of an existing file (e.g. HDF5 raw data allocated but not written).
    A context manager; one per file, used from one thread."""

    def __init__(self, path: str):
        self._fd: int | None = os.open(path, os.O_WRONLY)
        self._direct: int | None = None
        if hasattr(os, "O_DIRECT"):  # not on macOS
            try:
                self._direct = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError as err:  # e.g. tmpfs before Linux 6.6
                if err.errno != errno.EINVAL:
                    os.close(self._fd)
                    raise

    def write(self, offset: int, data: np.ndarray) -> None:
        """Write the bytes of C-contiguous ``data`` at file ``offset``. The blocks of the file that it covers
        whole go past the page cache when ``data``'s address is congruent to ``offset`` modulo :data:`BLOCK`."""
        view = memoryview(data.reshape(-1)).cast("B")
        head = min(-offset % BLOCK, len(view))
        middle = (len(view) - head) // BLOCK * BLOCK
        if self._direct is not None and middle and (data.ctypes.data + head) % BLOCK == 0:
            try:
                _pwrite_all(self._direct, view[head : head + middle], offset + head)
            except OSError as err:  # a file system that opens O_DIRECT but refuses the write
                if err.errno != errno.EINVAL:
                    raise
                os.close(self._direct)
                self._direct = None
            else:
                _pwrite_all(self._fd, view[:head], offset)
                _pwrite_all(self._fd, view[head + middle :], offset + head + middle)
                return
        _pwrite_all(self._fd, view, offset)

    def close(self) -> None:
        for fd in (self._fd, self._direct):
            if fd is not None:
                os.close(fd)
        self._fd = self._direct = None

    def __enter__(self) -> "RawWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
