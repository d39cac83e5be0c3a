"""What a saved model is made of: the one Keras registry of the package's classes, and ``.keras`` files with their
labels file, written crash-safe.

Every class that can end up in a ``.keras`` file is decorated with :func:`serializable` and imported by
``import elmo_keras``, so ``keras.models.load_model`` finds it in a process that did nothing else.
A trained model's class or tag names live beside it in ``MODEL.keras.labels.json`` (:func:`save_model` writes
it, :func:`read_labels` reads it; ``elmo-keras train``, ``export``, ``predict`` go through them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence

import keras

from elmo_keras.errors import InputError
from elmo_keras.utils.files import TMP_SUFFIX, fsync_path, write_json

PACKAGE = "elmo_keras"

#: The decorator for every saveable class of the package: registered as ``elmo_keras>ClassName``.
serializable = keras.saving.register_keras_serializable(package=PACKAGE)


def registered_names() -> set[str]:
    """The ``elmo_keras>Name`` keys registered with Keras so far in this process."""
    return {key for key in keras.saving.get_custom_objects() if key.startswith(PACKAGE + ">")}


def labels_path(model_path: str | os.PathLike) -> str:
    """Where the labels of the model saved at ``model_path`` live: ``MODEL.keras.labels.json``.

    Args:
        model_path: the ``.keras`` file.

    Returns:
        The labels file's path.
    """
    return os.path.realpath(model_path) + ".labels.json"


def save_model(model: keras.Model, path: str | os.PathLike, label_names: Sequence[str] | None = None) -> str:
    """Save ``model`` to ``path`` (a ``.keras`` file) and, with ``label_names``, its labels file beside it.

    Both are written under temporary names and renamed into place: a run killed, or stopped by a full disk or a
    file-size limit, leaves the previous files as they were (and no half-written zip).

    Args:
        model: the model to save.
        path: file name ending in ``.keras``.
        label_names: class or tag names in output order, or ``None`` for no labels file.

    Returns:
        ``path``.

    Example:

    ```python
    import os, tempfile
    import keras
    from elmo_keras.saving import read_labels, save_model

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    path = os.path.join(tempfile.mkdtemp(), "m.keras")
    save_model(model, path, ["no", "yes"])
    assert read_labels(path) == ["no", "yes"]
    ```
    """
    given, path = os.fspath(path), os.path.realpath(path)  # through a link: its target is replaced, the link stays
    if not given.endswith(".keras"):
        raise InputError(f"{given}: a model file name must end in .keras, e.g. model.keras")
    if label_names is not None:  # checked before anything is written
        label_names = check_labels([str(name) for name in label_names], "label_names")
    folder, name = os.path.split(path)
    staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=TMP_SUFFIX, dir=folder)  # Keras wants a .keras name
    try:
        tmp = os.path.join(staging, name)
        model.save(tmp)
        fsync_path(tmp)
        os.replace(tmp, path)
        fsync_path(folder)
    except OSError as err:  # e.g. a full disk: name the file the user asked for, not Keras' buffer
        err.filename = err.filename or given
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if label_names is not None:
        write_json(labels_path(path), label_names)
    return given


def check_labels(names: object, source: str, outputs: int | None = None) -> list[str]:
    """Class or tag names as a model's outputs need them: a list of strings, each name once, one per output.

    Args:
        names: the names, e.g. a parsed labels file.
        source: what errors name: the labels file, or the argument the names came from.
        outputs: how many outputs the model has, or ``None`` to leave the count unchecked.

    Returns:
        ``names`` as a list.

    Raises:
        InputError: one line naming ``source`` and what is wrong: not a list, a name that is not a string, a name
            given twice (both positions), or a count that differs from ``outputs``.

    Example:

    ```python
    from elmo_keras.errors import InputError
    from elmo_keras.saving import check_labels

    assert check_labels(["neg", "pos"], "labels", outputs=2) == ["neg", "pos"]
    try:
        check_labels(["a", "a", "b"], "m.keras.labels.json")
    except InputError as err:
        assert "'a'" in str(err) and "0 and 1" in str(err)
    ```
    """
    if not isinstance(names, list):
        raise InputError(f"{source} must hold a JSON list of strings (the class names in output order)")
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise InputError(
                f"{source}: label {i} is {name!r:.40} ({type(name).__name__}), not a string; give the class names "
                "in output order as strings"
            )
        if name in first:
            raise InputError(
                f"{source}: the label {name!r} names outputs {first[name]} and {i}; each output needs its own "
                "name (a repeated one would make predict and evaluate report two classes as one): fix the names"
            )
        first[name] = i
    if outputs is not None and len(names) != outputs:
        raise InputError(
            f"{source} has {len(names)} label(s), but the model has {outputs} outputs: give one label per output"
        )
    return names


def read_labels(model_path: str | os.PathLike, outputs: int | None = None) -> list[str] | None:
    """The labels file of the model at ``model_path`` (see :func:`save_model`), or ``None`` when there is none;
    checked with :func:`check_labels` (strings, each once, ``outputs`` of them).

    Args:
        model_path: the ``.keras`` file.
        outputs: how many outputs the model has, or ``None`` to leave the count unchecked.

    Returns:
        The class or tag names, or ``None``.
    """
    path = labels_path(model_path)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            names = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"{path} is not valid JSON ({err}); fix it, delete it or pass the labels") from None
    return check_labels(names, path, outputs)


def load_model(path: str | os.PathLike) -> keras.Model:
    """``keras.models.load_model`` with a clear error for a missing or broken file.

    Args:
        path: a ``.keras`` file written by ``model.save`` or :func:`save_model`.

    Returns:
        The model, compiled as it was saved.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"model file not found: {path}")
    if not zipfile.is_zipfile(path):
        raise InputError(
            f"{path} is not a .keras model file (not a zip archive: truncated or another format); "
            "save it again with model.save('model.keras')"
        )
    return keras.models.load_model(path, safe_mode=True)
