"""Pretraining in other processes: kill mid-epoch + resume, MirroredStrategy (2 replicas), 2-worker
MultiWorkerMirroredStrategy on localhost; both strategies must match a single-process run."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from elmo_keras.lm import BiLanguageModel, Vocabulary, pretrain

pytestmark = pytest.mark.slow

TINY = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1, "embedding": {"dim": 4}},
    "lstm": {
        "dim": 16,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "batch_size": 4,
    "dropout": 0.0,
    "shuffle_buffer": 0,
    "learning_rate": 0.01,
    "buckets": [10],
}
# Distributed runs are compared with a single-process run: same data in the same global batches, full softmax,
# no dropout, loss normalised by the global token count. Differences come only from float summation order.
RTOL = 1e-5  # measured: 2e-7 relative (loss and perplexity)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO, **extra}


def _text(path, n_sentences, length, seed):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(12)]
    start = rng.integers(0, 12, n_sentences)  # learnable: each sentence counts up from a random word
    path.write_text(
        "".join(" ".join(words[(s + k) % 12] for k in range(length)) + "\n" for s in start), encoding="utf-8"
    )
    return path


def _cli(*args):
    return [sys.executable, "-m", "elmo_keras.cli", "pretrain", *map(str, args)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    options = root / "options.json"
    options.write_text(json.dumps(TINY))
    return root, _text(root / "train.txt", 16, 6, 0), options


@pytest.fixture(scope="module")
def single(data):
    root, train, options = data
    _, state = pretrain([train], train, str(options), root / "single", epochs=2, verbose=0, log=lambda _: None)
    return state


def _assert_same_run(state, reference):
    assert state["epochs_completed"] == 2
    np.testing.assert_allclose(state["history"]["loss"], reference["history"]["loss"], rtol=RTOL)
    for direction in ("forward", "backward"):
        assert state["valid_perplexity"][direction] == pytest.approx(reference["valid_perplexity"][direction], rel=RTOL)


def test_multi_worker_matches_single_process(data, single):
    root, train, options = data
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = [
        subprocess.Popen(
            _cli(
                "--train",
                train,
                "--valid",
                train,
                "--options",
                options,
                "--out",
                root / f"worker{i}",
                "--epochs",
                2,
                "--strategy",
                "multiworker",
            ),
            env=_env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    state = json.loads((root / "worker0" / "state.json").read_text())  # the chief writes the results
    assert not (root / "worker1" / "weights.hdf5").exists()
    _assert_same_run(state, single)


def test_mirrored_two_replicas_matches_single_process(data, single):
    root, train, options = data
    script = f"""
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2
from elmo_keras.lm import pretrain
pretrain([{str(train)!r}], {str(train)!r}, {str(options)!r}, {str(root / "mirrored")!r}, epochs=2,
         strategy=strategy, verbose=0)
"""
    run = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    _assert_same_run(json.loads((root / "mirrored" / "state.json").read_text()), single)


def test_killed_mid_epoch_resumes_and_loss_continues(tmp_path):
    train = _text(tmp_path / "train.txt", 400, 8, 1)
    options = tmp_path / "options.json"
    opts = {**TINY, "batch_size": 2, "shuffle_buffer": 100, "learning_rate": 0.02, "backup_every_steps": 5}
    options.write_text(json.dumps(opts))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cli("--train", train, "--options", options, "--out", out, "--epochs", 2),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    metadata, deadline = out / "backup" / "training_metadata.json", time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if metadata.exists() and json.loads(metadata.read_text() or "{}").get("batch", 0) >= 60:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the training process ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads(metadata.read_text())["epoch"] == 0  # killed in the middle of epoch 1 (200 batches)
    assert not (out / "weights.hdf5").exists()

    sentences = train.read_text(encoding="utf-8").splitlines()[:64]
    vocab = Vocabulary.load(out / "vocab.txt")
    fresh = BiLanguageModel(json.loads((out / "options.json").read_text()), vocab, dropout=0.0)
    fresh.build()
    start = fresh.perplexity(sentences)["forward"]  # the same random initialisation as the killed run's (seed 0)

    class Probe:
        resumed = None

    import keras

    class Recorder(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if Probe.resumed is None:  # weights restored by BackupAndRestore at train begin
                Probe.resumed = self.model.perplexity(sentences)["forward"]

    model, state = pretrain(
        [train], None, str(options), out, epochs=2, callbacks=[Recorder()], verbose=0, log=lambda _: None
    )
    assert state["epochs_completed"] == 2 and (out / "weights.hdf5").exists()
    assert not (out / "backup").exists()
    assert Probe.resumed < 0.5 * start  # continued from the backup, not from scratch
    assert model.perplexity(sentences)["forward"] < Probe.resumed
