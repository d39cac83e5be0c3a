"""Masked pooling over time: [B, T, D] (+ mask [B, T]) -> [B, len(modes) * D]."""
from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

_MODES = ("max", "mean")


@keras.saving.register_keras_serializable(package="elmo_keras")
class MaskedPooling(keras.layers.Layer):
    """Max and/or mean over the unmasked time steps; an all-masked row pools to zeros.

    Args:
        modes: non-empty sequence of `"max"` and `"mean"`; their results are concatenated in this order.
            Defaults to `("max", "mean")`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[batch, timesteps, dim]`.
        mask: bool tensor `[batch, timesteps]`; taken from the input's Keras mask when not given, all steps
            when there is none.

    Returns:
        A float tensor `[batch, len(modes) * dim]` (no mask).

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    x = np.array([[[1.0], [3.0], [100.0]]], "float32")
    pooled = ek.MaskedPooling(("max", "mean"))(x, mask=np.array([[True, True, False]]))
    np.testing.assert_allclose(pooled, [[3.0, 2.0]])
    ```
    """

    def __init__(self, modes: Sequence[str] = ("max", "mean"), **kwargs):
        super().__init__(**kwargs)
        modes = tuple(modes)
        if not modes or any(m not in _MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {_MODES}, got {modes}")
        self.modes = modes

    def call(self, inputs, mask=None):
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], dtype="bool")
        m = ops.cast(mask, inputs.dtype)[..., None]
        count = ops.sum(m, axis=1)  # [B, 1]
        pooled = []
        for mode in self.modes:
            if mode == "max":
                hidden = ops.full_like(inputs, float("-inf"))
                best = ops.max(ops.where(ops.cast(m, "bool"), inputs, hidden), axis=1, initial=float("-inf"))
                pooled.append(ops.where(count > 0, best, ops.zeros_like(best)))
            else:
                pooled.append(ops.sum(inputs * m, axis=1) / ops.maximum(count, 1.0))
        return ops.concatenate(pooled, axis=-1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], len(self.modes) * input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "modes": list(self.modes)}
