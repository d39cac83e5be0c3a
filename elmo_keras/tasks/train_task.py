"""Train and evaluate a classifier on a bundled dataset or CSV files (what ``elmo-keras train`` runs)."""

from __future__ import annotations

import csv
import logging
import os

import keras
import numpy as np
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split

from elmo_keras.elmo import Elmo
from elmo_keras.errors import InputError
from elmo_keras.layers.static import StaticEmbedding
from elmo_keras.tasks import datasets, models
from elmo_keras.tasks.datasets import TextClassificationData
from elmo_keras.tasks.feature_store import MEMORY_FRACTION
from elmo_keras.tasks.metrics import PSPAtK, pad_label_indices
from elmo_keras.text import tokenize

log = logging.getLogger(__name__)

Task = TextClassificationData  # texts (object arrays) + int labels, or -1-padded label indices when multi-label


def read_csv_rows(path: str, what: str = "data") -> tuple[list[str] | None, list[tuple[int, dict[str, str]]]]:
    """The header and rows of a CSV with a header row (UTF-8, with or without the byte-order mark Excel writes),
    read once for ``train``, ``predict`` and ``evaluate``; a missing file, a folder, bytes that are not UTF-8 and
    an unreadable CSV are an :class:`~elmo_keras.errors.InputError` naming the file (the callers check columns).

    Args:
        path: the CSV file.
        what: how errors name the file when it is missing (``"data"``, ``"test"``). Defaults to `"data"`.

    Returns:
        ``(header, rows)``: the column names (None for an empty file) and ``(line number, {column: cell})`` per row.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.tasks.train_task import read_csv_rows

    path = os.path.join(tempfile.mkdtemp(), "d.csv")
    with open(path, "w", encoding="utf-8") as f:
        f.write("text,label\\ngood film,pos\\n")
    assert read_csv_rows(path) == (["text", "label"], [(2, {"text": "good film", "label": "pos"})])
    ```
    """
    if not os.path.isfile(path):
        raise InputError(
            f"{what} file not found: {path}"
            if not os.path.exists(path)
            else f"{path} is a folder; give a CSV file with a header row"
        )
    with open(path, encoding="utf-8-sig", newline="") as f:
        try:
            reader = csv.DictReader(f)
            header = reader.fieldnames
            rows = [(reader.line_num, row) for row in reader]
        except UnicodeDecodeError as err:
            raise InputError(f"{path} is not UTF-8 text ({err}); convert it, e.g. iconv -f latin1 -t utf-8") from None
        except csv.Error as err:
            raise InputError(f"{path} is not a readable CSV file (line {reader.line_num}: {err})") from None
    return header, rows


def _read_csv(
    path: str, text_column: str, label_column: str, what: str = "data", separator: str | None = None
) -> tuple[list[str], list[str]]:
    """(texts, labels) of a labelled CSV (see :func:`read_csv_rows`); ``what`` ("data" or "test") names the file in
    errors. A row without a label is refused: an empty cell, or (multi-label, ``separator`` given) one of
    separators and spaces only."""
    header, cells = read_csv_rows(path, what)
    missing = {text_column, label_column} - set(header or [])
    if missing:
        raise InputError(
            f"{path}: no column(s) {sorted(missing)}; columns are {header} (set --text-column / --label-column)"
        )
    rows = [(r[text_column] or "", (r[label_column] or "").strip()) for _, r in cells]
    unlabelled = [
        line
        for (line, _), (_, label) in zip(cells, rows)
        if not (label and (separator is None or label.replace(separator, "").strip()))
    ]
    if not rows:
        raise InputError(f"{path} has no rows")
    if unlabelled:
        shown = ", ".join(map(str, unlabelled[:10])) + (", ..." if len(unlabelled) > 10 else "")
        raise InputError(
            f"{path}: {len(unlabelled)} row(s) have no {label_column!r} (on line(s) {shown}); label them or remove them"
        )
    texts = [t for t, _ in rows]
    empty = sum(not t.strip() for t in texts)
    if empty == len(texts):
        raise InputError(f"{path}: every {text_column!r} cell is empty or whitespace; check --text-column")
    if empty:
        log.warning(
            "%s: %d of %d %r cells are empty or whitespace (each is one text without words)",
            path,
            empty,
            len(texts),
            text_column,
        )
    return texts, [label for _, label in rows]


