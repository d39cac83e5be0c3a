"""``TextModel.fit`` over a frozen biLM: embed every text once, then train the head on the stored layers.

A ``text_classifier`` over ``Elmo`` is: tokens -> Elmo layers -> ``StackLayers`` -> ``features_head`` (mixer,
optional word embedding, sequence head, pooling) -> dropout -> scores. With the biLM frozen, everything before
the features head is a fixed function of the text, so ``fit`` computes it once per distinct text
(``ElmoEmbedder``, float16, in memory or in a feature store on disk: :mod:`elmo_keras.tasks.feature_store`) and
trains a model made of the *same* features head, dropout and scores layers on it. Both places get the texts in
store order, 1,024 at a time (the embedder's sorting chunk is a store's shard), so they hold the same values. When
``fit`` returns, the raw-string model holds the trained weights (nothing is copied).
"""

from __future__ import annotations

import dataclasses
import os
import time

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.corpus.run import Runner
from elmo_keras.elmo import Elmo
from elmo_keras.embed import ElmoEmbedder
from elmo_keras.errors import InputError
from elmo_keras.layers.segments import SegmentedEncoder
from elmo_keras.tasks.feature_store import (
    BATCH_TOKENS,
    MEMORY_FRACTION,
    READ_WINDOW,
    SHARD_LINES,
    STORAGE_DTYPE,
    FitTexts,
    StoredFeatures,
    feature_bytes,
    open_store,
)
from elmo_keras.tasks.features import embed_layers, features_dataset
from elmo_keras.tasks.sampled_labels import SampledLabelModel, SampledLabelScores
from elmo_keras.utils.host_memory import available_memory

FEATURES_HEAD = "features_head"  #: name of the sub-model from stored biLM layers to the pooled text vector
#: ``fit`` arguments the embed-once path takes (anything else, e.g. ``sample_weight``, runs the plain path).
FIT_ARGUMENTS = frozenset(
    {
        "batch_size",
        "epochs",
        "verbose",
        "callbacks",
        "validation_split",
        "validation_data",
        "shuffle",
        "class_weight",
        "initial_epoch",
        "validation_batch_size",
        "validation_freq",
    }
)


