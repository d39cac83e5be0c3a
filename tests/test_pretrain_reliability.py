"""`elmo-keras pretrain` under hostile use: a second run into a busy --out is refused (a lock); bad input is one
line and exit 2, before training, leaving nothing behind; a run killed after its last epoch resumes without
redoing it; a re-run on other files or options is refused unless --restart; a failed or interrupted first run's
vocabulary is not reused for other files; no "valid nan" without --valid.

Steps that need their own process (the run that is stopped and killed) are subprocesses; the other CLI steps call
``elmo_keras.cli.main`` (argument parsing, the one-line error and exit 2 included) in this process, which saves
TensorFlow's start-up per step."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras
import pytest
from elmo_keras.files import file_sha256
from test_lm import TINY, TRAIN

from elmo_keras.cli import main
from elmo_keras.lm import Vocabulary, pretrain

REPO = Path(__file__).resolve().parent.parent
DATA = TRAIN / "data.txt"


@pytest.fixture()
def options(tmp_path) -> Path:
    path = tmp_path / "options.json"
    path.write_text(json.dumps({**TINY, "backup_every_steps": 100}))
    return path


def _args(out: Path, options: Path, *extra) -> list[str]:
    return ["pretrain", "--options", str(options), "--out", str(out), *map(str, extra)]


def _fails(argv: list[str], capsys, *words: str) -> str:
    """``main(argv)`` exits 2 with one ``elmo-keras pretrain: error:`` line on stderr holding ``words``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("elmo-keras pretrain: error: "), err
    for word in words:
        assert word in err, err
    return err


def _backed_up_epoch(metadata: Path) -> int:
    try:
        return json.loads(metadata.read_text())["epoch"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):  # not there yet, or being written
        return -1


def test_second_run_is_refused_and_a_kill_after_the_last_epoch_resumes(tmp_path, options, capsys):
    valid = tmp_path / "valid.txt"
    valid.write_text(DATA.read_text(encoding="utf-8") * 60, encoding="utf-8")  # the final evaluation takes a while
    out, log = tmp_path / "run", tmp_path / "first.log"
    argv = _args(out, options, "--train", DATA, "--valid", valid, "--epochs", 1, "--steps-per-epoch", 2)
    with open(log, "w") as stream:
        first = subprocess.Popen(
            [sys.executable, "-m", "elmo_keras.cli", *argv],
            stdout=stream,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    try:
        deadline = time.time() + 240
        while _backed_up_epoch(out / "backup" / "training_metadata.json") < 1:  # the last epoch is backed up
            assert first.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGSTOP)  # held in its final evaluation, with the folder locked
        _fails(argv, capsys, f"another pretrain run is writing {out}; wait for it to finish")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    assert not (out / "weights.hdf5").exists() and not (out / "state.json").exists(), log.read_text()

    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"restored epoch 1 from {out / 'backup'}" in printed and "epoch 1:" not in printed  # no epoch redone
    state = json.loads((out / "state.json").read_text())
    assert state["epochs_completed"] == 1 and len(state["history"]["loss"]) == 1 and state["valid_perplexity"]
    assert (out / "weights.hdf5").exists() and not (out / "backup").exists()


def test_bad_input_is_one_line_before_training(tmp_path, options, capsys):
    out = tmp_path / "run"
    missing, empty = tmp_path / "missing.txt", tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    _fails(_args(out, options, "--train", missing), capsys, f"training file (--train) not found: {missing}")
    _fails(
        _args(out, options, "--train", DATA, "--valid", missing),
        capsys,
        f"validation file (--valid) not found: {missing}",
    )
    _fails(_args(out, options, "--train", empty), capsys, f"no tokens found in {empty}")
    preset_options = REPO / "elmo_keras" / "presets" / "brown-small" / "options.json"  # 1024 sampled words
    _fails(
        _args(out, preset_options, "--train", DATA),
        capsys,
        "'n_negative_samples_batch' (1024) must be smaller than the vocabulary size, 80 words in --train; "
        "lower it below 80, or set it to 0",
    )
    assert not out.exists()  # the folder a refused run created is removed again
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    _fails(_args(a_file, options, "--train", DATA), capsys, f"--out {a_file} is a file; give a folder")
    assert a_file.read_text() == "mine"


