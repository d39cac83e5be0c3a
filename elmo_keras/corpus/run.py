"""Embed a text file, one line at a time, crash-safe and resumable: :func:`embed_file`.

The work goes into ``OUTPUT.partial/``: ``manifest.json`` (what the run is) and committed shards, each committed
by an atomic rename: shard files, or for hdf5 output records of where the shard's lines lie in the file being
assembled (see :mod:`elmo_keras.corpus.layout`). Each shard is committed as soon as it is computed, so a killed run
(SIGKILL, SIGTERM, Ctrl-C) loses at most the two shards in progress and resumes from the committed ones when the
same command is run again, as does a run stopped by a full disk or a file-size limit; a run whose input, model or
settings differ stops and says what differs. An OUTPUT that is or holds the input is refused. At the end the
shards become OUTPUT (``hdf5``: one dataset per line; ``npy``: one file per line; ``shards``: the folder itself).
With ``pool`` each line is stored as one vector (per layer with ``layers="all"``), and the lines without tokens
(zeros) are flagged when the run completes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO, Protocol

import keras
import numpy as np

from elmo_keras.corpus import layout
from elmo_keras.corpus.assembly import Assembly, make_assembly
from elmo_keras.corpus.direct_io import Scratch
from elmo_keras.corpus.lines import InputScan, decode_line, read_lines, scan_input
from elmo_keras.errors import InputError
from elmo_keras.layers.pooling import pool_modes
from elmo_keras.text import tokenize
from elmo_keras.utils.files import no_room_errno, publish, remove_stale_temporaries, write_json

OUTPUT_FORMATS = ("hdf5", "shards", "npy")
LOCK = ".lock"


class Embedder(Protocol):
    """What :func:`embed_file` needs of an embedder (:class:`elmo_keras.ElmoEmbedder` is one)."""

    bilm: keras.Layer

    def embed_sentences(self, sentences: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
        """Embed token lists, in order.

        Args:
            sentences: token lists.

        Returns:
            An iterator over one float array [L, T, D] per sentence.
        """
        ...


#: commit(shard, its arrays): commits a shard computed in this process (a shard file or the hdf5 assembly's record)
Commit = Callable[[int, list[np.ndarray]], None]
#: runner(scan, folder, shards, manifest, commit): commits the listed shards, through ``commit`` where it computes
#: them in this process, else as shard files it writes into ``folder`` itself (see embed_shard)
Runner = Callable[[InputScan, str, list[int], dict, Commit], None]


@dataclasses.dataclass(frozen=True)
class EmbedSettings:
    """How lines become stored arrays; every field is part of the run's identity. Checked when made
    (:class:`InputError`).

    Args:
        layers: "all", "top" or "average". Defaults to "all".
        output_format: "hdf5", "shards" or "npy". Defaults to "hdf5".
        storage_dtype: "float32" or "float16". Defaults to "float32".
        shard_lines: int >= 1, lines per shard. Defaults to 1024.
        pool: `None` (token vectors), or `"mean"`, `"max"` or a list of both (one vector per line), see
            :func:`~elmo_keras.layers.pooling.pool_modes`. Defaults to `None`.
    """

    layers: str = "all"
    output_format: str = "hdf5"
    storage_dtype: str = "float32"
    shard_lines: int = 1024
    pool: str | Sequence[str] | None = None

    def __post_init__(self):
        for name, value, choices in (
            ("layers", self.layers, layout.LAYER_CHOICES),
            ("format", self.output_format, OUTPUT_FORMATS),
            ("storage dtype", self.storage_dtype, layout.STORAGE_DTYPES),
        ):
            if value not in choices:
                raise InputError(f"{name} must be one of {'|'.join(choices)}, got {value!r}")
        if isinstance(self.shard_lines, bool) or not isinstance(self.shard_lines, int) or self.shard_lines < 1:
            raise InputError(f"shard_lines must be an integer >= 1, got {self.shard_lines!r}")
        if self.pool is not None:
            object.__setattr__(self, "pool", pool_modes(self.pool))  # frozen: the checked modes, a tuple


def model_identity(embedder: Embedder) -> dict:
    """sha256 over the biLM's config (less its auto-generated name) and every weight, and its dtype policy:
    any change of model files is seen, a second load of the same files is the same model.

    Args:
        embedder: an :class:`Embedder` (its ``bilm``).

    Returns:
        The model's part of a run's manifest: ``{"sha256": ..., "dtype": ...}``.
    """
    bilm = embedder.bilm
    config = {k: v for k, v in bilm.get_config().items() if k != "name"}
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for weight in bilm.weights:
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(weight))
        digest.update(f"{value.shape}{value.dtype}".encode())
        digest.update(value.tobytes())
    return {"sha256": digest.hexdigest(), "dtype": bilm.dtype_policy.name}


def partial_path(output_path: str) -> str:
    """The run folder of ``output_path``.

    Args:
        output_path: the run's OUTPUT.

    Returns:
        ``output_path + ".partial"``.
    """
    return os.fspath(output_path) + ".partial"


def _remove_finished_leftover(output_path: str) -> None:
    """A run killed between publishing OUTPUT and deleting its run folder leaves a finished folder: drop it."""
    folder = partial_path(output_path)
    if os.path.exists(output_path) and os.path.isfile(os.path.join(folder, layout.MANIFEST)):
        if layout.read_manifest(folder).get("complete"):
            shutil.rmtree(folder)


def _inside(path: str, folder: str) -> bool:
    """Whether the resolved ``path`` is ``folder`` or lies under it."""
    return os.path.commonpath([path, folder]) == folder


def check_overlap(output_path: str, keep: dict[str, str]) -> None:
    """Refuse (:class:`InputError`) an OUTPUT whose writing would destroy a file the run needs: ``keep`` maps a
    name ("input", "--weights", ...) to its path. The run replaces OUTPUT (a folder with all in it, for shards /
    npy) and deletes OUTPUT.partial, so neither may be or hold such a file; paths are compared resolved (symbolic
    links, ``./``).

    Args:
        output_path: the run's OUTPUT.
        keep: name -> path of each file the run needs.
    """
    output, folder = os.path.realpath(output_path), os.path.realpath(partial_path(output_path))
    for name, path in keep.items():
        real = os.path.realpath(path)
        if real == output:
            raise InputError(
                f"output {output_path} is the {name} file {path}: the run would replace it; give another output name"
            )
        for place, what in ((output, "output"), (folder, "run folder")):
            if _inside(real, place):
                raise InputError(
                    f"the {name} file {path} is or lies in {place}, the {what} that this run replaces or "
                    f"deletes; give an output name outside the folder that holds it"
                )


def check_paths(
    input_path: str, output_path: str, output_format: str, overwrite: bool, keep: dict[str, str] | None = None
) -> None:
    """Fail before any work when the input or the output place is wrong (:class:`InputError`), including an
    output that overlaps the input or the files in ``keep`` (see :func:`check_overlap`). (A finished run folder
    left by a kill between publishing OUTPUT and deleting the folder is removed first.)

    Args:
        input_path: the input text file.
        output_path: the run's OUTPUT.
        output_format: "hdf5", "shards" or "npy".
        overwrite: bool, whether an existing OUTPUT may be replaced.
        keep: more files the run needs, name -> path, or `None`. Defaults to `None`.
    """
    check_overlap(output_path, {"input": input_path, **(keep or {})})
    _remove_finished_leftover(output_path)
    if not os.path.exists(input_path):
        raise InputError(f"input file not found: {input_path}")
    if not os.path.isfile(input_path):
        raise InputError(f"input is not a file: {input_path}")
    if not os.access(input_path, os.R_OK):
        raise InputError(f"input file is not readable: {input_path}")
    parent = os.path.dirname(os.path.abspath(output_path))
    if not os.path.isdir(parent):
        raise InputError(f"output folder does not exist: {parent} (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output folder is not writable: {parent}")
    if output_format == "hdf5" and os.path.isdir(output_path):
        raise InputError(
            f"output {output_path} is a folder; --format hdf5 writes a file (give a file name, or "
            f"use --format shards for a folder)"
        )
    if os.path.lexists(output_path) and not overwrite:
        raise InputError(
            f"output {output_path} exists; pass --overwrite to replace it (it is replaced only "
            f"when the new output is complete) or choose another name"
        )


def new_manifest(scan: InputScan, model: dict, settings: EmbedSettings) -> dict:
    """The manifest of a run that is not complete yet.

    Args:
        scan: the input's :class:`~elmo_keras.corpus.lines.InputScan`.
        model: the model's identity (:func:`model_identity`).
        settings: the run's :class:`EmbedSettings`.

    Returns:
        The manifest, a dict (written as ``manifest.json``).
    """
    return {
        "format": layout.FORMAT_NAME,
        "version": layout.FORMAT_VERSION,
        "complete": False,
        "input": scan.identity(),
        "model": model,
        "layers": settings.layers,
        "pool": None if settings.pool is None else list(settings.pool),
        "storage_dtype": settings.storage_dtype,
        "output_format": settings.output_format,
        "shard_lines": settings.shard_lines,
        "shards": scan.shards,
    }


def _never_started(folder: str) -> bool:
    """Whether ``folder`` is a run folder killed before its manifest was in place: it holds at most its lock file
    and the manifest's temporary file."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    return all(name == LOCK or name.startswith(f".{layout.MANIFEST}.") for name in os.listdir(folder))


