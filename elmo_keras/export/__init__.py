"""Exports: a SavedModel for TensorFlow Serving (raw strings in; :mod:`elmo_keras.export.serving`) and a TF1 Hub
module that looks like Google's ELMo module (:mod:`elmo_keras.export.hub_module`)."""

from elmo_keras.export.hub_module import export_hub_module
from elmo_keras.export.serving import (
    DEFAULT_WARMUP,
    KINDS,
    WARMUP_FILE,
    check_serving,
    export_serving,
    model_kind,
    next_version,
)

__all__ = [
    "DEFAULT_WARMUP",
    "KINDS",
    "WARMUP_FILE",
    "check_serving",
    "export_hub_module",
    "export_serving",
    "model_kind",
    "next_version",
]
