"""Extreme multi-label: P@k, nDCG@k, PSP@k and label propensities (NumPy functions and Keras metrics) against
plain-Python references written here, sparse label indices, and a 100k-label ``train`` + ``evaluate --json`` run
from the CLI as separate processes."""

from __future__ import annotations

import csv
import json
import math

import keras
import numpy as np
import pytest

from elmo_keras.errors import InputError
from elmo_keras.tasks import metrics
from elmo_keras.tasks.metrics import (
    NDCGAtK,
    PrecisionAtK,
    PSPAtK,
    label_propensities,
    ndcg_at_k,
    pad_label_indices,
    precision_at_k,
    psp_at_k,
    to_multi_hot,
    top_k_labels,
)
from tests.fresh import run_cli

# -- references: loops over Python lists, nothing shared with elmo_keras.tasks.metrics -------------------------------


def ref_ranking(row: list[float], k: int) -> list[int]:
    """The k best labels of a row: highest score first, equal scores by the lower label index."""
    return sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]


def ref_precision(scores, truth, k):
    return sum(sum(1 for j in ref_ranking(row, k) if j in ys) / k for row, ys in zip(scores, truth)) / len(scores)


def ref_ndcg(scores, truth, k):
    total = 0.0
    for row, ys in zip(scores, truth):
        dcg = sum(1 / math.log2(rank + 2) for rank, j in enumerate(ref_ranking(row, k)) if j in ys)
        ideal = sum(1 / math.log2(rank + 2) for rank in range(min(k, len(ys))))
        total += dcg / ideal if ys else 0.0
    return total / len(scores)


def ref_propensities(counts, n, a=0.55, b=1.5):
    c = (math.log(n) - 1) * (b + 1) ** a
    return [1 / (1 + c * math.exp(-a * math.log(count + b))) for count in counts]


def ref_psp(scores, truth, propensities, k):
    gained = best = 0.0
    for row, ys in zip(scores, truth):
        gained += sum(1 / propensities[j] for j in ref_ranking(row, k) if j in ys)
        best += sum(sorted((1 / propensities[j] for j in ys), reverse=True)[:k])
    return gained / best if best else 0.0


