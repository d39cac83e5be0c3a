"""Serving export: versions, signatures, a Python without elmo_keras, core ops only, warmup requests."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras import models
from elmo_keras.export import WARMUP_FILE, export_serving

TEXTS = ["The bank approved the loan .", "Hi", "", "Ünïcödé 😀 text here", "  spaced   out  "]
BATCH_64 = [" ".join(["word"] * (i % 13 + 1)) + f" {i}" for i in range(64)]

# Runs in a fresh interpreter in which `import elmo_keras` fails: load each export, feed raw strings.
SERVE_SCRIPT = r"""
import json, sys
sys.modules["elmo_keras"] = None
import tensorflow as tf
try:
    import elmo_keras
    raise SystemExit("elmo_keras is importable")
except ImportError:
    pass
jobs = json.loads(sys.stdin.read())
result = {}
for name, (path, batches) in jobs.items():
    fn = tf.saved_model.load(path).signatures["serving_default"]
    result[name] = [{k: v.numpy().tolist() if v.dtype != tf.string else [x.decode() if isinstance(x, bytes)
                     else [y.decode() for y in x] for x in v.numpy().tolist()]
                     for k, v in fn(text=tf.constant(batch)).items()} for batch in batches]
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def elmo(fixture_files):
    return ek.Elmo.from_pretrained(*fixture_files, dropout=0.0)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, elmo):
    root = tmp_path_factory.mktemp("saved_models")
    small = dict(units=8, hidden=16)
    built = {
        "classifier": (models.text_classifier(elmo, 3, **small), ["world", "sports", "business"]),
        "multi_label": (models.text_classifier(elmo, 5, multi_label=True, head="pool", **small), None),
        "tagger": (models.sequence_tagger(elmo, 3, **small), ["O", "B-PER", "I-PER"]),
        "embedder": (elmo, None),
    }
    return {
        kind: (model, export_serving(model, root / kind, label_names=names), names)
        for kind, (model, names) in built.items()
    }


@pytest.fixture(scope="module")
def served(exports):
    jobs = {kind: (path, [TEXTS, ["Hi"], BATCH_64]) for kind, (_, path, _) in exports.items()}
    proc = subprocess.run(
        [sys.executable, "-c", SERVE_SCRIPT],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("batch", [0, 1, 2])
def test_classifier_served_without_elmo_keras_matches_keras(exports, served, batch):
    model, _, names = exports["classifier"]
    texts = [TEXTS, ["Hi"], BATCH_64][batch]
    expected = model.predict(np.array(texts, dtype=object), verbose=0)
    got = served["classifier"][batch]
    np.testing.assert_allclose(np.array(got["probabilities"]), expected, atol=1e-5)
    assert got["label"] == [names[i] for i in expected.argmax(1)]


def test_multi_label_tagger_and_embedder_served(exports, served):
    model = exports["multi_label"][0]
    np.testing.assert_allclose(
        np.array(served["multi_label"][0]["scores"]), model.predict(np.array(TEXTS, dtype=object), verbose=0), atol=1e-5
    )
    tagger, _, tag_names = exports["tagger"]
    got = served["tagger"][0]
    tokens = models.pad_tokens([ek.tokenize(t) for t in TEXTS])
    expected = tagger.predict(tokens, verbose=0)
    width = expected.shape[1]
    np.testing.assert_allclose(np.array(got["probabilities"])[:, :width], expected, atol=1e-5)
    for row, text in enumerate(TEXTS):
        n = len(ek.tokenize(text))
        assert got["tags"][row][:n] == [tag_names[i] for i in expected[row, :n].argmax(-1)]
        assert set(got["tags"][row][n:]) <= {""}
    elmo = exports["embedder"][0]
    out = elmo(tf.constant(TEXTS))
    np.testing.assert_allclose(
        np.array(served["embedder"][0]["elmo"]), out["elmo_representations"][0].numpy(), atol=1e-5
    )
    np.testing.assert_array_equal(np.array(served["embedder"][0]["mask"]), out["mask"].numpy())


def test_only_core_tensorflow_ops(exports):
    from tensorflow.core.protobuf import saved_model_pb2

    core = {name for name in dir(tf.raw_ops) if not name.startswith("_")}
    for kind, (_, path, _) in exports.items():
        proto = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        graph = proto.meta_graphs[0].graph_def
        ops = {node.op for node in graph.node}
        for function in graph.library.function:
            ops |= {node.op for node in function.node_def}
        library = {function.signature.name for function in graph.library.function}
        unknown = {op for op in ops - library if op not in core}
        assert not unknown, f"{kind}: non-core ops {unknown}"
        assert not ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def test_saved_model_cli_shows_and_runs_the_signature(exports):
    path = exports["classifier"][1]
    cli = [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    shown = subprocess.run(cli + ["show", "--dir", path, "--all"], capture_output=True, text=True, env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    for name in ("serving_default", "text", "probabilities", "label"):
        assert name in shown.stdout
    ran = subprocess.run(
        cli
        + [
            "run",
            "--dir",
            path,
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            'text=["hello world", ""]',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "probabilities" in ran.stdout and "label" in ran.stdout


def test_warmup_requests_parse_and_run(exports):
    from tensorflow_serving.apis import prediction_log_pb2

    path = exports["classifier"][1]
    fn = tf.saved_model.load(path).signatures["serving_default"]
    records = list(tf.data.TFRecordDataset(os.path.join(path, WARMUP_FILE)).as_numpy_iterator())
    assert len(records) == 3
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert request.model_spec.name == "classifier"
        out = fn(text=tf.constant(tf.make_ndarray(request.inputs["text"])))
        assert out["probabilities"].shape == (1, 3)


def test_versions_are_numbered_and_never_half_written(tmp_path, exports):
    model = exports["multi_label"][0]
    first = export_serving(model, tmp_path / "m", warmup_texts=None)
    second = export_serving(model, tmp_path / "m", warmup_texts=None)
    assert [os.path.basename(first), os.path.basename(second)] == ["1", "2"]
    with pytest.raises(FileExistsError, match="pick another version"):
        export_serving(model, tmp_path / "m", version=2)
    assert sorted(os.listdir(tmp_path / "m")) == ["1", "2"]  # no temporary folder left behind


def test_bad_exports(tmp_path, exports, fixture_options):
    with pytest.raises(ValueError, match="2 class names"):
        export_serving(exports["classifier"][0], tmp_path / "x", label_names=["a", "b"])
    with pytest.raises(TypeError, match="keras.Model or an Elmo"):
        export_serving(ek.ScalarMix(3), tmp_path / "y")
    assert not os.path.exists(tmp_path / "x" / "1")
