"""elmo_keras: ELMo as Keras 3 layers."""
from elmo_keras import callbacks, datasets, metrics, models, saving
from elmo_keras.corpus import embed_file, load_embeddings
from elmo_keras.elmo import Elmo
from elmo_keras.embed import ElmoEmbedder
from elmo_keras.export import export_serving
from elmo_keras.hub_export import export_hub_module
from elmo_keras.layers import (BiGatedCNN, BiLM, BiTransformer, CharCNN, Highway, HubElmo, LayerConcat, LayerFusion,
                               MaskedPooling, ProjectedBiLSTM, ScalarMix, SegmentedEncoder, StaticEmbedding)
from elmo_keras.options import RELEASED_OPTIONS, load_options
from elmo_keras.presets import list_presets
from elmo_keras.text import batch_to_ids, tokenize
from elmo_keras.weights import save_weights_hdf5
from elmo_keras import lm, presets  # noqa: E402  (pretraining; shipped presets)

__version__ = "0.1.0"

__all__ = ["BiGatedCNN", "BiLM", "BiTransformer", "CharCNN", "Elmo", "ElmoEmbedder", "Highway", "HubElmo",
           "LayerConcat", "LayerFusion", "MaskedPooling", "ProjectedBiLSTM", "RELEASED_OPTIONS", "ScalarMix", "SegmentedEncoder", "StaticEmbedding",
           "batch_to_ids", "callbacks", "datasets", "embed_file", "export_hub_module", "export_serving",
           "list_presets", "load_embeddings", "load_options", "lm", "metrics", "models", "presets",
           "save_weights_hdf5", "saving", "tokenize", "__version__"]
