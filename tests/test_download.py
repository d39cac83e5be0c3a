"""Model files and TF Hub modules by URL, presets by name: the real download code against a local HTTP server.

The server (a thread in this process) honours Range requests or ignores them, can cut a response half-way and can
damage what it sends; every test gets an empty ELMO_KERAS_CACHE and TFHUB_CACHE_DIR.
"""

import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import h5py
import numpy as np
import pytest
import requests
import tensorflow as tf
from elmo_keras.download import RemoteUnavailable, cache_path, fetch

import elmo_keras as ek
from elmo_keras import cli
from elmo_keras.errors import InputError
from elmo_keras.presets import parameter_count, preset_files, presets_table, registry

OPTIONS, WEIGHTS = "/model/options.json", "/model/weights.hdf5"


class FileServer(ThreadingHTTPServer):
    """Serves ``files`` (URL path -> bytes) on 127.0.0.1 and logs each request as (path, Range header, status).

    ``ranges``: answer a Range request with 206 (else 200 and the whole file); ``cut``: paths whose next answer
    announces the full length but stops half-way; ``corrupt``: send the files with their first 64 bytes zeroed;
    ``delay``: seconds to wait before answering; ``stall``: seconds to wait between the headers and the body.
    """

    daemon_threads = True

    def __init__(self, files: dict[str, bytes]):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.files, self.log = dict(files), []
        self.ranges, self.cut, self.corrupt = True, set(), False
        self.delay = self.stall = 0.0
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def stop(self) -> None:
        if self._thread.is_alive():
            self.shutdown()
            self.server_close()


