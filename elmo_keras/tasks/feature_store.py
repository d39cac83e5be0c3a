"""Feature stores: the frozen biLM's layers of a ``fit``'s texts on disk, embedded once and reused.

``TextModel.fit(..., features_dir=DIR)`` (``elmo-keras train --features-dir DIR``) keeps one store per set of
texts and model in ``DIR`` (by default ``CACHE/features``, the download cache's ``features`` folder):

```
DIR/<key>/          key: 16 hex digits of the sha256 of store.json's identity
  texts.txt         the distinct texts, one per line (their tokens joined by one space), in store order
  store.json        the identity: model sha256 and dtype, layers, storage dtype, shard lines, texts sha256
  layers/           the texts' layers, written by embed_file (format shards, float16, layers "all")
  layers.partial/   the same while it is being embedded: committed shards survive a kill and are resumed
```

The identity holds everything that decides the contents, so a second ``fit`` on the same texts (in any order,
whatever the head or mix) embeds nothing, and a store is never used for other texts or another model. Store
order is the texts' sha256 order: a pseudo-random order fixed by the texts, so that shuffling by windows of
nearby lines (see :func:`~elmo_keras.tasks.features.epoch_batches`) mixes classes even when the input is sorted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence

import h5py
import numpy as np

from elmo_keras.corpus import layout
from elmo_keras.corpus.readers import ShardedEmbeddings
from elmo_keras.corpus.run import LOCK, Runner, embed_file, model_identity, partial_path
from elmo_keras.embed import ElmoEmbedder
from elmo_keras.errors import InputError
from elmo_keras.io.download import cache_dir
from elmo_keras.text import tokenize
from elmo_keras.utils.files import atomic_file, exclusive_lock, file_sha256, write_json

STORE_FORMAT = 1  #: the version of the layout above
STORAGE_DTYPE = "float16"  #: how the layers are stored (half the bytes of float32)
SHARD_LINES = 1024  #: texts per committed shard: a kill loses at most two shards of work
READ_WINDOW = 4 * SHARD_LINES  #: training examples shuffled together: reads stay within a few shards
BATCH_TOKENS = 16_384  #: the most padded tokens of a training batch: long texts get smaller batches
TEXTS, IDENTITY, LAYERS = "texts.txt", "store.json", "layers"
MEMORY_FRACTION = 0.25  #: default share of the available memory that features may take before going to disk


def default_root() -> str:
    """Where stores go when no ``features_dir`` is given: ``CACHE/features``.

    Returns:
        The folder (``$ELMO_KERAS_CACHE/features``, else ``~/.cache/elmo_keras/features``).
    """
    return os.path.join(cache_dir(), "features")


@dataclasses.dataclass
class FitTexts:
    """The distinct texts of a ``fit`` in store order, and each example's line among them.

    Made by :meth:`of`.

    Args:
        tokens: the distinct texts' token lists, in store order.
        rows: int `[N]`, the store line of each example (text) given to :meth:`of`.
    """

    tokens: list[list[str]]
    rows: np.ndarray

    @classmethod
    def of(cls, texts: Sequence[str]) -> "FitTexts":
        """Tokenise ``texts`` and put the distinct token lists in store order (their sha256 order).

        Args:
            texts: the examples' texts (training and validation).

        Returns:
            A :class:`FitTexts`.
        """
        lines = [" ".join(tokenize(text)) for text in texts]
        digests = {line: hashlib.sha256(line.encode("utf-8")).digest() for line in lines}
        distinct = sorted(digests, key=digests.__getitem__)
        line_of = {line: i for i, line in enumerate(distinct)}
        return cls([line.split(" ") if line else [] for line in distinct], np.array([line_of[x] for x in lines]))

    @property
    def lengths(self) -> np.ndarray:
        """int `[lines]`, each distinct text's number of tokens."""
        return np.array([len(t) for t in self.tokens], dtype=np.int64)

    def file_bytes(self) -> bytes:
        """``texts.txt``: a UTF-8 byte-order mark (so that no text's own one is taken for it), one text per line."""
        return "\ufeff".encode() + "".join(" ".join(t) + "\n" for t in self.tokens).encode("utf-8")


def feature_bytes(embedder: ElmoEmbedder, texts: FitTexts) -> int:
    """What the texts' layers take in float16: tokens x layers x width x 2 bytes.

    Args:
        embedder: the ``ElmoEmbedder`` of the frozen biLM.
        texts: a :class:`FitTexts`.

    Returns:
        int, bytes.
    """
    bilm = embedder.bilm
    return int(texts.lengths.sum()) * (bilm.num_layers + 1) * 2 * bilm.projection_dim * 2


