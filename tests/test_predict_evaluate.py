"""`elmo-keras predict` and `elmo-keras evaluate` (issue 35): a file of texts labelled row for row (line-exact for
text files), a labelled CSV scored; the results equal the in-process model's and scikit-learn's; bad input is one
line and exit 2. Two models, trained once: a single-label classifier over the bilm-tf fixture as `elmo-keras train`
trains it, and a multi-label one over a learned word embedding (the static baseline, fast)."""

import csv
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, classification_report, f1_score

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.saving import save_model
from elmo_keras.tasks.train_task import load_task, train_model
from tests.fresh import run_cli
from tests.test_bad_input_cli import _fails

ROWS = [("good fun movie", "pos"), ("bad boring film", "neg"), ("great acting", "pos"), ("awful plot", "neg")]
MULTI = [("good fun movie", "fun|film"), ("bad boring film", "film"), ("great acting", "fun|acting"), ("awful", "")]
#: a text file as users have them: a byte-order mark, CRLF, blank and whitespace-only lines, a vertical tab,
#: U+2028 / U+0085 / NBSP (which neither end a line nor split a token), no newline at the end
LINES = (
    b"\xef\xbb\xbfgood fun movie\r\n\n   \n\tbad plot \x0b\nawful\xe2\x80\xa8acting\ngreat\xc2\x85film\xc2\xa0x\nlast"
)
TOLERANCE = 1e-5  # scores of the CLI's process vs. the in-process model (batches of other lengths)


def _csv(path: Path, header, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory, fixture_files):
    """s.keras (single-label, ELMo + words, trained as `train` does) and m.keras (multi-label, words only), with
    their labels files: (the folder, {file name: (the trained model in memory, its labels)})."""
    path = tmp_path_factory.mktemp("predict")
    _csv(path / "d.csv", ("text", "label"), ROWS * 2)
    task = load_task(str(path / "d.csv"), str(path / "d.csv"))
    single = train_model(task, *fixture_files, head="pool", units=4, words=8, epochs=1, validation_split=0, verbose=0)
    save_model(single, path / "s.keras", task.class_names)

    _csv(path / "m.csv", ("text", "label"), [(t, y or "film") for t, y in MULTI] * 2)
    task = load_task(str(path / "m.csv"), str(path / "m.csv"), multi_label=True)
    words = ek.StaticEmbedding.from_corpus([ek.tokenize(t) for t in task.train_texts], dim=8)
    multi = ek.models.text_classifier(words, len(task.class_names), head="pool", multi_label=True, top_k=2)
    multi.fit(task.train_texts, task.train_labels, epochs=1, verbose=0)
    save_model(multi, path / "m.keras", task.class_names)
    return path, {"s.keras": (single, ["neg", "pos"]), "m.keras": (multi, ["acting", "film", "fun"])}


@pytest.fixture()
def folder(trained) -> Path:
    return trained[0]


def _expected(trained, model_name: str, texts: list[str]) -> tuple[np.ndarray, list[str]]:
    model, names = trained[1][model_name]
    return model.predict(np.array(texts, dtype=object), verbose=0), names


def _check_ranking(pairs: list[tuple[str, float]], expected: np.ndarray, names: list[str], k: int) -> None:
    """``pairs`` (label, score) are the ``k`` best of ``expected``, best first, with their scores (near-ties, within
    the tolerance, may come in either order)."""
    listed = [names.index(label) for label, _ in pairs]
    assert len(listed) == k == len(set(listed))
    np.testing.assert_allclose([score for _, score in pairs], expected[listed], atol=TOLERANCE)
    assert all(a >= b - TOLERANCE for a, b in zip(expected[listed], expected[listed][1:])), "best first"
    rest = [i for i in range(len(names)) if i not in listed]
    assert not rest or expected[listed].min() >= expected[rest].max() - TOLERANCE, "the k best"


def _ok(done) -> str:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


