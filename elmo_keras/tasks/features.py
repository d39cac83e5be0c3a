"""Precomputed features: embed texts once, then train heads on them (see ``models.features_classifier``).

With a frozen biLM, the biLM output of a text never changes, so computing it once and training on the stored
layers gives the same model as training end to end, at a fraction of the cost per epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import tensorflow as tf

from elmo_keras.embed import ElmoEmbedder, token_batches
from elmo_keras.errors import InputError


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


def epoch_batches(
    lengths: np.ndarray,
    batch_size: int,
    shuffle: bool,
    rng: np.random.Generator,
    group_by_length: bool = False,
    window: int | None = None,
    batch_tokens: int | None = None,
) -> list[np.ndarray]:
    """The batches of one epoch (example indices), as :func:`features_dataset` reads them.

    Shuffled (``shuffle``) over all examples, or with ``window`` within windows of ``window`` consecutive
    examples taken in a random order, so that reads stay local (features on disk). With ``group_by_length``,
    pools of examples (64 batches' worth, or one window) are sorted by length and cut into batches of
    ``batch_size``, and the batch order is shuffled (within each window's worth of batches with ``window``).
    With ``batch_tokens`` (needs ``window``), each window is cut on its own and a batch also holds at most
    ``batch_tokens`` padded tokens (rows x its longest text; a longer text is a batch of its own): the number
    of batches is then the same every epoch, as a window's lengths do not change.

    Args:
        lengths: int `[N]`, each example's number of tokens.
        batch_size: examples per batch.
        shuffle: bool, shuffle (else the examples keep their order, sorted by length within pools).
        rng: the NumPy generator that draws the order.
        group_by_length: bool, batch examples of similar length. Defaults to `False`.
        window: int, examples per shuffling window, or `None` to shuffle them all. Defaults to `None`.
        batch_tokens: int, the most padded tokens of a batch, or `None`. Defaults to `None`.

    Returns:
        list of int arrays, the batches; together a permutation of ``range(N)``.
    """
    if batch_tokens is not None and not (window and group_by_length):
        raise ValueError("batch_tokens needs group_by_length and a window (the batches must not change per epoch)")
    n = len(lengths)
    if window is None:  # pools of 64 batches' worth
        rows = rng.permutation(n) if shuffle else np.arange(n)
        pools = np.split(rows, range(64 * batch_size, n, 64 * batch_size))
    else:  # the windows, in a random order, each shuffled
        starts = rng.permutation(np.arange(0, n, window)) if shuffle else range(0, n, window)
        pools = [start + (rng.permutation if shuffle else np.arange)(min(window, n - start)) for start in starts]
        rows = np.concatenate(pools)
    if not group_by_length:
        return np.split(rows, range(batch_size, n, batch_size))
    pools = [part[np.argsort(lengths[part], kind="stable")] for part in pools]
    if batch_tokens is None:
        rows = np.concatenate(pools)
        cut = [np.split(rows, range(batch_size, n, batch_size))]
        if window is not None:  # shuffle within each window's worth of batches
            block = max(1, window // batch_size)
            cut = [cut[0][first : first + block] for first in range(0, len(cut[0]), block)]
    else:
        cut = [[part[b] for b in token_batches(lengths[part], batch_size, batch_tokens)] for part in pools]
    if shuffle:
        cut = [[group[b] for b in rng.permutation(len(group))] for group in cut]
    return [batch for group in cut for batch in group]


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
    batch_tokens: int | None = None,
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
            epoch (so Keras knows the epoch length): see :func:`epoch_batches`.
        rows: int `[N]`, the feature array of each example (a text may be used by several), or `None` for one
            example per array, in order. Defaults to `None`.
        window: shuffle within windows of this many consecutive examples (see :func:`epoch_batches`), or `None`
            to shuffle them all. Defaults to `None`.
        batch_tokens: with ``group_by_length`` and ``window``: the most padded tokens of a batch (a longer text is
            a batch of its own), or `None`. Defaults to `None`.

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
    labels = None if labels is None else np.asarray(labels)
    plan = (example_lengths, batch_size, shuffle, rng, group_by_length, window, batch_tokens)

    def item(example: int) -> dict:
        i = rows[example]
        f = features[i]
        # an empty text is one padding step, as SegmentedEncoder gives it (a batch of them stays valid)
        out = {
            "layers": f.astype(np.float32) if len(f) else np.zeros((1, n_layers, dim), np.float32),
            "mask": np.ones(len(f), bool) if len(f) else np.zeros(1, bool),
        }
        if tokens is not None:
            out["tokens"] = np.array([t.encode("utf-8") for t in tokens[i]] or [b""], dtype=object)
        return out

    def batch(examples: np.ndarray) -> dict:
        """Items padded to the batch's longest text (zeros, False, b"")."""
        items = [item(e) for e in examples]
        steps = max(len(x["mask"]) for x in items)
        out = {
            "layers": np.zeros((len(items), steps, n_layers, dim), np.float32),
            "mask": np.zeros((len(items), steps), bool),
        }
        if tokens is not None:
            out["tokens"] = np.full((len(items), steps), b"", dtype=object)
        for row, x in enumerate(items):
            for key, value in x.items():
                out[key][row, : len(value)] = value
        return out

    def generate():
        if bucket_boundaries:  # texts one by one, batched by tf.data's buckets
            for examples in epoch_batches(*plan):
                for e in examples:
                    yield (item(e), labels[e]) if labels is not None else item(e)
            return
        for examples in epoch_batches(*plan):
            yield (batch(examples), labels[examples]) if labels is not None else batch(examples)

    lead = [] if bucket_boundaries else [None]  # one text, or a batch of them
    spec = {
        "layers": tf.TensorSpec([*lead, None, n_layers, dim], tf.float32),
        "mask": tf.TensorSpec([*lead, None], tf.bool),
    }
    if tokens is not None:
        spec["tokens"] = tf.TensorSpec([*lead, None], tf.string)
    if labels is not None:
        spec = (spec, tf.TensorSpec([*lead, *labels.shape[1:]], tf.as_dtype(labels.dtype)))
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    if bucket_boundaries:
        ds = ds.apply(tf.data.experimental.assert_cardinality(len(rows)))
        ds = ds.bucket_by_sequence_length(
            lambda x, *_: tf.shape(x["mask"])[0], list(bucket_boundaries), [batch_size] * (len(bucket_boundaries) + 1)
        )
    else:  # so Keras knows the epoch length: the same every epoch, so any draw of the order counts it
        count = len(epoch_batches(example_lengths, batch_size, shuffle, np.random.default_rng(0), *plan[4:]))
        ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    return ds.prefetch(2)


class PooledTable:
    """Pooled document vectors (``embed_file(..., pool=...)``, ``elmo-keras embed --pool``) as a
    :class:`FeatureTable` of one step per text, for :func:`features_dataset` and a ``features_classifier`` (a mix
    over the pooled layers): ``[i]`` is float32 `[1, L, D]` (`[1, 1, D]` for ``--layers top|average``).

    Args:
        embeddings: a pooled :class:`~elmo_keras.corpus.readers.Embeddings` (from :func:`elmo_keras.load_embeddings`).

    Raises:
        InputError: the embeddings are token vectors, not pooled.
    """

    def __init__(self, embeddings):
        if embeddings.pool is None:
            raise InputError(
                "these embeddings hold token vectors, not pooled document vectors: embed with --pool mean (or "
                "pool='mean'), or train on token vectors with features_dataset"
            )
        self.embeddings = embeddings
        self.lengths = np.ones(len(embeddings), dtype=np.int64)
        first = embeddings[0]
        self.feature_shape = (first.shape[0], first.shape[1]) if first.ndim == 2 else (1, first.shape[0])

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.embeddings[i].reshape((1, *self.feature_shape))


def pooled_dataset(
    embeddings, labels: np.ndarray, batch_size: int = 64, shuffle: bool = False, seed: int | None = None
) -> tf.data.Dataset:
    """Batches ``{"layers": float32 [B, 1, L, D], "mask": bool [B, 1]}`` and labels of pooled document vectors,
    read one text at a time (memory does not grow with the number of texts or their length), shuffled within
    windows of 4 shards of a ``shards`` output: the scalable path for long documents.

    Train ``models.features_classifier(L, D, num_classes, head="pool", mix=...)`` on it: a mix over the pooled
    layers, then the output layer.

    Args:
        embeddings: pooled embeddings from :func:`elmo_keras.load_embeddings` (``--pool``, best ``--layers all``).
        labels: `[N]` ints, or `[N, K]` label indices / multi-hot rows, one per line.
        batch_size: texts per batch. Defaults to 64.
        shuffle: bool, reshuffle every epoch. Defaults to `False`.
        seed: fixes the shuffled order. Defaults to `None`.

    Returns:
        A ``tf.data.Dataset``.

    Example:

    ```python
    import os, tempfile
    import numpy as np
    import elmo_keras as ek
    from elmo_keras.tasks.features import pooled_dataset

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "docs.txt"), "w") as f:
        f.write("The bank raised its rates .\\nA long walk by the river bank .\\n")
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
    ek.embed_file(embedder, os.path.join(folder, "docs.txt"), os.path.join(folder, "pooled"), fmt="shards",
                  pool="mean", progress=False)
    with ek.load_embeddings(os.path.join(folder, "pooled")) as vectors:
        batch, labels = next(iter(pooled_dataset(vectors, np.array([0, 1]), batch_size=2)))
        assert batch["layers"].shape == (2, 1, 3, 256)  # [B, 1, L, D]
    ```
    """
    table = PooledTable(embeddings)
    shard_lines = getattr(embeddings, "manifest", {}).get("shard_lines")
    return features_dataset(
        table,
        labels,
        batch_size=batch_size,
        shuffle=shuffle,
        seed=seed,
        window=4 * shard_lines if shard_lines else None,
    )
