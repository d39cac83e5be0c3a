"""ScalarMix: gamma * sum_k s_k * h_k with s = softmax(w) (trainable) or user-fixed weights."""
from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

_DROPPED_LOGIT = -1e4  # a dropped layer's weight logit: softmax gives it ~0 weight


@keras.saving.register_keras_serializable(package="elmo_keras")
class ScalarMix(keras.layers.Layer):
    """Weighted sum of ``num_layers`` tensors of the same shape [..., T, D] -> [..., T, D].

    Args:
      num_layers: how many tensors are mixed (inferred at build time when None).
      fixed_weights: mixing weights used as given (not softmaxed, not trained), e.g. [0.45, 0.15, 0.40].
        When None the weights are ``softmax(w)`` with trainable logits ``w`` (uniform at init).
      initial_logits: initial values of ``w`` (default zeros).
      gamma: initial value of the scale; ``trainable_gamma`` controls whether it trains.
      do_layer_norm: normalise each h_k over its unmasked positions and features (one mean and variance
        per tensor for the whole batch, as AllenNLP does) before mixing; needs the mask.
      weight_dropout: in training, drop each layer's weight with this probability (its logit set very low)
        before the softmax.
      l2_coef: L2 penalty ``l2_coef * sum(w**2)`` on the logits, added to the model losses.

    Call with a list of tensors and optionally ``mask`` (bool [..., T]); the mask is passed through.
    """

    def __init__(self, num_layers: int | None = None, fixed_weights: Sequence[float] | None = None,
                 initial_logits: Sequence[float] | None = None, gamma: float = 1.0, trainable_gamma: bool = True,
                 do_layer_norm: bool = False, weight_dropout: float = 0.0, l2_coef: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if fixed_weights is not None:
            fixed_weights = [float(w) for w in fixed_weights]
            if num_layers is not None and len(fixed_weights) != num_layers:
                raise ValueError(f"fixed_weights has {len(fixed_weights)} values for num_layers={num_layers}")
            num_layers = len(fixed_weights)
        if initial_logits is not None:
            initial_logits = [float(w) for w in initial_logits]
        if not 0.0 <= weight_dropout < 1.0:
            raise ValueError(f"weight_dropout must be in [0, 1), got {weight_dropout}")
        self.num_layers = num_layers
        self.fixed_weights = fixed_weights
        self.initial_logits = initial_logits
        self.gamma_init = float(gamma)
        self.trainable_gamma = trainable_gamma
        self.do_layer_norm = do_layer_norm
        self.weight_dropout = weight_dropout
        self.l2_coef = l2_coef
        self.seed_generator = keras.random.SeedGenerator() if weight_dropout > 0 else None
        self.supports_masking = True

    def build(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or not input_shape or not isinstance(input_shape[0],
                                                                                           (list, tuple)):
            raise ValueError("ScalarMix is called on a list of tensors")
        n = len(input_shape)
        if self.num_layers is None:
            self.num_layers = n
        if n != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} tensors, got {n}")
        if self.initial_logits is not None and len(self.initial_logits) != n:
            raise ValueError(f"initial_logits has {len(self.initial_logits)} values for {n} layers")
        if self.fixed_weights is None:
            init = (keras.initializers.Constant(self.initial_logits) if self.initial_logits is not None
                    else "zeros")
            regularizer = keras.regularizers.L2(self.l2_coef) if self.l2_coef else None
            self.logits = self.add_weight(name="scalar_parameters", shape=(n,), initializer=init,
                                          regularizer=regularizer)
        self.gamma = self.add_weight(name="gamma", shape=(1,), initializer=keras.initializers.Constant(
            self.gamma_init), trainable=self.trainable_gamma)

    def normalized_weights(self, training: bool = False):
        """The mixing weights s (sum to 1 unless fixed weights say otherwise), float32 [num_layers]."""
        if self.fixed_weights is not None:
            return ops.convert_to_tensor(self.fixed_weights, dtype="float32")
        logits = ops.convert_to_tensor(self.logits)
        if training and self.weight_dropout > 0:
            keep = keras.random.uniform(ops.shape(logits), seed=self.seed_generator) >= self.weight_dropout
            logits = ops.where(keep, logits, ops.full_like(logits, _DROPPED_LOGIT))
        return ops.softmax(logits)

    def call(self, tensors, mask=None, training=False):
        if len(tensors) != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} tensors, got {len(tensors)}")
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        weights = ops.cast(self.normalized_weights(training=bool(training)), tensors[0].dtype)
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix(do_layer_norm=True) needs the mask of the tensors")
            tensors = [self._layer_norm(t, mask) for t in tensors]
        mixed = sum(weights[k] * t for k, t in enumerate(tensors))
        return ops.cast(self.gamma, mixed.dtype) * mixed

    @staticmethod
    def _layer_norm(tensor, mask):
        m = ops.cast(mask, tensor.dtype)[..., None]
        count = ops.maximum(ops.sum(m) * ops.cast(ops.shape(tensor)[-1], tensor.dtype), 1.0)
        mean = ops.sum(tensor * m) / count
        var = ops.sum(ops.square((tensor - mean) * m)) / count
        return (tensor - mean) / ops.sqrt(var + 1e-12)

    def compute_mask(self, tensors, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers, "fixed_weights": self.fixed_weights,
                "initial_logits": self.initial_logits, "gamma": self.gamma_init,
                "trainable_gamma": self.trainable_gamma, "do_layer_norm": self.do_layer_norm,
                "weight_dropout": self.weight_dropout, "l2_coef": self.l2_coef}
