"""Released weight files: every size's layout, round trip, options.json, clear errors."""

import json

import h5py
import numpy as np
import pytest
from elmo_keras.options import load_options
from elmo_keras.weights import expected_shapes, random_weights, read_weights_hdf5, write_weights_hdf5

import elmo_keras as ek

# Parameter counts of the released models (DESIGN.md: 13.6M, 28.0M, 93.6M).
RELEASED_PARAMS = {"small": 13.6e6, "medium": 28.0e6, "original": 93.6e6, "original_5.5B": 93.6e6}


@pytest.mark.parametrize("size", sorted(RELEASED_PARAMS))
def test_released_layouts_have_the_published_size(size):
    shapes = expected_shapes(load_options(ek.RELEASED_OPTIONS[size]))
    total = sum(int(np.prod(s)) for s in shapes.values())
    assert round(total / 1e6, 1) == RELEASED_PARAMS[size] / 1e6
    assert shapes["char_embed"] == (261, 16)
    assert (
        shapes["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"][0]
        == 2 * ek.RELEASED_OPTIONS[size]["lstm"]["projection_dim"]
    )


@pytest.mark.slow
def test_small_size_loads_runs_and_round_trips(tmp_path):
    options = ek.RELEASED_OPTIONS["small"]
    (tmp_path / "options.json").write_text(json.dumps(options))
    arrays = random_weights(load_options(options), seed=1, scale=0.05)
    write_weights_hdf5(arrays, tmp_path / "small.hdf5")
    bilm = ek.BiLM.from_pretrained(tmp_path / "options.json", tmp_path / "small.hdf5")
    assert bilm.count_params() == sum(a.size for a in arrays.values())
    out = bilm(ek.batch_to_ids([["The", "bank", "approved", "the", "loan", "."], ["Hi"]]))
    assert [tuple(t.shape) for t in out["layers"]] == [(2, 6, 256)] * 3
    ek.save_weights_hdf5(bilm, tmp_path / "again.hdf5")
    with h5py.File(tmp_path / "again.hdf5", "r") as f:
        for name, value in arrays.items():
            np.testing.assert_array_equal(f[name][...], value)  # exact round trip


def test_fixture_round_trip_and_options_dump(tmp_path, fixture_files):
    bilm = ek.BiLM.from_pretrained(*fixture_files)
    ek.save_weights_hdf5(bilm, tmp_path / "w.hdf5")
    (tmp_path / "options.json").write_text(json.dumps(bilm.options))
    original = read_weights_hdf5(fixture_files[1], bilm.options)
    copy = read_weights_hdf5(tmp_path / "w.hdf5", load_options(tmp_path / "options.json"))
    assert original.keys() == copy.keys()
    for name in original:
        np.testing.assert_array_equal(original[name], copy[name])
    again = ek.BiLM.from_pretrained(tmp_path / "options.json", tmp_path / "w.hdf5")
    ids = ek.batch_to_ids([["a", "test"]])
    np.testing.assert_array_equal(np.asarray(bilm(ids)["layers"][2]), np.asarray(again(ids)["layers"][2]))


def test_no_projection_when_filters_equal_projection_dim(tmp_path):
    options = {
        "lstm": {"n_layers": 1, "dim": 8, "projection_dim": 6},
        "char_cnn": {"embedding": {"dim": 3}, "filters": [[1, 2], [2, 4]], "n_highway": 0},
    }
    assert "CNN_proj/W_proj" not in expected_shapes(load_options(options))
    write_weights_hdf5(random_weights(load_options(options)), tmp_path / "w.hdf5")
    bilm = ek.BiLM.from_pretrained(options, tmp_path / "w.hdf5")
    assert np.asarray(bilm(ek.batch_to_ids([["x"]]))["layers"][1]).shape == (1, 1, 12)


def test_missing_dataset_is_named(tmp_path, fixture_files, fixture_options):
    arrays = read_weights_hdf5(fixture_files[1], load_options(fixture_options))
    del arrays["CNN_high_1/W_carry"]
    write_weights_hdf5(arrays, tmp_path / "w.hdf5")
    with pytest.raises(KeyError, match="CNN_high_1/W_carry"):
        ek.BiLM.from_pretrained(fixture_options, tmp_path / "w.hdf5")


