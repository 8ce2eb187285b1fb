"""``Tensor``: a float32 carrier array plus the fpsim Format its values lie in; ``Variable``.

A Tensor's ``data`` is float32 (float64 under the "float64" policy, whose ``fmt`` is None) and
every value of it is exactly representable in ``fmt``. Arithmetic goes through the ops in
``nn.functions``: each rounds its output to its format (the promotion of its operands'
formats); a Python number or numpy array operand takes the Tensor's format ("weak" scalars,
as in PyTorch), so ``t * 0.1`` multiplies by fp16's 0.1 when ``t`` is fp16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import FP32, Format
from nn.engine import sites
from nn.engine.dtypes import DType
from nn.engine.formats import (
    FormatLike,
    carrier_dtype,
    default_tensor_format,
    default_variable_format,
    format_name,
    resolve_format,
)
from nn.engine.rounding import round_array

if TYPE_CHECKING:
    from nn.engine.autograd import Context, Function

# --- the ops behind Tensor's operators --------------------------------------------------------
# The ops are built on Tensor, so Tensor cannot import them: nn.functions registers them (and
# ``backward``) here when imported, which keeps the imports one-way (formats, rounding ->
# tensor -> autograd -> functions). ``import nn`` loads them.

OPERATORS = frozenset({
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "getitem", "sum", "mean", "max",
    "reshape", "transpose", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "cast", "backward",
})
_OPS: dict[str, Callable[..., Any]] = {}


def register_ops(**ops: Callable[..., Any]) -> None:
    """Install the functions Tensor's operators and methods call (``add=nn.functions.add``)."""
    unknown = sorted(set(ops) - OPERATORS)
    if unknown:
        raise ValueError(f"register_ops: unknown operator names {unknown}; known: "
                         f"{sorted(OPERATORS)}")
    _OPS.update(ops)


def _op(name: str) -> Callable[..., Any]:
    try:
        return _OPS[name]
    except KeyError:
        raise RuntimeError(
            f"Tensor operator {name!r} is not registered: import nn (it loads nn.functions "
            "and nn.autograd, which register Tensor's operators)"
        ) from None


def as_float_array(data: Any, what: str = "data") -> np.ndarray:
    """``data`` as a numeric numpy array, or a TypeError naming its dtype."""
    arr = data.data if isinstance(data, Tensor) else np.asarray(data)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{what} must be real numbers (float, int or bool), got an array of dtype "
            f"{arr.dtype}" + (f": {data!r}" if np.ndim(data) == 0 else "")
        )
    return arr


class ElementCount(int):
    """``x.size``: the number of elements, an ``int`` (numpy's meaning, nn's everywhere), that
    also answers PyTorch's calls: ``x.size()`` is the shape (a tuple, as ``torch.Size``) and
    ``x.size(dim)`` one dimension (negative ``dim`` counts from the end).

    >>> x = Tensor(np.zeros((2, 3)))
    >>> x.size, x.size(), x.size(-1)
    (6, (2, 3), 3)
    """

    _shape: tuple[int, ...]

    def __new__(cls, shape: tuple[int, ...]) -> ElementCount:
        count = super().__new__(cls, int(np.prod(shape, dtype=np.int64)))
        count._shape = tuple(int(n) for n in shape)
        return count

    def __call__(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._shape
        n = len(self._shape)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"size(dim): dim must be an integer, got {dim!r}")
        if n == 0:
            raise IndexError(f"size(dim): Dimension specified as {dim} but tensor has no "
                             "dimensions")
        if not -n <= dim < n:
            raise IndexError(f"size(dim): Dimension out of range (expected to be in range of "
                             f"[{-n}, {n - 1}], but got {dim})")
        return self._shape[dim]

    def __reduce__(self) -> tuple[type, tuple[int]]:
        return int, (int(self),)  # pickled (and copied) as the plain count


