"""ElmoEmbedder: same vectors as the BiLM, input order kept, token cache exact, bfloat16 close, dtype="auto"."""

import logging

import numpy as np
import pytest
from elmo_keras.cpu import auto_dtype, cpu_flags

import elmo_keras as ek
from elmo_keras import cpu
from elmo_keras.embed import ElmoEmbedder

SENTENCES = [
    ["The", "bank", "approved", "the", "loan", "."],
    ["Hi"],
    ["He", "sat", "on", "the", "bank"],
    ["a"] * 25,
    ["Ünïcode", "😀", "x" * 60],
    ["the", "loan"],
]


@pytest.fixture(scope="module")
def reference(fixture_files):
    bilm = ek.BiLM.from_pretrained(*fixture_files)
    out = []
    for sentence in SENTENCES:
        layers = bilm(ek.batch_to_ids([sentence]))["layers"]
        out.append(np.stack([np.asarray(layer)[0] for layer in layers]))
    return out


def test_embed_sentences_matches_bilm_in_input_order(fixture_files, reference):
    embedder = ElmoEmbedder(
        *fixture_files, dtype="float32", batch_size=2, chunk_size=4, cache_new_tokens=False, char_cnn_batch=3
    )
    got = list(embedder.embed_sentences(SENTENCES))
    assert len(got) == len(SENTENCES)
    for g, r in zip(got, reference):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, atol=1e-6)
    assert embedder.cache == {}


