"""Ways to combine the biLM layers into one sequence, selectable by name (see ``make_layer_mixer``)."""
from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from elmo_keras.layers.scalar_mix import ScalarMix

MIX_MODES = ("trainable", "fixed", "mlp", "top", "average", "concat")


def _first_mask(mask):
    return mask[0] if isinstance(mask, (list, tuple)) else mask


@keras.saving.register_keras_serializable(package="elmo_keras")
class UnstackLayers(keras.layers.Layer):
    """(layers float [B, T, L, D], mask bool [B, T]) -> L tensors [B, T, D], each carrying the Keras mask.

    Feeds precomputed biLM layers (e.g. from ``ElmoEmbedder``) to any layer mixer.
    """

    def call(self, inputs):
        stacked, mask = inputs
        mask = ops.cast(mask, "bool")
        outputs = [stacked[:, :, i] for i in range(stacked.shape[2])]
        for output in outputs:
            output._keras_mask = mask
        return outputs

    def compute_mask(self, inputs, mask=None):
        return None  # attached to the outputs in call()

    def compute_output_spec(self, inputs):
        stacked = inputs[0]
        if stacked.shape[2] is None:
            raise ValueError("the number of layers (axis 2 of the input) must be known")
        return [keras.KerasTensor((stacked.shape[0], stacked.shape[1], stacked.shape[3]), dtype=stacked.dtype)
                for _ in range(stacked.shape[2])]


@keras.saving.register_keras_serializable(package="elmo_keras")
class LayerConcat(keras.layers.Layer):
    """Concatenate the layers along features: n x [..., D] -> [..., n * D]. The mask passes through."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, tensors, mask=None):
        return ops.concatenate(list(tensors), axis=-1)

    def compute_mask(self, tensors, mask=None):
        return _first_mask(mask)

    def compute_output_shape(self, input_shape):
        return (*input_shape[0][:-1], sum(s[-1] for s in input_shape))


@keras.saving.register_keras_serializable(package="elmo_keras")
class LayerFusion(keras.layers.Layer):
    """MLP fusion: concatenate the layers -> Dense(hidden, relu) -> Dense(hidden). [..., n*D] -> [..., hidden]."""

    def __init__(self, hidden: int = 256, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.concat = LayerConcat()
        self.dense1 = keras.layers.Dense(hidden, activation="relu", name="fusion_hidden")
        self.dense2 = keras.layers.Dense(hidden, name="fusion_out")
        self.supports_masking = True

    def build(self, input_shape):
        width = sum(s[-1] for s in input_shape)
        self.dense1.build((None, width))
        self.dense2.build((None, self.hidden))

    def call(self, tensors, mask=None):
        return self.dense2(self.dense1(self.concat(tensors)))

    def compute_mask(self, tensors, mask=None):
        return _first_mask(mask)

    def compute_output_shape(self, input_shape):
        return (*input_shape[0][:-1], self.hidden)

    def get_config(self):
        return {**super().get_config(), "hidden": self.hidden}


def make_layer_mixer(mix: str, num_layers: int, mix_weights: Sequence[float] | None = None, hidden: int = 256,
                     name: str = "layer_mix") -> keras.layers.Layer:
    """A layer that turns ``num_layers`` tensors [B, T, D] (with mask) into one [B, T, D'] (with mask).

    mix: "trainable" (softmax weights + gamma, ScalarMix), "fixed" (``mix_weights`` as given), "mlp"
    (:class:`LayerFusion` with ``hidden`` units), "top" (the last layer), "average" (equal fixed weights),
    "concat" (all layers side by side).
    """
    if mix not in MIX_MODES:
        raise ValueError(f"mix must be one of {MIX_MODES}, got {mix!r}")
    if mix_weights is not None and mix != "fixed":
        raise ValueError(f"mix_weights are only used with mix='fixed', got mix={mix!r}")
    if mix == "trainable":
        return ScalarMix(num_layers, name=name)
    if mix == "fixed":
        if mix_weights is None:
            raise ValueError("mix='fixed' needs mix_weights, e.g. mix_weights=[0.45, 0.15, 0.40]")
        if len(mix_weights) != num_layers:
            raise ValueError(f"mix_weights has {len(mix_weights)} values for {num_layers} layers")
        return ScalarMix(num_layers, fixed_weights=mix_weights, trainable_gamma=False, name=name)
    if mix == "average":
        return ScalarMix(num_layers, fixed_weights=[1.0 / num_layers] * num_layers, trainable_gamma=False,
                         name=name)
    if mix == "top":
        return ScalarMix(num_layers, fixed_weights=[0.0] * (num_layers - 1) + [1.0], trainable_gamma=False,
                         name=name)
    if mix == "mlp":
        return LayerFusion(hidden, name=name)
    return LayerConcat(name=name)
