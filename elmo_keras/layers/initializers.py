"""Initializers of the biLM's own layers, and a scope in which they draw nothing because weights are assigned next.

Building the released 93.6M-parameter biLM with random (Glorot) initial values costs about 300 MB of transient
memory on top of the variables, all overwritten right away by the loaded weights; inside
:func:`weights_loaded_next` the variables start as zeros instead.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import keras

_LOADING = contextvars.ContextVar("elmo_keras_weights_loaded_next", default=False)


@contextlib.contextmanager
def weights_loaded_next() -> Iterator[None]:
    """Within this scope, variables built by the biLM's layers start as zeros (their weights are assigned next)."""
    token = _LOADING.set(True)
    try:
        yield
    finally:
        _LOADING.reset(token)


def initializer(default: str | keras.initializers.Initializer) -> str | keras.initializers.Initializer:
    """``default``, or "zeros" inside :func:`weights_loaded_next`."""
    return "zeros" if _LOADING.get() else default
