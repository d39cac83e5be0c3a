"""The docstrings are the API reference (Keras style, rendered by mkdocs):

* the Example of every layer and model registered under "elmo_keras" runs (a ```python block or doctest in its
  docstring); one without an Example fails;
* every public callable of the package has an ``Args:`` section naming each of its parameters, one per line, and
  nothing else (a Keras hook it overrides, such as ``call`` or ``get_config``, is documented by Keras); a layer's
  ``call`` parameters are named under ``Call arguments:`` in the class docstring;
* the Example of every other public callable that has one runs.

"Public": the names in a module's ``__all__`` where it has one, else those not starting with ``_``, defined in
that module; for classes, also their own public methods (classmethods such as ``from_preset`` included).
"""

import dataclasses
import doctest
import importlib
import inspect
import pkgutil
import re

import keras
import pytest
from test_layer_harness import registered_classes

import elmo_keras as ek

LAYERS = {
    name: obj
    for name, obj in registered_classes().items()
    if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)
}


def examples(obj) -> tuple[list[str], list[doctest.DocTest]]:
    """The ```python blocks and the doctests in the docstring of ``obj``."""
    doc = inspect.getdoc(obj) or ""
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    doctests = [t for t in doctest.DocTestFinder(recurse=False).find(obj) if t.examples]
    return blocks, doctests


def run_examples(name: str, obj) -> None:
    blocks, doctests = examples(obj)
    for block in blocks:
        exec(compile(block, f"<{name} docstring example>", "exec"), {})
    runner = doctest.DocTestRunner()
    for test in doctests:
        runner.run(test)
    assert runner.failures == 0


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_docstring_example_runs(name):
    cls = LAYERS[name]
    blocks, doctests = examples(cls)
    if not blocks and not doctests:
        pytest.fail(f"{name} ({cls.__module__}) has no Example in its docstring")
    run_examples(name, cls)


def public_callables() -> dict[str, object]:
    """``module.name`` (or ``module.Class.method``) -> function or class, for every public callable of the package.
    A method is the plain function (unwrapped from classmethod / staticmethod)."""
    found = {}
    modules = ["elmo_keras"] + [m.name for m in pkgutil.walk_packages(ek.__path__, "elmo_keras.")]
    for module_name in modules:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or obj.__module__ != module_name:
                continue  # a constant, or a name imported from elsewhere (checked where it is defined)
            found[f"{module_name}.{name}"] = obj
            if not inspect.isclass(obj):
                continue
            for method_name, member in vars(obj).items():
                function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if method_name.startswith("_") or not inspect.isfunction(function):
                    continue
                if any(
                    method_name in vars(base)
                    for base in obj.__mro__[1:]
                    if not base.__module__.startswith("elmo_keras")
                ):
                    continue  # a Keras (or Python) hook: call, build, get_config, update_state, on_epoch_end, ...
                found[f"{module_name}.{name}.{method_name}"] = function
    return found


PUBLIC = public_callables()


def documented_parameters(doc: str, section: str) -> list[str] | None:
    """The names listed under ``section:`` of a Google-style docstring (``*args`` as ``args``), or None without it."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != f"{section}:":
            continue
        indent = len(line) - len(line.lstrip())
        entries, entry_indent = [], None
        for entry in lines[i + 1 :]:
            if not entry.strip():
                continue
            depth = len(entry) - len(entry.lstrip())
            if depth <= indent:
                break
            entry_indent = entry_indent or depth
            if depth == entry_indent:
                match = re.match(r"\*{0,2}(\w+)( \([^)]*\))?:", entry.strip())
                entries.append(match.group(1) if match else entry.strip())
        return entries
    return None


def parameters(function) -> list[str]:
    """The named parameters of ``function`` that its Args must list (not self/cls, *args or **kwargs)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin's
        return []
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    names = [p.name for p in signature.parameters.values() if p.kind not in skip]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def init_parameters(cls) -> list[str]:
    """The constructor parameters of a class, when the package defines its constructor (or it is a dataclass)."""
    init = cls.__init__
    if dataclasses.is_dataclass(cls) or getattr(init, "__module__", "").startswith("elmo_keras"):
        return parameters(init)
    return []


def check_section(doc: str, section: str, names: list[str], where: str) -> list[str]:
    listed = documented_parameters(doc, section)
    if listed is None:
        return [f"{where}: no {section}: section for {names}"] if names else []
    missing = [n for n in names if n not in listed]
    extra = [n for n in listed if n not in names and n not in ("args", "kwargs")]
    problems = [f"{where}: {section}: lacks {missing}"] if missing else []
    return problems + ([f"{where}: {section}: names no parameter {extra}"] if extra else [])


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_callable_documents_its_arguments(name):
    obj = PUBLIC[name]
    doc = inspect.getdoc(obj) or ""
    if not doc.strip():
        pytest.fail(f"{name} has no docstring")
    if inspect.isclass(obj):
        problems = check_section(doc, "Args", init_parameters(obj), name)
        if issubclass(obj, keras.layers.Layer) and "call" in vars(obj):
            problems += check_section(doc, "Call arguments", parameters(obj.call), name)
    else:
        problems = check_section(doc, "Args", parameters(obj), name)
    assert not problems, "\n".join(problems)


EXAMPLES = sorted(
    n for n, obj in PUBLIC.items() if any(examples(obj)) and not (inspect.isclass(obj) and obj in LAYERS.values())
)


@pytest.mark.parametrize("name", EXAMPLES)
def test_public_example_runs(name):
    run_examples(name, PUBLIC[name])
