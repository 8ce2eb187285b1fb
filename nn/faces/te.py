"""Transformer Engine's face: ``from nn.faces import te`` where a script has
``import transformer_engine.pytorch as te`` (and ``te.recipe`` or ``te.common.recipe`` where it
has ``from transformer_engine.common import recipe``).

It covers ``te.Linear``, ``te.autocast``, ``te.fp8_autocast`` and ``te.recipe.{Format,
DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling,
NVFP4BlockScaling}``, with TE's names, argument order and defaults (TE at commit d0067d0 of
NVIDIA/TransformerEngine). Everything runs on nn's emulation (``nn.fp8``): the fp8 values are
exact, the GEMM is modelled as fp32 accumulation. As in TE, each ``te.Linear`` owns the
scaling state of its tensors (``layer.fp8_meta``) and a recipe is configuration. A TE option
that nn does not model raises NotImplementedError naming it.

>>> import numpy as np
>>> from nn.faces import te
>>> layer = te.Linear(4, 3)
>>> recipe = te.recipe.DelayedScaling(fp8_format=te.recipe.Format.HYBRID)
>>> with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
...     y = layer(np.ones((2, 4), np.float32))
>>> y.shape, recipe.amax_history_len
((2, 3), 1024)
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar, Token
from types import SimpleNamespace
from typing import Any

import numpy as np

from fpsim import BF16, FP32
from nn import functions as F
from nn.engine.autograd import is_grad_enabled
from nn.engine.random import global_generator
from nn.engine.tensor import Tensor
from nn.faces import te_recipe as recipe
from nn.fp8.meta import UPDATES, Block, ModuleScaling, block_scope, deferring_block
from nn.fp8.recipes import Recipe
from nn.fp8.scope import active_run, owner_scope
from nn.fp8.scope import fp8_autocast as _nn_fp8_autocast
from nn.functions._common import autocast_lower
from nn.layers.core import Linear as _Linear

common = SimpleNamespace(recipe=recipe)  # ``te.common.recipe``, TE's other import path

_default: list[Recipe] = []  # the one default recipe of this process (one telemetry log)


def get_default_fp8_recipe() -> Recipe:
    """The recipe of an ``autocast`` without one: ``DelayedScaling()``, TE's default on Hopper
    and Ada GPUs (TE picks MXFP8BlockScaling on Blackwell). One object per process (TE makes a
    new one each time; the modules keep the state either way), so its log covers every
    default block."""
    if not _default:
        _default.append(recipe.DelayedScaling())
    return _default[0]


# the recipe of an enclosing ``autocast(enabled=False, calibrating=True)`` (TE's
# ``FP8GlobalStateManager.is_fp8_calibration``); None in an fp8 block or outside calibration
_CALIBRATING: ContextVar[Recipe | None] = ContextVar("te_calibrating", default=None)


class autocast:  # noqa: N801 (TE's spelling)
    """TE's ``autocast(enabled=True, calibrating=False, recipe=None,
    amax_reduction_group=None)``: the matmuls of TE's modules (``te.Linear``) inside run under
    ``recipe`` (``get_default_fp8_recipe()`` when None); other layers run as outside the block,
    as in TE, where only its modules quantize. ``enabled=False`` runs them unquantized.

    Delayed scaling updates as TE's global amax buffers do (``nn.fp8.meta.DelayedUpdates``):
    every cast inside uses the scale its tensor had when the outermost block began and stages
    its amax; the forward tensors update once at the exit of the outermost enabled block (only
    with gradients on: an evaluation block under ``no_grad`` leaves the scales, its amaxes join
    the next update), the gradients at the end of the backward of the block's first module.
    So, as TE requires, wrap each forward step in its own block (a whole training loop in one
    block would update only at its end).

    ``calibrating=True`` with ``enabled=False`` (TE's calibration): the matmuls run unquantized,
    and each ``te.Linear`` forward records the amax of its input and of its weight into its
    own delayed-scaling state (``layer.fp8_meta``): position 0 of the amax history, replaced by
    each calibration forward (TE's ``Float8Quantizer.calibrate``), scale and window untouched;
    the first fp8 forward afterwards still casts with the scale held before, and its update
    (at that block's exit) takes the larger of the calibrated and its own amax. Current
    scaling and block recipes record nothing (as in TE); gradients are never calibrated.
    With ``enabled=True``, ``calibrating`` changes nothing. ``amax_reduction_group`` is
    accepted: one process, nothing to reduce.
    """

    def __init__(self, enabled: bool = True, calibrating: bool = False,
                 recipe: Recipe | None = None, amax_reduction_group: Any = None) -> None:
        for name, value in (("enabled", enabled), ("calibrating", calibrating)):
            if not isinstance(value, bool):
                raise TypeError(f"te.autocast: {name} must be True or False, got {value!r}")
        if recipe is not None and not isinstance(recipe, Recipe):
            raise TypeError(f"te.autocast: recipe must be a te.recipe recipe (DelayedScaling, "
                            f"Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling, "
                            f"NVFP4BlockScaling), got {recipe!r}")
        self.enabled, self.calibrating = enabled, calibrating
        self.recipe = get_default_fp8_recipe() if recipe is None else recipe
        self.amax_reduction_group = amax_reduction_group
        self._block = _nn_fp8_autocast(self.recipe, enabled=enabled, modules=(Linear,))
        self._token: Token[Recipe | None] | None = None
        self._outermost = False
        self._updates: contextlib.AbstractContextManager[None] = contextlib.nullcontext()

    def __enter__(self) -> autocast:
        if self._token is not None:
            raise RuntimeError("autocast context manager cannot be entered more than once "
                               "concurrently (as in Transformer Engine): make a new one")
        self._block.__enter__()
        calibrating = self.calibrating and not self.enabled
        self._token = _CALIBRATING.set(self.recipe if calibrating else None)
        self._outermost = deferring_block() is None
        self._updates = block_scope(deferring_block() or Block())
        self._updates.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is None:
            raise RuntimeError("te.autocast: exited without being entered")
        self._updates.__exit__(None, None, None)
        _CALIBRATING.reset(self._token)
        self._token = None
        self._block.__exit__(*exc)
        if self._outermost and self.enabled and is_grad_enabled():
            UPDATES.flush("forward")  # TE's autocast_exit: the forward tensors' one update


def fp8_autocast(enabled: bool = True, calibrating: bool = False,
                 fp8_recipe: Recipe | None = None, fp8_group: Any = None) -> autocast:
    """TE's older spelling ``fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None,
    fp8_group=None)``: ``autocast(enabled, calibrating, fp8_recipe, fp8_group)``."""
    return autocast(enabled=enabled, calibrating=calibrating, recipe=fp8_recipe,
                    amax_reduction_group=fp8_group)


_PARAMS_DTYPES = ("float32", "bfloat16", "float16")
# TE's Linear options that change nothing on one emulated device, in TE's order with TE's
# defaults; any other value raises NotImplementedError naming it and its default
_TE_LINEAR_DEFAULTS: dict[str, object] = {
    "sequence_parallel": False, "fuse_wgrad_accumulation": False, "tp_group": None,
    "tp_size": 1, "get_rng_state_tracker": None, "rng_tracker_name": None,
    "return_bias": False, "parallel_mode": None, "parameters_split": None,
    "ub_overlap_ag": False, "ub_overlap_rs": False, "ub_overlap_rs_dgrad": False,
    "ub_bulk_dgrad": False, "ub_bulk_wgrad": False, "ub_name": None,
    "delay_wgrad_compute": False, "symmetric_ar_type": None, "save_original_input": False,
}
_WHY = {  # what each option is for in TE, for the refusal
    "sequence_parallel": "tensor parallelism", "tp_group": "tensor parallelism",
    "tp_size": "tensor parallelism", "parallel_mode": "tensor parallelism",
    "symmetric_ar_type": "tensor parallelism", "get_rng_state_tracker": "tensor parallelism",
    "rng_tracker_name": "tensor parallelism", "fuse_wgrad_accumulation": "Megatron's main_grad",
    "parameters_split": "split parameters", "return_bias": "a bias returned unadded",
    "delay_wgrad_compute": "a delayed wgrad GEMM", "save_original_input": "a saved input",
}


def _params_dtype(value: object) -> str:
    """"float32" for None; a name or a dtype object whose str ends in one (``torch.bfloat16``,
    numpy's float32)."""
    if value is None:
        return "float32"
    text = str(value).rpartition(".")[2].lower() if not isinstance(value, str) else value
    text = {"float": "float32", "half": "float16", "bf16": "bfloat16", "fp16": "float16",
            "fp32": "float32"}.get(text, text)
    if text not in _PARAMS_DTYPES:
        raise ValueError(f"te.Linear: params_dtype must be one of {_PARAMS_DTYPES} (or "
                         f"torch.float32/bfloat16/float16), got {value!r}")
    return text


def _check_te_options(options: dict[str, object]) -> None:
    for option, value in options.items():
        default = _TE_LINEAR_DEFAULTS[option]
        if value is default or (default is not None and value == default):
            continue
        why = _WHY.get(option, "userbuffers communication overlap")
        raise NotImplementedError(
            f"te.Linear: {option}={value!r} is not supported here (one emulated device, no "
            f"{why}); only {option}={default!r}, TE's default, is")


class Linear(_Linear):
    """TE's ``Linear(in_features, out_features, sequence_parallel=False, ..., init_method=None,
    bias=True, return_bias=False, params_dtype=None, ..., device="cuda", ..., name=None)`` (TE's
    argument order): ``y = x @ weight.T + bias`` with ``weight`` of shape (out_features,
    in_features).

    Initialisation as TE's: ``weight ~ N(0, 0.023)`` (``init_method_normal(0.023)``, TE's
    ``get_default_init_method``), ``bias`` zeros; ``init_method(weight)`` fills the weight
    (a float64 numpy array, in place) instead. ``params_dtype`` ("float32" default, as
    ``torch.get_default_dtype()``; "bfloat16", "float16") is the format of the parameters and
    of the layer's compute (nn's ``dtype`` policy). ``device`` is accepted (everything runs
    on nn's CPU emulation); ``seed`` (ours, keyword only) draws the initial weight from its
    own generator. The parallelism and communication options (``tp_group``, ``tp_size``,
    ``sequence_parallel``, ``parallel_mode``, ``ub_*``, ...) are accepted at TE's defaults;
    any other value raises NotImplementedError naming the default.

    Under an fp8 recipe with float32 parameters the bias is rounded to bf16 before the GEMM
    adds it, as TE does (cuBLAS takes no fp32 bias with fp8 inputs).

    ``fp8_meta``: the layer's own scaling state (``nn.fp8.meta.ModuleScaling``), as TE keeps it
    in each module: two layers under one recipe object keep separate amax histories, and a
    new recipe object of the same kind carries on from them. ``fp8_meta["scaling_fwd"]``
    gives TE's arrays (``scale``, ``amax_history``; slots input, weight, output).
    ``state_dict()`` saves it under ``"_extra_state"`` (``get_extra_state``), as TE saves a
    module's fp8 meta, and ``load_state_dict`` restores it.
    """

    def __init__(self, in_features: int, out_features: int,
                 sequence_parallel: bool = False, fuse_wgrad_accumulation: bool = False,
                 tp_group: Any = None, tp_size: int = 1, get_rng_state_tracker: Any = None,
                 rng_tracker_name: str | None = None, init_method: Any = None,
                 bias: bool = True, return_bias: bool = False, params_dtype: Any = None,
                 parallel_mode: str | None = None, parameters_split: Any = None,
                 device: Any = "cuda", ub_overlap_ag: bool = False, ub_overlap_rs: bool = False,
                 ub_overlap_rs_dgrad: bool = False, ub_bulk_dgrad: bool = False,
                 ub_bulk_wgrad: bool = False, ub_name: str | None = None,
                 delay_wgrad_compute: bool = False, symmetric_ar_type: str | None = None,
                 save_original_input: bool = False, name: str | None = None, *,
                 seed: int | None = None) -> None:
        _check_te_options({
            "sequence_parallel": sequence_parallel,
            "fuse_wgrad_accumulation": fuse_wgrad_accumulation, "tp_group": tp_group,
            "tp_size": tp_size, "get_rng_state_tracker": get_rng_state_tracker,
            "rng_tracker_name": rng_tracker_name, "return_bias": return_bias,
            "parallel_mode": parallel_mode, "parameters_split": parameters_split,
            "ub_overlap_ag": ub_overlap_ag, "ub_overlap_rs": ub_overlap_rs,
            "ub_overlap_rs_dgrad": ub_overlap_rs_dgrad, "ub_bulk_dgrad": ub_bulk_dgrad,
            "ub_bulk_wgrad": ub_bulk_wgrad, "ub_name": ub_name,
            "delay_wgrad_compute": delay_wgrad_compute, "symmetric_ar_type": symmetric_ar_type,
            "save_original_input": save_original_input})
        super().__init__(in_features, out_features, bias=bias,
                         dtype=_params_dtype(params_dtype), name=name, seed=seed)
        rng = np.random.default_rng(seed) if seed is not None else None
        gen = global_generator() if rng is None else rng
        weight = gen.normal(0.0, 0.023, (self.out_features, self.in_features))
        if init_method is not None:
            if not callable(init_method):
                raise TypeError(f"te.Linear: init_method must be callable (it fills the weight "
                                f"in place), got {init_method!r}")
            init_method(weight)
        self.weight.assign(weight)
        if self.bias is not None:
            self.bias.assign(np.zeros(self.out_features))
        self.device = device
        self.fp8_meta = ModuleScaling()

    def __call__(  # type: ignore[override]  # TE's forward order; nn passes training by name
            self, inp: Any, is_first_microbatch: bool | None = None, fp8_output: bool = False,
            fp8_grad: bool = False, training: bool | None = None) -> Tensor:
        """TE's ``forward(inp, is_first_microbatch=None, fp8_output=False, fp8_grad=False)``:
        ``is_first_microbatch`` None or True (the weight is cast as every forward casts it);
        False (reuse the weight cast of the first microbatch) and fp8 outputs or gradients are
        refused. ``training`` is nn's (``Layer.__call__``)."""
        if is_first_microbatch not in (None, True):
            raise NotImplementedError(
                f"te.Linear: is_first_microbatch={is_first_microbatch!r} (reuse the weight's fp8 "
                "copy of the first microbatch) is not supported here; pass None or True: the "
                "weight is cast at every forward")
        for option, value in (("fp8_output", fp8_output), ("fp8_grad", fp8_grad)):
            if value not in (None, False):
                raise NotImplementedError(f"te.Linear: {option}={value!r} is not supported here "
                                          "(outputs and gradients leave in the compute format); "
                                          f"leave it False")
        return super().__call__(inp, training=training)

    def get_extra_state(self) -> dict[str, Any]:
        """The layer's fp8 state, saved by ``state_dict()`` under ``"_extra_state"`` as TE
        saves a module's fp8 meta (scale and amax history of each tensor, forward and backward;
        TE pickles them into a byte tensor, here ``fp8_meta.state_dict()``: plain values that
        ``torch.save`` of the PyTorch face and ``json`` can store)."""
        return self.fp8_meta.state_dict()

    def set_extra_state(self, state: Any) -> None:
        """Restore ``get_extra_state()`` (``load_state_dict`` calls it): the next step scales
        as the saved layer's would. A bad value raises ValueError naming the field."""
        self.fp8_meta.load_state_dict(state, "_extra_state")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        recipe = _CALIBRATING.get()
        if recipe is not None:  # TE's ``if not fp8 and fp8_calibration``: amaxes of the GEMM
            # the GEMM's operands as F.linear hands them on: inside nn.autocast in its format
            # (CAST_POLICY runs "linear" low on every device), else as they are
            xs, ws = autocast_lower(x, self.read(self.weight))
            with owner_scope(self):
                for operand, t in (("input", xs), ("weight", ws)):
                    recipe.calibrate(t.data, f"{self.name}/Linear/{operand}", "forward")
        if self.bias is None or active_run() is None or self.compute_format != FP32:
            return super().call(x, training)
        # a quantized GEMM with float32 activations: TE casts the bias to bf16 (cuBLAS takes no
        # fp32 bias with fp8 inputs); the epilogue adds it to the fp32 accumulator
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else F.reshape(x, (-1, self.in_features))
        bias = F.cast(self.read(self.bias), BF16)
        y = F.linear(x2, F.transpose(self.read(self.weight), None), bias)
        return y if x.ndim == 2 else F.reshape(y, (*lead, self.out_features))


def get_default_recipe() -> Recipe:
    """TE's newer name of ``get_default_fp8_recipe``."""
    return get_default_fp8_recipe()


def _available(return_reason: bool = False) -> bool | tuple[bool, str]:
    """TE's ``is_*_available(return_reason=False)``: True (with reason "") for every recipe,
    which the emulation runs on any machine."""
    if not isinstance(return_reason, bool):
        raise TypeError(f"return_reason must be True or False, got {return_reason!r}")
    return (True, "") if return_reason else True


is_fp8_available = is_mxfp8_available = _available
is_fp8_block_scaling_available = is_nvfp4_available = _available

_MODULES_HERE = "the face has te.Linear only"
_NOT_HERE = {  # TE names the face lacks -> what to write instead
    "LayerNorm": "nn.LayerNorm (or the PyTorch face's torch.nn.LayerNorm)",
    "RMSNorm": "an RMS norm written with nn's ops",
    "LayerNormLinear": "nn.LayerNorm followed by te.Linear",
    "LayerNormMLP": "nn.LayerNorm and two te.Linear with an activation between",
    "GroupedLinear": "one te.Linear per group",
    "DotProductAttention": "nn.MultiHeadAttention (attention runs in high precision)",
    "MultiheadAttention": "nn.MultiHeadAttention (attention runs in high precision)",
    "TransformerLayer": "a block built from nn's layers and te.Linear",
    "quantized_model_init": "fp32 master weights (fp8 parameters are not modelled)",
    "fp8_model_init": "fp32 master weights (fp8 parameters are not modelled)",
    "make_graphed_callables": "plain calls (there are no CUDA graphs)",
    "checkpoint": "plain calls (activation recomputation is not modelled)",
}


def __getattr__(name: str) -> Any:
    if name in _NOT_HERE:
        raise AttributeError(f"te.{name} is not in nn's Transformer Engine face "
                             f"({_MODULES_HERE}); write {_NOT_HERE[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Linear", "autocast", "common", "fp8_autocast", "get_default_fp8_recipe",
           "get_default_recipe", "is_fp8_available", "is_fp8_block_scaling_available",
           "is_mxfp8_available", "is_nvfp4_available", "recipe"]
