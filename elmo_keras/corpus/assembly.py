"""Building OUTPUT (hdf5 file or npy folder) in the run folder from shards as they are committed:
:func:`make_assembly`.

A shard computed in this process goes straight into the output being built. The npy folder is derived from the
committed shard files and rebuilt by a run after a kill. The hdf5 file holds the values themselves: each shard is
committed by a record of where its lines lie in the file (see :mod:`elmo_keras.corpus.layout`). HDF5 allocates
each line's dataset and :class:`~elmo_keras.corpus.direct_io.RawWriter` writes the values, mostly past the page
cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence

import h5py
import numpy as np

from elmo_keras.corpus.direct_io import BLOCK, RawWriter, Scratch, allocate_dataset, drop_cached, raw_data_creation
from elmo_keras.corpus.layout import (
    EMPTY,
    EMPTY_DATASET,
    commit_record,
    commit_shard_file,
    read_recorded_lines,
    record_name,
    write_empty_flags,
)
from elmo_keras.corpus.readers import ShardedEmbeddings
from elmo_keras.utils.files import TMP_SUFFIX, fsync_path, usual_permissions


def adjacent_runs(starts: Sequence[int | None], sizes: Sequence[int], max_bytes: int) -> list[tuple[int, list[int]]]:
    """Datasets whose raw data (``starts[j]``, ``sizes[j]`` bytes; None: empty) lie back to back in the file ->
    ``(file offset, [dataset indices])`` per run of adjacent ones, each run at most ``max_bytes`` long unless it
    is a single dataset.

    Args:
        starts: per dataset, the file offset of its raw data, or None when it is empty.
        sizes: per dataset, its raw data's size in bytes.
        max_bytes: int, the most bytes a run of several datasets spans.

    Returns:
        A list of ``(file offset, [dataset indices])``, in the order of ``starts``.

    Example:

    ```python
    from elmo_keras.corpus.assembly import adjacent_runs

    runs = adjacent_runs([0, 10, None, 30, 40], [10, 10, 0, 10, 10], max_bytes=100)
    assert runs == [(0, [0, 1]), (30, [3, 4])]
    ```
    """
    runs: list[tuple[int, list[int]]] = []
    end = length = None
    for j, (start, size) in enumerate(zip(starts, sizes)):
        if start is None:
            continue
        if start == end and length + size <= max_bytes:
            runs[-1][1].append(j)
            length += size
        else:
            runs.append((start, [j]))
            length = size
        end = start + size
    return runs


class Assembly:
    """Builds OUTPUT inside the run folder from shards as they are committed (any order), so the per-line
    writing overlaps with the model. :func:`make_assembly` picks the format. The npy folder is derived data
    from shard files: a killed run leaves it under a ``.tmp`` name, which the next run deletes and rebuilds. The
    hdf5 file holds the values themselves (see :meth:`HDF5Assembly.commit`); a later run copies the committed
    lines out of it into a new file.

    Args:
        folder: the run folder; OUTPUT is built inside it.
        manifest: the run's manifest (``output_format``, ``storage_dtype``, ``shard_lines``, ``shards``,
            ``input``, ``layers``, and ``pool`` for a pooled run).

    Example:

    ```python
    import os, tempfile
    import numpy as np
    from elmo_keras.corpus.assembly import make_assembly

    folder = tempfile.mkdtemp()
    manifest = {"output_format": "npy", "storage_dtype": "float16", "shard_lines": 2, "shards": 2,
                "input": {"lines": 3}, "layers": "top"}
    assembly = make_assembly(folder, manifest)
    assembly.commit(1, [np.ones((1, 4))])  # shard 1: line 2, committed as a shard file
    assembly.commit(0, [np.ones((2, 4)), np.ones((3, 4))])
    built = assembly.finish({"The bank": [0], "A big loan": [1], "Hi": [2]})
    assert sorted(os.listdir(built)) == ["0.npy", "1.npy", "2.npy", "sentence_to_index.json"]
    assert np.load(os.path.join(built, "1.npy")).shape == (3, 4)
    ```
    """

    def __init__(self, folder: str, manifest: dict):
        self.folder, self.manifest = folder, manifest
        self.path = os.path.join(folder, f"output.{manifest['output_format']}{TMP_SUFFIX}")
        self.dtype = manifest["storage_dtype"]
        self.pool: list[str] | None = manifest.get("pool")
        self.added: set[int] = set()

    def _store_lines(self, first_line: int, arrays: Sequence[np.ndarray]) -> list[int | None] | None:
        """Store ``arrays`` as lines ``first_line ...``; returns where each line's values lie in the file (hdf5)."""
        raise NotImplementedError

    def _store_index(self, sentence_to_index: dict[str, list[int]], empty: np.ndarray | None) -> None:
        raise NotImplementedError

    def add(self, shard: int, arrays: Sequence[np.ndarray]) -> list[int | None] | None:
        """Store the lines of ``shard`` (one array per line).

        Args:
            shard: int, the 0-based shard number.
            arrays: one array per line of the shard ([L, T_i, D] or [T_i, D] each).

        Returns:
            For hdf5, the file offset of each line's values (None: empty); None for npy.
        """
        starts = self._store_lines(shard * self.manifest["shard_lines"], arrays)
        self.added.add(shard)
        return starts

    def commit(self, shard: int, arrays: Sequence[np.ndarray], scratch: Scratch | None = None) -> None:
        """Commit ``shard`` computed in this process (a shard file), then add its lines.

        Args:
            shard: int, the 0-based shard number.
            arrays: one array per line of the shard ([L, T_i, D] or [T_i, D] each).
            scratch: a :class:`~elmo_keras.corpus.direct_io.Scratch` of the calling thread, or `None` for a new
                one. Defaults to `None`.
        """
        commit_shard_file(
            self.folder, shard, arrays, self.manifest["shard_lines"], self.dtype, scratch, self.pool is not None
        )
        self.add(shard, arrays)

    def add_committed(self) -> None:
        """Add the shards of the run folder that are not in yet (those of an earlier run, or written by Beam)."""
        source = ShardedEmbeddings(self.folder, self.manifest)
        shard_lines = self.manifest["shard_lines"]
        try:
            for shard in sorted(set(range(self.manifest["shards"])) - self.added):
                record = os.path.join(self.folder, record_name(shard))
                if os.path.exists(record):
                    self.add(shard, read_recorded_lines(record))
                    continue
                lines = range(shard * shard_lines, min((shard + 1) * shard_lines, len(source)))
                self.add(shard, [source._read(i) for i in lines])
        finally:
            source.close()

    def finish(self, sentence_to_index: dict[str, list[int]], empty: np.ndarray | None = None) -> str:
        """Write ``sentence_to_index`` (and a pooled run's ``empty`` flags), close and fsync; returns the built
        file or folder (in the run folder).

        Args:
            sentence_to_index: line text -> the line indices that hold it.
            empty: a pooled run's flags, bool [lines] (True: a line without tokens), or `None`. Defaults to
                `None`.

        Returns:
            The path of the built file or folder.
        """
        self._store_index(sentence_to_index, empty)
        fsync_path(self.path)
        return self.path

    def discard(self) -> None:
        """Stop building after a failure: what no committed shard needs is deleted (a later run rebuilds from
        what is committed)."""
        raise NotImplementedError


