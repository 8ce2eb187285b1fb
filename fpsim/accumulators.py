"""Accumulator models: how a dot product's exact products are added, as data.

Each class below is a MODEL of an accumulation, written from the source it names; none is a
claim about what a given chip does beyond what that source measured or states. Products are
exact (see ``fpsim.accumulate``); a model says how they are added and rounded.

========================= =====================================================================
model                     what it does
========================= =====================================================================
``IEEE(fmt, mode)``       round after every addition in ``fmt`` (IEEE 754's model of a sum;
                          fpsim's default with FP32)
``AlignedGroups(k, w)``   per group of k products: the running sum and the products aligned to
                          the largest exponent among them and truncated toward zero to w bits,
                          added exactly, the sum rounded to the sum format (Fasi, Higham,
                          Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ
                          Computer Science 7:e330, 2021)
``Chunked(inner, n)``     chunks of n products summed by ``inner`` from zero, each chunk's sum
                          added into an ``outer`` accumulator (Wang et al., "Training Deep
                          Neural Networks with 8-bit Floating Point Numbers", NeurIPS 2018:
                          fp16 chunks of 64; DeepSeek-V3 technical report, section 3.3:
                          promotion to fp32 every N_c = 128 products)
========================= =====================================================================

``PRESETS`` (name -> model) names models after their sources; ``resolve`` turns what
``fpsim.sum/dot/matmul(accumulate=...)`` accept (a Format or its name, a model, a preset name)
into a Format (the IEEE path of ``fpsim.accumulate``) or a model.

>>> import fpsim
>>> x = fpsim.array(np.full(1000, 0.01), "fp16")
>>> fpsim.sum(x, accumulate="wang2018_fp16_chunk64").item()
9.9609375
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim import _kernels
from fpsim.catalog import FP16, FP32, get_format
from fpsim.formats import Format
from fpsim.kernels.accumulators import model_rows
from fpsim.quantize import _seed, format_constants
from fpsim.rounding import RoundingMode, get_mode, resolve_overflow

_F64_CARRIER = _kernels.carrier_constants(np.dtype(np.float64))

FP22 = Format("fp22_e8m13", 8, 13)
"""1 sign, 8 exponent and 13 mantissa bits: the accumulator width reported for fp8 MMA on
Hopper/Ada (DeepSeek-V3 report, section 3.3: "around 14 bits"; SageAttention2: "FP22")."""


def _check_mode(what: str, mode: str | RoundingMode) -> RoundingMode:
    try:
        return get_mode(mode)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def _check_count(what: str, value: object, lo: int, hi: int) -> int:
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
            or not lo <= value <= hi):
        raise ValueError(f"{what} must be an int from {lo} to {hi}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class IEEE:
    """MODEL: the accumulator holds a value of ``fmt`` and is rounded under ``mode`` after every
    addition, left to right (IEEE 754 arithmetic; fpsim's default accumulation with FP32)."""

    fmt: Format
    mode: str | RoundingMode = "nearest_even"
    source: str = "IEEE 754-2019: each addition correctly rounded"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fmt", get_format(self.fmt))
        object.__setattr__(self, "mode", _check_mode("IEEE mode", self.mode))

    @property
    def result_format(self) -> Format:
        """The format the accumulated value lies in."""
        return self.fmt


@dataclass(frozen=True)
class AlignedGroups:
    """MODEL of a tensor-core inner product (Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021):
    the products of a group of ``group`` terms are exact; they and the running sum are aligned
    to the largest exponent among them and truncated toward zero to ``bits`` bits (the leading
    bit included), added exactly, and the sum rounded to ``fmt`` under ``mode`` (the paper
    measured truncation: "toward_zero"). ``bits + log2(group + 1)`` must stay within 53."""

    group: int
    bits: int
    fmt: Format = FP32
    mode: str | RoundingMode = "toward_zero"
    source: str = ("Fasi, Higham, Mikaitis, Pranesh, 'Numerical behavior of NVIDIA tensor "
                   "cores', PeerJ Computer Science 7:e330 (2021)")

    def __post_init__(self) -> None:
        group = _check_count("AlignedGroups group", self.group, 1, 1 << 20)
        limit = 53 - (group + 1).bit_length()
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "bits", _check_count(
            f"AlignedGroups bits (with group {group})", self.bits, 1, limit))
        object.__setattr__(self, "fmt", get_format(self.fmt))
        object.__setattr__(self, "mode", _check_mode("AlignedGroups mode", self.mode))

    @property
    def result_format(self) -> Format:
        """The format the accumulated value lies in."""
        return self.fmt


Inner = IEEE | AlignedGroups


@dataclass(frozen=True)
class Chunked:
    """MODEL of chunked accumulation / periodic promotion: the products are cut into chunks of
    ``chunk`` terms; ``inner`` sums each chunk from zero and each chunk's sum is added into an
    accumulator of ``outer``, rounded under ``outer_mode`` (Wang et al. 2018: fp16 chunks of 64
    into fp16; DeepSeek-V3 section 3.3: the limited-precision MMA sum promoted to fp32 every
    N_c = 128 products, CUTLASS's promotion interval)."""

    inner: Inner
    chunk: int
    outer: Format = FP32
    outer_mode: str | RoundingMode = "nearest_even"
    source: str = ("Wang et al., 'Training Deep Neural Networks with 8-bit Floating Point "
                   "Numbers', NeurIPS 2018; DeepSeek-V3 technical report (2024), section 3.3")

    def __post_init__(self) -> None:
        if not isinstance(self.inner, (IEEE, AlignedGroups)):
            raise TypeError(f"Chunked inner must be an IEEE or AlignedGroups model, got "
                            f"{self.inner!r}")
        object.__setattr__(self, "chunk", _check_count("Chunked chunk", self.chunk, 1, 1 << 30))
        object.__setattr__(self, "outer", get_format(self.outer))
        object.__setattr__(self, "outer_mode", _check_mode("Chunked outer_mode", self.outer_mode))

    @property
    def result_format(self) -> Format:
        """The format the accumulated value lies in."""
        return self.outer


