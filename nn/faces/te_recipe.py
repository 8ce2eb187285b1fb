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
``NVFP4BlockScaling``      ``nn.fp8.NVFP4BlockScaling`` (policy "nvfp4_te"): a MODEL of TE's
                           recipe (2-D 16x16 weight blocks, random Hadamard transform of the
                           wgrad operands, stochastic rounding of gradients)
========================== ================================================================

A recipe is configuration, as in TE: the per-tensor scaling state of a ``te.Linear`` lives in
the layer (``layer.fp8_meta``, ``nn.fp8.meta``), so two layers under one recipe object keep
separate histories and a new recipe object of the same kind carries on from them. (Matmuls of
other layers, run under a face recipe through ``nn.fp8_autocast``, keep theirs in
``recipe.states``.) ``reduce_amax`` and ``amax_reduction_group`` are accepted: there is one
process, so there is nothing to reduce. The defaults TE reads from environment variables
(``NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES``, ``NVTE_NVFP4_DISABLE_RHT``, ...,
``NVTE_BACKWARD_OVERRIDE``) are TE's values with those variables unset.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple, NoReturn

import numpy as np

from nn.fp8.blockwise import Float8BlockScaling as _BlockwiseRecipe
from nn.fp8.nvfp4 import NVFP4BlockScaling as _NVFP4Recipe
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


def _backward_override(recipe: str, value: object) -> None:
    if value not in (None, "high_precision", "dequantized"):
        raise ValueError(f"{recipe}: backward_override must be None, 'high_precision' or "
                         f"'dequantized', got {value!r}")
    _unsupported(recipe, "backward_override", value, None, "the backward always uses the "
                 "operands quantized for it")


def _split_accumulators(recipe: str, **gemms: MMParams) -> None:
    for name, params in gemms.items():
        if not params.use_split_accumulator:
            raise ValueError(f"{recipe}: {name}=MMParams(use_split_accumulator=False): split "
                             "accumulation is required (as Transformer Engine asserts)")


def _attention_flags(recipe: str, fp8_dpa: object, fp8_mha: object) -> None:
    for name, value in (("fp8_dpa", fp8_dpa), ("fp8_mha", fp8_mha)):
        _flag(recipe, name, value)
        _unsupported(recipe, name, value, False, "nn quantizes attention's matmuls as any other "
                     "matmul under fp8_autocast; there is no fused fp8 attention")


class _NoReset:
    """TE's recipes are dataclasses of settings with no ``reset``; the state a reset would
    clear lives in the modules. Calling it raises, naming what to call instead."""

    def reset(self) -> NoReturn:
        raise AttributeError(
            f"te.recipe.{type(self).__name__} has no reset() (a TE recipe is configuration; "
            "each te.Linear owns its fp8 state): call layer.fp8_meta.reset() on each te.Linear, "
            "and recipe.log.clear() for the telemetry log")


class QParams(NamedTuple):
    """TE's quantization parameters of one tensor kind (read-only here)."""

    power_2_scale: bool = False
    amax_epsilon: float = 0.0
    random_hadamard_transform: bool = False
    stochastic_rounding: bool = False
    fp4_2d_quantization: bool = False


class MMParams(NamedTuple):
    """TE's GEMM options; the accumulator is modelled as exact fp32 accumulation here."""

    use_split_accumulator: bool = True


