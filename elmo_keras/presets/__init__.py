"""Pretrained biLMs by name ("presets"): the shipped presets' data folders and ``registry.json``, and their list.

A preset is one of:

- a shipped preset (:data:`PRESETS`, e.g. ``brown-small``): a folder inside this package;
- a published model named in ``registry.json`` (``small``, ``medium``, ``original``, ``original-5.5b``,
  ``pubmed``): its options and weights are downloaded once into the cache (:mod:`elmo_keras.io.download`);
- a model archive named in ``registry.json`` (``nlpl-210`` ...: models in other languages from the NLPL vector
  repository, see :func:`archives`), or any ZIP archive in that layout (a path or URL ending in ``.zip``):
  downloaded and extracted once (:mod:`elmo_keras.io.archive`);
- a folder, or the http(s) URL of a folder, holding ``options.json`` and ``weights.hdf5`` (released layout),
  optionally ``vocab.txt`` (bilm-tf format) and ``softmax.hdf5`` (e.g. the output of ``elmo-keras pretrain``).

Which is which is decided by the one loader, :func:`elmo_keras.io.load.resolve` (it also reads TF Hub modules);
:data:`PRESETS`, :func:`registry` and :func:`archives` are its catalogue, re-exported here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from elmo_keras.errors import InputError
from elmo_keras.io.archive import archive_options
from elmo_keras.io.download import cache_path, is_cached
from elmo_keras.io.load import PRESETS, archives, registry, resolve
from elmo_keras.io.options import load_options
from elmo_keras.io.weights import expected_shapes

__all__ = [
    "PRESETS",
    "PresetInfo",
    "archives",
    "list_presets",
    "parameter_count",
    "preset_files",
    "presets_table",
    "registry",
]


def preset_files(name: str | os.PathLike) -> dict[str, str | None]:
    """Local paths of a preset's files, through :func:`elmo_keras.io.load.resolve`.

    Args:
        name: a shipped or published preset, a folder or a folder's URL (see the module doc); published and URL
            presets are downloaded on first use.

    Returns:
        {"options", "weights", "vocab", "softmax"}: paths, the last two None if absent (all four None for a
        TF Hub module: read it with ``resolve(name).read()``).

    Raises:
        InputError: an unknown name or a folder without the files.
    """
    files = resolve(name)
    return {"options": files.options, "weights": files.weights, "vocab": files.vocab, "softmax": files.softmax}


def parameter_count(options: dict | str | os.PathLike) -> int:
    """Number of weights in a released-layout file for ``options`` (what ``BiLM(options).count_params()`` gives).

    Args:
        options: the options, as a dict or the path of an options.json.

    Returns:
        The number of weights, an int.

    Example:

    ```python
    from elmo_keras.presets import parameter_count, preset_files

    assert parameter_count(preset_files("brown-small")["options"]) == 1_365_456
    ```
    """
    return sum(math.prod(shape) for shape in expected_shapes(load_options(options)).values())


@dataclass(frozen=True)
class PresetInfo:
    """One row of :func:`list_presets`.

    Args:
        name: the preset's name, as ``from_preset`` takes it.
        description: what the model is, in words.
        params: int, the number of weights (see :func:`parameter_count`); None when unknown until downloaded (a
            model archive whose architecture no source states).
        size: int, bytes of the weight file (of the archive, for a model archive); None when unknown until
            downloaded.
        cached: bool, whether the files are on this machine (shipped or already downloaded).
        source: where the weights come from, in words.

    Example:

    ```python
    from elmo_keras.presets import list_presets

    info = list_presets()[0]
    assert (info.name, info.cached) == ("brown-small", True) and info.params > 1_000_000
    ```
    """

    name: str
    description: str
    params: int | None
    size: int | None
    cached: bool
    source: str


def list_presets() -> list[PresetInfo]:
    """The presets known by name: shipped ones, then the published ones, then the model archives (``cached``:
    already downloaded).

    Returns:
        A list of :class:`PresetInfo`.
    """
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
    for name, entry in archives().items():
        path = cache_path(entry["archive_url"])
        cached = is_cached(entry["archive_url"])
        params = _archive_parameter_count(path) if cached else None
        size = os.path.getsize(path) if cached else entry["archive_bytes"]
        rows.append(PresetInfo(name, entry["description"], params, size, cached, entry["source"]))
    return rows


def presets_table(rows: list[PresetInfo]) -> str:
    """:func:`list_presets` as a text table (name, parameters, download size, cached, description), each column as
    wide as its longest value; a size not known before downloading is estimated as 4 bytes (float32) per
    parameter, marked ``~``; where the parameters are not known either, they show as ``?`` and the size as
    ``unknown``.

    Args:
        rows: the :class:`PresetInfo` rows, as :func:`list_presets` returns them.

    Returns:
        The table, one line per row after a header line, as a str.

    Example:

    ```python
    from elmo_keras.presets import list_presets, presets_table

    table = presets_table(list_presets())
    assert table.splitlines()[0].split()[:4] == ["name", "params", "size", "cached"]
    assert table.splitlines()[1].startswith("brown-small ")
    ```
    """
    header = ("name", "params", "size", "cached", "description")
    table = [header] + [
        (row.name, *_params_and_size(row), "yes" if row.cached else "no", row.description) for row in rows
    ]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(f"{cell:{align}{width}}" for cell, align, width in zip(cells, "<>><", widths)), cells[-1]])
        for cells in table
    )


def _archive_parameter_count(path: str) -> int | None:
    """The parameters of the model in a downloaded archive, from its options; None when they cannot be read (the
    error comes when the model is loaded)."""
    try:
        return parameter_count(archive_options(path))
    except (InputError, OSError):
        return None


def _params_and_size(row: PresetInfo) -> tuple[str, str]:
    """The params and size cells of a row: "?" and "unknown" for what is not known before downloading (a size
    estimated from the parameters where those are known)."""
    params = "?" if row.params is None else f"{row.params / 1e6:.1f}M"
    if row.size is not None:
        return params, f"{row.size / 2**20:.1f} MiB"
    return params, "unknown" if row.params is None else f"~{row.params * 4 / 2**20:.0f} MiB"
