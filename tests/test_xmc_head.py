"""The sampled multi-label head (``label_sampling``): it learns, its scores are the NumPy formula of its weights, its
table's gradient stays sparse through ``LazyAdam``, its step time does not grow with the label count, it survives
``.keras`` in a fresh process, trains on the embed-once path, and refuses bad arguments in one line."""

from __future__ import annotations

import statistics
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from fresh import run_fresh

import elmo_keras as ek
from elmo_keras.errors import InputError
from elmo_keras.tasks import models
from elmo_keras.tasks.embed_once import EmbedOnce
from elmo_keras.tasks.metrics import pad_label_indices, precision_at_k
from elmo_keras.tasks.sampled_labels import LazyAdam, SampledLabelModel, SampledLabelScores


def _task(rows: int, labels: int, dim: int, seed: int = 0):
    """Each row has 2 of ``labels`` labels; its vector is the sum of their random prototypes plus noise."""
    rng = np.random.default_rng(seed)
    prototypes = rng.standard_normal((labels, dim)).astype("float32")
    truth = np.stack([rng.choice(labels, 2, replace=False) for _ in range(rows)]).astype("int32")
    x = prototypes[truth].sum(1) + 0.3 * rng.standard_normal((rows, dim)).astype("float32")
    return {"layers": x[:, None, None, :], "mask": np.ones((rows, 1), bool)}, truth


def _classifier(labels: int, dim: int, **kwargs) -> keras.Model:
    return models.features_classifier(
        1, dim, labels, head="pool", mix="top", multi_label=True, dropout=0.0, learning_rate=1e-2, **kwargs
    )


def test_the_sampled_head_learns_a_200_label_task():
    """P@1 on held-out rows: chance is 2/200 = 0.01; the head trains on 32 sampled negatives of 200 labels."""
    keras.utils.set_random_seed(0)
    x, y = _task(2000, 200, 16)
    model = _classifier(200, 16, label_sampling=32, label_dim=32)
    assert isinstance(model, SampledLabelModel) and isinstance(model.optimizer, LazyAdam)
    train, test = slice(0, 1600), slice(1600, None)
    history = model.fit(
        {k: v[train] for k, v in x.items()},
        y[train],
        validation_data=({k: v[test] for k, v in x.items()}, y[test]),
        epochs=6,
        batch_size=32,
        verbose=0,
    )
    assert set(history.history) >= {"loss", "val_loss", "val_precision_at_5", "val_micro_f1"}
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0]
    scores = model.predict({k: v[test] for k, v in x.items()}, verbose=0)
    assert scores.shape == (400, 200)
    assert precision_at_k(scores, y[test], 1) > 0.4  # 40x chance; measured 0.66


def test_full_scores_are_the_numpy_formula_of_the_weights():
    layer = SampledLabelScores(500, negatives=8, label_dim=6)
    x = np.random.default_rng(1).standard_normal((3, 10)).astype("float32")
    got = keras.ops.convert_to_numpy(layer(x))
    projection, projection_bias, table, bias = (keras.ops.convert_to_numpy(w) for w in layer.weights[:4])
    logits = (x @ projection + projection_bias) @ table.T + bias
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-logits)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bias, -np.log(500))  # every label starts at probability ~1/L


def test_the_sampled_loss_estimates_the_summed_cross_entropy_without_bias():
    """Averaged over many draws, the sampled loss equals the binary cross-entropy summed over all labels."""
    layer = SampledLabelScores(40, negatives=8, label_dim=4, seed=3)
    x = np.random.default_rng(2).standard_normal((2, 5)).astype("float32")
    labels = np.array([[3, 7, 7], [0, -1, -1]], dtype="int32")  # 7 twice: counts once
    p = keras.ops.convert_to_numpy(layer(x)).astype(np.float64)
    hot = np.zeros((2, 40))
    hot[0, [3, 7]] = hot[1, 0] = 1
    exact = -(hot * np.log(p) + (1 - hot) * np.log(1 - p)).sum(1).mean()
    draw = tf.function(lambda: layer.sampled_loss(x, labels))
    estimate = np.mean([float(draw()) for _ in range(3000)])
    assert estimate == pytest.approx(exact, rel=0.02)


def test_the_table_gradient_is_sparse_and_lazy_adam_moves_only_its_rows():
    layer = SampledLabelScores(10_000, negatives=16, label_dim=8)
    x = np.ones((4, 6), "float32")
    labels = np.array([[1, 2], [3, -1], [4, 5], [6, 7]], dtype="int32")
    with tf.GradientTape() as tape:
        loss = layer.sampled_loss(x, labels)
    table_grad, bias_grad = tape.gradient(loss, [layer.label_table, layer.label_bias])
    assert isinstance(table_grad, tf.IndexedSlices) and isinstance(bias_grad, tf.IndexedSlices)
    assert table_grad.values.shape[0] == 4 * 2 + 16  # B * K + S rows, never [L, d]
    optimizer = LazyAdam(0.1)
    table = keras.Variable(np.zeros((100, 3), "float32"))
    optimizer.apply([tf.IndexedSlices(tf.ones((2, 3)), tf.constant([5, 5]))], [table])  # repeated: summed
    moved = keras.ops.convert_to_numpy(table).copy()
    optimizer.apply([tf.IndexedSlices(tf.ones((1, 3)), tf.constant([9]))], [table])
    after = keras.ops.convert_to_numpy(table)
    assert np.flatnonzero((after != moved).any(1)).tolist() == [9]  # row 5 keeps still (dense Adam moves it)
    assert np.flatnonzero((moved != 0).any(1)).tolist() == [5]


