"""Keras layers of elmo_keras."""
from elmo_keras.layers.bilm import BiLM
from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.highway import Highway
from elmo_keras.layers.lstm import ProjectedBiLSTM
from elmo_keras.layers.scalar_mix import ScalarMix

__all__ = ["BiLM", "CharCNN", "Highway", "ProjectedBiLSTM", "ScalarMix"]
