"""nn's ``accumulator=`` takes fpsim's accumulator models and presets: a Dense forward equals
``fpsim.matmul`` with the same model, bit for bit, and a preset survives a config round trip."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim.accumulators import PRESETS, AlignedGroups


def _dense(accumulator):
    layer = nn.Dense(3, use_bias=False, accumulator=accumulator, dtype="mixed_float16")
    layer.build((None, 40))
    rng = np.random.default_rng(0)
    layer.kernel.assign(rng.normal(size=(40, 3)).astype(np.float32))
    x = rng.normal(size=(5, 40)).astype(np.float32)
    return layer, x


@pytest.mark.parametrize("preset", ["hopper_fp8_fast", "hopper_fp8_promote128",
                                    "wang2018_fp16_chunk64", "v100_tensor_core"])
def test_dense_with_a_preset_accumulates_as_fpsim_matmul_with_that_model(preset):
    layer, x = _dense(preset)
    got = layer(x).numpy()
    xh = fpsim.round(x, "float16")
    wh = fpsim.round(layer.kernel.numpy(), "float16")
    want = fpsim.round(np.asarray(fpsim.matmul(fpsim.array(xh, "float16"),
                                               fpsim.array(wh, "float16"),
                                               accumulate=PRESETS[preset]),
                                  dtype=np.float64), "float16")
    np.testing.assert_array_equal(got, want)


def test_a_coarse_model_changes_the_result_the_fp32_path_gives():
    coarse, x = _dense(AlignedGroups(4, 8))
    fp32, _ = _dense(None)
    assert not np.array_equal(coarse(x).numpy(), fp32(x).numpy())


def test_a_preset_is_saved_by_its_name_and_rebuilt():
    layer, _ = _dense("hopper_fp8_promote128")
    config = layer.get_config()
    assert config["accumulator"] == "hopper_fp8_promote128"
    assert nn.Dense.from_config(config).accumulator == PRESETS["hopper_fp8_promote128"]


def test_a_custom_model_cannot_be_saved_in_a_config_and_the_error_names_the_presets():
    layer, _ = _dense(AlignedGroups(4, 8))
    with pytest.raises(ValueError, match="not one of fpsim.accumulators.PRESETS.*hopper_fp8"):
        layer.get_config()
