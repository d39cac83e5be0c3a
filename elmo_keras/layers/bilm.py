"""BiLM: char CNN + forward/backward contextualizer stacks (projected LSTMs, causal Transformer or gated CNN)
-> all layer outputs and the token mask."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from elmo_keras.errors import InputError
from elmo_keras.io.load import ModelWeights, resolve
from elmo_keras.io.options import encoder_options, normalize_options
from elmo_keras.io.weights import get_weight_arrays, set_weight_arrays
from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.gated_cnn import BiGatedCNN
from elmo_keras.layers.initializers import weights_loaded_next
from elmo_keras.layers.lstm import ProjectedBiLSTM, prefix_lengths
from elmo_keras.layers.lstm_cell import ON_TENSORFLOW
from elmo_keras.layers.transformer import BiTransformer
from elmo_keras.saving import serializable
from elmo_keras.text import boundary_char_ids, check_char_ids

#: eager calls on JAX pad char ids to a multiple of this many tokens (and rows, stateless): fewer compiles
JAX_BUCKET = 16


@serializable
class BiLM(keras.layers.Layer):
    """The ELMo bidirectional language model (without softmax): char CNN, then forward and backward stacks of
    the options' encoder (projected LSTMs as released, or a causal Transformer / gated CNN); returns every layer
    and the token mask.

    The encoder layer is ``bilm.encoder``; it is also ``bilm.lstm`` (a :class:`ProjectedBiLSTM`),
    ``bilm.transformer`` (a :class:`BiTransformer`) or ``bilm.gated_cnn`` (a :class:`BiGatedCNN`), by type.

    Args:
        options: the options dict (``options.json`` of bilm-tf / AllenNLP, see :mod:`elmo_keras.io.options`).
        stateful: bool, reproduce bilm-tf/AllenNLP's carried state: row i starts from the state row i reached
            in the previous call (up to ``max_batch_size`` rows); ``reset_state()`` returns to zeros. LSTM
            encoders only. Defaults to `False` (the same sentence always gives the same vectors).
        max_batch_size: int, rows of carried state when ``stateful``. Defaults to `128`.
        add_sentence_boundaries: bool, wrap each sentence in ``<S>``/``</S>`` (run through the encoder, then
            stripped), as the original does; `False` runs on the tokens alone (TF Hub's module, LM training on
            inputs that hold the boundary rows). Defaults to `True`.
        fast_inference: `"auto"`, `True` or `False`: `ProjectedBiLSTM`'s choice of the frozen-inference fast path
            (`"auto"`: when frozen; the same numbers). LSTM encoders only (the others have one path, and ignore
            it). Not saved in the config. Defaults to `"auto"`.
        **kwargs: base layer keyword arguments, such as `name`, `dtype` and `trainable` (the classmethods
            ``from_pretrained`` / ``from_hub`` / ``from_preset`` build it frozen).

    Call arguments:
        inputs: char ids int [B, T, max_characters_per_token] (padding tokens all zero, after the real ones;
            no ``<S>``/``</S>``); or a pair (token vectors float [B, T, P], mask bool [B, T]) that skips the
            char CNN (a token cache).
            Eager calls check the ids' range and the padding first (InputError naming row, token and id); in a
            graph the same checks are in-graph assertions.

    Returns:
        ``{"layers": [num_layers + 1 tensors float [B, T, 2P]], "mask": bool [B, T]}``: layer 0 is the
        token embedding twice, layer k the [forward_k ; backward_k] encoder outputs; masked positions are zero.

    Example:

    ```python
    import elmo_keras as ek

    bilm = ek.BiLM.from_preset("brown-small")          # or ek.BiLM.from_pretrained(options, weights)
    out = bilm(ek.batch_to_ids([["The", "bank", "."], ["Hi"]]))
    assert len(out["layers"]) == bilm.num_layers + 1 and out["layers"][0].shape == (2, 3, bilm.output_dim)
    assert out["mask"].numpy().sum() == 4
    ```
    """

    def __init__(
        self,
        options: dict,
        stateful: bool = False,
        max_batch_size: int = 128,
        add_sentence_boundaries: bool = True,
        fast_inference: str | bool = "auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.options = normalize_options(options)
        self.encoder_type, settings = encoder_options(self.options)
        if stateful and self.encoder_type != "lstm":
            raise InputError(
                f"stateful=True carries LSTM states from call to call; a {self.encoder_type} biLM has "
                "none: use stateful=False"
            )
        self.stateful = stateful
        self.add_sentence_boundaries = add_sentence_boundaries
        self.max_batch_size = max_batch_size
        cnn = self.options["char_cnn"]
        self.projection_dim = settings["projection_dim"]
        self.num_layers = settings["n_layers"]
        self.max_characters_per_token = cnn["max_characters_per_token"]
        self.char_cnn = CharCNN(
            cnn["filters"],
            char_embed_dim=cnn["embedding"]["dim"],
            num_characters=cnn["n_characters"],
            activation=cnn["activation"],
            num_highway_layers=cnn["n_highway"],
            projection_dim=self.projection_dim,
            max_characters_per_token=self.max_characters_per_token,
            name="char_cnn",
            dtype=self.dtype_policy,
        )
        # Tracked under its type's name, so an LSTM's weights stay at ".../lstm" in .keras files.
        encoder = _make_encoder(self.encoder_type, settings, fast_inference, dtype=self.dtype_policy)
        setattr(self, self.encoder_type, encoder)

    @property
    def encoder(self) -> keras.layers.Layer:
        """The contextualizer: ``lstm``, ``transformer`` or ``gated_cnn``, by the options' encoder type."""
        return getattr(self, self.encoder_type)

    def __dir__(self):
        # Keras saves a sublayer under the first attribute name (sorted) that reaches it; hidden from that walk,
        # the ``encoder`` alias cannot move the LSTM's weights away from ".../lstm" (files already written).
        return [name for name in super().__dir__() if name != "encoder"]

    # -- construction: one path (options + released-layout arrays), three sources ----------------------
    @classmethod
    def from_weights(
        cls,
        options: dict,
        arrays: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
        trainable: bool = False,
        **kwargs,
    ) -> "BiLM":
        """Build from an options dict and weight arrays in the released layout.

        Args:
            options: the options dict.
            arrays: {released dataset name: array}, or such pairs (e.g. streamed from a file by
                :func:`~elmo_keras.io.weights.iter_weights_hdf5`).
            trainable: bool, fine-tune the biLM. Defaults to `False`.
            **kwargs: arguments of ``BiLM``.

        Returns:
            A built ``BiLM`` holding the weights.
        """
        bilm = cls(options, trainable=trainable, **kwargs)
        with weights_loaded_next():  # no random initial values to overwrite (about 300 MB less at the peak)
            bilm.build()
        bilm.set_weight_arrays(arrays)
        return bilm

    @classmethod
    def from_pretrained(
        cls, options_file: dict | str | os.PathLike, weight_file: str | os.PathLike, trainable: bool = False, **kwargs
    ) -> "BiLM":
        """Build from an options.json (path or dict) and a released-layout hdf5 weight file.

        Args:
            options_file: the options, as a path, an http(s) URL or a dict.
            weight_file: the released-layout hdf5 weights, as a path or an http(s) URL.
            trainable: bool, fine-tune the biLM. Defaults to `False`.
            **kwargs: arguments of ``BiLM``.

        Returns:
            A built ``BiLM`` holding the weights.
        """
        return cls.from_model_weights(resolve(options_file, weight_file).read(), trainable=trainable, **kwargs)

    @classmethod
    def from_hub(
        cls,
        path: str | os.PathLike,
        boundaries: str | None = None,
        use_skip_connections: bool | None = None,
        trainable: bool = False,
        **kwargs,
    ) -> "BiLM":
        """Build from a local TF Hub ELMo module (TF1, or written by ``export_hub_module``).

        Args:
            path: the module's folder.
            boundaries: `"none"` (tokens alone, as TF Hub's module runs), `"add"` (``<S>``/``</S>``), or `None`:
                what the module records, else `"none"`. Defaults to `None`.
            use_skip_connections: see :func:`elmo_keras.io.hub_module.read_hub_module`. Defaults to `None`.
            trainable: bool, fine-tune the biLM. Defaults to `False`.
            **kwargs: arguments of ``BiLM``.

        Returns:
            A built ``BiLM`` holding the module's weights.
        """
        weights = resolve(path, hub=True).read(use_skip_connections)
        return cls.from_model_weights(weights, boundaries, trainable=trainable, **kwargs)

    @classmethod
    def from_preset(cls, name: str | os.PathLike, trainable: bool = False, **kwargs) -> "BiLM":
        """Build from a preset: shipped (e.g. ``"brown-small"``, see ``elmo_keras.presets``) or published, or a
        pretraining output folder; any source :func:`elmo_keras.io.load.resolve` takes.

        Args:
            name: the preset's name, or a folder (or a folder's URL) with options.json and weights.hdf5.
            trainable: bool, fine-tune the biLM. Defaults to `False`.
            **kwargs: arguments of ``BiLM``, such as ``stateful`` or ``dtype``.

        Returns:
            A built ``BiLM`` holding the weights.
        """
        return cls.from_model_weights(resolve(name).read(), trainable=trainable, **kwargs)

    @classmethod
    def from_model_weights(
        cls, weights: ModelWeights, boundaries: str | None = None, trainable: bool = False, **kwargs
    ) -> "BiLM":
        """Build from what the loader read (:meth:`elmo_keras.io.load.ModelFiles.read`); every ``from_*`` ends here.

        Args:
            weights: a :class:`~elmo_keras.io.load.ModelWeights`.
            boundaries: TF Hub modules only: see :meth:`from_hub`.
            trainable: bool, fine-tune the biLM. Defaults to `False`.
            **kwargs: passed to ``BiLM``.

        Returns:
            A built ``BiLM`` holding the weights.
        """
        return cls.from_weights(
            weights.options, weights.arrays, trainable=trainable, **weights.bilm_arguments(boundaries), **kwargs
        )

    def __call__(self, inputs, *args, **kwargs):
        check_concrete_inputs(inputs, self.options["char_cnn"]["n_characters"])  # eager calls: a clear InputError
        if keras.backend.backend() == "jax" and not (args or kwargs) and self.built and _concrete_jax(inputs):
            return self._jax_jit_call(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _jax_jit_call(self, inputs):
        """An eager call on JAX, through a cached ``jax.jit`` of :meth:`stateless_call`: op by op, JAX would compile
        each convolution and LSTM loop anew for every call. Char ids are padded with padding tokens to
        ``JAX_BUCKET`` tokens (and, stateless, rows) so that one compile serves many shapes; the padding is masked,
        then cut off (the same numbers). The carried state (stateful) goes back into the variables."""
        import jax

        function = self.__dict__.get("_jax_function")  # plain attribute: not tracked or saved by Keras
        if function is None:
            function = self.__dict__["_jax_function"] = jax.jit(self.stateless_call)
        batch, steps = ops.shape(inputs[1] if isinstance(inputs, (tuple, list)) else inputs)[:2]
        if not isinstance(inputs, (tuple, list)):  # stateful: no added rows (an empty row still reads <S> </S>)
            rows = batch if self.stateful else -(-batch // JAX_BUCKET) * JAX_BUCKET
            padding = [(0, rows - batch), (0, -(-max(steps, 1) // JAX_BUCKET) * JAX_BUCKET - steps), (0, 0)]
            inputs = np.pad(np.asarray(inputs), padding)
        trainable = [v.value for v in self.trainable_variables]
        outputs, non_trainable = function(trainable, [v.value for v in self.non_trainable_variables], inputs)
        for variable, value in zip(self.non_trainable_variables, non_trainable):
            variable.assign(value)
        return {
            "layers": [layer[:batch, :steps] for layer in outputs["layers"]],
            "mask": outputs["mask"][:batch, :steps],
        }

    def build(self, input_shape=None):
        self.char_cnn.build(None)
        self.encoder.build(None)
        if self.stateful:
            d, p, b = self.options["lstm"]["dim"], self.projection_dim, self.max_batch_size
            self.state_vars = [
                (
                    self.add_weight(name=f"state_c_{k}", shape=(2, b, d), initializer="zeros", trainable=False),
                    self.add_weight(name=f"state_h_{k}", shape=(2, b, p), initializer="zeros", trainable=False),
                )
                for k in range(self.num_layers)
            ]
        for layer in (self.char_cnn, self.encoder):  # made before `trainable` reached them: freeze (or not) them
            layer.trainable = self.trainable
        self.built = True

    # -- weights in the released layout (the name map is weights.variable_map) ---------------------------
    def get_weight_arrays(self) -> dict[str, np.ndarray]:
        """All weights in the released layout.

        Returns:
            {hdf5 dataset name: float32 array in the released shape}.
        """
        return get_weight_arrays(self)

    def set_weight_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Assign weights from arrays in the released layout.

        Args:
            arrays: {hdf5 dataset name: array}, shapes as in the released files.

        Example:

        ```python
        import numpy as np
        import elmo_keras as ek

        bilm = ek.BiLM.from_preset("brown-small")
        twin = ek.BiLM(bilm.options)
        twin.build()
        twin.set_weight_arrays(bilm.get_weight_arrays())
        ids = ek.batch_to_ids([["The", "bank", "."]])
        np.testing.assert_allclose(twin(ids)["layers"][2], bilm(ids)["layers"][2], atol=1e-5)
        ```
        """
        set_weight_arrays(self, arrays)

    # -- computation -------------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Deprecated spelling of :attr:`num_layers` (the options.json key is ``n_layers``)."""
        return self.num_layers

    def reset_states(self) -> None:
        """Deprecated spelling of :meth:`reset_state` (Keras 3's name)."""
        self.reset_state()

    def reset_state(self) -> None:
        """Stateful mode: forget the carried LSTM states (back to zeros)."""
        if not self.stateful:
            return
        for c, h in self.state_vars:
            c.assign(ops.zeros(c.shape, c.dtype))
            h.assign(ops.zeros(h.shape, h.dtype))

    def boundary_embeddings(self):
        """The char-CNN vectors of <S> and </S>: [2, P] (what :meth:`call` adds around each sentence)."""
        return self.char_cnn(ops.convert_to_tensor(boundary_char_ids(self.max_characters_per_token)))

    def call(self, inputs):
        return self._call(inputs)

    def _call(self, inputs, boundary_embeddings=None, step_weights=None, trim_padding: bool = False):
        """:meth:`call`, with what a caller that runs a frozen biLM many times computes once (``ElmoEmbedder``,
        which calls this on a built layer, inside its own ``tf.function``). All speed-only, the same numbers.

        ``boundary_embeddings``: optional [2, P] char-CNN vectors of <S> and </S> (:meth:`boundary_embeddings`);
        by default they are computed in every call. ``step_weights``: optional, a snapshot of the LSTM's weights
        in the transposed layout (``lstm_inference.transposed_step_weights``), run on the LSTM's fast path.
        ``trim_padding``: the char CNN's (:class:`CharCNN`), for char-id inputs: same results to float32
        rounding, fewer operations, shapes that depend on the data (not for XLA)."""
        if isinstance(inputs, (tuple, list)):  # (token vectors [B, T, P], mask [B, T]): e.g. from a token cache
            return self._contextualize(*inputs, boundary_embeddings=boundary_embeddings, step_weights=step_weights)
        char_ids = check_char_ids(inputs, self.max_characters_per_token, self.options["char_cnn"]["n_characters"])
        return self._contextualize(
            self.char_cnn(char_ids, trim_padding=trim_padding),
            ops.any(char_ids > 0, axis=-1),
            boundary_embeddings=boundary_embeddings,
            step_weights=step_weights,
        )

    def _contextualize(self, token_embeddings, mask, boundary_embeddings=None, step_weights=None):
        mask = ops.cast(mask, "bool")
        lengths = prefix_lengths(
            mask, "elmo_keras: padding tokens (all-zero char ids) must come after the real tokens of each row"
        )
        fmask = ops.cast(mask, self.compute_dtype)[..., None]
        tokens = ops.cast(token_embeddings, self.compute_dtype) * fmask  # [B, T, P]
        if self.add_sentence_boundaries:
            encoder_inputs, encoder_mask = self._add_boundaries(tokens, lengths, boundary_embeddings)
        else:
            encoder_inputs, encoder_mask = tokens, mask
        encoder_outputs = self._run_encoder(encoder_inputs, encoder_mask, step_weights)
        if self.add_sentence_boundaries:
            encoder_outputs = [out[:, 1:-1] for out in encoder_outputs]
        layers = [ops.concatenate([tokens, tokens], axis=-1)]
        layers += [out * fmask for out in encoder_outputs]
        return {"layers": layers, "mask": mask}

    def _add_boundaries(self, tokens, lengths, boundary_embeddings=None):
        """[B, T, P] -> [B, T + 2, P] with <S> at position 0 and </S> right after each row's last token."""
        batch, steps, p = ops.shape(tokens)[0], ops.shape(tokens)[1], self.projection_dim
        if boundary_embeddings is None:
            boundary_embeddings = self.boundary_embeddings()
        bos, eos = ops.unstack(ops.cast(boundary_embeddings, tokens.dtype), 2)
        with_bounds = ops.concatenate(
            [ops.broadcast_to(bos, (batch, 1, p)), tokens, ops.zeros((batch, 1, p), tokens.dtype)], axis=1
        )
        positions = ops.arange(steps + 2)[None, :]
        is_eos = ops.equal(positions, (lengths + 1)[:, None])[..., None]
        with_bounds = ops.where(is_eos, ops.broadcast_to(eos, ops.shape(with_bounds)), with_bounds)
        return with_bounds, positions < (lengths + 2)[:, None]

    def _run_encoder(self, inputs, mask, step_weights=None):
        """Run the encoder stacks; LSTMs from (and, when stateful, into) the carried state."""
        if self.encoder_type != "lstm":
            return self.encoder(inputs, mask)
        # a transposed snapshot goes by the LSTM's inference path (see `_call`)
        lstm = self.lstm if step_weights is None else functools.partial(self.lstm._call, step_weights=step_weights)
        if not self.stateful:
            return lstm(inputs, mask, return_final_state=False)[0]
        batch = ops.shape(inputs)[0]
        too_many = f"elmo_keras: stateful BiLM got more rows than max_batch_size={self.max_batch_size}"
        if ON_TENSORFLOW:
            tf.debugging.assert_less_equal(batch, self.max_batch_size, message=too_many)
        elif batch > self.max_batch_size:  # JAX, PyTorch: the batch size is known when the call runs
            raise InputError(f"{too_many}: build the BiLM with a larger max_batch_size, or send smaller batches")
        initial_state = [(c[:, :batch], h[:, :batch]) for c, h in self.state_vars]
        outputs, final_state = lstm(inputs, mask, initial_state=initial_state)
        for (c_var, h_var), (c, h) in zip(self.state_vars, final_state):
            c_var.assign(ops.concatenate([ops.cast(c, c_var.dtype), c_var[:, batch:]], axis=1))
            h_var.assign(ops.concatenate([ops.cast(h, h_var.dtype), h_var[:, batch:]], axis=1))
        return outputs

    def compute_output_spec(self, inputs):
        shape = inputs[1].shape if isinstance(inputs, (tuple, list)) else inputs.shape
        batch, steps = shape[0], shape[1]
        dim = 2 * self.projection_dim
        return {
            "layers": [
                keras.KerasTensor((batch, steps, dim), dtype=self.compute_dtype) for _ in range(self.num_layers + 1)
            ],
            "mask": keras.KerasTensor((batch, steps), dtype="bool"),
        }

    @property
    def output_dim(self) -> int:
        return 2 * self.projection_dim

    def get_config(self):
        return {
            **super().get_config(),
            "options": self.options,
            "stateful": self.stateful,
            "max_batch_size": self.max_batch_size,
            "add_sentence_boundaries": self.add_sentence_boundaries,
        }


def check_concrete_inputs(inputs, n_characters: int) -> None:
    """Eagerly, on concrete values: raise InputError, naming the row and token, for what the in-graph assertions of
    :meth:`BiLM.call` would reject: char ids outside ``[0, n_characters)``, or padding before a real token.

    Inside a graph (tf.function, ``model.fit``, a JAX trace) or on symbolic inputs it does nothing: the
    TensorFlow graph keeps its assertions and pays nothing for this check (on JAX and PyTorch only eager calls
    are checked: there are no in-graph assertions).

    Args:
        inputs: padded tokens string [B, T] ("" = padding), char ids int [B, T, C], or a (token vectors, mask
            bool [B, T]) pair, as NumPy arrays or eager tensors; other inputs (sentences [B], other dtypes or
            ranks) are left to the layer's own errors.
        n_characters: int, the char vocabulary size: ids must be in ``[0, n_characters)``.
    """
    pair = isinstance(inputs, (tuple, list)) and len(inputs) == 2
    values = concrete_array(inputs[1] if pair else inputs)
    if values is None:
        return
    if pair and values.ndim == 2:
        mask, padding_is = values.astype(bool), "mask False"
    elif not pair and values.dtype.kind in "OS" and values.ndim == 2:  # text as a tensor holds bytes
        mask, padding_is = values != b"", 'the empty string ""'
    elif not pair and values.dtype.kind in "iu" and values.ndim == 3:
        bad = np.argwhere((values < 0) | (values >= n_characters))
        if len(bad):
            row, token, slot = bad[0]
            raise InputError(
                f"char ids must be in [0, {n_characters}) (0 = padding token): row {row}, token {token} "
                f"has id {values[row, token, slot]} at character {slot}; make char ids with "
                "elmo_keras.batch_to_ids(token_lists), or pass text"
            )
        mask, padding_is = values.any(axis=-1), "all-zero char ids"
    else:
        return
    gaps = np.argwhere(mask[:, 1:] & ~mask[:, :-1])
    if len(gaps):
        row, token = gaps[0][0], gaps[0][1] + 1
        padding = int(np.argmin(mask[row]))
        raise InputError(
            f"row {row}: token {token} is a real token after padding ({padding_is}) at token {padding}; "
            "padding must come after the real tokens of each row: drop empty tokens, or pad at the "
            "end (elmo_keras.tasks.models.pad_tokens does)"
        )


def _concrete_jax(inputs) -> bool:
    """Whether every array in ``inputs`` (char ids, or a (vectors, mask) pair) is concrete, not a JAX tracer."""
    return all(concrete_array(x) is not None for x in (inputs if isinstance(inputs, (tuple, list)) else [inputs]))


def concrete_array(values) -> np.ndarray | None:
    """``values`` as a NumPy array when they are concrete (a NumPy array, or an eager tensor of the active Keras
    backend), else None (symbolic, traced, inside a tf.function, or not an array).

    Args:
        values: anything.

    Returns:
        A NumPy array, or `None`.

    Example:

    ```python
    import keras
    import numpy as np
    from elmo_keras.layers.bilm import concrete_array

    assert concrete_array(keras.ops.ones((2,))).tolist() == [1.0, 1.0]
    assert concrete_array(keras.KerasTensor((2,))) is None and concrete_array([1]) is None
    ```
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        if not tf.executing_eagerly() or not isinstance(values, (np.ndarray, tf.Tensor)):
            return None
    elif backend == "jax":
        import jax

        if not isinstance(values, (np.ndarray, jax.Array)) or isinstance(values, jax.core.Tracer):
            return None
    elif backend == "torch":
        import torch

        if isinstance(values, torch.Tensor):
            return None if values.device.type == "meta" else values.detach().cpu().numpy()
        if not isinstance(values, np.ndarray):
            return None
    elif not isinstance(values, np.ndarray):
        return None
    return np.asarray(values)


def _make_encoder(kind: str, settings: dict, fast_inference: str | bool, **kwargs) -> keras.layers.Layer:
    """The encoder layer of type ``kind`` from its normalised settings (see :mod:`elmo_keras.io.options`);
    ``fast_inference``: the LSTM's."""
    p, n = settings["projection_dim"], settings["n_layers"]
    if kind == "transformer":
        return BiTransformer(
            n,
            p,
            num_heads=settings["num_heads"],
            ff_dim=settings["ff_dim"],
            dropout=settings["dropout"],
            activation=settings["activation"],
            name=kind,
            **kwargs,
        )
    if kind == "gated_cnn":
        return BiGatedCNN(
            n,
            p,
            kernel_size=settings["kernel_size"],
            layer_norm=settings["layer_norm"],
            dropout=settings["dropout"],
            name=kind,
            **kwargs,
        )
    return ProjectedBiLSTM(
        n,
        settings["dim"],
        p,
        cell_clip=settings["cell_clip"],
        proj_clip=settings["proj_clip"],
        use_skip_connections=settings["use_skip_connections"],
        fast_inference=fast_inference,
        name=kind,
        **kwargs,
    )
