"""The one exception type for bad user input found at a boundary (files, options, CLI arguments, layer inputs)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, found before any work on it: the message names the problem (path, key, row, value) and the fix.

    A ``ValueError`` so that code catching ``ValueError`` keeps working; the ``elmo-keras`` command turns it into
    one ``elmo-keras COMMAND: error: ...`` line on stderr and exit status 2, with no traceback.
    """
