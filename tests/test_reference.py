"""The Keras layers against an independent NumPy implementation (tests/numpy_reference.py)."""

import numpy as np
import pytest
from elmo_keras.weights import random_weights, write_weights_hdf5
from numpy_reference import bilm_sentence, scalar_mix

import elmo_keras as ek

SENTENCES = [["The", "bank", "approved", "the", "loan", "."], ["Hi"], ["Ünïcode", "😀", "x" * 60, "end"]]


@pytest.fixture()
def skip_model(tmp_path, skip_options):
    arrays = random_weights(skip_options, seed=3, scale=0.5)
    path = tmp_path / "w.hdf5"
    write_weights_hdf5(arrays, path)
    return ek.BiLM.from_pretrained(skip_options, path), arrays


@pytest.mark.parametrize("boundaries", [True, False])
def test_bilm_matches_numpy_reference_with_skip_connections_and_padding(skip_model, skip_options, boundaries):
    _, arrays = skip_model
    bilm = ek.BiLM(skip_options, add_sentence_boundaries=boundaries)
    bilm.build()
    bilm.set_weight_arrays(arrays)
    out = bilm(ek.batch_to_ids(SENTENCES))
    assert len(out["layers"]) == skip_options["lstm"]["n_layers"] + 1
    for row, tokens in enumerate(SENTENCES):
        expected = bilm_sentence(tokens, arrays, skip_options, boundaries=boundaries)
        for k, layer in enumerate(out["layers"]):
            got = np.asarray(layer)[row]
            np.testing.assert_allclose(got[: len(tokens)], expected[k], atol=1e-5, err_msg=f"row {row} layer {k}")
            assert (got[len(tokens) :] == 0).all()  # padding positions are zero
    np.testing.assert_array_equal(np.asarray(out["mask"]), [[True] * 6, [True] + [False] * 5, [True] * 4 + [False] * 2])


def test_bilm_matches_numpy_reference_on_fixture_weights(fixture_files, fixture_options):
    from elmo_keras.options import normalize_options
    from elmo_keras.weights import read_weights_hdf5

    bilm = ek.BiLM.from_pretrained(*fixture_files)
    arrays = read_weights_hdf5(fixture_files[1], normalize_options(fixture_options))
    out = bilm(ek.batch_to_ids(SENTENCES))
    for row, tokens in enumerate(SENTENCES):
        expected = bilm_sentence(tokens, arrays, fixture_options)
        for k, layer in enumerate(out["layers"]):
            np.testing.assert_allclose(np.asarray(layer)[row, : len(tokens)], expected[k], atol=1e-5)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_scalar_mix_matches_reference(layer_norm):
    rng = np.random.default_rng(0)
    layers = [rng.standard_normal((3, 5, 4)).astype(np.float32) * (k + 1) for k in range(3)]
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=bool)
    logits = np.array([0.3, -1.2, 0.7], dtype=np.float32)
    mix = ek.ScalarMix(3, initial_logits=logits, initial_gamma=1.7, do_layer_norm=layer_norm)
    got = np.asarray(mix(layers, mask=mask))
    expected = scalar_mix(layers, mask, logits.astype(np.float64), 1.7, layer_norm)
    np.testing.assert_allclose(got, expected, atol=1e-5)
