"""``keras.optimizers``: nn's SGD, RMSprop and Adam (Keras's names, argument order and
defaults; ``learning_rate=`` also takes a schedule), Keras 3's ``LossScaleOptimizer``, and
``schedules`` (``nn.optimizers.schedules``: ExponentialDecay, PiecewiseConstantDecay,
CosineDecay, LearningRateSchedule).

``LossScaleOptimizer`` here is Keras 3's (``nn.precision.loss_scale_keras3``):
``scale_loss``, then ``apply_gradients`` of the scaled gradients, which it unscales.
``nn.LossScaleOptimizer`` keeps tf.keras's contract.
"""

from __future__ import annotations

from nn.optimizers import SGD, Adam, Optimizer, RMSprop, get, schedules
from nn.precision.loss_scale_keras3 import Keras3LossScaleOptimizer as LossScaleOptimizer

__all__ = ["SGD", "Adam", "LossScaleOptimizer", "Optimizer", "RMSprop", "get", "schedules"]
