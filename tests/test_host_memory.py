"""Host buffers that variables adopt (elmo_keras.host_memory)."""

import numpy as np
import pytest
import tensorflow as tf
from elmo_keras.host_memory import host_tensor, host_zeros


@pytest.mark.parametrize("populate", [False, True])
def test_host_zeros_are_aligned_zeros_of_the_shape(populate):
    for shape in [(3, 5), (0,), (2, 1024, 17)]:
        array = host_zeros(shape, populate=populate)
        assert array.shape == shape and array.dtype == np.float32 and array.flags.writeable
        assert array.ctypes.data % 4096 == 0 and not array.any()  # page-aligned (more than TensorFlow needs)


def test_host_tensor_shares_the_buffer_and_a_variable_adopts_it():
    array = host_zeros((4, 6))
    array[...] = np.arange(24).reshape(4, 6)
    variable = tf.Variable(tf.zeros((4, 6)))
    variable.assign(host_tensor(array))
    np.testing.assert_array_equal(variable.numpy(), np.arange(24).reshape(4, 6))
    variable.assign_add(tf.ones((4, 6)))  # the variable owns the memory now; updates work as usual
    np.testing.assert_array_equal(variable.numpy(), np.arange(24).reshape(4, 6) + 1)


def test_host_tensor_refuses_misaligned_or_strided_arrays():
    raw = host_zeros((4 * 33,))
    with pytest.raises(ValueError, match="aligned"):
        host_tensor(raw[1:])  # 4 bytes off: TensorFlow would abort in a MatMul
    with pytest.raises(ValueError, match="aligned"):
        host_tensor(host_zeros((8, 8))[:, ::2])
