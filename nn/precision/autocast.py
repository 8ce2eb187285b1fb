"""``nn.autocast``: PyTorch's op-level autocast, per thread (a ContextVar).

``with nn.autocast("cpu", dtype="float16"): out = model(x)`` makes the ops of the block pick
their format by *op*, whatever the policy of the layer they run in (PyTorch's semantics). What
each op does is one table, ``CAST_POLICY``, keyed by device and op as PyTorch's
``autocast_mode.cpp`` lists ``KERNEL_CPU(op, lower_precision_fp)`` and ``KERNEL_CPU(op,
fp32)``; each op's wrapper asks it through ``nn.functions._common.autocast_inputs``:

- ``LOWER`` ops run in the autocast format: ``matmul`` (``a @ b``) and ``linear``
  (``Dense``, ``nn.Linear``; convolutions and attention route their products through these
  two). Their inputs are cast to the autocast format (a ``Cast`` op: the gradient is cast
  back to each input's own format, e.g. fp32 for master weights), the products are summed in
  fp32 and rounded once to the autocast format.
- ``FP32`` ops run in fp32 and return FP32: ``softmax``, ``log_softmax``, ``exp``, ``log``,
  ``pow``.
- ``PROMOTE`` ops (relu, add, reshape, ...) run in the format of their inputs (the usual
  promotion), so an fp16 activation stays fp16 and fp16 + fp32 gives fp32. Some of them
  compute in fp32 whatever autocast says (nn's own rule, not autocast's): the reductions
  ``sum``/``mean``, every loss, and the statistics of the normalization ops (see
  ``nn.layers.statistics``).
- layers do not apply their policy's casts inside the block: the input is taken as it comes
  and a variable is read in its own format (the fp32 master weight), so each eligible op
  casts a weight once, from fp32, as PyTorch does.

Backward passes ignore autocast (``Tensor.backward`` switches it off): a gradient is computed
in the formats the forward chose and rounded to the format of the tensor it belongs to.

``nn.policy_scope`` is a different tool: it sets the policy of layers *created* inside it and
does nothing to a model built before the ``with``.

>>> with autocast("cpu", dtype="bfloat16"):
...     active_format().name
'bfloat16'
"""

from __future__ import annotations

import contextvars
from typing import Any

from fpsim import Format
from nn.engine.checks import device
from nn.engine.formats import resolve_format

_ACTIVE: contextvars.ContextVar[Format | None] = contextvars.ContextVar(
    "nn_autocast", default=None)

LOWER, FP32, PROMOTE = "lower", "fp32", "promote"

_CPU_LOWER = ("matmul", "linear")
_CPU_FP32 = ("softmax", "log_softmax", "exp", "log", "pow")
_CPU_PROMOTE = (
    "accumulated_linear", "accumulated_matmul", "add", "attention", "broadcast_to", "cast",
    "clip", "conv2d", "div", "dropout", "embedding", "erf", "gelu", "getitem", "layer_norm",
    "leaky_relu", "max", "max_pool2d", "mean", "moments", "mul", "neg", "normalize", "patches",
    "relu", "relu_grad", "reshape", "sigmoid", "sparse_softmax_cross_entropy", "sqrt", "sub",
    "sum", "tanh", "transpose",
)
CAST_POLICY: dict[str, dict[str, str]] = {
    "cpu": {**dict.fromkeys(_CPU_LOWER, LOWER), **dict.fromkeys(_CPU_FP32, FP32),
            **dict.fromkeys(_CPU_PROMOTE, PROMOTE)},
}
"""device -> op (its ``nn.functions`` name) -> what autocast does to its inputs."""


def cast_policy(op: str, device_type: str = "cpu") -> str:
    """``LOWER``, ``FP32`` or ``PROMOTE``: what autocast does to ``op``'s inputs on
    ``device_type`` (``CAST_POLICY``); a KeyError names an op the table lacks."""
    try:
        return CAST_POLICY[device_type][op]
    except KeyError:
        raise KeyError(f"nn.precision.autocast.CAST_POLICY has no entry for op {op!r} on device "
                       f"{device_type!r}; add one") from None


def active_format() -> Format | None:
    """The autocast format of this thread's innermost enabled ``autocast``, else None."""
    return _ACTIVE.get()


def is_autocast_enabled() -> bool:
    """True inside an enabled ``autocast`` block (in this thread)."""
    return _ACTIVE.get() is not None


class autocast:  # noqa: N801 (PyTorch's spelling: used as ``with nn.autocast(...):``)
    """Run eligible ops in ``dtype`` and range-hungry ops in fp32 (see the module docstring).

    Parameters
    ----------
    device_type:
        "cpu" (fpsim emulates every format on the CPU; "cuda" and others raise).
    dtype:
        The lower-precision format: "float16", "bfloat16", an fpsim format name or a
        ``fpsim.Format``. Default: "bfloat16", PyTorch's default for device_type="cpu".
    enabled:
        False makes the block a no-op (and switches off an enclosing autocast, as in PyTorch).
    cache_enabled:
        Accepted for PyTorch compatibility; nn has no weight-cast cache (a weight is cast on
        every use, which gives the same values).

    Reusable and re-entrant; nested blocks restore the outer state on exit. Also usable as a
    decorator: ``@nn.autocast("cpu")``.
    """

    def __init__(self, device_type: str = "cpu", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device_type = device("device_type", device_type)
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be True or False, got {enabled!r}")
        fmt = resolve_format("bfloat16" if dtype is None else dtype, "autocast: dtype")
        if fmt is None:
            raise ValueError("autocast: dtype='float64' is not a lower-precision format; use "
                             "'float16', 'bfloat16' or an fpsim format name")
        self.fast_dtype: Format = fmt
        self.enabled = enabled
        self._tokens: list[contextvars.Token[Format | None]] = []

    def __enter__(self) -> autocast:
        self._tokens.append(_ACTIVE.set(self.fast_dtype if self.enabled else None))
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._tokens.pop())

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device_type!r}, dtype={self.fast_dtype.name!r}, "
                f"enabled={self.enabled})")


class disabled:  # noqa: N801 (a context manager, like ``no_grad``)
    """Switch autocast off inside (backward passes use it)."""

    def __init__(self) -> None:
        self._token: contextvars.Token[Format | None] | None = None

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(None)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
