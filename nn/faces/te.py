"""Transformer Engine's face: ``from nn.faces import te`` where a script has
``import transformer_engine.pytorch as te`` (and ``te.recipe`` or ``te.common.recipe`` where it
has ``from transformer_engine.common import recipe``).

It covers ``te.Linear``, ``te.autocast``, ``te.fp8_autocast`` and ``te.recipe.{Format,
DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling}``, with TE's names,
argument order and defaults (TE at commit d0067d0 of NVIDIA/TransformerEngine). Everything
runs on nn's emulation (``nn.fp8``): the fp8 values are exact, the GEMM is modelled as fp32
accumulation. A TE option that nn does not model raises NotImplementedError naming it.

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

from types import SimpleNamespace
from typing import Any

import numpy as np

from nn.engine.random import global_generator
from nn.faces import te_recipe as recipe
from nn.fp8.recipes import Recipe
from nn.fp8.scope import fp8_autocast as _nn_fp8_autocast
from nn.layers.core import Linear as _Linear

common = SimpleNamespace(recipe=recipe)  # ``te.common.recipe``, TE's other import path

_default: list[Recipe] = []  # the one default recipe of this process (its states persist)


def get_default_fp8_recipe() -> Recipe:
    """The recipe of an ``autocast`` without one: ``DelayedScaling()``, TE's default on Hopper
    and Ada GPUs (TE picks MXFP8BlockScaling on Blackwell). One object per process, so the
    scaling state carries from one ``autocast`` block to the next, as TE's modules keep it."""
    if not _default:
        _default.append(recipe.DelayedScaling())
    return _default[0]


class autocast:  # noqa: N801 (TE's spelling)
    """TE's ``autocast(enabled=True, calibrating=False, recipe=None,
    amax_reduction_group=None)``: every matmul inside runs under ``recipe``
    (``get_default_fp8_recipe()`` when None); ``enabled=False`` runs them unquantized.

    ``calibrating=True`` with ``enabled=False`` is not supported (raises: nn does not collect
    amaxes of unquantized matmuls). ``amax_reduction_group`` is accepted: one process, nothing
    to reduce.
    """

    def __init__(self, enabled: bool = True, calibrating: bool = False,
                 recipe: Recipe | None = None, amax_reduction_group: Any = None) -> None:
        for name, value in (("enabled", enabled), ("calibrating", calibrating)):
            if not isinstance(value, bool):
                raise TypeError(f"te.autocast: {name} must be True or False, got {value!r}")
        if calibrating and not enabled:
            raise NotImplementedError(
                "te.autocast: calibrating=True (amax statistics of unquantized matmuls) is not "
                "supported; run the calibration steps with enabled=True, or use "
                "nn.fp8.DelayedScaling states directly")
        if recipe is not None and not isinstance(recipe, Recipe):
            raise TypeError(f"te.autocast: recipe must be a te.recipe recipe (DelayedScaling, "
                            f"Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling), got "
                            f"{recipe!r}")
        self.enabled, self.calibrating = enabled, calibrating
        self.recipe = get_default_fp8_recipe() if recipe is None else recipe
        self.amax_reduction_group = amax_reduction_group
        self._block = _nn_fp8_autocast(self.recipe, enabled=enabled)
        self._entered = False

    def __enter__(self) -> autocast:
        if self._entered:
            raise RuntimeError("autocast context manager cannot be entered more than once "
                               "concurrently (as in Transformer Engine): make a new one")
        self._block.__enter__()
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._block.__exit__(*exc)
        self._entered = False


def fp8_autocast(enabled: bool = True, calibrating: bool = False,
                 fp8_recipe: Recipe | None = None, fp8_group: Any = None) -> autocast:
    """TE's older spelling ``fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None,
    fp8_group=None)``: ``autocast(enabled, calibrating, fp8_recipe, fp8_group)``."""
    return autocast(enabled=enabled, calibrating=calibrating, recipe=fp8_recipe,
                    amax_reduction_group=fp8_group)


_PARAMS_DTYPES = ("float32", "bfloat16", "float16")
# TE's Linear options that change nothing on one emulated device, with their defaults; any other
# value raises NotImplementedError naming it
_TE_LINEAR_DEFAULTS: dict[str, object] = {
    "sequence_parallel": False, "fuse_wgrad_accumulation": False, "tp_group": None,
    "tp_size": 1, "get_rng_state_tracker": None, "rng_tracker_name": None,
    "return_bias": False, "parallel_mode": None, "parameters_split": None,
    "ub_overlap_ag": False, "ub_overlap_rs": False, "ub_overlap_rs_dgrad": False,
    "ub_bulk_dgrad": False, "ub_bulk_wgrad": False, "ub_name": None,
    "delay_wgrad_compute": False, "symmetric_ar_type": None, "save_original_input": False,
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


class Linear(_Linear):
    """TE's ``Linear(in_features, out_features, ..., init_method=None, bias=True,
    params_dtype=None, device="cuda", name=None)``: ``y = x @ weight.T + bias`` with
    ``weight`` of shape (out_features, in_features).

    Initialisation as TE's: ``weight ~ N(0, 0.023)`` (``init_method_normal(0.023)``, TE's
    ``get_default_init_method``), ``bias`` zeros; ``init_method(weight)`` fills the weight
    (a float64 numpy array, in place) instead. ``params_dtype`` ("float32" default, as
    ``torch.get_default_dtype()``; "bfloat16", "float16") is the format of the parameters and
    of the layer's compute (nn's ``dtype`` policy). ``device`` is accepted (everything runs
    on nn's CPU emulation); ``seed`` (ours) draws the initial weight from its own generator.
    """

    def __init__(self, in_features: int, out_features: int, *,
                 init_method: Any = None, bias: bool = True, params_dtype: Any = None,
                 device: Any = "cuda", name: str | None = None, seed: int | None = None,
                 **te_options: Any) -> None:
        for option, value in te_options.items():
            if option not in _TE_LINEAR_DEFAULTS:
                raise TypeError(f"te.Linear got an unexpected keyword argument {option!r}")
            if value != _TE_LINEAR_DEFAULTS[option]:
                raise NotImplementedError(
                    f"te.Linear: {option}={value!r} is not supported here (one emulated "
                    f"device, no tensor parallelism); leave it at "
                    f"{_TE_LINEAR_DEFAULTS[option]!r}")
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


__all__ = ["Linear", "autocast", "common", "fp8_autocast", "get_default_fp8_recipe", "recipe"]
