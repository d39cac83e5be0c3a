"""`elmo-keras embed` against a hostile user: an output that is (or holds) the input or the model files is refused
before any work; `--beam-options "--runner=..."` parses as written in the README; a file-size limit (as a full
disk) is one line, exit 2, and the same command then resumes. Kill-and-resume tests are in test_corpus_kill.py."""

import os
import resource
import shutil
import signal

import pytest
from test_corpus_kill import _child, _resume_and_check, corpus  # noqa: F401 (corpus: a fixture)

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.errors import InputError

TEXT = b"The bank approved the loan .\nHe sat on the bank of the river .\n"


@pytest.fixture()
def model(fixture_files):
    return ["--options", fixture_files[0], "--weights", fixture_files[1]]


def _refused(argv, capsys, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("elmo-keras embed: error: ") and err.count("\n") == 1 and all(w in err for w in words), err


def test_output_that_is_the_input_is_refused(tmp_path, monkeypatch, capsys, model, embedder):
    monkeypatch.chdir(tmp_path)
    same = tmp_path / "same.txt"
    same.write_bytes(TEXT)
    os.symlink("same.txt", tmp_path / "link.txt")
    for output, fmt in (("same.txt", "hdf5"), ("./same.txt", "hdf5"), ("link.txt", "hdf5"), ("same.txt", "shards")):
        _refused(
            ["embed", "same.txt", output, *model, "--format", fmt, "--overwrite"],
            capsys,
            f"output {output} is the input file same.txt: the run would replace it",
        )
    _refused(["embed", "link.txt", str(same), *model, "--overwrite"], capsys, "is the input file link.txt")
    with pytest.raises(InputError, match="is the input file"):  # the Python API is protected the same way
        ek.embed_file(embedder, same, same, overwrite=True, progress=False)
    assert same.read_bytes() == TEXT and sorted(os.listdir(tmp_path)) == ["link.txt", "same.txt"]


@pytest.mark.parametrize("fmt", ["shards", "npy"])
def test_output_folder_that_holds_the_input_or_model_is_refused(tmp_path, capsys, fixture_files, fmt):
    data, models = tmp_path / "data", tmp_path / "models"
    data.mkdir()
    models.mkdir()
    (data / "in.txt").write_bytes(TEXT)
    options, weights = (shutil.copy(f, models) for f in fixture_files)
    model = ["--options", options, "--weights", weights, "--format", fmt, "--overwrite"]
    _refused(
        ["embed", str(data / "in.txt"), str(data), *model],
        capsys,
        f"the input file {data / 'in.txt'} is or lies in {data}, the output that this run replaces",
    )
    os.symlink("models", tmp_path / "link")  # the model files, through a link to their folder
    _refused(
        ["embed", str(data / "in.txt"), str(tmp_path / "link"), *model],
        capsys,
        f"the --options file {options} is or lies in {models}",
    )
    assert (data / "in.txt").read_bytes() == TEXT and sorted(os.listdir(models)) == ["lm_weights.hdf5", "options.json"]


def test_input_in_the_run_folder_is_refused(tmp_path, capsys, model):
    partial = tmp_path / "out.h5.partial"
    partial.mkdir()
    (partial / "in.txt").write_bytes(TEXT)
    _refused(
        ["embed", str(partial / "in.txt"), str(tmp_path / "out.h5"), *model, "--restart"],
        capsys,
        f"lies in {partial}, the run folder that this run replaces or deletes",
    )
    assert (partial / "in.txt").read_bytes() == TEXT


@pytest.mark.parametrize(
    "form",
    [
        ["--beam-options", "--runner=FlinkRunner --flink_master=HOST:8081"],
        ["--beam-options=--runner=FlinkRunner --flink_master=HOST:8081"],
    ],
)
def test_beam_options_reach_the_beam_runner_in_both_forms(tmp_path, monkeypatch, model, form):
    pytest.importorskip("apache_beam")
    from elmo_keras.beam import pipeline_options

    class Built(Exception):
        pass

    def beam_runner(spec, num_workers, beam_options):
        raise Built(pipeline_options(num_workers, beam_options).get_all_options(retain_unknown_options=True))

    monkeypatch.setattr("elmo_keras.beam.beam_runner", beam_runner)
    (tmp_path / "in.txt").write_bytes(TEXT)
    with pytest.raises(Built) as built:
        main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                str(tmp_path / "out.h5"),
                *model,
                "--runner",
                "beam",
                *form,
                "--num-workers",
                "3",
            ]
        )
    options = built.value.args[0]
    assert options["runner"] == "FlinkRunner" and options["flink_master"] == "HOST:8081"
    assert options["num_workers"] == 3


def _file_size_limit(limit):
    def apply():  # in the child, before exec: write() past the limit fails with EFBIG (no SIGXFSZ)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return apply


@pytest.mark.slow
def test_file_size_limit_is_one_line_then_the_same_command_resumes(corpus, tmp_path, capsys):  # noqa: F811
    path, _, model = corpus
    out = tmp_path / "out.h5"
    # the 400 lines' values are ~0.9 MB, all in one file being assembled: it reaches the limit after a few pieces
    child = _child([str(path), str(out), *model], preexec_fn=_file_size_limit(300_000))
    _, err = child.communicate(timeout=300)
    assert child.returncode == 2, err
    assert (
        err.strip().splitlines()[-1]
        == (
            f"elmo-keras embed: error: disk full or file too large writing {out}.partial: free space (or raise the "
            f"limit) and run the same command again to resume"
        )
        and "Traceback" not in err
    ), err
    assert not os.path.exists(out)
    report = _resume_and_check(corpus, out, "hdf5", capsys)
    assert " embedded;" in report and " 400 reused" not in report
