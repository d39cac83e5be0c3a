"""Precomputed biLM features: embed_layers, features_dataset, features_classifier."""

import keras
import numpy as np
import pytest
from elmo_keras.features import embed_layers, features_dataset

import elmo_keras as ek
from elmo_keras import models
from elmo_keras.errors import InputError
from elmo_keras.tasks.features import PooledTable, pooled_dataset

TEXTS = [
    "good movie",
    "bad film",
    "great acting here",
    "awful plot twist",
    "a good film",
    "truly bad acting",
    "great great fun",
    "awful awful mess",
]
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0])
SMALL = dict(units=8, hidden=16, dropout=0.0, learning_rate=0.02)


@pytest.fixture(scope="module")
def elmo(random_elmo):
    return random_elmo


@pytest.fixture(scope="module")
def feats(elmo):
    embedder = ek.ElmoEmbedder(bilm=elmo.bilm, batch_size=3)
    return embed_layers(embedder, [t.split() for t in TEXTS], dtype="float32")


def test_embed_layers_shapes_and_order(feats, elmo):
    assert [f.shape for f in feats] == [(len(t.split()), 3, elmo.output_dim) for t in TEXTS]
    direct = elmo.as_layers()(np.array(TEXTS[2:3], dtype=object))
    np.testing.assert_allclose(feats[2], np.stack([np.asarray(d)[0] for d in direct], axis=1), atol=1e-5)


@pytest.mark.parametrize("head, mix", [("bigru", "trainable"), ("bilstm_bigru", "mlp"), ("pool", "fixed")])
def test_features_classifier_is_text_classifier_on_stored_layers(elmo, feats, head, mix):
    """Same mixer/head/scores weights -> the same predictions as the end-to-end model (1e-5)."""
    weights = [0.45, 0.15, 0.40] if mix == "fixed" else None
    text_model = models.text_classifier(elmo, 2, head=head, mix=mix, mix_weights=weights, **SMALL)
    text_model.fit(np.array(TEXTS, dtype=object), LABELS, epochs=2, batch_size=4, verbose=0, embed_once=False)
    feat_model = models.features_classifier(3, elmo.output_dim, 2, head=head, mix=mix, mix_weights=weights, **SMALL)
    head_weights = text_model.get_layer("document").encoder.get_layer("features_head").get_weights()
    feat_model.get_layer("features_head").set_weights(head_weights)
    feat_model.get_layer("scores").set_weights(text_model.get_layer("scores").get_weights())
    expected = text_model.predict(np.array(TEXTS, dtype=object), verbose=0)
    got = feat_model.predict(features_dataset(feats, batch_size=3), verbose=0)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_word_embedding_beside_elmo_matches_text_classifier_and_round_trips(tmp_path, elmo, feats):
    """[mixed ELMo; task word embedding]: stored layers + tokens give the end-to-end predictions (1e-5)."""
    from elmo_keras.baselines import StaticEmbedding

    token_lists = [t.split() for t in TEXTS]
    words = StaticEmbedding.from_corpus(token_lists[:6], dim=4, name="words")
    assert words.trainable and "ö" not in words.vocabulary
    text_model = models.text_classifier(elmo, 2, word_embedding=words, **SMALL)
    text_model.fit(np.array(TEXTS, dtype=object), LABELS, epochs=2, batch_size=4, verbose=0, embed_once=False)
    feat_model = models.features_classifier(
        3, elmo.output_dim, 2, word_embedding=StaticEmbedding.from_corpus(token_lists[:6], dim=4, name="words"), **SMALL
    )
    head_weights = text_model.get_layer("document").encoder.get_layer("features_head").get_weights()
    feat_model.get_layer("features_head").set_weights(head_weights)
    feat_model.get_layer("scores").set_weights(text_model.get_layer("scores").get_weights())
    test = features_dataset(feats, batch_size=3, tokens=token_lists)
    assert {"layers", "mask", "tokens"} == set(next(iter(test)))
    got = feat_model.predict(test, verbose=0)
    np.testing.assert_allclose(got, text_model.predict(np.array(TEXTS, dtype=object), verbose=0), atol=1e-5)
    assert (
        np.abs(feat_model.get_layer("features_head").get_layer("words").get_weights()[0]).max() > 0
    )  # learned rows, not zeros
    feat_model.save(tmp_path / "w.keras")
    again = keras.models.load_model(tmp_path / "w.keras", safe_mode=True)
    np.testing.assert_array_equal(again.predict(test, verbose=0), got)


