"""Keras layers of elmo_keras."""

from elmo_keras.layers.bilm import BiLM
from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.fusion import MIX_MODES, LayerConcat, LayerFusion, StackLayers, UnstackLayers, make_layer_mixer
from elmo_keras.layers.gated_cnn import BiGatedCNN
from elmo_keras.layers.highway import Highway
from elmo_keras.layers.hub import HubElmo
from elmo_keras.layers.lstm import ProjectedBiLSTM
from elmo_keras.layers.pooling import MaskedPooling
from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.layers.segments import SegmentedEncoder
from elmo_keras.layers.static import StaticEmbedding
from elmo_keras.layers.transformer import BiTransformer

__all__ = [
    "BiGatedCNN",
    "BiLM",
    "BiTransformer",
    "CharCNN",
    "Highway",
    "HubElmo",
    "LayerConcat",
    "LayerFusion",
    "MIX_MODES",
    "MaskedPooling",
    "ProjectedBiLSTM",
    "ScalarMix",
    "SegmentedEncoder",
    "StackLayers",
    "StaticEmbedding",
    "UnstackLayers",
    "make_layer_mixer",
]
