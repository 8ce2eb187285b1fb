"""``EmulatedArray``: a numpy-like array whose every arithmetic result is rounded to its format.

Numerics. Values are stored in a float32 carrier (every fpsim format fits it). An operation
computes its result in float64 from the exact operand values and rounds it once to the format
(nearest-even, through ``fpsim.round``):

- ``+ - * /``, ``sqrt`` and squaring are correctly rounded: float64 (53 bits) holds at least
  2p + 2 bits for every format (p <= 24), so rounding the float64 result again is the same as
  rounding the exact result once;
- the other ufuncs (``exp``, ``log``, ``sin``, ``**`` with a general exponent, ...) are numpy's
  float64 result rounded once: within one float64 ulp of exact before the rounding, so they can
  differ from the correctly rounded value only when the exact result lies within about 2^-52
  (relative) of a midpoint between two neighbours of the format;
- reductions and products (``sum``, ``@``, ``fpsim.dot``) follow the accumulation model of
  ``fpsim.accumulate``: exact products, accumulator of format ``accumulate`` (default FP32)
  rounded after every addition, one final rounding to the result format.

Operands. A Python number or a plain array is first rounded to the EmulatedArray's format, as a
cast would (numpy calls such operands "weak"): ``fpsim.array(1, "fp16") + 1e-4`` adds fp16's
1.0002441. Only an integer exponent given to ``np.ldexp`` is used as is.

Promotion of two formats: the result takes the format whose value set contains the other's
(``Format.contains``: every finite value, inf and NaN if the other has them); ``fp16 + fp32``
is fp32, ``fp16 + e5m2`` is fp16. A mix where neither contains the other (``fp16 + bf16``:
more precision vs more range) raises ``TypeError``: cast one side with ``.astype(...)``.

>>> fpsim.array(256, "fp16") ** 2
EmulatedArray(inf, format=float16)
>>> fpsim.array(1e-5, "fp16") ** 2
EmulatedArray(0., format=float16)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from fpsim import accumulate as _acc
from fpsim import accumulators as _models
from fpsim.catalog import FP32, get_format
from fpsim.formats import Format
from fpsim.quantize import as_float_array
from fpsim.quantize import round_array as _round

FormatLike = Format | str
# accumulate= takes a format, an accumulator model of fpsim.accumulators or a preset's name
AccumulateLike = Format | str | _models.Model


def _accumulator(accumulate: AccumulateLike | None) -> tuple[_acc.Accumulator | None,
                                                              Format | None]:
    """(the accumulator, the format its values lie in) of ``accumulate=`` (None: (None, None))."""
    if accumulate is None:
        return None, None
    acc = _models.resolve(accumulate)
    return acc, acc if isinstance(acc, Format) else acc.result_format


# --- promotion (fpsim's policy over Format.contains, the one containment rule) ---------------
def promote(*formats: Format) -> Format:
    """The format of an operation on operands of these formats: the one that contains the
    others (``Format.contains``); a TypeError when neither of two contains the other."""
    result = formats[0]
    for f in formats[1:]:
        if result.contains(f):
            continue
        if f.contains(result):
            result = f
            continue
        raise TypeError(
            f"cannot mix {result.name} and {f.name}: neither format holds every value of the "
            f"other ({result.name}: {result.precision}-bit significand, max {result.max:g}; "
            f"{f.name}: {f.precision}-bit significand, max {f.max:g}). Cast one operand "
            f"explicitly, e.g. x.astype('{f.name}') or x.astype('float32')"
        )
    return result


# --- conversions -----------------------------------------------------------------------------
def _rounded(values: Any, fmt: Format, site: str, parallel: bool = True) -> np.ndarray:
    """``values`` (float32 or float64, exact) rounded once to fmt, in a float32 carrier
    (``parallel=False``: on the calling thread, see fpsim.quantize.round_array)."""
    arr = np.asarray(values)
    if arr.dtype != np.float32 and arr.dtype != np.float64:
        arr = as_float_array(arr)
    out = np.empty(arr.shape, dtype=arr.dtype)
    _round(arr, fmt, site=site, out=out, parallel=parallel)
    return out if out.dtype == np.float32 else out.astype(np.float32)


def _operand(x: Any, fmt: Format) -> np.ndarray:
    """An operand's values as float64 in ``fmt``: plain numbers and arrays are cast (rounded)."""
    if isinstance(x, EmulatedArray):
        with np.errstate(invalid="ignore"):  # signalling NaN payloads quietly become NaN
            return x._data.astype(np.float64)  # its format is contained in fmt: exact
    return _rounded(as_float_array(x, "operand"), fmt, "cast").astype(np.float64)


