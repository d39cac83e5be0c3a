"""Sentence and document vectors (issue 35, item 1): one vector per text, pooled over its real tokens only.

Elmo(output_mode="sentence"), ElmoEmbedder.embed_sentences(pool=...) and `elmo-keras embed --pool` against a NumPy
mean / max over the token vectors (1e-6); padding in a batch leaves a row's vector alone; an empty text gives zeros
plus a flag, never NaN; a .keras model and a CLI output reloaded in a fresh process; a killed pooled run resumes.
"""

import json

import keras
import numpy as np
import pytest
from fresh import run_cli, run_fresh
from test_corpus import _Interrupt

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.errors import InputError

TEXTS = ["The bank approved the loan .", "", "He sat on the bank of the river .", "Hi"]
TOL = 1e-6  # pooled vs NumPy pooling of the same token vectors: float32 sums of a few tokens, rounding only
#: vectors of one text computed in different batches (other rows, more padding): the models' stated batch invariance
#: (docs/behaviour_and_errors.md), since GEMM blocking depends on the batch's shape (1.4e-6 measured here)
BATCH_TOL = 1e-5


def _numpy_pool(tokens: np.ndarray, pool) -> np.ndarray:
    """[..., T, D] -> [..., k * D] in NumPy (float64), zeros for T == 0: the reference."""
    pool = [pool] if isinstance(pool, str) else pool
    if tokens.shape[-2] == 0:
        return np.zeros((*tokens.shape[:-2], len(pool) * tokens.shape[-1]))
    t = tokens.astype(np.float64)
    return np.concatenate([t.mean(-2) if m == "mean" else t.max(-2) for m in pool], axis=-1)


# -- Elmo(output_mode="sentence") ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pooled_dict():
    """Elmo's dict with pool=: the tokens, their mask and the pooled vectors from one call."""
    elmo = ek.Elmo.from_preset("brown-small", dropout=0.0, pool=["mean", "max"])
    return {k: [np.asarray(t) for t in v] if isinstance(v, list) else np.asarray(v) for k, v in elmo(TEXTS).items()}


@pytest.fixture(scope="module")
def sentence_elmo():
    return ek.Elmo.from_preset("brown-small", dropout=0.0, output_mode="sentence", pool=["mean", "max"])


def test_sentence_vectors_are_the_mean_and_max_over_real_tokens_only(pooled_dict, sentence_elmo):
    tokens, mask = pooled_dict["elmo_representations"][0], pooled_dict["mask"]
    expected = np.stack([_numpy_pool(row[keep], ["mean", "max"]) for row, keep in zip(tokens, mask)])
    got = np.asarray(sentence_elmo(TEXTS))
    assert got.shape == (4, 2 * 256) and not np.isnan(got).any()
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(pooled_dict["sentence_representations"][0], expected, rtol=0, atol=TOL)
    np.testing.assert_array_equal(got[1], 0.0)  # the empty text
    assert pooled_dict["empty"].tolist() == [False, True, False, False]
    assert np.abs(got[0, :256] - got[0, 256:]).max() > 0.1  # mean and max differ: the check can fail
    assert sentence_elmo.compute_mask(keras.ops.convert_to_tensor(TEXTS)) is None


def test_padding_in_a_batch_does_not_change_a_rows_vector(sentence_elmo):
    alone = np.asarray(sentence_elmo(["Hi"]))[0]
    in_batch = np.asarray(sentence_elmo(TEXTS))[3]  # "Hi" padded to 9 tokens
    np.testing.assert_allclose(in_batch, alone, rtol=0, atol=BATCH_TOL)
    assert np.abs(alone).max() > 1.0  # a vector, not zeros


def test_char_ids_and_a_functional_model_give_the_same_vectors(sentence_elmo):
    expected = np.asarray(sentence_elmo(TEXTS))
    ids = ek.batch_to_ids([ek.tokenize(t) for t in TEXTS])
    np.testing.assert_allclose(np.asarray(sentence_elmo(ids)), expected, rtol=0, atol=TOL)
    inputs = keras.Input(shape=(None, 50), dtype="int32")  # strings: the .keras test below
    model = keras.Model(inputs, sentence_elmo(inputs))
    assert model.output_shape == (None, 512)
    np.testing.assert_allclose(np.asarray(model(ids)), expected, rtol=0, atol=TOL)


def test_pool_arguments_are_checked():
    with pytest.raises(InputError, match=r"pool must be 'mean', 'max' or a list of both.*got 'median'"):
        ek.Elmo.from_preset("brown-small", output_mode="sentence", pool="median")
    with pytest.raises(InputError, match=r"got \['mean', 'mean'\]"):
        ek.Elmo.from_preset("brown-small", output_mode="sentence", pool=["mean", "mean"])
    with pytest.raises(InputError, match="pool= pools output_mode='sentence'.*drop pool="):
        ek.Elmo.from_preset("brown-small", output_mode="elmo", pool="mean")
    assert ek.Elmo.from_preset("brown-small", output_mode="sentence").pool == "mean"  # the default


