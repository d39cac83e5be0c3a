"""Pretraining / continued training of a BiLanguageModel with ``model.fit``.

Output folder (also a valid preset folder for ``from_preset``)::

    options.json   the biLM options + training settings (bilm-tf style keys, n_tokens_vocab filled in)
    vocab.txt      bilm-tf vocabulary file
    weights.hdf5   biLM weights, released layout (written atomically at the end)
    softmax.hdf5   softmax/W [V, P], softmax/b [V] (written atomically at the end)
    state.json     epochs completed, tokens/s per epoch, validation perplexity per direction
    manifest.json  what the run is made from: the training files (size, sha256), the options, the vocabulary
    backup/        the state of an unfinished run (EpochEndBackup: weights, optimizer, dropout seeds, position in
                   the data; the previous backup too); a re-run resumes from it exactly. Deleted only once
                   weights.hdf5 and state.json are written
    logs/          TensorBoard logs
    .lock          locked while a run writes the folder (a second run is refused)
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import reprlib
import shutil
import time
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from elmo_keras.errors import InputError
from elmo_keras.io.load import resolve
from elmo_keras.io.options import load_options, positive_int
from elmo_keras.io.weights import save_weights_hdf5
from elmo_keras.lm.data import DEFAULT_BUCKETS, batches_per_pass, lm_dataset, lm_stream
from elmo_keras.lm.model import BiLanguageModel
from elmo_keras.lm.vocab import Vocabulary
from elmo_keras.tasks.callbacks import Throughput
from elmo_keras.utils.backend import require_tensorflow
from elmo_keras.utils.files import (
    LOCK,
    exclusive_lock,
    file_sha256,
    fsync_path,
    publish,
    remove_stale_temporaries,
    write_json,
)

#: Training settings read from options.json (bilm-tf names where bilm-tf has one), with their defaults.
TRAIN_DEFAULTS = {
    "batch_size": 64,
    "n_epochs": 10,
    "dropout": 0.1,
    "n_negative_samples_batch": 0,
    "all_clip_norm_val": 10.0,
    "optimizer": "adam",
    "learning_rate": 0.002,
    "vocab_min_count": 1,
    "vocab_max_size": None,
    "shuffle_buffer": 10000,
    "buckets": list(DEFAULT_BUCKETS),
    "seed": 0,
    "backup_every_steps": 200,
}
_BILM_KEYS = ("char_cnn", "lstm", "encoder")  # the biLM's architecture (options.encoder_options)
#: options outside a run's identity: how long to train and how often to back up may change on a re-run;
#: n_tokens_vocab is derived from the vocabulary (an options.json taken from an earlier run holds one)
_NOT_IDENTITY = ("n_epochs", "backup_every_steps", "n_tokens_vocab")
#: what a run writes into its folder (besides the lock and the backup folders): --restart removes these
_OUTPUTS = ("manifest.json", "options.json", "vocab.txt", "weights.hdf5", "softmax.hdf5", "state.json", "logs")


def training_options(options: dict | str | os.PathLike) -> dict:
    """Options with the training defaults (:data:`TRAIN_DEFAULTS`) filled in; checks the training settings.

    Args:
        options: the options, as a dict or the path of an options.json.

    Returns:
        A new dict: ``TRAIN_DEFAULTS`` updated with ``options``.

    Example:

    ```python
    from elmo_keras.lm.train import training_options

    opts = training_options({
        "char_cnn": {"filters": [[1, 8], [2, 8]], "n_highway": 1, "embedding": {"dim": 4}},
        "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 1},
        "n_epochs": 3,
    })
    assert opts["n_epochs"] == 3 and opts["optimizer"] == "adam"   # given; a default
    ```
    """
    opts = {**TRAIN_DEFAULTS, **load_options(options)}
    if opts["optimizer"] not in ("adam", "adagrad"):
        raise InputError(f"options: 'optimizer' must be 'adam' or 'adagrad', got {opts['optimizer']!r}")
    for key in ("batch_size", "n_epochs"):
        positive_int(opts[key], f"options: '{key}'")
    return opts


def make_optimizer(opts: dict) -> keras.optimizers.Optimizer:
    """Adam or Adagrad (bilm-tf: Adagrad, lr 0.2, accumulator 1.0) with global-norm gradient clipping.

    Args:
        opts: training options, as :func:`training_options` returns them (``optimizer``, ``learning_rate``,
            ``all_clip_norm_val``).

    Returns:
        A Keras optimizer.
    """
    clip = opts["all_clip_norm_val"]
    if opts["optimizer"] == "adagrad":
        return keras.optimizers.Adagrad(opts["learning_rate"], initial_accumulator_value=1.0, global_clipnorm=clip)
    return keras.optimizers.Adam(opts["learning_rate"], global_clipnorm=clip)


def _cluster(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(number of workers, this worker's index as tf.distribute numbers input pipelines: 0 is the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    if not spec:
        return 1, 0
    n = len(spec.get("worker", [])) + len(spec.get("chief", []))
    return n, 0 if resolver.task_type == "chief" else resolver.task_id + ("chief" in spec)


class EpochLogs(keras.callbacks.Callback):
    """Every epoch's logs (losses, perplexities, tokens/s) by epoch, also kept in ``path`` (in the backup folder),
    so that a run resumed from its backup keeps the epochs it ran before the interruption; logs one line per
    epoch (the validation perplexity only when there is validation data). Runs after :class:`Throughput`.

    Args:
        path: the JSON file that keeps the logs.
        before_epoch: int, logs of epochs from this one on are dropped from ``path`` (they will run again).
        log: called with each epoch's line.

    Example:

    ```python
    import os, tempfile
    from elmo_keras.lm.train import EpochLogs

    lines = []
    epoch_logs = EpochLogs(os.path.join(tempfile.mkdtemp(), "epoch_logs.json"), 0, lines.append)
    epoch_logs.on_epoch_end(0, {"tokens": 100, "tokens_per_second": 50, "forward_ppl": 9, "backward_ppl": 8})
    assert lines == ["epoch 1: 100 tokens in 2.0 s = 50 tokens/s; perplexity train forward 9.0 backward 8.0"]
    ```
    """

    def __init__(self, path: str, before_epoch: int, log: Callable[[str], None]):
        super().__init__()
        self.path, self.log = path, log
        self.logs = {int(e): v for e, v in (_read_json(path) or {}).items() if int(e) < before_epoch}

    def on_epoch_end(self, epoch, logs=None):
        logs = {key: float(value) for key, value in (logs or {}).items()}
        self.logs[epoch] = logs
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_json(self.path, {str(e): v for e, v in self.logs.items()})
        speed = logs["tokens_per_second"]
        line = (
            f"epoch {epoch + 1}: {logs['tokens']:.0f} tokens in {logs['tokens'] / max(speed, 1e-9):.1f} s = "
            f"{speed:.0f} tokens/s; perplexity train forward {logs['forward_ppl']:.1f} backward "
            f"{logs['backward_ppl']:.1f}"
        )
        if "val_forward_ppl" in logs:
            line += f", valid forward {logs['val_forward_ppl']:.1f} backward {logs['val_backward_ppl']:.1f}"
        self.log(line)


class EpochEndBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore for an exact resume: every ``save_freq`` steps and at the end of every epoch it backs up
    what the next step depends on, and :meth:`restore` puts it back, so that a run killed at any moment and resumed
    trains the steps it had not trained, each once, as an uninterrupted run would.

    A backup is Keras' weights file (the weights and the optimizer: Adam's moments, its step count) and the
    metadata: ``epoch`` (epochs done), ``steps_done`` (steps of the next epoch done), ``position`` (batches of the
    data stream trained), ``iterations`` (the optimizer's step count, which pairs the metadata with its weights
    file) and ``seed_states`` (the dropout layers' seed generators, which Keras' weights file leaves out). Each file
    is written under a temporary name, then renamed; the previous backup is kept (``previous.*``), so a kill while
    one is written leaves the other. Keras' own callback does not skip the trained steps of a resumed epoch (it
    replays the epoch from its start), records no seeds and no position, and writes in place.

    Use: :meth:`restore` before ``fit``; feed ``fit`` the data from :attr:`position` on
    (:func:`~elmo_keras.lm.data.lm_stream`), with ``initial_epoch=epoch``. The first :attr:`steps_done` steps of
    that epoch are then counted but not run (they read no data: the stream starts after them). The backup is kept
    when training ends: :func:`pretrain` deletes it once weights.hdf5 and state.json are written.

    Args:
        backup_dir: the folder of the backup.
        save_freq: int, steps between backups (besides the end of every epoch).

    Attributes:
        epoch: int, the epoch to train next (epochs done).
        steps_done: int, steps of that epoch already trained.
        position: int, batches of the data stream already trained.

    Example:

    ```python
    import os, tempfile
    import keras
    import numpy as np
    import tensorflow as tf
    from elmo_keras.lm.train import EpochEndBackup

    backup = os.path.join(tempfile.mkdtemp(), "backup")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    data = tf.data.Dataset.from_tensors((np.ones((4, 2)), np.ones((4, 1)))).repeat()
    callback = EpochEndBackup(backup, save_freq=2)
    callback.restore(model, epoch=0, position=0)  # nothing backed up yet: starts at epoch 0, batch 0
    model.fit(data, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[callback], shuffle=False)
    assert callback.restore(model, epoch=0, position=0)  # kept when training ends
    assert (callback.epoch, callback.steps_done, callback.position) == (2, 0, 6)
    ```
    """

    def __init__(self, backup_dir: str, save_freq: int):
        super().__init__(backup_dir, save_freq=save_freq, double_checkpoint=True, delete_checkpoint=False)
        # names of our own: Keras' ".bkp" file cannot be loaded (load_weights wants ".weights.h5")
        self._prev_weights_path = os.path.join(backup_dir, "previous.weights.h5")
        self._prev_training_metadata_path = os.path.join(backup_dir, "previous_metadata.json")
        self.epoch, self.steps_done, self.position = 0, 0, 0
        self._ahead = 0  # steps of the resumed epoch to count without running them

    def restore(self, model: keras.Model, epoch: int, position: int) -> bool:
        """Load the newest complete backup into ``model`` (built and compiled) and take its place in training;
        without one, start at ``epoch`` and stream ``position``.

        Args:
            model: the model, built, with its optimizer (built here if it is not).
            epoch: int, the epoch to start at when there is no backup.
            position: int, the data stream's position (batches) when there is no backup.

        Returns:
            Whether a backup was restored.

        Raises:
            InputError: the folder holds metadata but no weights file that goes with it (damaged, or written by an
                older elmo-keras, which recorded no position).
        """
        self.set_model(model)
        self.epoch, self.steps_done, self.position = epoch, 0, position
        metadata = [m for m in map(_metadata, (self._training_metadata_path, self._prev_training_metadata_path)) if m]
        if metadata:
            if not model.optimizer.built:
                with model.distribute_strategy.scope():
                    model.optimizer.build(model.trainable_variables)
            found = next(filter(None, map(self._load_weights_of, (self._weights_path, self._prev_weights_path))), None)
            if found is None:
                raise InputError(
                    f"{self.backup_dir} holds no complete backup (damaged, or written by an older elmo-keras that "
                    f"recorded no position in the data): delete that folder to train the interrupted run's epochs "
                    f"again, or pass --restart to start over"
                )
            for variable, value in zip(_seed_states(model), found["seed_states"], strict=True):
                variable.assign(value)
            self.epoch, self.steps_done, self.position = found["epoch"], found["steps_done"], found["position"]
        self._current_epoch = self.epoch  # Keras' epoch counter, which it writes into the metadata
        return bool(metadata)

    def _load_weights_of(self, path: str) -> dict | None:
        """Load the weights file ``path``; return the metadata written with it (None: no such file or metadata)."""
        if not os.path.exists(path):
            return None
        try:
            self.model.load_weights(path)
        except (OSError, ValueError):  # damaged by something else than a kill (the writes are atomic)
            return None
        iterations = int(self.model.optimizer.iterations.numpy())
        candidates = map(_metadata, (self._training_metadata_path, self._prev_training_metadata_path))
        return next((m for m in candidates if m and m.get("iterations") == iterations), None)

    def on_train_begin(self, logs=None):
        # not Keras' restore: restore() ran before fit, since the data must start at the restored position
        self._ahead = self.steps_done
        if self._ahead:
            self._train_function = self.model.train_function
            self.model.train_function = self._fast_forward

    def _fast_forward(self, iterator):
        """Keras' train function for a step the restored weights have trained: nothing runs, no data is read."""
        return self.model.get_metrics_result()

    def _end_fast_forward(self):
        if self._ahead:
            self.model.train_function, self._ahead = self._train_function, 0

    def on_train_batch_end(self, batch, logs=None):
        if batch < self._ahead:  # fast-forwarded: no backup, no position; Keras' count of batches skips it
            self._last_batch_seen = batch
            if batch + 1 == self._ahead:
                self._end_fast_forward()
            return
        self.steps_done, self.position = batch + 1, self.position + 1
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._end_fast_forward()  # an epoch shorter than the steps restored (a smaller --steps-per-epoch)
        super().on_epoch_end(epoch, logs)  # counts the epoch as done
        self.epoch, self.steps_done = epoch + 1, 0
        if not self.model.stop_training:  # a NaN loss stops training: keep the last good backup
            self._save_model()

    def _save_model(self):
        """Back up (the previous backup becomes ``previous.*``): at every moment one weights file and the metadata
        with its ``iterations`` are complete."""
        os.makedirs(self.backup_dir, exist_ok=True)
        for latest, previous in (
            (self._weights_path, self._prev_weights_path),
            (self._training_metadata_path, self._prev_training_metadata_path),
        ):
            if os.path.exists(latest):
                os.replace(latest, previous)
        staging = os.path.join(self.backup_dir, "staging.weights.h5")  # Keras wants the suffix; a kill's is rewritten
        self.model.save_weights(staging, overwrite=True)
        fsync_path(staging)
        publish(staging, self._weights_path)
        metadata = {
            "epoch": self._current_epoch,
            "batch": self._last_batch_seen,
            "steps_done": self.steps_done,
            "position": self.position,
            "iterations": int(self.model.optimizer.iterations.numpy()),
            "seed_states": [variable.numpy().tolist() for variable in _seed_states(self.model)],
        }
        write_json(self._training_metadata_path, metadata)


