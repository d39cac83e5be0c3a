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

from elmo_keras.errors import InputError
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


#: What decides the count of each numbered dataset family, to name when a file holds more than the options say.
_COUNTED_BY = (("CNN_high_", "char_cnn.n_highway"), ("/Cell", "lstm.n_layers"), ("CNN/", "char_cnn.filters"),
               ("CNN_proj/", "char_cnn.filters and lstm.projection_dim"))


def read_weights_hdf5(path: str | os.PathLike, options: dict) -> dict[str, np.ndarray]:
    """Read every dataset ``options`` needs from ``path`` and check it.

    Raises FileNotFoundError, KeyError naming a missing dataset, or InputError naming the problem: a file that
    is not (or not all) hdf5, a dataset of the wrong shape (expected vs found) or type, or ELMo datasets that
    the options do not describe (the file holds a bigger model than the options say).
    """
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"weight file not found: {path!r}")
    expected = expected_shapes(options)
    out: dict[str, np.ndarray] = {}
    try:
        with h5py.File(path, "r") as f:
            for name, shape in expected.items():
                if name not in f:
                    raise KeyError(
                        f"weight file {path!r} has no dataset '{name}' (expected shape {shape}); "
                        "is it a bilm-tf/AllenNLP ELMo weight file that matches the options?"
                    )
                out[name] = _checked_dataset(f[name], name, shape, path, options)
            stored: list[str] = []
            f.visititems(lambda name, node: stored.append(name) if isinstance(node, h5py.Dataset) else None)
    except OSError as err:
        raise InputError(f"{path!r} is not a valid/complete hdf5 weight file ({err}); download or write it "
                         "again (a truncated download, an empty file or a text file gives this)") from None
    extra = sorted(n for n in stored if n not in expected and (n == "char_embed" or n.startswith(("CNN", "RNN_"))))
    if extra:
        options_named = sorted({option for prefix, option in _COUNTED_BY for n in extra if prefix in n})
        raise InputError(f"weight file {path!r} holds datasets the options do not describe: {extra[:4]}"
                         f"{' ...' if len(extra) > 4 else ''}; the file and the options disagree: fix "
                         f"{', '.join(options_named) or 'the architecture'} in the options to match the file")
    return out


def _checked_dataset(node, name: str, shape: tuple[int, ...], path: str, options: dict) -> np.ndarray:
    """One hdf5 node -> float32 array, after checking it is a numeric dataset of ``shape``."""
    import h5py

    if not isinstance(node, h5py.Dataset):
        raise InputError(f"weight file {path!r}: '{name}' is a {type(node).__name__}, expected a dataset of "
                         f"shape {shape}; the file is not in the bilm-tf/AllenNLP layout")
    if node.dtype.kind not in "fiu":
        raise InputError(f"weight file {path!r}: dataset '{name}' holds {node.dtype} values, expected numbers "
                         f"(float32) of shape {shape}")
    if tuple(node.shape) != shape:
        raise InputError(
            f"weight file {path!r}: dataset '{name}' has shape {tuple(node.shape)}, expected {shape} from the "
            f"options (char_cnn={options['char_cnn']}, lstm={options['lstm']}); the options do not match the weights"
        )
    return np.asarray(node[...], dtype=np.float32)


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
