"""Keras callbacks: LayerWeightsHistory (ScalarMix weights per epoch), Throughput (tokens/s in the epoch logs)."""

from __future__ import annotations

import time

import keras
import numpy as np
from keras import ops

from elmo_keras.layers.scalar_mix import ScalarMix


def _scalar_mixes(model: keras.Model) -> list[ScalarMix]:
    """Every ScalarMix in ``model``, at any depth (e.g. the ``mixes`` inside an ``Elmo`` layer)."""
    # Private API on purpose: Keras 3 has no public recursive walk over sublayers (``Model.layers`` is one level
    # deep and layers have no public list of their sublayers). ``_flatten_layers`` is what Keras itself uses for
    # ``Layer.losses`` and saving.
    return [layer for layer in model._flatten_layers(include_self=False) if isinstance(layer, ScalarMix)]


class LayerWeightsHistory(keras.callbacks.Callback):
    """Records every ScalarMix's normalised weights (and raw logits, gamma) before training and per epoch.

    ``history[name]`` is a list of float lists (epoch 0 = before training), ``raw[name]`` the logits (trainable
    mixes only), ``gamma[name]`` the scale.
    """

    def __init__(self):
        super().__init__()
        self.history: dict[str, list[list[float]]] = {}
        self.raw: dict[str, list[list[float]]] = {}
        self.gamma: dict[str, list[float]] = {}

    def _record_mix_weights(self) -> None:
        for mix in _scalar_mixes(self.model):
            self.history.setdefault(mix.name, []).append(
                np.asarray(ops.convert_to_numpy(mix.normalized_weights()), dtype=float).tolist()
            )
            if mix.mix_weights is None:
                self.raw.setdefault(mix.name, []).append(ops.convert_to_numpy(mix.logits).astype(float).tolist())
            self.gamma.setdefault(mix.name, []).append(float(ops.convert_to_numpy(mix.gamma)[0]))

    def on_train_begin(self, logs=None):
        if not self.history:
            self._record_mix_weights()

    def on_epoch_end(self, epoch, logs=None):
        self._record_mix_weights()


class Throughput(keras.callbacks.Callback):
    """Adds ``tokens_per_second`` (predicted tokens per direction / training seconds) to the epoch logs."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start, self.last, self.tokens = time.perf_counter(), None, 0.0

    def on_train_batch_end(self, batch, logs=None):
        self.last, self.tokens = time.perf_counter(), float((logs or {}).get("tokens", 0.0))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        seconds = (self.last or time.perf_counter()) - self.start
        logs["tokens_per_second"] = self.tokens / max(seconds, 1e-9)
