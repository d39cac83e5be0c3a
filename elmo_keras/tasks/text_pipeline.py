"""Raw strings -> char ids in the input pipeline (``tf.data``), for models over char ids on any Keras backend.

JAX and PyTorch have no string tensors, so there a model takes char ids int32 ``[B, T, max_characters_per_token]``
and the text step runs before it, in ``tf.data`` (TensorFlow ops on the CPU, whatever backend runs the model), as
keras-hub does with its preprocessing layers. Texts are split on whitespace and turned into char ids by the same
TensorFlow functions the in-graph path uses (:func:`elmo_keras.text.strings_to_char_ids`), so both paths see the
same ids. Batches are padded on the token axis to a multiple of ``length_multiple`` (masked, so results do not
change), which bounds the number of shapes a compiling backend (JAX's ``jit``) sees.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.errors import InputError
from elmo_keras.text import MAX_CHARACTERS_PER_TOKEN, as_text, strings_to_char_ids

#: the token-axis multiple that batches are padded to (see the module doc)
LENGTH_MULTIPLE = 8


def is_text(x) -> bool:
    """Whether ``x`` is text as users pass it (what :func:`elmo_keras.text.as_text` converts).

    Args:
        x: anything given to ``fit``, ``predict`` or a call.

    Returns:
        True for a str, a list or tuple of str or of token lists, a NumPy str/bytes/object array, or a string
        ``tf.Tensor``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.text_pipeline import is_text

    assert is_text(["a good film"]) and is_text([["a", "film"]]) and not is_text(np.zeros((1, 2, 50), "int32"))
    ```
    """
    if isinstance(x, tf.Tensor):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO"
    if isinstance(x, (str, bytes)):
        return True
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(v, (str, bytes, list, tuple)) for v in x)


def text_to_char_ids(
    texts,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    length_multiple: int = 1,
) -> np.ndarray:
    """Texts -> char ids as a NumPy array, which every backend takes (the eager counterpart of the pipeline).

    Args:
        texts: sentences (a list of str, split on whitespace) or token lists / padded tokens ``[B, T]``.
        max_characters_per_token: ids per token. Defaults to `50`.
        length_multiple: pad the token axis to a multiple of it. Defaults to `1`.

    Returns:
        int32 array `[B, T, max_characters_per_token]`, all-zero rows at padding.

    Example:

    ```python
    from elmo_keras.tasks.text_pipeline import text_to_char_ids

    ids = text_to_char_ids(["a good film", "bad"], length_multiple=8)
    assert ids.shape == (2, 8, 50) and not ids[1, 1:].any()
    ```
    """
    ids = _char_ids(as_text(texts), max_characters_per_token, length_multiple, trim=False)
    return ids.numpy()


def text_dataset(
    texts,
    labels=None,
    batch_size: int = 32,
    shuffle: bool = False,
    seed: int | None = None,
    token_labels: bool = False,
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    length_multiple: int = LENGTH_MULTIPLE,
    trim: bool = True,
) -> tf.data.Dataset:
    """Texts (and labels) -> a ``tf.data.Dataset`` of char-id batches, for ``fit``/``evaluate``/``predict`` on any
    backend.

    Args:
        texts: sentences (list of str or a string array `[N]`) or token lists / padded tokens `[N, T]`.
        labels: array-like with one row per text, or `None` (the dataset then yields char ids alone).
            Defaults to `None`.
        batch_size: int, texts per batch. Defaults to `32`.
        shuffle: bool, shuffle the texts anew on each pass (as ``fit`` does with arrays). Defaults to `False`.
        seed: int, the shuffle's seed, or `None`. Defaults to `None`.
        token_labels: bool, labels are per token `[N, T]` (a tagger's): padded and trimmed with the tokens.
            Defaults to `False`.
        max_characters_per_token: ids per token. Defaults to `50`.
        length_multiple: pad each batch's token axis to a multiple of it (bounds a compiling backend's shapes).
            Defaults to `8`.
        trim: bool, drop padding columns that no text of a batch reaches (padded tokens `[N, T]` only); `False`
            keeps every batch at width T, so that ``predict`` can join the batches. Defaults to `True`.

    Returns:
        A ``tf.data.Dataset`` of ``char_ids`` int32 `[B, T', C]` or ``(char_ids, labels)`` batches.

    Example:

    ```python
    import numpy as np
    from elmo_keras.tasks.text_pipeline import text_dataset

    batches = list(text_dataset(["a good film", "bad"], np.array([1, 0]), batch_size=2))
    char_ids, labels = batches[0]
    assert char_ids.shape == (2, 8, 50) and labels.numpy().tolist() == [1, 0]
    ```
    """
    text = as_text(texts)
    if not isinstance(text, tf.Tensor) or text.dtype != tf.string:
        raise InputError(f"text_dataset() takes texts (sentences or token lists), got {type(texts).__name__}")
    parts = (text,) if labels is None else (text, np.asarray(labels))
    if labels is not None and len(parts[1]) != len(text):
        raise InputError(f"{len(text)} texts but {len(parts[1])} labels: give one label row per text")
    dataset = tf.data.Dataset.from_tensor_slices(parts)
    if shuffle:
        dataset = dataset.shuffle(len(text), seed=seed, reshuffle_each_iteration=True)

    def convert(batch_text, *batch_labels):
        ids = _char_ids(batch_text, max_characters_per_token, length_multiple, trim)
        if not batch_labels:
            return ids
        (y,) = batch_labels
        if token_labels:
            y = _fit_width(y, tf.shape(ids)[1])
        return ids, y

    return dataset.batch(batch_size).map(convert, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _char_ids(text: tf.Tensor, max_chars: int, length_multiple: int, trim: bool) -> tf.Tensor:
    """string [B] or [B, T] -> int32 [B, T', C], T' a multiple of ``length_multiple`` (at least one of it)."""
    if text.shape.rank == 2 and trim:
        used = tf.reduce_any(tf.not_equal(text, ""), axis=0)
        width = tf.reduce_max(tf.concat([tf.where(used)[:, 0] + 1, [0]], axis=0))
        text = text[:, :width]
    ids = strings_to_char_ids(text, max_chars)
    return _fit_width(ids, _rounded_up(tf.shape(ids)[1], length_multiple))


def _rounded_up(length: tf.Tensor, multiple: int) -> tf.Tensor:
    return tf.maximum((length + multiple - 1) // multiple * multiple, multiple)


def _fit_width(values: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
    """Pad (with zeros) or cut axis 1 of ``values`` to ``width``."""
    values = values[:, :width]
    padding = [[0, 0], [0, width - tf.shape(values)[1]]] + [[0, 0]] * (values.shape.rank - 2)
    return tf.pad(values, padding)


def char_ids_width(model: keras.Model) -> int | None:
    """The char ids per token of a model whose input is char ids `[B, T, C]`; None for a model over text.

    Args:
        model: a functional Keras model.

    Returns:
        C, or `None` when the model's first input is not int `[B, T, C]`.

    Example:

    ```python
    import keras
    from elmo_keras.tasks.text_pipeline import char_ids_width

    ids = keras.Input((None, 50), dtype="int32")
    assert char_ids_width(keras.Model(ids, keras.layers.Flatten()(ids))) == 50
    ```
    """
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) != 1 or len(inputs[0].shape) != 3 or "int" not in str(inputs[0].dtype):
        return None
    return inputs[0].shape[-1]
