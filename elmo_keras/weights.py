"""Read and write the released bilm-tf / AllenNLP hdf5 weight layout.

Layout (dataset: shape), with F = sum of filter counts, P = projection_dim, D = lstm dim::

    char_embed                      [261, char_dim]        (row for id 0 is not stored)
    CNN/W_cnn_i, CNN/b_cnn_i        [1, width_i, char_dim, n_i], [n_i]
    CNN_high_k/{W,b}_{carry,transform}  [F, F], [F]
    CNN_proj/W_proj, CNN_proj/b_proj    [F, P], [P]        (only when F != P)
    RNN_{0,1}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_0, B, W_P_0   [2P, 4D], [4D], [D, P]
"""
from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

import numpy as np

from elmo_keras.options import n_filters

if TYPE_CHECKING:  # pragma: no cover
    from elmo_keras.layers.bilm import BiLM

_DIRECTIONS = ("RNN_0", "RNN_1")  # forward, backward


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"{_DIRECTIONS[direction]}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_shapes(options: dict) -> dict[str, tuple[int, ...]]:
    """Every dataset a weight file for ``options`` must hold, with its shape."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim, f, p, d = cnn["embedding"]["dim"], n_filters(options), lstm["projection_dim"], lstm["dim"]
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (cnn["n_characters"] - 1, char_dim)}
    for i, (width, num) in enumerate(cnn["filters"]):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, char_dim, num)
        shapes[f"CNN/b_cnn_{i}"] = (num,)
    for k in range(cnn["n_highway"]):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (f, f)
            shapes[f"CNN_high_{k}/b_{part}"] = (f,)
    if f != p:
        shapes["CNN_proj/W_proj"] = (f, p)
        shapes["CNN_proj/b_proj"] = (p,)
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            prefix = _lstm_prefix(direction, layer)
            shapes[f"{prefix}/W_0"] = (2 * p, 4 * d)
            shapes[f"{prefix}/B"] = (4 * d,)
            shapes[f"{prefix}/W_P_0"] = (d, p)
    return shapes


def read_weights_hdf5(path: str | os.PathLike, options: dict) -> dict[str, np.ndarray]:
    """Read every dataset ``options`` needs from ``path`` and check its shape.

    Raises FileNotFoundError, KeyError naming a missing dataset, or ValueError naming the dataset whose
    shape is wrong (expected vs found) and the options that decide it.
    """
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"weight file not found: {path!r}")
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        for name, shape in expected_shapes(options).items():
            if name not in f:
                raise KeyError(
                    f"weight file {path!r} has no dataset '{name}' (expected shape {shape}); "
                    "is it a bilm-tf/AllenNLP ELMo weight file that matches the options?"
                )
            found = tuple(f[name].shape)
            if found != shape:
                raise ValueError(
                    f"weight file {path!r}: dataset '{name}' has shape {found}, expected {shape} from the options "
                    f"(char_cnn={options['char_cnn']}, lstm={options['lstm']}); the options do not match the weights"
                )
            out[name] = np.asarray(f[name][...], dtype=np.float32)
    return out


def write_weights_hdf5(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    """Write ``arrays`` (dataset name -> array) to ``path`` atomically (temporary file, then rename)."""
    import h5py

    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=".hdf5.tmp", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for name, value in arrays.items():
                f.create_dataset(name, data=np.asarray(value, dtype=np.float32))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_weights_hdf5(bilm: "BiLM", path: str | os.PathLike) -> None:
    """Write a built ``BiLM``'s weights in the released layout (readable by bilm-tf, AllenNLP and us)."""
    write_weights_hdf5(bilm.get_weight_arrays(), path)


def random_weights(options: dict, seed: int = 0, scale: float = 0.1) -> dict[str, np.ndarray]:
    """Random arrays in the released layout for ``options`` (for tests and benchmarks)."""
    rng = np.random.default_rng(seed)
    return {name: (rng.standard_normal(shape) * scale).astype(np.float32)
            for name, shape in expected_shapes(options).items()}
