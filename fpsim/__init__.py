"""fpsim: an educational simulator of low-precision floating point (fp16, bf16, fp8, ...).

Formats are data (``fpsim.Format``), rounding is exact in every mode (``fpsim.round``, checked
against the pure-Python specification ``fpsim.round_scalar``), and the compute core is a set of
numba kernels. ``fpsim.mx`` quantizes OCP MX and NVFP4 blocks; ``fpsim.p3109`` builds the IEEE
P3109 binary8 formats; ``E8M0FNU`` is the MX block scale.
"""

from fpsim import mx, plot
from fpsim._version import __version__
from fpsim.bits import classify, decompose, from_bits, to_bits
from fpsim.catalog import (
    BF16,
    CATALOG,
    E2M1FN,
    E2M3FN,
    E3M2FN,
    E3M4,
    E4M3,
    E4M3B11FNUZ,
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
    E8M0FNU,
    FP16,
    FP32,
    P3109_FORMATS,
    TF32,
    get_format,
    known_names,
    p3109,
)
from fpsim.emulated import EmulatedArray, array, dot, matmul, sum  # noqa: A001  (fpsim.sum)
from fpsim.explain import explain
from fpsim.formats import Format
from fpsim.grid import next_down, next_up, ulp, values
from fpsim.monitor import monitor
from fpsim.quantize import round  # noqa: A001  (numpy-style name: fpsim.round)
from fpsim.rounding import MODE_NAMES, RoundingMode, get_mode, round_scalar
from fpsim.warmup import warmup
