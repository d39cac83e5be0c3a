"""Corpus embedding on the active backend (run under JAX and PyTorch by tests/test_backend_subsets.py): the
``ElmoEmbedder`` against the NumPy reference, pooled vectors, and ``elmo-keras embed`` read back by
``ek.load_embeddings``."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from numpy_reference import bilm_sentence

import elmo_keras as ek
from elmo_keras.cli import main

pytestmark = pytest.mark.backend
#: stateless parity with the NumPy reference on every backend (float32)
TOLERANCE = 1e-5
SENTENCES = [["The", "bank", "approved", "the", "loan", "."], ["Hi"], [], ["He", "sat", "by", "the", "river"]]


@pytest.fixture(scope="module")
def embedder():
    return ek.ElmoEmbedder.from_preset("brown-small", dtype="float32", vocab_cache_size=50)


def test_embedder_matches_the_numpy_reference(embedder):
    arrays = embedder.bilm.get_weight_arrays()
    embedded = list(embedder.embed_sentences(SENTENCES, batch_size=3))  # batches of unequal lengths, padded
    lone = embedder.embed_sentence(["Unseen", "words", "alone"])  # a batch of one with new words
    for tokens, got in zip([*SENTENCES, ["Unseen", "words", "alone"]], [*embedded, lone]):
        assert got.shape == (3, len(tokens), 256) and got.dtype == np.float32
        if tokens:
            expected = np.stack(bilm_sentence(tokens, arrays, embedder.bilm.options))
            np.testing.assert_allclose(got, expected, atol=TOLERANCE, err_msg=f"{keras.backend.backend()}: {tokens}")


def test_pooled_vectors_are_means_of_the_token_vectors(embedder):
    tokens = list(embedder.embed_sentences(SENTENCES))
    pooled = list(embedder.embed_sentences(SENTENCES, pool=["mean", "max"]))
    for token_vectors, vector in zip(tokens, pooled):
        assert vector.shape == (3, 512) and np.isfinite(vector).all()
        if token_vectors.shape[1]:
            expected = np.concatenate([token_vectors.mean(axis=1), token_vectors.max(axis=1)], axis=-1)
            np.testing.assert_allclose(vector, expected, atol=1e-6)
        else:
            assert not vector.any()  # an empty sentence: zeros, never NaN


def test_embed_command_writes_what_load_embeddings_reads(tmp_path, embedder):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(" ".join(tokens) for tokens in SENTENCES) + "\n", encoding="utf-8")
    assert main(["embed", str(source), str(tmp_path / "out.hdf5"), "--preset", "brown-small", "--layers", "top"]) == 0
    stored = ek.load_embeddings(tmp_path / "out.hdf5")
    assert len(stored) == len(SENTENCES)
    for row, tokens in enumerate(SENTENCES):
        expected = next(iter(embedder.embed_sentences([tokens])))[-1]
        np.testing.assert_allclose(stored[row], expected, atol=TOLERANCE)
