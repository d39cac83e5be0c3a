"""Train and evaluate a classifier on a bundled dataset or CSV files (what ``elmo-keras train`` runs)."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np

from elmo_keras import datasets, models
from elmo_keras.elmo import Elmo
from elmo_keras.errors import InputError
from elmo_keras.metrics import pad_label_indices


@dataclass
class Task:
    """Texts (object arrays) and labels (int [N], or -1-padded label indices [N, K] when multi-label)."""

    train_texts: np.ndarray
    train_labels: np.ndarray
    test_texts: np.ndarray
    test_labels: np.ndarray
    class_names: list[str]
    multi_label: bool = False


def _read_csv(path: str, text_column: str, label_column: str) -> tuple[list[str], list[str]]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        try:
            reader = csv.DictReader(f)
            missing = {text_column, label_column} - set(reader.fieldnames or [])
            if missing:
                raise InputError(f"{path}: no column(s) {sorted(missing)}; columns are {reader.fieldnames} "
                                 "(set --text-column / --label-column)")
            rows = [(r[text_column] or "", r[label_column] or "") for r in reader]
        except UnicodeDecodeError as err:
            raise InputError(f"{path} is not UTF-8 text ({err}); convert it, e.g. iconv -f latin1 -t utf-8") from None
    if not rows:
        raise InputError(f"{path} has no rows")
    return [t for t, _ in rows], [label for _, label in rows]


def _split_test(n: int, labels: list[str], seed: int, fraction: float = 0.2) -> np.ndarray:
    """A boolean test mask: ``fraction`` of each label value (stratified)."""
    rng = np.random.default_rng(seed)
    is_test = np.zeros(n, bool)
    for value in sorted(set(labels)):
        rows = rng.permutation([i for i, label in enumerate(labels) if label == value])
        is_test[rows[: int(round(fraction * len(rows)))]] = True
    return is_test


def load_task(data: str = "ag_news", test: str | None = None, text_column: str = "text",
              label_column: str = "label", multi_label: bool = False, separator: str = "|",
              seed: int = 0) -> Task:
    """``data="ag_news"`` (bundled) or CSV file(s) with a header; without ``test``, 20% of ``data``."""
    if data == "ag_news":
        if test or multi_label:
            raise InputError("the bundled ag_news has its own fixed test split and one label per text")
        d = datasets.load_ag_news()
        return Task(d.train_texts, d.train_labels, d.test_texts, d.test_labels, d.class_names)
    texts, labels = _read_csv(data, text_column, label_column)
    if test:
        test_texts, test_labels = _read_csv(test, text_column, label_column)
    else:
        is_test = _split_test(len(texts), labels, seed)
        test_texts = [t for t, m in zip(texts, is_test) if m]
        test_labels = [y for y, m in zip(labels, is_test) if m]
        texts = [t for t, m in zip(texts, is_test) if not m]
        labels = [y for y, m in zip(labels, is_test) if not m]

    def parse(values: list[str]) -> list[list[str]]:
        return [[p.strip() for p in v.split(separator) if p.strip()] if multi_label else [v] for v in values]

    train_sets, test_sets = parse(labels), parse(test_labels)
    class_names = sorted({c for row in train_sets for c in row})
    _check_split(data, len(texts), len(test_texts), class_names, multi_label)
    unknown = {c for row in test_sets for c in row} - set(class_names)
    if unknown:
        raise InputError(f"test labels never seen in training: {sorted(unknown)[:10]}")
    index = {c: i for i, c in enumerate(class_names)}

    def encode(rows: list[list[str]]) -> np.ndarray:
        if multi_label:
            return pad_label_indices([[index[c] for c in row] for row in rows], len(class_names))
        return np.array([index[row[0]] for row in rows])

    obj = lambda xs: np.array(list(xs), dtype=object)  # noqa: E731
    return Task(obj(texts), encode(train_sets), obj(test_texts), encode(test_sets), class_names, multi_label)


def _check_split(data: str, n_train: int, n_test: int, class_names: list[str], multi_label: bool) -> None:
    """Training needs rows in both splits (a 20% split of few rows per class can be empty) and two classes
    (one label is enough when multi-label)."""
    if not n_test:
        raise InputError(f"the test split of {data} is empty ({n_train} rows, {len(class_names)} classes: 20% of "
                         "each class rounds to 0 rows); give at least 3 rows per class, or a --test CSV")
    if len(class_names) < (1 if multi_label else 2):
        raise InputError(f"{data}: training needs at least 2 classes, the training rows have {class_names}; "
                         "check --label-column")


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """Unweighted mean of per-class F1 (0 for a class with no true and no predicted example)."""
    scores = []
    for c in range(n_classes):
        tp = np.sum((y_pred == c) & (y_true == c))
        denominator = np.sum(y_pred == c) + np.sum(y_true == c)
        scores.append(2 * tp / denominator if denominator else 0.0)
    return float(np.mean(scores))


def train_model(task: Task, options_file: str, weight_file: str, head: str = "bigru", mix: str = "trainable",
                mix_weights=None, units: int = 64, max_tokens: int | None = None, epochs: int = 3,
                batch_size: int = 32, learning_rate: float = 2e-3, verbose="auto"):
    """``text_classifier`` over ``Elmo.from_pretrained``, fitted on the training split."""
    elmo = Elmo.from_pretrained(options_file, weight_file)
    model = models.text_classifier(elmo, len(task.class_names), head=head, mix=mix, mix_weights=mix_weights,
                                   multi_label=task.multi_label, units=units, max_tokens=max_tokens,
                                   learning_rate=learning_rate)
    model.fit(task.train_texts, task.train_labels, epochs=epochs, batch_size=batch_size, verbose=verbose)
    return model


def evaluate(model, task: Task, batch_size: int = 32) -> dict[str, float]:
    """Scores on the test split: accuracy and macro_f1, or micro_f1, macro_f1 and precision_at_5 (multi-label)."""
    if task.multi_label:
        values = model.evaluate(task.test_texts, task.test_labels, batch_size=batch_size, verbose=0,
                                return_dict=True)
        return {k: float(values[k]) for k in ("micro_f1", "macro_f1", "precision_at_5") if k in values}
    predicted = model.predict(task.test_texts, batch_size=batch_size, verbose=0).argmax(-1)
    return {"accuracy": float(np.mean(predicted == task.test_labels)),
            "macro_f1": macro_f1(task.test_labels, predicted, len(task.class_names))}
