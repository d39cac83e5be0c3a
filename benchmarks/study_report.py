"""Tables (markdown, printed) and plots (docs/figures/*.png) from the study's results files.

python benchmarks/study_report.py [--merge benchmarks/results/study_elmo.json ...static.json ...]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
FIGURES = os.path.join(HERE, os.pardir, "docs", "figures")
PUBLISHED = {
    "trainable": (0.7192, 0.7183),
    "fixed": (0.7162, 0.7059),
    "mlp": (0.7164, 0.7164),
    "cbow": (0.4234, None),
    "svd": (0.4259, None),
}
METHODS = (
    "trainable",
    "fixed",
    "mlp",
    "top",
    "cbow",
    "svd",
    "fasttext",
    "cbow_raw",
    "random",
    "words",
    "svd+words",
    "fixed+words",
    "trainable+words",
)


def pct(mean: float, std: float | None = None) -> str:
    return f"{100 * mean:.2f}" + (f" ± {100 * std:.2f}" if std is not None else "")


def classification_table(results: dict) -> str:
    lines = [
        "| method | accuracy % | macro-F1 % | test loss | peak epoch | seeds | published acc. % |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        if method not in results:
            continue
        r = results[method]
        published = PUBLISHED.get(method, (None,))[0]
        lines.append(
            f"| {method} | {pct(r['accuracy_mean'], r['accuracy_std'])} | {pct(r['f1_mean'], r['f1_std'])} "
            f"| {r['test_loss_mean']:.3f} ± {r['test_loss_std']:.3f} "
            f"| {r['peak_epoch_mean']:.1f} ± {r['peak_epoch_std']:.1f} | {len(r['runs'])} "
            f"| {pct(published) if published else '-'} |"
        )
    return "\n".join(lines)


def weights_table(results: dict) -> str:
    lines = [
        "| seed | softmax weights (token, layer 1, layer 2) at the end | raw logits | gamma | epochs |",
        "|---|---|---|---|---|",
    ]
    for run in results["trainable"]["runs"]:
        w, raw = run["mix_weights"]["layer_mix"][-1], run["mix_logits"]["layer_mix"][-1]
        lines.append(
            f"| {run['seed']} | {', '.join(f'{v:.3f}' for v in w)} | {', '.join(f'{v:+.3f}' for v in raw)} "
            f"| {run['mix_gamma']['layer_mix'][-1]:.3f} | {run['epochs_run']} |"
        )
    return "\n".join(lines)


def early_curve_table(results: dict, epochs: int = 4) -> str:
    lines = [
        "| method | " + " | ".join(f"val. acc. epoch {e}" for e in range(1, epochs + 1)) + " |",
        "|---|" + "---|" * epochs,
    ]
    for method in METHODS:
        if method not in results:
            continue
        curves = [r["curve"] for r in results[method]["runs"]]
        cells = [pct(float(np.mean(v))) if (v := [c[e] for c in curves if len(c) > e]) else "-" for e in range(epochs)]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def confusion_tables(results: dict, class_names: list[str], methods=("trainable", "svd", "fixed+words")) -> str:
    out = []
    for method in methods:
        if method not in results:
            continue
        m = np.array(results[method]["confusion_sum"])
        out.append(f"**{method}** (summed over seeds; rows = true, columns = predicted)\n")
        out.append("| | " + " | ".join(class_names) + " |")
        out.append("|---|" + "---|" * len(class_names))
        out += [f"| {name} | " + " | ".join(str(v) for v in row) + " |" for name, row in zip(class_names, m)]
        out.append("")
    return "\n".join(out)


def senseval_table(senseval: dict) -> str:
    res = senseval["results"]
    cols = [
        "chance",
        "most_frequent_sense",
        "elmo_layer0",
        "elmo_layer1",
        "elmo_layer2",
        "elmo_average",
        "cbow_target",
        "cbow_context",
        "svd_target",
        "svd_context",
        "fasttext_target",
        "fasttext_context",
    ]
    lines = ["| word | n train / test | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for word, r in res.items():
        size = f"{r['n_train']} / {r['n_test']}" if "n_train" in r else "all (weighted)"
        lines.append(f"| {word} | {size} | " + " | ".join(pct(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def reuters_table(reuters: dict) -> str:
    lines = [
        "| method | micro-F1 % | macro-F1 % | P@1 % | P@5 % | seeds | peak epoch / max |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, r in reuters["results"].items():
        peaks = ", ".join(str(run["peak_epoch"]) for run in r["runs"])
        peaks += f" / {r.get('settings', reuters['settings'])['max_epochs']}"
        lines.append(
            f"| {method} | {pct(r['micro_f1_mean'], r['micro_f1_std'])} | "
            f"{pct(r['macro_f1_mean'], r['macro_f1_std'])} | {pct(r['precision_at_1_mean'])} | "
            f"{pct(r['precision_at_5_mean'])} | {len(r['runs'])} | {peaks} |"
        )
    return "\n".join(lines)


def plots(results: dict, folder: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    written = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for run in results["trainable"]["runs"]:
        w = np.array(run["mix_weights"]["layer_mix"])
        for layer, style in zip(range(w.shape[1]), ("-", "--", ":")):
            axes[0].plot(
                range(len(w)),
                w[:, layer],
                style,
                color=f"C{layer}",
                label=f"layer {layer}" if run["seed"] == results["trainable"]["runs"][0]["seed"] else None,
            )
    axes[0].set(xlabel="epoch (0 = before training)", ylabel="softmax weight", title="trainable ScalarMix weights")
    axes[0].legend()
    methods = [m for m in METHODS if m in results]
    means = [100 * results[m]["accuracy_mean"] for m in methods]
    stds = [100 * results[m]["accuracy_std"] for m in methods]
    colours = [
        "C1" if m.endswith("words") else "C0" if m in ("trainable", "fixed", "mlp", "top") else "C7" for m in methods
    ]
    axes[1].bar(methods, means, yerr=stds, color=colours)
    axes[1].axhline(71.92, color="C3", linestyle="--", label="published trainable (71.92%)")
    axes[1].set(ylabel="test accuracy %", title="AG News, BiGRU head (mean ± std over seeds)")
    axes[1].tick_params(axis="x", rotation=45)
    axes[1].legend(loc="lower left")
    fig.tight_layout()
    path = os.path.join(folder, "study_agnews.png")
    fig.savefig(path, dpi=110)
    written.append(path)
    return written


def merge(parts: list[str], path: str) -> None:
    """Merge result files of separate runs (e.g. ELMo methods and static methods run side by side) into one;
    the "ag_news" diagnostics and the "reuters" methods are combined."""
    merged: dict = {}
    for part in parts:
        with open(part) as f:
            data = json.load(f)
        for key, value in data.items():
            if key == "ag_news" and key in merged:
                merged[key]["diagnostics"] = {**merged[key]["diagnostics"], **value["diagnostics"]}
                merged[key].setdefault("runs_meta", [merged[key]["meta"]]).append(value["meta"])
            elif key == "reuters" and key in merged:  # methods run separately, each with its settings
                for method, result in value["results"].items():
                    merged[key]["results"][method] = {**result, "settings": value["settings"]}
            else:
                merged[key] = value
    with open(path, "w") as f:
        json.dump(merged, f, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--merge", nargs="+", help="result files to merge into --results first")
    parser.add_argument("--results", default=os.path.join(RESULTS, "study_layer_weighting.json"))
    parser.add_argument("--figures", default=FIGURES)
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.results)
    with open(args.results) as f:
        results = json.load(f)
    from elmo_keras.datasets import load_ag_news

    print("## AG News\n")
    print(classification_table(results), "\n")
    print(early_curve_table(results), "\n")
    if "trainable" in results:
        print(weights_table(results), "\n")
    print(confusion_tables(results, load_ag_news().class_names))
    print("diagnostics:", json.dumps(results["ag_news"].get("diagnostics"), indent=1))
    if "senseval" in results:
        print("\n## senseval (1-NN sense accuracy %)\n")
        print(senseval_table(results["senseval"]))
    if "reuters" in results:
        print("\n## Reuters-21578 ApteMod\n")
        print(reuters_table(results["reuters"]))
    if "trainable" in results:
        print("\nplots:", plots(results, args.figures))


if __name__ == "__main__":
    main()
