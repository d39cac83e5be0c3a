"""Embedding speed benchmark: tokens/s, sentences/s, p50 single-sentence latency, peak RSS.

Generates a random weight file in the released layout for the chosen size (fixed seed) and a deterministic
sentence set (Zipf-distributed pseudo-words, 5-40 tokens), then runs each configuration in its own
subprocess (so peak RSS is per configuration) and prints one table; writes benchmarks/results/*.json
with machine, versions and settings. If ``allennlp`` is importable it runs beside ours on the same file.

    python benchmarks/bench_embed.py --size original --sentences 2000 --batch-size 64
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402


def make_sentences(n: int, seed: int = 0) -> list[list[str]]:
    """Deterministic sentences of 5-40 pseudo-words with a Zipfian word distribution (vocabulary 20k)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    lengths = rng.integers(2, 11, size=20000)
    vocab = ["".join(rng.choice(letters, size=k)) for k in lengths]
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks
    p /= p.sum()
    return [[vocab[i] for i in rng.choice(len(vocab), size=rng.integers(5, 41), p=p)] for _ in range(n)]


def write_model(size: str, folder: str) -> tuple[str, str]:
    from elmo_keras.options import RELEASED_OPTIONS, load_options
    from elmo_keras.weights import random_weights, write_weights_hdf5

    options = RELEASED_OPTIONS[size]
    opts, weights = os.path.join(folder, "options.json"), os.path.join(folder, "weights.hdf5")
    with open(opts, "w") as f:
        json.dump(options, f)
    write_weights_hdf5(random_weights(load_options(options), seed=0, scale=0.05), weights)
    return opts, weights


