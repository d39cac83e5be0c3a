"""Label a file of texts with a saved classifier and score one on a labelled CSV (``elmo-keras predict`` and
``elmo-keras evaluate``).

Input rows: a ``.csv`` file is read as ``elmo-keras train`` reads ``--data`` (UTF-8 with or without a byte-order mark,
a header row, the ``text`` column or another one named); any other file is text, one text per line, under the line
contract of corpus embedding (:mod:`elmo_keras.corpus.lines`): output row i is input line i, blank and whitespace-only
lines included. A text without tokens keeps its row, with the model's scores for an empty text and ``empty: true``.
Labels come from the model's labels file (``MODEL.keras.labels.json``, written by ``train``); without one, the
output indices ``"0"``, ``"1"``, ... are the labels (with a warning).
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterator, Sequence

import keras
import numpy as np
import scipy.sparse
from sklearn.metrics import accuracy_score, classification_report, f1_score, top_k_accuracy_score

from elmo_keras.corpus.lines import read_lines, scan_input
from elmo_keras.corpus.run import _StopRequest, check_paths
from elmo_keras.errors import InputError
from elmo_keras.saving import check_labels, labels_path, load_model, read_labels
from elmo_keras.tasks.metrics import (
    MultiLabelF1,
    PSPAtK,
    label_propensities,
    pad_label_indices,
    ranking_scores,
    top_k_labels,
)
from elmo_keras.tasks.train_task import _read_csv, label_lists, read_csv_rows
from elmo_keras.text import tokenize
from elmo_keras.utils.files import atomic_file, exclusive_lock, remove_stale_temporaries, write_json

log = logging.getLogger(__name__)

#: the output formats of :func:`predict_file`, chosen by the output file's extension
OUTPUT_FORMATS = (".jsonl", ".csv")
#: characters that str.splitlines (and JavaScript) take for line breaks and json.dumps leaves as they are: escaped,
#: so that each output line is one JSON object for any reader
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
#: texts per model call group: sorted by length within a group, so that batches hold texts of similar length
_CHUNK_BATCHES = 32
#: the most scores `[texts, labels]` that ``evaluate`` holds at once for a multi-label model (one batch at least)
_SCORE_VALUES = 1 << 24
#: with more labels than this, the multi-label report lists only the labels that are true or predicted in the file
_REPORT_LABELS = 1000
#: the last activations whose outputs are probabilities: single-label, multi-label
_PROBABILITIES = ("softmax", "sigmoid")


def load_classifier(
    model: str | os.PathLike | keras.Model, labels: Sequence[str] | None = None, raw_scores: bool = False
) -> tuple[keras.Model, list[str], bool]:
    """A text classifier and its label names: the model (loaded when given a path), the names (``labels``, else
    the model's labels file, else the output indices with a warning; checked by
    :func:`~elmo_keras.saving.check_labels`: strings, each once, one per output) and whether it is multi-label
    (sigmoid scores).

    The scores must be probabilities: the last layer's activation is softmax (single-label) or sigmoid
    (multi-label). A model whose outputs are anything else (e.g. logits) is refused unless ``raw_scores``, which
    takes its outputs as they are, as single-label scores (ranked, never thresholded).

    Args:
        model: a ``.keras`` file (from ``elmo-keras train`` or ``save_model``) or a ``keras.Model`` over raw
            strings ``[batch]`` with scores ``[batch, classes]``.
        labels: the class names in output order, or ``None`` for the labels file beside ``model``.
        raw_scores: take a model whose outputs are not probabilities (refused for one whose outputs are).

    Returns:
        A tuple ``(model, label names, multi_label)``.

    Example:

    ```python
    import elmo_keras as ek
    from elmo_keras.tasks.predict import load_classifier

    words = ek.StaticEmbedding.from_corpus([["good", "film"], ["bad", "plot"]], dim=4)
    model = ek.models.text_classifier(words, num_classes=2, head="pool")
    _, names, multi_label = load_classifier(model, ["neg", "pos"])
    assert names == ["neg", "pos"] and not multi_label
    ```
    """
    where = None
    if not isinstance(model, keras.Model):
        where = os.fspath(model)
        model = load_model(where)
    name = where or model.name
    inputs = keras.tree.flatten(getattr(model, "inputs", None) or [])
    outputs = keras.tree.flatten(getattr(model, "outputs", None) or [])
    if (
        len(inputs) != 1
        or keras.backend.standardize_dtype(inputs[0].dtype) != "string"
        or len(inputs[0].shape) != 1
        or len(outputs) != 1
        or len(outputs[0].shape) != 2
    ):
        raise InputError(
            f"{name} is not a text classifier (one string input [batch] -> scores [batch, classes]); predict and "
            "evaluate take models from elmo-keras train or ek.models.text_classifier"
        )
    count = outputs[0].shape[-1]
    if labels is not None:
        labels = check_labels([str(label) for label in labels], f"the labels given for {name}", count)
    elif where is not None:
        labels = read_labels(where, count)
    if labels is None:
        source = f" ({labels_path(where)} not found)" if where else ""
        log.warning("%s has no labels file%s: the labels are the output indices 0..%d", name, source, count - 1)
        labels = [str(i) for i in range(count)]
    activation = _output_activation(model)
    if raw_scores and activation in _PROBABILITIES:
        raise InputError(
            f"--raw-scores: the outputs of {name} are already probabilities ({activation}); --raw-scores is for a "
            "model whose last layer gives raw scores (e.g. logits): drop it"
        )
    if not raw_scores and activation not in _PROBABILITIES:
        raise InputError(
            f"the last layer of {name} ({model.layers[-1].name}, activation {activation or 'none'}) does not give "
            "probabilities (softmax or sigmoid), which predict and evaluate report as scores; pass --raw-scores "
            "(raw_scores=True) to use its outputs as they are, or end the model with a softmax or sigmoid"
        )
    return model, labels, activation == "sigmoid"


def _output_activation(model: keras.Model) -> str:
    """The name of the activation of the model's last layer (``activation=`` of a Dense or Activation layer, or a
    Softmax layer), or ``""`` when it has none."""
    last = model.layers[-1]
    if isinstance(last, keras.layers.Softmax):
        return "softmax"
    return getattr(getattr(last, "activation", None), "__name__", "")


def _check_settings(top_k: int, batch_size: int, threshold: float) -> None:
    if top_k < 1 or batch_size < 1:
        raise InputError(f"--top-k and --batch-size must be >= 1, got {top_k} and {batch_size}")
    if not 0 <= threshold <= 1:
        raise InputError(f"--threshold must be in [0, 1] (a score of a sigmoid output), got {threshold}")


def _csv_texts(path: str, text_column: str) -> list[str]:
    """The ``text_column`` cells of a CSV with a header row, one per row (an empty or missing cell is ``""``)."""
    header, rows = read_csv_rows(path)
    if header is None:
        raise InputError(f"{path} is empty: give a CSV file with a header row and one row per text")
    if text_column not in header:
        raise InputError(f"{path}: no column {text_column!r}; columns are {header} (set --text-column)")
    if not rows:
        raise InputError(f"{path} has a header row but no rows: nothing to label")
    return [row[text_column] or "" for _, row in rows]


def _text_rows(path: str, text_column: str | None) -> tuple[int, Iterator[str]]:
    """(the number of rows, an iterator over their texts) of a CSV or a text file; a text file is checked (UTF-8,
    line by line) and counted in a first pass, then streamed."""
    if not path.lower().endswith(".csv"):
        if text_column is not None:
            raise InputError(f"--text-column is for CSV input; {path} is read as text, one text per line")
        lines = scan_input(path, shard_lines=1 << 62, long_line=1 << 62).lines
        if not lines:
            raise InputError(f"{path} is empty: give a text file with one text per line")

        def stream() -> Iterator[str]:
            with open(path, "rb") as f:
                yield from read_lines(f, path, 0, lines)
                if f.read(1):
                    raise InputError(f"{path}: has more than {lines} lines; the file changed while it was read")

        return lines, stream()
    texts = _csv_texts(path, text_column or "text")
    return len(texts), iter(texts)


def _chunks(texts: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for text in texts:
        chunk.append(text)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _StopAtBatch(keras.callbacks.Callback):
    """Ends ``model.predict`` with KeyboardInterrupt at the end of the batch in hand once SIGINT or SIGTERM asked
    to stop (:class:`~elmo_keras.corpus.run._StopRequest`): between batches, never inside TensorFlow's work."""

    def __init__(self, stop: _StopRequest):
        super().__init__()
        self.stop = stop

    def on_predict_batch_end(self, batch, logs=None):
        if self.stop.requested:
            raise KeyboardInterrupt


