"""``nn.autocast``: PyTorch's op-level autocast, per thread (a ContextVar).

``with nn.autocast("cpu", dtype="float16"): out = model(x)`` makes the ops of the block pick
their format by *op*, whatever the policy of the layer they run in (PyTorch's semantics). What
each op does is one table per device, ``CAST_POLICY``, as PyTorch's ``autocast_mode.cpp`` lists
``KERNEL_CPU(op, lower_precision_fp)`` / ``KERNEL_CPU(op, fp32)`` and ``KERNEL_CUDA(...)``;
``autocast("cpu")`` follows the CPU lists, ``autocast("cuda")`` the CUDA ones (both emulated
on the CPU). Each op's wrapper asks the table through
``nn.functions._common.autocast_inputs``; ``help(autocast)`` prints it. The rules:

- ``LOWER`` ops run in the autocast format: ``matmul`` (``a @ b``) and ``linear``
  (``Dense``, ``nn.Linear``; convolutions and attention route their products through these
  two). Their inputs are cast to the autocast format (a ``Cast`` op: the gradient is cast
  back to each input's own format, e.g. fp32 for master weights), the products are summed in
  fp32 and rounded once to the autocast format.
- ``FP32`` ops run in fp32 and return FP32: on "cuda" ``softmax``, ``log_softmax``, ``exp``,
  ``log``, ``pow``, ``sum``, ``layer_norm`` and the cross-entropy; on "cpu" only the
  cross-entropy (PyTorch's CPU list keeps softmax, exp, pow... in bfloat16).
- ``INPUT`` ops (the reductions ``sum``/``mean``/``max`` on "cpu", ``mean``/``max`` on "cuda")
  compute in fp32 and round the result once to the input's format, as PyTorch returns an
  unlisted reduction in its input's dtype (outside autocast nn's reductions return FP32).
- ``PROMOTE`` ops (relu, add, reshape, ...) run in the format of their inputs (the usual
  promotion), so an fp16 activation stays fp16 and fp16 + fp32 gives fp32. Every loss
  computes in fp32 whatever autocast says (nn's own rule), and so do the statistics of the
  normalization layers (see ``nn.layers.statistics``).
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
import textwrap
import threading
from typing import Any

from fpsim import Format
from nn.engine.formats import resolve_format

_ACTIVE: contextvars.ContextVar[tuple[Format, str] | None] = contextvars.ContextVar(
    "nn_autocast", default=None)  # (format, device_type) of this thread's innermost block

LOWER, FP32, PROMOTE, INPUT = "lower", "fp32", "promote", "input"
RULES = {
    LOWER: "inputs cast to the autocast format; products summed in fp32, rounded once to it",
    FP32: "inputs widened to fp32 (exact); computed in fp32 and returned in FP32",
    PROMOTE: "run in the format of their inputs (the usual promotion)",
    INPUT: "computed in fp32, the result rounded once to the input's format",
}
"""Each rule in one line (``help(autocast)`` shows them with the table)."""

_OURS = (  # nn's own ops, or ops that route their products through matmul / linear
    "accumulated_linear", "accumulated_matmul", "attention", "broadcast_to", "cast", "clip",
    "conv2d", "dropout", "embedding", "erf", "gelu", "getitem", "leaky_relu", "max_pool2d",
    "moments", "normalize", "patches", "relu", "relu_grad", "reshape", "sigmoid", "sqrt",
    "tanh", "transpose", "add", "sub", "mul", "div", "neg",
)
# PyTorch's tables (aten/src/ATen/autocast_mode.cpp, torch 2.x; the CPU one probed on torch 2.13
# CPU in tests/nn/precision/test_autocast.py): ``KERNEL_CPU(op, lower_precision_fp)`` /
# ``KERNEL_CPU(op, fp32)`` and ``KERNEL_CUDA(op, ...)``, in nn's op names. An op in neither list
# runs in its input's dtype; nn's reductions return FP32 outside autocast (nn's rule), so inside
# they take INPUT where PyTorch returns the input's dtype.
_CPU = {
    LOWER: ("matmul", "linear"),
    FP32: ("sparse_softmax_cross_entropy",),  # cross_entropy_loss, nll_loss
    INPUT: ("sum", "mean", "max"),
    PROMOTE: ("softmax", "log_softmax", "exp", "log", "pow", "layer_norm", *_OURS),
}
_CUDA = {
    LOWER: ("matmul", "linear"),
    FP32: ("softmax", "log_softmax", "exp", "log", "pow", "sum", "layer_norm",
           "sparse_softmax_cross_entropy"),
    INPUT: ("mean", "max"),
    PROMOTE: _OURS,
}
CAST_POLICY: dict[str, dict[str, str]] = {
    device: {op: rule for rule, ops in table.items() for op in ops}
    for device, table in (("cpu", _CPU), ("cuda", _CUDA))
}
"""device -> op (its ``nn.functions`` name) -> what autocast does to it (a rule of ``RULES``)."""

DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
"""PyTorch's default autocast dtype per device (``torch.get_autocast_dtype``)."""


def cast_policy(op: str, device_type: str | None = None) -> str:
    """``LOWER``, ``FP32``, ``PROMOTE`` or ``INPUT``: what autocast does to ``op`` on
    ``device_type`` (default: the active autocast's device, else "cpu"; ``CAST_POLICY``); a
    KeyError names an op the table lacks."""
    if device_type is None:
        state = _ACTIVE.get()
        device_type = "cpu" if state is None else state[1]
    try:
        return CAST_POLICY[device_type][op]
    except KeyError:
        raise KeyError(f"nn.precision.autocast.CAST_POLICY has no entry for op {op!r} on device "
                       f"{device_type!r}; add one") from None


