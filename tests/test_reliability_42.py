"""Issue 42, items 2-5, on the user's paths: labels files checked once at load (a repeated name, a non-string, a wrong
count) and separator-only label cells refused; `predict` stopped by SIGTERM / SIGINT (exit 130, one line, no
temporary file) and clearing what a SIGKILLed run left, models without probabilities refused unless
`--raw-scores`; archives whose members fail a download's checks, are links or devices, or expand past the limits
refused before anything is marked extracted; unencodable text and bad `pool` values named as InputError on every
text path, and `lm-predict` naming an untrained softmax first. CLI steps run as their own processes, started
together where they are independent (the machine has two cores)."""

import csv
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
from test_archives import brown, make_zip
from test_download import FileServer
from test_lm import TINY

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.errors import InputError
from elmo_keras.io.archive import MAX_BYTES_ENV, MAX_RATIO_ENV, extract_archive
from elmo_keras.io.download import cache_dir
from elmo_keras.saving import save_model
from elmo_keras.tasks.predict import evaluate_file, load_classifier, predict_file
from elmo_keras.tasks.train_task import load_task

TEXTS = ["good fun movie", "bad boring film", "great acting", "awful plot"]
SURROGATE = "\ud800"
SHOWN = re.escape(repr(SURROGATE)[1:-1])  # how a message shows it (repr): backslash, u, d800
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "elmo_keras.cli", *args]


