"""Embedding stores on disk: shard files, the run manifest, hdf5 / npy assembly, and :func:`load_embeddings`.

A shard ``shard-KKKKKK.h5`` holds lines ``K * shard_lines ...`` of the input: ``values`` (all of its tokens
concatenated: [L, T, D] for ``layers="all"``, [T, D] for top/average; float32 or float16) and ``offsets``
(int64 [n + 1]: line ``first + j`` is tokens ``offsets[j]:offsets[j + 1]``). Each shard is written whole under a
temporary name and renamed, so a shard file that exists is complete. ``manifest.json`` says what the run is.
Shards and the hdf5 assembly have HDF5 allocate their datasets, then write the values themselves with
:class:`~elmo_keras.corpus.direct_io.RawWriter`, mostly past the page cache.

A run that builds hdf5 output writes each value once: a shard computed in this process goes straight into the
file being assembled, and what commits it is a record ``shard-KKKKKK.json`` (renamed into place once those
values are on disk) that says where each of its lines lies in that file. The HDF5 structure of a file left
by a killed run is never trusted: a later run reads the committed lines' bytes at the recorded offsets.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterator, Sequence

import h5py
import numpy as np

from elmo_keras.corpus.direct_io import BLOCK, RawWriter
from elmo_keras.errors import InputError
from elmo_keras.utils.files import TMP_SUFFIX, atomic_file, fsync_path, usual_permissions
from elmo_keras.utils.host_memory import host_zeros

MANIFEST = "manifest.json"
FORMAT_NAME = "elmo_keras.embeddings"
FORMAT_VERSION = 1
LAYER_CHOICES = ("all", "top", "average")
STORAGE_DTYPES = ("float32", "float16")
#: manifest fields that must agree for a run to resume (name in the manifest -> how users spell it)
IDENTITY = {
    "input.size": "the input file's size",
    "input.sha256": "the input file's content",
    "model.sha256": "the model (options and weights)",
    "model.dtype": "--dtype (compute)",
    "layers": "--layers",
    "storage_dtype": "--dtype (storage)",
    "output_format": "--format",
    "shard_lines": "--shard-lines",
    "version": "the format version",
}


def shard_name(shard: int) -> str:
    return f"shard-{shard:06d}.h5"


def record_name(shard: int) -> str:
    """A committed shard whose values are in an hdf5 file being assembled (see the module docstring)."""
    return f"shard-{shard:06d}.json"


def is_committed(folder: str, shard: int) -> bool:
    """Whether ``shard`` has a shard file or a record in ``folder`` (either exists only once complete)."""
    return any(os.path.exists(os.path.join(folder, name(shard))) for name, _ in committed_forms())


def committed_forms() -> tuple:
    """The ways a shard is committed in a run folder: (file name of shard k, check that such a file is whole)."""
    return (shard_name, shard_is_complete), (record_name, record_is_complete)


def reduce_layers(array: np.ndarray, layers: str) -> np.ndarray:
    """[L, T, D] -> itself ("all"), the top layer [T, D] ("top") or the mean over layers [T, D] ("average")."""
    return array if layers == "all" else array[-1] if layers == "top" else array.mean(axis=0)


def token_slice(ndim: int, start: int, stop: int) -> tuple[slice, ...]:
    """Index of tokens ``start:stop`` in a shard's ``values`` ([L, T, D] or [T, D]: the token axis is ndim - 2)."""
    return (slice(None),) * (ndim - 2) + (slice(start, stop),)


