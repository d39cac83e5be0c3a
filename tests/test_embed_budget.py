"""ElmoEmbedder's token budget: batches of at most ``batch_size`` sentences and ``batch_tokens`` padded tokens,
read-ahead bounded by tokens, the same vectors as one sentence at a time, and a file that mixes 20k-token
documents with short lines embedded in bounded memory."""

import json
import random

import numpy as np
import pytest
from fresh import run_fresh

from elmo_keras.embed import BATCH_TOKENS, ElmoEmbedder, token_batches
from elmo_keras.errors import InputError

RNG = random.Random(0)
WORDS = ["bank", "loan", "river", "the", ".", "Ünïcode", "x" * 60, "approved", "sat", "on"]
# short lines, a few long documents (over the budgets used below) and an empty line, shuffled
SENTENCES = [[RNG.choice(WORDS) for _ in range(RNG.randint(1, 12))] for _ in range(40)]
SENTENCES += [[RNG.choice(WORDS) for _ in range(n)] for n in (300, 90, 45, 45)] + [[]]
RNG.shuffle(SENTENCES)


@pytest.fixture(scope="module")
def embedder(fixture_files):
    """Over the fixture model, float32 (batched and one-at-a-time vectors then agree to 1e-6)."""
    return ElmoEmbedder(*fixture_files, dtype="float32")


@pytest.fixture(scope="module")
def one_at_a_time(embedder):
    return [embedder.embed_sentence(s) for s in SENTENCES]


def _recording(embedder, monkeypatch) -> list[tuple[int, int]]:
    """(rows, longest length) of every batch the embedder's embed_batch is given."""
    shapes, embed_batch = [], embedder.embed_batch
    monkeypatch.setattr(
        embedder,
        "embed_batch",
        lambda batch, pool=None: shapes.append((len(batch), max(map(len, batch)))) or embed_batch(batch, pool),
    )
    return shapes


@pytest.mark.parametrize("batch_size, batch_tokens", [(8, 64), (64, 100), (3, 1)])
def test_batches_stay_within_the_budget_and_give_the_vectors_of_one_sentence_at_a_time(
    embedder, one_at_a_time, monkeypatch, batch_size, batch_tokens
):
    shapes = _recording(embedder, monkeypatch)
    got = list(embedder.embed_sentences(SENTENCES, batch_size=batch_size, batch_tokens=batch_tokens))
    assert sum(rows for rows, _ in shapes) == len(SENTENCES)
    for rows, longest in shapes:
        assert rows <= batch_size
        assert rows * longest <= batch_tokens or rows == 1, (rows, longest)  # a longer sentence: alone
    assert len(got) == len(SENTENCES)
    for g, r in zip(got, one_at_a_time):  # input order, the same values
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, atol=1e-6)


def test_token_batches_fill_rows_up_to_the_budget():
    lengths = [5, 1, 40, 2, 2, 9, 0]
    assert list(token_batches(lengths, batch_size=3, batch_tokens=8)) == [[6, 1, 3], [4], [0], [5], [2]]
    assert list(token_batches(lengths, batch_size=64, batch_tokens=10**9)) == [[6, 1, 3, 4, 0, 5, 2]]  # no limit
    assert list(token_batches([], 4, 8)) == []


def test_the_default_budget_keeps_ordinary_sentences_at_batch_size(embedder):
    """64 sentences of up to 128 tokens: one batch, as by sentence count alone; longer ones: fewer to a batch."""
    assert embedder.batch_tokens == BATCH_TOKENS == 64 * 128
    assert [len(b) for b in token_batches([128] * 64, 64, BATCH_TOKENS)] == [64]
    assert [len(b) for b in token_batches([20_000] * 3 + [10] * 64, 64, BATCH_TOKENS)] == [64, 1, 1, 1]


def test_read_ahead_is_bounded_by_tokens(fixture_files):
    """A chunk ends at chunk_size sentences or chunk_size * batch_tokens / batch_size tokens: the sentences read
    but not yet returned never hold more than that plus the last one read."""
    embedder = ElmoEmbedder(*fixture_files, dtype="float32", batch_size=4, batch_tokens=40, chunk_size=8)
    limit = 8 * 40 // 4
    pulled: list[int] = []

    def source():
        for sentence in SENTENCES:
            pulled.append(len(sentence))
            yield sentence

    for returned, _ in enumerate(embedder.embed_sentences(source())):
        assert sum(pulled[returned:]) <= limit + max(pulled[returned:]), (returned, pulled)
    assert len(pulled) == len(SENTENCES)


def test_xla_padding_stays_within_the_budget(fixture_files, embedder, monkeypatch):
    """jit_compile pads rows to batch_size only where the batch's length allows that many rows in the budget."""
    jit = ElmoEmbedder(*fixture_files, dtype="float32", jit_compile=True, batch_size=8, batch_tokens=64)
    padded, context = [], jit._context
    monkeypatch.setattr(jit, "_context", lambda emb, mask: padded.append(emb.shape[:2]) or context(emb, mask))
    sentences = [["bank"] * 3, ["loan"] * 5, ["river"] * 30, ["the"] * 100]
    for got, sentence in zip(jit.embed_sentences(sentences), sentences):
        np.testing.assert_allclose(got, embedder.embed_sentence(sentence), atol=1e-5)
    assert padded == [(8, 8), (2, 32), (1, 104)]  # 64 tokens: 8 rows of 8, 2 of 32; 104 alone


