"""The ``elmo-keras`` command. Subcommands register themselves in :data:`COMMANDS` (name -> (add_arguments, run)).

elmo-keras pretrain --train FILES --valid FILE --options OPTIONS.json --out DIR [--epochs N]
elmo-keras embed INPUT.txt OUTPUT.hdf5 (--preset NAME | --options F --weights F) [--layers all|top|average]
                 [--pool mean|max] [--format hdf5|shards|npy] [--overwrite] [--restart] [--runner local|beam]
elmo-keras train [--data ag_news|FILE.csv] (--preset NAME | ...) [--head bigru] [--export saved_models/NAME]
                 [--features-dir DIR] [--runner local|beam]
elmo-keras export MODEL.keras --out saved_models/NAME
elmo-keras predict MODEL.keras INPUT.txt|INPUT.csv --out OUT.jsonl|OUT.csv [--top-k K] [--overwrite]
elmo-keras evaluate MODEL.keras --data TEST.csv [--json OUT.json] [--top-k K]
elmo-keras lm-predict --preset brown-small "The [bank] raised its rates ." [--top-k 10] [--direction both] [--json]
elmo-keras features [--dir DIR] [--remove STORE ... | --remove-all]
elmo-keras presets
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from elmo_keras.corpus.run import OUTPUT_FORMATS
from elmo_keras.corpus.store import LAYER_CHOICES
from elmo_keras.embed import BATCH_TOKENS, VOCAB_CACHE_SIZE
from elmo_keras.errors import InputError
from elmo_keras.layers.fusion import MIX_MODES
from elmo_keras.tasks.feature_store import MEMORY_FRACTION
from elmo_keras.tasks.models import HEADS
from elmo_keras.utils.files import NO_ROOM


def _pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--train", nargs="+", required=True, metavar="FILE", help="training text files, one tokenised sentence per line"
    )
    parser.add_argument("--valid", metavar="FILE", help="held-out text file for validation perplexity")
    parser.add_argument(
        "--options",
        required=True,
        metavar="OPTIONS.json",
        help="biLM options (char_cnn; lstm or encoder) + training settings, see elmo_keras.lm.TRAIN_DEFAULTS",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder, locked while a run writes it. Re-running resumes an interrupted run "
        "or continues a finished one up to --epochs; it needs the same --train files and "
        "options (n_epochs and backup_every_steps aside), the other arguments may change",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="discard the run in --out (made from other files or options) and start over",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        help="number of epochs in all, more than before to continue a finished run (default: n_epochs in the options)",
    )
    parser.add_argument("--init-from", metavar="PRESET_OR_DIR", help="continue training from these weights")
    parser.add_argument("--steps-per-epoch", type=int, help="limit each epoch to this many batches")
    parser.add_argument(
        "--strategy",
        choices=("default", "mirrored", "multiworker"),
        default="default",
        help="tf.distribute strategy (multiworker reads TF_CONFIG)",
    )
    parser.add_argument(
        "--mixed-precision",
        choices=("float32", "mixed_bfloat16", "mixed_float16"),
        default="float32",
        help="Keras dtype policy",
    )


def _run_pretrain(args: argparse.Namespace) -> int:
    import keras
    import tensorflow as tf

    # MultiWorkerMirroredStrategy must be created before any other TensorFlow op.
    strategy = {
        "default": tf.distribute.get_strategy,
        "mirrored": tf.distribute.MirroredStrategy,
        "multiworker": tf.distribute.MultiWorkerMirroredStrategy,
    }[args.strategy]()
    keras.mixed_precision.set_global_policy(args.mixed_precision)
    from elmo_keras.lm.train import pretrain

    _, state = pretrain(
        args.train,
        args.valid,
        args.options,
        args.out,
        epochs=args.epochs,
        strategy=strategy,
        init_from=args.init_from,
        steps_per_epoch=args.steps_per_epoch,
        restart=args.restart,
        verbose=2 if not sys.stdout.isatty() else "auto",
    )
    tps = state["tokens_per_second"]
    if tps:
        print(f"training throughput: median {sorted(tps)[len(tps) // 2]:.0f} tokens/s over {len(tps)} epoch(s)")
    if "valid_perplexity" in state:
        ppl = state["valid_perplexity"]
        print(f"validation perplexity: forward {ppl['forward']:.2f}, backward {ppl['backward']:.2f}")
    print(f"weights: {os.path.join(args.out, 'weights.hdf5')}")
    return 0


def _model_source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--preset",
        metavar="NAME",
        help="a preset name (see elmo-keras presets / ek.list_presets()), folder or URL, e.g. brown-small",
    )
    source.add_argument(
        "--options", metavar="OPTIONS.json", help="options.json of a released/pretrained biLM: a path or an http(s) URL"
    )
    parser.add_argument("--weights", metavar="WEIGHTS.hdf5", help="weights that go with --options: a path or URL")


def _model_files(args: argparse.Namespace, with_vocab: bool = False) -> tuple[str, ...]:
    """Local (options, weights) paths, through the one loader (:func:`elmo_keras.io.load.resolve`); a published
    preset, a URL or an archive is downloaded (extracted) once into the cache. ``with_vocab``: (options, weights,
    vocab), vocab the model's vocab.txt(.gz) or None."""
    from elmo_keras.io.load import resolve

    if not args.preset and not args.weights:
        raise InputError("--options needs --weights")
    files = resolve(args.preset) if args.preset else resolve(args.options, args.weights)
    if files.hub is not None:
        raise InputError(
            f"--preset {args.preset!r} is a TF Hub module; this command reads released-layout files (options.json "
            "and weights.hdf5): load the module with ek.Elmo.from_hub in Python"
        )
    return (files.options, files.weights, files.vocab) if with_vocab else (files.options, files.weights)


