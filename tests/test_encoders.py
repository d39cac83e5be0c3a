"""The Transformer and gated-CNN biLMs (options "encoder"): causal per direction, batch- and padding-invariant,
saved (.keras, hdf5 layout), pretrained with ek.lm, served; and the options errors of a bad "encoder" section."""

import json
import re

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from test_lm import TINY, TRAIN, _quiet

import elmo_keras as ek
from elmo_keras import models
from elmo_keras.errors import InputError
from elmo_keras.export import export_serving
from elmo_keras.presets import parameter_count

ENCODERS = {
    "transformer": {"type": "transformer", "projection_dim": 16, "n_layers": 2, "num_heads": 2, "ff_dim": 32},
    "gated_cnn": {"type": "gated_cnn", "projection_dim": 16, "n_layers": 2, "kernel_size": 3},
}
PREFIX = {"transformer": "Transformer_", "gated_cnn": "GatedCNN_"}
SENTENCES = [["The", "bank", "approved", "the", "loan", "."], ["Hi"], ["He", "sat", "on", "the", "bank"]]


def _options(kind: str, **training) -> dict:
    """TINY's char CNN (P = 16) and training settings with the ``kind`` encoder instead of TINY's LSTM."""
    return {**{k: v for k, v in TINY.items() if k != "lstm"}, "encoder": dict(ENCODERS[kind]), **training}


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def bilm(request):
    layer = ek.BiLM(_options(request.param))
    layer.build()
    return layer


def _layers(bilm, token_lists, pad_to: int | None = None) -> list[np.ndarray]:
    ids = ek.batch_to_ids(token_lists)
    if pad_to is not None:
        ids = np.pad(ids, ((0, 0), (0, pad_to - ids.shape[1]), (0, 0)))
    return [np.asarray(layer) for layer in bilm(ids)["layers"]]


def test_each_direction_sees_only_its_side(bilm):
    p, steps, t = bilm.projection_dim, 7, 3
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, steps, p)).astype("float32")
    mask = np.array([[True] * steps, [True] * 5 + [False] * 2])
    later, earlier = x.copy(), x.copy()
    later[:, t + 1 :] = rng.normal(size=later[:, t + 1 :].shape)
    earlier[:, :t] = rng.normal(size=earlier[:, :t].shape)
    base, after, before = ([np.asarray(o) for o in bilm.encoder(v, mask)] for v in (x, later, earlier))
    for k in range(bilm.num_layers):
        np.testing.assert_allclose(after[k][:, : t + 1, :p], base[k][:, : t + 1, :p], atol=1e-6)  # forward <= t
        np.testing.assert_allclose(before[k][:, t:, p:], base[k][:, t:, p:], atol=1e-6)  # backward >= t
        assert np.abs(after[k][:, t + 1 : 5, :p] - base[k][:, t + 1 : 5, :p]).max(axis=-1).min() > 1e-4  # the rest
        assert np.abs(before[k][:, :t, p:] - base[k][:, :t, p:]).max(axis=-1).min() > 1e-4  # does change
        assert np.all(base[k][1, 5:] == 0)


def test_dropout_only_while_training_a_trainable_encoder(bilm):
    x, mask = np.random.default_rng(0).normal(size=(2, 5, bilm.projection_dim)).astype("float32"), np.ones((2, 5), bool)
    inference = np.asarray(bilm.encoder(x, mask)[-1])
    assert np.abs(np.asarray(bilm.encoder(x, mask, training=True)[-1]) - inference).max() > 1e-3
    bilm.trainable = False  # frozen (e.g. in an Elmo whose biLM does not train): deterministic
    try:
        np.testing.assert_array_equal(np.asarray(bilm.encoder(x, mask, training=True)[-1]), inference)
    finally:
        bilm.trainable = True


def test_rows_do_not_depend_on_the_batch_or_padding(bilm):
    together = _layers(bilm, SENTENCES)
    for row, tokens in enumerate(SENTENCES):
        for alone in (_layers(bilm, [tokens]), _layers(bilm, [tokens], pad_to=9)):
            for k, layer in enumerate(alone):
                np.testing.assert_allclose(layer[0, : len(tokens)], together[k][row, : len(tokens)], atol=1e-5)
                assert np.all(layer[0, len(tokens) :] == 0)


def test_keras_round_trip_of_an_elmo_model(bilm, tmp_path):
    model = keras.Sequential(
        [keras.Input(shape=(), dtype="string"), ek.Elmo(bilm=bilm, output_mode="elmo", dropout=0.0)]
    )
    texts = tf.constant([" ".join(s) for s in SENTENCES])
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    assert loaded.layers[0].bilm.encoder_type == bilm.encoder_type
    np.testing.assert_array_equal(np.asarray(loaded(texts)), np.asarray(model(texts)))