def test_a_lone_sentence_over_char_cnn_batch_tokens_runs_its_char_cnn_in_pieces(fixture_files, embedder, monkeypatch):
    """The one-call path for a lone sentence with new words runs the char CNN over all of its tokens at once:
    only a sentence of at most char_cnn_batch tokens takes it; a longer one goes char_cnn_batch words a call."""
    lone = ElmoEmbedder(*fixture_files, dtype="float32", char_cnn_batch=16)
    calls, whole = [], lone._whole
    monkeypatch.setattr(lone, "_whole", lambda ids: calls.append(ids.shape) or whole(ids))
    short, long = [f"s{i}" for i in range(16)], [f"w{i}" for i in range(40)]
    for sentence in (short, long):
        np.testing.assert_allclose(lone.embed_sentence(sentence), embedder.embed_sentence(sentence), atol=1e-6)
    assert calls == [(1, 16, 50)]  # the short one only


@pytest.mark.parametrize("bad", [0, -5, 2.5, "8192", True, None])
def test_bad_batch_tokens_is_named(fixture_files, embedder, bad):
    if bad is not None:  # None: the embedder's own budget in embed_sentences, not allowed on the constructor
        with pytest.raises(InputError, match=r"batch_tokens must be an integer >= 1 .*got"):
            next(embedder.embed_sentences([["bank"]], batch_tokens=bad))
    with pytest.raises(InputError, match=r"batch_tokens must be an integer >= 1 .*got"):
        ElmoEmbedder(*fixture_files, batch_tokens=bad)


# A file of 300 short lines (5 to 15 tokens) and 3 documents of 20,000 tokens through ek.embed_file, brown-small,
# float32 (one shard: all 303 lines). Measured in a fresh interpreter, from its RSS once the model is loaded:
# - `lone`: the peak growth of embedding one of the documents alone (the irreducible batch: a sentence over the
#   budget is a batch of its own);
# - `file`: the peak growth of embedding the whole file (VmHWM reset in between).
FILE_RUN = """
import json, os, random
import elmo_keras as ek

def status(key):  # bytes
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

rng = random.Random(0)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 12))) for _ in range(3000)]
lines = [" ".join(rng.choices(words, k=rng.randint(5, 15))) for _ in range(300)]
documents = [" ".join(rng.choices(words, k=20_000)) for _ in range(3)]
for k, document in enumerate(documents):
    lines.insert(50 + 100 * k, document)
with open("in.txt", "w") as f:
    f.write("\\n".join(lines) + "\\n")
embedder = ek.ElmoEmbedder.from_preset("brown-small", dtype="float32")
list(embedder.embed_sentences([line.split() for line in lines[:64]]))  # warm-up: tracing, allocator pools
base = status("VmRSS")
reset_peak()
embedder.embed_batch([documents[0].split()])
lone = status("VmHWM") - base
base = status("VmRSS")
reset_peak()
ek.embed_file(embedder, "in.txt", "out", fmt="shards", storage_dtype="float16", progress=False)
file = status("VmHWM") - base
tokens = sum(len(line.split()) for line in lines)
print(json.dumps({"lone": lone, "file": file, "tokens": tokens, "width": embedder.bilm.projection_dim * 2,
                  "layers": embedder.bilm.num_layers + 1, "batch_size": embedder.batch_size}))
"""


def test_a_file_of_long_documents_and_short_lines_embeds_in_bounded_memory(tmp_path):
    try:
        open("/proc/self/clear_refs", "w").close()
    except OSError:
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    got = json.loads(run_fresh(FILE_RUN, tmp_path).stdout.strip().splitlines()[-1])
    values = got["layers"] * got["width"]  # float values stored per token: [L, T, D]
    # What the run holds besides one batch's model work (the budget's bound on it is `lone`: every batch is
    # at most one document): the shard's float32 arrays (the runner keeps them until they are written) and the
    # writer's float16 buffer, which is made with a quarter to spare.
    held = got["tokens"] * values * (4 + 2 * 1.25)
    assert got["file"] <= got["lone"] + held, got
    # Sentence-count batching: the 64 longest lines (the 3 documents and 61 short lines) are one batch padded to
    # 20,000 tokens; its output arrays alone, [64, L, 20000, D] float32, are 3.9 GB for brown-small.
    old_outputs = got["batch_size"] * 20_000 * values * 4
    assert got["lone"] + held < old_outputs / 4, got
    print(
        f"peak growth {got['file'] / 2**20:.0f} MB (bound {(got['lone'] + held) / 2**20:.0f} MB); "
        f"sentence-count batching: over {old_outputs / 2**30:.1f} GB"
    )
