"""Forward and backward stacks of projected LSTMs (bilm-tf's ``LSTMCell(num_proj=...)``), run in one loop.

Cell (TF gate order i, j, f, o; forget bias +1)::

    [i, j, f, o] = [x_t, h_{t-1}] W + b
    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_P, proj_clip)

Both directions are processed together: the backward stack reads the time axis reversed, and state is
only updated at unmasked steps, so each sentence is read backwards from its own last token (padding never
leaks in). The input-to-gate products for all steps are one matmul; only h_{t-1} W_h stays in the loop.
The loop itself is a ``tf.while_loop`` (TensorFlow backend).
"""
from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from elmo_keras.deprecation import renamed_arguments


@keras.saving.register_keras_serializable(package="elmo_keras")
class ProjectedBiLSTM(keras.layers.Layer):
    """Forward and backward stacks of projected LSTMs (bilm-tf's ``LSTMCell(num_proj=...)``), run together.

    Args:
        num_layers: int, LSTM layers per direction.
        dim: int, cell size of each LSTM.
        projection_dim: int, size of the projected output (and input) of each LSTM.
        cell_clip: float, clip the cell state to `[-cell_clip, cell_clip]`; `None` for no clipping.
            Defaults to `None`.
        proj_clip: float, clip the projected output likewise; `None` for no clipping. Defaults to `None`.
        use_skip_connections: bool, layers after the first add their input to their output. Defaults to
            `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Deprecated argument name: `n_layers` (use `num_layers`).

    Call arguments:
        inputs: float tensor `[batch, timesteps, projection_dim]`.
        mask: bool tensor `[batch, timesteps]`, `True` for real steps, which come first in each row.
        initial_state: optional list with one `(c [2, batch, dim], h [2, batch, projection_dim])` pair per
            layer (index 0 of the leading axis is the forward direction, 1 the backward one). Defaults to zeros
            (`zero_state`).

    Returns:
        A pair `(outputs, final_state)`: `outputs` is a list of `num_layers` float tensors
        `[batch, timesteps, 2 * projection_dim]` (forward then backward halves, zero at masked steps);
        `final_state` is structured like `initial_state`. The cell state stays float32 under mixed precision.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    lstm = ek.ProjectedBiLSTM(num_layers=2, dim=8, projection_dim=4, cell_clip=3.0, proj_clip=3.0)
    inputs = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    outputs, final_state = lstm(inputs, mask)
    assert [tuple(o.shape) for o in outputs] == [(2, 5, 8)] * 2
    assert np.all(np.asarray(outputs[1])[1, 3:] == 0)
    ```
    """

    @renamed_arguments(n_layers="num_layers")
    def __init__(self, num_layers: int, dim: int, projection_dim: int, cell_clip: float | None = None,
                 proj_clip: float | None = None, use_skip_connections: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.dim = dim
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections

    def build(self, input_shape=None):
        p, d = self.projection_dim, self.dim
        self.kernels, self.biases, self.projections = [], [], []
        for k in range(self.num_layers):
            # kernel rows: the layer input (P) then h_{t-1} (P), as in the released W_0.
            self.kernels.append(self.add_weight(name=f"kernel_{k}", shape=(2, 2 * p, 4 * d),
                                                initializer="glorot_uniform"))
            self.biases.append(self.add_weight(name=f"bias_{k}", shape=(2, 4 * d), initializer="zeros"))
            self.projections.append(self.add_weight(name=f"projection_{k}", shape=(2, d, p),
                                                    initializer="glorot_uniform"))

    def zero_state(self, batch_size) -> list:
        """Zero initial state for ``batch_size`` rows: a list of (c [2, B, D], h [2, B, P])."""
        return [(ops.zeros((2, batch_size, self.dim), "float32"),
                 ops.zeros((2, batch_size, self.projection_dim), self.compute_dtype))
                for _ in range(self.num_layers)]

    @staticmethod
    def _clip(x, limit: float | None):
        return x if limit is None else ops.clip(x, -limit, limit)

    def _scan_layer(self, gates_x, step_mask, w_h, w_p, c, h):
        """One layer, both directions. gates_x [T, 2, B, 4D], step_mask [T, 2, B, 1] -> h_seq [T, 2, B, P]."""
        steps = tf.shape(gates_x)[0]
        gates_ta = tf.TensorArray(gates_x.dtype, size=steps).unstack(gates_x)
        mask_ta = tf.TensorArray(step_mask.dtype, size=steps).unstack(step_mask)
        out_ta = tf.TensorArray(h.dtype, size=steps)

        def body(t, c, h, out_ta):
            # Matmuls in the compute dtype (bfloat16 under mixed precision); the cell state stays float32.
            gates = tf.cast(gates_ta.read(t) + tf.matmul(h, w_h), tf.float32)
            i, j, f, o = tf.split(gates, 4, axis=-1)
            c_new = self._clip(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j), self.cell_clip)
            m_new = tf.cast(tf.sigmoid(o) * tf.tanh(c_new), h.dtype)
            h_new = self._clip(tf.matmul(m_new, w_p), self.proj_clip)
            m = mask_ta.read(t)
            out_ta = out_ta.write(t, tf.where(m, h_new, tf.zeros_like(h_new)))
            return t + 1, tf.where(m, c_new, c), tf.where(m, h_new, h), out_ta

        _, c, h, out_ta = tf.while_loop(lambda t, *_: t < steps, body, (0, c, h, out_ta))
        h_seq = out_ta.stack()
        h_seq.set_shape([None, 2, None, self.projection_dim])
        return h_seq, (c, h)

    def call(self, inputs, mask, initial_state=None):
        p = self.projection_dim
        x = ops.transpose(inputs, (1, 0, 2))  # [T, B, P]
        m = ops.transpose(ops.cast(mask, "bool"), (1, 0))[..., None]  # [T, B, 1]
        x = ops.stack([x, ops.flip(x, axis=0)], axis=1)  # processing order: [T, 2, B, P]
        m = ops.stack([m, ops.flip(m, axis=0)], axis=1)
        if initial_state is None:
            initial_state = self.zero_state(ops.shape(inputs)[0])
        outputs, final_state = [], []
        dtype = self.compute_dtype
        for k in range(self.num_layers):
            kernel = ops.cast(self.kernels[k], dtype)
            gates_x = ops.einsum("tdbp,dpg->tdbg", x, kernel[:, :p]) + ops.cast(self.biases[k], dtype)[None, :, None]
            c0, h0 = initial_state[k]
            h_seq, state = self._scan_layer(gates_x, m, kernel[:, p:], ops.cast(self.projections[k], dtype),
                                            ops.cast(c0, "float32"), ops.cast(h0, dtype))
            if self.use_skip_connections and k > 0:
                h_seq = ops.where(m, h_seq + x, ops.zeros_like(h_seq))
            final_state.append(state)
            outputs.append(h_seq)
            x = h_seq
        return [self._to_batch_major(h) for h in outputs], final_state

    @staticmethod
    def _to_batch_major(h_seq):
        """[T, 2, B, P] in processing order -> [B, T, 2P] (forward ; backward, both in reading order)."""
        forward = ops.transpose(h_seq[:, 0], (1, 0, 2))
        backward = ops.transpose(ops.flip(h_seq[:, 1], axis=0), (1, 0, 2))
        return ops.concatenate([forward, backward], axis=-1)

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers, "dim": self.dim,
                "projection_dim": self.projection_dim, "cell_clip": self.cell_clip, "proj_clip": self.proj_clip,
                "use_skip_connections": self.use_skip_connections}
