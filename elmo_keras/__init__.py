"""elmo_keras: ELMo as Keras 3 layers. The public face (``ek.*``): re-exports and ``__version__`` only.

The package is cut by role (see DESIGN.md): ``utils/`` (files, locks, CPU), ``io/`` (options, weights, downloads,
TF Hub modules), ``presets/``, ``layers/``, ``elmo.py``, ``embed.py`` + ``corpus/`` (embedding text and files),
``tasks/`` (classifiers, metrics, baselines, datasets), ``lm/`` (pretraining), ``export/`` (serving, TF Hub),
``cli.py``. The first generation's module paths (``elmo_keras.options``, ``elmo_keras.models``, ...) still import.
"""

from elmo_keras.utils import aliases

aliases.install()

from elmo_keras import lm, presets, saving  # noqa: E402
from elmo_keras.corpus import embed_file, load_embeddings  # noqa: E402
from elmo_keras.elmo import Elmo  # noqa: E402
from elmo_keras.embed import ElmoEmbedder  # noqa: E402
from elmo_keras.export import export_hub_module, export_serving  # noqa: E402
from elmo_keras.io.options import RELEASED_OPTIONS, load_options  # noqa: E402
from elmo_keras.io.weights import save_weights_hdf5  # noqa: E402
from elmo_keras.layers import (  # noqa: E402
    BiGatedCNN,
    BiLM,
    BiTransformer,
    CharCNN,
    Highway,
    HubElmo,
    LayerConcat,
    LayerFusion,
    MaskedPooling,
    ProjectedBiLSTM,
    ScalarMix,
    SegmentedEncoder,
    StaticEmbedding,
)
from elmo_keras.presets import list_presets  # noqa: E402
from elmo_keras.tasks import callbacks, datasets, metrics, models  # noqa: E402
from elmo_keras.text import batch_to_ids, tokenize  # noqa: E402

__version__ = "0.1.0"


def __getattr__(name: str):
    """``ek.options``, ``ek.weights``, ...: the first generation's module attributes, served by the moved modules."""
    if f"elmo_keras.{name}" in aliases.MOVED:
        import importlib

        return importlib.import_module(f"elmo_keras.{name}")
    raise AttributeError(f"module 'elmo_keras' has no attribute {name!r}")


__all__ = [
    "BiGatedCNN",
    "BiLM",
    "BiTransformer",
    "CharCNN",
    "Elmo",
    "ElmoEmbedder",
    "Highway",
    "HubElmo",
    "LayerConcat",
    "LayerFusion",
    "MaskedPooling",
    "ProjectedBiLSTM",
    "RELEASED_OPTIONS",
    "ScalarMix",
    "SegmentedEncoder",
    "StaticEmbedding",
    "batch_to_ids",
    "callbacks",
    "datasets",
    "embed_file",
    "export_hub_module",
    "export_serving",
    "list_presets",
    "load_embeddings",
    "load_options",
    "lm",
    "metrics",
    "models",
    "presets",
    "save_weights_hdf5",
    "saving",
    "tokenize",
    "__version__",
]