class Tensor:
    """An array whose values lie in ``fmt``, with autograd.

    >>> t = Tensor([1e-8, 70000.0], fmt="fp16")
    >>> t
    Tensor([ 0., inf], fmt=float16)

    ``fmt`` is a Format, a format name, ``"float64"``/None (float64 carrier, never rounded) or
    ``"auto"``: FP32, or float64 under the "float64" policy. The data are copied and rounded to
    ``fmt`` (nearest-even). ``dtype`` is PyTorch's and Keras's name for the same argument (a
    format name or a ``DType`` such as ``x.dtype``); give one of the two.
    """

    __array_priority__ = 1000.0  # ndarray (op) Tensor defers to the Tensor's reflected operator

    def __init__(
        self,
        data: Any,
        fmt: FormatLike = "auto",
        requires_grad: bool = False,
        name: str | None = None,
        *,
        dtype: Any = None,
    ) -> None:
        if dtype is not None:
            if not _is_auto(fmt):
                raise ValueError(f"Tensor: got both fmt={fmt!r} and dtype={dtype!r}; pass one "
                                 "(dtype is PyTorch's and Keras's name for fmt)")
            fmt = resolve_format(dtype, "dtype")
        fmt = default_tensor_format() if _is_auto(fmt) else resolve_format(fmt)
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"requires_grad must be True or False, got {requires_grad!r}")
        arr = as_float_array(data)
        self.data = _rounded_copy(arr, fmt)
        self.fmt: Format | None = fmt
        self.requires_grad = bool(requires_grad)
        self.grad: Tensor | None = None
        self.name = name
        self.grad_site: str | None = None
        self._op: type[Function] | None = None
        self._ctx: Context | None = None

    @classmethod
    def _make(
        cls, data: np.ndarray, fmt: Format | None, op: type[Function] | None = None,
        ctx: Context | None = None,
    ) -> Tensor:
        """A Tensor over ``data`` as is (already rounded to ``fmt``); the ops' fast path."""
        t = object.__new__(Tensor)
        t.data = data
        t.fmt = fmt
        t.requires_grad = op is not None
        t.grad = None
        t.name = None
        t.grad_site = None
        t._op = op
        t._ctx = ctx
        return t

    # --- array-like properties ----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> ElementCount:
        """The number of elements (an int, numpy's ``size``); called, PyTorch's ``size()``
        (the shape) or ``size(dim)`` (see ``ElementCount``)."""
        return ElementCount(self.data.shape)

    @property
    def dtype(self) -> DType:
        """The emulated format, as a dtype: ``x.dtype.name == "float16"``, ``x.dtype == "fp16"``
        (see ``nn.engine.dtypes.DType``). A Variable reports its variable format (float32 master
        weights under the mixed policies, as in Keras). The numpy array's own dtype is
        ``carrier_dtype``."""
        return DType.of(self.fmt)

    @property
    def carrier_dtype(self) -> np.dtype:
        """The numpy dtype of ``data`` that carries the values: float32 (float64 under the
        "float64" policy), whatever the format."""
        return self.data.dtype

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    def numpy(self) -> np.ndarray:
        """A copy of the values (in the carrier dtype)."""
        return self.data.copy()

    def item(self) -> float:
        """The value of a one-element tensor as a Python float (ValueError otherwise)."""
        if self.size != 1:
            raise ValueError(f"only one-element tensors can be converted to Python scalars; "
                             f"this one has shape {self.shape} (use .numpy() for the array)")
        return float(self.data.reshape(-1)[0])

    def __float__(self) -> float:
        """``float(t)`` for a one-element tensor, as numpy and PyTorch allow (``item()``)."""
        return self.item()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """``np.asarray(t)``: the values in the carrier dtype (the ``data`` array itself unless
        ``copy=True`` or another ``dtype`` is asked for, as ``np.asarray`` on an array does)."""
        if dtype is None or np.dtype(dtype) == self.data.dtype:
            return self.data.copy() if copy else self.data
        if copy is False:
            raise ValueError(f"np.asarray(tensor, dtype={dtype}, copy=False): converting the "
                             f"{self.data.dtype} carrier to {np.dtype(dtype)} needs a copy")
        return self.data.astype(dtype)

    def __format__(self, spec: str) -> str:
        """``f"{t:.4f}"`` formats a one-element tensor's value (an empty spec gives ``str``)."""
        return format(self.item(), spec) if spec else str(self)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="Tensor(")
        extra = f", grad_fn={self._op.__name__}" if self._op is not None else ""
        if self.requires_grad and self._op is None:
            extra = ", requires_grad=True"
        return f"Tensor({body}, fmt={format_name(self.fmt)}{extra})"

    # --- autograd -------------------------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (nn.engine.autograd.backward).

        PyTorch's parameters: ``gradient`` (the seed; default 1 for a one-element tensor),
        ``create_graph`` (the gradients keep a history, for higher derivatives) and
        ``retain_graph`` (default: ``create_graph``; when False the graph is freed and a second
        backward through it raises, as in PyTorch)."""
        for name, flag in (("retain_graph", retain_graph), ("create_graph", create_graph)):
            if flag is not None and not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"backward: {name} must be True, False or None, got {flag!r}")
        retain = bool(create_graph) if retain_graph is None else bool(retain_graph)
        _op("backward")(self, gradient, retain_graph=retain, create_graph=bool(create_graph))

    def detach(self) -> Tensor:
        """The same values without history."""
        return Tensor._make(self.data, self.fmt)

    def zero_grad(self) -> None:
        self.grad = None

    # --- operators ------------------------------------------------------------------------------
    def _lift(self, other: Any) -> Tensor:
        """A non-Tensor operand as a Tensor in this tensor's format (weak scalar)."""
        if isinstance(other, Tensor):
            return other
        arr = as_float_array(other, "operand")
        return Tensor._make(_rounded_copy(arr, self.fmt), self.fmt)

    def __add__(self, other: Any) -> Tensor:
        return _op("add")(self, self._lift(other))

    def __radd__(self, other: Any) -> Tensor:
        return _op("add")(self._lift(other), self)

    def __sub__(self, other: Any) -> Tensor:
        return _op("sub")(self, self._lift(other))

    def __rsub__(self, other: Any) -> Tensor:
        return _op("sub")(self._lift(other), self)

    def __mul__(self, other: Any) -> Tensor:
        return _op("mul")(self, self._lift(other))

    def __rmul__(self, other: Any) -> Tensor:
        return _op("mul")(self._lift(other), self)

    def __truediv__(self, other: Any) -> Tensor:
        return _op("div")(self, self._lift(other))

    def __rtruediv__(self, other: Any) -> Tensor:
        return _op("div")(self._lift(other), self)

    def __neg__(self) -> Tensor:
        return _op("neg")(self)

    def __pow__(self, exponent: float) -> Tensor:
        return _op("pow")(self, exponent)

    def __matmul__(self, other: Any) -> Tensor:
        return _op("matmul")(self, self._lift(other))

    def __rmatmul__(self, other: Any) -> Tensor:
        return _op("matmul")(self._lift(other), self)

    def __getitem__(self, index: Any) -> Tensor:
        return _op("getitem")(self, index)

    # --- methods ----------------------------------------------------------------------------------
    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, *,
            dim: int | tuple[int, ...] | None = None, keepdim: bool | None = None) -> Tensor:
        """Sum over ``axis`` (``dim``, ``keepdim``: PyTorch's spellings)."""
        axis, keepdims = _axis_args("sum", axis, keepdims, dim, keepdim)
        return _op("sum")(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, *,
             dim: int | tuple[int, ...] | None = None, keepdim: bool | None = None) -> Tensor:
        """Mean over ``axis`` (``dim``, ``keepdim``: PyTorch's spellings)."""
        axis, keepdims = _axis_args("mean", axis, keepdims, dim, keepdim)
        return _op("mean")(self, axis=axis, keepdims=keepdims)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, *,
            dim: Any = None) -> Tensor:
        """The maximum over ``axis`` (values only). PyTorch's ``max(dim=)`` returns (values,
        indices) and is refused rather than answered with the values alone."""
        if dim is not None:
            raise TypeError(f"max(dim={dim!r}) returns (values, indices) in PyTorch; nn's "
                            f"max returns the values only: spell it max(axis={dim!r})")
        return _op("max")(self, axis=axis, keepdims=keepdims)

    # --- PyTorch's tensor methods ---------------------------------------------------------------
    def pow(self, exponent: float) -> Tensor:
        """``self ** exponent`` (PyTorch's ``Tensor.pow``)."""
        return _op("pow")(self, exponent)

    def mm(self, other: Tensor) -> Tensor:
        """The matrix product of two 2-d tensors (PyTorch's ``Tensor.mm``)."""
        if self.ndim != 2 or getattr(other, "ndim", 0) != 2:
            raise ValueError(f"mm: both operands must be 2-d, got shapes {self.shape} and "
                             f"{getattr(other, 'shape', None)} (use @ / matmul for batches)")
        return _op("matmul")(self, self._lift(other))

    def t(self) -> Tensor:
        """The transpose of a tensor of at most 2 dimensions (PyTorch's ``Tensor.t``)."""
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor of at most 2 dimensions, got shape "
                             f"{self.shape} (use transpose(axes) for more)")
        return self if self.ndim < 2 else _op("transpose")(self, None)

    def to(self, dtype: Any) -> Tensor:
        """This tensor in format ``dtype`` (a ``Cast``, differentiable; PyTorch's ``to``)."""
        if isinstance(dtype, str) and dtype.strip().lower().split(":")[0] in ("cpu", "cuda"):
            raise TypeError(f"to({dtype!r}): nn tensors have no device (every format is "
                            "emulated on the CPU); pass a dtype, e.g. to(torch.float16)")
        return _op("cast")(self, dtype)

    def float(self) -> Tensor:
        """``to(float32)``."""
        return self.to("float32")

    def half(self) -> Tensor:
        """``to(float16)``."""
        return self.to("float16")

    def bfloat16(self) -> Tensor:
        """``to(bfloat16)``."""
        return self.to("bfloat16")

    def dim(self) -> int:
        """The number of dimensions (PyTorch's ``dim()``)."""
        return self.ndim

    def numel(self) -> int:
        """The number of elements (PyTorch's ``numel()``; ``x.size`` without a call)."""
        return int(self.data.size)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place on a leaf and return the tensor (PyTorch's)."""
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"requires_grad_ takes True or False, got {requires_grad!r}")
        if not self.is_leaf:
            raise RuntimeError("requires_grad_ on a non-leaf tensor: it already records its "
                               "history; use detach() for a new leaf")
        self.requires_grad = bool(requires_grad)
        return self

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _op("reshape")(self, shape)

    def transpose(self, *axes: int) -> Tensor:
        return _op("transpose")(self, axes if axes else None)

    @property
    def T(self) -> Tensor:
        return _op("transpose")(self, None)

    def exp(self) -> Tensor:
        return _op("exp")(self)

    def log(self) -> Tensor:
        return _op("log")(self)

    def sqrt(self) -> Tensor:
        return _op("sqrt")(self)

    def relu(self) -> Tensor:
        return _op("relu")(self)

    def sigmoid(self) -> Tensor:
        return _op("sigmoid")(self)

    def tanh(self) -> Tensor:
        return _op("tanh")(self)

    def cast(self, fmt: FormatLike) -> Tensor:
        """This tensor in another format (the Cast op; its backward casts the gradient back)."""
        return _op("cast")(self, fmt)


