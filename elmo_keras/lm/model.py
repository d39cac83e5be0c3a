"""BiLanguageModel: our BiLM (char CNN + any encoder of the options) + a softmax over words shared by both
directions."""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.errors import InputError
from elmo_keras.io.load import ModelFiles, resolve
from elmo_keras.io.options import normalize_options, positive_int
from elmo_keras.io.weights import write_weights_hdf5
from elmo_keras.layers.bilm import BiLM
from elmo_keras.lm.data import sentences_dataset
from elmo_keras.lm.predict import (
    DIRECTIONS,
    Query,
    check_k,
    excluded_ids,
    parse_queries,
    parse_query,
    top_words,
)
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.saving import serializable
from elmo_keras.utils.backend import require_tensorflow

SOFTMAX_W, SOFTMAX_B = "softmax/W", "softmax/b"  # names in bilm-tf checkpoints and in our softmax hdf5


@serializable
class Perplexity(keras.metrics.Metric):
    """exp(total negative log-likelihood / number of predicted tokens), summed over replicas.

    ``update_state(nll_sum, count)`` adds a summed negative log-likelihood and its token count.

    Args:
        name: str, the metric's name. Defaults to `"perplexity"`.
        **kwargs: base metric keyword arguments, such as `dtype`.

    Example:

    ```python
    import math
    from elmo_keras.lm.model import Perplexity

    metric = Perplexity()
    metric.update_state(2 * math.log(4.0), 2)   # two tokens, each with probability 1/4
    assert abs(float(metric.result()) - 4.0) < 1e-4
    ```
    """

    def __init__(self, name: str = "perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, nll_sum, count):
        self.total.assign_add(tf.cast(nll_sum, self.total.dtype))
        self.count.assign_add(tf.cast(count, self.count.dtype))

    def result(self):
        return tf.exp(tf.math.divide_no_nan(self.total, self.count))


@serializable
class BiLanguageModel(keras.Model):
    """Bidirectional LM for pretraining ELMo.

    ``y`` for ``fit`` is ``(forward_targets [B, T], backward_targets [B, T])`` with -1 where there is no target.
    Loss = mean of the forward and backward token-mean cross entropies (normalised by the global token count, so
    replicas and a single process compute the same gradient).

    Args:
        options: the options dict of the biLM (see :mod:`elmo_keras.io.options`).
        vocab: a :class:`~elmo_keras.lm.vocab.Vocabulary`, a list of words, or the path of a vocab.txt.
        n_sampled: int, > 0 uses a sampled softmax of that many words (log-uniform sampler, remove accidental
            hits) in training; evaluation and :meth:`perplexity` always use the full softmax. Must be smaller
            than the vocabulary. Defaults to `0`.
        dropout: float, dropout on the top encoder layer (training only). Defaults to `0.1`.
        **kwargs: base model keyword arguments, such as `name`.

    Call arguments:
        char_ids: char ids int32 [B, T, C] that already hold ``<S>``/``</S>`` rows (see
            :mod:`elmo_keras.lm.data`).
        training: bool, applies dropout. Defaults to `False`.

    Returns:
        The top encoder layer per direction, ``{"forward": [B, T, P], "backward": [B, T, P]}`` (after dropout
        when training).

    Attributes:
        softmax_trained: bool, whether the softmax holds trained weights: loaded from a softmax.hdf5, trained
            (``fit``, ``train_on_batch``, :func:`~elmo_keras.lm.pretrain`) or restored from a ``.keras`` file of
            such a model. :meth:`substitutes` and :meth:`word_probabilities` refuse a softmax that is not. Set it
            by hand after assigning trained weights another way.

    Example:

    ```python
    import elmo_keras as ek

    lm = ek.lm.BiLanguageModel.from_preset("brown-small")      # the preset's biLM and softmax
    ppl = lm.perplexity(["The jury said it did find that many of the voters were not satisfied ."])
    assert set(ppl) == {"forward", "backward"} and ppl["forward"] > 1
    ```
    """

    def __init__(
        self,
        options: dict,
        vocab: Vocabulary | Sequence[str] | str | os.PathLike,
        n_sampled: int = 0,
        dropout: float = 0.1,
        **kwargs,
    ):
        require_tensorflow(
            "BiLanguageModel (pretraining, the LM's predictions)", "its biLM loads on any backend: ek.BiLM.from_preset"
        )
        super().__init__(**kwargs)
        self.options = normalize_options(options)
        if isinstance(vocab, (str, os.PathLike)):
            vocab = Vocabulary.load(vocab)
        self.vocab = vocab if isinstance(vocab, Vocabulary) else Vocabulary(vocab)
        self.n_tokens_vocab = len(self.vocab)
        if not 0 <= n_sampled < self.n_tokens_vocab:
            raise ValueError(f"n_sampled must be in [0, vocabulary size {self.n_tokens_vocab}), got {n_sampled}")
        self.n_sampled, self.dropout_rate = n_sampled, dropout
        self.bilm = BiLM(self.options, add_sentence_boundaries=False, trainable=True, name="bilm")
        self.dropout = keras.layers.Dropout(dropout)
        self.projection_dim = self.bilm.projection_dim
        self.forward_perplexity = Perplexity(name="forward_ppl")
        self.backward_perplexity = Perplexity(name="backward_ppl")
        self.token_count = keras.metrics.Sum(name="tokens")  # predicted tokens per direction, this epoch
        self.softmax_trained = False  # random until loaded (load_softmax_hdf5) or trained (train_step)

    def build(self, input_shape=None):
        self.bilm.build(None)
        init = keras.initializers.RandomNormal(stddev=self.projection_dim**-0.5)
        self.softmax_w = self.add_weight(
            name="softmax_w", shape=(self.n_tokens_vocab, self.projection_dim), initializer=init
        )
        self.softmax_b = self.add_weight(name="softmax_b", shape=(self.n_tokens_vocab,), initializer="zeros")
        self.dropout.build(None)
        self.built = True

    def train_step(self, data):
        self.softmax_trained = True  # runs when fit / train_on_batch trace (or run eagerly) their first step
        return self._multi_worker_logs(super().train_step(data))

    def test_step(self, data):
        return self._multi_worker_logs(super().test_step(data))

    def _multi_worker_logs(self, logs: dict) -> dict:
        # Keras 3.15 reduces step logs across workers with strategy.reduce("MEAN", v, axis=0), which fails on
        # scalars; give it [1]-shaped values there (all workers hold the same, already global, metric values).
        if isinstance(self.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return {key: tf.reshape(value, [1]) for key, value in logs.items()}
        return logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras 3.15's version first reduces ("MEAN") a whole input batch across replicas, which fails under
        # MultiWorkerMirroredStrategy (int char ids; per-worker shapes). All this model needs is build() and
        # the optimizer's variables.
        if not self.built:
            self.build()
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)

    def call(self, char_ids, training=False):
        top = self.bilm(char_ids)["layers"][-1]
        top = self.dropout(top, training=training)
        return {"forward": top[..., : self.projection_dim], "backward": top[..., self.projection_dim :]}

    # -- loss and metrics ----------------------------------------------------------------------------------
    def token_nll(self, hidden, targets, training: bool = False):
        """The softmax's negative log-likelihood of the targets.

        Args:
            hidden: float [B, T, P], one direction's output of :meth:`call`.
            targets: int [B, T], word ids; -1 where there is no target.
            training: bool, use the sampled softmax (when ``n_sampled`` > 0). Defaults to `False`.

        Returns:
            The summed negative log-likelihood (float32 scalar) and the count of targets >= 0 (float32).
        """
        valid = targets >= 0
        h = tf.cast(tf.boolean_mask(hidden, valid), tf.float32)  # [N, P]; the softmax runs in float32
        t = tf.cast(tf.boolean_mask(targets, valid), tf.int64)
        w, b = tf.cast(self.softmax_w, tf.float32), tf.cast(self.softmax_b, tf.float32)
        if training and self.n_sampled:
            nll = tf.nn.sampled_softmax_loss(
                w, b, t[:, None], h, num_sampled=self.n_sampled, num_classes=self.n_tokens_vocab
            )
        else:
            nll = tf.nn.sparse_softmax_cross_entropy_with_logits(t, tf.matmul(h, w, transpose_b=True) + b)
        return tf.reduce_sum(nll), tf.cast(tf.shape(t)[0], tf.float32)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        forward_targets, backward_targets = y
        f_sum, f_count = self.token_nll(y_pred["forward"], forward_targets, training)
        b_sum, b_count = self.token_nll(y_pred["backward"], backward_targets, training)
        self.forward_perplexity.update_state(f_sum, f_count)
        self.backward_perplexity.update_state(b_sum, b_count)
        self.token_count.update_state(f_count)
        counts = tf.stop_gradient(tf.stack([f_count, b_count]))
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            counts = context.all_reduce(tf.distribute.ReduceOp.SUM, counts)
        counts = tf.maximum(counts, 1.0)
        loss = 0.5 * (f_sum / counts[0] + b_sum / counts[1])
        return loss + sum(self.losses) if self.losses else loss

    # -- evaluation ----------------------------------------------------------------------------------------
    def perplexity(self, sentences: Sequence[str | Sequence[str]], batch_size: int = 32) -> dict[str, float]:
        """Full-softmax perplexity per direction on held-out sentences.

        Counts every predicted token, ``</S>`` (forward) / ``<S>`` (backward) and ``<UNK>`` included.

        Args:
            sentences: strings (split on whitespace) or token lists; at least one.
            batch_size: int, sentences per batch. Defaults to `32`.

        Returns:
            ``{"forward": float, "backward": float}``.
        """
        if not len(sentences):
            raise ValueError("perplexity() needs at least one sentence")
        sums = np.zeros(4)
        for chars, (fwd, bwd) in sentences_dataset(
            sentences, self.vocab, batch_size, self.bilm.max_characters_per_token
        ):
            sums += [float(v) for v in self._eval_batch(chars, fwd, bwd)]
        return {"forward": float(np.exp(sums[0] / sums[1])), "backward": float(np.exp(sums[2] / sums[3]))}

    @tf.function(reduce_retracing=True)
    def _eval_batch(self, chars, fwd, bwd):
        out = self(chars, training=False)
        return (*self.token_nll(out["forward"], fwd), *self.token_nll(out["backward"], bwd))

    # -- weights ---------------------------------------------------------------------------------------------
    def softmax_arrays(self) -> dict[str, np.ndarray]:
        """The softmax weights as NumPy arrays.

        Returns:
            ``{"softmax/W": [V, P], "softmax/b": [V]}`` (the names of bilm-tf checkpoints and of our softmax hdf5).
        """
        return {
            SOFTMAX_W: keras.ops.convert_to_numpy(self.softmax_w),
            SOFTMAX_B: keras.ops.convert_to_numpy(self.softmax_b),
        }

    def save_softmax_hdf5(self, path: str | os.PathLike) -> None:
        """Write ``softmax/W`` [V, P] and ``softmax/b`` [V] (atomically).

        Args:
            path: the hdf5 file to write (e.g. ``softmax.hdf5`` of a pretraining output folder).

        Example:

        ```python
        import os, tempfile
        import h5py
        import elmo_keras as ek

        lm = ek.lm.BiLanguageModel.from_preset("brown-small")
        path = os.path.join(tempfile.mkdtemp(), "softmax.hdf5")
        lm.save_softmax_hdf5(path)
        with h5py.File(path, "r") as f:
            assert f["softmax/W"].shape == (len(lm.vocab), lm.projection_dim)
        lm.load_softmax_hdf5(path)   # e.g. into a model of the same vocabulary
        ```
        """
        write_weights_hdf5(self.softmax_arrays(), path)

    def load_softmax_hdf5(self, path: str | os.PathLike) -> None:
        """Assign the softmax from a file written by :meth:`save_softmax_hdf5` (or a bilm-tf softmax in that
        layout); KeyError for a missing dataset, ValueError for a shape other than [V, P] / [V].

        Args:
            path: the hdf5 file.
        """
        import h5py

        with h5py.File(path, "r") as f:
            for name, var in ((SOFTMAX_W, self.softmax_w), (SOFTMAX_B, self.softmax_b)):
                if name not in f:
                    raise KeyError(f"softmax file {os.fspath(path)!r} has no dataset '{name}'")
                if tuple(f[name].shape) != tuple(var.shape):
                    raise ValueError(
                        f"softmax file {os.fspath(path)!r}: '{name}' has shape {f[name].shape}, "
                        f"expected {tuple(var.shape)} (vocabulary size x projection_dim)"
                    )
                var.assign(np.asarray(f[name][...], dtype=np.float32))
        self.softmax_trained = True

    @classmethod
    def from_pretrained(
        cls,
        options_file: dict | str | os.PathLike,
        weight_file: str | os.PathLike,
        vocab: Vocabulary | Sequence[str] | str | os.PathLike,
        softmax_file: str | os.PathLike | None = None,
        **kwargs,
    ) -> "BiLanguageModel":
        """Released-layout biLM weights (+ optionally our softmax hdf5) -> a model to continue training.

        Args:
            options_file: the options, as a path, an http(s) URL or a dict.
            weight_file: the released-layout hdf5 weights, as a path or an http(s) URL.
            vocab: a :class:`~elmo_keras.lm.vocab.Vocabulary`, a list of words, or the path of a vocab.txt.
            softmax_file: our softmax hdf5 (see :meth:`save_softmax_hdf5`), or `None`: the softmax starts from
                random (e.g. a new vocabulary for domain adaptation). Defaults to `None`.
            **kwargs: arguments of ``BiLanguageModel``, such as ``n_sampled`` and ``dropout``.

        Returns:
            A built ``BiLanguageModel``.
        """
        return cls._from_files(resolve(options_file, weight_file), vocab, softmax_file, **kwargs)

    @classmethod
    def from_preset(cls, name: str, **kwargs) -> "BiLanguageModel":
        """A shipped preset (e.g. ``"brown-small"``) or a pretraining output folder, softmax included; any source
        :func:`elmo_keras.io.load.resolve` takes that has a vocabulary.

        Args:
            name: the preset's name, or a folder (or a folder's URL) with options.json, weights.hdf5, vocab.txt
                and softmax.hdf5 (the softmax starts from random without it).
            **kwargs: arguments of ``BiLanguageModel``, such as ``n_sampled`` and ``dropout``.

        Returns:
            A built ``BiLanguageModel``.
        """
        files = resolve(name)
        if files.vocab is None:
            raise InputError(
                f"{name!r} has no vocab.txt: a BiLanguageModel needs the vocabulary of its softmax (the released "
                "ELMo files hold neither). Load a preset or pretraining folder with vocab.txt and softmax.hdf5, "
                "e.g. 'brown-small', or give the vocabulary to BiLanguageModel.from_pretrained"
            )
        return cls._from_files(files, files.vocab, files.softmax, **kwargs)

    @classmethod
    def _from_files(
        cls,
        files: ModelFiles,
        vocab: Vocabulary | Sequence[str] | str | os.PathLike,
        softmax_file: str | os.PathLike | None,
        **kwargs,
    ) -> "BiLanguageModel":
        """What the loader found -> a built model (every ``from_*`` ends here); weights streamed, one array in
        memory at a time."""
        weights = files.read()
        model = cls(weights.options, vocab, **kwargs)
        model.build()
        model.bilm.set_weight_arrays(weights.arrays)
        if softmax_file is not None:
            model.load_softmax_hdf5(softmax_file)
        return model

    # -- what the language model predicts (see elmo_keras.lm.predict) ----------------------------------------
    def word_probabilities(self, queries: Sequence[Query], batch_size: int = 32) -> dict[str, np.ndarray]:
        """The full-softmax distribution over the vocabulary at each queried word, per direction.

        ``forward`` has read the words left of the word only, ``backward`` those right of it only, ``both`` is
        their normalised product (see :mod:`elmo_keras.lm.predict` for how and why). Queries on the same sentence
        share one run of the model; sentences run ``batch_size`` at a time.

        Args:
            queries: each a ``(sentence, position)`` pair (a str split on whitespace or a token list, and the
                word's index from 0) or a str that marks its word, ``"The [bank] raised its rates ."``.
            batch_size: int, sentences per model call. Defaults to `32`.

        Returns:
            ``{"forward": [N, V], "backward": [N, V], "both": [N, V]}``, float32 NumPy arrays, row i for query i,
            column j for ``vocab.tokens[j]``; each row sums to 1.

        Example:

        ```python
        import elmo_keras as ek

        lm = ek.lm.BiLanguageModel.from_preset("brown-small")
        p = lm.word_probabilities([("He was one of the best .", 3), "It is [the] end ."])
        assert p["forward"].shape == (2, len(lm.vocab)) and abs(p["both"][0].sum() - 1) < 1e-4
        ```
        """
        self.check_softmax()
        positive_int(batch_size, "batch_size")
        return self._word_probabilities(parse_queries(queries), batch_size)

    def substitutes(
        self,
        sentence: str | Sequence[str],
        position: int | None = None,
        k: int = 10,
        exclude_word: bool = False,
        exclude_special: bool = False,
    ) -> dict:
        """Which words fit here: the ``k`` most probable words at one position of a sentence, per direction.

        Args:
            sentence: a str split on whitespace, or a token list.
            position: int, the index of the word (0 = the first token), or `None` when ``sentence`` marks it with
                brackets, ``"The [bank] raised its rates ."``. Defaults to `None`.
            k: int, words per direction. Defaults to `10`.
            exclude_word: bool, leave the word itself (its vocabulary id; ``<UNK>`` for a word outside the
                vocabulary) out of the lists. Defaults to `False`: the word is ranked with the others.
            exclude_special: bool, leave ``<S>``, ``</S>`` and ``<UNK>`` out of the lists (``<UNK>``, all the words
                outside the vocabulary together, often tops a list for a rarer word). Defaults to `False`.

        Returns:
            ``{"tokens", "position", "word", "forward", "backward", "both"}``: the directions each hold a list of
            ``k`` ``(word, probability)`` pairs, most probable first. ``forward`` sees the left context only,
            ``backward`` the right context only, ``both`` is their normalised product (see
            :mod:`elmo_keras.lm.predict`). Probabilities are from the full softmax (float32), not renormalised
            over the list (nor after leaving words out); ``<S>``, ``</S>`` and ``<UNK>`` (some word outside the
            vocabulary) are listed unless ``exclude_special``.

        Example:

        ```python
        import elmo_keras as ek

        lm = ek.lm.BiLanguageModel.from_preset("brown-small")
        fits = lm.substitutes("He was one [of] the best players in the league .", k=3)
        assert fits["word"] == "of" and fits["both"][0][0] == "of" and len(fits["forward"]) == 3
        ```
        """
        return self.substitutes_batch([parse_query(sentence, position)], k, exclude_word, exclude_special)[0]

    def substitutes_batch(
        self,
        queries: Sequence[Query],
        k: int = 10,
        exclude_word: bool = False,
        exclude_special: bool = False,
        batch_size: int = 32,
    ) -> list[dict]:
        """:meth:`substitutes` for many queries at once (several positions and sentences per model call).

        Args:
            queries: each a ``(sentence, position)`` pair or a str that marks its word as ``[word]``.
            k: int, words per direction. Defaults to `10`.
            exclude_word: bool, leave each word itself out of its lists. Defaults to `False`.
            exclude_special: bool, leave ``<S>``, ``</S>`` and ``<UNK>`` out of the lists. Defaults to `False`.
            batch_size: int, sentences per model call. Defaults to `32`.

        Returns:
            One dict per query, as :meth:`substitutes` returns.
        """
        self.check_softmax()
        positive_int(batch_size, "batch_size")
        check_k(k, self.n_tokens_vocab - 3 * bool(exclude_special) - bool(exclude_word))
        parsed = parse_queries(queries)
        probabilities = self._word_probabilities(parsed, batch_size)
        results = []
        for i, (tokens, position) in enumerate(parsed):
            exclude = excluded_ids(self.vocab, tokens[position], exclude_word, exclude_special)
            results.append(
                {
                    "tokens": tokens,
                    "position": position,
                    "word": tokens[position],
                    **{d: top_words(probabilities[d][i], self.vocab.tokens, k, exclude) for d in DIRECTIONS},
                }
            )
        return results

    def check_softmax(self) -> None:
        """Refuse to predict words with a softmax that was never trained (:class:`InputError` saying how to get a
        trained one): checked first by :meth:`word_probabilities`, :meth:`substitutes` and ``elmo-keras
        lm-predict``, before their other arguments."""
        if not self.softmax_trained:
            raise InputError(
                "this BiLanguageModel has no trained softmax (it starts from random: its source had no "
                "softmax.hdf5, as the released ELMo weight files have none), so its predictions would be noise. "
                "Load a preset or pretraining folder with softmax.hdf5, e.g. "
                "BiLanguageModel.from_preset('brown-small'), a model trained with `elmo-keras pretrain` "
                "(BiLanguageModel.from_preset('run/')), or a softmax file with lm.load_softmax_hdf5(path)"
            )

    def _word_probabilities(self, parsed: list[tuple[list[str], int]], batch_size: int) -> dict[str, np.ndarray]:
        sentences = list(dict.fromkeys(tuple(tokens) for tokens, _ in parsed))  # each sentence runs once
        row_of = {sentence: i for i, sentence in enumerate(sentences)}
        out = {d: np.empty((len(parsed), self.n_tokens_vocab), np.float32) for d in DIRECTIONS}
        batches = sentences_dataset(
            [list(s) for s in sentences], self.vocab, batch_size, self.bilm.max_characters_per_token
        )
        for start, (chars, _) in zip(range(0, len(sentences), batch_size), batches):
            asked = [
                (i, row_of[tuple(t)] - start, p)
                for i, (t, p) in enumerate(parsed)
                if start <= row_of[tuple(t)] < start + batch_size
            ]
            rows = tf.constant([[row, p] for _, row, p in asked], tf.int32)
            for d, value in zip(DIRECTIONS, self._predict_words(chars, rows)):
                out[d][[i for i, _, _ in asked]] = value.numpy()
        return out

    @tf.function(
        input_signature=[tf.TensorSpec([None, None, None], tf.int32), tf.TensorSpec([None, 2], tf.int32)]
    )  # one trace for every batch shape
    def _predict_words(self, chars, rows):
        """Softmax per direction for the word ``rows[:, 1]`` of sentence ``rows[:, 0]``: ``chars`` holds
        ``<S>, w_0 .. </S>``, so word p is row p + 1; the forward state at row p has read up to w_{p-1} (its
        target is row p + 1), the backward state at row p + 2 has read from w_{p+1} (its target is row p + 1)."""
        out = self(chars, training=False)
        forward = tf.gather_nd(out["forward"], rows)  # row p
        backward = tf.gather_nd(out["backward"], rows + tf.constant([0, 2]))  # row p + 2
        # logits and softmax in float64 (a [N, P] x [P, V] product: cheap), returned as float32: a float32 sum
        # of two logits near 20 would already be off by ~1e-6 in a probability near 1
        w, b = tf.cast(self.softmax_w, tf.float64), tf.cast(self.softmax_b, tf.float64)
        logits_f = tf.matmul(tf.cast(forward, tf.float64), w, transpose_b=True) + b
        logits_b = tf.matmul(tf.cast(backward, tf.float64), w, transpose_b=True) + b
        return [tf.cast(tf.nn.softmax(x), tf.float32) for x in (logits_f, logits_b, logits_f + logits_b)]

    def get_config(self):
        return {
            **super().get_config(),
            "options": self.options,
            "vocab": self.vocab.tokens,
            "n_sampled": self.n_sampled,
            "dropout": self.dropout_rate,
            "softmax_trained": self.softmax_trained,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        # a file saved before the flag existed: a saved language model is taken to be a trained one
        softmax_trained = bool(config.pop("softmax_trained", True))
        model = super().from_config(config, custom_objects)
        model.softmax_trained = softmax_trained  # the weights a .keras file restores are those of the saved model
        return model
