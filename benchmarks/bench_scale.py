"""Training at scale: peak RSS and time of `TextModel.fit` over a frozen biLM, features in memory vs on disk.

Each run is its own process: `text_classifier(Elmo, 4 classes, head="pool")` fitted one epoch (batch 32, no
validation) on N AG News texts (title + description; the bundled 7,600 test texts, repeated past that with a
" #k" token appended to each k-th copy, so that every text is distinct and the store cannot deduplicate them):

- memory: `fit(..., features_memory=1.0)`: the layers of every text are held in memory (float16);
- disk:   `fit(..., features_dir=TMP)`: the layers go to a feature store and are streamed back.

Beside them, `ElmoEmbedder.embed_sentences` alone on the first 1,000 texts (float32, like the fitted Elmo; tokens/s,
its own process). `--merge` keeps the other runs of an existing results file and replaces those run again (e.g.
`--embedder-only --merge`).

Recorded per run: peak RSS (getrusage), fit seconds, the embedding phase's seconds and tokens/s, the store's
size. The claim: on disk, peak RSS at 16k texts stays within 0.5 GB of the 1k figure; in memory it grows with N.

    python ../shared/bench/allennlp/make_weights.py --variant all --out-dir RIG
    python benchmarks/bench_scale.py --rig-dir RIG --sizes original small --texts 1000 4000 16000 --paths disk memory
    python benchmarks/bench_scale.py --figure   # docs/figures/bench_scale.png from the results file
    python benchmarks/bench_scale.py --table    # the results as docs/large_data.md's table

Writes benchmarks/results/bench_scale.json (machine, versions, settings, every run; rewritten after each run).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "bench_scale.json")
FIGURE = os.path.join(HERE, "..", "docs", "figures", "bench_scale.png")
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402


def ag_news(n: int) -> tuple[list[str], list[int]]:
    """``n`` distinct AG News texts (title + description) and their 0-based labels."""
    import elmo_keras

    path = os.path.join(os.path.dirname(elmo_keras.__file__), "data", "ag_news", "test.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = [(int(label) - 1, f"{title} . {text}") for label, title, text in csv.reader(f)]
    texts, labels = [], []
    for i in range(n):
        label, text = rows[i % len(rows)]
        copy = i // len(rows)
        texts.append(text if copy == 0 else f"{text} #{copy}")
        labels.append(label)
    return texts, labels


def model_files(rig: str, size: str) -> tuple[str, str]:
    return os.path.join(rig, f"elmo_{size}_options.json"), os.path.join(rig, f"elmo_{size}_random.hdf5")


def child_fit(config: dict) -> dict:
    """One fit in this process (see the module docstring); returns its measurements."""
    import numpy as np

    import elmo_keras as ek
    from elmo_keras import models
    from elmo_keras.tasks.embed_once import EmbedOnce

    texts, labels = ag_news(config["texts"])
    phase = {}
    features = EmbedOnce.features

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        table = features(self, *args, **kwargs)
        phase["seconds"] = time.perf_counter() - start
        return table

    EmbedOnce.features = timed
    elmo = ek.Elmo.from_pretrained(*model_files(config["rig"], config["size"]))
    model = models.text_classifier(elmo, 4, head="pool", units=64)
    store = tempfile.mkdtemp(dir=config["scratch"]) if config["path"] == "disk" else None
    start = time.perf_counter()
    history = model.fit(
        np.array(texts, dtype=object),
        np.array(labels),
        epochs=1,
        batch_size=32,
        verbose=0,
        features_dir=store,
        features_memory=1.0,
    )
    seconds = time.perf_counter() - start
    tokens = sum(len(ek.tokenize(t)) for t in texts)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(store) for f in fs) if store else 0
    if store:
        shutil.rmtree(store)
    return {
        **config,
        "tokens": tokens,
        "fit_seconds": seconds,
        "embed_seconds": phase["seconds"],
        "embed_tokens_per_s": tokens / phase["seconds"],
        "train_seconds": seconds - phase["seconds"],
        "loss": history.history["loss"][-1],
        "store_bytes": size,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child_embedder(config: dict) -> dict:
    """``ElmoEmbedder.embed_sentences`` alone on the texts, results discarded."""
    import elmo_keras as ek

    texts, _ = ag_news(config["texts"])
    tokens = [ek.tokenize(t) for t in texts]
    embedder = ek.ElmoEmbedder(*model_files(config["rig"], config["size"]), dtype="float32")  # as fit's Elmo
    start = time.perf_counter()
    for _ in embedder.embed_sentences(tokens):
        pass
    seconds = time.perf_counter() - start
    return {
        **config,
        "tokens": sum(map(len, tokens)),
        "embed_seconds": seconds,
        "embed_tokens_per_s": sum(map(len, tokens)) / seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(config: dict) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        return {**config, "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict) -> str:
    """The results as the Markdown table of docs/large_data.md."""
    lines = [
        "| size | texts | tokens | path | peak RSS | fit | embedding phase | tokens/s | store |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["runs"]:
        if "error" in r:
            lines.append(f"| {r['size']} | {r['texts']:,} | | {r['path']} | failed | | | | |")
        elif r["kind"] == "embedder":
            lines.append(
                f"| {r['size']} | {r['texts']:,} | {r['tokens']:,} | `ElmoEmbedder` alone "
                f"| {r['peak_rss_mb'] / 1024:.2f} GB | | {r['embed_seconds']:.0f} s "
                f"| {r['embed_tokens_per_s']:,.0f} | |"
            )
        else:
            store = f"{r['store_bytes'] / 1e9:.2f} GB" if r["store_bytes"] else ""
            lines.append(
                f"| {r['size']} | {r['texts']:,} | {r['tokens']:,} | {r['path']} | {r['peak_rss_mb'] / 1024:.2f} GB "
                f"| {r['fit_seconds']:.0f} s | {r['embed_seconds']:.0f} s | {r['embed_tokens_per_s']:,.0f} | {store} |"
            )
    return "\n".join(lines)


def figure(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for size, marker, color in (("original", "o", "tab:blue"), ("small", "s", "tab:orange")):
        for path, style in (("memory", "--"), ("disk", "-")):
            runs = sorted(
                (
                    r
                    for r in results["runs"]
                    if r.get("kind") == "fit" and r["size"] == size and r["path"] == path and "error" not in r
                ),
                key=lambda r: r["texts"],
            )
            if runs:
                ax.plot(
                    [r["texts"] for r in runs],
                    [r["peak_rss_mb"] / 1024 for r in runs],
                    style,
                    marker=marker,
                    color=color,
                    label=f"{size}, {path}",
                )
    ax.set_xscale("log")
    ax.set_xlabel("AG News texts (one epoch, pool head)")
    ax.set_ylabel("peak RSS (GB)")
    ax.set_title("fit over a frozen biLM: features in memory vs streamed from a store")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=120)
    print(FIGURE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rig-dir", help="folder of make_weights.py's files")
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--texts", nargs="+", type=int, default=[1000, 4000, 16000])
    parser.add_argument("--paths", nargs="+", default=["memory", "disk"], choices=["memory", "disk"])
    parser.add_argument("--skip", nargs="*", default=[], metavar="SIZE:PATH:N", help="runs to leave out")
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help="where the disk runs put their stores")
    parser.add_argument("--figure", action="store_true", help="only draw the figure from the results file")
    parser.add_argument("--table", action="store_true", help="only print the results file as a Markdown table")
    parser.add_argument("--embedder-only", action="store_true", help="only the ElmoEmbedder-alone runs")
    parser.add_argument("--merge", action="store_true", help="replace these runs in the existing results file")
    args = parser.parse_args()
    if args.child:
        config = json.loads(args.child)
        print(json.dumps(child_fit(config) if config["kind"] == "fit" else child_embedder(config)))
        return
    if args.figure or args.table:
        with open(RESULTS) as f:
            results = json.load(f)
        figure(results) if args.figure else print(table(results))
        return
    from elmo_keras.utils.files import write_json

    results = {
        "machine": machine_info(),
        "settings": {"epochs": 1, "batch_size": 32, "head": "pool", "units": 64, "weights": "random, make_weights.py"},
        "runs": [],
    }
    if args.merge:
        with open(RESULTS) as f:
            results["runs"] = json.load(f)["runs"]
    same = lambda a, b: all(a[k] == b[k] for k in ("kind", "size", "texts", "path"))  # noqa: E731
    base = {"rig": os.path.abspath(args.rig_dir), "scratch": args.scratch}
    for size in args.sizes:
        configs = [{**base, "kind": "embedder", "size": size, "texts": 1000, "path": "-"}]
        configs += [
            {**base, "kind": "fit", "size": size, "texts": n, "path": path}
            for n in ([] if args.embedder_only else args.texts)
            for path in args.paths
            if f"{size}:{path}:{n}" not in args.skip
        ]
        for config in configs:
            run = run_child(config)
            results["runs"] = [r for r in results["runs"] if not same(r, run)] + [run]
            write_json(RESULTS, results)
            shown = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in run.items() if k not in base}
            print(json.dumps(shown), flush=True)
    figure(results)


if __name__ == "__main__":
    main()
