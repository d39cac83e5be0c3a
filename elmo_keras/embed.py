"""ElmoEmbedder: embed tokenised sentences fast (sorted batches, a token cache, optional bfloat16)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.errors import InputError
from elmo_keras.io import load
from elmo_keras.layers.bilm import BiLM
from elmo_keras.layers.lstm_inference import transposed_layout_pays, transposed_step_weights
from elmo_keras.layers.pooling import pool_modes, pool_tokens
from elmo_keras.text import batch_to_ids, encode_token_lists
from elmo_keras.utils.backend import is_tensorflow
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
#: Words of a model's vocabulary file cached when an embedder is made (``vocab_cache_size``'s default): for
#: brown-small about 0.7 s of char CNN on the 2-core test machine; more for models with larger char CNNs.
VOCAB_CACHE_SIZE = 10_000
#: Padded tokens per batch (``batch_tokens``' default): 64 rows of sentences up to 128 tokens, so that ordinary
#: text batches ``batch_size`` sentences at a time as it would without a budget, while a long document goes in
#: a batch with few others, or (over 8,192 tokens) alone.
BATCH_TOKENS = 64 * 128


def _check_batch_tokens(batch_tokens) -> int:
    """``batch_tokens`` as given -> an int >= 1, else :class:`InputError`."""
    if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, (int, np.integer)) or batch_tokens < 1:
        raise InputError(
            f"batch_tokens must be an integer >= 1 (padded tokens per batch, e.g. {BATCH_TOKENS}), got {batch_tokens!r}"
        )
    return int(batch_tokens)


def token_batches(lengths: Sequence[int], batch_size: int, batch_tokens: int) -> Iterator[list[int]]:
    """Sentence lengths -> batches of sentence indices, by ascending length: each batch holds at most
    ``batch_size`` sentences and at most ``batch_tokens`` padded tokens (its rows times its longest length); a
    sentence longer than ``batch_tokens`` is a batch of its own.

    Args:
        lengths: the sentences' token counts.
        batch_size: int >= 1, the most sentences per batch.
        batch_tokens: int >= 1, the most padded tokens per batch.

    Returns:
        An iterator of index lists that together hold every index once, each list in ascending length.

    Example:

    ```python
    from elmo_keras.embed import token_batches

    assert list(token_batches([3, 20, 1, 2, 2], batch_size=2, batch_tokens=6)) == [[2, 3], [4, 0], [1]]
    ```
    """
    batch: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        # ascending: sentence i is the batch's longest, so it pads every row to lengths[i]
        if batch and (len(batch) == batch_size or (len(batch) + 1) * lengths[i] > batch_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def _numpy(tensor) -> np.ndarray:
    return keras.ops.convert_to_numpy(tensor).astype(np.float32, copy=False)


def _backend_function(bilm: BiLM, function: Callable) -> Callable:
    """``function`` (a frozen ``bilm``'s computation on arrays) as JAX or PyTorch run it fast: on JAX one
    ``jax.jit`` over the variables' values (op by op, every convolution and loop would compile anew for each
    call; compiled once per input shape); on PyTorch eagerly, without autograd's bookkeeping."""
    variables = bilm.variables
    if keras.backend.backend() == "jax":
        import jax

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(*args)

        compiled = jax.jit(stateless)
        return lambda *args: compiled([v.value for v in variables], *args)
    import torch

    def inference(*args):
        with torch.no_grad():
            return function(*args)

    return inference


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
    internally sentences are taken in chunks, sorted by length and batched, so padding is small, with at most
    ``batch_size`` sentences and ``batch_tokens`` padded tokens to a batch, so that long documents mixed with short
    lines run in bounded memory.

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
        vocab_file: a bilm-tf ``vocab.txt`` or ``vocab.txt.gz`` (most frequent words first) whose first
            ``vocab_cache_size`` words are cached up front like ``token_cache`` (``from_preset`` passes the
            model's own, where it has one). Defaults to `None`.
        vocab_cache_size: int >= 0, how many words of ``vocab_file`` to cache; 0: none. Defaults to `10_000`.
        cache_new_tokens: bool, cache every new word type when first seen, up to ``max_cache_size`` types.
            Defaults to `True`.
        max_cache_size: int, the most word types the cache holds. Defaults to `1_000_000`.
        batch_size: int, the most sentences per batch. Defaults to `64`.
        batch_tokens: int >= 1, the most padded tokens per batch of :meth:`embed_sentences`: rows times the
            batch's longest sentence, [rows, T] <= ``batch_tokens``; a longer sentence is a batch of its own.
            What a batch costs grows with it: the model's activations (the LSTM's gate inputs [rows, T, 4 * dim]
            per direction and layer, its outputs [rows, T, 2P] per layer) and the outputs [rows, n_layers + 1, T,
            2P]. The default, 64 * 128, leaves sentences of up to 128 tokens ``batch_size`` to a batch. Defaults
            to `8192`.
        chunk_size: int, sentences sorted together (bounds memory and latency). A chunk also ends once it holds
            ``chunk_size * batch_tokens / batch_size`` tokens (as many as ``chunk_size / batch_size`` full
            batches), so that long documents do not make it hold more. Defaults to `4096`.
        jit_compile: bool, run the LSTMs with XLA; batches are then padded to ``batch_size`` rows, or fewer where
            the batch's length T allows fewer than ``batch_size`` rows in ``batch_tokens`` (never fewer than the
            batch has), and to a multiple of ``length_multiple`` tokens (masked, so results do not change), to
            bound the number of compilations. Defaults to `False`.
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
        vocab_file: str | os.PathLike | None = None,
        vocab_cache_size: int = VOCAB_CACHE_SIZE,
        cache_new_tokens: bool = True,
        max_cache_size: int = 1_000_000,
        batch_size: int = 64,
        batch_tokens: int = BATCH_TOKENS,
        chunk_size: int = 4096,
        jit_compile: bool = False,
        length_multiple: int = 8,
        char_cnn_batch: int = 256,
        step_layout: str = "auto",
    ):
        _check_dtype(dtype)
        batch_tokens = _check_batch_tokens(batch_tokens)
        if vocab_cache_size < 0:
            raise ValueError(f"vocab_cache_size must be >= 0 (0: no vocabulary cache), got {vocab_cache_size}")
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
        self.batch_tokens = batch_tokens
        self.jit_compile, self.length_multiple = jit_compile, length_multiple
        self.cache_new_tokens, self.max_cache_size = cache_new_tokens, max_cache_size
        self.char_cnn_batch = char_cnn_batch
        self.cache: dict[str, np.ndarray] = {}
        chars = bilm.max_characters_per_token
        p = bilm.projection_dim
        if not is_tensorflow():  # JAX, PyTorch: the same calls, compiled their way (see _backend_function)
            self.step_layout = "released"
            self.jit_compile = self.jit_compile or keras.backend.backend() == "jax"  # few shapes: few compiles
            self._encode = _backend_function(bilm, lambda ids: bilm.char_cnn(ids))
            self._context = _backend_function(bilm, lambda emb, mask: bilm._call((emb, mask))["layers"])
            self._whole = _backend_function(bilm, lambda ids: bilm._call(ids)["layers"])
            self._fill_cache(token_cache, vocab_file, vocab_cache_size)
            return
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
        self._fill_cache(token_cache, vocab_file, vocab_cache_size)

    def _fill_cache(self, token_cache: Iterable[str] | None, vocab_file: str | None, vocab_cache_size: int) -> None:
        """The words cached up front: ``token_cache``, then the first ``vocab_cache_size`` words of the vocabulary."""
        if token_cache is not None:
            self.add_to_cache(token_cache)
        if vocab_file is not None and vocab_cache_size:
            self.add_to_cache(load.vocab_words(vocab_file, vocab_cache_size))

    @classmethod
    def from_preset(cls, name: str, vocab_cache_size: int = VOCAB_CACHE_SIZE, **kwargs) -> "ElmoEmbedder":
        """Use a preset: shipped (e.g. "brown-small"), published (e.g. "original" or "nlpl-210", see
        ``ek.list_presets()``), a folder, a folder's URL, or a ZIP archive (path or URL) in the NLPL layout.

        Args:
            name: the preset's name, a folder, a folder's URL or a ``.zip`` (see :func:`elmo_keras.io.load.resolve`).
            vocab_cache_size: int >= 0, how many of the most frequent words of the model's vocabulary file
                (``vocab.txt`` or ``vocab.txt.gz``, where it has one) to cache up front; 0: none. Defaults to
                `10_000`.
            **kwargs: arguments of ``ElmoEmbedder`` (``dtype`` included), except ``options_file``,
                ``weight_file``, ``bilm`` and ``vocab_file``.

        Returns:
            An ``ElmoEmbedder``.
        """
        files = load.resolve(name)
        bilm = BiLM.from_model_weights(files.read(), dtype=_policy(kwargs.pop("dtype", "auto")))
        return cls(bilm=bilm, vocab_file=files.vocab, vocab_cache_size=vocab_cache_size, **kwargs)

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
            self._encode_rows(batch_to_ids([by_length[i : i + self.char_cnn_batch]], chars)[0])
            for i in range(0, len(words), self.char_cnn_batch)
        ]
        out = np.empty((len(words), self.bilm.projection_dim), np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _encode_rows(self, ids: np.ndarray) -> np.ndarray:
        """Char ids [n, C] -> float32 [n, P]; with ``jit_compile`` the rows are padded to a power of two (at most
        ``char_cnn_batch``), so that a compiling backend sees few shapes."""
        n = len(ids)
        if self.jit_compile:
            ids = np.pad(ids, [(0, min(1 << (n - 1).bit_length(), max(self.char_cnn_batch, n)) - n), (0, 0)])
        return keras.ops.convert_to_numpy(self._encode(ids))[:n].astype(np.float32)

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

    def embed_batch(
        self, sentences: Sequence[Sequence[str]], pool: str | Sequence[str] | None = None
    ) -> list[np.ndarray]:
        """Embed one batch of sentences as given (not sorted or split).

        Args:
            sentences: list of token lists.
            pool: `None`, or `"mean"`, `"max"` or a list of both: each layer pooled over the sentence's tokens
                (see :meth:`embed_sentences`). Defaults to `None`.

        Returns:
            One float32 array per sentence (same order): [n_layers + 1, n_tokens, 2P], or with ``pool``
            [n_layers + 1, 2P * len(pool)].
        """
        if pool is not None:
            modes = pool_modes(pool)  # checked before any model work
            return [pool_tokens(array, modes) for array in self.embed_batch(sentences)]
        if not sentences:
            return []
        lone = len(sentences) == 1 and len(sentences[0]) <= self.char_cnn_batch  # its char CNN in one call
        if lone and not self.jit_compile and any(w not in self.cache for w in sentences[0]):
            return [self._embed_uncached_sentence(sentences[0])]
        encode_token_lists(sentences)  # checks every token (clear errors), without building char ids twice
        vocab = list(dict.fromkeys(t for s in sentences for t in s))
        p = self.bilm.projection_dim
        lengths = [len(s) for s in sentences]
        width, rows = max(lengths), len(sentences)
        if self.jit_compile:  # fixed shapes: few XLA compilations
            width = -(-max(width, 1) // self.length_multiple) * self.length_multiple
            rows = self._padded_rows(rows, width)
        index = {w: i for i, w in enumerate(vocab)}
        ids = np.zeros((rows, width), dtype=np.int64)
        for row, sentence in enumerate(sentences):
            ids[row, : len(sentence)] = [index[t] for t in sentence]
        table = self._token_vectors(vocab) if vocab else np.zeros((0, p), np.float32)
        emb = table[ids] if width and len(table) else np.zeros((rows, width, p), np.float32)
        mask = np.arange(width)[None, :] < np.array(lengths + [0] * (rows - len(lengths)))[:, None]
        layers = [_numpy(layer) for layer in self._context(emb, mask)]
        # each sentence gets its own copy of its real tokens: no output keeps its batch's padding alive
        return [np.stack([layer[row, :n] for layer in layers]) for row, n in enumerate(lengths)]

    def _padded_rows(self, rows: int, width: int) -> int:
        """With ``jit_compile``: the rows of a batch of ``rows`` sentences padded to ``width`` tokens, one count per
        width (few compilations) that keeps rows * width within ``batch_tokens`` where the batch itself does:
        TensorFlow (XLA) ``batch_size``, or as many as ``batch_tokens`` holds at this width; JAX the next power of
        two (a batch of one stays small), capped likewise."""
        fixed = max(rows, min(self.batch_size, self.batch_tokens // width))
        return fixed if is_tensorflow() else min(1 << (rows - 1).bit_length(), fixed)

    def _embed_uncached_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One sentence with words not in the cache -> [n_layers + 1, n_tokens, 2P], in one model call; its word
        vectors (the first half of layer 0) go into the cache as the two-call path would put them. Only for a
        sentence of at most ``char_cnn_batch`` tokens: the call runs the char CNN over all of them at once."""
        ids = batch_to_ids([sentence], self.bilm.max_characters_per_token)
        layers = np.stack([_numpy(layer)[0] for layer in self._whole(ids)])
        self._remember(
            {w: v.copy() for w, v in zip(sentence, layers[0, :, : self.bilm.projection_dim]) if w not in self.cache}
        )
        return layers

    def embed_sentences(
        self,
        sentences: Iterable[Sequence[str]],
        batch_size: int | None = None,
        pool: str | Sequence[str] | None = None,
        batch_tokens: int | None = None,
    ) -> Iterator[np.ndarray]:
        """Embed sentences in chunks of ``chunk_size``, each sorted by length and batched, so padding is small.

        A batch holds at most ``batch_size`` sentences and at most ``batch_tokens`` padded tokens (rows times its
        longest sentence; a longer sentence is a batch of its own, see :func:`token_batches`); a chunk ends at
        ``chunk_size`` sentences or once it holds ``chunk_size * batch_tokens / batch_size`` tokens. Memory is
        therefore bounded whatever the mix of lengths: one batch's model work, for at most
        max(``batch_tokens``, the longest sentence) padded tokens, and one chunk's outputs, held until they are
        yielded in input order: at most that many tokens plus one sentence, at (n_layers + 1) * 2P float32 each
        (without ``pool``). The outputs are the same as one sentence at a time would give.

        With ``pool``, each sentence becomes one vector per layer: every layer pooled over the sentence's own
        tokens (padding never enters), [n_layers + 1, 2P * len(pool)] (``pool=["mean", "max"]``: the means, then
        the maxima). A sentence without tokens gives zeros, never NaN: it is empty exactly when its token list is
        (``len(tokens) == 0``), which is how to tell its zeros from a vector.

        Args:
            sentences: token lists (any iterable, read one chunk at a time).
            batch_size: int, sentences per batch, or `None` for the embedder's ``batch_size``. Defaults to
                `None`.
            pool: `None` (token vectors), or `"mean"`, `"max"` or a list of both. Defaults to `None`.
            batch_tokens: int >= 1, padded tokens per batch, or `None` for the embedder's ``batch_tokens``.
                Defaults to `None`.

        Returns:
            An iterator of float32 arrays, one per sentence, in input order: [n_layers + 1, n_tokens, 2P], or with
            ``pool`` [n_layers + 1, 2P * len(pool)].

        Example:

        ```python
        import numpy as np
        import elmo_keras as ek

        embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
        sentences = [["The", "bank", "."], []]
        tokens, _ = embedder.embed_sentences(sentences)
        mean, empty = embedder.embed_sentences(sentences, pool="mean")
        assert mean.shape == (3, 256)  # [n_layers + 1, 2P]: each layer averaged over the 3 tokens
        np.testing.assert_allclose(mean, tokens.mean(axis=1), atol=1e-6)
        assert not empty.any()  # the empty sentence: zeros
        ```
        """
        modes = None if pool is None else pool_modes(pool)  # checked before any model work
        batch_size = batch_size or self.batch_size
        batch_tokens = self.batch_tokens if batch_tokens is None else _check_batch_tokens(batch_tokens)
        chunk_tokens = max(batch_tokens, self.chunk_size * batch_tokens // batch_size)
        chunk: list[Sequence[str]] = []
        tokens = 0
        for row, sentence in enumerate(sentences):
            encode_token_lists([sentence], first=row)  # errors name the input's row (batches are sorted by length)
            chunk.append(sentence)
            tokens += len(sentence)
            if len(chunk) == self.chunk_size or tokens >= chunk_tokens:
                yield from self._embed_chunk(chunk, batch_size, batch_tokens, modes)
                chunk, tokens = [], 0
        if chunk:
            yield from self._embed_chunk(chunk, batch_size, batch_tokens, modes)

    def _embed_chunk(
        self, chunk: list[Sequence[str]], batch_size: int, batch_tokens: int, pool: Sequence[str] | None = None
    ) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(chunk)
        for rows in token_batches([len(s) for s in chunk], batch_size, batch_tokens):
            for row, array in zip(rows, self.embed_batch([chunk[i] for i in rows])):
                out[row] = array if pool is None else pool_tokens(array, pool)
        return out

    def embed_sentence(self, sentence: Sequence[str], pool: str | Sequence[str] | None = None) -> np.ndarray:
        """Embed one sentence.

        Args:
            sentence: a token list.
            pool: `None`, or `"mean"`, `"max"` or a list of both (see :meth:`embed_sentences`). Defaults to
                `None`.

        Returns:
            A float32 array [n_layers + 1, n_tokens, 2P], or with ``pool`` [n_layers + 1, 2P * len(pool)].
        """
        return self.embed_batch([sentence], pool)[0]