def _run_presets(args: argparse.Namespace) -> int:
    from elmo_keras.presets import list_presets, presets_table

    print(presets_table(list_presets()))
    return 0


def _at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer >= ``minimum`` (otherwise argparse's one-line error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


#: --dtype of ``embed`` -> (compute dtype of the embedder, storage dtype of the output)
_EMBED_DTYPES = {
    "auto": ("auto", "float32"),
    "float32": ("float32", "float32"),
    "float16": ("float32", "float16"),
    "bfloat16": ("bfloat16", "float32"),
}


def _embed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input",
        metavar="INPUT.txt",
        help="UTF-8 text, one sentence per line (lines end at \\n only; tokens split on ASCII "
        "whitespace, exactly as elmo_keras.tokenize)",
    )
    parser.add_argument("output", metavar="OUTPUT", help="OUTPUT.hdf5, or a folder with --format shards / npy")
    _model_source_arguments(parser)
    parser.add_argument(
        "--layers",
        choices=LAYER_CHOICES,
        default="all",
        help="all: [n_layers+1, T, D] per line; top: [T, D]; average: [T, D] mean of the layers "
        "(with --pool: [n_layers+1, D], [D], [D])",
    )
    parser.add_argument(
        "--pool",
        type=_pool_argument,
        metavar="mean|max|mean,max",
        help="one vector per line instead of its tokens: each layer (or the top / average one) pooled over the "
        "line's tokens (mean,max: both, concatenated); an empty line is zeros, flagged in the reader's .empty",
    )
    parser.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        default="hdf5",
        help="hdf5: one dataset per line + sentence_to_index (the original tools' layout); "
        "shards: a folder of shard files + manifest, for millions of lines; npy: a folder, "
        "one .npy per line",
    )
    parser.add_argument("--batch-size", type=_at_least(1), default=64, help="sentences per model call")
    parser.add_argument(
        "--batch-tokens",
        type=_at_least(1),
        default=BATCH_TOKENS,
        metavar="N",
        help="at most N padded tokens (lines x the longest line) per model call; a longer line is a call of its "
        f"own, so long documents mixed with short lines run in bounded memory (default {BATCH_TOKENS})",
    )
    parser.add_argument(
        "--vocab-cache",
        type=_at_least(0),
        default=VOCAB_CACHE_SIZE,
        metavar="N",
        help="the model's N most frequent words (its vocab.txt or vocab.txt.gz, where it has one) get their "
        f"char-CNN vectors computed once up front; 0: none (default {VOCAB_CACHE_SIZE})",
    )
    parser.add_argument(
        "--dtype",
        choices=tuple(_EMBED_DTYPES),
        default="auto",
        help="auto: compute in bfloat16 where the CPU has bf16 matrix units (AMX, AVX512-BF16), "
        "else float32 (logged), store float32; float32: compute and store float32; "
        "float16: compute float32, store float16 (half the disk); bfloat16: compute in "
        "bfloat16, weights cast once (fast only on CPUs with bf16 units), store float32",
    )
    parser.add_argument(
        "--long",
        type=_at_least(0),
        default=400,
        metavar="N",
        help="report lines longer than N tokens (they are embedded in full)",
    )
    parser.add_argument(
        "--shard-lines",
        type=_at_least(1),
        default=1024,
        metavar="N",
        help="lines per committed piece: a killed run loses at most the two pieces in progress "
        "(one being embedded, one being written); each piece is length-sorted on its own, so "
        "much smaller pieces embed slower (50 lines: ~0.6x the speed)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing OUTPUT (only once the new one is complete)"
    )
    parser.add_argument(
        "--restart", action="store_true", help="discard an interrupted run (OUTPUT.partial) instead of resuming it"
    )
    _runner_arguments(parser)


