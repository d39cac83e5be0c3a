"""What the attention and convolution biLMs share: forward and backward stacks of causal blocks.

Each direction is a stack of blocks that see only earlier steps of their input (causal attention, left-padded
convolution). The forward stack reads each row as given; the backward stack reads it reversed within its own
length (:func:`reverse_rows`), so its positions count from the row's last token and padding never reaches a
real step. Each block returns (its output to the next block, the layer output), the backward layer outputs are
put back in reading order, and layer k is ``[forward_k ; backward_k]``, zero at masked steps, as
:class:`~elmo_keras.layers.ProjectedBiLSTM` gives it.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops


def reverse_rows(x, lengths, seq_axis: int = 1):
    """Each row's first ``lengths[b]`` steps reversed; the padding after them stays in place.

    ``tf.reverse_sequence`` on the TensorFlow backend; elsewhere a gather (``keras.ops.take_along_axis``) of the
    same steps.

    Args:
        x: tensor `[B, T, ...]` (`seq_axis=1`) or `[T, B, ...]` (`seq_axis=0`).
        lengths: int tensor `[B]`, each row's real steps.
        seq_axis: int, the time axis: 1 or 0 (the other of the two leading axes is the batch). Defaults to `1`.

    Returns:
        A tensor like ``x``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.layers.causal import reverse_rows

    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(reverse_rows(x, np.array([3, 2], "int32")), [[2, 1, 0], [4, 3, 5]])
    ```
    """
    if keras.backend.backend() == "tensorflow":
        return tf.reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=1 - seq_axis)
    x = ops.convert_to_tensor(x)
    lengths = ops.cast(lengths, "int32")[:, None]  # [B, 1]
    steps = ops.arange(ops.shape(x)[seq_axis], dtype="int32")[None, :]  # [1, T]
    index = ops.where(steps < lengths, lengths - 1 - steps, steps)  # [B, T]
    if seq_axis == 0:
        index = ops.transpose(index)
    index = ops.reshape(index, (*ops.shape(index), *[1] * (len(x.shape) - 2)))
    return ops.take_along_axis(x, ops.broadcast_to(index, ops.shape(x)), axis=seq_axis)


class CausalBiEncoder(keras.layers.Layer):
    """Base of :class:`BiTransformer` and :class:`BiGatedCNN`: subclasses give ``make_block`` (and may override
    ``embed_inputs``); this class runs the two directions and assembles the layer outputs.

    Args:
        num_layers: int, blocks per direction.
        projection_dim: int, width P of the inputs and of each direction's output.
        dropout: float, dropout rate inside the blocks; applied only while training a trainable layer (a frozen
            biLM is deterministic). Defaults to `0.0`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[B, T, P]`, the token embeddings.
        mask: bool tensor `[B, T]`, True at real tokens (after them, padding).
        training: bool, whether dropout applies.

    Returns:
        A list of `num_layers` float tensors `[B, T, 2P]` (forward and backward outputs side by side).
    """

    def __init__(self, num_layers: int, projection_dim: int, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.projection_dim = projection_dim
        self.dropout = dropout

    def make_block(self, name: str) -> keras.layers.Layer:
        """A new block: ``block(x [B, T, P], training=...)`` -> (next block's input, layer output), both [B, T, P].

        Args:
            name: the block's layer name.

        Returns:
            A Keras layer.
        """
        raise NotImplementedError

    def embed_inputs(self, x):
        """Each direction's input [B, T, P] (its steps counted from the row's first token) -> the first block's.

        Args:
            x: float tensor `[B, T, P]`.

        Returns:
            float tensor `[B, T, P]` (here ``x`` itself).
        """
        return x

    def build(self, input_shape=None):
        self.forward_blocks = [self.make_block(f"forward_{k}") for k in range(self.num_layers)]
        self.backward_blocks = [self.make_block(f"backward_{k}") for k in range(self.num_layers)]
        for block in self.forward_blocks + self.backward_blocks:
            block.build((None, None, self.projection_dim))
        self.built = True

    def call(self, inputs, mask, training=None):
        training = bool(training) and self.trainable
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        keep = ops.cast(mask, self.compute_dtype)[..., None]
        x = ops.cast(inputs, self.compute_dtype) * keep
        streams = [self.embed_inputs(x), self.embed_inputs(reverse_rows(x, lengths))]
        outputs = []
        for k in range(self.num_layers):
            halves = []
            for direction, blocks in enumerate((self.forward_blocks, self.backward_blocks)):
                streams[direction], output = blocks[k](streams[direction], training=training)
                halves.append(output)
            outputs.append(ops.concatenate([halves[0], reverse_rows(halves[1], lengths)], axis=-1) * keep)
        return outputs

    def get_config(self):
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "projection_dim": self.projection_dim,
            "dropout": self.dropout,
        }
