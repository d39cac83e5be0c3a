"""Study: which contextualizer, LSTM, transformer or gated CNN, for which need (issue 20).

The three Brown-pretrained biLMs (``brown-small``: biLSTM; ``brown-small-transformer``; ``brown-small-cnn``:
gated CNN; same char CNN, width, data and vocabulary) side by side, in one run, per preset:

- ``params``: biLM parameters (``elmo_keras.presets.parameter_count``);
- ``perplexity``: full-softmax validation perplexity per direction on the Brown held-out files (every 20th file
  of ``brown_files.tsv``: 25 files, 2,841 sentences, 58,248 tokens, as in ``brown-small/RECIPE.md``);
- ``speed``: float32 inference on this CPU, bench_embed's protocol: the first ``--speed-sentences`` validation
  sentences, sorted, batch 64, one warm-up batch, token cache emptied before every pass; tokens/s is the median
  of ``--repeats`` rounds, the presets alternating within each round (so load changes hit all alike); latency
  is one 10-token sentence, batch 1, p50 of 50 calls per round (cache emptied before each), median over rounds;
- ``agnews``: the layer-weighting study's BiGRU head on AG News, ``trainable`` (ELMo alone, trainable layer
  mix) and ``trainable+words`` (ELMo + a learned task word embedding), seeds 0, 1, 2
  (``study_layer_weighting.part_agnews``);
- ``senseval``: 1-NN sense accuracy per layer (``study_layer_weighting.part_senseval``).

Each part is written to ``benchmarks/results/study_contextualizers.json`` as soon as it is done (AG News after
every method), so an interrupted run keeps what it did; ``--report`` prints the markdown tables and writes
``docs/figures/study_contextualizers.png``. ``--presets`` takes preset names or pretraining output folders.

    python benchmarks/study_contextualizers.py                       # all parts, the three presets
    python benchmarks/study_contextualizers.py --part speed --presets brown-small /tmp/tf-out
    python benchmarks/study_contextualizers.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_embed import LATENCY_CALLS, LATENCY_TOKENS, latency_sentence, loadavg, p50_latency_ms, timed_passes  # noqa: E402
from machine import machine_info  # noqa: E402
from study_layer_weighting import merge_results, part_agnews, part_senseval  # noqa: E402
from study_report import FIGURES, pct  # noqa: E402

RESULTS = os.path.join(HERE, "results", "study_contextualizers.json")
FIGURE = os.path.join(FIGURES, "study_contextualizers.png")
PRESETS = ["brown-small", "brown-small-transformer", "brown-small-cnn"]
PARTS = ["params", "perplexity", "speed", "agnews", "senseval"]
AGNEWS_METHODS = ["trainable", "trainable+words"]
VALID_EVERY = 20  # every 20th Brown file (index % 20 == 19) is validation


# ----------------------------------------------------------------------------------------------- helpers
def label(preset: str) -> str:
    """Result key of a preset: its name, or a folder's base name."""
    return os.path.basename(os.path.normpath(preset))


def save(path: str, keys: list[str], value) -> None:
    """Set ``results[keys[0]][keys[1]]...`` = ``value`` in the results file, keeping everything else."""
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    node = results
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    merge_results({keys[0]: results[keys[0]]}, path)


def brown_validation() -> list[list[str]]:
    """The Brown held-out split of the presets' RECIPE.md: whole files, every 20th in ``brown_files.tsv`` order."""
    from elmo_keras import datasets

    sentences, files = datasets.load_brown()
    return [
        s for i, f in enumerate(files) if i % VALID_EVERY == VALID_EVERY - 1 for s in sentences[f["start"] : f["stop"]]
    ]


def describe(preset: str) -> dict:
    """Source, encoder type and settings of a preset."""
    from elmo_keras.options import encoder_options, load_options

    from elmo_keras.presets import preset_files

    kind, settings = encoder_options(load_options(preset_files(preset)["options"]))
    return {"source": preset, "encoder": kind, "encoder_settings": settings}


