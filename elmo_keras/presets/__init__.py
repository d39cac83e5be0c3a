"""Shipped pretrained biLMs ("presets") and their files.

A preset is a folder with ``options.json``, ``weights.hdf5`` (released layout), ``vocab.txt`` (bilm-tf
format) and ``softmax.hdf5``; :func:`preset_files` also accepts any such folder (e.g. the output of
``elmo-keras pretrain``).
"""
from __future__ import annotations

import os

from elmo_keras.errors import InputError

_HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> one-line description of the shipped presets.
PRESETS: dict[str, str] = {
    "brown-small": "2-layer biLM (LSTM 256, projection 128, 12k-word softmax) pretrained on the Brown corpus; see brown-small/RECIPE.md",
}
_FILES = {"options": "options.json", "weights": "weights.hdf5", "vocab": "vocab.txt", "softmax": "softmax.hdf5"}
_REQUIRED = ("options", "weights")


def preset_files(name: str | os.PathLike) -> dict[str, str | None]:
    """Paths of a preset's files: {"options", "weights", "vocab", "softmax"} (the last two None if absent).

    ``name`` is a shipped preset (see :data:`PRESETS`) or a folder holding at least options.json and
    weights.hdf5.
    """
    name = os.fspath(name)
    folder = os.path.join(_HERE, name) if name in PRESETS else name
    if not os.path.isdir(folder):
        raise InputError(f"unknown preset {name!r}: use one of {sorted(PRESETS)} or a folder with "
                         f"options.json and weights.hdf5")
    files = {key: os.path.join(folder, file) for key, file in _FILES.items()}
    for key in _REQUIRED:
        if not os.path.exists(files[key]):
            raise FileNotFoundError(f"preset {name!r} has no {_FILES[key]} (looked in {folder})")
    return {key: path if os.path.exists(path) else None for key, path in files.items()}
