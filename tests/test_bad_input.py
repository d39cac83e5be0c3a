"""Bad input to the library (issue 16): weight files, options, text and char ids. Each error names the problem.

The CLI, training and export cases are in test_bad_input_cli.py.
"""

import inspect
import json
import re
import shutil
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras import models
from elmo_keras.errors import InputError
from elmo_keras.text import as_text

TEXTS = ["The bank approved the loan .", "Hi", "He sat on the bank of the river ."]


def _bad_row(row: int) -> str:
    """The row as elmo_keras.text.assert_rows names it: eagerly ":'" newline "N", in a graph ":] [N]"."""
    return rf"first bad row \(0-based, in this batch\):\W*{row}\b"


@pytest.fixture(scope="module")
def elmo(fixture_files):
    return ek.Elmo.from_pretrained(*fixture_files, dropout=0.0, output="elmo")


@pytest.fixture(scope="module")
def classifier(elmo):
    return models.text_classifier(elmo, 3, units=4, hidden=8)


def _options(fixture_options, section: str, key: str, value) -> dict:
    options = json.loads(json.dumps(fixture_options))
    options[section][key] = value
    return options


# -- weight files -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["truncated", "empty", "text"])
def test_broken_weight_file_is_named(tmp_path, fixture_files, content):
    data = Path(fixture_files[1]).read_bytes()
    path = tmp_path / "w.hdf5"
    path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"", "text": b"not hdf5\n"}[content])
    with pytest.raises(InputError, match=re.escape(str(path)) + ".*not a valid/complete hdf5 weight file"):
        ek.Elmo.from_pretrained(fixture_files[0], path)


@pytest.mark.parametrize(
    "replace, words",
    [
        (lambda f: f.create_group("char_embed"), "'char_embed' is a Group, expected a dataset of shape"),
        (lambda f: f.create_dataset("char_embed", data=np.array([b"x"] * 261)), "'char_embed' holds |S1 values"),
    ],
)
def test_dataset_replaced_by_group_or_strings(tmp_path, fixture_files, replace, words):
    path = tmp_path / "w.hdf5"
    shutil.copy(fixture_files[1], path)
    with h5py.File(path, "a") as f:
        del f["char_embed"]
        replace(f)
    with pytest.raises(InputError, match=re.escape(words)):
        ek.BiLM.from_pretrained(fixture_files[0], path)


# -- options ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "section, key, value, words",
    [
        ("lstm", "cell_clip", "abc", "'lstm.cell_clip' must be a positive number or null"),
        ("lstm", "cell_clip", -3, "'lstm.cell_clip' must be a positive number or null"),
        ("lstm", "proj_clip", True, "'lstm.proj_clip' must be a positive number or null"),
        ("lstm", "use_skip_connections", "no", "'lstm.use_skip_connections' must be true or false"),
        ("lstm", "n_layers", "2", "'lstm.n_layers' must be a positive integer"),
        ("char_cnn", "embedding", 4, "'char_cnn.embedding' must be an object"),
    ],
)
def test_options_of_the_wrong_type(fixture_options, fixture_files, section, key, value, words):
    with pytest.raises(InputError, match=re.escape(words)):
        ek.Elmo.from_pretrained(_options(fixture_options, section, key, value), fixture_files[1])


def test_options_section_that_is_not_an_object(fixture_options):
    with pytest.raises(InputError, match=re.escape("'char_cnn' must be an object")):
        ek.load_options({**fixture_options, "char_cnn": "small"})
    with pytest.raises(InputError, match="options must be a dict"):
        ek.load_options([fixture_options])


def test_options_file_that_is_not_text(tmp_path):
    path = tmp_path / "options.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match=re.escape(str(path)) + ".*not valid JSON"):
        ek.load_options(path)


@pytest.mark.parametrize(
    "section, key, option, dataset",
    [
        ("char_cnn", "n_highway", "char_cnn.n_highway", "CNN_high_1/W_carry"),
        ("lstm", "n_layers", "lstm.n_layers", "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B"),
    ],
)
def test_options_smaller_than_the_weights(fixture_options, fixture_files, section, key, option, dataset):
    with pytest.raises(InputError, match=f"datasets the options do not describe: .*{dataset}.*fix {option}"):
        ek.BiLM.from_pretrained(_options(fixture_options, section, key, 1), fixture_files[1])


def test_char_ids_made_for_another_max_characters_per_token(fixture_options, fixture_files):
    bilm = ek.BiLM.from_pretrained(
        _options(fixture_options, "char_cnn", "max_characters_per_token", 40), fixture_files[1]
    )
    assert bilm(ek.batch_to_ids([["a"]], max_characters_per_token=40))["mask"].shape == (1, 1)
    with pytest.raises(
        InputError,
        match=re.escape(
            "max_characters_per_token=40: make them with batch_to_ids(tokens, max_characters_per_token=40)"
        ),
    ):
        bilm(ek.batch_to_ids([["a"]]))


def test_unknown_preset():
    with pytest.raises(InputError, match="unknown preset 'brown-tiny'.*brown-small"):
        ek.Elmo.from_preset("brown-tiny")


