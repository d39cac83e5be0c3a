"""Variables whose memory is a NumPy buffer we filled, not TensorFlow's CPU allocator pool.

With oneDNN, TensorFlow's CPU allocator keeps every large block it ever handed out (a pool that never shrinks).
Loading 93.6M parameters through it costs the variables plus a converted copy of the largest array, held for
the life of the process. Instead, a weight array is filled into a page-aligned NumPy buffer and handed to
TensorFlow through DLPack (no copy); assigning that tensor lets the variable adopt the buffer. Initial values
built to be overwritten (:func:`~elmo_keras.layers.initializers.weights_loaded_next`) are lazily zeroed
buffers whose pages are never touched, so they cost no resident memory at all.
"""

from __future__ import annotations

import mmap
import os

import numpy as np
import tensorflow as tf

ALIGNMENT = 64  # bytes: TensorFlow's (Eigen's) tensor alignment with AVX-512; a misaligned tensor aborts a MatMul


def host_zeros(shape: tuple[int, ...], dtype: str | np.dtype = "float32", populate: bool = False) -> np.ndarray:
    """A zero array of ``shape`` in fresh anonymous pages: page-aligned, resident only once written, and kept in
    4 KiB pages like TensorFlow's own buffers (NumPy asks for transparent huge pages, and a kernel in huge pages
    made the per-step GEMMs 1.6-2x slower on our test VMs: its 64 KiB-strided rows then share cache sets).

    Args:
        shape: the array's shape.
        dtype: the array's dtype.
        populate: for a buffer about to be written whole, make every page resident now, in one call (Linux;
            about 3x cheaper than faulting the pages in one by one).

    Returns:
        A writable zero array of ``shape``.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
    memory = mmap.mmap(-1, max(count * dtype.itemsize, 1), flags=flags)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(memory, dtype, count=count).reshape(shape)


def host_tensor(array: np.ndarray) -> tf.Tensor:
    """A CPU tensor over ``array``'s memory (no copy; it keeps ``array`` alive). ``array`` must be C-contiguous,
    aligned (see :func:`host_zeros`) and not written by anyone afterwards: the tensor, or a variable
    assigned from it, owns it from now on.

    Args:
        array: a C-contiguous, 64-byte aligned array.

    Returns:
        A CPU ``tf.Tensor`` sharing ``array``'s memory.

    Example:

    ```python
    from elmo_keras.utils.host_memory import host_tensor, host_zeros

    assert host_tensor(host_zeros((2, 3))).shape == (2, 3)
    ```
    """
    if not array.flags.c_contiguous or array.ctypes.data % ALIGNMENT:
        raise ValueError(f"host_tensor needs a C-contiguous array aligned to {ALIGNMENT} bytes (use host_zeros)")
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


def available_memory() -> int:
    """Bytes of memory this machine can still give without swapping: Linux's ``MemAvailable`` (free memory plus
    the page cache it can reclaim), else the free pages ``sysconf`` reports.

    Returns:
        int, bytes.
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
