"""Bundled datasets (no network): AG News (4-class news, fixed stratified split) and the Brown corpus.

License notes ship beside the files (elmo_keras/data/*/SOURCE.md).
"""

from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass
from importlib import resources

import numpy as np

_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]", re.UNICODE)


def simple_tokenize(text: str) -> str:
    """Split off punctuation, so "loan." becomes "loan ." (the token style ELMo models are trained on).

    Args:
        text: the text.

    Returns:
        The text with single spaces between tokens.

    Example:

    >>> from elmo_keras.tasks.datasets import simple_tokenize
    >>> simple_tokenize("The bank approved the loan.")
    'The bank approved the loan .'
    """
    return " ".join(_TOKEN.findall(text))


@dataclass
class TextClassificationData:
    """Texts (numpy object arrays, ready for ``model.fit``) and labels for a train and a test split: int [N],
    or -1-padded label indices [N, K] when ``multi_label``.

    Args:
        train_texts: object array `[N]` of str.
        train_labels: int `[N]`, or `[N, K]` when ``multi_label``.
        test_texts: object array `[M]` of str.
        test_labels: int `[M]`, or `[M, K]` when ``multi_label``.
        class_names: the class names, in label order.
        multi_label: whether a text has several labels.
    """

    train_texts: np.ndarray
    train_labels: np.ndarray
    test_texts: np.ndarray
    test_labels: np.ndarray
    class_names: list[str]
    multi_label: bool = False


def _data_file(*parts: str):
    return resources.files("elmo_keras").joinpath("data", *parts)


def load_ag_news(n_test: int = 1600, seed: int = 0, tokenize: bool = True) -> TextClassificationData:
    """AG News, the 7,600 available rows (the test split of Zhang et al. 2015; its train split is not
    bundled), split into a fixed stratified train/test split: ``n_test`` rows (400 per class by default)
    for test, the rest (6,000) for training. Text = title + " " + description; ``tokenize`` splits off
    punctuation (:func:`simple_tokenize`).

    Args:
        n_test: rows in the test split.
        seed: the split's random seed.
        tokenize: split off punctuation.

    Returns:
        :class:`TextClassificationData` with 4 classes.

    Example:

    ```python
    from elmo_keras.tasks.datasets import load_ag_news

    data = load_ag_news()
    assert len(data.test_texts) == 1600 and len(data.class_names) == 4
    ```
    """
    with _data_file("ag_news", "classes.txt").open(encoding="utf-8") as f:
        class_names = [line.strip() for line in f if line.strip()]
    texts, labels = [], []
    with _data_file("ag_news", "test.csv").open(encoding="utf-8", newline="") as f:
        for row in csv.reader(f):
            label, title, description = row
            text = f"{title} {description}".replace("\\", " ")
            texts.append(simple_tokenize(text) if tokenize else " ".join(text.split()))
            labels.append(int(label) - 1)
    labels = np.array(labels)
    n_classes = len(class_names)
    if n_test % n_classes or not 0 < n_test < len(labels):
        raise ValueError(f"n_test must be a multiple of {n_classes} between 0 and {len(labels)}, got {n_test}")
    rng = np.random.default_rng(seed)
    test_rows = np.concatenate(
        [rng.permutation(np.flatnonzero(labels == c))[: n_test // n_classes] for c in range(n_classes)]
    )
    is_test = np.zeros(len(labels), bool)
    is_test[test_rows] = True
    train_rows = rng.permutation(np.flatnonzero(~is_test))
    test_rows = np.sort(test_rows)
    texts = np.array(texts, dtype=object)
    return TextClassificationData(
        texts[train_rows], labels[train_rows], texts[test_rows], labels[test_rows], class_names
    )


def load_brown() -> tuple[list[list[str]], list[dict]]:
    """The Brown corpus: (sentences as token lists, 57,340 of them; one dict per file with its
    ``fileid``, ``category`` and 0-based ``[start, stop)`` sentence range) for by-file splits."""
    with _data_file("brown", "brown.txt.gz").open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        sentences = [line.split() for line in f]
    files = []
    with _data_file("brown", "brown_files.tsv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            files.append(
                {
                    "fileid": row["fileid"],
                    "category": row["category"],
                    "start": int(row["first_line"]) - 1,
                    "stop": int(row["last_line"]),
                }
            )
    return sentences, files
