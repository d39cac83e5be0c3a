"""The shipped brown-small preset: files, size, loading through every from_preset, sane perplexity."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras.presets import PRESETS, preset_files


def test_preset_files_and_size():
    files = preset_files("brown-small")
    assert set(PRESETS) == {"brown-small"} and all(files.values())
    assert os.path.getsize(files["weights"]) <= 15 * 2**20
    folder = os.path.dirname(files["options"])
    assert {"RECIPE.md", "SOURCE.md"} <= set(os.listdir(folder))
    options = json.load(open(files["options"]))
    assert options["n_tokens_vocab"] == len(ek.lm.Vocabulary.load(files["vocab"]))


def test_every_from_preset_loads_the_same_biLM():
    bilm = ek.BiLM.from_preset("brown-small")
    elmo = ek.Elmo.from_preset("brown-small", dropout=0.0)
    lm = ek.lm.BiLanguageModel.from_preset("brown-small")
    ids = ek.batch_to_ids([["The", "jury", "said", "it", "did", "."]])
    expected = bilm(ids)["layers"]
    for a, b in zip(expected, elmo(tf.constant(["The jury said it did ."]))["layers"]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name, value in bilm.get_weight_arrays().items():
        np.testing.assert_array_equal(lm.bilm.get_weight_arrays()[name], value)
    ppl = lm.perplexity(["The jury said it did not find any evidence .", "He said that he would go home ."])
    assert 1.0 < ppl["forward"] < 1000 and 1.0 < ppl["backward"] < 1000