class DelayedScaling(_NoReset, _DelayedRecipe):
    """TE's ``DelayedScaling(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024,
    amax_compute_algo="max", scaling_factor_compute_algo=None, reduce_amax=True,
    fp8_dpa=False, fp8_mha=False)``.

    The fused update of TE (``nn.fp8.state``), its unfused one for a callable
    ``amax_compute_algo`` (it gets the amax history, a float32 numpy array of
    ``amax_history_len`` values with the current amax at position 0, and returns the amax);
    the cast rounds ``float32(x * scale)`` and then to fp8, as TE's cast kernels do.
    ``scaling_factor_compute_algo`` is not supported (the scale is
    ``fp8_max * 2**-margin / amax``), nor are ``fp8_dpa``/``fp8_mha`` (no fused fp8
    attention); ``backward_override`` is None, as TE requires of delayed scaling.
    """

    fp32_product = True

    def __init__(self, margin: int = 0, fp8_format: Format = Format.HYBRID,
                 amax_history_len: int = 1024,
                 amax_compute_algo: str | Callable[[np.ndarray], Any] = "max",
                 scaling_factor_compute_algo: Callable[..., Any] | None = None,
                 reduce_amax: bool = True, fp8_dpa: bool = False, fp8_mha: bool = False,
                 backward_override: str | None = None) -> None:
        name = "DelayedScaling"
        _unsupported(name, "scaling_factor_compute_algo", scaling_factor_compute_algo, None,
                     "the scale is fp8_max * 2**-margin / amax")
        _attention_flags(name, fp8_dpa, fp8_mha)
        if backward_override is not None:
            raise ValueError(f"DelayedScaling: backward_override={backward_override!r}: delayed "
                             "scaling only supports backward_override=None (as in TE)")
        self.backward_override = None
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


class Float8CurrentScaling(_NoReset, _CurrentRecipe):
    """TE's ``Float8CurrentScaling(use_power_2_scales=False, fp8_format=Format.HYBRID, ...)``:
    each cast scaled by ``fp8_max / amax`` of the tensor itself (TE's
    ``compute_scale_from_amax``), cast as ``float32(x * scale)`` then fp8.

    ``use_power_2_scales`` sets the power-of-two rounding of every tensor's scale (TE's
    quantizers read it from the recipe: ``force_pow_2_scales=recipe.use_power_2_scales``; its
    default comes from NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES, unset here); ``amax_epsilon``
    (keyword, ours; TE's current-scaling quantizers use 0, the default) is the floor of the
    amax. ``fp8_quant_fwd_inp`` etc. show both (TE's are class attributes set from the
    environment).
    """

    fp32_product = True

    def __init__(self, use_power_2_scales: bool = False, fp8_format: Format = Format.HYBRID,
                 fp8_gemm_fprop: MMParams | None = None, fp8_gemm_dgrad: MMParams | None = None,
                 fp8_gemm_wgrad: MMParams | None = None, fp8_dpa: bool = False,
                 fp8_mha: bool = False, backward_override: str | None = None, *,
                 amax_epsilon: float = 0.0) -> None:
        name = "Float8CurrentScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        _backward_override(name, backward_override)
        self.backward_override = None
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


class MXFP8BlockScaling(_NoReset, _MXRecipe):
    """TE's ``MXFP8BlockScaling(margin=0, fp8_format=Format.E4M3, fp8_dpa=False,
    fp8_mha=False)``: blocks of 32 along the inner dimension with E8M0 scales rounded up
    (TE's ``float_to_e8m0(amax * float32(1 / max))``: "ceil", so a block's largest element
    never clips), E4M3 elements (E5M2 gradients under ``Format.HYBRID``)."""

    def __init__(self, margin: int = 0, fp8_format: Format = Format.E4M3,
                 fp8_dpa: bool = False, fp8_mha: bool = False,
                 backward_override: str | None = None,
                 enable_2d_quantization: bool = False) -> None:
        name = "MXFP8BlockScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        _backward_override(name, backward_override)
        self.backward_override = None
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


