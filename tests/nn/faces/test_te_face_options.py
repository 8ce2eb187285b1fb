"""The Transformer Engine face's signatures: every recipe field and ``te.Linear`` argument of
TE, in TE's order with TE's defaults; what nn does not model is refused naming the default.

The oracle is TE's source, written out below (NVIDIA/TransformerEngine at d0067d0):
transformer_engine/common/recipe/__init__.py (the recipe dataclasses, their field order and
defaults with the NVTE_* environment variables unset, their ``__post_init__`` assertions) and
transformer_engine/pytorch/module/linear.py (``Linear.__init__``).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import fpsim
import nn
from nn.faces import te
from nn.faces.te import _TE_LINEAR_DEFAULTS

Format = te.recipe.Format
R = te.recipe
MM = te.recipe.MMParams

# field -> default, in TE's order (ours, keyword only, after them)
TE_FIELDS = {
    R.DelayedScaling: {
        "margin": 0, "fp8_format": Format.HYBRID, "amax_history_len": 1024,
        "amax_compute_algo": "max", "scaling_factor_compute_algo": None, "reduce_amax": True,
        "fp8_dpa": False, "fp8_mha": False, "backward_override": None},
    R.Float8CurrentScaling: {
        "use_power_2_scales": False, "fp8_format": Format.HYBRID,
        "fp8_gemm_fprop": MM(False), "fp8_gemm_dgrad": MM(True), "fp8_gemm_wgrad": MM(True),
        "fp8_dpa": False, "fp8_mha": False, "backward_override": None},
    R.MXFP8BlockScaling: {
        "margin": 0, "fp8_format": Format.E4M3, "fp8_dpa": False, "fp8_mha": False,
        "backward_override": None, "enable_2d_quantization": False},
    R.Float8BlockScaling: {
        "use_f32_scales": False, "fp8_format": Format.E4M3, "x_block_scaling_dim": 1,
        "w_block_scaling_dim": 2, "grad_block_scaling_dim": 1, "fp8_gemm_fprop": MM(True),
        "fp8_gemm_dgrad": MM(True), "fp8_gemm_wgrad": MM(True), "fp8_dpa": False,
        "fp8_mha": False, "backward_override": None},
    R.NVFP4BlockScaling: {
        "disable_rht": False, "disable_stochastic_rounding": False,
        "disable_2d_quantization": False, "row_scaled_activation": False,
        "nvfp4_4over6": "none", "nvfp4_4over6_e4m3_use_256": "all",
        "nvfp4_4over6_err_mode": "MAE", "fp4_format": Format.E2M1, "fp8_format": Format.E4M3,
        "fp8_dpa": False, "fp8_mha": False, "backward_override": None},
}
TE_LINEAR_ARGS = [
    "in_features", "out_features", "sequence_parallel", "fuse_wgrad_accumulation", "tp_group",
    "tp_size", "get_rng_state_tracker", "rng_tracker_name", "init_method", "bias",
    "return_bias", "params_dtype", "parallel_mode", "parameters_split", "device",
    "ub_overlap_ag", "ub_overlap_rs", "ub_overlap_rs_dgrad", "ub_bulk_dgrad", "ub_bulk_wgrad",
    "ub_name", "delay_wgrad_compute", "symmetric_ar_type", "save_original_input", "name"]
# a value other than TE's default for each option nn does not model
NOT_DEFAULT = {
    "sequence_parallel": True, "fuse_wgrad_accumulation": True, "tp_group": object(),
    "tp_size": 2, "get_rng_state_tracker": lambda: None, "rng_tracker_name": "model-parallel",
    "return_bias": True, "parallel_mode": "column", "parameters_split": ("query", "key"),
    "ub_overlap_ag": True, "ub_overlap_rs": True, "ub_overlap_rs_dgrad": True,
    "ub_bulk_dgrad": True, "ub_bulk_wgrad": True, "ub_name": "qkv",
    "delay_wgrad_compute": True, "symmetric_ar_type": "multimem_all_reduce",
    "save_original_input": True}


@pytest.mark.parametrize("cls", list(TE_FIELDS), ids=lambda c: c.__name__)
def test_recipe_fields_are_te_in_te_order_with_te_defaults(cls):
    params = [p for p in inspect.signature(cls).parameters.values()
              if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in params] == list(TE_FIELDS[cls])
    defaults = {p.name: p.default for p in params}
    for name, want in TE_FIELDS[cls].items():
        got = defaults[name]
        assert got == want or (got is None and isinstance(want, tuple)), name
    recipe = cls()  # and the object built from them reads TE's values back
    for name in ("fp8_dpa", "fp8_mha", "backward_override", "fp8_gemm_fprop",
                 "nvfp4_4over6", "disable_rht", "use_power_2_scales", "amax_history_len"):
        if name in TE_FIELDS[cls]:
            assert getattr(recipe, name) == TE_FIELDS[cls][name], name


@pytest.mark.parametrize("cls", list(TE_FIELDS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("flag", ["fp8_dpa", "fp8_mha"])
def test_fp8_attention_flags_are_accepted_false_and_refused_true(cls, flag):
    assert getattr(cls(**{flag: False}), flag) is False
    with pytest.raises(NotImplementedError, match=f"{flag}=True is not supported.*leave it "
                                                  "at False"):
        cls(**{flag: True})


@pytest.mark.parametrize("cls", list(TE_FIELDS), ids=lambda c: c.__name__)
def test_backward_override_is_none_only(cls):
    assert cls(backward_override=None).backward_override is None
    error = ValueError if cls is R.DelayedScaling else NotImplementedError
    with pytest.raises(error, match="backward_override='dequantized'"):
        cls(backward_override="dequantized")
    with pytest.raises(ValueError, match="backward_override"):
        cls(backward_override="fp32")


def test_float8_block_scaling_takes_use_f32_scales_first_and_needs_split_accumulation():
    assert R.Float8BlockScaling(True).power_2 is False
    assert R.Float8BlockScaling(False, Format.HYBRID).format("backward").name == "float8_e5m2"
    with pytest.raises(ValueError, match="fp8_gemm_dgrad=MMParams.use_split_accumulator=False"):
        R.Float8BlockScaling(fp8_gemm_dgrad=MM(False))


# --- NVFP4 -------------------------------------------------------------------------------------
def test_nvfp4_qparams_are_te_post_init():
    r = R.NVFP4BlockScaling()
    assert r.fp4_quant_fwd_inp == R.QParams(random_hadamard_transform=True)
    assert r.fp4_quant_fwd_weight == R.QParams(fp4_2d_quantization=True)
    assert r.fp4_quant_bwd_grad == R.QParams(random_hadamard_transform=True,
                                             stochastic_rounding=True)
    off = R.NVFP4BlockScaling(True, True, True)  # TE's positional order
    assert (off.fp4_quant_fwd_inp, off.fp4_quant_fwd_weight, off.fp4_quant_bwd_grad) == (
        R.QParams(), R.QParams(), R.QParams())


def _linear_run(recipe, seed=0):
    x = np.random.default_rng(seed).standard_normal((32, 64)).astype(np.float32)
    layer = te.Linear(64, 32, seed=seed + 1)
    with te.autocast(recipe=recipe):
        y = layer(nn.Tensor(x))
    y.sum().backward()
    return x, layer, y.data, np.asarray(layer.weight.grad.data)


@pytest.mark.parametrize("flags", [(False, False, False), (True, False, True)])
def test_nvfp4_face_runs_nn_model_of_te_recipe(flags):
    names = ("disable_rht", "disable_stochastic_rounding", "disable_2d_quantization")
    _, _, y, gw = _linear_run(R.NVFP4BlockScaling(*flags))
    _, _, y_nn, gw_nn = _linear_run(nn.fp8.NVFP4BlockScaling(**dict(zip(names, flags,
                                                                         strict=True))))
    np.testing.assert_array_equal(y, y_nn)
    np.testing.assert_array_equal(gw, gw_nn)


def test_nvfp4_with_every_technique_off_is_1d_nvfp4_blocks_of_both_operands():
    x, layer, y, _ = _linear_run(R.NVFP4BlockScaling(True, True, True))
    w = np.asarray(layer.weight.data)
    xq = fpsim.mx.quantize(x, "nvfp4", axis=-1).astype(np.float64)
    wq = fpsim.mx.quantize(w.T, "nvfp4", axis=0).astype(np.float64)
    want = xq @ wq
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-6 * np.abs(want).max())
    exact = x.astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(y - exact).max() > 1e-3 * np.abs(exact).max()  # fp4 shows


@pytest.mark.parametrize("kwargs,error,match", [
    ({"row_scaled_activation": True}, NotImplementedError, "row_scaled_activation=True"),
    ({"nvfp4_4over6": "all"}, NotImplementedError, r"four_over_six=True"),
    ({"nvfp4_4over6": "some"}, ValueError, "nvfp4_4over6 must be one of"),
    ({"nvfp4_4over6_e4m3_use_256": "x"}, ValueError, "nvfp4_4over6_e4m3_use_256 must be"),
    ({"nvfp4_4over6_err_mode": "L1"}, ValueError, "nvfp4_4over6_err_mode must be"),
    ({"fp4_format": Format.E4M3}, ValueError, "fp4_format must be Format.E2M1"),
    ({"fp8_format": Format.HYBRID}, ValueError, "fp8_format must be Format.E4M3"),
    ({"disable_rht": 1}, TypeError, "disable_rht must be True or False"),
])
def test_nvfp4_refuses_what_te_refuses_or_nn_does_not_model(kwargs, error, match):
    with pytest.raises(error, match=match):
        R.NVFP4BlockScaling(**kwargs)


def test_nvfp4_4over6_settings_change_nothing_while_4over6_is_off_as_in_te():
    r = R.NVFP4BlockScaling(nvfp4_4over6_e4m3_use_256="none", nvfp4_4over6_err_mode="mse")
    assert r.nvfp4_4over6_err_mode == "MSE" and r.four_over_six is False
    np.testing.assert_array_equal(_linear_run(r)[2], _linear_run(R.NVFP4BlockScaling())[2])


# --- te.Linear's arguments ---------------------------------------------------------------------
def test_linear_arguments_are_te_in_te_order():
    params = inspect.signature(te.Linear).parameters
    assert [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == TE_LINEAR_ARGS
    assert params["seed"].kind is inspect.Parameter.KEYWORD_ONLY  # ours
    # the table of unmodelled options is exactly TE's arguments nn has no use for
    ours = {"in_features", "out_features", "init_method", "bias", "params_dtype", "device",
            "name"}
    assert set(_TE_LINEAR_DEFAULTS) == set(TE_LINEAR_ARGS) - ours == set(NOT_DEFAULT)
    for name, default in _TE_LINEAR_DEFAULTS.items():
        assert params[name].default == default, name


def test_linear_takes_te_defaults_by_keyword_and_by_position():
    layer = te.Linear(8, 4, **_TE_LINEAR_DEFAULTS)
    assert layer.weight.shape == (4, 8)
    positional = te.Linear(3, 2, False, False, None, 1, None, None, lambda w: w.fill(0.5),
                           False, False, "bfloat16")
    assert np.all(positional.weight.data == 0.5) and positional.bias is None
    assert positional.weight.fmt.name == "bfloat16"


@pytest.mark.parametrize("option", list(NOT_DEFAULT))
def test_linear_refuses_every_other_value_naming_te_default(option):
    default = _TE_LINEAR_DEFAULTS[option]
    with pytest.raises(NotImplementedError,
                       match=rf"te.Linear: {option}=.* is not supported here .*only "
                             rf"{option}={default!r}, TE's default"):
        te.Linear(8, 4, **{option: NOT_DEFAULT[option]})


# --- te.Linear's forward -----------------------------------------------------------------------
@pytest.mark.parametrize("recipe", [R.DelayedScaling, R.Float8CurrentScaling, R.MXFP8BlockScaling],
                         ids=lambda c: c.__name__)
def test_linear_rounds_the_bias_to_bf16_under_fp8_with_float32_parameters_as_te(recipe):
    import ml_dtypes

    bias = np.float32([1 + 2.0**-12, -3.0 - 2.0**-10])  # neither is a bfloat16
    layer = te.Linear(32, 2, init_method=lambda w: w.fill(0.0), seed=17)
    layer.bias.assign(bias)
    x = nn.Tensor(np.ones((2, 32), np.float32))
    outside = layer(x).data
    with te.autocast(recipe=recipe()):
        inside = layer(x).data
    np.testing.assert_array_equal(outside, np.broadcast_to(bias, (2, 2)))
    want = bias.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(inside, np.broadcast_to(want, (2, 2)))
    half = te.Linear(32, 2, params_dtype="bfloat16", init_method=lambda w: w.fill(0.0))
    half.bias.assign(want)
    with te.autocast(recipe=recipe()):
        np.testing.assert_array_equal(half(x).data, np.broadcast_to(want, (2, 2)))


def test_linear_forward_takes_te_arguments_and_refuses_cached_or_fp8_outputs():
    layer = te.Linear(4, 2, seed=18)
    x = nn.Tensor(np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(layer(x, True).data, layer(x, is_first_microbatch=None).data)
    for kwargs, match in (({"is_first_microbatch": False}, "is_first_microbatch=False"),
                          ({"fp8_output": True}, "fp8_output=True"),
                          ({"fp8_grad": True}, "fp8_grad=True")):
        with pytest.raises(NotImplementedError, match=match):
            layer(x, **kwargs)


# --- TE's other names ---------------------------------------------------------------------------
def test_availability_checks_answer_true_as_on_a_gpu_that_runs_every_recipe():
    for check in (te.is_fp8_available, te.is_mxfp8_available, te.is_fp8_block_scaling_available,
                  te.is_nvfp4_available):
        assert check() is True and check(return_reason=True) == (True, "")
    assert te.get_default_recipe() is te.get_default_fp8_recipe()


@pytest.mark.parametrize("name,ours", [("LayerNormLinear", "nn.LayerNorm followed by te.Linear"),
                                       ("DotProductAttention", "nn.MultiHeadAttention"),
                                       ("quantized_model_init", "fp32 master weights")])
def test_te_modules_the_face_lacks_raise_naming_ours(name, ours):
    with pytest.raises(AttributeError, match=rf"te.{name} is not in .*{ours}"):
        getattr(te, name)
    with pytest.raises(AttributeError, match="subclass nn.fp8.Recipe"):
        te.recipe.CustomRecipe  # noqa: B018
    assert not hasattr(te, "no_such_name")
