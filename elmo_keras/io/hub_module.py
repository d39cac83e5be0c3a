"""TF Hub ELMo modules: load one (a folder or a URL, as ``tensorflow_hub.load`` takes it) and read its weights
in the released layout (the reader; writing ours in this format is :mod:`elmo_keras.export.hub_module`).

The format (google/elmo/2 and /3, TF1 Hub format; and what :func:`export_hub_module` writes, a TF2
SavedModel). Signatures and their outputs, with P = projection_dim and n = the number of biLM layers (LSTM
layers in TF Hub's modules; ours may hold any encoder of :mod:`elmo_keras.io.options`)::

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
import hashlib
import json
import os
import re
import tarfile
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from elmo_keras.errors import InputError
from elmo_keras.io.options import RELEASED_OPTIONS, encoder_options, normalize_options
from elmo_keras.io.weights import expected_shapes, lstm_prefix

SIGNATURES = ("default", "tokens")
REQUIRED_OUTPUTS = ("word_emb", "lstm_outputs1", "elmo", "default", "sequence_len")
BOUNDARIES = ("none", "add")
#: What TF Hub's ELMo modules do not record, so the released (original) model's values: activation, clips, skips.
HUB_DEFAULTS = {
    "activation": RELEASED_OPTIONS["original"]["char_cnn"]["activation"],
    **{key: RELEASED_OPTIONS["original"]["lstm"][key] for key in ("cell_clip", "proj_clip", "use_skip_connections")},
}
_CONFIG_FN = "elmo_keras_config"  # marks (and describes) a module written by export_hub_module
_WEIGHTS_FN = "released_weights"
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_HUB_SITE = re.compile(r"^(www\.)?(tfhub\.dev|kaggle\.com)/", re.IGNORECASE)
# The LSTM variable names of TF Hub's module are not documented: accept TF's two LSTMCell layouts.
_HUB_LSTM = re.compile(
    r"^RNN_([01])/(?:RNN/MultiRNNCell/Cell(\d+)/rnn|rnn/multi_rnn_cell/cell_(\d+))"
    r"/lstm_cell/(kernel|bias|projection/kernel)$"
)
_LSTM_NAMES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}


def load_module(handle: str | os.PathLike):
    """Load a TF Hub module with ``tensorflow_hub.load``: ``handle`` is what that takes (see :func:`module_folder`).

    Loaded modules are shared (a few are cached, keyed by folder and saved_model.pb modification time).

    Args:
        handle: a module folder or URL, as :func:`module_folder` takes it.

    Returns:
        The loaded module (a ``tf.saved_model`` object).
    """
    handle = os.fspath(handle)
    folder = module_folder(handle)
    graphs = [os.path.join(folder, f) for f in ("saved_model.pb", "saved_model.pbtxt")]
    graphs = [f for f in graphs if os.path.exists(f)]
    if not graphs:
        raise ValueError(f"{handle!r} holds no saved_model.pb: it is not a TF Hub module or SavedModel folder")
    return _load(os.path.realpath(folder), os.stat(graphs[0]).st_mtime_ns)


def module_folder(handle: str) -> str:
    """A module handle as ``tensorflow_hub.load`` takes it -> the module's local folder.

    ``handle``: a folder; a tfhub.dev or Kaggle model URL (``https://`` may be left out); the URL of a compressed
    module (``.tar.gz``). URLs go through ``tensorflow_hub.resolve``: downloaded and extracted once into TF Hub's
    cache (``$TFHUB_CACHE_DIR``, by default a ``tfhub_modules`` folder in the temp directory); a cached module is
    used with no network call.

    Args:
        handle: a folder; a tfhub.dev or Kaggle model URL (``https://`` may be left out); the URL of a
            compressed module (``.tar.gz``).

    Returns:
        The module's local folder.
    """
    hub = _tensorflow_hub()
    if os.path.isdir(handle):
        return handle
    if _HUB_SITE.match(handle):
        handle = "https://" + handle
    if not _URL.match(handle):
        raise FileNotFoundError(f"module directory not found: {handle!r} (pass a TF Hub module folder or URL)")
    try:
        return hub.resolve(handle)
    except (OSError, tarfile.TarError, tf.errors.OpError) as err:
        raise InputError(
            f"cannot download the TF Hub module {handle!r} ({type(err).__name__}: {err}). To work offline, fetch "
            "its .tar.gz elsewhere (for tfhub.dev / Kaggle, add ?tf-hub-format=compressed to the URL) and extract "
            f"it into {_hub_cache_folder(hub, handle)} (TF Hub's cache, set by TFHUB_CACHE_DIR), or pass the "
            "extracted folder"
        ) from None


def _tensorflow_hub():
    try:
        import tensorflow_hub
    except ImportError:
        raise ImportError("loading a TF Hub module needs tensorflow-hub: pip install elmo-keras[hub]") from None
    return tensorflow_hub


def _hub_cache_folder(hub, handle: str) -> str:
    """Where ``tensorflow_hub`` keeps the module of a URL ``handle`` (a folder named by the handle's sha1)."""
    folder = hub.resolver.tfhub_cache_dir(use_temp=True)
    return os.path.join(folder, hashlib.sha1(handle.encode("utf-8")).hexdigest())


@functools.lru_cache(maxsize=4)
def _load(folder: str, mtime_ns: int):
    import tensorflow_hub as hub

    return hub.load(folder)


def signature_function(module, handle: str, signature: str):
    """Check ``module`` has ``signature`` with the ELMo outputs -> (function, its input keys).

    Args:
        module: a module from :func:`load_module`.
        handle: its handle, for error messages.
        signature: ``"default"`` (sentences) or ``"tokens"``.

    Returns:
        ``(function, input_keys)``.
    """
    if signature not in SIGNATURES:
        raise ValueError(f"signature must be one of {SIGNATURES}, got {signature!r}")
    found = sorted(getattr(module, "signatures", {}) or {})
    if signature not in found:
        raise ValueError(
            f"module {handle!r} has no signature {signature!r}; it has {found or 'none'}. "
            f"A TF Hub ELMo module has {list(SIGNATURES)}."
        )
    fn = module.signatures[signature]
    outputs = sorted(fn.structured_outputs)
    missing = [k for k in REQUIRED_OUTPUTS if k not in outputs]
    inputs = fn.structured_input_signature[1]
    wanted = ["sequence_len", "tokens"] if signature == "tokens" else None
    bad_inputs = (
        (sorted(inputs) != wanted) if wanted else (len(inputs) != 1 or next(iter(inputs.values())).dtype != tf.string)
    )
    if missing or bad_inputs:
        raise ValueError(
            f"signature {signature!r} of module {handle!r} takes {sorted(inputs)} and returns {outputs}; "
            f"an ELMo module's takes {wanted or 'one string tensor'} and returns {list(REQUIRED_OUTPUTS)} "
            "(plus lstm_outputs2..n)"
        )
    return fn, sorted(inputs)


@dataclass(frozen=True)
class HubWeights:
    """A module's weights in native terms (from :func:`read_hub_module`).

    Args:
        options: the model options (see :func:`elmo_keras.io.options.load_options`).
        arrays: weight arrays in the released hdf5 layout, by name.
        mix_logits: float `[n + 1]`, the module's aggregation logits, or ``None`` when it has none.
        mix_gamma: the aggregation's scale, or ``None``.
        add_sentence_boundaries: recorded by :func:`elmo_keras.export.hub_module.export_hub_module`; ``None`` for
            TF Hub's modules.
    """

    options: dict
    arrays: dict[str, np.ndarray]
    mix_logits: np.ndarray | None
    mix_gamma: float | None
    add_sentence_boundaries: bool | None

    def sentence_boundaries(self, boundaries: str | None) -> bool:
        """Whether to add ``<S>``/``</S>`` to each sentence.

        Args:
            boundaries: ``"none"``, ``"add"`` or ``None`` (what the module records, else ``"none"``).

        Returns:
            bool.
        """
        if boundaries is None:
            return bool(self.add_sentence_boundaries)
        if boundaries not in BOUNDARIES:
            raise ValueError(f"boundaries must be one of {BOUNDARIES} or None, got {boundaries!r}")
        return boundaries == "add"

    def init_mixes(self, mixes) -> None:
        """Start built trainable ScalarMixes from the module's aggregation (logits and gamma).

        Args:
            mixes: built :class:`~elmo_keras.layers.scalar_mix.ScalarMix` layers; fixed ones are left as they are.
        """
        for mix in mixes:
            if self.mix_logits is not None and mix.mix_weights is None:
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

    Args:
        key: the module variable's name, scope prefix and ``:0`` dropped.

    Returns:
        The released name.
    """
    key = key[len("bilm/") :] if key.startswith("bilm/") else key
    match = _HUB_LSTM.match(key)
    if not match:
        return key
    direction, layer, leaf = match.group(1), match.group(2) or match.group(3), _LSTM_NAMES[match.group(4)]
    return f"{lstm_prefix(int(direction), int(layer))}/{leaf}"


def infer_options(arrays: dict[str, np.ndarray], use_skip_connections: bool) -> dict:
    """Options from the released-layout arrays' shapes; what shapes cannot say is :data:`HUB_DEFAULTS`.

    Args:
        arrays: weight arrays in the released layout, by name.
        use_skip_connections: the one option shapes cannot tell that differs between released models.

    Returns:
        An options dict.
    """
    filters, n_layers, n_highway = [], 0, 0
    while f"CNN/W_cnn_{len(filters)}" in arrays:
        shape = arrays[f"CNN/W_cnn_{len(filters)}"].shape
        filters.append([int(shape[1]), int(shape[3])])
    while f"CNN_high_{n_highway}/W_carry" in arrays:
        n_highway += 1
    while f"{lstm_prefix(0, n_layers)}/W_P_0" in arrays:
        n_layers += 1
    if "char_embed" not in arrays or not filters or not n_layers:
        raise ValueError(
            "the module has no ELMo biLM variables (bilm/char_embed, bilm/CNN/W_cnn_0, "
            f"bilm/RNN_0/.../Cell0/rnn/lstm_cell/...); it has {sorted(arrays) or 'none'}"
        )
    dim, projection_dim = arrays[f"{lstm_prefix(0, 0)}/W_P_0"].shape
    return normalize_options(
        {
            "char_cnn": {
                "activation": HUB_DEFAULTS["activation"],
                "filters": filters,
                "n_highway": n_highway,
                "embedding": {"dim": int(arrays["char_embed"].shape[1])},
                "n_characters": 262,
                "max_characters_per_token": 50,
            },
            "lstm": {
                "dim": int(dim),
                "projection_dim": int(projection_dim),
                "n_layers": n_layers,
                "cell_clip": HUB_DEFAULTS["cell_clip"],
                "proj_clip": HUB_DEFAULTS["proj_clip"],
                "use_skip_connections": use_skip_connections,
            },
        }
    )


def _arrays_for_options(arrays: dict[str, np.ndarray], options: dict, handle: str) -> dict[str, np.ndarray]:
    """The arrays ``options`` needs, shapes checked; a 262-row char_embed loses its padding row 0."""
    if arrays.get("char_embed") is not None and arrays["char_embed"].shape[0] == 262:
        arrays = {**arrays, "char_embed": arrays["char_embed"][1:]}
    out = {}
    for name, shape in expected_shapes(options).items():
        if name not in arrays or arrays[name].shape != shape:
            found = arrays[name].shape if name in arrays else "missing"
            raise ValueError(
                f"module {handle!r}: weight '{name}' is {found}, expected shape {shape}; "
                f"the module holds {sorted(arrays)}"
            )
        out[name] = arrays[name]
    return out


def read_hub_module(handle: str | os.PathLike, use_skip_connections: bool | None = None) -> HubWeights:
    """Read a local TF Hub ELMo module (TF1) or a module written by :func:`export_hub_module`.

    TF Hub's modules do not record activation, clips or skip connections: :data:`HUB_DEFAULTS` (those of
    the released model) are used, and ``use_skip_connections`` (default True) overrides the last.
    Modules written by :func:`export_hub_module` record their options, which take precedence unless
    ``use_skip_connections`` is given.

    Args:
        handle: a module folder or URL (see :func:`module_folder`).
        use_skip_connections: override of the option, or ``None``.

    Returns:
        A :class:`HubWeights`.
    """
    handle = os.fspath(handle)
    module = load_module(handle)
    variables = {_variable_key(v.name): v for v in getattr(module, "variables", [])}
    weights, scaling = variables.get("aggregation/weights"), variables.get("aggregation/scaling")
    if hasattr(module, _CONFIG_FN):
        config = json.loads(getattr(module, _CONFIG_FN)().numpy().decode("utf-8"))
        options, boundaries = config["options"], config["add_sentence_boundaries"]
        if use_skip_connections is not None:
            if "lstm" not in options:
                raise InputError(
                    f"use_skip_connections is an LSTM setting; module {handle!r} holds a "
                    f"{options['encoder']['type']} biLM: leave it out"
                )
            options["lstm"]["use_skip_connections"] = use_skip_connections
        arrays = {name: value.numpy() for name, value in getattr(module, _WEIGHTS_FN)().items()}
    else:
        boundaries = None
        arrays = {
            released_name(key): var.numpy() for key, var in variables.items() if not key.startswith("aggregation/")
        }
        skip = HUB_DEFAULTS["use_skip_connections"] if use_skip_connections is None else use_skip_connections
        options = infer_options(arrays, skip)
    options = normalize_options(options)
    logits = None
    if weights is not None and scaling is not None:
        n = encoder_options(options)[1]["n_layers"] + 1
        if tuple(weights.shape) != (n,):
            raise ValueError(
                f"module {handle!r}: aggregation/weights has shape {tuple(weights.shape)}, "
                f"expected ({n},) for {n - 1} biLM layers"
            )
        logits = weights.numpy().astype(np.float32) + np.float32(1.0 / n)
    return HubWeights(
        options=options,
        arrays=_arrays_for_options(arrays, options, handle),
        mix_logits=logits,
        mix_gamma=None if scaling is None else float(np.reshape(scaling.numpy(), (-1,))[0]),
        add_sentence_boundaries=boundaries,
    )