def drop_cached(path: str) -> None:
    """Let the kernel drop the pages of ``path`` (fsync'd, so clean) from the page cache: output streamed to disk
    is not read back, and the next writes recycle those pages, much cheaper than taking fresh ones. (Most values
    never enter the page cache: this is for HDF5's metadata, and for file systems without ``O_DIRECT``.)"""
    if not hasattr(os, "posix_fadvise"):  # macOS
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class Scratch:
    """A growing page-aligned buffer that arrays are assembled in before :class:`RawWriter` writes them: reused,
    so its pages are not faulted in (and zeroed) anew for every shard. One per writing thread."""

    def __init__(self) -> None:
        self._bytes = host_zeros((0,), np.uint8)

    def array(self, shape: Sequence[int], dtype: str | np.dtype) -> np.ndarray:
        """An uninitialised array over the buffer (block-aligned), valid until the next call."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if self._bytes.size < nbytes:  # with room for somewhat larger shards
            self._bytes = host_zeros((nbytes + nbytes // 4,), np.uint8, populate=True)
        return self._bytes[:nbytes].view(dtype).reshape(shape)


def raw_data_creation() -> h5py.h5p.PropDCID:
    """Dataset creation properties for raw data we write ourselves: allocated at creation, never filled by HDF5
    (and no timestamps, as h5py's default)."""
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
    when it is empty). ``space``: the dataspace of ``shape``, if the caller keeps one."""
    space = space or h5py.h5s.create_simple(tuple(shape))
    dataset = h5py.h5d.create(group, name.encode(), file_type, space, dcpl=creation)
    return dataset.get_offset() if math.prod(shape) else None


def adjacent_runs(starts: Sequence[int | None], sizes: Sequence[int], max_bytes: int) -> list[tuple[int, list[int]]]:
    """Datasets whose raw data (``starts[j]``, ``sizes[j]`` bytes; None: empty) lie back to back in the file ->
    ``(file offset, [dataset indices])`` per run of adjacent ones, each run at most ``max_bytes`` long unless it
    is a single dataset."""
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


def write_shard(
    path: str, arrays: Sequence[np.ndarray], first_line: int, storage_dtype: str, scratch: Scratch | None = None
) -> None:
    """Write one shard atomically: ``arrays`` are lines ``first_line ...`` ([L, T_i, D] or [T_i, D] each)."""
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
) -> None:
    """Commit ``shard`` (lines ``shard * shard_lines ...``) as its shard file in the run folder ``folder``."""
    write_shard(os.path.join(folder, shard_name(shard)), arrays, shard * shard_lines, storage_dtype, scratch)


def shard_is_complete(path: str, lines: int) -> bool:
    """True when ``path`` opens as a shard of ``lines`` lines (a committed shard always does)."""
    try:
        with h5py.File(path, "r") as f:
            return f["offsets"].shape == (lines + 1,) and "values" in f
    except (OSError, KeyError):
        return False


def read_record(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def record_is_complete(path: str, lines: int) -> bool:
    """True when the record ``path`` describes ``lines`` lines that lie inside its values file."""
    try:
        record = read_record(path)
        source = os.path.join(os.path.dirname(path), record["file"])
        itemsize = np.dtype(record["dtype"]).itemsize
        ends = [start + math.prod(shape) * itemsize for start, shape in record["lines"] if start is not None]
        return len(record["lines"]) == lines and os.path.getsize(source) >= max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def read_recorded_lines(path: str) -> list[np.ndarray]:
    """The lines a record commits, read from its values file at the recorded offsets (no HDF5 involved)."""
    record = read_record(path)
    dtype = np.dtype(record["dtype"])
    arrays = []
    with open(os.path.join(os.path.dirname(path), record["file"]), "rb") as f:
        for start, shape in record["lines"]:
            count = math.prod(shape)
            data = os.pread(f.fileno(), count * dtype.itemsize, start) if start is not None else b""
            arrays.append(np.frombuffer(data, dtype, count).reshape(shape))
    return arrays


def read_manifest(folder: str) -> dict:
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def _field(manifest: dict, dotted: str):
    value = manifest
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def manifest_differences(old: dict, new: dict) -> list[str]:
    """What makes ``new`` a different run from ``old``, in words (empty when it may resume)."""
    return [
        f"{IDENTITY[key]} ({_field(old, key)!r} then, {_field(new, key)!r} now)"
        for key in IDENTITY
        if _field(old, key) != _field(new, key)
    ]


class Embeddings:
    """Read-only embeddings written by ``elmo-keras embed`` (any format): ``len()``, ``[i]`` -> float32 array
    for input line ``i`` ([L, T, D] for ``--layers all``, [T, D] for top/average), iteration in line order.
    Use as a context manager or call :meth:`close`.
    """

    layers: str | None = None

    def __len__(self) -> int:
        return self._lines

    def _index(self, i: int) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"line index must be an int, got {type(i).__name__}")
        j = int(i) + self._lines if i < 0 else int(i)
        if not 0 <= j < self._lines:
            raise IndexError(f"line {i} out of range for {self._lines} lines")
        return j

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self._read(self._index(i)), dtype=np.float32)

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def close(self) -> None:
        pass

    def __enter__(self) -> "Embeddings":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ShardedEmbeddings(Embeddings):
    """A ``--format shards`` folder; ``[i]`` opens (and keeps open, a few at a time) only the shard it needs."""

    max_open = 8

    def __init__(self, folder: str, manifest: dict):
        self.folder, self.manifest = folder, manifest
        self.layers = manifest["layers"]
        self._lines, self._shard_lines = manifest["input"]["lines"], manifest["shard_lines"]
        self._open: collections.OrderedDict[int, tuple[h5py.File, np.ndarray]] = collections.OrderedDict()

    def _shard(self, shard: int) -> tuple[h5py.File, np.ndarray]:
        if shard in self._open:
            self._open.move_to_end(shard)
        else:
            if len(self._open) >= self.max_open:
                self._open.popitem(last=False)[1][0].close()
            f = h5py.File(os.path.join(self.folder, shard_name(shard)), "r")
            self._open[shard] = f, f["offsets"][()]
        return self._open[shard]

    def _read(self, i: int) -> np.ndarray:
        f, offsets = self._shard(i // self._shard_lines)
        j = i % self._shard_lines
        values = f["values"]
        return values[token_slice(values.ndim, offsets[j], offsets[j + 1])]

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1][0].close()


class HDF5Embeddings(Embeddings):
    """The original tools' layout: one dataset per line index ("0", "1", ...) plus ``sentence_to_index``."""

    def __init__(self, path: str):
        self.file = h5py.File(path, "r")
        self.layers = self.file.attrs.get("layers")
        self._lines = (
            int(self.file.attrs["lines"])
            if "lines" in self.file.attrs
            else sum(1 for key in self.file if key.isdigit())
        )

    def _read(self, i: int) -> np.ndarray:
        return self.file[str(i)][()]

    @property
    def sentence_to_index(self) -> dict[str, list[int]]:
        return json.loads(self.file["sentence_to_index"][0])

    def close(self) -> None:
        self.file.close()