def _runner_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the embedding runs (``embed``, and ``train``'s feature store)."""
    parser.add_argument(
        "--runner",
        choices=("local", "beam"),
        default="local",
        help="local: this process; beam: an Apache Beam pipeline (pip install elmo-keras[beam])",
    )
    parser.add_argument(
        "--num-workers",
        type=_at_least(1),
        metavar="N",
        help="Beam worker processes (DirectRunner) or --num_workers for another runner",
    )
    parser.add_argument(
        "--beam-options",
        default="",
        metavar='"--runner=... ..."',
        help='standard Beam pipeline options, e.g. "--runner=FlinkRunner --flink_master=HOST:8081"',
    )


def _checked_runner(args: argparse.Namespace) -> None:
    """InputError for Beam options without ``--runner beam`` (before any work)."""
    if args.runner == "local" and (args.num_workers or args.beam_options):
        raise InputError("--num-workers and --beam-options need --runner beam")


def _runner(args: argparse.Namespace, options: str, weights: str, dtype: str, batch_size: int, batch_tokens: int):
    """The ``--runner beam`` runner for ``embed_file``, or None (this process)."""
    if args.runner != "beam":
        return None
    try:
        from elmo_keras.corpus.beam import EmbedderSpec, beam_runner
    except ImportError as err:
        raise InputError(f"--runner beam needs Apache Beam ({err}): pip install 'elmo-keras[beam]'") from None
    spec = EmbedderSpec(
        os.path.abspath(options),
        os.path.abspath(weights),
        dtype=dtype,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
    )
    return beam_runner(spec, args.num_workers, args.beam_options)


def _pool_argument(value: str) -> tuple[str, ...]:
    from elmo_keras.layers.pooling import pool_modes

    try:
        return pool_modes(value)
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _run_embed(args: argparse.Namespace) -> int:
    import signal

    from elmo_keras.corpus.run import check_paths, embed_file
    from elmo_keras.embed import ElmoEmbedder

    _checked_runner(args)
    options, weights, vocab = _model_files(args, with_vocab=True)
    check_paths(args.input, args.output, args.format, args.overwrite, keep={"--options": options, "--weights": weights})
    compute, storage = _EMBED_DTYPES[args.dtype]
    if compute == "auto":
        from elmo_keras.utils.cpu import auto_choice

        compute, reason = auto_choice()
        print(reason)
    try:
        embedder = ElmoEmbedder(
            options,
            weights,
            dtype=compute,
            batch_size=args.batch_size,
            batch_tokens=args.batch_tokens,
            max_cache_size=100_000,
            vocab_file=vocab,
            vocab_cache_size=args.vocab_cache,
        )
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"cannot load the model ({options}, {weights}): {err}") from None
    runner = _runner(args, options, weights, compute, args.batch_size, args.batch_tokens)
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)  # `timeout`, `docker stop`: like Ctrl-C
    try:
        report = embed_file(
            embedder,
            args.input,
            args.output,
            layers=args.layers,
            fmt=args.format,
            long_line=args.long,
            storage_dtype=storage,
            shard_lines=args.shard_lines,
            overwrite=args.overwrite,
            restart=args.restart,
            runner=runner,
            progress=True,
            pool=args.pool,
        )
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(report)
    return 0


