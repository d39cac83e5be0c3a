"""Keras callbacks."""
from __future__ import annotations

import keras
import numpy as np
from keras import ops

from elmo_keras.layers.scalar_mix import ScalarMix


def _scalar_mixes(model: keras.Model) -> list[ScalarMix]:
    # Keras has no public recursive layer walk; _flatten_layers is what Model.summary and saving use.
    return [layer for layer in model._flatten_layers(include_self=False) if isinstance(layer, ScalarMix)]


class LayerWeightsHistory(keras.callbacks.Callback):
    """Records every ScalarMix's normalised weights (and raw logits, gamma) before training and per epoch.

    ``history[name]`` is a list of float lists (epoch 0 = before training), ``raw[name]`` the logits,
    ``gamma[name]`` the scale.
    """

    def __init__(self):
        super().__init__()
        self.history: dict[str, list[list[float]]] = {}
        self.raw: dict[str, list[list[float]]] = {}
        self.gamma: dict[str, list[float]] = {}

    def _record(self):
        for mix in _scalar_mixes(self.model):
            self.history.setdefault(mix.name, []).append(
                np.asarray(ops.convert_to_numpy(mix.normalized_weights()), dtype=float).tolist())
            if mix.fixed_weights is None:
                self.raw.setdefault(mix.name, []).append(ops.convert_to_numpy(mix.logits).astype(float).tolist())
            self.gamma.setdefault(mix.name, []).append(float(ops.convert_to_numpy(mix.gamma)[0]))

    def on_train_begin(self, logs=None):
        if not self.history:
            self._record()

    def on_epoch_end(self, epoch, logs=None):
        self._record()
