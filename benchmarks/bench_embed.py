"""Embedding speed side by side with AllenNLP: tokens/s, single-sentence latency, CPU use, peak RSS.

Runs the AllenNLP reference rig's benchmark (``RIG_DIR/bench_allennlp.py``, its own venv, its random weights in
the released layout, its sentences) and ours on the same files, each in a fresh subprocess, alternating
(AllenNLP, ours, AllenNLP, ours, ...), and writes one results JSON with the machine, the CPU flags, the load,
both implementations' figures, the ratios of medians, a stage profile of ours and the output check:

    python benchmarks/bench_embed.py --compare-allennlp /work/rig --size original
    python benchmarks/bench_embed.py --compare-allennlp /work/rig --size small --backend tensorflow jax torch
    python benchmarks/bench_embed.py --table benchmarks/results/bench_embed_original.json ...   # README table

Protocol (the rig's): the first ``--sentences`` sentences of ``bench_sentences.txt``, sorted by length, batch
64, 2 threads, one warm-up batch, ``--repeats`` timed passes (median) over the same sorted batches as the rig,
each batch's output dropped as the rig drops AllenNLP's (``embed_batch``); our token cache is emptied before
every pass. Peak RSS: the process's peak through loading, warm-up and the timed passes, both sides. One more
pass through ``embed_sentences`` on the unsorted sentences (it returns, so holds, all 600 outputs) is reported
apart (``embed_sentences`` in each run). Latency: one 10-token sentence, batch size 1, p50 of 50 calls after one
warm-up call (cache emptied before each call).

``--backend``: ours on each Keras backend named (``KERAS_BACKEND`` of the child process), float32, in the same
alternating rounds, on the same weights and sentences; the TensorFlow-only stage profile is left out of the others.
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

LATENCY_TOKENS, LATENCY_CALLS, N_DUMP = 10, 50, 20


# -- measurements shared by the child processes ------------------------------------------------------------
def read_sentences(path: str, n: int) -> list[list[str]]:
    with open(path) as f:
        return [line.split() for line in f if line.strip()][:n]


def latency_sentence(sentences: list[list[str]]) -> list[str]:
    """The first sentence with at least ``LATENCY_TOKENS`` tokens, cut to that length."""
    return next(s for s in sentences if len(s) >= LATENCY_TOKENS)[:LATENCY_TOKENS]


def p50_latency_ms(emb, sentence: list[str]) -> float:
    """p50 (ms) of ``LATENCY_CALLS`` calls of ``emb.embed_sentence(sentence)``, the token cache emptied before each."""
    times = []
    for _ in range(LATENCY_CALLS):
        emb.cache.clear()
        start = time.perf_counter()
        emb.embed_sentence(sentence)
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 2)


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux), so that the inference-only peak can be read afterwards."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def vmhwm_mb() -> float | None:
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")), None)


def timed_passes(run_pass, repeats: int) -> dict:
    """``repeats`` timed calls of ``run_pass``: times, CPU use (user + sys / wall), inference-only peak RSS."""
    hwm = reset_peak_rss()
    cpu0, times = os.times(), []
    for _ in range(repeats):
        start = time.perf_counter()
        run_pass()
        times.append(time.perf_counter() - start)
    cpu1 = os.times()
    return {
        "pass_s": [round(t, 3) for t in times],
        "median_s": statistics.median(times),
        "cpu_per_wall": round((cpu1.user - cpu0.user + cpu1.system - cpu0.system) / sum(times), 2),
        "peak_rss_inference_mb": round(vmhwm_mb(), 1) if hwm else None,
    }


# -- our side (child process) --------------------------------------------------------------------------------
class StageTimer:
    """Wraps an ElmoEmbedder's stages (char CNN, BiLM, copy to NumPy) with wall-clock timers."""

    def __init__(self, emb):
        import tensorflow as tf

        self.seconds = {"char_cnn": 0.0, "bilm_lstm": 0.0, "copy_to_numpy": 0.0}
        self.token_vectors, self.context = token_vectors, context = emb._token_vectors, emb._context

        def timed_token_vectors(words):
            start = time.perf_counter()
            out = token_vectors(words)
            self.seconds["char_cnn"] += time.perf_counter() - start
            return out

        def timed_context(emb_, mask):
            start = time.perf_counter()
            layers = context(emb_, mask)
            self.seconds["bilm_lstm"] += time.perf_counter() - start
            start = time.perf_counter()
            arrays = [layer.numpy() for layer in layers]
            self.seconds["copy_to_numpy"] += time.perf_counter() - start
            return [tf.constant(a) for a in arrays]

        emb._token_vectors, emb._context = timed_token_vectors, timed_context


