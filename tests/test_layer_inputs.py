"""Layer inputs as a hostile user passes them: eager InputErrors (row, token, id), in-graph assertions kept, eager
Elmo calls through one cached graph (same numbers, gradients, masks), masked pooling of rows with no tokens."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras import elmo as elmo_module
from elmo_keras.errors import InputError

TEXTS = ["The bank approved the loan .", "Hi", "He sat on the bank of the river ."]


@pytest.fixture(scope="module")
def elmo(fixture_files):
    return ek.Elmo.from_pretrained(*fixture_files, dropout=0.0, output_mode="elmo")


@pytest.fixture(scope="module")
def bilm(elmo):
    return elmo.bilm


def _ids_with(row: int, token: int, value: int) -> np.ndarray:
    ids = ek.batch_to_ids([["a", "b"], ["c", "d"], ["e", "f"]])
    ids[row, token, 3] = value
    return ids


def _gap_ids() -> np.ndarray:
    """Row 1 has a padding token at 1, before its real token 2."""
    ids = ek.batch_to_ids([["a", "b", "c"], ["d", "e", "f"]])
    ids[1, 1] = 0
    return ids


# -- 1. eager calls: InputError naming the row; graphs keep their assertions --------------------------------
@pytest.mark.parametrize("value", [-1, 262, 100_000])
@pytest.mark.parametrize("layer", ["elmo", "bilm"])
def test_char_ids_out_of_range_name_row_token_and_id(request, layer, value):
    words = f"char ids must be in [0, 262) (0 = padding token): row 2, token 1 has id {value} at character 3"
    with pytest.raises(InputError, match=re.escape(words) + ".*batch_to_ids"):
        request.getfixturevalue(layer)(_ids_with(2, 1, value))


def test_padding_before_a_real_token_names_row_and_tokens(elmo, bilm):
    gap = 'row 2: token 1 is a real token after padding (the empty string "") at token 0; padding must come after'
    with pytest.raises(InputError, match=re.escape(gap)):
        elmo(tf.constant([["a", "b"], ["c", ""], ["", "d"]]))
    with pytest.raises(
        InputError, match=re.escape("row 1: token 2 is a real token after padding (all-zero char ids) at token 1")
    ):
        bilm(_gap_ids())
    vectors, mask = np.zeros((1, 3, bilm.projection_dim), np.float32), np.array([[True, False, True]])
    with pytest.raises(InputError, match=re.escape("row 0: token 2 is a real token after padding (mask False)")):
        bilm((vectors, mask))


def test_graphs_keep_the_in_graph_assertions(bilm):
    graph = tf.function(lambda ids: bilm(ids)["mask"], input_signature=[tf.TensorSpec([None, None, 50], tf.int32)])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=re.escape("262 is not in [0, 262)") + "|" + re.escape("char ids must be in [0, 262)"),
    ):  # the embedding lookup may fail first
        graph(_ids_with(2, 1, 262))
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding tokens .* must come after the real tokens"):
        graph(_gap_ids())


# -- 2. long eager Elmo calls run one cached graph ----------------------------------------------------------------
@pytest.fixture(scope="module")
def graph_elmo(fixture_files):
    """A trainable Elmo whose eager calls of 6 tokens or more run the cached graph (256 in real use)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(elmo_module, "GRAPH_MIN_TOKENS", 6)
        yield ek.Elmo.from_pretrained(*fixture_files, dropout=0.0, output_mode="elmo", bilm_trainable=True)


def test_long_eager_calls_share_one_trace_and_give_the_eager_numbers(graph_elmo):
    elmo, key = graph_elmo, ("string", (None,), False)
    step_by_step = [np.asarray(elmo._compute(tf.constant([text]), False)) for text in TEXTS]  # eager ops
    elmo([TEXTS[1]])  # 1 token: no graph yet
    assert key not in elmo.__dict__.get("_graph_functions", {})
    for text, expected in zip(TEXTS, step_by_step):  # 6 tokens: traced; then 1 and 9 tokens: the same graph
        out = elmo([text])
        np.testing.assert_allclose(np.asarray(out), expected, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(out._keras_mask), np.ones((1, len(text.split())), bool))
    assert elmo.__dict__["_graph_functions"][key].experimental_get_tracing_count() == 1


