"""Pretraining / continued training of a BiLanguageModel with ``model.fit``.

Output folder (also a valid preset folder for ``from_preset``)::

    options.json   the biLM options + training settings (bilm-tf style keys, n_tokens_vocab filled in)
    vocab.txt      bilm-tf vocabulary file
    weights.hdf5   biLM weights, released layout (written atomically at the end)
    softmax.hdf5   softmax/W [V, P], softmax/b [V] (written atomically at the end)
    state.json     epochs completed, tokens/s per epoch, validation perplexity per direction
    backup/        BackupAndRestore state while a run is unfinished (a re-run resumes from it)
    logs/          TensorBoard logs
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from elmo_keras.callbacks import Throughput
from elmo_keras.errors import InputError
from elmo_keras.files import write_json
from elmo_keras.lm.data import DEFAULT_BUCKETS, lm_dataset
from elmo_keras.lm.model import BiLanguageModel
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.options import load_options, positive_int
from elmo_keras.presets import preset_files
from elmo_keras.weights import iter_weights_hdf5, save_weights_hdf5

#: Training settings read from options.json (bilm-tf names where bilm-tf has one), with their defaults.
TRAIN_DEFAULTS = {
    "batch_size": 64, "n_epochs": 10, "dropout": 0.1, "n_negative_samples_batch": 0,
    "all_clip_norm_val": 10.0, "optimizer": "adam", "learning_rate": 0.002,
    "vocab_min_count": 1, "vocab_max_size": None, "shuffle_buffer": 10000, "buckets": list(DEFAULT_BUCKETS),
    "seed": 0, "backup_every_steps": 200,
}
_BILM_KEYS = ("char_cnn", "lstm", "encoder")  # the biLM's architecture (options.encoder_options)
_ARCHITECTURE = (*_BILM_KEYS, "n_tokens_vocab")


def training_options(options: dict | str | os.PathLike) -> dict:
    """Options (dict or path) with the training defaults filled in; checks the training settings."""
    opts = {**TRAIN_DEFAULTS, **load_options(options)}
    if opts["optimizer"] not in ("adam", "adagrad"):
        raise InputError(f"options: 'optimizer' must be 'adam' or 'adagrad', got {opts['optimizer']!r}")
    for key in ("batch_size", "n_epochs"):
        positive_int(opts[key], f"options: '{key}'")
    return opts


def make_optimizer(opts: dict) -> keras.optimizers.Optimizer:
    """Adam or Adagrad (bilm-tf: Adagrad, lr 0.2, accumulator 1.0) with global-norm gradient clipping."""
    clip = opts["all_clip_norm_val"]
    if opts["optimizer"] == "adagrad":
        return keras.optimizers.Adagrad(opts["learning_rate"], initial_accumulator_value=1.0, global_clipnorm=clip)
    return keras.optimizers.Adam(opts["learning_rate"], global_clipnorm=clip)


def _cluster(strategy: tf.distribute.Strategy) -> tuple[int, bool]:
    """(number of workers, is this the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    if not spec:
        return 1, True
    n = len(spec.get("worker", [])) + len(spec.get("chief", []))
    chief = resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                               and "chief" not in spec)
    return n, chief


class EpochLogs(keras.callbacks.Callback):
    """Every epoch's logs (losses, perplexities, tokens/s) by epoch, also kept in ``path`` (in the backup folder),
    so that a run resumed from its backup keeps the epochs it ran before the interruption."""

    def __init__(self, path: str, before_epoch: int):
        super().__init__()
        self.path = path
        self.logs = {int(e): v for e, v in (_read_json(path) or {}).items() if int(e) < before_epoch}

    def on_epoch_end(self, epoch, logs=None):
        self.logs[epoch] = {key: float(value) for key, value in (logs or {}).items()}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_json(self.path, {str(e): v for e, v in self.logs.items()})


