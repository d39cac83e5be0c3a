"""Precomputed features: embed texts once, then train heads on them (see ``models.features_classifier``).

With a frozen biLM, the biLM output of a text never changes, so computing it once and training on the stored
layers gives the same model as training end to end, at a fraction of the cost per epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def features_dataset(
    features: Sequence[np.ndarray],
    labels: np.ndarray | None = None,
    batch_size: int = 64,
    shuffle: bool = False,
    seed: int | None = None,
    bucket_boundaries: Sequence[int] | None = None,
    tokens: Sequence[Sequence[str]] | None = None,
    group_by_length: bool = False,
) -> tf.data.Dataset:
    """Batches ``{"layers": float32 [B, T, L, D], "mask": bool [B, T]}`` (+ labels) for
    :func:`elmo_keras.tasks.models.features_classifier`. Batches are padded to their longest text.

    Args:
        features: arrays `[n_tokens, L, D]` (from :func:`embed_layers`, or static vectors with L = 1).
        labels: `[N]` ints, or `[N, K]` label indices / multi-hot rows; ``None`` for features only.
        batch_size: texts per batch.
        shuffle: reshuffle every epoch.
        seed: fixes the shuffled order.
        bucket_boundaries: lengths (e.g. `[20, 40, 80]`) at which to cut buckets of texts of similar length, so
            less padding is run through the head (batches may then hold fewer rows).
        tokens: the texts' token lists, added as ``"tokens"`` string `[B, T]` (`""` = padding) for a
            ``features_classifier`` with a ``word_embedding``.
        group_by_length: batch texts of similar length while keeping ``ceil(N / batch_size)`` full batches per
            epoch (so Keras knows the epoch length): each epoch, pools of 64 batches' worth of texts (shuffled
            when ``shuffle``) are sorted by length and cut into batches, and the batch order is shuffled.

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
    if not len(features):
        raise ValueError("features is empty")
    shapes = {f.shape[1:] for f in features}
    if len(shapes) != 1 or any(f.ndim != 3 for f in features):
        raise ValueError(f"every feature array must be [n_tokens, L, D] with the same L and D, got {sorted(shapes)}")
    if labels is not None and len(labels) != len(features):
        raise ValueError(f"{len(labels)} labels for {len(features)} texts")
    if tokens is not None:
        tokens = [list(t) for t in tokens]
        bad = [i for i, (t, f) in enumerate(zip(tokens, features)) if len(t) != len(f)]
        if len(tokens) != len(features) or bad:
            raise ValueError(
                f"tokens must match features text by text (length differs at texts {bad[:5]}, "
                f"{len(tokens)} token lists for {len(features)} texts)"
            )
    n_layers, dim = next(iter(shapes))

    rng = np.random.default_rng(seed if seed is not None else np.random.randint(2**31))  # keras seeds NumPy
    lengths = np.array([len(f) for f in features])

    def order() -> np.ndarray:
        """Text indices of one epoch."""
        rows = rng.permutation(len(features)) if shuffle else np.arange(len(features))
        if not group_by_length:
            return rows
        pools = np.split(rows, range(64 * batch_size, len(rows), 64 * batch_size))
        rows = np.concatenate([pool[np.argsort(lengths[pool], kind="stable")] for pool in pools])
        batches = np.split(rows, range(batch_size, len(rows), batch_size))
        batch_order = rng.permutation(len(batches)) if shuffle else range(len(batches))
        return np.concatenate([batches[b] for b in batch_order])

    def generate():
        for i in order():
            f = features[i]
            # an empty text is one padding step, as SegmentedEncoder gives it (a batch of them stays valid)
            item = {
                "layers": f.astype(np.float32) if len(f) else np.zeros((1, n_layers, dim), np.float32),
                "mask": np.ones(len(f), bool) if len(f) else np.zeros(1, bool),
            }
            if tokens is not None:
                item["tokens"] = np.array([t.encode("utf-8") for t in tokens[i]] or [b""], dtype=object)
            yield (item, labels[i]) if labels is not None else item

    spec = {"layers": tf.TensorSpec([None, n_layers, dim], tf.float32), "mask": tf.TensorSpec([None], tf.bool)}
    if tokens is not None:
        spec["tokens"] = tf.TensorSpec([None], tf.string)
    if labels is not None:
        labels = np.asarray(labels)
        spec = (spec, tf.TensorSpec(labels.shape[1:], tf.as_dtype(labels.dtype)))
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    ds = ds.apply(tf.data.experimental.assert_cardinality(len(features)))  # so Keras knows the epoch length
    if bucket_boundaries:
        ds = ds.bucket_by_sequence_length(
            lambda item, *_: tf.shape(item["mask"])[0],
            list(bucket_boundaries),
            [batch_size] * (len(bucket_boundaries) + 1),
        )
    else:
        ds = ds.padded_batch(batch_size)
    return ds.prefetch(2)
