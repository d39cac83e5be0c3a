"""Masked pooling over time: [B, T, D] (+ mask [B, T]) -> [B, len(modes) * D]."""
from __future__ import annotations

import keras
from keras import ops

_MODES = ("max", "mean")


@keras.saving.register_keras_serializable(package="elmo_keras")
class MaskedPooling(keras.layers.Layer):
    """Max and/or mean over the unmasked steps; an all-masked row pools to zeros."""

    def __init__(self, modes=("max", "mean"), **kwargs):
        super().__init__(**kwargs)
        modes = tuple(modes)
        if not modes or any(m not in _MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {_MODES}, got {modes}")
        self.modes = modes
        self.supports_masking = True

    def call(self, x, mask=None):
        if mask is None:
            mask = ops.ones(ops.shape(x)[:2], dtype="bool")
        m = ops.cast(mask, x.dtype)[..., None]
        count = ops.sum(m, axis=1)  # [B, 1]
        pooled = []
        for mode in self.modes:
            if mode == "max":
                hidden = ops.full_like(x, float("-inf"))
                best = ops.max(ops.where(ops.cast(m, "bool"), x, hidden), axis=1, initial=float("-inf"))
                pooled.append(ops.where(count > 0, best, ops.zeros_like(best)))
            else:
                pooled.append(ops.sum(x * m, axis=1) / ops.maximum(count, 1.0))
        return ops.concatenate(pooled, axis=-1)

    def compute_mask(self, x, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], len(self.modes) * input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "modes": list(self.modes)}
