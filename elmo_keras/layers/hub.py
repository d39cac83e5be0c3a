"""HubElmo: a TF Hub ELMo module (TF1 Hub format, or one written by export_hub_module) as a Keras 3 layer."""

from __future__ import annotations

import os
import re

import keras
import tensorflow as tf

from elmo_keras.io.hub_module import load_module, signature_function
from elmo_keras.saving import serializable
from elmo_keras.text import split_on_spaces
from elmo_keras.utils.backend import require_tensorflow


@serializable
class HubElmo(keras.layers.Layer):
    """A TF Hub ELMo module (e.g. google/elmo/3, or one written by ``export_hub_module``) as a Keras 3 layer.

    Args:
        handle: what ``tensorflow_hub.load`` takes: a module folder, a tfhub.dev / Kaggle model URL, or the URL of
            a ``.tar.gz`` module (downloaded once into TF Hub's cache, ``TFHUB_CACHE_DIR``; a cached module loads
            offline). ``.keras`` files store the handle: a folder must exist where a model is loaded, a URL is
            fetched there (or found in the cache).
        signature: `"default"` (sentences, split by the module on single spaces) or `"tokens"` (padded tokens).
            Defaults to `"default"`.
        output_key: one of the module's outputs (`"word_emb"`, `"lstm_outputs1"`, `"lstm_outputs2"`, `"elmo"`,
            `"default"`), or `"layers"` for the list a :class:`elmo_keras.ScalarMix` mixes. Defaults to `"elmo"`.
        **kwargs: base layer keyword arguments, such as `name`.

    Call arguments:
        inputs: with ``signature="default"``, sentences string [B]; with ``signature="tokens"``, padded tokens
            string [B, T] ("" after the real tokens) or a dict ``{"tokens": [B, T], "sequence_len": int32 [B]}``.

    Returns:
        By ``output_key`` (P = the module's word_emb width): ``word_emb`` [B, T, P]; ``lstm_outputs1``,
        ``lstm_outputs2``, ``elmo`` [B, T, 2P]; ``default`` [B, 2P] (mean of elmo over the tokens);
        ``"layers"``: [word_emb twice, lstm_outputs1, lstm_outputs2], each [B, T, 2P]. Token outputs carry
        their Keras mask (``compute_mask``, counted as the module counts tokens).

    The layer has no weights: the module is frozen and no gradient flows into it (TF1 modules cannot give
    one in TF2); train a ScalarMix on ``"layers"``, or convert with ``Elmo.from_hub`` to fine-tune.

    Example (a module written here from the bundled preset; a downloaded google/elmo/3 folder works the same):

    ```python
    import tempfile
    import tensorflow as tf
    import elmo_keras as ek

    folder = tempfile.mkdtemp() + "/elmo_module"
    ek.export_hub_module(ek.Elmo.from_preset("brown-small"), folder)
    layer = ek.HubElmo(folder, output_key="elmo")
    vectors = layer(tf.constant(["The bank approved the loan .", "Hi"]))
    assert vectors.shape[:2] == (2, 6)
    ```
    """

    def __init__(self, handle: str | os.PathLike, signature: str = "default", output_key: str = "elmo", **kwargs):
        require_tensorflow("HubElmo", "convert the module to native layers with ek.Elmo.from_hub(path)")
        super().__init__(**kwargs)
        self.handle = os.fspath(handle)
        self.signature = signature
        self.output_key = output_key
        self._module = load_module(self.handle)
        self._fn, self._input_keys = signature_function(self._module, self.handle, signature)
        outputs = self._fn.structured_outputs
        self._lstm_keys = sorted(
            (k for k in outputs if re.fullmatch(r"lstm_outputs\d+", k)), key=lambda k: int(k[len("lstm_outputs") :])
        )
        valid = [k for k in outputs if k != "sequence_len"] + ["layers"]
        if output_key not in valid:
            raise ValueError(
                f"output_key must be one of {valid} (outputs of module {self.handle!r}), got {output_key!r}"
            )
        self._dims = None

    def with_signature(self, signature: str) -> "HubElmo":
        """This layer over the module's ``signature`` (itself if it uses that one already; the loaded module is
        shared). ``models.text_classifier`` and ``sequence_tagger`` feed padded tokens: they take
        ``with_signature("tokens")``.

        Args:
            signature: ``"default"`` (sentences) or ``"tokens"`` (padded tokens).

        Returns:
            A :class:`HubElmo`.
        """
        if signature == self.signature:
            return self
        return HubElmo.from_config({**self.get_config(), "signature": signature})

    def _module_inputs(self, inputs) -> dict:
        """Layer inputs -> the signature's keyword arguments (shapes checked)."""
        if self.signature == "default":
            sentences = tf.convert_to_tensor(inputs, tf.string)
            if sentences.shape.rank != 1:
                raise ValueError(f"signature 'default' takes sentences, string [batch]; got shape {sentences.shape}")
            return {self._input_keys[0]: sentences}
        if isinstance(inputs, dict):
            tokens, lengths = inputs["tokens"], tf.cast(inputs["sequence_len"], tf.int32)
        else:
            tokens = tf.convert_to_tensor(inputs, tf.string)
            lengths = tf.reduce_sum(tf.cast(tf.strings.length(tokens) > 0, tf.int32), axis=-1)
        if tokens.shape.rank != 2:
            raise ValueError(f"signature 'tokens' takes padded tokens, string [batch, max_len]; got {tokens.shape}")
        return {"tokens": tf.convert_to_tensor(tokens, tf.string), "sequence_len": lengths}

    def _call_module(self, inputs) -> dict:
        return self._fn(**self._module_inputs(inputs))

    def call(self, inputs):
        out = {k: tf.stop_gradient(v) for k, v in self._call_module(inputs).items()}
        word_emb = out["word_emb"]
        if self.output_key == "layers":
            result = [tf.concat([word_emb, word_emb], axis=-1)] + [out[k] for k in self._lstm_keys]
        else:
            result = [out[self.output_key]]
        result = [tf.cast(t, self.compute_dtype) for t in result]
        return result if self.output_key == "layers" else result[0]

    def compute_mask(self, inputs, mask=None):
        """The token mask bool [B, T] of token outputs (one per layer for "layers"), computed as the module
        counts tokens: single-space split for "default", ``sequence_len`` for "tokens"."""
        if self.output_key == "default" or keras.backend.is_keras_tensor(
            inputs["tokens"] if isinstance(inputs, dict) else inputs
        ):
            return None  # pooled output; or a symbolic call (a functional model computes it when it runs)
        module_inputs = self._module_inputs(inputs)
        if self.signature == "default":
            _, lengths = split_on_spaces(module_inputs[self._input_keys[0]])
            token_mask = tf.sequence_mask(lengths, tf.reduce_max(lengths))
        else:
            token_mask = tf.sequence_mask(module_inputs["sequence_len"], tf.shape(module_inputs["tokens"])[1])
        return [token_mask] * (len(self._lstm_keys) + 1) if self.output_key == "layers" else token_mask

    def output_dims(self) -> dict[str, int]:
        """Last dimension of each output; from the signature, or from one call when it does not say."""
        if self._dims is None:
            dims = {k: spec.shape[-1] for k, spec in self._fn.structured_outputs.items() if k != "sequence_len"}
            if any(d is None for d in dims.values()):
                probe = tf.constant(["a"]) if self.signature == "default" else tf.constant([["a"]])
                dims = {k: v.shape[-1] for k, v in self._call_module(probe).items() if k != "sequence_len"}
            self._dims = dims
        return self._dims

    def compute_output_spec(self, inputs):
        tokens = inputs["tokens"] if isinstance(inputs, dict) else inputs
        batch = tokens.shape[0]
        steps = tokens.shape[1] if len(tokens.shape) == 2 else None
        dims = self.output_dims()
        if self.output_key == "default":
            return keras.KerasTensor((batch, dims["default"]), dtype=self.compute_dtype)
        if self.output_key == "layers":
            widths = [2 * dims["word_emb"]] + [dims[k] for k in self._lstm_keys]
            return [keras.KerasTensor((batch, steps, width), dtype=self.compute_dtype) for width in widths]
        return keras.KerasTensor((batch, steps, dims[self.output_key]), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "handle": self.handle,
            "signature": self.signature,
            "output_key": self.output_key,
        }