class HDF5Assembly(Assembly):
    """One dataset per line index plus ``sentence_to_index`` (and ``lines``, ``layers`` attributes).

    Args:
        folder: the run folder; the file is ``output-N.hdf5`` in it, N new in every run.
        manifest: the run's manifest (see :class:`Assembly`).
    """

    #: HDF5 groups the per-line metadata (object headers, names: a few hundred bytes a line) in blocks of up to
    #: this size, so that the raw data of consecutive lines lie back to back and a shard's values go out in a few
    #: large writes (smaller blocks for small inputs: an unused rest would stay in the file as a hole)
    metadata_block = 1 << 20
    #: bytes staged (and written) at a time: bounds the staging buffer
    write_bytes = 16 << 20
    #: line shapes whose dataspaces are kept
    max_spaces = 4096

    def __init__(self, folder: str, manifest: dict):
        super().__init__(folder, manifest)
        # a new name in every run: a file that records of an earlier run point into is never overwritten
        self.path = os.path.join(folder, f"output-{self._generation(folder)}.hdf5")
        block = min(self.metadata_block, max(2048, 512 * manifest["input"]["lines"]))
        self.file = h5py.File(self.path, "w", meta_block_size=block)
        self._raw = RawWriter(self.path)
        self._creation = raw_data_creation()
        self._file_type = h5py.h5t.py_create(np.dtype(self.dtype))
        self._scratch = Scratch()
        self._spaces: dict[tuple[int, ...], h5py.h5s.SpaceID] = {}

    @staticmethod
    def _generation(folder: str) -> int:
        """1 + the highest N of the ``output-N.hdf5`` files in ``folder``."""
        numbers = [
            int(name[7:-5])
            for name in os.listdir(folder)
            if name.startswith("output-") and name.endswith(".hdf5") and name[7:-5].isdigit()
        ]
        return max(numbers, default=0) + 1

    def _space(self, shape: tuple[int, ...]) -> h5py.h5s.SpaceID:
        """The dataspace of ``shape``, kept for the next line of that shape (a fifth of a line's allocation)."""
        space = self._spaces.get(shape)
        if space is None:
            space = h5py.h5s.create_simple(shape)
            if len(self._spaces) < self.max_spaces:
                self._spaces[shape] = space
        return space

    def _store_lines(self, first_line: int, arrays: Sequence[np.ndarray]) -> list[int | None]:
        # h5py's low-level API: a fraction of create_dataset's Python work (and GIL time) per line
        dtype = np.dtype(self.dtype)
        starts = [
            allocate_dataset(
                self.file.id, str(line), array.shape, self._file_type, self._creation, self._space(array.shape)
            )
            for line, array in enumerate(arrays, start=first_line)
        ]
        sizes = [array.size * dtype.itemsize for array in arrays]
        for start, run in adjacent_runs(starts, sizes, self.write_bytes):
            # staged at the run's offset within a block, so the whole blocks inside it can be written directly
            lead = start % BLOCK
            staged = self._scratch.array((lead + sum(sizes[j] for j in run),), np.uint8)[lead:]
            position = 0
            for j in run:
                staged[position : position + sizes[j]].view(dtype).reshape(arrays[j].shape)[...] = arrays[j]
                position += sizes[j]
            self._raw.write(start, staged)
        return starts

    def add(self, shard: int, arrays: Sequence[np.ndarray]) -> list[int | None]:
        """Store the lines of ``shard`` and flush them to disk.

        Args:
            shard: int, the 0-based shard number.
            arrays: one array per line of the shard ([L, T_i, D] or [T_i, D] each).

        Returns:
            The file offset of each line's values (None: empty).
        """
        starts = super().add(shard, arrays)
        self.file.flush()  # the shard's data and metadata go to disk now, overlapping the model, not in finish()
        fsync_path(self.path)
        drop_cached(self.path)
        return starts

    def commit(self, shard: int, arrays: Sequence[np.ndarray], scratch: Scratch | None = None) -> None:
        """Add the lines of ``shard`` (on disk when this returns), then commit them with a record of where they
        lie: each value is written once.

        Args:
            shard: int, the 0-based shard number.
            arrays: one array per line of the shard ([L, T_i, D] or [T_i, D] each).
            scratch: unused (the assembly stages in its own buffer). Defaults to `None`.
        """
        starts = self.add(shard, arrays)
        first_line = shard * self.manifest["shard_lines"]
        commit_record(self.folder, shard, first_line, self.path, self.dtype, starts, [a.shape for a in arrays])

    def _store_index(self, sentence_to_index: dict[str, list[int]], empty: np.ndarray | None) -> None:
        self.file.create_dataset(
            "sentence_to_index", data=np.array([json.dumps(sentence_to_index)], dtype=h5py.string_dtype())
        )
        self.file.attrs["lines"] = self.manifest["input"]["lines"]
        self.file.attrs["layers"] = self.manifest["layers"]
        if self.pool is not None:
            self.file.attrs["pool"] = ",".join(self.pool)
            self.file.create_dataset(EMPTY_DATASET, data=np.asarray(empty, dtype=bool))
        self.file.close()
        self._raw.close()

    def discard(self) -> None:
        """Close the file and keep it: the records of this run's committed shards point into it. (Closing flushes,
        which fails again after a failed write, e.g. on a full disk: what is committed is on disk already.)"""
        with contextlib.suppress(OSError, RuntimeError):
            self.file.close()
        self._raw.close()