# ----------------------------------------------------------------------------------------------- parts
def part_params(preset: str) -> dict:
    from elmo_keras.presets import parameter_count, preset_files

    files = preset_files(preset)
    return {"bilm": parameter_count(files["options"]), "weights_bytes": os.path.getsize(files["weights"])}


def part_perplexity(preset: str, sentences: list[list[str]]) -> dict:
    from elmo_keras.lm import BiLanguageModel

    start = time.perf_counter()
    ppl = BiLanguageModel.from_preset(preset).perplexity(sentences)
    return {
        **ppl,
        "sentences": len(sentences),
        "tokens": sum(map(len, sentences)),
        "seconds": round(time.perf_counter() - start, 1),
    }


def part_speed(presets: list[str], sentences: list[list[str]], repeats: int, batch_size: int) -> dict[str, dict]:
    """Alternating rounds: in each, every preset does one timed pass, then ``LATENCY_CALLS`` latency calls."""
    import elmo_keras as ek

    embedders, out = {}, {}
    for preset in presets:
        start = time.perf_counter()
        emb = ek.ElmoEmbedder.from_preset(preset, dtype="float32", batch_size=batch_size, chunk_size=len(sentences))
        out[preset] = {"load_s": round(time.perf_counter() - start, 2), "rounds": []}
        list(emb.embed_sentences(sorted(sentences, key=len)[:batch_size]))  # warm-up batch (tracing)
        emb.embed_sentence(latency_sentence(sentences))
        embedders[preset] = emb
    n_tokens = sum(map(len, sentences))
    for round_ in range(repeats):
        print(f"speed round {round_ + 1}/{repeats}, load {loadavg()}", flush=True)
        for preset, emb in embedders.items():
            out[preset]["rounds"].append(
                {**timed_pass(emb, sentences), **latency(emb, latency_sentence(sentences)), "loadavg": loadavg()}
            )
    for preset, result in out.items():
        rounds = result["rounds"]
        result.update(
            {
                "tokens": n_tokens,
                "median_s": statistics.median(r["median_s"] for r in rounds),
                "p50_latency_ms": statistics.median(r["p50_latency_ms"] for r in rounds),
            }
        )
        result["tokens_per_s"] = round(n_tokens / result["median_s"], 1)
        print(label(preset), {k: result[k] for k in ("tokens_per_s", "p50_latency_ms")}, flush=True)
    return out


def timed_pass(emb, sentences: list[list[str]]) -> dict:
    def one_pass() -> None:
        emb.cache.clear()
        list(emb.embed_sentences(sentences))

    result = timed_passes(one_pass, 1)
    del result["peak_rss_inference_mb"]  # process-wide, with every preset loaded: not this preset's
    return result


def latency(emb, sentence: list[str]) -> dict:
    return {"p50_latency_ms": p50_latency_ms(emb, sentence)}


