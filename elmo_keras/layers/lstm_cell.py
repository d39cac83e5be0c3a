"""One step of a projected LSTM (bilm-tf's ``LSTMCell(num_proj=...)``): the equations, and the per-step loop that
runs them for both directions.

Cell (TF gate order i, j, f, o; forget bias +1)::

    [i, j, f, o] = x_t W_x + h_{t-1} W_h + b
    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_P, proj_clip)

The weights live on :class:`~elmo_keras.layers.ProjectedBiLSTM` (in the released layout, so that weight files and
``.keras`` files keep their shape); the cell only computes with them. This module is the readable reference that
:mod:`elmo_keras.layers.lstm` (the sequence layer) and :mod:`elmo_keras.layers.lstm_inference` (its frozen fast
path) share. On the TensorFlow backend the loop is a ``tf.while_loop`` over TensorArrays (:func:`run_steps`) and the
equations use TensorFlow ops directly; on the other Keras backends (JAX, PyTorch) the same equations run on
``keras.ops`` in a ``keras.ops.scan`` (:func:`scan_steps`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import tensorflow as tf
from keras import ops

#: the TensorFlow backend keeps its own ops (its graphs, speed and numbers as tuned); other backends use keras.ops
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"
#: the math of the equations: ``tf`` or ``keras.ops`` (the same names and signatures for what the cell uses)
_math = tf if ON_TENSORFLOW else ops


class StepWeights(NamedTuple):
    """One direction of one layer, in the compute dtype: ``input_kernel`` W_x [P, 4D], ``recurrent_kernel`` W_h
    [P, 4D], ``bias`` b [4D] and ``projection`` W_P [D, P] (the fast path's transposed snapshot holds W_x^T, W_h^T
    and W_P^T in the same fields)."""

    input_kernel: Any
    recurrent_kernel: Any
    bias: Any
    projection: Any


def clip(x, limit: float | None):
    """``x`` clipped to [-limit, limit]: one ClipByValue op (``tf.clip_by_value`` is two, minimum then maximum, the
    same numbers; in the per-step loop every op counts).

    Args:
        x: float tensor.
        limit: float, or `None` for no clipping.

    Returns:
        A tensor like `x`.
    """
    if limit is None:
        return x
    if not ON_TENSORFLOW:
        return ops.clip(x, -limit, limit)
    return tf.raw_ops.ClipByValue(
        t=x, clip_value_min=tf.constant(-limit, x.dtype), clip_value_max=tf.constant(limit, x.dtype)
    )


class ProjectedLSTMCell:
    """One step of a projected LSTM, with the weights given to each call (see :class:`StepWeights`).

    Matmuls run in the weights' dtype (bfloat16 under mixed precision); the cell state stays float32.

    Args:
        cell_clip: float, clip the cell state to `[-cell_clip, cell_clip]`; `None` for no clipping.
            Defaults to `None`.
        proj_clip: float, clip the projected output likewise; `None` for no clipping. Defaults to `None`.

    Call arguments:
        input_gates: float tensor `[batch, 4 * dim]`, `x_t W_x + b` (see `input_gates`).
        c: float32 tensor `[batch, dim]`, the previous cell state.
        h: float tensor `[batch, projection_dim]`, the previous projected output.
        weights: a `StepWeights`.

    Returns:
        The new state `(c, h)`.

    Example:

    ```python
    import numpy as np
    from keras import ops
    from elmo_keras.layers.lstm_cell import ProjectedLSTMCell, StepWeights

    rng = np.random.default_rng(0)
    p, d = 2, 3
    shapes = [(p, 4 * d), (p, 4 * d), (4 * d,), (d, p)]  # W_x, W_h, b, W_P
    weights = StepWeights(*(ops.convert_to_tensor(rng.normal(size=s).astype("float32")) for s in shapes))
    cell = ProjectedLSTMCell(cell_clip=3.0, proj_clip=3.0)
    x = ops.convert_to_tensor(rng.normal(size=(1, 4, p)).astype("float32"))  # [steps, batch, P]
    c, h = ops.zeros((4, d)), ops.zeros((4, p))
    c, h = cell(cell.input_gates(x, weights)[0], c, h, weights)
    assert h.shape == (4, p) and np.abs(h).max() <= 3.0
    ```
    """

    def __init__(self, cell_clip: float | None = None, proj_clip: float | None = None):
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip

    def input_gates(self, x, weights: StepWeights):
        """The input-to-gate products of many steps, in one GEMM.

        Args:
            x: float tensor `[T, B, P]`.
            weights: a `StepWeights`.

        Returns:
            `x W_x + b`, `[T, B, 4D]`.
        """
        return _math.einsum("tbp,pg->tbg", x, weights.input_kernel) + weights.bias

    def matmul(self, x, kernel):
        """A per-step product.

        Args:
            x: float tensor `[B, K]`.
            kernel: W_h or W_P, `[K, N]`.

        Returns:
            `x kernel`, `[B, N]`.
        """
        return _math.matmul(x, kernel)

    def __call__(self, input_gates, c, h, weights: StepWeights):
        gates = input_gates + self.matmul(h, weights.recurrent_kernel)
        i, j, f, o = _math.split(_math.cast(gates, "float32"), 4, axis=-1)
        c = clip(_math.sigmoid(f + 1.0) * c + _math.sigmoid(i) * _math.tanh(j), self.cell_clip)
        m = _math.cast(_math.sigmoid(o) * _math.tanh(c), weights.projection.dtype)
        return c, clip(self.matmul(m, weights.projection), self.proj_clip)


def run_steps(cell: ProjectedLSTMCell, weights, gate_reads, mask, hold_state: bool, start, end, c, h, out_tas):
    """Steps ``start`` to ``end`` of one layer, both directions in one loop (so that the executor's inter-op threads
    can run the two directions' GEMMs side by side). TensorFlow backend (see :func:`scan_steps` for the others).

    Args:
        cell: the `ProjectedLSTMCell` (or a subclass for another weight layout).
        weights: per direction, a `StepWeights`.
        gate_reads: per direction, a function of the step `t` giving its input gates `[B, 4D]`.
        mask: bool `[T, B, 1]`.
        hold_state: keep each row's state from its last real step on (for the final state); else padded steps
            update it freely, which no real output depends on.
        start: int32 scalar, the first step to run.
        end: int32 scalar, the step to stop before.
        c: per direction, the cell state `[B, D]` before step `start`.
        h: per direction, the output `[B, P]` before step `start`.
        out_tas: per direction, a `tf.TensorArray` of `[B, P]` outputs, written at each step.

    Returns:
        `(c, h, out_tas)` after step `end - 1`.
    """

    def body(t, c, h, out_tas):
        new_c, new_h, new_out = [], [], []
        for direction, direction_weights in enumerate(weights):
            c_t, h_t = cell(gate_reads[direction](t), c[direction], h[direction], direction_weights)
            if hold_state:
                c_t, h_t = tf.where(mask[t], c_t, c[direction]), tf.where(mask[t], h_t, h[direction])
            new_c.append(c_t)
            new_h.append(h_t)
            new_out.append(out_tas[direction].write(t, h_t))
        return t + 1, new_c, new_h, new_out

    return tf.while_loop(lambda t, *_: t < end, body, (start, c, h, out_tas))[1:]


def scan_steps(cell: ProjectedLSTMCell, weights, gates, mask, hold_state: bool, c, h):
    """All steps of one layer, both directions in one ``keras.ops.scan`` (``lax.scan`` on JAX, a Python loop on
    PyTorch): the loop of the backends other than TensorFlow, on the same cell as :func:`run_steps`.

    Args:
        cell: the `ProjectedLSTMCell`.
        weights: per direction, a `StepWeights`.
        gates: per direction, the input gates of all steps `[T, B, 4D]` (`cell.input_gates`).
        mask: bool `[T, B, 1]`.
        hold_state: as in `run_steps`.
        c: per direction, the cell state `[B, D]` before the first step.
        h: per direction, the output `[B, P]` before the first step.

    Returns:
        `(c, h, outputs)`: the state after the last step, and per direction the outputs `[T, B, P]`.

    Example:

    ```python
    import numpy as np
    from keras import ops
    from elmo_keras.layers.lstm_cell import ProjectedLSTMCell, StepWeights, scan_steps

    rng = np.random.default_rng(0)
    p, d, steps, batch = 2, 3, 4, 1
    shapes = [(p, 4 * d), (p, 4 * d), (4 * d,), (d, p)]
    weights = [StepWeights(*(ops.convert_to_tensor(rng.normal(size=s).astype("float32")) for s in shapes))] * 2
    cell = ProjectedLSTMCell(cell_clip=3.0, proj_clip=3.0)
    x = ops.convert_to_tensor(rng.normal(size=(steps, batch, p)).astype("float32"))
    gates = [cell.input_gates(x, w) for w in weights]
    mask = ops.ones((steps, batch, 1), "bool")
    zeros_c, zeros_h = ops.zeros((batch, d)), ops.zeros((batch, p))
    c, h, outputs = scan_steps(cell, weights, gates, mask, False, [zeros_c] * 2, [zeros_h] * 2)
    assert tuple(outputs[0].shape) == (steps, batch, p)
    np.testing.assert_allclose(outputs[0][-1], h[0])
    ```
    """

    def step(carry, inputs):
        c, h = carry
        step_gates, step_mask = inputs
        new_c, new_h = [], []
        for direction, direction_weights in enumerate(weights):
            c_t, h_t = cell(step_gates[direction], c[direction], h[direction], direction_weights)
            if hold_state:
                c_t = ops.where(step_mask, c_t, c[direction])
                h_t = ops.where(step_mask, h_t, h[direction])
            new_c.append(c_t)
            new_h.append(h_t)
        return (new_c, new_h), (new_c, new_h)  # outputs shaped like the carry, as TensorFlow's ops.scan needs

    (c, h), (_, outputs) = ops.scan(step, (list(c), list(h)), (list(gates), mask))
    return c, h, outputs
