"""TF Hub ELMo: HubElmo, Elmo/BiLM.from_hub and export_hub_module, on modules built here.

The TF1 modules are built in graph mode from the bilm-tf fixture weights, with the names, signatures and
trainable set of google/elmo (see elmo_keras/hub_module.py), by an independent raw-TF implementation
below (conv2d char CNN, tf.scan LSTM, reverse_sequence for the backward direction).
"""

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from elmo_keras.weights import read_weights_hdf5
from tensorflow.core.protobuf import saved_model_pb2

import elmo_keras as ek
from elmo_keras.text import BOW_CHAR, EOW_CHAR, PAD_CHAR, boundary_char_ids

TOL = 1e-5
SENTENCES = ["The bank approved the loan.", "He sat on  the bank of the river.", "Hi"]
TEXTS = np.array(SENTENCES, dtype=object)
HUB_WEIGHTS, HUB_SCALING = np.array([0.3, -0.2, 0.5], np.float32), np.array([1.7], np.float32)
KEYS = ["word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default", "layers"]


@dataclass(frozen=True)
class Case:
    path: str
    add_boundaries: bool
    skip: bool
    logits: np.ndarray  # the ScalarMix logits equal to the module's aggregation
    gamma: float


# ------------------------------------------------------------------------------------------------
# A TF1 Hub-format ELMo module, built in graph mode (independent of elmo_keras's layers).


def _char_ids(tokens):
    """Shifted char ids [B, T, 50] of tokens [B, T] ("" -> zeros). Tensor == is identity in TF1 graphs."""
    raw = tf.pad(tf.cast(tf.io.decode_raw(tokens, tf.uint8, fixed_length=48), tf.int32), [[0, 0], [0, 0], [1, 1]])
    length, pos = tf.minimum(tf.strings.length(tokens), 48)[..., None], tf.range(50)
    code = tf.where(pos <= length, raw, tf.where(tf.equal(pos, length + 1), EOW_CHAR, PAD_CHAR))
    code = tf.where(tf.equal(pos, 0), BOW_CHAR, code)
    return tf.where(tf.strings.length(tokens)[..., None] > 0, code + 1, 0)