def _train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", default="ag_news", help="'ag_news' (bundled, fixed split) or a CSV file with a header row"
    )
    parser.add_argument("--test", metavar="CSV", help="test CSV (default: a stratified 20%% of --data)")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--multi-label", action="store_true", help="labels are lists separated by --label-separator")
    parser.add_argument("--label-separator", default="|")
    parser.add_argument(
        "--label-sampling",
        type=_at_least(1),
        metavar="N",
        help="multi-label: the sampled head (for 100k labels and more), trained on each row's labels plus N labels "
        "drawn per batch (default: the dense head; see docs/extreme_multilabel.md)",
    )
    _model_source_arguments(parser)
    parser.add_argument("--head", choices=HEADS, default="bigru")
    parser.add_argument("--mix", choices=MIX_MODES, default="trainable")
    parser.add_argument("--mix-weights", help="comma-separated weights for --mix fixed, e.g. 0.45,0.15,0.40")
    parser.add_argument("--units", type=_at_least(1), default=64)
    parser.add_argument("--max-tokens", type=_at_least(1), help="encode long texts in segments of at most N tokens")
    parser.add_argument(
        "--words",
        type=_at_least(0),
        default=128,
        metavar="DIM",
        help="a learned task word embedding of DIM beside ELMo (0: ELMo alone); see README",
    )
    parser.add_argument("--epochs", type=_at_least(1), default=15, help="at most this many epochs")
    parser.add_argument(
        "--patience",
        type=_at_least(1),
        default=3,
        help="stop this many epochs after the best validation accuracy (its weights are kept)",
    )
    parser.add_argument(
        "--validation-split",
        type=float,
        default=0.1,
        help="fraction of the training rows held out for early stopping (0: train on all, no stop)",
    )
    parser.add_argument("--batch-size", type=_at_least(1), default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="model.keras", metavar="MODEL.keras")
    parser.add_argument("--export", metavar="saved_models/NAME", help="also export for TF Serving")
    parser.add_argument(
        "--features-dir",
        metavar="DIR",
        help="embed the texts into a feature store in DIR and train from it: resumed after a kill, reused by the "
        "next train on the same texts (default: in memory, or a store under the cache when the features exceed "
        "--features-memory)",
    )
    parser.add_argument(
        "--features-memory",
        type=float,
        default=MEMORY_FRACTION,
        metavar="SHARE",
        help=f"the texts' features stay in memory up to this share of the available memory (0: always a "
        f"store; default {MEMORY_FRACTION})",
    )
    _runner_arguments(parser)


