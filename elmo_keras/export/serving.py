"""SavedModel export for TensorFlow Serving: raw strings in, predictions out, no elmo_keras needed to serve.

``export_serving(model, "saved_models/NAME")`` writes ``NAME/VERSION/`` (the layout TF Serving watches)
into a hidden temporary folder first, then renames it, so a half-written version never appears.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from numbers import Integral

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.elmo import Elmo
from elmo_keras.errors import InputError
from elmo_keras.text import split_sentences
from elmo_keras.utils.backend import require_tensorflow
from elmo_keras.utils.files import no_room_errno, usual_permissions

log = logging.getLogger(__name__)

KINDS = ("classifier", "multi_label", "tagger", "embedder")
TMP_PREFIX = ".tmp-"  # a version folder being written
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
DEFAULT_WARMUP = ("The bank approved the loan .", "Hi", "")


def _describe_inputs(model: keras.Model) -> str:
    return ", ".join(
        f"{t.name} {keras.backend.standardize_dtype(t.dtype)} {tuple(t.shape)}"
        for t in keras.tree.flatten(model.inputs)
    )


def model_kind(model) -> str:
    """What ``model`` is, from its inputs and output: an embedder (an ``Elmo`` layer, or a model from text to
    vectors [B, T, D]), a tagger (padded tokens [B, T] -> softmax [B, T, C]), a multi-label model (sigmoid
    scores [B, L]) or a classifier (softmax [B, C]). Models that do not take text are refused, naming why.

    Args:
        model: a ``keras.Model`` or an ``Elmo`` layer.

    Returns:
        One of :data:`KINDS`.
    """
    if isinstance(model, Elmo):
        return "embedder"
    if not isinstance(model, keras.Model):
        raise TypeError(f"export_serving takes a keras.Model or an Elmo layer, got {type(model).__name__}")
    if getattr(model, "inputs", None) is None or getattr(model, "outputs", None) is None:  # a subclassed model
        raise InputError(
            f"{model.name} ({type(model).__name__}) is not a functional model over text; export_serving "
            "exports text_classifier, sequence_tagger, an Elmo layer or a keras.Model built on "
            "keras.Input(shape=(), dtype='string') (for a language model, export its Elmo: "
            "ek.Elmo.from_preset(...))"
        )
    inputs = keras.tree.flatten(model.inputs)
    if (
        len(inputs) != 1
        or keras.backend.standardize_dtype(inputs[0].dtype) != "string"
        or len(inputs[0].shape) not in (1, 2)
    ):
        raise InputError(
            f"{model.name} takes {_describe_inputs(model)}; export_serving needs a model whose one input "
            "is text (string [batch] sentences or [batch, tokens]). A features_classifier takes "
            "precomputed biLM layers: export the same head as ek.models.text_classifier instead; a "
            "char-id model: build it on an ek.Elmo layer, which takes strings"
        )
    if len(model.outputs) != 1:
        raise InputError(f"export_serving needs a model with one output, {model.name} has {len(model.outputs)}")
    activation = getattr(getattr(model.layers[-1], "activation", None), "__name__", "")
    if len(model.outputs[0].shape) == 3:
        return "tagger" if activation == "softmax" and len(inputs[0].shape) == 2 else "embedder"
    if len(model.outputs[0].shape) != 2:
        raise InputError(
            f"{model.name}'s output has shape {tuple(model.outputs[0].shape)}; export_serving exports "
            "[batch, classes] scores or [batch, tokens, dim] vectors"
        )
    return "multi_label" if activation == "sigmoid" else "classifier"


def _label_tensor(names: Sequence[str] | None, count: int, what: str) -> tf.Tensor:
    names = [str(i) for i in range(count)] if names is None else [str(n) for n in names]
    if len(names) != count:
        raise InputError(f"{len(names)} {what} for a model with {count} outputs: give one per output")
    return tf.constant(names)


def _serve_embedder(model, names, text):
    if isinstance(model, Elmo):
        out = model(text, training=False)
        if isinstance(out, dict):
            return {"elmo": out["elmo_representations"][0], "mask": out["mask"]}
        return {"elmo": out, "mask": model.compute_mask(text)}
    tokens = split_sentences(text)
    vectors = model(tokens if len(model.inputs[0].shape) == 2 else text, training=False)
    return {"elmo": vectors, "mask": tf.not_equal(tokens, "")}


def _serve_tagger(model, tag_names, text):
    tokens = split_sentences(text, min_length=1)
    probabilities = model(tokens, training=False)
    tags = tf.gather(tag_names, tf.argmax(probabilities, axis=-1))
    return {"tags": tf.where(tf.not_equal(tokens, ""), tags, ""), "probabilities": probabilities, "tokens": tokens}


def _serve_multi_label(model, names, text):
    return {"scores": model(text, training=False)}


def _serve_classifier(model, class_names, text):
    probabilities = model(text, training=False)
    return {"probabilities": probabilities, "label": tf.gather(class_names, tf.argmax(probabilities, -1))}


#: kind -> (serving function(model, names, text) -> outputs, what its names are, or None when it has none)
_SERVERS = {
    "embedder": (_serve_embedder, None),
    "tagger": (_serve_tagger, "tag names"),
    "multi_label": (_serve_multi_label, None),
    "classifier": (_serve_classifier, "class names"),
}


def _serving_fn(model, kind: str, label_names: Sequence[str] | None):
    """The ``serving_default`` function: text [None] -> dict of outputs."""
    if isinstance(model, Elmo) and model.output_mode == "layers":
        raise InputError("export an Elmo with output_mode='dict' or 'elmo' (a 'layers' Elmo has no single output)")
    serve, what = _SERVERS[kind]
    names = _label_tensor(label_names, model.outputs[0].shape[-1], what) if what else None
    return functools.partial(serve, model, names)


def next_version(base: str | os.PathLike) -> int:
    """1 + the largest integer version folder in ``base`` (1 when there is none).

    Args:
        base: the model's export folder.

    Returns:
        int.
    """
    if not os.path.isdir(base):
        return 1
    versions = [int(d) for d in os.listdir(base) if re.fullmatch(r"\d+", d)]
    return max(versions, default=0) + 1


def _write_warmup(folder: str, model_name: str, texts: Sequence[str]) -> None:
    try:
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    except ImportError:
        log.warning(
            "tensorflow-serving-api is not installed (pip install elmo-keras[serving]): "
            "no TF Serving warmup file written"
        )
        return
    os.makedirs(os.path.join(folder, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(folder, WARMUP_FILE)) as writer:
        for text in texts:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
            )
            request.inputs["text"].CopyFrom(tf.make_tensor_proto([text], dtype=tf.string))
            log_record = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log_record.SerializeToString())


def export_serving(
    model,
    path: str | os.PathLike,
    version: int | None = None,
    label_names: Sequence[str] | None = None,
    kind: str | None = None,
    warmup_texts: Sequence[str] | None = DEFAULT_WARMUP,
) -> str:
    """Export ``model`` for TF Serving to ``path/VERSION`` and return that folder.

    Signature ``serving_default``, input ``text`` (string [None]); outputs by kind:
    classifier ``probabilities`` [None, C] + ``label`` (string [None]); multi-label ``scores`` [None, L];
    tagger ``tags`` (string [None, T], "" at padding) + ``probabilities`` [None, T, C] + ``tokens``;
    an ``Elmo`` embedder ``elmo`` [None, T, D] + ``mask`` [None, T].
    Folders get the umask's permissions (0755 with 022).

    Args:
        model: a classifier or tagger from :mod:`elmo_keras.tasks.models`, or an ``Elmo`` layer.
        path: the model's base folder; the export goes to ``path/VERSION``.
        version: an integer >= 0 (FileExistsError if that folder exists), or ``None`` for the next free number,
            also when other exports to ``path`` run at the same time.
        label_names: class or tag names, or ``None`` for ``"0"``, ``"1"``, ...
        kind: one of :data:`KINDS`, or ``None`` to read it from the model (:func:`model_kind`).
        warmup_texts: written as ``assets.extra/tf_serving_warmup_requests`` (needs tensorflow-serving-api), or
            ``None`` to skip.

    Returns:
        The version folder written.

    Example:

    ```python
    import tempfile
    import elmo_keras as ek
    from elmo_keras.export import check_serving, export_serving

    model = ek.models.text_classifier(ek.Elmo.from_preset("brown-small"), num_classes=2, units=4, hidden=4)
    folder = export_serving(model, tempfile.mkdtemp(), label_names=["neg", "pos"], warmup_texts=None)
    assert folder.endswith("/1") and check_serving(model, folder, ["a good film"]) < 1e-4
    ```
    """
    require_tensorflow("export_serving")
    kind = kind or model_kind(model)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if version is not None and (isinstance(version, bool) or not isinstance(version, Integral) or version < 0):
        raise InputError(f"version must be an integer >= 0 (TF Serving's version folders), got {version!r}")
    base = os.path.abspath(os.fspath(path))
    if version is not None and os.path.exists(os.path.join(base, str(version))):
        raise FileExistsError(f"{os.path.join(base, str(version))} exists already: pick another version or remove it")
    os.makedirs(base, exist_ok=True)
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serving_default",
        tf.function(
            _serving_fn(model, kind, label_names), input_signature=[tf.TensorSpec([None], tf.string, name="text")]
        ),
    )
    tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=base)
    claim = os.open(tmp, os.O_RDONLY)
    try:
        fcntl.flock(claim, fcntl.LOCK_EX)  # ours while we write it: see _remove_abandoned
        _remove_abandoned(base, os.stat(tmp).st_mtime)
        try:
            archive.write_out(tmp, verbose=False)
        except tf.errors.OpError as err:  # TensorFlow's file writes report a full disk as an op error
            code = no_room_errno(err)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), base) from err
        if warmup_texts:
            _write_warmup(tmp, os.path.basename(base), list(warmup_texts))
        usual_permissions(tmp)  # mkdtemp makes it 0700: TF Serving may run as another user
        return _publish(tmp, base, version)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(claim)


def _remove_abandoned(base: str, started: float) -> None:
    """Delete the ``.tmp-*`` folders that killed exports left in ``base``: those no export holds a lock on,
    last changed before this export started (a running export locks its folder and keeps writing into it)."""
    for name in os.listdir(base):
        path = os.path.join(base, name)
        if not name.startswith(TMP_PREFIX) or not os.path.isdir(path) or os.path.islink(path):
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # published or removed meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(path).st_mtime < started:
                shutil.rmtree(path, ignore_errors=True)
        except (BlockingIOError, FileNotFoundError):
            pass
        finally:
            os.close(fd)


def _publish(tmp: str, base: str, version: int | None) -> str:
    """Rename the finished ``tmp`` folder to ``base/VERSION``; without a version, the next free one (another
    export may take a number between our look and our rename: then take the next)."""
    while True:
        final = os.path.join(base, str(next_version(base) if version is None else version))
        try:
            os.rename(tmp, final)
            return final
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            if version is not None:
                raise FileExistsError(
                    f"{final} was written by another export meanwhile: pick another version or remove it"
                ) from None


def check_serving(model, folder: str | os.PathLike, texts: Sequence[str]) -> float:
    """Load the export in ``folder`` as TF Serving would and return the largest |difference| between its
    classifier ``probabilities`` (or multi-label ``scores``) and ``model``'s on ``texts``.

    Args:
        model: the exported classifier.
        folder: the version folder (what :func:`export_serving` returns).
        texts: sentences to compare on.

    Returns:
        The largest absolute difference.
    """
    serve = tf.saved_model.load(os.fspath(folder)).signatures["serving_default"]
    outputs = serve(text=tf.constant(list(texts), dtype=tf.string))
    served = outputs["probabilities"] if "probabilities" in outputs else outputs["scores"]
    return float(np.max(np.abs(served.numpy() - np.asarray(model.predict(list(texts), verbose=0)))))