def _run_together(folder: Path, commands: dict[str, list[str]], env=None) -> dict[str, subprocess.CompletedProcess]:
    """Each command's CLI process, all started at once (they are independent), waited for."""
    started = {
        key: subprocess.Popen(
            _cli(*args), cwd=folder, env={**ENV, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for key, args in commands.items()
    }
    done = {}
    for key, process in started.items():
        out, err = process.communicate(timeout=300)
        done[key] = subprocess.CompletedProcess(process.args, process.returncode, out.decode(), err.decode())
    return done


def _one_error_line(done: subprocess.CompletedProcess, command: str, *words: str) -> str:
    """The process exited 2 with one error line on stderr that holds ``words``; returns that line."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("elmo-keras ")]
    assert done.returncode == 2 and len(lines) == 1, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert lines[0].startswith(f"elmo-keras {command}: error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _classifier(classes: int, multi_label: bool = False) -> ek.models.TextModel:
    words = ek.StaticEmbedding.from_corpus([ek.tokenize(t) for t in TEXTS], dim=4)
    return ek.models.text_classifier(words, classes, head="pool", multi_label=multi_label)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """s.keras (softmax over 3 labels), m.keras (sigmoid over 3 labels), logits.keras (no activation), with their
    labels files, and texts.txt: the folder."""
    folder = tmp_path_factory.mktemp("models")
    single = _classifier(3)
    save_model(single, folder / "s.keras", ["neg", "pos", "mixed"])
    save_model(_classifier(3, multi_label=True), folder / "m.keras", ["acting", "film", "fun"])
    logits = keras.layers.Dense(3, name="logits")(single.get_layer("scores").input)
    save_model(ek.models.TextModel(single.inputs, logits), folder / "logits.keras", ["neg", "pos", "mixed"])
    (folder / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    return folder


# -- item 2: labels that cannot lie ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, words",
    [
        (["neg", "neg", "pos"], ["the label 'neg' names outputs 0 and 1"]),
        (["neg", 1, "pos"], ["label 1 is 1 (int), not a string"]),
        (["neg", "pos"], ["has 2 label(s), but the model has 3 outputs"]),
        ({"neg": 0}, ["must hold a JSON list of strings"]),
    ],
)
def test_a_labels_file_is_checked_once_at_load(models, tmp_path, names, words):
    path = tmp_path / "c.keras"
    path.write_bytes((models / "s.keras").read_bytes())
    (tmp_path / "c.keras.labels.json").write_text(json.dumps(names))
    for call in (
        lambda: load_classifier(path),
        lambda: predict_file(path, models / "texts.txt", tmp_path / "out.jsonl"),
        lambda: evaluate_file(path, _labelled(tmp_path, [(t, "neg") for t in TEXTS])),
    ):
        with pytest.raises(InputError) as raised:
            call()
        assert str(raised.value).startswith(str(tmp_path / "c.keras.labels.json")) and all(
            w in str(raised.value) for w in words
        )
    assert not (tmp_path / "out.jsonl").exists()
    with pytest.raises(InputError, match="the labels given for .*'a' names outputs 0 and 2"):
        load_classifier(models / "s.keras", ["a", "b", "a"])


def test_save_model_refuses_a_repeated_label_before_writing(tmp_path):
    with pytest.raises(InputError, match="label_names: the label 'x' names outputs 0 and 1"):
        save_model(_classifier(3), tmp_path / "r.keras", ["x", "x", "y"])
    assert os.listdir(tmp_path) == []


def _labelled(folder: Path, rows, name: str = "test.csv") -> Path:
    with open(folder / name, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *rows])
    return folder / name


def test_a_separator_only_label_cell_is_refused_like_an_empty_one(models, tmp_path):
    rows = [("good fun movie", "fun|film"), ("bad boring film", "||"), ("great acting", " | "), ("awful", "film")]
    data = _labelled(tmp_path, rows)
    expected = r"2 row\(s\) have no 'label' \(on line\(s\) 3, 4\); label them or remove them"
    with pytest.raises(InputError, match=expected):
        evaluate_file(models / "m.keras", data)
    with pytest.raises(InputError, match=expected):
        load_task(str(data), str(data), multi_label=True)
    with pytest.raises(InputError, match=expected):  # --test too
        load_task(str(_labelled(tmp_path, rows[:1] * 2 + rows[3:] * 2, "train.csv")), str(data), multi_label=True)
    single = load_task(str(data), str(data))  # one label per cell: "||" is a class name like any other
    assert "||" in single.class_names


# -- item 3: predict ---------------------------------------------------------------------------------------------


def _start_predict(folder: Path, out: str, log: str) -> subprocess.Popen:
    with open(folder / log, "w") as err:
        return subprocess.Popen(
            _cli("predict", "s.keras", "many.txt", "--out", out, "--batch-size", "1"),
            cwd=folder,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _temporaries(folder: Path, out: str) -> set[str]:
    return {name for name in os.listdir(folder) if name.startswith(f".{out}.") and name.endswith(".tmp")}


def _when(process: subprocess.Popen, ready, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"{what}: the run ended before the signal"
        assert time.monotonic() < deadline, f"{what}: not reached"
        time.sleep(0.02)


def test_predict_stops_on_sigterm_and_sigint_and_clears_a_killed_runs_temporary(models, tmp_path):
    """SIGKILL (a.jsonl) and SIGINT (b.jsonl) on two runs at once; then a new run on a.jsonl deletes what the
    SIGKILLed one left as soon as it holds the output's lock, and SIGTERM stops it."""
    for name in ("s.keras", "s.keras.labels.json"):
        (tmp_path / name).write_bytes((models / name).read_bytes())
    (tmp_path / "many.txt").write_text("\n".join(TEXTS * 5000) + "\n")
    killed, interrupted = _start_predict(tmp_path, "a.jsonl", "a.log"), _start_predict(tmp_path, "b.jsonl", "b.log")
    _when(killed, lambda: _temporaries(tmp_path, "a.jsonl"), "SIGKILL")
    killed.send_signal(signal.SIGKILL)
    _when(interrupted, lambda: _temporaries(tmp_path, "b.jsonl"), "SIGINT")
    interrupted.send_signal(signal.SIGINT)
    assert killed.wait() == -signal.SIGKILL
    left = _temporaries(tmp_path, "a.jsonl")
    assert len(left) == 1, left  # what a kill -9 leaves

    stopped = _start_predict(tmp_path, "a.jsonl", "c.log")
    _when(stopped, lambda: _temporaries(tmp_path, "a.jsonl") - left, "SIGTERM")
    assert not _temporaries(tmp_path, "a.jsonl") & left, "the dead run's temporary is deleted"
    stopped.send_signal(signal.SIGTERM)
    for process, out, log in ((interrupted, "b.jsonl", "b.log"), (stopped, "a.jsonl", "c.log")):
        assert process.wait(timeout=120) == 130, (tmp_path / log).read_text()[-3000:]
        lines = [line for line in (tmp_path / log).read_text().splitlines() if line.startswith("elmo-keras")]
        assert lines == [
            f"elmo-keras predict: interrupted: {out} was not written (its temporary file is deleted); run the "
            "same command again"
        ]
        assert not (tmp_path / out).exists() and not _temporaries(tmp_path, out)


def test_scores_that_are_not_probabilities_need_raw_scores(models, tmp_path):
    with pytest.raises(InputError, match=r"last layer of .*logits\.keras \(logits, activation linear\) does not give"):
        predict_file(models / "logits.keras", models / "texts.txt", tmp_path / "out.jsonl")
    with pytest.raises(InputError, match="pass --raw-scores"):
        evaluate_file(models / "logits.keras", _labelled(tmp_path, [(t, "neg") for t in TEXTS]))
    with pytest.raises(InputError, match=r"already probabilities \(softmax\).*drop it"):
        predict_file(models / "s.keras", models / "texts.txt", tmp_path / "out.jsonl", raw_scores=True)
    assert not (tmp_path / "out.jsonl").exists()
    data = _labelled(tmp_path, [(t, "neg") for t in TEXTS])
    scored = evaluate_file(models / "logits.keras", data, raw_scores=True, top_k=2)
    model = keras.models.load_model(models / "logits.keras")
    logits = model.predict(np.array(TEXTS, dtype=object), verbose=0)
    assert scored["raw_scores"] and not scored["multi_label"]
    assert scored["accuracy"] == float(np.mean(logits.argmax(-1) == 0))
    assert scored["top_k_accuracy"] == float(np.mean((np.argsort(-logits, -1)[:, :2] == 0).any(-1)))


# -- item 4: archives --------------------------------------------------------------------------------------------


def _zeros_zip(path: Path, size: int = 4096) -> str:
    return make_zip(path, {"m/options.json": brown("options.json"), "m/elmo/model.hdf5": bytes(size)})


def _nothing_extracted() -> bool:
    parent = os.path.join(cache_dir(), "archives")
    return not os.path.isdir(parent) or all(name.endswith(".lock") for name in os.listdir(parent))


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))


