"""The TensorFlow-only parts say so on another Keras backend (run by the JAX and PyTorch subsets, see
test_backend_subsets.py); on TensorFlow they are not refused."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras.utils.backend import BackendUnsupported, require_tensorflow

pytestmark = pytest.mark.backend
BACKEND = keras.backend.backend()
on_other_backends = pytest.mark.skipif(BACKEND == "tensorflow", reason="the refusal is for JAX and PyTorch")


def test_require_tensorflow_passes_on_tensorflow_only():
    if BACKEND == "tensorflow":
        assert require_tensorflow("x") is None
    else:
        with pytest.raises(BackendUnsupported, match=f"x needs the TensorFlow backend.*KERAS_BACKEND={BACKEND}"):
            require_tensorflow("x")


@on_other_backends
def test_hub_layer_is_refused_with_the_way_out(tmp_path):
    with pytest.raises(BackendUnsupported, match=r"HubElmo needs the TensorFlow backend.*ek\.Elmo\.from_hub"):
        ek.HubElmo(str(tmp_path))


@on_other_backends
@pytest.mark.parametrize("export", ["export_serving", "export_hub_module"])
def test_exports_are_refused(tmp_path, export):
    elmo = ek.Elmo.from_preset("brown-small")
    with pytest.raises(BackendUnsupported, match=f"{export} needs the TensorFlow backend"):
        getattr(ek, export)(elmo, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not os.environ.get("ELMO_KERAS_CROSS_DIR"), reason="test_backend_subsets.py writes the module")
def test_a_hub_module_converts_to_native_layers_on_any_backend():
    """TensorFlow (always installed) reads the module's variables; the layers then run on this backend."""
    module = os.path.join(os.environ["ELMO_KERAS_CROSS_DIR"], "hub_module")  # exported from brown-small
    ids = ek.batch_to_ids([["The", "bank", "approved", "the", "loan", "."], ["Hi"]])
    converted = ek.Elmo.from_hub(module, boundaries="add", output_mode="elmo")(ids)
    expected = ek.Elmo.from_preset("brown-small", output_mode="elmo")(ids)
    diff = np.abs(keras.ops.convert_to_numpy(converted) - keras.ops.convert_to_numpy(expected)).max()
    assert diff <= 1e-5, diff