class RangeHandler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        path = urllib.parse.urlparse(self.path).path
        body, asked = self.server.files.get(path), self.headers.get("Range")
        if body is None:
            self.server.log.append((path, asked, 404))
            self.send_error(404)
            return
        time.sleep(self.server.delay)
        if self.server.corrupt:
            body = bytes(64) + body[64:]
        start = int(asked[len("bytes=") :].rstrip("-")) if asked and self.server.ranges else 0
        status = 200 if not (asked and self.server.ranges) else 206 if start < len(body) else 416
        self.server.log.append((path, asked, status))
        self.send_response(status)
        if status == 416:
            self.send_header("Content-Range", f"bytes */{len(body)}")
            self.end_headers()
            return
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.flush()
        time.sleep(self.server.stall)
        payload = body[start:]
        if path in self.server.cut:
            self.server.cut.discard(path)
            payload = payload[: len(payload) // 2]
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture()
def start_server():
    """FileServer(files), stopped at the end of the test."""
    servers = []
    yield lambda files: servers.append(FileServer(files)) or servers[-1]
    for server in servers:
        server.stop()


@pytest.fixture()
def served(fixture_files, start_server):
    """(server, {path: bytes}) serving the fixture model's options.json and weights.hdf5."""
    files = {OPTIONS: open(fixture_files[0], "rb").read(), WEIGHTS: open(fixture_files[1], "rb").read()}
    return start_server(files), files


@pytest.fixture(autouse=True)
def _empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TFHUB_CACHE_DIR", str(tmp_path / "tfhub"))


def forbid_network(monkeypatch) -> None:
    """From now on, any HTTP request (requests, or urllib as tensorflow_hub uses it) fails the test."""

    def refuse(*args, **kwargs):
        pytest.fail(f"network call: {args[1:3]}")

    monkeypatch.setattr(requests.Session, "request", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def fixture_arrays(fixture_files) -> dict:
    return ek.BiLM.from_pretrained(*fixture_files).get_weight_arrays()


def assert_same_arrays(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_url_load_equals_disk_then_works_offline(served, fixture_files, monkeypatch):
    server, files = served
    urls = server.url(OPTIONS), server.url(WEIGHTS)
    expected = fixture_arrays(fixture_files)
    assert_same_arrays(ek.BiLM.from_pretrained(*urls).get_weight_arrays(), expected)
    assert open(cache_path(urls[1]), "rb").read() == files[WEIGHTS]
    server.stop()
    forbid_network(monkeypatch)
    assert_same_arrays(ek.Elmo.from_pretrained(*urls).bilm.get_weight_arrays(), expected)
    assert_same_arrays(ek.ElmoEmbedder(*urls).bilm.get_weight_arrays(), expected)


def test_two_processes_fetching_one_url_send_one_request(served, tmp_path):
    server, files = served
    server.delay = 1.0  # the second process asks while the first one is still downloading
    code = f"from elmo_keras.download import fetch; print(fetch({server.url(WEIGHTS)!r}, progress=False))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    paths = [run.communicate(timeout=300)[0].strip() for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert paths[0] == paths[1] == cache_path(server.url(WEIGHTS))
    assert [entry for entry in server.log if entry[0] == WEIGHTS] == [(WEIGHTS, None, 200)]
    assert open(paths[0], "rb").read() == files[WEIGHTS]


def test_a_stalled_server_is_a_clear_error_after_the_read_timeout(served, monkeypatch):
    server, _ = served
    server.stall = 3.0
    monkeypatch.setattr("elmo_keras.download.TIMEOUT", (1.0, 0.5))  # (60 s in use)
    started = time.monotonic()
    with pytest.raises(RemoteUnavailable, match=re.escape(server.url(OPTIONS))):
        fetch(server.url(OPTIONS), progress=False)
    assert time.monotonic() - started < 30
    assert not os.path.exists(cache_path(server.url(OPTIONS)))


def test_interrupted_download_resumes_with_range(served):
    server, files = served
    server.cut.add(WEIGHTS)
    path = fetch(server.url(WEIGHTS))
    assert open(path, "rb").read() == files[WEIGHTS]
    (_, first, status), (_, resumed, resumed_status) = server.log
    kept = int(resumed[len("bytes=") : -1])  # what arrived before the cut, less the read that broke
    assert first is None and status == 200 and resumed_status == 206 and 0 < kept <= len(files[WEIGHTS]) // 2


@pytest.mark.parametrize("kept", [1000, None])  # None: all of it (killed before the rename)
def test_a_killed_download_is_resumed_by_the_next_run(served, kept):
    server, files = served
    kept = kept or len(files[WEIGHTS])
    part = Path(cache_path(server.url(WEIGHTS)) + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(files[WEIGHTS][:kept])
    assert open(fetch(server.url(WEIGHTS)), "rb").read() == files[WEIGHTS]
    status = 416 if kept == len(files[WEIGHTS]) else 206  # 416: nothing left to send
    assert server.log == [(WEIGHTS, f"bytes={kept}-", status)] and not part.exists()


def test_a_server_that_ignores_range_restarts_cleanly(served):
    server, files = served
    server.ranges = False
    server.cut.add(WEIGHTS)
    assert open(fetch(server.url(WEIGHTS)), "rb").read() == files[WEIGHTS]
    assert [status for _, _, status in server.log] == [200, 200] and server.log[1][1] is not None


def test_damaged_bytes_fail_the_sha256_and_the_hdf5_check(served, fixture_files):
    server, files = served
    server.corrupt = True
    url = server.url(WEIGHTS)
    with pytest.raises(InputError, match=r"not the expected file: its sha256 is .*, expected .*deleted, try again"):
        fetch(url, sha256=hashlib.sha256(files[WEIGHTS]).hexdigest())
    assert not Path(cache_path(url)).exists() and not Path(cache_path(url) + ".part").exists()
    with pytest.raises(InputError, match=f"the download of {url} is not an HDF5 file: .*nothing was cached"):
        ek.BiLM.from_pretrained(fixture_files[0], url)  # no sha256 known: the HDF5 check finds it
    assert not Path(cache_path(url)).exists() and not Path(cache_path(url) + ".part").exists()


@pytest.mark.parametrize(
    "path, body, words",
    [
        (
            WEIGHTS,
            b"<!DOCTYPE html>\n<html><body>Sign in</body></html>\n",
            "is not an HDF5 file: the server sent an HTML page",
        ),
        (OPTIONS, b"<html><body>Not here</body></html>", "is not a JSON file: the server sent an HTML page"),
        (OPTIONS, b'{"lstm": ', "is not a JSON file: Expecting value"),
        ("/model/vocab.txt", b"<S>\n</S>\ncaf\xe9\n", "is not UTF-8 text: 'utf-8' codec can't decode"),
    ],
)
def test_a_file_that_fails_its_check_is_never_cached(served, path, body, words):
    """An answer of 200 with the wrong content (e.g. a sign-in page): an error naming it, no cache entry, and the
    next call asks the server again, so a fixed server (or URL) works without clearing the cache by hand."""
    server, files = served
    good = files.get(path, b"<S>\n</S>\nword\n")
    server.files[path] = body
    url = server.url(path)
    for _ in range(2):
        with pytest.raises(
            InputError,
            match=f"the download of {re.escape(url)} {words}.*it was deleted, nothing was cached: check the URL$",
        ):
            preset_files(server.url("/model/"))
        assert not Path(cache_path(url)).exists() and not Path(cache_path(url) + ".part").exists()
    assert [log[0] for log in server.log].count(path) == 2
    server.files[path] = good
    assert Path(preset_files(server.url("/model/"))[Path(path).stem]).read_bytes() == good


def test_a_cached_file_that_fails_to_load_names_the_folder_to_delete(served, fixture_files):
    """Bytes that pass every download check but not the loader (NaN weights) are cached; the error says how to
    download them again."""
    server, files = served
    good_path = Path(fixture_files[1])
    damaged = Path(cache_path(server.url(WEIGHTS))).parent.parent / "damaged.hdf5"
    damaged.parent.mkdir(parents=True)
    shutil.copy(good_path, damaged)
    with h5py.File(damaged, "a") as f:
        f["char_embed"][0, 0] = np.inf
    server.files[WEIGHTS] = damaged.read_bytes()
    url = server.url(WEIGHTS)
    folder = Path(cache_path(url)).parent
    with pytest.raises(
        InputError,
        match=re.escape(
            f"dataset 'char_embed' holds 1 NaN or infinite value(s) of "
            f"1044; the file is damaged: download or write it again; it is "
            f"a cached download: delete the folder {folder} to download "
            "it again"
        ),
    ):
        ek.BiLM.from_pretrained(server.url(OPTIONS), url)
    shutil.rmtree(folder)
    server.files[WEIGHTS] = files[WEIGHTS]
    assert_same_arrays(
        ek.BiLM.from_pretrained(server.url(OPTIONS), url).get_weight_arrays(), fixture_arrays(fixture_files)
    )


def test_a_cache_variable_that_names_a_file(served, tmp_path, monkeypatch):
    server, _ = served
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "a-file"))
    with pytest.raises(
        InputError,
        match=re.escape(f"cannot download into ELMO_KERAS_CACHE={tmp_path / 'a-file'}: Not a directory (")
        + ".*set ELMO_KERAS_CACHE to a writable "
        "folder$",
    ):
        fetch(server.url(OPTIONS))


def test_a_read_only_cache_serves_what_it_holds_and_names_itself_for_the_rest(served, tmp_path, monkeypatch):
    """Root writes into 0555 folders, so where the tests run as root the refusal is simulated: os.makedirs raises
    the PermissionError a read-only folder gives (the code under test catches whatever OSError the file system
    raises there)."""
    server, _ = served
    cached = fetch(server.url(OPTIONS))
    cache = tmp_path / "cache"
    cache.chmod(0o555)
    if os.access(cache, os.W_OK):  # root

        def refuse(name, *args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)

        monkeypatch.setattr(os, "makedirs", refuse)
    try:
        assert fetch(server.url(OPTIONS)) == cached  # already there: read, nothing written
        with pytest.raises(
            InputError, match=re.escape(f"cannot download into ELMO_KERAS_CACHE={cache}: Permission denied (")
        ):
            fetch(server.url(WEIGHTS))
    finally:
        cache.chmod(0o755)


def test_a_damaged_cached_file_is_fetched_again_or_reported_offline(served):
    server, files = served
    url = server.url(WEIGHTS)
    path = fetch(url)
    with open(path, "r+b") as f:
        f.truncate(100)
    assert open(fetch(url), "rb").read() == files[WEIGHTS] and len(server.log) == 2
    with open(path, "r+b") as f:
        f.truncate(100)
    server.stop()
    with pytest.raises(RemoteUnavailable, match=r"cached copy has 100 bytes instead of \d+ .*place it at " + path):
        fetch(url)


def test_offline_and_not_cached_names_the_url_and_the_cache_path(served):
    server, _ = served
    url = server.url(OPTIONS)
    server.stop()
    with pytest.raises(InputError, match=f"cannot download {url} .*place it at {cache_path(url)}$"):
        ek.BiLM.from_pretrained(url, server.url(WEIGHTS))


def test_presets_by_registry_name_and_by_url_folder(served, fixture_files, monkeypatch):
    server, files = served
    monkeypatch.setitem(
        registry(),
        "tiny",
        {
            "description": "the test fixture",
            "architecture": "small",
            "params": 1,
            "source": "tests",
            "options_url": server.url(OPTIONS),
            "weights_url": server.url(WEIGHTS),
            "weights_bytes": None,
            "weights_sha256": hashlib.sha256(files[WEIGHTS]).hexdigest(),
        },
    )
    expected = fixture_arrays(fixture_files)
    assert_same_arrays(ek.BiLM.from_preset("tiny").get_weight_arrays(), expected)
    folder = preset_files(server.url("/model/"))
    assert folder["vocab"] is None and folder["softmax"] is None  # 404: absent
    server.stop()
    forbid_network(monkeypatch)
    assert_same_arrays(ek.BiLM.from_preset("tiny").get_weight_arrays(), expected)
    tiny = next(row for row in ek.list_presets() if row.name == "tiny")
    assert tiny.cached and tiny.size == len(files[WEIGHTS])


def test_registry_entries_are_complete_and_their_parameter_counts_computed():
    rows = {row.name: row for row in ek.list_presets()}
    assert {"brown-small", "small", "medium", "original", "original-5.5b", "pubmed"} <= set(rows)
    for name, entry in registry().items():
        assert entry["options_url"].startswith("https://") and entry["weights_url"].startswith("https://"), name
        assert entry["source"] and entry["description"], name
        assert entry["params"] == parameter_count(ek.RELEASED_OPTIONS[entry["architecture"]]), name
        assert not rows[name].cached and rows[name].params == entry["params"]
    assert [registry()[n]["params"] for n in ("small", "medium", "original")] == [13593296, 28027728, 93600848]
    assert "brown-small" in presets_table(list(rows.values())) and rows["brown-small"].cached


def test_parameter_count_is_what_a_built_bilm_holds(skip_options, fixture_options):
    for options in (skip_options, fixture_options):
        bilm = ek.BiLM(options)
        bilm.build()
        assert bilm.count_params() == parameter_count(options)


@pytest.fixture(scope="module")
def hub_module(fixture_files, tmp_path_factory):
    """(folder, .tar.gz bytes) of a TF Hub ELMo module written from the fixture model."""
    root = tmp_path_factory.mktemp("hub")
    ek.export_hub_module(ek.Elmo.from_pretrained(*fixture_files), root / "module")
    with tarfile.open(root / "module.tar.gz", "w:gz") as tar:
        tar.add(root / "module", arcname=".")
    return root / "module", (root / "module.tar.gz").read_bytes()


def test_hub_elmo_from_a_tar_gz_url_in_sequential_then_offline(hub_module, start_server, monkeypatch):
    import keras

    folder, archive = hub_module
    server = start_server({"/elmo/module.tar.gz": archive})
    url = server.url("/elmo/module.tar.gz")
    sentences = tf.constant(["The bank approved the loan .", "Hi"])
    expected = ek.HubElmo(folder, output_key="default")(sentences).numpy()

    def sequential() -> keras.Sequential:
        return keras.Sequential(
            [keras.Input(shape=(), dtype="string"), ek.HubElmo(url, output_key="default"), keras.layers.Dense(2)]
        )

    model = sequential()
    assert model(sentences).shape == (2, 2)
    np.testing.assert_array_equal(model.layers[0](sentences).numpy(), expected)
    server.stop()
    forbid_network(monkeypatch)
    np.testing.assert_array_equal(sequential().layers[0](sentences).numpy(), expected)
    assert_same_arrays(ek.BiLM.from_hub(url).get_weight_arrays(), ek.BiLM.from_hub(folder).get_weight_arrays())


def test_hub_url_offline_and_not_cached():
    url = "http://127.0.0.1:9/elmo/3.tar.gz"  # port 9 (discard): nothing listens
    with pytest.raises(
        InputError,
        match=r"cannot download the TF Hub module .*127\.0\.0\.1:9.* extract it into "
        r".*tfhub/[0-9a-f]{40} \(TF Hub's cache",
    ):
        ek.HubElmo(url)


def test_cli_takes_urls_and_lists_presets(served, tmp_path, capsys):
    server, _ = served
    text = tmp_path / "in.txt"
    text.write_text("The bank approved the loan .\nHi\n")
    assert (
        cli.main(
            [
                "embed",
                str(text),
                str(tmp_path / "out.hdf5"),
                "--options",
                server.url(OPTIONS),
                "--weights",
                server.url(WEIGHTS),
            ]
        )
        == 0
    )
    assert (tmp_path / "out.hdf5").exists()
    assert cli.main(["presets"]) == 0
    assert "original-5.5b" in capsys.readouterr().out
