"""Classifier/tagger builders, layer weighting strategies, multi-label metrics, static baselines."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from elmo_keras.callbacks import LayerWeightsHistory
from elmo_keras.metrics import MultiLabelF1, PrecisionAtK, pad_label_indices

from elmo_keras import models

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
    ],
    dtype=object,
)
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0])
SMALL = dict(units=8, hidden=16, dropout=0.0, learning_rate=0.02)


@pytest.fixture(scope="module")
def elmo(random_elmo):
    return random_elmo


def fit_losses(model, x, y, epochs=12):
    return model.fit(x, y, epochs=epochs, batch_size=2, verbose=0).history["loss"]


@pytest.mark.parametrize(
    "head, mix", [("bigru", "trainable"), ("bilstm_bigru", "mlp"), ("pool", "concat"), ("pool", "fixed")]
)
def test_each_head_learns(elmo, head, mix):
    weights = [0.45, 0.15, 0.40] if mix == "fixed" else None
    model = models.text_classifier(elmo, 2, head=head, mix=mix, mix_weights=weights, **SMALL)
    # batches in a fixed order: with 8 texts, some shuffled orders leave the bilstm_bigru + mlp head near ln 2
    # for 8 epochs (seed luck, the same on the plain and the embed-once path), which says nothing about the head
    losses = model.fit(TEXTS, LABELS, epochs=8, batch_size=2, shuffle=False, verbose=0).history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses


@pytest.mark.parametrize("mix, expected", [("fixed", [0.45, 0.15, 0.40]), ("top", [0, 0, 1]), ("average", [1 / 3] * 3)])
def test_fixed_mixes_use_their_weights(elmo, mix, expected):
    weights = expected if mix == "fixed" else None
    model = models.text_classifier(elmo, 2, head="pool", mix=mix, mix_weights=weights, **SMALL)
    mixer = models.layer_mixer(model)
    np.testing.assert_allclose(np.asarray(mixer.normalized_weights()), expected, atol=1e-7)
    assert mixer.trainable_weights == []


def test_padding_and_batch_do_not_change_a_prediction(elmo):
    model = models.text_classifier(elmo, 3, **SMALL)
    alone = model.predict(np.array(["good movie"], dtype=object), verbose=0)
    padded = model.predict(np.array(["good movie", " ".join(["word"] * 30)], dtype=object), verbose=0)
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)


def test_keras_round_trip_identical(tmp_path, elmo):
    model = models.text_classifier(elmo, 2, head="bilstm_bigru", mix="mlp", max_tokens=3, **SMALL)
    fit_losses(model, TEXTS, LABELS, epochs=1)
    model.save(tmp_path / "c.keras")
    again = keras.models.load_model(tmp_path / "c.keras", safe_mode=True)
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0))


def test_segments_cover_long_documents_without_dropping_tokens(elmo):
    whole = models.text_classifier(elmo, 2, head="pool", mix="average", **SMALL)
    segmented = models.text_classifier(elmo, 2, head="pool", mix="average", max_tokens=3, **SMALL)
    segmented.set_weights(whole.get_weights())
    long = np.array([" ".join(["good", "movie", "bad"] * 7), "short one"], dtype=object)
    # with a per-token head, max/mean over segments equals max/mean over the whole text: only the
    # contextual vectors near segment edges differ, so the two agree closely but not exactly.
    a, b = whole.predict(long, verbose=0), segmented.predict(long, verbose=0)
    assert np.abs(a - b).max() < 0.05
    assert np.abs(a[1] - b[1]).max() < 1e-5  # a text shorter than max_tokens is one segment


def test_layer_weights_callback_records_weights_summing_to_one(elmo):
    model = models.text_classifier(elmo, 2, head="pool", mix="trainable", **SMALL)
    recorder = LayerWeightsHistory()
    model.fit(TEXTS, LABELS, epochs=3, batch_size=4, verbose=0, callbacks=[recorder])
    ((name, history),) = recorder.history.items()
    assert len(history) == 4  # before training + 3 epochs
    np.testing.assert_allclose(history[0], [1 / 3] * 3, atol=1e-6)
    for weights in history:
        assert abs(sum(weights) - 1) < 1e-5
    assert history[-1] != history[0] and len(recorder.raw[name]) == 4


def test_bad_choices(elmo):
    with pytest.raises(ValueError, match="head must be one of"):
        models.text_classifier(elmo, 2, head="cnn")
    with pytest.raises(ValueError, match="mix must be one of"):
        models.text_classifier(elmo, 2, mix="best")
    with pytest.raises(ValueError, match="needs mix_weights"):
        models.text_classifier(elmo, 2, mix="fixed")
    with pytest.raises(ValueError, match="3 layers"):
        models.text_classifier(elmo, 2, mix="fixed", mix_weights=[0.5, 0.5])


def test_multi_label_with_label_indices_and_many_labels(elmo):
    num_labels = 12000
    labels = [[0, 11999], [5], [0], [5, 7], [11999], [7], [0, 5], [7, 11999]]
    y = pad_label_indices(labels, num_labels)
    model = models.text_classifier(
        elmo, num_labels, head="pool", multi_label=True, units=8, hidden=16, dropout=0.0, learning_rate=0.05
    )
    history = model.fit(TEXTS, y, epochs=6, batch_size=2, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert {"micro_f1", "macro_f1", "precision_at_5"} <= set(history)
    assert model.predict(TEXTS[:2], verbose=0).shape == (2, num_labels)


def test_multi_label_metrics_agree_with_sklearn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    y_true = (rng.random((64, 10)) < 0.2).astype(np.float32)
    y_pred = rng.random((64, 10)).astype(np.float32)
    for average in ("micro", "macro"):
        metric = MultiLabelF1(10, average)
        metric.update_state(y_true[:30], y_pred[:30])
        metric.update_state(y_true[30:], y_pred[30:])
        expected = f1_score(y_true, y_pred >= 0.5, average=average, zero_division=0)
        assert float(metric.result()) == pytest.approx(expected, abs=1e-6)
    # label indices give the same as multi-hot
    indices = pad_label_indices([np.flatnonzero(row).tolist() for row in y_true])
    metric = MultiLabelF1(10, "macro")
    metric.update_state(indices, y_pred)
    assert float(metric.result()) == pytest.approx(
        f1_score(y_true, y_pred >= 0.5, average="macro", zero_division=0), abs=1e-6
    )
    p_at_3 = PrecisionAtK(10, k=3)
    p_at_3.update_state(y_true, y_pred)
    top = np.argsort(-y_pred, axis=1)[:, :3]
    expected = np.mean([y_true[i, top[i]].sum() / 3 for i in range(64)])
    assert float(p_at_3.result()) == pytest.approx(expected, abs=1e-6)


def test_pad_label_indices_rejects_bad_labels():
    with pytest.raises(ValueError, match="not an index"):
        pad_label_indices([[0, 10]], num_labels=10)


def test_sequence_tagger_masks_padding(elmo):
    tokens = models.pad_tokens([["John", "lives", "in", "Paris"], ["Mary", "works"], ["in", "London", "today"]])
    tags = np.array([[1, 0, 0, 2], [1, 0, 0, 0], [0, 2, 0, 0]])
    model = models.sequence_tagger(elmo, 3, **SMALL)
    losses = fit_losses(model, tokens, tags, epochs=30)
    assert losses[-1] < 0.6 * losses[0]
    garbage = tags.copy()
    garbage[1, 2:] = 2  # labels at padded positions must not matter
    garbage[2, 3:] = 1
    assert model.evaluate(tokens, garbage, verbose=0)[0] == pytest.approx(
        model.evaluate(tokens, tags, verbose=0)[0], abs=1e-6
    )
    assert model.predict(tokens, verbose=0).shape == (3, 4, 3)


@pytest.mark.parametrize("trainer", ["train_cbow", "train_svd_ppmi", "train_fasttext"])
def test_static_baselines_train_and_plug_into_builders(tmp_path, trainer):
    from elmo_keras import baselines

    corpus = [s.split() for s in TEXTS] * 20
    vectors = getattr(baselines, trainer)(
        corpus, dim=6, min_count=1, window=2, **({"epochs": 2} if trainer != "train_svd_ppmi" else {})
    )
    assert vectors.vectors.shape == (len(vectors.words), 6)
    embedding = vectors.embedding(extra_words=["unseen"])
    if trainer == "train_fasttext":
        assert "unseen" in embedding.vocabulary
    model = models.text_classifier(embedding, 2, head="bigru", **{**SMALL, "learning_rate": 0.05})
    losses = fit_losses(model, TEXTS, LABELS, epochs=8)
    assert losses[-1] < 0.8 * losses[0]
    model.save(tmp_path / "s.keras")
    again = keras.models.load_model(tmp_path / "s.keras", safe_mode=True)
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0))


def test_static_embedding_unknown_words_and_mask():
    from elmo_keras.baselines import StaticEmbedding

    layer = StaticEmbedding(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    out = layer(tf.constant(["a zzz", "b"]))
    np.testing.assert_allclose(out.numpy()[0], [[1, 0], [0.5, 0.5]])
    np.testing.assert_array_equal(out._keras_mask.numpy(), [[True, True], [True, False]])
