"""The backend-marked tests under the JAX and PyTorch Keras backends, each in its own process (the backend is fixed
when Keras is imported): tests/test_backends.py (the layers, parity, a fit step, files across backends),
tests/test_backend_tf_only.py (the TensorFlow-only parts refuse clearly), tests/test_backend_text.py (raw
strings through the input pipeline) and tests/test_backend_embed.py (corpus embedding).

The cross-backend ``.keras`` check runs on both sides: this (TensorFlow) process writes its files into a folder that
the subprocess loads and compares, the subprocess writes its own there, and this process loads and compares those.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_backends import cross_backend_namespace

ROOT = Path(__file__).parent.parent
FILES = [
    "tests/test_backends.py",
    "tests/test_backend_tf_only.py",
    "tests/test_backend_text.py",
    "tests/test_backend_embed.py",
]


@pytest.fixture(scope="module")
def tensorflow_files(tmp_path_factory):
    """A folder holding this backend's (TensorFlow's) .keras files and outputs, and the functions that check them."""
    import elmo_keras as ek

    folder = tmp_path_factory.mktemp("cross_backend")
    namespace = cross_backend_namespace()
    namespace["write"](str(folder), "tensorflow")
    ek.export_hub_module(ek.Elmo.from_preset("brown-small"), folder / "hub_module")  # converted there: from_hub
    return folder, namespace


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backend_subset_passes(backend, tensorflow_files):
    folder, namespace = tensorflow_files
    # One thread per process: the suite runs two workers on two cores, and PyTorch's OpenMP threads waiting on a
    # busy core turn each small per-step GEMM of the LSTM loop from microseconds into milliseconds.
    env = {
        **os.environ,
        "KERAS_BACKEND": backend,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "OMP_NUM_THREADS": "1",
        "ELMO_KERAS_CROSS_DIR": str(folder),
    }
    command = ["-m", "pytest", "-o", "addopts=", "-q", "-m", "backend", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, *command, *FILES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"KERAS_BACKEND={backend}: exit {done.returncode}\n{output[-6000:]}"
    assert " passed" in output and " skipped" not in output, output[-2000:]  # every check ran
    worst = namespace["check"](str(folder), backend)  # asserts the tolerance
    print(f"{backend} files on tensorflow: max abs differences {worst}")
