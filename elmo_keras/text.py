"""Tokens to character ids, the ELMo way.

Two implementations that give identical ids for any Unicode input:

* :func:`batch_to_ids` (NumPy), for lists of token lists in Python;
* :func:`tokens_to_char_ids` / :func:`sentences_to_char_ids` (core ``tf.strings`` ops only),
  used inside models so that a SavedModel can take raw strings.

A token becomes ``max_characters_per_token`` (50) slots ``[BOW, up to 48 UTF-8 bytes, EOW, PAD...]``;
every id is shifted by +1 so that 0 means "no token" (padding). Sentences are split on ASCII
whitespace (space, \\t, \\n, \\v, \\f, \\r) in both paths, as ``tf.strings.split`` does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from elmo_keras.errors import InputError

BOS_CHAR = 256  # begin sentence
EOS_CHAR = 257  # end sentence
BOW_CHAR = 258  # begin word
EOW_CHAR = 259  # end word
PAD_CHAR = 260  # padding inside a token
MAX_CHARACTERS_PER_TOKEN = 50

_WHITESPACE = re.compile(r"[ \t\n\v\f\r]+")
_TOKEN = re.compile(r"[^ \t\n\v\f\r]+")


def tokenize(sentence: str) -> list[str]:
    """Split ``sentence`` on runs of ASCII whitespace, exactly as the in-graph path does.

    Args:
        sentence: the text to split.

    Returns:
        The list of tokens (no empty strings).

    Example:

    >>> import elmo_keras as ek
    >>> ek.tokenize(" The bank\tapproved  it .")
    ['The', 'bank', 'approved', 'it', '.']
    """
    if not isinstance(sentence, str):
        raise TypeError(f"tokenize() takes a str, got {type(sentence).__name__}")
    return [t for t in _WHITESPACE.split(sentence) if t]


def _utf8(value: object, where: str, sentence: bool = False) -> bytes:
    """A str, or bytes that are valid UTF-8 -> its UTF-8 bytes; errors name ``where`` it came from and, for a str
    that UTF-8 cannot encode, the token (of a ``sentence``) and the character at fault."""
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{where} is not valid UTF-8 ({err}); decode your text to str first") from None
        return value
    if not isinstance(value, str):
        raise TypeError(f"{where} is {value!r:.40} ({type(value).__name__}); text must be str")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as err:  # only a lone surrogate (U+D800..U+DFFF) has no UTF-8 form
        found = f"the lone surrogate U+{ord(value[err.start]):04X}"
        if sentence:
            index, token = next((j, m) for j, m in enumerate(_TOKEN.finditer(value)) if m.end() > err.start)
            found = f"token {index} {token.group()!r:.60} holds {found}"
        else:
            found = f"{value!r:.60} holds {found} at character {err.start}"
        raise InputError(
            f"{where} cannot be encoded as UTF-8: {found}; replace it (text.encode('utf-8', 'replace').decode()) "
            "or decode the source bytes as UTF-8"
        ) from None


def _token_bytes(token: object, where: str) -> bytes:
    data = _utf8(token, f"token {where}")
    if not data:
        raise InputError(
            f"token {where} is the empty string; tokens must be non-empty ('' means padding in string tensors)"
        )
    return data


def _char_ids_for_bytes(data: bytes, max_chars: int) -> np.ndarray:
    code = np.full(max_chars, PAD_CHAR, dtype=np.int32)
    body = np.frombuffer(data[: max_chars - 2], dtype=np.uint8)
    code[0] = BOW_CHAR
    code[1 : 1 + len(body)] = body
    code[1 + len(body)] = EOW_CHAR
    return code + 1


def boundary_char_ids(max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Shifted char ids of ``<S>`` and ``</S>``.

    Args:
        max_characters_per_token: ids per token (the options' ``max_characters_per_token``).

    Returns:
        int32 array `[2, max_characters_per_token]`: the row of ``<S>``, then the row of ``</S>``.
    """
    ids = np.full((2, max_characters_per_token), PAD_CHAR, dtype=np.int32)
    ids[:, 0] = BOW_CHAR
    ids[:, 1] = [BOS_CHAR, EOS_CHAR]
    ids[:, 2] = EOW_CHAR
    return ids + 1


