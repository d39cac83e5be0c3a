"""Reading what ``elmo-keras embed`` wrote, in any format: :func:`load_embeddings` and the :class:`Embeddings`
classes (a ``shards`` run folder, an hdf5 file, an npy folder)."""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterator

import h5py
import numpy as np

from elmo_keras.corpus.layout import EMPTY, EMPTY_DATASET, MANIFEST, read_manifest, shard_name, token_slice
from elmo_keras.errors import InputError


class Embeddings:
    """Read-only embeddings written by ``elmo-keras embed`` (any format): ``len()``, ``[i]`` -> float32 array
    for input line ``i`` ([L, T, D] for ``--layers all``, [T, D] for top/average), iteration in line order.
    Use as a context manager or call :meth:`close`.

    Made by :func:`load_embeddings`: a :class:`ShardedEmbeddings`, :class:`HDF5Embeddings` or
    :class:`NpyEmbeddings`. ``layers`` is the run's ``--layers`` (None where the output does not say).

    A pooled run (``--pool``) stores one vector per line: ``[i]`` is [L, D] for ``--layers all``, else [D]
    (D the model's width times the number of pooling modes); ``pool`` is its modes, e.g. ``("mean",)`` (None
    for token vectors, and for an npy folder, which does not say), and ``empty`` a bool array [lines], True for
    the lines without tokens, whose vectors are zeros (None for token vectors: there such a line is an array
    of 0 tokens).

    Example:

    ```python
    import json, os, tempfile
    import numpy as np
    from elmo_keras.corpus.readers import load_embeddings

    folder = tempfile.mkdtemp()  # an npy folder, as `elmo-keras embed --format npy` writes it
    np.save(os.path.join(folder, "0.npy"), np.ones((2, 4), "float16"))
    np.save(os.path.join(folder, "1.npy"), np.zeros((0, 4), "float16"))
    with open(os.path.join(folder, "sentence_to_index.json"), "w") as f:
        json.dump({"The bank": [0], "": [1]}, f)
    with load_embeddings(folder) as embeddings:
        assert len(embeddings) == 2 and embeddings[-1].shape == (0, 4)
        assert [v.dtype for v in embeddings] == [np.float32, np.float32]
    ```
    """

    layers: str | None = None
    pool: tuple[str, ...] | None = None
    empty: np.ndarray | None = None

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
        """Close the files held open (reading afterwards is an error)."""
        pass

    def __enter__(self) -> "Embeddings":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ShardedEmbeddings(Embeddings):
    """A ``--format shards`` folder; ``[i]`` opens (and keeps open, a few at a time) only the shard it needs.

    Args:
        folder: the run folder (complete or not: :func:`load_embeddings` refuses an unfinished one).
        manifest: its manifest (:func:`~elmo_keras.corpus.layout.read_manifest`).
    """

    max_open = 8

    def __init__(self, folder: str, manifest: dict):
        self.folder, self.manifest = folder, manifest
        self.layers = manifest["layers"]
        self.pool = tuple(manifest["pool"]) if manifest.get("pool") else None
        if self.pool and os.path.exists(os.path.join(folder, EMPTY)):  # written when the run completes
            self.empty = np.load(os.path.join(folder, EMPTY))
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
        line = values[token_slice(values.ndim, offsets[j], offsets[j + 1])]
        return line[..., 0, :] if self.pool else line  # a pooled line is stored as one row

    def close(self) -> None:
        """Close the open shard files."""
        while self._open:
            self._open.popitem()[1][0].close()


class HDF5Embeddings(Embeddings):
    """The original tools' layout: one dataset per line index ("0", "1", ...) plus ``sentence_to_index``.

    Args:
        path: the hdf5 file.
    """

    def __init__(self, path: str):
        self.file = h5py.File(path, "r")
        self.layers = self.file.attrs.get("layers")
        self.pool = tuple(self.file.attrs["pool"].split(",")) if "pool" in self.file.attrs else None
        self.empty = self.file[EMPTY_DATASET][()] if EMPTY_DATASET in self.file else None
        self._lines = (
            int(self.file.attrs["lines"])
            if "lines" in self.file.attrs
            else sum(1 for key in self.file if key.isdigit())
        )

    def _read(self, i: int) -> np.ndarray:
        return self.file[str(i)][()]

    @property
    def sentence_to_index(self) -> dict[str, list[int]]:
        """Line text -> the line indices that hold it."""
        return json.loads(self.file["sentence_to_index"][0])

    def close(self) -> None:
        """Close the hdf5 file."""
        self.file.close()


class NpyEmbeddings(Embeddings):
    """A ``--format npy`` folder: ``{i}.npy`` per line plus ``sentence_to_index.json``.

    Args:
        folder: the npy folder.
    """

    def __init__(self, folder: str):
        self.folder = folder
        with open(os.path.join(folder, "sentence_to_index.json"), encoding="utf-8") as f:
            self.sentence_to_index = json.load(f)
        if os.path.exists(os.path.join(folder, EMPTY)):
            self.empty = np.load(os.path.join(folder, EMPTY))
        self._lines = sum(len(v) for v in self.sentence_to_index.values())

    def _read(self, i: int) -> np.ndarray:
        return np.load(os.path.join(self.folder, f"{i}.npy"))


def load_embeddings(path: str | os.PathLike) -> Embeddings:
    """Open what ``elmo-keras embed`` wrote (hdf5 file, shards folder or npy folder), read-only.

    Args:
        path: the output of :func:`elmo_keras.embed_file` (``elmo-keras embed``).

    Returns:
        An :class:`Embeddings`: ``[i]`` is the float32 array of input line ``i``.

    Raises:
        InputError: ``path`` is missing, an unfinished run, or not such an output.

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("The bank .\\nA loan .\\n")
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
    out = os.path.join(folder, "out.hdf5")
    ek.embed_file(embedder, os.path.join(folder, "in.txt"), out, layers="top", progress=False)
    with ek.load_embeddings(out) as embeddings:
        assert len(embeddings) == 2 and embeddings[0].shape == (3, 256)  # [T, D]
        assert embeddings.sentence_to_index == {"The bank .": [0], "A loan .": [1]}
    ```
    """
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
