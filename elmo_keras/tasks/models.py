"""Model builders: classifiers and taggers stacked on any embedder (Elmo, HubElmo, StaticEmbedding)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.elmo import Elmo
from elmo_keras.errors import InputError
from elmo_keras.layers.fusion import StackLayers, UnstackLayers, make_layer_mixer
from elmo_keras.layers.hub import HubElmo
from elmo_keras.layers.pooling import MaskedPooling
from elmo_keras.layers.segments import SegmentedEncoder
from elmo_keras.saving import serializable
from elmo_keras.tasks.embed_once import FEATURES_HEAD, FIT_ARGUMENTS, EmbedOnce, strings
from elmo_keras.tasks.feature_store import MEMORY_FRACTION
from elmo_keras.tasks.metrics import (
    MultiLabelBinaryCrossentropy,
    MultiLabelF1,
    NDCGAtK,
    PrecisionAtK,
    pad_label_indices,
)
from elmo_keras.tasks.sampled_labels import LazyAdam, SampledLabelModel, SampledLabelScores, check_label_sampling
from elmo_keras.tasks.text_pipeline import LENGTH_MULTIPLE, char_ids_width, is_text, text_dataset, text_to_char_ids
from elmo_keras.text import as_text, pad_tokens

HEADS = ("bigru", "bilstm_bigru", "pool")

__all__ = [
    "HEADS",
    "SampledTextModel",
    "TextModel",
    "features_classifier",
    "layer_mixer",
    "pad_label_indices",
    "pad_tokens",
    "sequence_tagger",
    "text_classifier",
]


@serializable
class TextModel(keras.Model):
    """A functional model over text (what :func:`text_classifier` and :func:`sequence_tagger` return).

    Calls, ``fit`` (and its ``validation_data``), ``evaluate`` and ``predict`` also take lists or tuples of str,
    token lists and NumPy ``'<U'``/object arrays (:func:`elmo_keras.text.as_text`); numbers or a wrong rank are an
    :class:`~elmo_keras.errors.InputError` saying what the model expects.

    Its input is a string tensor on TensorFlow. On JAX and PyTorch (no string tensors; or with ``char_ids=True``)
    it is char ids int32 `[B, T, 50]`, and texts given to ``fit``, ``evaluate``, ``predict`` or a call are turned
    into char ids before the model, in ``tf.data`` (:mod:`elmo_keras.tasks.text_pipeline`), as keras-hub does;
    char ids (``ek.batch_to_ids``) are taken as they are.

    Example:

    ```python
    import elmo_keras as ek

    model = ek.models.text_classifier(ek.Elmo.from_preset("brown-small"), num_classes=2, units=4, hidden=4)
    model.fit(["good film", "bad plot", "great acting", "awful"], [1, 0, 1, 0], epochs=1, verbose=0)
    assert model.predict(("a good plot",), verbose=0).shape == (1, 2)
    ```
    """

    def _text(self, x):
        if char_ids_width(self) is not None:  # a model over char ids: texts become char ids here
            return text_to_char_ids(x, char_ids_width(self), LENGTH_MULTIPLE) if is_text(x) else x
        x = as_text(x)
        rank = len(self.inputs[0].shape)
        expects = "sentences, str [batch]" if rank == 1 else "padded tokens, str [batch, max_len]"
        if getattr(x, "dtype", None) is None:  # None, a dataset, a generator: Keras reads those
            return x
        dtype = keras.backend.standardize_dtype(x.dtype)
        if dtype != "string":
            raise InputError(f"{self.name} takes text ({expects}), got {dtype} values")
        if len(x.shape) != rank:
            raise InputError(f"{self.name} takes {expects}, got shape {tuple(x.shape)}")
        return x

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(self._text(inputs), *args, **kwargs)

    @staticmethod
    def _labels(y):
        """A Python list/tuple of labels -> a NumPy array (Keras would read a list as several outputs)."""
        return np.asarray(y) if isinstance(y, (list, tuple)) else y

    def fit(
        self,
        x=None,
        y=None,
        *args,
        validation_data=None,
        embed_once: bool | None = None,
        features_dir: str | os.PathLike | None = None,
        features_memory: float = MEMORY_FRACTION,
        features_runner=None,
        **kwargs,
    ):
        """``keras.Model.fit``; over a frozen ``ek.Elmo`` it embeds each text once (``embed_once``).

        With ``embed_once`` None (the default) or True, a :func:`text_classifier` over a frozen ``Elmo``, fitted
        on texts in memory, runs the biLM once per distinct text (with a progress bar) and trains its head on the
        stored float16 layers for all epochs; batches are bucketed by length. The result is the same model as
        training end to end (the head sees the same layers), at a fraction of the cost per epoch. The layers stay
        in memory while they take at most ``features_memory`` of the available memory; beyond that, or with
        ``features_dir``, they go to a feature store on disk (see :mod:`elmo_keras.tasks.feature_store`): embedded
        once, streamed in batches (memory does not grow with the number of texts), resumed after a kill and
        reused by the next ``fit`` on the same texts, whatever its head. Both paths read the examples in the same
        order: the same seed gives the same loss curve, within float16 rounding.
        Callbacks then see the model over stored layers, which shares this model's head weights (so
        ``EarlyStopping(restore_best_weights=True)`` works; ``ModelCheckpoint`` saves that model). Datasets,
        generators, ``sample_weight``, ``steps_per_epoch``, segments (``max_tokens``) or a trainable biLM run
        the plain path; ``embed_once=True`` (or ``features_dir``) then raises instead, ``False`` always runs the
        plain path.

        Args:
            x: texts: sentences (a list of str or a string array) or padded tokens, or a dataset.
            y: labels.
            *args: further positional ``keras.Model.fit`` arguments.
            validation_data: ``(texts, labels)``, as in ``keras.Model.fit``.
            embed_once: ``None`` (when possible), True (always; raises when not possible) or False (never).
            features_dir: the folder of feature stores, or `None`: in memory within the budget, else a store
                under ``CACHE/features``. Defaults to `None`.
            features_memory: the in-memory budget, a share of the available memory (0: always a store).
                Defaults to 0.25.
            features_runner: how a store is embedded: `None` (this process) or
                :func:`elmo_keras.corpus.beam.beam_runner`. Defaults to `None`.
            **kwargs: other ``keras.Model.fit`` arguments, such as ``epochs``.

        Returns:
            The Keras ``History``.
        """
        store = {"features_dir": features_dir, "features_memory": features_memory, "features_runner": features_runner}
        if features_dir is not None or features_runner is not None:
            embed_once = True if embed_once is None else embed_once
            if embed_once is False:
                raise ValueError("features_dir and features_runner need the embed-once path; embed_once=False")
        if char_ids_width(self) is not None and is_text(x):
            return self._fit_texts(x, y, args, validation_data, embed_once, kwargs)
        x, y = self._text(x), self._labels(y)
        if isinstance(validation_data, (tuple, list)) and validation_data:
            validation_data = (self._text(validation_data[0]), *map(self._labels, validation_data[1:]))
        plan = self._embed_once(x, y, args, validation_data, kwargs) if embed_once is not False else "disabled"
        if isinstance(plan, EmbedOnce):
            if validation_data is not None:
                validation_data = (strings(validation_data[0]), np.asarray(validation_data[1]))
            return plan.fit(strings(x), np.asarray(y), validation_data=validation_data, **store, **kwargs)
        if embed_once:
            raise ValueError(f"embed_once=True, but this fit cannot embed once: {plan}")
        return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

    def _pipeline(self, texts, labels=None, batch_size: int | None = None, shuffle: bool = False, trim: bool = True):
        """Texts (and labels) -> the char-id dataset of a model over char ids (see :mod:`text_pipeline`)."""
        labels = None if labels is None else self._labels(labels)
        return text_dataset(
            texts,
            labels,
            batch_size=batch_size or 32,
            shuffle=shuffle,
            token_labels=len(self.outputs[0].shape) == 3,
            max_characters_per_token=char_ids_width(self),
            trim=trim,
        )

    def _fit_texts(self, x, y, args: tuple, validation_data, embed_once: bool | None, kwargs: dict):
        """``fit`` of a model over char ids on texts: the text step runs in the ``tf.data`` pipeline."""
        if embed_once:
            raise ValueError("embed_once=True, but this fit cannot embed once: the model takes char ids")
        if args or {"validation_split", "sample_weight", "steps_per_epoch"} & set(kwargs):
            raise InputError(
                "fit on texts of a model over char ids takes x, y and keyword arguments such as epochs, "
                "batch_size, shuffle, validation_data and callbacks (no validation_split, sample_weight or "
                "steps_per_epoch: pass a tf.data.Dataset of (ek.batch_to_ids(...), labels) for those)"
            )
        batch_size = kwargs.pop("batch_size", None)
        data = self._pipeline(x, y, batch_size, shuffle=kwargs.pop("shuffle", True))
        if isinstance(validation_data, (tuple, list)) and validation_data and is_text(validation_data[0]):
            validation_data = self._pipeline(*validation_data[:2], kwargs.pop("validation_batch_size", batch_size))
        return super().fit(data, validation_data=validation_data, shuffle=False, **kwargs)  # the pipeline shuffles

    def _embed_once(self, x, y, args: tuple, validation_data, kwargs: dict) -> EmbedOnce | str:
        """The embed-once plan for this ``fit`` call, or why there is none."""
        if args or set(kwargs) - FIT_ARGUMENTS:
            return f"fit arguments {sorted(set(kwargs) - FIT_ARGUMENTS) or 'given by position'} need the plain path"
        in_memory = lambda v: isinstance(v, (tf.Tensor, np.ndarray))  # noqa: E731
        if not (in_memory(x) and in_memory(y) and len(x.shape) == 1):
            return "x and y must be texts and labels in memory (not a dataset or generator)"
        if validation_data is not None and (len(validation_data) != 2 or not all(map(in_memory, validation_data))):
            return "validation_data must be (texts, labels) in memory"
        plan = self.__dict__.get("_embed_once_plan") or EmbedOnce.of(self)
        if isinstance(plan, EmbedOnce):  # kept (a plain object: Keras does not track it) with its optimizer state
            self.__dict__["_embed_once_plan"] = plan
            if plan.elmo.bilm.trainable:
                return "the biLM is trainable (fine-tuning runs it on every batch)"
        return plan

    def evaluate(self, x=None, y=None, *args, **kwargs):
        if char_ids_width(self) is not None and is_text(x):
            return super().evaluate(self._pipeline(x, y, kwargs.pop("batch_size", None)), *args, **kwargs)
        return super().evaluate(self._text(x), self._labels(y), *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        if char_ids_width(self) is not None and is_text(x):  # every batch as wide as the widest text: one array
            wide = text_to_char_ids(x, char_ids_width(self), LENGTH_MULTIPLE)
            return super().predict(wide, *args, **kwargs)
        return super().predict(self._text(x), *args, **kwargs)


@serializable
class SampledTextModel(SampledLabelModel, TextModel):
    """A :class:`TextModel` with the sampled multi-label head (what ``text_classifier(..., label_sampling=S)``
    returns): it takes texts as a ``TextModel`` does and trains as a
    :class:`~elmo_keras.tasks.sampled_labels.SampledLabelModel`.

    Example:

    ```python
    import elmo_keras as ek

    elmo = ek.Elmo.from_preset("brown-small")
    model = ek.models.text_classifier(elmo, 1000, head="pool", multi_label=True, label_sampling=32, label_dim=16)
    model.fit(["good film", "bad plot"], ek.models.pad_label_indices([[3, 70], [999]]), epochs=1, verbose=0)
    assert model.predict(["a good plot"], verbose=0).shape == (1, 1000)
    ```
    """


def _layer_embedder(embedder: keras.layers.Layer) -> keras.layers.Layer:
    """An embedder of padded tokens [B, T] that returns the list of its layers (or one tensor), each with the Keras
    mask (a HubElmo over its module's "tokens" signature: the same vectors for the same tokens)."""
    if isinstance(embedder, HubElmo):
        return embedder.with_signature("tokens")
    as_layers = getattr(embedder, "as_layers", None)
    return as_layers() if callable(as_layers) else embedder


def _with_words(x, word_embedding: keras.layers.Layer | None, tokens):
    """[x; word_embedding(tokens)] along features (ELMo beside a word representation, Peters et al. 2018 3.3)."""
    if word_embedding is None:
        return x
    return keras.layers.Concatenate(name="with_words")([x, word_embedding(tokens)])


def _sequence_head(x, head: str, units: int, hidden: int):
    if head == "bigru":
        return keras.layers.Bidirectional(keras.layers.GRU(units, return_sequences=True), name="bigru")(x)
    if head == "bilstm_bigru":
        lstm = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True), name="bilstm")(x)
        gru = keras.layers.Bidirectional(keras.layers.GRU(units, return_sequences=True), name="bigru")(x)
        both = keras.layers.Concatenate(name="bilstm_bigru")([lstm, gru])
        return keras.layers.Dense(hidden, activation="tanh", name="fusion_projection")(both)
    return x


