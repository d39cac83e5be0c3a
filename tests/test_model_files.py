"""Model files as users hand them over: misspelled option keys, damaged weight values, preset folders that lack
a file, and the presets table. Each case fails with one InputError that names the problem and the fix."""

import json
import re
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from elmo_keras.options import KNOWN_KEYS, load_options

import elmo_keras as ek
from elmo_keras import cli
from elmo_keras.errors import InputError
from elmo_keras.lm import TRAIN_DEFAULTS
from elmo_keras.presets import PRESETS, PresetInfo, preset_files, presets_table

SHARED_FIXTURE = Path(__file__).parents[2] / "shared" / "data" / "fixtures" / "bilm-tf" / "model" / "options.json"
#: What bilm-tf's training writes into options.json (its README's example, as users' checkpoints hold it).
BILM_TF_TRAINING = {
    "bidirectional": True,
    "dropout": 0.1,
    "all_clip_norm_val": 10.0,
    "n_epochs": 10,
    "n_train_tokens": 1410521,
    "batch_size": 128,
    "n_tokens_vocab": 19558,
    "unroll_steps": 20,
    "n_negative_samples_batch": 128,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 16},
        "filters": [[1, 32], [2, 32], [3, 64]],
        "max_characters_per_token": 50,
        "n_characters": 261,
        "n_highway": 2,
    },
    "lstm": {
        "cell_clip": 3,
        "dim": 64,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 16,
        "use_skip_connections": True,
    },
}


def _write_options(folder: Path, options: dict) -> Path:
    path = folder / "options.json"
    path.write_text(json.dumps(options))
    return path


# -- unknown option keys ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "section, typo, meant",
    [
        ("lstm", "use_skip_conections", "lstm.use_skip_connections"),
        ("lstm", "cel_clip", "lstm.cell_clip"),
        ("char_cnn", "n_higway", "char_cnn.n_highway"),
        ("char_cnn.embedding", "dims", "char_cnn.embedding.dim"),
        ("", "n_epoch", "n_epochs"),
    ],
)
def test_a_misspelled_option_key_names_the_key_the_file_and_the_closest_key(
    tmp_path, fixture_options, fixture_files, section, typo, meant
):
    options = json.loads(json.dumps(fixture_options))
    target = options
    for part in filter(None, section.split(".")):
        target = target[part]
    target[typo] = True
    path = _write_options(tmp_path, options)
    key = f"{section}.{typo}" if section else f"{typo}' at the top level"
    with pytest.raises(
        InputError,
        match=re.escape(f"options file {str(path)!r}: unknown setting '{key}")
        + f".*did you mean '{re.escape(meant)}'\\? fix its spelling or remove it$",
    ):
        ek.BiLM.from_pretrained(path, fixture_files[1])


def test_an_unknown_encoder_key_and_the_cli(tmp_path, fixture_files, fixture_options, capsys):
    encoder = {"type": "gated_cnn", "projection_dim": 16, "n_layers": 1, "kernal_size": 3}
    with pytest.raises(
        InputError,
        match=re.escape("options: unknown setting 'encoder.kernal_size' for type 'gated_cnn'")
        + ".*did you mean 'encoder.kernel_size'",
    ):
        load_options({"char_cnn": fixture_options["char_cnn"], "encoder": encoder})
    options = json.loads(json.dumps(fixture_options))
    options["lstm"]["use_skip_conections"] = True
    path = _write_options(tmp_path, options)
    (tmp_path / "in.txt").write_text("Hi\n")
    assert (
        cli.main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                str(tmp_path / "out.hdf5"),
                "--options",
                str(path),
                "--weights",
                fixture_files[1],
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown setting 'lstm.use_skip_conections'" in err and str(path) in err


def test_every_options_file_the_package_or_bilm_tf_writes_still_loads(fixture_files):
    assert set(TRAIN_DEFAULTS) <= set(KNOWN_KEYS[""])  # a new training setting must be registered
    files = [Path(fixture_files[0]), *(Path(preset_files(name)["options"]) for name in PRESETS)]
    files += [SHARED_FIXTURE] if SHARED_FIXTURE.exists() else []
    for path in files:
        load_options(path)
    for options in (BILM_TF_TRAINING, *ek.RELEASED_OPTIONS.values()):
        load_options(options)
        load_options({**TRAIN_DEFAULTS, **load_options(options), "n_tokens_vocab": 5})  # as pretrain saves them


# -- weight values -------------------------------------------------------------------------------------------
def test_nan_in_a_weight_file_names_the_dataset(tmp_path, fixture_files):
    path = tmp_path / "w.hdf5"
    shutil.copy(fixture_files[1], path)
    with h5py.File(path, "a") as f:
        f["CNN_proj/b_proj"][3] = np.nan
    with pytest.raises(
        InputError,
        match=re.escape(
            f"weight file {str(path)!r}: dataset 'CNN_proj/b_proj' holds 1 "
            "NaN or infinite value(s) of 16; the file is damaged: download "
            "or write it again"
        ),
    ):
        ek.BiLM.from_pretrained(fixture_files[0], path)


def test_bytes_overwritten_in_a_data_block_are_found(tmp_path, fixture_files):
    path = tmp_path / "w.hdf5"
    shutil.copy(fixture_files[1], path)
    name = "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
    with h5py.File(path, "r") as f:
        offset = f[name].id.get_offset()  # contiguous storage: the values' bytes start here
    with open(path, "r+b") as f:
        f.seek(offset + 4000)
        f.write(b"\xff" * 64)  # 16 float32 NaNs
    with pytest.raises(InputError, match=re.escape(f"dataset '{name}' holds 16 NaN or infinite value(s)")):
        ek.Elmo.from_pretrained(fixture_files[0], path)


# -- preset folders and the presets table ----------------------------------------------------------------------
def test_a_preset_folder_without_options_json(tmp_path, fixture_files, capsys):
    shutil.copy(fixture_files[1], tmp_path / "weights.hdf5")
    words = (
        f"preset folder {tmp_path} has no options.json: a preset folder holds options.json and weights.hdf5 "
        "(released layout), optionally vocab.txt and softmax.hdf5"
    )
    with pytest.raises(InputError, match=re.escape(words)):
        preset_files(tmp_path)
    (tmp_path / "in.txt").write_text("Hi\n")
    assert cli.main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--preset", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err == f"elmo-keras embed: error: {words} (e.g. the --out folder of elmo-keras pretrain)\n"
    )


def test_presets_table_columns_fit_the_longest_value():
    rows = [
        PresetInfo("a", "short", 1_000_000, 5 << 20, True, "x"),
        PresetInfo("a-preset-name-much-longer-than-fifteen", "long", 123_456_789_000, None, False, "x"),
    ]
    header, *lines = presets_table(rows).splitlines()
    description = header.index("description")
    assert all(line[description:] in ("short", "long") for line in lines)
    params_end, size_end = header.index("params") + len("params"), header.index("size") + len("size")
    assert [line[:params_end].split()[-1] for line in lines] == ["1.0M", "123456.8M"]
    assert [line[:size_end].split()[-2:] for line in lines] == [["5.0", "MiB"], ["~470950", "MiB"]]
