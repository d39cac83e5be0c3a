"""Run code in a new Python interpreter, as a user's next session would: nothing is imported but what it imports.

A test process that has imported every module hides a class that ``import elmo_keras`` does not register;
``run_fresh`` does not. ``without_package=True`` also makes ``elmo_keras`` unimportable, as on a TF Serving host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_BLOCK_PACKAGE = """
import importlib.abc, sys
class _NoElmoKeras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "elmo_keras":
            raise ModuleNotFoundError(f"No module named {name!r} (not installed on this serving host)")
sys.meta_path.insert(0, _NoElmoKeras())
"""


def run_fresh(
    code: str, cwd: str | os.PathLike, without_package: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) with ``python -c`` in ``cwd``; AssertionError with its output unless it exits 0."""
    code = textwrap.dedent(code)
    if without_package:
        code = _BLOCK_PACKAGE + code
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr[-5000:]}"
    return done


def run_cli(*args: str, cwd: str | os.PathLike, timeout: float = 600) -> subprocess.CompletedProcess:
    """``elmo-keras ARGS`` as its own process (not checked: the caller reads returncode, stdout, stderr)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-m", "elmo_keras.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
