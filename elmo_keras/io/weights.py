"""Read and write the released bilm-tf / AllenNLP hdf5 weight layout, and its extension to our other encoders.

Layout (dataset: shape), with F = sum of filter counts, P = projection_dim, D = lstm dim::

    char_embed                      [261, char_dim]        (row for id 0 is not stored)
    CNN/W_cnn_i, CNN/b_cnn_i        [1, width_i, char_dim, n_i], [n_i]
    CNN_high_k/{W,b}_{carry,transform}  [F, F], [F]
    CNN_proj/W_proj, CNN_proj/b_proj    [F, P], [P]        (only when F != P)
    RNN_{0,1}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_0, B, W_P_0   [2P, 4D], [4D], [D, P]

Extension (ours; see :mod:`elmo_keras.io.options` for the ``encoder`` section): the char CNN datasets as above,
and instead of ``RNN_*``, per direction d (0 forward, 1 backward) and layer k, with H = num_heads, A = P / H,
R = ff_dim, K = kernel_size (LayerNormalization scales are ``gamma``, offsets ``beta``)::

    Transformer_d/layer_k/attention_norm/{gamma,beta}         [P], [P]
    Transformer_d/layer_k/attention/{query,key,value}/kernel  [P, H, A]
    Transformer_d/layer_k/attention/{query,key,value}/bias    [H, A]
    Transformer_d/layer_k/attention/output/kernel, bias       [H, A, P], [P]
    Transformer_d/layer_k/ffn_norm/{gamma,beta}               [P], [P]
    Transformer_d/layer_k/ffn/W_1, b_1, W_2, b_2              [P, R], [R], [R, P], [P]
    GatedCNN_d/layer_k/conv/W, conv/b                         [K, P, 2P], [2P]   (GLU: first P outputs gated
                                                                                   by the sigmoid of the last P)
    GatedCNN_d/layer_k/norm/{gamma,beta}                      [P], [P]           (only with layer_norm)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping

import keras
import numpy as np

from elmo_keras.errors import InputError
from elmo_keras.io.download import cached_copy_hint, local_file
from elmo_keras.io.options import encoder_options, n_filters
from elmo_keras.utils.files import atomic_file
from elmo_keras.utils.host_memory import host_tensor, host_zeros

_DIRECTIONS = ("RNN_0", "RNN_1")  # forward, backward


def lstm_prefix(direction: int, layer: int) -> str:
    """Dataset prefix of LSTM ``layer`` of ``direction`` (0 forward, 1 backward).

    Args:
        direction: 0 (forward) or 1 (backward).
        layer: the layer index, from 0.

    Returns:
        e.g. ``"RNN_0/RNN/MultiRNNCell/Cell1"`` for ``(0, 1)``.
    """
    return f"{_DIRECTIONS[direction]}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


#: Dataset prefix of each non-LSTM encoder type's blocks, followed by "_{direction}/layer_{layer}".
_BLOCK_PREFIX = {"transformer": "Transformer", "gated_cnn": "GatedCNN"}


def _norm(name: str, p: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {f"{name}/gamma": (f"{name}.gamma", (p,)), f"{name}/beta": (f"{name}.beta", (p,))}


def _block_layout(kind: str, settings: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """One block of a non-LSTM encoder: {dataset name after the block prefix: (attribute path of the variable
    from the block, shape)}. The one table both the shapes and the variable map come from."""
    p = settings["projection_dim"]
    if kind == "gated_cnn":
        layout = {"conv/W": ("conv.kernel", (settings["kernel_size"], p, 2 * p)), "conv/b": ("conv.bias", (2 * p,))}
        return {**layout, **_norm("norm", p)} if settings["layer_norm"] else layout
    heads, ff = settings["num_heads"], settings["ff_dim"]
    layout = _norm("attention_norm", p)
    for part in ("query", "key", "value"):
        layout[f"attention/{part}/kernel"] = (f"attention.{part}_dense.kernel", (p, heads, p // heads))
        layout[f"attention/{part}/bias"] = (f"attention.{part}_dense.bias", (heads, p // heads))
    layout["attention/output/kernel"] = ("attention.output_dense.kernel", (heads, p // heads, p))
    layout["attention/output/bias"] = ("attention.output_dense.bias", (p,))
    layout.update(_norm("ffn_norm", p))
    layout.update(
        {
            "ffn/W_1": ("ffn_in.kernel", (p, ff)),
            "ffn/b_1": ("ffn_in.bias", (ff,)),
            "ffn/W_2": ("ffn_out.kernel", (ff, p)),
            "ffn/b_2": ("ffn_out.bias", (p,)),
        }
    )
    return layout


def _blocks(kind: str, settings: dict):
    """(direction, layer, dataset prefix, block layout) of every block of a non-LSTM encoder."""
    layout = _block_layout(kind, settings)
    for direction in range(2):
        for layer in range(settings["n_layers"]):
            yield direction, layer, f"{_BLOCK_PREFIX[kind]}_{direction}/layer_{layer}", layout


def to_file_layout(name: str, value):
    """A variable's value -> the shape it has in the file (the conv kernels have a leading axis of 1 there).
    Works on NumPy arrays and tensors alike.

    Args:
        name: the dataset name.
        value: the variable's value.

    Returns:
        ``value``, reshaped where the file's layout differs.
    """
    return value[None] if name.startswith("CNN/W_cnn_") else value


def from_file_layout(name: str, value: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_file_layout`: a dataset's array -> the shape of its variable.

    Args:
        name: the dataset name.
        value: the array as stored in the file.

    Returns:
        ``value``, reshaped where the file's layout differs.
    """
    return value[0] if name.startswith("CNN/W_cnn_") else value


