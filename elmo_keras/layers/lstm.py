"""Forward and backward stacks of projected LSTMs (bilm-tf's ``LSTMCell(num_proj=...)``), run in one loop.

The equations are :class:`~elmo_keras.layers.lstm_cell.ProjectedLSTMCell`; this module runs them over sequences.
Both directions are processed together: the backward stack reads each row reversed within its own length
(``causal.reverse_rows``), so in both directions a row's real steps come first and its padding after. The
steps therefore need no masking: a row's padded steps come after everything its outputs depend on, and
their outputs are zeroed once per layer after the loop. Only a caller that wants the final state (a stateful
biLM) gets per-step masking, which holds each row's state after its last real step. The input-to-gate
products of all steps are one matmul per direction; only h_{t-1} W_h and the projection stay in the per-step
loop. A frozen layer takes the fast path of :mod:`elmo_keras.layers.lstm_inference` instead (``fast_inference``).
Both loops are TensorFlow's (``tf.while_loop``); on the JAX and PyTorch backends every layer runs the same cell in
``lstm_cell.scan_steps`` (``keras.ops.scan``), and ``fast_inference`` changes nothing there.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from elmo_keras.layers import lstm_inference
from elmo_keras.layers.causal import reverse_rows
from elmo_keras.layers.initializers import initializer
from elmo_keras.layers.lstm_cell import ON_TENSORFLOW, ProjectedLSTMCell, StepWeights, run_steps, scan_steps
from elmo_keras.saving import serializable
from elmo_keras.utils.deprecation import renamed_arguments


def prefix_lengths(mask, message: str):
    """Each row's count of True, asserting that they come first (an in-graph assertion on the TensorFlow backend;
    other backends check concrete inputs before the call, ``bilm.check_concrete_inputs``).

    Args:
        mask: bool tensor `[B, T]`.
        message: str, the assertion's message.

    Returns:
        int32 tensor `[B]`.
    """
    lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
    if not ON_TENSORFLOW:
        return lengths
    tf.debugging.assert_equal(mask, tf.sequence_mask(lengths, ops.shape(mask)[1]), message=message)
    return lengths


def _reverse_rows(x, lengths):
    """[T, B, ...] -> each row's first ``lengths[b]`` steps reversed, its padded steps left where they are."""
    return reverse_rows(x, lengths, seq_axis=0)