# ----------------------------------------------------------------------------------------------- report
def cell(value, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def senseval_best(senseval: dict | None) -> tuple[str, float] | None:
    """(best ELMo layer, its 1-NN accuracy over all words)."""
    if not senseval:
        return None
    scores = {k: v for k, v in senseval["results"]["all"].items() if k.startswith("elmo_layer")}
    best = max(scores, key=scores.get)
    return best.removeprefix("elmo_"), scores[best]


def agnews_cell(result: dict, method: str) -> str:
    r = result.get("agnews", {}).get("results", {}).get(method)
    return f"{pct(r['accuracy_mean'], r['accuracy_std'])} ({len(r['runs'])})" if r else "-"


def baseline(presets: dict) -> dict:
    """The LSTM preset (the ratios' reference), else the first."""
    return next((r for r in presets.values() if r.get("encoder") == "lstm"), next(iter(presets.values())))


def ratio(result: dict, base: dict, part: str, key: str) -> float | None:
    if part not in result or part not in base:
        return None
    return result[part][key] / base[part][key]


def report_table(presets: dict) -> str:
    base = baseline(presets)
    lines = [
        "| preset | encoder | parameters | val. ppl fwd / bwd | tokens/s | vs LSTM | latency, 10 tokens "
        "| vs LSTM | AG News, ELMo alone % | AG News, ELMo + words % | Senseval 1-NN % (best layer) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in presets.items():
        ppl, speed, best = r.get("perplexity"), r.get("speed", {}), senseval_best(r.get("senseval"))
        lines.append(
            f"| {name} | {r.get('encoder', '-')} | {cell(r.get('params', {}).get('bilm'), '{:,}')} "
            f"| {cell(ppl and (ppl['forward'], ppl['backward']), '{0[0]:.1f} / {0[1]:.1f}')} "
            f"| {cell(speed.get('tokens_per_s'), '{:,.0f}')} "
            f"| {cell(ratio(r, base, 'speed', 'tokens_per_s'), '{:.2f}x')} "
            f"| {cell(speed.get('p50_latency_ms'), '{:.1f} ms')} "
            f"| {cell(ratio(r, base, 'speed', 'p50_latency_ms'), '{:.2f}x')} "
            f"| {agnews_cell(r, 'trainable')} | {agnews_cell(r, 'trainable+words')} "
            f"| {cell(best and (pct(best[1]), best[0]), '{0[0]} ({0[1]})')} |"
        )
    return "\n".join(lines)


def senseval_table(presets: dict) -> str:
    rows = {name: r["senseval"]["results"]["all"] for name, r in presets.items() if r.get("senseval")}
    if not rows:
        return ""
    cols = sorted(
        {k for scores in rows.values() for k in scores if k.startswith("elmo_")}, key=lambda k: (k == "elmo_average", k)
    )
    lines = [
        "| preset | " + " | ".join(c.removeprefix("elmo_") for c in cols) + " | most frequent sense |",
        "|---|" + "---|" * (len(cols) + 1),
    ]
    for name, scores in rows.items():
        lines.append(
            f"| {name} | "
            + " | ".join(pct(scores[c]) if c in scores else "-" for c in cols)
            + f" | {pct(scores['most_frequent_sense'])} |"
        )
    return "\n".join(lines)


def plot(presets: dict, path: str) -> str:
    """Left: accuracy vs inference tokens/s per preset; right: validation perplexity per direction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    metrics = {
        "AG News, ELMo alone": ("o", lambda r: r.get("agnews", {}).get("results", {}).get("trainable")),
        "AG News, ELMo + words": ("s", lambda r: r.get("agnews", {}).get("results", {}).get("trainable+words")),
        "Senseval 1-NN, best layer": ("^", lambda r: r.get("senseval")),
    }
    handles = [Line2D([], [], marker=m, linestyle="", color="k", label=metric) for metric, (m, _) in metrics.items()]
    for i, (name, r) in enumerate(presets.items()):
        if "speed" not in r:
            continue
        x = r["speed"]["tokens_per_s"]
        handles.append(Line2D([], [], marker="o", linestyle="", color=f"C{i}", label=name))
        for marker, get in metrics.values():
            if not (value := get(r)):
                continue
            y, err = (
                (100 * value["accuracy_mean"], 100 * value["accuracy_std"])
                if "accuracy_mean" in value
                else (100 * senseval_best(value)[1], 0)
            )
            left.errorbar(x, y, yerr=err, fmt=marker, color=f"C{i}", capsize=3)
    left.set(
        xlabel="inference tokens/s (float32, this CPU)",
        ylabel="accuracy %",
        title="accuracy vs speed (AG News: mean ± std over seeds)",
    )
    left.legend(handles=handles, fontsize=8)
    names = [n for n, r in presets.items() if "perplexity" in r]
    x = np.arange(len(names))
    for offset, direction in ((-0.2, "forward"), (0.2, "backward")):
        right.bar(x + offset, [presets[n]["perplexity"][direction] for n in names], 0.4, label=direction)
    right.set_xticks(x, names)
    right.set(ylabel="perplexity", title="validation perplexity (Brown held-out files)")
    right.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def report(results_path: str, figure: str) -> None:
    with open(results_path) as f:
        results = json.load(f)
    presets = results["presets"]
    print("## Contextualizers: LSTM vs transformer vs gated CNN\n")
    print(report_table(presets), "\n")
    print(senseval_table(presets), "\n")
    for part, settings in results.get("settings", {}).items():
        machine = settings["meta"]["machine"]
        print(
            f"- {part}: {json.dumps({k: v for k, v in settings.items() if k != 'meta'})}; {machine['cpu']}, "
            f"{machine['cpus']} CPUs, {settings['meta']['threads']} threads, TensorFlow {machine['tensorflow']}, "
            f"{machine['date']}"
        )
    print("\nplot:", plot(presets, figure))


# ----------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=PRESETS, help="preset names or pretraining output folders")
    parser.add_argument("--part", nargs="+", default=PARTS, choices=PARTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--speed-sentences", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5, help="speed: alternating rounds (one pass per preset)")
    parser.add_argument("--batch-size", type=int, default=64, help="speed: sentences per batch")
    parser.add_argument("--threads", type=int, default=2, help="TensorFlow intra- and inter-op threads")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="smoke test: AG News training texts, senseval rows, perplexity sentences",
    )
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--report", action="store_true", help="print the tables of --out and write --figure")
    parser.add_argument("--figure", default=FIGURE)
    args = parser.parse_args(argv)
    if args.report:
        report(args.out, args.figure)
        return
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    import elmo_keras

    meta = {
        "machine": machine_info(),
        "elmo_keras": elmo_keras.__version__,
        "threads": args.threads,
        "command": "python benchmarks/study_contextualizers.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "units": "fractions (0.85 = 85%)",
    }
    for preset in args.presets:
        for key, value in describe(preset).items():
            save(args.out, ["presets", label(preset), key], value)
    valid = brown_validation()
    if "params" in args.part:
        for preset in args.presets:
            save(args.out, ["presets", label(preset), "params"], part_params(preset))
    if "perplexity" in args.part:
        sentences = valid[: args.limit] if args.limit else valid
        save(
            args.out,
            ["settings", "perplexity"],
            {"data": "Brown held-out files (every 20th, RECIPE.md)", "softmax": "full", "meta": meta},
        )
        for preset in args.presets:
            ppl = part_perplexity(preset, sentences)
            print(label(preset), "perplexity", ppl, flush=True)
            save(args.out, ["presets", label(preset), "perplexity"], ppl)
    if "speed" in args.part:
        speed = part_speed(args.presets, valid[: args.speed_sentences], args.repeats, args.batch_size)
        save(
            args.out,
            ["settings", "speed"],
            {
                "sentences": args.speed_sentences,
                "batch_size": args.batch_size,
                "repeats": args.repeats,
                "dtype": "float32",
                "latency": f"one {LATENCY_TOKENS}-token sentence, batch 1, p50 of "
                f"{LATENCY_CALLS} calls per round, median over rounds",
                "order": "presets alternating within each round",
                "meta": meta,
            },
        )
        for preset, result in speed.items():
            save(args.out, ["presets", label(preset), "speed"], result)
    if "agnews" in args.part:
        for preset in args.presets:
            part_agnews(
                args.seeds,
                args.epochs,
                args.patience,
                args.limit,
                AGNEWS_METHODS,
                preset,
                save=agnews_saver(args.out, preset, meta),
            )
    if "senseval" in args.part:
        for preset in args.presets:
            part = part_senseval(args.limit, preset, static_baselines=False)  # the layer-weighting study has them
            save(args.out, ["settings", "senseval"], {**part["settings"], "meta": meta})
            save(args.out, ["presets", label(preset), "senseval"], {"results": part["results"]})


def agnews_saver(path: str, preset: str, meta: dict):
    """``save`` callback for ``part_agnews``: called after each method with everything done so far."""

    def save_agnews(part: dict) -> None:
        save(path, ["settings", "agnews"], {**part["settings"], "meta": meta})
        save(
            path, ["presets", label(preset), "agnews"], {"results": part["results"], "diagnostics": part["diagnostics"]}
        )

    return save_agnews


if __name__ == "__main__":
    main()
