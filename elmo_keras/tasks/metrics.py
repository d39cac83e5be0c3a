"""Multi-label losses and metrics that take multi-hot labels or padded label indices.

Labels are either multi-hot floats [B, L], or integer label indices [B, K] padded with -1
(:func:`pad_label_indices` makes them), which suits label spaces of 10,000+ labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from elmo_keras.saving import serializable


def pad_label_indices(labels: Sequence[Sequence[int]], num_labels: int | None = None) -> np.ndarray:
    """Lists of label indices -> int32 [N, max_labels] padded with -1 (checked against ``num_labels``).

    Args:
        labels: one list of label indices per example.
        num_labels: the number of labels, or ``None`` not to check the upper bound.

    Returns:
        int32 array `[N, max(1, max_labels)]`.

    Example:

    >>> from elmo_keras.tasks.metrics import pad_label_indices
    >>> pad_label_indices([[0, 2], [1], []]).tolist()
    [[0, 2], [1, -1], [-1, -1]]
    """
    labels = [list(row) for row in labels]
    width = max((len(row) for row in labels), default=0)
    out = np.full((len(labels), max(width, 1)), -1, dtype=np.int32)
    for i, row in enumerate(labels):
        for j, label in enumerate(row):
            if (
                not isinstance(label, (int, np.integer))
                or label < 0
                or (num_labels is not None and label >= num_labels)
            ):
                raise ValueError(f"label {label!r} of example {i} is not an index in [0, {num_labels})")
            out[i, j] = label
    return out


def to_multi_hot(y_true, num_labels: int):
    """Integer indices [B, K] (-1 = none) or multi-hot [B, L] -> float32 multi-hot [B, num_labels].

    Args:
        y_true: padded label indices (integers) or multi-hot rows (floats).
        num_labels: L.

    Returns:
        float32 tensor `[B, num_labels]`.
    """
    if "int" in str(y_true.dtype):
        indices = ops.cast(y_true, "int32")
        tf.debugging.assert_less(
            indices,
            num_labels,
            message=(
                f"elmo_keras: integer labels are label indices (padded with -1) and must be < {num_labels}; "
                "pass multi-hot labels as floats"
            ),
        )
        tf.debugging.assert_greater_equal(indices, -1, message="elmo_keras: label indices must be >= -1")
        hot = ops.one_hot(ops.where(indices >= 0, indices, num_labels), num_labels + 1)  # -1 -> extra column
        return ops.minimum(ops.sum(hot, axis=1), 1.0)[:, :num_labels]
    return ops.cast(y_true, "float32")


@serializable
class MultiLabelBinaryCrossentropy(keras.losses.Loss):
    """Binary cross-entropy on sigmoid outputs [B, L]; labels multi-hot or padded indices.

    Args:
        num_labels: L.
        name: the loss's name.
        **kwargs: base ``keras.losses.Loss`` arguments, such as ``reduction``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.metrics import MultiLabelBinaryCrossentropy

    loss = MultiLabelBinaryCrossentropy(num_labels=3)
    value = loss(np.array([[0, -1]]), np.array([[0.9, 0.1, 0.1]]))  # label 0, as padded indices
    assert 0 < float(value) < 0.2
    ```
    """

    def __init__(self, num_labels: int, name: str = "multi_label_bce", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Convert before Loss.__call__ casts y_true to float (which would hide integer label indices).
        return super().__call__(to_multi_hot(ops.convert_to_tensor(y_true), self.num_labels), y_pred, sample_weight)

    def call(self, y_true, y_pred):
        return keras.losses.binary_crossentropy(y_true, ops.cast(y_pred, "float32"))

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels}


@serializable
class MultiLabelF1(keras.metrics.Metric):
    """Micro or macro F1 over the epoch, predictions = scores >= threshold (F1 of a label with no true and
    no predicted example counts as 0, like scikit-learn's ``zero_division=0``).

    Args:
        num_labels: L.
        average: ``"micro"`` or ``"macro"``.
        threshold: scores at or above it count as predicted.
        name: the metric's name, or ``None`` for ``"micro_f1"`` / ``"macro_f1"``.
        **kwargs: base ``keras.metrics.Metric`` arguments, such as ``dtype``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.metrics import MultiLabelF1

    f1 = MultiLabelF1(num_labels=3)
    f1.update_state(np.array([[0, 2]]), np.array([[0.9, 0.2, 0.7]]))
    assert float(f1.result()) == 1.0
    ```
    """

    def __init__(self, num_labels: int, average: str = "micro", threshold: float = 0.5, name=None, **kwargs):
        if average not in ("micro", "macro"):
            raise ValueError(f"average must be 'micro' or 'macro', got {average!r}")
        super().__init__(name=name or f"{average}_f1", **kwargs)
        self.num_labels, self.average, self.threshold = num_labels, average, threshold
        self.tp = self.add_variable((num_labels,), initializer="zeros", name="tp")
        self.fp = self.add_variable((num_labels,), initializer="zeros", name="fp")
        self.fn = self.add_variable((num_labels,), initializer="zeros", name="fn")

    def update_state(self, y_true, y_pred, sample_weight=None):
        target = to_multi_hot(y_true, self.num_labels)
        pred = ops.cast(ops.cast(y_pred, "float32") >= self.threshold, "float32")
        self.tp.assign_add(ops.sum(target * pred, axis=0))
        self.fp.assign_add(ops.sum((1 - target) * pred, axis=0))
        self.fn.assign_add(ops.sum(target * (1 - pred), axis=0))

    def result(self):
        if self.average == "micro":
            tp, fp, fn = ops.sum(self.tp), ops.sum(self.fp), ops.sum(self.fn)
            return ops.where(tp > 0, 2 * tp / ops.maximum(2 * tp + fp + fn, 1e-12), 0.0)
        per_label = ops.where(self.tp > 0, 2 * self.tp / ops.maximum(2 * self.tp + self.fp + self.fn, 1e-12), 0.0)
        return ops.mean(per_label)

    def reset_state(self):
        for v in (self.tp, self.fp, self.fn):
            v.assign(ops.zeros_like(v))

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "average": self.average,
            "threshold": self.threshold,
        }


@serializable
class PrecisionAtK(keras.metrics.Metric):
    """Mean over examples of (true labels among the k highest scores) / k.

    Args:
        num_labels: L.
        k: how many of the highest scores count.
        name: the metric's name, or ``None`` for ``"precision_at_K"``.
        **kwargs: base ``keras.metrics.Metric`` arguments, such as ``dtype``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.metrics import PrecisionAtK

    metric = PrecisionAtK(num_labels=4, k=2)
    metric.update_state(np.array([[1, -1]]), np.array([[0.1, 0.8, 0.5, 0.0]]))
    assert float(metric.result()) == 0.5
    ```
    """

    def __init__(self, num_labels: int, k: int = 5, name=None, **kwargs):
        super().__init__(name=name or f"precision_at_{k}", **kwargs)
        self.num_labels, self.k = num_labels, k
        self.total = self.add_variable((), initializer="zeros", name="total")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        target = to_multi_hot(y_true, self.num_labels)
        k = min(self.k, self.num_labels)
        _, top = ops.top_k(ops.cast(y_pred, "float32"), k)
        hits = ops.sum(ops.take_along_axis(target, top, axis=1), axis=1) / self.k
        self.total.assign_add(ops.sum(hits))
        self.count.assign_add(ops.cast(ops.shape(hits)[0], "float32"))

    def result(self):
        return self.total / ops.maximum(self.count, 1.0)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels, "k": self.k}
