"""Corpus embedding benchmark: peak memory against input size, and pipeline throughput against the bare embedder.

memory:     `elmo-keras embed` on inputs of 10,000 and 1,000,000 lines (Brown sentences, cycled, cut to at most
            --max-tokens tokens so the million lines fit in minutes), each run in its own process; peak RSS from
            getrusage. The streaming claim: the million-line run stays within +300 MB of the 10,000-line one.
throughput: the same sentences (Brown, --sentences lines: 10,000 and 40,000) through
            `ElmoEmbedder.embed_sentences` (results discarded) and through `embed_file` (scan + embed + write +
            assembly), alternated in one process, medians of --repeats; before each run the previous run's
            output is deleted and the file systems synced (untimed).
            The claim: embed_file keeps >= 90% of embed_sentences' tokens/s.

    python benchmarks/bench_corpus.py --part memory throughput
Writes benchmarks/results/bench_corpus.json (machine, versions, settings, every run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from elmo_keras.files import write_json  # noqa: E402
from machine import machine_info  # noqa: E402


def write_corpus(path: str, lines: int, max_tokens: int | None) -> int:
    """Brown sentences cycled to ``lines`` lines (cut to ``max_tokens``); returns the token count."""
    from elmo_keras.datasets import load_brown

    sentences, _ = load_brown()
    tokens = 0
    with open(path, "w", encoding="utf-8") as f:
        for sentence in itertools.islice(itertools.cycle(sentences), lines):
            sentence = sentence[:max_tokens] if max_tokens else sentence
            tokens += len(sentence)
            f.write(" ".join(sentence) + "\n")
    return tokens


def run_cli(argv: list[str]) -> dict:
    """Child process: run `elmo-keras embed` and report wall time and peak RSS (MB)."""
    from elmo_keras.cli import main

    start = time.perf_counter()
    code = main(argv)
    return {
        "exit": code,
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def memory(args, folder: str) -> list[dict]:
    rows, token_counts = [], {}
    runs = [(10_000, "shards"), (args.max_lines, "shards")] + [(n, "hdf5") for n in args.hdf5_lines]
    for lines, fmt in runs:
        text = os.path.join(folder, f"in-{lines}.txt")
        if lines not in token_counts:
            token_counts[lines] = write_corpus(text, lines, args.max_tokens)
        tokens = token_counts[lines]
        argv = [
            "embed",
            text,
            os.path.join(folder, f"out-{lines}.{fmt}"),
            "--preset",
            args.preset,
            "--layers",
            "top",
            "--dtype",
            "float16",
            "--format",
            fmt,
            "--overwrite",
        ]
        child = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(argv)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        result = json.loads(child.stdout.strip().splitlines()[-1])
        row = {"lines": lines, "tokens": tokens, "format": fmt, **result, "tokens_per_s": tokens / result["seconds"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def settle(folder: str) -> None:
    """Delete the previous repeat's outputs (``t.*`` in ``folder``) and flush the file systems: neither that
    deletion nor other runs' pending writes are then timed."""
    for name in os.listdir(folder):
        if name.startswith("t."):
            path = os.path.join(folder, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.sync()


def throughput(args, folder: str) -> dict:
    import elmo_keras as ek

    embedder = ek.ElmoEmbedder.from_preset(args.preset, **({"dtype": args.model_dtype} if args.model_dtype else {}))
    sizes = []
    for count in args.sentences:
        text = os.path.join(folder, f"throughput-{count}.txt")
        tokens = write_corpus(text, count, None)
        with open(text, encoding="utf-8") as f:
            token_lists = [ek.tokenize(line) for line in f]
        embedder.add_to_cache(token for line in token_lists for token in line)  # every run finds all words cached
        for _ in embedder.embed_sentences(token_lists[:2000]):  # warm up: tracing
            pass

        def bare() -> None:
            for _ in embedder.embed_sentences(token_lists):
                pass

        def pipeline(fmt: str) -> Callable[[], None]:
            out = os.path.join(folder, f"t.{fmt}")
            return lambda: ek.embed_file(embedder, text, out, fmt=fmt, progress=False)

        runs: dict[str, list[float]] = {"embed_sentences": [], "embed_file shards": [], "embed_file hdf5": []}
        for _ in range(args.repeats):
            for name, fn in [
                ("embed_sentences", bare),
                ("embed_file shards", pipeline("shards")),
                ("embed_file hdf5", pipeline("hdf5")),
            ]:
                settle(folder)
                start = time.perf_counter()
                fn()
                runs[name].append(tokens / (time.perf_counter() - start))
                print(f"{count} lines, {name}: {runs[name][-1]:.0f} tokens/s", flush=True)
        base = statistics.median(runs["embed_sentences"])
        sizes.append(
            {
                "sentences": count,
                "tokens": tokens,
                "runs": [
                    {
                        "name": name,
                        "tokens_per_s": values,
                        "median": statistics.median(values),
                        "ratio_to_embed_sentences": statistics.median(values) / base,
                    }
                    for name, values in runs.items()
                ],
            }
        )
    settings = {
        "preset": args.preset,
        "model_dtype": embedder.bilm.dtype_policy.name,
        "repeats": args.repeats,
        "layers": "all",
        "order": "alternating embed_sentences, shards, hdf5 per repeat",
    }
    return {"settings": settings, "sizes": sizes, "machine": machine_info()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", choices=("memory", "throughput"), default=["memory", "throughput"])
    parser.add_argument("--preset", default="brown-small")
    parser.add_argument("--max-lines", type=int, default=1_000_000)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--hdf5-lines", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--sentences", type=int, nargs="+", default=[10_000, 40_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model-dtype", help="the embedder's dtype for the throughput part (default: its own)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_cli(json.loads(args.child))))
        return
    out = os.path.join(HERE, "results", "bench_corpus.json")
    results = json.load(open(out)) if os.path.exists(out) else {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
        if "memory" in args.part:
            rows = memory(args, folder)
            small = next(r for r in rows if r["lines"] == 10_000 and r["format"] == "shards")
            big = next(r for r in rows if r["lines"] == args.max_lines)
            results["memory"] = {
                "settings": {
                    "preset": args.preset,
                    "layers": "top",
                    "dtype": "float16",
                    "max_tokens_per_line": args.max_tokens,
                },
                "runs": rows,
                "shards_growth_mb": big["peak_rss_mb"] - small["peak_rss_mb"],
            }
            print(
                f"peak RSS: {small['peak_rss_mb']:.0f} MB at 10,000 lines, {big['peak_rss_mb']:.0f} MB at "
                f"{args.max_lines:,} lines (+{big['peak_rss_mb'] - small['peak_rss_mb']:.0f} MB)"
            )
        if "throughput" in args.part:
            measured = throughput(args, folder)
            by_dtype = {k: v for k, v in results.get("throughput", {}).items() if "sizes" in v}  # one per dtype
            results["throughput"] = {**by_dtype, measured["settings"]["model_dtype"]: measured}
            for size in measured["sizes"]:
                for row in size["runs"]:
                    print(
                        f"{size['sentences']:>7} lines, {row['name']:>18}: median {row['median']:.0f} tokens/s = "
                        f"{row['ratio_to_embed_sentences']:.3f} x embed_sentences"
                    )
    results["machine"] = machine_info()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    write_json(out, results)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
