"""The kernel entry points fpsim.quantize, fpsim.accumulate and nn use (see fpsim.kernels)."""

from fpsim.kernels import lazy, portable
from fpsim.kernels.accumulate import accumulate_rows
from fpsim.kernels.constants import (
    Carrier,
    DirectedF32,
    FormatBits,
    NearestEvenF32,
    carrier_constants,
)
from fpsim.kernels.directed_f32 import DIRECTED_F32_MODES, directed_f32_range
from fpsim.kernels.fast_f32 import (
    count_nearest_even_f32_range,
    round_nearest_even_f32_range,
    round_nearest_even_f32_value,
)
from fpsim.kernels.general import (
    MODE_KERNELS,
    SPECIALISE_MIN,
    SPECIALISED_RANGE,
    mode_bits,
    round_count_range,
    round_range,
    specialised_range,
    stream_seed,
)
from fpsim.kernels.threads import PARALLEL_MIN, get_num_threads, run

__all__ = [
    "DIRECTED_F32_MODES", "MODE_KERNELS", "PARALLEL_MIN", "SPECIALISED_RANGE", "SPECIALISE_MIN",
    "Carrier", "DirectedF32", "FormatBits", "NearestEvenF32",
    "accumulate_rows", "carrier_constants", "count_nearest_even_f32_range",
    "directed_f32_range", "get_num_threads",
    "lazy", "mode_bits", "portable", "round_count_range",
    "round_nearest_even_f32_range", "round_nearest_even_f32_value", "round_range", "run",
    "specialised_range", "stream_seed",
]