def policy_table() -> str:
    """``CAST_POLICY`` as text, per device and rule (the tail of ``autocast``'s docstring)."""
    lines = []
    for device, table in CAST_POLICY.items():
        lines.append(f"    device_type={device!r} (default dtype {DEFAULT_DTYPE[device]}):")
        for rule, meaning in RULES.items():
            ops = sorted(op for op, r in table.items() if r == rule)
            lines.append(f"      {rule}: {meaning}:")
            lines.append(textwrap.fill(", ".join(ops), 92, initial_indent="        ",
                                       subsequent_indent="        "))
    return "\n".join(lines)


def active_format() -> Format | None:
    """The autocast format of this thread's innermost enabled ``autocast``, else None."""
    state = _ACTIVE.get()
    return None if state is None else state[0]


def active_device() -> str | None:
    """The device_type of this thread's innermost enabled ``autocast``, else None."""
    state = _ACTIVE.get()
    return None if state is None else state[1]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """True inside an enabled ``autocast`` block (in this thread); with ``device_type``, one
    for that device (PyTorch's ``torch.is_autocast_enabled(device_type)``)."""
    state = _ACTIVE.get()
    if state is None:
        return False
    return device_type is None or state[1] == _device_type(device_type)


def get_autocast_dtype(device_type: str) -> Format:
    """The format autocast on ``device_type`` runs in: the active block's if it is for that
    device, else the device's default (PyTorch's ``torch.get_autocast_dtype``)."""
    device = _device_type(device_type)
    state = _ACTIVE.get()
    if state is not None and state[1] == device:
        return state[0]
    fmt = resolve_format(DEFAULT_DTYPE[device])
    assert fmt is not None
    return fmt


def _device_type(value: object) -> str:
    """"cpu" or "cuda" (a device index is accepted and ignored), else a ValueError."""
    if isinstance(value, str):
        name = value.strip().lower().split(":")[0]
        if name in CAST_POLICY:
            return name
    raise ValueError(f"autocast: device_type={value!r} is not one of {sorted(CAST_POLICY)} "
                     "(each picks that device's PyTorch op lists; every op is emulated on "
                     "the CPU)")


class autocast:  # noqa: N801 (PyTorch's spelling: used as ``with nn.autocast(...):``)
    """Run eligible ops in ``dtype`` and range-hungry ops in fp32, as PyTorch's autocast on
    ``device_type`` does (the op lists are that device's; see the module docstring).

    Parameters
    ----------
    device_type:
        "cpu" or "cuda": whose op lists apply (every op is emulated on the CPU either way).
    dtype:
        The lower-precision format: "float16", "bfloat16", an fpsim format name or a
        ``fpsim.Format``. Default: PyTorch's for the device (bfloat16 on "cpu", float16 on
        "cuda").
    enabled:
        False makes the block a no-op (and switches off an enclosing autocast, as in PyTorch).
    cache_enabled:
        Accepted for PyTorch compatibility; nn has no weight-cast cache (a weight is cast on
        every use, which gives the same values).

    Reusable and re-entrant; nested blocks restore the outer state on exit. Also usable as a
    decorator: ``@nn.autocast("cpu")``. The state is per thread, as PyTorch's: a block entered
    in one thread and exited in another raises there (RuntimeError) and leaves the entering
    thread's state as it was; that thread's own exit then restores it.

    The op lists, per device (``CAST_POLICY``)::

{table}
    """

    def __init__(self, device_type: str = "cpu", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device_type = _device_type(device_type)
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be True or False, got {enabled!r}")
        fmt = resolve_format(DEFAULT_DTYPE[self.device_type] if dtype is None else dtype,
                             "autocast: dtype")
        if fmt is None:
            raise ValueError("autocast: dtype='float64' is not a lower-precision format; use "
                             "'float16', 'bfloat16' or an fpsim format name")
        self.fast_dtype: Format = fmt
        self.enabled = enabled
        # (thread id, token) per entry: each thread exits its own entries
        self._tokens: list[tuple[int, contextvars.Token[tuple[Format, str] | None]]] = []

    def __enter__(self) -> autocast:
        state = (self.fast_dtype, self.device_type) if self.enabled else None
        self._tokens.append((threading.get_ident(), _ACTIVE.set(state)))
        return self

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        for i in range(len(self._tokens) - 1, -1, -1):
            if self._tokens[i][0] == me:
                _ACTIVE.reset(self._tokens.pop(i)[1])
                return
        owners = sorted({t for t, _ in self._tokens})
        raise RuntimeError(
            f"autocast exited in thread {me}, which never entered it (entered in thread(s) "
            f"{owners}): autocast state is per thread, so a block must be exited in the thread "
            f"that entered it; the entering thread's autocast is left as it was")

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


if autocast.__doc__:  # (None under python -OO)
    autocast.__doc__ = autocast.__doc__.replace("{table}", policy_table())


class disabled:  # noqa: N801 (a context manager, like ``no_grad``)
    """Switch autocast off inside (backward passes use it)."""

    def __init__(self) -> None:
        self._token: contextvars.Token[tuple[Format, str] | None] | None = None

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(None)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
