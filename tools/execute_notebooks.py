"""Execute notebooks at full size (ELMO_FULL=1) and save them with their outputs, as committed.

    python tools/execute_notebooks.py notebooks/*.ipynb

TF's C++ start-up log lines (written by absl before TF_CPP_MIN_LOG_LEVEL applies) are dropped from the saved
stderr outputs; everything else the cells print is kept.
"""

from __future__ import annotations

import os
import sys
import time

import nbformat
from nbclient import NotebookClient

_STARTUP_LOG = ("I0000", "W0000", "WARNING: All log messages before absl")


def _without_startup_log(cell) -> None:
    kept = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            out["text"] = "".join(line for line in out["text"].splitlines(True) if not line.startswith(_STARTUP_LOG))
            if not out["text"]:
                continue
        kept.append(out)
    cell["outputs"] = kept


def execute(path: str) -> None:
    """Run ``path`` top to bottom in its folder and write it back with the outputs."""
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        notebook,
        timeout=3600,
        kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}},
    ).execute()
    for cell in notebook.cells:
        _without_startup_log(cell)
    nbformat.write(notebook, path)
    print(f"{path}: {time.perf_counter() - start:.0f} s, {os.path.getsize(path) / 1024:.0f} KiB", flush=True)


if __name__ == "__main__":
    os.environ["ELMO_FULL"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for notebook_path in sys.argv[1:]:
        execute(notebook_path)
