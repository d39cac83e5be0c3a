"""TF Hub ELMo modules: load a local one, read its weights into native layers, write ours in its format.

The format (google/elmo/2 and /3, TF1 Hub format; and what :func:`export_hub_module` writes, a TF2
SavedModel). Signatures and their outputs, with P = projection_dim and n = the number of LSTM layers::

    default:  one string input [B] (sentences, split on single spaces, empty pieces dropped)
    tokens:   tokens string [B, T] ("" padded), sequence_len int32 [B]
    outputs:  word_emb [B, T, P], lstm_outputs1..n [B, T, 2P], elmo [B, T, 2P] (the weighted sum),
              default [B, 2P] (mean of elmo over the real tokens), sequence_len int32 [B]

TF1 module variables (a leading scope such as ``module/`` is ignored): ``bilm/char_embed``,
``bilm/CNN/{W,b}_cnn_i``, ``bilm/CNN_high_k/{W,b}_{carry,transform}``, ``bilm/CNN_proj/{W,b}_proj``,
``bilm/RNN_{0,1}/RNN/MultiRNNCell/Cell{k}/rnn/lstm_cell/{kernel,bias,projection/kernel}`` and
``aggregation/weights`` [n + 1], ``aggregation/scaling`` [1], with
``elmo = scaling * sum_k softmax(weights + 1 / (n + 1))_k * layer_k``.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from elmo_keras.options import normalize_options
from elmo_keras.text import tokens_to_char_ids
from elmo_keras.weights import expected_shapes

if TYPE_CHECKING:  # pragma: no cover
    from elmo_keras.elmo import Elmo
    from elmo_keras.layers.bilm import BiLM

SIGNATURES = ("default", "tokens")
REQUIRED_OUTPUTS = ("word_emb", "lstm_outputs1", "elmo", "default", "sequence_len")
BOUNDARIES = ("none", "add")
#: What TF Hub's ELMo modules do not record, so the released model's values: activation, clips, skips.
HUB_DEFAULTS = {"activation": "relu", "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True}
_CONFIG_FN = "elmo_keras_config"  # marks (and describes) a module written by export_hub_module
_WEIGHTS_FN = "released_weights"
_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|(www\.)?(tfhub\.dev|kaggle\.com)/)", re.IGNORECASE)
# The LSTM variable names of TF Hub's module are not documented: accept TF's two LSTMCell layouts.
_HUB_LSTM = re.compile(r"^RNN_([01])/(?:RNN/MultiRNNCell/Cell(\d+)/rnn|rnn/multi_rnn_cell/cell_(\d+))"
                       r"/lstm_cell/(kernel|bias|projection/kernel)$")
_LSTM_NAMES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}


def load_module(handle: str | os.PathLike):
    """Load a local module directory with ``tensorflow_hub.load`` (never downloads).

    Loaded modules are shared (a few are cached, keyed by folder and saved_model.pb modification time).
    """
    handle = os.fspath(handle)
    if _URL.match(handle):
        raise ValueError(
            f"{handle!r} is a URL; elmo_keras never downloads. Download the module once (e.g. "
            "https://tfhub.dev/google/elmo/3?tf-hub-format=compressed, or hub.resolve(url) with "
            "TFHUB_CACHE_DIR set), extract the .tar.gz into a folder, and pass that folder's path.")
    if not os.path.isdir(handle):
        raise FileNotFoundError(f"module directory not found: {handle!r} (pass a local TF Hub module folder)")
    graphs = [os.path.join(handle, f) for f in ("saved_model.pb", "saved_model.pbtxt")]
    graphs = [f for f in graphs if os.path.exists(f)]
    if not graphs:
        raise ValueError(f"{handle!r} holds no saved_model.pb: it is not a TF Hub module or SavedModel folder")
    try:
        import tensorflow_hub  # noqa: F401
    except ImportError:
        raise ImportError("loading a TF Hub module needs tensorflow-hub: pip install elmo-keras[hub]") from None
    return _load(os.path.realpath(handle), os.stat(graphs[0]).st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load(folder: str, mtime_ns: int):
    import tensorflow_hub as hub

    return hub.load(folder)


def signature_function(module, handle: str, signature: str):
    """Check ``module`` has ``signature`` with the ELMo outputs -> (function, its input keys)."""
    if signature not in SIGNATURES:
        raise ValueError(f"signature must be one of {SIGNATURES}, got {signature!r}")
    found = sorted(getattr(module, "signatures", {}) or {})
    if signature not in found:
        raise ValueError(f"module {handle!r} has no signature {signature!r}; it has {found or 'none'}. "
                         f"A TF Hub ELMo module has {list(SIGNATURES)}.")
    fn = module.signatures[signature]
    outputs = sorted(fn.structured_outputs)
    missing = [k for k in REQUIRED_OUTPUTS if k not in outputs]
    inputs = fn.structured_input_signature[1]
    wanted = ["sequence_len", "tokens"] if signature == "tokens" else None
    bad_inputs = (sorted(inputs) != wanted) if wanted else (len(inputs) != 1 or
                                                            next(iter(inputs.values())).dtype != tf.string)
    if missing or bad_inputs:
        raise ValueError(
            f"signature {signature!r} of module {handle!r} takes {sorted(inputs)} and returns {outputs}; "
            f"an ELMo module's takes {wanted or 'one string tensor'} and returns {list(REQUIRED_OUTPUTS)} "
            "(plus lstm_outputs2..n)")
    return fn, sorted(inputs)


@dataclass(frozen=True)
class HubWeights:
    """A module's weights in native terms (from :func:`read_hub_module`).

    ``arrays`` are in the released hdf5 layout; ``mix_logits`` [n + 1] and ``mix_gamma`` come from the
    module's aggregation (None when it has none); ``add_sentence_boundaries`` is recorded by
    :func:`export_hub_module` and None for TF Hub's modules.
    """

    options: dict
    arrays: dict[str, np.ndarray]
    mix_logits: np.ndarray | None
    mix_gamma: float | None
    add_sentence_boundaries: bool | None

    def sentence_boundaries(self, boundaries: str | None) -> bool:
        """``boundaries`` ("none" | "add" | None: what the module records, else "none") -> add them?"""
        if boundaries is None:
            return bool(self.add_sentence_boundaries)
        if boundaries not in BOUNDARIES:
            raise ValueError(f"boundaries must be one of {BOUNDARIES} or None, got {boundaries!r}")
        return boundaries == "add"

    def assign(self, layer: "BiLM | Elmo") -> None:
        """Set a built BiLM's weights, or an Elmo's BiLM and its trainable mixes (logits and gamma)."""
        bilm = getattr(layer, "bilm", layer)
        bilm.set_weight_arrays(self.arrays)
        for mix in getattr(layer, "mixes", []):
            if self.mix_logits is not None and mix.fixed_weights is None:
                mix.logits.assign(self.mix_logits)
                mix.gamma.assign([self.mix_gamma])


def _variable_key(name: str) -> str:
    """'module/bilm/CNN/W_cnn_0:0' -> 'bilm/CNN/W_cnn_0' (scope prefix and suffix dropped)."""
    name = name.split(":")[0]
    match = re.search(r"(?:^|/)((?:bilm|aggregation)/.*)$", name)
    return match.group(1) if match else name


def released_name(key: str) -> str:
    """A module variable's name in the released hdf5 layout.

    'bilm/RNN_0/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/kernel' (or '.../rnn/multi_rnn_cell/cell_1/lstm_cell/kernel')
    -> 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0'; 'bilm/CNN/W_cnn_0' -> 'CNN/W_cnn_0'.
    """
    key = key[len("bilm/"):] if key.startswith("bilm/") else key
    match = _HUB_LSTM.match(key)
    if not match:
        return key
    direction, layer, leaf = match.group(1), match.group(2) or match.group(3), _LSTM_NAMES[match.group(4)]
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{leaf}"


def infer_options(arrays: dict[str, np.ndarray], use_skip_connections: bool) -> dict:
    """Options from the released-layout arrays' shapes; what shapes cannot say is :data:`HUB_DEFAULTS`."""
    filters, n_layers, n_highway = [], 0, 0
    while f"CNN/W_cnn_{len(filters)}" in arrays:
        shape = arrays[f"CNN/W_cnn_{len(filters)}"].shape
        filters.append([int(shape[1]), int(shape[3])])
    while f"CNN_high_{n_highway}/W_carry" in arrays:
        n_highway += 1
    while f"RNN_0/RNN/MultiRNNCell/Cell{n_layers}/LSTMCell/W_P_0" in arrays:
        n_layers += 1
    if "char_embed" not in arrays or not filters or not n_layers:
        raise ValueError("the module has no ELMo biLM variables (bilm/char_embed, bilm/CNN/W_cnn_0, "
                         f"bilm/RNN_0/.../Cell0/rnn/lstm_cell/...); it has {sorted(arrays) or 'none'}")
    dim, projection_dim = arrays["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"].shape
    return normalize_options({
        "char_cnn": {"activation": HUB_DEFAULTS["activation"], "filters": filters, "n_highway": n_highway,
                     "embedding": {"dim": int(arrays["char_embed"].shape[1])}, "n_characters": 262,
                     "max_characters_per_token": 50},
        "lstm": {"dim": int(dim), "projection_dim": int(projection_dim), "n_layers": n_layers,
                 "cell_clip": HUB_DEFAULTS["cell_clip"], "proj_clip": HUB_DEFAULTS["proj_clip"],
                 "use_skip_connections": use_skip_connections}})


