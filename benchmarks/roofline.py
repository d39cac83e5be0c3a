"""Upper bound on ELMo embedding speed on this machine: time the matrix products the biLM must do.

Per token, each LSTM layer of each direction multiplies its input by the gate weights [P, 4C] (one big
matmul for all steps), its previous output by the recurrent weights [P, 4C] (one [B, P] x [P, 4C] matmul per
step) and its cell by the projection [C, P]. Timing exactly those shapes with TensorFlow gives the best
tokens/s any implementation built on these matmuls can reach here (elementwise gate math and the char CNN are
left out, so the real bound is lower). Prints the bound for float32 and bfloat16, the GEMM rate of a large
square matmul, and the same bound for the latency of one 10-token sentence (batch 1: each step streams all
LSTM weights from memory); writes benchmarks/results/roofline_SIZE.json.

    python benchmarks/roofline.py --size original --batch-size 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine_info  # noqa: E402


def time_matmul(tf, m: int, k: int, n: int, dtype, repeats: int) -> float:
    """Median seconds of one [m, k] x [k, n] matmul (after a warm-up)."""
    a = tf.constant(np.random.default_rng(0).normal(size=(m, k)), dtype=dtype)
    b = tf.constant(np.random.default_rng(1).normal(size=(k, n)), dtype=dtype)
    f = tf.function(lambda x, y: tf.matmul(x, y))
    f(a, b).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(a, b).numpy()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="original", choices=["small", "medium", "original"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=24, help="mean sentence length (+2 boundary tokens)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from elmo_keras.options import RELEASED_OPTIONS

    lstm = RELEASED_OPTIONS[args.size]["lstm"]
    cell, proj, layers = lstm["dim"], lstm["projection_dim"], lstm["n_layers"]
    b, t = args.batch_size, args.steps
    shapes = {
        "input_to_gates": (b * t, proj, 4 * cell),
        "recurrent": (b, proj, 4 * cell),
        "projection": (b, cell, proj),
    }
    flops_per_token = 2 * layers * sum(2 * k * n for _, k, n in shapes.values())
    rows = {}
    for name, dtype in (("float32", tf.float32), ("bfloat16", tf.bfloat16)):
        seconds = {op: time_matmul(tf, *shape, dtype, args.repeats) for op, shape in shapes.items()}
        per_token = (
            2 * layers * (seconds["input_to_gates"] / (b * t) + (seconds["recurrent"] + seconds["projection"]) / b)
        )
        square = time_matmul(tf, 2048, 2048, 2048, dtype, max(5, args.repeats // 5))
        # one 10-token sentence (12 steps with <S> </S>): every step reads all recurrent + projection weights
        single = {
            op: time_matmul(tf, 1 if op != "input_to_gates" else 12, k, n, dtype, args.repeats)
            for op, (_, k, n) in shapes.items()
        }
        latency = 2 * layers * (single["input_to_gates"] + 12 * (single["recurrent"] + single["projection"]))
        rows[name] = {
            "tokens_per_s_bound": 1 / per_token,
            "gflops_in_bilm_shapes": flops_per_token * 1e-9 / per_token,
            "gflops_square_2048": 2 * 2048**3 / square * 1e-9,
            "op_gflops": {op: 2 * np.prod(shapes[op]) / s * 1e-9 for op, s in seconds.items()},
            "latency_bound_ms_10_tokens": 1000 * latency,
        }
    print(
        f"size={args.size} batch={b} steps={t} threads={args.threads}: "
        f"{flops_per_token / 1e6:.0f} MFLOP per token in the LSTM matmuls"
    )
    for name, row in rows.items():
        ops = ", ".join(f"{op} {g:.0f}" for op, g in row["op_gflops"].items())
        print(
            f"{name:<9} bound {row['tokens_per_s_bound']:7.0f} tokens/s | GFLOP/s: bilm shapes "
            f"{row['gflops_in_bilm_shapes']:.0f} ({ops}), square 2048 {row['gflops_square_2048']:.0f}; "
            f"10-token latency bound {row['latency_bound_ms_10_tokens']:.0f} ms"
        )
    result = {
        "benchmark": "roofline",
        "size": args.size,
        "rows": rows,
        "flops_per_token": flops_per_token,
        "settings": {
            "batch_size": b,
            "steps": t,
            "threads": args.threads,
            "repeats": args.repeats,
            "statistic": "median",
        },
        "machine": machine_info(),
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"roofline_{args.size}.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
