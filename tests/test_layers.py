"""Layer behaviour: stateless batch invariance, freezing, ScalarMix options, configs, masks."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import elmo_keras as ek
from elmo_keras.errors import InputError

SENT = ["The", "bank", "approved", "the", "loan", "."]


@pytest.fixture(scope="module")
def bilm(fixture_files):
    return ek.BiLM.from_pretrained(*fixture_files)


def test_stateless_is_batch_and_padding_invariant(bilm):
    alone = [np.asarray(t)[0] for t in bilm(ek.batch_to_ids([SENT]))["layers"]]
    others = [["x"] * 30, SENT, [], ["Hi"]]
    batched = bilm(ek.batch_to_ids(others))
    for k, layer in enumerate(batched["layers"]):
        got = np.asarray(layer)[1]
        np.testing.assert_allclose(got[: len(SENT)], alone[k], atol=1e-5)
        assert (got[len(SENT) :] == 0).all()
    # twice in a row gives the same (no hidden state in the default mode)
    again = bilm(ek.batch_to_ids([SENT]))["layers"][2]
    np.testing.assert_array_equal(np.asarray(again)[0], alone[2])


def test_bilm_in_tf_function_with_unknown_shapes(bilm):
    fn = tf.function(lambda ids: bilm(ids)["layers"][2], input_signature=[tf.TensorSpec([None, None, 50], tf.int32)])
    ids = ek.batch_to_ids([SENT, ["Hi"]])
    np.testing.assert_allclose(fn(ids).numpy(), np.asarray(bilm(ids)["layers"][2]), atol=1e-6)


def test_empty_inputs(bilm):
    out = bilm(ek.batch_to_ids([[], []]))
    assert [tuple(t.shape) for t in out["layers"]] == [(2, 0, 32)] * 3
    out = bilm(ek.batch_to_ids([]))
    assert tuple(out["mask"].shape) == (0, 0)


def test_padding_in_the_middle_is_an_error(bilm):
    ids = ek.batch_to_ids([["a", "b", "c"]])
    ids[0, 1] = 0
    with pytest.raises(InputError, match="row 0: token 2 is a real token after padding"):
        bilm(ids)  # eagerly: checked before running
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding tokens"):
        tf.function(bilm)(ids)  # in a graph: the in-graph assertion


def test_frozen_by_default_and_trainable_on_request(fixture_files):
    frozen = ek.BiLM.from_pretrained(*fixture_files)
    assert frozen.trainable_weights == [] and len(frozen.non_trainable_weights) > 0
    tuned = ek.BiLM.from_pretrained(*fixture_files, trainable=True)
    assert len(tuned.trainable_weights) == len(tuned.weights)
    elmo = ek.Elmo.from_pretrained(*fixture_files)
    assert {w.path.split("/")[-2] for w in elmo.trainable_weights} == {"scalar_mix_0"}
    assert (
        len(ek.Elmo.from_pretrained(*fixture_files, bilm_trainable=True).trainable_weights)
        == len(tuned.trainable_weights) + 2
    )


def test_fine_tuning_changes_the_bilm(fixture_files):
    elmo = ek.Elmo.from_pretrained(*fixture_files, output="elmo", bilm_trainable=True, dropout=0.0)
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(elmo(inputs))))
    model.compile(keras.optimizers.SGD(0.1), "mse")
    before = np.asarray(elmo.bilm.lstm.kernels[0]).copy()
    model.fit(tf.constant(["a b c", "d e"]), np.array([1.0, -1.0]), epochs=1, verbose=0)
    assert np.abs(np.asarray(elmo.bilm.lstm.kernels[0]) - before).max() > 0


def test_scalar_mix_fixed_weights_are_used_as_given():
    layers = [tf.fill((1, 2, 3), float(k + 1)) for k in range(3)]
    mix = ek.ScalarMix(mix_weights=[0.45, 0.15, 0.40])
    np.testing.assert_allclose(np.asarray(mix(layers)), np.full((1, 2, 3), 0.45 + 0.30 + 1.20), atol=1e-6)
    assert [w.name for w in mix.trainable_weights] == ["gamma"]
    with pytest.raises(ValueError, match="3 values for num_layers=2"):
        ek.ScalarMix(2, mix_weights=[0.45, 0.15, 0.40])


def test_old_argument_names_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="'fixed_weights' is deprecated"):
        mix = ek.ScalarMix.from_config({"name": "m", "fixed_weights": [0.5, 0.5], "gamma": 2.0})  # an old config
    assert (mix.mix_weights, mix.initial_gamma) == ([0.5, 0.5], 2.0)
    assert "fixed_weights" not in mix.get_config() and "gamma" not in mix.get_config()
    with pytest.warns(DeprecationWarning, match="'n_layers' is deprecated"):
        assert ek.ProjectedBiLSTM(n_layers=3, dim=4, projection_dim=2).num_layers == 3
    with pytest.warns(DeprecationWarning, match="'n_highway' is deprecated"):
        assert ek.CharCNN([[1, 2]], n_highway=0, n_characters=262).num_highway_layers == 0
    with pytest.raises(TypeError, match="got both 'mix_weights' and its old name 'fixed_weights'"):
        ek.ScalarMix(mix_weights=[1.0], fixed_weights=[1.0])


def test_scalar_mix_trains_weights_sum_to_one():
    mix = ek.ScalarMix(3, trainable_gamma=False)
    inputs = [keras.Input((4, 2)) for _ in range(3)]
    model = keras.Model(inputs, mix(inputs))
    np.testing.assert_allclose(np.asarray(mix.normalized_weights()), [1 / 3] * 3, atol=1e-7)  # uniform init
    model.compile(keras.optimizers.SGD(0.5), "mse")
    x = [np.ones((8, 4, 2), np.float32) * k for k in range(3)]
    model.fit(x, np.full((8, 4, 2), 2.0, np.float32), epochs=20, verbose=0)
    s = np.asarray(mix.normalized_weights())
    assert abs(s.sum() - 1) < 1e-6 and s[2] > 0.5


def test_scalar_mix_l2_penalty_and_weight_dropout():
    layers = [tf.random.normal((2, 3, 4), seed=k) for k in range(3)]
    mix = ek.ScalarMix(3, initial_logits=[1.0, 2.0, -1.0], l2_coef=0.01, weight_dropout=0.5)
    inference = np.asarray(mix(layers, training=False))
    np.testing.assert_array_equal(np.asarray(mix(layers, training=False)), inference)
    assert float(sum(mix.losses)) == pytest.approx(0.01 * (1 + 4 + 1), rel=1e-6)
    trained = [np.asarray(mix(layers, training=True)) for _ in range(20)]
    assert any(np.abs(t - inference).max() > 1e-3 for t in trained)


def test_layer_norm_needs_a_mask():
    with pytest.raises(ValueError, match="needs the mask"):
        ek.ScalarMix(2, do_layer_norm=True)([tf.ones((1, 2, 3)), tf.ones((1, 2, 3))])


@pytest.mark.parametrize(
    "make",
    [  # the other layers: tests/test_layer_harness.py
        lambda o: ek.BiLM(o, stateful=True, max_batch_size=4),
        lambda o: ek.Elmo(
            o, num_output_representations=2, dropout=0.1, mix_weights=[0.2, 0.3, 0.5], do_layer_norm=True
        ),
    ],
)
def test_config_round_trip(make, fixture_options):
    layer = make(fixture_options)
    again = type(layer).from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is type(layer)


def _bigru_on(layer: keras.layers.Layer, inputs: list[keras.KerasTensor]) -> keras.Model:
    """inputs -> layer -> (ScalarMix when it gives a list) -> Bidirectional(GRU), every step returned."""
    x = layer(inputs[0] if len(inputs) == 1 else inputs)
    if isinstance(x, list):
        x = ek.ScalarMix(name="mix")(x)
    gru = keras.layers.GRU(3, return_sequences=True, bias_initializer="ones")  # unmasked zero padding would count
    return keras.Model(inputs, keras.layers.Bidirectional(gru)(x))


def _static_embedding_case():
    from elmo_keras.baselines import StaticEmbedding

    layer = StaticEmbedding(["a", "b", "c"], np.random.default_rng(0).normal(size=(3, 4)))
    inputs = [keras.Input(shape=(), dtype="string")]
    return layer, inputs, [tf.constant(["a b c", "b"])], [tf.constant(["b"])]


def _unstack_layers_case():
    stacked = np.random.default_rng(0).normal(size=(2, 3, 2, 4)).astype("float32")  # padding holds values
    mask = np.array([[True] * 3, [True, False, False]])
    inputs = [keras.Input(shape=(None, 2, 4)), keras.Input(shape=(None,), dtype="bool")]
    return ek.layers.UnstackLayers(), inputs, [stacked, mask], [stacked[1:, :1], mask[1:, :1]]


def _char_cnn_case():
    layer = ek.CharCNN([[1, 4], [2, 4]], char_embed_dim=4, num_highway_layers=1, projection_dim=4)
    inputs = [keras.Input(shape=(None, 50), dtype="int32")]
    return layer, inputs, [ek.batch_to_ids([["a", "b", "c"], ["b"]])], [ek.batch_to_ids([["b"]])]


@pytest.mark.parametrize("case", [_static_embedding_case, _unstack_layers_case, _char_cnn_case])
def test_keras_mask_reaches_a_bigru(case, tmp_path):
    """compute_mask (not a private attribute) gives the GRU its mask: a padded row's real steps equal the
    unpadded row, in eager calls, in predict, and after a .keras round trip."""
    layer, inputs, padded, alone = case()
    model = _bigru_on(layer, inputs)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    for run in (model, loaded):
        for outputs in (np.asarray(run(padded)), run.predict(padded, verbose=0)):
            np.testing.assert_allclose(outputs[1, :1], np.asarray(run(alone))[0], atol=1e-6)


@pytest.mark.parametrize("trainable", [True, False])
def test_lstm_final_state_and_outputs_do_not_depend_on_padding(trainable):
    """Each row's outputs and final state (its state after its own last step, both directions) equal those of the
    row run alone without padding; padded steps output zeros; without the final state the outputs are the same."""
    lstm = ek.ProjectedBiLSTM(
        num_layers=2, dim=12, projection_dim=6, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True
    )
    lstm.trainable = trainable
    lengths = [7, 3, 1, 0]
    inputs = np.random.default_rng(5).normal(size=(len(lengths), 7, 6)).astype("float32")
    mask = np.arange(7)[None, :] < np.array(lengths)[:, None]
    outputs, state = lstm(inputs, mask)
    fast_outputs, no_state = lstm(inputs, mask, return_final_state=False)
    assert no_state is None
    for a, b in zip(outputs, fast_outputs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    zero = lstm.zero_state(1)
    for row, n in enumerate(lengths):
        for layer in outputs:
            assert np.all(np.asarray(layer)[row, n:] == 0)
        alone_outputs, alone_state = lstm(inputs[row : row + 1, :n], np.ones((1, n), bool)) if n else ([], zero)
        for layer, alone in zip(outputs, alone_outputs):
            np.testing.assert_allclose(np.asarray(layer)[row, :n], np.asarray(alone)[0], rtol=0, atol=1e-6)
        for (c, h), (c_alone, h_alone) in zip(state, alone_state):
            np.testing.assert_allclose(np.asarray(c)[:, row], np.asarray(c_alone)[:, 0], rtol=0, atol=1e-6)
            np.testing.assert_allclose(np.asarray(h)[:, row], np.asarray(h_alone)[:, 0], rtol=0, atol=1e-6)


@functools.lru_cache(maxsize=None)
def _trim_cnn():
    """One small CharCNN (random weights, non-zero biases) for the trim_padding property test."""
    cnn = ek.CharCNN([[1, 4], [2, 8], [3, 8], [7, 16]], num_highway_layers=1, projection_dim=6)
    cnn.build((None, 50))
    rng = np.random.default_rng(11)
    cnn.set_weights([rng.normal(size=w.shape).astype("float32") for w in cnn.get_weights()])
    return cnn


_TOKENS = st.text(alphabet=st.sampled_from("ab.éß😀\u00a0"), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_TOKENS, max_size=5), min_size=1, max_size=4))
def test_char_cnn_trim_padding_gives_the_same_numbers(sentences):
    """trim_padding (convolve only up to the batch's longest token head, the windows over padding joined as one
    constant) equals the full convolutions to float32 rounding: any token length up to past 48 bytes (no
    padding left), padding tokens, rows of different lengths, an empty batch."""
    cnn = _trim_cnn()
    ids = ek.batch_to_ids(sentences)
    full, trimmed = np.asarray(cnn(ids)), np.asarray(cnn(ids, trim_padding=True))
    # the same windows; oneDNN may block a shorter convolution differently, so float32 rounding may differ
    np.testing.assert_allclose(trimmed, full, rtol=1e-6, atol=1e-6 * float(np.abs(full).max(initial=1.0)))
    flat = ids.reshape(-1, 50)[:0]
    assert np.asarray(cnn(flat, trim_padding=True)).shape == (0, 6)


def test_lstm_mask_with_a_hole_is_an_error():
    lstm = ek.ProjectedBiLSTM(num_layers=1, dim=4, projection_dim=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="True for each row's first steps"):
        lstm(np.ones((1, 3, 2), "float32"), np.array([[True, False, True]]))