# -- predict ------------------------------------------------------------------------------------------------
def test_predict_text_file_line_exact_in_a_fresh_process(trained, folder):
    (folder / "in.txt").write_bytes(LINES)
    out = _ok(run_cli("predict", "s.keras", "in.txt", "--out", "out.jsonl", "--top-k", "5", cwd=folder))
    texts = [line.removesuffix(b"\r").decode() for line in LINES.removeprefix(b"\xef\xbb\xbf").split(b"\n")]
    assert len(texts) == 7 and "labelled 7 rows (2 without tokens): out.jsonl" in out
    rows = [json.loads(line) for line in (folder / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    scores, names = _expected(trained, "s.keras", texts)
    assert [r["row"] for r in rows] == list(range(7))
    assert [r["text"] for r in rows] == texts
    assert [r["empty"] for r in rows] == [not ek.tokenize(t) for t in texts] == [False, True, True] + [False] * 4
    np.testing.assert_allclose([r["score"] for r in rows], scores.max(-1), atol=TOLERANCE)
    for row, expected in zip(rows, scores):
        assert row["top_k"][0] == {"label": row["label"], "score": row["score"]}
        _check_ranking([(t["label"], t["score"]) for t in row["top_k"]], expected, names, k=2)  # --top-k 5: capped
        assert "labels" not in row
    assert not [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_predict_csv_multi_label_to_csv(trained, folder, capsys):
    body = ["good fun movie", "", "boring\nacting film", "  ", "fun fun fun"]
    _csv(folder / "docs.csv", ("id", "body"), [(i, t) for i, t in enumerate(body)])
    out = folder / "labels.csv"
    assert main(["predict", str(folder / "m.keras"), str(folder / "docs.csv"), "--out", str(out)]) == 2
    assert "no column 'text'" in capsys.readouterr().err
    argv = ["predict", str(folder / "m.keras"), str(folder / "docs.csv"), "--out", str(out), "--text-column", "body"]
    assert main([*argv, "--top-k", "2", "--threshold", "0.5"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    scores, names = _expected(trained, "m.keras", body)
    assert list(rows[0]) == [
        "row", "text", "empty", "label", "score", "labels", "label_scores", "label_1", "score_1", "label_2", "score_2"
    ]  # fmt: skip
    assert [r["text"] for r in rows] == body and [r["row"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert [r["empty"] for r in rows] == ["false", "true", "false", "true", "false"]
    for row, expected in zip(rows, scores):
        assert (row["label"], row["score"]) == (row["label_1"], row["score_1"])
        _check_ranking([(row[f"label_{r}"], float(row[f"score_{r}"])) for r in (1, 2)], expected, names, k=2)
        over = row["labels"].split("|") if row["labels"] else []
        for i, name in enumerate(names):  # every label at or over the threshold, none under it
            if expected[i] >= 0.5 + TOLERANCE:
                assert name in over
            elif expected[i] < 0.5 - TOLERANCE:
                assert name not in over
        scores_over = [float(x) for x in row["label_scores"].split("|") if x]
        _check_ranking(list(zip(over, scores_over)), expected[[names.index(n) for n in over]], over, k=len(over))


def test_predict_without_labels_file_uses_indices(folder, caplog):
    shutil.copy(folder / "m.keras", folder / "bare.keras")
    (folder / "t.txt").write_text("good fun\n", encoding="utf-8")
    assert main(["predict", str(folder / "bare.keras"), str(folder / "t.txt"), "--out", str(folder / "b.jsonl")]) == 0
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warning) == 1 and "has no labels file" in warning[0] and "\n" not in warning[0], warning
    row = json.loads((folder / "b.jsonl").read_text())
    assert {t["label"] for t in row["top_k"]} == {"0", "1", "2"}


@pytest.mark.parametrize(
    "case, words",
    [
        ("exists", "pass --overwrite"),
        ("extension", "give a name ending in .jsonl or .csv"),
        ("is_input", "is the input file"),
        ("is_model", "is the model file"),
        ("empty_txt", "is empty"),
        ("empty_csv", "has a header row but no rows"),
        ("column", "no column 'text'"),
        ("column_txt", "--text-column is for CSV input"),
        ("not_utf8", "line 2 is not valid UTF-8"),
    ],
)
def test_predict_bad_input_is_one_line(folder, capsys, tmp_path, monkeypatch, case, words):
    (tmp_path / "in.txt").write_text("a\nb\n")
    _csv(tmp_path / "in.csv", ("body",), [("a",)])
    (tmp_path / "taken.jsonl").write_text("keep")
    argv = {
        "exists": ["in.txt", "--out", "taken.jsonl"],
        "extension": ["in.txt", "--out", "out.txt"],
        "is_input": ["in.csv", "--out", "in.csv"],
        "is_model": ["in.txt", "--out", str(folder / "s.keras.csv")],
        "empty_txt": ["empty.txt", "--out", "out.jsonl"],
        "empty_csv": ["header.csv", "--out", "out.jsonl"],
        "column": ["in.csv", "--out", "out.csv"],
        "column_txt": ["in.txt", "--out", "out.csv", "--text-column", "body"],
        "not_utf8": ["latin.txt", "--out", "out.jsonl"],
    }[case]
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "header.csv").write_text("text,id\n")
    (tmp_path / "latin.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    monkeypatch.chdir(tmp_path)
    model = str(folder / "s.keras")
    if case == "is_model":  # a link named like an output, pointing at the model
        os.symlink(model, folder / "s.keras.csv")
    try:
        _fails(["predict", model, *argv], capsys, words)
    finally:
        if case == "is_model":
            os.remove(folder / "s.keras.csv")
    assert (tmp_path / "taken.jsonl").read_text() == "keep"
    assert not {"out.jsonl", "out.csv", "out.txt"} & set(os.listdir(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# -- evaluate -----------------------------------------------------------------------------------------------
def test_evaluate_single_label_in_a_fresh_process(trained, folder):
    test = [("good movie", "pos"), ("boring plot", "neg"), ("", "neg"), ("great fun", "pos"), ("awful", "pos")]
    _csv(folder / "test.csv", ("text", "label"), test)
    out = _ok(run_cli("evaluate", "s.keras", "--data", "test.csv", "--json", "scores.json", cwd=folder))
    scores, names = _expected(trained, "s.keras", [t for t, _ in test])
    truth, predicted = [names.index(y) for _, y in test], scores.argmax(-1)
    written = json.loads((folder / "scores.json").read_text())
    assert written["rows"] == 5 and written["empty"] == 1 and written["labels"] == names
    assert written["accuracy"] == pytest.approx(accuracy_score(truth, predicted), abs=1e-12)
    macro = f1_score(truth, predicted, labels=[0, 1], average="macro", zero_division=0)
    assert written["macro_f1"] == pytest.approx(macro, abs=1e-12)
    report = classification_report(truth, predicted, labels=[0, 1], target_names=names, zero_division=0, digits=4)
    assert report in out and f"accuracy {written['accuracy']:.4f}, macro_f1 {macro:.4f}" in out
    assert written["classification_report"] == classification_report(
        truth, predicted, labels=[0, 1], target_names=names, zero_division=0, output_dict=True
    )


def test_evaluate_multi_label(trained, folder, capsys):
    test = [("good fun movie", "fun|film"), ("acting", "acting"), ("bad film", "film"), ("fun", "fun|acting")]
    _csv(folder / "mtest.csv", ("text", "tags"), test)
    argv = ["evaluate", str(folder / "m.keras"), "--data", str(folder / "mtest.csv"), "--label-column", "tags"]
    assert main([*argv, "--json", str(folder / "m.json"), "--top-k", "2"]) == 0
    scores, names = _expected(trained, "m.keras", [t for t, _ in test])
    truth = np.array([[name in y.split("|") for name in names] for _, y in test], dtype=int)
    predicted = (scores >= 0.5).astype(int)
    written = json.loads((folder / "m.json").read_text())
    assert written["multi_label"] and written["threshold"] == 0.5
    # float32 metrics (elmo_keras.metrics) vs. scikit-learn's float64
    assert written["micro_f1"] == pytest.approx(f1_score(truth, predicted, average="micro", zero_division=0), abs=1e-6)
    assert written["macro_f1"] == pytest.approx(f1_score(truth, predicted, average="macro", zero_division=0), abs=1e-6)
    top2 = np.argsort(-scores, axis=1, kind="stable")[:, :2]
    assert written["precision_at_2"] == pytest.approx(np.take_along_axis(truth, top2, 1).sum(1).mean() / 2, abs=1e-6)
    out = capsys.readouterr().out
    assert "precision_at_2" in out and "samples avg" in out
    _fails([*argv, "--json", str(folder / "m.json")], capsys, "pass --overwrite")


@pytest.mark.parametrize(
    "case, words",
    [
        (
            "unknown",
            "2 row(s) have labels the model does not know: ['meh', 'so-so'] (it knows ['acting', 'film', 'fun'])",
        ),
        ("column", "no column(s) ['label']"),
        ("empty", "has no rows"),
        ("json_is_data", "is the input file"),
    ],
)
def test_evaluate_bad_input_is_one_line(folder, capsys, tmp_path, case, words):
    data = {
        "unknown": [("text", "label"), ("good", "fun"), ("ok", "meh"), ("fine", "so-so|fun")],
        "column": [("text", "tag"), ("good", "pos")],
        "empty": [("text", "label")],
        "json_is_data": [("text", "label"), ("good", "pos")],
    }[case]
    _csv(tmp_path / "t.csv", data[0], data[1:])
    argv = ["evaluate", str(folder / "m.keras"), "--data", str(tmp_path / "t.csv")]
    _fails([*argv, "--json", str(tmp_path / ("t.csv" if case == "json_is_data" else "s.json"))], capsys, words)
    assert os.listdir(tmp_path) == ["t.csv"]
