"""A multi-label head for very many labels: sampled negatives in training, every label's score at prediction.

The dense multi-label head (a ``Dense(L, sigmoid)`` over the pooled text vector) costs ``B * L * W`` per step
forward and backward, and Adam updates all of its ``L * W`` weights every step: at 1M labels it does not fit a
24 GB machine (``docs/extreme_multilabel.md``). :class:`SampledLabelScores` factors it: the pooled vector
`[B, W]` is projected to a small width ``label_dim`` (d), and label l has a row of a `[L, d]` table plus a bias.

- **Prediction** (``predict``, ``evaluate``, validation, a saved or exported model): every label's sigmoid
  score, `[B, L]`, as the dense head gives it.
- **Training** (:class:`SampledLabelModel`'s ``train_step``): each row's true labels, plus ``negatives`` labels
  drawn uniformly at random (with replacement) once per batch and shared by its rows. The loss is an unbiased
  estimate of the binary cross-entropy summed over all L labels (:meth:`SampledLabelScores.sampled_loss`), so
  it trains towards the same probabilities as the dense head, with noise instead of the cost. Only the rows of
  the sampled and true labels enter the step: their gradient is a ``tf.IndexedSlices``.
- **The optimizer**: Keras 3's ``Adam`` turns an ``IndexedSlices`` gradient into a dense `[L, d]` one (its
  ``update_step`` subtracts it from the dense moment), so every step would read and write ``3 * L * d`` floats.
  :class:`LazyAdam` updates only the rows in the gradient, as TF Addons' LazyAdam and PyTorch's SparseAdam do.

The step is the TensorFlow backend's (``tf.GradientTape``), as the head's ``tf.IndexedSlices`` are.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops

from elmo_keras.errors import InputError
from elmo_keras.saving import serializable
from elmo_keras.utils.backend import require_tensorflow


def gather_rows(variable, rows):
    """The ``rows`` of a TensorFlow ``variable`` `[N, ...]`, read as rows (``ResourceGather``).

    Reading the whole variable first (what ``keras.ops.take`` does) would keep a second reference to its buffer,
    so that a later scatter into the variable in the same step copies all N rows first (copy-on-write): 15 ms per
    100 MB on 2 cores, every step. The gradient with respect to ``variable`` is a ``tf.IndexedSlices``.

    Args:
        variable: a Keras variable on the TensorFlow backend.
        rows: int `[R]` or `[B, K]` row indices.

    Returns:
        `rows.shape + variable.shape[1:]`.
    """
    return tf.gather(variable.value, rows)


def check_label_sampling(label_sampling: int | None, label_dim: int, multi_label: bool) -> None:
    """Raise an :class:`~elmo_keras.errors.InputError` unless the sampled head's arguments make sense.

    Args:
        label_sampling: negative labels sampled per batch, or ``None`` for the dense head.
        label_dim: the width of the label table.
        multi_label: whether the classifier is multi-label.
    """
    if label_sampling is None:
        return
    if not multi_label:
        raise InputError("label_sampling is for multi-label classifiers: pass multi_label=True (or drop it)")
    for name, value in (("label_sampling", label_sampling), ("label_dim", label_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be an int >= 1, got {value!r}")
    require_tensorflow("label_sampling", "Use the dense multi-label head (label_sampling=None).")


@serializable
class SampledLabelScores(keras.layers.Layer):
    """Multi-label scores through a label table: sigmoid((x P + p) T^T + c), trained on sampled labels.

    ``P`` `[W, d]` and ``p`` `[d]` project the input; ``T`` `[L, d]` (``label_table``) and ``c`` `[L]`
    (``label_bias``) hold one row and one bias per label. ``c`` starts at -log(L), so every label starts at a
    probability of about 1/L: a label that training has not sampled yet does not outrank those it has learned.
    A call gives every label's score; :meth:`sampled_loss` is the training loss (see the module's docstring).

    Args:
        num_labels: L.
        negatives: S, the labels drawn uniformly at random per batch as negatives.
        label_dim: d, the width of the projection and of the label table.
        seed: the seed of the negatives' draws, or ``None`` (Keras' global seed).
        **kwargs: base ``keras.layers.Layer`` arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: float `[B, W]`, the pooled text vectors.

    Returns:
        float `[B, L]` sigmoid scores.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.sampled_labels import SampledLabelScores

    scores = SampledLabelScores(num_labels=1000, negatives=16, label_dim=8)
    assert scores(np.ones((2, 4), "float32")).shape == (2, 1000)
    loss = scores.sampled_loss(np.ones((2, 4), "float32"), np.array([[3, -1], [7, 9]]))
    assert float(loss) > 0
    ```
    """

    activation = staticmethod(keras.activations.sigmoid)  # predict / evaluate read its name: probabilities

    def __init__(self, num_labels: int, negatives: int, label_dim: int = 256, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.num_labels, self.negatives, self.label_dim, self.seed = num_labels, negatives, label_dim, seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        self.projection = self.add_weight((input_shape[-1], self.label_dim), "glorot_uniform", name="projection")
        self.projection_bias = self.add_weight((self.label_dim,), "zeros", name="projection_bias")
        self.label_table = self.add_weight((self.num_labels, self.label_dim), "glorot_uniform", name="label_table")
        prior = keras.initializers.Constant(-math.log(self.num_labels))
        self.label_bias = self.add_weight((self.num_labels,), prior, name="label_bias")

    def project(self, inputs):
        """Pooled vectors `[B, W]` -> their projections `[B, d]`, in the compute dtype.

        Args:
            inputs: float `[B, W]`.

        Returns:
            float `[B, d]`.
        """
        return ops.matmul(ops.cast(inputs, self.compute_dtype), self.projection) + self.projection_bias

    def call(self, inputs):
        logits = ops.einsum("bd,ld->bl", self.project(inputs), self.label_table) + self.label_bias
        return self.activation(logits)

    def sampled_loss(self, inputs, labels, sample_weight=None):
        """The binary cross-entropy over all L labels, summed per row, estimated from each row's true labels and
        S negatives drawn uniformly (with replacement) for the whole batch; mean over rows.

        A row's loss is ``sum_{l in y} softplus(-z_l) + (L / S) sum_{s} [l_s not in y] softplus(z_{l_s})``, with
        ``z`` the logits. Its expectation over the draws is ``sum_{l=1..L}`` of the binary cross-entropy, exactly:
        the negatives' term is an importance-weighted sample of the sum over the labels the row does not have
        (a drawn label that is one of the row's true labels is left out of it). A label listed twice in a row
        counts once. Only ``B * K + S`` rows of the table are read: their gradient is a ``tf.IndexedSlices``.

        Args:
            inputs: float `[B, W]`, the pooled text vectors.
            labels: int `[B, K]`, label indices padded with -1 (:func:`~elmo_keras.tasks.metrics.pad_label_indices`).
            sample_weight: float `[B]` weights of the rows, or ``None``.

        Returns:
            float32 scalar.
        """
        labels = ops.convert_to_tensor(labels)
        if "int" not in str(labels.dtype) or len(labels.shape) != 2:
            raise InputError(
                f"the sampled multi-label head trains on label indices int [batch, K] padded with -1 "
                f"(pad_label_indices), got {labels.dtype} {tuple(labels.shape)}"
            )
        labels = ops.cast(labels, "int32")
        inputs = ops.convert_to_tensor(inputs)
        if not self.built:
            self.build(inputs.shape)
        h = self.project(inputs)  # [B, d]
        rows = ops.maximum(labels, 0)
        width = ops.shape(labels)[1]
        earlier = ops.triu(ops.ones((width, width)), k=1) > 0  # [j, k]: j < k
        repeated = ops.any((labels[:, :, None] == labels[:, None, :]) & earlier, axis=1)  # [B, K]
        positive = ops.cast((labels >= 0) & ~repeated, "float32")
        z_pos = ops.einsum("bd,bkd->bk", h, gather_rows(self.label_table, rows))
        z_pos = ops.cast(z_pos + gather_rows(self.label_bias, rows), "float32")
        drawn = keras.random.randint((self.negatives,), 0, self.num_labels, seed=self.seed_generator, dtype="int32")
        z_neg = ops.einsum("bd,sd->bs", h, gather_rows(self.label_table, drawn))
        z_neg = ops.cast(z_neg + gather_rows(self.label_bias, drawn), "float32")
        negative = ops.cast(~ops.any(drawn[None, :, None] == labels[:, None, :], axis=-1), "float32")  # [B, S]
        row_loss = ops.sum(positive * ops.softplus(-z_pos), axis=1) + (self.num_labels / self.negatives) * ops.sum(
            negative * ops.softplus(z_neg), axis=1
        )
        if sample_weight is not None:
            row_loss = row_loss * ops.reshape(ops.cast(sample_weight, "float32"), (-1,))
        return ops.mean(row_loss)

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "negatives": self.negatives,
            "label_dim": self.label_dim,
            "seed": self.seed,
        }


@serializable
class SampledLabelModel(keras.Model):
    """A functional model whose output layer is a :class:`SampledLabelScores`: trained on sampled labels.

    Calls, ``predict``, ``evaluate`` and validation give every label's score through the whole graph.
    ``train_step`` runs the graph up to the scores layer's input (a functional sub-model sharing this model's
    layers) and minimises :meth:`SampledLabelScores.sampled_loss` plus the layers' own losses, so no `[B, L]`
    tensor is made. The training logs hold the loss only: the compiled metrics rank all L labels, and are
    computed on validation data and by ``evaluate``. Built as a functional ``keras.Model``: ``(inputs, outputs)``,
    ``outputs`` made by a :class:`SampledLabelScores`.

    Example:

    ```python
    import keras
    import numpy as np
    from elmo_keras.tasks.sampled_labels import LazyAdam, SampledLabelModel, SampledLabelScores

    x = keras.Input((4,))
    model = SampledLabelModel(x, SampledLabelScores(1000, negatives=16, label_dim=8, name="scores")(x))
    model.compile(LazyAdam(1e-2), jit_compile=False)
    model.fit(np.ones((8, 4), "float32"), np.array([[1, 2]] * 8), epochs=1, verbose=0)
    assert model.predict(np.ones((1, 4), "float32"), verbose=0).shape == (1, 1000)
    ```
    """

    def _sampled_parts(self) -> tuple[keras.Model, SampledLabelScores]:
        """(inputs -> the scores layer's input, the scores layer), found through this model's output."""
        parts = self.__dict__.get("_sampled_parts_cache")  # a plain attribute: Keras must not track the sub-model
        if parts is None:
            history = self.outputs[0]._keras_history  # the node that made the output, in this model's graph
            scores = history.operation
            if not isinstance(scores, SampledLabelScores):
                raise InputError(f"{self.name}'s output layer is {type(scores).__name__}, not SampledLabelScores")
            pooled = scores._inbound_nodes[history.node_index].input_tensors[0]
            parts = keras.Model(self.input, pooled, name=f"{self.name}_pooled"), scores
            self.__dict__["_sampled_parts_cache"] = parts
        return parts

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        pooled_model, scores = self._sampled_parts()
        if self._compile_metrics is not None and not self._compile_metrics.built:  # for fit's end-of-epoch logs,
            self._compile_metrics.build(y, self.outputs[0])  # which read every metric; only test steps update them
        with tf.GradientTape() as tape:
            pooled = pooled_model(x, training=True)
            loss = scores.sampled_loss(pooled, y, sample_weight)
            for extra in self.losses:  # e.g. a mix's weight penalty
                loss = loss + ops.cast(ops.sum(extra), "float32")
            self._loss_tracker.update_state(loss, sample_weight=ops.shape(pooled)[0])
            scaled = self.optimizer.scale_loss(loss)
        weights = self.trainable_weights
        self.optimizer.apply(tape.gradient(scaled, weights), weights)
        return {"loss": self._loss_tracker.result()}


@serializable
class LazyAdam(keras.optimizers.Adam):
    """Adam that updates only the rows of a sparse gradient (``tf.IndexedSlices``, from ``take``/``gather`` of a
    table's rows): their two moments and their values; every other row, and its moments, stays as it is.

    Dense gradients get Keras' Adam update. For a row that is in every step's gradient the two are the same; a row
    that is left out does not decay its moments or move by its momentum (dense Adam would), which is what makes a
    step cost ``rows * d`` instead of ``L * d``. Repeated indices are summed first. The bias correction counts
    the optimizer's steps, as Adam's does. It takes ``keras.optimizers.Adam``'s arguments.

    Example:

    ```python
    import keras
    import numpy as np
    import tensorflow as tf
    from elmo_keras.tasks.sampled_labels import LazyAdam

    table = keras.Variable(np.ones((5, 2), "float32"))
    optimizer = LazyAdam(0.1)
    optimizer.apply([tf.IndexedSlices(tf.ones((1, 2)), tf.constant([3]))], [table])
    assert np.flatnonzero((keras.ops.convert_to_numpy(table) != 1).any(axis=1)).tolist() == [3]
    ```
    """

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        rows, position = tf.unique(gradient.indices)
        values = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(rows)[0])
        values = ops.cast(values, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, variable.dtype), ops.cast(self.beta_2, variable.dtype)
        alpha = ops.cast(learning_rate, variable.dtype) * ops.sqrt(1 - beta_2**step) / (1 - beta_1**step)
        index = self._get_variable_index(variable)
        m = beta_1 * gather_rows(self._momentums[index], rows) + (1 - beta_1) * values
        v = beta_2 * gather_rows(self._velocities[index], rows) + (1 - beta_2) * ops.square(values)
        self.assign(self._momentums[index], tf.IndexedSlices(m, rows))
        self.assign(self._velocities[index], tf.IndexedSlices(v, rows))
        if self.amsgrad:
            v = ops.maximum(gather_rows(self._velocity_hats[index], rows), v)
            self.assign(self._velocity_hats[index], tf.IndexedSlices(v, rows))
        self.assign_sub(variable, tf.IndexedSlices(alpha * m / (ops.sqrt(v) + self.epsilon), rows))
