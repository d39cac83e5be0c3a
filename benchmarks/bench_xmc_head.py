"""Extreme multi-label head benchmark: train-step time and peak memory of the multi-label heads against the number
of labels.

The heads are the package's own (``elmo_keras.tasks.models._compiled_classifier`` with ``multi_label=True`` and the
metrics it compiles) over a pooled text vector of --width (1024, the original ELMo's):
  * ``dense``: dropout, a dense sigmoid layer, binary cross-entropy on padded label indices, Adam;
  * ``sampled``: ``label_sampling=--label-sampling``, ``label_dim=--label-dim``: a label table trained on each row's
    labels plus sampled negatives, with ``LazyAdam`` (``elmo_keras.tasks.sampled_labels``);
  * ``sampled_adam``: the same head with Keras' own Adam, which makes the table's sparse gradient dense.
Each head and label count runs in its own process: random vectors and --positives true labels per row, --warmup
untimed steps, then the median of --steps ``train_on_batch`` calls and of as many ``predict_on_batch`` calls (every
label's score); peak RSS from getrusage. A configuration whose estimated memory (the trained weights, their
gradients and Adam's two moments: 16 bytes per dense parameter, 12 per label-table parameter) exceeds
--memory-share of the memory available is not started, and the results say so.

    python benchmarks/bench_xmc_head.py                      # every head at 10k, 100k and 1M labels
    python benchmarks/bench_xmc_head.py --heads sampled --labels 10000 100000 --steps 5
Writes benchmarks/results/bench_xmc_head.json (machine, versions, settings, every run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402

from elmo_keras.utils.files import write_json  # noqa: E402
from elmo_keras.utils.host_memory import available_memory  # noqa: E402

HEADS = ("dense", "sampled", "sampled_adam")
#: bytes per head parameter while training with Adam: the weight, its gradient and two moments, float32
TRAIN_BYTES_PER_PARAMETER = 16
#: bytes per label-table parameter of the sampled head: the weight and two moments (its gradient is a few rows)
TABLE_BYTES_PER_PARAMETER = 12


def parameters_and_bytes(head: str, labels: int, args: argparse.Namespace) -> tuple[int, int]:
    """The head's parameter count and its estimated training memory (bytes)."""
    if head == "dense":
        parameters = labels * (args.width + 1)
        return parameters, parameters * TRAIN_BYTES_PER_PARAMETER
    table = labels * (args.label_dim + 1)
    projection = (args.width + 1) * args.label_dim
    return table + projection, table * TABLE_BYTES_PER_PARAMETER + projection * TRAIN_BYTES_PER_PARAMETER


def child(head: str, labels: int, args: argparse.Namespace) -> dict:
    """In a fresh process: build the head, time its train and predict steps, report peak RSS (MB)."""
    import keras
    import numpy as np

    from elmo_keras.tasks import models
    from elmo_keras.tasks.metrics import pad_label_indices

    width, batch_size, positives, warmup, steps = args.width, args.batch_size, args.positives, args.warmup, args.steps
    start = time.perf_counter()
    doc = keras.Input(shape=(width,), name="doc")
    sampling = {} if head == "dense" else {"label_sampling": args.label_sampling, "label_dim": args.label_dim}
    model = models._compiled_classifier(keras.Model, doc, doc, labels, True, 0.3, 1e-3, 5, "xmc_head", **sampling)
    if head == "sampled_adam":
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        model.compile(**{**compiled, "optimizer": keras.optimizers.Adam(1e-3)})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch_size, width)).astype("float32")
    y = pad_label_indices(rng.integers(0, labels, (batch_size, positives)).tolist(), labels)
    train, predict = [], []
    for step in range(warmup + steps):
        t = time.perf_counter()
        model.train_on_batch(x, y)
        train.append(time.perf_counter() - t)
        t = time.perf_counter()
        model.predict_on_batch(x)
        predict.append(time.perf_counter() - t)
        if step == 0:
            first = time.perf_counter() - start
    return {
        "head": head,
        "labels": labels,
        "parameters": int(model.count_params()),
        "metrics": [m["config"]["name"] for m in model.get_compile_config()["metrics"]],
        "train_step_s": statistics.median(train[warmup:]),
        "predict_step_s": statistics.median(predict[warmup:]),
        "train_steps_s": train,
        "first_step_s": first,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run(head: str, labels: int, args: argparse.Namespace) -> dict:
    """One configuration in its own process, or why it was not started."""
    parameters, needed = parameters_and_bytes(head, labels, args)
    available = available_memory()
    if needed > args.memory_share * available:
        return {
            "head": head,
            "labels": labels,
            "parameters": parameters,
            "skipped": f"needs ~{needed / 2**30:.1f} GiB for weights, gradients and Adam alone; "
            f"{available / 2**30:.1f} GiB available (limit {args.memory_share:.0%})",
        }
    argv = [sys.executable, __file__, "--child", head, str(labels)]
    for name in ("width", "batch_size", "positives", "warmup", "steps", "label_sampling", "label_dim"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    print(f"{head}, {labels} labels ...", flush=True)
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if done.returncode != 0:
        failed = f"exit {done.returncode}: {done.stderr[-500:]}"
        return {"head": head, "labels": labels, "parameters": parameters, "failed": failed}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{head}, {labels} labels: train step {result['train_step_s'] * 1000:.1f} ms, predict "
        f"{result['predict_step_s'] * 1000:.1f} ms, peak RSS {result['peak_rss_mb']:.0f} MB",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", nargs="+", choices=HEADS, default=list(HEADS))
    parser.add_argument("--labels", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--width", type=int, default=1024, help="the pooled text vector's width")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--positives", type=int, default=5, help="true labels per row")
    parser.add_argument("--label-sampling", type=int, default=1024, help="the sampled heads' negatives per batch")
    parser.add_argument("--label-dim", type=int, default=256, help="the sampled heads' label table width")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument(
        "--memory-share", type=float, default=0.5, help="start a run only if its estimate fits this share of memory"
    )
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bench_xmc_head.json"))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args)))
        return
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "child")}
    load = os.getloadavg()
    runs = [run(head, labels, args) for head in args.heads for labels in args.labels]
    write_json(
        args.out,
        {"machine": machine_info(), "load_average_before": load, "settings": settings, "runs": runs},
    )
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
