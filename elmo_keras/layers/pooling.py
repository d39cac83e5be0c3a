"""Masked pooling over time: [B, T, D] (+ mask [B, T]) -> [B, len(modes) * D]; the same pooling of one text's
token vectors in NumPy (:func:`pool_tokens`), and the one check of a ``pool=`` argument (:func:`pool_modes`)."""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from elmo_keras.errors import InputError
from elmo_keras.saving import serializable

_MODES = ("max", "mean")


def pool_modes(pool: str | Sequence[str]) -> tuple[str, ...]:
    """Check a ``pool=`` argument (of ``Elmo``, ``ElmoEmbedder``, ``embed_file``, ``elmo-keras embed --pool``).

    Args:
        pool: `"mean"`, `"max"`, a sequence of them (results concatenated in that order), or the same as one
            comma-separated string (`"mean,max"`, as the command line takes it).

    Returns:
        The modes, a tuple such as `("mean", "max")`.

    Raises:
        InputError: an unknown or repeated mode, or none.

    Example:

    ```python
    from elmo_keras.layers.pooling import pool_modes

    assert pool_modes("mean") == ("mean",)
    assert pool_modes(["mean", "max"]) == pool_modes("mean,max") == ("mean", "max")
    ```
    """
    if isinstance(pool, str):
        modes = tuple(m.strip() for m in pool.split(","))
    else:  # a list or tuple of modes; anything else (e.g. pool=1) is refused below, by its value
        modes = tuple(pool) if isinstance(pool, (list, tuple)) else ()
    if not modes or any(m not in _MODES for m in modes) or len(set(modes)) != len(modes):
        raise InputError(
            f"pool must be 'mean', 'max' or a list of both (e.g. ['mean', 'max'] or 'mean,max'), got {pool!r}"
        )
    return modes


def pool_tokens(array: np.ndarray, pool: str | Sequence[str]) -> np.ndarray:
    """Pool one text's token vectors over its tokens (axis -2), as :class:`MaskedPooling` pools a masked row: a
    text without tokens gives zeros, never NaN.

    Args:
        array: float array `[..., n_tokens, dim]` (e.g. `[n_layers + 1, n_tokens, 2P]` from ``ElmoEmbedder``).
        pool: `"mean"`, `"max"` or a list of both, see :func:`pool_modes`.

    Returns:
        An array `[..., len(modes) * dim]` of the same dtype, the modes' results concatenated in order.

    Example:

    ```python
    import numpy as np
    from elmo_keras.layers.pooling import pool_tokens

    layers = np.array([[[1.0, 2.0], [3.0, 8.0]]], "float32")  # [1 layer, 2 tokens, 2]
    np.testing.assert_array_equal(pool_tokens(layers, ["mean", "max"]), [[2.0, 5.0, 3.0, 8.0]])
    np.testing.assert_array_equal(pool_tokens(np.zeros((3, 0, 2), "float32"), "mean"), np.zeros((3, 2)))
    ```
    """
    modes = pool_modes(pool)
    if array.shape[-2] == 0:
        return np.zeros((*array.shape[:-2], len(modes) * array.shape[-1]), array.dtype)
    return np.concatenate([array.max(axis=-2) if m == "max" else array.mean(axis=-2) for m in modes], axis=-1)


@serializable
class MaskedPooling(keras.layers.Layer):
    """Max and/or mean over the unmasked time steps; a row with no unmasked step pools to zeros.

    (Keras' ``GlobalAveragePooling1D`` gives NaN for such a row, e.g. an empty text under ``Elmo``.)

    Args:
        modes: non-empty sequence of `"max"` and `"mean"`; their results are concatenated in this order.
            Defaults to `("max", "mean")`.
        return_empty_flag: bool, also return which rows had no unmasked step (their pooled zeros stand for
            "no tokens", not for vectors that happen to be zero). Defaults to `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: float tensor `[batch, timesteps, dim]`.
        mask: bool tensor `[batch, timesteps]`; taken from the input's Keras mask when not given, all steps
            when there is none.

    Returns:
        A float tensor `[batch, len(modes) * dim]` (no mask); with ``return_empty_flag``, the pair
        `(pooled, empty)`, `empty` a bool tensor `[batch]`, True for the rows that pooled to zeros for want of
        unmasked steps.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    x = np.array([[[1.0], [3.0], [100.0]], [[5.0], [6.0], [7.0]]], "float32")
    mask = np.array([[True, True, False], [False, False, False]])
    pooled = ek.MaskedPooling(("max", "mean"))(x, mask=mask)
    np.testing.assert_allclose(pooled, [[3.0, 2.0], [0.0, 0.0]])
    pooled, empty = ek.MaskedPooling(return_empty_flag=True)(x, mask=mask)
    assert np.asarray(empty).tolist() == [False, True]
    ```
    """

    def __init__(self, modes: Sequence[str] = ("max", "mean"), return_empty_flag: bool = False, **kwargs):
        super().__init__(**kwargs)
        modes = tuple(modes)
        if not modes or any(m not in _MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {_MODES}, got {modes}")
        self.modes = modes
        self.return_empty_flag = return_empty_flag

    def call(self, inputs, mask=None):
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], dtype="bool")
        m = ops.cast(mask, "bool")[..., None]
        count = ops.sum(ops.cast(m, inputs.dtype), axis=1)  # [B, 1]
        pooled = []
        for mode in self.modes:
            if mode == "max":
                best = ops.max(ops.where(m, inputs, float("-inf")), axis=1, initial=float("-inf"))
                pooled.append(ops.where(count > 0, best, ops.zeros_like(best)))
            else:  # masked steps are left out, not multiplied by 0 (which keeps a NaN or inf there)
                pooled.append(ops.sum(ops.where(m, inputs, 0.0), axis=1) / ops.maximum(count, 1.0))
        pooled = ops.concatenate(pooled, axis=-1)
        return (pooled, ops.equal(count[:, 0], 0)) if self.return_empty_flag else pooled

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        pooled = (input_shape[0], len(self.modes) * input_shape[-1])
        return (pooled, (input_shape[0],)) if self.return_empty_flag else pooled

    def compute_output_spec(self, inputs, mask=None):
        shapes = self.compute_output_shape(inputs.shape)
        if not self.return_empty_flag:
            return keras.KerasTensor(shapes, dtype=self.compute_dtype)
        return keras.KerasTensor(shapes[0], dtype=self.compute_dtype), keras.KerasTensor(shapes[1], dtype="bool")

    def get_config(self):
        return {**super().get_config(), "modes": list(self.modes), "return_empty_flag": self.return_empty_flag}