class Variable(Tensor):
    """A trainable value (master weight): ``data`` is updated in place by optimizers.

    ``fmt`` is the variable format (FP32 under the mixed policies, FP16 under "float16");
    ``.grad`` after backward is a Tensor in that format (the compute-format gradient widened,
    which is exact), accumulated over backward calls until ``zero_grad()``.
    """

    def __init__(
        self,
        data: Any,
        fmt: FormatLike = "auto",
        name: str | None = None,
        trainable: bool = True,
    ) -> None:
        if _is_auto(fmt):
            fmt = default_variable_format()
        super().__init__(data, fmt=fmt, requires_grad=trainable, name=name)
        self.trainable = bool(trainable)
        self.grad_site = sites.variable_grad(name) if name else None

    def assign(self, values: Any) -> None:
        """Write ``values`` (rounded to ``fmt``) into ``data`` in place; the shape must match."""
        arr = as_float_array(values, "values")
        if arr.shape != self.shape:
            raise ValueError(
                f"cannot assign values of shape {arr.shape} to variable {self.name!r} of shape "
                f"{self.shape}"
            )
        np.copyto(self.data, _rounded_copy(arr, self.fmt))

    def assign_add(self, delta: Any) -> None:
        """data = round(data + delta) in place (the sum in the carrier, one rounding to fmt)."""
        self.assign(self.data + as_float_array(delta, "delta"))

    def assign_sub(self, delta: Any) -> None:
        """data = round(data - delta) in place (the difference in the carrier, one rounding)."""
        self.assign(self.data - as_float_array(delta, "delta"))

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="Variable(")
        return f"Variable({body}, fmt={format_name(self.fmt)}, name={self.name!r})"

    # variables are leaves: hashing by identity lets them key dicts (optimizer slots)
    __hash__ = object.__hash__


def _axis_args(op: str, axis: Any, keepdims: bool, dim: Any, keepdim: bool | None
               ) -> tuple[Any, bool]:
    """(axis, keepdims) from nn's and PyTorch's spellings; both of one pair: a ValueError."""
    if dim is not None:
        if axis is not None:
            raise ValueError(f"{op}: got both axis={axis!r} and dim={dim!r}; pass one (dim is "
                             "PyTorch's spelling)")
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    return axis, bool(keepdims)


def _is_auto(fmt: object) -> bool:
    return isinstance(fmt, str) and fmt == "auto"


def _rounded_copy(arr: np.ndarray, fmt: Format | None) -> np.ndarray:
    """A fresh carrier array holding ``arr`` rounded to ``fmt``."""
    carrier = carrier_dtype(fmt)
    if arr.dtype == np.float64 and carrier == np.float32 and fmt != FP32:
        return round_array(arr, fmt)  # once from the float64 bits
    out = np.array(arr, dtype=carrier, copy=True)
    return round_array(out, fmt, out=out)
