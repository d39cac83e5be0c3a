"""Study: layer weighting and contextual vs static embeddings (AG News, senseval, Reuters-21578).

Part ``agnews``: the BiGRU classifier on the bundled AG News split (6,000 train rows, of which a fixed
stratified 600 are held out for early stopping; 1,600 test rows) with the brown-small preset, mixing its three
layers as ``trainable`` / ``fixed`` (0.45, 0.15, 0.40) / ``mlp`` / ``top``, against static ``cbow`` / ``svd`` /
``fasttext`` vectors trained on Brown, plus two controls that explain the published 42% (``cbow_raw``: Brown
vectors looked up with raw whitespace tokens; ``random``: random frozen vectors). ``+words`` methods put a
task word embedding (learned, 128-d, over the training words) beside the features, as Peters et al. (2018)
concatenate ELMo with the task model's own token vectors; ``words`` is that embedding alone (features zeroed).
Seeds change the head's initialisation and batch order, not the data split.
Part ``senseval``: 1-NN sense classification of line / hard / serve / interest with each ELMo layer at the
target word vs static vectors (target word, and the mean of a +-5-word context window).
Part ``reuters``: Reuters-21578 ApteMod (90 labels), multi-label BiGRU head: micro/macro-F1, P@1, P@5.

The biLM is frozen, so its layers are computed once per text (``elmo_keras.features``) and the heads train on
them: the same model as ``text_classifier(Elmo(...))``, minus recomputing the biLM every epoch.
Results are merged into ``benchmarks/results/study_layer_weighting.json`` (fractions, not percent).

    python benchmarks/study_layer_weighting.py --part agnews senseval reuters
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys
import time
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402

DATA = os.path.join(HERE, "data")
RESULTS = os.path.join(HERE, "results", "study_layer_weighting.json")
ELMO_METHODS = {
    "trainable": {"mix": "trainable"},
    "fixed": {"mix": "fixed", "mix_weights": [0.45, 0.15, 0.40]},
    "mlp": {"mix": "mlp"},
    "top": {"mix": "top"},
}
STATIC_METHODS = ("cbow", "svd", "fasttext")
CONTROLS = ("cbow_raw", "random")
WORD_METHODS = ("fixed+words", "trainable+words", "svd+words", "words")
WORD_DIM = 128
STATIC_DIM = 256  # = the ELMo width of brown-small (2 x 128)
BATCH_SIZE = 32
REUTERS_BATCH_SIZE = 64  # long documents: fewer, larger steps
UNITS = 64
BUCKETS = [16, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512]


# ----------------------------------------------------------------------------------------------- helpers


def merge_results(update: dict, path: str = RESULTS) -> None:
    """Merge ``update`` into the results file (so the parts can run separately)."""
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    results.update(update)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


def stratified_holdout(labels: np.ndarray, per_class: int) -> np.ndarray:
    """Boolean mask: the first ``per_class`` rows of each class (rows are already in random order)."""
    mask = np.zeros(len(labels), bool)
    for c in np.unique(labels):
        mask[np.flatnonzero(labels == c)[:per_class]] = True
    return mask


def static_vectors(method: str, sentences: list[list[str]], seed: int = 0):
    from elmo_keras import baselines

    if method == "cbow":
        return baselines.train_cbow(sentences, dim=STATIC_DIM, min_count=2, epochs=10, seed=seed)
    if method == "fasttext":
        return baselines.train_fasttext(sentences, dim=STATIC_DIM, min_count=2, epochs=10, seed=seed)
    return baselines.train_svd_ppmi(sentences, dim=STATIC_DIM, min_count=2, seed=seed)


def static_features(vectors, token_lists: list[list[str]], batch: int = 512) -> list[np.ndarray]:
    """Token lists -> [n_tokens, 1, D] float16 arrays via the library's StaticEmbedding layer."""
    from elmo_keras.models import pad_tokens

    layer = vectors.embedding(extra_words={t for tokens in token_lists for t in tokens})
    out = []
    for start in range(0, len(token_lists), batch):
        part = token_lists[start : start + batch]
        values = np.asarray(layer(pad_tokens(part)))
        out += [values[i, : len(tokens), None, :].astype(np.float16) for i, tokens in enumerate(part)]
    return out