def batch_to_ids(
    batch: Sequence[Sequence[str]], max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN
) -> np.ndarray:
    """Token lists -> char ids, int32 [batch, max_len, max_characters_per_token].

    No ``<S>``/``</S>``: the model adds them. Rows past a sentence's end are all zeros.

    Args:
        batch: list of token lists (not strings: see :func:`tokenize`).
        max_characters_per_token: ids per token, at least 3; longer tokens are cut.

    Returns:
        int32 array `[batch, max_len, max_characters_per_token]`, ids in `[0, 262)`.

    Example:

    >>> import elmo_keras as ek
    >>> ek.batch_to_ids([["Hello", "world"], ["Hi"]]).shape
    (2, 2, 50)
    """
    if max_characters_per_token < 3:
        raise ValueError(f"max_characters_per_token must be >= 3, got {max_characters_per_token}")
    encoded = encode_token_lists(batch)
    max_len = max((len(s) for s in encoded), default=0)
    ids = np.zeros((len(encoded), max_len, max_characters_per_token), dtype=np.int32)
    for i, sentence in enumerate(encoded):
        for j, data in enumerate(sentence):
            ids[i, j] = _char_ids_for_bytes(data, max_characters_per_token)
    return ids


def encode_token_lists(batch: Sequence[Sequence[str]], first: int = 0) -> list[list[bytes]]:
    """Check token lists and return each token's UTF-8 bytes; clear errors for strings, empty or bad tokens (a
    str that UTF-8 cannot encode: :class:`InputError` naming the sentence, the token and the character).

    Args:
        batch: list of token lists.
        first: the number errors give the first sentence (its row in the caller's input).

    Returns:
        The tokens' UTF-8 bytes, as lists in the same layout.

    Example:

    ```python
    from elmo_keras.errors import InputError
    from elmo_keras.text import encode_token_lists

    assert encode_token_lists([["Hi", "é"]]) == [[b"Hi", b"\\xc3\\xa9"]]
    try:
        encode_token_lists([["ok", "bad\\ud800"]], first=7)
    except InputError as err:
        assert str(err).startswith("token 1 of sentence 7 cannot be encoded as UTF-8")
    ```
    """
    if isinstance(batch, (str, bytes)):
        raise TypeError("batch_to_ids() takes a list of token lists, e.g. [['Hello', 'world']]; got a string")
    sentences = list(batch)
    for i, sentence in enumerate(sentences, first):
        if isinstance(sentence, (str, bytes)):
            raise TypeError(
                f"sentence {i} is a string; pass token lists (use elmo_keras.tokenize(text) to split on whitespace)"
            )
    return [
        [_token_bytes(token, f"{j} of sentence {i}") for j, token in enumerate(sentence)]
        for i, sentence in enumerate(sentences, first)
    ]


# ----------------------------------------------------------------------------------------------------------
# In-graph path (TensorFlow). Core tf.strings / tf.io ops only, so it runs in a stock TF Serving binary.


def as_text(inputs):
    """Text as users pass it -> a string tensor; anything else (tensors, datasets, numeric arrays) unchanged.

    Takes a list or tuple of str (sentences [batch]), of token lists (padded with "" to [batch, max_len]), or a
    NumPy str/bytes/object array of rank 1 or 2. Every element must be a str or UTF-8 bytes: otherwise TypeError
    or InputError naming the row.

    Args:
        inputs: text as above, or anything else (returned as it is).

    Returns:
        A string tensor `[batch]` or `[batch, max_len]`, or ``inputs`` unchanged.
    """
    import tensorflow as tf

    if isinstance(inputs, np.ndarray) and inputs.dtype.kind not in "USO":
        return inputs
    if not isinstance(inputs, (list, tuple, np.ndarray, str, bytes)):
        return inputs
    if isinstance(inputs, (list, tuple)) and any(isinstance(row, (list, tuple)) for row in inputs):
        if not all(isinstance(row, (list, tuple)) for row in inputs):
            raise InputError("text mixes strings and token lists: pass sentences (a list of str) or token lists")
        width = max(len(row) for row in inputs)
        inputs = [[*row, *[""] * (width - len(row))] for row in inputs]
    array = np.asarray(inputs, dtype=object)
    if array.ndim not in (1, 2):
        raise InputError(
            f"text must be sentences [batch] or padded tokens [batch, max_len], got shape {array.shape}"
            + ("; wrap a single text in a list: [text]" if array.ndim == 0 else "")
        )
    data = [
        _utf8(value, f"row {index[0]}" + (f", token {index[1]}," if len(index) == 2 else ""), len(index) == 1)
        for index, value in np.ndenumerate(array)
    ]
    return tf.constant(np.array(data, dtype=object).reshape(array.shape), dtype=tf.string)


