"""Everything the package saves reloads in a fresh process: each model kind as a ``.keras`` file with only
``import elmo_keras`` (outputs equal, 0.0), and as a SavedModel with only ``import tensorflow`` while elmo_keras is
not importable (within 1e-5). Models are built and saved here; every reload runs in its own interpreter."""

import json
import pickle
import pkgutil

import keras
import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras import baselines, models
from elmo_keras.errors import InputError
from elmo_keras.export import export_serving, model_kind
from elmo_keras.text import tokenize
from tests.fresh import run_fresh

TEXTS = ["The bank approved the loan .", "Hi", "", "the bank of the river was green and steep"]
HEAD_MIX = [  # every head and every mix at least once, with and without task words, multi-label, max_tokens
    dict(head="bigru", mix="trainable", words=True),
    dict(head="bilstm_bigru", mix="fixed", mix_weights=[0.5, 0.2, 0.3]),
    dict(head="pool", mix="mlp", words=True, max_tokens=3),
    dict(head="bigru", mix="top", multi_label=True),
    dict(head="pool", mix="average", multi_label=True, max_tokens=4, words=True),
    dict(head="bigru", mix="concat"),
]


def _words():
    return ek.StaticEmbedding.from_corpus([tokenize(t) for t in TEXTS], 6, name="words")


def _classifier(elmo, head, mix, words=False, multi_label=False, **kwargs):
    return models.text_classifier(
        elmo,
        3,
        head=head,
        mix=mix,
        units=4,
        hidden=5,
        multi_label=multi_label,
        word_embedding=_words() if words else None,
        **kwargs,
    )


def _features(elmo, words: bool):
    layers = np.stack([np.asarray(x) for x in elmo.as_layers()(np.array(TEXTS))], axis=2)
    tokens = models.pad_tokens([s.split() for s in TEXTS])
    inputs = {"layers": layers, "mask": tokens != ""}
    if words:
        inputs["tokens"] = tokens
    model = models.features_classifier(
        3, layers.shape[-1], 2, units=4, hidden=5, word_embedding=_words() if words else None
    )
    return model, inputs


def _static_baseline():
    vectors = baselines.train_svd_ppmi([tokenize(t) for t in TEXTS * 3], dim=4, window=2, min_count=1)
    return models.text_classifier(vectors.embedding(name="svd_ppmi"), 2, head="pool", units=4, hidden=5)


def _elmo_models(elmo_files):
    text = keras.Input(shape=(), dtype="string")
    plain = keras.Model(text, ek.Elmo.from_pretrained(*elmo_files, output_mode="elmo")(text), name="elmo")
    layers = ek.Elmo.from_pretrained(*elmo_files, output_mode="layers")(text)
    mixed = keras.Model(text, ek.ScalarMix(mix_weights=[0.2, 0.3, 0.5])(layers), name="elmo_mix")
    return plain, mixed


@pytest.fixture(scope="module")
def saved(tmp_path_factory, fixture_files):
    """name -> (file, inputs, outputs, export folder or None), all written to a folder of .keras files."""
    folder = tmp_path_factory.mktemp("fresh")
    elmo = ek.Elmo.from_pretrained(*fixture_files)
    texts, tokens = np.array(TEXTS), models.pad_tokens([s.split() for s in TEXTS])
    # exported: one model of each kind (a trained classifier with words, multi-label with segments, a tagger, a
    # static baseline, two embedders); the other heads and mixes only differ inside the Keras graph
    built = {f"text_classifier_{i}": (_classifier(elmo, **kw), texts, i in (0, 4)) for i, kw in enumerate(HEAD_MIX)}
    built["sequence_tagger"] = (models.sequence_tagger(elmo, 4, units=4), tokens, True)
    built["static_baseline"] = (_static_baseline(), texts, True)
    built["elmo"], built["elmo_mix"] = [(m, texts, True) for m in _elmo_models(fixture_files)]
    for words in (False, True):
        model, inputs = _features(elmo, words)
        built[f"features_classifier_{words}"] = (model, inputs, False)
    lm = ek.lm.BiLanguageModel(elmo.bilm.options, ["<S>", "</S>", "<UNK>", "the", "bank"], dropout=0.0)
    char_ids = ek.batch_to_ids([["<S>", "the", "bank", "</S>"], ["<S>", "Hi", "</S>"]])
    built["bi_language_model"] = (lm, char_ids, False)
    # a model that was trained (optimizer state in the file), as `elmo-keras train` writes it
    built["text_classifier_0"][0].fit(texts, np.array([0, 1, 2, 0]), epochs=1, verbose=0)
    table = {}
    for name, (model, inputs, exportable) in built.items():
        inputs = keras.tree.map_structure(np.asarray, inputs)
        outputs = keras.tree.map_structure(np.asarray, model(inputs, training=False))
        (folder / f"{name}.pickle").write_bytes(pickle.dumps((inputs, outputs)))
        model.save(folder / f"{name}.keras")
        export = export_serving(model, folder / "saved" / name, warmup_texts=None) if exportable else None
        table[name] = (model, export)
    return folder, table


