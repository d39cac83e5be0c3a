"""The one loader (elmo_keras.io.load.resolve): every kind of source resolves to the files (and so the arrays) it
did before the loader, and every ``from_*`` (and the embedder, --init-from, the CLI) is a thin call to it."""

import argparse
import ast
import shutil
from pathlib import Path

import pytest
from test_download import (  # noqa: F401 (_empty_caches, hub_module, served, start_server: fixtures)
    OPTIONS,
    WEIGHTS,
    _empty_caches,
    assert_same_arrays,
    forbid_network,
    hub_module,
    served,
    start_server,
)

import elmo_keras as ek
from elmo_keras import cli
from elmo_keras.errors import InputError
from elmo_keras.io import load
from elmo_keras.io.load import PRESETS_DIR, ModelFiles, resolve
from elmo_keras.io.weights import read_weights_hdf5
from elmo_keras.lm import train
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.presets import preset_files


def released_arrays(options, weights) -> dict:
    """The arrays of a released pair, read without the loader."""
    return read_weights_hdf5(weights, ek.load_options(options))


def test_a_shipped_preset_is_its_data_folder():
    folder = Path(PRESETS_DIR) / "brown-small"
    names = ("options.json", "weights.hdf5", "vocab.txt", "softmax.hdf5")
    paths = [str(folder / name) for name in names]
    assert resolve("brown-small") == ModelFiles(*paths)
    assert preset_files("brown-small") == dict(zip(("options", "weights", "vocab", "softmax"), paths))
    expected = released_arrays(folder / "options.json", folder / "weights.hdf5")
    assert_same_arrays(ek.BiLM.from_preset("brown-small").get_weight_arrays(), expected)


