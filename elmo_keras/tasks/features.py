"""Precomputed features: embed texts once, then train heads on them (see ``models.features_classifier``).

With a frozen biLM, the biLM output of a text never changes, so computing it once and training on the stored
layers gives the same model as training end to end, at a fraction of the cost per epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import tensorflow as tf

from elmo_keras.embed import ElmoEmbedder


def embed_layers(
    embedder: ElmoEmbedder, token_lists: Iterable[Sequence[str]], dtype: str = "float16", progress: bool = False
) -> list[np.ndarray]:
    """Token lists -> one array [n_tokens, n_layers + 1, 2P] per text.

    Empty token lists give [0, n_layers + 1, 2P] arrays.

    Args:
        embedder: an ``ElmoEmbedder``.
        token_lists: the texts' token lists.
        dtype: the arrays' dtype (float16 halves memory).
        progress: show a progress bar.

    Returns:
        list of arrays `[n_tokens, n_layers + 1, 2P]`.
    """
    token_lists = [list(t) for t in token_lists]
    out = []
    iterator = embedder.embed_sentences(token_lists)
    if progress:
        import keras

        bar = keras.utils.Progbar(len(token_lists), unit_name="text")
    for layers in iterator:
        out.append(np.ascontiguousarray(np.transpose(layers, (1, 0, 2))).astype(dtype))
        if progress:
            bar.add(1)
    return out


def epoch_order(
    lengths: np.ndarray,
    batch_size: int,
    shuffle: bool,
    rng: np.random.Generator,
    group_by_length: bool = False,
    window: int | None = None,
) -> np.ndarray:
    """The example indices of one epoch, as :func:`features_dataset` reads them.

    Shuffled (``shuffle``) over all examples, or with ``window`` within windows of ``window`` consecutive
    examples taken in a random order, so that reads stay local (features on disk). With ``group_by_length``,
    pools of examples (64 batches' worth, or one window) are sorted by length and cut into batches of
    ``batch_size``, and the batch order is shuffled (within each window's worth of batches with ``window``).

    Args:
        lengths: int `[N]`, each example's number of tokens.
        batch_size: examples per batch.
        shuffle: bool, shuffle (else the examples keep their order, sorted by length within pools).
        rng: the NumPy generator that draws the order.
        group_by_length: bool, batch examples of similar length. Defaults to `False`.
        window: int, examples per shuffling window, or `None` to shuffle them all. Defaults to `None`.

    Returns:
        int `[N]`, a permutation of ``range(N)``.
    """
    n = len(lengths)
    if not shuffle:
        rows = np.arange(n)
    elif window is None:
        rows = rng.permutation(n)
    else:
        rows = np.concatenate(
            [start + rng.permutation(min(window, n - start)) for start in rng.permutation(np.arange(0, n, window))]
        )
    if not group_by_length:
        return rows
    pool = window or 64 * batch_size
    rows = np.concatenate(
        [part[np.argsort(lengths[part], kind="stable")] for part in np.split(rows, range(pool, n, pool))]
    )
    batches = np.split(rows, range(batch_size, n, batch_size))
    if shuffle:
        block = len(batches) if window is None else max(1, window // batch_size)
        batch_order = np.concatenate(
            [first + rng.permutation(min(block, len(batches) - first)) for first in range(0, len(batches), block)]
        )
        batches = [batches[b] for b in batch_order]
    return np.concatenate(batches)


class FeatureTable(Protocol):
    """Features read one text at a time (e.g. a feature store on disk): what :func:`features_dataset` takes
    instead of a list of arrays."""

    #: int `[N]`, each text's number of tokens
    lengths: np.ndarray
    #: `(L, D)`, the layers and width of every text's array
    feature_shape: tuple[int, int]

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> np.ndarray:
        """Text ``i``'s features, float `[n_tokens, L, D]`."""
        ...


def _checked_table(features: "Sequence[np.ndarray] | FeatureTable") -> tuple[np.ndarray, tuple[int, int]]:
    """(lengths, (L, D)) of ``features``; a list of arrays is checked array by array."""
    if hasattr(features, "feature_shape"):
        return np.asarray(features.lengths), tuple(features.feature_shape)
    if not len(features):
        raise ValueError("features is empty")
    shapes = {f.shape[1:] for f in features}
    if len(shapes) != 1 or any(f.ndim != 3 for f in features):
        raise ValueError(f"every feature array must be [n_tokens, L, D] with the same L and D, got {sorted(shapes)}")
    return np.array([len(f) for f in features]), next(iter(shapes))


def features_dataset(
    features: "Sequence[np.ndarray] | FeatureTable",
    labels: np.ndarray | None = None,
    batch_size: int = 64,
    shuffle: bool = False,
    seed: int | None = None,
    bucket_boundaries: Sequence[int] | None = None,
    tokens: Sequence[Sequence[str]] | None = None,
    group_by_length: bool = False,
    rows: np.ndarray | None = None,
    window: int | None = None,
) -> tf.data.Dataset:
    """Batches ``{"layers": float32 [B, T, L, D], "mask": bool [B, T]}`` (+ labels) for
    :func:`elmo_keras.tasks.models.features_classifier`. Batches are padded to their longest text.

    Args:
        features: arrays `[n_tokens, L, D]` (from :func:`embed_layers`, or static vectors with L = 1), or a
            :class:`FeatureTable` read one text at a time.
        labels: `[N]` ints, or `[N, K]` label indices / multi-hot rows, one per example; ``None`` for features
            only.
        batch_size: texts per batch.
        shuffle: reshuffle every epoch.
        seed: fixes the shuffled order.
        bucket_boundaries: lengths (e.g. `[20, 40, 80]`) at which to cut buckets of texts of similar length, so
            less padding is run through the head (batches may then hold fewer rows).
        tokens: the texts' token lists (one per feature array), added as ``"tokens"`` string `[B, T]` (`""` =
            padding) for a ``features_classifier`` with a ``word_embedding``.
        group_by_length: batch texts of similar length while keeping ``ceil(N / batch_size)`` full batches per
            epoch (so Keras knows the epoch length): see :func:`epoch_order`.
        rows: int `[N]`, the feature array of each example (a text may be used by several), or `None` for one
            example per array, in order. Defaults to `None`.
        window: shuffle within windows of this many consecutive examples (see :func:`epoch_order`), or `None`
            to shuffle them all. Defaults to `None`.

    Returns:
        A ``tf.data.Dataset``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.features import features_dataset

    features = [np.ones((n, 3, 8), "float16") for n in (2, 5, 4)]
    batch, labels = next(iter(features_dataset(features, np.array([0, 1, 0]), batch_size=3)))
    assert batch["layers"].shape == (3, 5, 3, 8) and batch["mask"].shape == (3, 5)
    ```
    """
    lengths, (n_layers, dim) = _checked_table(features)
    rows = np.arange(len(lengths)) if rows is None else np.asarray(rows)
    if len(rows) and not (0 <= rows.min() and rows.max() < len(lengths)):
        raise ValueError(
            f"rows must index the {len(lengths)} feature arrays, got values in [{rows.min()}, {rows.max()}]"
        )
    if not len(rows):
        raise ValueError("features is empty")
    if labels is not None and len(labels) != len(rows):
        raise ValueError(f"{len(labels)} labels for {len(rows)} texts")
    if tokens is not None:
        tokens = [list(t) for t in tokens]
        bad = [i for i, (t, n) in enumerate(zip(tokens, lengths)) if len(t) != n]
        if len(tokens) != len(lengths) or bad:
            raise ValueError(
                f"tokens must match features text by text (length differs at texts {bad[:5]}, "
                f"{len(tokens)} token lists for {len(lengths)} texts)"
            )

    rng = np.random.default_rng(seed if seed is not None else np.random.randint(2**31))  # keras seeds NumPy
    example_lengths = lengths[rows]

    def generate():
        for example in epoch_order(example_lengths, batch_size, shuffle, rng, group_by_length, window):
            i = rows[example]
            f = features[i]
            # an empty text is one padding step, as SegmentedEncoder gives it (a batch of them stays valid)
            item = {
                "layers": f.astype(np.float32) if len(f) else np.zeros((1, n_layers, dim), np.float32),
                "mask": np.ones(len(f), bool) if len(f) else np.zeros(1, bool),
            }
            if tokens is not None:
                item["tokens"] = np.array([t.encode("utf-8") for t in tokens[i]] or [b""], dtype=object)
            yield (item, labels[example]) if labels is not None else item

    spec = {"layers": tf.TensorSpec([None, n_layers, dim], tf.float32), "mask": tf.TensorSpec([None], tf.bool)}
    if tokens is not None:
        spec["tokens"] = tf.TensorSpec([None], tf.string)
    if labels is not None:
        labels = np.asarray(labels)
        spec = (spec, tf.TensorSpec(labels.shape[1:], tf.as_dtype(labels.dtype)))
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    ds = ds.apply(tf.data.experimental.assert_cardinality(len(rows)))  # so Keras knows the epoch length
    if bucket_boundaries:
        ds = ds.bucket_by_sequence_length(
            lambda item, *_: tf.shape(item["mask"])[0],
            list(bucket_boundaries),
            [batch_size] * (len(bucket_boundaries) + 1),
        )
    else:
        ds = ds.padded_batch(batch_size)
    return ds.prefetch(2)