def lstm_step_profile(bilm, batch: int, steps: int = 20) -> dict:
    """ms per time step (both directions, one layer) of the per-step pieces, timed in isolation with the
    model's weights: recurrent + projection GEMMs, the element-wise cell math, and the input GEMM per step."""
    import tensorflow as tf

    lstm = bilm.lstm
    weights = [lstm._direction_weights(0, d) for d in (0, 1)]
    dtype = lstm.compute_dtype
    h = tf.zeros((batch, lstm.projection_dim), dtype)
    gates = tf.random.normal((batch, 4 * lstm.dim))
    c = tf.zeros((batch, lstm.dim))
    x = tf.zeros((steps * batch, lstm.projection_dim), dtype)

    def loop(step):
        @tf.function
        def run():
            acc = tf.zeros(())
            for _ in tf.range(steps):
                acc = acc + tf.cast(tf.reduce_sum(step()[:1, :1]), tf.float32)
            return acc

        return run

    def gemms():
        return tf.add_n(
            [
                tf.matmul(h, w_h)[:, :1] + tf.matmul(tf.cast(gates[:, : lstm.dim], dtype), w_p)[:, :1]
                for _, w_h, _, w_p in weights
            ]
        )

    def cell_math():
        i, j, f, o = tf.split(gates, 4, axis=-1)
        new_c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        return tf.sigmoid(o) * tf.tanh(new_c) * 2  # twice: one per direction

    pieces = {
        "recurrent_and_projection_gemms": loop(gemms),
        "cell_elementwise": loop(cell_math),
        "input_gemm": tf.function(lambda: tf.add_n([tf.reduce_sum(tf.matmul(x, w_x)[:1]) for w_x, _, _, _ in weights])),
    }
    out = {}
    for name, fn in pieces.items():
        fn()
        start = time.perf_counter()
        for _ in range(3):
            fn()
        out[name] = round((time.perf_counter() - start) / 3 / steps * 1000, 2)
    return out