def text_classifier(
    embedder: keras.layers.Layer,
    num_classes: int,
    head: str = "bigru",
    mix: str = "trainable",
    multi_label: bool = False,
    mix_weights: Sequence[float] | None = None,
    units: int = 128,
    hidden: int = 256,
    dropout: float = 0.3,
    max_tokens: int | None = None,
    learning_rate: float = 1e-3,
    top_k: int = 5,
    word_embedding: keras.layers.Layer | None = None,
    name: str = "text_classifier",
    char_ids: bool | None = None,
    label_sampling: int | None = None,
    label_dim: int = 256,
) -> keras.Model:
    """A compiled ``keras.Model``: raw strings [B] -> class probabilities [B, num_classes].

    With ``char_ids`` (the default on the JAX and PyTorch backends, which have no string ops) the model takes char
    ids int32 [B, T, 50] (:func:`elmo_keras.batch_to_ids`) instead, over an ``ek.Elmo``.

    Compiled with Adam(learning_rate); compile again to change optimizer, loss or metrics.

    Args:
        embedder: the text embedder: ``ek.Elmo``, ``HubElmo`` or ``StaticEmbedding``.
        num_classes: the number of classes (labels, when ``multi_label``).
        head: ``"bigru"`` (Bidirectional GRU, masked max+mean pooling), ``"bilstm_bigru"`` (a BiLSTM and a
            BiGRU read the sequence in parallel, concatenated, Dense(hidden, tanh)), or ``"pool"`` (masked
            max+mean pooling only).
        mix: how the embedder's layers are combined: ``"trainable"``, ``"fixed"``, ``"mlp"``, ``"top"``,
            ``"average"`` or ``"concat"`` (see :func:`elmo_keras.layers.fusion.make_layer_mixer`).
        multi_label: sigmoid outputs, binary cross-entropy, micro/macro F1 and precision@top_k; labels
            multi-hot floats `[B, L]` or label indices `[B, K]` padded with -1 (:func:`pad_label_indices`).
        mix_weights: one weight per layer for ``mix="fixed"``, else ``None``.
        units: GRU/LSTM units per direction.
        hidden: units of the ``"mlp"`` mix and of the ``"bilstm_bigru"`` head's Dense layer.
        dropout: dropout rate before the output layer.
        max_tokens: encode long texts in segments of at most this many tokens (see :class:`SegmentedEncoder`),
            or ``None``.
        learning_rate: Adam's learning rate.
        top_k: the k of precision@k (multi-label).
        word_embedding: a layer tokens `[B, T]` -> `[B, T, E]` with a mask (e.g. a trainable
            ``StaticEmbedding.from_corpus(train_tokens, dim)``), concatenated with the mixed ELMo sequence
            before the head; or ``None``.
        name: the model's name.
        char_ids: take char ids int32 `[B, T, max_characters_per_token]` instead of text (an ``ek.Elmo``
            embedder; no ``max_tokens`` or ``word_embedding``, which read text); ``None``: on the TensorFlow
            backend text, on the others char ids.
        label_sampling: multi-label only: ``None`` for the dense sigmoid head, or S, for the sampled head of
            :mod:`elmo_keras.tasks.sampled_labels` (for 100k labels and more): a `[L, label_dim]` label table,
            trained on each row's true labels plus S labels drawn uniformly per batch, with
            :class:`~elmo_keras.tasks.sampled_labels.LazyAdam`; it still predicts every label's sigmoid score.
            Labels must be padded label indices. TensorFlow backend only.
        label_dim: the width of the sampled head's label table (with ``label_sampling``).

    Returns:
        A compiled :class:`TextModel` (over char ids with ``char_ids``; it still takes texts, see there), a
        :class:`SampledTextModel` with ``label_sampling``.

    Example:

    ```python
    import elmo_keras as ek

    model = ek.models.text_classifier(ek.Elmo.from_preset("brown-small"), num_classes=2, units=4, hidden=4)
    model.fit(["good film", "bad plot"], [1, 0], epochs=1, verbose=0)
    assert model.predict(["a good plot"], verbose=0).shape == (1, 2)
    ```
    """
    _check_classifier_args(head, num_classes, multi_label)
    check_label_sampling(label_sampling, label_dim, multi_label)
    if _takes_char_ids(embedder, char_ids, max_tokens=max_tokens, word_embedding=word_embedding):
        ids = _char_ids_input(embedder)
        layers = _layer_embedder(embedder)(ids)
        stacked = StackLayers(name="stack_layers")(layers)
        pooled = _features_head(len(layers), layers[0].shape[-1], head, mix, mix_weights, units, hidden, None)(stacked)
        return _compiled_classifier(
            TextModel,
            ids,
            pooled,
            num_classes,
            multi_label,
            dropout,
            learning_rate,
            top_k,
            name,
            label_sampling,
            label_dim,
        )
    tokens = keras.Input(shape=(None,), dtype="string", name="tokens")
    layers = _layer_embedder(embedder)(tokens)
    if isinstance(layers, (list, tuple)):  # biLM layers: mixed inside the features head (see TextModel.fit)
        stacked = StackLayers(name="stack_layers")(layers)
        features_head = _features_head(
            len(layers), layers[0].shape[-1], head, mix, mix_weights, units, hidden, word_embedding
        )
        pooled = features_head({**stacked, "tokens": tokens} if word_embedding is not None else stacked)
    else:  # a static embedding has a single layer: nothing to mix
        pooled = _pooled_head(layers, tokens, head, units, hidden, word_embedding)
    encoder = keras.Model(tokens, pooled, name="segment_encoder")

    text = keras.Input(shape=(), dtype="string", name="text")
    doc = SegmentedEncoder(encoder, max_tokens=max_tokens, name="document")(text)
    return _compiled_classifier(
        TextModel, text, doc, num_classes, multi_label, dropout, learning_rate, top_k, name, label_sampling, label_dim
    )