def _split_test(data: str, labels: list[str], seed: int, multi_label: bool, fraction: float = 0.2) -> np.ndarray:
    """A boolean test mask: ``fraction`` of the rows, stratified by label (random when multi-label)."""
    rows = np.arange(len(labels))
    try:
        _, test_rows = train_test_split(
            rows, test_size=fraction, random_state=seed, stratify=None if multi_label else labels
        )
    except ValueError as err:  # a class with one row, or too few rows for a test split
        raise InputError(
            f"cannot split {data} into train and test ({len(labels)} rows, {len(set(labels))} classes):"
            f" {err}; give at least 2 rows per class (5 for a useful test split), or a --test CSV"
        ) from None
    is_test = np.zeros(len(labels), bool)
    is_test[test_rows] = True
    return is_test


def load_task(
    data: str = "ag_news",
    test: str | None = None,
    text_column: str = "text",
    label_column: str = "label",
    multi_label: bool = False,
    separator: str = "|",
    seed: int = 0,
) -> Task:
    """A classification task: the bundled AG News or CSV file(s) with a header.

    Args:
        data: ``"ag_news"`` (bundled) or a CSV file.
        test: a CSV test file, or ``None`` to hold out 20% of ``data``.
        text_column: the CSV column of the texts.
        label_column: the CSV column of the labels.
        multi_label: labels hold several names, joined by ``separator``.
        separator: the label separator (multi-label).
        seed: the seed of the held-out split.

    Returns:
        A ``Task``.
    """
    if data == "ag_news":
        if test or multi_label:
            raise InputError("the bundled ag_news has its own fixed test split and one label per text")
        d = datasets.load_ag_news()
        return Task(d.train_texts, d.train_labels, d.test_texts, d.test_labels, d.class_names)
    joined_by = separator if multi_label else None
    texts, labels = _read_csv(data, text_column, label_column, separator=joined_by)
    if test:
        test_texts, test_labels = _read_csv(test, text_column, label_column, "test", joined_by)
    else:
        is_test = _split_test(data, labels, seed, multi_label)
        test_texts = [t for t, m in zip(texts, is_test) if m]
        test_labels = [y for y, m in zip(labels, is_test) if m]
        texts = [t for t, m in zip(texts, is_test) if not m]
        labels = [y for y, m in zip(labels, is_test) if not m]

    train_sets = label_lists(labels, multi_label, separator)
    test_sets = label_lists(test_labels, multi_label, separator)
    class_names = sorted({c for row in train_sets for c in row})
    _check_classes(data, class_names, multi_label)
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


def label_lists(cells: list[str], multi_label: bool, separator: str = "|") -> list[list[str]]:
    """The label names of each CSV label cell: the cell itself, or (``multi_label``) its parts split at
    ``separator``, stripped, empty parts dropped, each name once, in the cell's order.

    Args:
        cells: one label cell per row.
        multi_label: whether a cell holds several labels.
        separator: what joins them.

    Returns:
        One list of names per cell.

    Example:

    >>> from elmo_keras.tasks.train_task import label_lists
    >>> label_lists(["b | a|b", "c"], multi_label=True)
    [['b', 'a'], ['c']]
    """
    if not multi_label:
        return [[cell] for cell in cells]
    return [list(dict.fromkeys(p.strip() for p in cell.split(separator) if p.strip())) for cell in cells]


def _check_classes(data: str, class_names: list[str], multi_label: bool) -> None:
    """Training needs two classes (one label is enough when multi-label)."""
    if len(class_names) < (1 if multi_label else 2):
        raise InputError(
            f"{data}: training needs at least 2 classes, the training rows have {class_names}; check --label-column"
        )