def test_token_cache_gives_the_same_vectors(fixture_files, reference):
    vocabulary = {t for s in SENTENCES for t in s}
    embedder = ElmoEmbedder(
        *fixture_files, dtype="float32", token_cache=sorted(vocabulary), batch_size=3, char_cnn_batch=4
    )
    assert set(embedder.cache) == vocabulary
    for g, r in zip(embedder.embed_sentences(SENTENCES), reference):
        np.testing.assert_allclose(g, r, atol=1e-6)
    dynamic = ElmoEmbedder(*fixture_files, dtype="float32")
    first = list(dynamic.embed_sentences(SENTENCES))
    assert set(dynamic.cache) == vocabulary  # new words are cached when first seen
    for a, b in zip(first, dynamic.embed_sentences(SENTENCES)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_bfloat16_is_close_to_float32(fixture_files, reference):
    embedder = ElmoEmbedder(*fixture_files, dtype="bfloat16")
    for g, r in zip(embedder.embed_sentences(SENTENCES), reference):
        top_g, top_r = g[-1], r[-1]
        cos = (top_g * top_r).sum(-1) / (np.linalg.norm(top_g, axis=-1) * np.linalg.norm(top_r, axis=-1))
        assert cos.min() >= 0.99, cos.min()


def test_a_lone_uncached_sentence_takes_one_call_with_the_same_vectors_and_cache(fixture_files, reference):
    """embed_sentence with new words runs char CNN and biLM in one call: same vectors as the reference, and the
    cache gets the char-CNN vectors the two-call path computes."""
    embedder = ElmoEmbedder(*fixture_files, dtype="float32")
    embedder.add_to_cache(SENTENCES[0][:2])  # some words cached, some not
    np.testing.assert_allclose(embedder.embed_sentence(SENTENCES[0]), reference[0], atol=1e-6)
    assert set(embedder.cache) == set(SENTENCES[0])
    words = sorted(embedder.cache)
    np.testing.assert_allclose(np.stack([embedder.cache[w] for w in words]), embedder._char_cnn(words), atol=1e-6)
    full = ElmoEmbedder(*fixture_files, dtype="float32", max_cache_size=1)  # no room: nothing cached
    full.embed_sentence(SENTENCES[0])
    assert full.cache == {}


def test_bfloat16_weights_give_the_numbers_of_mixed_bfloat16(fixture_files):
    """dtype="bfloat16" stores the weights in bfloat16 once; "mixed_bfloat16" casts float32 weights in every call:
    the same roundings, so the same vectors."""
    stored, mixed = (ElmoEmbedder(*fixture_files, dtype=d) for d in ("bfloat16", "mixed_bfloat16"))
    assert stored.bilm.encoder.kernels[0].dtype == "bfloat16" and mixed.bilm.encoder.kernels[0].dtype == "float32"
    for a, b in zip(stored.embed_sentences(SENTENCES), mixed.embed_sentences(SENTENCES)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_single_sentence_and_empty_input(fixture_files, reference):
    embedder = ElmoEmbedder(*fixture_files, dtype="float32")
    np.testing.assert_allclose(embedder.embed_sentence(SENTENCES[0]), reference[0], atol=1e-6)
    assert embedder.embed_batch([]) == []
    assert list(embedder.embed_sentences([])) == []
    assert embedder.embed_batch([[]])[0].shape == (3, 0, 32)


def test_bad_input(fixture_files):
    embedder = ElmoEmbedder(*fixture_files)
    with pytest.raises(TypeError, match="tokenize"):
        embedder.embed_batch(["a sentence"])
    with pytest.raises(ValueError, match="dtype must be one of"):
        ElmoEmbedder(*fixture_files, dtype="float16")
    with pytest.raises(ValueError, match="stateless"):
        ElmoEmbedder(bilm=ek.BiLM.from_pretrained(*fixture_files, stateful=True))


def test_xla_path_gives_the_same_vectors(fixture_files, reference):
    embedder = ElmoEmbedder(*fixture_files, dtype="float32", jit_compile=True, batch_size=4, length_multiple=8)
    for g, r in zip(embedder.embed_sentences(SENTENCES[:3]), reference[:3]):
        np.testing.assert_allclose(g, r, atol=1e-5)


@pytest.mark.parametrize(
    "flags, expected",
    [
        ({"avx2", "fma", "avx512f"}, "float32"),
        (set(), "float32"),
        ({"avx2", "avx512_bf16"}, "bfloat16"),
        ({"amx_bf16"}, "bfloat16"),
    ],
)
def test_auto_dtype_reads_the_cpu_flags(flags, expected, caplog):
    with caplog.at_level(logging.INFO, logger="elmo_keras.utils.cpu"):
        assert auto_dtype(flags) == expected
    assert len(caplog.records) == 1 and f"-> {expected}" in caplog.records[0].getMessage()


def test_cpu_flags_parses_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


@pytest.mark.parametrize("flags, policy", [({"avx2", "fma"}, "float32"), ({"avx512_bf16"}, "bfloat16")])
def test_auto_is_the_default_and_never_bfloat16_without_the_flags(fixture_files, monkeypatch, flags, policy):
    monkeypatch.setattr(cpu, "cpu_flags", lambda path="/proc/cpuinfo": frozenset(flags))
    assert ElmoEmbedder(*fixture_files).bilm.dtype_policy.name == policy


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transposed_step_layout_gives_the_same_vectors(fixture_files, reference, dtype):
    """The per-step GEMMs on the transposed snapshot compute the same products (batched and one sentence)."""
    released, transposed = (
        ElmoEmbedder(*fixture_files, dtype=dtype, step_layout=layout, batch_size=4)
        for layout in ("released", "transposed")
    )
    assert (released.step_layout, transposed.step_layout) == ("released", "transposed")
    tolerance = 1e-6 if dtype == "float32" else 2e-2
    for a, b, r in zip(released.embed_sentences(SENTENCES), transposed.embed_sentences(SENTENCES), reference):
        np.testing.assert_allclose(b, a, atol=tolerance)
        if dtype == "float32":
            np.testing.assert_allclose(b, r, atol=1e-6)
    np.testing.assert_allclose(
        transposed.embed_sentence(SENTENCES[2]), reference[2], atol=1e-6 if dtype == "float32" else 5e-2
    )


def test_step_layout_auto_transposes_only_large_matrices(fixture_files):
    # which sizes: tests/test_lstm_paths.py
    assert ElmoEmbedder(*fixture_files).step_layout == "released"  # the fixture's LSTM is tiny
    with pytest.raises(ValueError, match="step_layout must be one of"):
        ElmoEmbedder(*fixture_files, step_layout="columns")


def test_options_with_another_max_characters_per_token(tmp_path, fixture_options):
    """max_characters_per_token 20 (not the released 50): the embedder makes its char ids with the options' width
    and gives Elmo's and the BiLM's vectors, long tokens truncated alike."""
    import json

    import h5py
    from elmo_keras.options import load_options
    from elmo_keras.weights import random_weights, write_weights_hdf5

    from elmo_keras.cli import main

    options = {**fixture_options, "char_cnn": {**fixture_options["char_cnn"], "max_characters_per_token": 20}}
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights_hdf5(random_weights(load_options(options), seed=0), tmp_path / "weights.hdf5")
    files = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    sentences = [["The", "bank", "x" * 30], ["Hi"], ["Ünïcode" * 4, "bank", "."]]
    bilm = ek.BiLM.from_pretrained(*files)
    layers = bilm(ek.batch_to_ids(sentences, max_characters_per_token=20))["layers"]
    expected = [np.stack([np.asarray(layer)[row, : len(s)] for layer in layers]) for row, s in enumerate(sentences)]
    from_elmo = ek.Elmo.from_pretrained(*files, output_mode="layers")([" ".join(s) for s in sentences])
    for row, (sentence, want) in enumerate(zip(sentences, expected)):
        np.testing.assert_allclose(np.stack([np.asarray(t)[row, : len(sentence)] for t in from_elmo]), want, atol=1e-6)
    embedder = ElmoEmbedder(*files, dtype="float32", batch_size=2)
    for got, want in zip(embedder.embed_sentences(sentences), expected):  # batched, the cache filled on the way
        np.testing.assert_allclose(got, want, atol=1e-6)
    fresh = ElmoEmbedder(*files, dtype="float32")
    np.testing.assert_allclose(fresh.embed_sentence(sentences[2]), expected[2], atol=1e-6)  # one call, uncached
    (tmp_path / "in.txt").write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    assert (
        main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                str(tmp_path / "out.hdf5"),
                "--options",
                files[0],
                "--weights",
                files[1],
                "--dtype",
                "float32",
            ]
        )
        == 0
    )
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        for row, want in enumerate(expected):
            np.testing.assert_allclose(f[str(row)][()], want, atol=1e-6)
