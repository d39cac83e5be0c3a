"""Keeping old spellings working: keyword arguments renamed to the names Keras uses."""

from __future__ import annotations

import functools
import inspect
import warnings


def renamed_arguments(**old_to_new: str):
    """Decorate a layer's ``__init__`` so that old keyword names still work, with a DeprecationWarning.

    ``from_config`` calls ``cls(**config)``, so configs saved under the old names (old ``.keras`` files) load too.
    """

    def decorate(init):
        @functools.wraps(init)
        def wrapper(self, *args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{type(self).__name__} got both '{new}' and its old name '{old}'")
                    warnings.warn(
                        f"{type(self).__name__}: '{old}' is deprecated, use '{new}'", DeprecationWarning, stacklevel=2
                    )
                    kwargs[new] = kwargs.pop(old)
            init(self, *args, **kwargs)

        wrapper.__signature__ = inspect.signature(init)  # Keras reads it (getfullargspec ignores __wrapped__)
        return wrapper

    return decorate