def test_gradients_flow_through_the_eager_graph(graph_elmo):
    elmo, texts = graph_elmo, tf.constant(TEXTS)

    def gradients(run):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(run(texts)))
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, elmo.trainable_variables)]

    graph = gradients(lambda x: elmo(x, training=True))
    step_by_step = gradients(lambda x: elmo._compute(x, True))
    assert ("string", (None,), True) in elmo.__dict__["_graph_functions"]
    assert len(graph) == len(elmo.trainable_variables) > 2  # the mix and the biLM
    for g, e in zip(graph, step_by_step):
        assert np.abs(np.asarray(g)).max() > 0
        # float32 sums in another order: on AVX-512 CPUs (Zen 4) the graph and the eager ops take other oneDNN
        # kernels, 1.2e-6 apart (2e-6 relative) on gradients near 0.6; the tolerance is that of float32 sums
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-6)


def test_a_model_on_elmo_fits_eagerly_and_its_eager_calls_are_unchanged(graph_elmo, monkeypatch):
    model = keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            graph_elmo,
            ek.MaskedPooling(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", run_eagerly=True)
    before = [np.asarray(w).copy() for w in model.trainable_weights]
    model.fit(np.array(TEXTS, dtype=object), np.array([0, 1, 2]), epochs=1, verbose=0)
    assert all(np.abs(np.asarray(w) - b).max() > 0 for w, b in zip(model.trainable_weights, before))
    texts = np.array([TEXTS[1], TEXTS[2]], dtype=object)  # "Hi" padded to 9 tokens: the mask reaches the pooling
    through_graph = np.asarray(model(texts))
    np.testing.assert_allclose(np.asarray(model(texts[:1]))[0], through_graph[0], atol=1e-6)
    monkeypatch.setattr(elmo_module, "GRAPH_MIN_TOKENS", 10**9)
    graph_elmo.__dict__["_graph_functions"].clear()  # eager ops again
    np.testing.assert_allclose(np.asarray(model(texts)), through_graph, atol=1e-6)


# -- 3. masked pooling of rows with no real token -----------------------------------------------------------
def _numpy_pooling(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    rows = []
    for values, keep in zip(x, mask):
        real = values[keep]
        rows.append(np.concatenate([real.max(0), real.mean(0)]) if len(real) else np.zeros(2 * x.shape[-1]))
    return np.stack(rows)


def test_masked_pooling_matches_numpy_over_real_tokens_only():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], bool)
    x[~mask] = np.nan  # whatever sits at padded steps is left out
    pooled, empty = ek.MaskedPooling(return_empty_flag=True)(x, mask=mask)
    np.testing.assert_allclose(np.asarray(pooled), _numpy_pooling(x, mask), rtol=0, atol=1e-6)
    assert np.asarray(empty).tolist() == [False, True, False, False]
    np.testing.assert_allclose(
        np.asarray(ek.MaskedPooling(("mean",))(x, mask=mask)), _numpy_pooling(x, mask)[:, 3:], rtol=0, atol=1e-6
    )


def test_empty_text_pools_to_zeros_with_a_flag_where_keras_gives_nan(elmo, tmp_path):
    texts = tf.constant(["", "The bank"])
    keras_mean = keras.Sequential([keras.Input(shape=(), dtype="string"), elmo, keras.layers.GlobalAveragePooling1D()])(
        texts
    )
    assert np.isnan(np.asarray(keras_mean)[0]).all()  # what the README warns about
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, ek.MaskedPooling(("mean",), return_empty_flag=True)(elmo(inputs)))
    pooled, empty = (np.asarray(t) for t in model(texts))
    np.testing.assert_array_equal(pooled[0], 0.0)
    assert empty.dtype == bool and empty.tolist() == [True, False]
    np.testing.assert_allclose(pooled[1], np.asarray(keras_mean)[1], atol=1e-6)
    model.save(tmp_path / "pooling.keras")
    again = keras.models.load_model(tmp_path / "pooling.keras", safe_mode=True)
    assert again.layers[-1].get_config()["return_empty_flag"] is True
    for a, b in zip(again(texts), (pooled, empty)):
        np.testing.assert_array_equal(np.asarray(a), b)