def test_a_folder_and_an_options_weights_pair(tmp_path, fixture_files, fixture_options):
    shutil.copy(fixture_files[0], tmp_path / "options.json")
    shutil.copy(fixture_files[1], tmp_path / "weights.hdf5")
    assert resolve(tmp_path) == ModelFiles(str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5"))
    assert resolve(*fixture_files) == ModelFiles(*fixture_files)
    assert resolve(fixture_options, fixture_files[1]).options is fixture_options
    expected = released_arrays(*fixture_files)
    assert_same_arrays(ek.BiLM.from_preset(tmp_path).get_weight_arrays(), expected)
    assert_same_arrays(ek.BiLM.from_pretrained(fixture_options, fixture_files[1]).get_weight_arrays(), expected)
    with pytest.raises(InputError, match="options given as a dict need their weights"):
        resolve(fixture_options)
    with pytest.raises(InputError, match="unknown preset 'nowhere'"):
        resolve("nowhere")


def test_a_folder_url_and_a_url_pair_download_the_same_files(served, fixture_files):  # noqa: F811
    server, files = served
    folder = resolve(server.url("/model/"))
    assert (folder.vocab, folder.softmax, folder.hub) == (None, None, None)  # 404: absent
    assert Path(folder.options).read_bytes() == files[OPTIONS] and Path(folder.weights).read_bytes() == files[WEIGHTS]
    assert resolve(server.url(OPTIONS), server.url(WEIGHTS)) == ModelFiles(folder.options, folder.weights)
    assert_same_arrays(ek.BiLM.from_preset(server.url("/model/")).get_weight_arrays(), released_arrays(*fixture_files))


def test_hub_handles_are_told_apart_without_the_network(monkeypatch, tmp_path):
    forbid_network(monkeypatch)
    for handle in (
        "https://tfhub.dev/google/elmo/3",
        "tfhub.dev/google/elmo/3",
        "https://www.kaggle.com/models/google/elmo/TensorFlow1/elmo/3",
        "http://127.0.0.1:9/elmo/3.tar.gz",
        "https://example.com/elmo?tf-hub-format=compressed",
    ):
        assert resolve(handle) == ModelFiles(hub=handle)
    assert resolve(tmp_path / "nowhere", hub=True) == ModelFiles(hub=str(tmp_path / "nowhere"))


def test_a_hub_module_folder_is_a_source_like_any_other(hub_module, fixture_files, tmp_path, capsys):  # noqa: F811
    folder, _ = hub_module
    assert resolve(folder) == ModelFiles(hub=str(folder))
    by_preset, by_hub = ek.BiLM.from_preset(folder), ek.BiLM.from_hub(folder)
    assert by_preset.add_sentence_boundaries == by_hub.add_sentence_boundaries
    assert_same_arrays(by_preset.get_weight_arrays(), released_arrays(*fixture_files))
    (tmp_path / "in.txt").write_text("Hi\n")
    assert cli.main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--preset", str(folder)]) == 2
    assert "is a TF Hub module; this command reads released-layout files" in capsys.readouterr().err


def test_every_from_is_a_thin_call_to_the_loader(monkeypatch, fixture_files, hub_module):  # noqa: F811
    """Each entry point calls resolve once with the source it was given (a spy in front of the real loader)."""
    asked = []

    def spy(*args, **kwargs):
        asked.append(args[0] if len(args) == 1 else args)
        return resolve(*args, **kwargs)

    shipped = preset_files("brown-small")
    for module in ("elmo_keras.layers.bilm", "elmo_keras.elmo", "elmo_keras.lm.model", "elmo_keras.lm.train"):
        monkeypatch.setattr(f"{module}.resolve", spy)
    monkeypatch.setattr(load, "resolve", spy)  # what the CLI imports when it runs
    folder = str(hub_module[0])
    options, weights = fixture_files
    calls = [
        (lambda: ek.BiLM.from_pretrained(options, weights), (options, weights)),
        (lambda: ek.BiLM.from_preset("brown-small"), "brown-small"),
        (lambda: ek.BiLM.from_hub(folder), folder),
        (lambda: ek.Elmo.from_pretrained(options, weights), (options, weights)),
        (lambda: ek.Elmo.from_preset("brown-small"), "brown-small"),
        (lambda: ek.Elmo.from_hub(folder), folder),
        (lambda: ek.ElmoEmbedder(options, weights, dtype="float32"), (options, weights)),
        (lambda: ek.ElmoEmbedder.from_preset("brown-small", dtype="float32"), "brown-small"),
        (lambda: ek.lm.BiLanguageModel.from_preset("brown-small"), "brown-small"),
        (
            lambda: ek.lm.BiLanguageModel.from_pretrained(shipped["options"], shipped["weights"], shipped["vocab"]),
            (shipped["options"], shipped["weights"]),
        ),
        (lambda: cli._model_files(argparse.Namespace(preset="brown-small")), "brown-small"),
        (
            lambda: cli._model_files(argparse.Namespace(preset=None, options=options, weights=weights)),
            (options, weights),
        ),
    ]
    for call, source in calls:
        asked.clear()
        call()
        assert asked == [source]
    model = ek.lm.BiLanguageModel.from_preset("brown-small")
    asked.clear()
    train._load_initial_weights(model, "brown-small", Vocabulary.load(preset_files("brown-small")["vocab"]))
    assert asked == ["brown-small"]


def test_only_the_loader_reads_model_files():
    """Outside io/ (the readers and the loader) and presets/ (which lists the presets through the loader), no module
    calls a reader of model files: loading has one implementation."""
    readers = {"iter_weights_hdf5", "read_weights_hdf5", "read_hub_module", "preset_files", "local_file"}
    package = Path(ek.__file__).parent
    allowed = {"io/load.py", "io/weights.py", "io/options.py", "io/hub_module.py", "presets/__init__.py"}
    callers = sorted(
        f"{path.relative_to(package)}: {node.func.id}"
        for path in package.rglob("*.py")
        if str(path.relative_to(package)) not in allowed
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in readers
    )
    assert callers == []