def test_a_member_that_fails_its_check_names_the_archive_and_member(tmp_path, cache):
    archive = _zeros_zip(tmp_path / "zeros.zip")
    expected = re.escape(f"archive {archive}: member m/elmo/model.hdf5 is not an HDF5 file")
    for _ in range(2):  # nothing is marked extracted: the second try checks again
        with pytest.raises(InputError, match=f"^{expected}.*nothing was extracted") as raised:
            ek.BiLM.from_preset(archive)
        assert "download or write it again" not in str(raised.value) and _nothing_extracted()
    server = FileServer({"/zeros.zip": open(archive, "rb").read()})
    try:
        url = server.url("/zeros.zip")
        with pytest.raises(InputError, match=re.escape(f"archive {url}: member m/elmo/model.hdf5 is not an HDF5")):
            extract_archive(url)
    finally:
        server.stop()
    assert _nothing_extracted()
    bad_vocab = make_zip(
        tmp_path / "vocab.zip",
        {"options.json": brown("options.json"), "model.hdf5": brown("weights.hdf5"), "vocab.txt": b"the\n\xff\n"},
    )
    with pytest.raises(InputError, match=r"member vocab\.txt is not UTF-8 text"):
        extract_archive(bad_vocab)
    assert _nothing_extracted()


@pytest.mark.parametrize("kind, words", [(stat.S_IFLNK, "a symbolic link"), (stat.S_IFCHR, "a character device")])
def test_link_and_device_members_are_refused(tmp_path, cache, kind, words):
    path = tmp_path / "special.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/options.json", brown("options.json"))
        member = zipfile.ZipInfo("m/model.hdf5")
        member.external_attr = (kind | 0o777) << 16
        zf.writestr(member, "/etc/passwd")
    with pytest.raises(InputError, match=re.escape(f"archive {path}: member m/model.hdf5 is {words}, not a file")):
        extract_archive(path)
    assert _nothing_extracted()


def test_what_an_archive_may_expand_to_is_limited_and_can_be_raised(tmp_path, cache, monkeypatch):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("m/options.json", brown("options.json"))
        zf.writestr("m/model.hdf5", bytes(16 << 20))  # 16 MiB of zeros: about 16 KB compressed
    with pytest.raises(
        InputError, match=rf"member m/model\.hdf5 expands from .* over the limit of 100 .*{MAX_RATIO_ENV}"
    ):
        extract_archive(path)
    assert _nothing_extracted()
    monkeypatch.setenv(MAX_RATIO_ENV, "100000")  # raised: extracted, then its check fails (zeros are no HDF5)
    with pytest.raises(InputError, match="member m/model.hdf5 is not an HDF5 file"):
        extract_archive(path)
    monkeypatch.setenv(MAX_BYTES_ENV, "1000000")
    with pytest.raises(
        InputError, match=rf"expand to [\d,]+ bytes, over the limit of 1,000,000 bytes.*{MAX_BYTES_ENV}"
    ):
        extract_archive(path)
    monkeypatch.setenv(MAX_BYTES_ENV, "lots")
    with pytest.raises(InputError, match=f"{MAX_BYTES_ENV}='lots' must be a positive integer"):
        extract_archive(path)
    assert _nothing_extracted()


# -- item 5: the package's errors at the API boundary ------------------------------------------------------------


