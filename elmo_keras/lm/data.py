"""tf.data pipeline for biLM training: text files -> (char ids, (forward targets, backward targets)).

Each non-blank line is one sentence of whitespace-separated tokens ``w_1 .. w_n``. It becomes the rows
``[<S>, w_1, .., w_n, </S>]`` (n + 2 rows): char ids int32 [n + 2, max_chars]; forward target of row i is
the word id of row i + 1, backward target of row i is the word id of row i - 1; -1 = no target (row 0
backward, row n + 1 forward, padding). So each direction predicts n + 1 tokens per sentence.
Batches are padded per length bucket: char ids [B, T, max_chars] (0 = padding), targets [B, T].
Blank lines hold no sentence and are skipped; long sentences are kept whole (the last bucket).
A pass's order is a function of the seed and the epoch (stateless shuffles), so a resumed run can go on with the
very batches an uninterrupted one would train on (:func:`lm_stream`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tensorflow as tf

from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.text import MAX_CHARACTERS_PER_TOKEN, boundary_char_ids, tokens_to_char_ids

DEFAULT_BUCKETS = (10, 20, 30, 40, 60)


def _lookup_table(vocab: Vocabulary) -> tf.lookup.StaticHashTable:
    init = tf.lookup.KeyValueTensorInitializer(tf.constant(vocab.tokens), tf.range(len(vocab), dtype=tf.int32))
    return tf.lookup.StaticHashTable(init, default_value=vocab.unk_id)


def sentence_encoder(vocab: Vocabulary, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN):
    """The function that encodes one line of text for the language model, for ``tf.data``.

    Args:
        vocab: the output :class:`~elmo_keras.lm.vocab.Vocabulary`.
        max_characters_per_token: char ids per token.

    Returns:
        ``encode(line) -> (char_ids [n+2, C], (forward [n+2], backward [n+2]))``: the targets are the next and
        previous word ids, -1 past the ends.
    """
    table = _lookup_table(vocab)
    bounds = tf.constant(boundary_char_ids(max_characters_per_token))

    def encode(line):
        tokens = tf.strings.split(line)
        chars = tokens_to_char_ids(tokens, max_characters_per_token)
        chars = tf.concat([bounds[:1], chars, bounds[1:]], axis=0)
        words = tf.concat([[vocab.bos_id], table.lookup(tokens), [vocab.eos_id]], axis=0)
        forward = tf.concat([words[1:], [-1]], axis=0)
        backward = tf.concat([[-1], words[:-1]], axis=0)
        return chars, (forward, backward)

    return encode


def _bucketed(examples: tf.data.Dataset, batch_size: int, buckets: Sequence[int], max_chars: int):
    return examples.bucket_by_sequence_length(
        element_length_func=lambda chars, targets: tf.shape(chars)[0],
        bucket_boundaries=[b + 2 for b in buckets],
        bucket_batch_sizes=[batch_size] * (len(buckets) + 1),
        padded_shapes=([None, max_chars], ([None], [None])),
        padding_values=(0, (-1, -1)),
    )


def _check_files(files: Sequence[str | os.PathLike], num_shards: int) -> list[str]:
    files = [os.fspath(f) for f in files]
    if not files:
        raise ValueError("no text files given")
    for f in files:
        if not os.path.isfile(f):
            raise FileNotFoundError(f"text file not found: {f!r}")
    if num_shards > len(files):
        raise ValueError(f"cannot shard {len(files)} file(s) {num_shards} ways; give at least one file per shard")
    return files


def _sentences(files: Sequence[str], epoch, seed: int, shuffle_buffer: int) -> tf.data.Dataset:
    """The non-blank lines of ``files`` (this shard's) in the order of ``epoch`` (an int64 scalar, a tensor in a
    ``flat_map``): the file order, then each block of ``shuffle_buffer`` lines, permuted by stateless shuffles
    keyed by ``[seed, epoch * 2**32 + i]`` (i = 0 for the files, block number + 1 for a block), so a pass depends
    only on the seed and the epoch, not on how many passes ran before in this process."""

    def key(i):
        return tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64) * 2**32 + tf.cast(i, tf.int64)])

    names = tf.constant(files)
    if shuffle_buffer:
        names = tf.random.experimental.stateless_shuffle(names, seed=key(0))
    ds = tf.data.Dataset.from_tensor_slices(names).interleave(tf.data.TextLineDataset, cycle_length=min(4, len(files)))
    ds = ds.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0)
    if shuffle_buffer:
        blocks = ds.batch(shuffle_buffer).enumerate()
        ds = blocks.map(lambda i, block: tf.random.experimental.stateless_shuffle(block, seed=key(i + 1))).unbatch()
    return ds


def _passes(
    files: Sequence[str | os.PathLike],
    vocab: Vocabulary,
    batch_size: int,
    shuffle_buffer: int,
    seed: int,
    buckets: Sequence[int],
    max_characters_per_token: int,
    num_shards: int,
    shard_index: int,
):
    """``one_pass(epoch) -> batches`` for this shard of ``files`` (see :func:`lm_dataset`)."""
    shard = _check_files(files, num_shards)[shard_index::num_shards]
    encode = sentence_encoder(vocab, max_characters_per_token)

    def one_pass(epoch) -> tf.data.Dataset:
        ds = _sentences(shard, epoch, seed, shuffle_buffer)
        ds = ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return _bucketed(ds, batch_size, buckets, max_characters_per_token)

    return one_pass


def lm_dataset(
    files: Sequence[str | os.PathLike],
    vocab: Vocabulary,
    batch_size: int,
    *,
    shuffle_buffer: int = 10000,
    seed: int = 0,
    epoch: int = 0,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    num_shards: int = 1,
    shard_index: int = 0,
) -> tf.data.Dataset:
    """One pass of training/validation batches from text files (one sentence per line).

    Files are sharded (``num_shards``/``shard_index``, e.g. from a ``tf.distribute.InputContext``), shuffled
    and interleaved; sentences are shuffled in blocks of ``shuffle_buffer`` (0 = keep the file order), bucketed by
    length (``buckets`` in tokens) and batched. The order is a function of ``seed`` and ``epoch`` only: every
    iteration of the dataset gives the same batches (:func:`lm_stream` gives the passes of consecutive epochs).

    Args:
        files: text files, one tokenised sentence per line.
        vocab: the output :class:`~elmo_keras.lm.vocab.Vocabulary`.
        batch_size: sentences per batch.
        shuffle_buffer: sentences per shuffled block; 0 keeps the file order.
        seed: the shuffling seed.
        epoch: which epoch's order.
        buckets: length bucket boundaries, in tokens.
        max_characters_per_token: char ids per token.
        num_shards: the number of input shards (workers).
        shard_index: this worker's shard.

    Returns:
        A ``tf.data.Dataset`` of ``(char_ids [B, T, C], (forward [B, T], backward [B, T]))``.
    """
    one_pass = _passes(
        files, vocab, batch_size, shuffle_buffer, seed, buckets, max_characters_per_token, num_shards, shard_index
    )
    return one_pass(tf.constant(epoch, tf.int64)).prefetch(tf.data.AUTOTUNE)


def lm_stream(
    files: Sequence[str | os.PathLike],
    vocab: Vocabulary,
    batch_size: int,
    *,
    start: int = 0,
    pass_batches: int | None = None,
    shuffle_buffer: int = 10000,
    seed: int = 0,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    num_shards: int = 1,
    shard_index: int = 0,
) -> tf.data.Dataset:
    """The endless stream of passes over ``files``: pass p is :func:`lm_dataset` with ``epoch=p``, from batch
    ``start`` of the stream on. So a run that trained ``start`` batches goes on with exactly the batches an
    uninterrupted run would see next.

    Args:
        files: text files, one tokenised sentence per line.
        vocab: the output :class:`~elmo_keras.lm.vocab.Vocabulary`.
        batch_size: sentences per batch.
        start: int, the stream position (batches) of the first batch. Defaults to `0`.
        pass_batches: int, :func:`batches_per_pass` of these settings; needed only when ``start`` > 0
            (counted when `None`). Defaults to `None`.
        shuffle_buffer: sentences per shuffled block; 0 keeps the file order.
        seed: the shuffling seed.
        buckets: length bucket boundaries, in tokens.
        max_characters_per_token: char ids per token.
        num_shards: the number of input shards (workers).
        shard_index: this worker's shard.

    Returns:
        An endless ``tf.data.Dataset`` of ``(char_ids [B, T, C], (forward [B, T], backward [B, T]))``.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.lm import Vocabulary
    from elmo_keras.lm.data import batches_per_pass, lm_stream

    path = os.path.join(tempfile.mkdtemp(), "train.txt")
    with open(path, "w") as f:
        f.write("".join(f"w{i} w{i + 1} .\\n" for i in range(10)))
    vocab = Vocabulary.from_files([path])
    n = batches_per_pass([path], batch_size=4)
    assert n == 3  # 10 sentences of 3 tokens, one bucket: 4 + 4 + 2
    stream = [x for x, _ in lm_stream([path], vocab, 4, shuffle_buffer=5).take(3 * n)]
    resumed = [x for x, _ in lm_stream([path], vocab, 4, start=4, shuffle_buffer=5).take(3 * n - 4)]
    assert all((a.numpy() == b.numpy()).all() for a, b in zip(stream[4:], resumed))
    ```
    """
    if start and pass_batches is None:
        pass_batches = batches_per_pass(files, batch_size, buckets, num_shards, shard_index)
    one_pass = _passes(
        files, vocab, batch_size, shuffle_buffer, seed, buckets, max_characters_per_token, num_shards, shard_index
    )
    first, skip = divmod(start, pass_batches) if start else (0, 0)
    return tf.data.Dataset.counter(first).flat_map(one_pass).skip(skip).prefetch(tf.data.AUTOTUNE)


def batches_per_pass(
    files: Sequence[str | os.PathLike],
    batch_size: int,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    num_shards: int = 1,
    shard_index: int = 0,
) -> int:
    """How many batches one pass of :func:`lm_dataset` holds: the same in every epoch (each length bucket ends
    its pass with one partial batch), counted from the sentence lengths without encoding any text.

    Args:
        files: text files, one tokenised sentence per line.
        batch_size: sentences per batch.
        buckets: length bucket boundaries, in tokens.
        num_shards: the number of input shards (workers).
        shard_index: this worker's shard.

    Returns:
        The number of batches.
    """
    shard = _check_files(files, num_shards)[shard_index::num_shards]
    boundaries = tf.constant([b + 2 for b in buckets], tf.int32)  # as _bucketed: rows = tokens + <S>, </S>
    n_buckets = len(buckets) + 1

    def add(counts, lengths):
        bucket = tf.searchsorted(boundaries, lengths, side="right")
        return counts + tf.math.bincount(bucket, minlength=n_buckets, maxlength=n_buckets, dtype=tf.int64)

    lengths = _sentences(shard, 0, 0, 0).map(lambda line: tf.size(tf.strings.split(line)) + 2)
    counts = lengths.batch(4096).reduce(tf.zeros([n_buckets], tf.int64), add).numpy()
    return int(sum(-(-int(c) // batch_size) for c in counts))


def sentences_dataset(
    sentences: Sequence[str | Sequence[str]],
    vocab: Vocabulary,
    batch_size: int,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
) -> tf.data.Dataset:
    """Batches (in order, not bucketed) from in-memory sentences: strings or token lists.

    Args:
        sentences: strings (split on whitespace) or token lists.
        vocab: the output :class:`~elmo_keras.lm.vocab.Vocabulary`.
        batch_size: sentences per batch.
        max_characters_per_token: char ids per token.

    Returns:
        A ``tf.data.Dataset`` as :func:`lm_dataset` gives.

    Example:

    ```python
    from collections import Counter
    from elmo_keras.lm import Vocabulary
    from elmo_keras.lm.data import sentences_dataset

    vocab = Vocabulary.from_counts(Counter("the cat saw the dog".split()))
    chars, (forward, backward) = next(iter(sentences_dataset(["the cat", "the dog saw"], vocab, batch_size=2)))
    assert chars.shape == (2, 5, 50) and forward.shape == (2, 5)  # 3 tokens + <S> and </S>
    ```
    """
    lines = []
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            if any(not t or t.split() != [t] for t in sentence):
                raise ValueError(f"sentence {i}: tokens must be non-empty and hold no whitespace, got {sentence!r}")
            sentence = " ".join(sentence)
        if not sentence.split():
            raise ValueError(f"sentence {i} is empty")
        lines.append(sentence)
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(lines, dtype=tf.string))
    ds = ds.map(sentence_encoder(vocab, max_characters_per_token))
    return ds.padded_batch(
        batch_size, padded_shapes=([None, max_characters_per_token], ([None], [None])), padding_values=(0, (-1, -1))
    )
