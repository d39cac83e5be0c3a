"""Writing array bytes into a file past the page cache (``O_DIRECT``) where the file system allows it.

Embeddings are written once and not read back soon. Through the page cache every byte is copied into kernel
pages taken for the purpose; on virtual machines that hand freed memory back to the host, taking those pages is
the dearest part of a corpus run's writing. With ``O_DIRECT`` the disk reads the bytes from our buffer instead.
Only whole :data:`BLOCK`-byte blocks at block-aligned file offsets, from block-aligned memory, can go that way:
the rest of an array (and all of it where the platform or file system refuses ``O_DIRECT``) is written through
the page cache as usual. Either way the caller fsyncs the file before it counts as written.

HDF5 output is written that way too: HDF5 allocates each dataset (:func:`allocate_dataset`, never filled) and
:class:`RawWriter` writes the values at the dataset's offset, from a reused page-aligned :class:`Scratch` buffer.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Sequence

import h5py
import numpy as np

from elmo_keras.utils.host_memory import host_zeros

BLOCK = 4096  # bytes: a multiple of every common disk sector and file-system block size


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


class RawWriter:
    """Writes arrays' bytes at given offsets of an existing file (e.g. HDF5 raw data allocated but not written).
    A context manager; one per file, used from one thread.

    Args:
        path: the existing file to write into (opened for writing, not truncated).

    Example:

    ```python
    import os, tempfile
    import numpy as np
    from elmo_keras.corpus.direct_io import BLOCK, RawWriter, Scratch

    path = os.path.join(tempfile.mkdtemp(), "values.bin")
    open(path, "wb").close()
    data = Scratch().array((2 * BLOCK // 4,), "float32")  # block-aligned: its whole blocks skip the page cache
    data[...] = 1.0
    with RawWriter(path) as raw:
        raw.write(BLOCK, data)
    assert os.path.getsize(path) == 3 * BLOCK
    np.testing.assert_array_equal(np.fromfile(path, "float32", offset=BLOCK), data)
    ```
    """

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
        whole go past the page cache when ``data``'s address is congruent to ``offset`` modulo :data:`BLOCK`.

        Args:
            data: C-contiguous array, any shape and dtype.
            offset: int, the file offset of its first byte.
        """
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
        """Close the file (the caller fsyncs it)."""
        for fd in (self._fd, self._direct):
            if fd is not None:
                os.close(fd)
        self._fd = self._direct = None

    def __enter__(self) -> "RawWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Scratch:
    """A growing page-aligned buffer that arrays are assembled in before :class:`RawWriter` writes them: reused,
    so its pages are not faulted in (and zeroed) anew for every shard. One per writing thread.

    Example:

    ```python
    from elmo_keras.corpus.direct_io import BLOCK, Scratch

    scratch = Scratch()
    values = scratch.array((3, 5), "float16")
    assert values.shape == (3, 5) and values.ctypes.data % BLOCK == 0
    ```
    """

    def __init__(self) -> None:
        self._bytes = host_zeros((0,), np.uint8)

    def array(self, shape: Sequence[int], dtype: str | np.dtype) -> np.ndarray:
        """An uninitialised array over the buffer (block-aligned), valid until the next call.

        Args:
            shape: the array's shape.
            dtype: its dtype.

        Returns:
            A C-contiguous array that starts at the buffer's (block-aligned) start.
        """
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if self._bytes.size < nbytes:  # with room for somewhat larger shards
            self._bytes = host_zeros((nbytes + nbytes // 4,), np.uint8, populate=True)
        return self._bytes[:nbytes].view(dtype).reshape(shape)


def raw_data_creation() -> h5py.h5p.PropDCID:
    """Dataset creation properties for raw data we write ourselves: allocated at creation, never filled by HDF5
    (and no timestamps, as h5py's default).

    Returns:
        An ``h5py.h5p.PropDCID`` for :func:`allocate_dataset`.
    """
    creation = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    creation.set_obj_track_times(False)
    creation.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    creation.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return creation


def allocate_dataset(
    group: h5py.h5g.GroupID,
    name: str,
    shape: Sequence[int],
    file_type: h5py.h5t.TypeID,
    creation: h5py.h5p.PropDCID,
    space: h5py.h5s.SpaceID | None = None,
) -> int | None:
    """Create dataset ``name`` of ``file_type`` (``h5py.h5t.py_create(dtype)``) with ``creation``
    (:func:`raw_data_creation`) -> the file offset of its raw data, to be written with :class:`RawWriter` (None
    when it is empty). ``space``: the dataspace of ``shape``, if the caller keeps one.

    Args:
        group: the low-level id of the file or group to create it in (``h5py.File(...).id``).
        name: the dataset's name.
        shape: its shape.
        file_type: its type in the file, ``h5py.h5t.py_create(dtype)``.
        creation: its creation properties, :func:`raw_data_creation`.
        space: the dataspace of ``shape`` (``h5py.h5s.create_simple(shape)``), or `None` to make one. Defaults
            to `None`.

    Returns:
        The file offset of the dataset's raw data (int), or None when it is empty.

    Example:

    ```python
    import os, tempfile
    import h5py
    import numpy as np
    from elmo_keras.corpus.direct_io import RawWriter, allocate_dataset, raw_data_creation

    path = os.path.join(tempfile.mkdtemp(), "out.hdf5")
    with h5py.File(path, "w") as f:
        file_type = h5py.h5t.py_create(np.dtype("float32"))
        start = allocate_dataset(f.id, "0", (2, 3), file_type, raw_data_creation())
    with RawWriter(path) as raw:
        raw.write(start, np.ones((2, 3), "float32"))
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["0"][()], np.ones((2, 3)))
    ```
    """
    space = space or h5py.h5s.create_simple(tuple(shape))
    dataset = h5py.h5d.create(group, name.encode(), file_type, space, dcpl=creation)
    return dataset.get_offset() if math.prod(shape) else None


def drop_cached(path: str) -> None:
    """Let the kernel drop the pages of ``path`` (fsync'd, so clean) from the page cache: output streamed to disk
    is not read back, and the next writes recycle those pages, much cheaper than taking fresh ones. (Most values
    never enter the page cache: this is for HDF5's metadata, and for file systems without ``O_DIRECT``.)

    Args:
        path: a file, fsync'd. Nothing happens where the platform lacks ``posix_fadvise`` (macOS).
    """
    if not hasattr(os, "posix_fadvise"):  # macOS
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
