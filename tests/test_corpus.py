"""Corpus embedding (embed_file / elmo-keras embed): line contract, resume, manifest checks, no overwrite,
formats and load_embeddings, bad input. Kill tests are in test_corpus_kill.py, Beam in test_beam.py."""

import json
import os

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.corpus import run as corpus_run
from elmo_keras.corpus.lines import scan_input
from elmo_keras.errors import InputError

# lines with every separator that is NOT a line end here: U+2028, U+2029, U+0085, form feed, vertical tab,
# NBSP, a lone \r inside a line; plus \r\n endings, empty and blank lines, and no final newline
AWKWARD = (
    "The bank approved the loan .\r\n"
    "\n"
    "Hi\u2028there\u0085now\u2029end\n"
    "form\ffeed\vvertical tab\n"
    "no\u00a0break space 😀 Ünïcode\n"
    "   \t \n"
    "inner\rcarriage\r\n"
    "last line without newline"
).encode("utf-8")
AWKWARD_LINES = AWKWARD.decode("utf-8").split("\n")


def _line_text(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


@pytest.fixture()
def awkward_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(AWKWARD)
    return path


def _expected(embedder, lines, layers="all"):
    out = []
    for line in lines:
        array = embedder.embed_sentence(ek.tokenize(_line_text(line)))
        out.append(array if layers == "all" else array[-1] if layers == "top" else array.mean(0))
    return out


@pytest.mark.parametrize("fmt", ["hdf5", "shards", "npy"])
def test_output_index_is_line_number_and_tokens_are_tokenize(embedder, awkward_file, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    report = ek.embed_file(embedder, awkward_file, out, fmt=fmt, shard_lines=3, progress=False)
    assert report.startswith(f"8 lines -> {out}") and "2 empty line(s)" in report
    assert not os.path.exists(f"{out}.partial")
    expected = _expected(embedder, AWKWARD_LINES)
    with ek.load_embeddings(out) as got:
        assert len(got) == 8 == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == np.float32 and g.shape == e.shape, i
            np.testing.assert_allclose(g, e, atol=1e-5)
        assert got[2].shape[1] == 1  # "Hi\u2028there\u0085now\u2029end" is one token
        assert got[3].shape[1] == 4  # form feed and vertical tab split tokens (ASCII whitespace)
        assert got[-1].shape == got[7].shape
        with pytest.raises(IndexError, match="out of range"):
            got[8]
    if fmt == "hdf5":
        with h5py.File(out, "r") as f:
            index = json.loads(f["sentence_to_index"][0])
        assert index["The bank approved the loan ."] == [0] and index[""] == [1] and index["inner\rcarriage"] == [6]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from("ab \t\r\f\v\u2028\u0085\u00a0\x1cé😀"), max_size=6), max_size=8),
    st.booleans(),
    st.booleans(),
)
def test_line_reader_splits_on_newline_only(tmp_path_factory, lines, final_newline, bom):
    data = "\n".join(lines) + ("\n" if final_newline and lines else "")
    path = tmp_path_factory.mktemp("lines") / "x.txt"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data.encode("utf-8"))  # a byte-order mark is not text
    scan = scan_input(str(path), shard_lines=2, long_line=3)
    full = ("\ufeff" if bom else "") + data  # a file of just a byte-order mark is one empty line
    expected = full.split("\n")
    if full.endswith("\n") or full == "":
        expected = expected[:-1]
    expected[:1] = [line.removeprefix("\ufeff") for line in expected[:1]]
    assert scan.lines == len(expected)
    assert scan.tokens == sum(len(ek.tokenize(_line_text(line))) for line in expected)
    assert scan.empty_lines == sum(not ek.tokenize(_line_text(line)) for line in expected)
    assert scan.shards == -(-len(expected) // 2)


def test_layers_top_average_and_float16_storage(embedder, awkward_file, tmp_path):
    for layers in ("top", "average"):
        out = tmp_path / f"{layers}.h5"
        ek.embed_file(embedder, awkward_file, out, layers=layers, storage_dtype="float16", progress=False)
        with ek.load_embeddings(out) as got:
            assert got.layers == layers
            for g, e in zip(got, _expected(embedder, AWKWARD_LINES, layers)):
                assert g.dtype == np.float32 and g.shape == e.shape
                np.testing.assert_allclose(g, e, atol=2e-3, rtol=1e-3)  # float16 storage: ~3 decimal digits


def test_invalid_utf8_names_the_line_and_leaves_nothing(embedder, tmp_path, capsys, fixture_files):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"line 3 is not valid UTF-8"):
        ek.embed_file(embedder, path, tmp_path / "o.h5", progress=False)
    code = main(
        ["embed", str(path), str(tmp_path / "o.h5"), "--options", fixture_files[0], "--weights", fixture_files[1]]
    )
    assert code == 2 and "line 3 is not valid UTF-8" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]


