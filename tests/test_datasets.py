"""Bundled data: the files are the documented ones, the split is fixed and stratified."""

import hashlib
from importlib import resources

import numpy as np

from elmo_keras import datasets


def test_bundled_files_match_their_source_notes():
    ag = resources.files("elmo_keras").joinpath("data", "ag_news", "test.csv").read_bytes()
    assert hashlib.sha256(ag).hexdigest() == "d2a2cef4dfeb21ca17b463fd15e9e5a639c05823d03efabb3d28a75bbfe8d915"
    for folder in ("ag_news", "brown"):
        assert resources.files("elmo_keras").joinpath("data", folder, "SOURCE.md").is_file()


def test_ag_news_split_is_fixed_and_stratified():
    a, b = datasets.load_ag_news(), datasets.load_ag_news()
    assert len(a.train_texts) == 6000 and len(a.test_texts) == 1600
    assert a.class_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert list(np.bincount(a.test_labels)) == [400] * 4 and list(np.bincount(a.train_labels)) == [1500] * 4
    assert list(a.train_texts[:5]) == list(b.train_texts[:5])
    assert a.train_texts.dtype == object and "\\" not in "".join(a.train_texts)


def test_simple_tokenize():
    assert datasets.simple_tokenize("The bank's loan, approved (U.S.)!") == "The bank's loan , approved ( U.S . ) !"


def test_brown_matches_the_corpus_counts():
    sentences, files = datasets.load_brown()
    assert len(sentences) == 57340 and sum(map(len, sentences)) == 1161192
    assert len(files) == 500 and files[-1]["stop"] == 57340
