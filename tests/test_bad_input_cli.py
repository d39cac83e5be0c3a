"""Bad input to `elmo-keras train` / `export`, export_serving and pretrain (issue 16): a one-line error (exit 2)
that names the problem, before any work, and nothing left behind."""

import csv
import json
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras import export, models, train_task
from elmo_keras.cli import main
from elmo_keras.errors import InputError
from elmo_keras.export import export_serving
from elmo_keras.lm import pretrain

TRAIN = Path(__file__).parent / "fixtures" / "bilm-tf" / "train"
TINY_LM = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1, "embedding": {"dim": 4}},
    "lstm": {
        "dim": 16,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "batch_size": 2,
    "dropout": 0.0,
    "backup_every_steps": 1,
    "shuffle_buffer": 100,
}
_UMASK = os.umask(0o022)
os.umask(_UMASK)


@pytest.fixture()
def model_args(fixture_files):
    return ["--options", fixture_files[0], "--weights", fixture_files[1]]


@pytest.fixture(scope="module")
def elmo(fixture_files):
    return ek.Elmo.from_pretrained(*fixture_files, dropout=0.0)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, elmo):
    path = tmp_path_factory.mktemp("model") / "m.keras"
    models.text_classifier(elmo, 2, units=4, hidden=8).save(path)
    return path


