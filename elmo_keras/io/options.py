"""The bilm-tf / AllenNLP ``options.json`` dict: validation, defaults and the released sizes.

The contextualizer over the char CNN's token vectors is chosen by an optional ``encoder`` section:

- missing, or ``{"type": "lstm"}``: the released biLM, projected LSTMs set by the ``lstm`` section
  (``dim``, ``projection_dim``, ``n_layers``, ``cell_clip``, ``proj_clip``, ``use_skip_connections``);
- ``{"type": "transformer", "projection_dim": P, "n_layers": L, "num_heads": 4, "ff_dim": 4P, "dropout": 0.1,
  "activation": "relu"}``: causal self-attention stacks (:class:`elmo_keras.layers.BiTransformer`);
- ``{"type": "gated_cnn", "projection_dim": P, "n_layers": L, "kernel_size": 5, "layer_norm": true,
  "dropout": 0.1}``: causal gated convolution stacks (:class:`elmo_keras.layers.BiGatedCNN`).

``projection_dim`` and ``n_layers`` are required, the others default to the values shown. A transformer or
gated-CNN options file has no ``lstm`` section. :func:`encoder_options` gives any file's (type, settings).
A key that is not in :data:`KNOWN_KEYS` (e.g. a misspelled setting) is an error, never ignored.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from numbers import Real
from typing import Any

from elmo_keras.errors import InputError
from elmo_keras.io.download import cached_copy_hint, local_file

_ACTIVATIONS = ("relu", "tanh")
_FFN_ACTIVATIONS = ("relu", "gelu")
ENCODER_TYPES = ("lstm", "transformer", "gated_cnn")
#: Optional settings of the encoder types other than "lstm" and their defaults (ff_dim None: 4 * projection_dim).
_ENCODER_DEFAULTS = {
    "transformer": {"num_heads": 4, "ff_dim": None, "dropout": 0.1, "activation": "relu"},
    "gated_cnn": {"kernel_size": 5, "layer_norm": True, "dropout": 0.1},
}
#: Every key an options dict may hold, by section ("" is the top level; "encoder:TYPE" the ``encoder`` section of
#: that type). Any other key is an error, so that a misspelled setting cannot be ignored. The top level holds the
#: architecture sections, the training settings of :data:`elmo_keras.lm.TRAIN_DEFAULTS` and ``n_tokens_vocab``
#: (``elmo-keras pretrain`` writes them), and what bilm-tf training writes or reads.
KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "": (
        "char_cnn",
        "lstm",
        "encoder",
        "n_tokens_vocab",
        "batch_size",
        "n_epochs",
        "dropout",
        "n_negative_samples_batch",
        "all_clip_norm_val",
        "optimizer",
        "learning_rate",
        "vocab_min_count",
        "vocab_max_size",
        "shuffle_buffer",
        "buckets",
        "seed",
        "backup_every_steps",
        "bidirectional",
        "n_train_tokens",
        "unroll_steps",
        "sample_softmax",
        "share_embedding_softmax",
    ),
    "char_cnn": ("activation", "embedding", "filters", "max_characters_per_token", "n_characters", "n_highway"),
    "char_cnn.embedding": ("dim",),
    "lstm": ("cell_clip", "dim", "n_layers", "proj_clip", "projection_dim", "use_skip_connections"),
    "encoder:lstm": ("type",),
    **{
        f"encoder:{kind}": ("type", "projection_dim", "n_layers", *defaults)
        for kind, defaults in _ENCODER_DEFAULTS.items()
    },
}


def _object(section: Any, name: str) -> dict:
    if not isinstance(section, dict):
        raise InputError(f"options: '{name}' must be an object ({{...}} in JSON), got {section!r:.60}")
    return section


def _require(section: dict, key: str, where: str) -> Any:
    if key not in _object(section, where):
        raise InputError(f"options: missing '{where}.{key}'")
    return section[key]


def _check_keys(section: Any, name: str, known: tuple[str, ...], source: str, of_type: str = "") -> None:
    """InputError naming the first key of the object ``section`` (called ``name``, "" for the top level) that is
    not in ``known``, the closest known key and ``source`` (the options or their file)."""
    unknown = sorted(set(_object(section, name)) - set(known))
    if not unknown:
        return
    prefix = f"{name}." if name else ""
    settings = [key for key in known if key != "type"]
    close = difflib.get_close_matches(unknown[0], settings, n=1)
    guess = f"did you mean '{prefix}{close[0]}'? " if close else ""
    raise InputError(
        f"{source}: unknown setting '{prefix}{unknown[0]}'{'' if name else ' at the top level'}{of_type}; "
        f"its settings are {', '.join(settings)}; {guess}fix its spelling or remove it"
    )


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is an int >= 1 (a bool is not); else InputError "NAME must be a positive integer".

    Args:
        value: the value to check.
        name: its name, for the error message.

    Returns:
        ``value``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return value


def _positive_int(value: Any, name: str) -> int:
    return positive_int(value, f"options: '{name}'")


def _clip(value: Any, name: str) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, Real) or not value > 0):
        raise InputError(f"options: '{name}' must be a positive number or null (no clipping), got {value!r}")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"options: '{name}' must be true or false (JSON booleans), got {value!r}")
    return value


def normalize_options(options: dict, path: str | None = None) -> dict:
    """Check an options dict and return a complete copy (defaults filled in, clips may be None).

    Raises InputError naming the option that is missing, invalid or unknown (:data:`KNOWN_KEYS`).

    Args:
        options: options as in an ``options.json`` file.
        path: the file the options were read from, named in the unknown-key errors, or ``None``.

    Returns:
        A new, complete options dict.
    """
    if not isinstance(options, dict):
        raise InputError(f"options must be a dict (the parsed options.json), got {type(options).__name__}")
    source = "options" if path is None else f"options file {path!r}"
    _check_keys(options, "", KNOWN_KEYS[""], source)
    opts = copy.deepcopy(options)
    cnn = _require(opts, "char_cnn", "options")
    _check_keys(cnn, "char_cnn", KNOWN_KEYS["char_cnn"], source)
    filters = _require(cnn, "filters", "char_cnn")
    if not filters or not all(isinstance(f, (list, tuple)) and len(f) == 2 for f in filters):
        raise InputError(f"options: 'char_cnn.filters' must be a list of [width, n_filters] pairs, got {filters!r}")
    cnn["filters"] = [
        [_positive_int(w, "char_cnn.filters width"), _positive_int(n, "char_cnn.filters count")] for w, n in filters
    ]
    emb = _require(cnn, "embedding", "char_cnn")
    _check_keys(emb, "char_cnn.embedding", KNOWN_KEYS["char_cnn.embedding"], source)
    _positive_int(_require(emb, "dim", "char_cnn.embedding"), "char_cnn.embedding.dim")
    cnn.setdefault("n_highway", 0)
    if isinstance(cnn["n_highway"], bool) or not isinstance(cnn["n_highway"], int) or cnn["n_highway"] < 0:
        raise InputError(f"options: 'char_cnn.n_highway' must be an integer >= 0, got {cnn['n_highway']!r}")
    cnn.setdefault("activation", "relu")
    if cnn["activation"] not in _ACTIVATIONS:
        raise InputError(f"options: 'char_cnn.activation' must be one of {_ACTIVATIONS}, got {cnn['activation']!r}")
    cnn.setdefault("n_characters", 262)
    if cnn["n_characters"] not in (261, 262):
        raise InputError(
            f"options: 'char_cnn.n_characters' must be 262 (or 261 as written by bilm-tf training), "
            f"got {cnn['n_characters']!r}"
        )
    cnn["n_characters"] = 262  # ids are shifted by +1 at inference; row 0 is the padding row
    cnn.setdefault("max_characters_per_token", 50)
    max_chars = _positive_int(cnn["max_characters_per_token"], "char_cnn.max_characters_per_token")
    widest = max(w for w, _ in cnn["filters"])
    if widest > max_chars:
        raise InputError(f"options: a filter of width {widest} is wider than max_characters_per_token={max_chars}")
    encoder = opts.get("encoder", {"type": "lstm"})
    kind = _require(encoder, "type", "encoder")
    if kind not in ENCODER_TYPES:
        raise InputError(f"options: 'encoder.type' must be one of {ENCODER_TYPES}, got {kind!r}")
    if kind == "lstm":
        if set(encoder) != set(KNOWN_KEYS["encoder:lstm"]):
            raise InputError(
                f"{source}: 'encoder.{min(set(encoder) - {'type'})}' is not a setting of the 'lstm' "
                "encoder: its settings go in the 'lstm' section"
            )
        lstm = _require(opts, "lstm", "options")
        _check_keys(lstm, "lstm", KNOWN_KEYS["lstm"], source)
        _normalize_lstm(lstm)
    elif "lstm" in opts:
        raise InputError(
            f"options: an 'lstm' section with 'encoder.type' {kind!r}: remove it (the {kind} settings go in 'encoder')"
        )
    else:
        _check_keys(encoder, "encoder", KNOWN_KEYS[f"encoder:{kind}"], source, f" for type {kind!r}")
        _normalize_encoder(encoder, kind)
    return opts


def _normalize_lstm(lstm: dict) -> None:
    for key in ("dim", "projection_dim", "n_layers"):
        _positive_int(_require(lstm, key, "lstm"), f"lstm.{key}")
    for key in ("cell_clip", "proj_clip"):
        lstm[key] = _clip(lstm.get(key), f"lstm.{key}")
    lstm["use_skip_connections"] = _flag(lstm.get("use_skip_connections", False), "lstm.use_skip_connections")


def _normalize_encoder(encoder: dict, kind: str) -> None:
    """Check a transformer / gated_cnn ``encoder`` section (its keys known) in place and fill in its defaults."""
    p = _positive_int(_require(encoder, "projection_dim", "encoder"), "encoder.projection_dim")
    _positive_int(_require(encoder, "n_layers", "encoder"), "encoder.n_layers")
    for key, value in _ENCODER_DEFAULTS[kind].items():
        encoder.setdefault(key, value)
    dropout = encoder["dropout"]
    if isinstance(dropout, bool) or not isinstance(dropout, Real) or not 0 <= dropout < 1:
        raise InputError(f"options: 'encoder.dropout' must be a number in [0, 1), got {dropout!r}")
    if kind == "gated_cnn":
        _positive_int(encoder["kernel_size"], "encoder.kernel_size")
        _flag(encoder["layer_norm"], "encoder.layer_norm")
        return
    heads = _positive_int(encoder["num_heads"], "encoder.num_heads")
    if p % heads:
        raise InputError(
            f"options: 'encoder.num_heads' ({heads}) must divide 'encoder.projection_dim' ({p}): "
            "each head gets projection_dim / num_heads dimensions"
        )
    encoder["ff_dim"] = _positive_int(4 * p if encoder["ff_dim"] is None else encoder["ff_dim"], "encoder.ff_dim")
    if encoder["activation"] not in _FFN_ACTIVATIONS:
        raise InputError(
            f"options: 'encoder.activation' must be one of {_FFN_ACTIVATIONS}, got {encoder['activation']!r}"
        )


def encoder_options(options: dict) -> tuple[str, dict]:
    """(encoder type, its settings) of normalised options: ``("lstm", options["lstm"])`` for the released
    format, else ``(type, options["encoder"])``. Both settings hold ``projection_dim`` and ``n_layers``.

    Args:
        options: normalised options (:func:`normalize_options`).

    Returns:
        ``(encoder_type, settings)``.
    """
    kind = options.get("encoder", {}).get("type", "lstm")
    return kind, options["lstm"] if kind == "lstm" else options["encoder"]


def load_options(options: dict | str | os.PathLike) -> dict:
    """An options dict, or the path or http(s) URL of an options.json file -> normalised options dict.

    A URL is downloaded once into the cache (:mod:`elmo_keras.io.download`).

    Args:
        options: an options dict, or the path or http(s) URL of an ``options.json`` file.

    Returns:
        The normalised options dict (:func:`normalize_options`).

    Example:

    ```python
    import elmo_keras as ek

    options = ek.load_options(ek.RELEASED_OPTIONS["small"])
    assert options["lstm"]["projection_dim"] == 128 and ek.io.options.n_filters(options) == 2048
    ```
    """
    if isinstance(options, (str, os.PathLike)):
        path = local_file(options, "json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"options file not found: {path!r}")
        with open(path, encoding="utf-8") as f:
            try:
                options = json.load(f)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise InputError(f"options file {path!r} is not valid JSON: {err}{cached_copy_hint(path)}") from None
        return normalize_options(options, path)
    return normalize_options(options)


def n_filters(options: dict) -> int:
    """Width of the char-CNN output (sum of filter counts).

    Args:
        options: normalised options.

    Returns:
        int.
    """
    return sum(n for _, n in options["char_cnn"]["filters"])


def _released(dim: int, proj: int, n_highway: int) -> dict:
    return {
        "lstm": {
            "use_skip_connections": True,
            "projection_dim": proj,
            "cell_clip": 3,
            "proj_clip": 3,
            "dim": dim,
            "n_layers": 2,
        },
        "char_cnn": {
            "activation": "relu",
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": n_highway,
            "embedding": {"dim": 16},
            "n_characters": 262,
            "max_characters_per_token": 50,
        },
    }


#: Architectures of the released ELMo models (the weights are not bundled: load them with from_pretrained).
RELEASED_OPTIONS: dict[str, dict] = {
    "small": _released(1024, 128, 1),
    "medium": _released(2048, 256, 1),
    "original": _released(4096, 512, 2),
    "original_5.5B": _released(4096, 512, 2),
}
