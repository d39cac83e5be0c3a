"""The Example of every layer and model registered under "elmo_keras" runs (a ```python block or doctest in its
docstring); one without an Example fails."""

import doctest
import inspect
import re

import keras
import pytest
from test_layer_harness import registered_classes

LAYERS = {
    name: obj
    for name, obj in registered_classes().items()
    if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_docstring_example_runs(name):
    cls = LAYERS[name]
    doc = inspect.getdoc(cls) or ""
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    doctests = [t for t in doctest.DocTestFinder(recurse=False).find(cls) if t.examples]
    if not blocks and not doctests:
        pytest.fail(f"{name} ({cls.__module__}) has no Example in its docstring")
    for block in blocks:
        exec(compile(block, f"<{name} docstring example>", "exec"), {})
    runner = doctest.DocTestRunner()
    for test in doctests:
        runner.run(test)
    assert runner.failures == 0
