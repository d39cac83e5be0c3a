"""Pretrained biLMs by name ("presets") and their files.

A preset is one of:

- a shipped preset (:data:`PRESETS`, e.g. ``brown-small``): a folder inside this package;
- a published model named in ``registry.json`` (``small``, ``medium``, ``original``, ``original-5.5b``,
  ``pubmed``): its options and weights are downloaded once into the cache (:mod:`elmo_keras.io.download`);
- a folder, or the http(s) URL of a folder, holding ``options.json`` and ``weights.hdf5`` (released layout),
  optionally ``vocab.txt`` (bilm-tf format) and ``softmax.hdf5`` (e.g. the output of ``elmo-keras pretrain``).
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass

from elmo_keras.errors import InputError
from elmo_keras.io.download import RemoteUnavailable, cache_path, fetch, is_cached, is_url
from elmo_keras.io.options import load_options
from elmo_keras.io.weights import expected_shapes

_HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> one-line description of the shipped presets.
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


@functools.cache
def registry() -> dict[str, dict]:
    """The published models of ``registry.json``: name -> {description, architecture, params, options_url,
    weights_url, weights_bytes, weights_sha256, source}."""
    with open(os.path.join(_HERE, "registry.json"), encoding="utf-8") as f:
        return json.load(f)["presets"]


def preset_files(name: str | os.PathLike) -> dict[str, str | None]:
    """Local paths of a preset's files: {"options", "weights", "vocab", "softmax"} (the last two None if absent).

    ``name`` is a shipped or published preset, a folder or a folder's URL (see the module doc); published and
    URL presets are downloaded on first use. InputError for an unknown name or a folder without the files.
    """
    name = os.fspath(name)
    if name in registry():
        entry = registry()[name]
        return {
            "options": fetch(entry["options_url"], kind=_KINDS["options"]),
            "weights": fetch(entry["weights_url"], entry["weights_sha256"], kind=_KINDS["weights"]),
            "vocab": None,
            "softmax": None,
        }
    if is_url(name):
        return _url_folder_files(name)
    folder = os.path.join(_HERE, name) if name in PRESETS else name
    if not os.path.isdir(folder):
        raise InputError(
            f"unknown preset {name!r}: use one of {sorted(PRESETS) + sorted(registry())} "
            f"(ek.list_presets()), or a folder or URL with options.json and weights.hdf5"
        )
    files = {key: os.path.join(folder, file) for key, file in _FILES.items()}
    missing = [_FILES[key] for key in _REQUIRED if not os.path.isfile(files[key])]
    if missing:
        raise InputError(
            f"preset folder {folder} has no {' and no '.join(missing)}: a preset folder holds "
            "options.json and weights.hdf5 (released layout), optionally vocab.txt and softmax.hdf5 "
            "(e.g. the --out folder of elmo-keras pretrain)"
        )
    return {key: path if os.path.exists(path) else None for key, path in files.items()}


def _url_folder_files(url: str) -> dict[str, str | None]:
    """The files of a preset folder at ``url``: options and weights must be there, vocab and softmax may not."""
    base = url.rstrip("/") + "/"
    files = {key: fetch(base + _FILES[key], kind=_KINDS[key]) for key in _REQUIRED}
    for key in _FILES.keys() - set(_REQUIRED):
        try:
            files[key] = fetch(base + _FILES[key], kind=_KINDS[key])
        except RemoteUnavailable:  # not on the server (404 ...), or not cached while offline
            files[key] = None
    return files


def parameter_count(options: dict | str | os.PathLike) -> int:
    """Number of weights in a released-layout file for ``options`` (what ``BiLM(options).count_params()`` gives)."""
    return sum(math.prod(shape) for shape in expected_shapes(load_options(options)).values())


@dataclass(frozen=True)
class PresetInfo:
    """One row of :func:`list_presets`. ``size``: bytes of the weight file, None when unknown until downloaded."""

    name: str
    description: str
    params: int
    size: int | None
    cached: bool
    source: str


def list_presets() -> list[PresetInfo]:
    """The presets known by name: shipped ones, then the published ones (``cached``: already downloaded)."""
    rows = []
    for name, description in PRESETS.items():
        files = preset_files(name)
        rows.append(
            PresetInfo(
                name,
                description,
                parameter_count(files["options"]),
                os.path.getsize(files["weights"]),
                True,
                "shipped with elmo_keras",
            )
        )
    for name, entry in registry().items():
        cached = is_cached(entry["options_url"]) and is_cached(entry["weights_url"])
        size = os.path.getsize(cache_path(entry["weights_url"])) if cached else entry["weights_bytes"]
        rows.append(PresetInfo(name, entry["description"], entry["params"], size, cached, entry["source"]))
    return rows


def presets_table(rows: list[PresetInfo]) -> str:
    """:func:`list_presets` as a text table (name, parameters, download size, cached, description), each column as
    wide as its longest value; a size not known before downloading is estimated as 4 bytes (float32) per
    parameter, marked ``~``."""
    header = ("name", "params", "size", "cached", "description")
    table = [header] + [
        (
            row.name,
            f"{row.params / 1e6:.1f}M",
            f"~{row.params * 4 / 2**20:.0f} MiB" if row.size is None else f"{row.size / 2**20:.1f} MiB",
            "yes" if row.cached else "no",
            row.description,
        )
        for row in rows
    ]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(f"{cell:{align}{width}}" for cell, align, width in zip(cells, "<>><", widths)), cells[-1]])
        for cells in table
    )