def _scores(model: keras.Model, texts: Sequence[str], batch_size: int, stop: _StopRequest) -> np.ndarray:
    """The model's scores ``[len(texts), classes]`` in input order; batches are formed over the texts sorted by
    their number of tokens (less padding), finite scores checked; KeyboardInterrupt after the batch in hand once
    ``stop`` is requested."""
    order = np.argsort([len(tokenize(t)) for t in texts], kind="stable")
    sorted_scores = model.predict(
        np.array([texts[i] for i in order], dtype=object),
        batch_size=batch_size,
        verbose=0,
        callbacks=[_StopAtBatch(stop)],
    )
    scores = np.empty_like(sorted_scores)
    scores[order] = sorted_scores
    bad = np.flatnonzero(~np.isfinite(scores).all(axis=-1))
    if bad.size:
        raise InputError(f"the model gave non-finite scores for {bad.size} text(s) (e.g. {texts[bad[0]]!r})")
    return scores


def _ranked(names: list[str], scores: np.ndarray, indices: np.ndarray) -> list[dict]:
    return [{"label": names[i], "score": float(scores[i])} for i in indices]


def _rows(first: int, texts: list[str], scores: np.ndarray, names: list[str], top_k: int, multi_label: bool, threshold):
    """One output record per text (see :func:`predict_file`)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    for i, text in enumerate(texts):
        row = {
            "row": first + i,
            "text": text,
            "empty": not tokenize(text),
            "label": names[top[i, 0]],
            "score": float(scores[i, top[i, 0]]),
        }
        if multi_label:
            over = [j for j in np.argsort(-scores[i], kind="stable") if scores[i, j] >= threshold]
            row["labels"] = _ranked(names, scores[i], over)
        row["top_k"] = _ranked(names, scores[i], top[i])
        yield row


def _csv_record(row: dict, multi_label: bool) -> dict:
    """A :func:`_rows` record as flat CSV cells."""
    record = {k: row[k] for k in ("row", "text", "label", "score")}
    record["empty"] = "true" if row["empty"] else "false"
    if multi_label:
        record["labels"] = "|".join(r["label"] for r in row["labels"])
        record["label_scores"] = "|".join(repr(r["score"]) for r in row["labels"])
    for rank, r in enumerate(row["top_k"], 1):
        record[f"label_{rank}"], record[f"score_{rank}"] = r["label"], r["score"]
    return record


def predict_file(
    model: str | os.PathLike | keras.Model,
    input_path: str | os.PathLike,
    out_path: str | os.PathLike,
    top_k: int = 3,
    batch_size: int = 32,
    text_column: str | None = None,
    overwrite: bool = False,
    threshold: float = 0.5,
    labels: Sequence[str] | None = None,
    progress: bool = False,
    raw_scores: bool = False,
) -> dict:
    """Label every row of a text or CSV file with a classifier and write one output row per input row, in order.

    Input: a ``.csv`` file with a header row (``text_column``, default ``"text"``; a fully blank line is no CSV
    row); any other file is text, one text per line (output row i is line i: blank or whitespace-only lines keep
    their row). Output, by the extension of ``out_path``: ``.jsonl`` (one JSON object per line) or ``.csv``. Each
    row has ``row`` (0-based), ``text``, ``empty`` (the text has no tokens: its scores are the model's for an
    empty text), ``label`` and ``score`` (the highest score), ``top_k`` (the ``top_k`` best labels with their
    scores; CSV: ``label_1``, ``score_1``, ...), and for a multi-label model ``labels``, every label whose score
    is at least ``threshold``, best first (CSV: ``labels`` and ``label_scores``, joined by ``|``). The scores are
    the model's probabilities (its last activation must be softmax or sigmoid); with ``raw_scores`` they are its
    outputs as they are (e.g. logits), ranked as a single-label model's, with no ``labels``.

    The file is written under a temporary name and renamed when complete, after the row count is checked. A run
    holds a lock on ``.OUT.lock`` beside ``out_path`` (a second run on the same output is refused) and first
    deletes the temporary files that a killed run on the same output left. SIGINT or SIGTERM stops the run at the
    end of the batch in hand (a second one at once): KeyboardInterrupt, with the temporary file deleted and
    ``out_path`` as it was.

    Args:
        model: a ``.keras`` file or a ``keras.Model`` (see :func:`load_classifier`).
        input_path: the texts: a ``.csv`` file or a text file.
        out_path: the output file, ending in ``.jsonl`` or ``.csv``; not the input, the model or its labels file.
        top_k: how many of the best labels each row lists (at most the number of labels).
        batch_size: texts per model call.
        text_column: the CSV column of the texts (``None``: ``"text"``); only for CSV input.
        overwrite: replace an existing ``out_path``.
        threshold: the score from which a multi-label model's label counts as predicted.
        labels: the class names in output order, or ``None`` for the model's labels file.
        progress: show a progress bar (rows labelled).
        raw_scores: write the outputs of a model whose last layer gives no probabilities (see
            :func:`load_classifier`).

    Returns:
        A dict: ``rows`` (the number written), ``empty`` (rows without tokens), ``out`` (``out_path``).

    Example:

    ```python
    import json, os, tempfile
    import elmo_keras as ek
    from elmo_keras.tasks.predict import predict_file

    words = ek.StaticEmbedding.from_corpus([["good", "film"], ["bad", "plot"]], dim=4)
    model = ek.models.text_classifier(words, num_classes=2, head="pool")
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("good film\\n\\nbad plot\\n")
    done = predict_file(model, os.path.join(folder, "in.txt"), os.path.join(folder, "out.jsonl"), labels=["neg", "pos"])
    rows = [json.loads(line) for line in open(os.path.join(folder, "out.jsonl"))]
    assert done["rows"] == 3 and [r["empty"] for r in rows] == [False, True, False]
    ```
    """
    input_path, out_path = os.fspath(input_path), os.fspath(out_path)
    fmt = os.path.splitext(out_path)[1].lower()
    if fmt not in OUTPUT_FORMATS:
        raise InputError(
            f"--out {out_path}: the output format comes from its extension: give a name ending in .jsonl or .csv"
        )
    _check_settings(top_k, batch_size, threshold)
    if os.path.isdir(out_path):
        raise InputError(f"--out {out_path} is a folder; give a file name ending in {fmt}")
    keep = {} if isinstance(model, keras.Model) else {"model": os.fspath(model), "labels": labels_path(model)}
    check_paths(input_path, out_path, "file", overwrite, keep=keep)
    folder, out_name = os.path.split(os.path.abspath(out_path))
    with (
        _StopRequest().installed() as stop,
        exclusive_lock(folder, f"predict --out {out_path}", name=f".{out_name}.lock"),
    ):
        remove_stale_temporaries(
            folder, of=out_name
        )  # a killed run's: no live run writes them, this one holds the lock
        count, texts = _text_rows(input_path, text_column)
        model, names, multi_label = load_classifier(model, labels, raw_scores)
        top_k = min(top_k, len(names))
        if fmt == ".csv" and multi_label and any("|" in name for name in names):
            raise InputError(
                f"a label name holds '|', which separates the labels of a CSV cell; write {out_path} as .jsonl"
            )
        written = empty = 0
        bar = keras.utils.Progbar(count, unit_name="row") if progress else None
        with atomic_file(out_path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
            if fmt == ".csv":
                columns = [
                    "row",
                    "text",
                    "empty",
                    "label",
                    "score",
                    *(["labels", "label_scores"] if multi_label else []),
                ]
                columns += [f"{kind}_{rank}" for rank in range(1, top_k + 1) for kind in ("label", "score")]
                writer = csv.DictWriter(f, columns)
                writer.writeheader()
            for chunk in _chunks(texts, batch_size * _CHUNK_BATCHES):
                scores = _scores(model, chunk, batch_size, stop)
                for row in _rows(written, chunk, scores, names, top_k, multi_label, threshold):
                    if fmt == ".csv":
                        writer.writerow(_csv_record(row, multi_label))
                    else:
                        f.write(json.dumps(row, ensure_ascii=False).translate(_LINE_BREAKS) + "\n")
                    empty += row["empty"]
                written += len(chunk)
                if bar is not None:
                    bar.update(written)
            if written != count:
                raise InputError(
                    f"{input_path}: read {written} rows, counted {count}; the file changed while it was read"
                )
            if stop.requested:  # asked after the last batch: the output is not published either
                raise KeyboardInterrupt
    return {"rows": written, "empty": empty, "out": out_path, "raw_scores": raw_scores}


def _multi_label_scores(
    model: keras.Model,
    texts: list[str],
    truth_lists: list[list[int]],
    top_k: int,
    batch_size: int,
    threshold: float,
    result: dict,
    stop: _StopRequest,
) -> tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix]:
    """Score a multi-label model block by block (at most ``_SCORE_VALUES`` scores, or one batch, in memory) into
    ``result``: micro/macro F1, then P@K, nDCG@K and PSP@K for K in 1, 3, 5 and ``top_k``, ``propensities`` (where
    PSP's propensities come from) and ``threshold``. Returns the true and predicted labels as sparse `[N, L]`."""
    num_labels = model.outputs[0].shape[-1]
    truth = pad_label_indices(truth_lists, num_labels)
    f1 = [MultiLabelF1(num_labels, "micro", threshold), MultiLabelF1(num_labels, "macro", threshold)]
    ks = sorted({1, 3, 5, top_k})
    step = max(batch_size, min(batch_size * _CHUNK_BATCHES, _SCORE_VALUES // num_labels))
    ranked, predicted = [], []
    for start in range(0, len(texts), step):
        scores = _scores(model, texts[start : start + step], batch_size, stop)
        for metric in f1:
            metric.update_state(truth[start : start + step], scores)
        ranked.append(top_k_labels(scores, max(ks)))
        predicted.append(scipy.sparse.csr_matrix(scores >= threshold, dtype=np.int8))
    result.update({metric.name: float(metric.result()) for metric in f1})
    propensities, result["propensities"] = _propensities(model, truth, num_labels)
    result.update(ranking_scores(np.concatenate(ranked), truth, num_labels, ks, propensities))
    result["threshold"] = threshold
    rows, columns = np.nonzero(truth >= 0)
    y_true = scipy.sparse.csr_matrix(
        (np.ones(len(rows), np.int8), (rows, truth[rows, columns])), shape=(len(texts), num_labels)
    )
    return y_true, scipy.sparse.vstack(predicted, format="csr")


def _propensities(model: keras.Model, truth: np.ndarray, num_labels: int) -> tuple[np.ndarray, str]:
    """PSP's label propensities and where they come from: the training label counts of a ``PSPAtK`` metric the
    model was compiled with (``elmo-keras train`` adds one), else the label counts of the evaluated rows."""
    if model.compiled:
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        for metric in keras.tree.flatten(compiled.get("metrics") or []):
            if isinstance(metric, PSPAtK):
                return label_propensities(metric.label_counts, metric.num_examples, metric.A, metric.B), "training"
    counts = np.bincount(truth[truth >= 0], minlength=num_labels)
    return label_propensities(counts, len(truth)), "data"


def evaluate_file(
    model: str | os.PathLike | keras.Model,
    data: str | os.PathLike,
    json_path: str | os.PathLike | None = None,
    top_k: int = 5,
    batch_size: int = 32,
    text_column: str = "text",
    label_column: str = "label",
    separator: str = "|",
    threshold: float = 0.5,
    overwrite: bool = False,
    labels: Sequence[str] | None = None,
    raw_scores: bool = False,
) -> dict:
    """Score a classifier on a labelled CSV (read as ``elmo-keras train`` reads ``--test``).

    Single-label: ``accuracy``, ``macro_f1`` (over all the model's classes, 0 for a class never true nor
    predicted) and, when ``1 < top_k < classes``, ``top_k_accuracy``. Multi-label (labels joined by ``separator``;
    predicted = score >= ``threshold``): ``micro_f1``, ``macro_f1``, and the ranking scores ``precision_at_K``,
    ``ndcg_at_K`` and ``psp_at_K`` for K = 1, 3, 5 and ``top_k`` (:func:`elmo_keras.tasks.metrics.ranking_scores`);
    PSP's propensities come from the training label counts saved with the model (a ``PSPAtK`` metric, which
    ``elmo-keras train`` adds), else from the label counts of ``data``: ``propensities`` says which (``"training"``
    or ``"data"``). Scores are computed a block of texts at a time (at most 16M scores, or one batch, in memory), so
    label spaces of 100,000+ labels are evaluated in bounded memory. Both also give scikit-learn's
    ``classification_report`` (as text in ``report``, as a dict in ``classification_report``); for a model with
    more than 1,000 labels it lists only the labels that are true or predicted in ``data`` (the others have no
    support and no predictions).
    A label in the CSV that the model does not know is an :class:`InputError` naming it (and its rows' count), and
    so is a cell without labels (empty, or separators only when multi-label).

    ``raw_scores`` evaluates a model whose last layer gives no probabilities (e.g. logits, see
    :func:`load_classifier`) as a single-label classifier: accuracy, macro-F1 and top-k accuracy depend only on
    the ranking of the scores, which logits and their softmax share; a threshold has no meaning on them, so there
    is no multi-label evaluation of raw scores. SIGINT or SIGTERM stops at the end of the batch in hand
    (KeyboardInterrupt; no JSON file is written).

    Args:
        model: a ``.keras`` file or a ``keras.Model`` (see :func:`load_classifier`).
        data: a CSV file with a header row, a text and a label column.
        json_path: also write the results as JSON here (atomically), or ``None``.
        top_k: a k of the ranking scores besides 1, 3 and 5 (multi-label) and of top-k accuracy (single-label).
        batch_size: texts per model call.
        text_column: the CSV column of the texts.
        label_column: the CSV column of the labels.
        separator: what joins the labels of a row (multi-label).
        threshold: the score from which a multi-label model's label counts as predicted.
        overwrite: replace an existing ``json_path``.
        labels: the class names in output order, or ``None`` for the model's labels file.
        raw_scores: score a model whose outputs are not probabilities, as single-label (see above).

    Returns:
        A dict of the scores, ``rows``, ``empty`` (texts without tokens), ``labels``, ``multi_label``,
        ``raw_scores``, ``report`` and ``classification_report`` (what the JSON file holds, ``report`` aside).

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek
    from elmo_keras.tasks.predict import evaluate_file

    words = ek.StaticEmbedding.from_corpus([["good", "film"], ["bad", "plot"]], dim=4)
    model = ek.models.text_classifier(words, num_classes=2, head="pool")
    data = os.path.join(tempfile.mkdtemp(), "test.csv")
    with open(data, "w") as f:
        f.write("text,label\\ngood film,pos\\nbad plot,neg\\n")
    scores = evaluate_file(model, data, labels=["neg", "pos"])
    assert 0 <= scores["accuracy"] <= 1 and "precision" in scores["report"]
    ```
    """
    data = os.fspath(data)
    _check_settings(top_k, batch_size, threshold)
    if json_path is not None:
        json_path = os.fspath(json_path)
        if os.path.isdir(json_path):
            raise InputError(f"--json {json_path} is a folder; give a file name, e.g. scores.json")
        keep = {} if isinstance(model, keras.Model) else {"model": os.fspath(model), "labels": labels_path(model)}
        check_paths(data, json_path, "file", overwrite, keep=keep)
    source = model.name if isinstance(model, keras.Model) else os.fspath(model)
    with _StopRequest().installed() as stop:
        model, names, multi_label = load_classifier(model, labels, raw_scores)
        texts, values = _read_csv(data, text_column, label_column, "test", separator if multi_label else None)
        rows = label_lists(values, multi_label, separator)
        index = {name: i for i, name in enumerate(names)}
        unknown = sorted({c for row in rows for c in row} - set(index))
        if unknown:
            affected = sum(any(c not in index for c in row) for row in rows)
            raise InputError(
                f"{data}: {affected} row(s) have labels the model does not know: {unknown[:10]}"
                f"{' ...' if len(unknown) > 10 else ''} (it knows {names[:10]}{' ...' if len(names) > 10 else ''}); "
                "fix or remove those rows"
            )
        result = {"rows": len(texts), "empty": sum(not tokenize(t) for t in texts), "labels": names}
        result["multi_label"], result["raw_scores"] = multi_label, raw_scores
        classes = list(range(len(names)))
        if multi_label:
            y_true, y_pred = _multi_label_scores(
                model, texts, [[index[c] for c in row] for row in rows], top_k, batch_size, threshold, result, stop
            )
            if len(names) > _REPORT_LABELS:
                classes = np.flatnonzero(np.asarray((y_true + y_pred).sum(axis=0)).ravel()).tolist()
        else:
            scores = _scores(model, texts, batch_size, stop)
            y_true, y_pred = np.array([index[row[0]] for row in rows]), scores.argmax(-1)
            result["accuracy"] = float(accuracy_score(y_true, y_pred))
            result["macro_f1"] = float(f1_score(y_true, y_pred, labels=classes, average="macro", zero_division=0))
            if 1 < top_k < len(names):
                result["top_k"] = top_k
                result["top_k_accuracy"] = float(top_k_accuracy_score(y_true, scores, k=top_k, labels=classes))
        report = {"labels": classes, "target_names": [names[i] for i in classes], "zero_division": 0}
        result["report"] = classification_report(y_true, y_pred, digits=4, **report)
        result["classification_report"] = classification_report(y_true, y_pred, output_dict=True, **report)
        if stop.requested:  # asked after the last batch: no scores file either
            raise KeyboardInterrupt
        if json_path is not None:
            write_json(json_path, {"model": source, "data": data, **{k: v for k, v in result.items() if k != "report"}})
    return result
