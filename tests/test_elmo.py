"""Elmo: the three input forms, stacking in Keras models, model.fit, .keras round trip, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek

SENTENCES = ["The bank approved the loan .", "Hi", "He sat on the bank of the river ."]
TEXTS = np.array(SENTENCES, dtype=object)


@pytest.fixture(scope="module")
def elmo(fixture_files):
    return ek.Elmo.from_pretrained(*fixture_files, num_output_representations=2, dropout=0.0)


def test_input_forms_agree(elmo):
    from_strings = elmo(tf.constant(SENTENCES))
    tokens = tf.strings.split(tf.constant(SENTENCES)).to_tensor("")
    from_tokens = elmo(tokens)
    from_ids = elmo(ek.batch_to_ids([s.split() for s in SENTENCES]))
    assert len(from_strings["elmo_representations"]) == 2 and len(from_strings["layers"]) == 3
    assert tuple(from_strings["elmo_representations"][0].shape) == (3, 9, 32)
    np.testing.assert_array_equal(np.asarray(from_strings["mask"]).sum(1), [6, 1, 9])
    for other in (from_tokens, from_ids):
        for a, b in zip(
            from_strings["elmo_representations"] + from_strings["layers"],
            other["elmo_representations"] + other["layers"],
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_default_mix_is_the_layer_average(elmo):
    out = elmo(tf.constant(SENTENCES))
    average = sum(np.asarray(t) for t in out["layers"]) / 3
    np.testing.assert_allclose(np.asarray(out["elmo_representations"][0]), average, atol=1e-6)


def test_the_two_banks_differ(elmo):
    out = elmo(tf.constant([SENTENCES[0], SENTENCES[2]]))
    rep = np.asarray(out["elmo_representations"][0])
    bank1, bank2 = rep[0, 1], rep[1, 4]
    layer0 = np.asarray(out["layers"][0])
    np.testing.assert_allclose(layer0[0, 1], layer0[1, 4], atol=1e-6)  # same token embedding
    assert np.abs(bank1 - bank2).max() > 1e-3  # different contextual vectors


def build_classifier(fixture_files):
    return keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            ek.Elmo.from_pretrained(*fixture_files, output="elmo", dropout=0.1),
            keras.layers.Bidirectional(keras.layers.GRU(8)),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )


def test_sequential_fit_save_and_reload(tmp_path, fixture_files):
    model = build_classifier(fixture_files)
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    y = np.array([0, 1, 2])
    history = model.fit(TEXTS, y, epochs=8, batch_size=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    before = model.predict(TEXTS, verbose=0)
    model.save(tmp_path / "m.keras")
    reloaded = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(reloaded.predict(TEXTS, verbose=0), before)
    assert reloaded.layers[0].bilm.trainable is False


def test_mask_reaches_the_layer_on_top(fixture_files):
    model = build_classifier(fixture_files)
    alone = model.predict(np.array(["Hi"], dtype=object), verbose=0)
    padded = model.predict(np.array(["Hi", " ".join(["word"] * 40)], dtype=object), verbose=0)
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)


def test_functional_model_with_dict_output_round_trips(tmp_path, fixture_files):
    inputs = keras.Input(shape=(), dtype="string")
    out = ek.Elmo.from_pretrained(*fixture_files, dropout=0.0, do_layer_norm=True)(inputs)
    model = keras.Model(inputs, [out["elmo_representations"][0], out["mask"]])
    before = model.predict(TEXTS, verbose=0)
    model.save(tmp_path / "f.keras")
    after = keras.models.load_model(tmp_path / "f.keras", safe_mode=True).predict(TEXTS, verbose=0)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_empty_input(elmo):
    assert tuple(elmo(tf.constant([], tf.string))["elmo_representations"][0].shape) == (0, 0, 32)
    out = elmo(tf.constant(["", "   "]))
    assert tuple(out["mask"].shape) == (2, 0)


def test_errors(fixture_files, fixture_options, elmo):
    with pytest.raises(ValueError, match="num_output_representations=1"):
        ek.Elmo(fixture_options, output="elmo", num_output_representations=2)
    with pytest.raises(ValueError, match="output must be one of"):
        ek.Elmo(fixture_options, output="vectors")
    with pytest.raises(ValueError, match="string input must be"):
        elmo(tf.constant([[["a"]]]))
    with pytest.raises(ValueError, match="char id input"):
        elmo(tf.zeros((2, 50), tf.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        elmo(tf.constant([b"caf\xe9"]))


def test_bilm_arguments_belong_to_the_bilm(fixture_files):
    bilm = ek.BiLM.from_pretrained(*fixture_files)
    with pytest.raises(ValueError, match="belong to the BiLM"):
        ek.Elmo(bilm=bilm, stateful=True)
    with pytest.raises(ValueError, match="either options"):
        ek.Elmo()
    stateful = ek.Elmo.from_pretrained(*fixture_files, stateful=True)  # the classmethods pass them on
    assert stateful.bilm.stateful
