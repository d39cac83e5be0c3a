"""Elmo: the high-level layer. Strings, padded tokens or char ids in; ELMo representations out."""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import tensorflow as tf
from keras import ops

from elmo_keras.errors import InputError
from elmo_keras.io.load import ModelWeights, resolve
from elmo_keras.layers.bilm import BiLM, check_concrete_inputs
from elmo_keras.layers.pooling import MaskedPooling, pool_modes
from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.saving import serializable
from elmo_keras.text import as_text, split_sentences, strings_to_char_ids, token_mask

_OUTPUTS = ("dict", "elmo", "layers", "sentence")
#: An eager call of this many tokens per row or more runs through a cached tf.function (and so do all later eager
#: calls of that input form): eager ops run the LSTM loops step by step in Python, ~35x slower than a graph on a
#: long text, while the one trace costs a few seconds.
GRAPH_MIN_TOKENS = 256


@serializable
class Elmo(keras.layers.Layer):
    """BiLM + ``num_output_representations`` ScalarMixes + dropout.

    Inputs (any of):
      * sentences, string [B]: split on ASCII whitespace in the graph;
      * padded tokens, string [B, T] ("" = padding, after the real tokens);
      * char ids, int [B, T, max_characters_per_token] (from :func:`elmo_keras.batch_to_ids`).
    Text may also be a list or tuple of str (or of token lists) or a NumPy str/object array. Eager calls check
    char ids (range) and padding ("" or all-zero ids after each row's real tokens) first: an InputError names the
    row, token and id. Inside a graph (``model.fit``, a tf.function, an exported model) these and invalid UTF-8
    fail in-graph with the first bad row of the batch. An eager call of ``GRAPH_MIN_TOKENS`` (256) tokens per row
    or more runs through a cached tf.function (one trace per input form, any batch size and length; same numbers,
    gradients flow), and so do later eager calls of that form: eager ops would run the LSTMs step by step.

    Output with ``output_mode="dict"`` (default; ``output=`` is the older spelling and still works)::

        {"elmo_representations": [float [B, T, 2P]] * num_output_representations,
         "mask": bool [B, T], "layers": [float [B, T, 2P]] * (n_layers + 1)}

    With ``output_mode="elmo"``: the single representation [B, T, 2P], carrying its Keras mask, so that
    ``Bidirectional(GRU)`` stacked on top ignores padding. With ``output_mode="layers"``: the list of the
    n_layers + 1 biLM layers, each [B, T, 2P] with the mask (for a mixing layer of your choice on top;
    no ScalarMix is created). With ``output_mode="sentence"``: one vector per text, [B, 2P * len(pool)], the
    mixed representation pooled (``pool="mean"``, ``"max"`` or a list such as ``["mean", "max"]``, concatenated
    in that order) over the text's real tokens only, no mask (TF Hub's ``default`` output with ``pool="mean"``);
    a text without tokens gives zeros, never NaN. ``output_mode="dict"`` with ``pool=`` also returns
    ``"sentence_representations"`` (each representation pooled so, [B, 2P * len(pool)]) and ``"empty"`` (bool
    [B], True for the texts without tokens, whose vectors are those zeros).

    Args:
        options: the options dict (see :mod:`elmo_keras.io.options`) of a new, untrained biLM; give it or
            ``bilm``, not both. Defaults to `None`.
        num_output_representations: int, how many independent ScalarMixes (e.g. one per task layer).
            Defaults to `1`.
        dropout: float, dropout on each representation (training only). Defaults to `0.5`.
        output_mode: `"dict"`, `"elmo"`, `"layers"` or `"sentence"` (see above). Defaults to `"dict"`.
        bilm_trainable: bool, fine-tune the biLM (the mixes always train unless fixed). Defaults to `False`.
        mix_weights: fixed mixing weights used as given instead of trainable softmax weights. Defaults to
            `None`.
        do_layer_norm: bool, passed to every :class:`ScalarMix`. Defaults to `False`.
        weight_dropout: float, passed to every :class:`ScalarMix`. Defaults to `0.0`.
        l2_coef: float, passed to every :class:`ScalarMix`. Defaults to `0.0`.
        stateful: bool, passed to the :class:`BiLM` built from ``options``. Defaults to `False`.
        max_batch_size: int, passed to the :class:`BiLM` built from ``options``. Defaults to `128`.
        add_sentence_boundaries: bool, passed to the :class:`BiLM` built from ``options``. Defaults to `True`.
        bilm: a built :class:`BiLM` (e.g. ``BiLM.from_pretrained(...)``), serialized with this layer; give it or
            ``options``. Defaults to `None`.
        output: the older spelling of ``output_mode`` (it wins when given). Defaults to `None`.
        pool: how ``output_mode="sentence"`` (or ``"dict"``) pools over tokens: `"mean"`, `"max"` or a list of
            both; `None`: `"mean"` for ``"sentence"``, no pooled entries for ``"dict"``. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: sentences string [B], padded tokens string [B, T], or char ids int [B, T, 50] (see above).
        training: bool, applies dropout. Defaults to `False`.

    Returns:
        By ``output_mode``: the dict, the representation [B, T, 2P], the list of layers or the sentence vectors
        [B, 2P * len(pool)] (see above).

    Example:

    ```python
    import keras
    import numpy as np
    import elmo_keras as ek

    model = keras.Sequential([keras.Input(shape=(), dtype="string"),
                              ek.Elmo.from_preset("brown-small", output_mode="elmo"),   # + its Keras mask
                              keras.layers.Bidirectional(keras.layers.GRU(4)),
                              keras.layers.Dense(2, activation="softmax")])
    texts = np.array(["The bank approved the loan .", "Hi"], dtype=object)   # Keras models take arrays
    assert model.predict(texts, verbose=0).shape == (2, 2)

    sentences = ek.Elmo.from_preset("brown-small", output_mode="sentence", pool=["mean", "max"])
    assert sentences(["The bank approved the loan .", ""]).shape == (2, 2 * 256)   # zeros for the empty text
    ```
    """

    def __init__(
        self,
        options: dict | None = None,
        num_output_representations: int = 1,
        dropout: float = 0.5,
        output_mode: str = "dict",
        bilm_trainable: bool = False,
        mix_weights: Sequence[float] | None = None,
        do_layer_norm: bool = False,
        weight_dropout: float = 0.0,
        l2_coef: float = 0.0,
        stateful: bool = False,
        max_batch_size: int = 128,
        add_sentence_boundaries: bool = True,
        bilm: BiLM | None = None,
        output: str | None = None,
        pool: str | Sequence[str] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        output = output_mode if output is None else output  # `output=`: the spelling before 0.2
        if (options is None) == (bilm is None):
            raise InputError("give Elmo either options (a new, untrained biLM) or bilm= (a built BiLM), not both")
        if bilm is not None and (stateful, max_batch_size, add_sentence_boundaries) != (False, 128, True):
            raise InputError(
                "stateful, max_batch_size and add_sentence_boundaries belong to the BiLM: give them "
                "when building it (e.g. BiLM.from_pretrained(..., stateful=True)), not with bilm="
            )
        if output not in _OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if output in ("elmo", "sentence") and num_output_representations != 1:
            raise ValueError(f"output={output!r} returns one representation: use num_output_representations=1")
        if pool is not None and output not in ("sentence", "dict"):
            raise InputError(f"pool= pools output_mode='sentence' (or adds to 'dict'), not {output!r}: drop pool=")
        if output == "sentence" and pool is None:
            pool = "mean"
        if pool is not None:
            pool_modes(pool)  # a bad value (e.g. pool=1) is named before the biLM is built
        if num_output_representations < 1 and output != "layers":
            raise ValueError(f"num_output_representations must be >= 1, got {num_output_representations}")
        if bilm is None:
            bilm = BiLM(
                options,
                stateful=stateful,
                max_batch_size=max_batch_size,
                add_sentence_boundaries=add_sentence_boundaries,
                name="bilm",
                dtype=self.dtype_policy,
            )
        bilm.trainable = bilm_trainable
        self.bilm = bilm
        self.options = self.bilm.options
        self.num_output_representations = num_output_representations
        self.dropout = dropout
        self.output_mode = output
        self.pool = None if pool is None else pool if isinstance(pool, str) else list(pool)
        self.bilm_trainable = bilm_trainable
        self.mix_weights = None if mix_weights is None else [float(w) for w in mix_weights]
        self.do_layer_norm = do_layer_norm
        self.weight_dropout = weight_dropout
        self.l2_coef = l2_coef
        n_layers = self.bilm.num_layers + 1
        if output == "layers":
            num_output_representations = 0
        self.mixes = [
            ScalarMix(
                n_layers,
                mix_weights=self.mix_weights,
                do_layer_norm=do_layer_norm,
                weight_dropout=weight_dropout,
                l2_coef=l2_coef,
                name=f"scalar_mix_{i}",
                dtype=self.dtype_policy,
            )
            for i in range(num_output_representations)
        ]
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        if pool is not None:  # zeros for a text without tokens (Keras' GlobalAveragePooling1D would give NaN)
            self.pooling = MaskedPooling(pool_modes(pool), name="sentence_pooling", dtype=self.dtype_policy)

    @classmethod
    def from_pretrained(
        cls, options_file: dict | str | os.PathLike, weight_file: str | os.PathLike, **kwargs
    ) -> "Elmo":
        """Build from an options.json (path or dict) and a released-layout hdf5 weight file.

        Args:
            options_file: the options, as a path, an http(s) URL or a dict.
            weight_file: the released-layout hdf5 weights, as a path or an http(s) URL.
            **kwargs: arguments of ``Elmo`` (``stateful``, ``max_batch_size``, ``add_sentence_boundaries`` go to
                the :class:`BiLM`).

        Returns:
            A built ``Elmo``, its biLM frozen unless ``bilm_trainable=True``.
        """
        return cls._from_model_weights(resolve(options_file, weight_file).read(), None, kwargs)

    @classmethod
    def from_hub(
        cls, path: str | os.PathLike, boundaries: str | None = None, use_skip_connections: bool | None = None, **kwargs
    ) -> "Elmo":
        """Build from a local TF Hub ELMo module (TF1, or written by ``export_hub_module``).

        The module's aggregation becomes the initial logits and gamma of every trainable ScalarMix.

        Args:
            path: the module's folder.
            boundaries: `"none"` (run on the tokens alone, as TF Hub's module does), `"add"` (``<S>``/``</S>``),
                or `None`: what the module records, else `"none"`. Defaults to `None`.
            use_skip_connections: see :func:`elmo_keras.io.hub_module.read_hub_module`. Defaults to `None`.
            **kwargs: arguments of ``Elmo``.

        Returns:
            A built ``Elmo``.
        """
        return cls._from_model_weights(resolve(path, hub=True).read(use_skip_connections), boundaries, kwargs)

    @classmethod
    def from_preset(cls, name: str | os.PathLike, **kwargs) -> "Elmo":
        """Build from a preset: shipped (e.g. ``"brown-small"``, see ``elmo_keras.presets``) or published, or a
        pretraining output folder; any source :func:`elmo_keras.io.load.resolve` takes.

        Args:
            name: the preset's name, or a folder (or a folder's URL) with options.json and weights.hdf5.
            **kwargs: arguments of ``Elmo`` (``stateful``, ``max_batch_size``, ``add_sentence_boundaries`` go to
                the :class:`BiLM`).

        Returns:
            A built ``Elmo``.

        Example:

        ```python
        import elmo_keras as ek

        elmo = ek.Elmo.from_preset("brown-small", output_mode="elmo")
        vectors = elmo(["The bank approved the loan .", "Hi"])
        assert vectors.shape == (2, 6, elmo.output_dim)
        ```
        """
        return cls._from_model_weights(resolve(name).read(), None, kwargs)

    @classmethod
    def _from_model_weights(cls, weights: ModelWeights, boundaries: str | None, kwargs: dict) -> "Elmo":
        """What the loader read -> a built Elmo (every ``from_*`` ends here); a TF Hub module's aggregation starts
        the trainable mixes."""
        bilm = BiLM.from_model_weights(weights, boundaries, **cls._bilm_arguments(kwargs))
        elmo = cls(bilm=bilm, **kwargs)
        elmo.build()
        weights.init_mixes(elmo.mixes)
        return elmo

    @staticmethod
    def _bilm_arguments(kwargs: dict) -> dict:
        """Take the BiLM's own arguments (and the dtype both share) out of an Elmo's keyword arguments."""
        own = {
            key: kwargs.pop(key) for key in ("stateful", "max_batch_size", "add_sentence_boundaries") if key in kwargs
        }
        return {**own, **({"dtype": kwargs["dtype"]} if "dtype" in kwargs else {})}

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def as_layers(self) -> "Elmo":
        """This embedder with ``output="layers"`` (a twin sharing nothing but a copy of the biLM weights)."""
        if self.output_mode == "layers":
            return self
        config = {**self.get_config(), "output_mode": "layers", "pool": None, "name": f"{self.name}_layers"}
        twin = Elmo.from_config(config)
        twin.build()
        twin.bilm.set_weights(self.bilm.get_weights())
        return twin

    def build(self, input_shape=None):
        if not self.bilm.built:  # a BiLM given as bilm= is built already
            self.bilm.build(None)
        layer_shape = (None, None, self.output_dim)
        for mix in self.mixes:
            mix.build([layer_shape] * (self.bilm.num_layers + 1))
        self.built = True

    def __call__(self, inputs, *args, **kwargs):
        # Lists/tuples of str and NumPy str arrays become a string tensor (Keras would reject them).
        inputs = as_text(inputs)
        if keras.backend.backend() != "tensorflow" and _is_text(inputs):
            raise InputError(
                f"text input needs the TensorFlow backend (its string ops); on {keras.backend.backend()} pass char "
                "ids: elmo(ek.batch_to_ids(token_lists))"
            )
        check_concrete_inputs(inputs, self.options["char_cnn"]["n_characters"])  # eager calls: a clear InputError
        return super().__call__(inputs, *args, **kwargs)

    def char_ids(self, inputs):
        """Any accepted input -> char ids (given ids are checked by the BiLM).

        Args:
            inputs: sentences string [B], padded tokens string [B, T], or char ids int [B, T, C].

        Returns:
            Char ids int [B, T, max_characters_per_token]; given char ids as they are.
        """
        if _is_text(inputs):
            return strings_to_char_ids(inputs, self.bilm.max_characters_per_token)
        if len(inputs.shape) != 3:
            raise InputError(
                f"char id input must be [batch, max_len, {self.bilm.max_characters_per_token}], "
                f"got shape {tuple(inputs.shape)}; text must be str"
            )
        return inputs

    def call(self, inputs, training=False):
        eager_tf = keras.backend.backend() == "tensorflow" and tf.executing_eagerly()  # JAX, PyTorch: no tf.function
        function = self._graph_function(inputs, bool(training)) if eager_tf else None
        return self._compute(inputs, training) if function is None else function(inputs)

    def _graph_function(self, inputs, training: bool):
        """For an eager call: the cached tf.function of :meth:`_compute` (one trace per input dtype, rank, char-id
        width and training flag, for any batch size and length), made for the first input of at least
        ``GRAPH_MIN_TOKENS`` tokens; None before that (short inputs run eagerly, without the trace)."""
        shape = [None] * len(inputs.shape)
        if len(shape) == 3:
            shape[-1] = inputs.shape[-1]
        key = (inputs.dtype.name, tuple(shape), training)
        functions = self.__dict__.setdefault("_graph_functions", {})  # plain dict: not tracked or saved by Keras
        if key not in functions:
            if self._padded_length(inputs) < GRAPH_MIN_TOKENS:
                return None
            functions[key] = tf.function(
                lambda x: self._compute(x, training), input_signature=[tf.TensorSpec(shape, inputs.dtype)]
            )
        return functions[key]

    @staticmethod
    def _padded_length(inputs) -> int:
        """Tokens per row of concrete inputs (0 for inputs the layer rejects: its own error follows)."""
        if len(inputs.shape) == 1 and inputs.dtype == tf.string:
            return int(split_sentences(inputs).shape[1])
        return inputs.shape[1] if len(inputs.shape) in (2, 3) else 0

    def _compute(self, inputs, training):
        out = self.bilm(self.char_ids(inputs))
        layers, mask = out["layers"], out["mask"]
        if self.output_mode == "layers":
            return layers
        reps = [self.dropout_layer(mix(layers, mask=mask, training=training), training=training) for mix in self.mixes]
        if self.output_mode == "elmo":
            return reps[0]
        if self.output_mode == "sentence":
            return self.pooling(reps[0], mask=mask)
        out = {"elmo_representations": reps, "mask": mask, "layers": layers}
        if self.pool is not None:
            out["sentence_representations"] = [self.pooling(rep, mask=mask) for rep in reps]
            out["empty"] = ops.logical_not(ops.any(mask, axis=1))
        return out

    def compute_mask(self, inputs, mask=None):
        """The token mask bool [B, T] of output="elmo" (one per layer for "layers"; the dict has "mask")."""
        if self.output_mode in ("dict", "sentence") or keras.backend.is_keras_tensor(inputs):
            return None  # symbolic calls carry no mask: a functional model computes it when it runs
        mask = token_mask(inputs)
        return [mask] * (self.bilm.num_layers + 1) if self.output_mode == "layers" else mask

    @staticmethod
    def _steps(shape):
        return shape[1] if len(shape) >= 2 else None

    def compute_output_spec(self, inputs, training=False):
        shape = (inputs.shape[0], self._steps(inputs.shape), self.output_dim)
        rep = keras.KerasTensor(shape, dtype=self.compute_dtype)
        if self.output_mode == "elmo":
            return rep
        if self.output_mode == "layers":
            return [keras.KerasTensor(shape, dtype=self.compute_dtype) for _ in range(self.bilm.num_layers + 1)]
        pooled = (inputs.shape[0], self.output_dim * len(pool_modes(self.pool))) if self.pool is not None else None
        if self.output_mode == "sentence":
            return keras.KerasTensor(pooled, dtype=self.compute_dtype)
        out = {
            "elmo_representations": [
                keras.KerasTensor(shape, dtype=self.compute_dtype) for _ in range(self.num_output_representations)
            ],
            "mask": keras.KerasTensor(shape[:2], dtype="bool"),
            "layers": [keras.KerasTensor(shape, dtype=self.compute_dtype) for _ in range(self.bilm.num_layers + 1)],
        }
        if pooled is not None:
            out["sentence_representations"] = [
                keras.KerasTensor(pooled, dtype=self.compute_dtype) for _ in range(self.num_output_representations)
            ]
            out["empty"] = keras.KerasTensor(shape[:1], dtype="bool")
        return out

    def get_config(self):
        return {
            **super().get_config(),
            "bilm": keras.saving.serialize_keras_object(self.bilm),
            "num_output_representations": self.num_output_representations,
            "dropout": self.dropout,
            "output_mode": self.output_mode,
            "bilm_trainable": self.bilm_trainable,
            "mix_weights": self.mix_weights,
            "do_layer_norm": self.do_layer_norm,
            "weight_dropout": self.weight_dropout,
            "l2_coef": self.l2_coef,
            "pool": self.pool,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("bilm"), dict):  # written by this version; older files have "options"
            config["bilm"] = keras.saving.deserialize_keras_object(config["bilm"])
        return cls(**config)


def _is_text(inputs) -> bool:
    """Whether ``inputs`` (a tensor, array or KerasTensor) holds strings."""
    dtype = getattr(inputs, "dtype", None)
    return dtype in ("string", "tf.string") or getattr(dtype, "name", None) == "string"