Model = IEEE | AlignedGroups | Chunked


def _constants(fmt: Format, mode: RoundingMode) -> tuple:
    f = format_constants(fmt, np.dtype(np.float64), fmt.subnormals, resolve_overflow(fmt, None))
    return _kernels.mode_bits(mode), f


def kernel_args(model: Model, rng: object = None) -> tuple:
    """The arguments of fpsim.kernels.accumulators.model_rows after ``(x, out, lo, hi)``."""
    inner, chunk, outer, outer_mode = (
        (model.inner, model.chunk, model.outer, model.outer_mode) if isinstance(model, Chunked)
        else (model, 0, model.result_format, RoundingMode.NEAREST_EVEN))
    m_in, f_in = _constants(inner.fmt, get_mode(inner.mode))
    m_out, f_out = _constants(outer, get_mode(outer_mode))
    kind, group, bits = (1, inner.group, inner.bits) if isinstance(inner, AlignedGroups) else (
        0, 1, 53)
    modes = {get_mode(inner.mode), get_mode(outer_mode)}
    seed = _seed(rng) if RoundingMode.STOCHASTIC in modes else 0
    return kind, group, bits, m_in, f_in, chunk, m_out, f_out, seed, _F64_CARRIER


def sum_rows(x: np.ndarray, model: Model, rng: object = None, seed_offset: int = 0
             ) -> np.ndarray:
    """The model's sum of each row of the 2-D float64 array ``x`` (exact terms), float64."""
    return counted_sum_rows(x, model, rng, seed_offset)[0]


def counted_sum_rows(x: np.ndarray, model: Model, rng: object = None, seed_offset: int = 0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``sum_rows`` and the kernel's (additions, swamped terms) counts, for fpsim.monitor."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty(x.shape[0], dtype=np.float64)
    args = kernel_args(model, rng)
    if seed_offset:
        args = args[:8] + (_kernels.stream_seed(args[8], seed_offset),) + args[9:]
    parts = _kernels.run(model_rows, x.shape[0], (x, out), args, work=x.size)
    return out, np.sum(parts, axis=0)


def name_of(model: Model) -> str:
    """The name of the first preset whose model equals ``model`` (``te_fp8_dgrad`` is named
    ``hopper_fp8_promote128``, the same model), else the model's class name."""
    return next((k for k, v in PRESETS.items() if v == model), type(model).__name__)


def is_model(acc: object) -> bool:
    """True for an accumulator model object (not a Format)."""
    return isinstance(acc, (IEEE, AlignedGroups, Chunked))


_HOPPER_FAST = IEEE(FP22, "toward_zero", source=(
    "DeepSeek-V3 technical report (2024), section 3.3: fp8 GEMM accumulation on H800 keeps "
    "around 14 bits; SageAttention2 (Zhang et al. 2025): an FP22 (e8m13) accumulator; "
    "truncation: Fasi et al. 2021 (ours: every addition truncated)"))
_HOPPER_PROMOTE = Chunked(_HOPPER_FAST, 128, FP32, source=(
    "DeepSeek-V3 technical report (2024), section 3.3: promotion to fp32 CUDA-core "
    "accumulators every N_c = 128 products (CUTLASS's promotion interval)"))

PRESETS: dict[str, Model] = {
    "ieee_fp32": IEEE(FP32),
    "ieee_fp16": IEEE(FP16),
    "v100_tensor_core": AlignedGroups(4, 24, source=(
        "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021: V100 tensor cores add 4 exact "
        "products and the sum aligned and truncated (ours: w = 24, fp32's significand)")),
    "hopper_fp8_fast": _HOPPER_FAST,
    "hopper_fp8_promote128": _HOPPER_PROMOTE,
    "te_fp8_fprop": _HOPPER_FAST,
    "te_fp8_dgrad": _HOPPER_PROMOTE,
    "te_fp8_wgrad": _HOPPER_PROMOTE,
    "wang2018_fp16_chunk64": Chunked(IEEE(FP16), 64, FP16, source=(
        "Wang et al., 'Training Deep Neural Networks with 8-bit Floating Point Numbers', "
        "NeurIPS 2018: fp16 accumulation in chunks of 64")),
}
"""Accumulator presets named after their source. ``te_fp8_*``: Transformer Engine's recipe
defaults (fprop without split accumulation, dgrad and wgrad with it), modelled as the Hopper
fp8 models (ours: split accumulation as promotion every 128 products)."""


def resolve(accumulate: object) -> Format | Model:
    """A Format (the IEEE path of fpsim.accumulate) or a model from what ``accumulate=`` takes:
    a Format or format name, a model object, or a name in PRESETS."""
    if is_model(accumulate):
        return accumulate  # type: ignore[return-value]
    if isinstance(accumulate, str) and accumulate.strip().lower() in PRESETS:
        return PRESETS[accumulate.strip().lower()]
    try:
        return get_format(accumulate)
    except (ValueError, TypeError) as e:
        raise type(e)(f"accumulate must be a Format or format name, an accumulator model "
                      f"(fpsim.accumulators) or a preset name ({', '.join(PRESETS)}); {e}"
                      ) from None