def _median_step(labels: int, optimizer=None) -> float:
    doc = keras.Input(shape=(32,))
    model = models._compiled_classifier(keras.Model, doc, doc, labels, True, 0.0, 1e-3, 5, "t", 64, 128)
    if optimizer is not None:
        compiled = keras.saving.deserialize_keras_object(model.get_compile_config())
        model.compile(**{**compiled, "optimizer": optimizer})
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 32)).astype("float32"), rng.integers(0, labels, (32, 4)).astype("int32")
    times = []
    for _ in range(12):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:])


def test_the_train_step_does_not_grow_with_the_labels():
    """10x the labels: LazyAdam's step stays within 2.5x. The control, the same head with Keras' Adam (which makes
    the table's gradient dense), grows by more than that on the same machine, so the check can tell them apart."""
    lazy = _median_step(100_000) / _median_step(10_000)
    dense = _median_step(100_000, keras.optimizers.Adam(1e-3)) / _median_step(10_000, keras.optimizers.Adam(1e-3))
    assert lazy < 2.5 < dense, (lazy, dense)


def test_save_and_load_in_a_fresh_process(tmp_path):
    keras.utils.set_random_seed(1)
    x, y = _task(64, 300, 8)
    model = _classifier(300, 8, label_sampling=16, label_dim=8)
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "x.npz", expected=model.predict(x, verbose=0), **x)
    run_fresh(
        """
        import keras, numpy as np
        import elmo_keras
        data = np.load("x.npz")
        model = keras.models.load_model("m.keras")
        assert type(model).__name__ == "SampledLabelModel" and type(model.optimizer).__name__ == "LazyAdam"
        x = {"layers": data["layers"], "mask": data["mask"]}
        np.testing.assert_allclose(model.predict(x, verbose=0), data["expected"], rtol=1e-5, atol=1e-7)
        model.fit(x, np.array([[1, 2]] * len(data["mask"])), epochs=1, verbose=0)  # and it trains on
        """,
        cwd=tmp_path,
    )


def test_the_embed_once_path_trains_the_sampled_head():
    elmo = ek.Elmo.from_preset("brown-small")
    model = models.text_classifier(elmo, 500, head="pool", multi_label=True, label_sampling=16, label_dim=8)
    assert isinstance(model, models.SampledTextModel)
    plan = EmbedOnce.of(model)
    assert isinstance(plan.features_model, SampledLabelModel)
    before = keras.ops.convert_to_numpy(model.get_layer("scores").label_table).copy()
    texts = ["the bank raised rates", "a film about a river", "the loan was good", "bad plot"] * 4
    model.fit(texts, pad_label_indices([[1, 2], [3], [4, 5], [6]] * 4), epochs=1, batch_size=8, verbose=0)
    assert "_embed_once_plan" in model.__dict__  # it went the embed-once way
    after = keras.ops.convert_to_numpy(model.get_layer("scores").label_table)
    assert (after != before).any(1).sum() < 100  # the true and sampled rows moved, not all 500
    assert model.predict(texts[:2], verbose=0).shape == (2, 500)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"label_sampling": 8}, "pass multi_label=True"),
        ({"multi_label": True, "label_sampling": 0}, "label_sampling must be an int >= 1, got 0"),
        ({"multi_label": True, "label_sampling": True}, "label_sampling must be an int >= 1, got True"),
        ({"multi_label": True, "label_sampling": 2.5}, "label_sampling must be an int >= 1, got 2.5"),
        ({"multi_label": True, "label_sampling": 8, "label_dim": 0}, "label_dim must be an int >= 1, got 0"),
    ],
)
def test_bad_arguments_are_one_line_input_errors(kwargs, words):
    with pytest.raises(InputError, match=words) as err:
        models.features_classifier(1, 4, 10, head="pool", mix="top", **kwargs)
    assert "\n" not in str(err.value)


def test_multi_hot_labels_are_refused_in_one_line():
    model = _classifier(10, 4, label_sampling=4, label_dim=4)
    x, _ = _task(4, 10, 4)
    with pytest.raises(InputError, match="trains on label indices int") as err:
        model.fit(x, np.zeros((4, 10), "float32"), epochs=1, verbose=0)
    assert "\n" not in str(err.value)
