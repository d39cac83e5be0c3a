"""Char ids: NumPy path == in-graph path for any Unicode input; layout facts; errors."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import elmo_keras as ek
from elmo_keras import text

# Tokens: any non-empty text without ASCII whitespace (that would split it), including emoji, combining
# marks, control characters, NUL and very long tokens (> 48 UTF-8 bytes).
token_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\n\v\f\r")
tokens = st.one_of(
    st.text(token_chars, min_size=1, max_size=8),
    st.text(token_chars, min_size=20, max_size=70),
    st.sampled_from(["😀", "e\u0301", "\x00", "\x07", "\u200b", "日本語", "a" * 49, "é" * 30, "\ufeff"]),
)
sentences = st.lists(st.lists(tokens, max_size=6), max_size=5)


def graph_ids_from_tokens(batch):
    padded = tf.ragged.constant(batch, dtype=tf.string).to_tensor("") if batch else tf.zeros((0, 0), tf.string)
    if len(padded.shape) == 1:  # every sentence empty: ragged gives [B, 0]
        padded = tf.reshape(padded, (len(batch), 0))
    return text.tokens_to_char_ids(padded).numpy()


@settings(max_examples=150, deadline=None)
@given(sentences)
def test_numpy_and_graph_ids_agree_on_tokens(batch):
    expected = ek.batch_to_ids(batch)
    assert expected.dtype == np.int32
    np.testing.assert_array_equal(graph_ids_from_tokens(batch), expected)


whitespace = st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\v", "\f", " \t "])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(tokens, max_size=6), whitespace, st.booleans()), max_size=5))
def test_numpy_and_graph_agree_on_raw_sentences(parts):
    raw = [(ws if lead else "") + ws.join(toks) + (ws if lead else "") for toks, ws, lead in parts]
    expected = ek.batch_to_ids([ek.tokenize(s) for s in raw])
    got = text.sentences_to_char_ids(tf.constant(raw, dtype=tf.string)).numpy()
    np.testing.assert_array_equal(got, expected)


def test_layout_of_a_token():
    ids = ek.batch_to_ids([["The", "bank"], ["Hi"]])
    assert ids.shape == (2, 2, 50)
    assert list(ids[0, 0, :6]) == [259, ord("T") + 1, ord("h") + 1, ord("e") + 1, 260, 261]
    assert (ids[0, 0, 5:] == 261).all()  # in-token PAD is a real character (260 + 1)
    assert (ids[1, 1] == 0).all()  # padding token: all zeros


def test_long_token_truncated_to_48_bytes():
    ids = ek.batch_to_ids([["x" * 60]])
    assert (ids[0, 0, 1:49] == ord("x") + 1).all() and ids[0, 0, 49] == 260


def test_multibyte_characters_are_bytes():
    ids = ek.batch_to_ids([["é"]])
    assert list(ids[0, 0, :4]) == [259, 0xC3 + 1, 0xA9 + 1, 260]


def test_empty_batch_and_empty_sentences():
    assert ek.batch_to_ids([]).shape == (0, 0, 50)
    assert ek.batch_to_ids([[], []]).shape == (2, 0, 50)
    assert text.sentences_to_char_ids(tf.constant([], tf.string)).shape == (0, 0, 50)
    assert text.sentences_to_char_ids(tf.constant(["", "  "])).shape == (2, 0, 50)


def test_boundary_ids():
    bos, eos = text.boundary_char_ids()
    assert list(bos[:4]) == [259, 257, 260, 261] and list(eos[:4]) == [259, 258, 260, 261]


def test_tokenize_matches_tf_split_not_unicode_split():
    s = "a\u00a0b\u3000c  d\te"
    assert ek.tokenize(s) == ["a\u00a0b\u3000c", "d", "e"]
    assert [t.decode() for t in tf.strings.split(tf.constant([s])).to_list()[0]] == ek.tokenize(s)


@pytest.mark.parametrize(
    "bad, err, words",
    [
        ("a sentence", TypeError, "list of token lists"),
        (["a sentence"], TypeError, "tokenize"),
        ([["ok", ""]], ValueError, "empty string"),
        ([["ok", 3]], TypeError, "must be str"),
        ([[b"\xff\xfe"]], ValueError, "not valid UTF-8"),
        ([["\ud800"]], ValueError, "surrogate"),
    ],
)
def test_bad_input_errors(bad, err, words):
    with pytest.raises(err, match=words):
        ek.batch_to_ids(bad)


def test_graph_rejects_invalid_utf8():
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        text.tokens_to_char_ids(tf.constant([[b"ok", b"\xff"]]))


def test_graph_rejects_wrong_rank():
    with pytest.raises(ValueError, match="1-D"):
        text.split_sentences(tf.constant([["a"]]))