def _seed_states(model: keras.Model) -> list:
    """The model's random seed generators' state variables (its variables that are not weights), in build order."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def _metadata(path: str) -> dict | None:
    """A backup's metadata, or None: no such file, or a damaged one."""
    try:
        return _read_json(path)
    except ValueError:  # damaged by something else than a kill (write_json is atomic)
        return None


def _read_json(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _check_paths(train_files: Sequence[str], valid_file: str | None, out_dir: str) -> None:
    """InputError, before any work, for a missing or unreadable --train/--valid file and an --out that is a file.
    (An --out that cannot be created or written is refused when it is locked.)"""
    named = [("training file (--train)", path) for path in train_files]
    for what, path in named + ([("validation file (--valid)", valid_file)] if valid_file else []):
        if not os.path.isfile(path):
            raise InputError(f"{what} {'is not a file' if os.path.exists(path) else 'not found'}: {path}")
        if not os.access(path, os.R_OK):
            raise InputError(f"{what} is not readable: {path}")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"--out {out_dir} is a file; give a folder (a new one, or an earlier run's to resume it)")


def _identity(train_files: Sequence[str], opts: dict, init_from: str | None) -> dict:
    """What the run is made from, as manifest.json holds it (less the vocabulary's sha256)."""
    identity = {
        "train": [{"path": path, "size": os.path.getsize(path), "sha256": file_sha256(path)} for path in train_files],
        "options": {key: value for key, value in opts.items() if key not in _NOT_IDENTITY},
        "init_from": init_from,
    }
    return json.loads(json.dumps(identity))  # as read back from the file (lists, not tuples)


