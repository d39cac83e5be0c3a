"""Static word-embedding baselines: CBOW word2vec, SVD of PPMI, fastText-style subword vectors.

Trained on tokenised sentences (lists of tokens), then turned into a Keras layer with the same
tokenisation as ``Elmo`` (whitespace split in the graph). Needs the ``baselines`` extra (gensim, scikit-learn).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np
from keras import ops

from elmo_keras.text import split_sentences, token_mask


@dataclass
class StaticVectors:
    """A vocabulary and its vectors [V, D]; ``oov`` (fastText) computes a vector for any other word."""

    words: list[str]
    vectors: np.ndarray
    oov: Callable[[str], np.ndarray] | None = field(default=None, repr=False)

    def embedding(self, extra_words: Iterable[str] = (), trainable: bool = False, **kwargs) -> "StaticEmbedding":
        """A :class:`StaticEmbedding` layer; with ``oov`` set, ``extra_words`` (e.g. the task's vocabulary)
        get subword vectors too."""
        words, vectors = list(self.words), [self.vectors]
        if self.oov is not None:
            known = set(words)
            extra = sorted({w for w in extra_words if w and w not in known})
            if extra:
                words += extra
                vectors.append(np.stack([self.oov(w) for w in extra]))
        return StaticEmbedding(words, np.concatenate(vectors).astype(np.float32), trainable=trainable, **kwargs)


def _check_corpus(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
    corpus = [list(s) for s in sentences]
    if not any(corpus):
        raise ValueError("the corpus is empty: pass a list of token lists")
    if any(isinstance(s, str) for s in sentences):
        raise TypeError("pass token lists, not strings (use elmo_keras.tokenize)")
    return corpus


def train_cbow(sentences: Sequence[Sequence[str]], dim: int = 100, window: int = 5, min_count: int = 2,
               epochs: int = 5, seed: int = 0, workers: int = 2) -> StaticVectors:
    """CBOW word2vec (gensim) on token lists."""
    from gensim.models import Word2Vec

    model = Word2Vec(_check_corpus(sentences), vector_size=dim, window=window, min_count=min_count, sg=0,
                     epochs=epochs, seed=seed, workers=workers)
    return StaticVectors(list(model.wv.index_to_key), model.wv.vectors.copy())


def train_fasttext(sentences: Sequence[Sequence[str]], dim: int = 100, window: int = 5, min_count: int = 2,
                   epochs: int = 5, min_n: int = 3, max_n: int = 6, seed: int = 0, workers: int = 2) -> StaticVectors:
    """fastText-style CBOW with character n-gram subwords (gensim); unseen words get subword vectors."""
    from gensim.models import FastText

    model = FastText(_check_corpus(sentences), vector_size=dim, window=window, min_count=min_count, sg=0,
                     epochs=epochs, min_n=min_n, max_n=max_n, seed=seed, workers=workers)
    wv = model.wv
    return StaticVectors(list(wv.index_to_key), wv.vectors.copy(), oov=lambda w: np.asarray(wv[w]))


def train_svd_ppmi(sentences: Sequence[Sequence[str]], dim: int = 100, window: int = 5, min_count: int = 2,
                   seed: int = 0) -> StaticVectors:
    """Truncated SVD (scikit-learn) of the positive PMI matrix of symmetric window co-occurrences."""
    from scipy import sparse
    from sklearn.decomposition import TruncatedSVD

    corpus = _check_corpus(sentences)
    counts = Counter(t for s in corpus for t in s)
    words = [w for w, c in counts.most_common() if c >= min_count]
    index = {w: i for i, w in enumerate(words)}
    rows, cols = [], []
    for sentence in corpus:
        ids = [index.get(t, -1) for t in sentence]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for b in ids[max(0, i - window):i]:
                if b >= 0:
                    rows += [a, b]
                    cols += [b, a]
    n = len(words)
    if n <= dim:
        raise ValueError(f"vocabulary of {n} words is too small for dim={dim}; lower dim or min_count")
    cooc = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    total = cooc.sum()
    row_sum = np.asarray(cooc.sum(axis=1)).ravel()
    col_sum = np.asarray(cooc.sum(axis=0)).ravel() ** 0.75  # context distribution smoothing
    col_sum = col_sum / col_sum.sum() * total
    cooc = cooc.tocoo()
    pmi = np.log(cooc.data * total / (row_sum[cooc.row] * col_sum[cooc.col]))
    keep = pmi > 0
    ppmi = sparse.csr_matrix((pmi[keep], (cooc.row[keep], cooc.col[keep])), shape=(n, n))
    svd = TruncatedSVD(n_components=dim, random_state=seed)
    vectors = svd.fit_transform(ppmi) / np.sqrt(np.maximum(svd.singular_values_, 1e-12))  # U * S^(1/2)
    return StaticVectors(words, vectors.astype(np.float32))


@keras.saving.register_keras_serializable(package="elmo_keras")
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
    from elmo_keras.baselines import StaticEmbedding

    embedding = StaticEmbedding(["good", "film"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    vectors = embedding(tf.constant(["good film", "bad"]))
    np.testing.assert_allclose(vectors[0], [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(vectors[1, 0], [0.5, 0.5])  # an unknown word: the mean vector
    np.testing.assert_array_equal(vectors._keras_mask, [[True, True], [True, False]])
    ```
    """

    def __init__(self, vocabulary: Sequence[str], vectors: np.ndarray | None = None, dim: int | None = None,
                 embeddings_initializer: str = "uniform", **kwargs):
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
        return {**super().get_config(), "vocabulary": self.vocabulary, "dim": self.dim,
                "embeddings_initializer": self.embeddings_initializer}

    @classmethod
    def from_corpus(cls, sentences: Sequence[Sequence[str]], dim: int, min_count: int = 1,
                    **kwargs) -> "StaticEmbedding":
        """A trainable embedding over the words seen ``min_count`` times in ``sentences`` (token lists), e.g.
        the task's training texts: the word representation ELMo is concatenated with (``word_embedding=`` of
        :func:`elmo_keras.models.text_classifier`)."""
        counts = Counter(t for s in _check_corpus(sentences) for t in s)
        words = sorted(w for w, c in counts.items() if c >= min_count and w)
        return cls(words, dim=dim, trainable=kwargs.pop("trainable", True), **kwargs)
