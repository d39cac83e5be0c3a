"""The names ``elmo_keras.corpus.store`` held before it was split by concept; new code imports from the modules:

* :mod:`elmo_keras.corpus.layout`: the run folder's format (shard files, records, manifest) and committing;
* :mod:`elmo_keras.corpus.readers`: :func:`load_embeddings` and the :class:`Embeddings` classes;
* :mod:`elmo_keras.corpus.assembly`: the hdf5 and npy output builders (:func:`make_assembly`);
* :mod:`elmo_keras.corpus.direct_io`: HDF5 raw data written by :class:`RawWriter`, past the page cache.
"""

from elmo_keras.corpus.assembly import Assembly, HDF5Assembly, NpyAssembly, adjacent_runs, make_assembly
from elmo_keras.corpus.direct_io import Scratch, allocate_dataset, drop_cached, raw_data_creation
from elmo_keras.corpus.layout import (
    FORMAT_NAME,
    FORMAT_VERSION,
    IDENTITY,
    LAYER_CHOICES,
    MANIFEST,
    STORAGE_DTYPES,
    commit_shard_file,
    committed_forms,
    is_committed,
    manifest_differences,
    read_manifest,
    read_record,
    read_recorded_lines,
    record_is_complete,
    record_name,
    reduce_layers,
    shard_is_complete,
    shard_name,
    token_slice,
    write_shard,
)
from elmo_keras.corpus.readers import Embeddings, HDF5Embeddings, NpyEmbeddings, ShardedEmbeddings, load_embeddings

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "IDENTITY",
    "LAYER_CHOICES",
    "MANIFEST",
    "STORAGE_DTYPES",
    "Assembly",
    "Embeddings",
    "HDF5Assembly",
    "HDF5Embeddings",
    "NpyAssembly",
    "NpyEmbeddings",
    "Scratch",
    "ShardedEmbeddings",
    "adjacent_runs",
    "allocate_dataset",
    "commit_shard_file",
    "committed_forms",
    "drop_cached",
    "is_committed",
    "load_embeddings",
    "make_assembly",
    "manifest_differences",
    "raw_data_creation",
    "read_manifest",
    "read_record",
    "read_recorded_lines",
    "record_is_complete",
    "record_name",
    "reduce_layers",
    "shard_is_complete",
    "shard_name",
    "token_slice",
    "write_shard",
]