@dataclasses.dataclass
class EmbedOnce:
    """The frozen Elmo of a text model and the model over its stored layers (sharing the head's weights).

    Made by :meth:`of`; ``TextModel.fit`` uses it to embed the training texts once.

    Args:
        elmo: the model's frozen ``Elmo`` layer.
        features_model: the head, over the stored biLM layers.
        embedder: the ``ElmoEmbedder`` that computes those layers.
    """

    elmo: Elmo
    features_model: keras.Model
    embedder: ElmoEmbedder

    @classmethod
    def of(cls, model: keras.Model) -> "EmbedOnce | str":
        """The embed-once parts of ``model`` (a ``text_classifier``), or why it cannot train that way.

        Args:
            model: a text model.

        Returns:
            An :class:`EmbedOnce`, or a str saying why not.
        """
        try:
            document = model.get_layer("document")
        except ValueError:
            return "the model has no 'document' layer (not built by ek.models.text_classifier)"
        if not isinstance(document, SegmentedEncoder) or document.max_tokens is not None:
            return "texts are encoded in segments (max_tokens is set)"
        encoder = document.encoder
        elmos = [layer for layer in encoder.layers if isinstance(layer, Elmo)]
        if len(elmos) != 1 or FEATURES_HEAD not in {layer.name for layer in encoder.layers}:
            return "the model's embedder is not an ek.Elmo"
        head = encoder.get_layer(FEATURES_HEAD)
        inputs = {key: keras.Input(shape=t.shape[1:], dtype=t.dtype, name=key) for key, t in head.input.items()}
        scores = model.get_layer("scores")
        outputs = scores(model.get_layer("dropout")(head(inputs)))
        model_class = SampledLabelModel if isinstance(scores, SampledLabelScores) else keras.Model
        features_model = model_class(inputs, outputs, name=f"{model.name}_features")
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        features_model.compile(**{**compiled, "optimizer": model.optimizer})  # one optimizer state for both
        return cls(
            elmos[0], features_model, ElmoEmbedder(bilm=elmos[0].bilm, max_cache_size=100_000, chunk_size=SHARD_LINES)
        )

    @property
    def takes_tokens(self) -> bool:
        return "tokens" in self.features_model.input

    def features(
        self,
        texts: FitTexts,
        features_dir: str | os.PathLike | None = None,
        features_memory: float = MEMORY_FRACTION,
        runner: Runner | None = None,
        verbose="auto",
    ) -> "MemoryFeatures | StoredFeatures":
        """The layers of ``texts``: in memory when they fit the budget and no ``features_dir`` is given, else
        from a feature store (embedded now, resumed or reused; see :mod:`elmo_keras.tasks.feature_store`).

        Args:
            texts: a :class:`~elmo_keras.tasks.feature_store.FitTexts`.
            features_dir: the stores' folder, or `None` to decide by the budget (a store then goes under
                :func:`~elmo_keras.tasks.feature_store.default_root`). Defaults to `None`.
            features_memory: the budget, a share of the available memory (0 = always on disk). Defaults to
                :data:`~elmo_keras.tasks.feature_store.MEMORY_FRACTION`.
            runner: how a store's shards are embedded (`None`: this process). Defaults to `None`.
            verbose: Keras' ``verbose``; a progress bar and timing when not 0.

        Returns:
            A :class:`~elmo_keras.tasks.features.FeatureTable`.
        """
        if isinstance(features_memory, bool) or not isinstance(features_memory, (int, float)) or features_memory < 0:
            raise InputError(f"features_memory must be a share of the available memory >= 0, got {features_memory!r}")
        needed, budget = feature_bytes(self.embedder, texts), features_memory * available_memory()
        talk, progress = verbose not in (0, "0"), verbose in (1, "auto")
        start = time.perf_counter()
        if features_dir is None and needed <= budget:
            table = MemoryFeatures(embed_layers(self.embedder, texts.tokens, dtype=STORAGE_DTYPE, progress=progress))
            where = f"in memory ({needed / 1e9:.2f} GB)"
        else:
            if talk and features_dir is None:
                print(
                    f"the texts' features take {needed / 1e9:.1f} GB, over the in-memory budget of "
                    f"{budget / 1e9:.1f} GB ({features_memory:g} of the available memory): using a feature store"
                )
            table, embedded = open_store(self.embedder, texts, features_dir, runner, progress)
            where = f"in the feature store {table.path} ({embedded} texts embedded now, {len(table) - embedded} reused)"
        if talk:
            print(
                f"features of {len(texts.tokens)} distinct texts ({int(texts.lengths.sum())} tokens) {where}; "
                f"{time.perf_counter() - start:.1f} s"
            )
        return table

    def dataset(
        self, table, texts: FitTexts, rows: np.ndarray, labels: np.ndarray, batch_size: int, shuffle: bool
    ) -> tf.data.Dataset:
        """Batches of the examples ``rows`` (lines of ``table``) with ``labels``, grouped by length and shuffled
        by windows of nearby lines (:data:`~elmo_keras.tasks.feature_store.READ_WINDOW`), on disk as in memory;
        a batch holds at most ``batch_size`` texts and :data:`~elmo_keras.tasks.feature_store.BATCH_TOKENS`
        padded tokens (a longer text is a batch of its own), so long documents do not blow up a batch.

        Args:
            table: from :meth:`features`.
            texts: the :class:`~elmo_keras.tasks.feature_store.FitTexts` of ``table``.
            rows: int `[N]`, each example's line.
            labels: `[N, ...]`, each example's labels.
            batch_size: texts per batch.
            shuffle: shuffle the batches.

        Returns:
            A ``tf.data.Dataset`` of ``(features, labels)``.
        """
        by_line = np.argsort(rows, kind="stable")  # nearby examples read nearby lines
        return features_dataset(
            table,
            np.asarray(labels)[by_line],
            batch_size=batch_size,
            shuffle=shuffle,
            group_by_length=True,
            tokens=texts.tokens if self.takes_tokens else None,
            rows=rows[by_line],
            window=READ_WINDOW,
            batch_tokens=BATCH_TOKENS,
        )

    def fit(
        self,
        texts: list[str],
        labels: np.ndarray,
        batch_size: int | None = None,
        verbose="auto",
        validation_split: float = 0.0,
        validation_data: tuple | None = None,
        shuffle=True,
        validation_batch_size: int | None = None,
        features_dir: str | os.PathLike | None = None,
        features_memory: float = MEMORY_FRACTION,
        features_runner: Runner | None = None,
        **kwargs,
    ) -> keras.callbacks.History:
        """``keras.Model.fit`` on the stored layers of ``texts`` (and of the validation texts).

        Args:
            texts: the training sentences.
            labels: their labels.
            batch_size: texts per batch (Keras' default when ``None``).
            verbose: as in ``keras.Model.fit``.
            validation_split: the fraction of the texts held out for validation.
            validation_data: ``(texts, labels)`` for validation, or ``None``.
            shuffle: shuffle the training batches.
            validation_batch_size: validation texts per batch (``batch_size`` when ``None``).
            features_dir: see :meth:`features`.
            features_memory: see :meth:`features`.
            features_runner: see :meth:`features` (``runner``).
            **kwargs: other ``keras.Model.fit`` arguments, such as ``epochs`` and ``callbacks``.

        Returns:
            The Keras ``History``.
        """
        batch_size = batch_size or 32
        if validation_data is None and validation_split:  # as Keras does: the last fraction, before shuffling
            cut = int(len(texts) * (1.0 - validation_split))
            validation_data = (texts[cut:], labels[cut:])
            texts, labels = texts[:cut], labels[:cut]
        if not len(texts):
            raise InputError("fit got no training texts (after validation_split): give at least one")
        held_out = [] if validation_data is None else list(validation_data[0])
        fit_texts = FitTexts.of(list(texts) + held_out)
        table = self.features(fit_texts, features_dir, features_memory, features_runner, verbose)
        try:
            rows = fit_texts.rows
            train = self.dataset(table, fit_texts, rows[: len(texts)], labels, batch_size, bool(shuffle))
            if validation_data is not None:
                validation_data = self.dataset(
                    table, fit_texts, rows[len(texts) :], validation_data[1], validation_batch_size or batch_size, False
                )
            return self.features_model.fit(
                train, validation_data=validation_data, verbose=verbose, shuffle=False, **kwargs
            )
        finally:
            table.close()


class MemoryFeatures:
    """Layers held in memory, one float16 array `[n_tokens, L, D]` per text (a
    :class:`~elmo_keras.tasks.features.FeatureTable`).

    Args:
        arrays: from :func:`~elmo_keras.tasks.features.embed_layers`.
    """

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = arrays
        self.lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        self.feature_shape = tuple(arrays[0].shape[1:])

    def __len__(self) -> int:
        return len(self.arrays)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.arrays[i]

    def close(self) -> None:
        """Let the arrays go."""
        self.arrays = []


def strings(texts: tf.Tensor) -> list[str]:
    """A string tensor [N] -> Python str.

    Args:
        texts: string tensor `[N]` of UTF-8 text.

    Returns:
        list of str.
    """
    return [t.decode("utf-8") for t in texts.numpy()]