def _checked(arrays: dict[str, np.ndarray], options: dict, handle: str) -> dict[str, np.ndarray]:
    """The arrays ``options`` needs, shapes checked; a 262-row char_embed loses its padding row 0."""
    if arrays.get("char_embed") is not None and arrays["char_embed"].shape[0] == 262:
        arrays = {**arrays, "char_embed": arrays["char_embed"][1:]}
    out = {}
    for name, shape in expected_shapes(options).items():
        if name not in arrays or arrays[name].shape != shape:
            found = arrays[name].shape if name in arrays else "missing"
            raise ValueError(f"module {handle!r}: weight '{name}' is {found}, expected shape {shape}; "
                             f"the module holds {sorted(arrays)}")
        out[name] = arrays[name]
    return out


def read_hub_module(handle: str | os.PathLike, use_skip_connections: bool | None = None) -> HubWeights:
    """Read a local TF Hub ELMo module (TF1) or a module written by :func:`export_hub_module`.

    TF Hub's modules do not record activation, clips or skip connections: :data:`HUB_DEFAULTS` (those of
    the released model) are used, and ``use_skip_connections`` (default True) overrides the last.
    Modules written by :func:`export_hub_module` record their options, which take precedence unless
    ``use_skip_connections`` is given.
    """
    handle = os.fspath(handle)
    module = load_module(handle)
    variables = {_variable_key(v.name): v for v in getattr(module, "variables", [])}
    weights, scaling = variables.get("aggregation/weights"), variables.get("aggregation/scaling")
    if hasattr(module, _CONFIG_FN):
        config = json.loads(getattr(module, _CONFIG_FN)().numpy().decode("utf-8"))
        options, boundaries = config["options"], config["add_sentence_boundaries"]
        if use_skip_connections is not None:
            options["lstm"]["use_skip_connections"] = use_skip_connections
        arrays = {name: value.numpy() for name, value in getattr(module, _WEIGHTS_FN)().items()}
    else:
        boundaries = None
        arrays = {released_name(key): var.numpy() for key, var in variables.items()
                  if not key.startswith("aggregation/")}
        skip = HUB_DEFAULTS["use_skip_connections"] if use_skip_connections is None else use_skip_connections
        options = infer_options(arrays, skip)
    options = normalize_options(options)
    logits = None
    if weights is not None and scaling is not None:
        n = options["lstm"]["n_layers"] + 1
        if tuple(weights.shape) != (n,):
            raise ValueError(f"module {handle!r}: aggregation/weights has shape {tuple(weights.shape)}, "
                             f"expected ({n},) for {n - 1} LSTM layers")
        logits = weights.numpy().astype(np.float32) + np.float32(1.0 / n)
    return HubWeights(options=options, arrays=_checked(arrays, options, handle), mix_logits=logits,
                      mix_gamma=None if scaling is None else float(np.reshape(scaling.numpy(), (-1,))[0]),
                      add_sentence_boundaries=boundaries)