def identity(embedder: ElmoEmbedder, texts_sha256: str) -> dict:
    """Everything that decides a store's contents.

    Args:
        embedder: the ``ElmoEmbedder`` of the frozen biLM.
        texts_sha256: the sha256 of the store's ``texts.txt``.

    Returns:
        The identity, written as ``store.json``.
    """
    return {
        "format": STORE_FORMAT,
        "model": model_identity(embedder),
        "layers": "all",
        "storage_dtype": STORAGE_DTYPE,
        "shard_lines": SHARD_LINES,
        "texts_sha256": texts_sha256,
    }


def store_key(store_identity: dict) -> str:
    """16 hex digits of the sha256 of ``store_identity`` (the store's folder name).

    Args:
        store_identity: from :func:`identity`.

    Returns:
        str.
    """
    return hashlib.sha256(json.dumps(store_identity, sort_keys=True).encode()).hexdigest()[:16]


class StoredFeatures:
    """A finished store, read one text at a time (a :class:`~elmo_keras.tasks.features.FeatureTable`).

    ``[i]`` is line ``i``'s layers, float32 `[n_tokens, L, D]`; shards are opened as needed, 16 at a time.

    Args:
        path: the store folder.
        lengths: int `[lines]`, each line's number of tokens (checked against the shards).
        manifest: the manifest of its layers' run (checked).
    """

    def __init__(self, path: str, lengths: np.ndarray, manifest: dict):
        self.path = path
        self._embeddings = ShardedEmbeddings(os.path.join(path, LAYERS), manifest)
        self._embeddings.max_open = 16  # READ_WINDOW's examples span at most about 3 windows of 4 shards
        self.lengths = lengths
        layers, _, dim = self._embeddings[0].shape  # [L, T, D]
        self.feature_shape = (layers, dim)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.transpose(self._embeddings[i], (1, 0, 2))

    def close(self) -> None:
        """Close the open shard files."""
        self._embeddings.close()


def _damaged(path: str, what: str) -> InputError:
    return InputError(
        f"feature store {path} is damaged or stale ({what}); it is not used: remove it with "
        f"`elmo-keras features --remove {path}` and run again to embed the texts anew"
    )


def _check_finished(path: str, expected: dict, lengths: np.ndarray) -> dict:
    """Refuse a store whose identity, run manifest or shards do not match what it should hold; return the run
    manifest."""
    try:
        with open(os.path.join(path, IDENTITY), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError) as err:
        raise _damaged(path, f"{IDENTITY} cannot be read: {err}") from None
    if found != expected:
        differs = sorted(k for k in expected if found.get(k) != expected.get(k))
        raise _damaged(path, f"{IDENTITY} differs in {', '.join(differs) or 'extra fields'}")
    folder = os.path.join(path, LAYERS)
    manifest = _run_manifest(path, folder, "its finished embedding", expected)
    if (
        manifest.get("storage_dtype") != STORAGE_DTYPE
        or manifest.get("layers") != "all"
        or not manifest.get("complete")
    ):
        raise _damaged(path, "its layers are not a finished float16 run of all layers")
    for shard in range(manifest["shards"]):
        first = shard * SHARD_LINES
        want = lengths[first : first + SHARD_LINES]
        name = os.path.join(folder, layout.shard_name(shard))
        try:
            with h5py.File(name, "r") as f:
                offsets = f["offsets"][()]
                stored = f["values"].shape[1]
        except (OSError, KeyError) as err:
            raise _damaged(path, f"shard {os.path.basename(name)} cannot be read: {err}") from None
        if len(offsets) != len(want) + 1 or not np.array_equal(np.diff(offsets), want) or stored != offsets[-1]:
            raise _damaged(path, f"shard {os.path.basename(name)} does not hold the texts' tokens")
    return manifest


def open_store(
    embedder: ElmoEmbedder,
    texts: FitTexts,
    root: str | os.PathLike | None = None,
    runner: Runner | None = None,
    progress: bool = True,
) -> tuple[StoredFeatures, int]:
    """The store of ``texts`` under ``root``: reused when finished, else embedded (resuming a killed run).

    Args:
        embedder: the ``ElmoEmbedder`` of the frozen biLM.
        texts: a :class:`FitTexts`.
        root: the stores' folder, or `None` for :func:`default_root`. Defaults to `None`.
        runner: how the shards are embedded (see :func:`elmo_keras.embed_file`), `None` for this process.
            Defaults to `None`.
        progress: bool, show the embedding's progress bar. Defaults to `True`.

    Returns:
        ``(StoredFeatures, texts embedded now)``: 0 when the store was reused.

    Raises:
        InputError: the store is damaged or stale (it names the store and how to remove it).
    """
    root = os.path.abspath(os.fspath(root) if root is not None else default_root())
    data = texts.file_bytes()
    expected = identity(embedder, hashlib.sha256(data).hexdigest())
    path = os.path.join(root, store_key(expected))
    layers = os.path.join(path, LAYERS)
    if not os.path.isdir(layers):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            raise InputError(
                f"cannot create the feature store {path}: {err.strerror}; pass features_dir (--features-dir) a "
                f"writable folder"
            ) from None
        texts_path = os.path.join(path, TEXTS)
        if not os.path.exists(texts_path) or file_sha256(texts_path) != expected["texts_sha256"]:
            with atomic_file(texts_path) as tmp, open(tmp, "wb") as f:
                f.write(data)
        write_json(os.path.join(path, IDENTITY), expected)
        _check_partial(path, expected)
        before = _committed_lines(layers, len(texts.tokens))
        embed_file(
            embedder,
            texts_path,
            layers,
            layers="all",
            fmt="shards",
            storage_dtype=STORAGE_DTYPE,
            shard_lines=SHARD_LINES,
            runner=runner,
            progress=progress,
        )
        embedded = len(texts.tokens) - before
    else:
        embedded = 0
        os.utime(os.path.join(path, IDENTITY))  # "last used", for `elmo-keras features`
    manifest = _check_finished(path, expected, texts.lengths)
    return StoredFeatures(path, texts.lengths, manifest), embedded