def _lstm(x, lengths, kernel, bias, proj, cell_clip, proj_clip, reverse):
    """One projected LSTM over x [B, L, P] from zero state; reverse reads each row backwards."""
    if reverse:
        x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    batch = tf.shape(x)[0]

    def step(state, x_t):
        c, h = state
        i, j, f, o = tf.split(tf.matmul(tf.concat([x_t, h], 1), kernel) + bias, 4, axis=1)
        c = tf.clip_by_value(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j), -cell_clip, cell_clip)
        h = tf.clip_by_value(tf.matmul(tf.sigmoid(o) * tf.tanh(c), proj), -proj_clip, proj_clip)
        return c, h

    init = (tf.zeros([batch, kernel.shape[1] // 4]), tf.zeros([batch, proj.shape[1]]))
    _, hs = tf.scan(step, tf.transpose(x, [1, 0, 2]), initializer=init)
    hs = tf.transpose(hs, [1, 0, 2])
    return tf.reverse_sequence(hs, lengths, seq_axis=1, batch_axis=0) if reverse else hs


def _module_outputs(v, options, tokens, lengths, add_boundaries, skip):
    lstm_opts, n_layers = options["lstm"], options["lstm"]["n_layers"]
    steps = tf.shape(tokens)[1]
    ids = _char_ids(tf.where(tf.sequence_mask(lengths, steps), tokens, ""))
    run_lengths = lengths
    if add_boundaries:
        bounds = tf.constant(boundary_char_ids())
        batch = tf.shape(ids)[0]
        ids = tf.concat([tf.tile(bounds[None, None, 0], [batch, 1, 1]), ids, tf.zeros_like(ids[:, :1])], 1)
        is_eos = tf.equal(tf.range(steps + 2)[None, :, None], (lengths + 1)[:, None, None])
        ids = tf.where(is_eos, bounds[None, None, 1], ids)
        run_lengths = lengths + 2
    table = v["char_embed"]
    if table.shape[0] == 261:
        table = tf.concat([tf.zeros_like(table[:1]), table], 0)
    chars = tf.nn.embedding_lookup(table, ids)  # [B, L, 50, char_dim]
    pooled = [
        tf.nn.relu(
            tf.reduce_max(tf.nn.conv2d(chars, v[f"CNN/W_cnn_{i}"], [1, 1, 1, 1], "VALID") + v[f"CNN/b_cnn_{i}"], axis=2)
        )
        for i in range(len(options["char_cnn"]["filters"]))
    ]
    x = tf.concat(pooled, -1)
    shape = tf.shape(x)
    x = tf.reshape(x, [-1, x.shape[-1]])
    for k in range(options["char_cnn"]["n_highway"]):
        gate = tf.sigmoid(tf.matmul(x, v[f"CNN_high_{k}/W_carry"]) + v[f"CNN_high_{k}/b_carry"])
        x = (
            gate * tf.nn.relu(tf.matmul(x, v[f"CNN_high_{k}/W_transform"]) + v[f"CNN_high_{k}/b_transform"])
            + (1 - gate) * x
        )
    x = tf.matmul(x, v["CNN_proj/W_proj"]) + v["CNN_proj/b_proj"]
    emb = tf.reshape(x, tf.concat([shape[:2], [x.shape[-1]]], 0))
    run_mask = tf.cast(tf.sequence_mask(run_lengths, tf.shape(emb)[1]), tf.float32)[..., None]
    layers, inputs = [], [emb, emb]
    for k in range(n_layers):
        outs = []
        for d in range(2):
            cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/rnn/lstm_cell"
            h = _lstm(
                inputs[d],
                run_lengths,
                v[f"{cell}/kernel"],
                v[f"{cell}/bias"],
                v[f"{cell}/projection/kernel"],
                lstm_opts["cell_clip"],
                lstm_opts["proj_clip"],
                reverse=d == 1,
            )
            outs.append(h + inputs[d] if skip and k > 0 else h)
        inputs = outs
        layers.append(tf.concat(outs, -1) * run_mask)
    if add_boundaries:
        emb, layers = emb[:, 1:-1], [t[:, 1:-1] for t in layers]
    mask = tf.cast(tf.sequence_mask(lengths, steps), tf.float32)[..., None]
    word_emb = emb * mask
    layers = [tf.concat([word_emb, word_emb], -1)] + [t * mask for t in layers]
    mix = tf.nn.softmax(v["aggregation/weights"] + 1.0 / len(layers))
    elmo = v["aggregation/scaling"] * tf.add_n([mix[k] * t for k, t in enumerate(layers)])
    out = {
        "word_emb": word_emb,
        "elmo": elmo,
        "sequence_len": lengths,
        "default": tf.reduce_sum(elmo, 1) / tf.cast(lengths, tf.float32)[:, None],
    }
    out.update({f"lstm_outputs{k}": layers[k] for k in range(1, len(layers))})
    return out


def build_tf1_module(path, options, arrays, add_boundaries, skip, char_rows, static_dims):
    info = tf.compat.v1.saved_model.utils.build_tensor_info
    with tf.Graph().as_default() as graph:
        v = {}
        for name, value in arrays.items():
            if name == "char_embed" and char_rows == 262:
                value = np.concatenate([np.zeros_like(value[:1]), value])
            parts = name.split("/")
            if parts[0].startswith("RNN_"):  # released 'LSTMCell/W_0' -> hub 'rnn/lstm_cell/kernel'
                leaf = {"W_0": "kernel", "B": "bias", "W_P_0": "projection/kernel"}[parts[-1]]
                name = "/".join(parts[:-2] + ["rnn/lstm_cell", leaf])
            v[name] = tf.compat.v1.get_variable(f"bilm/{name}", initializer=value, trainable=False)
        v["aggregation/weights"] = tf.compat.v1.get_variable("aggregation/weights", initializer=HUB_WEIGHTS)
        v["aggregation/scaling"] = tf.compat.v1.get_variable("aggregation/scaling", initializer=HUB_SCALING)
        sentences = tf.compat.v1.placeholder(tf.string, [None])
        pieces = tf.strings.split(sentences, sep=" ")
        pieces = tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)
        tokens = tf.compat.v1.placeholder(tf.string, [None, None])
        lengths = tf.compat.v1.placeholder(tf.int32, [None])
        signatures = {}
        for sig, inputs, args in (
            ("default", {"default": sentences}, (pieces.to_tensor(""), tf.cast(pieces.row_lengths(), tf.int32))),
            ("tokens", {"tokens": tokens, "sequence_len": lengths}, (tokens, lengths)),
        ):
            outputs = _module_outputs(v, options, *args, add_boundaries, skip)
            if not static_dims:  # the signature then does not tell the output widths
                outputs = {
                    k: tf.compat.v1.placeholder_with_default(t, [None] * t.shape.rank) for k, t in outputs.items()
                }
            signatures[sig] = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
                {k: info(t) for k, t in inputs.items()}, {k: info(t) for k, t in outputs.items()}
            )
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(sess, [], signature_def_map=signatures)
            builder.save()


# ------------------------------------------------------------------------------------------------
# Fixtures: two TF1 modules and two exported ones, with and without sentence boundaries.


def with_skip(options, skip):
    options = copy.deepcopy(options)
    options["lstm"]["use_skip_connections"] = skip
    return options


def native_elmo(options, arrays, add_boundaries, logits, gamma, **kwargs):
    elmo = ek.Elmo(options, dropout=0.0, add_sentence_boundaries=add_boundaries, **kwargs)
    elmo.build()
    elmo.bilm.set_weight_arrays(arrays)
    elmo.mixes[0].logits.assign(logits)
    elmo.mixes[0].gamma.assign([gamma])
    return elmo


@pytest.fixture(scope="session")
def fixture_arrays(fixture_files, fixture_options):
    return read_weights_hdf5(fixture_files[1], ek.load_options(fixture_options))


@pytest.fixture(scope="session")
def cases(tmp_path_factory, fixture_options, fixture_arrays):
    """name -> Case. TF1 modules: 'tf1-none' (skip connections, 261-row char_embed) and 'tf1-add' (no skip,
    262 rows, output widths unknown to the signature); export_hub_module of a native BiLM ('export-none')
    and of an Elmo with a trained-looking mix ('export-add')."""
    root = tmp_path_factory.mktemp("hub")
    hub_logits = HUB_WEIGHTS + np.float32(1 / 3)
    out = {}
    for name, add, skip, rows in (("tf1-none", False, True, 261), ("tf1-add", True, False, 262)):
        build_tf1_module(
            str(root / name), with_skip(fixture_options, skip), fixture_arrays, add, skip, rows, static_dims=not add
        )
        out[name] = Case(str(root / name), add, skip, hub_logits, float(HUB_SCALING[0]))
    source = ek.BiLM(fixture_options, add_sentence_boundaries=False)  # a BiLM exports the layer average
    source.build()
    source.set_weight_arrays(fixture_arrays)
    ek.export_hub_module(source, root / "export-none")
    out["export-none"] = Case(str(root / "export-none"), False, False, np.zeros(3, np.float32), 1.0)
    logits, gamma = np.array([-0.5, 0.2, 0.9], np.float32), 1.3
    ek.export_hub_module(native_elmo(fixture_options, fixture_arrays, True, logits, gamma), root / "export-add")
    out["export-add"] = Case(str(root / "export-add"), True, False, logits, gamma)
    return out


CASES = ["tf1-none", "tf1-add", "export-none", "export-add"]


def reference_outputs(case, fixture_options, fixture_arrays, inputs):
    """The module's outputs, computed by a native Elmo with the same weights, boundaries and mix."""
    elmo = native_elmo(
        with_skip(fixture_options, case.skip), fixture_arrays, case.add_boundaries, case.logits, case.gamma
    )
    out = elmo(inputs)
    layers, mask = [np.asarray(t) for t in out["layers"]], np.asarray(out["mask"])
    rep = np.asarray(out["elmo_representations"][0])
    proj = elmo.bilm.projection_dim
    return {
        "word_emb": layers[0][..., :proj],
        "lstm_outputs1": layers[1],
        "lstm_outputs2": layers[2],
        "elmo": rep,
        "default": rep.sum(1) / mask.sum(1, keepdims=True),
        "layers": layers,
        "mask": mask,
    }


def max_diff(a, b):
    if isinstance(b, list):
        assert len(a) == len(b)
        return max(max_diff(x, y) for x, y in zip(a, b))
    assert np.shape(a) == np.shape(b)
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_hub_elmo_equals_native_elmo(name, cases, fixture_options, fixture_arrays):
    case = cases[name]
    tokens = tf.strings.split(tf.constant(SENTENCES)).to_tensor("")
    ref = reference_outputs(case, fixture_options, fixture_arrays, tokens)
    as_dict = {"tokens": tokens, "sequence_len": tf.constant([5, 8, 1])}
    for signature, inputs in (("default", tf.constant(SENTENCES)), ("tokens", tokens), ("tokens", as_dict)):
        for key in KEYS:
            got = ek.HubElmo(case.path, signature=signature, output_key=key)(inputs)
            diff = max_diff(got, ref[key])
            print(f"{name} {signature} {key}: max abs diff {diff:.2e}")
            assert diff <= TOL
            masked = got if key == "layers" else [] if key == "default" else [got]
            for tensor in masked:
                np.testing.assert_array_equal(np.asarray(tensor._keras_mask), ref["mask"])


@pytest.mark.parametrize("name", CASES)
def test_from_hub_equals_the_module(name, cases):
    case = cases[name]
    module = ek.HubElmo(case.path, output_key="layers")
    expected_layers = [np.asarray(t) for t in module(tf.constant(SENTENCES))]
    expected_elmo = np.asarray(ek.HubElmo(case.path)(tf.constant(SENTENCES)))
    boundaries = "add" if case.add_boundaries else "none"
    extra = {} if name.startswith("export") else {"use_skip_connections": case.skip}
    elmo = ek.Elmo.from_hub(case.path, boundaries=boundaries, dropout=0.0, **extra)
    out = elmo(tf.constant(SENTENCES))
    diffs = (max_diff(out["layers"], expected_layers), max_diff(out["elmo_representations"][0], expected_elmo))
    bilm = ek.BiLM.from_hub(case.path, boundaries=boundaries, **extra)
    diffs += (max_diff(bilm(ek.batch_to_ids([s.split() for s in SENTENCES]))["layers"], expected_layers),)
    print(f"{name} from_hub: max abs diffs (Elmo layers, Elmo elmo, BiLM layers) {diffs}")
    assert max(diffs) <= TOL
    assert bilm.add_sentence_boundaries == case.add_boundaries and not bilm.trainable
    assert elmo.options["lstm"]["use_skip_connections"] == case.skip
    other = ek.BiLM.from_hub(case.path, boundaries="none" if case.add_boundaries else "add", **extra)
    assert max_diff(other(ek.batch_to_ids([s.split() for s in SENTENCES]))["layers"], expected_layers) > 1e-3


def test_from_hub_boundary_default(cases):
    assert ek.BiLM.from_hub(cases["tf1-add"].path).add_sentence_boundaries is False  # TF Hub: "none"
    assert ek.BiLM.from_hub(cases["export-add"].path).add_sentence_boundaries is True  # recorded
    with pytest.raises(ValueError, match="boundaries must be one of"):
        ek.BiLM.from_hub(cases["tf1-add"].path, boundaries="yes")


def test_export_runs_the_tf_hub_example(cases):
    import tensorflow_hub as hub

    module = hub.load(cases["export-add"].path)
    out = module.signatures["default"](tf.constant(["The bank approved the loan.", "He sat on the bank of the river."]))
    assert sorted(out) == sorted(KEYS[:-1] + ["sequence_len"])
    elmo = out["elmo"].numpy()
    assert elmo.shape == (2, 8, 32) and out["default"].shape == (2, 32)
    assert np.abs(elmo[0, 1] - elmo[1, 4]).max() > 1e-3  # the two "bank"s differ
    assert [v.name for v in module.trainable_variables] == ["aggregation/weights:0", "aggregation/scaling:0"]
    spaced = module.signatures["default"](tf.constant(["  The bank\tsat "]))
    assert spaced["sequence_len"].numpy().tolist() == [2]  # single spaces only, empties dropped
    saved = saved_model_pb2.SavedModel.FromString((Path(cases["export-add"].path) / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    functions = {f.signature.name for f in graph.library.function}
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert ops & {"While", "StatelessWhile"} and "StringSplitV2" in ops  # the LSTM loop, the splitting
    assert not [op for op in ops - functions if not hasattr(tf.raw_ops, op)]  # core TF ops only
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_export_errors(tmp_path, cases, fixture_options):
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ek.export_hub_module(ek.BiLM.from_hub(cases["tf1-none"].path), cases["export-none"].path)
    elmo = ek.Elmo(fixture_options, do_layer_norm=True)
    with pytest.raises(ValueError, match="not built"):
        ek.export_hub_module(elmo, tmp_path / "m")
    elmo.build()
    with pytest.raises(ValueError, match="do_layer_norm"):
        ek.export_hub_module(elmo, tmp_path / "m")
    assert not (tmp_path / "m").exists()
    with pytest.raises(TypeError, match="an Elmo or a BiLM"):
        ek.export_hub_module(keras.layers.Dense(2), tmp_path / "m")


def test_sequential_fit_keras_round_trip_and_export(tmp_path, cases):
    path = cases["tf1-add"].path  # output widths found by one call of the module
    model = keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            ek.HubElmo(path),
            keras.layers.Bidirectional(keras.layers.GRU(8)),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    assert model.layers[0]._fn.structured_outputs["elmo"].shape[-1] is None
    history = model.fit(TEXTS, np.array([0, 1, 2]), epochs=3, batch_size=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    before = model.predict(TEXTS, verbose=0)
    alone = model.predict(TEXTS[2:], verbose=0)
    np.testing.assert_allclose(alone[0], before[2], atol=TOL)  # the mask hides the padding
    model.save(tmp_path / "m.keras")
    reloaded = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(reloaded.predict(TEXTS, verbose=0), before)
    model.export(str(tmp_path / "served"))
    served = tf.saved_model.load(str(tmp_path / "served"))
    np.testing.assert_allclose(served.serve(tf.constant(SENTENCES)).numpy(), before, atol=TOL)


def test_functional_layers_with_scalar_mix_trains(tmp_path, cases):
    inputs = keras.Input(shape=(None,), dtype="string")
    layers = ek.HubElmo(cases["export-none"].path, signature="tokens", output_key="layers")(inputs)
    mixed = ek.ScalarMix()(layers)
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(mixed)))
    model.compile(keras.optimizers.Adam(0.1), "mse")
    start = np.asarray(model.layers[2].logits).copy()
    tokens = tf.strings.split(tf.constant(SENTENCES)).to_tensor("")
    model.fit(tokens, np.ones((3, 2)), epochs=2, verbose=0)
    assert np.abs(np.asarray(model.layers[2].logits) - start).max() > 0  # the mix trains on top
    model.save(tmp_path / "f.keras")
    reloaded = keras.models.load_model(tmp_path / "f.keras", safe_mode=True)
    np.testing.assert_array_equal(reloaded.predict(tokens, verbose=0), model.predict(tokens, verbose=0))


def test_export_records_any_architecture(tmp_path, skip_options):
    bilm = ek.BiLM(skip_options, add_sentence_boundaries=False)  # tanh, skip connections, 3 LSTM layers
    bilm.build()
    (tmp_path / "m").mkdir()
    ek.export_hub_module(bilm, tmp_path / "m", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # replaced in place, no temporary left
    again = ek.BiLM.from_hub(tmp_path / "m")
    assert again.options == bilm.options and again.add_sentence_boundaries is False
    ids = ek.batch_to_ids([["The", "bank"], ["Hi"]])
    assert max_diff(again(ids)["layers"], [np.asarray(t) for t in bilm(ids)["layers"]]) == 0.0
    layers = ek.HubElmo(tmp_path / "m", output_key="layers")(tf.constant(["The bank", "Hi"]))
    assert max_diff(layers, [np.asarray(t) for t in bilm(ids)["layers"]]) <= TOL


@pytest.mark.parametrize(
    "hub_name, released",
    [
        (
            "module/bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/projection/kernel:0",
            "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0",
        ),
        ("bilm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/bias:0", "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"),
        ("bilm/RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0:0", "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"),
        ("module/bilm/CNN_high_1/W_carry:0", "CNN_high_1/W_carry"),
    ],
)
def test_hub_variable_names(hub_name, released):
    from elmo_keras.hub_module import _variable_key, released_name

    assert released_name(_variable_key(hub_name)) == released


def test_bad_inputs(tmp_path, cases, monkeypatch):
    path = cases["tf1-none"].path
    with pytest.raises(FileNotFoundError, match="module directory not found"):
        ek.HubElmo(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"output_key must be one of \[.*'lstm_outputs2'.*'layers'\]"):
        ek.HubElmo(path, output_key="lstm_outputs3")
    with pytest.raises(ValueError, match="signature must be one of"):
        ek.HubElmo(path, signature="serving_default")

    class Plain(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            return {"length": tf.strings.length(text)}

    plain = Plain()
    tf.saved_model.save(
        plain, str(tmp_path / "plain"), signatures={"serving_default": plain.serve, "default": plain.serve}
    )
    with pytest.raises(ValueError, match=r"has no signature 'tokens'; it has \['default', 'serving_default'\]"):
        ek.HubElmo(tmp_path / "plain", signature="tokens")
    with pytest.raises(ValueError, match=r"returns \['length'\]; an ELMo module's .* returns \['word_emb'"):
        ek.HubElmo(tmp_path / "plain")
    with pytest.raises(ValueError, match="no ELMo biLM variables"):
        ek.Elmo.from_hub(tmp_path / "plain")
    monkeypatch.setitem(sys.modules, "tensorflow_hub", None)
    with pytest.raises(ImportError, match=r"pip install elmo-keras\[hub\]"):
        ek.HubElmo(path)


def test_text_classifier_on_the_default_signature_feeds_tokens(cases):
    """text_classifier (and sequence_tagger) feed padded tokens: a HubElmo over the "default" (sentences) signature
    runs over the module's "tokens" signature, which gives the same vectors for the same tokens."""
    from elmo_keras import models

    layer = ek.HubElmo(cases["tf1-none"].path, output_key="layers")
    twin = layer.with_signature("tokens")
    assert (twin.signature, twin.output_key, layer.signature) == ("tokens", "layers", "default")
    assert twin.with_signature("tokens") is twin
    tokens = tf.strings.split(tf.constant(SENTENCES)).to_tensor("")
    assert max_diff(twin(tokens), [np.asarray(t) for t in layer(tf.constant(SENTENCES))]) <= TOL
    classifier = models.text_classifier(layer, 2, head="pool", hidden=4)
    classifier.fit(TEXTS, np.array([0, 1, 0]), epochs=1, verbose=0)
    assert classifier.predict(TEXTS, verbose=0).shape == (3, 2)
