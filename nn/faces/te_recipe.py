"""``te.recipe``: Transformer Engine's recipe classes (transformer_engine/common/recipe), with
TE's names, argument order and defaults, each an nn.fp8 recipe that ``te.autocast`` and
``nn.fp8_autocast`` both take.

========================== ================================================================
TE                         here
========================== ================================================================
``Format.E4M3/HYBRID``     E4M3 everywhere / E4M3 forward and E5M2 gradients (``E5M2``,
                           ``E2M1`` exist and are refused, as TE refuses pure E5M2)
``DelayedScaling``         ``nn.fp8.DelayedScaling`` with TE's cast: ``float32(x * scale)``,
                           then the fp8 conversion (two roundings)
``Float8CurrentScaling``   ``nn.fp8.CurrentScaling``, TE's cast as above
``MXFP8BlockScaling``      ``nn.fp8.BlockScaling("mxfp8_e4m3", scale_rounding="ceil")``:
                           TE's ``float_to_e8m0(amax * float32(1 / 448))`` rounds the block
                           scale up, which equals "ceil" for every finite non-zero float32
                           amax (tests/nn/faces/test_te_face.py checks each float32 of one
                           binade)
``Float8BlockScaling``     ``nn.fp8.Float8BlockScaling`` (1x128 / 128x128 tiles)
========================== ================================================================

The scaling state lives in the recipe object (keyed by layer names), where TE keeps it in each
module: make the recipe once and pass the same object to every ``autocast``. ``reduce_amax``
and ``amax_reduction_group`` are accepted: there is one process, so there is nothing to reduce.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from nn.fp8.blockwise import Float8BlockScaling as _BlockwiseRecipe
from nn.fp8.recipes import BlockScaling as _MXRecipe
from nn.fp8.recipes import CurrentScaling as _CurrentRecipe
from nn.fp8.recipes import DelayedScaling as _DelayedRecipe


class _FormatHelper(NamedTuple):
    max_fwd: float
    max_bwd: float


class Format(Enum):
    """TE's formats: the largest finite value forward and backward."""

    E2M1 = _FormatHelper(max_fwd=6, max_bwd=6)
    E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
    E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
    HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)


_FP8_FORMAT = {Format.E4M3: "e4m3", Format.HYBRID: "hybrid"}  # TE's Format -> nn.fp8's name


def _fp8_format(value: object, recipe: str) -> str:
    if value in _FP8_FORMAT:
        return _FP8_FORMAT[value]
    if value is Format.E5M2:
        raise ValueError(f"{recipe}: fp8_format=Format.E5M2: pure E5M2 training is not "
                         "supported (as in Transformer Engine); use Format.HYBRID")
    raise ValueError(f"{recipe}: fp8_format must be Format.E4M3 or Format.HYBRID, got "
                     f"{value!r}")