def _takes_char_ids(embedder: keras.layers.Layer, char_ids: bool | None, **text_only) -> bool:
    """Whether a model over ``embedder`` takes char ids (``char_ids`` None: on the backends without string ops),
    after checking that it can: an ``Elmo`` embedder, and none of the arguments in ``text_only`` given."""
    if char_ids is None:
        char_ids = keras.backend.backend() != "tensorflow"
    if not char_ids:
        return False
    where = (
        "" if keras.backend.backend() == "tensorflow" else f" (the {keras.backend.backend()} backend has no string ops)"
    )
    if not isinstance(embedder, Elmo):
        raise InputError(
            f"a model over char ids{where} needs an ek.Elmo embedder, got {type(embedder).__name__}: "
            "use ek.Elmo.from_preset(...) or ek.Elmo.from_pretrained(...)"
        )
    given = sorted(key for key, value in text_only.items() if value is not None)
    if given:
        raise InputError(f"{', '.join(given)} read text: leave them out for a model over char ids{where}")
    return True


def _char_ids_input(embedder: keras.layers.Layer):
    """The model input of char ids, int32 [B, T, max_characters_per_token] of ``embedder`` (an Elmo)."""
    return keras.Input(shape=(None, embedder.bilm.max_characters_per_token), dtype="int32", name="char_ids")