def _writable(path: str, option: str) -> None:
    """InputError unless ``path`` can be created: its nearest existing ancestor is a writable folder."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: cannot write into {folder} (not a writable folder)")


def _checked_train_arguments(args: argparse.Namespace) -> list[float] | None:
    """Check what ``train`` can before reading data or training; returns the --mix-weights as floats."""
    if not args.learning_rate > 0:
        raise InputError(f"--learning-rate must be a positive number, got {args.learning_rate}")
    if not 0 <= args.validation_split < 1:
        raise InputError(f"--validation-split must be in [0, 1), got {args.validation_split}")
    if not args.features_memory >= 0:
        raise InputError(f"--features-memory must be a share of the available memory >= 0, got {args.features_memory}")
    _checked_runner(args)
    if args.max_tokens and (args.features_dir or args.runner == "beam"):
        raise InputError(
            "--max-tokens encodes texts in segments on every batch; --features-dir and --runner beam need whole "
            "texts (drop one of them)"
        )
    folder = os.path.dirname(os.path.abspath(args.out))
    if not args.out.endswith(".keras") or os.path.isdir(args.out):
        raise InputError(f"--out {args.out}: give a file name ending in .keras, e.g. model.keras")
    if not os.path.isdir(folder):
        raise InputError(f"--out {args.out}: folder {folder} does not exist; create it first")
    _writable(args.out, "--out")
    if args.export:
        _writable(os.path.join(args.export, "1"), "--export")
    if args.mix == "fixed" and not args.mix_weights:
        raise InputError("--mix fixed needs --mix-weights, e.g. 0.45,0.15,0.40 (one weight per biLM layer)")
    try:
        return [float(w) for w in args.mix_weights.split(",")] if args.mix_weights else None
    except ValueError:
        raise InputError(f"--mix-weights must be comma-separated numbers, got {args.mix_weights!r}") from None


def _run_train(args: argparse.Namespace) -> int:
    import keras

    from elmo_keras.saving import save_model
    from elmo_keras.tasks.train_task import evaluate, load_task, train_model
    from elmo_keras.utils.files import exclusive_lock

    mix_weights = _checked_train_arguments(args)
    keras.utils.set_random_seed(args.seed)
    task = load_task(
        args.data, args.test, args.text_column, args.label_column, args.multi_label, args.label_separator, args.seed
    )
    options, weights = _model_files(args)
    folder, name = os.path.split(os.path.realpath(args.out))  # a link's target is what gets written
    with exclusive_lock(folder, f"train --out {args.out}", name=f".{name}.lock"):
        model = train_model(
            task,
            options,
            weights,
            head=args.head,
            mix=args.mix,
            mix_weights=mix_weights,
            units=args.units,
            max_tokens=args.max_tokens,
            words=args.words,
            epochs=args.epochs,
            patience=args.patience,
            validation_split=args.validation_split,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            verbose=2,
            features_dir=args.features_dir,
            features_memory=args.features_memory,
            features_runner=_runner(args, options, weights, "float32", 64, BATCH_TOKENS),
            label_sampling=args.label_sampling,
        )
        save_model(model, args.out, task.class_names)
    print(f"model: {args.out}")
    try:
        scores = evaluate(model, task, args.batch_size)
    except Exception as err:
        raise RuntimeError(
            f"the trained model is saved in {args.out}, but evaluating it on the test split failed: {err}"
        ) from err
    print("test: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()))
    if args.export:  # concurrent exports to one folder each take their own version: no lock needed
        from elmo_keras.export import check_serving, export_serving

        folder = export_serving(model, args.export, label_names=task.class_names)
        gap = check_serving(model, folder, task.test_texts[:64])
        print(f"exported: {folder} (its scores equal the model's on 64 test texts: max |difference| {gap:.1e})")
    return 0


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.keras")
    parser.add_argument("--out", required=True, metavar="saved_models/NAME")
    parser.add_argument("--version", type=_at_least(0), help="version folder (default: the next integer)")
    parser.add_argument("--labels", help="comma-separated class/tag names (default: MODEL.keras.labels.json)")


def _run_export(args: argparse.Namespace) -> int:
    from elmo_keras.export import export_serving
    from elmo_keras.saving import load_model, read_labels

    _writable(os.path.join(args.out, "1"), "--out")
    labels = args.labels.split(",") if args.labels else read_labels(args.model)
    model = load_model(args.model)
    try:
        print(export_serving(model, args.out, version=args.version, label_names=labels))
    except FileExistsError as err:
        raise InputError(str(err)) from None
    return 0


def _classifier_arguments(parser: argparse.ArgumentParser) -> None:
    """What ``predict`` and ``evaluate`` share."""
    parser.add_argument("--batch-size", type=_at_least(1), default=32, help="texts per model call")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="multi-label models: a label is predicted when its score is at least this",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument(
        "--raw-scores",
        action="store_true",
        help="take a model whose last layer gives no probabilities (no softmax or sigmoid, e.g. logits): its "
        "outputs are the scores, ranked as one label per text (refused without this flag)",
    )


def _interrupted(command: str, outcome: str) -> int:
    """SIGINT or SIGTERM stopped ``command``: one line on stderr (after the progress bar's line), exit 130."""
    print(flush=True)
    print(f"elmo-keras {command}: interrupted: {outcome}; run the same command again", file=sys.stderr)
    return 130


def _predict_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.keras", help="a classifier saved by elmo-keras train")
    parser.add_argument(
        "input",
        metavar="INPUT.txt|INPUT.csv",
        help="a CSV with a header row (one text per row), or any other file: one text per line (line i -> row i)",
    )
    parser.add_argument("--out", required=True, metavar="OUT.jsonl|OUT.csv", help="the output; format by extension")
    parser.add_argument("--top-k", type=_at_least(1), default=3, metavar="K", help="list the K best labels per row")
    parser.add_argument("--text-column", metavar="NAME", help="the CSV column of the texts (default: text)")
    _classifier_arguments(parser)


def _run_predict(args: argparse.Namespace) -> int:
    from elmo_keras.tasks.predict import predict_file

    try:
        done = predict_file(
            args.model,
            args.input,
            args.out,
            top_k=args.top_k,
            batch_size=args.batch_size,
            text_column=args.text_column,
            overwrite=args.overwrite,
            threshold=args.threshold,
            progress=True,
            raw_scores=args.raw_scores,
        )
    except KeyboardInterrupt:
        return _interrupted("predict", f"{args.out} was not written (its temporary file is deleted)")
    print(f"labelled {done['rows']} rows ({done['empty']} without tokens): {done['out']}")
    return 0


def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.keras", help="a classifier saved by elmo-keras train")
    parser.add_argument("--data", required=True, metavar="TEST.csv", help="a labelled CSV with a header row")
    parser.add_argument("--json", metavar="OUT.json", help="also write the scores and the report as JSON")
    parser.add_argument(
        "--top-k",
        type=_at_least(1),
        default=5,
        metavar="K",
        help="the k of precision@k (multi-label) and of top-k accuracy (single-label, when k < classes)",
    )
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--label-separator", default="|", help="what joins the labels of a row (multi-label)")
    _classifier_arguments(parser)


def _run_evaluate(args: argparse.Namespace) -> int:
    from elmo_keras.tasks.predict import evaluate_file

    try:
        scores = evaluate_file(
            args.model,
            args.data,
            args.json,
            top_k=args.top_k,
            batch_size=args.batch_size,
            text_column=args.text_column,
            label_column=args.label_column,
            separator=args.label_separator,
            threshold=args.threshold,
            overwrite=args.overwrite,
            raw_scores=args.raw_scores,
        )
    except KeyboardInterrupt:
        return _interrupted("evaluate", "nothing was scored or written")
    shown = [k for k in scores if k in ("accuracy", "macro_f1", "top_k_accuracy", "micro_f1") or "_at_" in k]
    print(f"{args.data}: {scores['rows']} rows: " + ", ".join(f"{k} {scores[k]:.4f}" for k in shown))
    print(scores["report"])
    if args.json:
        print(f"scores: {args.json}")
    return 0


def _lm_predict_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sentence",
        metavar='"SENTENCE"',
        help="one sentence, tokens split on whitespace, with the word to predict in brackets: "
        '"The [bank] raised its rates ."',
    )
    parser.add_argument(
        "--preset",
        required=True,
        metavar="NAME",
        help="a biLM with its trained softmax: a preset (brown-small), a folder or URL that `elmo-keras "
        "pretrain` wrote (vocab.txt + softmax.hdf5), or the .keras file of a trained BiLanguageModel",
    )
    parser.add_argument("--top-k", type=_at_least(1), default=10, metavar="K", help="words to list (default: 10)")
    parser.add_argument(
        "--direction",
        choices=("both", "forward", "backward"),
        default="both",
        help="rank by the forward LM (left context), the backward LM (right context), or both (their normalised "
        "product; default)",
    )
    parser.add_argument("--exclude-word", action="store_true", help="leave the bracketed word itself out")
    parser.add_argument("--exclude-special", action="store_true", help="leave <S>, </S> and <UNK> out")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _run_lm_predict(args: argparse.Namespace) -> int:
    import json

    from elmo_keras.lm.model import BiLanguageModel
    from elmo_keras.lm.predict import check_k, excluded_ids, format_table, parse_query, prediction_rows, top_words
    from elmo_keras.saving import load_model

    tokens, position = parse_query(args.sentence)  # a bad sentence fails before the model loads
    if args.preset.endswith(".keras"):
        lm = load_model(args.preset)
        if not isinstance(lm, BiLanguageModel):
            raise InputError(f"{args.preset} holds a {type(lm).__name__}, not a BiLanguageModel (a biLM + softmax)")
    else:
        lm = BiLanguageModel.from_preset(args.preset)
    lm.check_softmax()  # an untrained softmax is said first: no --top-k would make its predictions useful
    exclude = excluded_ids(lm.vocab, tokens[position], args.exclude_word, args.exclude_special)
    check_k(args.top_k, len(lm.vocab) - len(exclude))
    probabilities = {d: p[0] for d, p in lm.word_probabilities([(tokens, position)]).items()}
    top = top_words(probabilities[args.direction], lm.vocab.tokens, args.top_k, exclude)
    rows = prediction_rows(probabilities, lm.vocab.tokens, top)
    if args.json:
        print(json.dumps({"tokens": tokens, "position": position, "ranked_by": args.direction, "words": rows}))
    else:
        print(f"{args.sentence}  (word {position}, {tokens[position]!r}; ranked by {args.direction})")
        print(format_table(rows, args.direction))
    return 0