class NpyEmbeddings(Embeddings):
    """A ``--format npy`` folder: ``{i}.npy`` per line plus ``sentence_to_index.json``."""

    def __init__(self, folder: str):
        self.folder = folder
        with open(os.path.join(folder, "sentence_to_index.json"), encoding="utf-8") as f:
            self.sentence_to_index = json.load(f)
        self._lines = sum(len(v) for v in self.sentence_to_index.values())

    def _read(self, i: int) -> np.ndarray:
        return np.load(os.path.join(self.folder, f"{i}.npy"))


def load_embeddings(path: str | os.PathLike) -> Embeddings:
    """Open what ``elmo-keras embed`` wrote (hdf5 file, shards folder or npy folder), read-only."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, MANIFEST)):
            manifest = read_manifest(path)
            if not manifest.get("complete"):
                raise InputError(
                    f"{path} is an unfinished embedding run: run the same embed command again to finish it"
                )
            return ShardedEmbeddings(path, manifest)
        if os.path.exists(os.path.join(path, "sentence_to_index.json")):
            return NpyEmbeddings(path)
        raise InputError(
            f"{path} is a folder without {MANIFEST} or sentence_to_index.json: not embeddings "
            f"written by elmo-keras embed"
        )
    if not os.path.exists(path):
        raise InputError(f"embeddings not found: {path}")
    if not h5py.is_hdf5(path):
        raise InputError(f"{path} is not an hdf5 file (expected the output of elmo-keras embed)")
    return HDF5Embeddings(path)


class Assembly:
    """Builds OUTPUT inside the run folder from shards as they are committed (any order), so the per-line
    writing overlaps with the model. :func:`make_assembly` picks the format. The npy folder is derived data
    from shard files: a killed run leaves it under a ``.tmp`` name, which the next run deletes and rebuilds. The
    hdf5 file holds the values themselves (see :meth:`HDF5Assembly.commit`); a later run copies the committed
    lines out of it into a new file."""

    def __init__(self, folder: str, manifest: dict):
        self.folder, self.manifest = folder, manifest
        self.path = os.path.join(folder, f"output.{manifest['output_format']}{TMP_SUFFIX}")
        self.dtype = manifest["storage_dtype"]
        self.added: set[int] = set()

    def _store_lines(self, first_line: int, arrays: Sequence[np.ndarray]) -> list[int | None] | None:
        """Store ``arrays`` as lines ``first_line ...``; returns where each line's values lie in the file (hdf5)."""
        raise NotImplementedError

    def _store_index(self, sentence_to_index: dict[str, list[int]]) -> None:
        raise NotImplementedError

    def add(self, shard: int, arrays: Sequence[np.ndarray]) -> list[int | None] | None:
        """Store the lines of ``shard`` (one array per line)."""
        starts = self._store_lines(shard * self.manifest["shard_lines"], arrays)
        self.added.add(shard)
        return starts

    def commit(self, shard: int, arrays: Sequence[np.ndarray], scratch: Scratch | None = None) -> None:
        """Commit ``shard`` computed in this process (a shard file), then add its lines."""
        commit_shard_file(self.folder, shard, arrays, self.manifest["shard_lines"], self.dtype, scratch)
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

    def finish(self, sentence_to_index: dict[str, list[int]]) -> str:
        """Write ``sentence_to_index``, close and fsync; returns the built file or folder (in the run folder)."""
        self._store_index(sentence_to_index)
        fsync_path(self.path)
        return self.path

    def discard(self) -> None:
        """Stop building after a failure: what no committed shard needs is deleted (a later run rebuilds from
        what is committed)."""
        raise NotImplementedError