def variable_map(bilm: keras.Layer) -> dict[str, tuple[keras.Variable, int | None]]:
    """A built BiLM's variables by dataset name: (variable, direction index into its leading axis or None).

    The only place that maps the released names onto our layers (``BiLM.char_cnn`` and ``BiLM.encoder``).

    Args:
        bilm: a built ``BiLM``.

    Returns:
        ``{dataset name: (variable, direction or None)}``.
    """
    cnn = bilm.char_cnn
    entries: dict[str, tuple[keras.Variable, int | None]] = {"char_embed": (cnn.char_embed, None)}
    for i, (kernel, bias) in enumerate(zip(cnn.conv_kernels, cnn.conv_biases)):
        entries[f"CNN/W_cnn_{i}"] = (kernel, None)
        entries[f"CNN/b_cnn_{i}"] = (bias, None)
    highway = cnn.highway
    for k in range(highway.num_layers):
        for part in ("carry", "transform"):
            entries[f"CNN_high_{k}/W_{part}"] = (getattr(highway, f"{part}_kernels")[k], None)
            entries[f"CNN_high_{k}/b_{part}"] = (getattr(highway, f"{part}_biases")[k], None)
    if cnn.use_projection:
        entries["CNN_proj/W_proj"] = (cnn.proj_kernel, None)
        entries["CNN_proj/b_proj"] = (cnn.proj_bias, None)
    kind, settings = encoder_options(bilm.options)
    if kind != "lstm":
        encoder = bilm.encoder
        for direction, layer, prefix, layout in _blocks(kind, settings):
            block = (encoder.forward_blocks, encoder.backward_blocks)[direction][layer]
            for name, (path, _) in layout.items():
                entries[f"{prefix}/{name}"] = (functools.reduce(getattr, path.split("."), block), None)
        return entries
    lstm = bilm.encoder
    for direction in range(2):
        for layer in range(len(lstm.kernels)):
            prefix = lstm_prefix(direction, layer)
            entries[f"{prefix}/W_0"] = (lstm.kernels[layer], direction)
            entries[f"{prefix}/B"] = (lstm.biases[layer], direction)
            entries[f"{prefix}/W_P_0"] = (lstm.projections[layer], direction)
    return entries


def get_weight_arrays(bilm: keras.Layer) -> dict[str, np.ndarray]:
    """A built BiLM's weights as {dataset name: float32 array in the released shape}.

    Args:
        bilm: a built ``BiLM``.

    Returns:
        ``{dataset name: array}``.
    """
    out = {}
    for name, (variable, index) in variable_map(bilm).items():
        value = keras.ops.convert_to_numpy(variable).astype(np.float32)
        out[name] = to_file_layout(name, value if index is None else value[index])
    return out