def train_model(
    task: Task,
    options_file: str,
    weight_file: str,
    head: str = "bigru",
    mix: str = "trainable",
    mix_weights=None,
    units: int = 64,
    max_tokens: int | None = None,
    words: int = 128,
    epochs: int = 15,
    patience: int = 3,
    validation_split: float = 0.1,
    batch_size: int = 32,
    learning_rate: float = 2e-3,
    verbose="auto",
    features_dir: str | None = None,
    features_memory: float = MEMORY_FRACTION,
    features_runner=None,
    label_sampling: int | None = None,
):
    """``text_classifier`` over ``Elmo.from_pretrained`` (+ a ``words``-dimensional task word embedding, 0 for
    none), fitted on the training split with early stopping on a held-out ``validation_split`` of it (at most
    ``epochs``, stopping ``patience`` epochs after the best validation accuracy, whose weights are kept). A
    multi-label model also reports ``psp_at_5`` (:class:`~elmo_keras.tasks.metrics.PSPAtK` over the training
    label counts, saved with the model, where ``elmo-keras evaluate`` finds its propensities).
    Over the frozen biLM each text is embedded once (``TextModel.fit``).

    Args:
        task: from :func:`load_task`.
        options_file: the biLM's options file.
        weight_file: the biLM's hdf5 weights.
        head: see :func:`elmo_keras.tasks.models.text_classifier`.
        mix: see :func:`elmo_keras.tasks.models.text_classifier`.
        mix_weights: one weight per layer for ``mix="fixed"``, else ``None``.
        units: GRU units per direction.
        max_tokens: segment length for long texts, or ``None``.
        words: the size of the task word embedding, 0 for none.
        epochs: the most epochs.
        patience: epochs without a better validation accuracy before stopping.
        validation_split: the fraction of the training split held out.
        batch_size: texts per batch.
        learning_rate: Adam's learning rate.
        verbose: as in ``keras.Model.fit``.
        features_dir: the folder of feature stores (see ``TextModel.fit``), or `None`.
        features_memory: the in-memory budget of the features, a share of the available memory.
        features_runner: how a feature store is embedded (`None`: this process).
        label_sampling: the sampled multi-label head's negatives per batch, or `None` for the dense head (see
            :func:`elmo_keras.tasks.models.text_classifier`).

    Returns:
        The trained model.
    """
    elmo = Elmo.from_pretrained(options_file, weight_file)
    layers = elmo.bilm.num_layers + 1
    if mix_weights is not None and len(mix_weights) != layers:
        raise InputError(
            f"{len(mix_weights)} mix weights for a biLM with {layers} layers (the token layer and "
            f"{layers - 1} contextual ones): give one weight per layer"
        )
    word_embedding = None
    if words:
        word_embedding = StaticEmbedding.from_corpus([tokenize(t) for t in task.train_texts], words, name="words")
    model = models.text_classifier(
        elmo,
        len(task.class_names),
        head=head,
        mix=mix,
        mix_weights=mix_weights,
        multi_label=task.multi_label,
        units=units,
        max_tokens=max_tokens,
        learning_rate=learning_rate,
        word_embedding=word_embedding,
        label_sampling=label_sampling,
    )
    texts, labels = task.train_texts, task.train_labels
    if task.multi_label:  # PSP@k needs the training labels' propensities: added to what text_classifier compiled
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        counts = np.bincount(labels[labels >= 0], minlength=len(task.class_names))
        psp = PSPAtK(len(task.class_names), counts, len(labels), k=5)
        model.compile(**{**compiled, "metrics": [*compiled["metrics"], psp]})
    callbacks = []
    if validation_split:  # a random held-out part (Keras would take the last rows, which may be one class)
        order = np.random.permutation(len(texts))
        texts, labels = texts[order], labels[order]
        monitor = "val_micro_f1" if task.multi_label else "val_accuracy"
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor, mode="max", patience=patience, restore_best_weights=True)
        )
    model.fit(
        texts,
        labels,
        epochs=epochs,
        batch_size=batch_size,
        validation_split=validation_split,
        callbacks=callbacks,
        verbose=verbose,
        features_dir=features_dir,
        features_memory=features_memory,
        features_runner=features_runner,
    )
    return model


def evaluate(model, task: Task, batch_size: int = 32) -> dict[str, float]:
    """Scores on the test split: accuracy and macro_f1, or (multi-label) micro_f1, macro_f1 and the ranking scores
    the model was compiled with (``precision_at_5``, ``ndcg_at_5``; ``psp_at_5`` after :func:`train_model`).

    Args:
        model: a trained classifier.
        task: from :func:`load_task`.
        batch_size: texts per batch.

    Returns:
        ``{score name: value}``.
    """
    if task.multi_label:
        values = model.evaluate(task.test_texts, task.test_labels, batch_size=batch_size, verbose=0, return_dict=True)
        return {k: float(v) for k, v in values.items() if k in ("micro_f1", "macro_f1") or "_at_" in k}
    predicted = model.predict(task.test_texts, batch_size=batch_size, verbose=0).argmax(-1)
    return {
        "accuracy": float(np.mean(predicted == task.test_labels)),
        "macro_f1": float(
            f1_score(task.test_labels, predicted, labels=range(len(task.class_names)), average="macro", zero_division=0)
        ),
    }
