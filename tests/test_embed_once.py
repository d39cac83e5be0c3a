"""TextModel.fit over a frozen Elmo embeds each text once and trains the same head as the plain path."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from elmo_keras.baselines import StaticEmbedding

import elmo_keras as ek
from elmo_keras import embed_once, models
from elmo_keras.export import check_serving, export_serving

TEXTS = np.array(
    [
        "good movie",
        "bad film",
        "great acting here",
        "awful plot twist",
        "a good film",
        "truly bad acting",
        "great great fun",
        "awful awful mess",
        "",
        "good good good film",
    ],
    dtype=object,
)
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0, 0, 1])
SMALL = dict(units=8, hidden=16, dropout=0.0, learning_rate=0.02)


@pytest.fixture(scope="module")
def elmo(random_elmo):
    return random_elmo


def test_embed_once_trains_the_same_model_as_the_plain_path(elmo, monkeypatch):
    """One full batch, no shuffling: both paths take the same Adam steps, so with float32 storage they predict
    the same (1e-5). ELMo beside a task word embedding: the tokens reach the head in both paths."""

    def build():
        words = StaticEmbedding.from_corpus([t.split() for t in TEXTS], 4, name="words")
        return models.text_classifier(elmo, 2, **SMALL, word_embedding=words)

    keras.utils.set_random_seed(1)
    plain, once = build(), build()
    once.set_weights(plain.get_weights())
    fit = dict(epochs=3, batch_size=len(TEXTS), shuffle=False, verbose=0)
    expected = plain.fit(TEXTS, LABELS, embed_once=False, **fit).history["loss"]
    monkeypatch.setattr(embed_once, "STORAGE_DTYPE", "float32")
    np.testing.assert_allclose(once.fit(TEXTS, LABELS, **fit).history["loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(once.predict(TEXTS, verbose=0), plain.predict(TEXTS, verbose=0), atol=1e-5)


def test_texts_are_embedded_once_and_the_text_model_gets_the_best_weights(elmo, monkeypatch, tmp_path):
    """Four epochs embed each text once; early stopping restores the best epoch into the raw-string model,
    which saves, loads and exports with those weights; a plain fit then continues the same optimizer."""
    keras.utils.set_random_seed(2)
    model = models.text_classifier(elmo, 2, **SMALL)
    seen = []
    original = ek.ElmoEmbedder.embed_sentences

    def counting(self, sentences, *args, **kwargs):
        seen.extend(map(tuple, sentences))
        return original(self, sentences, *args, **kwargs)

    monkeypatch.setattr(ek.ElmoEmbedder, "embed_sentences", counting)
    stop = keras.callbacks.EarlyStopping("val_loss", patience=1, restore_best_weights=True)
    history = model.fit(
        list(TEXTS), list(LABELS), epochs=4, batch_size=3, validation_split=0.3, callbacks=[stop], verbose=0
    )
    assert sorted(seen) == sorted(tuple(t.split()) for t in TEXTS)  # 7 training + 3 validation texts, once
    again = model.evaluate(TEXTS[7:], LABELS[7:], verbose=0, return_dict=True)  # the last 30%, as Keras splits
    np.testing.assert_allclose(again["loss"], min(history.history["val_loss"]), rtol=1e-3)  # float16 storage
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-6)
    assert check_serving(model, export_serving(model, tmp_path / "serving", warmup_texts=None), TEXTS) < 1e-5
    steps = int(model.optimizer.iterations.numpy())
    model.fit(TEXTS, LABELS, epochs=1, batch_size=5, verbose=0, embed_once=False)
    assert int(model.optimizer.iterations.numpy()) == steps + 2


def test_what_cannot_embed_once_runs_the_plain_path_or_says_why(elmo, fixture_files):
    segmented = models.text_classifier(elmo, 2, max_tokens=2, **SMALL)
    with pytest.raises(ValueError, match="max_tokens is set"):
        segmented.fit(TEXTS, LABELS, epochs=1, verbose=0, embed_once=True)
    tuned = models.text_classifier(ek.Elmo.from_pretrained(*fixture_files, bilm_trainable=True), 2, **SMALL)
    with pytest.raises(ValueError, match="biLM is trainable"):
        tuned.fit(TEXTS, LABELS, epochs=1, verbose=0, embed_once=True)
    model = models.text_classifier(elmo, 2, **SMALL)
    with pytest.raises(ValueError, match="sample_weight"):
        model.fit(TEXTS, LABELS, sample_weight=np.ones(len(TEXTS)), epochs=1, verbose=0, embed_once=True)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS.astype(str), LABELS)).batch(4)
    with pytest.raises(ValueError, match="in memory"):
        model.fit(dataset, epochs=1, verbose=0, embed_once=True)
    model.fit(dataset, epochs=1, verbose=0)  # auto: the plain path
