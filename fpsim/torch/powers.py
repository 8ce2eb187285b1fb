"""Exact powers of two on any device, built from their bits.

``torch.ldexp(x, e)`` is ``x * torch.pow(2, e)``, and CUDA's ``pow`` is not exact: on an H200
(torch 2.11, CUDA 13) ``torch.ldexp(ones, e)`` in float64 came out one ulp below 2^e for some
e, so block scales and E8M0 results differed from the CPU's in their last bit
(``benchmarks/check_torch_cuda.py``). Here 2^k for a normal exponent k is the bit pattern
``(k + bias) << mantissa_bits``, and an exponent outside the normal range is the product of two
such powers, which IEEE multiplication rounds exactly as ``ldexp`` should: a subnormal power
of two where one exists, 0 below it (2^(emin - p - 1) is a tie and goes to the even 0), inf
above the largest normal.
"""

from __future__ import annotations

import torch

_BITS = {torch.float32: (torch.int32, 23, 127), torch.float64: (torch.int64, 52, 1023)}


def _normal_power(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    int_dtype, mantissa, bias = _BITS[dtype]
    return ((k + bias) << mantissa).to(int_dtype).view(dtype)


def exp2(e: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """2^e for an integer tensor e, in float32 or float64, exactly as ``math.ldexp(1.0, e)``
    rounds it (subnormal powers, 0 below them, inf above the largest normal), on e's device."""
    _, mantissa, bias = _BITS[dtype]
    e = e.to(torch.int64)
    hi = e.clamp(1 - bias, bias)  # 2^hi is normal
    rest = (e - hi).clamp(-(mantissa + 2), 1)  # 2^rest is normal too; the product rounds
    return _normal_power(hi, dtype) * _normal_power(rest, dtype)