def _check_classifier_args(head: str, num_classes: int, multi_label: bool) -> None:
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    if num_classes < 1 or (num_classes < 2 and not multi_label):
        raise ValueError(f"num_classes must be >= 2 (>= 1 for multi-label), got {num_classes}")


def _compiled_classifier(
    model_class: type[keras.Model],
    inputs,
    doc,
    num_classes: int,
    multi_label: bool,
    dropout: float,
    learning_rate: float,
    top_k: int,
    name: str,
    label_sampling: int | None = None,
    label_dim: int = 256,
) -> keras.Model:
    """Pooled document vectors -> dropout -> scores, compiled with the loss/metrics of the task (multi-label:
    micro/macro F1, P@top_k and nDCG@top_k). The scores are a Dense layer, or with ``label_sampling`` a
    :class:`SampledLabelScores` in a model of the sampled class (``model_class`` ``TextModel`` or ``keras.Model``
    -> :class:`SampledTextModel` or :class:`SampledLabelModel`), with :class:`LazyAdam` and a loss summed over the
    labels (the sampled loss estimates that sum); not XLA-compiled (``LazyAdam``'s ``tf.unique`` has a dynamic
    shape)."""
    doc = keras.layers.Dropout(dropout, name="dropout")(doc)
    if label_sampling is not None:
        outputs = SampledLabelScores(num_classes, label_sampling, label_dim, dtype="float32", name="scores")(doc)
        model_class = {TextModel: SampledTextModel, keras.Model: SampledLabelModel}[model_class]
        optimizer, reduction, jit = LazyAdam(learning_rate), "sum", False
    else:
        activation = "sigmoid" if multi_label else "softmax"
        outputs = keras.layers.Dense(num_classes, activation=activation, dtype="float32", name="scores")(doc)
        optimizer, reduction, jit = keras.optimizers.Adam(learning_rate), "mean", "auto"
    model = model_class(inputs, outputs, name=name)
    if multi_label:
        model.compile(
            optimizer,
            loss=MultiLabelBinaryCrossentropy(num_classes, reduction),
            jit_compile=jit,
            metrics=[
                MultiLabelF1(num_classes, "micro"),
                MultiLabelF1(num_classes, "macro"),
                PrecisionAtK(num_classes, k=top_k),
                NDCGAtK(num_classes, k=top_k),
            ],
        )
    else:
        model.compile(
            keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
    return model


def features_classifier(
    num_layers: int,
    dim: int,
    num_classes: int,
    head: str = "bigru",
    mix: str = "trainable",
    multi_label: bool = False,
    mix_weights: Sequence[float] | None = None,
    units: int = 128,
    hidden: int = 256,
    dropout: float = 0.3,
    learning_rate: float = 1e-3,
    top_k: int = 5,
    word_embedding: keras.layers.Layer | None = None,
    name: str = "features_classifier",
    label_sampling: int | None = None,
    label_dim: int = 256,
) -> keras.Model:
    """Like :func:`text_classifier`, but over precomputed biLM layers instead of raw strings.

    Inputs ``{"layers": float [B, T, num_layers, dim], "mask": bool [B, T]}``, as batched by
    :func:`elmo_keras.tasks.features.features_dataset` from :class:`elmo_keras.ElmoEmbedder` output. With a frozen
    biLM this is the same model as ``text_classifier(elmo, ...)`` (the same ``features_head``, dropout and
    scores), but the biLM runs once per text instead of once per epoch; ``TextModel.fit`` does this by itself.
    Static vectors fit too (``num_layers=1``, ``mix="top"``). With ``word_embedding`` the model also takes
    ``"tokens": string [B, T]`` (``features_dataset(tokens=...)``).

    Args:
        num_layers: L, the number of biLM layers stored per token.
        dim: D, their width.
        num_classes: the number of classes (labels, when ``multi_label``).
        head: ``"bigru"``, ``"bilstm_bigru"`` or ``"pool"`` (see :func:`text_classifier`).
        mix: how the embedder's layers are combined: ``"trainable"``, ``"fixed"``, ``"mlp"``, ``"top"``,
            ``"average"`` or ``"concat"`` (see :func:`elmo_keras.layers.fusion.make_layer_mixer`).
        multi_label: multi-label outputs, loss and metrics (see :func:`text_classifier`).
        mix_weights: one weight per layer for ``mix="fixed"``, else ``None``.
        units: GRU/LSTM units per direction.
        hidden: units of the ``"mlp"`` mix and of the ``"bilstm_bigru"`` head's Dense layer.
        dropout: dropout rate before the output layer.
        learning_rate: Adam's learning rate.
        top_k: the k of precision@k (multi-label).
        word_embedding: a layer over ``"tokens"`` (see :func:`text_classifier`), or ``None``.
        name: the model's name.
        label_sampling: ``None`` (the dense head) or the negatives per batch of the sampled multi-label head (see
            :func:`text_classifier`).
        label_dim: the width of the sampled head's label table (with ``label_sampling``).

    Returns:
        A compiled ``keras.Model`` (a :class:`~elmo_keras.tasks.sampled_labels.SampledLabelModel` with
        ``label_sampling``).
    """
    _check_classifier_args(head, num_classes, multi_label)
    check_label_sampling(label_sampling, label_dim, multi_label)
    features_head = _features_head(num_layers, dim, head, mix, mix_weights, units, hidden, word_embedding)
    inputs = _inputs_like(features_head)
    return _compiled_classifier(
        keras.Model,
        inputs,
        features_head(inputs),
        num_classes,
        multi_label,
        dropout,
        learning_rate,
        top_k,
        name,
        label_sampling,
        label_dim,
    )


def _features_head(
    num_layers: int,
    dim: int,
    head: str,
    mix: str,
    mix_weights,
    units: int,
    hidden: int,
    word_embedding: keras.layers.Layer | None,
) -> keras.Model:
    """``{"layers": [B, T, num_layers, dim], "mask": [B, T]}`` (+ ``"tokens"`` [B, T]) -> pooled [B, 2H]:
    the layer mixer, the optional word embedding, the sequence head and the pooling."""
    inputs = {
        "layers": keras.Input(shape=(None, num_layers, dim), name="layers"),
        "mask": keras.Input(shape=(None,), dtype="bool", name="mask"),
    }
    if word_embedding is not None:
        inputs["tokens"] = keras.Input(shape=(None,), dtype="string", name="tokens")
    layers = UnstackLayers(name="unstack_layers")([inputs["layers"], inputs["mask"]])
    x = make_layer_mixer(mix, num_layers, mix_weights=mix_weights, hidden=hidden)(layers)
    pooled = _pooled_head(x, inputs.get("tokens"), head, units, hidden, word_embedding)
    return keras.Model(inputs, pooled, name=FEATURES_HEAD)


def _pooled_head(x, tokens, head: str, units: int, hidden: int, word_embedding: keras.layers.Layer | None):
    """A masked sequence [B, T, D] (+ tokens for ``word_embedding``) -> head -> masked [max; mean] pooling."""
    x = _sequence_head(_with_words(x, word_embedding, tokens), head, units, hidden)
    return MaskedPooling(("max", "mean"), name="pooling")(x)


def _inputs_like(model: keras.Model) -> dict:
    """Fresh ``keras.Input`` s with the names, shapes and dtypes of ``model``'s dict inputs."""
    return {key: keras.Input(shape=t.shape[1:], dtype=t.dtype, name=key) for key, t in model.input.items()}


def sequence_tagger(
    embedder: keras.layers.Layer,
    num_tags: int,
    mix: str = "trainable",
    mix_weights: Sequence[float] | None = None,
    units: int = 128,
    hidden: int = 256,
    dropout: float = 0.3,
    learning_rate: float = 1e-3,
    name: str = "sequence_tagger",
    char_ids: bool | None = None,
) -> keras.Model:
    """A compiled ``keras.Model``: padded tokens [B, T] ("" = padding, see :func:`pad_tokens`) -> tag
    probabilities [B, T, num_tags].

    BiGRU over the mixed ELMo sequence, per-token softmax. Labels are int [B, T], aligned with the tokens;
    padded positions are masked out of the loss and the accuracy (their label values are ignored).

    Args:
        embedder: the text embedder: ``ek.Elmo``, ``HubElmo`` or ``StaticEmbedding``.
        num_tags: the number of tags.
        mix: how the embedder's layers are combined: ``"trainable"``, ``"fixed"``, ``"mlp"``, ``"top"``,
            ``"average"`` or ``"concat"`` (see :func:`elmo_keras.layers.fusion.make_layer_mixer`).
        mix_weights: one weight per layer for ``mix="fixed"``, else ``None``.
        units: GRU units per direction.
        hidden: units of the ``"mlp"`` mix.
        dropout: dropout rate before the output layer.
        learning_rate: Adam's learning rate.
        name: the model's name.
        char_ids: take char ids int32 `[B, T, max_characters_per_token]` (:func:`elmo_keras.batch_to_ids`)
            instead of padded tokens, over an ``ek.Elmo``; ``None``: on the TensorFlow backend tokens, on the
            others (no string ops) char ids.

    Returns:
        A compiled :class:`TextModel` (over char ids with ``char_ids``; it still takes texts, see there).

    Example:

    ```python
    import elmo_keras as ek

    model = ek.models.sequence_tagger(ek.Elmo.from_preset("brown-small"), num_tags=3, units=4)
    tokens = ek.models.pad_tokens([["The", "bank"], ["Hi"]])
    assert model.predict(tokens, verbose=0).shape == (2, 2, 3)
    ```
    """
    if num_tags < 2:
        raise ValueError(f"num_tags must be >= 2, got {num_tags}")
    on_char_ids = _takes_char_ids(embedder, char_ids)
    tokens = _char_ids_input(embedder) if on_char_ids else keras.Input(shape=(None,), dtype="string", name="tokens")
    layers = _layer_embedder(embedder)(tokens)
    if isinstance(layers, (list, tuple)):
        layers = make_layer_mixer(mix, len(layers), mix_weights=mix_weights, hidden=hidden)(layers)
    x = _sequence_head(layers, "bigru", units, hidden)
    x = keras.layers.Dropout(dropout)(x)
    outputs = keras.layers.Dense(num_tags, activation="softmax", dtype="float32", name="tags")(x)
    model = TextModel(tokens, outputs, name=name)
    model.compile(keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def layer_mixer(model: keras.Model, name: str = "layer_mix") -> keras.layers.Layer:
    """The layer that combines the biLM layers in a model built here (a ``ScalarMix`` for mix "trainable",
    "fixed", "top", "average"), wherever it sits: e.g. ``layer_mixer(model).normalized_weights()``.

    Args:
        model: a model from :func:`text_classifier`, :func:`features_classifier` or :func:`sequence_tagger`.
        name: the mixer layer's name.

    Returns:
        The mixer layer.
    """
    stack = [model]
    while stack:
        layer = stack.pop()
        if layer.name == name and layer is not model:
            return layer
        stack.extend(getattr(layer, "layers", []))
        stack.extend([layer.encoder] if isinstance(layer, SegmentedEncoder) else [])
    raise ValueError(
        f"{model.name} has no layer named {name!r} (its embedder has a single layer, or it was "
        "not built by elmo_keras.tasks.models)"
    )
