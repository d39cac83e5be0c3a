"""The module paths of the first generation (``elmo_keras.options``, ``elmo_keras.models``, ``elmo_keras.beam``,
...) stay importable after the modules moved into folders by role: an import of an old path returns the moved
module itself (the same object, so ``monkeypatch.setattr("elmo_keras.download.TIMEOUT", ...)`` and pickles
that name the old path keep working). Nothing is imported until an old path is."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

#: old module path -> where it lives now
MOVED = {
    f"elmo_keras.{old}": f"elmo_keras.{new}"
    for old, new in {
        "files": "utils.files",
        "cpu": "utils.cpu",
        "host_memory": "utils.host_memory",
        "deprecation": "utils.deprecation",
        "options": "io.options",
        "weights": "io.weights",
        "download": "io.download",
        "hub_module": "io.hub_module",
        "models": "tasks.models",
        "metrics": "tasks.metrics",
        "callbacks": "tasks.callbacks",
        "baselines": "tasks.baselines",
        "features": "tasks.features",
        "embed_once": "tasks.embed_once",
        "datasets": "tasks.datasets",
        "train_task": "tasks.train_task",
        "beam": "corpus.beam",
        "hub_export": "export.hub_module",
    }.items()
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path in :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system is about to give the module this old-path spec
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # give it back its own


def install() -> None:
    """Let the old paths be imported (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
