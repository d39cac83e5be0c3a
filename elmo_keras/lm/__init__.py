"""Pretraining ELMo biLMs: vocabulary, tf.data pipeline, BiLanguageModel (full / sampled softmax), trainer."""

from elmo_keras.lm.data import lm_dataset, sentences_dataset
from elmo_keras.lm.model import BiLanguageModel, Perplexity
from elmo_keras.lm.train import TRAIN_DEFAULTS, pretrain
from elmo_keras.lm.vocab import Vocabulary

__all__ = [
    "BiLanguageModel",
    "Perplexity",
    "TRAIN_DEFAULTS",
    "Vocabulary",
    "lm_dataset",
    "pretrain",
    "sentences_dataset",
]
