"""Initializers of the biLM's own layers, and a scope in which they draw nothing because weights are assigned next.

Building the released 93.6M-parameter biLM with random (Glorot) initial values costs about 300 MB of transient
memory on top of the variables, all overwritten right away by the loaded weights; inside
:func:`weights_loaded_next` the variables start as zeros instead, in host buffers whose pages are never touched
(:mod:`elmo_keras.utils.host_memory`): they cost no resident memory until the loaded weights replace them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import keras

from elmo_keras.utils.host_memory import host_tensor, host_zeros

_LOADING = contextvars.ContextVar("elmo_keras_weights_loaded_next", default=False)


@contextlib.contextmanager
def weights_loaded_next() -> Iterator[None]:
    """Within this scope, variables built by the biLM's layers start as zeros (their weights are assigned next)."""
    token = _LOADING.set(True)
    try:
        yield
    finally:
        _LOADING.reset(token)


class _Unloaded(keras.initializers.Initializer):
    """Zeros in an untouched host buffer (see :mod:`elmo_keras.utils.host_memory`), replaced by the loaded weights."""

    def __call__(self, shape, dtype=None):
        dtype = keras.backend.standardize_dtype(dtype or "float32")
        if dtype != "float32":  # e.g. a bfloat16 policy: NumPy has no such type, TensorFlow's zeros then
            return keras.initializers.Zeros()(shape, dtype)
        return host_tensor(host_zeros(tuple(shape)))


def initializer(default: str | keras.initializers.Initializer) -> str | keras.initializers.Initializer:
    """``default``, or untouched zeros inside :func:`weights_loaded_next`.

    Args:
        default: the initializer to use outside :func:`weights_loaded_next`.

    Returns:
        An initializer (or its name).
    """
    return _Unloaded() if _LOADING.get() else default