def _read_json(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _prepare_folder(out_dir: str, options: dict, train_files: Sequence[str], is_chief: bool) -> tuple[dict, Vocabulary]:
    """Options and vocabulary of the run: from ``out_dir`` when resuming (must agree), else new."""
    vocab_path, options_path = os.path.join(out_dir, "vocab.txt"), os.path.join(out_dir, "options.json")
    if os.path.exists(vocab_path):
        vocab = Vocabulary.load(vocab_path)
    else:
        vocab = Vocabulary.from_files(train_files, options["vocab_min_count"], options["vocab_max_size"])
    options = {**options, "n_tokens_vocab": len(vocab)}
    saved = _read_json(options_path)
    if saved is not None:
        for key in _ARCHITECTURE:
            if saved.get(key) != options.get(key):
                raise InputError(f"{options_path} holds a different '{key}' than the options given; "
                                 "use a new --out folder or the same options to resume")
    if is_chief:
        os.makedirs(out_dir, exist_ok=True)
        vocab.save(vocab_path)
        write_json(options_path, options)
    return options, vocab


def pretrain(train_files: Sequence[str | os.PathLike], valid_file: str | os.PathLike | None,
             options: dict | str | os.PathLike, out_dir: str | os.PathLike, epochs: int | None = None,
             strategy: tf.distribute.Strategy | None = None, init_from: str | None = None,
             steps_per_epoch: int | None = None, callbacks: Sequence[keras.callbacks.Callback] = (),
             verbose: int | str = "auto", log: Callable[[str], None] = print) -> tuple[BiLanguageModel, dict]:
    """Train (or resume, or continue from ``init_from``) a biLM; write the output folder (see module doc).

    ``steps_per_epoch``: batches per epoch (the training data then repeats); ``callbacks``: extra Keras callbacks.
    ``init_from``: a preset name (shipped or published, see ``ek.list_presets()``), or a folder or folder URL
    with options.json + weights.hdf5 (+ softmax.hdf5 when its vocab.txt is the same as this run's) whose
    architecture equals ``options``: continued training.
    Returns ``(model, state)``; ``state`` (also in ``out_dir/state.json``) holds epochs_completed,
    tokens_per_second per epoch, wall_seconds, history and valid_perplexity {"forward", "backward"}.
    """
    out_dir, train_files = os.fspath(out_dir), [os.fspath(f) for f in train_files]
    strategy = strategy or tf.distribute.get_strategy()
    n_workers, is_chief = _cluster(strategy)
    opts = training_options(options)
    epochs = opts["n_epochs"] if epochs is None else positive_int(epochs, "epochs (--epochs)")
    if steps_per_epoch is not None:
        positive_int(steps_per_epoch, "steps_per_epoch (--steps-per-epoch)")
    opts, vocab = _prepare_folder(out_dir, opts, train_files, is_chief)
    state_path = os.path.join(out_dir, "state.json")
    state = _read_json(state_path) or {"epochs_completed": 0, "tokens_per_second": [], "wall_seconds": 0.0}
    if state["epochs_completed"] >= epochs:
        log(f"{out_dir}: already trained for {state['epochs_completed']} epochs; nothing to do")
        return BiLanguageModel.from_preset(out_dir), state
    keras.utils.set_random_seed(opts["seed"])

    with strategy.scope():
        model = BiLanguageModel(opts, vocab, n_sampled=opts["n_negative_samples_batch"], dropout=opts["dropout"])
        model.build()
        if state["epochs_completed"]:  # finished earlier with fewer epochs: go on from the written weights
            init_from = out_dir
        if init_from is not None:
            _load_initial_weights(model, init_from, vocab)
        model.compile(optimizer=make_optimizer(opts))
    backup_dir = os.path.join(out_dir, "backup" if is_chief else f"backup-{strategy.cluster_resolver.task_id}")
    backed_up = (_read_json(os.path.join(backup_dir, "training_metadata.json")) or {}).get("epoch", 0)
    epoch_logs = EpochLogs(os.path.join(backup_dir, "epoch_logs.json"), backed_up)
    callbacks = [*callbacks, *_training_callbacks(opts, out_dir, backup_dir, epoch_logs, log)]
    train_ds = _dataset(train_files, vocab, opts, n_workers, shuffle=True)
    valid_ds = _dataset([os.fspath(valid_file)], vocab, opts, n_workers, shuffle=False) if valid_file else None
    start = time.perf_counter()
    if backed_up >= epochs:  # an interrupted longer run, now asked to stop at `epochs`: finish from its backup
        with strategy.scope():
            model.optimizer.build(model.trainable_variables)
        model.load_weights(os.path.join(backup_dir, "latest.weights.h5"))
        shutil.rmtree(backup_dir)
        log(f"restored epoch {backed_up} from {backup_dir} (>= --epochs {epochs}): writing those weights")
        state["epochs_completed"] = backed_up
    else:
        fitted = model.fit(train_ds.repeat() if steps_per_epoch else train_ds, epochs=epochs,
                           initial_epoch=state["epochs_completed"], validation_data=valid_ds,
                           steps_per_epoch=steps_per_epoch, callbacks=callbacks, verbose=verbose)
        if model.stop_training or not fitted.epoch:
            raise RuntimeError("training stopped early (NaN loss?): weights were not written; see the logs")
        state["epochs_completed"] = fitted.epoch[-1] + 1
    state["wall_seconds"] += time.perf_counter() - start
    _record_epochs(state, epoch_logs)
    if valid_ds is not None:
        metrics = model.evaluate(valid_ds, return_dict=True, verbose=0)
        state["valid_perplexity"] = {"forward": float(metrics["forward_ppl"]),
                                     "backward": float(metrics["backward_ppl"])}
    if is_chief:
        save_weights_hdf5(model.bilm, os.path.join(out_dir, "weights.hdf5"))
        model.save_softmax_hdf5(os.path.join(out_dir, "softmax.hdf5"))
        write_json(state_path, state)
    return model, state


def _dataset(files: list[str], vocab: Vocabulary, opts: dict, n_workers: int, shuffle: bool) -> tf.data.Dataset:
    """The LM batches of ``files``, sharded by file across workers when there are enough files, else by data."""
    ds = lm_dataset(files, vocab, opts["batch_size"], shuffle_buffer=opts["shuffle_buffer"] if shuffle else 0,
                    seed=opts["seed"], buckets=opts["buckets"],
                    max_characters_per_token=opts["char_cnn"]["max_characters_per_token"])
    ds_options = tf.data.Options()
    ds_options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.FILE if len(files) >= n_workers > 1
        else tf.data.experimental.AutoShardPolicy.DATA)
    return ds.with_options(ds_options)