class Float8BlockScaling(_NoReset, _BlockwiseRecipe):
    """TE's ``Float8BlockScaling(use_f32_scales=False, fp8_format=Format.E4M3,
    x_block_scaling_dim=1, w_block_scaling_dim=2, grad_block_scaling_dim=1, fp8_gemm_fprop=...,
    fp8_gemm_dgrad=..., fp8_gemm_wgrad=..., fp8_dpa=False, fp8_mha=False,
    backward_override=None)`` (TE's order): 1x128 tiles of activations and gradients, 128x128
    tiles of weights, power-of-two float32 scales (``nn.fp8.blockwise``).
    ``use_f32_scales=True`` (TE's default from NVTE_FP8_BLOCK_SCALING_FP32_SCALES) keeps the
    scales unrounded. The GEMMs must split accumulation (TE asserts it; the model accumulates
    exactly in fp32)."""

    def __init__(self, use_f32_scales: bool = False, fp8_format: Format = Format.E4M3,
                 x_block_scaling_dim: int = 1, w_block_scaling_dim: int = 2,
                 grad_block_scaling_dim: int = 1, fp8_gemm_fprop: MMParams | None = None,
                 fp8_gemm_dgrad: MMParams | None = None, fp8_gemm_wgrad: MMParams | None = None,
                 fp8_dpa: bool = False, fp8_mha: bool = False,
                 backward_override: str | None = None) -> None:
        name = "Float8BlockScaling"
        _attention_flags(name, fp8_dpa, fp8_mha)
        self.fp8_gemm_fprop = fp8_gemm_fprop or MMParams()
        self.fp8_gemm_dgrad = fp8_gemm_dgrad or MMParams()
        self.fp8_gemm_wgrad = fp8_gemm_wgrad or MMParams()
        _split_accumulators(name, fp8_gemm_fprop=self.fp8_gemm_fprop,
                            fp8_gemm_dgrad=self.fp8_gemm_dgrad,
                            fp8_gemm_wgrad=self.fp8_gemm_wgrad)
        _backward_override(name, backward_override)
        self.backward_override = None
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


_4OVER6_SCOPES = ("none", "weights", "activations", "all")  # TE's _NVFP4_4OVER6_SCOPES


