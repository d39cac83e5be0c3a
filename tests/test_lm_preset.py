"""The shipped presets (brown-small and its Transformer / gated-CNN siblings): files, size, loading through
every from_preset, sane perplexity."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import elmo_keras as ek
from elmo_keras.presets import PRESETS, preset_files


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_files_and_size(name):
    files = preset_files(name)
    assert set(PRESETS) == {"brown-small", "brown-small-transformer", "brown-small-cnn"} and all(files.values())
    assert os.path.getsize(files["weights"]) <= 15 * 2**20
    folder = os.path.dirname(files["options"])
    assert {"RECIPE.md", "SOURCE.md"} <= set(os.listdir(folder))
    options = json.load(open(files["options"]))
    assert options["n_tokens_vocab"] == len(ek.lm.Vocabulary.load(files["vocab"]))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_from_preset_loads_the_same_biLM(name):
    bilm = ek.BiLM.from_preset(name)
    elmo = ek.Elmo.from_preset(name, dropout=0.0)
    lm = ek.lm.BiLanguageModel.from_preset(name)
    ids = ek.batch_to_ids([["The", "jury", "said", "it", "did", "."]])
    expected = bilm(ids)["layers"]
    for a, b in zip(expected, elmo(tf.constant(["The jury said it did ."]))["layers"]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name, value in bilm.get_weight_arrays().items():
        np.testing.assert_array_equal(lm.bilm.get_weight_arrays()[name], value)
    ppl = lm.perplexity(["The jury said it did not find any evidence .", "He said that he would go home ."])
    assert 1.0 < ppl["forward"] < 1000 and 1.0 < ppl["backward"] < 1000