def assert_rows(valid, message: str) -> None:
    """Fail (InvalidArgumentError, eagerly, in a tf.function and in a SavedModel) with ``elmo_keras: message``
    and the index of the first row (leading axis) of ``valid`` that holds a False.

    Only the message and the row index go into the error: TensorFlow fails to format invalid UTF-8 bytes.

    Args:
        valid: bool tensor `[rows, ...]`.
        message: what is wrong with a row holding a False.
    """
    import tensorflow as tf

    rank = valid.shape.rank
    rows = tf.reshape(valid, [-1]) if rank == 0 else tf.reduce_all(valid, axis=list(range(1, rank)))
    tf.debugging.Assert(
        tf.reduce_all(rows),
        [f"elmo_keras: {message}; first bad row (0-based, in this batch):", tf.where(tf.logical_not(rows))[:1, 0]],
    )


def check_char_ids(ids, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN, n_characters: int = 262):
    """Char ids (e.g. from :func:`batch_to_ids`) -> int32, after checking them: an integer dtype and
    ``max_characters_per_token`` ids per token (InputError), every id in ``[0, n_characters)`` (see
    :func:`assert_rows`; TensorFlow backend: other backends check the range of eager inputs before the call,
    ``elmo_keras.layers.bilm.check_concrete_inputs``).

    Args:
        ids: integer tensor `[..., max_characters_per_token]`.
        max_characters_per_token: ids per token the model expects.
        n_characters: size of the character vocabulary.

    Returns:
        ``ids`` as int32.
    """
    import keras

    dtype = keras.backend.standardize_dtype(ids.dtype)
    if not dtype.startswith(("int", "uint")):
        raise InputError(
            f"char ids must be integers (int32, as elmo_keras.batch_to_ids makes them), got "
            f"{dtype}; pass text as str, or cast ids that are whole numbers"
        )
    if ids.shape[-1] not in (None, max_characters_per_token):
        raise InputError(
            f"char ids have {ids.shape[-1]} ids per token, but the options say "
            f"max_characters_per_token={max_characters_per_token}: make them with "
            f"batch_to_ids(tokens, max_characters_per_token={max_characters_per_token})"
        )
    if keras.backend.backend() != "tensorflow":  # JAX, PyTorch: eager calls are checked before (no graph asserts)
        return keras.ops.cast(ids, "int32")
    import tensorflow as tf

    assert_rows(
        (ids >= 0) & (ids < n_characters),
        f"char ids must be in [0, {n_characters}) (0 = padding token; see elmo_keras.batch_to_ids)",
    )
    return tf.cast(ids, tf.int32)


def tokens_to_char_ids(tokens, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN):
    """String tensor of tokens, any shape [...] ("" = padding) -> int32 [..., max_characters_per_token].

    Args:
        tokens: string tensor of tokens, `""` for padding.
        max_characters_per_token: ids per token.

    Returns:
        int32 tensor `[..., max_characters_per_token]`, the same ids as :func:`batch_to_ids` (zeros at padding).
    """
    import tensorflow as tf

    tokens = tf.convert_to_tensor(tokens, dtype=tf.string)
    valid = tf.equal(tf.strings.unicode_transcode(tokens, "UTF-8", "UTF-8", errors="ignore"), tokens)
    assert_rows(valid, "input text is not valid UTF-8; decode/clean it before calling the model")
    n_bytes = max_characters_per_token - 2
    raw = tf.cast(tf.io.decode_raw(tokens, tf.uint8, fixed_length=n_bytes), tf.int32)  # [..., n_bytes]
    length = tf.minimum(tf.strings.length(tokens, unit="BYTE"), n_bytes)[..., None]  # [..., 1]
    body = tf.where(tf.range(n_bytes) < length, raw, PAD_CHAR)
    lead = tf.fill(tf.shape(length), BOW_CHAR)
    tail = tf.fill(tf.shape(length), PAD_CHAR)
    code = tf.concat([lead, body, tail], axis=-1)  # [..., max_chars]
    code = tf.where(tf.equal(tf.range(max_characters_per_token), length + 1), EOW_CHAR, code)
    is_token = tf.strings.length(tokens)[..., None] > 0
    return tf.where(is_token, code + 1, 0)


