"""``keras.mixed_precision``: Keras 3's names, including its legacy ones
(``Policy``, ``set_global_policy``, ``global_policy`` are aliases, as in Keras 3).

``LossScaleOptimizer`` is Keras 3's (``scale_loss``, unscaling inside ``apply_gradients``);
``nn.mixed_precision`` keeps tf.keras's.
"""

from __future__ import annotations

from nn.faces.keras.config import dtype_policy, set_dtype_policy
from nn.faces.keras.dtype_policies import DTypePolicy
from nn.precision.loss_scale_keras3 import Keras3LossScaleOptimizer as LossScaleOptimizer

Policy = DTypePolicy
global_policy = dtype_policy
set_global_policy = set_dtype_policy

__all__ = ["DTypePolicy", "LossScaleOptimizer", "Policy", "dtype_policy", "global_policy",
           "set_dtype_policy", "set_global_policy"]