# -- ElmoEmbedder(pool=) ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def embedder():
    """Made as `elmo-keras embed --dtype float32` makes its own (its tf.functions are traced once per module)."""
    return ek.ElmoEmbedder.from_preset("brown-small", dtype="float32", max_cache_size=100_000)


TOKENS = [ek.tokenize(t) for t in TEXTS] + [["a", "much", "longer", "sentence", "of", "seven", "tokens"]]


@pytest.mark.parametrize("pool", ["mean", "max", ["max", "mean"]])
def test_embedder_pools_each_layer_over_the_sentences_tokens(embedder, pool):
    tokens = list(embedder.embed_sentences(TOKENS, batch_size=3))  # sorted, in batches of 3
    pooled = list(embedder.embed_sentences(TOKENS, batch_size=3, pool=pool))
    k = 1 if isinstance(pool, str) else 2
    for t, p in zip(tokens, pooled):
        assert p.shape == (3, k * 256) and p.dtype == np.float32 and not np.isnan(p).any()
        np.testing.assert_allclose(p, _numpy_pool(t, pool), rtol=0, atol=TOL)
    np.testing.assert_array_equal(pooled[1], 0.0)  # the empty sentence; len(TOKENS[1]) == 0 says it is empty
    batch = embedder.embed_batch(TOKENS, pool=pool)  # one batch: "Hi" padded to 7 tokens
    for b, t in zip(batch, embedder.embed_batch(TOKENS)):
        np.testing.assert_allclose(b, _numpy_pool(t, pool), rtol=0, atol=TOL)
    alone = embedder.embed_sentence(TOKENS[3], pool=pool)
    np.testing.assert_allclose(batch[3], alone, rtol=0, atol=BATCH_TOL)
    np.testing.assert_allclose(pooled[3], alone, rtol=0, atol=BATCH_TOL)
    with pytest.raises(InputError, match="pool must be"):
        next(embedder.embed_sentences(TOKENS, pool="sum"))


# -- embed_file / elmo-keras embed --pool ------------------------------------------------------------------------
LINES = TEXTS + ["   \t ", "A loan ."]


@pytest.fixture()
def lines_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _expected_lines(embedder, layers, pool):
    out = []
    for line in LINES:
        array = embedder.embed_sentence(ek.tokenize(line))
        reduced = array if layers == "all" else array[-1] if layers == "top" else array.mean(0)
        out.append(_numpy_pool(reduced, pool))
    return out


def _assert_lines(got, expected, atol):
    assert len(got) == len(LINES)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and not np.isnan(g).any()
        np.testing.assert_allclose(g, e, rtol=0, atol=atol)
    assert got.empty.dtype == bool and got.empty.tolist() == [False, True, False, False, True, False]
    for i in np.flatnonzero(got.empty):
        np.testing.assert_array_equal(got[i], 0.0)


@pytest.mark.parametrize(("fmt", "layers", "pool"), [("shards", "top", ["max"]), ("npy", "average", ["mean", "max"])])
def test_embed_file_stores_one_vector_per_line(embedder, lines_file, tmp_path, fmt, layers, pool):
    out = tmp_path / "out"
    report = ek.embed_file(embedder, lines_file, out, layers=layers, fmt=fmt, pool=pool, shard_lines=4, progress=False)
    assert "2 empty line(s) stored as zero vectors, flagged in empty" in report
    with ek.load_embeddings(out) as got:
        # each line embedded alone here, in the run's batches there: the batch-invariance bound (the 1e-6 check of
        # this path is the command's, below)
        _assert_lines(got, _expected_lines(embedder, layers, pool), BATCH_TOL)
        if fmt == "shards":  # an npy folder does not say its settings
            assert (got.pool, got.layers) == (tuple(pool), layers)