class _Interrupt:
    """A runner that embeds the first ``shards`` missing shards, then stops like Ctrl-C."""

    def __init__(self, embedder, shards=1):
        self.local, self.shards = corpus_run.local_runner(embedder, progress=False), shards

    def __call__(self, scan, folder, todo, manifest, commit):
        self.local(scan, folder, todo[: self.shards], manifest, commit)
        raise KeyboardInterrupt


@pytest.mark.parametrize("fmt", ["hdf5", "shards"])
def test_interrupted_run_resumes_and_equals_an_uninterrupted_one(embedder, awkward_file, tmp_path, capsys, fmt):
    whole = tmp_path / "whole"
    ek.embed_file(embedder, awkward_file, whole, fmt=fmt, shard_lines=3, progress=False)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        ek.embed_file(
            embedder, awkward_file, out, fmt=fmt, shard_lines=3, runner=_Interrupt(embedder, 2), progress=False
        )
    assert "6 of 8 lines are committed" in capsys.readouterr().err
    committed = (
        ["output-1.hdf5", "shard-000000.json", "shard-000001.json"]
        if fmt == "hdf5"
        # values once
        else ["shard-000000.h5", "shard-000001.h5"]
    )
    assert not os.path.exists(out) and sorted(os.listdir(f"{out}.partial")) == [".lock", "manifest.json", *committed]
    report = ek.embed_file(embedder, awkward_file, out, fmt=fmt, shard_lines=3, progress=False)
    assert "6 reused from an interrupted run, 2 embedded" in report
    with ek.load_embeddings(whole) as a, ek.load_embeddings(out) as b:
        assert len(a) == len(b) == 8
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=1e-5)
        if fmt == "hdf5":
            assert a.sentence_to_index == b.sentence_to_index and set(a.file) == set(b.file)


def test_a_run_killed_before_its_manifest_does_not_block_the_next(embedder, awkward_file, tmp_path):
    """Killed between creating OUTPUT.partial and renaming its manifest into place: the folder holds the lock file
    and the manifest's temporary; the next run starts anew (a folder with anything else is still refused)."""
    out = tmp_path / "out"
    folder = tmp_path / "out.partial"
    folder.mkdir()
    (folder / ".lock").write_text("")
    (folder / ".manifest.json.k3j_x9a2.tmp").write_text('{"format": ')
    assert "0 reused" in ek.embed_file(embedder, awkward_file, out, fmt="shards", shard_lines=3, progress=False)
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a resumable run"):
        ek.embed_file(embedder, awkward_file, out, fmt="shards", shard_lines=3, overwrite=True, progress=False)


def test_a_different_run_does_not_reuse_the_partial(embedder, awkward_file, tmp_path, fixture_files):
    out = tmp_path / "out.h5"
    with pytest.raises(KeyboardInterrupt):
        ek.embed_file(embedder, awkward_file, out, shard_lines=3, runner=_Interrupt(embedder), progress=False)
    with pytest.raises(InputError, match=r"--layers \('all' then, 'top' now\).*--restart"):
        ek.embed_file(embedder, awkward_file, out, layers="top", shard_lines=3, progress=False)
    with pytest.raises(InputError, match="--shard-lines"):
        ek.embed_file(embedder, awkward_file, out, shard_lines=4, progress=False)
    with pytest.raises(InputError, match=r"--dtype \(storage\)"):
        ek.embed_file(embedder, awkward_file, out, storage_dtype="float16", shard_lines=3, progress=False)
    other = ek.BiLM.from_pretrained(*fixture_files)
    other.set_weights([w * 1.01 for w in other.get_weights()])
    with pytest.raises(InputError, match=r"the model \(options and weights\)"):
        ek.embed_file(ek.ElmoEmbedder(bilm=other), awkward_file, out, shard_lines=3, progress=False)
    awkward_file.write_bytes(AWKWARD.replace(b"bank", b"BANK"))  # same size, other content
    with pytest.raises(InputError, match="the input file's content") as err:
        ek.embed_file(embedder, awkward_file, out, shard_lines=3, progress=False)
    assert "input file's size" not in str(err.value)
    report = ek.embed_file(embedder, awkward_file, out, shard_lines=3, restart=True, progress=False)
    assert "0 reused" in report
    with ek.load_embeddings(out) as got:
        np.testing.assert_allclose(got[0], _expected(embedder, ["The BANK approved the loan ."])[0], atol=1e-5)


