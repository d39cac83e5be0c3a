"""Corpus embedding: the line contract, crash-safe resumable runs, on-disk stores and their reader."""

from elmo_keras.corpus.run import embed_file
from elmo_keras.corpus.store import Embeddings, load_embeddings

__all__ = ["Embeddings", "embed_file", "load_embeddings"]
