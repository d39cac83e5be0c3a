"""Static word vectors as a Keras layer, with the same tokenisation and mask as ``Elmo``: the baselines' layer
(:mod:`elmo_keras.tasks.baselines`) and the task word embedding beside ELMo (``word_embedding=`` of the classifiers)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from elmo_keras.saving import serializable
from elmo_keras.text import split_sentences, token_mask


def check_corpus(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
    """Token lists as lists; ValueError for an empty corpus, TypeError for strings.

    Args:
        sentences: list of token lists.

    Returns:
        The token lists, each a list.
    """
    corpus = [list(s) for s in sentences]
    if not any(corpus):
        raise ValueError("the corpus is empty: pass a list of token lists")
    if any(isinstance(s, str) for s in sentences):
        raise TypeError("pass token lists, not strings (use elmo_keras.tokenize)")
    return corpus


@serializable
class StaticEmbedding(keras.layers.Layer):
    """Static word vectors for sentences or padded tokens, with the same tokenisation and mask as `Elmo`.

    Unknown words map to the mean vector (a learned row when trainable); `""` is padding. Without `vectors`
    the table starts from `embeddings_initializer` (a task embedding to learn: see `from_corpus`).

    Args:
        vocabulary: list of distinct, non-empty words.
        vectors: float array `[len(vocabulary), dim]` of initial vectors, or `None` to start from
            `embeddings_initializer`. Defaults to `None`.
        dim: int, vector size; needed only without `vectors`. Defaults to `None`.
        embeddings_initializer: initializer of the table when there are no `vectors`. Defaults to `"uniform"`.
        **kwargs: base layer keyword arguments, such as `name`, `dtype` and `trainable`.

    Call arguments:
        inputs: string tensor of sentences `[batch]` (split on whitespace) or of padded tokens
            `[batch, timesteps]` (`""` = padding, after the real tokens).

    Returns:
        A float tensor `[batch, timesteps, dim]`, with the Keras mask `tokens != ""` (so that e.g. a
        `Bidirectional(GRU)` on top skips padding).

    Example:

    ```python
    import numpy as np
    import tensorflow as tf
    from elmo_keras.layers import StaticEmbedding

    embedding = StaticEmbedding(["good", "film"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    vectors = embedding(tf.constant(["good film", "bad"]))
    np.testing.assert_allclose(vectors[0], [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(vectors[1, 0], [0.5, 0.5])  # an unknown word: the mean vector
    np.testing.assert_array_equal(vectors._keras_mask, [[True, True], [True, False]])
    ```
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        vectors: np.ndarray | None = None,
        dim: int | None = None,
        embeddings_initializer: str = "uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary = list(vocabulary)
        if len(set(self.vocabulary)) != len(self.vocabulary) or "" in self.vocabulary:
            raise ValueError("vocabulary must hold distinct, non-empty words")
        if vectors is not None:
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.shape[0] != len(self.vocabulary):
                raise ValueError(f"{vectors.shape[0]} vectors for {len(self.vocabulary)} words")
            dim = vectors.shape[1]
        if dim is None:
            raise ValueError("give vectors or dim")
        self.dim = dim
        self.embeddings_initializer = embeddings_initializer
        self._initial_vectors = vectors
        self.lookup = keras.layers.StringLookup(vocabulary=self.vocabulary, mask_token="", num_oov_indices=1)

    def build(self, input_shape=None):
        if self._initial_vectors is not None:
            vectors = self._initial_vectors
            table = np.concatenate([np.zeros((1, self.dim)), vectors.mean(0, keepdims=True), vectors])
            init = keras.initializers.Constant(table.astype(np.float32))
        else:
            init = self.embeddings_initializer
        self.table = self.add_weight(name="vectors", shape=(len(self.vocabulary) + 2, self.dim), initializer=init)

    @staticmethod
    def _as_tokens(inputs):
        """Sentences [B] -> padded tokens [B, T]; padded tokens as they are."""
        return split_sentences(inputs) if len(inputs.shape) == 1 else inputs

    def call(self, inputs):
        return ops.take(self.table, self.lookup(self._as_tokens(inputs)), axis=0)

    def compute_mask(self, inputs, mask=None):
        if keras.backend.is_keras_tensor(inputs):
            # No symbolic mask: splitting needs the strings, so the functional model computes it when it runs.
            # Every elmo_keras embedder does the same: Keras would take a missing symbolic mask beside a present one
            # (e.g. in Concatenate) as "all steps real".
            return None
        return token_mask(inputs)

    def compute_output_spec(self, inputs):
        steps = inputs.shape[1] if len(inputs.shape) == 2 else None
        return keras.KerasTensor((inputs.shape[0], steps, self.dim), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": self.vocabulary,
            "dim": self.dim,
            "embeddings_initializer": self.embeddings_initializer,
        }

    @classmethod
    def from_corpus(
        cls, sentences: Sequence[Sequence[str]], dim: int, min_count: int = 1, **kwargs
    ) -> "StaticEmbedding":
        """A trainable embedding over the words seen ``min_count`` times in ``sentences`` (token lists), e.g.
        the task's training texts: the word representation ELMo is concatenated with (``word_embedding=`` of
        :func:`elmo_keras.tasks.models.text_classifier`).

        Args:
            sentences: list of token lists.
            dim: int, the vector size.
            min_count: int, the least number of times a word must occur to get a vector.
            **kwargs: arguments of :class:`StaticEmbedding` (``trainable`` defaults to True here).

        Returns:
            A :class:`StaticEmbedding`, not built.

        Example:

        ```python
        from elmo_keras.layers import StaticEmbedding

        embedding = StaticEmbedding.from_corpus([["a", "good", "film"], ["a", "bad", "film"]], dim=4, min_count=2)
        assert embedding.vocabulary == ["a", "film"]
        ```
        """
        counts = Counter(t for s in check_corpus(sentences) for t in s)
        words = sorted(w for w, c in counts.items() if c >= min_count and w)
        return cls(words, dim=dim, trainable=kwargs.pop("trainable", True), **kwargs)
