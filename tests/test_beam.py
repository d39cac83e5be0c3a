"""Apache Beam: `elmo-keras embed --runner beam` (2 DirectRunner worker processes) equals the local runner on every
line; a local run interrupted half-way is finished by Beam; EmbedLines in a user's pipeline."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from elmo_keras.beam import EmbedderSpec, EmbedLines, pipeline_options
from test_corpus import AWKWARD, AWKWARD_LINES, _expected, _Interrupt

import elmo_keras as ek
from elmo_keras.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture()
def awkward_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes((AWKWARD + b"\n") * 3)  # 24 lines: empty lines, U+2028, U+0085, NBSP, \r\n, form feed, emoji
    return path


def _assert_same(a_path, b_path, n):
    with ek.load_embeddings(a_path) as a, ek.load_embeddings(b_path) as b:
        assert len(a) == len(b) == n
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.shape == y.shape, i
            np.testing.assert_allclose(x, y, atol=1e-5)


def test_two_beam_workers_equal_the_local_runner(embedder, awkward_file, tmp_path, fixture_files, capsys):
    local = tmp_path / "local"
    ek.embed_file(embedder, awkward_file, local, fmt="shards", shard_lines=3, progress=False)
    out = tmp_path / "beam"
    assert (
        main(
            [
                "embed",
                str(awkward_file),
                str(out),
                "--options",
                fixture_files[0],
                "--weights",
                fixture_files[1],
                "--format",
                "shards",
                "--shard-lines",
                "3",
                "--runner",
                "beam",
                "--num-workers",
                "2",
            ]
        )
        == 0
    )
    assert "24 lines -> " in capsys.readouterr().out
    _assert_same(local, out, 24)
    with ek.load_embeddings(out) as got:
        for g, e in zip(got, _expected(embedder, AWKWARD_LINES * 3)):
            np.testing.assert_allclose(g, e, atol=1e-5)


def test_beam_finishes_an_interrupted_local_run_into_hdf5(embedder, awkward_file, tmp_path, fixture_files, capsys):
    out = tmp_path / "out.h5"
    with pytest.raises(KeyboardInterrupt):
        ek.embed_file(embedder, awkward_file, out, shard_lines=3, runner=_Interrupt(embedder, 3), progress=False)
    assert (
        main(
            [
                "embed",
                str(awkward_file),
                str(out),
                "--options",
                fixture_files[0],
                "--weights",
                fixture_files[1],
                "--shard-lines",
                "3",
                "--runner",
                "beam",
            ]
        )
        == 0
    )
    assert "9 reused from an interrupted run, 15 embedded" in capsys.readouterr().out
    whole = tmp_path / "whole.h5"
    ek.embed_file(embedder, awkward_file, whole, progress=False)
    _assert_same(whole, out, 24)


def test_embed_lines_in_a_users_pipeline(embedder, fixture_files):
    lines = AWKWARD_LINES
    spec = EmbedderSpec(*fixture_files, batch_size=4)
    with beam.Pipeline(options=pipeline_options()) as pipeline:
        got = (
            pipeline
            | beam.Create(list(enumerate(line.rstrip("\r") for line in lines)))
            | EmbedLines(spec, layers="top", min_batch_size=2, max_batch_size=3)
        )
        expected = dict(enumerate(_expected(embedder, lines, layers="top")))

        def check(pairs):
            assert sorted(key for key, _ in pairs) == list(range(len(lines)))
            for key, array in pairs:
                assert array.dtype == np.float32
                np.testing.assert_allclose(array, expected[key], atol=1e-5)

        assert_that(got, check)


def test_pipeline_options_pass_standard_beam_flags():
    direct = pipeline_options(3).get_all_options()
    assert direct["runner"] == "DirectRunner" and direct["direct_num_workers"] == 3
    assert direct["direct_running_mode"] == "multi_processing"
    flink = pipeline_options(4, "--runner=FlinkRunner --flink_master=localhost:8081 --parallelism=4")
    options = flink.get_all_options(retain_unknown_options=True)
    assert options["runner"] == "FlinkRunner" and options["flink_master"] == "localhost:8081"
    assert options["num_workers"] == 4
    with pytest.raises(ValueError, match="layers"):
        EmbedLines(EmbedderSpec(preset="brown-small"), layers="middle")