@contextlib.contextmanager
def open_run(folder: str, manifest: dict, restart: bool) -> Iterator[dict]:
    """Create or reopen the run folder ``folder`` (locked against a second run) and yield its manifest.

    Args:
        folder: the run folder.
        manifest: the new run's manifest; an existing run folder's must agree on every
            :data:`~elmo_keras.corpus.layout.IDENTITY` field (else :class:`InputError`).
        restart: bool, delete an existing run folder first.

    Returns:
        A context manager that yields the manifest and holds the lock.
    """
    if restart and os.path.lexists(folder) and (os.path.islink(folder) or not os.path.isdir(folder)):
        os.remove(folder)
    if (
        not restart
        and os.path.lexists(folder)
        and not os.path.exists(os.path.join(folder, layout.MANIFEST))
        and not _never_started(folder)  # killed before its manifest was written: nothing to resume, start anew
    ):
        raise InputError(
            f"{folder} is not a resumable run (left by an older elmo-keras, or not ours): remove "
            f"it, or pass --restart to discard it"
        )
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, LOCK), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another embed run is writing {folder}; wait for it to finish") from None
        if restart:  # only once the lock is ours: a running run's pieces are never deleted under it
            for name in os.listdir(folder):
                if name != LOCK:
                    path = os.path.join(folder, name)
                    shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        if os.path.exists(os.path.join(folder, layout.MANIFEST)):
            old = layout.read_manifest(folder)
            differences = layout.manifest_differences(old, manifest)
            if differences:
                raise InputError(
                    f"{folder} holds an interrupted run that differs from this one in "
                    f"{'; '.join(differences)}. Re-run with the original input and settings to "
                    f"resume it, or pass --restart to discard it and start over"
                )
        else:
            write_json(os.path.join(folder, layout.MANIFEST), manifest)
        remove_stale_temporaries(folder)
        yield manifest


