"""elmo_keras: ELMo as Keras 3 layers."""
from elmo_keras.elmo import Elmo
from elmo_keras.layers import BiLM, CharCNN, Highway, ProjectedBiLSTM, ScalarMix
from elmo_keras.options import RELEASED_OPTIONS, load_options
from elmo_keras.text import batch_to_ids, tokenize
from elmo_keras.weights import save_weights_hdf5

__version__ = "0.1.0"

__all__ = ["BiLM", "CharCNN", "Elmo", "Highway", "ProjectedBiLSTM", "RELEASED_OPTIONS", "ScalarMix",
           "batch_to_ids", "load_options", "save_weights_hdf5", "tokenize", "__version__"]
