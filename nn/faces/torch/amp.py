"""``torch.amp``: ``GradScaler``, ``autocast``, ``custom_fwd``, ``custom_bwd``.

``custom_fwd(device_type=..., cast_inputs=None)`` decorates a ``Function.forward`` as PyTorch
does: without ``cast_inputs`` the body runs under the caller's autocast state (its matmuls in
the autocast format); with ``cast_inputs=torch.float16`` (say) and autocast enabled for that
device, the floating-point tensor arguments are cast to it and the body runs with autocast off,
so the output is in that format. ``custom_bwd(device_type=...)`` runs ``backward`` under the
autocast state its forward saw (backward passes otherwise run with autocast off).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nn.engine.tensor import Tensor
from nn.functions.cast import cast
from nn.precision.autocast import autocast, get_autocast_dtype, is_autocast_enabled
from nn.precision.grad_scaler import GradScaler


def _cast(value: Any, fmt: Any) -> Any:
    if isinstance(value, Tensor):
        return cast(value, fmt)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, fmt) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, fmt) for k, v in value.items()}
    return value


def custom_fwd(fwd: Callable[..., Any] | None = None, *, device_type: str,
               cast_inputs: Any = None) -> Any:
    """Decorate ``forward(ctx, ...)`` of a custom ``Function`` (see the module docstring)."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = enabled
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast(args[1:], cast_inputs), **_cast(kwargs, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd: Callable[..., Any] | None = None, *, device_type: str) -> Any:
    """Decorate ``backward(ctx, ...)``: it runs under its forward's autocast state."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        with autocast(device_type, dtype=ctx._dtype, enabled=ctx._fwd_used_autocast):
            return bwd(*args, **kwargs)

    return decorate_bwd


__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]
