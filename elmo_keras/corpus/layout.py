"""The format of a run folder: shard files, records and ``manifest.json``, and how a shard is committed.

A shard ``shard-KKKKKK.h5`` holds lines ``K * shard_lines ...`` of the input: ``values`` (all of its tokens
concatenated: [L, T, D] for ``layers="all"``, [T, D] for top/average; float32 or float16) and ``offsets``
(int64 [n + 1]: line ``first + j`` is tokens ``offsets[j]:offsets[j + 1]``). Each shard is written whole under a
temporary name and renamed, so a shard file that exists is complete. ``manifest.json`` says what the run is.

A pooled run (``--pool``: one vector per line, [L, D] or [D]) stores each line as one row of that axis: ``values``
[L, n, D] or [n, D], ``offsets`` ``0 .. n``; the readers drop the axis again. Its lines without tokens are zeros,
and :data:`EMPTY` (bool [lines], written when the run completes) says which they are.

A run that builds hdf5 output writes each value once (see :mod:`elmo_keras.corpus.assembly`): a shard computed in
this process goes straight into the file being assembled, and what commits it is a record ``shard-KKKKKK.json``
(renamed into place once those values are on disk) that says where each of its lines lies in that file. The HDF5
structure of a file left by a killed run is never trusted: a later run reads the committed lines' bytes at the
recorded offsets (:func:`read_recorded_lines`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import h5py
import numpy as np

from elmo_keras.corpus.direct_io import BLOCK, RawWriter, Scratch, allocate_dataset, drop_cached, raw_data_creation
from elmo_keras.layers.pooling import pool_tokens
from elmo_keras.utils.files import atomic_file

MANIFEST = "manifest.json"
FORMAT_NAME = "elmo_keras.embeddings"
FORMAT_VERSION = 1
LAYER_CHOICES = ("all", "top", "average")
STORAGE_DTYPES = ("float32", "float16")
#: a pooled run's flags, bool [lines], True for a line without tokens (stored as zeros): this file in a shards or
#: npy folder, the dataset EMPTY_DATASET in an hdf5 output
EMPTY = "empty.npy"
EMPTY_DATASET = "empty"
#: manifest fields that must agree for a run to resume (name in the manifest -> how users spell it)
IDENTITY = {
    "input.size": "the input file's size",
    "input.sha256": "the input file's content",
    "model.sha256": "the model (options and weights)",
    "model.dtype": "--dtype (compute)",
    "layers": "--layers",
    "pool": "--pool",
    "storage_dtype": "--dtype (storage)",
    "output_format": "--format",
    "shard_lines": "--shard-lines",
    "version": "the format version",
}


def shard_name(shard: int) -> str:
    """The file name of shard ``shard`` in a run folder.

    Args:
        shard: int, the 0-based shard number.

    Returns:
        ``"shard-KKKKKK.h5"``, e.g. ``"shard-000012.h5"`` for shard 12.
    """
    return f"shard-{shard:06d}.h5"


def record_name(shard: int) -> str:
    """The file name of the record that commits ``shard`` whose values are in an hdf5 file being assembled
    (see the module docstring).

    Args:
        shard: int, the 0-based shard number.

    Returns:
        ``"shard-KKKKKK.json"``.
    """
    return f"shard-{shard:06d}.json"


def is_committed(folder: str, shard: int) -> bool:
    """Whether ``shard`` has a shard file or a record in ``folder`` (either exists only once complete).

    Args:
        folder: the run folder.
        shard: int, the 0-based shard number.

    Returns:
        bool.
    """
    return any(os.path.exists(os.path.join(folder, name(shard))) for name, _ in committed_forms())


def committed_forms() -> tuple:
    """The ways a shard is committed in a run folder: (file name of shard k, check that such a file is whole).

    Returns:
        ``((shard_name, shard_is_complete), (record_name, record_is_complete))``.
    """
    return (shard_name, shard_is_complete), (record_name, record_is_complete)


def reduce_layers(array: np.ndarray, layers: str) -> np.ndarray:
    """[L, T, D] -> itself ("all"), the top layer [T, D] ("top") or the mean over layers [T, D] ("average").

    Args:
        array: one line's layers, [L, T, D].
        layers: one of :data:`LAYER_CHOICES`: "all", "top" or "average".

    Returns:
        [L, T, D] for "all", else [T, D].

    Example:

    ```python
    import numpy as np
    from elmo_keras.corpus.layout import reduce_layers

    array = np.arange(24, dtype="float32").reshape(3, 2, 4)  # [L, T, D]
    assert reduce_layers(array, "top").shape == (2, 4)
    np.testing.assert_array_equal(reduce_layers(array, "average"), array[1])
    ```
    """
    return array if layers == "all" else array[-1].copy() if layers == "top" else array.mean(axis=0)  # no view:
    # a line's other layers are not kept alive by it


def reduce_line(array: np.ndarray, layers: str, pool: Sequence[str] | None = None) -> np.ndarray:
    """One line's layers -> what a run stores for it: :func:`reduce_layers`, then with ``pool`` the result pooled
    over the line's tokens (:func:`~elmo_keras.layers.pooling.pool_tokens`; zeros for a line without tokens).

    Args:
        array: one line's layers, [L, T, D].
        layers: one of :data:`LAYER_CHOICES`: "all", "top" or "average".
        pool: `None`, or the pooling modes, e.g. `("mean",)` or `("mean", "max")`. Defaults to `None`.

    Returns:
        [L, T, D] or [T, D] (see :func:`reduce_layers`); with ``pool`` [L, k * D] or [k * D], k modes.

    Example:

    ```python
    import numpy as np
    from elmo_keras.corpus.layout import reduce_line

    array = np.arange(24, dtype="float32").reshape(3, 2, 4)  # [L, T, D]
    assert reduce_line(array, "all", ("mean", "max")).shape == (3, 8)
    np.testing.assert_array_equal(reduce_line(array, "top", ("mean",)), array[-1].mean(axis=0))
    ```
    """
    reduced = reduce_layers(array, layers)
    return reduced if pool is None else pool_tokens(reduced, pool)


def token_slice(ndim: int, start: int, stop: int) -> tuple[slice, ...]:
    """Index of tokens ``start:stop`` in a shard's ``values`` ([L, T, D] or [T, D]: the token axis is ndim - 2).

    Args:
        ndim: int, 3 or 2: the number of dimensions of ``values``.
        start: int, the first token.
        stop: int, one past the last token.

    Returns:
        A tuple of slices, to index ``values`` with.
    """
    return (slice(None),) * (ndim - 2) + (slice(start, stop),)


def write_shard(
    path: str,
    arrays: Sequence[np.ndarray],
    first_line: int,
    storage_dtype: str,
    scratch: Scratch | None = None,
    pooled: bool = False,
) -> None:
    """Write one shard atomically: ``arrays`` are lines ``first_line ...`` ([L, T_i, D] or [T_i, D] each).

    Args:
        path: the shard file to write (under a temporary name, then renamed to ``path``).
        arrays: one array per line, all of the same rank, layers and dimension.
        first_line: int, the input line number of ``arrays[0]``.
        storage_dtype: "float32" or "float16", the stored dtype.
        scratch: a :class:`~elmo_keras.corpus.direct_io.Scratch` to assemble the values in (reused between
            calls of one thread), or `None` for a new one. Defaults to `None`.
        pooled: bool, the arrays are pooled lines ([L, D] or [D] each), stored as one row each (see the module
            docstring). Defaults to `False`.

    Example:

    ```python
    import os, tempfile
    import h5py
    import numpy as np
    from elmo_keras.corpus.layout import write_shard

    path = os.path.join(tempfile.mkdtemp(), "shard-000000.h5")
    write_shard(path, [np.ones((2, 4)), np.zeros((0, 4)), np.ones((3, 4))], 0, "float16")
    with h5py.File(path, "r") as f:
        assert f["values"].shape == (5, 4) and list(f["offsets"]) == [0, 2, 2, 5]
    ```
    """
    if pooled:
        arrays = [array[..., None, :] for array in arrays]
    axis = arrays[0].ndim - 2
    offsets = np.concatenate([[0], np.cumsum([a.shape[axis] for a in arrays])]).astype(np.int64)
    shape = list(arrays[0].shape)
    shape[axis] = int(offsets[-1])
    values = (scratch or Scratch()).array(shape, storage_dtype)
    np.concatenate(arrays, axis=axis, out=values)  # converted to storage_dtype by numpy
    with atomic_file(path) as tmp:
        # every object of a block or more (the values) at a block-aligned offset: written past the page cache
        with h5py.File(tmp, "w", alignment_threshold=BLOCK, alignment_interval=BLOCK) as f:
            start = allocate_dataset(f.id, "values", shape, h5py.h5t.py_create(values.dtype), raw_data_creation())
            f.create_dataset("offsets", data=offsets)
            f.attrs["first_line"] = first_line
        if start is not None:
            with RawWriter(tmp) as raw:
                raw.write(start, values)
    drop_cached(path)


def commit_shard_file(
    folder: str,
    shard: int,
    arrays: Sequence[np.ndarray],
    shard_lines: int,
    storage_dtype: str,
    scratch: Scratch | None = None,
    pooled: bool = False,
) -> None:
    """Commit ``shard`` (lines ``shard * shard_lines ...``) as its shard file in the run folder ``folder``.

    Args:
        folder: the run folder.
        shard: int, the 0-based shard number.
        arrays: one array per line of the shard ([L, T_i, D] or [T_i, D] each; [L, D] or [D] when ``pooled``).
        shard_lines: int, lines per shard of the run.
        storage_dtype: "float32" or "float16", the stored dtype.
        scratch: a :class:`~elmo_keras.corpus.direct_io.Scratch` to assemble the values in, or `None` for a new
            one. Defaults to `None`.
        pooled: bool, a pooled run's lines (see :func:`write_shard`). Defaults to `False`.
    """
    path = os.path.join(folder, shard_name(shard))
    write_shard(path, arrays, shard * shard_lines, storage_dtype, scratch, pooled)


def shard_is_complete(path: str, lines: int) -> bool:
    """True when ``path`` opens as a shard of ``lines`` lines (a committed shard always does).

    Args:
        path: a shard file.
        lines: int, the number of lines the shard should hold.

    Returns:
        bool.
    """
    try:
        with h5py.File(path, "r") as f:
            return f["offsets"].shape == (lines + 1,) and "values" in f
    except (OSError, KeyError):
        return False


def read_record(path: str) -> dict:
    """The contents of a record (see :func:`commit_record`).

    Args:
        path: a ``shard-KKKKKK.json`` record.

    Returns:
        A dict: ``first_line``, ``file`` (the values file, in the record's folder), ``dtype`` and ``lines`` (a
        ``[start, shape]`` pair per line; start None for an empty line).
    """
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def commit_record(
    folder: str, shard: int, first_line: int, values_path: str, dtype: str, starts: Sequence[int | None], shapes
) -> None:
    """Commit ``shard`` (lines ``first_line ...``) by a record: its lines' values lie in ``values_path`` (a file in
    ``folder``, already on disk), of ``dtype``, at file offsets ``starts`` (None: empty) with ``shapes``.

    Args:
        folder: the run folder.
        shard: int, the 0-based shard number.
        first_line: int, the input line number of the shard's first line.
        values_path: the file in ``folder`` that holds the values.
        dtype: str, their dtype ("float32" or "float16").
        starts: per line, the file offset of its values, or None for an empty line.
        shapes: per line, the shape of its array.

    Example:

    ```python
    import os, tempfile
    import numpy as np
    from elmo_keras.corpus.layout import commit_record, read_recorded_lines, record_name

    folder = tempfile.mkdtemp()
    values = os.path.join(folder, "values.bin")
    np.arange(6, dtype="float32").tofile(values)
    commit_record(folder, 0, 0, values, "float32", [0, None, 8], [(2, 1), (0, 1), (4, 1)])
    lines = read_recorded_lines(os.path.join(folder, record_name(0)))
    assert [a.shape for a in lines] == [(2, 1), (0, 1), (4, 1)] and lines[2][0, 0] == 2.0
    ```
    """
    record = {
        "first_line": first_line,
        "file": os.path.basename(values_path),
        "dtype": dtype,
        "lines": [[start, list(shape)] for start, shape in zip(starts, shapes)],
    }
    with atomic_file(os.path.join(folder, record_name(shard))) as tmp, open(tmp, "w") as f:
        json.dump(record, f, separators=(",", ":"))


def record_is_complete(path: str, lines: int) -> bool:
    """True when the record ``path`` describes ``lines`` lines that lie inside its values file.

    Args:
        path: a ``shard-KKKKKK.json`` record.
        lines: int, the number of lines the shard should hold.

    Returns:
        bool.
    """
    try:
        record = read_record(path)
        source = os.path.join(os.path.dirname(path), record["file"])
        itemsize = np.dtype(record["dtype"]).itemsize
        ends = [start + math.prod(shape) * itemsize for start, shape in record["lines"] if start is not None]
        return len(record["lines"]) == lines and os.path.getsize(source) >= max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def read_recorded_lines(path: str) -> list[np.ndarray]:
    """The lines a record commits, read from its values file at the recorded offsets (no HDF5 involved).

    Args:
        path: a ``shard-KKKKKK.json`` record.

    Returns:
        One array per line, of the recorded dtype and shape.
    """
    record = read_record(path)
    dtype = np.dtype(record["dtype"])
    arrays = []
    with open(os.path.join(os.path.dirname(path), record["file"]), "rb") as f:
        for start, shape in record["lines"]:
            count = math.prod(shape)
            data = os.pread(f.fileno(), count * dtype.itemsize, start) if start is not None else b""
            arrays.append(np.frombuffer(data, dtype, count).reshape(shape))
    return arrays


def write_empty_flags(path: str, empty: np.ndarray) -> None:
    """Write a pooled run's :data:`EMPTY` flags atomically as a ``.npy`` file.

    Args:
        path: the file to write (e.g. ``folder/empty.npy``).
        empty: bool array [lines], True for a line without tokens.
    """
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.asarray(empty, dtype=bool))


def read_manifest(folder: str) -> dict:
    """The ``manifest.json`` of a run folder.

    Args:
        folder: the run folder.

    Returns:
        The manifest, a dict.
    """
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def _field(manifest: dict, dotted: str):
    value = manifest
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def manifest_differences(old: dict, new: dict) -> list[str]:
    """What makes ``new`` a different run from ``old``, in words (empty when it may resume).

    Args:
        old: the manifest in the run folder.
        new: the manifest of the run being started.

    Returns:
        One phrase per :data:`IDENTITY` field that differs.

    Example:

    ```python
    from elmo_keras.corpus.layout import manifest_differences

    old = {"layers": "all", "input": {"size": 10}}
    assert manifest_differences(old, old) == []
    assert manifest_differences(old, {**old, "layers": "top"}) == ["--layers ('all' then, 'top' now)"]
    ```
    """
    return [
        f"{IDENTITY[key]} ({_field(old, key)!r} then, {_field(new, key)!r} now)"
        for key in IDENTITY
        if _field(old, key) != _field(new, key)
    ]