def _differences(old: dict, new: dict, vocab_path: str) -> list[str]:
    """How the run in the folder (manifest ``old``) differs from this one (``new``), in words; empty: the same.
    A re-run may leave out --init-from (it only matters to the first epoch)."""

    def file(entry: dict) -> str:
        return f"{entry['path']} ({entry['size']} bytes, sha256 {entry['sha256'][:12]})"

    files_then, files_now = old["train"], new["train"]
    if len(files_then) != len(files_now):
        found = [f"--train ({len(files_now)} file(s) now; then {', '.join(file(f) for f in files_then)})"]
    else:
        found = [
            f"--train file {i + 1}: {file(n)} now, {file(t)} then"
            for i, (t, n) in enumerate(zip(files_then, files_now))
            if (t["size"], t["sha256"]) != (n["size"], n["sha256"])
        ]
    then, now = _flat(old["options"]), _flat(new["options"])
    found += [
        f"options '{key}' ({reprlib.repr(then.get(key))} then, {reprlib.repr(now.get(key))} now)"
        for key in sorted(then.keys() | now.keys())
        if then.get(key) != now.get(key)
    ]
    if new["init_from"] is not None and new["init_from"] != old["init_from"]:
        found.append(f"--init-from ({old['init_from']!r} then, {new['init_from']!r} now)")
    if not found and (not os.path.exists(vocab_path) or file_sha256(vocab_path) != old["vocab_sha256"]):
        found.append(f"{os.path.basename(vocab_path)} (changed or removed since the run began)")
    return found


