"""The layers on every Keras backend (issue #36): run under the active one (KERAS_BACKEND=jax|torch|tensorflow).

tests/test_backend_subsets.py runs this file under JAX and PyTorch from the normal (TensorFlow) suite. Under
TensorFlow, the reference backend that the rest of the suite covers, it is collected only with
ELMO_KERAS_BACKEND_TESTS=1 (tests/conftest.py).
No TensorFlow-only calls here: the checks read outputs with NumPy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest
from numpy_reference import bilm_sentence

import elmo_keras as ek
from elmo_keras.errors import InputError

BACKEND = keras.backend.backend()
to_numpy = keras.ops.convert_to_numpy  # any backend's tensor (a PyTorch one that requires grad too) -> NumPy
#: the backend on the other side of the cross-backend .keras check (a subprocess loads ours, writes its own)
OTHER = "jax" if BACKEND == "tensorflow" else "tensorflow"

pytestmark = pytest.mark.backend  # not collected on TensorFlow: see conftest.py

SENTENCES = [["The", "bank", "approved", "the", "loan", "."], ["Hi"], ["He", "sat", "by", "the", "river"]]
#: stateless parity with the NumPy reference and across backends (float32; measured below 2e-6)
TOLERANCE = 1e-5
#: the bilm-tf fixture, stateful, as tests/test_parity.py (its upstream tolerance)
STATEFUL_TOLERANCE = 1e-6
#: mixed_bfloat16 against float32, absolute, on brown-small's layers (values within +-3: the LSTM clips there)
BFLOAT16_TOLERANCE = 0.25

# Runs in this process and, on the other backend, in a subprocess (so it holds no pytest or fixture code).
CROSS_BACKEND = textwrap.dedent(
    """
    import json, sys
    import keras
    import numpy as np
    import elmo_keras as ek

    SENTENCES = %r
    TOLERANCE = %r


    def write(folder, backend):
        keras.utils.set_random_seed(0)
        ids = ek.batch_to_ids(SENTENCES)
        char_ids = keras.Input(shape=(None, 50), dtype="int32", name="char_ids")
        elmo = ek.Elmo.from_preset("brown-small", output_mode="elmo", dropout=0.0)
        elmo_model = keras.Model(char_ids, elmo(char_ids))
        classifier = ek.models.text_classifier(
            ek.Elmo.from_preset("brown-small"), num_classes=3, units=3, hidden=4, dropout=0.0, char_ids=True
        )
        outputs = {}
        for name, model in (("elmo", elmo_model), ("classifier", classifier)):
            ek.saving.save_model(model, f"{folder}/{backend}_{name}.keras")
            outputs[name] = keras.ops.convert_to_numpy(model(ids))
        np.savez(f"{folder}/{backend}_outputs.npz", **outputs)


    def check(folder, backend):
        ids = ek.batch_to_ids(SENTENCES)
        expected = np.load(f"{folder}/{backend}_outputs.npz")
        worst = {}
        for name in ("elmo", "classifier"):
            model = keras.models.load_model(f"{folder}/{backend}_{name}.keras")
            got = keras.ops.convert_to_numpy(model(ids))
            assert got.shape == expected[name].shape, (name, got.shape, expected[name].shape)
            worst[name] = float(np.abs(got - expected[name]).max())
        assert max(worst.values()) <= TOLERANCE, f"files from {backend}, max abs differences {worst}"
        return worst


    if __name__ == "__main__":
        folder, theirs, ours = sys.argv[1:]
        print(json.dumps(check(folder, theirs)))
        write(folder, ours)
    """
    % (SENTENCES, TOLERANCE)
)


@pytest.fixture(scope="module")
def elmo():
    """The one preset load of this module (frozen biLM, deterministic: no dropout)."""
    return ek.Elmo.from_preset("brown-small", output_mode="elmo", dropout=0.0)


def cross_backend_namespace() -> dict:
    """The functions of CROSS_BACKEND (``write``, ``check``), run in this process."""
    namespace = {"__name__": "cross_backend"}
    exec(compile(CROSS_BACKEND, "cross_backend.py", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def cross_backend(tmp_path_factory):
    """The max differences of the other backend's files loaded here. With ELMO_KERAS_CROSS_DIR (set by
    tests/test_backend_subsets.py, which wrote TensorFlow's files there and checks ours once this run ends), ours
    are written there; otherwise the other backend runs in a subprocess that checks ours and writes its own."""
    namespace = cross_backend_namespace()
    shared = os.environ.get("ELMO_KERAS_CROSS_DIR")
    if shared:
        namespace["write"](shared, BACKEND)
        return "tensorflow", namespace["check"](shared, "tensorflow")
    folder = tmp_path_factory.mktemp("cross_backend")
    script = folder / "cross_backend.py"
    script.write_text(CROSS_BACKEND)
    namespace["write"](str(folder), BACKEND)
    env = {**os.environ, "KERAS_BACKEND": OTHER, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(script), str(folder), BACKEND, OTHER],
        cwd=Path(__file__).parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{OTHER} subprocess exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    print(f"{BACKEND} files on {OTHER}: {json.loads(done.stdout.strip().splitlines()[-1])}")
    return OTHER, namespace["check"](str(folder), OTHER)


def test_batch_to_ids_feeds_the_bilm_and_matches_the_numpy_reference(elmo):
    bilm = elmo.bilm
    ids = ek.batch_to_ids(SENTENCES)
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int32
    out = bilm(ids)
    arrays = bilm.get_weight_arrays()
    mask = to_numpy(out["mask"])
    np.testing.assert_array_equal(mask, [[True] * 6, [True] + [False] * 5, [True] * 5 + [False]])
    for row, tokens in enumerate(SENTENCES):
        expected = bilm_sentence(tokens, arrays, bilm.options)
        for k, layer in enumerate(out["layers"]):
            got = to_numpy(layer)[row]
            np.testing.assert_allclose(got[: len(tokens)], expected[k], atol=TOLERANCE, err_msg=f"row {row} layer {k}")
            assert (got[len(tokens) :] == 0).all()


def test_stateful_conformance_with_bilm_tf(fixture_dir, fixture_files):
    sentences = json.loads((fixture_dir / "lm_embeddings_sentences.json").read_text())
    with h5py.File(fixture_dir / "lm_embeddings_0.hdf5", "r") as f:
        reference = [f[str(k)][...] for k in range(10)]
    bilm = ek.BiLM.from_pretrained(*fixture_files, stateful=True)
    worst = 0.0
    for k in range(10):
        batch = [sentences[row][k].split() for row in range(3)]
        top = to_numpy(bilm(ek.batch_to_ids(batch))["layers"][-1])[0, : len(batch[0])]
        p = top.shape[-1] // 2
        worst = max(worst, float(np.abs(np.stack([top[:, :p], top[:, p:]]) - reference[k]).max()))
    assert worst <= STATEFUL_TOLERANCE, f"max abs difference {worst:.2e} > {STATEFUL_TOLERANCE}"
    with pytest.raises(InputError, match="max_batch_size=2"):
        ek.BiLM.from_pretrained(*fixture_files, stateful=True, max_batch_size=2)(ek.batch_to_ids([["a"]] * 3))


def compiled(layer, *args, **kwargs):
    """``layer`` called on ``args``: through ``jax.jit`` on JAX (op by op, JAX compiles every op of every call),
    as it is elsewhere."""
    if BACKEND != "jax":
        return layer(*args, **kwargs)
    import jax

    if not layer.built:
        layer.build(None)
    function = jax.jit(lambda t, n, *a: layer.stateless_call(t, n, *a, **kwargs)[0])
    return function(
        [v.value for v in layer.trainable_variables], [v.value for v in layer.non_trainable_variables], *args
    )


def test_each_layer_runs_and_ignores_padding():
    """Every layer on this backend; what sits at padded positions changes nothing at the real ones."""
    rng = np.random.default_rng(0)
    ids = ek.batch_to_ids([["a", "long", "row", "of", "tokens"], ["short", "row"]])
    mask = to_numpy(ids).any(-1)
    cnn = ek.CharCNN([[1, 4], [2, 8]], char_embed_dim=4, num_highway_layers=1, projection_dim=8)
    vectors = to_numpy(cnn(ids))
    np.testing.assert_array_equal(to_numpy(cnn.compute_mask(ids)), mask)
    assert to_numpy(ek.Highway(2)(vectors)).shape == (2, 5, 8)
    noisy = vectors.copy()
    noisy[1, 2:] = rng.standard_normal((3, 8))  # padded positions: anything
    for encoder, kwargs in (
        (
            ek.ProjectedBiLSTM(2, 6, 8, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True),
            {"return_final_state": False},
        ),
        (ek.BiTransformer(2, 8, num_heads=2, ff_dim=8), {}),
        (ek.BiGatedCNN(2, 8, kernel_size=3, layer_norm=True), {}),
    ):
        both = [compiled(encoder, x, mask, **kwargs) for x in (vectors, noisy)]
        both = [out[0] if isinstance(encoder, ek.ProjectedBiLSTM) else out for out in both]
        for layer, layer_noisy in zip(*both):
            layer, layer_noisy = to_numpy(layer), to_numpy(layer_noisy)
            assert layer.shape == (2, 5, 16) and (layer_noisy[1, 2:] == 0).all(), type(encoder).__name__
            np.testing.assert_allclose(layer_noisy, layer, atol=TOLERANCE, err_msg=type(encoder).__name__)
    layers = [rng.standard_normal((2, 5, 4)).astype("float32") for _ in range(3)]
    mixed = to_numpy(ek.ScalarMix(3, do_layer_norm=True)(layers, mask=mask))
    assert mixed.shape == (2, 5, 4) and np.isfinite(mixed).all()
    assert to_numpy(ek.LayerFusion(hidden=6)(layers, mask=mask)).shape[:2] == (2, 5)
    pooled = to_numpy(ek.MaskedPooling(("max", "mean"))(layers[0], mask=mask))
    np.testing.assert_allclose(pooled[1, 4:], layers[0][1, :2].mean(0), atol=1e-6)


def test_elmo_mask_reaches_a_bidirectional_gru(elmo):
    char_ids = keras.Input(shape=(None, 50), dtype="int32")
    keras.utils.set_random_seed(1)
    bigru = keras.layers.Bidirectional(keras.layers.GRU(3))
    model = keras.Model(char_ids, bigru(elmo(char_ids)))
    ids = ek.batch_to_ids(SENTENCES[:2])  # row 1: one token, five padding tokens
    got = model.predict(ids, verbose=0)[1]
    alone = to_numpy(bigru(elmo(ids)[1:2, :1]))[0]  # the GRU on the real token only
    np.testing.assert_allclose(got, alone, atol=TOLERANCE)
    np.testing.assert_array_equal(to_numpy(elmo.compute_mask(ek.batch_to_ids(SENTENCES))).sum(1), [6, 1, 5])


def test_keras_files_load_across_backends(cross_backend):
    other, worst = cross_backend  # check() asserts the tolerance
    print(f"{other} files on {BACKEND}: max abs differences {worst}")


@pytest.mark.parametrize("kind", ["classifier", "tagger"])
def test_heads_fit_on_char_ids(elmo, kind):
    keras.utils.set_random_seed(0)
    ids = ek.batch_to_ids([["good", "film"], ["bad", "plot", "here"], ["great"], ["awful", "!"]])
    if kind == "classifier":
        model = ek.models.text_classifier(elmo, num_classes=2, units=4, hidden=4, dropout=0.0, learning_rate=0.01)
        labels = np.array([1, 0, 1, 0])
    else:
        model = ek.models.sequence_tagger(elmo, num_tags=3, units=4, hidden=4, mix="mlp", dropout=0.0)
        model.optimizer.learning_rate.assign(0.01)
        labels = np.array([[1, 2, 0], [0, 2, 1], [1, 0, 0], [0, 2, 0]])
    losses = model.fit(ids, labels, epochs=4, batch_size=4, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


def test_mixed_bfloat16_runs(elmo):
    ids = ek.batch_to_ids(SENTENCES)
    full = elmo.bilm(ids)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        bilm = ek.BiLM.from_preset("brown-small")
        out = bilm(ids)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert keras.backend.standardize_dtype(out["layers"][-1].dtype) == "bfloat16"
    worst = max(
        float(np.abs(to_numpy(keras.ops.cast(a, "float32")) - to_numpy(b)).max())
        for a, b in zip(out["layers"], full["layers"])
    )
    assert worst <= BFLOAT16_TOLERANCE, worst


def test_bad_input_is_named(elmo):
    bilm = elmo.bilm
    ids = ek.batch_to_ids([["a", "b"]])
    ids[0, 1, 3] = 400
    with pytest.raises(InputError, match="row 0, token 1 has id 400"):
        bilm(ids)
    with pytest.raises(InputError, match="integers"):
        bilm(np.zeros((1, 2, 50), "float32"))
    if BACKEND != "tensorflow":
        with pytest.raises(InputError, match="TensorFlow backend"):
            ek.Elmo(bilm=bilm)(["The bank"])
