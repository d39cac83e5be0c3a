"""Write our models as TF Hub ELMo modules (TF2 SavedModel, core TF ops only): :func:`export_hub_module`.

The format (signatures, outputs, variable names) is described in :mod:`elmo_keras.io.hub_module`, which reads it;
:func:`elmo_keras.io.hub_module.read_hub_module` recognises our modules by the ``elmo_keras_config`` function.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from elmo_keras.elmo import Elmo
from elmo_keras.io.weights import to_file_layout, variable_map
from elmo_keras.layers.bilm import BiLM
from elmo_keras.text import split_on_spaces, tokens_to_char_ids
from elmo_keras.utils.backend import require_tensorflow
from elmo_keras.utils.files import atomic_dir


# Private TF API, on purpose: a reusable SavedModel needs plain ``variables`` / ``trainable_variables``
# attributes saved with it (TF Hub reads them), and the public ``tf.Module`` makes both read-only properties
# that are not saved. AutoTrackable is what ``tf.saved_model.save`` documents as the root type for this.
class _ExportedElmo(tf.__internal__.tracking.AutoTrackable):
    """What :func:`export_hub_module` saves: a stateless BiLM, hub-style aggregation, and the
    ``variables`` / ``trainable_variables`` attributes of a reusable SavedModel (only the aggregation trains).
    """

    def __init__(self, bilm: BiLM, weights: np.ndarray, scaling: float):
        self.bilm = bilm
        self.aggregation_weights = tf.Variable(weights, dtype=tf.float32, name="aggregation/weights")
        self.aggregation_scaling = tf.Variable([scaling], dtype=tf.float32, name="aggregation/scaling")
        self.trainable_variables = [self.aggregation_weights, self.aggregation_scaling]
        self.variables = [v.value for v in bilm.weights] + self.trainable_variables
        self._config = json.dumps({"options": bilm.options, "add_sentence_boundaries": bilm.add_sentence_boundaries})

    @tf.function(input_signature=[], autograph=False)
    def elmo_keras_config(self):
        """JSON {"options": ..., "add_sentence_boundaries": ...}, read by :func:`read_hub_module`."""
        return tf.constant(self._config)

    @tf.function(input_signature=[], autograph=False)
    def released_weights(self):
        """{released hdf5 dataset name: tensor}, the same arrays as ``BiLM.get_weight_arrays()``."""
        out = {}
        for name, (variable, index) in variable_map(self.bilm).items():
            value = tf.convert_to_tensor(variable)
            out[name] = to_file_layout(name, value if index is None else value[index])
        return out

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def default(self, default):
        tokens, lengths = split_on_spaces(default)
        return self.outputs(tokens, lengths)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.string, name="tokens"),
            tf.TensorSpec([None], tf.int32, name="sequence_len"),
        ],
        autograph=False,
    )
    def tokens(self, tokens, sequence_len):
        return self.outputs(tokens, sequence_len)

    def outputs(self, tokens, sequence_len):
        """The module's output dict for tokens [B, T] with real lengths [B]."""
        real = tf.sequence_mask(sequence_len, tf.shape(tokens)[1])
        ids = tokens_to_char_ids(tf.where(real, tokens, ""), self.bilm.max_characters_per_token)
        out = self.bilm(ids)
        layers = out["layers"]
        lengths = tf.reduce_sum(tf.cast(out["mask"], tf.int32), axis=1)
        mix = tf.nn.softmax(self.aggregation_weights + 1.0 / len(layers))
        elmo = self.aggregation_scaling[0] * tf.add_n([mix[k] * layer for k, layer in enumerate(layers)])
        result = {
            "word_emb": layers[0][..., : self.bilm.projection_dim],
            "elmo": elmo,
            "default": tf.math.divide_no_nan(tf.reduce_sum(elmo, axis=1), tf.cast(lengths, elmo.dtype)[:, None]),
            "sequence_len": lengths,
        }
        result.update({f"lstm_outputs{k}": layers[k] for k in range(1, len(layers))})
        return result


def _hub_aggregation(model: BiLM | Elmo) -> tuple[np.ndarray, float]:
    """(aggregation/weights, scaling) reproducing an Elmo's first mix (a BiLM: the plain layer average)."""
    mixes = getattr(model, "mixes", None)
    if not mixes:
        return np.zeros(model.n_layers + 1, np.float32), 1.0
    mix = mixes[0]
    if mix.do_layer_norm:
        raise ValueError("a ScalarMix with do_layer_norm=True cannot be written in the TF Hub format")
    gamma = float(np.asarray(mix.gamma)[0])
    n = mix.num_layers
    if mix.mix_weights is None:
        return np.asarray(mix.logits, np.float32) - np.float32(1.0 / n), gamma
    fixed = np.asarray(mix.mix_weights, np.float64)
    if np.any(fixed <= 0):
        raise ValueError(
            f"fixed mix weights {mix.mix_weights} are not all positive: the TF Hub format "
            "(softmax weights times a scale) cannot express them"
        )
    return (np.log(fixed / fixed.sum()) - 1.0 / n).astype(np.float32), gamma * float(fixed.sum())


def export_hub_module(model: Elmo | BiLM, path: str | os.PathLike, overwrite: bool = False) -> None:
    """Write ``model`` as a TF2 SavedModel with the TF Hub ELMo signatures and outputs (see module doc).

    An ``Elmo`` exports its BiLM and its first ScalarMix (as ``aggregation/weights`` and ``scaling``); a
    ``BiLM`` exports the plain layer average. The exported BiLM is stateless and keeps the model's
    ``add_sentence_boundaries``. The folder is written next to ``path`` and renamed into place.

    Args:
        model: a built ``Elmo`` or ``BiLM``.
        path: the folder to write.
        overwrite: replace an existing ``path`` (else FileExistsError).

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek

    folder = os.path.join(tempfile.mkdtemp(), "elmo_module")
    ek.export_hub_module(ek.Elmo.from_preset("brown-small"), folder)
    assert os.path.exists(os.path.join(folder, "saved_model.pb"))
    ```
    """
    require_tensorflow("export_hub_module")
    source = getattr(model, "bilm", model)
    if not isinstance(source, BiLM):
        raise TypeError(f"export_hub_module() takes an Elmo or a BiLM, got {type(model).__name__}")
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path!r} exists; pass overwrite=True to replace it")
    if not source.built:
        raise ValueError("the model is not built: load weights into it (e.g. from_pretrained) first")
    weights, scaling = _hub_aggregation(model)
    bilm = BiLM.from_weights(
        source.options, source.get_weight_arrays(), add_sentence_boundaries=source.add_sentence_boundaries, name="bilm"
    )
    module = _ExportedElmo(bilm, weights, scaling)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic_dir(path) as tmp:
        tf.saved_model.save(
            module,
            tmp,
            signatures={
                "default": module.default.get_concrete_function(),
                "tokens": module.tokens.get_concrete_function(),
            },
        )