def run_ours(args) -> dict:
    """One configuration in this process; prints a JSON line."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from elmo_keras.embed import ElmoEmbedder

    sentences = make_sentences(args.sentences)
    n_tokens = sum(len(s) for s in sentences)
    emb = ElmoEmbedder(args.options, args.weights, dtype=args.dtype, cache_new_tokens=not args.no_cache,
                       batch_size=args.batch_size, chunk_size=args.sentences if args.sort else args.batch_size,
                       jit_compile=args.jit)
    if not args.sort:
        emb._embed_chunk = lambda chunk, bs: emb.embed_batch(chunk)  # input order, no sorting
    warmup = sentences if args.jit else sentences[: args.batch_size * 2]  # XLA: compile every bucket first
    list(emb.embed_sentences(warmup))  # warm up (tracing)
    emb.cache.clear()
    start = time.perf_counter()
    outputs = list(emb.embed_sentences(sentences))
    seconds = time.perf_counter() - start
    single = sentences[0][:10]
    latencies = []
    for _ in range(args.latency_runs):
        emb.cache.clear()
        t0 = time.perf_counter()
        emb.embed_sentence(single)
        latencies.append(time.perf_counter() - t0)
    top = np.concatenate([o[-1] for o in outputs[:200]])
    if args.save_top:
        np.save(args.save_top, top)
    import resource

    return {"tokens_per_s": n_tokens / seconds, "sentences_per_s": len(sentences) / seconds,
            "p50_latency_ms": 1000 * statistics.median(latencies),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "seconds": seconds,
            "tokens": n_tokens}


def run_allennlp(args) -> dict:
    import torch
    from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids

    torch.set_num_threads(args.threads)
    sentences = make_sentences(args.sentences)
    n_tokens = sum(len(s) for s in sentences)
    model = _ElmoBiLm(args.options, args.weights)
    model.eval()

    def run(batch):
        with torch.no_grad():
            return model(batch_to_ids(batch))

    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i])) if args.sort else range(len(sentences))
    ordered = [sentences[i] for i in order]
    run(ordered[: args.batch_size])
    start = time.perf_counter()
    for s in range(0, len(ordered), args.batch_size):
        run(ordered[s:s + args.batch_size])
    seconds = time.perf_counter() - start
    latencies = []
    for _ in range(args.latency_runs):
        t0 = time.perf_counter()
        run([sentences[0][:10]])
        latencies.append(time.perf_counter() - t0)
    import resource

    import allennlp.version

    return {"tokens_per_s": n_tokens / seconds, "sentences_per_s": len(sentences) / seconds,
            "p50_latency_ms": 1000 * statistics.median(latencies),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "seconds": seconds,
            "tokens": n_tokens, "versions": {"torch": torch.__version__, "allennlp": allennlp.version.VERSION}}


def child(config: dict, common: list[str]) -> dict:
    cmd = [config.get("python", sys.executable), os.path.abspath(__file__), "--child", config["impl"],
           "--dtype", config["dtype"], *common, *config.get("extra", [])]
    # USE_TF=0: transformers (imported by allennlp) must not load TensorFlow next to torch
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "USE_TF": "0"})
    if proc.returncode != 0:
        raise RuntimeError(f"{config} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def cosine_stats(a_path: str, b_path: str) -> dict:
    a, b = np.load(a_path), np.load(b_path)
    cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-12)
    return {"min": float(cos.min()), "mean": float(cos.mean()), "p01": float(np.quantile(cos, 0.01))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="original", choices=["small", "medium", "original"])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--latency-runs", type=int, default=20)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--child", choices=["ours", "allennlp"])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--options")
    parser.add_argument("--weights")
    parser.add_argument("--sort", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--jit", action="store_true", help="XLA-compiled LSTMs")
    parser.add_argument("--save-top")
    parser.add_argument("--unsorted-too", action="store_true", help="also measure input-order batches")
    parser.add_argument("--allennlp-python", help="a Python with allennlp installed (another venv), to run it "
                                                  "side by side; default: this one if allennlp imports")
    args = parser.parse_args()
    if args.child:
        print(json.dumps((run_ours if args.child == "ours" else run_allennlp)(args)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        opts, weights = write_model(args.size, tmp)
        common = ["--options", opts, "--weights", weights, "--sentences", str(args.sentences),
                  "--batch-size", str(args.batch_size), "--threads", str(args.threads),
                  "--latency-runs", str(args.latency_runs)]
        configs = []
        for dtype in args.dtypes.split(","):
            configs.append({"impl": "ours", "dtype": dtype, "extra": ["--save-top", os.path.join(tmp, dtype)]})
        configs.append({"impl": "ours", "dtype": "float32", "extra": ["--jit"], "label": "XLA"})
        configs.append({"impl": "ours", "dtype": "float32", "extra": ["--no-cache"], "label": "no token cache"})
        if args.unsorted_too:
            configs.append({"impl": "ours", "dtype": "float32", "extra": ["--no-sort"], "label": "unsorted"})
        allennlp_python = args.allennlp_python or (sys.executable if _importable("allennlp") else None)
        if allennlp_python:
            configs.append({"impl": "allennlp", "dtype": "float32", "python": allennlp_python})
            configs.append({"impl": "allennlp", "dtype": "float32", "extra": ["--no-sort"], "label": "unsorted",
                            "python": allennlp_python})
        rows = []
        for config in configs:
            result = child(config, common)
            rows.append({**{k: v for k, v in config.items() if k not in ("extra", "python")}, **result})
        agreement = None
        if {"float32", "bfloat16"} <= set(args.dtypes.split(",")):
            agreement = cosine_stats(os.path.join(tmp, "float32.npy"), os.path.join(tmp, "bfloat16.npy"))

    base = next((r["tokens_per_s"] for r in rows if r["impl"] == "allennlp" and "label" not in r), None)
    print(f"\nsize={args.size} sentences={args.sentences} batch={args.batch_size} threads={args.threads}")
    print(f"{'implementation':<34}{'dtype':<10}{'tokens/s':>10}{'sent/s':>9}{'p50 ms':>9}{'RSS MB':>9}"
          f"{'vs AllenNLP':>13}")
    for r in rows:
        name = r["impl"] + (f" ({r['label']})" if "label" in r else "")
        ratio = f"{r['tokens_per_s'] / base:.2f}x" if base else "n/a"
        print(f"{name:<34}{r['dtype']:<10}{r['tokens_per_s']:>10.0f}{r['sentences_per_s']:>9.1f}"
              f"{r['p50_latency_ms']:>9.1f}{r['peak_rss_mb']:>9.0f}{ratio:>13}")
    if agreement:
        print(f"bfloat16 vs float32 top-layer cosine per token (200 sentences): min {agreement['min']:.4f}, "
              f"1st percentile {agreement['p01']:.4f}, mean {agreement['mean']:.5f}")
    result = {
        "benchmark": "bench_embed", "size": args.size, "rows": rows, "bf16_cosine": agreement,
        "settings": {"sentences": args.sentences, "batch_size": args.batch_size, "threads": args.threads,
                     "sorted": True, "latency": "single 10-token sentence, median of runs, cache cleared",
                     "token_cache": "built while embedding (cleared before the timed run)",
                     "xla": "the XLA row compiles every shape bucket before the timed run"},
        "machine": machine_info(),
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"bench_embed_{args.size}.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
