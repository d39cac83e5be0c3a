"""ScalarMix: gamma * sum_k s_k * h_k with s = softmax(w) (trainable) or user-fixed weights."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import keras
from keras import ops

from elmo_keras.saving import serializable
from elmo_keras.utils.deprecation import renamed_arguments

_DROPPED_LOGIT = -1e4  # a dropped layer's weight logit: softmax gives it ~0 weight


@serializable
class ScalarMix(keras.layers.Layer):
    """Scaled weighted sum of layers: `gamma * sum_k s_k * h_k`, as ELMo mixes its biLM layers.

    The weights are `s = softmax(w)` with trainable logits `w`, or fixed `mix_weights` used as given.

    Args:
        num_layers: int, how many tensors are mixed; `None` infers it at build time (or from `mix_weights`).
            Defaults to `None`.
        mix_weights: list of floats, fixed mixing weights used as given (not softmaxed, not trained), e.g.
            `[0.45, 0.15, 0.40]`; `None` for trainable softmax weights. Defaults to `None`.
        initial_logits: list of floats, initial values of the trainable logits `w`; `None` for zeros (uniform
            weights). Defaults to `None`.
        initial_gamma: float, initial value of the scale `gamma`. Defaults to `1.0`.
        trainable_gamma: bool, whether `gamma` trains. Defaults to `True`.
        do_layer_norm: bool, normalise each `h_k` over its unmasked positions and features (one mean and variance
            per tensor for the whole batch, as AllenNLP does) before mixing; needs the mask. Defaults to `False`.
        weight_dropout: float in `[0, 1)`, in training drop each layer's weight with this probability (its logit
            set very low) before the softmax. Defaults to `0.0`.
        l2_coef: float, L2 penalty `l2_coef * sum(w ** 2)` on the logits, added to the layer losses.
            Defaults to `0.0`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Deprecated argument names: `fixed_weights` (use `mix_weights`), `gamma` (use `initial_gamma`).

    Call arguments:
        inputs: list of `num_layers` float tensors of one shape `[..., timesteps, dim]`.
        mask: bool tensor `[..., timesteps]` (or one per input; the first is used). Taken from the inputs'
            Keras masks when not given.
        training: bool, whether weight dropout applies. Defaults to `False`.

    Returns:
        A float tensor `[..., timesteps, dim]`, carrying the input mask.

    Example:

    ```python
    import numpy as np
    import elmo_keras as ek

    layers = [np.full((2, 3, 4), k, "float32") for k in range(3)]
    mixed = ek.ScalarMix(mix_weights=[0.2, 0.3, 0.5])(layers)
    np.testing.assert_allclose(mixed, np.full((2, 3, 4), 1.3), rtol=1e-6)
    ```
    """

    @renamed_arguments(fixed_weights="mix_weights", gamma="initial_gamma")
    def __init__(
        self,
        num_layers: int | None = None,
        mix_weights: Sequence[float] | None = None,
        initial_logits: Sequence[float] | None = None,
        initial_gamma: float = 1.0,
        trainable_gamma: bool = True,
        do_layer_norm: bool = False,
        weight_dropout: float = 0.0,
        l2_coef: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if mix_weights is not None:
            mix_weights = [float(w) for w in mix_weights]
            if num_layers is not None and len(mix_weights) != num_layers:
                raise ValueError(f"mix_weights has {len(mix_weights)} values for num_layers={num_layers}")
            num_layers = len(mix_weights)
        if initial_logits is not None:
            initial_logits = [float(w) for w in initial_logits]
        if not 0.0 <= weight_dropout < 1.0:
            raise ValueError(f"weight_dropout must be in [0, 1), got {weight_dropout}")
        self.num_layers = num_layers
        self.mix_weights = mix_weights
        self.initial_logits = initial_logits
        self.initial_gamma = float(initial_gamma)
        self.trainable_gamma = trainable_gamma
        self.do_layer_norm = do_layer_norm
        self.weight_dropout = weight_dropout
        self.l2_coef = l2_coef
        self.seed_generator = keras.random.SeedGenerator() if weight_dropout > 0 else None

    @property
    def fixed_weights(self) -> list[float] | None:
        """Deprecated name of :attr:`mix_weights`."""
        warnings.warn(
            "ScalarMix.fixed_weights is deprecated, use ScalarMix.mix_weights", DeprecationWarning, stacklevel=2
        )
        return self.mix_weights

    def build(self, input_shape):
        if (
            not isinstance(input_shape, (list, tuple))
            or not input_shape
            or not isinstance(input_shape[0], (list, tuple))
        ):
            raise ValueError("ScalarMix is called on a list of tensors")
        n = len(input_shape)
        if self.num_layers is None:
            self.num_layers = n
        if n != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} tensors, got {n}")
        if self.initial_logits is not None and len(self.initial_logits) != n:
            raise ValueError(f"initial_logits has {len(self.initial_logits)} values for {n} layers")
        if self.mix_weights is None:
            init = keras.initializers.Constant(self.initial_logits) if self.initial_logits is not None else "zeros"
            regularizer = keras.regularizers.L2(self.l2_coef) if self.l2_coef else None
            self.logits = self.add_weight(
                name="scalar_parameters", shape=(n,), initializer=init, regularizer=regularizer
            )
        self.gamma = self.add_weight(
            name="gamma",
            shape=(1,),
            initializer=keras.initializers.Constant(self.initial_gamma),
            trainable=self.trainable_gamma,
        )

    def normalized_weights(self, training: bool = False):
        """The mixing weights s (sum to 1 unless fixed weights say otherwise), float32 [num_layers].

        Args:
            training: bool, whether ``weight_dropout`` applies.

        Returns:
            float32 tensor `[num_layers]`.
        """
        if self.mix_weights is not None:
            return ops.convert_to_tensor(self.mix_weights, dtype="float32")
        logits = ops.convert_to_tensor(self.logits)
        if training and self.weight_dropout > 0:
            keep = keras.random.uniform(ops.shape(logits), seed=self.seed_generator) >= self.weight_dropout
            logits = ops.where(keep, logits, ops.full_like(logits, _DROPPED_LOGIT))
        return ops.softmax(logits)

    def call(self, inputs, mask=None, training=False):
        if len(inputs) != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} tensors, got {len(inputs)}")
        mask = self.compute_mask(inputs, mask)
        weights = ops.cast(self.normalized_weights(training=bool(training)), inputs[0].dtype)
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix(do_layer_norm=True) needs the mask of the tensors")
            inputs = [self._masked_layer_norm(t, mask) for t in inputs]
        mixed = sum(weights[k] * t for k, t in enumerate(inputs))
        return ops.cast(self.gamma, mixed.dtype) * mixed

    @staticmethod
    def _masked_layer_norm(tensor, mask):
        m = ops.cast(mask, tensor.dtype)[..., None]
        count = ops.maximum(ops.sum(m) * ops.cast(ops.shape(tensor)[-1], tensor.dtype), 1.0)
        mean = ops.sum(tensor * m) / count
        var = ops.sum(ops.square((tensor - mean) * m)) / count
        return (tensor - mean) / ops.sqrt(var + 1e-12)

    def compute_mask(self, inputs, mask=None):
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "mix_weights": self.mix_weights,
            "initial_logits": self.initial_logits,
            "initial_gamma": self.initial_gamma,
            "trainable_gamma": self.trainable_gamma,
            "do_layer_norm": self.do_layer_norm,
            "weight_dropout": self.weight_dropout,
            "l2_coef": self.l2_coef,
        }
