"""What the language model predicts (issue 35): BiLanguageModel.word_probabilities / substitutes against a NumPy
softmax of the model's own outputs, the <S>/</S> offsets, known answers on the preset's training text, the
no-softmax error, and `elmo-keras lm-predict` (as a separate process for one success and one error)."""

import json
import re
import shutil

import keras
import numpy as np
import pytest
from fresh import run_cli
from test_lm import TINY

import elmo_keras as ek
from elmo_keras.cli import main
from elmo_keras.errors import InputError
from elmo_keras.lm.data import sentences_dataset
from elmo_keras.presets import preset_files

ATOL = 1e-6  # float32 softmax vs a float64 NumPy softmax of the same hidden states
SENTENCES = [
    "The jury said it did find that many of the voters were not satisfied .",
    "He was one of the best .",
    "Stop",
]


@pytest.fixture(scope="module")
def lm():
    return ek.lm.BiLanguageModel.from_preset("brown-small")


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_probabilities_match_numpy_softmax_of_the_model_outputs(lm):
    queries = [(s, p) for s in SENTENCES for p in sorted({0, len(s.split()) // 2, len(s.split()) - 1})]
    got = lm.word_probabilities(queries, batch_size=2)  # two batches, padded rows, sentences of 1 to 15 tokens
    arrays = lm.softmax_arrays()
    w, b = arrays["softmax/W"].astype(np.float64), arrays["softmax/b"].astype(np.float64)
    for sentence in SENTENCES:  # the model on this sentence alone: no padding
        chars, (fwd_targets, bwd_targets) = next(iter(sentences_dataset([sentence], lm.vocab, 1)))
        out = lm(chars, training=False)
        for i, (_, p) in [(i, q) for i, q in enumerate(queries) if q[0] == sentence]:
            word_id = lm.vocab.ids.get(sentence.split()[p], lm.vocab.unk_id)
            # the training targets place the word: forward row p and backward row p + 2 both predict it
            assert int(fwd_targets[0, p]) == word_id and int(bwd_targets[0, p + 2]) == word_id
            logits_f = np.asarray(out["forward"][0, p], np.float64) @ w.T + b
            logits_b = np.asarray(out["backward"][0, p + 2], np.float64) @ w.T + b
            expected = {"forward": _softmax(logits_f), "backward": _softmax(logits_b)}
            product = expected["forward"] * expected["backward"]
            expected["both"] = product / product.sum()
            for d in ("forward", "backward", "both"):
                assert got[d].dtype == np.float32 and got[d].shape == (len(queries), len(lm.vocab))
                np.testing.assert_allclose(got[d][i], expected[d], rtol=0, atol=ATOL, err_msg=f"{d} {sentence!r} {p}")


def test_each_direction_reads_only_its_side(lm):
    left = "The old man sat on the bank of the river ."
    other_right = "The old man sat on the bank in the city ."  # same length: no padding difference
    other_left = "A young boy swam by the bank of the river ."
    p = lm.word_probabilities([(left, 6), (other_right, 6), (other_left, 6)])
    np.testing.assert_allclose(p["forward"][0], p["forward"][1], rtol=0, atol=ATOL)  # right side changed
    np.testing.assert_allclose(p["backward"][0], p["backward"][2], rtol=0, atol=ATOL)  # left side changed
    assert np.abs(p["backward"][0] - p["backward"][1]).max() > 1e-3
    assert np.abs(p["forward"][0] - p["forward"][2]).max() > 1e-3


# Training-text sentences of brown-small (Brown files ca02..cb11, none held out): (sentence, position, the
# directions whose top word is the word). Picked where the model gets them (fixed phrases); an offset error breaks
# them all.
KNOWN = [
    ("He would assign one of the rescue trucks to the Riverside section of the city and the other to the Rumford "
     "area .", 4, ("forward", "backward", "both")),
    ("Indonesia is one of the twenty under-developed countries of Asia , Africa and Latin America that are "
     "receiving Soviet aid .", 3, ("forward", "backward", "both")),
    ("The United States hopes that any future Lao Cabinet would not become Communist dominated .", 2, ("forward",)),
    ("The White House is taking extraordinary steps to check the rapid growth of juvenile delinquency in the "
     "United States .", 18, ("forward",)),
    ("The departure of the Giants and the Dodgers to California left New York with only the Yankees .", 12,
     ("forward",)),
    ("The New York franchise is headed by Mrs. Charles Shipman Payson .", 2, ("forward",)),
    ("The taxpayer testified that in order to retain the account he had to pad his invoices and pay the excess to "
     "the manager .", 6, ("backward", "both")),
]  # fmt: skip


def test_the_right_word_comes_first_on_training_text(lm):
    results = lm.substitutes_batch([(s, p) for s, p, _ in KNOWN], k=1)
    hits = {(i, d) for i, r in enumerate(results) for d in ("forward", "backward", "both") if r[d][0][0] == r["word"]}
    assert hits >= {(i, d) for i, (_, _, directions) in enumerate(KNOWN) for d in directions}


def test_substitutes_options_and_batch(lm):
    one = lm.substitutes("He was one [of] the best .", k=5)
    assert one == lm.substitutes("He was one of the best .", 3, k=5)
    assert one == lm.substitutes(["He", "was", "one", "of", "the", "best", "."], 3, k=5)
    assert one["tokens"][3] == one["word"] == "of" and one["position"] == 3
    assert [len(one[d]) for d in ("forward", "backward", "both")] == [5, 5, 5]
    assert one["both"][0][0] == "of"
    for d in ("forward", "backward", "both"):
        probabilities = [p for _, p in one[d]]
        assert probabilities == sorted(probabilities, reverse=True) and 0 < probabilities[0] <= 1
    without = lm.substitutes("He was one [of] the best .", k=4, exclude_word=True, exclude_special=True)
    for d in ("forward", "backward", "both"):
        listed = [w for w, _ in one[d] if w not in ("of", "<S>", "</S>", "<UNK>")]
        assert [w for w, _ in without[d]][: len(listed)] == listed[:4]  # same probabilities, not renormalised
        assert not {w for w, _ in without[d]} & {"of", "<S>", "</S>", "<UNK>"}
    batch = lm.substitutes_batch(["He was one [of] the best .", ("He was one of the best .", 0)], k=5, batch_size=1)
    assert batch[0] == one and batch[1]["word"] == "He"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda lm: lm.substitutes("The bank raised its rates ."), "no marked word"),
        (lambda lm: lm.substitutes("The [bank] [raised] its rates ."), "2 marked words"),
        (lambda lm: lm.substitutes("The [] raised ."), "the marked word in 'The [] raised .' is empty"),
        (lambda lm: lm.substitutes("The bank .", 3), "position 3 is out of range for a sentence of 3"),
        (lambda lm: lm.substitutes("The bank .", -1), "position -1 is out of range"),
        (lambda lm: lm.substitutes("The bank .", True), "position must be an int"),
        (lambda lm: lm.substitutes("   ", 0), "the sentence is empty"),
        (lambda lm: lm.substitutes(["The", "big bank"], 0), "hold no whitespace"),
        (lambda lm: lm.substitutes("The [bank] .", k=0), "k (--top-k) must be a positive integer"),
        (lambda lm: lm.substitutes("The [bank] .", k=12000, exclude_word=True), "only 11999 vocabulary words"),
        (lambda lm: lm.substitutes_batch([]), "non-empty list of queries"),
        (lambda lm: lm.substitutes_batch(["A [b] .", ("A b .", 5)]), "query 1: position 5 is out of range"),
        (lambda lm: lm.word_probabilities(["A [b] ."], batch_size=0), "batch_size must be a positive integer"),
    ],
)
def test_bad_queries_are_named(lm, call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call(lm)


@pytest.fixture(scope="module")
def no_softmax_folder(tmp_path_factory):
    """A pretraining folder without softmax.hdf5 (like released weights with a vocabulary)."""
    folder = tmp_path_factory.mktemp("no_softmax")
    for key in ("options", "weights", "vocab"):
        shutil.copy(preset_files("brown-small")[key], folder)
    return folder


def test_no_trained_softmax_is_refused(lm, no_softmax_folder, tmp_path):
    untrained = ek.lm.BiLanguageModel.from_preset(str(no_softmax_folder))
    assert lm.softmax_trained and not untrained.softmax_trained
    for call in (lambda: untrained.substitutes("The [bank] ."), lambda: untrained.word_probabilities(["A [b] ."])):
        with pytest.raises(InputError, match=r"no trained softmax.*brown-small.*elmo-keras pretrain"):
            call()
    path = tmp_path / "softmax.hdf5"
    lm.save_softmax_hdf5(path)
    untrained.load_softmax_hdf5(path)  # loading a softmax makes it usable
    assert untrained.softmax_trained
    # training does too: one step of a new model on a tiny vocabulary (eager: no graph to trace)
    tiny = ek.lm.BiLanguageModel(ek.load_options(TINY), ["<S>", "</S>", "<UNK>", "the", "bank"], dropout=0.0)
    tiny.compile(optimizer="sgd", run_eagerly=True)
    with pytest.raises(InputError, match="no trained softmax"):
        tiny.substitutes("the [bank]")
    chars, targets = next(iter(sentences_dataset(["the bank"], tiny.vocab, 1)))
    tiny.train_on_batch(chars, targets)
    assert tiny.softmax_trained and tiny.substitutes("the [bank]", k=2)["word"] == "bank"
    (tmp_path / "bare").mkdir()  # options + weights only, as the released files: no vocabulary for a softmax
    for key in ("options", "weights"):
        shutil.copy(preset_files("brown-small")[key], tmp_path / "bare")
    with pytest.raises(InputError, match="has no vocab.txt.*'brown-small'"):
        ek.lm.BiLanguageModel.from_preset(str(tmp_path / "bare"))


def test_keras_file_keeps_whether_the_softmax_is_trained(no_softmax_folder, tmp_path):
    ek.lm.BiLanguageModel.from_preset(str(no_softmax_folder)).save(tmp_path / "untrained.keras")
    with pytest.raises(InputError, match="no trained softmax"):
        keras.models.load_model(tmp_path / "untrained.keras").substitutes("The [bank] .")
    # a trained one: reloaded by `elmo-keras lm-predict` in a new process, test_cli_prints_a_table_and_json


def test_cli_prints_a_table_and_json(lm, tmp_path, capsys):
    """One process: the command reloads a .keras file of the preset's model (a fresh interpreter, as a user's)."""
    lm.save(tmp_path / "trained.keras")
    done = run_cli(
        "lm-predict", "--preset", "trained.keras", "He was one [of] the best .", "--top-k", "3", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert "ranked by both" in lines[0] and lines[1].split() == ["rank", "word", "both", "forward", "backward"]
    expected = lm.word_probabilities(["He was one [of] the best ."])
    table = [line.split() for line in lines[2:]]
    assert [row[0] for row in table] == ["1", "2", "3"] and table[0][1] == "of"
    ids = [lm.vocab.ids[row[1]] for row in table]
    assert ids == list(np.argsort(-expected["both"][0], kind="stable")[:3])
    for row, i in zip(table, ids):  # printed with 4 decimals
        assert [float(v) for v in row[2:]] == [
            round(float(expected[d][0][i]), 4) for d in ("both", "forward", "backward")
        ]
    assert main(["lm-predict", "--preset", "brown-small", "He was one [of] the best .", "--json", "--top-k", "4",
                 "--direction", "backward", "--exclude-word"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert result["tokens"][result["position"]] == "of" and result["ranked_by"] == "backward"
    assert [r["rank"] for r in result["words"]] == [1, 2, 3, 4] and "of" not in {r["word"] for r in result["words"]}
    for row in result["words"]:
        for d in ("forward", "backward", "both"):
            assert abs(row[d] - expected[d][0][lm.vocab.ids[row["word"]]]) < ATOL
    assert [r["backward"] for r in result["words"]] == sorted((r["backward"] for r in result["words"]), reverse=True)


def test_cli_errors_are_one_line_exit_2(no_softmax_folder, capsys):
    """In-process (``main``, what the command runs): each a one-line error and exit 2."""
    cases = [
        (["The [bank] [raised] its rates .", "--preset", "brown-small"], "2 marked words in 'The [bank] [raised]"),
        (["The bank raised its rates .", "--preset", "brown-small"], "no marked word"),
        (["Hello", "--preset", str(no_softmax_folder)], "no marked word"),  # checked before the model loads
        (["The [bank] .", "--preset", str(no_softmax_folder)], "no trained softmax"),
        (["The [bank] .", "--preset", "brown-small", "--top-k", "20000"], "only 12000 vocabulary words"),
    ]
    for args, message in cases:
        assert main(["lm-predict", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("elmo-keras lm-predict: error: ") and message in err[0], err
    for args, message in ((["--top-k", "0"], "must be >= 1"), (["--direction", "sideways"], "invalid choice")):
        with pytest.raises(SystemExit) as raised:  # argparse: usage + one error line, exit 2
            main(["lm-predict", "The [bank] .", "--preset", "brown-small", *args])
        assert raised.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