class NVFP4BlockScaling(_NoReset, _NVFP4Recipe):
    """TE's ``NVFP4BlockScaling(disable_rht=False, disable_stochastic_rounding=False,
    disable_2d_quantization=False, row_scaled_activation=False, nvfp4_4over6="none",
    nvfp4_4over6_e4m3_use_256="all", nvfp4_4over6_err_mode="MAE", fp4_format=Format.E2M1,
    fp8_format=Format.E4M3, fp8_dpa=False, fp8_mha=False, backward_override=None)`` (TE's
    order and defaults, its environment variables unset): ``nn.fp8.NVFP4BlockScaling``, a MODEL
    of TE's recipe (see ``nn.fp8.nvfp4``), with each ``disable_*`` switch meaning what it
    does in TE: no random Hadamard transform (TE applies it to the wgrad GEMM's input and
    gradient), no stochastic rounding (TE's gradients), 1-D blocks for the weight too.

    Refused, naming ours: ``row_scaled_activation=True`` (per-row tensor scales are not
    modelled) and ``nvfp4_4over6`` other than "none" (TE's 4/6 picks by absolute error with a
    256 bound; ``nn.fp8.NVFP4BlockScaling(four_over_six=True)`` is ours: squared error, TE's
    448 tensor scale, every tensor). ``nvfp4_4over6_e4m3_use_256`` and
    ``nvfp4_4over6_err_mode`` are checked as TE checks them and, with 4/6 off, change nothing
    (as in TE). ``fp4_format`` must be E2M1 and ``fp8_format`` E4M3, as TE asserts.
    """

    def __init__(self, disable_rht: bool = False, disable_stochastic_rounding: bool = False,
                 disable_2d_quantization: bool = False, row_scaled_activation: bool = False,
                 nvfp4_4over6: str = "none", nvfp4_4over6_e4m3_use_256: str = "all",
                 nvfp4_4over6_err_mode: str = "MAE", fp4_format: Format = Format.E2M1,
                 fp8_format: Format = Format.E4M3, fp8_dpa: bool = False, fp8_mha: bool = False,
                 backward_override: str | None = None) -> None:
        name = "NVFP4BlockScaling"
        flags = {"disable_rht": disable_rht,
                 "disable_stochastic_rounding": disable_stochastic_rounding,
                 "disable_2d_quantization": disable_2d_quantization,
                 "row_scaled_activation": row_scaled_activation}
        for flag, value in flags.items():
            _flag(name, flag, value)
        if fp4_format is not Format.E2M1:
            raise ValueError(f"{name}: fp4_format must be Format.E2M1 (only E2M1 is supported "
                             f"for NVFP4 scaling, as in TE), got {fp4_format!r}")
        if fp8_format is not Format.E4M3:
            raise ValueError(f"{name}: fp8_format must be Format.E4M3 (the block scales' "
                             f"format; only E4M3 is supported, as in TE), got {fp8_format!r}")
        for option, scope in (("nvfp4_4over6", nvfp4_4over6),
                              ("nvfp4_4over6_e4m3_use_256", nvfp4_4over6_e4m3_use_256)):
            if scope not in _4OVER6_SCOPES:
                raise ValueError(f"{name}: {option} must be one of {_4OVER6_SCOPES}, got "
                                 f"{scope!r}")
        err_mode = nvfp4_4over6_err_mode.upper() if isinstance(nvfp4_4over6_err_mode, str) \
            else nvfp4_4over6_err_mode
        if err_mode not in ("MAE", "MSE"):
            raise ValueError(f"{name}: nvfp4_4over6_err_mode must be 'MAE' or 'MSE', got "
                             f"{nvfp4_4over6_err_mode!r}")
        _unsupported(name, "row_scaled_activation", row_scaled_activation, False,
                     "per-row tensor scales are not modelled")
        _unsupported(name, "nvfp4_4over6", nvfp4_4over6, "none",
                     "TE's 4/6 (absolute error, 256 bound) is not modelled; ours is "
                     "nn.fp8.NVFP4BlockScaling(four_over_six=True): squared error, 448 bound, "
                     "every tensor")
        _attention_flags(name, fp8_dpa, fp8_mha)
        _backward_override(name, backward_override)
        super().__init__(disable_rht=disable_rht,
                         disable_stochastic_rounding=disable_stochastic_rounding,
                         disable_2d_quantization=disable_2d_quantization)
        self.disable_rht, self.disable_stochastic_rounding = disable_rht, \
            disable_stochastic_rounding
        self.disable_2d_quantization = disable_2d_quantization
        self.row_scaled_activation = False
        self.nvfp4_4over6, self.nvfp4_4over6_e4m3_use_256 = "none", nvfp4_4over6_e4m3_use_256
        self.nvfp4_4over6_err_mode = err_mode
        self.fp4_format, self.te_format = fp4_format, fp8_format
        self.fp8_dpa, self.fp8_mha, self.backward_override = fp8_dpa, fp8_mha, None

    @property
    def fp4_quant_fwd_inp(self) -> QParams:
        """TE's: the Hadamard transform (on the wgrad GEMM's copy) unless disabled."""
        return QParams(random_hadamard_transform=self.rht)

    @property
    def fp4_quant_fwd_weight(self) -> QParams:
        """TE's: 16x16 blocks unless disabled."""
        return QParams(fp4_2d_quantization=self.two_d)

    @property
    def fp4_quant_bwd_grad(self) -> QParams:
        """TE's: the Hadamard transform and stochastic rounding unless disabled."""
        return QParams(random_hadamard_transform=self.rht, stochastic_rounding=self.stochastic)

    def __repr__(self) -> str:
        return (f"recipe_type=NVFP4BlockScaling, fp4_format=E2M1, fp8_format=E4M3, "
                f"fp8_dpa=False, fp8_mha=False, backward_override=None, "
                f"row_scaled_activation=False, nvfp4_4over6=none, disable_rht="
                f"{not self.rht}, disable_stochastic_rounding={not self.stochastic}, "
                f"disable_2d_quantization={not self.two_d}")


def __getattr__(name: str) -> Any:
    if name == "CustomRecipe":
        raise AttributeError("te.recipe.CustomRecipe (quantizer factories) is not in nn's "
                             "Transformer Engine face; subclass nn.fp8.Recipe (its quantize "
                             "method) and pass it to te.autocast")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DelayedScaling", "Float8BlockScaling", "Float8CurrentScaling", "Format", "MMParams",
           "MXFP8BlockScaling", "NVFP4BlockScaling", "QParams"]