def _features_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", metavar="DIR", help="the folder of feature stores (default: the cache's, where train puts them)"
    )
    parser.add_argument("--remove", nargs="+", metavar="STORE", help="delete these stores (paths as listed)")
    parser.add_argument("--remove-all", action="store_true", help="delete every store in the folder")


def _run_features(args: argparse.Namespace) -> int:
    import datetime

    from elmo_keras.tasks.feature_store import default_root, list_stores, remove_store

    root = args.dir or default_root()
    stores = list_stores(root)
    if args.remove or args.remove_all:
        paths = [s["path"] for s in stores] if args.remove_all else args.remove
        freed = sum(remove_store(path) for path in paths)
        print(f"removed {len(paths)} feature store(s) from {root}: {freed / 1e9:.2f} GB freed")
        return 0
    print(f"{len(stores)} feature store(s) in {root}")
    for s in stores:
        used = datetime.datetime.fromtimestamp(s["last_used"]).strftime("%Y-%m-%d %H:%M")
        print(
            f"{s['path']}  {s['state']}  {s['texts']} texts  {s['tokens']} tokens  {s['bytes'] / 1e9:.2f} GB  "
            f"used {used}"
        )
    return 0


#: subcommand name -> (help, add_arguments(parser), run(args) -> exit code)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "pretrain": ("pretrain or continue training a biLM", _pretrain_arguments, _run_pretrain),
    "embed": (
        "embed a text file line by line (crash-safe, resumable) to hdf5, shards or .npy",
        _embed_arguments,
        _run_embed,
    ),
    "train": ("train and evaluate a classifier over ELMo, save it, optionally export it", _train_arguments, _run_train),
    "export": ("export a saved .keras model for TensorFlow Serving", _export_arguments, _run_export),
    "predict": (
        "label each line of a text file or each row of a CSV with a saved classifier (to .jsonl or .csv)",
        _predict_arguments,
        _run_predict,
    ),
    "evaluate": (
        "score a saved classifier on a labelled CSV: accuracy / F1 and scikit-learn's classification report",
        _evaluate_arguments,
        _run_evaluate,
    ),
    "lm-predict": (
        "which words fit here: the biLM's top-k words at a [marked] word, per direction",
        _lm_predict_arguments,
        _run_lm_predict,
    ),
    "features": (
        "list or remove the feature stores that train / fit wrote (the texts' biLM layers, reused)",
        _features_arguments,
        _run_features,
    ),
    "presets": (
        "list the pretrained biLMs known by name: parameters, download size, whether cached",
        lambda parser: None,
        _run_presets,
    ),
}