def _flag(recipe: str, name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{recipe}: {name} must be True or False, got {value!r}")
    return value


def _unsupported(recipe: str, name: str, value: object, default: object, why: str) -> None:
    if value != default:
        raise NotImplementedError(f"{recipe}: {name}={value!r} is not supported here ({why}); "
                                  f"leave it at {default!r}")


def _attention_flags(recipe: str, fp8_dpa: object, fp8_mha: object) -> None:
    for name, value in (("fp8_dpa", fp8_dpa), ("fp8_mha", fp8_mha)):
        _flag(recipe, name, value)
        _unsupported(recipe, name, value, False, "nn quantizes attention's matmuls as any other "
                     "matmul under fp8_autocast; there is no fused fp8 attention")


class QParams(NamedTuple):
    """TE's quantization parameters of one tensor kind (read-only here)."""

    power_2_scale: bool = False
    amax_epsilon: float = 0.0


class MMParams(NamedTuple):
    """TE's GEMM options; the accumulator is modelled as exact fp32 accumulation here."""

    use_split_accumulator: bool = True


class DelayedScaling(_DelayedRecipe):
    """TE's ``DelayedScaling(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024,
    amax_compute_algo="max", scaling_factor_compute_algo=None, reduce_amax=True,
    fp8_dpa=False, fp8_mha=False)``.

    The fused update of TE (``nn.fp8.state``), its unfused one for a callable
    ``amax_compute_algo`` (it gets the amax history, a float32 numpy array of
    ``amax_history_len`` values with the current amax at position 0, and returns the amax);
    the cast rounds ``float32(x * scale)`` and then to fp8, as TE's cast kernels do.
    ``scaling_factor_compute_algo`` is not supported (the scale is
    ``fp8_max * 2**-margin / amax``).
    """

    fp32_product = True

    def __init__(self, margin: int = 0, fp8_format: Format = Format.HYBRID,
                 amax_history_len: int = 1024,
                 amax_compute_algo: str | Callable[[np.ndarray], Any] = "max",
                 scaling_factor_compute_algo: Callable[..., Any] | None = None,
                 reduce_amax: bool = True, fp8_dpa: bool = False, fp8_mha: bool = False) -> None:
        name = "DelayedScaling"
        _unsupported(name, "scaling_factor_compute_algo", scaling_factor_compute_algo, None,
                     "the scale is fp8_max * 2**-margin / amax")
        _attention_flags(name, fp8_dpa, fp8_mha)
        self.reduce_amax = _flag(name, "reduce_amax", reduce_amax)
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha
        self.scaling_factor_compute_algo = None
        self.te_format = fp8_format
        super().__init__(_fp8_format(fp8_format, name), amax_history_len, amax_compute_algo,
                         margin)

    def __repr__(self) -> str:
        return (f"recipe_type=DelayedScaling, margin={self.margin}, format="
                f"{self.te_format.name}, amax_history_len={self.amax_history_len}, "
                f"reduce_amax={self.reduce_amax}, fp8_dpa={self.fp8_dpa}, "
                f"fp8_mha={self.fp8_mha}")


class Float8CurrentScaling(_CurrentRecipe):
    """TE's ``Float8CurrentScaling(use_power_2_scales=False, fp8_format=Format.HYBRID, ...)``:
    each cast scaled by ``fp8_max / amax`` of the tensor itself (TE's
    ``compute_scale_from_amax``), cast as ``float32(x * scale)`` then fp8.

    ``use_power_2_scales`` sets the power-of-two rounding of every tensor's scale (TE keeps
    it in ``fp8_quant_fwd_inp`` etc., ``QParams``, whose default comes from the environment
    variable NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); ``amax_epsilon`` (keyword, ours: TE
    sets it through those QParams) is the floor of the amax.
    """

    fp32_product = True

    def __init__(self, use_power_2_scales: bool = False, fp8_format: Format = Format.HYBRID,
                 fp8_gemm_fprop: MMParams | None = None, fp8_gemm_dgrad: MMParams | None = None,
                 fp8_gemm_wgrad: MMParams | None = None, fp8_dpa: bool = False,
                 fp8_mha: bool = False, *, amax_epsilon: float = 0.0) -> None:
        name = "Float8CurrentScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha
        self.fp8_gemm_fprop = fp8_gemm_fprop or MMParams(use_split_accumulator=False)
        self.fp8_gemm_dgrad = fp8_gemm_dgrad or MMParams()
        self.fp8_gemm_wgrad = fp8_gemm_wgrad or MMParams()
        self.te_format = fp8_format
        super().__init__(_fp8_format(fp8_format, name), 0,
                         _flag(name, "use_power_2_scales", use_power_2_scales), amax_epsilon)

    @property
    def use_power_2_scales(self) -> bool:
        return self.power_2

    @property
    def fp8_quant_fwd_inp(self) -> QParams:
        return QParams(self.power_2, self.amax_epsilon)

    fp8_quant_fwd_weight = fp8_quant_bwd_grad = fp8_quant_fwd_inp

    def __repr__(self) -> str:
        return (f"recipe_type=Float8CurrentScaling, format={self.te_format.name}, "
                f"use_power_2_scales={self.power_2}, amax_epsilon={self.amax_epsilon}")


class MXFP8BlockScaling(_MXRecipe):
    """TE's ``MXFP8BlockScaling(margin=0, fp8_format=Format.E4M3, fp8_dpa=False,
    fp8_mha=False)``: blocks of 32 along the inner dimension with E8M0 scales rounded up
    (TE's ``float_to_e8m0(amax * float32(1 / max))``: "ceil", so a block's largest element
    never clips), E4M3 elements (E5M2 gradients under ``Format.HYBRID``)."""

    def __init__(self, margin: int = 0, fp8_format: Format = Format.E4M3,
                 fp8_dpa: bool = False, fp8_mha: bool = False,
                 enable_2d_quantization: bool = False) -> None:
        name = "MXFP8BlockScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        _unsupported(name, "margin", margin, 0, "TE's MXFP8 casts do not use it")
        _unsupported(name, "enable_2d_quantization", enable_2d_quantization, False,
                     "MX blocks run along the inner dimension only")
        self.margin = 0
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha
        self.te_format = fp8_format
        backward = {"e4m3": "mxfp8_e4m3", "hybrid": "mxfp8_e5m2"}[_fp8_format(fp8_format, name)]
        super().__init__("mxfp8_e4m3", backward=backward, scale_rounding="ceil")

    def __repr__(self) -> str:
        return f"recipe_type=MXFP8BlockScaling, margin=0, format={self.te_format.name}"


class Float8BlockScaling(_BlockwiseRecipe):
    """TE's ``Float8BlockScaling(fp8_format=Format.E4M3, ...)``: 1x128 tiles of activations and
    gradients, 128x128 tiles of weights, power-of-two float32 scales (``nn.fp8.blockwise``).
    ``use_f32_scales=True`` (TE: the environment variable NVTE_FP8_BLOCK_SCALING_FP32_SCALES)
    keeps the scales unrounded."""

    def __init__(self, fp8_format: Format = Format.E4M3, x_block_scaling_dim: int = 1,
                 w_block_scaling_dim: int = 2, grad_block_scaling_dim: int = 1,
                 fp8_dpa: bool = False, fp8_mha: bool = False, *,
                 use_f32_scales: bool = False) -> None:
        name = "Float8BlockScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        self.fp8_dpa, self.fp8_mha = fp8_dpa, fp8_mha
        self.te_format = fp8_format
        super().__init__(_fp8_format(fp8_format, name), x_block_scaling_dim,
                         w_block_scaling_dim, grad_block_scaling_dim,
                         power_2_scales=not _flag(name, "use_f32_scales", use_f32_scales))

    @property
    def x_block_scaling_dim(self) -> int:
        return self.x_dim

    @property
    def w_block_scaling_dim(self) -> int:
        return self.w_dim

    @property
    def grad_block_scaling_dim(self) -> int:
        return self.grad_dim

    def __repr__(self) -> str:
        return (f"recipe_type=Float8BlockScaling, format={self.te_format.name}, "
                f"x_block_scaling_dim={self.x_dim}, w_block_scaling_dim={self.w_dim}, "
                f"grad_block_scaling_dim={self.grad_dim}, power_2_scales={self.power_2}")


__all__ = ["DelayedScaling", "Float8BlockScaling", "Float8CurrentScaling", "Format", "MMParams",
           "MXFP8BlockScaling", "QParams"]