def _run_all_steps(cell: ProjectedLSTMCell, weights, xs, mask, hold_state: bool, c, h, out_tas):
    """The plain loop: the input-to-gate products of all steps at once, read from a TensorArray (whose gradient is
    per step), for a trainable layer. Arguments and result as in ``lstm_inference.run_chunked``."""
    steps = tf.shape(xs[0])[0]
    gate_reads = [
        tf.TensorArray(g.dtype, size=steps).unstack(g).read
        for g in (cell.input_gates(x, w) for x, w in zip(xs, weights))
    ]
    return run_steps(cell, weights, gate_reads, mask, hold_state, 0, steps, c, h, out_tas)


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
        fast_inference: `"auto"`, `True` or `False`, like Keras' `LSTM(use_cudnn=...)`: `"auto"` runs a frozen
            layer (`trainable=False`) on the fast path of `elmo_keras.layers.lstm_inference` (input-to-gate
            products a few steps at a time: less memory, faster GEMMs) and a trainable one on the plain loop;
            `True` always takes the fast path (a trainable layer is then an error), `False` never. The same
            numbers either way. Not saved in the config (a runtime choice). Defaults to `"auto"`.
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
        fast_inference: str | bool = "auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not (fast_inference == "auto" or isinstance(fast_inference, bool)):
            raise ValueError(f"fast_inference must be 'auto', True or False, got {fast_inference!r}")
        self.num_layers = num_layers
        self.dim = dim
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections
        self.fast_inference = fast_inference
        self.cell = ProjectedLSTMCell(cell_clip, proj_clip)

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

    @property
    def fast_path(self) -> bool:
        """Whether :meth:`call` takes the fast path now: ``fast_inference`` (``"auto"``: when frozen)."""
        if self.fast_inference is True and self.trainable:
            raise ValueError(
                "fast_inference=True is for a frozen ProjectedBiLSTM (its input-to-gate products are read by "
                "indexing, whose gradient is dense over all steps): set trainable=False, or use 'auto'"
            )
        return self.fast_inference is True or (self.fast_inference == "auto" and not self.trainable)

    def zero_state(self, batch_size) -> list:
        """Zero initial state.

        Args:
            batch_size: int or int32 scalar tensor, the rows.

        Returns:
            A list with one `(c [2, batch_size, dim], h [2, batch_size, projection_dim])` pair per layer.
        """
        return [
            (
                ops.zeros((2, batch_size, self.dim), "float32"),
                ops.zeros((2, batch_size, self.projection_dim), self.compute_dtype),
            )
            for _ in range(self.num_layers)
        ]

    def _direction_weights(self, k: int, direction: int) -> StepWeights:
        """The :class:`StepWeights` (W_x [P, 4D], W_h [P, 4D], b [4D], W_P [D, P]) of layer ``k``, one direction, in
        the compute dtype."""
        p, dtype = self.projection_dim, self.compute_dtype
        kernel = ops.cast(self.kernels[k][direction], dtype)
        return StepWeights(
            kernel[:p],
            kernel[p:],
            ops.cast(self.biases[k][direction], dtype),
            ops.cast(self.projections[k][direction], dtype),
        )

    def call(self, inputs, mask, initial_state=None, return_final_state: bool = True):
        return self._call(inputs, mask, initial_state, return_final_state)

    def _call(self, inputs, mask, initial_state=None, return_final_state: bool = True, step_weights=None):
        """:meth:`call`, for ``BiLM``'s inference path: ``step_weights``, optional, a snapshot from
        ``lstm_inference.transposed_step_weights`` (then the fast path on it, whatever ``fast_inference``)."""
        x = ops.transpose(inputs, (1, 0, 2))  # [T, B, P]
        mask = ops.cast(mask, "bool")
        lengths = prefix_lengths(  # each row read backwards from its own last step needs padding last
            mask, "elmo_keras: ProjectedBiLSTM's mask must be True for each row's first steps, False after them"
        )
        m = ops.transpose(mask, (1, 0))[..., None]  # [T, B, 1]
        xs = [x, _reverse_rows(x, lengths)]  # processing order of each direction: real steps first
        if initial_state is None:
            initial_state = self.zero_state(ops.shape(inputs)[0])
        if step_weights is not None:  # BiLM's inference path: the fast path, on a transposed snapshot
            cell, run = lstm_inference.TransposedLSTMCell(self.cell_clip, self.proj_clip), lstm_inference.run_chunked
        else:
            cell, run = self.cell, (lstm_inference.run_chunked if self.fast_path else _run_all_steps)
        outputs, final_state = [], []
        for k in range(self.num_layers):
            c0, h0 = initial_state[k]
            c, h = ops.unstack(ops.cast(c0, "float32"), 2), ops.unstack(ops.cast(h0, self.compute_dtype), 2)
            weights = [self._direction_weights(k, d) for d in (0, 1)] if step_weights is None else step_weights[k]
            if ON_TENSORFLOW:
                out_tas = [tf.TensorArray(h[0].dtype, size=tf.shape(x)[0]) for _ in (0, 1)]
                c, h, out_tas = run(cell, weights, xs, m, return_final_state, c, h, out_tas)
                h_seqs = [ta.stack() for ta in out_tas]  # per direction [T, B, P], in processing order
                for h_seq in h_seqs:
                    h_seq.set_shape([None, None, self.projection_dim])
            else:  # JAX, PyTorch: one scan over all steps, the same cell
                gates = [cell.input_gates(x_d, w) for x_d, w in zip(xs, weights)]
                c, h, h_seqs = scan_steps(cell, weights, gates, m, return_final_state, c, h)
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
