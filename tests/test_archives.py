"""Models in ZIP archives (the NLPL vector repository's layout) and the registry's NLPL entries: a zip of the shipped
brown-small preset, its files one and two folders deep and the weights named model.hdf5 as NLPL names them, loads
from disk and from a 127.0.0.1 server exactly as the folder does; its vocab.txt.gz fills the embedder's cache; bad
archives fail with an InputError naming the archive. Every test gets an empty ELMO_KERAS_CACHE."""

import gzip
import hashlib
import json
import os
import re
import zipfile

import h5py
import numpy as np
import pytest
from fresh import run_fresh
from test_download import FileServer, forbid_network

import elmo_keras as ek
from elmo_keras import cli
from elmo_keras.errors import InputError
from elmo_keras.io.archive import ARCHIVE_RECORD, archive_options, extract_archive
from elmo_keras.io.download import cache_dir
from elmo_keras.io.load import PRESETS_DIR, archives, resolve, vocab_words
from elmo_keras.lm import Vocabulary
from elmo_keras.presets import parameter_count, presets_table

BROWN = os.path.join(PRESETS_DIR, "brown-small")
SENTENCES = [["The", "bank", "raised", "its", "rates", "."], ["Zyxwv", "qwerty", "the"], ["Hi"]]
N_CACHED = 40
#: NLPL archives also hold a meta.json (not options) and a README.
META = {"algorithm": {"name": "ELMo", "id": 0}, "corpus": [{"language": "eng"}], "id": 0}


def brown(name: str) -> bytes:
    with open(os.path.join(BROWN, name), "rb") as f:
        return f.read()


def make_zip(path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> str:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return str(path)


@pytest.fixture(scope="module")
def brown_zip(tmp_path_factory) -> str:
    """brown-small as NLPL packs a model: options one folder deep, model.hdf5 two deep, vocab.txt.gz, meta.json."""
    return make_zip(
        tmp_path_factory.mktemp("zip") / "195.zip",
        {
            "195/options.json": brown("options.json"),
            "195/elmo/model.hdf5": brown("weights.hdf5"),
            "195/vocab.txt.gz": gzip.compress(brown("vocab.txt")),
            "195/meta.json": json.dumps(META).encode(),
            "195/README": b"This archive is part of the NLPL Word Vectors Repository.\n",
        },
        zipfile.ZIP_DEFLATED,
    )


@pytest.fixture(scope="module")
def folder_vectors() -> list[np.ndarray]:
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32", vocab_cache_size=N_CACHED)
    return list(embedder.embed_sentences(SENTENCES))


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))


@pytest.fixture()
def server():
    servers = []
    yield lambda files: servers.append(FileServer(files)) or servers[-1]
    for one in servers:
        one.stop()


def assert_same_vectors(embedder, expected) -> None:
    got = list(embedder.embed_sentences(SENTENCES))
    assert max(float(np.abs(a - b).max()) for a, b in zip(got, expected)) == 0.0


def test_zip_from_disk_and_url_embeds_like_the_folder_and_is_extracted_once(
    brown_zip, folder_vectors, server, monkeypatch
):
    by_path = ek.ElmoEmbedder.from_preset(brown_zip, dtype="float32", vocab_cache_size=N_CACHED)
    assert_same_vectors(by_path, folder_vectors)
    files = resolve(brown_zip)
    assert [os.path.basename(p) for p in (files.options, files.weights, files.vocab)] == [
        "options.json",
        "weights.hdf5",
        "vocab.txt.gz",
    ]
    with open(os.path.join(os.path.dirname(files.options), ARCHIVE_RECORD), encoding="utf-8") as f:
        assert json.load(f)["members"]["weights.hdf5"] == "195/elmo/model.hdf5"

    with open(brown_zip, "rb") as f:
        served = server({"/repository/20/195.zip": f.read()})
    url = served.url("/repository/20/195.zip")
    by_url = ek.ElmoEmbedder.from_preset(url, dtype="float32", vocab_cache_size=N_CACHED)
    assert_same_vectors(by_url, folder_vectors)
    assert resolve(url) == files  # the same bytes: the same extracted folder
    assert [status for _, _, status in served.log] == [200]
    served.stop()
    forbid_network(monkeypatch)
    assert resolve(url) == files  # second load: the cache, no request