def embed_shard(
    embedder: Embedder,
    scan: InputScan,
    stream: BinaryIO,
    shard: int,
    layers: str,
    pool: Sequence[str] | None = None,
    storage_dtype: str = "float32",
) -> list[np.ndarray]:
    """Embed the lines of ``shard`` (read from ``stream``; the embedder's length sorting spans the shard) -> one
    array per line, reduced per ``layers`` (and pooled over its tokens with ``pool``).

    Args:
        embedder: an :class:`Embedder`.
        scan: the input's :class:`~elmo_keras.corpus.lines.InputScan`.
        stream: the input file, opened binary.
        shard: int, the 0-based shard number.
        layers: "all", "top" or "average".
        pool: `None`, or the pooling modes (a run manifest's ``pool``). Defaults to `None`.
        storage_dtype: "float32" or "float16": each line is converted as soon as it is computed (a float16 run
            holds half the bytes while the shard is written). Defaults to "float32".

    Returns:
        One ``storage_dtype`` array per line: [L, T, D] for "all", else [T, D]; with ``pool`` [L, k * D] or
        [k * D].
    """
    first, count = scan.shard_range(shard)
    stream.seek(scan.shard_starts[shard])
    token_lists = [tokenize(line) for line in read_lines(stream, scan.path, first, count)]
    return [
        layout.reduce_line(array, layers, pool).astype(storage_dtype, copy=False)
        for array in embedder.embed_sentences(token_lists)
    ]