def test_a_killed_pooled_run_resumes_and_a_different_pool_is_refused(embedder, lines_file, tmp_path, capsys):
    whole = tmp_path / "whole.hdf5"
    ek.embed_file(embedder, lines_file, whole, pool="mean", shard_lines=2, progress=False)
    out = tmp_path / "out.hdf5"
    with pytest.raises(KeyboardInterrupt):
        ek.embed_file(
            embedder, lines_file, out, pool="mean", shard_lines=2, runner=_Interrupt(embedder, 2), progress=False
        )
    with pytest.raises(InputError, match=r"--pool \(\['mean'\] then, \['max'\] now\)"):
        ek.embed_file(embedder, lines_file, out, pool="max", shard_lines=2, progress=False)
    report = ek.embed_file(embedder, lines_file, out, pool="mean", shard_lines=2, progress=False)
    assert "4 reused from an interrupted run, 2 embedded" in report
    with ek.load_embeddings(whole) as a, ek.load_embeddings(out) as b:
        assert a.empty.tolist() == b.empty.tolist() and len(a) == len(b) == len(LINES)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_the_beam_workers_store_the_same_pooled_vectors(embedder, lines_file, tmp_path, monkeypatch):
    """Beam's worker DoFn (what `--runner beam` runs on each shard), called here without a pipeline and with this
    module's embedder to keep it fast; tests/test_beam.py runs the pipeline itself (which passes the run's manifest,
    so its pool, to this DoFn)."""
    beam = pytest.importorskip("elmo_keras.corpus.beam")
    monkeypatch.setattr(beam.EmbedderSpec, "load", lambda spec: embedder)

    def workers(scan, folder, shards, manifest, commit):
        worker = beam._EmbedShard(beam.EmbedderSpec(preset="brown-small"), scan, folder, manifest)
        worker.setup()
        for shard in shards:
            assert list(worker.process(shard)) == [shard]

    local, out = tmp_path / "local", tmp_path / "beam.hdf5"
    ek.embed_file(embedder, lines_file, local, fmt="shards", pool="max", shard_lines=4, progress=False)
    ek.embed_file(embedder, lines_file, out, pool="max", shard_lines=4, runner=workers, progress=False)
    with ek.load_embeddings(local) as a, ek.load_embeddings(out) as b:
        assert b.pool == ("max",) and b.empty.tolist() == a.empty.tolist() and len(a) == len(b) == len(LINES)
        for x, y in zip(a, b):  # words cached in the first run: the char CNN ran in other calls
            assert x.shape == y.shape == (3, 256)
            np.testing.assert_allclose(x, y, rtol=0, atol=BATCH_TOL)


def test_cli_output_and_a_sentence_model_reload_in_a_fresh_process(sentence_elmo, lines_file, tmp_path, capsys):
    """`elmo-keras embed --pool` as its own process; its output and a .keras model with output_mode="sentence" are
    then read in one fresh process (one interpreter start for both: each costs ~8 s of CPU)."""
    done = run_cli(
        "embed", "in.txt", "out.hdf5", "--preset", "brown-small", "--dtype", "float32", "--pool", "mean,max",
        "--shard-lines", "4", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 empty line(s) stored as zero vectors" in done.stdout
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, keras.layers.Dense(3, name="head")(sentence_elmo(inputs)))
    model.save(tmp_path / "sentences.keras")
    np.save(tmp_path / "expected.npy", np.asarray(model(np.array(TEXTS, dtype=object))))
    run_fresh(
        f"""
        import json, keras, numpy as np
        import elmo_keras as ek
        with ek.load_embeddings("out.hdf5") as got:
            np.save("got.npy", np.stack(list(got)))
            json.dump({{"pool": got.pool, "layers": got.layers, "empty": got.empty.tolist()}}, open("got.json", "w"))
        model = keras.models.load_model("sentences.keras", safe_mode=True)
        elmo = [layer for layer in model.layers if isinstance(layer, ek.Elmo)][0]
        assert elmo.output_mode == "sentence" and elmo.pool == ["mean", "max"]
        vectors = np.asarray(model(np.array({TEXTS!r}, dtype=object)))
        np.testing.assert_allclose(vectors, np.load("expected.npy"), rtol=0, atol={TOL})
        """,
        cwd=tmp_path,
    )
    meta = json.loads((tmp_path / "got.json").read_text())
    assert meta == {"pool": ["mean", "max"], "layers": "all", "empty": [False, True, False, False, True, False]}
    got = np.load(tmp_path / "got.npy")
    assert got.shape == (len(LINES), 3, 512) and not np.isnan(got).any()
    # the same run in this process without --pool, pooled in NumPy: a new embedder made like the command's makes
    # the same model calls (bit for bit; one whose cache was emptied differs by ~2e-6)
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32", max_cache_size=100_000)
    ek.embed_file(embedder, lines_file, tmp_path / "tokens.hdf5", shard_lines=4, progress=False)
    with ek.load_embeddings(tmp_path / "tokens.hdf5") as tokens:
        expected = np.stack([_numpy_pool(t, ["mean", "max"]) for t in tokens])
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    with pytest.raises(SystemExit) as bad:
        main(["embed", str(lines_file), str(tmp_path / "o.hdf5"), "--preset", "brown-small", "--pool", "sum"])
    assert bad.value.code == 2 and "argument --pool: pool must be" in capsys.readouterr().err
