"""``TextModel.fit`` over a frozen biLM: embed every text once, then train the head on the stored layers.

A ``text_classifier`` over ``Elmo`` is: tokens -> Elmo layers -> ``StackLayers`` -> ``features_head`` (mixer,
optional word embedding, sequence head, pooling) -> dropout -> scores. With the biLM frozen, everything before
the features head is a fixed function of the text, so ``fit`` computes it once per text (``ElmoEmbedder``,
float16 in memory) and trains a model made of the *same* features head, dropout and scores layers on it. When
``fit`` returns, the raw-string model holds the trained weights (nothing is copied).
"""

from __future__ import annotations

import dataclasses
import time

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.elmo import Elmo
from elmo_keras.embed import ElmoEmbedder
from elmo_keras.layers.segments import SegmentedEncoder
from elmo_keras.tasks.features import embed_layers, features_dataset
from elmo_keras.text import tokenize

FEATURE_DTYPE = "float16"  #: how the stored layers are kept in memory (half the bytes of float32)
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
        outputs = model.get_layer("scores")(model.get_layer("dropout")(head(inputs)))
        features_model = keras.Model(inputs, outputs, name=f"{model.name}_features")
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        features_model.compile(**{**compiled, "optimizer": model.optimizer})  # one optimizer state for both
        return cls(elmos[0], features_model, ElmoEmbedder(bilm=elmos[0].bilm))

    @property
    def takes_tokens(self) -> bool:
        return "tokens" in self.features_model.input

    def dataset(self, texts: list[str], labels: np.ndarray, batch_size: int, shuffle: bool, verbose) -> tf.data.Dataset:
        """Embed ``texts`` (float16) and batch them with ``labels``, grouped by length.

        Args:
            texts: the sentences.
            labels: their labels.
            batch_size: texts per batch.
            shuffle: shuffle the batches.
            verbose: Keras' ``verbose``; a progress bar and timing when not 0.

        Returns:
            A ``tf.data.Dataset`` of ``(features, labels)``.
        """
        tokens = [tokenize(text) for text in texts]
        start = time.perf_counter()
        features = embed_layers(self.embedder, tokens, dtype=FEATURE_DTYPE, progress=verbose in (1, "auto"))
        if verbose not in (0, "0"):
            print(
                f"embedded {len(texts)} texts ({sum(map(len, tokens))} tokens) once with the frozen biLM in "
                f"{time.perf_counter() - start:.1f} s"
            )
        return features_dataset(
            features,
            labels,
            batch_size=batch_size,
            shuffle=shuffle,
            group_by_length=True,
            tokens=tokens if self.takes_tokens else None,
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
            **kwargs: other ``keras.Model.fit`` arguments, such as ``epochs`` and ``callbacks``.

        Returns:
            The Keras ``History``.
        """
        batch_size = batch_size or 32
        if validation_data is None and validation_split:  # as Keras does: the last fraction, before shuffling
            cut = int(len(texts) * (1.0 - validation_split))
            validation_data = (texts[cut:], labels[cut:])
            texts, labels = texts[:cut], labels[:cut]
        train = self.dataset(texts, labels, batch_size, bool(shuffle), verbose)
        if validation_data is not None:
            validation_data = self.dataset(
                list(validation_data[0]), validation_data[1], validation_batch_size or batch_size, False, verbose
            )
        return self.features_model.fit(train, validation_data=validation_data, verbose=verbose, shuffle=False, **kwargs)


def strings(texts: tf.Tensor) -> list[str]:
    """A string tensor [N] -> Python str.

    Args:
        texts: string tensor `[N]` of UTF-8 text.

    Returns:
        list of str.
    """
    return [t.decode("utf-8") for t in texts.numpy()]
