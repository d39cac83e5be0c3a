"""The import graph follows the layering in DESIGN.md: a module imports only from its own level or the levels below
(imports inside functions included), the modules form no import cycle, and the package root holds few modules."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "elmo_keras"

#: DESIGN.md's layering, lowest first: a module of a level may import modules of its level and the levels above
#: it in this list, never those below. A name ending in "." stands for a folder.
LEVELS = [
    ["errors"],
    ["utils."],
    ["saving", "text"],
    ["io."],
    ["presets."],
    ["layers."],
    ["elmo"],
    ["embed", "corpus."],
    ["tasks.", "tasks.predict"],  # predict: `elmo-keras predict` / `evaluate` (reads corpus.lines, like embed)
    ["lm."],
    ["export."],
    ["cli"],
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _level(module: str) -> int:
    name = module.removeprefix("elmo_keras").lstrip(".")
    for level, members in enumerate(LEVELS):
        for member in members:
            if name == member.rstrip(".") or (member.endswith(".") and name.startswith(member)):
                return level
    raise AssertionError(f"{module} is in no level of LEVELS: add it where DESIGN.md places it")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere in its code (not in docstrings)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, set(paths)) - {name} for name, path in paths.items()}


def test_no_module_imports_from_a_higher_level(graph):
    upward = sorted(
        f"{a} -> {b}"
        for a, deps in graph.items()
        if a != "elmo_keras"
        for b in deps
        if b != "elmo_keras" and not b.startswith(a + ".") and _level(b) > _level(a)
    )
    assert upward == []


def test_no_import_cycle(graph):
    edges = {
        a: {b for b in deps if b != "elmo_keras" and not b.startswith(a + ".")}
        for a, deps in graph.items()
        if a != "elmo_keras"
    }
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join(path[path.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_the_root_holds_at_most_eight_modules():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert len(modules) <= 8, modules


def test_the_first_generation_paths_still_import():
    import importlib

    from elmo_keras.utils.aliases import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