def _training_callbacks(opts: dict, out_dir: str, backup_dir: str, epoch_logs: EpochLogs,
                        log: Callable[[str], None]) -> list[keras.callbacks.Callback]:
    """Resume (BackupAndRestore), throughput, per-epoch logs, NaN stop, and TensorBoard when installed."""
    callbacks = [keras.callbacks.BackupAndRestore(backup_dir, save_freq=opts["backup_every_steps"],
                                                  double_checkpoint=True),
                 Throughput(log), epoch_logs, keras.callbacks.TerminateOnNaN()]
    if importlib.util.find_spec("tensorboard") is not None:
        callbacks.append(keras.callbacks.TensorBoard(os.path.join(out_dir, "logs"), update_freq=50))
    else:
        log("TensorBoard logs are off: the tensorboard package is not installed (pip install tensorboard)")
    return callbacks


def _record_epochs(state: dict, epoch_logs: EpochLogs) -> None:
    """Append this run's epochs (and those of the interrupted run it resumed) to ``state``'s history."""
    state.setdefault("history", {})
    for epoch in sorted(epoch_logs.logs):
        state["tokens_per_second"].append(epoch_logs.logs[epoch]["tokens_per_second"])
        for key, value in epoch_logs.logs[epoch].items():
            state["history"].setdefault(key, []).append(value)


def _load_initial_weights(model: BiLanguageModel, source: str, vocab: Vocabulary) -> None:
    files = preset_files(source)
    src_options = load_options(files["options"])
    for key in _BILM_KEYS:
        if src_options.get(key) != model.options.get(key):
            raise InputError(f"cannot continue from {source!r}: its '{key}' options differ from this run's")
    model.bilm.set_weight_arrays(iter_weights_hdf5(files["weights"], src_options))
    if files.get("softmax") and files.get("vocab") and Vocabulary.load(files["vocab"]) == vocab:
        model.load_softmax_hdf5(files["softmax"])
