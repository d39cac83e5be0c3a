"""Word vocabulary in the bilm-tf vocabulary-file format.

File format: UTF-8, one token per line; the first three lines are ``<S>``, ``</S>`` and ``<UNK>``,
then the words, most frequent first. Ids are line numbers (``<S>`` = 0, ``</S>`` = 1, ``<UNK>`` = 2),
so that a log-uniform (Zipfian) candidate sampler matches the word frequencies.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

from elmo_keras.errors import InputError
from elmo_keras.io.load import open_vocab
from elmo_keras.utils.files import atomic_file

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
SPECIALS = (BOS, EOS, UNK)


def _check_token(token: str, where: str) -> None:
    if not token or any(ch in " \t\n\v\f\r" for ch in token):
        raise ValueError(f"{where}: vocabulary token {token!r} is empty or holds ASCII whitespace")


class Vocabulary:
    """Token <-> id mapping. ``tokens[0:3]`` are ``<S>``, ``</S>``, ``<UNK>``; unknown words map to ``<UNK>``.

    Args:
        tokens: the entries in id order, starting with the three specials; distinct, no whitespace.

    Example:

    ```python
    from collections import Counter
    from elmo_keras.lm import Vocabulary

    vocab = Vocabulary.from_counts(Counter("the cat saw the dog".split()))
    assert vocab.tokens[:4] == ["<S>", "</S>", "<UNK>", "the"] and vocab.ids["the"] == 3 and len(vocab) == 7
    ```
    """

    def __init__(self, tokens: Sequence[str]):
        tokens = list(tokens)
        if tuple(tokens[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {list(SPECIALS)} (bilm-tf format), got {tokens[:3]}")
        self.tokens = tokens
        self.ids = {}
        for i, token in enumerate(tokens):
            _check_token(token, f"entry {i}")
            if token in self.ids:
                raise ValueError(f"vocabulary token {token!r} appears twice (entries {self.ids[token]} and {i})")
            self.ids[token] = i

    bos_id, eos_id, unk_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    @classmethod
    def from_counts(cls, counts: Counter, min_count: int = 1, max_size: int | None = None) -> "Vocabulary":
        """Words with count >= ``min_count``, most frequent first (ties: alphabetical), at most ``max_size``
        entries in all (the three specials included).

        Args:
            counts: word counts.
            min_count: the least count a word needs.
            max_size: the most entries, or ``None`` for no limit.

        Returns:
            A :class:`Vocabulary`.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        if max_size is not None and max_size < 4:
            raise ValueError(f"max_size must be >= 4 (3 specials + 1 word), got {max_size}")
        words = sorted(
            (w for w, c in counts.items() if c >= min_count and w not in SPECIALS), key=lambda w: (-counts[w], w)
        )
        if max_size is not None:
            words = words[: max_size - len(SPECIALS)]
        return cls([*SPECIALS, *words])

    @classmethod
    def from_files(
        cls, paths: Sequence[str | os.PathLike], min_count: int = 1, max_size: int | None = None
    ) -> "Vocabulary":
        """Count whitespace-separated tokens in text files (one sentence per line); :class:`InputError` when there
        are none.

        Args:
            paths: text files, one tokenised sentence per line.
            min_count: the least count a word needs.
            max_size: the most entries, or ``None`` for no limit.

        Returns:
            A :class:`Vocabulary`.
        """
        counts: Counter = Counter()
        for path in paths:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    counts.update(line.split())
        if not counts:
            raise InputError(
                f"no tokens found in {', '.join(os.fspath(p) for p in paths)}: the files are empty or "
                f"blank; give text with one tokenised sentence per line"
            )
        return cls.from_counts(counts, min_count, max_size)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a bilm-tf vocabulary file.

        Args:
            path: the file, one token a line; gzip-compressed when its name ends in ``.gz`` (``vocab.txt.gz``).

        Returns:
            A :class:`Vocabulary`.
        """
        if not os.path.exists(path):
            raise FileNotFoundError(f"vocabulary file not found: {os.fspath(path)!r}")
        with open_vocab(path) as f:
            tokens = [line.rstrip("\n") for line in f]
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls(tokens)

    def save(self, path: str | os.PathLike) -> None:
        """Write the bilm-tf vocabulary file (atomically: temporary file, then rename).

        Args:
            path: the file to write.
        """
        with atomic_file(os.fspath(path)) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in self.tokens))