def _check_partial(path: str, expected: dict) -> None:
    """Refuse an interrupted embedding in ``path`` that was not embedding these texts with this model."""
    folder = partial_path(os.path.join(path, LAYERS))
    if os.path.isfile(os.path.join(folder, layout.MANIFEST)):
        _run_manifest(path, folder, "its interrupted embedding", expected)


def _run_manifest(path: str, folder: str, what: str, expected: dict) -> dict:
    """The manifest of the store ``path``'s embed run in ``folder`` (``what`` names it in errors), refused
    unless that run embeds the store's texts with the store's model."""
    try:
        manifest = layout.read_manifest(folder)
    except (OSError, ValueError) as err:
        raise _damaged(path, f"{what}'s manifest cannot be read: {err}") from None
    if (
        manifest.get("input", {}).get("sha256") != expected["texts_sha256"]
        or manifest.get("model") != expected["model"]
    ):
        raise _damaged(path, f"{what} was of other texts or another model")
    return manifest


def _committed_lines(layers: str, lines: int) -> int:
    """Lines already committed by an interrupted run of ``layers`` (0 when none)."""
    folder = partial_path(layers)
    if not os.path.isdir(folder):
        return 0
    shards = range(0, lines, SHARD_LINES)
    return sum(min(SHARD_LINES, lines - first) for first in shards if layout.is_committed(folder, first // SHARD_LINES))


def list_stores(root: str | os.PathLike | None = None) -> list[dict]:
    """The stores under ``root``: one dict per store (``path``, ``texts``, ``tokens``, ``bytes``, ``state``:
    "finished", "partial" (an interrupted embedding, resumed by the next fit on the same texts) or "damaged",
    ``last_used``: seconds since the epoch).

    Args:
        root: the stores' folder, or `None` for :func:`default_root`. Defaults to `None`.

    Returns:
        list of dicts, the most recently used first.
    """
    root = os.fspath(root) if root is not None else default_root()
    stores = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        path = os.path.join(root, name)
        if name.startswith(".") or not os.path.isfile(os.path.join(path, IDENTITY)):
            continue
        manifest = os.path.join(path, LAYERS, layout.MANIFEST)
        state = (
            "finished"
            if os.path.isfile(manifest)
            else "partial"
            if os.path.isdir(partial_path(os.path.join(path, LAYERS)))
            else "damaged"
        )
        texts, tokens = 0, 0
        if state == "finished":
            with open(manifest, encoding="utf-8") as f:
                run = json.load(f)
            texts, tokens = run["input"]["lines"], run["input"].get("tokens", 0)
        stores.append(
            {
                "path": path,
                "texts": texts,
                "tokens": tokens,
                "bytes": _size(path),
                "state": state,
                "last_used": os.path.getmtime(os.path.join(path, IDENTITY)),
            }
        )
    return sorted(stores, key=lambda s: -s["last_used"])


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def remove_store(path: str | os.PathLike) -> int:
    """Delete a store (finished or not); refused while a run is embedding into it.

    Args:
        path: a store folder (as :func:`list_stores` names it).

    Returns:
        int, the bytes freed.

    Raises:
        InputError: ``path`` is not a store, or another process is embedding into it.
    """
    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, IDENTITY)):
        raise InputError(f"{path} is not a feature store (no {IDENTITY}); nothing removed")
    partial = partial_path(os.path.join(path, LAYERS))
    size = _size(path)
    parent, name = os.path.split(os.path.abspath(path))
    aside = os.path.join(parent, f".{name}.removing-{os.getpid()}-{time.time_ns()}")
    # held through the rename: no fit starts embedding into the store between the check and the removal
    with exclusive_lock(partial, "fit embedding", LOCK) if os.path.isdir(partial) else contextlib.nullcontext():
        os.rename(path, aside)  # one rename: a kill never leaves a half-deleted store that looks whole
    for left in [n for n in os.listdir(parent) if n.startswith(".") and ".removing-" in n]:
        shutil.rmtree(os.path.join(parent, left), ignore_errors=True)  # this one, and any a killed removal left
    return size
