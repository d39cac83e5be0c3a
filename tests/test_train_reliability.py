"""`elmo-keras train` on hostile data and arguments: rows without a label, empty texts, an Excel CSV, missing files,
a wrong count of mix weights, two runs on one --out (the hostile-run findings; each one line and exit 2)."""

import csv
import fcntl
import logging
import os

import pytest
from elmo_keras.train_task import load_task

from tests.test_bad_input_cli import ROWS, _csv, _fails


@pytest.fixture()
def model_args(fixture_files):
    return ["--options", fixture_files[0], "--weights", fixture_files[1]]


def test_rows_without_a_label_are_named_and_refused(tmp_path, model_args, capsys):
    data = tmp_path / "d.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        f.write(
            "text,label\n" + "".join(f"t{i},{'ab'[i % 2]}\n" for i in range(8)) + "no label,\nshort row\nspaces,  \n"
        )
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras")],
        capsys,
        "3 row(s) have no 'label' (on line(s) 10, 11, 12); label them or remove them",
    )
    assert sorted(os.listdir(tmp_path)) == ["d.csv"]


def test_every_text_empty_is_refused_some_empty_are_counted(tmp_path, model_args, capsys, caplog):
    data = _csv(tmp_path / "d.csv", [(" " if i % 3 else "", "ab"[i % 2]) for i in range(10)])
    _fails(
        ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras")],
        capsys,
        "every 'text' cell is empty or whitespace; check --text-column",
    )
    data = _csv(tmp_path / "d.csv", [("" if i < 3 else f"text {i}", "ab"[i % 2]) for i in range(10)])
    with caplog.at_level(logging.WARNING):
        task = load_task(str(data))
    assert "3 of 10 'text' cells are empty or whitespace" in caplog.text
    assert len(task.train_texts) + len(task.test_texts) == 10


def test_a_csv_with_a_byte_order_mark_reads(tmp_path):
    data = tmp_path / "excel.csv"
    with open(data, "w", newline="", encoding="utf-8-sig") as f:
        csv.writer(f).writerows([("text", "label"), *ROWS])
    task = load_task(str(data))
    assert task.class_names == ["neg", "pos"] and len(task.train_texts) + len(task.test_texts) == len(ROWS)


@pytest.mark.parametrize(
    "data, test, words",
    [
        ("missing.csv", None, "data file not found: missing.csv"),
        (".", None, ". is a folder; give a CSV file with a header row"),
        ("d.csv", "missing.csv", "test file not found: missing.csv"),
    ],
)
def test_missing_data_files(tmp_path, model_args, capsys, monkeypatch, data, test, words):
    monkeypatch.chdir(tmp_path)
    _csv(tmp_path / "d.csv", ROWS)
    _fails(
        ["train", "--data", data, *(["--test", test] if test else []), *model_args, "--out", "m.keras"], capsys, words
    )


def test_mix_weights_must_match_the_layers(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", ROWS)
    _fails(
        [
            "train",
            "--data",
            str(data),
            *model_args,
            "--out",
            str(tmp_path / "m.keras"),
            "--mix",
            "fixed",
            "--mix-weights",
            "0.5,0.5",
        ],
        capsys,
        "2 mix weights for a biLM with 3 layers (the token layer and 2 contextual ones): give one weight per layer",
    )


def test_a_second_train_on_the_same_out_is_refused(tmp_path, model_args, capsys):
    data = _csv(tmp_path / "d.csv", ROWS)
    with open(tmp_path / ".m.keras.lock", "w") as held:  # what a running `train --out m.keras` holds
        fcntl.flock(held, fcntl.LOCK_EX)
        _fails(
            ["train", "--data", str(data), *model_args, "--out", str(tmp_path / "m.keras"), "--epochs", "1"],
            capsys,
            f"another train --out {tmp_path / 'm.keras'} run is writing {tmp_path}; wait for it to finish",
        )
    assert not (tmp_path / "m.keras").exists()


def test_saving_through_a_link_replaces_its_target_and_keeps_the_link(tmp_path):
    import keras

    from elmo_keras.saving import load_model, read_labels, save_model

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    (tmp_path / "real.keras").write_bytes(b"an older model")
    (tmp_path / "link.keras").symlink_to(tmp_path / "real.keras")
    assert save_model(model, tmp_path / "link.keras", ["no", "yes"]) == str(tmp_path / "link.keras")
    assert (tmp_path / "link.keras").is_symlink()
    assert read_labels(tmp_path / "link.keras") == read_labels(tmp_path / "real.keras") == ["no", "yes"]
    assert load_model(tmp_path / "link.keras").output_shape == (None, 2)
