"""Encode documents of any length in segments of at most ``max_tokens`` tokens, then pool the segments."""

from __future__ import annotations

import keras
import tensorflow as tf

from elmo_keras.saving import serializable
from elmo_keras.text import split_sentences


@serializable
class SegmentedEncoder(keras.layers.Layer):
    """Encode documents of any length in segments of at most `max_tokens` tokens, then pool the segments.

    The texts are split on whitespace into tokens `[batch, T]`. Without `max_tokens` the encoder sees whole
    rows. With it, each row is cut into `S = ceil(T / L)` segments of `L = min(T, max_tokens)` tokens and the
    encoder runs on one segment position at a time (`tf.map_fn`), so inference memory is that of a batch of
    `L`-token rows whatever the document length; the document vector is the max of the segment maxima and the
    token-weighted mean of the segment means. No token is dropped.

    Args:
        encoder: a Keras model from padded tokens, string `[N, L]` (`""` = padding), to `[max ; mean]` of its
            per-token states, float `[N, 2H]` (as `MaskedPooling(("max", "mean"))` gives).
        max_tokens: int, the longest segment; `None` encodes whole rows. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: string tensor `[batch]` of texts.
        training: bool, passed to the encoder. Defaults to `False`.

    Returns:
        A float tensor `[batch, 2H]` of document vectors, in the encoder's output dtype.

    Example:

    ```python
    import keras
    import numpy as np
    import tensorflow as tf
    import elmo_keras as ek
    from elmo_keras.layers import StaticEmbedding

    tokens = keras.Input(shape=(None,), dtype="string")
    vectors = StaticEmbedding(["a", "b", "c"], np.eye(3, dtype="float32"))(tokens)
    encoder = keras.Model(tokens, ek.MaskedPooling(("max", "mean"))(vectors))
    documents = ek.SegmentedEncoder(encoder, max_tokens=2)(tf.constant(["a b c a", "b"]))
    np.testing.assert_allclose(documents[0], [1, 1, 1, 0.5, 0.25, 0.25])
    ```
    """

    def __init__(self, encoder: keras.Model, max_tokens: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer or None, got {max_tokens}")
        self.encoder = encoder
        self.max_tokens = max_tokens

    @property
    def output_dim(self) -> int:
        return self.encoder.outputs[0].shape[-1]

    @property
    def _encoded_dtype(self) -> str:
        return self.encoder.outputs[0].dtype

    def call(self, inputs, training=False):
        tokens = split_sentences(inputs, min_length=1)  # [B, T]; one padding column for all-empty batches
        if self.max_tokens is None:
            return self.encoder(tokens, training=training)
        batch, steps = tf.shape(tokens)[0], tf.shape(tokens)[1]
        seg_len = tf.maximum(tf.minimum(steps, self.max_tokens), 1)
        n_segments = tf.maximum((steps + seg_len - 1) // seg_len, 1)
        tokens = tf.pad(tokens, [[0, 0], [0, n_segments * seg_len - steps]])
        segments = tf.transpose(tf.reshape(tokens, [batch, n_segments, seg_len]), [1, 0, 2])  # [S, B, L]
        encoded = tf.map_fn(
            lambda seg: self.encoder(seg, training=training),
            segments,
            fn_output_signature=tf.TensorSpec([None, self.output_dim], self._encoded_dtype),
            parallel_iterations=1,
        )
        encoded = tf.transpose(encoded, [1, 0, 2])  # [B, S, 2H]
        counts = tf.cast(
            tf.transpose(tf.reduce_sum(tf.cast(tf.not_equal(segments, ""), tf.int32), axis=-1)), encoded.dtype
        )[..., None]  # [B, S, 1] tokens per segment
        seg_max, seg_mean = tf.split(encoded, 2, axis=-1)
        present = counts > 0
        best = tf.reduce_max(tf.where(present, seg_max, tf.cast(float("-inf"), seg_max.dtype)), axis=1)
        total = tf.reduce_sum(counts, axis=1)
        best = tf.where(total > 0, best, tf.zeros_like(best))
        mean = tf.reduce_sum(seg_mean * counts, axis=1) / tf.maximum(total, 1.0)
        return tf.concat([best, mean], axis=-1)

    def compute_output_spec(self, inputs, training=False):
        return keras.KerasTensor((inputs.shape[0], self.output_dim), dtype=self._encoded_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "max_tokens": self.max_tokens,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
