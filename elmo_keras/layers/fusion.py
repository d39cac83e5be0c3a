"""Ways to combine the biLM layers into one sequence, selectable by name (see ``make_layer_mixer``)."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.saving import serializable

MIX_MODES = ("trainable", "fixed", "mlp", "top", "average", "concat")


def _first_mask(mask):
    return mask[0] if isinstance(mask, (list, tuple)) else mask


@serializable
class UnstackLayers(keras.layers.Layer):
    """Split stacked biLM layers into a list of masked sequences, the input every layer mixer takes.

    Feeds precomputed biLM layers (e.g. from `ElmoEmbedder`, batched by `elmo_keras.tasks.features.features_dataset`)
    to a `ScalarMix`, `LayerFusion` or `LayerConcat`.

    Args:
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: pair `(layers, mask)`: float tensor `[batch, timesteps, num_layers, dim]` (`num_layers` known)
            and bool tensor `[batch, timesteps]`.

    Returns:
        A list of `num_layers` float tensors `[batch, timesteps, dim]`, each carrying `mask` as its Keras mask.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    stacked = np.ones((2, 3, 4, 5), "float32")
    mask = np.array([[True, True, False], [True, False, False]])
    layers = ek.layers.UnstackLayers()([stacked, mask])
    assert len(layers) == 4 and layers[0].shape == (2, 3, 5)
    np.testing.assert_array_equal(layers[0]._keras_mask, mask)
    ```
    """

    def call(self, inputs):
        return ops.unstack(inputs[0], axis=2)

    def compute_mask(self, inputs, mask=None):
        stacked, token_mask = inputs
        if keras.backend.is_keras_tensor(token_mask):
            return None  # as for every elmo_keras embedder: the functional model computes it when it runs
        return [ops.cast(token_mask, "bool")] * stacked.shape[2]

    def compute_output_shape(self, input_shape):
        batch, steps, num_layers, dim = input_shape[0]
        if num_layers is None:
            raise ValueError("the number of layers (axis 2 of the input) must be known")
        return [(batch, steps, dim)] * num_layers


@serializable
class StackLayers(keras.layers.Layer):
    """Stack masked biLM layers into one tensor plus the token mask (the inverse of `UnstackLayers`).

    The stored form of an embedder's layers: what `elmo_keras.tasks.features` precomputes and what a
    `features_classifier` (or the head of a `text_classifier`) reads.

    Args:
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: list of `num_layers` float tensors `[batch, timesteps, dim]`.
        mask: their Keras masks (the first is used); all-True when absent.

    Returns:
        A dict: `"layers"` float `[batch, timesteps, num_layers, dim]` and `"mask"` bool `[batch, timesteps]`.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    layers = [np.full((2, 3, 4), k, "float32") for k in range(3)]
    mask = np.array([[True, True, False], [True, False, False]])
    out = ek.layers.StackLayers()(layers, mask=[mask] * 3)
    assert out["layers"].shape == (2, 3, 3, 4)
    np.testing.assert_array_equal(out["mask"], mask)
    ```
    """

    def call(self, inputs, mask=None):
        first = _first_mask(mask)
        if first is None:
            first = ops.ones(ops.shape(inputs[0])[:2], dtype="bool")
        return {"layers": ops.stack(inputs, axis=2), "mask": ops.cast(first, "bool")}

    def compute_mask(self, inputs, mask=None):
        return None  # the mask is an output

    def compute_output_spec(self, inputs, mask=None):
        batch, steps, dim = inputs[0].shape
        return {
            "layers": keras.KerasTensor((batch, steps, len(inputs), dim), dtype=inputs[0].dtype),
            "mask": keras.KerasTensor((batch, steps), dtype="bool"),
        }


@serializable
class LayerConcat(keras.layers.Layer):
    """Concatenate layers along the features axis (the `"concat"` mix mode).

    Takes only the base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: list of float tensors `[..., dim_k]` (the same leading shape).
        mask: Keras mask(s) of the inputs; the first one passes through.

    Returns:
        A float tensor `[..., sum_k dim_k]`, carrying the input mask.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    joined = ek.LayerConcat()([np.zeros((2, 3, 4), "float32"), np.ones((2, 3, 5), "float32")])
    assert joined.shape == (2, 3, 9)
    ```
    """

    def call(self, inputs, mask=None):
        return ops.concatenate(list(inputs), axis=-1)

    def compute_mask(self, inputs, mask=None):
        return _first_mask(mask)

    def compute_output_shape(self, input_shape):
        return (*input_shape[0][:-1], sum(s[-1] for s in input_shape))


@serializable
class LayerFusion(keras.layers.Layer):
    """MLP fusion of layers (the `"mlp"` mix mode): concatenate, `Dense(hidden, relu)`, `Dense(hidden)`.

    Args:
        hidden: int, units of both dense layers. Defaults to `256`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: list of float tensors `[..., dim_k]` (the same leading shape).
        mask: Keras mask(s) of the inputs; the first one passes through.

    Returns:
        A float tensor `[..., hidden]`, carrying the input mask.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    fused = ek.LayerFusion(hidden=8)([np.ones((2, 3, 4), "float32")] * 3)
    assert fused.shape == (2, 3, 8)
    ```
    """

    def __init__(self, hidden: int = 256, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.concat = LayerConcat(dtype=self.dtype_policy)
        self.dense1 = keras.layers.Dense(hidden, activation="relu", name="fusion_hidden", dtype=self.dtype_policy)
        self.dense2 = keras.layers.Dense(hidden, name="fusion_out", dtype=self.dtype_policy)

    def build(self, input_shape):
        width = sum(s[-1] for s in input_shape)
        self.dense1.build((None, width))
        self.dense2.build((None, self.hidden))

    def call(self, inputs, mask=None):
        return self.dense2(self.dense1(self.concat(inputs)))

    def compute_mask(self, inputs, mask=None):
        return _first_mask(mask)

    def compute_output_shape(self, input_shape):
        return (*input_shape[0][:-1], self.hidden)

    def get_config(self):
        return {**super().get_config(), "hidden": self.hidden}


def make_layer_mixer(
    mix: str, num_layers: int, mix_weights: Sequence[float] | None = None, hidden: int = 256, name: str = "layer_mix"
) -> keras.layers.Layer:
    """A layer that turns ``num_layers`` tensors [B, T, D] (with mask) into one [B, T, D'] (with mask).

    Args:
        mix: ``"trainable"`` (softmax weights + gamma, ScalarMix), ``"fixed"`` (``mix_weights`` as given),
            ``"mlp"`` (:class:`LayerFusion` with ``hidden`` units), ``"top"`` (the last layer), ``"average"``
            (equal fixed weights), ``"concat"`` (all layers side by side).
        num_layers: the number of layers to mix.
        mix_weights: ``num_layers`` weights for ``mix="fixed"``, else ``None``.
        hidden: units of the ``"mlp"`` fusion.
        name: the layer's name.

    Returns:
        A Keras layer taking a list of ``num_layers`` tensors.

    Example:

    ```python
    import numpy as np
    from elmo_keras.layers.fusion import make_layer_mixer

    mixer = make_layer_mixer("average", num_layers=3)
    mixed = mixer([np.ones((2, 4, 8), "float32")] * 3)
    assert mixed.shape == (2, 4, 8)
    ```
    """
    if mix not in MIX_MODES:
        raise ValueError(f"mix must be one of {MIX_MODES}, got {mix!r}")
    if mix_weights is not None and mix != "fixed":
        raise ValueError(f"mix_weights are only used with mix='fixed', got mix={mix!r}")
    if mix == "trainable":
        return ScalarMix(num_layers, name=name)
    if mix == "mlp":
        return LayerFusion(hidden, name=name)
    if mix == "concat":
        return LayerConcat(name=name)
    if mix == "fixed" and mix_weights is None:
        raise ValueError("mix='fixed' needs mix_weights, e.g. mix_weights=[0.45, 0.15, 0.40]")
    if mix == "fixed" and len(mix_weights) != num_layers:
        raise ValueError(f"mix_weights has {len(mix_weights)} values for {num_layers} layers")
    fixed = {"fixed": mix_weights, "average": [1.0 / num_layers] * num_layers, "top": [0.0] * (num_layers - 1) + [1.0]}[
        mix
    ]
    return ScalarMix(num_layers, mix_weights=fixed, trainable_gamma=False, name=name)