def set_weight_arrays(bilm: keras.Layer, arrays: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]]) -> None:
    """Assign a built BiLM's weights from {dataset name: array in the released shape}, or from (name, array)
    pairs (e.g. :func:`iter_weights_hdf5`: one array in memory at a time). Other names are ignored.

    Args:
        bilm: a built ``BiLM``.
        arrays: ``{dataset name: array}`` or an iterable of ``(name, array)`` pairs.
    """
    variables = variable_map(bilm)
    if isinstance(arrays, Mapping):
        missing = [name for name in variables if name not in arrays]
        if missing:
            raise KeyError(f"no array for weight '{missing[0]}'")
        arrays = arrays.items()
    assigned = set()
    # Each variable is filled into an aligned host buffer that it then adopts (no copy into TensorFlow's pooled
    # allocator, see elmo_keras.utils.host_memory); a two-direction variable once both directions are in. Assigning one
    # direction in place (a sliced assign) would instead put the variable in TensorFlow's copy-on-read mode for
    # good, i.e. copy all of it on every later read (every call of the model).
    staged: dict[str, tuple[np.ndarray, set]] = {}
    for name, array in arrays:
        if name not in variables:
            continue
        variable, index = variables[name]
        value = from_file_layout(name, np.asarray(array, dtype=np.float32))
        expected = tuple(variable.shape) if index is None else tuple(variable.shape[1:])
        if value.shape != expected:
            raise InputError(f"weight '{name}' has shape {value.shape}, expected {expected}")
        assigned.add(name)
        buffer, filled = staged.setdefault(variable.path, (host_zeros(tuple(variable.shape)), set()))
        buffer[... if index is None else index] = value
        filled.add(index)
        if index is None or len(filled) == variable.shape[0]:
            del staged[variable.path]
            variable.assign(host_tensor(buffer) if variable.dtype == "float32" else buffer)
    if len(assigned) < len(variables):
        raise KeyError(f"no array for weight '{min(set(variables) - assigned)}'")


def expected_shapes(options: dict) -> dict[str, tuple[int, ...]]:
    """Every dataset a weight file for ``options`` must hold, with its shape.

    Args:
        options: normalised options.

    Returns:
        ``{dataset name: shape}``.
    """
    cnn, (kind, settings) = options["char_cnn"], encoder_options(options)
    char_dim, f, p = cnn["embedding"]["dim"], n_filters(options), settings["projection_dim"]
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
    if kind != "lstm":
        for _, _, prefix, layout in _blocks(kind, settings):
            shapes.update({f"{prefix}/{name}": shape for name, (_, shape) in layout.items()})
        return shapes
    d = settings["dim"]
    for layer in range(settings["n_layers"]):  # both directions of a layer next to each other (one staged variable)
        for direction in range(2):
            prefix = lstm_prefix(direction, layer)
            shapes[f"{prefix}/W_0"] = (2 * p, 4 * d)
            shapes[f"{prefix}/B"] = (4 * d,)
            shapes[f"{prefix}/W_P_0"] = (d, p)
    return shapes


#: What decides the count of each numbered dataset family, to name when a file holds more than the options say.
_COUNTED_BY = (
    ("CNN_high_", "char_cnn.n_highway"),
    ("/Cell", "lstm.n_layers"),
    ("CNN/", "char_cnn.filters"),
    ("CNN_proj/", "char_cnn.filters and the projection_dim"),
    ("/layer_", "encoder.n_layers"),
    ("/norm/", "encoder.layer_norm"),
)
_MODEL_PREFIXES = ("CNN", "RNN_", *(f"{prefix}_" for prefix in _BLOCK_PREFIX.values()))


def read_weights_hdf5(path: str | os.PathLike, options: dict) -> dict[str, np.ndarray]:
    """Read every dataset ``options`` needs from ``path`` (a file, or an http(s) URL downloaded once into the
    cache, see :mod:`elmo_keras.io.download`) and check it: {dataset name: float32 array}.

    Raises FileNotFoundError, KeyError naming a missing dataset, or InputError naming the problem: a file that
    is not (or not all) hdf5, a dataset of the wrong shape (expected vs found) or type, ELMo datasets that
    the options do not describe (the file holds a bigger model than the options say), or a dataset holding NaN
    or infinite values (a damaged file).

    Args:
        path: an hdf5 weight file or its http(s) URL.
        options: normalised options of the model.

    Returns:
        ``{dataset name: float32 array}``.
    """
    return dict(iter_weights_hdf5(path, options))


