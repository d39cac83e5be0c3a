"""Pretraining: vocabulary, tf.data pipeline, BiLanguageModel loss/perplexity, pretrain() output folder."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras.lm import BiLanguageModel, Vocabulary, lm_dataset, pretrain, sentences_dataset
from elmo_keras.text import batch_to_ids, boundary_char_ids

TRAIN = Path(__file__).parent / "fixtures" / "bilm-tf" / "train"
TINY = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1, "embedding": {"dim": 4}},
    "lstm": {
        "dim": 16,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "batch_size": 2,
    "dropout": 0.0,
    "backup_every_steps": 1,
    "shuffle_buffer": 100,
}


def _quiet(_msg: str) -> None:
    pass


# -- vocabulary ---------------------------------------------------------------------------------------------
def test_vocabulary_counts_specials_and_file_format(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("b a b\nc b a\n\n", encoding="utf-8")
    vocab = Vocabulary.from_files([text])
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "b", "a", "c"]  # most frequent first, ties alphabetical
    assert Vocabulary.from_files([text], min_count=2).tokens == ["<S>", "</S>", "<UNK>", "b", "a"]
    assert Vocabulary.from_files([text], max_size=4).tokens == ["<S>", "</S>", "<UNK>", "b"]
    assert [vocab.ids.get(t, vocab.unk_id) for t in ["a", "zzz"]] == [4, 2]
    vocab.save(tmp_path / "v.txt")
    assert (tmp_path / "v.txt").read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\nb\na\nc\n"
    assert Vocabulary.load(tmp_path / "v.txt") == vocab


def test_vocabulary_reads_bilm_tf_file_and_rejects_bad_ones(tmp_path):
    vocab = Vocabulary.load(TRAIN / "vocab.txt")
    assert vocab.tokens[:3] == ["<S>", "</S>", "<UNK>"] and len(vocab) == 32
    with pytest.raises(ValueError, match="must start with"):
        Vocabulary(["a", "<S>", "</S>", "<UNK>"])
    with pytest.raises(ValueError, match="appears twice"):
        Vocabulary(["<S>", "</S>", "<UNK>", "a", "a"])
    with pytest.raises(ValueError, match="whitespace"):
        Vocabulary(["<S>", "</S>", "<UNK>", "a b"])
    with pytest.raises(FileNotFoundError):
        Vocabulary.load(tmp_path / "missing.txt")


# -- data ---------------------------------------------------------------------------------------------------
def test_pipeline_rows_targets_and_padding(tmp_path):
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat"])
    chars, (fwd, bwd) = next(iter(sentences_dataset(["the cat sat", ["the"]], vocab, batch_size=2)))
    bos, eos = boundary_char_ids()
    expected0 = np.concatenate([bos[None], batch_to_ids([["the", "cat", "sat"]])[0], eos[None]])
    np.testing.assert_array_equal(chars[0], expected0)
    np.testing.assert_array_equal(chars[1, 3:], 0)  # padding rows
    np.testing.assert_array_equal(fwd, [[3, 4, 2, 1, -1], [3, 1, -1, -1, -1]])
    np.testing.assert_array_equal(bwd, [[-1, 0, 3, 4, 2], [-1, 0, 3, -1, -1]])
    with pytest.raises(ValueError, match="sentence 0 is empty"):
        sentences_dataset(["  "], vocab, 2)
    with pytest.raises(ValueError, match="whitespace"):
        sentences_dataset([["a b"]], vocab, 2)


def test_pipeline_buckets_shards_and_keeps_every_sentence(tmp_path):
    files = []
    for k in range(2):
        path = tmp_path / f"f{k}.txt"
        path.write_text(
            "".join(" ".join([f"w{k}"] * n) + "\n" + ("\n" if n == 3 else "") for n in range(1, 30)), encoding="utf-8"
        )
        files.append(path)
    vocab = Vocabulary.from_files(files)
    batches = list(lm_dataset(files, vocab, batch_size=4, buckets=[5, 10]))
    lengths = sorted(int(n) for _, (f, _) in batches for n in tf.reduce_sum(tf.cast(f >= 0, tf.int32), 1))
    assert lengths == sorted(list(range(2, 31)) * 2)  # n + 1 targets per sentence, none lost, blank lines skipped
    for chars, (fwd, _) in batches:
        longest = int(tf.reduce_max(tf.reduce_sum(tf.cast(fwd >= 0, tf.int32), 1))) + 1
        assert chars.shape[1] == longest and chars.shape[2] == 50  # padded to the batch's longest
        assert chars.shape[1] <= 7 or chars.shape[1] > 12 or 7 < chars.shape[1] <= 12
    shard = list(lm_dataset(files, vocab, batch_size=64, num_shards=2, shard_index=1, shuffle_buffer=0))
    words = {vocab.tokens[int(t)] for _, (f, _) in shard for t in tf.reshape(f, [-1]) if int(t) > 2}
    assert words == {"w1"}
    with pytest.raises(ValueError, match="cannot shard"):
        lm_dataset(files, vocab, 4, num_shards=3)
    with pytest.raises(FileNotFoundError):
        lm_dataset([tmp_path / "nope.txt"], vocab, 4)


# -- model --------------------------------------------------------------------------------------------------
def test_loss_and_perplexity_match_numpy():
    vocab = Vocabulary.load(TRAIN / "vocab.txt")
    model = BiLanguageModel(ek.load_options(TINY), vocab, dropout=0.0)
    model.build()
    sentences = ["neural language models use words .", "these models ."]
    chars, (fwd, bwd) = next(iter(sentences_dataset(sentences, vocab, 2)))
    out = model(chars)
    w, b = model.softmax_w.numpy().astype(np.float64), model.softmax_b.numpy().astype(np.float64)
    nll = {}
    for direction, targets in (("forward", fwd.numpy()), ("backward", bwd.numpy())):
        h = out[direction].numpy().astype(np.float64)[targets >= 0]
        logits = h @ w.T + b
        logp = logits - logits.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        nll[direction] = -logp[np.arange(len(h)), targets[targets >= 0]]
    loss = float(model.compute_loss(chars, (fwd, bwd), out, training=False))
    assert loss == pytest.approx(0.5 * (nll["forward"].mean() + nll["backward"].mean()), rel=1e-5)
    ppl = model.perplexity(sentences)
    assert ppl["forward"] == pytest.approx(np.exp(nll["forward"].mean()), rel=1e-5)
    assert ppl["backward"] == pytest.approx(np.exp(nll["backward"].mean()), rel=1e-5)


def test_sampled_softmax_trains_and_errors():
    vocab = Vocabulary.load(TRAIN / "vocab.txt")
    model = BiLanguageModel(ek.load_options(TINY), vocab, n_sampled=8)
    model.build()
    model.compile(optimizer="adam")
    ds = lm_dataset([TRAIN / "data.txt"], vocab, batch_size=2)
    logs = model.fit(ds, epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0]) and logs["tokens"][0] > 100
    with pytest.raises(ValueError, match="n_sampled"):
        BiLanguageModel(ek.load_options(TINY), vocab, n_sampled=32)


# -- pretrain(): output folder, reload, resume, continue ----------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "run"
    model, state = pretrain(
        [TRAIN / "data.txt"], TRAIN / "data.txt", {**TINY, "learning_rate": 0.01}, out, epochs=2, verbose=0, log=_quiet
    )
    return model, state, out


def test_pretrain_writes_a_folder_that_reloads_exactly(trained):
    model, state, out = trained
    assert sorted(p for p in os.listdir(out) if p != "logs") == [  # backup/ removed at the end
        ".lock",
        "manifest.json",
        "options.json",
        "softmax.hdf5",
        "state.json",
        "vocab.txt",
        "weights.hdf5",
    ]
    assert state["epochs_completed"] == 2 and len(state["tokens_per_second"]) == 2
    assert state["history"]["loss"][1] < state["history"]["loss"][0]
    options = json.loads((out / "options.json").read_text())
    assert options["n_tokens_vocab"] == len(Vocabulary.load(out / "vocab.txt"))
    ids = batch_to_ids([["neural", "models", "."], ["the"]])
    reloaded = ek.BiLM.from_pretrained(out / "options.json", out / "weights.hdf5", add_sentence_boundaries=False)
    for a, b in zip(model.bilm(ids)["layers"], reloaded(ids)["layers"]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ek.BiLM.from_preset(out).get_weight_arrays().keys() == model.bilm.get_weight_arrays().keys()
    again = BiLanguageModel.from_preset(out)
    sentences = ["neural language models use words ."]
    assert again.perplexity(sentences) == pytest.approx(model.perplexity(sentences), rel=1e-6)
    assert state["valid_perplexity"] == pytest.approx(
        model.perplexity((TRAIN / "data.txt").read_text(encoding="utf-8").splitlines()), rel=1e-4
    )


def test_rerun_is_a_no_op_and_options_must_agree(trained):
    _, state, out = trained
    _, again = pretrain(
        [TRAIN / "data.txt"], None, {**TINY, "learning_rate": 0.01}, out, epochs=2, verbose=0, log=_quiet
    )
    assert again == state
    with pytest.raises(ValueError, match="made from other input: options 'lstm.dim' \\(16 then, 8 now\\)\\. Re-run"):
        pretrain(
            [TRAIN / "data.txt"],
            None,
            {**TINY, "learning_rate": 0.01, "lstm": {**TINY["lstm"], "dim": 8}},
            out,
            log=_quiet,
        )


def test_continue_training_from_released_layout(trained, tmp_path):
    _, _, out = trained
    other = tmp_path / "other.txt"
    other.write_text("a new domain with new words .\nnew words again .\n", encoding="utf-8")
    model, _ = pretrain(
        [other],
        None,
        {**TINY, "learning_rate": 0.0},
        tmp_path / "adapted",
        epochs=1,
        init_from=str(out),
        verbose=0,
        log=_quiet,
    )
    original = ek.weights.read_weights_hdf5(out / "weights.hdf5", ek.load_options(out / "options.json"))
    adapted = model.bilm.get_weight_arrays()
    for name, value in original.items():  # learning rate 0: the biLM is exactly the one we started from
        np.testing.assert_array_equal(adapted[name], value)
    assert len(model.vocab) != len(Vocabulary.load(out / "vocab.txt"))  # own vocabulary, fresh softmax
    with pytest.raises(ValueError, match="'lstm' options differ"):
        pretrain(
            [other],
            None,
            {**TINY, "lstm": {**TINY["lstm"], "dim": 8}},
            tmp_path / "bad",
            init_from=str(out),
            log=_quiet,
        )


def test_bad_training_options(tmp_path):
    with pytest.raises(ValueError, match="optimizer"):
        pretrain([TRAIN / "data.txt"], None, {**TINY, "optimizer": "sgd"}, tmp_path / "x", log=_quiet)
    with pytest.raises(ValueError, match="unknown preset"):
        BiLanguageModel.from_preset("no-such-preset")


def test_cli_parser():
    from elmo_keras.cli import build_parser

    args = build_parser().parse_args(
        [
            "pretrain",
            "--train",
            "a.txt",
            "b.txt",
            "--valid",
            "v.txt",
            "--options",
            "o.json",
            "--out",
            "d",
            "--epochs",
            "3",
        ]
    )
    assert (args.command, args.train, args.valid, args.epochs, args.strategy) == (
        "pretrain",
        ["a.txt", "b.txt"],
        "v.txt",
        3,
        "default",
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--train", "a.txt"])  # --options and --out are required