def test_vocab_gz_fills_the_cache_with_the_first_words(brown_zip):
    files = resolve(brown_zip)
    words = brown("vocab.txt").decode("utf-8").split("\n")
    assert words[:3] == ["<S>", "</S>", "<UNK>"]
    assert vocab_words(files.vocab, 7) == words[3:10]
    assert Vocabulary.load(files.vocab) == Vocabulary.load(os.path.join(BROWN, "vocab.txt"))
    bilm = ek.BiLM.from_preset(brown_zip)
    assert list(ek.ElmoEmbedder(bilm=bilm, vocab_file=files.vocab, vocab_cache_size=7).cache) == words[3:10]
    assert ek.ElmoEmbedder(bilm=bilm, vocab_file=files.vocab, vocab_cache_size=0).cache == {}


def _weights_pair(name_a: str, name_b: str) -> dict[str, bytes]:
    return {"m/options.json": brown("options.json"), name_a: brown("weights.hdf5"), name_b: brown("weights.hdf5")}


def _other_hdf5(tmp_path) -> bytes:
    path = tmp_path / "other.hdf5"
    with h5py.File(path, "w") as f:
        f["something"] = np.zeros(3)
    return path.read_bytes()


def test_an_archive_without_usual_names_is_read_by_content(tmp_path):
    """Options in the one *.json that parses as options, weights in the one *.hdf5 holding their layout."""
    archive = make_zip(
        tmp_path / "renamed.zip",
        {
            "a/b/elmo_options.json": brown("options.json"),
            "a/meta.json": json.dumps(META).encode(),
            "a/b/elmo_weights.hdf5": brown("weights.hdf5"),
            "a/other.hdf5": _other_hdf5(tmp_path),
        },
    )
    expected = ek.BiLM.from_preset("brown-small").get_weight_arrays()
    got = ek.BiLM.from_preset(archive).get_weight_arrays()
    assert sorted(got) == sorted(expected) and all(np.array_equal(got[k], expected[k]) for k in got)
    assert parameter_count(archive_options(archive)) == 1_365_456


