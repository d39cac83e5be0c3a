"""The frozen-inference fast path of :class:`~elmo_keras.layers.ProjectedBiLSTM` (``fast_inference="auto"`` takes
it for a frozen layer). Same equations (:mod:`elmo_keras.layers.lstm_cell`), same numbers as the plain loop; two
differences, both for speed and memory:

- chunked input-to-gate GEMMs: the products ``x W_x + b`` of :func:`chunk_steps` steps at a time, read by
  indexing, so a long batch never holds ``[T, B, 4D]`` of them and each GEMM has at most ``GEMM_ROWS`` rows
  (or B). A trainable layer cannot do this: indexing a loop-invariant tensor gives a dense ``[T, B, 4D]``
  gradient per step, where the plain loop's TensorArray gives one per step.
- the transposed step layout (optional): a caller that runs a frozen LSTM many times (``ElmoEmbedder``) makes a
  snapshot of its per-step weights transposed, W_x^T and W_h^T ``[4D, P]`` and W_P^T ``[P, D]``
  (:func:`transposed_step_weights`); products on them are ``W^T x^T``, turned back. Where this pays:
  :func:`transposed_layout_pays`.

The constants were measured; their measurements are in DESIGN.md and benchmarks/README.md.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.layers.lstm_cell import ProjectedLSTMCell, StepWeights, run_steps

#: most rows (steps x batch) of a frozen LSTM's input-to-gate GEMMs
GEMM_ROWS = 96
#: W_h size (bytes) from which the per-step GEMMs run faster on transposed weights, in bfloat16
TRANSPOSED_FROM_BYTES = 8 << 20


def transposed_layout_pays(dim: int, projection_dim: int, dtype: str) -> bool:
    """Whether the per-step GEMMs of an LSTM of this size run faster on transposed weights: in bfloat16, where W_h
    has at least ``TRANSPOSED_FROM_BYTES`` (the original size; never in float32).

    Args:
        dim: int, the LSTM's cell size D.
        projection_dim: int, its projection size P.
        dtype: str, its compute dtype.

    Returns:
        bool.

    Example:

    ```python
    from elmo_keras.layers.lstm_inference import transposed_layout_pays

    assert transposed_layout_pays(4096, 512, "bfloat16") and not transposed_layout_pays(4096, 512, "float32")
    ```
    """
    return (
        keras.backend.standardize_dtype(dtype) == "bfloat16"
        and projection_dim * 4 * dim * np.dtype(dtype).itemsize >= TRANSPOSED_FROM_BYTES
    )


def chunk_steps(batch):
    """Steps whose input-to-gate products the fast path computes in one GEMM per direction: as many as keep it
    within ``GEMM_ROWS`` rows, at least one.

    Args:
        batch: int or int32 scalar tensor, the batch size.

    Returns:
        int32 scalar tensor.

    Example:

    ```python
    from elmo_keras.layers.lstm_inference import GEMM_ROWS, chunk_steps

    assert int(chunk_steps(4)) == GEMM_ROWS // 4 and int(chunk_steps(500)) == 1
    ```
    """
    return tf.maximum(1, GEMM_ROWS // tf.maximum(batch, 1))


def transposed_step_weights(lstm) -> list:
    """A snapshot of a built :class:`~elmo_keras.layers.ProjectedBiLSTM`'s per-step weights in the transposed layout,
    in its compute dtype: per layer, per direction, a :class:`~elmo_keras.layers.lstm_cell.StepWeights` of W_x^T
    ``[4D, P]``, W_h^T ``[4D, P]``, b ``[4D]`` and W_P^T ``[P, D]``. Taken now: make it again after the weights
    change.

    Args:
        lstm: a built `ProjectedBiLSTM`.

    Returns:
        A list (layers) of lists (directions) of `StepWeights`.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek
    from elmo_keras.layers.lstm_inference import transposed_step_weights

    lstm = ek.ProjectedBiLSTM(num_layers=1, dim=8, projection_dim=4)
    lstm.build()
    snapshot = transposed_step_weights(lstm)
    assert np.array_equal(snapshot[0][1].recurrent_kernel, np.asarray(lstm.kernels[0])[1, 4:].T)
    ```
    """
    return [
        [
            StepWeights(
                tf.transpose(w.input_kernel), tf.transpose(w.recurrent_kernel), w.bias, tf.transpose(w.projection)
            )
            for w in (lstm._direction_weights(k, d) for d in (0, 1))
        ]
        for k in range(lstm.num_layers)
    ]


class TransposedLSTMCell(ProjectedLSTMCell):
    """:class:`~elmo_keras.layers.lstm_cell.ProjectedLSTMCell` on the weights of :func:`transposed_step_weights`:
    the same products, with each kernel stored as ``[N, K]`` instead of ``[K, N]``.

    Args:
        cell_clip: float, as `ProjectedLSTMCell`'s. Defaults to `None`.
        proj_clip: float, as `ProjectedLSTMCell`'s. Defaults to `None`.
    """

    def input_gates(self, x, weights: StepWeights):
        """The input-to-gate products of many steps, on W_x^T.

        Args:
            x: float tensor `[T, B, P]`.
            weights: a `StepWeights` from `transposed_step_weights`.

        Returns:
            `x W_x + b`, `[T, B, 4D]`.
        """
        return tf.einsum("tbp,gp->tbg", x, weights.input_kernel) + weights.bias

    def matmul(self, x, kernel):
        """A per-step product on a kernel stored transposed: ``W^T x^T``, turned back.

        Args:
            x: float tensor `[B, K]`.
            kernel: W_h^T or W_P^T, `[N, K]`.

        Returns:
            `x kernel^T`, `[B, N]`.
        """
        return tf.transpose(tf.matmul(kernel, x, transpose_b=True))


def run_chunked(cell: ProjectedLSTMCell, weights, xs, mask, hold_state: bool, c, h, out_tas):
    """One layer, both directions, the input-to-gate products ``chunk_steps(B)`` steps at a time.

    Args:
        cell: the `ProjectedLSTMCell`, or a `TransposedLSTMCell` for `transposed_step_weights`.
        weights: per direction, a `StepWeights` in the cell's layout.
        xs: per direction, the layer inputs `[T, B, P]` in processing order (each row's real steps first).
        mask: bool `[T, B, 1]`.
        hold_state: as in `elmo_keras.layers.lstm_cell.run_steps`.
        c: per direction, the initial cell state `[B, D]`.
        h: per direction, the initial output `[B, P]`.
        out_tas: per direction, a `tf.TensorArray` of `T` outputs `[B, P]`.

    Returns:
        `(c, h, out_tas)` after the last step.
    """
    steps = tf.shape(xs[0])[0]
    length = chunk_steps(tf.shape(xs[0])[1])

    def chunk(start, c, h, out_tas):
        end = tf.minimum(start + length, steps)
        gates = [cell.input_gates(x[start:end], w) for x, w in zip(xs, weights)]
        reads = [lambda t, g=g: g[t - start] for g in gates]
        return (end, *run_steps(cell, weights, reads, mask, hold_state, start, end, c, h, out_tas))

    # parallel_iterations=1: one chunk at a time (otherwise the loop runs ahead and holds every chunk's gates)
    _, c, h, out_tas = tf.while_loop(lambda start, *_: start < steps, chunk, (0, c, h, out_tas), parallel_iterations=1)
    return c, h, out_tas