def elmo_features(token_lists: list[list[str]], preset: str) -> list[np.ndarray]:
    """``preset``: a preset name or a pretraining output folder."""
    from elmo_keras.features import embed_layers

    import elmo_keras as ek

    return embed_layers(ek.ElmoEmbedder.from_preset(preset), token_lists, progress=True)


def oov_rates(words: set[str], token_lists: list[list[str]]) -> dict:
    tokens = [t for tokens in token_lists for t in tokens]
    types = set(tokens)
    return {
        "token_oov": float(np.mean([t not in words for t in tokens])),
        "type_oov": float(np.mean([t not in words for t in types])),
    }


# ----------------------------------------------------------------------------------------------- part 1
def train_head(
    features,
    labels,
    val,
    test,
    n_classes: int,
    seed: int,
    epochs: int,
    patience: int,
    multi_label: bool = False,
    units: int = UNITS,
    batch_size: int = BATCH_SIZE,
    tokens: tuple | None = None,
    **mix,
) -> dict:
    """Fit ``features_classifier`` with early stopping on validation; return test predictions and curves.

    ``tokens``: (fit, validation, test) token lists: adds a learned task word embedding beside the features.
    """
    import keras
    from elmo_keras.baselines import StaticEmbedding
    from elmo_keras.callbacks import LayerWeightsHistory
    from elmo_keras.features import features_dataset

    from elmo_keras import models

    keras.utils.set_random_seed(seed)
    n_layers, dim = features[0].shape[1:]
    fit_tokens, val_tokens, test_tokens = tokens or (None, None, None)
    words = StaticEmbedding.from_corpus(fit_tokens, WORD_DIM, name="words") if tokens else None
    model = models.features_classifier(
        n_layers, dim, n_classes, units=units, learning_rate=2e-3, multi_label=multi_label, word_embedding=words, **mix
    )
    train_ds = features_dataset(
        features, labels, batch_size, shuffle=True, seed=seed, bucket_boundaries=BUCKETS, tokens=fit_tokens
    )
    val_ds = features_dataset(val[0], val[1], batch_size, bucket_boundaries=BUCKETS, tokens=val_tokens)
    # multi-label F1 at 0.5 stays 0 for the first epochs, so stop on validation loss there
    monitor, mode = ("val_loss", "min") if multi_label else ("val_accuracy", "max")
    weights = LayerWeightsHistory()
    stop = keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=patience, restore_best_weights=True)
    start = time.perf_counter()
    fit = model.fit(train_ds, validation_data=val_ds, epochs=epochs, callbacks=[weights, stop], verbose=2)
    seconds = time.perf_counter() - start
    curve = fit.history["val_micro_f1" if multi_label else "val_accuracy"]
    probabilities = model.predict(features_dataset(test[0], batch_size=batch_size, tokens=test_tokens), verbose=0)
    return {
        "probabilities": probabilities,
        "curve": [float(v) for v in curve],
        "val_loss": [float(v) for v in fit.history["val_loss"]],
        "peak_epoch": int(stop.best_epoch) + 1,
        "epochs_run": len(curve),
        "seconds": seconds,
        "mix_weights": {k: v for k, v in weights.history.items()},
        "mix_logits": {k: v for k, v in weights.raw.items()},
        "mix_gamma": dict(weights.gamma),
    }