def test_existing_output_is_never_replaced_without_overwrite(embedder, awkward_file, tmp_path, capsys, fixture_files):
    out = tmp_path / "out.h5"
    out.write_bytes(b"precious other data")
    args = [
        "embed",
        str(awkward_file),
        str(out),
        "--options",
        fixture_files[0],
        "--weights",
        fixture_files[1],
        "--shard-lines",
        "3",
    ]
    assert main(args) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"precious other data" and not os.path.exists(f"{out}.partial")
    with pytest.raises(KeyboardInterrupt):  # a failed --overwrite run leaves the old output intact
        ek.embed_file(
            embedder, awkward_file, out, overwrite=True, shard_lines=3, runner=_Interrupt(embedder), progress=False
        )
    assert out.read_bytes() == b"precious other data"
    assert main(args + ["--overwrite"]) == 0
    assert "3 reused from an interrupted run" in capsys.readouterr().out  # the CLI's own model load resumes it
    with ek.load_embeddings(out) as got:
        assert len(got) == 8
    shards = tmp_path / "shards"
    ek.embed_file(embedder, awkward_file, shards, fmt="shards", layers="top", progress=False)
    ek.embed_file(embedder, awkward_file, shards, fmt="shards", layers="all", overwrite=True, progress=False)
    with ek.load_embeddings(shards) as got:
        assert got.layers == "all" and got[0].ndim == 3
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("not ours")
    link = tmp_path / "link"
    link.symlink_to(other)  # --overwrite of a link to a folder replaces the link, never what it points to
    ek.embed_file(embedder, awkward_file, link, fmt="shards", overwrite=True, progress=False)
    assert not link.is_symlink() and (other / "keep.txt").read_text() == "not ours"
    with ek.load_embeddings(link) as got:
        assert len(got) == 8
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing input", "input file not found"),
        ("input is a folder", "input is not a file"),
        ("no output folder", "output folder does not exist"),
        ("output is a folder", "is a folder; --format hdf5 writes a file"),
        ("batch size 0", "--batch-size: must be >= 1, got 0"),
        ("shard lines 0", "--shard-lines: must be >= 1"),
        ("missing weights", "cannot load the model"),
        ("text as weights", "cannot load the model"),
        ("workers without beam", "--num-workers and --beam-options need --runner beam"),
    ],
)
def test_cli_errors_are_one_line_exit_2_and_leave_nothing(tmp_path, capsys, fixture_files, awkward_file, case, message):
    out = tmp_path / "out.h5"
    options, weights = fixture_files
    args = {
        "missing input": [str(tmp_path / "nope.txt"), str(out)],
        "input is a folder": [str(tmp_path), str(out)],
        "no output folder": [str(awkward_file), str(tmp_path / "no" / "out.h5")],
        "output is a folder": [str(awkward_file), str(tmp_path / "folder")],
    }.get(case, [str(awkward_file), str(out)])
    extra = {
        "batch size 0": ["--batch-size", "0"],
        "shard lines 0": ["--shard-lines", "0"],
        "workers without beam": ["--num-workers", "2"],
    }.get(case, [])
    if case == "missing weights":
        weights = str(tmp_path / "missing.hdf5")
    if case == "text as weights":
        weights = str(awkward_file)
    if case == "output is a folder":
        (tmp_path / "folder").mkdir()
    before = sorted(os.listdir(tmp_path))
    try:
        code = main(["embed", *args, "--options", options, "--weights", weights, *extra])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert err.strip().count("\n") <= 1 or "usage:" in err  # one line (argparse adds its usage line)
    assert sorted(os.listdir(tmp_path)) == before