# ----------------------------------------------------------------------------------------------------------
# Export: our models as modules with the TF Hub ELMo signatures (core TF ops only).


def split_on_spaces(sentences):
    """string [B] -> (tokens string [B, T] "" padded, lengths int32 [B]); single spaces, empties dropped."""
    pieces = tf.strings.split(sentences, sep=" ")
    pieces = tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)
    return pieces.to_tensor(default_value=""), tf.cast(pieces.row_lengths(), tf.int32)


class _ExportedElmo(tf.__internal__.tracking.AutoTrackable):
    """What :func:`export_hub_module` saves: a stateless BiLM, hub-style aggregation, and the
    ``variables`` / ``trainable_variables`` attributes of a reusable SavedModel (only the aggregation trains).
    """

    def __init__(self, bilm: "BiLM", weights: np.ndarray, scaling: float):
        self.bilm = bilm
        self.aggregation_weights = tf.Variable(weights, dtype=tf.float32, name="aggregation/weights")
        self.aggregation_scaling = tf.Variable([scaling], dtype=tf.float32, name="aggregation/scaling")
        self.trainable_variables = [self.aggregation_weights, self.aggregation_scaling]
        self.variables = [v.value for v in bilm.weights] + self.trainable_variables
        self._config = json.dumps({"options": bilm.options,
                                   "add_sentence_boundaries": bilm.add_sentence_boundaries})

    @tf.function(input_signature=[], autograph=False)
    def elmo_keras_config(self):
        """JSON {"options": ..., "add_sentence_boundaries": ...}, read by :func:`read_hub_module`."""
        return tf.constant(self._config)

    @tf.function(input_signature=[], autograph=False)
    def released_weights(self):
        """{released hdf5 dataset name: tensor}, the same arrays as ``BiLM.get_weight_arrays()``."""
        out = {}
        for name, (var, index) in self.bilm._weight_map().items():
            value = tf.convert_to_tensor(var) if index is None else tf.convert_to_tensor(var)[index]
            out[name] = value[None] if name.startswith("CNN/W_cnn_") else value
        return out

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def default(self, default):
        tokens, lengths = split_on_spaces(default)
        return self.outputs(tokens, lengths)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens"),
                                  tf.TensorSpec([None], tf.int32, name="sequence_len")], autograph=False)
    def tokens(self, tokens, sequence_len):
        return self.outputs(tokens, sequence_len)

    def outputs(self, tokens, sequence_len):
        """The module's output dict for tokens [B, T] with real lengths [B]."""
        real = tf.sequence_mask(sequence_len, tf.shape(tokens)[1])
        ids = tokens_to_char_ids(tf.where(real, tokens, ""), self.bilm.max_characters_per_token)
        out = self.bilm(ids)
        layers = out["layers"]
        lengths = tf.reduce_sum(tf.cast(out["mask"], tf.int32), axis=1)
        mix = tf.nn.softmax(self.aggregation_weights + 1.0 / len(layers))
        elmo = self.aggregation_scaling[0] * tf.add_n([mix[k] * layer for k, layer in enumerate(layers)])
        result = {"word_emb": layers[0][..., :self.bilm.projection_dim], "elmo": elmo,
                  "default": tf.math.divide_no_nan(tf.reduce_sum(elmo, axis=1),
                                                   tf.cast(lengths, elmo.dtype)[:, None]),
                  "sequence_len": lengths}
        result.update({f"lstm_outputs{k}": layers[k] for k in range(1, len(layers))})
        return result


