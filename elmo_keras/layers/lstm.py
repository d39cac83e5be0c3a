"""Forward and backward stacks of projected LSTMs (bilm-tf's ``LSTMCell(num_proj=...)``), run in one loop.

Cell (TF gate order i, j, f, o; forget bias +1)::

    [i, j, f, o] = [x_t, h_{t-1}] W + b
    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_P, proj_clip)

Both directions are processed together: the backward stack reads each row reversed within its own length
(``tf.reverse_sequence``), so in both directions a row's real steps come first and its padding after. The
steps therefore need no masking: a row's padded steps come after everything its outputs depend on, and
their outputs are zeroed once per layer after the loop. Only a caller that wants the final state (a stateful
biLM) gets per-step masking, which holds each row's state after its last real step. The input-to-gate
products of many steps are one matmul per direction (all steps when trainable; when frozen, as many steps as
fill ``GEMM_ROWS`` rows, at least one (:func:`chunk_steps`), which bounds inference memory and keeps each GEMM
below a slow shape of TensorFlow's CPU GEMM); only h_{t-1} W_h and the projection stay in the per-step loop,
as one plain GEMM per direction (each in its fast 2-D shape, independent, so the executor's inter-op threads
can run the two directions side by side). A caller that runs a frozen LSTM many times can pass
``step_weights`` (:meth:`transposed_step_weights`): the same per-step weights stored transposed, [4D, P] and
[P, D] (optionally the input-to-gate kernel too), on which bfloat16 GEMMs with few rows run about twice as
fast (see :func:`transposed_layout_pays`). The loops are ``tf.while_loop`` s (TensorFlow backend).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from elmo_keras.layers.initializers import initializer
from elmo_keras.saving import serializable
from elmo_keras.utils.deprecation import renamed_arguments

#: rows (steps x batch) of a frozen LSTM's input-to-gate GEMMs: TensorFlow's CPU GEMM runs a product with
#: many more columns than rows at about half speed from 128 rows on 2 threads (Eigen then shards the rows)
GEMM_ROWS = 96
#: W_h size (bytes) from which the per-step GEMMs are faster on transposed weights, in bfloat16 (measured)
TRANSPOSED_FROM_BYTES = 8 << 20


def transposed_layout_pays(dim: int, projection_dim: int, dtype: str) -> bool:
    """Whether the per-step GEMMs of an LSTM of this size and compute dtype run faster on transposed weights.

    Measured on a 2-core Xeon (AMX), rig protocol, alternating runs: in bfloat16 a GEMM on the released
    [P, 4D] layout with few rows runs at half the speed of the same product on the transposed [4D, P] one
    (original size: a 10-token sentence 75 -> 52 ms, batch 64 +12% tokens/s); in float32 the two layouts
    were equally fast (906-990 vs 903-1018 tokens/s) and the copy costs 168 MB, and on the small size (1 MB
    in bfloat16) the transposed layout was slower. Hence: bfloat16 and W_h of at least 8 MiB.
    """
    return (
        keras.backend.standardize_dtype(dtype) == "bfloat16"
        and projection_dim * 4 * dim * np.dtype(dtype).itemsize >= TRANSPOSED_FROM_BYTES
    )


def prefix_lengths(mask, message: str):
    """Bool mask [B, T] -> each row's count of True [B] (int32), asserting (``message``) that they come first."""
    lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
    tf.debugging.assert_equal(mask, tf.sequence_mask(lengths, ops.shape(mask)[1]), message=message)
    return lengths


def _reverse_rows(x, lengths):
    """[T, B, ...] -> each row's first ``lengths[b]`` steps reversed, its padded steps left where they are."""
    return tf.reverse_sequence(x, lengths, seq_axis=0, batch_axis=1)