def run_ours(args) -> dict:
    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads or args.threads)
    on_tensorflow = keras.backend.backend() == "tensorflow"
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(args.threads)
    from elmo_keras.embed import ElmoEmbedder

    start = time.perf_counter()
    emb = ElmoEmbedder(
        args.options,
        args.weights,
        dtype=args.dtype,
        batch_size=args.batch_size,
        step_layout=args.step_layout,
        chunk_size=len(read_sentences(args.sentences_file, args.sentences)),
    )
    load_s = time.perf_counter() - start
    sentences = read_sentences(args.sentences_file, args.sentences)
    n_tokens = sum(map(len, sentences))
    ordered = sorted(sentences, key=len)
    batches = [ordered[i : i + args.batch_size] for i in range(0, len(ordered), args.batch_size)]
    emb.embed_batch(batches[0])  # warm-up batch (tracing)
    load_peak_mb = vmhwm_mb()

    def one_pass():  # the rig's loop: the same sorted batches, each batch's output dropped
        emb.cache.clear()
        for batch in batches:
            emb.embed_batch(batch)

    result = timed_passes(one_pass, args.repeats)
    stages = None
    if on_tensorflow:  # the stage profile wraps TensorFlow functions
        timer = StageTimer(emb)
        start = time.perf_counter()
        one_pass()  # one more pass, its stages timed (the rest: its own wall time less theirs)
        staged_s = time.perf_counter() - start
        stages = {name: round(s, 3) for name, s in timer.seconds.items()}
        stages["host_prep_and_rest"] = round(staged_s - sum(timer.seconds.values()), 3)
        emb._token_vectors, emb._context = timer.token_vectors, timer.context

    def api_pass():  # the API on the unsorted input: sorts in chunks, returns (so holds) every output in order
        emb.cache.clear()
        return list(emb.embed_sentences(sentences))

    api = timed_passes(api_pass, 1)
    single = latency_sentence(sentences)
    emb.embed_sentence(single)
    if args.dump_npy:
        np.save(args.dump_npy, top_layer_padded(emb, sentences[:N_DUMP]))
    return {
        "impl": "elmo_keras",
        "backend": keras.backend.backend(),
        "jit_compile": emb.jit_compile,
        "dtype": emb.bilm.dtype_policy.name,
        "step_layout": emb.step_layout,
        "load_s": round(load_s, 2),
        **result,
        "tokens": n_tokens,
        "tokens_per_s": round(n_tokens / result["median_s"], 1),
        "p50_latency_ms": p50_latency_ms(emb, single),
        "peak_rss_mb": round(max(load_peak_mb, result["peak_rss_inference_mb"] or 0), 1),
        "embed_sentences": {
            "tokens_per_s": round(n_tokens / api["median_s"], 1),
            "peak_rss_inference_mb_outputs_held": api["peak_rss_inference_mb"],
        },
        "stages_s": stages,
        "lstm_ms_per_step_batch64": lstm_step_profile(emb.bilm, args.batch_size) if on_tensorflow else None,
        "loadavg": loadavg(),
    }


def top_layer_padded(emb, sentences: list[list[str]]) -> np.ndarray:
    """[n, max_len, 2P] top layer, zero beyond each sentence (the rig's dump layout)."""
    tops = [layers[-1] for layers in emb.embed_sentences(sentences)]
    out = np.zeros((len(tops), max(len(t) for t in tops), tops[0].shape[-1]), np.float32)
    for row, top in enumerate(tops):
        out[row, : len(top)] = top
    return out


# -- the driver ------------------------------------------------------------------------------------------------
def run_child(cmd: list[str], backend: str | None = None) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "USE_TF": "0"}  # USE_TF=0: transformers must not load TF
    if backend:
        env["KERAS_BACKEND"] = backend
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))


def allennlp_cmd(rig: str, size: str, *extra: str) -> list[str]:
    return [
        os.path.join(rig, "venv", "bin", "python"),
        os.path.join(rig, "bench_allennlp.py"),
        "--size",
        size,
        "--threads",
        "2",
        *extra,
    ]


def run_allennlp(rig: str, args, dump: str | None) -> dict:
    """The rig's protocol (throughput), then its batch-size-1 latency on one 10-token sentence."""
    out = run_child(
        allennlp_cmd(
            rig,
            args.size,
            "--batch-size",
            str(args.batch_size),
            "--sort",
            "--repeats",
            str(args.repeats),
            "--n-sentences",
            str(args.sentences),
            "--dump-npy",
            dump or "none",
        )
    )
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(" ".join(latency_sentence(read_sentences(args.sentences_file, args.sentences))) + "\n")
        f.flush()
        latency = run_child(
            allennlp_cmd(
                rig,
                args.size,
                "--sentences",
                f.name,
                "--batch-size",
                "1",
                "--repeats",
                str(LATENCY_CALLS),
                "--dump-npy",
                "none",
            )
        )
    return {
        "impl": out["impl"],
        "tokens": out["tokens"],
        "pass_s": out["forward_s"],
        "median_s": out["forward_median_s"],
        "tokens_per_s": out["tokens_per_s"],
        "cpu_per_wall": out["proc_cpu_per_wall"],
        "peak_rss_mb": out["peak_rss_mb"],
        "peak_rss_inference_mb": out["peak_rss_inference_mb"],
        "batch_to_ids_s": out["ids_s"],
        "p50_latency_ms": round(1000 * latency["forward_median_s"], 1),
        "loadavg": out["loadavg"],
    }


