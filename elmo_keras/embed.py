"""ElmoEmbedder: embed tokenised sentences fast (sorted batches, a token cache, optional bfloat16)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from elmo_keras.layers.bilm import BiLM
from elmo_keras.layers.lstm_inference import transposed_layout_pays, transposed_step_weights
from elmo_keras.text import batch_to_ids, encode_token_lists
from elmo_keras.utils.cpu import auto_dtype

# "bfloat16": weights stored in bfloat16 (cast once when loaded); the same numbers as "mixed_bfloat16" (float32
# weights cast to bfloat16 in every call), faster and half the weight memory.
_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "mixed_bfloat16": "mixed_bfloat16"}


def _check_dtype(dtype: str) -> None:
    if dtype not in (*_DTYPES, "auto"):
        raise ValueError(f"dtype must be one of {['auto', *sorted(_DTYPES)]}, got {dtype!r}")


def _policy(dtype: str) -> str:
    """``dtype`` of :class:`ElmoEmbedder` ("auto" resolved for this CPU) -> the Keras dtype policy of its BiLM."""
    _check_dtype(dtype)
    return _DTYPES[auto_dtype() if dtype == "auto" else dtype]


STEP_LAYOUTS = ("auto", "released", "transposed")


def _resolve_step_layout(bilm: BiLM, step_layout: str) -> str:
    """``step_layout`` of :class:`ElmoEmbedder` -> "released" or "transposed" for this biLM ("released" for
    encoders other than the LSTM, which have no per-step weights, and for an LSTM off its fast path, e.g. a
    trainable one: the snapshot is made once, for frozen weights)."""
    if bilm.encoder_type != "lstm" or not bilm.lstm.fast_path:
        return "released"
    if step_layout != "auto":
        return step_layout
    lstm = bilm.lstm
    return "transposed" if transposed_layout_pays(lstm.dim, lstm.projection_dim, lstm.compute_dtype) else "released"


class ElmoEmbedder:
    """The familiar ``ElmoEmbedder`` API over :class:`BiLM`.

    ``embed_sentences(token_lists)`` yields float32 arrays [n_layers + 1, n_tokens, 2P] in input order;
    internally sentences are taken in chunks, sorted by length and batched, so padding is small.

    Args:
        options_file: the released options.json, as a path, an http(s) URL (downloaded once, see
            :mod:`elmo_keras.io.download`) or a dict; or give ``bilm=``. Defaults to `None`.
        weight_file: the released hdf5 weights, as a path or an http(s) URL; or give ``bilm=``. Defaults to
            `None`.
        bilm: a built, stateless :class:`BiLM` to use instead of ``options_file`` and ``weight_file``. Defaults
            to `None`.
        dtype: `"auto"`: `"bfloat16"` where the CPU has bf16 matrix units (AMX or AVX512-BF16), else
            `"float32"`; the choice is logged (see :func:`elmo_keras.utils.cpu.auto_dtype`). `"float32"` is
            exact; `"bfloat16"` keeps the weights in bfloat16 (cast once when loaded; the cell state stays
            float32): about twice as fast on such CPUs, several times slower on others, and only close to
            float32. `"mixed_bfloat16"` (the Keras policy: float32 weights cast in every call) gives the same
            numbers, more slowly. Ignored when ``bilm=`` is given. Defaults to `"auto"`.
        token_cache: words whose char-CNN vectors are computed once up front (the original's token-embedding
            dump). Either way the char CNN runs once per distinct word of a batch. The vectors of the sentence
            boundaries <S> and </S> are computed once, when the embedder is made (like the weights, they are
            taken to stay fixed). Defaults to `None`.
        cache_new_tokens: bool, cache every new word type when first seen, up to ``max_cache_size`` types.
            Defaults to `True`.
        max_cache_size: int, the most word types the cache holds. Defaults to `1_000_000`.
        batch_size: int, sentences per batch. Defaults to `64`.
        chunk_size: int, sentences sorted together (bounds memory and latency). Defaults to `4096`.
        jit_compile: bool, run the LSTMs with XLA; batches are then padded to ``batch_size`` rows and a multiple
            of ``length_multiple`` tokens (masked, so results do not change) to bound the number of
            compilations. Defaults to `False`.
        length_multiple: int, with ``jit_compile``: batch lengths are padded to a multiple of it. Defaults to
            `8`.
        char_cnn_batch: int, words per char-CNN call (bounds the convolution activations, i.e. peak memory).
            Defaults to `256`.
        step_layout: how the LSTM's per-step weights are laid out for the recurrent GEMMs: `"released"` (the
            variables as they are), `"transposed"` (a transposed copy of the LSTM kernels and projections, made
            once when the embedder is made: more memory, the same numbers) or `"auto"`: transposed where that
            is faster, i.e. in bfloat16 for large matrices (the original size; see
            :func:`elmo_keras.layers.lstm_inference.transposed_layout_pays`). An LSTM off its fast path
            (trainable, or ``fast_inference=False``) keeps the released layout. Defaults to `"auto"`.

    Example:

    ```python
    import elmo_keras as ek

    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
    vectors = list(embedder.embed_sentences([["The", "bank", "."], ["Hi"]]))
    assert [v.shape for v in vectors] == [(3, 3, 256), (3, 1, 256)]   # [n_layers + 1, n_tokens, 2P]
    ```
    """

    def __init__(
        self,
        options_file: dict | str | os.PathLike | None = None,
        weight_file: str | os.PathLike | None = None,
        *,
        bilm: BiLM | None = None,
        dtype: str = "auto",
        token_cache: Iterable[str] | None = None,
        cache_new_tokens: bool = True,
        max_cache_size: int = 1_000_000,
        batch_size: int = 64,
        chunk_size: int = 4096,
        jit_compile: bool = False,
        length_multiple: int = 8,
        char_cnn_batch: int = 256,
        step_layout: str = "auto",
    ):
        _check_dtype(dtype)
        if step_layout not in STEP_LAYOUTS:
            raise ValueError(f"step_layout must be one of {list(STEP_LAYOUTS)}, got {step_layout!r}")
        if bilm is None:
            if options_file is None or weight_file is None:
                raise ValueError("give options_file and weight_file, or bilm=")
            bilm = BiLM.from_pretrained(options_file, weight_file, dtype=_policy(dtype))
        if bilm.stateful:
            raise ValueError("ElmoEmbedder needs a stateless BiLM (it reorders sentences)")
        self.bilm = bilm
        self.batch_size, self.chunk_size = batch_size, chunk_size
        self.jit_compile, self.length_multiple = jit_compile, length_multiple
        self.cache_new_tokens, self.max_cache_size = cache_new_tokens, max_cache_size
        self.char_cnn_batch = char_cnn_batch
        self.cache: dict[str, np.ndarray] = {}
        chars = bilm.max_characters_per_token
        p = bilm.projection_dim
        # trim_padding: the char CNN convolves only up to the longest word of each call (same values to float32
        # rounding)
        self._encode = tf.function(
            lambda ids: bilm.char_cnn(ids, trim_padding=True), input_signature=[tf.TensorSpec([None, chars], tf.int32)]
        )
        # <S> and </S> through the char CNN once, not in every call (a batch-1 call would pay ~10% for them)
        boundaries = bilm.boundary_embeddings() if bilm.add_sentence_boundaries else None
        # likewise the LSTM's per-step weights in the transposed layout, where it is faster
        self.step_layout = _resolve_step_layout(bilm, step_layout)
        steps = transposed_step_weights(bilm.lstm) if self.step_layout == "transposed" else None
        # BiLM._call: call() with these speed-only arguments (not on BiLM.call's public signature)
        self._context = tf.function(
            lambda emb, mask: bilm._call((emb, mask), boundary_embeddings=boundaries, step_weights=steps)["layers"],
            input_signature=[tf.TensorSpec([None, None, p], tf.float32), tf.TensorSpec([None, None], tf.bool)],
            jit_compile=jit_compile,
        )
        # a lone sentence with new words: char CNN and biLM in one call (no round trip through NumPy between them)
        self._whole = tf.function(
            lambda ids: bilm._call(ids, boundary_embeddings=boundaries, step_weights=steps, trim_padding=True)[
                "layers"
            ],
            input_signature=[tf.TensorSpec([None, None, chars], tf.int32)],
        )
        if token_cache is not None:
            self.add_to_cache(token_cache)

    @classmethod
    def from_preset(cls, name: str, **kwargs) -> "ElmoEmbedder":
        """Use a preset: shipped (e.g. "brown-small"), published (e.g. "original", see ``ek.list_presets()``),
        a folder or a folder's URL.

        Args:
            name: the preset's name, a folder or a folder's URL.
            **kwargs: arguments of ``ElmoEmbedder`` (``dtype`` included), except ``options_file``,
                ``weight_file`` and ``bilm``.

        Returns:
            An ``ElmoEmbedder``.
        """
        return cls(bilm=BiLM.from_preset(name, dtype=_policy(kwargs.pop("dtype", "auto"))), **kwargs)

    def add_to_cache(self, words: Iterable[str]) -> None:
        """Compute and keep the char-CNN vectors of ``words`` (a vocabulary).

        Args:
            words: the words (repeats and words already cached are skipped).
        """
        words = [w for w in dict.fromkeys(words) if w not in self.cache]
        self.cache.update(zip(words, self._char_cnn(words)))

    def _char_cnn(self, words: Sequence[str]) -> np.ndarray:
        """Words -> [n, P] float32, ``char_cnn_batch`` words per call: the convolution activations
        ([words, max_characters_per_token, filters] per width) are what bounds peak memory, not the weights. Words
        go by length, so that each call convolves only as far as its own longest word (``trim_padding``)."""
        if not words:
            return np.zeros((0, self.bilm.projection_dim), np.float32)
        order = sorted(range(len(words)), key=lambda i: len(words[i]))
        by_length = [words[i] for i in order]
        chars = self.bilm.max_characters_per_token
        parts = [
            self._encode(batch_to_ids([by_length[i : i + self.char_cnn_batch]], chars)[0]).numpy()
            for i in range(0, len(words), self.char_cnn_batch)
        ]
        out = np.empty((len(words), self.bilm.projection_dim), np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _remember(self, computed: dict[str, np.ndarray]) -> None:
        """Cache newly computed word vectors, all of them or (no room left) none."""
        if self.cache_new_tokens and len(self.cache) + len(computed) <= self.max_cache_size:
            self.cache.update(computed)

    def _token_vectors(self, words: Sequence[str]) -> np.ndarray:
        """Distinct words -> [n, P] float32, from the cache or the char CNN (run once per distinct word)."""
        missing = [w for w in words if w not in self.cache]
        computed = dict(zip(missing, self._char_cnn(missing))) if missing else {}
        self._remember(computed)
        return np.stack([self.cache[w] if w in self.cache else computed[w] for w in words])

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Embed one batch of sentences as given (not sorted or split).

        Args:
            sentences: list of token lists.

        Returns:
            One float32 array [n_layers + 1, n_tokens, 2P] per sentence (same order).
        """
        if not sentences:
            return []
        if len(sentences) == 1 and not self.jit_compile and any(w not in self.cache for w in sentences[0]):
            return [self._embed_uncached_sentence(sentences[0])]
        encode_token_lists(sentences)  # checks every token (clear errors), without building char ids twice
        vocab = list(dict.fromkeys(t for s in sentences for t in s))
        p = self.bilm.projection_dim
        lengths = [len(s) for s in sentences]
        width, rows = max(lengths), len(sentences)
        if self.jit_compile:  # fixed shapes: few XLA compilations
            width = -(-max(width, 1) // self.length_multiple) * self.length_multiple
            rows = max(rows, self.batch_size)
        index = {w: i for i, w in enumerate(vocab)}
        ids = np.zeros((rows, width), dtype=np.int64)
        for row, sentence in enumerate(sentences):
            ids[row, : len(sentence)] = [index[t] for t in sentence]
        table = self._token_vectors(vocab) if vocab else np.zeros((0, p), np.float32)
        emb = table[ids] if width and len(table) else np.zeros((rows, width, p), np.float32)
        mask = np.arange(width)[None, :] < np.array(lengths + [0] * (rows - len(lengths)))[:, None]
        layers = np.stack([layer.numpy().astype(np.float32) for layer in self._context(emb, mask)], axis=1)
        return [layers[row, :, :n] for row, n in enumerate(lengths)]

    def _embed_uncached_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One sentence with words not in the cache -> [n_layers + 1, n_tokens, 2P], in one model call; its word
        vectors (the first half of layer 0) go into the cache as the two-call path would put them."""
        ids = batch_to_ids([sentence], self.bilm.max_characters_per_token)
        layers = np.stack([layer.numpy()[0].astype(np.float32) for layer in self._whole(ids)])
        self._remember(
            {w: v.copy() for w, v in zip(sentence, layers[0, :, : self.bilm.projection_dim]) if w not in self.cache}
        )
        return layers

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int | None = None
    ) -> Iterator[np.ndarray]:
        """Embed sentences in chunks of ``chunk_size``, each sorted by length and batched, so padding is small.

        Args:
            sentences: token lists (any iterable, read one chunk at a time).
            batch_size: int, sentences per batch, or `None` for the embedder's ``batch_size``. Defaults to
                `None`.

        Returns:
            An iterator of float32 arrays [n_layers + 1, n_tokens, 2P], one per sentence, in input order.
        """
        batch_size = batch_size or self.batch_size
        chunk: list[Sequence[str]] = []
        for sentence in sentences:
            chunk.append(sentence)
            if len(chunk) == self.chunk_size:
                yield from self._embed_chunk(chunk, batch_size)
                chunk = []
        if chunk:
            yield from self._embed_chunk(chunk, batch_size)

    def _embed_chunk(self, chunk: list[Sequence[str]], batch_size: int) -> list[np.ndarray]:
        order = sorted(range(len(chunk)), key=lambda i: len(chunk[i]))
        out: list[np.ndarray | None] = [None] * len(chunk)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            for row, array in zip(rows, self.embed_batch([chunk[i] for i in rows])):
                out[row] = array
        return out

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """Embed one sentence.

        Args:
            sentence: a token list.

        Returns:
            A float32 array [n_layers + 1, n_tokens, 2P].
        """
        return self.embed_batch([sentence])[0]