@contextlib.contextmanager
def _unprivileged():
    """Run the block as the user nobody when this is root (whom a read-only folder does not stop)."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def test_out_in_a_read_only_folder_is_one_line(capsys):
    base = Path(tempfile.mkdtemp())  # not under pytest's tmp_path, which only its owner may enter
    try:
        base.chmod(0o755)
        options = base / "options.json"
        options.write_text(json.dumps(TINY))
        (base / "locked").mkdir(mode=0o555)
        with _unprivileged():
            _fails(
                _args(base / "locked" / "run", options, "--train", DATA),
                capsys,
                f"cannot create or write into {base / 'locked' / 'run'}: Permission denied",
            )
    finally:
        shutil.rmtree(base)


class _CtrlC(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        raise KeyboardInterrupt


def test_a_folder_resumes_only_the_same_files_and_options(tmp_path, options, capsys):
    out, small, other = tmp_path / "run", tmp_path / "small.txt", tmp_path / "other.txt"
    small.write_text("a b c .\nb c a .\n", encoding="utf-8")
    other.write_text("a new domain with new words .\nnew words again .\n" * 3, encoding="utf-8")
    sampled = tmp_path / "sampled.json"
    sampled.write_text(json.dumps({**TINY, "n_negative_samples_batch": 16}))
    # a first run on small data fails at once, leaving nothing; one interrupted before any training leaves a folder
    _fails(_args(out, sampled, "--train", small), capsys, "(16) must be smaller than the vocabulary size, 7 words")
    assert not out.exists()
    with pytest.raises(KeyboardInterrupt):
        pretrain([small], None, options, out, epochs=1, callbacks=[_CtrlC()], verbose=0, log=lambda _: None)
    assert Vocabulary.load(out / "vocab.txt") == Vocabulary.from_files([small])

    # its vocabulary is not reused for other files: nothing was trained, so the folder is rebuilt
    assert main(_args(out, sampled, "--train", DATA, "--valid", DATA, "--epochs", 1, "--steps-per-epoch", 1)) == 0
    assert f"{out}: discarding an unfinished run that trained nothing (--train file 1:" in capsys.readouterr().out
    assert Vocabulary.load(out / "vocab.txt") == Vocabulary.from_files([DATA])

    # a trained run is continued only on the same files and options
    size, sha = other.stat().st_size, file_sha256(str(other))[:12]
    _fails(
        _args(out, sampled, "--train", other, "--epochs", 3),
        capsys,
        f"{out} holds a pretraining run made from other input: --train file 1: {other} ({size} bytes, sha256 "
        f"{sha}) now, {DATA} ({DATA.stat().st_size} bytes, sha256 {file_sha256(str(DATA))[:12]}) then",
        "pass --restart to discard it and start over",
    )
    faster = tmp_path / "faster.json"
    faster.write_text(json.dumps({**TINY, "n_negative_samples_batch": 16, "learning_rate": 0.1}))
    _fails(_args(out, faster, "--train", DATA, "--epochs", 3), capsys, "options 'learning_rate' (0.002 then, 0.1 now)")

    # --restart discards it
    assert main(_args(out, options, "--train", other, "--epochs", 3, "--steps-per-epoch", 1, "--restart")) == 0
    printed = capsys.readouterr().out
    assert "epoch 3:" in printed and "valid" not in printed  # no --valid: nothing about validation
    state = json.loads((out / "state.json").read_text())
    assert state["epochs_completed"] == 3 and len(state["history"]["loss"]) == 3 and "valid_perplexity" not in state
    assert Vocabulary.load(out / "vocab.txt") == Vocabulary.from_files([other])
    assert [f["sha256"] for f in json.loads((out / "manifest.json").read_text())["train"]] == [file_sha256(str(other))]

    (out / "manifest.json").unlink()  # as in a run folder of an older elmo-keras: what it was made from is unknown
    _fails(_args(out, options, "--train", other, "--epochs", 4), capsys, "without manifest.json", "--restart")