def _flat(options: dict, prefix: str = "") -> dict:
    """Nested options as {"lstm.dim": 16, ...}, so that a difference names the very setting."""
    flat = {}
    for key, value in options.items():
        flat.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


def _has_progress(out_dir: str) -> bool:
    """Whether the folder holds trained epochs: finished ones (state.json) or a backup of an unfinished run."""
    return os.path.exists(os.path.join(out_dir, "state.json")) or bool(
        glob.glob(os.path.join(glob.escape(out_dir), "backup*", "*_metadata.json"))
    )


def _discard(out_dir: str) -> None:
    """Remove what runs wrote into ``out_dir`` (not the lock, not files of others)."""
    names = [*_OUTPUTS, *(name for name in os.listdir(out_dir) if name.startswith("backup"))]
    for path in (os.path.join(out_dir, name) for name in names):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
    remove_stale_temporaries(out_dir)


def _new_vocabulary(train_files: Sequence[str], opts: dict) -> Vocabulary:
    """The vocabulary of ``train_files``; InputError when the sampled softmax would sample all of it."""
    vocab = Vocabulary.from_files(train_files, opts["vocab_min_count"], opts["vocab_max_size"])
    n_sampled = opts["n_negative_samples_batch"]
    if n_sampled >= len(vocab):
        raise InputError(
            f"options: 'n_negative_samples_batch' ({n_sampled}) must be smaller than the vocabulary "
            f"size, {len(vocab)} words in --train; lower it below {len(vocab)}, or set it to 0 for "
            f"the full softmax (exact, and cheap for a vocabulary this small)"
        )
    return vocab