def _foreign(x: Any) -> bool:
    """True for objects with their own array protocol that should get a chance to handle the op."""
    if isinstance(x, (EmulatedArray, np.ndarray, np.generic, numbers.Number, list, tuple)):
        return False
    return hasattr(x, "__array_ufunc__") or hasattr(x, "__array_priority__")


# --- the array -------------------------------------------------------------------------------
class EmulatedArray(NDArrayOperatorsMixin):
    """An n-d array of values of one fpsim Format; arithmetic is rounded to that format.

    Build one with ``fpsim.array(data, fmt)``. Indexing and slicing return EmulatedArrays (views,
    as in numpy); ``.numpy()`` returns the float32 carrier values. See the module docstring for
    where the rounding happens.

    >>> a = fpsim.array([1.0, 2049.0, 1e-8], "fp16")
    >>> a
    EmulatedArray([1.000e+00, 2.048e+03, 0.000e+00], format=float16)
    >>> (a + 1).numpy().tolist()
    [2.0, 2048.0, 1.0]
    """

    __slots__ = ("_data", "_format")

    def __init__(self, data: np.ndarray, fmt: Format) -> None:
        # internal: data must already be a float32 array of values of fmt (use fpsim.array)
        self._data = data
        self._format = fmt

    # --- basic properties ---
    @property
    def format(self) -> Format:
        return self._format

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def T(self) -> EmulatedArray:  # noqa: N802 (numpy's name)
        return EmulatedArray(self._data.T, self._format)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def numpy(self) -> np.ndarray:
        """A float32 copy of the values (exact: every format's values fit float32)."""
        return self._data.copy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """numpy's view of the values: read-only unless copied, so that writing through
        ``np.asarray(a)`` cannot put a value outside the format into ``a``. ``copy=True``
        (``np.array(a)``) gives a writable copy; ``copy=False`` a read-only view, or a
        ValueError when ``dtype`` needs a conversion (numpy 2's rule)."""
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            if copy is False:
                raise ValueError(f"cannot view an EmulatedArray as {np.dtype(dtype)} without a "
                                 "copy (its carrier is float32); use copy=None or True")
            return self._data.astype(dtype)
        if copy:
            return self._data.copy()
        view = self._data.view()
        view.flags.writeable = False
        return view

    def item(self) -> float:
        return float(self._data.item())

    def tolist(self) -> Any:
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __format__(self, spec: str) -> str:
        return format(float(self._data), spec) if self.ndim == 0 else format(str(self), spec)

    def __repr__(self) -> str:
        prefix = "EmulatedArray("
        body = np.array2string(self._data, separator=", ", prefix=prefix)
        return f"{prefix}{body}, format={self._format.name})"

    def __str__(self) -> str:
        return np.array2string(self._data)

    # --- indexing and shape ---
    def __getitem__(self, key: Any) -> EmulatedArray:
        return EmulatedArray(np.asarray(self._data[key]), self._format)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Assignment casts: the value is rounded to this array's format (site "cast")."""
        if isinstance(value, EmulatedArray):
            value = value._data
        self._data[key] = _rounded(as_float_array(value, "value"), self._format, "cast")

    def reshape(self, *shape: Any) -> EmulatedArray:
        return EmulatedArray(self._data.reshape(*shape), self._format)

    def transpose(self, *axes: Any) -> EmulatedArray:
        return EmulatedArray(self._data.transpose(*axes), self._format)

    def copy(self) -> EmulatedArray:
        return EmulatedArray(self._data.copy(), self._format)

    def astype(self, fmt: FormatLike, *, site: str = "cast") -> EmulatedArray:
        """The values rounded (nearest-even) to another format: an explicit cast."""
        return array(self, fmt, site=site)

    # --- reductions and products (accumulation model: see fpsim.accumulate) ---
    def sum(
        self, axis: int | tuple[int, ...] | None = None, dtype: None = None, out: None = None,
        keepdims: bool = False, *, accumulate: AccumulateLike | None = FP32,
        order: str = "sequential",
    ) -> EmulatedArray:
        """``fpsim.sum(self, ...)``: fp32 accumulation by default, one rounding to the format."""
        if dtype is not None or out is not None:
            raise TypeError("EmulatedArray.sum does not take dtype= or out=; use accumulate=")
        return sum(self, axis, accumulate=accumulate, order=order, keepdims=keepdims)

    def mean(
        self, axis: int | tuple[int, ...] | None = None, *,
        accumulate: AccumulateLike | None = FP32, order: str = "sequential",
        keepdims: bool = False,
    ) -> EmulatedArray:
        """The accumulated sum divided by the count, rounded once to the format."""
        acc = _accumulator(accumulate)[0] or self._format
        values = _acc.sum_axis(self._data, axis, keepdims, acc, order)
        count = self.size // max(values.size, 1) if self.size else 0
        with np.errstate(all="ignore"):
            return EmulatedArray(_rounded(values / count, self._format, "mean"), self._format)

    def dot(self, other: Any, **kwargs: Any) -> EmulatedArray:
        return dot(self, other, **kwargs)

    # --- numpy protocol: every operator goes through here (NDArrayOperatorsMixin) ---
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(_foreign(x) for x in inputs):
            return NotImplemented
        if method != "__call__":
            raise TypeError(f"EmulatedArray does not support np.{ufunc.__name__}.{method}; use "
                            "fpsim.sum / fpsim.matmul, or .numpy() for plain numpy")
        if kwargs.get("out") is not None:
            raise TypeError("EmulatedArray does not support out=; assign the result instead")
        kwargs.pop("out", None)
        if ufunc is np.matmul:
            return matmul(*inputs)
        fmt = promote(*(x.format for x in inputs if isinstance(x, EmulatedArray)))
        if ufunc is np.ldexp:  # the exponent is an integer, not a value of the format
            args = [_operand(inputs[0], fmt), np.asarray(inputs[1])]
        else:
            args = [_operand(x, fmt) for x in inputs]
        with np.errstate(all="ignore"):
            result = ufunc(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(_finish(r, fmt, ufunc.__name__) for r in result)
        return _finish(result, fmt, ufunc.__name__)


def _finish(result: Any, fmt: Format, site: str) -> Any:
    """A float ufunc result rounded once to fmt and wrapped; bool/int results returned plain."""
    arr = np.asarray(result)
    if arr.dtype.kind != "f":
        return result
    return EmulatedArray(_rounded(arr.astype(np.float64, copy=False), fmt, site), fmt)


# --- construction and the public reductions ---------------------------------------------------
def array(data: Any, fmt: FormatLike, *, site: str = "array") -> EmulatedArray:
    """An EmulatedArray of ``data`` rounded (nearest-even) to ``fmt``.

    float32 and float64 data are rounded once from their own value (no double rounding); other
    numeric data is rounded once too (wide integers and longdouble exactly, see
    ``fpsim.round``). An EmulatedArray is cast to ``fmt``. A numpy masked array is refused
    (``TypeError``): pass ``data.filled(np.nan)`` or ``data.data``.

    >>> fpsim.array([0.1, 70000], "fp16")
    EmulatedArray([0.09997559,        inf], format=float16)
    """
    fmt = get_format(fmt)
    values = data._data if isinstance(data, EmulatedArray) else as_float_array(data, "data")
    return EmulatedArray(_rounded(values, fmt, site), fmt)


def _values_and_format(x: Any, default: Format) -> tuple[np.ndarray, Format]:
    if isinstance(x, EmulatedArray):
        return x._data, x.format
    return _rounded(as_float_array(x, "operand"), default, "cast"), default


def sum(  # noqa: A001  (numpy-style name: fpsim.sum)
    a: Any, axis: int | tuple[int, ...] | None = None, *,
    accumulate: AccumulateLike | None = FP32, order: str = "sequential",
    fmt: FormatLike | None = None, keepdims: bool = False,
    mode: str = "nearest_even", rng: object = None,
) -> EmulatedArray:
    """Sum with an accumulator of format ``accumulate``, rounded after every addition.

    ``order`` is ``"sequential"`` (left to right) or ``"pairwise"`` (a balanced tree). The
    accumulator is rounded under ``mode`` (e.g. ``"stochastic"``, seeded by ``rng``); the result
    is rounded once (nearest-even) to ``fmt``: by default the array's format, or for plain data
    the accumulate format (plain data is first rounded to that format). ``accumulate=None``
    accumulates in the array's own format. ``accumulate`` may also be an accumulator model of
    ``fpsim.accumulators`` or a preset's name (``fpsim.accumulators.PRESETS``), e.g.
    ``"hopper_fp8_promote128"``; a model fixes its own order and roundings.

    >>> ones = fpsim.array(np.ones(3000), "fp16")
    >>> fpsim.sum(ones, accumulate="fp16"), fpsim.sum(ones, fmt="fp32")
    (EmulatedArray(2048., format=float16), EmulatedArray(3000., format=float32))
    """
    acc_default, acc_fmt = _accumulator(accumulate)
    base = a.format if isinstance(a, EmulatedArray) else (
        get_format(fmt) if fmt is not None else (acc_fmt or FP32))
    data, in_fmt = _values_and_format(a, base)
    acc = acc_default or in_fmt
    out_fmt = get_format(fmt) if fmt is not None else in_fmt
    values = _acc.sum_axis(data, axis, keepdims, acc, order, mode, rng)
    return EmulatedArray(_rounded(values, out_fmt, "sum"), out_fmt)


def matmul(
    a: Any, b: Any, *, accumulate: AccumulateLike | None = FP32, order: str = "auto",
    fmt: FormatLike | None = None, mode: str = "nearest_even", rng: object = None,
) -> EmulatedArray:
    """Matrix product (numpy.matmul shapes) with exact products and a rounded accumulator.

    Products are exact; the accumulator, of format ``accumulate`` (default FP32, as on tensor
    cores), is rounded after every addition; the result is rounded once to ``fmt`` (default: the
    operands' promoted format; e.g. ``fmt="fp32"`` keeps the fp32 accumulator, like a GEMM with
    fp16 inputs and fp32 output). ``order``: ``"sequential"``, ``"pairwise"``, ``"blas"`` (fp32
    accumulation in the BLAS library's order, allowed when it is exactly that model) or
    ``"auto"`` (``"blas"`` where allowed, else ``"sequential"``). See fpsim.accumulate.
    ``accumulate`` may be an accumulator model or preset name, as in ``fpsim.sum``.

    >>> a = fpsim.array(np.full((1, 4096), 1.0), "fp16")
    >>> fpsim.matmul(a, a.T, accumulate="fp16").item(), (a @ a.T).item()
    (2048.0, 4096.0)
    """
    formats = [x.format for x in (a, b) if isinstance(x, EmulatedArray)]
    acc_default, acc_fmt = _accumulator(accumulate)
    common = promote(*formats) if formats else (acc_fmt or FP32)
    da, fa = _values_and_format(a, common)
    db, fb = _values_and_format(b, common)
    acc = acc_default or common
    out_fmt = get_format(fmt) if fmt is not None else common
    values = _acc.matmul_nd(da, db, fa, fb, acc, order, mode, rng)
    # a BLAS result is rounded on this thread: see fpsim.quantize.round_array
    return EmulatedArray(_rounded(values, out_fmt, "matmul", parallel=False), out_fmt)


def dot(a: Any, b: Any, **kwargs: Any) -> EmulatedArray:
    """Inner product of 1-D arrays, or matrix product for 1-D/2-D operands; see ``matmul``.

    >>> fpsim.dot(fpsim.array([1, 2, 3], "bf16"), [4, 5, 6])
    EmulatedArray(32., format=bfloat16)
    """
    nd = [np.ndim(x._data if isinstance(x, EmulatedArray) else x) for x in (a, b)]
    if min(nd) < 1 or max(nd) > 2:
        raise ValueError(f"fpsim.dot takes 1-D or 2-D operands (got {nd[0]}-D and {nd[1]}-D); "
                         "use * for scalars and fpsim.matmul for stacks of matrices")
    return matmul(a, b, **kwargs)
