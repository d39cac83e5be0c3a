"""A killed `elmo-keras pretrain` resumed from its mid-epoch backup ends where an uninterrupted run with the same
seed ends: the same validation perplexity (1e-5 relative) and weights (allclose at atol 1e-5). The run uses
dropout and shuffling, so the dropout seeds and the data order must be restored, not only the weights and Adam.

The killed runs are CLI processes stopped with real signals right after the backup folder shows a mid-epoch
backup (kill -9 in epoch 1; SIGTERM of the resumed process in epoch 2); the last resume and the reference run
call ``elmo_keras.cli.main`` in this process."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from test_lm import TINY

from elmo_keras.cli import main
from elmo_keras.tasks.datasets import load_brown

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
RTOL, ATOL = 1e-5, 1e-5  # measured: identical (0.0) on this CPU
OPTIONS = {**TINY, "batch_size": 16, "dropout": 0.1, "shuffle_buffer": 300, "backup_every_steps": 7, "seed": 3}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("resume")
    sentences = [" ".join(tokens) for tokens in load_brown()[0][:1500]]
    train, valid, options = root / "train.txt", root / "valid.txt", root / "options.json"
    train.write_text("\n".join(sentences[:1300]) + "\n", encoding="utf-8")
    valid.write_text("\n".join(sentences[1300:]) + "\n", encoding="utf-8")
    options.write_text(json.dumps(OPTIONS))
    return train, valid, options


def _argv(corpus, out: Path) -> list[str]:
    train, valid, options = corpus
    return [
        *("pretrain", "--train", str(train), "--valid", str(valid)),
        *("--options", str(options), "--out", str(out), "--epochs", "2"),
    ]


def _stop_mid_epoch(argv: list[str], out: Path, epoch: int, sig: int) -> dict:
    """Run ``argv`` in its own process; send ``sig`` once a backup of the middle of ``epoch`` (0-based) is there;
    return the backup's metadata as it was then."""
    metadata_path = out / "backup" / "training_metadata.json"
    log = out.parent / f"{out.name}-{sig}.log"
    with open(log, "w") as stream:
        proc = subprocess.Popen(
            [sys.executable, "-m", "elmo_keras.cli", *argv],
            stdout=stream,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    try:
        deadline = time.time() + 150
        while True:
            assert proc.poll() is None and time.time() < deadline, log.read_text()
            if metadata_path.exists():  # written under a temporary name, then renamed: always whole
                metadata = json.loads(metadata_path.read_text())
                if metadata["epoch"] == epoch and metadata["steps_done"] >= 14:
                    break
            time.sleep(0.05)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / "weights.hdf5").exists(), log.read_text()
    return metadata


def _arrays(out: Path) -> dict[str, np.ndarray]:
    arrays = {}
    for name in ("weights.hdf5", "softmax.hdf5"):
        with h5py.File(out / name, "r") as f:
            f.visititems(
                lambda key, obj: arrays.__setitem__(f"{name}/{key}", obj[()]) if hasattr(obj, "dtype") else None
            )
    return arrays


def test_killed_and_terminated_runs_resume_to_the_uninterrupted_weights(corpus, tmp_path, capsys):
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    assert main(_argv(corpus, reference)) == 0

    first = _stop_mid_epoch(_argv(corpus, resumed), resumed, 0, signal.SIGKILL)
    second = _stop_mid_epoch(_argv(corpus, resumed), resumed, 1, signal.SIGTERM)
    assert second["position"] > first["position"] and second["iterations"] == second["position"]
    capsys.readouterr()
    assert main(_argv(corpus, resumed)) == 0
    printed = capsys.readouterr().out
    assert "resuming epoch 2 after its step" in printed and "epoch 1:" not in printed  # epoch 1 is not redone

    expected = json.loads((reference / "state.json").read_text())
    state = json.loads((resumed / "state.json").read_text())
    assert state["epochs_completed"] == expected["epochs_completed"] == 2
    for direction in ("forward", "backward"):
        assert state["valid_perplexity"][direction] == pytest.approx(expected["valid_perplexity"][direction], rel=RTOL)
    np.testing.assert_allclose(state["history"]["val_loss"], expected["history"]["val_loss"], rtol=RTOL)
    want, got = _arrays(reference), _arrays(resumed)
    assert want.keys() == got.keys() and len(want) > 10
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=ATOL, err_msg=key)
    print(  # the measured differences, for the record (pytest -s)
        "max |weight difference|:",
        max(float(np.abs(got[k] - want[k]).max()) for k in want),
        "valid perplexity:",
        expected["valid_perplexity"],
        state["valid_perplexity"],
    )