class NpyAssembly(Assembly):
    """A folder: ``{i}.npy`` per line plus ``sentence_to_index.json``.

    Args:
        folder: the run folder; the npy folder is built in it under a ``.tmp`` name.
        manifest: the run's manifest (see :class:`Assembly`).
    """

    def __init__(self, folder: str, manifest: dict):
        super().__init__(folder, manifest)
        os.mkdir(self.path)
        usual_permissions(self.path)

    def _store_lines(self, first_line: int, arrays: Sequence[np.ndarray]) -> None:
        for line, array in enumerate(arrays, start=first_line):
            np.save(os.path.join(self.path, f"{line}.npy"), array.astype(self.dtype))

    def _store_index(self, sentence_to_index: dict[str, list[int]], empty: np.ndarray | None) -> None:
        with open(os.path.join(self.path, "sentence_to_index.json"), "w", encoding="utf-8") as f:
            json.dump(sentence_to_index, f, ensure_ascii=False)
        if self.pool is not None:
            write_empty_flags(os.path.join(self.path, EMPTY), empty)

    def discard(self) -> None:
        """Delete the folder being built (it is rebuilt from the committed shard files)."""
        shutil.rmtree(self.path)


def make_assembly(folder: str, manifest: dict) -> Assembly | None:
    """The builder of OUTPUT for the run's format (None for ``shards``: the run folder is the output).

    Args:
        folder: the run folder.
        manifest: the run's manifest; its ``output_format`` picks the builder.

    Returns:
        An :class:`HDF5Assembly` ("hdf5"), an :class:`NpyAssembly` ("npy") or None ("shards"). See
        :class:`Assembly` for an example.
    """
    builders = {"hdf5": HDF5Assembly, "npy": NpyAssembly}
    builder = builders.get(manifest["output_format"])
    return builder(folder, manifest) if builder else None