def iter_weights_hdf5(path: str | os.PathLike, options: dict) -> Iterator[tuple[str, np.ndarray]]:
    """:func:`read_weights_hdf5` one dataset at a time: every dataset's name, type and shape are checked (same
    errors) before the first array is read; then yields (dataset name, float32 array), each checked to be finite
    as it is read.

    Args:
        path: an hdf5 weight file or its http(s) URL.
        options: normalised options of the model.

    Returns:
        An iterator of ``(dataset name, float32 array)``.
    """
    import h5py

    path = local_file(path, "hdf5")
    if not os.path.exists(path):
        raise FileNotFoundError(f"weight file not found: {path!r}")
    expected = expected_shapes(options)
    try:
        with h5py.File(path, "r") as f:
            for name, shape in expected.items():
                if name not in f:
                    raise KeyError(
                        f"weight file {path!r} has no dataset '{name}' (expected shape {shape}); "
                        "is it a bilm-tf/AllenNLP ELMo weight file that matches the options?"
                    )
                _check_dataset(f[name], name, shape, path, options)
            stored: list[str] = []
            f.visititems(lambda name, node: stored.append(name) if isinstance(node, h5py.Dataset) else None)
            extra = sorted(
                n for n in stored if n not in expected and (n == "char_embed" or n.startswith(_MODEL_PREFIXES))
            )
            if extra:
                options_named = sorted({option for prefix, option in _COUNTED_BY for n in extra if prefix in n})
                raise InputError(
                    f"weight file {path!r} holds datasets the options do not describe: {extra[:4]}"
                    f"{' ...' if len(extra) > 4 else ''}; the file and the options disagree: fix "
                    f"{', '.join(options_named) or 'the architecture'} in the options to match the "
                    "file"
                )
            for name in expected:
                array = np.asarray(f[name][...], dtype=np.float32)
                _check_finite(array, name, path)
                yield name, array
    except OSError as err:
        raise InputError(
            f"{path!r} is not a valid/complete hdf5 weight file ({err}); download or write it "
            "again (a truncated download, an empty file or a text file gives this)"
            f"{cached_copy_hint(path)}"
        ) from None


def _check_finite(array: np.ndarray, name: str, path: str) -> None:
    """InputError naming the dataset and the file unless every value of ``array`` is finite."""
    # NaN and inf make the sum non-finite, and so may an overflow: only then is each value checked. einsum's
    # plain float32 sum runs at memory speed, about 3x faster than np.isfinite(array).all().
    if np.isfinite(np.einsum("i->", array.ravel())):
        return
    bad = array.size - np.count_nonzero(np.isfinite(array))
    if bad:
        raise InputError(
            f"weight file {path!r}: dataset '{name}' holds {bad} NaN or infinite value(s) of "
            f"{array.size}; the file is damaged: download or write it again{cached_copy_hint(path)}"
        )


def _check_dataset(node, name: str, shape: tuple[int, ...], path: str, options: dict) -> None:
    """Check that one hdf5 node is a numeric dataset of ``shape`` (InputError naming what is wrong)."""
    import h5py

    if not isinstance(node, h5py.Dataset):
        raise InputError(
            f"weight file {path!r}: '{name}' is a {type(node).__name__}, expected a dataset of "
            f"shape {shape}; the file is not in the bilm-tf/AllenNLP layout"
        )
    if node.dtype.kind not in "fiu":
        raise InputError(
            f"weight file {path!r}: dataset '{name}' holds {node.dtype} values, expected numbers "
            f"(float32) of shape {shape}"
        )
    if tuple(node.shape) != shape:
        kind, settings = encoder_options(options)
        raise InputError(
            f"weight file {path!r}: dataset '{name}' has shape {tuple(node.shape)}, expected {shape} from the "
            f"options (char_cnn={options['char_cnn']}, {'lstm' if kind == 'lstm' else 'encoder'}={settings}); the "
            "options do not match the weights"
        )


def write_weights_hdf5(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    """Write ``arrays`` (dataset name -> array) to ``path`` atomically (temporary file, then rename).

    Args:
        arrays: ``{dataset name: array}`` in the released layout.
        path: the hdf5 file to write.
    """
    import h5py

    with atomic_file(os.fspath(path)) as tmp, h5py.File(tmp, "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=np.asarray(value, dtype=np.float32))


def save_weights_hdf5(bilm: keras.Layer, path: str | os.PathLike) -> None:
    """Write a built ``BiLM``'s weights in the released layout (readable by bilm-tf, AllenNLP and us).

    Args:
        bilm: a built ``BiLM``.
        path: the hdf5 file to write.

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek

    bilm = ek.BiLM.from_preset("brown-small")
    path = os.path.join(tempfile.mkdtemp(), "weights.hdf5")
    ek.save_weights_hdf5(bilm, path)
    arrays = ek.io.weights.read_weights_hdf5(path, bilm.options)
    assert arrays.keys() == ek.io.weights.expected_shapes(bilm.options).keys()
    ```
    """
    write_weights_hdf5(get_weight_arrays(bilm), path)


def random_weights(options: dict, seed: int = 0, scale: float = 0.1) -> dict[str, np.ndarray]:
    """Random arrays in the released layout for ``options`` (for tests and benchmarks).

    Args:
        options: normalised options.
        seed: NumPy random seed.
        scale: standard deviation of the (normal) values.

    Returns:
        ``{dataset name: float32 array}`` of the shapes :func:`expected_shapes` gives.
    """
    rng = np.random.default_rng(seed)
    return {
        name: (rng.standard_normal(shape) * scale).astype(np.float32)
        for name, shape in expected_shapes(options).items()
    }
