"""Character CNN token encoder: char ids [..., max_characters_per_token] -> token vectors [..., projection_dim]."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from elmo_keras.layers.highway import Highway
from elmo_keras.layers.initializers import initializer
from elmo_keras.saving import serializable
from elmo_keras.text import PAD_CHAR
from elmo_keras.utils.deprecation import renamed_arguments

PAD_ID = PAD_CHAR + 1  # the shifted id of the padding character inside a token


@serializable
class CharCNN(keras.layers.Layer):
    """Character CNN token encoder of ELMo (bilm-tf's ``char_cnn``).

    Embeds each token's characters, convolves per filter width, takes the max over positions, applies the
    activation, then highway layers and a linear projection.

    Args:
        filters: list of `[width, num_filters]` pairs, one convolution per pair.
        char_embed_dim: int, size of the character embedding. Defaults to `16`.
        num_characters: int, rows of the character table, padding row 0 included. Defaults to `262`.
        activation: `"relu"` or `"tanh"`, applied after the max over positions. Defaults to `"relu"`.
        num_highway_layers: int, highway layers after the convolutions. Defaults to `2`.
        projection_dim: int, output size. When it equals the total number of filters there is no projection
            (as in bilm-tf). Defaults to `512`.
        max_characters_per_token: int, character slots per token. Defaults to `50`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Deprecated argument names: `n_characters` (use `num_characters`), `n_highway` (use `num_highway_layers`).

    Call arguments:
        inputs: int tensor `[..., max_characters_per_token]` of shifted char ids (see
            `elmo_keras.batch_to_ids`); a token whose ids are all 0 is padding.
        trim_padding: bool, convolve only over the character positions before the padding that ends each token
            (as long as the batch's longest token needs): the same results to float32 rounding with far fewer
            operations (a 10-token sentence: about 14 windows per filter instead of 44-50). Shapes then depend on
            the data, which XLA cannot compile, hence off by default; `ElmoEmbedder` uses it. Defaults to `False`.

    Returns:
        A float tensor `[..., projection_dim]`, with the Keras mask `any(inputs > 0, axis=-1)`
        (so that e.g. a `Bidirectional(GRU)` on top skips padding tokens).

    Example:

    ```python
    import elmo_keras as ek

    cnn = ek.CharCNN([[1, 4], [2, 8]], char_embed_dim=4, num_highway_layers=1, projection_dim=6)
    vectors = cnn(ek.batch_to_ids([["Hello", "world"], ["Hi"]]))
    assert vectors.shape == (2, 2, 6)
    ```
    """

    @renamed_arguments(n_characters="num_characters", n_highway="num_highway_layers")
    def __init__(
        self,
        filters: Sequence[Sequence[int]],
        char_embed_dim: int = 16,
        num_characters: int = 262,
        activation: str = "relu",
        num_highway_layers: int = 2,
        projection_dim: int = 512,
        max_characters_per_token: int = 50,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.char_embed_dim = char_embed_dim
        self.num_characters = num_characters
        self.activation = activation
        self.num_highway_layers = num_highway_layers
        self.projection_dim = projection_dim
        self.max_characters_per_token = max_characters_per_token
        self.num_filters = sum(n for _, n in self.filters)
        self.use_projection = self.num_filters != projection_dim
        self.highway = Highway(num_highway_layers, name="highway", dtype=self.dtype_policy)

    @property
    def output_dim(self) -> int:
        return self.projection_dim

    def build(self, input_shape=None):
        # Row 0 (padding id) is not a variable: it is a constant zero row put in front at call time.
        self.char_embed = self.add_weight(
            name="char_embed",
            shape=(self.num_characters - 1, self.char_embed_dim),
            initializer=initializer(keras.initializers.RandomUniform(-1.0, 1.0)),
        )
        self.conv_kernels, self.conv_biases = [], []
        for i, (width, num) in enumerate(self.filters):
            self.conv_kernels.append(
                self.add_weight(
                    name=f"W_cnn_{i}",
                    shape=(width, self.char_embed_dim, num),
                    initializer=initializer("glorot_uniform"),
                )
            )
            self.conv_biases.append(self.add_weight(name=f"b_cnn_{i}", shape=(num,), initializer="zeros"))
        self.highway.build((None, self.num_filters))
        if self.use_projection:
            self.proj_kernel = self.add_weight(
                name="W_proj", shape=(self.num_filters, self.projection_dim), initializer=initializer("glorot_uniform")
            )
            self.proj_bias = self.add_weight(name="b_proj", shape=(self.projection_dim,), initializer="zeros")

    def embedding_table(self):
        """[num_characters, char_embed_dim] with the zero padding row in front."""
        table = ops.convert_to_tensor(self.char_embed)
        return ops.concatenate([ops.zeros_like(table[:1]), table], axis=0)

    def call(self, inputs, trim_padding: bool = False):
        lead_shape = ops.shape(inputs)[:-1]
        chars_per_token = self.max_characters_per_token
        flat = ops.reshape(inputs, (-1, chars_per_token))
        # One token of padding characters more, dropped below: its first window is each filter's value over padding
        # alone (for trim_padding); it also keeps the batch non-empty (with oneDNN, TF 2.21 on x86, a convolution
        # over zero rows returns its input unchanged).
        flat = ops.concatenate([flat, ops.full((1, chars_per_token), PAD_ID, flat.dtype)], axis=0)
        x = self.highway(self._pooled_convolutions(flat, trim_padding))
        if self.use_projection:
            x = ops.matmul(x, self.proj_kernel) + self.proj_bias
        return ops.reshape(x[:-1], (*lead_shape, self.projection_dim))

    def _pooled_convolutions(self, ids, trim_padding: bool):
        """ids [N, C] (the last token all padding characters) -> [N, num_filters]: per filter width, the max over
        positions of the convolution, plus its bias, through the activation.

        The bias is added after the max (the same value: rounding is monotonic). With ``trim_padding`` the
        convolutions see only the first ``span`` positions, where ``span`` is the longest token head of the batch:
        a token ends in a run of one id (padding characters, or 0 in a padding token), and a window wholly in that
        run has a value shared by every such token: 0 over id 0 (its embedding row is zero), and over padding
        characters the value of the last token's first window. That value joins the max of each token whose
        trimmed windows leave such windows out. Tokens ending in another id count as all head."""
        chars_per_token = self.max_characters_per_token
        act = ops.relu if self.activation == "relu" else ops.tanh
        span = chars_per_token
        if trim_padding:
            tail = ids[:, -1:]
            tail_run = ops.sum(ops.cumprod(ops.cast(ops.flip(ops.equal(ids, tail), axis=1), "int32"), axis=1), axis=1)
            padded_tail = ops.logical_or(ops.equal(tail, 0), ops.equal(tail, PAD_ID))[:, 0]
            span = ops.maximum(ops.max(ops.where(padded_tail, chars_per_token - tail_run, chars_per_token)), 1)
            over_padding = ops.equal(tail, PAD_ID)  # [N, 1]: whose left-out windows are over padding characters
        chars = ops.take(self.embedding_table(), ids, axis=0)  # [N, C, char_dim]
        pooled = []
        for (width, _), kernel, bias in zip(self.filters, self.conv_kernels, self.conv_biases):
            if trim_padding:
                conv = ops.conv(chars[:, : ops.minimum(span + width - 1, chars_per_token)], kernel, padding="valid")
                left_out = ops.where(over_padding, conv[-1:, 0], ops.zeros_like(conv[-1:, 0]))  # [N, n]
                left_out = ops.where(span < chars_per_token - width + 1, left_out, float("-inf"))
                best = ops.maximum(ops.max(conv, axis=1), left_out)
            else:
                best = ops.max(ops.conv(chars, kernel, strides=1, padding="valid"), axis=1)  # [N, n]
            pooled.append(act(best + bias))
        return ops.concatenate(pooled, axis=-1)

    def compute_mask(self, inputs, mask=None):
        if keras.backend.is_keras_tensor(inputs):
            return None  # as for every elmo_keras embedder: the functional model computes it when it runs
        return ops.any(ops.not_equal(inputs, 0), axis=-1)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.projection_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "filters": self.filters,
            "char_embed_dim": self.char_embed_dim,
            "num_characters": self.num_characters,
            "activation": self.activation,
            "num_highway_layers": self.num_highway_layers,
            "projection_dim": self.projection_dim,
            "max_characters_per_token": self.max_characters_per_token,
        }