class HDF5Assembly(Assembly):
    """One dataset per line index plus ``sentence_to_index`` (and ``lines``, ``layers`` attributes)."""

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
        starts = super().add(shard, arrays)
        self.file.flush()  # the shard's data and metadata go to disk now, overlapping the model, not in finish()
        fsync_path(self.path)
        drop_cached(self.path)
        return starts

    def commit(self, shard: int, arrays: Sequence[np.ndarray], scratch: Scratch | None = None) -> None:
        """Add the lines of ``shard`` (on disk when this returns), then commit them with a record of where they
        lie: each value is written once."""
        starts = self.add(shard, arrays)
        record = {
            "first_line": shard * self.manifest["shard_lines"],
            "file": os.path.basename(self.path),
            "dtype": self.dtype,
            "lines": [[start, list(a.shape)] for start, a in zip(starts, arrays)],
        }
        with atomic_file(os.path.join(self.folder, record_name(shard))) as tmp, open(tmp, "w") as f:
            json.dump(record, f, separators=(",", ":"))

    def _store_index(self, sentence_to_index: dict[str, list[int]]) -> None:
        self.file.create_dataset(
            "sentence_to_index", data=np.array([json.dumps(sentence_to_index)], dtype=h5py.string_dtype())
        )
        self.file.attrs["lines"] = self.manifest["input"]["lines"]
        self.file.attrs["layers"] = self.manifest["layers"]
        self.file.close()
        self._raw.close()

    def discard(self) -> None:
        """Close the file and keep it: the records of this run's committed shards point into it. (Closing flushes,
        which fails again after a failed write, e.g. on a full disk: what is committed is on disk already.)"""
        with contextlib.suppress(OSError, RuntimeError):
            self.file.close()
        self._raw.close()


class NpyAssembly(Assembly):
    """A folder: ``{i}.npy`` per line plus ``sentence_to_index.json``."""

    def __init__(self, folder: str, manifest: dict):
        super().__init__(folder, manifest)
        os.mkdir(self.path)
        usual_permissions(self.path)

    def _store_lines(self, first_line: int, arrays: Sequence[np.ndarray]) -> None:
        for line, array in enumerate(arrays, start=first_line):
            np.save(os.path.join(self.path, f"{line}.npy"), array.astype(self.dtype))

    def _store_index(self, sentence_to_index: dict[str, list[int]]) -> None:
        with open(os.path.join(self.path, "sentence_to_index.json"), "w", encoding="utf-8") as f:
            json.dump(sentence_to_index, f, ensure_ascii=False)

    def discard(self) -> None:
        shutil.rmtree(self.path)


def make_assembly(folder: str, manifest: dict) -> Assembly | None:
    """The builder of OUTPUT for the run's format (None for ``shards``: the run folder is the output)."""
    builders = {"hdf5": HDF5Assembly, "npy": NpyAssembly}
    builder = builders.get(manifest["output_format"])
    return builder(folder, manifest) if builder else None
