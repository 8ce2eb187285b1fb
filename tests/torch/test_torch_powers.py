"""fpsim.torch.powers.exp2: 2^e built from bits equals math.ldexp(1, e) bit for bit (torch's
ldexp multiplies by torch.pow(2, e), which CUDA does not compute exactly)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from torch_device import DEVICE

torch = pytest.importorskip("torch")

from fpsim.torch.powers import exp2  # noqa: E402


@pytest.mark.parametrize("dtype,lo,hi", [("float64", -1200, 1100), ("float32", -200, 200)])
def test_exp2_equals_ldexp_of_one_for_every_exponent_subnormal_zero_and_inf(dtype, lo, hi):
    e = torch.arange(lo, hi, device=DEVICE)
    got = exp2(e, getattr(torch, dtype)).cpu().numpy()
    with np.errstate(over="ignore"):
        want = np.array([np.ldexp(np.dtype(dtype).type(1), k) for k in range(lo, hi)],
                        dtype=dtype)
    assert want[0] == 0 and math.isinf(want[-1])  # the range reaches past both ends
    np.testing.assert_array_equal(got.view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}"))
