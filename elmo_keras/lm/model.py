"""BiLanguageModel: our BiLM (char CNN + any encoder of the options) + a softmax over words shared by both
directions."""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.io.load import ModelFiles, resolve
from elmo_keras.io.options import normalize_options
from elmo_keras.io.weights import write_weights_hdf5
from elmo_keras.layers.bilm import BiLM
from elmo_keras.lm.data import sentences_dataset
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.saving import serializable

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

    def get_config(self):
        return {
            **super().get_config(),
            "options": self.options,
            "vocab": self.vocab.tokens,
            "n_sampled": self.n_sampled,
            "dropout": self.dropout_rate,
        }
