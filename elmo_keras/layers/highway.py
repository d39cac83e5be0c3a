"""Highway layers as in bilm-tf: y = g * relu(x W_t + b_t) + (1 - g) * x, g = sigmoid(x W_c + b_c)."""

from __future__ import annotations

import keras
from keras import ops

from elmo_keras.layers.initializers import initializer
from elmo_keras.saving import serializable


@serializable
class Highway(keras.layers.Layer):
    """Highway layers over the last axis, as in the bilm-tf character encoder.

    Each layer computes ``g = sigmoid(x W_carry + b_carry)`` and
    ``y = g * relu(x W_transform + b_transform) + (1 - g) * x``.

    Args:
        num_layers: int, how many highway layers are stacked. Defaults to `1`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[..., dim]`; `dim` must be known.

    Returns:
        A float tensor of the input shape `[..., dim]`. A Keras mask on the input passes through.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    highway = ek.Highway(num_layers=2)
    outputs = highway(np.ones((2, 3, 8), "float32"))
    assert outputs.shape == (2, 3, 8)
    ```
    """

    def __init__(self, num_layers: int = 1, **kwargs):
        super().__init__(**kwargs)
        if num_layers < 0:
            raise ValueError(f"num_layers must be >= 0, got {num_layers}")
        self.num_layers = num_layers
        self.supports_masking = True

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None:
            raise ValueError("Highway needs a known last dimension")
        self.carry_kernels, self.carry_biases, self.transform_kernels, self.transform_biases = [], [], [], []
        for k in range(self.num_layers):
            for part, kernels, biases in (
                ("carry", self.carry_kernels, self.carry_biases),
                ("transform", self.transform_kernels, self.transform_biases),
            ):
                kernels.append(
                    self.add_weight(name=f"W_{part}_{k}", shape=(dim, dim), initializer=initializer("glorot_uniform"))
                )
                biases.append(self.add_weight(name=f"b_{part}_{k}", shape=(dim,), initializer="zeros"))

    def call(self, inputs):
        x = inputs
        for w_c, b_c, w_t, b_t in zip(
            self.carry_kernels, self.carry_biases, self.transform_kernels, self.transform_biases
        ):
            gate = ops.sigmoid(ops.matmul(x, w_c) + b_c)
            x = gate * ops.relu(ops.matmul(x, w_t) + b_t) + (1.0 - gate) * x
        return x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers}