def test_features_classifier_learns_buckets_and_round_trips(tmp_path, feats):
    model = models.features_classifier(3, feats[0].shape[-1], 2, **SMALL)
    ds = features_dataset(feats, LABELS, batch_size=2, shuffle=True, seed=0, bucket_boundaries=[3])
    assert sum(int(x["mask"].numpy().sum()) for x, _ in ds) == sum(len(t.split()) for t in TEXTS)
    losses = model.fit(ds, epochs=10, verbose=0).history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    model.save(tmp_path / "f.keras")
    again = keras.models.load_model(tmp_path / "f.keras", safe_mode=True)
    test = features_dataset(feats, batch_size=8)
    np.testing.assert_array_equal(again.predict(test, verbose=0), model.predict(test, verbose=0))


def test_padding_does_not_change_a_prediction(feats):
    model = models.features_classifier(3, feats[0].shape[-1], 3, **SMALL)
    alone = model.predict(features_dataset(feats[:1], batch_size=1), verbose=0)
    longest = max(range(len(feats)), key=lambda i: len(feats[i]))
    padded = model.predict(features_dataset([feats[0], feats[longest]], batch_size=2), verbose=0)
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)


def test_static_vectors_as_one_layer_and_multi_label():
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(n, 1, 6)).astype(np.float16) for n in (3, 5, 2, 7)]
    labels = models.pad_label_indices([[0], [1, 2], [2], [0, 1]], 3)
    model = models.features_classifier(1, 6, 3, mix="top", multi_label=True, **SMALL)
    out = model.fit(features_dataset(feats, labels, batch_size=2), epochs=1, verbose=0).history
    assert {"loss", "micro_f1", "macro_f1"} <= set(out)


def test_features_dataset_rejects_bad_input():
    good = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="features is empty"):
        features_dataset([])
    with pytest.raises(ValueError, match="same L and D"):
        features_dataset([good, np.zeros((2, 2, 4), np.float32)])
    with pytest.raises(ValueError, match="2 labels for 1 texts"):
        features_dataset([good], np.array([0, 1]))
    with pytest.raises(ValueError, match="tokens must match features"):
        features_dataset([good], tokens=[["one", "two", "three"]])
    items = list(features_dataset([good[:1]], tokens=[["naïve"]]).unbatch())
    assert items[0]["tokens"].numpy().tolist() == ["naïve".encode()]


def test_pooled_document_vectors_train_a_mix_over_their_layers(elmo, tmp_path):
    """Long documents (3,000 tokens) beside short ones, embedded as pooled per-layer vectors (float32): each
    vector is the mean of the document's token layers (1e-5), and a mix over the pooled layers learns the
    documents' topic from a dataset read one document at a time, in windows of 4 shards of 4."""
    rng = np.random.default_rng(0)
    topics = [["market", "bank", "rates", "shares"], ["river", "walk", "trees", "water"]]
    labels = np.arange(24) % 2
    docs = [" ".join(rng.choice(topics[y], 3000 if i < 2 else rng.integers(3, 30))) for i, y in enumerate(labels)]
    (tmp_path / "docs.txt").write_text("\n".join(docs) + "\n")
    embedder = ek.ElmoEmbedder(bilm=elmo.bilm)
    ek.embed_file(
        embedder, tmp_path / "docs.txt", tmp_path / "pooled", fmt="shards", pool="mean", shard_lines=4, progress=False
    )
    with ek.load_embeddings(tmp_path / "pooled") as vectors:
        token_layers = next(embedder.embed_sentences([docs[0].split()]))  # [L, T, D]
        np.testing.assert_allclose(vectors[0], token_layers.mean(axis=1), atol=1e-5)
        keras.utils.set_random_seed(0)
        model = models.features_classifier(3, elmo.output_dim, 2, head="pool", mix="trainable", **SMALL)
        model.fit(pooled_dataset(vectors, labels, batch_size=4, shuffle=True), epochs=15, verbose=0)
        scores = model.predict(pooled_dataset(vectors, labels, batch_size=4), verbose=0)
    assert (scores.argmax(-1) == labels).mean() == 1.0
    with pytest.raises(InputError, match="token vectors, not pooled"):
        ek.embed_file(embedder, tmp_path / "docs.txt", tmp_path / "tokens", fmt="shards", progress=False)
        with ek.load_embeddings(tmp_path / "tokens") as vectors:
            PooledTable(vectors)
