"""Pretraining throughput (tokens/s) of BiLanguageModel.fit for the brown-small preset size and the original
ELMo size, in float32 and mixed_bfloat16. Synthetic sentences (20 tokens) over a synthetic vocabulary.

    python benchmarks/pretrain_throughput.py [--steps 200] [--sizes preset original] [--policies float32 mixed_bfloat16]

Each configuration runs in its own process (the dtype policy is global); the median tokens/s over timed
windows of 10 steps (after 10 warm-up steps) is written to benchmarks/results/pretrain_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402

RESULTS = os.path.join(HERE, "results", "pretrain_throughput.json")
# (vocabulary size, sampled-softmax samples, batch size): the preset's settings; the original is bilm-tf's
# setup scaled to fit 2 cores (bilm-tf: 793k words, 8192 samples, batch 128 per GPU).
SETTINGS = {"preset": (12000, 1024, 64), "original": (50000, 8192, 16)}


def run_one(size: str, policy: str, steps: int) -> dict:
    import keras
    import numpy as np

    import elmo_keras as ek
    from elmo_keras.lm import BiLanguageModel, Vocabulary, sentences_dataset

    keras.mixed_precision.set_global_policy(policy)
    n_vocab, n_sampled, batch = SETTINGS[size]
    options = (
        ek.load_options(ek.presets.preset_files("brown-small")["options"])
        if size == "preset"
        else ek.RELEASED_OPTIONS["original"]
    )
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", *(f"w{i}" for i in range(n_vocab - 3))])
    rng = np.random.default_rng(0)
    sentences = [" ".join(f"w{i}" for i in rng.zipf(1.3, 20) % (n_vocab - 3)) for _ in range(batch * 10)]
    data = sentences_dataset(sentences, vocab, batch).cache().repeat()
    model = BiLanguageModel(options, vocab, n_sampled=n_sampled, dropout=0.1)
    model.build()
    model.compile(optimizer=keras.optimizers.Adam(1e-3, global_clipnorm=10.0))
    times, tokens = [], []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            if step >= 10 and step % 10 == 0:
                times.append(time.perf_counter())
                tokens.append(float(logs["tokens"]))

    model.fit(data, steps_per_epoch=steps + 11, epochs=1, verbose=0, callbacks=[Timer()])
    rates = [(k1 - k0) / (t1 - t0) for (t0, k0), (t1, k1) in zip(zip(times, tokens), zip(times[1:], tokens[1:]))]
    return {
        "size": size,
        "policy": policy,
        "steps_timed": steps,
        "batch_size": batch,
        "vocab": n_vocab,
        "n_sampled": n_sampled,
        "tokens_per_second_median": statistics.median(rates),
        "tokens_per_second_windows": rates,
        "params": int(sum(np.prod(v.shape) for v in model.weights)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sizes", nargs="+", default=["preset", "original"], choices=sorted(SETTINGS))
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--one", nargs=2, metavar=("SIZE", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one, args.steps)))
        return
    machine = machine_info()
    results = []
    for size in args.sizes:
        for policy in args.policies:
            run = subprocess.run(
                [sys.executable, __file__, "--one", size, policy, "--steps", str(args.steps)],
                capture_output=True,
                text=True,
                env={
                    **os.environ,
                    "TF_CPP_MIN_LOG_LEVEL": "3",
                    "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]),
                },
            )
            if run.returncode:
                raise RuntimeError(f"{size}/{policy} failed:\n{run.stderr[-3000:]}")
            results.append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(f"{size:9s} {policy:15s} {results[-1]['tokens_per_second_median']:8.0f} tokens/s (median)")
            _write(machine, results)  # after every configuration, so a partial run keeps what it measured


def _write(machine: dict, results: list[dict]) -> None:
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w", encoding="utf-8") as f:
        json.dump(
            {
                "machine": machine,
                "settings": {k: dict(zip(("vocab", "n_sampled", "batch_size"), v)) for k, v in SETTINGS.items()},
                "note": "tokens = predicted tokens per direction; median over 10-step windows",
                "results": results,
            },
            f,
            indent=2,
        )


if __name__ == "__main__":
    main()
