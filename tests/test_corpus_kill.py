"""Kill `elmo-keras embed` at many points (SIGKILL, SIGTERM, SIGINT; every format), run the same command again: it
resumes, the output equals an uninterrupted run, nothing is left behind, and a kill lost at most the two pieces in
progress. A second run on the same output is refused while the first holds it."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import elmo_keras as ek
from elmo_keras.cli import main

pytestmark = pytest.mark.slow
WORDS = (
    "the bank approved a loan he sat on of river money time year people way day man thing woman life child "
    "Ünïcode 😀 world school state family"
).split()

# Child: patch one step of the run so that the process SIGKILLs itself exactly there (KILL_AT), or log the number of
# lines each model call has computed (EMBEDDED_LOG); then run the CLI.
CHILD = textwrap.dedent("""
    import os, signal, sys
    from elmo_keras.cli import main
    from elmo_keras.corpus import assembly, layout, run
    from elmo_keras.embed import ElmoEmbedder
    point = os.environ.get("KILL_AT")
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    calls = {"n": 0}
    if point == "manifest":  # right after the manifest is written, before any shard
        run.remove_stale_temporaries = lambda folder: die()
    elif point == "shard-rename":  # shard 2's file fully written under its temporary name, not yet renamed
        atomic = layout.atomic_file
        def atomic_file(path):
            calls["n"] += 1
            return dying(atomic(path)) if calls["n"] == 2 else atomic(path)
        class dying:
            def __init__(self, cm): self.cm = cm
            def __enter__(self): return self.cm.__enter__()
            def __exit__(self, *exc): die()
        layout.atomic_file = atomic_file
    elif point == "assembly":  # half-way through adding shard 3's lines to the hdf5 output being built
        add = assembly.Assembly.add
        def add_then_die(self, shard, arrays):
            calls["n"] += 1
            if calls["n"] == 3:
                add(self, shard, arrays[: len(arrays) // 2])
                die()
            return add(self, shard, arrays)
        assembly.Assembly.add = add_then_die
    elif point == "publish":  # manifest says complete, output not yet in place
        run.publish = lambda src, dst: die()
    elif point == "cleanup":  # output in place, the finished run folder not yet deleted
        run.shutil.rmtree = lambda path, **kw: die()
    if "EMBEDDED_LOG" in os.environ:
        embed_batch = ElmoEmbedder.embed_batch
        def logged(self, sentences):
            arrays = embed_batch(self, sentences)
            with open(os.environ["EMBEDDED_LOG"], "a") as log:
                log.write(f"{len(sentences)}\\n")
            return arrays
        ElmoEmbedder.embed_batch = logged
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, fixture_files):
    """A 400-line input (empty lines, Unicode), its uninterrupted embedding (per line), the model arguments."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("corpus") / "in.txt"
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embedder = ek.ElmoEmbedder(*fixture_files)
    expected = [embedder.embed_sentence(ek.tokenize(line)) for line in lines]
    return (
        path,
        expected,
        ["--options", fixture_files[0], "--weights", fixture_files[1], "--shard-lines", "16", "--dtype", "float32"],
    )  # the child processes do not see conftest's float32 "auto"


def _child(args, kill_at=None, log=None, **popen):
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        **({"KILL_AT": kill_at} if kill_at else {}),
        **({"EMBEDDED_LOG": str(log)} if log else {}),
    }
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, "embed", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def _resume_and_check(corpus, out, fmt, capsys, expect_reused=True):
    path, expected, model = corpus
    assert main(["embed", str(path), str(out), *model, "--format", fmt]) == 0
    report = capsys.readouterr().out
    if expect_reused:
        assert " 0 reused" not in report, report
    with ek.load_embeddings(out) as got:
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, atol=1e-5)
    assert not os.path.exists(f"{out}.partial")
    leftovers = [n for n in os.listdir(os.path.dirname(out)) if n.endswith(".tmp")]
    assert leftovers == []
    return report


@pytest.mark.parametrize(
    "fmt, kill_at",
    [
        ("hdf5", "manifest"),
        ("hdf5", "shard-rename"),
        ("hdf5", "assembly"),
        ("hdf5", "publish"),
        ("hdf5", "cleanup"),
        ("shards", "shard-rename"),
        ("shards", "publish"),
    ],
)
def test_sigkill_at_each_step_then_resume(corpus, tmp_path, capsys, fmt, kill_at):
    path, _, model = corpus
    out = tmp_path / f"out.{fmt}"
    child = _child([str(path), str(out), *model, "--format", fmt], kill_at)
    child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL
    assert os.path.exists(out) == (kill_at == "cleanup") and os.path.isdir(f"{out}.partial")
    if kill_at == "cleanup":  # the same command again: OUTPUT is there, the leftover run folder is dropped
        assert main(["embed", str(path), str(out), *model, "--format", fmt]) == 2
        assert "exists; pass --overwrite" in capsys.readouterr().err
        assert not os.path.exists(f"{out}.partial")
        model = [*model, "--overwrite"]
    _resume_and_check((path, corpus[1], model), out, fmt, capsys, expect_reused=kill_at not in ("manifest", "cleanup"))


def _committed(partial):
    return sorted(n for n in os.listdir(partial) if n.startswith("shard-")) if os.path.isdir(partial) else []


def _wait_for_a_committed_piece(child, partial):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not _committed(partial):
        time.sleep(0.002)
    assert child.poll() is None and _committed(partial), "the run ended before committing a piece"


@pytest.mark.parametrize(
    "fmt, signum",
    [
        ("hdf5", signal.SIGKILL),
        ("shards", signal.SIGKILL),
        ("npy", signal.SIGKILL),
        ("hdf5", signal.SIGTERM),
        ("shards", signal.SIGTERM),
        ("npy", signal.SIGINT),
    ],
)
def test_kill_a_running_cli_then_resume(corpus, tmp_path, capsys, fmt, signum):
    """Killed as soon as its first piece (16 lines) is committed: the resumed run embeds only what was not committed,
    and the kill lost at most the two pieces in progress (each piece is committed as soon as it is computed)."""
    path, _, model = corpus
    out, log = tmp_path / f"out.{fmt}", tmp_path / "embedded.log"
    args = [str(path), str(out), *model, "--format", fmt]
    child = _child(args, log=log)
    partial = f"{out}.partial"
    _wait_for_a_committed_piece(child, partial)
    if signum == signal.SIGKILL and fmt == "npy":  # a second run on the same output, while the first holds it
        child.send_signal(signal.SIGSTOP)
        assert main(["embed", *args]) == 2
        assert "another embed run is writing" in capsys.readouterr().err
    os.kill(child.pid, signum)
    _, err = child.communicate(timeout=120)
    assert child.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 130), err
    if signum != signal.SIGKILL:
        assert "lines are committed in" in err and "run the same command again to resume" in err
    assert not os.path.exists(out)
    committed = 16 * len(_committed(partial))
    embedded = sum(int(n) for n in log.read_text().split())
    assert 16 <= committed and embedded - committed <= 2 * 16, (embedded, committed)
    report = _resume_and_check(corpus, out, fmt, capsys)
    assert f"({committed} reused from an interrupted run, {400 - committed} embedded;" in report