def chunk_steps(batch):
    """Steps whose input-to-gate products a frozen LSTM computes in one GEMM per direction: as many as keep it
    within GEMM_ROWS rows, at least one (``batch``: int or scalar tensor)."""
    return tf.maximum(1, GEMM_ROWS // tf.maximum(batch, 1))


def _step_product(x, w, transposed: bool):
    """x [B, K] times a per-step weight: ``w`` [K, N], or ``transposed`` [N, K] (then W^T x^T, turned back)."""
    return tf.transpose(tf.matmul(w, x, transpose_b=True)) if transposed else tf.matmul(x, w)


@serializable
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
        return_final_state: bool, compute the final state (each row's state after its last real step, which
            costs masking every step). `False` returns `None` in its place, faster. Defaults to `True`.
        step_weights: optional, from `transposed_step_weights()`: the recurrent and projection weights (and
            optionally the input-to-gate kernel) in the transposed layout, used instead of the variables' (a
            snapshot: for a frozen LSTM). Same numbers.

    Returns:
        A pair `(outputs, final_state)`: `outputs` is a list of `num_layers` float tensors
        `[batch, timesteps, 2 * projection_dim]` (forward then backward halves, zero at masked steps);
        `final_state` is structured like `initial_state` (`None` with `return_final_state=False`). The cell state
        stays float32 under mixed precision.

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
    def __init__(
        self,
        num_layers: int,
        dim: int,
        projection_dim: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        use_skip_connections: bool = False,
        **kwargs,
    ):
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
            self.kernels.append(
                self.add_weight(name=f"kernel_{k}", shape=(2, 2 * p, 4 * d), initializer=initializer("glorot_uniform"))
            )
            self.biases.append(self.add_weight(name=f"bias_{k}", shape=(2, 4 * d), initializer="zeros"))
            self.projections.append(
                self.add_weight(name=f"projection_{k}", shape=(2, d, p), initializer=initializer("glorot_uniform"))
            )

    def zero_state(self, batch_size) -> list:
        """Zero initial state for ``batch_size`` rows: a list of (c [2, B, D], h [2, B, P])."""
        return [
            (
                ops.zeros((2, batch_size, self.dim), "float32"),
                ops.zeros((2, batch_size, self.projection_dim), self.compute_dtype),
            )
            for _ in range(self.num_layers)
        ]

    @staticmethod
    def _clip(x, limit: float | None):
        """``x`` clipped to [-limit, limit]: one ClipByValue op (``tf.clip_by_value`` is two, minimum then
        maximum, the same numbers; in the per-step loop every op counts)."""
        if limit is None:
            return x
        return tf.raw_ops.ClipByValue(
            t=x, clip_value_min=tf.constant(-limit, x.dtype), clip_value_max=tf.constant(limit, x.dtype)
        )

    def transposed_step_weights(self, input_kernel: bool = False) -> list:
        """A snapshot of the per-step weights, transposed: per layer, per direction ``(W_x^T [4D, P] or None,
        W_h^T [4D, P], W_P^T [P, D])`` in the compute dtype, for ``call(..., step_weights=...)``; W_x^T (the
        input-to-gate kernel) only with ``input_kernel``. Taken now: made again after the weights change."""

        def transposed(k, d):
            w_x, w_h, _, w_p = self._direction_weights(k, d)
            return tf.transpose(w_x) if input_kernel else None, tf.transpose(w_h), tf.transpose(w_p)

        return [[transposed(k, d) for d in (0, 1)] for k in range(self.num_layers)]

    def _direction_weights(self, k: int, direction: int):
        """(W_x [P, 4D], W_h [P, 4D], b [4D], W_P [D, P]) of layer ``k``, one direction, in the compute dtype."""
        p, dtype = self.projection_dim, self.compute_dtype
        kernel = ops.cast(self.kernels[k][direction], dtype)
        return (
            kernel[:p],
            kernel[p:],
            ops.cast(self.biases[k][direction], dtype),
            ops.cast(self.projections[k][direction], dtype),
        )

    def _cell(self, gates, c, w_p, transposed: bool = False):
        """Gates [B, 4D] (i, j, f, o), c [B, D] float32 -> (c_t, h_t): the element-wise math and projection
        (``w_p`` [D, P], or [P, D] when ``transposed``). Matmuls run in the compute dtype (bfloat16 under mixed
        precision); the cell state stays float32."""
        i, j, f, o = tf.split(tf.cast(gates, tf.float32), 4, axis=-1)
        c_new = self._clip(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j), self.cell_clip)
        m_new = tf.cast(tf.sigmoid(o) * tf.tanh(c_new), w_p.dtype)
        return c_new, self._clip(_step_product(m_new, w_p, transposed), self.proj_clip)

    def _scan_layer(self, k, xs, mask, c, h, step_weights=None, hold_state: bool = True):
        """Layer ``k``, both directions in one loop: xs: per direction [T, B, P] in processing order (each row's
        real steps first); mask: [T, B, 1]; c, h: per direction [B, D] / [B, P]; step_weights: this layer's
        transposed (W_x^T or None, W_h^T, W_P^T) per direction, or None; hold_state: keep each row's state from
        its last real step on (for the final state; else padded steps update it freely, which no real output
        depends on) -> (per direction h_seq [T, B, P], not zeroed at padded steps; (c, h)).

        The input-to-gate products are one large GEMM per direction: over all steps when trainable (a
        TensorArray of them, whose gradient is per step), else over ``chunk_steps(B)`` steps at a time (so a
        long batch never holds [T, B, 4D] of them, and each GEMM has at most ``GEMM_ROWS`` rows, or B). Each
        step then runs one recurrent and one projection GEMM per direction.
        """
        weights = [self._direction_weights(k, direction) for direction in (0, 1)]
        transposed = step_weights is not None
        if transposed:
            weights = [
                (w_x if w_x_t is None else w_x_t, w_h_t, b, w_p_t)
                for (w_x, _, b, _), (w_x_t, w_h_t, w_p_t) in zip(weights, step_weights)
            ]
        # the input-to-gate kernel: [P, 4D] as released, or [4D, P] from the snapshot
        input_product = "tbp,gp->tbg" if transposed and step_weights[0][0] is not None else "tbp,pg->tbg"
        steps = tf.shape(xs[0])[0]
        out_tas = [tf.TensorArray(h[0].dtype, size=steps) for _ in (0, 1)]

        def input_gates(start, end):
            return [tf.einsum(input_product, x[start:end], w_x) + b for x, (w_x, _, b, _) in zip(xs, weights)]

        def run_steps(start, end, gate_reads, c, h, out_tas):
            def body(t, c, h, out_tas):
                new_c, new_h, new_out = [], [], []
                for direction, (_, w_h, _, w_p) in enumerate(weights):
                    gates = gate_reads[direction](t) + _step_product(h[direction], w_h, transposed)
                    c_t, h_t = self._cell(gates, c[direction], w_p, transposed)
                    if hold_state:
                        c_t, h_t = tf.where(mask[t], c_t, c[direction]), tf.where(mask[t], h_t, h[direction])
                    new_c.append(c_t)
                    new_h.append(h_t)
                    new_out.append(out_tas[direction].write(t, h_t))
                return t + 1, new_c, new_h, new_out

            return tf.while_loop(lambda t, *_: t < end, body, (start, c, h, out_tas))[1:]

        if self.trainable:
            gate_reads = [tf.TensorArray(g.dtype, size=steps).unstack(g).read for g in input_gates(0, steps)]
            c, h, out_tas = run_steps(0, steps, gate_reads, list(c), list(h), out_tas)
        else:
            length = chunk_steps(tf.shape(xs[0])[1])

            def chunk(start, c, h, out_tas):
                end = tf.minimum(start + length, steps)
                gates = input_gates(start, end)
                reads = [lambda t, g=g: g[t - start] for g in gates]
                return (end, *run_steps(start, end, reads, c, h, out_tas))

            # parallel_iterations=1: one chunk at a time (otherwise the loop runs ahead and holds every chunk's gates)
            _, c, h, out_tas = tf.while_loop(
                lambda start, *_: start < steps, chunk, (0, list(c), list(h), out_tas), parallel_iterations=1
            )
        h_seqs = [ta.stack() for ta in out_tas]
        for h_seq in h_seqs:
            h_seq.set_shape([None, None, self.projection_dim])
        return h_seqs, (c, h)

    def call(self, inputs, mask, initial_state=None, step_weights=None, return_final_state: bool = True):
        x = ops.transpose(inputs, (1, 0, 2))  # [T, B, P]
        mask = ops.cast(mask, "bool")
        lengths = prefix_lengths(  # each row read backwards from its own last step needs padding last
            mask, "elmo_keras: ProjectedBiLSTM's mask must be True for each row's first steps, False after them"
        )
        m = ops.transpose(mask, (1, 0))[..., None]  # [T, B, 1]
        xs = [x, _reverse_rows(x, lengths)]  # processing order of each direction: real steps first
        if initial_state is None:
            initial_state = self.zero_state(ops.shape(inputs)[0])
        outputs, final_state = [], []
        for k in range(self.num_layers):
            c0, h0 = initial_state[k]
            h_seqs, (c, h) = self._scan_layer(
                k,
                xs,
                m,
                tf.unstack(ops.cast(c0, "float32"), 2),
                tf.unstack(ops.cast(h0, self.compute_dtype), 2),
                None if step_weights is None else step_weights[k],
                return_final_state,
            )
            if self.use_skip_connections and k > 0:
                h_seqs = [h_d + x_d for h_d, x_d in zip(h_seqs, xs)]
            h_seqs = [ops.where(m, h_d, ops.zeros_like(h_d)) for h_d in h_seqs]  # padded steps: zero, once
            if return_final_state:
                final_state.append((ops.stack(c), ops.stack(h)))
            outputs.append(
                ops.transpose(ops.concatenate([h_seqs[0], _reverse_rows(h_seqs[1], lengths)], axis=-1), (1, 0, 2))
            )  # [B, T, 2P]: forward ; backward, both in reading order
            xs = h_seqs
        return outputs, final_state if return_final_state else None

    def get_config(self):
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "dim": self.dim,
            "projection_dim": self.projection_dim,
            "cell_clip": self.cell_clip,
            "proj_clip": self.proj_clip,
            "use_skip_connections": self.use_skip_connections,
        }
