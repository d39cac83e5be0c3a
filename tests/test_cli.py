"""The elmo-keras command: embed (hdf5/npy, resume, empty lines), train + export on CSV, help, bad arguments."""

import csv
import json
import os

import h5py
import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras.cli import COMMANDS, build_parser, main


@pytest.fixture()
def model_args(fixture_files):
    return ["--options", fixture_files[0], "--weights", fixture_files[1]]


def test_embed_hdf5_with_empty_line(tmp_path, model_args, fixture_files):
    """Resume, kill and bad-input cases of `embed` are in test_corpus.py / test_corpus_kill.py."""
    text = tmp_path / "in.txt"
    text.write_text("The bank approved the loan .\n\nHi there\nThe bank approved the loan .\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(text), str(out), *model_args]) == 0
    assert not os.path.exists(str(out) + ".partial")
    bilm = ek.BiLM.from_pretrained(*fixture_files)
    with h5py.File(out, "r") as f:
        assert sorted(k for k in f if k.isdigit()) == ["0", "1", "2", "3"]
        assert f["1"].shape == (3, 0, 32)  # the empty line is kept, as an empty array
        assert f["2"].shape == (3, 2, 32)
        expected = np.stack(
            [
                np.asarray(t)[0]
                for t in bilm(ek.batch_to_ids([["The", "bank", "approved", "the", "loan", "."]]))["layers"]
            ]
        )
        np.testing.assert_allclose(f["0"][...], expected, atol=1e-6)
        index = json.loads(f["sentence_to_index"][0])
        assert index["The bank approved the loan ."] == [0, 3] and index[""] == [1]


def test_embed_npy_top_layer(tmp_path, model_args):
    text = tmp_path / "in.txt"
    text.write_text("a b c\nd\n", encoding="utf-8")
    out = tmp_path / "vectors"
    assert main(["embed", str(text), str(out), *model_args, "--format", "npy", "--layers", "top"]) == 0
    assert np.load(out / "0.npy").shape == (3, 32) and np.load(out / "1.npy").shape == (1, 32)
    assert json.loads((out / "sentence_to_index.json").read_text()) == {"a b c": [0], "d": [1]}


def test_train_on_csv_then_export(tmp_path, model_args, capsys):
    data = tmp_path / "train.csv"
    rows = [("good fun movie", "pos"), ("bad boring film", "neg"), ("great acting", "pos"), ("awful plot", "neg")]
    with open(data, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "sentiment"])
        writer.writerows(rows * 5)
    model = tmp_path / "m.keras"
    assert (
        main(
            [
                "train",
                "--data",
                str(data),
                "--text-column",
                "review",
                "--label-column",
                "sentiment",
                *model_args,
                "--epochs",
                "1",
                "--units",
                "4",
                "--out",
                str(model),
                "--export",
                str(tmp_path / "saved" / "reviews"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "test: accuracy" in printed and "macro_f1" in printed
    assert json.loads((tmp_path / "m.keras.labels.json").read_text()) == ["neg", "pos"]
    assert os.path.isdir(tmp_path / "saved" / "reviews" / "1")  # `export` alone: tests/test_cli_flows.py


def test_help_and_bad_arguments(tmp_path, capsys, fixture_files):
    for name in COMMANDS:
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args([name, "--help"])
        assert info.value.code == 0
        assert "usage: elmo-keras " + name in capsys.readouterr().out
    assert main(["embed", "in.txt", "out.hdf5", "--options", fixture_files[0]]) == 2
    assert "elmo-keras embed: error: --options needs --weights" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "none.keras"), "--out", str(tmp_path / "x")]) == 2
    assert "elmo-keras export: error: model file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["train", "--head", "cnn"])
    assert info.value.code == 2