def _prepare_folder(
    out_dir: str,
    opts: dict,
    train_files: Sequence[str],
    init_from: str | None,
    restart: bool,
    log: Callable[[str], None],
) -> tuple[dict, Vocabulary]:
    """Options and vocabulary of the run (chief). The folder's earlier run is resumed or continued when its
    manifest matches this run; else it is refused (InputError) when it trained anything, and discarded when it
    trained nothing (or ``restart``). Writes vocab.txt, options.json and manifest.json."""
    identity = _identity(train_files, opts, init_from)
    manifest_path, vocab_path = os.path.join(out_dir, "manifest.json"), os.path.join(out_dir, "vocab.txt")
    old = _read_json(manifest_path)
    differences = [] if old is None else _differences(old, identity, vocab_path)
    if old is None and _has_progress(out_dir) and not restart:
        raise InputError(
            f"{out_dir} holds a pretraining run without manifest.json (from an older elmo-keras), so "
            f"what it was made from cannot be checked; pass --restart to discard it and start over"
        )
    if differences and _has_progress(out_dir) and not restart:
        raise InputError(
            f"{out_dir} holds a pretraining run made from other input: {'; '.join(differences)}. "
            f"Re-run with its --train files and options to resume or continue it, or pass --restart "
            f"to discard it and start over"
        )
    if old is not None and not differences and not restart:
        vocab = Vocabulary.load(vocab_path)
    else:
        if differences and not restart:
            log(f"{out_dir}: discarding an unfinished run that trained nothing ({'; '.join(differences)})")
        _discard(out_dir)
        vocab = _new_vocabulary(train_files, opts)
        vocab.save(vocab_path)
    opts = {**opts, "n_tokens_vocab": len(vocab)}
    write_json(os.path.join(out_dir, "options.json"), opts)
    write_json(manifest_path, {**identity, "vocab_sha256": file_sha256(vocab_path)})
    return opts, vocab