def split_sentences(sentences, min_length: int = 0):
    """1-D string tensor of sentences -> [batch, max(max_len, min_length)] tokens, split on ASCII whitespace,
    "" padded. ``min_length=1`` keeps one (padding) column for a batch of empty texts, which recurrent
    layers stacked on top need.

    Args:
        sentences: 1-D string tensor.
        min_length: the least number of columns of the result.

    Returns:
        string tensor `[batch, max(max_len, min_length)]`.
    """
    import tensorflow as tf

    sentences = tf.convert_to_tensor(sentences, dtype=tf.string)
    if sentences.shape.rank != 1:
        raise ValueError(f"sentences must be a 1-D string tensor, got shape {sentences.shape}")
    tokens = tf.strings.split(sentences).to_tensor(default_value="")
    if min_length:
        tokens = tf.pad(tokens, [[0, 0], [0, tf.maximum(min_length - tf.shape(tokens)[1], 0)]])
    return tokens


def token_mask(inputs):
    """Sentences [B], padded tokens [B, T] or char ids [B, T, C] -> bool [B, T], True at real tokens: the mask
    of the biLM outputs, without computing char ids (sentences split as :func:`sentences_to_char_ids` does).

    Args:
        inputs: sentences `[B]`, padded tokens `[B, T]` (strings) or char ids `[B, T, C]`.

    Returns:
        bool tensor `[B, T]`.
    """
    from keras import ops

    if len(inputs.shape) == 3:
        return ops.any(ops.not_equal(inputs, 0), axis=-1)
    return ops.not_equal(split_sentences(inputs) if len(inputs.shape) == 1 else inputs, "")


def sentences_to_char_ids(sentences, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN):
    """1-D string tensor of sentences -> int32 [batch, max_len, max_characters_per_token].

    Args:
        sentences: 1-D string tensor, split on ASCII whitespace.
        max_characters_per_token: ids per token.

    Returns:
        int32 tensor `[batch, max_len, max_characters_per_token]`.
    """
    return tokens_to_char_ids(split_sentences(sentences), max_characters_per_token)


def strings_to_char_ids(strings, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN):
    """Sentences [batch] or padded tokens [batch, max_len] -> char ids [batch, max_len, max_chars].

    Args:
        strings: string tensor of sentences `[batch]` or of padded tokens `[batch, max_len]`.
        max_characters_per_token: ids per token.

    Returns:
        int32 tensor `[batch, max_len, max_characters_per_token]`.
    """
    rank = strings.shape.rank
    if rank == 1:
        return sentences_to_char_ids(strings, max_characters_per_token)
    if rank == 2:
        return tokens_to_char_ids(strings, max_characters_per_token)
    raise ValueError(
        f"string input must be sentences [batch] or padded tokens [batch, max_len]; got shape {strings.shape}"
    )


def split_on_spaces(sentences):
    """string [B] -> (tokens string [B, T] "" padded, lengths int32 [B]): TF Hub ELMo's ``default`` signature
    rule (single spaces, empty pieces dropped); core TF ops.

    Args:
        sentences: 1-D string tensor.

    Returns:
        ``(tokens, lengths)``: string `[B, T]` padded with `""`, and int32 `[B]`.
    """
    import tensorflow as tf

    pieces = tf.strings.split(sentences, sep=" ")
    pieces = tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)
    return pieces.to_tensor(default_value=""), tf.cast(pieces.row_lengths(), tf.int32)


def pad_tokens(sentences: Sequence[Sequence[str]]):
    """Token lists -> string tensor [N, max_len] padded with "" (the input of ``models.sequence_tagger``).

    A tf.Tensor, since Keras cannot feed 2-D NumPy object or bytes arrays.

    Args:
        sentences: list of token lists (non-empty str tokens).

    Returns:
        string tensor `[N, max_len]`.

    Example:

    >>> from elmo_keras.text import pad_tokens
    >>> pad_tokens([["a", "b"], ["c"]]).numpy().tolist()
    [[b'a', b'b'], [b'c', b'']]
    """
    import tensorflow as tf

    width = max((len(s) for s in sentences), default=0)
    out = np.full((len(sentences), width), "", dtype=object)
    for i, sentence in enumerate(sentences):
        if any(not isinstance(t, str) or not t for t in sentence):
            raise InputError(f"sentence {i}: tokens must be non-empty strings")
        out[i, : len(sentence)] = list(sentence)
    return tf.constant(out.astype(str).reshape(len(sentences), width), dtype=tf.string)