@pytest.mark.parametrize(
    "case, problem",
    [
        ("no options", r"has no options: no options\.json, and no \.json file in it holds ELMo options"),
        ("two weights", r"holds 2 candidate weight files \(m/model\.hdf5, m/x/weights\.hdf5\)"),
        ("two laid out", r"holds 2 candidate weight files \(m/a\.hdf5, m/b\.hdf5\)"),
        ("no weights", r"has no weights: no model\.hdf5 or weights\.hdf5"),
        ("truncated", r"is a truncated or damaged ZIP archive"),
        ("not a zip", r"is not a ZIP archive"),
        ("missing", r"not found: give the path of a \.zip file"),
    ],
)
def test_bad_archives_name_the_archive_and_the_problem(tmp_path, case, problem):
    path = tmp_path / "bad.zip"
    members = {
        "no options": {"m/meta.json": json.dumps(META).encode(), "m/model.hdf5": brown("weights.hdf5")},
        "two weights": _weights_pair("m/model.hdf5", "m/x/weights.hdf5"),
        "two laid out": _weights_pair("m/a.hdf5", "m/b.hdf5"),
        "no weights": {"m/options.json": brown("options.json"), "m/other.hdf5": _other_hdf5(tmp_path)},
    }
    if case in members:
        make_zip(path, members[case])
    elif case == "truncated":
        whole = open(make_zip(tmp_path / "whole.zip", {"m/options.json": brown("options.json")}), "rb").read()
        path.write_bytes(whole[: len(whole) // 2])
    elif case == "not a zip":
        path.write_text("<html>not found</html>")
    with pytest.raises(InputError, match=f"^archive {re.escape(str(path))} {problem}"):
        ek.BiLM.from_preset(str(path))
    assert not os.path.isdir(os.path.join(cache_dir(), "archives")) or all(
        name.endswith(".lock") for name in os.listdir(os.path.join(cache_dir(), "archives"))
    )  # nothing half-extracted is left


def test_a_killed_extraction_never_blocks_the_next(brown_zip):
    key = hashlib.sha256(open(brown_zip, "rb").read()).hexdigest()[:16]
    parent = os.path.join(cache_dir(), "archives")
    stale = os.path.join(parent, f".{key}.k1ll3d.tmp")
    os.makedirs(stale)
    with open(os.path.join(stale, "weights.hdf5"), "wb") as f:
        f.write(b"half")
    folder = extract_archive(brown_zip)
    assert folder == os.path.join(parent, key) and not os.path.exists(stale)
    assert sorted(os.listdir(folder)) == [ARCHIVE_RECORD, "options.json", "vocab.txt.gz", "weights.hdf5"]


def test_a_url_that_serves_no_zip_caches_nothing(server):
    served = server({"/x.zip": b"<html>sign in</html>", "/short.zip": b"PK\x03\x04 not whole"})
    with pytest.raises(InputError, match=r"is not a ZIP archive: the server sent an HTML page.*nothing was cached"):
        resolve(served.url("/x.zip"))
    with pytest.raises(InputError, match=r"is not a ZIP archive: File is not a zip file.*nothing was cached"):
        resolve(served.url("/short.zip"))


def test_registry_nlpl_entries_resolve_list_and_are_sourced(brown_zip, server, monkeypatch):
    for name, entry in archives().items():
        assert entry["archive_url"] == f"http://vectors.nlpl.eu/repository/20/{name.removeprefix('nlpl-')}.zip"
        assert entry["language"] and entry["corpus"] and entry["description"] and "http" in entry["source"]
        assert entry["archive_sha256"] is None or re.fullmatch("[0-9a-f]{64}", entry["archive_sha256"])
    assert {"nlpl-210", "nlpl-211", "nlpl-217", "nlpl-218"} <= set(archives())
    rows = {row.name: row for row in ek.list_presets()}
    assert (rows["nlpl-210"].params, rows["nlpl-210"].size, rows["nlpl-210"].cached) == (None, None, False)
    assert re.search(r"^nlpl-210 +\? +unknown +no +NorELMo", presets_table(list(rows.values())), re.M)

    data = open(brown_zip, "rb").read()
    served = server({"/repository/20/210.zip": data, "/bad/210.zip": data})
    entry = archives()["nlpl-210"]
    monkeypatch.setitem(entry, "archive_url", served.url("/repository/20/210.zip"))
    expected = ek.BiLM.from_preset("brown-small").get_weight_arrays()
    got = ek.BiLM.from_preset("nlpl-210").get_weight_arrays()
    assert all(np.array_equal(got[k], expected[k]) for k in expected)
    assert resolve("nlpl-210").vocab.endswith("vocab.txt.gz")
    row = next(row for row in ek.list_presets() if row.name == "nlpl-210")
    assert (row.params, row.size, row.cached) == (1_365_456, len(data), True)

    monkeypatch.setitem(entry, "archive_url", served.url("/bad/210.zip"))
    monkeypatch.setitem(entry, "archive_sha256", "0" * 64)
    with pytest.raises(InputError, match=r"its sha256 is [0-9a-f]{64}, expected 0{64}"):
        resolve("nlpl-210")


def test_cli_vocab_cache_takes_a_count(brown_zip, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Hi\n")
    args = ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--preset", brown_zip]
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*args, "--vocab-cache", "-1"])
    assert exit_info.value.code == 2 and "--vocab-cache: must be >= 0, got -1" in capsys.readouterr().err


def test_a_zip_loads_in_a_fresh_process(brown_zip, tmp_path):
    run_fresh(
        f"""
        import elmo_keras as ek

        embedder = ek.ElmoEmbedder.from_preset({brown_zip!r}, dtype="float32")
        assert len(embedder.cache) == 10_000 and "the" in embedder.cache
        assert embedder.embed_sentence(["Hi", "there"]).shape == (3, 2, 256)
        """,
        cwd=tmp_path,
    )
