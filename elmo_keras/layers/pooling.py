"""Masked pooling over time: [B, T, D] (+ mask [B, T]) -> [B, len(modes) * D]."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from elmo_keras.saving import serializable

_MODES = ("max", "mean")


@serializable
class MaskedPooling(keras.layers.Layer):
    """Max and/or mean over the unmasked time steps; a row with no unmasked step pools to zeros.

    (Keras' ``GlobalAveragePooling1D`` gives NaN for such a row, e.g. an empty text under ``Elmo``.)

    Args:
        modes: non-empty sequence of `"max"` and `"mean"`; their results are concatenated in this order.
            Defaults to `("max", "mean")`.
        return_empty_flag: bool, also return which rows had no unmasked step (their pooled zeros stand for
            "no tokens", not for vectors that happen to be zero). Defaults to `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[batch, timesteps, dim]`.
        mask: bool tensor `[batch, timesteps]`; taken from the input's Keras mask when not given, all steps
            when there is none.

    Returns:
        A float tensor `[batch, len(modes) * dim]` (no mask); with ``return_empty_flag``, the pair
        `(pooled, empty)`, `empty` a bool tensor `[batch]`, True for the rows that pooled to zeros for want of
        unmasked steps.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    x = np.array([[[1.0], [3.0], [100.0]], [[5.0], [6.0], [7.0]]], "float32")
    mask = np.array([[True, True, False], [False, False, False]])
    pooled = ek.MaskedPooling(("max", "mean"))(x, mask=mask)
    np.testing.assert_allclose(pooled, [[3.0, 2.0], [0.0, 0.0]])
    pooled, empty = ek.MaskedPooling(return_empty_flag=True)(x, mask=mask)
    assert np.asarray(empty).tolist() == [False, True]
    ```
    """

    def __init__(self, modes: Sequence[str] = ("max", "mean"), return_empty_flag: bool = False, **kwargs):
        super().__init__(**kwargs)
        modes = tuple(modes)
        if not modes or any(m not in _MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {_MODES}, got {modes}")
        self.modes = modes
        self.return_empty_flag = return_empty_flag

    def call(self, inputs, mask=None):
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], dtype="bool")
        m = ops.cast(mask, "bool")[..., None]
        count = ops.sum(ops.cast(m, inputs.dtype), axis=1)  # [B, 1]
        pooled = []
        for mode in self.modes:
            if mode == "max":
                best = ops.max(ops.where(m, inputs, float("-inf")), axis=1, initial=float("-inf"))
                pooled.append(ops.where(count > 0, best, ops.zeros_like(best)))
            else:  # masked steps are left out, not multiplied by 0 (which keeps a NaN or inf there)
                pooled.append(ops.sum(ops.where(m, inputs, 0.0), axis=1) / ops.maximum(count, 1.0))
        pooled = ops.concatenate(pooled, axis=-1)
        return (pooled, ops.equal(count[:, 0], 0)) if self.return_empty_flag else pooled

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        pooled = (input_shape[0], len(self.modes) * input_shape[-1])
        return (pooled, (input_shape[0],)) if self.return_empty_flag else pooled

    def compute_output_spec(self, inputs, mask=None):
        shapes = self.compute_output_shape(inputs.shape)
        if not self.return_empty_flag:
            return keras.KerasTensor(shapes, dtype=self.compute_dtype)
        return keras.KerasTensor(shapes[0], dtype=self.compute_dtype), keras.KerasTensor(shapes[1], dtype="bool")

    def get_config(self):
        return {**super().get_config(), "modes": list(self.modes), "return_empty_flag": self.return_empty_flag}
