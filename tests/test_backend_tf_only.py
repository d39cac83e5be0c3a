"""The TensorFlow-only parts say so on another Keras backend (run by the JAX and PyTorch subsets, see
test_backend_subsets.py); on TensorFlow they are not refused."""

from __future__ import annotations

import keras
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
