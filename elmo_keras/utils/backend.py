"""Which Keras backend runs the layers, and the clear refusal of the parts that need TensorFlow's.

The ELMo layers run on every Keras 3 backend (TensorFlow, JAX, PyTorch). A few parts are TensorFlow programs by
nature and stay TensorFlow-only: a TF Hub module (``HubElmo``, ``from_hub``), the SavedModel exports
(``export_serving``, ``export_hub_module``) and strings inside the model graph (a ``keras.Input`` of dtype
string). On another backend they raise :class:`BackendUnsupported` naming the backend and the way out.
"""

from __future__ import annotations

import keras

from elmo_keras.errors import InputError


class BackendUnsupported(InputError):
    """A TensorFlow-only feature was called while Keras runs on another backend (``KERAS_BACKEND``)."""


def is_tensorflow() -> bool:
    """Whether Keras runs on the TensorFlow backend.

    Returns:
        True when ``keras.backend.backend()`` is ``"tensorflow"``.

    Example:

    ```python
    import keras
    from elmo_keras.utils.backend import is_tensorflow

    assert is_tensorflow() == (keras.backend.backend() == "tensorflow")
    ```
    """
    return keras.backend.backend() == "tensorflow"


def require_tensorflow(feature: str, alternative: str = "") -> None:
    """Refuse a TensorFlow-only feature on another Keras backend, naming it, the backend and what to do.

    Args:
        feature: what was called, e.g. ``"export_serving"``.
        alternative: what a user of this backend can do instead (a sentence), or `""`. Defaults to `""`.

    Raises:
        BackendUnsupported: Keras runs on JAX or PyTorch.

    Example:

    ```python
    from elmo_keras.utils.backend import is_tensorflow, require_tensorflow

    if is_tensorflow():
        require_tensorflow("export_serving")   # nothing happens on TensorFlow
    ```
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    raise BackendUnsupported(
        f"{feature} needs the TensorFlow backend, and Keras runs on {backend} (KERAS_BACKEND={backend}): run it in "
        f"a process started with KERAS_BACKEND=tensorflow (a .keras file saved on {backend} loads there)"
        + (f"; {alternative}" if alternative else "")
    )
