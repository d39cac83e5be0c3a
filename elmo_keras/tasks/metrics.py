"""Multi-label losses and metrics that take multi-hot labels or padded label indices.

Labels are either multi-hot floats [B, L], or integer label indices [B, K] padded with -1
(:func:`pad_label_indices` makes them), which suits label spaces of 100,000+ labels: the Keras losses and metrics
build a batch's multi-hot rows by a scatter (`B * L` values), nothing larger.

The ranking scores of extreme multi-label classification, as the Extreme Classification Repository (Bhatia et al.)
reports them, come twice: NumPy functions (:func:`precision_at_k`, :func:`ndcg_at_k`, :func:`psp_at_k`,
:func:`label_propensities`, :func:`ranking_scores`) and stateful Keras metrics for training (:class:`PrecisionAtK`,
:class:`NDCGAtK`, :class:`PSPAtK`). Both rank a row's labels by score, ties broken by the lower label index first
(as ``tf.math.top_k`` does), so they agree on ties.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from elmo_keras.errors import InputError
from elmo_keras.saving import serializable

#: score values that :func:`top_k_labels` ranks at once (rows per step = this // labels), a bound on its memory
_RANK_VALUES = 1 << 22


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
                raise InputError(f"label {label!r} of example {i} is not an index in [0, {num_labels})")
            out[i, j] = label
    return out


def to_multi_hot(y_true, num_labels: int):
    """Integer indices [B, K] (-1 = none) or multi-hot [B, L] -> float32 multi-hot [B, num_labels].

    Indices are scattered into the rows (memory `B * L`, never `B * K * L`); a label given twice counts once.

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
        rows = ops.broadcast_to(
            ops.expand_dims(ops.arange(ops.shape(indices)[0], dtype="int32"), 1), ops.shape(indices)
        )
        where = ops.reshape(ops.stack([rows, ops.maximum(indices, 0)], axis=-1), (-1, 2))
        present = ops.reshape(ops.cast(indices >= 0, "float32"), (-1,))  # padding adds 0 to column 0
        hot = ops.scatter(where, present, (ops.shape(indices)[0], num_labels))
        return ops.minimum(hot, 1.0)
    return ops.cast(y_true, "float32")


