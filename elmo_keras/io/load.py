"""One loader: any model source -> its files, decided once (:func:`resolve`) -> its weights (:meth:`ModelFiles.read`).

A source is, in the order :func:`resolve` tries them:

- options + weights (``weights=`` given): the released files, each a path or an http(s) URL (downloaded once into
  the cache, see :mod:`elmo_keras.io.download`); the options may also be a dict;
- a published model named in ``presets/registry.json`` (``small``, ``medium``, ``original``, ``original-5.5b``,
  ``pubmed``, see :func:`registry`): its options and weights are downloaded once;
- a TF Hub module handle: a tfhub.dev or Kaggle URL, or the URL of a compressed module (``.tar.gz``), read by
  :func:`elmo_keras.io.hub_module.read_hub_module` (any source, with ``hub=True``);
- a model archive named in ``registry.json`` (e.g. ``nlpl-210``, see :func:`archives`), or any ZIP archive (a path
  or an http(s) URL ending in ``.zip``) in the NLPL layout: options.json, model.hdf5 (or weights.hdf5), optionally
  vocab.txt or vocab.txt.gz, at any folder depth; downloaded and extracted once (:mod:`elmo_keras.io.archive`);
- the http(s) URL of a folder holding ``options.json`` and ``weights.hdf5``, optionally ``vocab.txt`` and
  ``softmax.hdf5`` (downloaded when the server has them);
- a shipped preset (:data:`PRESETS`, e.g. ``brown-small``): a data folder of ``elmo_keras/presets``;
- a folder holding those files (e.g. the ``--out`` folder of ``elmo-keras pretrain``; ``model.hdf5`` and
  ``vocab.txt.gz`` as an NLPL archive names them are taken too), or a TF Hub module folder (``saved_model.pb``, TF1
  Hub format or written by ``export_hub_module``).

The shipped presets and the registry are the loader's catalogue, so they are here (level ``io``); the
``elmo_keras.presets`` package keeps the data and lists them (``ek.list_presets()``).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from elmo_keras.errors import InputError
from elmo_keras.io.archive import extract_archive, is_archive
from elmo_keras.io.download import RemoteUnavailable, fetch, is_url, local_file
from elmo_keras.io.hub_module import _HUB_SITE, HubWeights, read_hub_module
from elmo_keras.io.options import load_options
from elmo_keras.io.weights import iter_weights_hdf5

#: The data folder of the shipped presets (the ``elmo_keras.presets`` package, which holds no loading code).
PRESETS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "presets")

#: name -> one-line description of the shipped presets (folders of :data:`PRESETS_DIR`).
PRESETS: dict[str, str] = {
    "brown-small": (
        "2-layer biLM (LSTM 256, projection 128, 12k-word softmax) pretrained on the Brown corpus; "
        "see brown-small/RECIPE.md"
    ),
    "brown-small-transformer": (
        "brown-small with a causal Transformer (2 layers, 4 heads, width 128) instead of the LSTMs; "
        "see brown-small-transformer/RECIPE.md"
    ),
    "brown-small-cnn": (
        "brown-small with a causal gated CNN (2 layers, kernel 9, width 128) instead of the LSTMs; "
        "see brown-small-cnn/RECIPE.md"
    ),
}
_FILES = {"options": "options.json", "weights": "weights.hdf5", "vocab": "vocab.txt", "softmax": "softmax.hdf5"}
_KINDS = {"options": "json", "weights": "hdf5", "vocab": "text", "softmax": "hdf5"}  # what download.fetch checks
_REQUIRED = ("options", "weights")
#: Other names a model folder's file may have (an extracted NLPL archive's), tried when the usual one is missing.
_ALSO = {"weights": "model.hdf5", "vocab": "vocab.txt.gz"}
#: The sentence boundaries and the unknown word that head a bilm-tf vocab.txt (in either order): not words.
_VOCAB_SPECIALS = frozenset({"<S>", "</S>", "<UNK>"})
_HUB_ARCHIVE = re.compile(r"\.(tar\.gz|tgz)$|[?&]tf-hub-format=compressed", re.IGNORECASE)


@functools.cache
def registry() -> dict[str, dict]:
    """The published models of ``registry.json``.

    Returns:
        name -> {description, architecture, params, options_url, weights_url, weights_bytes, weights_sha256,
        source}.
    """
    return _registry_file()["presets"]


@functools.cache
def archives() -> dict[str, dict]:
    """The model archives of ``registry.json`` (ZIP archives in the NLPL layout, see :mod:`elmo_keras.io.archive`),
    by name, e.g. ``nlpl-210``.

    Returns:
        name -> {description, language, corpus, archive_url, archive_bytes, archive_sha256, source}
        (``archive_bytes`` and ``archive_sha256`` are None where no source publishes them: then the download is
        checked against the size the server announces, and is not checked against a sha256).

    Example:

    ```python
    from elmo_keras.io.load import archives

    assert all(entry["archive_url"].endswith(".zip") for entry in archives().values())
    ```
    """
    return _registry_file()["archives"]


@functools.cache
def _registry_file() -> dict:
    with open(os.path.join(PRESETS_DIR, "registry.json"), encoding="utf-8") as f:
        return json.load(f)


@dataclass(frozen=True)
class ModelWeights:
    """A model's weights as read by :meth:`ModelFiles.read`.

    Args:
        options: the normalised options dict.
        arrays: {released dataset name: array}, or (name, array) pairs streamed from an hdf5 file (one array in
            memory at a time: the peak is the variables plus the largest array).
        module: what a TF Hub module adds (sentence boundaries, mixing weights); None for released files.
    """

    options: dict
    arrays: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]]
    module: HubWeights | None = None

    def bilm_arguments(self, boundaries: str | None = None) -> dict:
        """The ``BiLM`` keyword arguments the source decides: ``add_sentence_boundaries`` for a TF Hub module
        (see :meth:`HubWeights.sentence_boundaries`); none for released files (the ``BiLM`` default stands).

        Args:
            boundaries: TF Hub modules only: `"none"`, `"add"` or `None` (see ``BiLM.from_hub``). Defaults to
                `None`.

        Returns:
            A dict of ``BiLM`` keyword arguments, empty for released files.
        """
        return {} if self.module is None else {"add_sentence_boundaries": self.module.sentence_boundaries(boundaries)}

    def init_mixes(self, mixes) -> None:
        """Start built trainable ScalarMixes from a TF Hub module's aggregation; released files have none.

        Args:
            mixes: the built :class:`~elmo_keras.layers.ScalarMix` layers (e.g. ``Elmo.mixes``).
        """
        if self.module is not None:
            self.module.init_mixes(mixes)


@dataclass(frozen=True)
class ModelFiles:
    """Where a model's parts are, as :func:`resolve` found them: local paths (URLs already downloaded), or the
    handle of a TF Hub module.

    Args:
        options: path of options.json, or an options dict; None for a TF Hub module.
        weights: path of the released-layout hdf5 weights; None for a TF Hub module.
        vocab: path of vocab.txt or vocab.txt.gz (bilm-tf format, see :func:`vocab_words`), None when the source
            has none.
        softmax: path of softmax.hdf5 (``BiLanguageModel.save_softmax_hdf5``), None when the source has none.
        hub: a TF Hub module's folder or URL (what ``tensorflow_hub.load`` takes); None for released files.
    """

    options: dict | str | None = None
    weights: str | None = None
    vocab: str | None = None
    softmax: str | None = None
    hub: str | None = None

    def read(self, use_skip_connections: bool | None = None) -> ModelWeights:
        """Read the options and weights in the released layout (checked; see
        :func:`elmo_keras.io.weights.iter_weights_hdf5` and :func:`elmo_keras.io.hub_module.read_hub_module`).

        Args:
            use_skip_connections: TF Hub modules only, see :func:`~elmo_keras.io.hub_module.read_hub_module`.

        Returns:
            A :class:`ModelWeights`; released weights are streamed when they are set, not read here.
        """
        if self.hub is not None:
            module = read_hub_module(self.hub, use_skip_connections)
            return ModelWeights(module.options, module.arrays, module)
        options = load_options(self.options)
        return ModelWeights(options, iter_weights_hdf5(self.weights, options))


def resolve(
    source: str | os.PathLike | dict, weights: str | os.PathLike | None = None, hub: bool = False
) -> ModelFiles:
    """Decide how to read a model source, and fetch what must be downloaded (see the module doc for the sources).

    Args:
        source: a preset name (shipped or published), a folder, the URL of a folder, a ZIP archive (path or URL), a
            TF Hub module (folder or URL), or with ``weights``: an options.json (path, URL or dict).
        weights: the released-layout hdf5 weight file (path or URL) that goes with options ``source``.
        hub: read ``source`` as a TF Hub module, whatever it looks like (what ``from_hub`` asks for).

    Returns:
        A :class:`ModelFiles`.

    Raises:
        InputError: an unknown name, a folder or an archive without options.json and weights.hdf5, a damaged
            archive, or a download that failed (:class:`~elmo_keras.io.download.RemoteUnavailable`).

    Example:

    ```python
    from elmo_keras.io.load import resolve

    files = resolve("brown-small")
    assert files.weights.endswith("weights.hdf5") and files.hub is None
    assert files.read().options["lstm"]["n_layers"] == 2
    assert resolve("https://tfhub.dev/google/elmo/3").hub == "https://tfhub.dev/google/elmo/3"
    ```
    """
    if weights is not None:
        options = source if isinstance(source, Mapping) else local_file(source, _KINDS["options"])
        return ModelFiles(options, local_file(weights, _KINDS["weights"]))
    if isinstance(source, Mapping):
        raise InputError("options given as a dict need their weights: a released-layout hdf5 file (path or URL)")
    name = os.fspath(source)
    if name in registry() and not hub:
        entry = registry()[name]
        return ModelFiles(
            fetch(entry["options_url"], kind=_KINDS["options"]),
            fetch(entry["weights_url"], entry["weights_sha256"], kind=_KINDS["weights"]),
        )
    if name in archives() and not hub:
        entry = archives()[name]
        return _folder_files(extract_archive(entry["archive_url"], entry["archive_sha256"]), name)
    if is_archive(name) and not hub:
        return _folder_files(extract_archive(name), name)
    if hub or _HUB_SITE.match(name.split("://", 1)[-1]) or (is_url(name) and _HUB_ARCHIVE.search(name)):
        return ModelFiles(hub=name)
    if is_url(name):
        return _url_folder_files(name)
    folder = os.path.join(PRESETS_DIR, name) if name in PRESETS else name
    if not os.path.isdir(folder):
        raise InputError(
            f"unknown preset {name!r}: use one of {sorted(PRESETS) + sorted(registry()) + sorted(archives())} "
            f"(ek.list_presets()), or a folder or URL with options.json and weights.hdf5, or a .zip of them"
        )
    return _folder_files(folder, name)


def _folder_files(folder: str, name: str) -> ModelFiles:
    """The files of the model folder ``folder`` (``name``: how the user named it), or of the TF Hub module there."""
    files = {key: os.path.join(folder, file) for key, file in _FILES.items()}
    for key, other in _ALSO.items():
        if not os.path.isfile(files[key]) and os.path.isfile(os.path.join(folder, other)):
            files[key] = os.path.join(folder, other)
    missing = [_FILES[key] for key in _REQUIRED if not os.path.isfile(files[key])]
    if missing and os.path.isfile(os.path.join(folder, "saved_model.pb")):
        return ModelFiles(hub=name)
    if missing:
        raise InputError(
            f"preset folder {folder} has no {' and no '.join(missing)}: a preset folder holds "
            "options.json and weights.hdf5 (released layout), optionally vocab.txt and softmax.hdf5 "
            "(e.g. the --out folder of elmo-keras pretrain)"
        )
    return ModelFiles(**{key: path if os.path.exists(path) else None for key, path in files.items()})


def _url_folder_files(url: str) -> ModelFiles:
    """The files of a model folder at ``url``: options and weights must be there, vocab and softmax may not."""
    base = url.rstrip("/") + "/"
    files = {key: fetch(base + _FILES[key], kind=_KINDS[key]) for key in _REQUIRED}
    for key in _FILES.keys() - set(_REQUIRED):
        try:
            files[key] = fetch(base + _FILES[key], kind=_KINDS[key])
        except RemoteUnavailable:  # not on the server (404 ...), or not cached while offline
            files[key] = None
    return ModelFiles(**files)


def open_vocab(path: str | os.PathLike):
    """Open a vocabulary file for reading as UTF-8 text, gzip-compressed when its name ends in ``.gz``.

    Args:
        path: a ``vocab.txt`` or ``vocab.txt.gz``.

    Returns:
        A text file object (use it in a ``with`` block).

    Example:

    ```python
    from elmo_keras.io.load import open_vocab, resolve

    with open_vocab(resolve("brown-small").vocab) as f:
        assert f.readline().rstrip() == "<S>"
    ```
    """
    path = os.fspath(path)
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def vocab_words(path: str | os.PathLike, limit: int) -> list[str]:
    """The first ``limit`` words of a bilm-tf vocabulary file (one token a line, most frequent first), without the
    ``<S>``, ``</S>`` and ``<UNK>`` entries that head it: e.g. the words worth caching in an embedder.

    Args:
        path: a ``vocab.txt`` or ``vocab.txt.gz``.
        limit: int >= 0, the most words to return (only those lines are read).

    Returns:
        The words, in the file's order.

    Raises:
        InputError: naming the file when it is not UTF-8 text (or not gzip data, for ``.gz``).

    Example:

    ```python
    from elmo_keras.io.load import resolve, vocab_words

    assert vocab_words(resolve("brown-small").vocab, 3) == ["the", ",", "."]
    ```
    """
    if limit < 0:
        raise InputError(f"the number of vocabulary words to read must be >= 0, got {limit}")
    words: list[str] = []
    try:
        with open_vocab(path) as f:
            for line in f:
                if len(words) >= limit:
                    break
                word = line.rstrip("\r\n")
                if word and word not in _VOCAB_SPECIALS:
                    words.append(word)
    except (UnicodeDecodeError, OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError
        kind = "gzip-compressed UTF-8 text" if os.fspath(path).lower().endswith(".gz") else "UTF-8 text"
        raise InputError(
            f"vocabulary file {os.fspath(path)} cannot be read as {kind} ({err}); it holds one token a line"
        ) from None
    return words
