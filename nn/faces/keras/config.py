"""``keras.config``: the global dtype policy, Keras 3's spelling.

``set_dtype_policy`` and ``dtype_policy`` share nn's one global policy
(``nn.precision.policy``; ``nn.set_global_policy`` sets the same thing): what you set here,
``nn.global_policy()`` reads, and the reverse; the policy returned here is always a
``keras.DTypePolicy``.

>>> set_dtype_policy("mixed_float16")
>>> dtype_policy()
<DTypePolicy "mixed_float16">
>>> set_dtype_policy("float32")
"""

from __future__ import annotations

from typing import Any

from nn.faces.keras.dtype_policies import DTypePolicy, as_keras_policy, get
from nn.precision.policy import Policy, global_policy, set_global_policy


def set_dtype_policy(policy: Any) -> None:
    """Set the global policy: a policy name (``"float8_from_float32"`` too) or a policy."""
    if not isinstance(policy, (str, Policy)):
        raise ValueError(f"Invalid `policy` argument. Expected the string name of a policy "
                         f"(such as 'mixed_float16') or a `DTypePolicy` instance. Received: "
                         f"policy={policy!r} (of type {type(policy).__name__})")
    set_global_policy(get(policy))


def dtype_policy() -> DTypePolicy:
    """The current global policy, as a ``keras.DTypePolicy``."""
    return as_keras_policy(global_policy())


def floatx() -> str:
    """Keras's default float type: nn's tensors are float32 unless a policy says otherwise."""
    return "float32"


__all__ = ["dtype_policy", "floatx", "set_dtype_policy"]