def test_unencodable_text_is_named_on_every_text_path(fixture_files, fixture_options):
    row_token = f"row 2 cannot be encoded as UTF-8: token 1 'x{SHOWN}y' holds the lone surrogate U\\+D800"
    texts = ["a b", "c", f"d x{SURROGATE}y e"]
    elmo = ek.Elmo(fixture_options)
    for call in (lambda: elmo(texts), lambda: _classifier(2).predict(texts, verbose=0)):
        with pytest.raises(InputError, match=row_token):
            call()
    with pytest.raises(InputError, match=f"row 0, token 1, cannot be encoded as UTF-8: '{SHOWN}' holds"):
        elmo([["a", SURROGATE]])
    embedder = ek.ElmoEmbedder(*fixture_files)
    sentences = [["a"] * 9, ["b"], ["c", "d"], ["a", "b", SURROGATE]]  # sorted by length, row 3 is batched second
    with pytest.raises(InputError, match="token 2 of sentence 3 cannot be encoded as UTF-8: .* at character 0"):
        list(embedder.embed_sentences(sentences, batch_size=2))
    lm = ek.lm.BiLanguageModel(ek.load_options(TINY), ["<S>", "</S>", "<UNK>", "the", "bank"])
    lm.softmax_trained = True  # as if trained: what is asked is checked before the model runs
    for call in (
        lambda: lm.substitutes(f"the [bank] {SURROGATE}"),
        lambda: lm.substitutes(["the", f"b{SURROGATE}"], 0),
        lambda: lm.word_probabilities([("the bank", 1), (f"the {SURROGATE}", 0)]),
    ):
        with pytest.raises(InputError, match="cannot be encoded as UTF-8: .* holds the lone surrogate"):
            call()
    with pytest.raises(InputError, match=r"query 1: token 1 of sentence 0 cannot be encoded"):
        lm.word_probabilities([("the bank", 1), (f"the {SURROGATE}", 0)])
    for pool in (1, 0.5, {"mean"}, ["mean", 2]):
        with pytest.raises(
            InputError, match=f"pool must be 'mean', 'max' or a list of both .* got {re.escape(repr(pool))}"
        ):
            ek.Elmo(fixture_options, output_mode="sentence", pool=pool)


# -- every item's command as its own process ----------------------------------------------------------------------


def test_each_items_refusal_as_a_separate_cli_process(models, tmp_path):
    """Three commands at once, each its own process: a repeated label (predict), an archive member that is no HDF5
    file (embed), an LM with an untrained softmax asked for more words than it has (lm-predict)."""
    (tmp_path / "s.keras").write_bytes((models / "s.keras").read_bytes())
    (tmp_path / "s.keras.labels.json").write_text('["neg", "pos", "neg"]')
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    _zeros_zip(tmp_path / "zeros.zip")
    ek.lm.BiLanguageModel(ek.load_options(TINY), ["<S>", "</S>", "<UNK>", "the", "bank"]).save(tmp_path / "lm.keras")
    done = _run_together(
        tmp_path,
        {
            "labels": ["predict", "s.keras", "texts.txt", "--out", "out.jsonl"],
            "archive": ["embed", "texts.txt", "out.hdf5", "--preset", "zeros.zip"],
            "softmax": ["lm-predict", "--preset", "lm.keras", "the [bank]", "--top-k", "50"],
        },
        env={"ELMO_KERAS_CACHE": str(tmp_path / "cache")},
    )
    _one_error_line(done["labels"], "predict", "s.keras.labels.json: the label 'neg' names outputs 0 and 2")
    _one_error_line(done["archive"], "embed", "archive zeros.zip: member m/elmo/model.hdf5 is not an HDF5 file")
    _one_error_line(done["softmax"], "lm-predict", "has no trained softmax")
    archives = tmp_path / "cache" / "archives"
    assert not (tmp_path / "out.jsonl").exists() and all(name.endswith(".lock") for name in os.listdir(archives))


def test_cli_raw_scores_and_a_command_line_that_is_not_utf8(models, tmp_path, capsys):
    """What the command runs (``main``): ``predict --raw-scores`` writes the logits; a byte that is not UTF-8 on the
    command line (Python's surrogate escape, ``\\udcff``) is one error line naming the token."""
    out = str(tmp_path / "raw.jsonl")
    assert main(["predict", str(models / "logits.keras"), str(models / "texts.txt"), "--out", out, "--raw-scores"]) == 0
    rows = [json.loads(line) for line in open(out)]
    logits = keras.models.load_model(models / "logits.keras").predict(np.array(TEXTS, dtype=object), verbose=0)
    for row, expected in zip(rows, logits, strict=True):
        assert row["label"] == ["neg", "pos", "mixed"][expected.argmax()] and "labels" not in row
        np.testing.assert_allclose(row["score"], expected.max(), atol=1e-5)
    capsys.readouterr()
    assert main(["lm-predict", "--preset", "brown-small", "the [bank] \udcff"]) == 2  # the byte 0xff in argv
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "elmo-keras lm-predict: error: token 2 of sentence 0 cannot be encoded as UTF-8: '\\udcff' holds the lone "
        "surrogate U+DCFF at character 0; replace it (text.encode('utf-8', 'replace').decode()) or decode the source "
        "bytes as UTF-8"
    ]