def ours_cmd(args, dtype: str, dump: str | None) -> list[str]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--dtype",
        dtype,
        "--step-layout",
        args.step_layout,
        "--options",
        args.options,
        "--weights",
        args.weights,
        "--sentences-file",
        args.sentences_file,
        "--sentences",
        str(args.sentences),
        "--batch-size",
        str(args.batch_size),
        "--repeats",
        str(args.repeats),
        "--threads",
        str(args.threads),
    ]
    return cmd + (["--dump-npy", dump] if dump else [])


def summary(runs: list[dict]) -> dict:
    """Medians over the alternating rounds."""
    keys = ("tokens_per_s", "p50_latency_ms", "cpu_per_wall", "peak_rss_mb", "peak_rss_inference_mb")
    return {key: statistics.median(r[key] for r in runs) for key in keys if runs[0].get(key) is not None}


def max_abs_diff(a_npy: str, b_npy: str) -> float:
    return float(np.abs(np.load(a_npy) - np.load(b_npy)).max())


def cosine_stats(a_npy: str, b_npy: str) -> dict:
    """Per-token cosine of two top-layer dumps (real tokens only)."""
    a, b = np.load(a_npy), np.load(b_npy)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    cos = ((a * b).sum(-1) / np.maximum(norms, 1e-12))[norms > 0]
    return {"min": float(cos.min()), "mean": float(cos.mean())}