def pretrain(
    train_files: Sequence[str | os.PathLike],
    valid_file: str | os.PathLike | None,
    options: dict | str | os.PathLike,
    out_dir: str | os.PathLike,
    epochs: int | None = None,
    strategy: tf.distribute.Strategy | None = None,
    init_from: str | None = None,
    steps_per_epoch: int | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    verbose: int | str = "auto",
    log: Callable[[str], None] = print,
    restart: bool = False,
) -> tuple[BiLanguageModel, dict]:
    """Train (or resume, or continue from ``init_from``) a biLM; write the output folder (see module doc).

    A re-run into the same ``out_dir`` resumes an interrupted run or continues a finished one up to ``epochs``. It
    needs the same training files and options (n_epochs and backup_every_steps aside; the other arguments may
    change): others are refused (:class:`InputError` naming them) unless ``restart``; a folder whose run trained
    nothing yet is simply rebuilt. A second run into ``out_dir`` while one runs is refused.

    Args:
        train_files: text files, one whitespace-tokenised sentence per line.
        valid_file: a held-out file in the same format, or `None`.
        options: the biLM options with training settings (:data:`TRAIN_DEFAULTS`), as a dict or a path.
        out_dir: the output folder (also a preset folder for ``from_preset``).
        epochs: int, train up to this many epochs in all, or `None` for the options' ``n_epochs``. Defaults to
            `None`.
        strategy: a ``tf.distribute.Strategy``, or `None` for the current one. Defaults to `None`.
        init_from: a preset name (shipped or published, see ``ek.list_presets()``), or a folder or folder URL
            with options.json + weights.hdf5 (+ softmax.hdf5 when its vocab.txt is the same as this run's) whose
            architecture equals ``options``: continued training. Defaults to `None`.
        steps_per_epoch: int, batches per epoch (the training data then repeats), or `None` for one pass.
            Defaults to `None`.
        callbacks: extra Keras callbacks. Defaults to `()`.
        verbose: ``model.fit``'s verbosity. Defaults to `"auto"`.
        log: called with each progress line. Defaults to `print`.
        restart: bool, discard the folder's earlier run. Defaults to `False`.

    Returns:
        ``(model, state)``: the :class:`BiLanguageModel`, and ``state`` (also in ``out_dir/state.json``) with
        epochs_completed, tokens_per_second per epoch, wall_seconds, history and valid_perplexity
        {"forward", "backward"} (when ``valid_file`` is given).

    Example:

    ```python
    import os, tempfile
    from elmo_keras.lm import pretrain

    folder = tempfile.mkdtemp()
    train = os.path.join(folder, "train.txt")
    with open(train, "w") as f:
        f.write("the cat sat on the mat .\\nthe dog sat on the log .\\n" * 4)
    options = {
        "char_cnn": {"filters": [[1, 8], [2, 8]], "n_highway": 1, "embedding": {"dim": 4}},
        "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 1},
        "batch_size": 4,
    }
    out = os.path.join(folder, "run")
    model, state = pretrain([train], None, options, out, epochs=1, verbose=0, log=lambda line: None)
    assert state["epochs_completed"] == 1
    assert {"weights.hdf5", "softmax.hdf5", "vocab.txt"} <= set(os.listdir(out))
    ```
    """
    require_tensorflow("pretrain", "pretrain on TensorFlow; the biLM it writes loads on any backend")
    out_dir, train_files = os.fspath(out_dir), [os.fspath(f) for f in train_files]
    valid_file = os.fspath(valid_file) if valid_file else None
    strategy = strategy or tf.distribute.get_strategy()
    n_workers, worker = _cluster(strategy)
    is_chief = worker == 0
    opts = training_options(options)
    epochs = opts["n_epochs"] if epochs is None else positive_int(epochs, "epochs (--epochs)")
    if steps_per_epoch is not None:
        positive_int(steps_per_epoch, "steps_per_epoch (--steps-per-epoch)")
    _check_paths(train_files, valid_file, out_dir)
    task = "" if is_chief else f"-{strategy.cluster_resolver.task_id}"
    with exclusive_lock(out_dir, "pretrain", LOCK + task):
        if is_chief:
            opts, vocab = _prepare_folder(out_dir, opts, train_files, init_from, restart, log)
        else:  # the chief keeps the folder; a worker's vocabulary, built from the same files, is the chief's
            vocab = _new_vocabulary(train_files, opts)
            opts = {**opts, "n_tokens_vocab": len(vocab)}
        backup_dir = os.path.join(out_dir, "backup" + task)
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
        shards = (n_workers, worker) if len(train_files) >= n_workers > 1 else (1, 0)  # by file, else by batch
        pass_batches = batches_per_pass(train_files, opts["batch_size"], opts["buckets"], *shards)
        steps = steps_per_epoch or pass_batches
        backup = EpochEndBackup(backup_dir, opts["backup_every_steps"])
        if backup.restore(model, state["epochs_completed"], state["epochs_completed"] * steps):
            model.softmax_trained = True  # the backup holds trained steps
        epoch_logs = EpochLogs(os.path.join(backup_dir, "epoch_logs.json"), backup.epoch, log)
        callbacks = [*callbacks, *_training_callbacks(opts, out_dir, backup, epoch_logs, log)]
        train_ds = _train_stream(train_files, vocab, opts, shards, backup.position, pass_batches)
        valid_ds = _valid_dataset(valid_file, vocab, opts) if valid_file else None
        start = time.perf_counter()
        if backup.epoch >= epochs:  # killed after its last epoch, or a longer run asked to stop now: finish from backup
            log(f"restored epoch {backup.epoch} from {backup_dir} (>= --epochs {epochs}): writing those weights")
            state["epochs_completed"] = backup.epoch
        else:
            if backup.steps_done:
                log(f"resuming epoch {backup.epoch + 1} after its step {backup.steps_done} from {backup_dir}")
            fitted = model.fit(
                train_ds,
                epochs=epochs,
                initial_epoch=backup.epoch,
                validation_data=valid_ds,
                steps_per_epoch=steps,
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,  # the dataset shuffles (Keras warns that it ignores shuffle=True for datasets)
            )
            if model.stop_training or not fitted.epoch:
                raise RuntimeError("training stopped early (NaN loss?): weights were not written; see the logs")
            state["epochs_completed"] = fitted.epoch[-1] + 1
        state["wall_seconds"] += time.perf_counter() - start
        _record_epochs(state, epoch_logs)
        state.pop("valid_perplexity", None)  # an earlier run's would not describe the new weights
        if valid_ds is not None:
            metrics = model.evaluate(valid_ds, return_dict=True, verbose=0)
            state["valid_perplexity"] = {
                "forward": float(metrics["forward_ppl"]),
                "backward": float(metrics["backward_ppl"]),
            }
        if is_chief:
            save_weights_hdf5(model.bilm, os.path.join(out_dir, "weights.hdf5"))
            model.save_softmax_hdf5(os.path.join(out_dir, "softmax.hdf5"))
            write_json(state_path, state)
        shutil.rmtree(backup_dir)  # only now: a run killed before this point resumes from it
        return model, state