@serializable
class MultiLabelBinaryCrossentropy(keras.losses.Loss):
    """Binary cross-entropy on sigmoid outputs [B, L]; labels multi-hot or padded indices.

    Args:
        num_labels: L.
        label_reduction: ``"mean"`` (the mean over the L labels, Keras' ``binary_crossentropy``) or ``"sum"``
            (their sum: what the sampled head estimates, see :mod:`elmo_keras.tasks.sampled_labels`).
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

    def __init__(self, num_labels: int, label_reduction: str = "mean", name: str = "multi_label_bce", **kwargs):
        if label_reduction not in ("mean", "sum"):
            raise InputError(f"label_reduction must be 'mean' or 'sum', got {label_reduction!r}")
        super().__init__(name=name, **kwargs)
        self.num_labels, self.label_reduction = num_labels, label_reduction

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Convert before Loss.__call__ casts y_true to float (which would hide integer label indices).
        return super().__call__(to_multi_hot(ops.convert_to_tensor(y_true), self.num_labels), y_pred, sample_weight)

    def call(self, y_true, y_pred):
        mean = keras.losses.binary_crossentropy(y_true, ops.cast(y_pred, "float32"))
        return mean * self.num_labels if self.label_reduction == "sum" else mean

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels, "label_reduction": self.label_reduction}


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


def label_propensities(label_counts, n: int, A: float = 0.55, B: float = 1.5) -> np.ndarray:
    """The propensity of each label, the chance that a true label is observed (Jain et al., 2016):
    ``p_l = 1 / (1 + C exp(-A log(N_l + B)))`` with ``C = (log n - 1) (B + 1)^A`` (natural logarithms).

    Rare labels get small propensities, so :func:`psp_at_k` rewards predicting them. ``A = 0.55, B = 1.5`` are the
    repository's values for most data sets (Amazon: 0.6, 2.6; Wikipedia: 0.5, 0.4). With ``n < e``, ``C`` would be
    negative: it is taken as 0 (every ``p_l = 1``, PSP@k = P@k normalised).

    Args:
        label_counts: `[L]` the number of training examples of each label (``N_l``).
        n: the number of training examples (``N``).
        A: the propensity model's ``A``.
        B: the propensity model's ``B``.

    Returns:
        float64 `[L]`, values in (0, 1].

    Example:

    >>> from elmo_keras.tasks.metrics import label_propensities
    >>> p = label_propensities([1000, 10, 0], n=10000)
    >>> bool(p[0] > p[1] > p[2] > 0)
    True
    """
    counts = np.asarray(label_counts, dtype=np.float64)
    if counts.ndim != 1 or not np.isfinite(counts).all() or (counts < 0).any():
        raise InputError(f"label_counts must be a 1-D array of counts >= 0, got shape {counts.shape}")
    if n < 1:
        raise InputError(f"n (the number of training examples) must be >= 1, got {n}")
    c = max(np.log(n) - 1.0, 0.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + c * np.exp(-A * np.log(counts + B)))


def top_k_labels(scores, k: int) -> np.ndarray:
    """The indices of each row's ``k`` highest scores, best first; equal scores rank the lower label index first
    (as ``tf.math.top_k``). Rows are ranked a block at a time (partition, not a full sort), so memory stays near
    the size of ``scores``.

    Args:
        scores: `[N, L]` finite scores.
        k: how many labels to keep (at most ``L`` are returned).

    Returns:
        int64 `[N, min(k, L)]`.

    Example:

    >>> import numpy as np
    >>> from elmo_keras.tasks.metrics import top_k_labels
    >>> top_k_labels(np.array([[0.1, 0.9, 0.9, 0.3]]), 3).tolist()
    [[1, 2, 3]]
    """
    scores = _checked_scores(scores, k)
    rows, num_labels = scores.shape
    k = min(k, num_labels)
    out = np.empty((rows, k), dtype=np.int64)
    step = max(1, _RANK_VALUES // num_labels)
    for start in range(0, rows, step):
        block = scores[start : start + step]
        kth = np.partition(block, num_labels - k, axis=1)[:, num_labels - k, None]  # the k-th highest value
        above = block > kth
        tied = block == kth
        chosen = above | (tied & (np.cumsum(tied, axis=1) <= k - above.sum(1, keepdims=True)))  # k per row
        labels = np.nonzero(chosen)[1].reshape(len(block), k)  # ascending label index within a row
        order = np.lexsort((labels, -np.take_along_axis(block, labels, axis=1)), axis=1)
        out[start : start + step] = np.take_along_axis(labels, order, axis=1)
    return out


def ranking_scores(
    ranked, labels, num_labels: int, ks: Sequence[int] = (1, 3, 5), propensities=None
) -> dict[str, float]:
    """P@k, nDCG@k (and PSP@k with ``propensities``) of ranked predictions, for each k in ``ks``.

    ``ranked`` holds each row's best labels first (:func:`top_k_labels`), at least ``min(max(ks), L)`` of them, so
    that scores computed block by block (as ``elmo-keras evaluate`` does) need only their top labels. The
    definitions are those of :func:`precision_at_k`, :func:`ndcg_at_k` and :func:`psp_at_k`.

    Args:
        ranked: int `[N, R]` label indices, best first.
        labels: the true labels: int `[N, K]` padded with -1 (:func:`pad_label_indices`) or one list of label
            indices per row; a label listed twice in a row counts once.
        num_labels: L.
        ks: the cut-offs.
        propensities: `[L]` from :func:`label_propensities`, or ``None`` for no PSP@k.

    Returns:
        ``{"precision_at_K": ..., "ndcg_at_K": ..., ["psp_at_K": ...]}`` for each ``K`` in ``ks``.

    Example:

    >>> import numpy as np
    >>> from elmo_keras.tasks.metrics import ranking_scores
    >>> scores = ranking_scores(np.array([[2, 0], [1, 0]]), [[0], [1, 2]], num_labels=3, ks=[1, 2])
    >>> {name: round(value, 4) for name, value in scores.items()}
    {'precision_at_1': 0.5, 'ndcg_at_1': 0.5, 'precision_at_2': 0.5, 'ndcg_at_2': 0.622}
    """
    ranked = np.asarray(ranked)
    if ranked.ndim != 2 or not np.issubdtype(ranked.dtype, np.integer):
        raise InputError(f"ranked must be int [rows, ranks] label indices, got {ranked.dtype} {ranked.shape}")
    truth = _label_rows(labels, len(ranked), num_labels)
    inverse = None
    if propensities is not None:
        propensities = np.asarray(propensities, dtype=np.float64)
        if propensities.shape != (num_labels,) or not ((propensities > 0) & (propensities <= 1)).all():
            raise InputError(f"propensities must be [{num_labels}] values in (0, 1], got shape {propensities.shape}")
        inverse = 1.0 / propensities
    out = {}
    for k in ks:
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        top = ranked[:, : min(k, num_labels)]
        if top.shape[1] < min(k, num_labels):
            raise InputError(f"ranked has {ranked.shape[1]} labels per row; k = {k} needs {min(k, num_labels)}")
        hits = (top[:, :, None] == truth[:, None, :]).any(axis=-1)  # [N, k]; padding (-1) never matches
        discount = 1.0 / np.log2(np.arange(2, k + 2))
        ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum((truth >= 0).sum(1), k)]
        dcg = (hits * discount[: top.shape[1]]).sum(1)
        out[f"precision_at_{k}"] = float(hits.sum(1).mean() / k)
        out[f"ndcg_at_{k}"] = float(np.mean(np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)))
        if inverse is not None:
            gained = (hits * inverse[top]).sum()
            best = -np.sort(-np.where(truth >= 0, inverse[truth], 0.0), axis=1)[:, :k].sum()
            out[f"psp_at_{k}"] = float(gained / best) if best > 0 else 0.0
    return out


def precision_at_k(scores, labels, k: int) -> float:
    """P@k = mean over rows of (1/k) sum over the k best-scored labels of y (1 for a true label, else 0).

    The denominator is k even when a row has fewer true labels, or there are fewer than k labels (as the
    Extreme Classification Repository reports it). Ties: see :func:`top_k_labels`.

    Args:
        scores: `[N, L]` finite scores.
        labels: int `[N, K]` padded with -1 (:func:`pad_label_indices`) or one list of label indices per row.
        k: the cut-off, >= 1.

    Returns:
        P@k in [0, 1].

    Example:

    >>> import numpy as np
    >>> from elmo_keras.tasks.metrics import precision_at_k
    >>> precision_at_k(np.array([[0.1, 0.8, 0.5, 0.0]]), [[1]], k=2)
    0.5
    """
    return _one_score(scores, labels, k, "precision")


def ndcg_at_k(scores, labels, k: int) -> float:
    """nDCG@k = mean over rows of DCG@k / sum_{l=1}^{min(k, |y|)} 1/log2(l+1), where
    DCG@k = sum_{l=1}^{k} y_{rank l} / log2(l+1); a row without true labels scores 0. Ties: see
    :func:`top_k_labels`.

    Args:
        scores: `[N, L]` finite scores.
        labels: int `[N, K]` padded with -1 (:func:`pad_label_indices`) or one list of label indices per row.
        k: the cut-off, >= 1.

    Returns:
        nDCG@k in [0, 1].

    Example:

    >>> import numpy as np
    >>> from elmo_keras.tasks.metrics import ndcg_at_k
    >>> ndcg_at_k(np.array([[0.9, 0.8, 0.1]]), [[0, 1]], k=2)
    1.0
    """
    return _one_score(scores, labels, k, "ndcg")


def psp_at_k(scores, labels, propensities, k: int) -> float:
    """Propensity-scored precision (Jain et al., 2016), normalised as the Extreme Classification Repository
    reports it: the sum over rows of sum_{top k} y_l / p_l, divided by the same sum for the best possible
    ranking (each row's true labels ordered by 1/p_l, highest first). The 1/k of both cancel. 0 when no row
    has a true label. Ties: see :func:`top_k_labels`.

    Args:
        scores: `[N, L]` finite scores.
        labels: int `[N, K]` padded with -1 (:func:`pad_label_indices`) or one list of label indices per row.
        propensities: `[L]` values in (0, 1] (:func:`label_propensities`).
        k: the cut-off, >= 1.

    Returns:
        PSP@k in [0, 1].

    Example:

    >>> import numpy as np
    >>> from elmo_keras.tasks.metrics import psp_at_k
    >>> psp_at_k(np.array([[0.9, 0.8, 0.1]]), [[0, 2]], np.array([0.5, 0.5, 0.25]), k=1)
    0.5
    """
    return _one_score(scores, labels, k, "psp", propensities)


def _one_score(scores, labels, k: int, name: str, propensities=None) -> float:
    scores = _checked_scores(scores, k)
    ranked = top_k_labels(scores, k)
    return ranking_scores(ranked, labels, scores.shape[1], (k,), propensities)[f"{name}_at_{k}"]


def _checked_scores(scores, k: int) -> np.ndarray:
    scores = np.asarray(scores)
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    if scores.ndim != 2 or scores.shape[0] < 1 or scores.shape[1] < 1 or not np.issubdtype(scores.dtype, np.number):
        raise InputError(f"scores must be numbers [rows, labels] with at least one of each, got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise InputError("scores hold NaN or infinite values; rank finite scores")
    return scores


def _label_rows(labels, rows: int, num_labels: int) -> np.ndarray:
    """True labels as int64 [rows, K] padded with -1, each label once per row (checked)."""
    if isinstance(labels, np.ndarray) and labels.ndim == 2 and np.issubdtype(labels.dtype, np.integer):
        truth = labels.astype(np.int64)
        bad = (truth < -1) | (truth >= num_labels)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise InputError(f"label {truth[i, j]} of row {i} is not an index in [0, {num_labels}) nor -1 (padding)")
    elif isinstance(labels, np.ndarray) and labels.dtype != object:
        raise InputError(f"labels must be int [rows, K] padded with -1, got {labels.dtype} {labels.shape}")
    else:
        truth = pad_label_indices(labels, num_labels).astype(np.int64)
    if len(truth) != rows:
        raise InputError(f"{len(truth)} rows of labels for {rows} rows of scores: give one label row per score row")
    truth = np.sort(truth, axis=1)
    repeated = np.zeros(truth.shape, dtype=bool)
    repeated[:, 1:] = truth[:, 1:] == truth[:, :-1]
    return np.where(repeated, -1, truth)


class _RankingMetric(keras.metrics.Metric):
    """A ranking score over the epoch: the sum over rows of :meth:`_row_values`' numerators divided by the sum of
    its denominators (ranks by ``ops.top_k``: ties to the lower label index)."""

    def __init__(self, num_labels: int, k: int, name: str, **kwargs):
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        super().__init__(name=name, **kwargs)
        self.num_labels, self.k = num_labels, k
        self.total = self.add_variable((), initializer="zeros", name="total")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        target = to_multi_hot(ops.convert_to_tensor(y_true), self.num_labels)
        _, top = ops.top_k(ops.cast(y_pred, "float32"), min(self.k, self.num_labels))
        value, weight = self._row_values(target, top, ops.take_along_axis(target, top, axis=1))
        self.total.assign_add(ops.sum(value))
        self.count.assign_add(ops.sum(weight))

    def _row_values(self, target, top, hits):
        """Per row (numerator, denominator) from multi-hot ``target`` [B, L], ``top`` [B, k] and ``hits``
        [B, k] (target at top)."""
        raise NotImplementedError

    def result(self):
        return ops.where(self.count > 0, self.total / ops.maximum(self.count, 1e-12), 0.0)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels, "k": self.k}


@serializable
class PrecisionAtK(_RankingMetric):
    """P@k: mean over examples of (true labels among the k highest scores) / k (see :func:`precision_at_k`).

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
        super().__init__(num_labels, k, name or f"precision_at_{k}", **kwargs)

    def _row_values(self, target, top, hits):
        return ops.sum(hits, axis=1) / self.k, ops.ones_like(hits[:, 0])


@serializable
class NDCGAtK(_RankingMetric):
    """nDCG@k over the epoch (see :func:`ndcg_at_k`; a row without true labels scores 0).

    Args:
        num_labels: L.
        k: the cut-off.
        name: the metric's name, or ``None`` for ``"ndcg_at_K"``.
        **kwargs: base ``keras.metrics.Metric`` arguments, such as ``dtype``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.metrics import NDCGAtK

    metric = NDCGAtK(num_labels=3, k=2)
    metric.update_state(np.array([[0, 1]]), np.array([[0.9, 0.8, 0.1]]))
    assert float(metric.result()) == 1.0
    ```
    """

    def __init__(self, num_labels: int, k: int = 5, name=None, **kwargs):
        super().__init__(num_labels, k, name or f"ndcg_at_{k}", **kwargs)
        discount = 1.0 / np.log2(np.arange(2, k + 2))
        self._discount = discount[: min(k, num_labels)].astype(np.float32)
        self._ideal = np.concatenate([[0.0], np.cumsum(discount)]).astype(np.float32)  # by min(k, |y|)

    def _row_values(self, target, top, hits):
        dcg = ops.sum(hits * self._discount, axis=1)
        ideal = ops.take(self._ideal, ops.cast(ops.minimum(ops.sum(target, axis=1), self.k), "int32"))
        return ops.where(ideal > 0, dcg / ops.maximum(ideal, 1e-12), 0.0), ops.ones_like(dcg)


@serializable
class PSPAtK(_RankingMetric):
    """Propensity-scored precision PSP@k over the epoch, normalised by the best possible value (see
    :func:`psp_at_k`), with the propensities of :func:`label_propensities` for the training label counts.

    The counts, not the propensities, are the configuration (small integers in the saved ``.keras`` file).

    Args:
        num_labels: L.
        label_counts: `[L]` training examples per label.
        num_examples: the number of training examples.
        k: the cut-off.
        A: the propensity model's ``A``.
        B: the propensity model's ``B``.
        name: the metric's name, or ``None`` for ``"psp_at_K"``.
        **kwargs: base ``keras.metrics.Metric`` arguments, such as ``dtype``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.metrics import PSPAtK

    metric = PSPAtK(num_labels=3, label_counts=[50, 5, 1], num_examples=100, k=1)
    metric.update_state(np.array([[0, 2]]), np.array([[0.1, 0.2, 0.9]]))
    assert float(metric.result()) == 1.0  # the rarer true label ranked first: the best possible
    ```
    """

    def __init__(
        self,
        num_labels: int,
        label_counts: Sequence[int],
        num_examples: int,
        k: int = 5,
        A: float = 0.55,
        B: float = 1.5,
        name=None,
        **kwargs,
    ):
        super().__init__(num_labels, k, name or f"psp_at_{k}", **kwargs)
        counts = [int(c) for c in label_counts]
        if len(counts) != num_labels:
            raise InputError(f"{len(counts)} label counts for {num_labels} labels: give one count per label")
        self.label_counts, self.num_examples, self.A, self.B = counts, int(num_examples), float(A), float(B)
        self._inverse = (1.0 / label_propensities(counts, num_examples, A, B)).astype(np.float32)

    def _row_values(self, target, top, hits):
        gained = ops.sum(hits * ops.take(self._inverse, top), axis=1)
        best, _ = ops.top_k(target * self._inverse, min(self.k, self.num_labels))
        return gained, ops.sum(best, axis=1)

    def get_config(self):
        return {
            **super().get_config(),
            "label_counts": self.label_counts,
            "num_examples": self.num_examples,
            "A": self.A,
            "B": self.B,
        }
