"""The LSTM's paths: the cell is the equations, the frozen-inference fast path (chunked input GEMMs, the transposed
step layout) gives the plain loop's numbers, and one argument (``fast_inference``) chooses it."""

import inspect

import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras.embed import ElmoEmbedder
from elmo_keras.layers.lstm_cell import ProjectedLSTMCell, StepWeights
from elmo_keras.layers.lstm_inference import GEMM_ROWS, chunk_steps, transposed_layout_pays, transposed_step_weights


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_the_cell_is_the_projected_lstm_equations():
    rng = np.random.default_rng(0)
    p, d, b = 3, 5, 4
    arrays = [rng.normal(size=s).astype("float32") for s in [(p, 4 * d), (p, 4 * d), (4 * d,), (d, p)]]
    x, c, h = (rng.normal(size=s).astype("float32") for s in [(b, p), (b, d), (b, p)])
    weights = StepWeights(*map(tf.constant, arrays))
    cell = ProjectedLSTMCell(cell_clip=0.5, proj_clip=0.2)
    got_c, got_h = cell(cell.input_gates(x[None], weights)[0], c, h, weights)
    w_x, w_h, bias, w_p = arrays
    i, j, f, o = np.split(x @ w_x + h @ w_h + bias, 4, axis=-1)
    want_c = np.clip(_sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j), -0.5, 0.5)
    want_h = np.clip((_sigmoid(o) * np.tanh(want_c)) @ w_p, -0.2, 0.2)
    np.testing.assert_allclose(np.asarray(got_c), want_c, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_h), want_h, atol=1e-6)


def test_chunk_steps_fill_gemm_rows():
    assert [int(chunk_steps(b)) for b in (0, 1, 4, 7, 48, 49, 96, 97, 256)] == [
        GEMM_ROWS,
        GEMM_ROWS,
        GEMM_ROWS // 4,
        GEMM_ROWS // 7,
        2,
        1,
        1,
        1,
        1,
    ]


@pytest.mark.parametrize("batch", [4, 7, 50])
def test_fast_path_gives_the_numbers_of_the_plain_loop(batch):
    """A frozen ProjectedBiLSTM computes its input-to-gate products chunk_steps(batch) steps at a time (24, 13
    and 1), on the released or the transposed layout: same outputs and final states as the plain loop (all steps
    at once), for rows shorter and longer than a chunk."""
    chunk = int(chunk_steps(batch))
    lstm = ek.ProjectedBiLSTM(
        num_layers=2, dim=12, projection_dim=6, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True
    )
    lstm.trainable = False
    steps = 2 * chunk + 5
    inputs = np.random.default_rng(3).normal(size=(batch, steps, 6)).astype("float32")
    lengths = ([steps, chunk, 3, 0, steps - 1, 1, chunk + 1] * 8)[:batch]
    mask = np.arange(steps)[None, :] < np.array(lengths)[:, None]
    assert lstm.fast_path
    chunked = tf.function(lambda x, m: lstm(x, m))(inputs, mask)
    snapshot = transposed_step_weights(lstm)
    transposed = tf.function(lambda x, m: lstm._call(x, m, step_weights=snapshot))(inputs, mask)
    lstm.fast_inference = False
    assert not lstm.fast_path
    plain = tf.function(lambda x, m: lstm(x, m))(inputs, mask)
    for fast in (chunked, transposed):
        for a, b in zip(tf.nest.flatten(plain), tf.nest.flatten(fast)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)


