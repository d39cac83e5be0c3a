import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "bilm-tf" / "model"

# The checks written for the other Keras backends run there (tests/test_backend_subsets.py starts them under JAX
# and PyTorch); on TensorFlow, the reference backend that the rest of the suite covers, they are not collected
# (ELMO_KERAS_BACKEND_TESTS=1 collects them anyway).
OTHER_BACKEND_FILES = ["test_backends.py", "test_backend_tf_only.py"]
ON_TENSORFLOW = os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow"
collect_ignore = OTHER_BACKEND_FILES if ON_TENSORFLOW and os.environ.get("ELMO_KERAS_BACKEND_TESTS") != "1" else []


@pytest.fixture(scope="session", autouse=True)
def cpu_without_bf16_units():
    """Tests run as on a CPU without bf16 matrix units, so dtype "auto" (the default) is float32 and results are
    exact on any machine; tests/test_embed.py checks the choice itself with given flags. Subprocesses are not
    patched: pass --dtype float32 to them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("elmo_keras.cpu.cpu_flags", lambda path="/proc/cpuinfo": frozenset())
        yield


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURE


@pytest.fixture(scope="session")
def fixture_options() -> dict:
    return json.loads((FIXTURE / "options.json").read_text())


@pytest.fixture(scope="session")
def fixture_files() -> tuple[str, str]:
    return str(FIXTURE / "options.json"), str(FIXTURE / "lm_weights.hdf5")


@pytest.fixture(scope="session")
def embedder(fixture_files):
    """An ElmoEmbedder over the fixture model (its token cache is exact, so tests may share it)."""
    import elmo_keras as ek

    return ek.ElmoEmbedder(*fixture_files)


@pytest.fixture(scope="module")
def random_elmo(fixture_options):
    """An Elmo of the fixture architecture with random weights large enough that the words' vectors differ
    clearly (the fixture's own weights give nearly constant vectors, which makes learning tests slow)."""
    from elmo_keras.options import load_options
    from elmo_keras.weights import random_weights

    import elmo_keras as ek

    layer = ek.Elmo(fixture_options)
    layer.build()
    layer.bilm.set_weight_arrays(random_weights(load_options(fixture_options), seed=0, scale=0.3))
    return layer


@pytest.fixture()
def skip_options() -> dict:
    """A tiny architecture with what the fixture lacks: skip connections, tanh, one highway, 3 layers."""
    return {
        "lstm": {
            "cell_clip": 3,
            "use_skip_connections": True,
            "n_layers": 3,
            "proj_clip": 3,
            "projection_dim": 8,
            "dim": 12,
        },
        "char_cnn": {
            "embedding": {"dim": 4},
            "filters": [[1, 4], [2, 6], [3, 6]],
            "n_highway": 1,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "tanh",
        },
    }


@pytest.fixture(autouse=True)
def _fixed_seed():
    """Every test starts from the same Python/NumPy/Keras seeds, so learning tests are not flaky."""
    import keras

    keras.utils.set_random_seed(0)