def test_old_or_foreign_partial_is_named_and_restart_discards_it(embedder, awkward_file, tmp_path):
    out = tmp_path / "out.h5"
    with h5py.File(f"{out}.partial", "w") as f:  # what elmo-keras 0.1 left behind
        f.create_dataset("0", data=np.zeros((3, 1, 32)))
    with pytest.raises(InputError, match=r"out.h5.partial is not a resumable run.*--restart"):
        ek.embed_file(embedder, awkward_file, out, progress=False)
    assert "0 reused" in ek.embed_file(embedder, awkward_file, out, restart=True, progress=False)


def test_a_second_run_on_the_same_output_is_refused(embedder, awkward_file, tmp_path):
    out = tmp_path / "out.h5"
    scan = scan_input(str(awkward_file), 1024, 400)
    manifest = corpus_run.new_manifest(scan, corpus_run.model_identity(embedder), corpus_run.EmbedSettings())
    with corpus_run.open_run(f"{out}.partial", manifest, restart=False):
        with pytest.raises(InputError, match="another embed run is writing"):
            ek.embed_file(embedder, awkward_file, out, progress=False)
        (tmp_path / "out.h5.partial" / "shard-000000.h5").write_bytes(b"a committed piece")
        with pytest.raises(InputError, match="another embed run is writing"):  # --restart deletes nothing then
            ek.embed_file(embedder, awkward_file, out, restart=True, progress=False)
        assert (tmp_path / "out.h5.partial" / "shard-000000.h5").read_bytes() == b"a committed piece"


@pytest.mark.parametrize(
    "fmt, damaged", [("shards", "shard-000001.h5"), ("hdf5", "shard-000001.json"), ("hdf5", "output-1.hdf5")]
)
def test_stale_temporaries_and_damaged_shards_are_redone(embedder, awkward_file, tmp_path, fmt, damaged):
    """Outside harm: a truncated shard file or record is redone; so are the records whose lines lie past the end
    of a truncated values file."""
    out = tmp_path / "out.h5"
    with pytest.raises(KeyboardInterrupt):
        ek.embed_file(
            embedder, awkward_file, out, fmt=fmt, shard_lines=3, runner=_Interrupt(embedder, 2), progress=False
        )
    partial = f"{out}.partial"
    (tmp_path / "out.h5.partial" / ".shard-000002.h5.abc.tmp").write_bytes(b"half a shard")
    if damaged == "output-1.hdf5":  # cut inside shard 1's values (its lines come after shard 0's)
        with open(os.path.join(partial, "shard-000001.json")) as f:
            cut = max(start for start, _ in json.load(f)["lines"] if start is not None)
    else:
        cut = 100
    with open(os.path.join(partial, damaged), "r+b") as f:
        f.truncate(cut)
    report = ek.embed_file(embedder, awkward_file, out, fmt=fmt, shard_lines=3, progress=False)
    assert "3 reused" in report
    with ek.load_embeddings(out) as got:
        for g, e in zip(got, _expected(embedder, AWKWARD_LINES)):
            np.testing.assert_allclose(g, e, atol=1e-5)


def test_load_embeddings_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        ek.load_embeddings(tmp_path / "nothing.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(InputError, match="not an hdf5 file"):
        ek.load_embeddings(tmp_path / "text.h5")
    with pytest.raises(InputError, match="not embeddings written by elmo-keras embed"):
        ek.load_embeddings(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"complete": False}))
    with pytest.raises(InputError, match="unfinished embedding run"):
        ek.load_embeddings(tmp_path / "run")


def test_empty_input_gives_an_empty_output(embedder, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    for fmt in ("hdf5", "shards"):
        ek.embed_file(embedder, path, tmp_path / f"o.{fmt}", fmt=fmt, progress=False)
        with ek.load_embeddings(tmp_path / f"o.{fmt}") as got:
            assert len(got) == 0 and list(got) == []
