"""Static word-embedding baselines: CBOW word2vec, SVD of PPMI, fastText-style subword vectors.

Trained on tokenised sentences (lists of tokens), then turned into a Keras layer with the same
tokenisation as ``Elmo`` (whitespace split in the graph). Needs the ``baselines`` extra (gensim, scikit-learn).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from elmo_keras.layers.static import StaticEmbedding, check_corpus

__all__ = ["StaticEmbedding", "StaticVectors", "train_cbow", "train_fasttext", "train_svd_ppmi"]


@dataclass
class StaticVectors:
    """A vocabulary and its vectors [V, D]; ``oov`` (fastText) computes a vector for any other word.

    Args:
        words: the vocabulary, distinct words.
        vectors: float array `[len(words), D]`.
        oov: a function giving the vector of any other word, or ``None``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.baselines import StaticVectors

    layer = StaticVectors(["good", "film"], np.eye(2, dtype="float32")).embedding()
    assert layer(np.array([["good", "film", ""]])).shape == (1, 3, 2)
    ```
    """

    words: list[str]
    vectors: np.ndarray
    oov: Callable[[str], np.ndarray] | None = field(default=None, repr=False)

    def embedding(self, extra_words: Iterable[str] = (), trainable: bool = False, **kwargs) -> "StaticEmbedding":
        """A :class:`StaticEmbedding` layer; with ``oov`` set, ``extra_words`` (e.g. the task's vocabulary)
        get subword vectors too.

        Args:
            extra_words: words to add through ``oov`` (ignored without it).
            trainable: whether the vectors are trained with the model.
            **kwargs: other :class:`StaticEmbedding` arguments, such as ``name``.

        Returns:
            A :class:`StaticEmbedding`.
        """
        words, vectors = list(self.words), [self.vectors]
        if self.oov is not None:
            known = set(words)
            extra = sorted({w for w in extra_words if w and w not in known})
            if extra:
                words += extra
                vectors.append(np.stack([self.oov(w) for w in extra]))
        return StaticEmbedding(words, np.concatenate(vectors).astype(np.float32), trainable=trainable, **kwargs)


def train_cbow(
    sentences: Sequence[Sequence[str]],
    dim: int = 100,
    window: int = 5,
    min_count: int = 2,
    epochs: int = 5,
    seed: int = 0,
    workers: int = 2,
) -> StaticVectors:
    """CBOW word2vec (gensim) on token lists.

    Args:
        sentences: list of token lists.
        dim: int, the vector size.
        window: int, the context window on each side.
        min_count: int, the least count a word needs to get a vector.
        epochs: int, passes over the corpus.
        seed: int, the random seed.
        workers: int, training threads.

    Returns:
        :class:`StaticVectors`.
    """
    from gensim.models import Word2Vec

    model = Word2Vec(
        check_corpus(sentences),
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=0,
        epochs=epochs,
        seed=seed,
        workers=workers,
    )
    return StaticVectors(list(model.wv.index_to_key), model.wv.vectors.copy())


def train_fasttext(
    sentences: Sequence[Sequence[str]],
    dim: int = 100,
    window: int = 5,
    min_count: int = 2,
    epochs: int = 5,
    min_n: int = 3,
    max_n: int = 6,
    seed: int = 0,
    workers: int = 2,
) -> StaticVectors:
    """fastText-style CBOW with character n-gram subwords (gensim); unseen words get subword vectors.

    Args:
        sentences: list of token lists.
        dim: int, the vector size.
        window: int, the context window on each side.
        min_count: int, the least count a word needs to get a vector.
        epochs: int, passes over the corpus.
        min_n: int, the shortest character n-gram.
        max_n: int, the longest character n-gram.
        seed: int, the random seed.
        workers: int, training threads.

    Returns:
        :class:`StaticVectors` with ``oov`` set.
    """
    from gensim.models import FastText

    model = FastText(
        check_corpus(sentences),
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=0,
        epochs=epochs,
        min_n=min_n,
        max_n=max_n,
        seed=seed,
        workers=workers,
    )
    wv = model.wv
    return StaticVectors(list(wv.index_to_key), wv.vectors.copy(), oov=lambda w: np.asarray(wv[w]))


def train_svd_ppmi(
    sentences: Sequence[Sequence[str]], dim: int = 100, window: int = 5, min_count: int = 2, seed: int = 0
) -> StaticVectors:
    """Truncated SVD (scikit-learn) of the positive PMI matrix of symmetric window co-occurrences.

    Args:
        sentences: list of token lists.
        dim: int, the vector size.
        window: int, the context window on each side.
        min_count: int, the least count a word needs to get a vector.
        seed: int, the random seed of the SVD.

    Returns:
        :class:`StaticVectors`.
    """
    from scipy import sparse
    from sklearn.decomposition import TruncatedSVD

    corpus = check_corpus(sentences)
    counts = Counter(t for s in corpus for t in s)
    words = [w for w, c in counts.most_common() if c >= min_count]
    index = {w: i for i, w in enumerate(words)}
    rows, cols = [], []
    for sentence in corpus:
        ids = [index.get(t, -1) for t in sentence]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for b in ids[max(0, i - window) : i]:
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
