"""``keras.mixed_precision``'s names, so that ``from nn import mixed_precision`` ports as is.

>>> from nn import mixed_precision
>>> mixed_precision.set_global_policy("mixed_float16")
>>> policy = mixed_precision.global_policy()
>>> policy.compute_dtype, policy.variable_dtype
('float16', 'float32')
>>> mixed_precision.set_global_policy("float32")

Every name is a re-export of its one home: tf.keras's names (``Policy``, ``global_policy``,
``set_global_policy``, ``LossScaleOptimizer``) from ``nn.precision``; Keras 3's spellings
(``DTypePolicy``, ``dtype_policy``, ``set_dtype_policy``) from the Keras 3 face
(``nn.faces.keras``), with Keras 3's semantics: ``DTypePolicy("float16") == "float16"`` is
False there, True for tf.keras-era ``Policy``. Both set and read the same global policy.
"""

from __future__ import annotations

from nn.faces.keras.config import dtype_policy, set_dtype_policy
from nn.faces.keras.dtype_policies import DTypePolicy
from nn.precision.loss_scale import LossScaleOptimizer
from nn.precision.policy import Policy, global_policy, policy_scope, set_global_policy

__all__ = [
    "DTypePolicy", "LossScaleOptimizer", "Policy", "dtype_policy", "global_policy",
    "policy_scope", "set_dtype_policy", "set_global_policy",
]
