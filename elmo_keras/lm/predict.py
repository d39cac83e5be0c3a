"""What a trained biLM predicts at a word: the probability of every vocabulary word there, per direction.

A query is a sentence and the position of one of its words: ``("The bank raised its rates .", 1)``, a token list
and a position, or a string that marks the word with brackets, ``"The [bank] raised its rates ."``. The model
reads ``[<S>, w_0, .., w_{n-1}, </S>]`` (see :mod:`elmo_keras.lm.data`), so word ``p`` is row ``p + 1``:

- ``forward``: the forward LM's softmax at row ``p`` (it has read ``<S>, w_0 .. w_{p-1}``: the left context only);
- ``backward``: the backward LM's softmax at row ``p + 2`` (it has read ``w_{p+1} .. w_{n-1}, </S>``: the right
  context only);
- ``both``: the normalised product of the two, ``p_f * p_b / sum(p_f * p_b)`` = ``softmax(logits_f + logits_b)``.
  A word must fit the left and the right context to score high: the mean of the two would rank high the words
  that one side alone likes (any noun after "the"). Its ranking is that of the mean of the two log
  probabilities (how simple_elmo users combine the directions). Being a product, it counts the word's
  frequency (prior) twice, so it leans towards frequent words.

Probabilities come from the full softmax over the vocabulary (logits and softmax in float64 from the model's
outputs, returned as float32), ``<S>``, ``</S>`` and ``<UNK>`` included (``<UNK>``: some word outside the
vocabulary); the word itself is kept unless ``exclude_word=True``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from elmo_keras.errors import InputError
from elmo_keras.io.options import positive_int
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.text import encode_token_lists

DIRECTIONS = ("forward", "backward", "both")

Query = str | tuple[str | Sequence[str], int]


def marked_word(sentence: str) -> tuple[list[str], int]:
    """Split a sentence on whitespace and find its one word marked with brackets, ``[word]``.

    Args:
        sentence: str, e.g. ``"The [bank] raised its rates ."``: exactly one whitespace-separated token is
            ``[...]`` (brackets around a non-empty word).

    Returns:
        ``(tokens, position)``: the tokens with the brackets removed, and the marked token's index.

    Example:

    ```python
    from elmo_keras.lm.predict import marked_word

    assert marked_word("The [bank] raised its rates .") == (["The", "bank", "raised", "its", "rates", "."], 1)
    ```
    """
    if not isinstance(sentence, str):
        raise InputError(f"a marked sentence must be a str, got {type(sentence).__name__}")
    tokens = sentence.split()
    marked = [i for i, t in enumerate(tokens) if len(t) >= 2 and t[0] == "[" and t[-1] == "]"]
    if not marked:
        raise InputError(
            f"no marked word in {sentence!r}: put brackets around one whitespace-separated word, "
            f"e.g. 'The [bank] raised its rates .' (or give its position)"
        )
    if len(marked) > 1:
        raise InputError(
            f"{len(marked)} marked words in {sentence!r} ({', '.join(tokens[i] for i in marked)}): mark exactly one"
        )
    position = marked[0]
    word = tokens[position][1:-1]
    if not word or word.split() != [word]:
        raise InputError(f"the marked word in {sentence!r} is empty: write it between the brackets, e.g. [bank]")
    return [*tokens[:position], word, *tokens[position + 1 :]], position


def parse_query(sentence: str | Sequence[str], position: int | None = None) -> tuple[list[str], int]:
    """Check one query: a sentence (str split on whitespace, or a token list) and a word position in it.

    Args:
        sentence: a str split on whitespace, or a list of tokens (non-empty, no whitespace).
        position: int, the index of the word (0 = the first token), or `None` when ``sentence`` is a str that
            marks the word with brackets (see :func:`marked_word`). Defaults to `None`.

    Returns:
        ``(tokens, position)``.

    Example:

    ```python
    from elmo_keras.lm.predict import parse_query

    assert parse_query("The bank raised its rates .", 1) == parse_query("The [bank] raised its rates .")
    ```
    """
    if position is None:
        if not isinstance(sentence, str):
            raise InputError("give the position of the word, or a str sentence that marks it as [word]")
        tokens, position = marked_word(sentence)
    else:
        tokens = _tokens_at(sentence, position)
    encode_token_lists([tokens])  # text UTF-8 cannot encode (a lone surrogate): InputError naming the token
    return tokens, int(position)


def _tokens_at(sentence: str | Sequence[str], position: int) -> list[str]:
    """The tokens of a sentence given with the position of its word, checked (see :func:`parse_query`)."""
    if isinstance(sentence, str):
        tokens = sentence.split()
    elif isinstance(sentence, Sequence) and all(isinstance(t, str) for t in sentence):
        tokens = list(sentence)
        bad = [t for t in tokens if t.split() != [t]]
        if bad:
            raise InputError(f"tokens must be non-empty and hold no whitespace, got {bad[0]!r} in {tokens!r}")
    else:
        raise InputError(f"a sentence is a str or a list of str tokens, got {sentence!r:.80}")
    if not tokens:
        raise InputError("the sentence is empty: give at least one word")
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise InputError(f"position must be an int, got {position!r}")
    if not 0 <= position < len(tokens):
        raise InputError(
            f"position {position} is out of range for a sentence of {len(tokens)} token(s) "
            f"(0 .. {len(tokens) - 1}): {' '.join(tokens)!r}"
        )
    return tokens


def parse_queries(queries: Sequence[Query]) -> list[tuple[list[str], int]]:
    """Check a batch of queries (see :func:`parse_query`); the error names the query at fault.

    Args:
        queries: each a ``(sentence, position)`` pair or a str that marks its word as ``[word]``; at least one.

    Returns:
        A list of ``(tokens, position)``.
    """
    if isinstance(queries, str) or not isinstance(queries, Sequence) or not len(queries):
        raise InputError(
            "give a non-empty list of queries, each a (sentence, position) pair or a sentence marked as "
            "'The [bank] raised its rates .'"
        )
    parsed = []
    for i, query in enumerate(queries):
        try:
            parsed.append(parse_query(*query) if isinstance(query, tuple) else parse_query(query))
        except TypeError:
            raise InputError(f"query {i}: expected (sentence, position) or a marked str, got {query!r:.80}") from None
        except InputError as err:
            raise InputError(f"query {i}: {err}") from None
    return parsed


def top_words(
    probabilities: np.ndarray, tokens: Sequence[str], k: int, exclude: Sequence[int] = ()
) -> list[tuple[str, float]]:
    """The ``k`` most probable words of one distribution, most probable first (ties: lower id first).

    Args:
        probabilities: float [V], one distribution over the vocabulary.
        tokens: the vocabulary's words in id order (``Vocabulary.tokens``).
        k: int, how many words (at most the vocabulary size less the excluded ids).
        exclude: ids to leave out of the list (their probability is not spread over the others). Defaults to
            `()`.

    Returns:
        A list of ``(word, probability)``.

    Example:

    ```python
    import numpy as np
    from elmo_keras.lm.predict import top_words

    assert top_words(np.array([0.1, 0.6, 0.3]), ["a", "b", "c"], 2) == [("b", 0.6), ("c", 0.3)]
    ```
    """
    probabilities = np.asarray(probabilities)
    order = np.argsort(-probabilities, kind="stable")
    if len(exclude):
        order = order[~np.isin(order, exclude)]
    return [(tokens[i], float(probabilities[i])) for i in order[:k]]


def excluded_ids(vocab: Vocabulary, word: str, exclude_word: bool, exclude_special: bool) -> list[int]:
    """The ids a list of substitutes leaves out.

    Args:
        vocab: the softmax's :class:`~elmo_keras.lm.vocab.Vocabulary`.
        word: the word at the position.
        exclude_word: bool, leave out the word itself (its id; ``<UNK>`` for a word outside the vocabulary).
        exclude_special: bool, leave out ``<S>``, ``</S>`` and ``<UNK>``.

    Returns:
        The sorted ids.
    """
    ids = {vocab.bos_id, vocab.eos_id, vocab.unk_id} if exclude_special else set()
    if exclude_word:
        ids.add(vocab.ids.get(word, vocab.unk_id))
    return sorted(ids)


def check_k(k: int, available: int) -> int:
    """``k`` if it is an int in ``[1, available]``, else :class:`InputError`.

    Args:
        k: the number of words asked for.
        available: how many words can be listed (the vocabulary less the excluded ids).

    Returns:
        ``k``.
    """
    positive_int(k, "k (--top-k)")
    if k > available:
        raise InputError(f"k (--top-k) is {k}, but only {available} vocabulary words can be listed: ask for fewer")
    return k


def prediction_rows(probabilities: dict[str, np.ndarray], tokens: Sequence[str], top: list[tuple[str, float]]):
    """The rows of a table: for each listed word, its probability in every direction.

    Args:
        probabilities: ``{"forward": [V], "backward": [V], "both": [V]}``, one query's distributions.
        tokens: the vocabulary's words in id order.
        top: the listed ``(word, probability)`` pairs (from :func:`top_words`).

    Returns:
        A list of ``{"rank", "word", "forward", "backward", "both"}`` dicts, rank from 1.
    """
    ids = {t: i for i, t in enumerate(tokens)}
    return [
        {"rank": rank, "word": word, **{d: float(probabilities[d][ids[word]]) for d in DIRECTIONS}}
        for rank, (word, _) in enumerate(top, start=1)
    ]


def format_table(rows: list[dict], direction: str) -> str:
    """A plain-text table of :func:`prediction_rows`, the ranking column first.

    Args:
        rows: the rows from :func:`prediction_rows`.
        direction: the direction the rows are ranked by (one of :data:`DIRECTIONS`).

    Returns:
        The table, one line per row under a header line.

    Example:

    ```python
    from elmo_keras.lm.predict import format_table

    table = format_table([{"rank": 1, "word": "of", "forward": 0.5, "backward": 0.25, "both": 0.75}], "both")
    assert table.splitlines()[1].split() == ["1", "of", "0.7500", "0.5000", "0.2500"]
    ```
    """
    columns = [direction, *(d for d in DIRECTIONS if d != direction)]
    width = max([4, *(len(r["word"]) for r in rows)])
    lines = [f"{'rank':>4}  {'word':<{width}}  " + "  ".join(f"{c:>8}" for c in columns)]
    for r in rows:
        lines.append(f"{r['rank']:>4}  {r['word']:<{width}}  " + "  ".join(f"{r[c]:>8.4f}" for c in columns))
    return "\n".join(lines)
