"""Character CNN token encoder: char ids [..., max_chars] -> token vectors [..., projection_dim]."""
from __future__ import annotations

import keras
from keras import ops

from elmo_keras.layers.highway import Highway


@keras.saving.register_keras_serializable(package="elmo_keras")
class CharCNN(keras.layers.Layer):
    """Embed chars, convolve per filter width, max over positions, activation, highway, projection.

    Input: int [..., max_characters_per_token] shifted char ids (0 = padding token).
    Output: float [..., projection_dim] (or [..., sum of filters] when they are equal and there is no
    projection, as in bilm-tf). The mask is ``any(ids > 0, axis=-1)``.
    """

    def __init__(self, filters, char_embed_dim: int = 16, n_characters: int = 262, activation: str = "relu",
                 n_highway: int = 2, projection_dim: int = 512, max_characters_per_token: int = 50, **kwargs):
        super().__init__(**kwargs)
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.char_embed_dim = char_embed_dim
        self.n_characters = n_characters
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.activation = activation
        self.n_highway = n_highway
        self.projection_dim = projection_dim
        self.max_characters_per_token = max_characters_per_token
        self.n_filters = sum(n for _, n in self.filters)
        self.use_projection = self.n_filters != projection_dim
        self.highway = Highway(n_highway, name="highway", dtype=self.dtype_policy)

    @property
    def output_dim(self) -> int:
        return self.projection_dim

    def build(self, input_shape=None):
        # Row 0 (padding id) is not a variable: it is a constant zero row put in front at call time.
        self.char_embed = self.add_weight(name="char_embed", shape=(self.n_characters - 1, self.char_embed_dim),
                                          initializer=keras.initializers.RandomUniform(-1.0, 1.0))
        self.conv_kernels, self.conv_biases = [], []
        for i, (width, num) in enumerate(self.filters):
            self.conv_kernels.append(self.add_weight(name=f"W_cnn_{i}", shape=(width, self.char_embed_dim, num),
                                                     initializer="glorot_uniform"))
            self.conv_biases.append(self.add_weight(name=f"b_cnn_{i}", shape=(num,), initializer="zeros"))
        self.highway.build((None, self.n_filters))
        if self.use_projection:
            self.proj_kernel = self.add_weight(name="W_proj", shape=(self.n_filters, self.projection_dim),
                                               initializer="glorot_uniform")
            self.proj_bias = self.add_weight(name="b_proj", shape=(self.projection_dim,), initializer="zeros")

    def embedding_table(self):
        """[n_characters, char_embed_dim] with the zero padding row in front."""
        table = ops.convert_to_tensor(self.char_embed)
        return ops.concatenate([ops.zeros_like(table[:1]), table], axis=0)

    def call(self, ids):
        lead_shape = ops.shape(ids)[:-1]
        flat = ops.reshape(ids, (-1, self.max_characters_per_token))
        # One padding token more, dropped below: with oneDNN (TF 2.21 on x86) a convolution over zero rows returns
        # its input unchanged, so an empty batch would fail.
        flat = ops.concatenate([flat, ops.zeros((1, self.max_characters_per_token), flat.dtype)], axis=0)
        chars = ops.take(self.embedding_table(), flat, axis=0)  # [N, C, char_dim]
        act = ops.relu if self.activation == "relu" else ops.tanh
        pooled = []
        for kernel, bias in zip(self.conv_kernels, self.conv_biases):
            conv = ops.conv(chars, kernel, strides=1, padding="valid") + bias  # [N, C - w + 1, n]
            pooled.append(act(ops.max(conv, axis=1, initial=float("-inf"))))  # initial: empty batches work
        x = self.highway(ops.concatenate(pooled, axis=-1))
        if self.use_projection:
            x = ops.matmul(x, self.proj_kernel) + self.proj_bias
        return ops.reshape(x[:-1], (*lead_shape, self.projection_dim))

    def compute_mask(self, ids, mask=None):
        return ops.any(ids > 0, axis=-1)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.projection_dim)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "char_embed_dim": self.char_embed_dim,
                "n_characters": self.n_characters, "activation": self.activation, "n_highway": self.n_highway,
                "projection_dim": self.projection_dim, "max_characters_per_token": self.max_characters_per_token}
