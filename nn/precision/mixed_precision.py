"""``keras.mixed_precision``'s names, so that ``from nn import mixed_precision`` ports as is.

>>> from nn import mixed_precision
>>> mixed_precision.set_global_policy("mixed_float16")
>>> policy = mixed_precision.global_policy()
>>> policy.compute_dtype, policy.variable_dtype
('float16', 'float32')
>>> mixed_precision.set_global_policy("float32")

Every name is a re-export of its one home (``nn.precision.policy``,
``nn.precision.loss_scale``); Keras 3's spellings (``DTypePolicy``, ``dtype_policy``,
``set_dtype_policy``) are aliases of tf.keras's.
"""

from __future__ import annotations

from nn.precision.loss_scale import LossScaleOptimizer
from nn.precision.policy import Policy, global_policy, policy_scope, set_global_policy

DTypePolicy = Policy
dtype_policy = global_policy
set_dtype_policy = set_global_policy

__all__ = [
    "DTypePolicy", "LossScaleOptimizer", "Policy", "dtype_policy", "global_policy",
    "policy_scope", "set_dtype_policy", "set_global_policy",
]
