"""Feature stores: fit streams the frozen biLM's layers from disk, the same model as in memory, reused and resumed."""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest

from elmo_keras import models
from elmo_keras.errors import InputError
from elmo_keras.tasks import embed_once, feature_store
from elmo_keras.tasks.feature_store import FitTexts, list_stores, remove_store
from elmo_keras.tasks.features import epoch_batches
from tests.fresh import run_cli, run_fresh

WORDS = "good bad great awful film plot acting fun mess boring fine".split()
SMALL = dict(units=8, hidden=16, dropout=0.0, learning_rate=0.02)


def _texts(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` texts of 1 to 12 words (a few repeated, one empty) and their labels (texts with more "good" words)."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, rng.integers(1, 13))) for _ in range(n - 5)]
    texts += [texts[0], texts[1], texts[2], "", "  good\tfilm  "]
    labels = [int(t.count("good") + t.count("great") > t.count("bad") + t.count("awful")) for t in texts]
    return np.array(texts, dtype=object), np.array(labels)


@pytest.fixture()
def small_shards(monkeypatch):
    """Shards of 8 texts and shuffling windows of 16: a few dozen texts span several shards and windows."""
    monkeypatch.setattr(feature_store, "SHARD_LINES", 8)
    monkeypatch.setattr(embed_once, "READ_WINDOW", 16)


def test_epoch_batches_are_a_permutation_that_stays_in_windows():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 50, 1000)
    lengths[[3, 500]] = 5000  # two long documents
    for window, tokens in ((None, None), (128, None), (128, 400)):
        for group in (False, True) if tokens is None else (True,):
            batches = epoch_batches(lengths, 32, True, rng, group, window, tokens)
            assert sorted(np.concatenate(batches)) == list(range(1000))
    order = np.concatenate(epoch_batches(lengths, 32, True, rng, False, 128))
    assert np.count_nonzero(np.diff(order // 128)) == 7, "each window's examples come out together"
    batches = epoch_batches(lengths, 32, False, rng, True, 128)  # validation: fixed, sorted within each window
    order = np.concatenate(batches)
    assert all((np.diff(lengths[order[i : i + 128]]) >= 0).all() for i in range(0, 1000, 128))
    counts = {len(epoch_batches(lengths, 32, True, rng, True, 128, 400)) for _ in range(5)}
    assert len(counts) == 1, "the same number of batches every epoch (Keras is told it once)"
    for batch in epoch_batches(lengths, 32, True, rng, True, 128, 400):
        assert len(batch) <= 32 and (len(batch) * lengths[batch].max() <= 400 or len(batch) == 1)
    assert [len(b) for b in epoch_batches(lengths, 32, True, rng, True, 128, 400) if lengths[b].max() == 5000] == [1, 1]
    with pytest.raises(ValueError, match="batch_tokens needs"):
        epoch_batches(lengths, 32, True, rng, True, None, 400)


def test_store_order_does_not_depend_on_the_input_order():
    texts, _ = _texts(40)
    a, b = FitTexts.of(list(texts)), FitTexts.of(list(texts[::-1]))
    assert a.tokens == b.tokens and a.file_bytes() == b.file_bytes()
    assert len(a.tokens) == len({" ".join(t.split()) for t in texts})  # each distinct text once
    assert [a.tokens[r] for r in a.rows] == [t.split() for t in texts]


def test_disk_and_memory_paths_train_the_same_model(random_elmo, small_shards, tmp_path):
    """Same seed, same initial weights: the store path (5 shards of 8) and the in-memory path give the same loss
    curve (both hold float16 layers; the values can differ by one float16 step where the embedder batched the
    texts differently, so 1e-3 relative)."""
    texts, labels = _texts(40)
    histories, predictions = [], []
    for where in (None, tmp_path / "features"):
        keras.utils.set_random_seed(3)
        model = models.text_classifier(random_elmo, 2, **SMALL)
        history = model.fit(texts, labels, epochs=3, batch_size=4, validation_split=0.25, verbose=0, features_dir=where)
        histories.append(history.history)
        predictions.append(model.predict(texts, verbose=0))
    for key in ("loss", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(histories[1][key], histories[0][key], rtol=1e-3)
    np.testing.assert_allclose(predictions[1], predictions[0], atol=1e-3)
    [store] = list_stores(tmp_path / "features")
    assert store["state"] == "finished" and store["texts"] == len(FitTexts.of(list(texts)).tokens)
    assert len([n for n in os.listdir(os.path.join(store["path"], "layers")) if n.startswith("shard-")]) == 5


def test_over_the_budget_fit_goes_to_a_store_under_the_cache(random_elmo, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    texts, labels = _texts(20)
    model = models.text_classifier(random_elmo, 2, **SMALL)
    model.fit(texts, labels, epochs=1, verbose=2, features_memory=0)
    assert "over the in-memory budget" in capsys.readouterr().out
    assert [s["state"] for s in list_stores()] == ["finished"]
    assert list_stores()[0]["path"].startswith(str(tmp_path / "cache" / "features"))
    with pytest.raises(InputError, match="features_memory must be"):
        model.fit(texts, labels, epochs=1, verbose=0, features_memory=-1)


def test_a_damaged_store_is_named_and_never_used(random_elmo, small_shards, tmp_path):
    texts, labels = _texts(30)
    model = models.text_classifier(random_elmo, 2, **SMALL)
    model.fit(texts, labels, epochs=1, verbose=0, features_dir=tmp_path)
    [store] = list_stores(tmp_path)
    shard = os.path.join(store["path"], "layers", "shard-000001.h5")
    with open(shard, "r+b") as f:  # outside harm: the shard's HDF5 structure is overwritten
        f.write(b"\0" * 512)
    with pytest.raises(InputError, match=f"feature store {store['path']} is damaged .*shard-000001.h5.*--remove"):
        model.fit(texts, labels, epochs=1, verbose=0, features_dir=tmp_path)
    identity = os.path.join(store["path"], "store.json")
    os.remove(shard)
    with open(identity) as f:
        edited = {**json.load(f), "storage_dtype": "float32"}
    with open(identity, "w") as f:
        json.dump(edited, f)
    with pytest.raises(InputError, match="store.json differs in storage_dtype"):
        model.fit(texts, labels, epochs=1, verbose=0, features_dir=tmp_path)
    assert remove_store(store["path"]) > 0 and list_stores(tmp_path) == []
    model.fit(texts, labels, epochs=1, verbose=0, features_dir=tmp_path)  # embedded anew
    assert [s["state"] for s in list_stores(tmp_path)] == ["finished"]
    with pytest.raises(InputError, match="not a feature store"):
        remove_store(tmp_path)


def test_a_second_fit_in_a_fresh_process_embeds_nothing(tmp_path):
    """Another head and mix, the texts in another order, in a new process: nothing is embedded (the embedder
    would raise), the store is read."""
    script = """
        import sys
        import numpy as np
        import elmo_keras as ek
        from elmo_keras import models
        from tests.test_feature_store import _texts
        texts, labels = _texts(30)
        if sys.argv[1] == "again":
            def refuse(*args, **kwargs):
                raise AssertionError("embedded again")
            ek.ElmoEmbedder.embed_sentences = refuse
            texts, labels = texts[::-1], labels[::-1]
        elmo = ek.Elmo.from_preset("brown-small")
        mix = "trainable" if sys.argv[1] == "first" else "mlp"
        model = models.text_classifier(elmo, 2, head="pool" if sys.argv[1] == "first" else "bigru", mix=mix, units=4)
        model.fit(texts, labels, epochs=1, verbose=2, features_dir="features")
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    distinct = len(FitTexts.of(list(_texts(30)[0])).tokens)
    for step, said in (
        ("first", f"({distinct} texts embedded now, 0 reused)"),
        ("again", f"(0 texts embedded now, {distinct} reused)"),
    ):
        code = "import sys; sys.argv = ['x', %r]; sys.path.insert(0, %r)\n" % (step, root)
        done = run_fresh(code + textwrap.dedent(script), tmp_path)
        assert said in done.stdout, done.stdout


def _train_command(data: str, features: str) -> list[str]:
    return [
        "train",
        "--data",
        data,
        "--preset",
        "brown-small",
        "--epochs",
        "2",
        "--units",
        "8",
        "--words",
        "0",
        "--head",
        "pool",
        "--out",
        f"{features}.keras",
        "--features-dir",
        features,
    ]


def test_train_killed_while_embedding_resumes_with_the_same_accuracy(tmp_path):
    """`train --features-dir` SIGKILLed once a shard is committed, run again: it reuses the committed shards and
    ends with the accuracy of an uninterrupted run (the same layers, the same seed: the same model)."""
    news = os.path.join(os.path.dirname(feature_store.__file__), "..", "data", "ag_news", "test.csv")
    with open(news, newline="") as f:
        rows = list(csv.reader(f))[:2600]
    with open(tmp_path / "news.csv", "w", newline="") as f:
        csv.writer(f).writerows([("label", "text"), *((label, f"{title} . {text}") for label, title, text in rows)])
    data = "news.csv"
    log = open(tmp_path / "killed.log", "w")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    killed = subprocess.Popen(
        [sys.executable, "-m", "elmo_keras.cli", *_train_command(data, "killed")],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 300
    partial = None
    while time.monotonic() < deadline and killed.poll() is None:
        found = [os.path.join(d, "layers.partial") for d, _, _ in os.walk(tmp_path / "killed")]
        partial = next((p for p in found if os.path.exists(os.path.join(p, "shard-000000.h5"))), None)
        if partial:
            break
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert partial, (tmp_path / "killed.log").read_text()[-3000:]
    assert len([n for n in os.listdir(partial) if n.endswith(".h5")]) < 3, "killed after the embedding"
    resumed = run_cli(*_train_command(data, "killed"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "reused)" in resumed.stdout and " 0 reused)" not in resumed.stdout, resumed.stdout
    whole = run_cli(*_train_command(data, "whole"), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]

    def accuracy(done) -> float:
        return float(done.stdout.split("test: accuracy ")[1].split(",")[0])

    assert abs(accuracy(resumed) - accuracy(whole)) <= 0.01, (resumed.stdout, whole.stdout)
    listed = run_cli("features", "--dir", "killed", cwd=tmp_path)
    assert "1 feature store(s)" in listed.stdout and "finished" in listed.stdout, listed.stdout
    removed = run_cli("features", "--dir", "killed", "--remove-all", cwd=tmp_path)
    assert "removed 1 feature store(s)" in removed.stdout and list_stores(tmp_path / "killed") == []


def test_train_embeds_its_store_on_beam_and_the_local_runner_reuses_it(tmp_path, fixture_files):
    """`train --runner beam --features-dir` writes the store through a Beam pipeline; a local `train` on the
    same data reads it (the same identity: the same model files, texts and settings)."""
    texts, labels = _texts(60)
    with open(tmp_path / "reviews.csv", "w", newline="") as f:
        csv.writer(f).writerows([("text", "label"), *((t, ["neg", "pos"][y]) for t, y in zip(texts, labels))])
    train = ["train", "--data", "reviews.csv", "--options", fixture_files[0], "--weights", fixture_files[1]]
    train += ["--epochs", "1", "--units", "4", "--words", "0", "--head", "pool", "--features-dir", "features"]
    beam = run_cli(*train, "--out", "beam.keras", "--runner", "beam", "--num-workers", "1", cwd=tmp_path)
    assert beam.returncode == 0 and " texts embedded now, 0 reused)" in beam.stdout, beam.stderr[-3000:]
    local = run_cli(*train, "--out", "local.keras", "--mix", "mlp", cwd=tmp_path)
    assert local.returncode == 0 and "(0 texts embedded now, " in local.stdout, local.stderr[-3000:]