def compare(args) -> None:
    rig = os.path.abspath(args.compare_allennlp)
    args.options = args.options or os.path.join(rig, "weights", f"elmo_{args.size}_options.json")
    args.weights = args.weights or os.path.join(rig, "weights", f"elmo_{args.size}_random.hdf5")
    args.sentences_file = args.sentences_file or os.path.join(rig, "bench_sentences.txt")
    if args.extra_dtypes is None:
        from elmo_keras.cpu import bf16_units

        args.extra_dtypes = "bfloat16" if bf16_units() else ""
    extra_dtypes = [d for d in args.extra_dtypes.split(",") if d]
    backends = [b for b in args.backend if b != "tensorflow"]  # TensorFlow's run is the "float32" row
    runs: dict[str, list[dict]] = {
        "allennlp": [],
        "float32": [],
        **{d: [] for d in extra_dtypes},
        **{f"{b} float32": [] for b in backends},
    }
    with tempfile.TemporaryDirectory() as tmp:
        dumps = {name: os.path.join(tmp, f"{name}.npy") for name in runs}
        for round_ in range(args.rounds):
            first = round_ == 0
            print(f"round {round_ + 1}/{args.rounds}, load {loadavg()}", file=sys.stderr)
            runs["allennlp"].append(run_allennlp(rig, args, dumps["allennlp"] if first else None))
            for dtype in ("float32", *(extra_dtypes if first else ())):  # the extra dtypes once: a 10-minute run
                runs[dtype].append(run_child(ours_cmd(args, dtype, dumps[dtype] if first else None)))
            for backend in backends:
                name = f"{backend} float32"
                runs[name].append(run_child(ours_cmd(args, "float32", dumps[name] if first else None), backend))
        checks = {
            "float32_top_layer_max_abs_diff_vs_allennlp": max_abs_diff(dumps["float32"], dumps["allennlp"]),
            "top_layer_max_abs": float(np.abs(np.load(dumps["allennlp"])).max()),
            **{f"{d}_vs_float32_top_layer_cosine": cosine_stats(dumps[d], dumps["float32"]) for d in extra_dtypes},
            **{
                f"{b}_top_layer_max_abs_diff_vs_tensorflow": max_abs_diff(dumps[f"{b} float32"], dumps["float32"])
                for b in backends
            },
        }
    medians = {name: summary(r) for name, r in runs.items()}
    base = medians["allennlp"]
    ratios = {
        name: {
            "throughput": round(m["tokens_per_s"] / base["tokens_per_s"], 2),
            "latency": round(m["p50_latency_ms"] / base["p50_latency_ms"], 2),
            "peak_rss": round(m["peak_rss_mb"] / base["peak_rss_mb"], 2),
        }
        for name, m in medians.items()
        if name != "allennlp"
    }
    result = {
        "benchmark": "bench_embed --compare-allennlp",
        "size": args.size,
        "protocol": {
            "sentences": args.sentences,
            "batch_size": args.batch_size,
            "sorted": True,
            "threads": args.threads,
            "repeats": args.repeats,
            "rounds": args.rounds,
            "order": "alternating: allennlp, ours float32 per round ("
            + (", ".join(extra_dtypes) or "-")
            + ": first round only; then "
            + (", ".join(backends) or "no other backend")
            + "); figures are medians over rounds of per-run medians",
            "latency": f"one {LATENCY_TOKENS}-token sentence, batch 1, p50 of {LATENCY_CALLS} calls",
        },
        "medians": medians,
        "ratios_vs_allennlp": ratios,
        "output_check": checks,
        "runs": runs,
        "machine": {**machine_info(), "loadavg_end": loadavg()},
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = args.out or os.path.join(HERE, "results", f"bench_embed_{args.size}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(markdown_table([result]))
    print(f"wrote {path}", file=sys.stderr)


def markdown_table(results: list[dict]) -> str:
    """The README's performance table from results JSONs (one block of rows per results file)."""
    lines = [
        "| machine | size | implementation | tokens/s | vs AllenNLP | p50 latency, 10 tokens | vs AllenNLP "
        "| CPU use (cores) | peak RSS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        machine = f"{result['machine']['cpu']}, {result['machine']['date'][:10]}"
        for name, m in result["medians"].items():
            ratio = result["ratios_vs_allennlp"].get(name, {"throughput": 1.0, "latency": 1.0})
            label = "AllenNLP 2.10.1" if name == "allennlp" else f"elmo_keras {name}"
            if name in ("float32", *(d for d in ("bfloat16", "mixed_bfloat16") if d in result["medians"])):
                label += " (tensorflow)" if any(" " in other for other in result["medians"]) else ""
            lines.append(
                f"| {machine} | {result['size']} | {label} | {m['tokens_per_s']:.0f} "
                f"| {ratio['throughput']:.2f}x | {m['p50_latency_ms']:.0f} ms | {ratio['latency']:.2f}x "
                f"| {m['cpu_per_wall']:.2f} | {m['peak_rss_mb'] / 1024:.2f} GB |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare-allennlp", metavar="RIG_DIR", help="the AllenNLP reference rig's folder")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the README table of these results")
    parser.add_argument("--size", default="original", choices=["small", "original"])
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (AllenNLP, ours)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--extra-dtypes",
        default=None,
        help="also run ours with these dtypes (comma-separated; default: bfloat16 where the CPU has "
        "bf16 matrix units, as dtype='auto' decides, else none: it is emulated and slow there)",
    )
    parser.add_argument(
        "--backend",
        nargs="+",
        default=["tensorflow"],
        choices=["tensorflow", "jax", "torch"],
        help="Keras backends to run ours on (float32), each in its own child process (default: tensorflow)",
    )
    parser.add_argument("--out", help="results JSON (default benchmarks/results/bench_embed_SIZE.json)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--inter-op-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--step-layout", default="auto", help="ElmoEmbedder(step_layout=...) of the child runs")
    parser.add_argument("--options")
    parser.add_argument("--weights")
    parser.add_argument("--sentences-file")
    parser.add_argument("--dump-npy", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_ours(args)))
    elif args.table:
        results = []
        for path in args.table:
            with open(path) as f:
                results.append(json.load(f))
        print(markdown_table(results))
    elif args.compare_allennlp:
        compare(args)
    else:
        parser.error("give --compare-allennlp RIG_DIR or --table JSON...")


if __name__ == "__main__":
    main()
