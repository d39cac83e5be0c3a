"""tf.data pipeline for biLM training: text files -> (char ids, (forward targets, backward targets)).

Each non-blank line is one sentence of whitespace-separated tokens ``w_1 .. w_n``. It becomes the rows
``[<S>, w_1, .., w_n, </S>]`` (n + 2 rows): char ids int32 [n + 2, max_chars]; forward target of row i is
the word id of row i + 1, backward target of row i is the word id of row i - 1; -1 = no target (row 0
backward, row n + 1 forward, padding). So each direction predicts n + 1 tokens per sentence.
Batches are padded per length bucket: char ids [B, T, max_chars] (0 = padding), targets [B, T].
Blank lines hold no sentence and are skipped; long sentences are kept whole (the last bucket).
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


def lm_dataset(
    files: Sequence[str | os.PathLike],
    vocab: Vocabulary,
    batch_size: int,
    *,
    shuffle_buffer: int = 10000,
    seed: int = 0,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    num_shards: int = 1,
    shard_index: int = 0,
) -> tf.data.Dataset:
    """Training/validation batches from text files (one sentence per line).

    Files are sharded (``num_shards``/``shard_index``, e.g. from a ``tf.distribute.InputContext``), shuffled
    and interleaved; sentences are shuffled in a ``shuffle_buffer`` (0 = keep file order), bucketed by
    length (``buckets`` in tokens) and batched. Deterministic for a given ``seed``.

    Args:
        files: text files, one tokenised sentence per line.
        vocab: the output :class:`~elmo_keras.lm.vocab.Vocabulary`.
        batch_size: sentences per batch.
        shuffle_buffer: sentences in the shuffle buffer; 0 keeps the file order.
        seed: the shuffling seed.
        buckets: length bucket boundaries, in tokens.
        max_characters_per_token: char ids per token.
        num_shards: the number of input shards (workers).
        shard_index: this worker's shard.

    Returns:
        A ``tf.data.Dataset`` of ``(char_ids [B, T, C], (forward [B, T], backward [B, T]))``.
    """
    files = [os.fspath(f) for f in files]
    if not files:
        raise ValueError("no text files given")
    for f in files:
        if not os.path.isfile(f):
            raise FileNotFoundError(f"text file not found: {f!r}")
    if num_shards > len(files):
        raise ValueError(f"cannot shard {len(files)} file(s) {num_shards} ways; give at least one file per shard")
    ds = tf.data.Dataset.from_tensor_slices(files).shard(num_shards, shard_index)
    if shuffle_buffer:
        ds = ds.shuffle(len(files), seed=seed)
    ds = ds.interleave(tf.data.TextLineDataset, cycle_length=min(4, len(files)))
    ds = ds.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0)
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.map(
        sentence_encoder(vocab, max_characters_per_token), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return _bucketed(ds, batch_size, buckets, max_characters_per_token).prefetch(tf.data.AUTOTUNE)


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