def _glued_beam_options(args: Sequence[str] | None) -> list[str]:
    """``--beam-options VALUE`` -> ``--beam-options=VALUE`` (up to a ``--``): argparse would take a separate VALUE
    that starts with ``-`` (``"--runner=FlinkRunner ..."``) for an option and stop with "expected one argument"."""
    rest, glued = list(sys.argv[1:] if args is None else args), []
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            return [*glued, arg, *rest]
        glued.append(f"{arg}={rest.pop(0)}" if arg == "--beam-options" and rest else arg)
    return glued


def build_parser() -> argparse.ArgumentParser:
    """The ``elmo-keras`` argument parser: one subcommand per entry of :data:`COMMANDS`.

    Returns:
        An ``argparse.ArgumentParser``; its ``parse_args`` gives the subcommand's name as ``command``.

    Example:

    ```python
    from elmo_keras.cli import build_parser

    args = build_parser().parse_args(["presets"])
    assert args.command == "presets"
    ```
    """
    parser = argparse.ArgumentParser(prog="elmo-keras", description="ELMo for Keras 3")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, run) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input (:class:`~elmo_keras.errors.InputError`) is one stderr line and exit 2, and
    so is a full disk or a file-size limit reached.

    Args:
        argv: the command line after ``elmo-keras``, or `None` for ``sys.argv[1:]``. Defaults to `None`.

    Returns:
        The exit code: 0 on success, 2 for bad input.

    Example:

    ```python
    from elmo_keras.cli import main

    assert main(["presets"]) == 0   # prints the table of presets
    ```
    """
    args = build_parser().parse_args(_glued_beam_options(argv))
    try:
        return COMMANDS[args.command][2](args)
    except InputError as err:
        print(f"elmo-keras {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in NO_ROOM:
            raise
        where = f" writing {err.filename}" if err.filename else ""
        print(
            f"elmo-keras {args.command}: error: disk full or file too large{where} ({os.strerror(err.errno)}): "
            "free space (or raise the limit) and run the same command again",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