def _hub_aggregation(model: "BiLM | Elmo") -> tuple[np.ndarray, float]:
    """(aggregation/weights, scaling) reproducing an Elmo's first mix (a BiLM: the plain layer average)."""
    mixes = getattr(model, "mixes", None)
    if not mixes:
        return np.zeros(model.n_layers + 1, np.float32), 1.0
    mix = mixes[0]
    if mix.do_layer_norm:
        raise ValueError("a ScalarMix with do_layer_norm=True cannot be written in the TF Hub format")
    gamma = float(np.asarray(mix.gamma)[0])
    n = mix.num_layers
    if mix.fixed_weights is None:
        return np.asarray(mix.logits, np.float32) - np.float32(1.0 / n), gamma
    fixed = np.asarray(mix.fixed_weights, np.float64)
    if np.any(fixed <= 0):
        raise ValueError(f"fixed mix weights {mix.fixed_weights} are not all positive: the TF Hub format "
                         "(softmax weights times a scale) cannot express them")
    return (np.log(fixed / fixed.sum()) - 1.0 / n).astype(np.float32), gamma * float(fixed.sum())


def export_hub_module(model: "Elmo | BiLM", path: str | os.PathLike, overwrite: bool = False) -> None:
    """Write ``model`` as a TF2 SavedModel with the TF Hub ELMo signatures and outputs (see module doc).

    An ``Elmo`` exports its BiLM and its first ScalarMix (as ``aggregation/weights`` and ``scaling``); a
    ``BiLM`` exports the plain layer average. The exported BiLM is stateless and keeps the model's
    ``add_sentence_boundaries``. The folder is written next to ``path`` and renamed into place; an existing
    ``path`` is an error unless ``overwrite``.
    """
    from elmo_keras.layers.bilm import BiLM

    source = getattr(model, "bilm", model)
    if not isinstance(source, BiLM):
        raise TypeError(f"export_hub_module() takes an Elmo or a BiLM, got {type(model).__name__}")
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path!r} exists; pass overwrite=True to replace it")
    if not source.built:
        raise ValueError("the model is not built: load weights into it (e.g. from_pretrained) first")
    weights, scaling = _hub_aggregation(model)
    bilm = BiLM(source.options, add_sentence_boundaries=source.add_sentence_boundaries, name="bilm")
    bilm.build()
    bilm.set_weight_arrays(source.get_weight_arrays())
    module = _ExportedElmo(bilm, weights, scaling)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        tf.saved_model.save(module, tmp, signatures={
            "default": module.default.get_concrete_function(),
            "tokens": module.tokens.get_concrete_function()})
        if os.path.exists(path):
            old = tmp + ".old"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
