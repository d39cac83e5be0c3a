"""Forward and backward stacks of causal pre-LayerNorm Transformer blocks (Peters et al. 2018, "Dissecting
Contextual Word Embeddings"): each direction attends only to its own side of the sentence, so a language-model
loss on either direction stays valid.

Block (LN = LayerNormalization; the attention of step t sees steps <= t of its direction)::

    x = x + Dropout(MultiHeadAttention(LN(x), causal))
    x = x + Dropout(Dense_P(activation(Dense_ff_dim(LN(x)))))
    layer output = normalise(x)       (x itself goes on to the next block)

``normalise`` is a layer normalisation without scale and offset (what would learn them is the next layer: the
LM softmax, a ScalarMix), so that every layer is on one scale and each of its weights gets a gradient from the
LM loss.

Sinusoidal positions (Vaswani et al. 2017) are added to each direction's input, counted from the row's first
token for the forward stack and from its last token for the backward one, so they hold for any length.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from elmo_keras.layers.causal import CausalBiEncoder
from elmo_keras.saving import serializable

_EPSILON = 1e-5  # LayerNormalization epsilon


def sinusoidal_positions(steps, dim: int, dtype):
    """[steps, dim]: sin and cos (interleaved) of position * 10000^(-2i / dim).

    Args:
        steps: int (or scalar tensor), the number of positions.
        dim: int, the embedding width (even).
        dtype: the result's dtype.

    Returns:
        tensor `[steps, dim]`.
    """
    positions = ops.cast(ops.arange(steps), "float32")[:, None]
    rates = ops.exp(ops.cast(ops.arange(0, dim, 2), "float32") * (-math.log(10000.0) / dim))
    angles = positions * rates[None, :]
    table = ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (steps, -1))
    return ops.cast(table[:, :dim], dtype)


class _TransformerBlock(keras.layers.Layer):
    """One pre-LayerNorm block (see the module doc): x [B, T, P] -> (x for the next block, layer output)."""

    def __init__(self, projection_dim: int, num_heads: int, ff_dim: int, dropout: float, activation: str, **kwargs):
        super().__init__(**kwargs)
        policy = self.dtype_policy
        self.attention_norm = keras.layers.LayerNormalization(epsilon=_EPSILON, name="attention_norm", dtype=policy)
        self.attention = keras.layers.MultiHeadAttention(
            num_heads, projection_dim // num_heads, dropout=dropout, name="attention", dtype=policy
        )
        self.ffn_norm = keras.layers.LayerNormalization(epsilon=_EPSILON, name="ffn_norm", dtype=policy)
        self.ffn_in = keras.layers.Dense(ff_dim, activation=activation, name="ffn_in", dtype=policy)
        self.ffn_out = keras.layers.Dense(projection_dim, name="ffn_out", dtype=policy)
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=_EPSILON, center=False, scale=False, name="output_norm", dtype=policy
        )
        self.residual_dropout = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, input_shape):
        for norm in (self.attention_norm, self.ffn_norm, self.output_norm):
            norm.build(input_shape)
        self.attention.build(input_shape, input_shape)
        self.ffn_in.build(input_shape)
        self.ffn_out.build((*input_shape[:-1], self.ffn_in.units))
        self.built = True

    def call(self, x, training=False):
        h = self.attention_norm(x)
        h = self.attention(h, h, use_causal_mask=True, training=training)
        x = x + self.residual_dropout(h, training=training)
        h = self.ffn_out(self.ffn_in(self.ffn_norm(x)))
        x = x + self.residual_dropout(h, training=training)
        return x, self.output_norm(x)


@serializable
class BiTransformer(CausalBiEncoder):
    """Forward and backward stacks of causal pre-LayerNorm Transformer blocks, the biLM's attention contextualizer
    (options ``"encoder": {"type": "transformer", ...}``).

    Args:
        num_layers: int, Transformer blocks per direction.
        projection_dim: int, width P of the inputs, of the blocks and of each direction's output.
        num_heads: int, attention heads (each of size P / num_heads; must divide P). Defaults to `4`.
        ff_dim: int, hidden width of the feed-forward part; `None` for 4 * P. Defaults to `None`.
        dropout: float, dropout on attention weights and residual branches, only while training a trainable
            layer. Defaults to `0.1`.
        activation: str, feed-forward activation, `"relu"` or `"gelu"`. Defaults to `"relu"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[batch, timesteps, projection_dim]`.
        mask: bool tensor `[batch, timesteps]`, `True` for real steps, which come first in each row.

    Returns:
        A list of `num_layers` float tensors `[batch, timesteps, 2 * projection_dim]`: forward then backward
        halves (the forward half at step t depends on steps <= t only, the backward half on steps >= t of the
        row), each block's output normalised (no learned scale or offset), zero at masked steps.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    encoder = ek.BiTransformer(num_layers=2, projection_dim=8, num_heads=2, ff_dim=16)
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
        num_heads: int = 4,
        ff_dim: int | None = None,
        dropout: float = 0.1,
        activation: str = "relu",
        **kwargs,
    ):
        if projection_dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide projection_dim={projection_dim}")
        super().__init__(num_layers, projection_dim, dropout, **kwargs)
        self.num_heads = num_heads
        self.ff_dim = 4 * projection_dim if ff_dim is None else ff_dim
        self.activation = activation

    def make_block(self, name: str) -> keras.layers.Layer:
        """A new causal self-attention block (see :meth:`CausalBiEncoder.make_block`).

        Args:
            name: the block's layer name.

        Returns:
            A Keras layer.
        """
        return _TransformerBlock(
            self.projection_dim,
            self.num_heads,
            self.ff_dim,
            self.dropout,
            self.activation,
            name=name,
            dtype=self.dtype_policy,
        )

    def embed_inputs(self, x):
        """Add the sinusoidal position embeddings (see :func:`sinusoidal_positions`).

        Args:
            x: float tensor `[B, T, P]`, each direction's input.

        Returns:
            float tensor `[B, T, P]`.
        """
        return x + sinusoidal_positions(ops.shape(x)[1], self.projection_dim, x.dtype)[None]

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "ff_dim": self.ff_dim,
            "activation": self.activation,
        }