def test_fast_inference_chooses_the_path_and_is_not_saved(fixture_options):
    lstm = ek.ProjectedBiLSTM(num_layers=1, dim=4, projection_dim=2)
    assert lstm.fast_inference == "auto" and not lstm.fast_path  # trainable: the plain loop
    lstm.trainable = False
    assert lstm.fast_path
    assert not ek.ProjectedBiLSTM(1, 4, 2, fast_inference=False, trainable=False).fast_path
    with pytest.raises(ValueError, match="fast_inference=True is for a frozen"):
        ek.ProjectedBiLSTM(1, 4, 2, fast_inference=True)(np.ones((1, 3, 2), "float32"), np.ones((1, 3), bool))
    with pytest.raises(ValueError, match="fast_inference must be"):
        ek.ProjectedBiLSTM(1, 4, 2, fast_inference="cudnn")
    assert "fast_inference" not in lstm.get_config()  # a runtime choice, as Keras' use_cudnn
    bilm = ek.BiLM(fixture_options, fast_inference=False)
    assert bilm.lstm.fast_inference is False and "fast_inference" not in bilm.get_config()


def test_frozen_lstm_memory_does_not_grow_with_the_input_gates_of_all_steps():
    """The input-to-gate products of a long batch ([T, B, 4D] per direction) are never all held at once: the
    allocator peak of a frozen LSTM grows by far less than them from 16 to 112 steps."""
    lstm = ek.ProjectedBiLSTM(num_layers=1, dim=1024, projection_dim=64)
    lstm.trainable = False
    run = tf.function(lambda x, m: lstm(x, m)[0])
    peaks = []
    for steps in (16, 112):
        inputs, mask = tf.zeros((32, steps, 64)), tf.ones((32, steps), bool)
        run(inputs, mask)
        try:
            tf.config.experimental.reset_memory_stats("CPU:0")
        except ValueError as error:
            pytest.skip(f"CPU allocator statistics unavailable: {error}")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        run(inputs, mask)
        peaks.append(tf.config.experimental.get_memory_info("CPU:0")["peak"] - before)
    all_gates = 2 * (112 - 16) * 32 * 4 * 1024 * 4  # bytes of the extra steps' gates, both directions
    assert peaks[1] - peaks[0] < all_gates // 4, (peaks, all_gates)


def test_transposed_layout_pays_only_for_large_bfloat16_matrices():
    # the released sizes' W_h [P, 4D] in bfloat16: small 1 MB, medium 4 MB, original 16 MB; never in float32
    assert not transposed_layout_pays(1024, 128, "bfloat16") and not transposed_layout_pays(2048, 256, "bfloat16")
    assert transposed_layout_pays(4096, 512, "bfloat16")
    assert not any(transposed_layout_pays(d, p, "float32") for d, p in [(1024, 128), (2048, 256), (4096, 512)])


def test_transposed_step_weights_are_the_variables_transposed(fixture_files):
    lstm = ek.BiLM.from_pretrained(*fixture_files).lstm
    p = lstm.projection_dim
    for k, per_direction in enumerate(transposed_step_weights(lstm)):
        for d, (w_x_t, w_h_t, bias, w_p_t) in enumerate(per_direction):
            np.testing.assert_array_equal(np.asarray(w_x_t), np.asarray(lstm.kernels[k])[d, :p].T)
            np.testing.assert_array_equal(np.asarray(w_h_t), np.asarray(lstm.kernels[k])[d, p:].T)
            np.testing.assert_array_equal(np.asarray(bias), np.asarray(lstm.biases[k])[d])
            np.testing.assert_array_equal(np.asarray(w_p_t), np.asarray(lstm.projections[k])[d].T)


def test_speed_only_arguments_are_not_on_bilm_call(fixture_files):
    """BiLM.call takes the inputs alone; ElmoEmbedder's speed-only arguments go by BiLM._call, and it makes the
    transposed snapshot only for an LSTM on its fast path."""
    assert list(inspect.signature(ek.BiLM.call).parameters) == ["self", "inputs"]
    assert list(inspect.signature(ek.ProjectedBiLSTM.call).parameters) == [
        "self",
        "inputs",
        "mask",
        "initial_state",
        "return_final_state",
    ]
    trainable = ek.BiLM.from_pretrained(*fixture_files, trainable=True)
    assert ElmoEmbedder(bilm=trainable, step_layout="transposed").step_layout == "released"
    transformer = ek.BiLM.from_preset("brown-small-transformer")
    assert ElmoEmbedder(bilm=transformer, step_layout="transposed").step_layout == "released"