def random_case(seed: int, rows: int, num_labels: int, most: int):
    """Scores with many ties (multiples of 1/4) and label sets of 0..most labels (some repeated in a row)."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(rows, num_labels)) / 4
    lists = [rng.integers(0, num_labels, size=rng.integers(0, most + 1)).tolist() for _ in range(rows)]
    return scores, lists, [set(row) for row in lists]


CASES = [(0, 40, 12, 4), (1, 25, 4, 3), (2, 30, 50, 10), (3, 1, 3, 0)]


@pytest.mark.parametrize("seed, rows, num_labels, most", CASES)
@pytest.mark.parametrize("k", [1, 3, 5])
def test_numpy_scores_equal_the_references(seed, rows, num_labels, most, k):
    scores, lists, truth = random_case(seed, rows, num_labels, most)
    counts = [sum(j in ys for ys in truth) for j in range(num_labels)]
    propensities = label_propensities(counts, 100)
    assert propensities == pytest.approx(ref_propensities(counts, 100), rel=1e-12)
    rows_list = scores.tolist()
    padded = pad_label_indices(lists, num_labels)
    for labels in (lists, padded):  # both label forms
        assert precision_at_k(scores, labels, k) == pytest.approx(ref_precision(rows_list, truth, k), abs=1e-12)
        assert ndcg_at_k(scores, labels, k) == pytest.approx(ref_ndcg(rows_list, truth, k), abs=1e-12)
        assert psp_at_k(scores, labels, propensities, k) == pytest.approx(
            ref_psp(rows_list, truth, propensities.tolist(), k), abs=1e-12
        )


def test_top_k_breaks_ties_by_label_index_across_blocks(monkeypatch):
    scores, _, _ = random_case(4, 17, 9, 0)
    monkeypatch.setattr(metrics, "_RANK_VALUES", 20)  # two rows per block
    assert top_k_labels(scores, 4).tolist() == [ref_ranking(row, 4) for row in scores.tolist()]
    assert top_k_labels(scores, 20).shape == (17, 9)  # k > labels: every label, ranked


@pytest.mark.parametrize("seed, rows, num_labels, most", CASES)
def test_keras_metrics_equal_the_numpy_functions(seed, rows, num_labels, most):
    scores, lists, truth = random_case(seed, rows, num_labels, most)
    counts = [sum(j in ys for ys in truth) for j in range(num_labels)]
    padded = pad_label_indices(lists, num_labels)
    half = rows // 2
    for k in (1, 3, 5):
        propensities = label_propensities(counts, 100)
        for metric, expected in (
            (PrecisionAtK(num_labels, k), precision_at_k(scores, lists, k)),
            (NDCGAtK(num_labels, k), ndcg_at_k(scores, lists, k)),
            (PSPAtK(num_labels, counts, 100, k), psp_at_k(scores, lists, propensities, k)),
        ):
            metric.update_state(padded[:half], scores[:half].astype("float32"))
            metric.update_state(padded[half:], scores[half:].astype("float32"))
            assert float(metric.result()) == pytest.approx(expected, abs=1e-6), metric.name
            again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
            assert again.get_config() == metric.get_config()


def test_multi_hot_is_a_scatter_of_the_indices():
    hot = to_multi_hot(keras.ops.convert_to_tensor(np.array([[3, 0, 3], [-1, -1, -1], [1, -1, -1]])), 5)
    assert keras.ops.convert_to_numpy(hot).tolist() == [[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0]]


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: precision_at_k(np.zeros((2, 3)), [[0], [1]], 0), "k must be >= 1"),
        (lambda: ndcg_at_k(np.zeros((2, 3)), [[0]], 1), "1 rows of labels for 2 rows of scores"),
        (lambda: precision_at_k(np.zeros(3), [[0]], 1), "scores must be numbers [rows, labels]"),
        (lambda: ndcg_at_k(np.zeros((1, 3)), np.array([[3]]), 1), "label 3 of row 0 is not an index in [0, 3)"),
        (lambda: psp_at_k(np.zeros((1, 3)), [[0]], np.ones(2), 1), "propensities must be [3] values in (0, 1]"),
        (lambda: precision_at_k(np.array([[np.nan, 0]]), [[0]], 1), "NaN or infinite"),
        (lambda: label_propensities([[1]], 10), "1-D array of counts"),
        (lambda: NDCGAtK(3, k=0), "k must be >= 1"),
        (lambda: PSPAtK(3, [1, 2], 10), "2 label counts for 3 labels"),
    ],
)
def test_bad_input_is_one_line(call, words):
    with pytest.raises(InputError) as err:
        call()
    assert words in str(err.value) and "\n" not in str(err.value)


LABELS = 100_000


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "tags"), *rows])


def test_100k_labels_train_then_evaluate_json_from_the_cli(tmp_path, fixture_files):
    """Every training row names 2,500 of 100,000 labels (as ``|``-joined cells); train, then evaluate, each in its
    own process."""
    words = ["the", "bank", "river", "loan", "film", "plot", "good", "bad"]
    names = [f"label{j:06d}" for j in range(LABELS)]
    train = [(f"{words[i % 8]} {words[(i * 3) % 8]} {words[(i + 5) % 8]}", "|".join(names[i::40])) for i in range(40)]
    test = [(text, "|".join(cell.split("|")[:3])) for text, cell in train[:8]]
    _write(tmp_path / "train.csv", train)
    _write(tmp_path / "test.csv", test)
    common = ["--label-column", "tags"]
    done = run_cli(
        "train", "--data", "train.csv", "--test", "test.csv", "--multi-label", *common, "--options",
        fixture_files[0], "--weights", fixture_files[1], "--head", "pool", "--words", "0", "--epochs", "1",
        "--validation-split", "0", "--batch-size", "8", "--out", "m.keras", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "psp_at_5" in done.stdout and len(json.loads((tmp_path / "m.keras.labels.json").read_text())) == LABELS
    done = run_cli("evaluate", "m.keras", "--data", "test.csv", *common, "--json", "s.json", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = json.loads((tmp_path / "s.json").read_text())
    keys = [f"{name}_at_{k}" for name in ("precision", "ndcg", "psp") for k in (1, 3, 5)]
    assert all(0 <= scores[key] <= 1 for key in [*keys, "micro_f1", "macro_f1"]), scores
    assert scores["multi_label"] and scores["rows"] == 8 and scores["propensities"] == "training"