# -- text: what users pass ----------------------------------------------------------------------------------
def test_elmo_takes_lists_tuples_and_numpy_str_arrays(elmo):
    expected = elmo(tf.constant(TEXTS)).numpy()
    for texts in (TEXTS, tuple(TEXTS), np.array(TEXTS), np.array(TEXTS, dtype=object), [t.encode() for t in TEXTS]):
        np.testing.assert_allclose(elmo(texts).numpy(), expected, atol=1e-6)
    assert elmo([]).shape == (0, 0, 32)
    tokens = [t.split() for t in TEXTS]
    padded = elmo(models.pad_tokens(tokens)).numpy()
    np.testing.assert_allclose(elmo(tokens).numpy(), padded, atol=1e-6)  # ragged token lists are padded


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (["a b", None], TypeError, "row 1 is None (NoneType); text must be str"),
        (["a b", 3], TypeError, "row 1 is 3 (int); text must be str"),
        ([["a", "b"], ["c", None]], TypeError, "row 1, token 1, is None"),
        ("a b", InputError, "wrap a single text in a list: [text]"),
        ([[["a"]]], InputError, "sentences [batch] or padded tokens [batch, max_len], got shape (1, 1, 1)"),
        (["a b", ["c"]], InputError, "mixes strings and token lists"),
        (["ok", b"caf\xe9"], InputError, "row 1 is not valid UTF-8"),
        (["ok", "\ud800"], InputError, "row 1 cannot be encoded as UTF-8"),
    ],
)
def test_text_that_is_not_text(elmo, bad, error, words):
    with pytest.raises(error, match=re.escape(words)):
        elmo(bad)


def test_models_take_lists_and_numpy_str_arrays(classifier, elmo, tmp_path):
    expected = classifier.predict(np.array(TEXTS, dtype=object), verbose=0)
    for texts in (TEXTS, tuple(TEXTS), np.array(TEXTS)):
        np.testing.assert_allclose(classifier.predict(texts, verbose=0), expected, atol=1e-6)
    history = classifier.fit(
        np.array(TEXTS), np.array([0, 1, 2]), validation_data=(TEXTS, np.array([0, 1, 2])), epochs=1, verbose=0
    ).history
    assert set(history) >= {"loss", "val_loss"}
    assert np.isfinite(classifier.evaluate(TEXTS, np.array([0, 1, 2]), verbose=0)[0])
    tagger = models.sequence_tagger(elmo, 3, units=4, hidden=8)
    tokens = [t.split() for t in TEXTS]
    np.testing.assert_allclose(
        tagger.predict(tokens, verbose=0), tagger.predict(models.pad_tokens(tokens), verbose=0), atol=1e-6
    )
    classifier.save(tmp_path / "c.keras")
    again = keras.models.load_model(tmp_path / "c.keras", safe_mode=True)
    assert isinstance(again, models.TextModel)
    np.testing.assert_allclose(again.predict(TEXTS, verbose=0), classifier.predict(TEXTS, verbose=0), atol=1e-6)


def test_models_reject_numbers_and_the_wrong_rank(classifier, elmo):
    with pytest.raises(InputError, match=re.escape("text_classifier takes text (sentences, str [batch]), got int64")):
        classifier.predict(np.array([1, 2]), verbose=0)
    with pytest.raises(InputError, match=re.escape("takes sentences, str [batch], got shape (3, 9)")):
        classifier.predict([t.split() for t in TEXTS], verbose=0)
    with pytest.raises(TypeError, match="row 1 is None"):
        classifier.fit(["a", None], np.array([0, 1]), verbose=0)
    tagger = models.sequence_tagger(elmo, 3, units=4, hidden=8)
    with pytest.raises(InputError, match=re.escape("sequence_tagger takes padded tokens, str [batch, max_len]")):
        tagger.predict(TEXTS, verbose=0)


def test_as_text_leaves_tensors_and_numbers_alone():
    ids = ek.batch_to_ids([["a"]])
    assert as_text(ids) is ids
    tensor = tf.constant(["a"])
    assert as_text(tensor) is tensor


# -- invalid UTF-8 inside a graph -------------------------------------------------------------------------
def test_invalid_utf8_in_predict_and_fit_names_the_row(classifier):
    bad = tf.constant([b"ok", b"caf\xe9 au lait", b"fine"])
    words = "not valid UTF-8.*" + _bad_row(1)
    with pytest.raises(tf.errors.InvalidArgumentError, match=words):
        classifier.predict(bad, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=words):
        classifier.fit(tf.data.Dataset.from_tensor_slices((bad, [0, 1, 2])).batch(3), verbose=0)


def test_invalid_utf8_in_an_exported_model_names_the_row(elmo, tmp_path):
    path = ek.export_serving(elmo, tmp_path / "elmo", warmup_texts=None)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    assert serve(text=tf.constant(TEXTS))["elmo"].shape[0] == 3
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8.*" + _bad_row(2)):
        serve(text=tf.constant([b"ok", b"fine", b"\xff\xfe"]))


# -- char ids ---------------------------------------------------------------------------------------------
def test_char_ids_must_be_integers(elmo):
    with pytest.raises(InputError, match="char ids must be integers.*got float32"):
        elmo(ek.batch_to_ids([["a"]]).astype(np.float32))


@pytest.mark.parametrize("value", [-1, 262, 100_000])
def test_char_ids_out_of_range_name_the_row(elmo, value):
    ids = ek.batch_to_ids([["a"], ["b"], ["c"]])
    ids[2, 0, 3] = value
    with pytest.raises(
        InputError, match=re.escape(f"char ids must be in [0, 262) (0 = padding token): row 2, token 0 has id {value}")
    ):
        elmo(ids)  # eagerly: checked before running


# -- documented spellings ---------------------------------------------------------------------------------
def test_documented_spellings_work():
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    for first, second in set(re.findall(r"\bek\.(\w+)(?:\.(\w+))?", readme)):
        assert hasattr(ek, first), f"ek.{first}"
        if second and inspect.ismodule(getattr(ek, first)):
            assert hasattr(getattr(ek, first), second), f"ek.{first}.{second}"
    assert callable(ek.datasets.load_brown) and callable(ek.datasets.load_ag_news)
