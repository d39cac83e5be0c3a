"""The CLI as a user runs it: each step is its own process, each step is SIGKILLed once and run again, and what
it wrote is used by the next step in a fresh process (train -> export -> served without elmo_keras;
pretrain -> embed -> ek.load_embeddings); train and export over a file-size limit keep what was there."""

import csv
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np

import elmo_keras as ek
from tests.fresh import run_cli, run_fresh
from tests.test_bad_input_cli import TINY_LM, TRAIN

ROWS = [("good fun movie", "pos"), ("bad boring film", "neg"), ("great acting", "pos"), ("awful plot", "neg")]


def _start(args: list[str], cwd: Path, log: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "elmo_keras.cli", *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            **kwargs,
        )


def _kill_when(process: subprocess.Popen, ready, log: Path, timeout: float = 300) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` is true (it must still be running then)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"finished before the kill point:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"kill point not reached:\n{log.read_text()[-3000:]}"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _no_room_keeps_the_old_model(train: list[str], folder: Path) -> None:
    """``train`` over an existing model, then ``export``, under a file-size limit (as a full disk): one clear
    line, exit 2, the old model and labels intact, no half-written export, no temporary left."""
    before = (folder / "m.keras").read_bytes()
    labels = (folder / "m.keras.labels.json").read_text()

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, resource.RLIM_INFINITY))

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    for args, written in [
        ([*train, "--epochs", "1"], "m.keras"),
        (["export", "m.keras", "--out", "saved/limited"], folder / "saved" / "limited"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "elmo_keras.cli", *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=limit_file_size,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert (
            done.stderr.strip()
            .splitlines()[-1]
            .startswith(f"elmo-keras {args[0]}: error: disk full or file too large writing {written} ")
        ), done.stderr[-3000:]
    assert (folder / "m.keras").read_bytes() == before
    assert (folder / "m.keras.labels.json").read_text() == labels
    assert os.listdir(folder / "saved" / "limited") == []
    assert not [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_train_export_serve_each_killed_once(tmp_path, fixture_files):
    with open(tmp_path / "reviews.csv", "w", newline="", encoding="utf-8-sig") as f:  # with a BOM, as Excel writes
        csv.writer(f).writerows([("text", "label"), *ROWS * 5])
    train = [
        "train",
        "--data",
        "reviews.csv",
        "--options",
        fixture_files[0],
        "--weights",
        fixture_files[1],
        "--epochs",
        "2",
        "--units",
        "4",
        "--out",
        "m.keras",
    ]  # the default --words 128: a StaticEmbedding
    log = tmp_path / "train.log"
    _kill_when(_start(train, tmp_path, log), lambda: "Epoch 1/" in log.read_text(), log)
    assert not (tmp_path / "m.keras").exists()
    done = _ok(run_cli(*train, cwd=tmp_path))
    assert "test: accuracy" in done.stdout
    assert json.loads((tmp_path / "m.keras.labels.json").read_text()) == ["neg", "pos"]
    _no_room_keeps_the_old_model(train, tmp_path)

    export = ["export", "m.keras", "--out", "saved/reviews"]
    log = tmp_path / "export.log"
    base = tmp_path / "saved" / "reviews"
    _kill_when(
        _start(export, tmp_path, log),
        lambda: base.is_dir() and any(name.startswith(".tmp-") for name in os.listdir(base)),
        log,
    )
    _ok(run_cli(*export, cwd=tmp_path))
    assert os.listdir(base) == ["1"], "the killed export's .tmp- folder is cleaned by the next export"
    assert json.loads((tmp_path / "m.keras.labels.json").read_text()) == ["neg", "pos"]
    both = [_start(export, tmp_path, tmp_path / f"export{i}.log") for i in (2, 3)]
    assert [p.wait() for p in both] == [0, 0]
    assert sorted(os.listdir(base)) == ["1", "2", "3"]

    texts = ["good acting", "boring plot , awful", ""]
    served = run_fresh(
        f"""
        import json
        import tensorflow as tf
        out = tf.saved_model.load("saved/reviews/3").signatures["serving_default"](text=tf.constant({texts!r}))
        print(json.dumps({{"p": out["probabilities"].numpy().tolist(),
                           "label": [x.decode() for x in out["label"].numpy()]}}))
        """,
        cwd=tmp_path,
        without_package=True,
    )
    served = json.loads(served.stdout.strip().splitlines()[-1])
    expected = keras.models.load_model(tmp_path / "m.keras").predict(texts, verbose=0)
    np.testing.assert_allclose(served["p"], expected, atol=1e-5)
    assert served["label"] == [["neg", "pos"][i] for i in expected.argmax(-1)]


def test_pretrain_embed_load_each_killed_once(tmp_path):
    (tmp_path / "options.json").write_text(json.dumps(TINY_LM))
    pretrain = [
        "pretrain",
        "--train",
        str(TRAIN / "data.txt"),
        "--options",
        "options.json",
        "--out",
        "lm",
        "--epochs",
        "3",
    ]
    log = tmp_path / "pretrain.log"
    _kill_when(
        _start(pretrain, tmp_path, log),
        lambda: (tmp_path / "lm" / "backup").is_dir() and "Epoch 2/" in log.read_text(),
        log,
    )
    _ok(run_cli(*pretrain, cwd=tmp_path))
    assert json.loads((tmp_path / "lm" / "state.json").read_text())["epochs_completed"] == 3

    lines = [" ".join(["the", "bank", "of", "words"][: 1 + i % 4]) for i in range(60)] + ["", "one more line"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    embed = [
        "embed",
        "in.txt",
        "out",
        "--preset",
        "lm",
        "--format",
        "shards",
        "--shard-lines",
        "8",
        "--batch-size",
        "4",
        "--dtype",
        "float32",
    ]
    log = tmp_path / "embed.log"
    _kill_when(_start(embed, tmp_path, log), lambda: (tmp_path / "out.partial").is_dir(), log)
    _ok(run_cli(*embed, cwd=tmp_path))

    done = run_fresh(
        """
        import json
        import numpy as np
        import elmo_keras as ek
        with ek.load_embeddings("out") as vectors:
            print(json.dumps([np.asarray(v).tolist() for v in vectors]))
        """,
        cwd=tmp_path,
    )
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    embedder = ek.ElmoEmbedder(
        str(tmp_path / "lm" / "options.json"), str(tmp_path / "lm" / "weights.hdf5"), dtype="float32"
    )
    expected = list(embedder.embed_sentences([line.split() for line in lines]))
    assert len(loaded) == len(lines)
    for got, want in zip(loaded, expected):
        np.testing.assert_allclose(np.asarray(got, np.float32).reshape(want.shape), want, atol=1e-5)