def test_every_model_kind_reloads_with_only_import_elmo_keras(saved):
    folder, table = saved
    done = run_fresh(
        f"""
        import json, pickle, sys
        import numpy as np
        import keras
        import elmo_keras
        assert "elmo_keras.baselines" not in sys.modules and "elmo_keras.train_task" not in sys.modules
        gaps = {{}}
        for name in {sorted(table)!r}:
            model = keras.models.load_model(f"{{name}}.keras")
            with open(f"{{name}}.pickle", "rb") as f:
                inputs, expected = pickle.load(f)
            outputs = keras.tree.map_structure(np.asarray, model(inputs, training=False))
            gaps[name] = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                             for a, b in zip(keras.tree.flatten(outputs), keras.tree.flatten(expected)))
        print(json.dumps(gaps))
        """,
        cwd=folder,
    )
    gaps = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(gaps) == set(table)
    assert gaps == {name: 0.0 for name in table}


def test_every_export_serves_with_only_tensorflow(saved):
    folder, table = saved
    exports = {name: export for name, (_, export) in table.items() if export}
    assert set(exports) == {
        "text_classifier_0",
        "text_classifier_4",
        "sequence_tagger",
        "static_baseline",
        "elmo",
        "elmo_mix",
    }
    assert {model_kind(table[name][0]) for name in exports} == {"classifier", "multi_label", "tagger", "embedder"}
    texts = TEXTS + ["a fresh text , never seen"]
    done = run_fresh(
        f"""
        import json
        import numpy as np
        import tensorflow as tf
        try:
            import elmo_keras
            raise SystemExit("elmo_keras should not be importable here")
        except ImportError:
            pass
        served = {{}}
        for name, folder in {exports!r}.items():
            outputs = tf.saved_model.load(folder).signatures["serving_default"](text=tf.constant({texts!r}))
            served[name] = {{key: value.numpy().tolist() for key, value in outputs.items()
                             if value.dtype != tf.string}}
        print(json.dumps(served))
        """,
        cwd=folder,
        without_package=True,
    )
    served = json.loads(done.stdout.strip().splitlines()[-1])
    tokens = models.pad_tokens([s.split() for s in texts])
    for name, export in exports.items():
        model, kind = table[name][0], model_kind(table[name][0])
        if kind == "tagger":
            expected, got = model(tokens), served[name]["probabilities"]
        elif kind == "embedder":
            expected, got = model(np.array(texts)), served[name]["elmo"]
            np.testing.assert_array_equal(served[name]["mask"], tokens != "")
        else:
            expected = model(np.array(texts))
            got = served[name]["scores" if kind == "multi_label" else "probabilities"]
        np.testing.assert_allclose(got, np.asarray(expected), atol=1e-5, err_msg=name)


def test_models_that_do_not_take_text_are_refused_by_name(saved):
    _, table = saved
    for name, why in [
        ("features_classifier_False", "precomputed biLM layers"),
        ("features_classifier_True", "precomputed biLM layers"),
        ("bi_language_model", "not a functional model over text"),
    ]:
        with pytest.raises(InputError, match=why):
            model_kind(table[name][0])
    char_ids = keras.Input(shape=(None, 50), dtype="int32")
    char_model = keras.Model(char_ids, ek.BiLM.from_pretrained(*_fixture_files())(char_ids)["layers"][-1])
    with pytest.raises(InputError, match="char-id model"):
        model_kind(char_model)


def _fixture_files():
    from tests.conftest import FIXTURE

    return str(FIXTURE / "options.json"), str(FIXTURE / "lm_weights.hdf5")


def test_every_saveable_class_is_registered_by_import_elmo_keras(tmp_path):
    """Importing every module registers nothing that ``import elmo_keras`` alone did not, and every public Keras
    layer, model, loss or metric class of the package is registered."""
    modules = sorted(
        m.name
        for m in pkgutil.walk_packages(ek.__path__, "elmo_keras.")
        if m.name not in ("elmo_keras.beam", "elmo_keras.cli")
    )
    abstract = ["elmo_keras.layers.causal.CausalBiEncoder"]  # a base class: only its subclasses are saved
    done = run_fresh(
        f"""
        import importlib, inspect, json
        import keras
        import elmo_keras
        before = sorted(elmo_keras.saving.registered_names())
        for name in {modules!r} + ["elmo_keras.beam", "elmo_keras.cli"]:
            try:
                importlib.import_module(name)
            except ImportError as err:  # an optional extra that is not installed
                assert name in ("elmo_keras.beam",), (name, err)
        after = sorted(elmo_keras.saving.registered_names())
        bases = (keras.layers.Layer, keras.losses.Loss, keras.metrics.Metric)
        unregistered = sorted(
            f"{{m}}.{{n}}" for m in {modules!r} for n, c in vars(importlib.import_module(m)).items()
            if inspect.isclass(c) and issubclass(c, bases) and c.__module__ == m and not n.startswith("_")
            and keras.saving.get_registered_name(c) == n and f"{{m}}.{{n}}" not in {abstract!r})
        print(json.dumps({{"before": before, "after": after, "unregistered": unregistered}}))
        """,
        cwd=tmp_path,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["after"] == found["before"], set(found["after"]) - set(found["before"])
    assert found["unregistered"] == []
    assert "elmo_keras>StaticEmbedding" in found["before"]