def _csv(path: Path, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


ROWS = [(f"text number {i}", "pos" if i % 2 else "neg") for i in range(10)]


def _fails(argv: list[str], capsys, *words: str) -> str:
    """``main(argv)`` returns 2 with one ``elmo-keras COMMAND: error:`` line on stderr holding ``words``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"elmo-keras {argv[0]}: error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    return err


def _rejected_by_argparse(argv: list[str], capsys, words: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert words in capsys.readouterr().err


# -- train --------------------------------------------------------------------------------------------------
def test_train_out_folder_must_exist(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", ROWS)
    out = tmp_path / "missing" / "m.keras"
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(out)], capsys, f"folder {out.parent} does not exist"
    )
    assert os.listdir(tmp_path) == ["d.csv"]


@pytest.mark.parametrize("out", ["", "m.h5"])
def test_train_out_must_be_a_keras_file_name(tmp_path, model_args, capsys, out):
    data = _csv(tmp_path / "d.csv", ROWS)
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / out)],
        capsys,
        "give a file name ending in .keras",
    )
    assert os.listdir(tmp_path) == ["d.csv"]


def test_train_export_folder_must_be_writable(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", ROWS)
    (tmp_path / "a_file").write_text("")
    _fails(
        [
            "train",
            "--data",
            str(data),
            *model_args,
            "--out",
            str(tmp_path / "m.keras"),
            "--export",
            str(tmp_path / "a_file" / "name"),
        ],
        capsys,
        f"cannot write into {tmp_path / 'a_file'}",
    )
    assert sorted(os.listdir(tmp_path)) == ["a_file", "d.csv"]


def test_train_empty_test_split(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", [("a", "x"), ("b", "y"), ("c", "z"), ("d", "x"), ("e", "y")])
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras")],
        capsys,
        f"cannot split {data} into train and test (5 rows, 3 classes)",
        "--test CSV",
    )
    assert os.listdir(tmp_path) == ["d.csv"]


def test_train_needs_two_classes(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", [(f"t{i}", "only") for i in range(10)])
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras")],
        capsys,
        "at least 2 classes",
        "['only']",
    )


def test_train_csv_not_utf8(tmp_path, model_args, capsys):
    data = tmp_path / "d.csv"
    data.write_bytes("text,label\ncaf\xe9,x\n".encode("latin-1"))
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras")],
        capsys,
        f"{data} is not UTF-8 text",
    )


@pytest.mark.parametrize(
    "option, value",
    [("--epochs", "0"), ("--epochs", "-1"), ("--batch-size", "0"), ("--units", "-4"), ("--max-tokens", "0")],
)
def test_train_counts_must_be_positive(tmp_path, model_args, capsys, option, value):
    _rejected_by_argparse(["train", *model_args, option, value], capsys, f"argument {option}: must be >= 1")


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--mix", "fixed"], "--mix fixed needs --mix-weights"),
        (["--mix", "fixed", "--mix-weights", "0.5,a"], "--mix-weights must be comma-separated numbers"),
        (["--learning-rate", "0"], "--learning-rate must be a positive number"),
    ],
)
def test_train_other_options(tmp_path, model_args, capsys, extra, words):
    data = _csv(tmp_path / "d.csv", ROWS)
    _fails(["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras"), *extra], capsys, words)


def test_train_unknown_preset(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", ROWS)
    _fails(
        ["train", "--data", str(data), "--preset", "nope", "--out", str(tmp_path / "m.keras")],
        capsys,
        "unknown preset 'nope'",
    )


def test_train_keeps_the_model_when_evaluation_fails(tmp_path, model_args, monkeypatch, fixture_files, capsys):
    def untrained(task, options, weights, **kwargs):
        return models.text_classifier(ek.Elmo.from_pretrained(options, weights), len(task.class_names), units=4)

    def broken(model, task, batch_size):
        raise MemoryError("out of memory")

    monkeypatch.setattr(train_task, "train_model", untrained)
    monkeypatch.setattr(train_task, "evaluate", broken)
    data, out = _csv(tmp_path / "d.csv", ROWS), tmp_path / "m.keras"
    with pytest.raises(RuntimeError, match=f"the trained model is saved in {out}, but evaluating .*out of memory"):
        main(["train", "--data", str(data), *model_args, "--out", str(out)])
    assert keras.models.load_model(out, safe_mode=True).predict(["a b"], verbose=0).shape == (1, 2)
    assert json.loads((tmp_path / "m.keras.labels.json").read_text()) == ["neg", "pos"]


# -- export -------------------------------------------------------------------------------------------------
def test_export_negative_version(tmp_path, saved_model, elmo, capsys):
    _rejected_by_argparse(
        ["export", str(saved_model), "--out", str(tmp_path / "s"), "--version", "-3"],
        capsys,
        "argument --version: must be >= 0",
    )
    for version in (-3, "3", 2.0, True):
        with pytest.raises(InputError, match="version must be an integer >= 0"):
            export_serving(elmo, tmp_path / "s", version=version)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("content", ["truncated", "text"])
def test_export_corrupt_keras_file(tmp_path, saved_model, capsys, content):
    data = saved_model.read_bytes()
    model = tmp_path / "m.keras"
    model.write_bytes(data[: len(data) // 2] if content == "truncated" else b"hello")
    _fails(["export", str(model), "--out", str(tmp_path / "s")], capsys, f"{model} is not a .keras model file")
    assert os.listdir(tmp_path) == ["m.keras"]


def test_export_existing_version_and_bad_labels(tmp_path, saved_model, capsys):
    out = tmp_path / "s"
    assert main(["export", str(saved_model), "--out", str(out), "--version", "3"]) == 0
    capsys.readouterr()
    _fails(["export", str(saved_model), "--out", str(out), "--version", "3"], capsys, f"{out / '3'} exists already")
    _fails(
        ["export", str(saved_model), "--out", str(out), "--labels", "a,b,c"],
        capsys,
        "3 class names for a model with 2 outputs",
    )
    model = tmp_path / "m.keras"
    shutil.copy(saved_model, model)
    (tmp_path / "m.keras.labels.json").write_text("[neg, pos]")
    _fails(["export", str(model), "--out", str(out)], capsys, "m.keras.labels.json is not valid JSON")
    assert os.listdir(out) == ["3"]


def test_export_folders_get_the_usual_permissions(tmp_path, elmo):
    path = export_serving(elmo, tmp_path / "s", warmup_texts=None)
    assert os.stat(path).st_mode & 0o777 == 0o777 & ~_UMASK
    assert os.stat(os.path.join(path, "saved_model.pb")).st_mode & 0o777 == 0o666 & ~_UMASK


def test_concurrent_export_takes_the_next_version(tmp_path, elmo, monkeypatch):
    real, seen = export.serving.next_version, []

    def racing(base):  # another export publishes the number we picked before our rename
        version = real(base)
        if not seen:
            os.makedirs(os.path.join(base, str(version), "variables"))
        seen.append(version)
        return version

    monkeypatch.setattr(export.serving, "next_version", racing)
    path = export_serving(elmo, tmp_path / "s", warmup_texts=None)
    assert seen == [1, 2] and os.path.basename(path) == "2"
    assert sorted(os.listdir(tmp_path / "s")) == ["1", "2"]  # no temporary folder left behind


def test_concurrent_export_to_a_given_version(tmp_path, elmo, monkeypatch):
    def racing_warmup(folder, model_name, texts):
        os.makedirs(tmp_path / "s" / "7" / "variables")

    monkeypatch.setattr(export.serving, "_write_warmup", racing_warmup)
    with pytest.raises(FileExistsError, match=f"{tmp_path / 's' / '7'} was written by another export meanwhile"):
        export_serving(elmo, tmp_path / "s", version=7)
    assert os.listdir(tmp_path / "s") == ["7"]


# -- pretrain -----------------------------------------------------------------------------------------------
def test_pretrain_counts_must_be_positive(tmp_path, capsys):
    options = tmp_path / "options.json"
    options.write_text(json.dumps(TINY_LM))
    for epochs in (0, -1):
        with pytest.raises(InputError, match=f"epochs \\(--epochs\\) must be a positive integer, got {epochs}"):
            pretrain([TRAIN / "data.txt"], None, TINY_LM, tmp_path / "run", epochs=epochs)
    with pytest.raises(InputError, match="steps_per_epoch .* must be a positive integer, got 0"):
        pretrain([TRAIN / "data.txt"], None, TINY_LM, tmp_path / "run", steps_per_epoch=0)
    _fails(
        [
            "pretrain",
            "--train",
            str(TRAIN / "data.txt"),
            "--options",
            str(options),
            "--out",
            str(tmp_path / "run"),
            "--epochs",
            "0",
        ],
        capsys,
        "must be a positive integer, got 0",
    )
    with pytest.raises(InputError, match="options: 'n_epochs' must be a positive integer"):
        pretrain([TRAIN / "data.txt"], None, {**TINY_LM, "n_epochs": "3"}, tmp_path / "run")
    assert os.listdir(tmp_path) == ["options.json"]


class _Interrupt(keras.callbacks.Callback):
    """Stops the run like a kill in the middle of epoch ``epoch`` (after the backup of its first batch)."""

    def __init__(self, epoch: int):
        super().__init__()
        self.stop_in, self.epoch = epoch, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == self.stop_in and batch == 1:
            raise KeyboardInterrupt


def test_pretrain_resumed_from_backup_keeps_every_epoch(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        pretrain(
            [TRAIN / "data.txt"], None, TINY_LM, out, epochs=3, callbacks=[_Interrupt(2)], verbose=0, log=lambda _: None
        )
    _, state = pretrain([TRAIN / "data.txt"], None, TINY_LM, out, epochs=3, verbose=0, log=lambda _: None)
    assert state["epochs_completed"] == 3 and len(state["tokens_per_second"]) == 3
    assert {len(values) for values in state["history"].values()} == {3}
    assert np.all(np.diff(state["history"]["loss"]) < 0)
    assert json.loads((out / "state.json").read_text()) == state
    assert not (out / "backup").exists()