def test_wrong_shape_names_tensor_and_shapes(tmp_path, fixture_files, fixture_options):
    arrays = read_weights_hdf5(fixture_files[1], load_options(fixture_options))
    arrays["CNN_proj/W_proj"] = np.zeros((124, 17), np.float32)
    write_weights_hdf5(arrays, tmp_path / "w.hdf5")
    with pytest.raises(ValueError, match=r"CNN_proj/W_proj.*\(124, 17\).*expected \(124, 16\)"):
        ek.BiLM.from_pretrained(fixture_options, tmp_path / "w.hdf5")


def test_options_that_disagree_with_weights(fixture_files, fixture_options):
    wrong = json.loads(json.dumps(fixture_options))
    wrong["lstm"]["dim"] = 128
    with pytest.raises(ValueError, match="W_0.*options do not match"):
        ek.BiLM.from_pretrained(wrong, fixture_files[1])


@pytest.mark.parametrize(
    "patch, words",
    [
        (lambda o: o.pop("lstm"), "missing 'options.lstm'"),
        (lambda o: o["char_cnn"].update(activation="gelu"), "char_cnn.activation"),
        (lambda o: o["char_cnn"].update(n_characters=300), "n_characters"),
        (lambda o: o["lstm"].update(n_layers=0), "lstm.n_layers"),
        (lambda o: o["char_cnn"].update(filters=[[60, 4]]), "wider than max_characters_per_token"),
    ],
)
def test_bad_options(fixture_options, patch, words):
    options = json.loads(json.dumps(fixture_options))
    patch(options)
    with pytest.raises(ValueError, match=words):
        load_options(options)


def test_missing_files(tmp_path, fixture_files):
    with pytest.raises(FileNotFoundError, match="options file"):
        ek.BiLM.from_pretrained(tmp_path / "nope.json", fixture_files[1])
    with pytest.raises(FileNotFoundError, match="weight file"):
        ek.BiLM.from_pretrained(fixture_files[0], tmp_path / "nope.hdf5")


@pytest.fixture(scope="module")
def small_files(tmp_path_factory) -> tuple[str, str]:
    """The released small size with random weights: (options.json, weights.hdf5)."""
    folder = tmp_path_factory.mktemp("small")
    options = ek.RELEASED_OPTIONS["small"]
    (folder / "options.json").write_text(json.dumps(options))
    write_weights_hdf5(random_weights(load_options(options), seed=2, scale=0.05), folder / "small.hdf5")
    return str(folder / "options.json"), str(folder / "small.hdf5")


def _allocator_stats(tf):
    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        return tf.config.experimental.get_memory_info("CPU:0")
    except ValueError as error:  # an allocator without statistics
        pytest.skip(f"CPU allocator statistics unavailable: {error}")


def test_loaded_lstm_variables_are_read_without_copies(small_files):
    """Loading must assign each two-direction LSTM variable whole: a sliced assign of one direction puts a
    TensorFlow variable in copy-on-read mode for good, so every later model call copies all its weights
    (hundreds of MB kept by the CPU allocator for the original size)."""
    import tensorflow as tf

    bilm = ek.BiLM.from_pretrained(*small_files)
    kernel = bilm.encoder.kernels[0]
    read = tf.function(lambda: tf.reduce_sum(kernel.value))
    read()  # traced and run once
    before = _allocator_stats(tf)["current"]
    read()
    grown = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    nbytes = int(np.prod(kernel.shape)) * 4
    assert grown < nbytes // 4, f"reading an {nbytes}-byte LSTM kernel allocated {grown} bytes (copy-on-read)"


def test_loading_keeps_weights_out_of_tensorflows_allocator_pool(small_files):
    """The variables adopt the host buffers the file was read into (elmo_keras.host_memory): TensorFlow's CPU
    allocator, whose pool never shrinks, hands out (almost) nothing while loading, and the weights are exact."""
    import tensorflow as tf

    before = _allocator_stats(tf)["current"]  # other tests' tensors may still be alive
    bilm = ek.BiLM.from_pretrained(*small_files)
    grown = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    weights = read_weights_hdf5(small_files[1], bilm.options)
    nbytes = sum(a.nbytes for a in weights.values())
    assert grown < nbytes // 10, f"loading {nbytes} bytes of weights took {grown} bytes from TensorFlow's allocator"
    for name, value in bilm.get_weight_arrays().items():
        np.testing.assert_array_equal(value, weights[name])
    out = bilm(ek.batch_to_ids([["Weights", "live", "in", "host", "pages", "."]]))["layers"]
    assert all(np.isfinite(np.asarray(layer)).all() for layer in out)
