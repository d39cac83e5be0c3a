"""Forward and backward stacks of causal gated convolutions (gated linear units, Dauphin et al. 2017), with
residual connections.

Block (the convolution at step t sees steps t - kernel_size + 1 .. t of its direction, zeros before the start)::

    [a ; b] = CausalConv1D_2P(x)
    x = LN(x + Dropout(a * sigmoid(b)))        (LN only with layer_norm; x is the layer output and goes on)
"""

from __future__ import annotations

import keras
from keras import ops

from elmo_keras.layers.causal import CausalBiEncoder
from elmo_keras.saving import serializable


class _GatedConvBlock(keras.layers.Layer):
    """One residual GLU block (see the module doc): x [B, T, P] -> (x', x'), x' the layer output."""

    def __init__(self, projection_dim: int, kernel_size: int, layer_norm: bool, dropout: float, **kwargs):
        super().__init__(**kwargs)
        policy = self.dtype_policy
        self.conv = keras.layers.Conv1D(2 * projection_dim, kernel_size, padding="causal", name="conv", dtype=policy)
        self.norm = keras.layers.LayerNormalization(epsilon=1e-5, name="norm", dtype=policy) if layer_norm else None
        self.residual_dropout = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, input_shape):
        self.conv.build(input_shape)
        if self.norm is not None:
            self.norm.build(input_shape)
        self.built = True

    def call(self, x, training=False):
        a, b = ops.split(self.conv(x), 2, axis=-1)
        x = x + self.residual_dropout(a * ops.sigmoid(b), training=training)
        x = x if self.norm is None else self.norm(x)
        return x, x


@serializable
class BiGatedCNN(CausalBiEncoder):
    """Forward and backward stacks of causal gated convolution blocks, the biLM's convolution contextualizer
    (options ``"encoder": {"type": "gated_cnn", ...}``).

    Args:
        num_layers: int, blocks per direction.
        projection_dim: int, width P of the inputs and of each direction's output.
        kernel_size: int, steps each convolution sees (the current one and kernel_size - 1 before it). Defaults
            to `5`.
        layer_norm: bool, layer-normalise each block's output. Defaults to `True`.
        dropout: float, dropout on the residual branches, only while training a trainable layer. Defaults to
            `0.1`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[batch, timesteps, projection_dim]`.
        mask: bool tensor `[batch, timesteps]`, `True` for real steps, which come first in each row.

    Returns:
        A list of `num_layers` float tensors `[batch, timesteps, 2 * projection_dim]`: forward then backward
        halves (the forward half at step t depends on steps <= t only, the backward half on steps >= t of the
        row), zero at masked steps.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    encoder = ek.BiGatedCNN(num_layers=2, projection_dim=8, kernel_size=3)
    inputs = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    outputs = encoder(inputs, mask)
    assert [tuple(o.shape) for o in outputs] == [(2, 5, 16)] * 2
    assert np.all(np.asarray(outputs[1])[1, 3:] == 0)
    ```
    """

    def __init__(
        self,
        num_layers: int,
        projection_dim: int,
        kernel_size: int = 5,
        layer_norm: bool = True,
        dropout: float = 0.1,
        **kwargs,
    ):
        super().__init__(num_layers, projection_dim, dropout, **kwargs)
        self.kernel_size = kernel_size
        self.layer_norm = layer_norm

    def make_block(self, name: str) -> keras.layers.Layer:
        """A new gated convolution block (see :meth:`CausalBiEncoder.make_block`).

        Args:
            name: the block's layer name.

        Returns:
            A Keras layer.
        """
        return _GatedConvBlock(
            self.projection_dim, self.kernel_size, self.layer_norm, self.dropout, name=name, dtype=self.dtype_policy
        )

    def get_config(self):
        return {**super().get_config(), "kernel_size": self.kernel_size, "layer_norm": self.layer_norm}
