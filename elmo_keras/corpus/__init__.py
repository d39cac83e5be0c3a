"""Corpus embedding: the line contract, crash-safe resumable runs, on-disk stores and their reader."""

from elmo_keras.corpus.readers import Embeddings, load_embeddings
from elmo_keras.corpus.run import embed_file

__all__ = ["Embeddings", "embed_file", "load_embeddings"]
