"""Raw strings through the input pipeline (tf.data -> char ids) into models over char ids, on the active backend:
the default on JAX and PyTorch (run by tests/test_backend_subsets.py), ``char_ids=True`` on TensorFlow."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras.tasks.text_pipeline import text_dataset, text_to_char_ids

pytestmark = pytest.mark.backend
BACKEND = keras.backend.backend()
CHAR_IDS = None if BACKEND != "tensorflow" else True  # the default elsewhere; asked for on TensorFlow

TEXTS = ["a good film", "bad plot here", "great acting", "awful !", "good fun", "dull and bad"]
LABELS = np.array([1, 0, 1, 0, 1, 0])


@pytest.fixture(scope="module")
def elmo():
    return ek.Elmo.from_preset("brown-small")


def test_pipeline_ids_are_batch_to_ids_padded():
    tokens = [text.split() for text in TEXTS]
    expected = ek.batch_to_ids(tokens)
    (got,) = [ids.numpy() for ids in text_dataset(TEXTS, batch_size=len(TEXTS))]
    assert got.shape == (6, 8, 50)  # padded to a multiple of 8 tokens with all-zero rows
    np.testing.assert_array_equal(got[:, :3], expected)
    assert not got[:, 3:].any()
    np.testing.assert_array_equal(text_to_char_ids(tokens), expected)


def test_bigru_classifier_fits_predicts_and_evaluates_raw_strings(elmo, tmp_path):
    keras.utils.set_random_seed(0)
    model = ek.models.text_classifier(
        elmo, num_classes=2, units=4, hidden=4, dropout=0.0, learning_rate=0.01, char_ids=CHAR_IDS
    )
    assert len(model.inputs[0].shape) == 3  # char ids in the model: the text step ran in the pipeline
    history = model.fit(TEXTS, LABELS, epochs=4, batch_size=3, validation_data=(TEXTS[:2], LABELS[:2]), verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    assert "val_loss" in history.history
    by_text = model.predict(TEXTS, verbose=0)
    by_ids = keras.ops.convert_to_numpy(model(ek.batch_to_ids([t.split() for t in TEXTS])))
    np.testing.assert_allclose(by_text, by_ids, atol=1e-6)  # padding to 8 tokens changes nothing
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(TEXTS)), by_ids, atol=1e-6)
    loss, accuracy = model.evaluate(TEXTS, LABELS, verbose=0)
    assert np.isfinite(loss) and 0.0 <= accuracy <= 1.0
    ek.saving.save_model(model, tmp_path / "model.keras")
    reloaded = ek.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(reloaded.predict(TEXTS, verbose=0), by_text, atol=1e-6)


def test_tagger_fits_token_lists_with_token_labels(elmo):
    keras.utils.set_random_seed(0)
    tokens = [["good", "film"], ["bad", "plot", "here"], ["great"], ["awful", "!"]]
    tags = np.array([[1, 2, 0], [0, 2, 1], [1, 0, 0], [0, 2, 0]])
    model = ek.models.sequence_tagger(elmo, num_tags=3, units=4, hidden=4, dropout=0.0, char_ids=CHAR_IDS)
    model.optimizer.learning_rate.assign(0.01)
    losses = model.fit(tokens, tags, epochs=4, batch_size=2, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    assert model.predict(tokens, verbose=0).shape[:2] == (4, 8)


def readme_backends_example() -> str:
    """The README's "On JAX or PyTorch" code block (the one after its backends-example marker)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    after = readme.split("<!-- backends-example", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_backends_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_backends_example(), "README.md", "exec"), {})
    assert (tmp_path / "model.keras").exists()
    assert "[[" in capsys.readouterr().out  # the printed probabilities
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert reloaded.predict(["a fine film"], verbose=0).shape == (1, 2)