class _StopRequest:
    """SIGINT / SIGTERM while a local run embeds: the first asks the run to stop after the piece in hand is
    committed (raising KeyboardInterrupt in the middle of TensorFlow or h5py work can leave a lock held, so
    that the exit waits forever on the writer thread); a second one stops at once."""

    def __init__(self):
        self.requested = False

    def __call__(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    @contextlib.contextmanager
    def installed(self) -> Iterator["_StopRequest"]:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield self
            return
        previous = {signum: signal.signal(signum, self) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def local_runner(embedder: Embedder, progress: bool = True) -> Runner:
    """Embed shards in this process one at a time, each committed as soon as it is computed: ``commit`` runs in
    a thread, overlapping with the next shard's model work, so a kill loses at most two shards (the one being
    embedded and the one being written). SIGINT / SIGTERM stop the run once the shard being embedded is
    committed (KeyboardInterrupt then), a second one at once.

    Args:
        embedder: an :class:`Embedder`.
        progress: bool, show a progress bar. Defaults to `True`.

    Returns:
        A :data:`Runner`.
    """

    def run(scan: InputScan, folder: str, shards: list[int], manifest: dict, commit: Commit) -> None:
        bar = keras.utils.Progbar(
            sum(scan.shard_range(k)[1] for k in shards), unit_name="line", verbose=1 if progress else 0
        )
        tokens, start = 0, time.perf_counter()
        with (
            open(scan.path, "rb") as stream,
            concurrent.futures.ThreadPoolExecutor(1) as writer,
            _StopRequest().installed() as stop,
        ):
            pending: concurrent.futures.Future | None = None
            for shard in shards:
                arrays = embed_shard(
                    embedder, scan, stream, shard, manifest["layers"], manifest.get("pool"), manifest["storage_dtype"]
                )
                if pending is not None:  # bounds memory: one shard is written while the next is computed
                    pending.result()
                pending = writer.submit(commit, shard, arrays)  # only the writer holds the arrays from here
                del arrays
                tokens += scan.shard_tokens[shard]
                bar.add(
                    scan.shard_range(shard)[1], values=[("tokens/s", tokens / max(time.perf_counter() - start, 1e-9))]
                )
                if stop.requested:
                    pending.result()
                    raise KeyboardInterrupt
            if pending is not None:
                pending.result()

    return run


def committed_shards(folder: str, scan: InputScan) -> list[int]:
    """Shards already in ``folder`` (a shard file or a record); a damaged one (only possible through outside harm)
    is deleted.

    Args:
        folder: the run folder.
        scan: the input's :class:`~elmo_keras.corpus.lines.InputScan`.

    Returns:
        The committed shards' numbers, ascending.
    """
    done = []
    for shard in range(scan.shards):
        for name, complete in layout.committed_forms():
            path = os.path.join(folder, name(shard))
            if os.path.exists(path):
                if complete(path, scan.shard_range(shard)[1]):
                    done.append(shard)
                    break
                os.remove(path)
    return done


def _written(folder: str, shards: Iterable[int]) -> list[int]:
    """Those of ``shards`` that are committed (a shard file or record that exists is complete: it was renamed
    into place)."""
    return [k for k in shards if layout.is_committed(folder, k)]


def _committer(folder: str, manifest: dict, assembly: Assembly | None) -> Commit:
    """How a shard computed in this process is committed (in the runner's writer thread): by the assembly, or
    (``shards`` output) as a shard file."""
    scratch = Scratch()  # the writer thread's
    if assembly is not None:
        return lambda shard, arrays: assembly.commit(shard, arrays, scratch)
    pooled = manifest.get("pool") is not None
    return lambda shard, arrays: layout.commit_shard_file(
        folder, shard, arrays, manifest["shard_lines"], manifest["storage_dtype"], scratch, pooled
    )


def _sentence_to_index(path: str) -> dict[str, list[int]]:
    """Line text -> the line indices that hold it (as the original tools write it)."""
    index: dict[str, list[int]] = {}
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream):
            index.setdefault(decode_line(raw, number, path), []).append(number)
    return index


def _empty_lines(path: str) -> np.ndarray:
    """Per input line, whether it has no tokens (a pooled run stores zeros for it): bool [lines]."""
    with open(path, "rb") as stream:
        return np.fromiter((not tokenize(decode_line(raw, n, path)) for n, raw in enumerate(stream)), dtype=bool)


def _finish(folder: str, manifest: dict, output_path: str, assembly: Assembly | None) -> None:
    """Turn the completed run folder into OUTPUT (replacing an existing one only now)."""
    manifest = {**manifest, "complete": True}
    empty = _empty_lines(manifest["input"]["path"]) if manifest.get("pool") is not None else None
    if assembly is None:  # shards: the run folder is the output
        if empty is not None:
            layout.write_empty_flags(os.path.join(folder, layout.EMPTY), empty)
        write_json(os.path.join(folder, layout.MANIFEST), manifest)
        os.remove(os.path.join(folder, LOCK))
        publish(folder, output_path)
        return
    assembly.add_committed()
    built = assembly.finish(_sentence_to_index(manifest["input"]["path"]), empty)
    write_json(os.path.join(folder, layout.MANIFEST), manifest)
    publish(built, output_path)
    shutil.rmtree(folder)


@contextlib.contextmanager
def _room_checked(folder: str) -> Iterator[None]:
    """A write refused for lack of room becomes an :class:`InputError` that says what to do: what is committed
    stays, so the same command resumes once there is room."""
    try:
        yield
    except Exception as err:
        if no_room_errno(err) is None:
            raise
        raise InputError(
            f"disk full or file too large writing {folder}: free space (or raise the limit) and run "
            f"the same command again to resume"
        ) from err


def embed_file(
    embedder: Embedder,
    input_path: str,
    output_path: str,
    layers: str = "all",
    fmt: str = "hdf5",
    long_line: int = 400,
    *,
    storage_dtype: str = "float32",
    shard_lines: int = 1024,
    overwrite: bool = False,
    restart: bool = False,
    runner: Runner | None = None,
    progress: bool = True,
    pool: str | Sequence[str] | None = None,
) -> str:
    """Embed ``input_path`` (one sentence per line, see :mod:`elmo_keras.corpus.lines`) into ``output_path``
    and return a one-line report.

    Output index i is input line i. ``layers``: "all" ([L, T, D] per line), "top" or "average" ([T, D]).
    ``fmt``: "hdf5" (one dataset per line plus ``sentence_to_index``, the original tools' layout), "shards"
    (a folder of shard files and a manifest, for millions of lines) or "npy" (a folder, one file per line).
    Re-running after a kill resumes; ``restart`` discards an interrupted run, ``overwrite`` allows replacing an
    existing output (at the end, atomically). ``runner`` computes the shards (default: in this process;
    :func:`elmo_keras.corpus.beam.beam_runner` runs them on Apache Beam). Read the result with
    :func:`elmo_keras.load_embeddings`. ``pool`` stores one vector per line instead of its tokens: each layer
    ("all": [L, k * D]) or the reduced one ([k * D]) pooled over the line's tokens, k modes; a line without
    tokens is zeros, flagged in the reader's ``empty``.

    Args:
        embedder: an :class:`elmo_keras.ElmoEmbedder` (or any :class:`Embedder`).
        input_path: the input text file, one sentence per line, UTF-8.
        output_path: the output file (hdf5) or folder (shards, npy).
        layers: "all" ([L, T, D] per line), "top" or "average" ([T, D]). Defaults to "all".
        fmt: "hdf5", "shards" or "npy". Defaults to "hdf5".
        long_line: int, lines of more tokens are counted in the report (and embedded in full). Defaults to 400.
        storage_dtype: "float32" or "float16", the stored dtype. Defaults to "float32".
        shard_lines: int, lines per shard: the unit of committing and resuming, and of memory. The run holds
            the shard being embedded and the shard being written: their lines' float32 arrays, (n_layers + 1) x
            2P values per token with ``layers="all"`` or "top" (a view of the line's layers; 3 x 1024 for the
            original size), 2P with "average", and the writer's buffer of the stored values in
            ``storage_dtype``; about 2 x ``shard_lines`` x tokens per line x values per token x 4 bytes (with
            ``pool``, one vector per line). Besides that: one batch of the embedder, which its ``batch_tokens``
            bounds (see :class:`elmo_keras.ElmoEmbedder`). For long documents lower it: 1024 lines of 20,000
            tokens are 252 GB per shard with the original size and ``layers="all"``, 16 such lines 3.9 GB.
            Defaults to 1024.
        overwrite: bool, allow replacing an existing output. Defaults to `False`.
        restart: bool, discard an interrupted run instead of resuming it. Defaults to `False`.
        runner: a :data:`Runner` that computes the shards, or `None` to compute them in this process. Defaults to
            `None`.
        progress: bool, show a progress bar. Defaults to `True`.
        pool: `None` (token vectors), or `"mean"`, `"max"` or a list of both (one vector per line). Defaults to
            `None`.

    Returns:
        A one-line report (lines, reused, empty and long lines, seconds).

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("The bank .\\n\\nA loan .\\n")
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
    out = os.path.join(folder, "out")
    print(ek.embed_file(embedder, os.path.join(folder, "in.txt"), out, fmt="shards", shard_lines=2,
                        storage_dtype="float16", progress=False))
    with ek.load_embeddings(out) as embeddings:
        assert [v.shape for v in embeddings] == [(3, 3, 256), (3, 0, 256), (3, 3, 256)]  # [L, T, D]
    ```
    """
    settings = EmbedSettings(layers, fmt, storage_dtype, shard_lines, pool)
    shown = os.fspath(output_path)
    check_paths(os.fspath(input_path), shown, fmt, overwrite)
    input_path, output_path = os.path.abspath(input_path), os.path.abspath(output_path)  # workers may cd
    scan = scan_input(input_path, shard_lines, long_line)
    folder = partial_path(output_path)
    start = time.perf_counter()
    with (
        _room_checked(folder),
        open_run(folder, new_manifest(scan, model_identity(embedder), settings), restart) as manifest,
    ):
        done = committed_shards(folder, scan)
        reused = sum(scan.shard_range(k)[1] for k in done)
        if reused:
            print(f"resuming {folder}: {reused} of {scan.lines} lines already embedded", file=sys.stderr)
        todo = sorted(set(range(scan.shards)) - set(done))
        assembly = make_assembly(folder, manifest)
        try:
            (runner or local_runner(embedder, progress))(
                scan, folder, todo, manifest, _committer(folder, manifest, assembly)
            )
        except BaseException as err:
            if assembly is not None:
                assembly.discard()
            if progress:
                print(file=sys.stderr)  # what is said next starts on a line of its own, not after the progress bar
            if isinstance(err, KeyboardInterrupt):
                kept = sum(scan.shard_range(k)[1] for k in _written(folder, range(scan.shards)))
                print(
                    f"interrupted: {kept} of {scan.lines} lines are committed in {folder}; run the same "
                    f"command again to resume",
                    file=sys.stderr,
                )
            raise
        missing = sorted(set(todo) - set(_written(folder, todo)))
        if missing:
            raise RuntimeError(f"the runner did not write shard(s) {missing[:10]} into {folder}; run again to resume")
        _finish(folder, manifest, output_path, assembly)
    seconds = time.perf_counter() - start
    return (
        f"{scan.lines} lines -> {shown} ({reused} reused from an interrupted run, "
        f"{scan.lines - reused} embedded; {scan.empty_lines} empty line(s) stored as "
        f"{'empty arrays' if settings.pool is None else 'zero vectors, flagged in empty'}, "
        f"{scan.long_lines} line(s) over {long_line} tokens embedded in full; {seconds:.1f} s)"
    )