def mean_std(runs: list[dict], keys) -> dict:
    out = {}
    for key in keys:
        values = np.array([r[key] for r in runs], float)
        out[f"{key}_mean"] = float(values.mean())
        out[f"{key}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return out


def classification_scores(y_true: np.ndarray, probabilities: np.ndarray) -> dict:
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, log_loss

    predicted = probabilities.argmax(-1)
    return {
        "accuracy": float(accuracy_score(y_true, predicted)),
        "f1": float(f1_score(y_true, predicted, average="macro")),
        "test_loss": float(log_loss(y_true, np.clip(probabilities, 1e-7, 1), labels=range(probabilities.shape[1]))),
        "confusion": confusion_matrix(y_true, predicted).tolist(),
    }


def summarize(runs: list[dict]) -> dict:
    """Mean and std (sample std over seeds) of the scalar scores, plus the per-seed runs."""
    out = mean_std(runs, ("accuracy", "f1", "test_loss", "peak_epoch"))
    out["confusion_sum"] = np.sum([r["confusion"] for r in runs], axis=0).tolist()
    out["runs"] = runs
    return out


def part_agnews(
    seeds: list[int],
    epochs: int,
    patience: int,
    limit: int | None,
    methods: list[str],
    preset: str = "brown-small",
    save=lambda part: None,
    head: str = "bigru",
) -> dict:
    """Runs every method; ``save(part)`` is called after each one, so an interrupted run keeps what it did."""
    from elmo_keras import datasets

    data = datasets.load_ag_news()
    train_tokens = [t.split() for t in data.train_texts]
    test_tokens = [t.split() for t in data.test_texts]
    if limit:
        train_tokens, test_tokens = train_tokens[:limit], test_tokens[: limit // 4]
    y_train, y_test = data.train_labels[: len(train_tokens)], data.test_labels[: len(test_tokens)]
    is_val = stratified_holdout(y_train, per_class=len(y_train) // 40)
    brown, _ = datasets.load_brown()
    all_tokens = train_tokens + test_tokens

    def split(feats):
        fit = [f for f, v in zip(feats, is_val) if not v]
        val = [f for f, v in zip(feats, is_val) if v]
        return fit, (val, y_train[is_val]), (feats[len(train_tokens) :], y_test)

    results, diagnostics = {}, {}
    feature_sets: dict[str, list[np.ndarray]] = {}
    fit_tokens, (val_tokens, _), (test_token_lists, _) = split(all_tokens)
    for method in methods:
        start = time.perf_counter()
        base = method.removesuffix("+words")
        tokens = (fit_tokens, val_tokens, test_token_lists) if method.endswith("words") else None
        if base in ELMO_METHODS:
            if "elmo" not in feature_sets:
                feature_sets["elmo"] = elmo_features(all_tokens, preset)
                diagnostics["elmo_feature_seconds"] = time.perf_counter() - start
            feats, mix = feature_sets["elmo"], ELMO_METHODS[base]
        elif method == "words":  # the word embedding alone: one all-zero feature channel, same pipeline
            feats, mix = [np.zeros((len(t), 1, 1), np.float16) for t in all_tokens], {"mix": "top"}
        else:
            mix = {"mix": "top"}
            if method == "random":
                words = sorted({t for tokens in all_tokens for t in tokens})
                rng = np.random.default_rng(0)
                table = {w: rng.normal(0, 1, STATIC_DIM).astype(np.float16) for w in words}
                feats = [np.stack([table[t] for t in tokens])[:, None, :] for tokens in all_tokens]
            else:
                vectors = static_vectors("cbow" if method == "cbow_raw" else base, brown)
                lookup_tokens = all_tokens
                if method == "cbow_raw":  # whitespace tokens as in the raw CSV: "loan." stays one token
                    raw = datasets.load_ag_news(tokenize=False)
                    lookup_tokens = [
                        t.split()
                        for t in list(raw.train_texts[: len(train_tokens)]) + list(raw.test_texts[: len(test_tokens)])
                    ]
                feats = static_features(vectors, lookup_tokens)
                diagnostics[base] = {
                    "vocabulary": len(vectors.words),
                    **oov_rates(set(vectors.words), lookup_tokens),
                    "seconds": time.perf_counter() - start,
                }
        fit, val, test = split(feats)
        runs = [
            train_summary(
                fit, y_train[~is_val], val, test, seed, epochs, patience, {**mix, "tokens": tokens, "head": head}
            )
            for seed in seeds
        ]
        results[method] = summarize(runs)
        print(method, {k: round(v, 4) for k, v in results[method].items() if k.endswith(("_mean", "_std"))}, flush=True)
        part = {
            "results": results,
            "diagnostics": diagnostics,
            "settings": {
                "train": int((~is_val).sum()),
                "validation": int(is_val.sum()),
                "test": len(test_tokens),
                "seeds": seeds,
                "max_epochs": epochs,
                "patience": patience,
                "head": head,
                "units": UNITS,
                "batch_size": BATCH_SIZE,
                "learning_rate": 2e-3,
                "static_dim": STATIC_DIM,
                "word_dim": WORD_DIM,
                "static_training": "Brown, min_count 2, window 5, 10 epochs (svd: PPMI, window 5)",
            },
        }
        save(part)
    return part


def train_summary(fit, y_fit, val, test, seed, epochs, patience, mix) -> dict:
    out = train_head(fit, y_fit, val, test, n_classes=4, seed=seed, epochs=epochs, patience=patience, **mix)
    scores = classification_scores(test[1], out.pop("probabilities"))
    return {"seed": seed, **scores, **out}


# ----------------------------------------------------------------------------------------------- part 2
def load_senseval() -> list[dict]:
    with gzip.open(os.path.join(DATA, "senseval", "senseval_lhsi.tsv.gz"), "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    for row in rows:
        row["tokens"] = row["tokens"].split(" ")
        row["target_index"] = int(row["target_index"])
    return rows


def one_nn_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray) -> float:
    """Cosine 1-nearest-neighbour accuracy."""

    def unit(x):
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    nearest = (unit(test_x) @ unit(train_x).T).argmax(1)
    return float(np.mean(train_y[nearest] == test_y))


def part_senseval(
    limit: int | None,
    preset: str = "brown-small",
    test_fraction: float = 0.2,
    window: int = 5,
    static_baselines: bool = True,
) -> dict:
    """1-NN sense accuracy per ELMo layer of ``preset`` and (``static_baselines``) of static Brown vectors."""
    from elmo_keras import datasets

    rows = load_senseval()
    if limit:
        rows = [r for i, r in enumerate(rows) if i % max(1, len(rows) // limit) == 0]
    elmo = elmo_features([r["tokens"] for r in rows], preset)
    targets = np.stack([f[r["target_index"]].astype(np.float32) for f, r in zip(elmo, rows)])  # [N, 3, D]
    brown, _ = datasets.load_brown()
    brown_lower = [[t.lower() for t in s] for s in brown]  # the senseval contexts are lower-cased
    static = {m: static_vectors(m, brown_lower) for m in STATIC_METHODS} if static_baselines else {}
    static_target, static_context = {}, {}
    for method, vectors in static.items():  # unknown words: the mean vector (StaticEmbedding's rule)
        feats = static_features(vectors, [r["tokens"] for r in rows])
        static_target[method] = np.stack([f[r["target_index"], 0] for f, r in zip(feats, rows)]).astype(np.float32)
        static_context[method] = np.stack(
            [
                f[
                    [
                        j
                        for j in range(max(0, r["target_index"] - window), min(len(f), r["target_index"] + window + 1))
                        if j != r["target_index"]
                    ]
                    or [r["target_index"]],
                    0,
                ]
                .astype(np.float32)
                .mean(0)
                for f, r in zip(feats, rows)
            ]
        )
    rng = np.random.default_rng(0)
    out = {}
    for word in sorted({r["word"] for r in rows}):
        index = np.array([i for i, r in enumerate(rows) if r["word"] == word])
        senses = np.array([rows[i]["sense"] for i in index])
        is_test = np.zeros(len(index), bool)
        for sense in np.unique(senses):  # stratified split per word
            members = rng.permutation(np.flatnonzero(senses == sense))
            is_test[members[: int(round(test_fraction * len(members)))]] = True
        tr, te = index[~is_test], index[is_test]
        y_tr, y_te = senses[~is_test], senses[is_test]
        majority = Counter(y_tr).most_common(1)[0][0]
        scores = {
            "n_train": int(len(tr)),
            "n_test": int(len(te)),
            "n_senses": int(len(np.unique(senses))),
            "chance": 1.0 / len(np.unique(senses)),
            "most_frequent_sense": float(np.mean(y_te == majority)),
        }
        for layer in range(targets.shape[1]):
            scores[f"elmo_layer{layer}"] = one_nn_accuracy(targets[tr, layer], y_tr, targets[te, layer], y_te)
        scores["elmo_average"] = one_nn_accuracy(targets[tr].mean(1), y_tr, targets[te].mean(1), y_te)
        for method in static:
            scores[f"{method}_target"] = one_nn_accuracy(
                static_target[method][tr], y_tr, static_target[method][te], y_te
            )
            scores[f"{method}_context"] = one_nn_accuracy(
                static_context[method][tr], y_tr, static_context[method][te], y_te
            )
        out[word] = scores
        print(word, {k: round(v, 3) for k, v in scores.items()}, flush=True)
    weights = np.array([out[w]["n_test"] for w in out], float)
    out["all"] = {
        k: float(np.average([out[w][k] for w in out if w != "all"], weights=weights))
        for k in out[next(iter(out))]
        if k not in ("n_train", "n_test", "n_senses")
    }
    return {
        "results": out,
        "settings": {
            "split": f"stratified per word and sense, {test_fraction:.0%} test, seed 0",
            "static_context_window": window,
            "distance": "cosine, 1-NN",
            "static_training": "lower-cased Brown, min_count 2, 10 epochs",
        },
    }


# ----------------------------------------------------------------------------------------------- part 3
def load_reuters() -> tuple[list[dict], list[dict], list[str]]:
    from elmo_keras.datasets import simple_tokenize

    def read(name):
        with gzip.open(os.path.join(DATA, "reuters21578", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
        for d in docs:
            d["tokens"] = simple_tokenize(f"{d['title']} {d['text']}").split()
        return docs

    with open(os.path.join(DATA, "reuters21578", "categories.tsv"), encoding="utf-8") as f:
        categories = [row["category"] for row in csv.DictReader(f, delimiter="\t")]
    return read("apte_train"), read("apte_test"), categories


def multilabel_scores(y_true: np.ndarray, scores: np.ndarray) -> dict:
    from sklearn.metrics import f1_score

    predicted = (scores >= 0.5).astype(int)
    top = np.argsort(-scores, axis=1)
    return {
        "micro_f1": float(f1_score(y_true, predicted, average="micro", zero_division=0)),
        "macro_f1": float(f1_score(y_true, predicted, average="macro", zero_division=0)),
        "precision_at_1": float(np.mean(y_true[np.arange(len(y_true)), top[:, 0]])),
        "precision_at_5": float(np.mean(np.take_along_axis(y_true, top[:, :5], axis=1).sum(1) / 5)),
    }


def part_reuters(
    seeds: list[int], epochs: int, patience: int, limit: int | None, methods: list[str], preset: str = "brown-small"
) -> dict:
    train, test, categories = load_reuters()
    if limit:
        train, test = train[:limit], test[: limit // 2]
    index = {c: i for i, c in enumerate(categories)}

    def multi_hot(docs):
        y = np.zeros((len(docs), len(categories)), np.float32)
        for row, d in enumerate(docs):
            y[row, [index[c] for c in d["labels"]]] = 1
        return y

    y_train, y_test = multi_hot(train), multi_hot(test)
    is_val = np.zeros(len(train), bool)
    is_val[np.random.default_rng(0).permutation(len(train))[: len(train) // 10]] = True
    results = {}
    all_tokens = [d["tokens"] for d in train + test]

    def split(items):
        return (
            [x for x, v in zip(items, is_val) if not v],
            [x for x, v in zip(items, is_val) if v],
            items[len(train) :],
        )

    feature_sets: dict[str, tuple] = {}  # features split (fit, val, test), computed once per biLM / static method
    for method in methods:
        base = method.removesuffix("+words")
        key = "elmo" if base in ELMO_METHODS else base
        if key not in feature_sets:
            if key == "elmo":
                feats = elmo_features(all_tokens, preset)
            else:
                from elmo_keras import datasets

                feats = static_features(static_vectors(base, datasets.load_brown()[0]), all_tokens)
            feature_sets[key] = split(feats)
        mix = ELMO_METHODS[base] if key == "elmo" else {"mix": "top"}
        fit_f, val_f, test_f = feature_sets[key]
        tokens = split(all_tokens) if method.endswith("+words") else None
        runs = []
        for seed in seeds:
            out = train_head(
                fit_f,
                y_train[~is_val],
                (val_f, y_train[is_val]),
                (test_f, y_test),
                n_classes=len(categories),
                seed=seed,
                epochs=epochs,
                patience=patience,
                multi_label=True,
                batch_size=REUTERS_BATCH_SIZE,
                tokens=tokens,
                **mix,
            )
            runs.append({"seed": seed, **multilabel_scores(y_test, out.pop("probabilities")), **out})
        summary = mean_std(runs, ("micro_f1", "macro_f1", "precision_at_1", "precision_at_5"))
        results[method] = {**summary, "runs": runs}
        print(method, {k: round(v, 4) for k, v in summary.items()}, flush=True)
    return {
        "results": results,
        "settings": {
            "train": int((~is_val).sum()),
            "validation": int(is_val.sum()),
            "test": len(test),
            "labels": len(categories),
            "seeds": seeds,
            "max_epochs": epochs,
            "patience": patience,
            "threshold": 0.5,
            "head": "bigru (multi-label)",
            "units": UNITS,
            "batch_size": REUTERS_BATCH_SIZE,
            "early_stopping": "validation loss",
        },
    }


# ----------------------------------------------------------------------------------------------- main
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--part", nargs="+", default=["agnews", "senseval", "reuters"], choices=["agnews", "senseval", "reuters"]
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--head", default="bigru", help="AG News head: bigru, bilstm_bigru or pool")
    parser.add_argument("--methods", nargs="+", default=[*ELMO_METHODS, *STATIC_METHODS, *CONTROLS, *WORD_METHODS])
    parser.add_argument("--reuters-methods", nargs="+", default=["trainable"])
    parser.add_argument("--reuters-seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--reuters-epochs", type=int, default=12)
    parser.add_argument("--limit", type=int, default=None, help="smoke test: use only this many training texts")
    parser.add_argument("--preset", default="brown-small", help="biLM: a preset name or a pretraining output folder")
    parser.add_argument("--label", default="", help="suffix for the result keys, e.g. '@ag' for another --preset")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    meta = {
        "machine": machine_info(),
        "command": "python benchmarks/study_layer_weighting.py " + " ".join(os.sys.argv[1:] if argv is None else argv),
        "units": "fractions (0.85 = 85%)",
        "preset": args.preset,
    }

    def save_agnews(part: dict) -> None:
        results = {method + args.label: result for method, result in part["results"].items()}
        diagnostics = {key + args.label: value for key, value in part["diagnostics"].items()}
        merge_results(
            {**results, "ag_news": {"settings": part["settings"], "meta": meta, "diagnostics": diagnostics}}, args.out
        )

    if "agnews" in args.part:
        part_agnews(
            args.seeds,
            args.epochs,
            args.patience,
            args.limit,
            args.methods,
            args.preset,
            save=save_agnews,
            head=args.head,
        )
    if "senseval" in args.part:
        merge_results({"senseval": {**part_senseval(args.limit, args.preset), "meta": meta}}, args.out)
    if "reuters" in args.part:
        merge_results(
            {
                "reuters": {
                    **part_reuters(
                        args.reuters_seeds,
                        args.reuters_epochs,
                        args.patience,
                        args.limit,
                        args.reuters_methods,
                        args.preset,
                    ),
                    "meta": meta,
                }
            },
            args.out,
        )


if __name__ == "__main__":
    main()
