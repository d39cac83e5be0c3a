"""Corpus embedding on Apache Beam (``pip install "elmo-keras[beam]"``).

* :func:`beam_runner` plugs into :func:`elmo_keras.embed_file` (``elmo-keras embed --runner beam``): shards of
  the input are spread over the workers, each worker loads the model once and writes whole shard files into the
  run folder, so the run keeps the local runner's manifest, resume and output formats.
* :class:`EmbedLines` is a PTransform for pipelines of your own: ``(key, line)`` -> ``(key, float32 array)``,
  batched per worker with ``beam.BatchElements``.

Workers read the input and write the run folder by path, so on a cluster both must be on a file system that
every worker mounts (the local DirectRunner needs nothing).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions

from elmo_keras.corpus import layout
from elmo_keras.corpus.lines import InputScan
from elmo_keras.corpus.run import Commit, Runner, embed_shard
from elmo_keras.embed import BATCH_TOKENS, ElmoEmbedder
from elmo_keras.layers.pooling import pool_modes
from elmo_keras.text import tokenize


@dataclasses.dataclass(frozen=True)
class EmbedderSpec:
    """What a worker needs to build its :class:`~elmo_keras.ElmoEmbedder` (picklable: paths, not weights).

    Give ``options`` and ``weights``, or ``preset``.

    Args:
        options: the model's options file (a path every worker can read). Defaults to `None`.
        weights: the model's weight file (a path every worker can read). Defaults to `None`.
        preset: a shipped preset name, instead of ``options`` and ``weights``. Defaults to `None`.
        dtype: the embedder's compute dtype ("float32" or "bfloat16"). Defaults to "float32".
        batch_size: int, sentences per model call. Defaults to 64.
        batch_tokens: int, padded tokens per model call (see :class:`~elmo_keras.ElmoEmbedder`). Defaults to
            :data:`~elmo_keras.embed.BATCH_TOKENS`.

    Example:

    ```python
    from elmo_keras.corpus.beam import EmbedderSpec

    embedder = EmbedderSpec(preset="brown-small", batch_size=16).load()
    assert next(embedder.embed_sentences([["The", "bank"]])).shape == (3, 2, 256)  # [L, T, D]
    ```
    """

    options: str | None = None
    weights: str | None = None
    preset: str | None = None
    dtype: str = "float32"
    batch_size: int = 64
    batch_tokens: int = BATCH_TOKENS

    def load(self) -> ElmoEmbedder:
        """Build the embedder (once per worker).

        Returns:
            An :class:`~elmo_keras.ElmoEmbedder`.
        """
        kwargs = {"dtype": self.dtype, "batch_size": self.batch_size, "batch_tokens": self.batch_tokens}
        if self.preset:
            return ElmoEmbedder.from_preset(self.preset, **kwargs)
        return ElmoEmbedder(self.options, self.weights, **kwargs)


class _WithEmbedder(beam.DoFn):
    """A DoFn that loads the model once per worker (``setup``), not once per bundle or element."""

    def __init__(self, spec: EmbedderSpec):
        self.spec = spec
        self.embedder: ElmoEmbedder | None = None

    def setup(self) -> None:
        self.embedder = self.spec.load()


class _EmbedShard(_WithEmbedder):
    """shard number -> that shard file written (atomically) into the run folder; yields the shard number."""

    def __init__(self, spec: EmbedderSpec, scan: InputScan, folder: str, manifest: dict):
        super().__init__(spec)
        self.scan, self.folder = scan, folder
        self.layers, self.storage_dtype, self.pool = manifest["layers"], manifest["storage_dtype"], manifest.get("pool")

    def process(self, shard: int) -> Iterator[int]:
        with open(self.scan.path, "rb") as stream:
            arrays = embed_shard(self.embedder, self.scan, stream, shard, self.layers, self.pool, self.storage_dtype)
        layout.commit_shard_file(
            self.folder, shard, arrays, self.scan.shard_lines, self.storage_dtype, pooled=self.pool is not None
        )
        logging.info("elmo_keras: shard %d (%d lines) written by worker process %d", shard, len(arrays), os.getpid())
        yield shard


class _EmbedBatch(_WithEmbedder):
    def __init__(self, spec: EmbedderSpec, layers: str, pool: Sequence[str] | None):
        super().__init__(spec)
        self.layers, self.pool = layers, pool

    def process(self, batch: Sequence[tuple[object, str]]) -> Iterator[tuple[object, np.ndarray]]:
        keys = [key for key, _ in batch]
        arrays = self.embedder.embed_sentences([tokenize(line) for _, line in batch])
        for key, array in zip(keys, arrays):
            yield key, layout.reduce_line(array, self.layers, self.pool)


class EmbedLines(beam.PTransform):
    """``(key, line)`` pairs -> ``(key, float32 array)``: [L, T, D] for ``layers="all"``, [T, D] for "top" /
    "average"; tokens are ``elmo_keras.tokenize(line)``. With ``pool``: one vector per line, [L, k * D] or
    [k * D] (k pooling modes; zeros for a line without tokens).

    Args:
        spec: the :class:`EmbedderSpec` each worker loads its model from.
        layers: "all", "top" or "average". Defaults to "all".
        pool: `None`, or `"mean"`, `"max"` or a list of both (see
            :func:`~elmo_keras.layers.pooling.pool_modes`). Defaults to `None`.
        min_batch_size: int, the fewest lines per model call (``beam.BatchElements``). Defaults to 8.
        max_batch_size: int, the most lines per model call. Defaults to 256.

    Example:

    ```python
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to
    from elmo_keras.corpus.beam import EmbedderSpec, EmbedLines, pipeline_options

    with beam.Pipeline(options=pipeline_options()) as p:
        shapes = (
            p
            | beam.Create(enumerate(["The bank .", "A loan"]))
            | EmbedLines(EmbedderSpec(preset="brown-small"), layers="top")
            | beam.MapTuple(lambda i, v: (i, v.shape))  # [T, D]
        )
        assert_that(shapes, equal_to([(0, (3, 256)), (1, (2, 256))]))
    ```
    """

    def __init__(
        self,
        spec: EmbedderSpec,
        layers: str = "all",
        min_batch_size: int = 8,
        max_batch_size: int = 256,
        pool: str | Sequence[str] | None = None,
    ):
        super().__init__()
        if layers not in layout.LAYER_CHOICES:
            raise ValueError(f"layers must be one of {layout.LAYER_CHOICES}, got {layers!r}")
        self.spec, self.layers = spec, layers
        self.pool = None if pool is None else pool_modes(pool)
        self.min_batch_size, self.max_batch_size = min_batch_size, max_batch_size

    def expand(self, lines: beam.PCollection) -> beam.PCollection:
        return (
            lines
            | "Batch" >> beam.BatchElements(min_batch_size=self.min_batch_size, max_batch_size=self.max_batch_size)
            | "Embed" >> beam.ParDo(_EmbedBatch(self.spec, self.layers, self.pool))
        )


def pipeline_options(num_workers: int | None = None, beam_options: str | Iterable[str] = ()) -> PipelineOptions:
    """Standard Beam options from ``beam_options`` (a string as typed on a command line, or a list). Without
    ``--runner`` it is the DirectRunner with ``num_workers`` processes (multi_processing mode); with another
    runner ``num_workers`` becomes ``--num_workers`` (Dataflow's spelling; Flink and Spark take
    ``--parallelism`` in ``beam_options``).

    Args:
        num_workers: int, worker processes (DirectRunner) or workers (other runners), or `None` for the
            default (one process for the DirectRunner). Defaults to `None`.
        beam_options: Beam's command-line options, e.g. ``"--runner=DataflowRunner --project=p"``. Defaults to
            none.

    Returns:
        A ``PipelineOptions``.

    Example:

    ```python
    from elmo_keras.corpus.beam import pipeline_options

    options = pipeline_options(num_workers=2).get_all_options()
    assert options["runner"] == "DirectRunner" and options["direct_running_mode"] == "multi_processing"
    assert pipeline_options(4, "--runner=DataflowRunner").get_all_options()["num_workers"] == 4
    ```
    """
    args = shlex.split(beam_options) if isinstance(beam_options, str) else list(beam_options)
    if not any(a == "--runner" or a.startswith("--runner=") for a in args):
        args += [
            "--runner=DirectRunner",
            f"--direct_num_workers={num_workers or 1}",
            "--default_sdk_harness_log_level=WARNING",
            "--direct_running_mode=multi_processing" if (num_workers or 1) > 1 else "--direct_running_mode=in_memory",
        ]
    elif num_workers:
        args.append(f"--num_workers={num_workers}")
    return PipelineOptions(args)


def beam_runner(spec: EmbedderSpec, num_workers: int | None = None, beam_options: str | Iterable[str] = ()) -> Runner:
    """A runner for :func:`elmo_keras.embed_file` that embeds the missing shards in one Beam pipeline (the
    workers commit shard files; ``embed_file`` assembles hdf5 / npy output from them afterwards).

    Args:
        spec: the :class:`EmbedderSpec` each worker loads its model from (the same model as the ``embedder``
            given to ``embed_file``, whose identity the run records).
        num_workers: int, see :func:`pipeline_options`. Defaults to `None`.
        beam_options: Beam's command-line options, see :func:`pipeline_options`. Defaults to none.

    Returns:
        A runner for ``embed_file(..., runner=)``.

    Example:

    ```python
    import os, tempfile
    import elmo_keras as ek
    from elmo_keras.corpus.beam import EmbedderSpec, beam_runner

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("The bank .\\nA loan .\\nHi\\n")
    embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
    runner = beam_runner(EmbedderSpec(preset="brown-small"))
    out = os.path.join(folder, "out.hdf5")
    ek.embed_file(embedder, os.path.join(folder, "in.txt"), out, layers="top", shard_lines=2, runner=runner)
    with ek.load_embeddings(out) as embeddings:
        assert [v.shape for v in embeddings] == [(3, 256), (3, 256), (1, 256)]  # [T, D]
    ```
    """
    options = pipeline_options(num_workers, beam_options)

    def run(scan: InputScan, folder: str, shards: list[int], manifest: dict, commit: Commit) -> None:
        if not shards:
            return
        with beam.Pipeline(options=options) as pipeline:
            _ = (
                pipeline
                | "Shards" >> beam.Create(shards)
                | "Spread" >> beam.Reshuffle()
                | "EmbedShard" >> beam.ParDo(_EmbedShard(spec, scan, folder, manifest))
            )

    return run