def test_weights_round_trip_through_hdf5(bilm, tmp_path):
    ek.save_weights_hdf5(bilm, tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "r") as f:
        names = set(f) - {"char_embed", "CNN", "CNN_high_0", "CNN_proj"}
    assert names == {f"{PREFIX[bilm.encoder_type]}{d}" for d in (0, 1)}
    again = ek.BiLM.from_pretrained(bilm.options, tmp_path / "w.hdf5")
    assert again.count_params() == bilm.count_params() == parameter_count(bilm.options)
    for a, b in zip(_layers(again, SENTENCES), _layers(bilm, SENTENCES)):
        np.testing.assert_array_equal(a, b)
    fewer = json.loads(json.dumps(bilm.options))
    fewer["encoder"]["n_layers"] = 1
    with pytest.raises(InputError, match="datasets the options do not describe: .*layer_1.*fix .*encoder.n_layers"):
        ek.BiLM.from_pretrained(fewer, tmp_path / "w.hdf5")


def test_classifier_export_serves_what_the_model_predicts(bilm, tmp_path):
    model = models.text_classifier(ek.Elmo(bilm=bilm), 3, head="pool", hidden=8)
    path = export_serving(model, tmp_path / "classifier")
    texts = [" ".join(s) for s in SENTENCES]
    served = tf.saved_model.load(str(path)).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), np.asarray(model(tf.constant(texts))), atol=1e-5)


@pytest.mark.parametrize("kind", sorted(ENCODERS))
def test_pretraining_loss_falls_and_the_folder_reloads(kind, tmp_path):
    options = _options(kind, learning_rate=0.01, backup_every_steps=1000)
    options["encoder"]["n_layers"] = 1  # half the training graph to trace
    model, state = ek.lm.pretrain(
        [TRAIN / "data.txt"], None, options, tmp_path / "run", epochs=2, verbose=0, log=_quiet
    )
    assert state["history"]["loss"][1] < state["history"]["loss"][0]
    reloaded = ek.BiLM.from_preset(tmp_path / "run", add_sentence_boundaries=False)
    assert reloaded.encoder_type == kind
    for a, b in zip(_layers(reloaded, SENTENCES), _layers(model.bilm, SENTENCES)):
        np.testing.assert_array_equal(a, b)


def test_stateful_is_lstm_only():
    with pytest.raises(InputError, match="stateful=True carries LSTM states.*a gated_cnn biLM has none"):
        ek.BiLM(_options("gated_cnn"), stateful=True)


def test_an_lstm_keeps_its_keras_weight_path(fixture_files, tmp_path):
    bilm = ek.BiLM.from_pretrained(*fixture_files)
    assert bilm.encoder is bilm.lstm
    ids = keras.Input((None, 50), dtype="int32")
    keras.Model(ids, bilm(ids)["layers"]).save_weights(tmp_path / "m.weights.h5")
    with h5py.File(tmp_path / "m.weights.h5", "r") as f:
        assert set(f["layers/bi_lm"]) >= {"char_cnn", "lstm"} and "encoder" not in f["layers/bi_lm"]


@pytest.mark.parametrize(
    "encoder, words",
    [
        ({"type": "rnn"}, "'encoder.type' must be one of ('lstm', 'transformer', 'gated_cnn'), got 'rnn'"),
        ("transformer", "'encoder' must be an object"),
        ({"projection_dim": 16}, "missing 'encoder.type'"),
        (
            {"type": "lstm", "n_layers": 2},
            "'encoder.n_layers' is not a setting of the 'lstm' encoder: its settings go in the 'lstm' section",
        ),
        ({"type": "transformer", "n_layers": 2}, "missing 'encoder.projection_dim'"),
        ({"type": "transformer", "projection_dim": 16, "n_layers": 0}, "'encoder.n_layers' must be a positive integer"),
        (
            {**ENCODERS["transformer"], "num_head": 2},
            "unknown setting 'encoder.num_head' for type 'transformer'; its "
            "settings are projection_dim, n_layers, num_heads",
        ),
        (
            {**ENCODERS["transformer"], "num_heads": 3},
            "'encoder.num_heads' (3) must divide 'encoder.projection_dim' (16)",
        ),
        ({**ENCODERS["transformer"], "activation": "tanh"}, "'encoder.activation' must be one of ('relu', 'gelu')"),
        ({**ENCODERS["transformer"], "dropout": 1.0}, "'encoder.dropout' must be a number in [0, 1), got 1.0"),
        ({**ENCODERS["gated_cnn"], "kernel_size": 0}, "'encoder.kernel_size' must be a positive integer"),
        ({**ENCODERS["gated_cnn"], "layer_norm": "yes"}, "'encoder.layer_norm' must be true or false"),
    ],
)
def test_bad_encoder_sections(encoder, words):
    with pytest.raises(InputError, match=re.escape(f"options: {words}")):
        ek.load_options({"char_cnn": TINY["char_cnn"], "encoder": encoder})


def test_lstm_section_beside_another_encoder():
    with pytest.raises(InputError, match=re.escape("an 'lstm' section with 'encoder.type' 'gated_cnn': remove it")):
        ek.load_options({**TINY, "encoder": ENCODERS["gated_cnn"]})
    assert "encoder" not in ek.load_options(TINY) and ek.load_options({**TINY, "encoder": {"type": "lstm"}})
