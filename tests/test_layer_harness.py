"""One layer-test harness, run on every class registered under the "elmo_keras" package.

For a layer and sample inputs, :func:`run_layer_test` checks that
  * ``from_config(get_config())`` gives the same config and, with the same weights, the same outputs;
  * a small functional model around the layer survives ``.keras`` save / ``load_model(safe_mode=True)``;
  * the Keras masks on the outputs are what ``compute_mask`` says and the expected ones, also when the
    functional model runs;
  * the layer built under ``mixed_bfloat16`` runs and gives outputs close to float32.
A registered class missing from ``CASES`` fails its test.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek


def registered_classes() -> dict[str, type]:
    """Every class registered under the "elmo_keras" package, by registered name (all its modules imported)."""
    for module in pkgutil.walk_packages(ek.__path__, "elmo_keras."):
        importlib.import_module(module.name)
    return {name: obj for name, obj in keras.saving.get_custom_objects().items() if name.startswith("elmo_keras>")}


REGISTERED = registered_classes()

SENTENCES = tf.constant(["The bank approved the loan .", "Hi"])
SENTENCE_MASK = [[True] * 6, [True] + [False] * 5]


@dataclass
class Case:
    """How to build a layer (called again under mixed_bfloat16) and call it."""

    make: Callable[[], keras.layers.Layer]
    args: tuple  # positional call arguments: tensors or lists of tensors
    kwargs: dict = field(default_factory=dict)  # tensor keyword arguments (e.g. ``mask``)
    mask: Any = None  # the Keras mask expected on every output; None: no mask
    mixed_tolerance: float = 0.05  # |bfloat16 - float32| allowed, relative to max |float32|
    mixed_dtype: str = "bfloat16"  # dtype of the first float output under mixed_bfloat16


@contextlib.contextmanager
def dtype_policy(name: str):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _numpy(structure) -> list[np.ndarray]:
    return [keras.ops.convert_to_numpy(t) for t in keras.tree.flatten(structure)]


def _masks(outputs) -> list:
    """The Keras mask of each output tensor (Keras keeps it in ``_keras_mask``, as its masking guide shows)."""
    return [getattr(t, "_keras_mask", None) for t in keras.tree.flatten(outputs)]


def _assert_masks(got: list, expected: list) -> None:
    assert [m is None for m in got] == [m is None for m in expected]
    for g, e in zip(got, expected):
        if e is not None:
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(g), keras.ops.convert_to_numpy(e))


def _assert_close(got: list[np.ndarray], expected: list[np.ndarray], tolerance: float = 1e-6) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e.dtype.kind == "f":
            np.testing.assert_allclose(
                g.astype(np.float32), e, rtol=0, atol=tolerance * max(1.0, float(np.abs(e).max(initial=0.0)))
            )
        else:
            np.testing.assert_array_equal(g, e)


def _symbolic(value):
    return keras.Input(shape=tuple(value.shape[1:]), dtype=keras.backend.standardize_dtype(value.dtype))


def run_layer_test(case: Case, tmp_path: Path) -> None:
    layer = case.make()
    outputs = layer(*case.args, **case.kwargs)
    expected = _numpy(outputs)

    # Masks: the ones Keras attached are compute_mask's (and the expected ones).
    computed = layer.compute_mask(case.args[0], case.kwargs.get("mask")) if layer.supports_masking else None
    computed = keras.tree.flatten(computed) if isinstance(computed, (list, tuple)) else [computed] * len(expected)
    _assert_masks(_masks(outputs), computed)
    _assert_masks(_masks(outputs), [case.mask] * len(expected))

    # Config round trip.
    clone = type(layer).from_config(layer.get_config())
    clone(*case.args, **case.kwargs)
    clone.set_weights(layer.get_weights())
    assert clone.get_config() == layer.get_config()
    _assert_close(_numpy(clone(*case.args, **case.kwargs)), expected)

    # .keras round trip of a functional model around the layer; masks are computed when the model runs.
    values = keras.tree.flatten((case.args, case.kwargs))
    inputs = [_symbolic(v) for v in values]
    args, kwargs = keras.tree.pack_sequence_as((case.args, case.kwargs), inputs)
    model = keras.Model(inputs, layer(*args, **kwargs))
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras", safe_mode=True)
    for run in (model, loaded):
        outputs = run(values)
        _assert_close(_numpy(outputs), expected)
        _assert_masks(_masks(outputs), [case.mask] * len(expected))

    # mixed_bfloat16: same weights, outputs close to float32.
    with dtype_policy("mixed_bfloat16"):
        mixed = case.make()
    mixed(*case.args, **case.kwargs)
    mixed.set_weights(layer.get_weights())
    outputs = _numpy(mixed(*case.args, **case.kwargs))
    assert next(str(o.dtype) for o in outputs if o.dtype.kind in "fV") == case.mixed_dtype
    _assert_close(outputs, expected, case.mixed_tolerance)


# -- the table: one entry per registered class ------------------------------------------------------------


@dataclass
class Context:
    """What a table entry may use to build its case."""

    fixture_files: tuple[str, str]
    fixture_options: dict
    tmp_path_factory: pytest.TempPathFactory


def _random(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


STEP_MASK = np.array([[True] * 4, [True, True, False, False]])
THREE_LAYERS = [_random(2, 4, 3, seed=k) for k in range(3)]


def _static_embedding():
    from elmo_keras.baselines import StaticEmbedding

    return StaticEmbedding(["the", "bank", "Hi"], _random(3, 4))


def _text_model():
    return ek.models.text_classifier(_static_embedding(), 2, units=4, hidden=4, max_tokens=2)


def _sampled_model():
    x = keras.Input(shape=(6,))
    scores = ek.tasks.sampled_labels.SampledLabelScores(20, 4, 4, dtype="float32")
    return ek.tasks.sampled_labels.SampledLabelModel(x, scores(x))


def _segmented_encoder():
    tokens = keras.Input(shape=(None,), dtype="string")
    pooled = ek.MaskedPooling()(keras.layers.Dense(3)(_static_embedding()(tokens)))
    return ek.SegmentedEncoder(keras.Model(tokens, pooled), max_tokens=2)


def _hub_module(ctx) -> str:
    path = ctx.tmp_path_factory.getbasetemp() / "hub_module"
    if not path.exists():
        ek.export_hub_module(ek.BiLM.from_pretrained(*ctx.fixture_files), path)
    return str(path)


def _bi_language_model(ctx):
    return ek.lm.BiLanguageModel(ctx.fixture_options, ["<S>", "</S>", "<UNK>", "the", "bank"])


CASES: dict[str, Callable | str] = {
    "elmo_keras>BiGatedCNN": lambda ctx: Case(
        lambda: ek.BiGatedCNN(2, 4, kernel_size=2), (_random(2, 4, 4), STEP_MASK)
    ),
    "elmo_keras>BiLM": lambda ctx: Case(
        lambda: ek.BiLM.from_pretrained(*ctx.fixture_files), (ek.batch_to_ids([["The", "bank"], ["Hi"]]),)
    ),
    "elmo_keras>BiLanguageModel": lambda ctx: Case(
        lambda: _bi_language_model(ctx), (ek.batch_to_ids([["the", "bank"], ["Hi"]]),)
    ),
    "elmo_keras>BiTransformer": lambda ctx: Case(
        lambda: ek.BiTransformer(2, 4, num_heads=2, ff_dim=8), (_random(2, 4, 4), STEP_MASK)
    ),
    "elmo_keras>CharCNN": lambda ctx: Case(
        lambda: ek.CharCNN([[1, 4], [2, 8]], char_embed_dim=4, num_highway_layers=1, projection_dim=6),
        (ek.batch_to_ids([["Hello", "world"], ["Hi"]]),),
        mask=[[True, True], [True, False]],
    ),
    "elmo_keras>Elmo": lambda ctx: Case(
        lambda: ek.Elmo.from_pretrained(*ctx.fixture_files, output="elmo", do_layer_norm=True),
        (SENTENCES,),
        mask=SENTENCE_MASK,
    ),
    "elmo_keras>Highway": lambda ctx: Case(lambda: ek.Highway(2), (_random(2, 3, 6),)),
    "elmo_keras>HubElmo": lambda ctx: Case(lambda: ek.HubElmo(_hub_module(ctx)), (SENTENCES,), mask=SENTENCE_MASK),
    "elmo_keras>LayerConcat": lambda ctx: Case(
        ek.LayerConcat, ([_random(2, 4, 3), _random(2, 4, 5)],), {"mask": [STEP_MASK, STEP_MASK]}, mask=STEP_MASK
    ),
    "elmo_keras>LayerFusion": lambda ctx: Case(
        lambda: ek.LayerFusion(hidden=5), (THREE_LAYERS,), {"mask": STEP_MASK}, mask=STEP_MASK
    ),
    "elmo_keras>MaskedPooling": lambda ctx: Case(
        lambda: ek.MaskedPooling(("mean", "max")), (_random(2, 4, 3),), {"mask": STEP_MASK}
    ),
    "elmo_keras>MultiLabelBinaryCrossentropy": "not a layer: a loss",
    "elmo_keras>MultiLabelF1": "not a layer: a metric",
    "elmo_keras>Perplexity": "not a layer: a metric",
    "elmo_keras>PrecisionAtK": "not a layer: a metric",
    "elmo_keras>NDCGAtK": "not a layer: a metric",
    "elmo_keras>PSPAtK": "not a layer: a metric",
    "elmo_keras>ProjectedBiLSTM": lambda ctx: Case(
        lambda: ek.ProjectedBiLSTM(2, 8, 4, cell_clip=3, proj_clip=3, use_skip_connections=True),
        (_random(2, 4, 4), STEP_MASK),
    ),
    "elmo_keras>LazyAdam": "not a layer: an optimizer",
    "elmo_keras>SampledLabelModel": lambda ctx: Case(lambda: _sampled_model(), (_random(2, 6),), mixed_dtype="float32"),
    "elmo_keras>SampledTextModel": lambda ctx: Case(
        lambda: ek.models.text_classifier(
            _static_embedding(), 20, units=4, hidden=4, multi_label=True, label_sampling=4, label_dim=4
        ),
        (SENTENCES,),
        mixed_dtype="float32",
    ),
    "elmo_keras>SampledLabelScores": lambda ctx: Case(
        lambda: ek.tasks.sampled_labels.SampledLabelScores(50, 4, 8), (_random(2, 6),)
    ),
    "elmo_keras>ScalarMix": lambda ctx: Case(
        lambda: ek.ScalarMix(
            3, initial_logits=[0.0, 1.0, 2.0], initial_gamma=0.5, do_layer_norm=True, weight_dropout=0.1, l2_coef=0.001
        ),
        (THREE_LAYERS,),
        {"mask": STEP_MASK},
        mask=STEP_MASK,
    ),
    "elmo_keras>SegmentedEncoder": lambda ctx: Case(
        lambda: _segmented_encoder(), (tf.constant(["the bank Hi the", "Hi", ""]),)
    ),
    "elmo_keras>StackLayers": lambda ctx: Case(ek.layers.StackLayers, (THREE_LAYERS,), {"mask": [STEP_MASK] * 3}),
    "elmo_keras>StaticEmbedding": lambda ctx: Case(lambda: _static_embedding(), (SENTENCES,), mask=SENTENCE_MASK),
    "elmo_keras>TextModel": lambda ctx: Case(lambda: _text_model(), (SENTENCES,), mixed_dtype="float32"),
    "elmo_keras>UnstackLayers": lambda ctx: Case(
        ek.layers.UnstackLayers, ([_random(2, 4, 3, 5), STEP_MASK],), mask=STEP_MASK
    ),
}


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_registered_class(name, fixture_files, fixture_options, tmp_path_factory, tmp_path):
    cls = REGISTERED[name]
    entry = CASES.get(name)
    if entry is None:
        pytest.fail(f"{name} is registered but not in CASES of {__file__}: add a sample case (or 'not a layer')")
    if isinstance(entry, str):
        assert not issubclass(cls, keras.layers.Layer), f"{name} is a layer: give it a Case"
        return
    run_layer_test(entry(Context(fixture_files, fixture_options, tmp_path_factory)), tmp_path)