def _train_stream(
    files: list[str], vocab: Vocabulary, opts: dict, shards: tuple[int, int], start: int, pass_batches: int
) -> tf.data.Dataset:
    """The training batches from stream position ``start`` on: this worker's files when ``shards`` splits them
    (as tf.data's FILE auto-sharding would), else all of them, split by batch across workers."""
    ds = lm_stream(
        files,
        vocab,
        opts["batch_size"],
        start=start,
        pass_batches=pass_batches,
        shuffle_buffer=opts["shuffle_buffer"],
        seed=opts["seed"],
        buckets=opts["buckets"],
        max_characters_per_token=opts["char_cnn"]["max_characters_per_token"],
        num_shards=shards[0],
        shard_index=shards[1],
    )
    return _auto_shard(ds, by_file=shards[0] > 1)


def _valid_dataset(file: str, vocab: Vocabulary, opts: dict) -> tf.data.Dataset:
    """The validation batches, in file order, split by batch across workers."""
    ds = lm_dataset(
        [file],
        vocab,
        opts["batch_size"],
        shuffle_buffer=0,
        buckets=opts["buckets"],
        max_characters_per_token=opts["char_cnn"]["max_characters_per_token"],
    )
    return _auto_shard(ds, by_file=False)


def _auto_shard(ds: tf.data.Dataset, by_file: bool) -> tf.data.Dataset:
    """tf.distribute's auto-sharding off when the files are already split per worker, else by batch (DATA)."""
    ds_options = tf.data.Options()
    ds_options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.OFF if by_file else tf.data.experimental.AutoShardPolicy.DATA
    )
    return ds.with_options(ds_options)


def _training_callbacks(
    opts: dict, out_dir: str, backup: EpochEndBackup, epoch_logs: EpochLogs, log: Callable[[str], None]
) -> list[keras.callbacks.Callback]:
    """Throughput, per-epoch logs, NaN stop, resume (after the epoch's logs: a backed-up epoch has its logs), and
    TensorBoard when installed."""
    callbacks = [
        Throughput(),
        epoch_logs,
        keras.callbacks.TerminateOnNaN(),
        backup,
    ]
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
    """``--init-from``: any source of :func:`elmo_keras.io.load.resolve`; its softmax too when its vocabulary is
    this run's."""
    files = resolve(source)
    weights = files.read()
    for key in _BILM_KEYS:
        if weights.options.get(key) != model.options.get(key):
            raise InputError(f"cannot continue from {source!r}: its '{key}' options differ from this run's")
    model.bilm.set_weight_arrays(weights.arrays)
    if files.softmax and files.vocab and Vocabulary.load(files.vocab) == vocab:
        model.load_softmax_hdf5(files.softmax)
