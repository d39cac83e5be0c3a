"""The Example of every layer registered under "elmo_keras" runs (a ```python block or doctest in its docstring).

Public layers of the modules listed in ``MUST_HAVE_EXAMPLE`` fail without one.
"""
import doctest
import inspect
import re

import keras
import pytest
from test_layer_harness import registered_classes

MUST_HAVE_EXAMPLE = {"elmo_keras.baselines", "elmo_keras.layers.char_cnn", "elmo_keras.layers.fusion",
                     "elmo_keras.layers.highway", "elmo_keras.layers.lstm", "elmo_keras.layers.pooling",
                     "elmo_keras.layers.scalar_mix", "elmo_keras.layers.segments"}

LAYERS = {name: obj for name, obj in registered_classes().items()
          if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_docstring_example_runs(name):
    cls = LAYERS[name]
    doc = inspect.getdoc(cls) or ""
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    doctests = [t for t in doctest.DocTestFinder(recurse=False).find(cls) if t.examples]
    if not blocks and not doctests:
        if cls.__module__ in MUST_HAVE_EXAMPLE:
            pytest.fail(f"{name} ({cls.__module__}) has no Example in its docstring")
        pytest.skip(f"{name} has no Example")
    for block in blocks:
        exec(compile(block, f"<{name} docstring example>", "exec"), {})
    runner = doctest.DocTestRunner()
    for test in doctests:
        runner.run(test)
    assert runner.failures == 0
