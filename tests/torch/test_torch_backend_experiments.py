"""``fpsim compare --backend torch`` (nn.experiments.torch_backend): the LM and CNN experiments
on torch modules (nn.experiments.torch_models) under fpsim.torch.emulate; other experiments
refused by name, with the reason where emulate lacks their knob."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fpsim  # noqa: E402
import fpsim.torch as ft  # noqa: E402
from fpsim.cli import main  # noqa: E402
from nn.experiments import torch_backend, torch_models, torch_replay  # noqa: E402
from nn.experiments.cnn import build_cnn, data_for  # noqa: E402
from nn.experiments.masters import MIXED, PURE  # noqa: E402
from nn.experiments.table import EXPERIMENTS, SCALED, UNSCALED  # noqa: E402


def test_unsupported_experiments_are_refused_naming_the_supported_ones():
    with pytest.raises(ValueError, match="runs the experiments underflow, underflow-sgd, bf16, "
                                         "master-weights-lm, master-weights, accumulation, "
                                         "accumulation-lm; 'fp8' runs on --backend nn only$"):
        torch_backend.check_supported("fp8")
    assert set(torch_backend.SUPPORTED) <= set(EXPERIMENTS)


def test_statistics_is_refused_with_the_knob_emulate_lacks(capsys):
    with pytest.raises(ValueError, match="'statistics' runs on --backend nn only "
                                         r"\(.*BatchNorm's statistics .* in float32"):
        torch_backend.check_supported("statistics")
    assert main(["compare", "--backend", "torch", "--experiment", "statistics"]) != 0
    assert "fp16 statistics cannot be emulated" in capsys.readouterr().err
    assert not set(torch_backend.REFUSED) & set(torch_backend.SUPPORTED)
    assert set(torch_backend.REFUSED) <= set(EXPERIMENTS)


def test_every_torch_experiment_has_a_torch_model_and_its_extra_numbers():
    for name in torch_backend.SUPPORTED:
        assert torch_models.family(EXPERIMENTS[name].config) in torch_models.FAMILIES.values()
    assert set(torch_backend.EXTRA) == set(torch_backend.SUPPORTED)
    with pytest.raises(TypeError, match="no torch model for a str; the torch backend has "
                                        "LMConfig, CNNConfig"):
        torch_models.family("config")


def test_the_cli_refuses_options_the_torch_backend_lacks(capsys):
    assert main(["compare", "--backend", "torch", "--experiment", "fp8", "--steps", "1"]) != 0
    assert "'fp8' runs on --backend nn only" in capsys.readouterr().err
    assert main(["compare", "--backend", "torch", "--experiment", "bf16",
                 "--blas-threads", "2"]) != 0
    assert "--blas-threads does not apply here" in capsys.readouterr().err


def test_scale_and_device_are_refused_on_the_nn_backend(capsys):
    assert main(["compare", "--experiment", "bf16", "--scale", "2"]) != 0
    assert "--scale does not apply here" in capsys.readouterr().err


def test_scale_widens_the_lm_keeping_each_heads_size_and_its_depth():
    config = EXPERIMENTS["underflow"].config
    wide = torch_backend.scaled(config, 3)
    assert (wide.embed_dim, wide.num_heads, wide.ff_dim) == (
        3 * config.embed_dim, 3 * config.num_heads, 3 * config.ff_dim)
    assert wide.embed_dim // wide.num_heads == config.embed_dim // config.num_heads
    assert wide.with_(embed_dim=config.embed_dim, num_heads=config.num_heads,
                      ff_dim=config.ff_dim) == config
    model = torch_models.torch_lm(wide.with_(sequence_length=8))
    assert model.blocks[0].linear1.weight.shape == (wide.ff_dim, wide.embed_dim)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"--scale must be an integer >= 1.*{bad!r}"):
            torch_backend.scaled(config, bad)


def test_the_torch_lm_runs_its_attention_and_projections_emulated():
    config = EXPERIMENTS["underflow"].config.with_(sequence_length=8, batch_size=2)
    model = ft.emulate(torch_models.torch_lm(config), "mixed_float16")
    with fpsim.monitor() as m:
        model(torch.zeros(2, 8, dtype=torch.long)).sum().backward()
    assert {"blocks.0.self_attn/linear/input", "blocks.0.self_attn/attention/query",
            "blocks.0.linear1/linear/input", "logits/linear/grad_input"} <= set(m.counts)


def test_the_underflow_experiment_runs_on_torch_with_the_same_rows_as_on_nn():
    result = torch_backend.run_experiment("underflow", steps=3)
    assert [r.label for r in result.runs] == [r.label for r in torch_backend.SUPPORTED[
        "underflow"]]
    assert all(math.isfinite(r.test_loss) and len(r.history.step_loss) == 3
               for r in result.runs)
    by_label = {r.label: r for r in result.runs}
    assert by_label["float32"].activation_underflow == 0  # float32 rounds nothing
    assert by_label[UNSCALED].final_loss_scale is None
    assert by_label[SCALED].final_loss_scale is not None
    # the unscaled fp16 gradients flush some activation gradients to zero; scaling keeps them
    assert by_label[UNSCALED].activation_underflow > by_label[SCALED].activation_underflow
    # the float32 run keeps its true gradients' exponents (the picture's second panel): one
    # count per non-zero finite value, so a count never exceeds the values there were
    history = by_label["float32"].history
    assert history.exponent_counts["activation"].sum() > 0
    assert history.exponent_counts["weight"].sum() + history.zero_counts["weight"] == 3 * sum(
        p.numel() for p in torch_models.torch_lm(result.config).parameters())
    assert by_label[UNSCALED].history.exponent_counts["activation"].sum() == 0  # not recorded


def test_the_what_if_replay_on_the_torch_lm_measures_each_alternative_against_float32():
    """The float32 alternative replays the reference's step exactly (same gradients, same
    update); unscaled fp16 loses more of the gradient's norm to zeros than scaled fp16."""
    config = EXPERIMENTS["underflow"].config.with_(steps=3, sequence_length=16, batch_size=8)
    found = torch_replay.what_if(config, [0, 2])
    assert found.alternatives() == list(torch_replay.WHAT_IF)
    for r in found.replays:
        assert r.step in (0, 2) and set(r.layers) >= {"logits", "blocks.0.self_attn"}
        if r.alternative == "float32":
            assert r.total.cosine == pytest.approx(1.0, abs=1e-12)
            assert r.total.flushed_norm == 0 and r.total.update_error == 0
    assert found.mean("unscaled fp16", "flushed_norm") > found.mean("scaled fp16",
                                                                   "flushed_norm")
    assert {r.scale for r in found.replays if r.alternative == "scaled fp16"} <= {2.0**15,
                                                                                  2.0**14}


def test_stored_weights_are_rounded_and_an_update_below_half_an_ulp_counts_as_swamped():
    """fp16 holds 1.0 with an ulp of 2^-10: an update of 1e-4 (below half an ulp) is lost and
    counted, one of 1e-2 is kept, rounded as fpsim.round rounds it."""
    layer = torch.nn.Linear(4, 2)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.fill_(1.0)
    before = [p.detach().clone() for p in layer.parameters()]
    with torch.no_grad():
        layer.weight.add_(1e-4)
        layer.bias.add_(1e-2)
    assert torch_backend._store(layer, "float16", before) == {"weight": layer.weight.numel(),
                                                               "bias": 0}
    assert torch.all(layer.weight == 1.0)
    want = float(fpsim.round(np.float32(np.float32(1.0) + np.float32(1e-2)), "float16"))
    assert torch.all(layer.bias == want) and want != 1.0


def test_master_weights_lm_runs_on_torch_with_fp16_stored_weights_swamping_updates():
    result = torch_backend.run_experiment("master-weights-lm", steps=3)
    assert [r.label for r in result.runs] == [MIXED, PURE]
    assert result.config.learning_rate == torch_backend.LEARNING_RATE["master-weights-lm"]
    by_label = {r.label: r for r in result.runs}
    assert by_label[MIXED].swamped_updates == 0  # fp32 masters: nothing is counted
    assert by_label[PURE].swamped_updates > 0
    shares = result.extra["swamped_share"]
    assert 0 < shares[PURE] <= 1 and shares[MIXED] == 0
    assert len(EXPERIMENTS["master-weights-lm"].findings(result)) == 3  # nn's own words


def test_the_torch_cnn_has_nn_cnns_layers_and_parameter_counts():
    """Layer by layer (named as nn names them) the same parameters as nn's build_cnn: the
    kernels (k, k, in, out) in nn are (out, in, k, k) in torch; BatchNorm's gamma and beta."""
    config = EXPERIMENTS["master-weights"].config
    model = torch_models.torch_cnn(config)
    ours = {name: p.numel() for name, p in model.named_parameters()}
    theirs = {v.name.replace("/", ".").replace("kernel", "weight").replace("gamma", "weight")
              .replace("beta", "bias"): v.size
              for v in build_cnn(config, "float32").trainable_variables}
    assert ours == theirs
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    assert model.bn1.eps == 1e-3 and model.bn1.momentum == pytest.approx(1 - config.bn_momentum)
    wide = torch_backend.scaled(config, 2)
    assert wide.filters == (32, 64) and wide.with_(filters=config.filters) == config


def test_the_torch_cnn_sees_nn_cnns_pixels_and_batches_in_torch_layout():
    config = EXPERIMENTS["master-weights"].config.with_(steps=3, batch_size=8)
    (x, y), (x_test, y_test) = torch_models.cnn_data(config)
    (nx, ny), (nx_test, ny_test) = data_for(config)
    assert x.shape == (24, 1, 8, 8) and np.array_equal(x[:, 0], nx[..., 0])
    assert np.array_equal(x_test[:, 0], nx_test[..., 0])
    assert np.array_equal(y, ny) and np.array_equal(y_test, ny_test)


def test_the_torch_cnn_runs_its_convolutions_emulated():
    model = ft.emulate(torch_models.torch_cnn(EXPERIMENTS["master-weights"].config),
                       "mixed_float16")
    with fpsim.monitor() as m:
        model(torch.full((2, 1, 8, 8), 255.0)).sum().backward()
    assert {"conv1/conv2d/input", "conv2/conv2d/weight", "conv2/conv2d/grad_input",
            "logits/linear/grad_weight"} <= set(m.counts)


def test_held_out_gives_the_mean_cross_entropy_and_the_share_classified_right():
    """Against numpy's log-softmax on logits given directly (an identity model)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 10)).astype(np.float32)
    y = rng.integers(0, 10, 300)
    loss, accuracy = torch_backend.held_out(torch.nn.Identity(), logits, y, "cpu")
    z = logits.astype(np.float64)
    log_p = z - z.max(1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
    assert loss == pytest.approx(-log_p[np.arange(300), y].mean(), rel=1e-6)
    assert accuracy == np.mean(z.argmax(1) == y)


def test_master_weights_runs_on_the_torch_cnn_with_adam_and_fp16_stored_weights():
    result = torch_backend.run_experiment("master-weights", steps=3)
    assert [r.label for r in result.runs] == [MIXED, PURE]
    assert (result.config.optimizer, result.config.learning_rate) == ("adam", 3e-4)  # nn's
    by_label = {r.label: r for r in result.runs}
    assert by_label[MIXED].swamped_updates == 0 and by_label[PURE].swamped_updates > 0
    assert all(0 <= r.test_accuracy <= 1 and math.isfinite(r.test_loss) for r in result.runs)
    x = result.extra
    assert x["swamped_by_variable"][MIXED] == {}
    top = x["swamped_by_variable"][PURE]
    assert 0 < len(top) <= 5 and list(top.values()) == sorted(top.values(), reverse=True)
    assert sum(top.values()) <= by_label[PURE].swamped_updates
    assert x["swamp_threshold"] == 1.0  # 3e-4 is below half an fp16 ulp from 1 up
    assert 0 < x["swamped_share"][PURE] <= 1 and x["swamped_share"][MIXED] == 0
    assert len(EXPERIMENTS["master-weights"].findings(result)) == 4  # nn's own words


def test_accumulation_runs_on_the_torch_cnn_with_fp16_accumulators_in_its_convolutions():
    config = EXPERIMENTS["accumulation"].config.with_(batch_size=8)
    result = torch_backend.run_config("accumulation", config.with_(steps=2))
    assert [r.label for r in result.runs] == ["fp32 accumulation", "fp16 accumulation"]
    assert all(math.isfinite(r.test_loss) and r.final_loss_scale for r in result.runs)
    x = result.extra
    assert x["inner_dimensions"] == {"conv1": 8 * 8 * 8, "conv2": 8 * 4 * 4}  # batch x H x W
    assert x["small_batch"]["inner_dimensions"] == {"conv1": 64 * 64, "conv2": 64 * 16}
    assert all(0 < x["swamped_additions"][n] < 1 and x["relative_error"][n] > 0
               for n in ("conv1", "conv2"))
    assert len(EXPERIMENTS["accumulation"].findings(result)) == 3  # nn's own words


def test_the_torch_kernel_gradient_operands_multiply_to_the_convolutions_weight_gradient():
    """rows^T @ grads (the products the fp16 accumulator sums) is the kernel gradient torch
    computes for the same batch, up to its fp32 accumulation and fp16 rounding."""
    config = EXPERIMENTS["accumulation"].config.with_(batch_size=8)
    sums = torch_backend.conv_kernel_sums(config, "cpu", 1.0)
    (x, y), _ = torch_models.family(config).data(config)
    model = ft.emulate(torch_models.family(config).build(config), "mixed_float16")
    torch.nn.functional.cross_entropy(model(torch.from_numpy(x[:8])),
                                      torch.from_numpy(y[:8])).backward()
    for name in ("conv1", "conv2"):
        rows, grads = sums[name]
        weight = getattr(model, name).weight
        assert rows.shape == (8 * (64 if name == "conv1" else 16), weight[0].numel())
        got = (rows.T @ grads).T.reshape(weight.shape)
        np.testing.assert_allclose(got, weight.grad.numpy(), rtol=2e-3, atol=1e-6)


def test_accumulation_lm_runs_on_the_torch_lm_with_an_fp16_accumulator_in_its_logits_layer():
    config = EXPERIMENTS["accumulation-lm"].config.with_(sequence_length=16, batch_size=4,
                                                         steps=2)
    trained = {v.label: torch_backend._train(v, config, "cpu")
               for v in torch_backend.SUPPORTED["accumulation-lm"]}
    fp16 = trained["fp16 accumulation"].model.fpsim_emulation
    assert fp16.accumulator("logits", "linear").name == "float16"
    assert fp16.accumulator("blocks.0", "linear") is None
    assert trained["fp32 accumulation"].model.fpsim_emulation.accumulator("logits",
                                                                         "linear") is None
    result = torch_backend.run_config("accumulation-lm", config)
    assert 0 < result.extra["swamped_additions"] < 1 and result.extra["relative_error"] > 0
    assert len(EXPERIMENTS["accumulation-lm"].findings(result)) == 2  # nn's own words


def test_the_torch_logits_operands_multiply_to_the_logits_weight_gradient():
    config = EXPERIMENTS["accumulation-lm"].config.with_(sequence_length=16, batch_size=4)
    h, g = torch_backend.first_batch_operands(config, "cpu", 1.0, torch.nn.Linear)["logits"]
    (x, y), _ = torch_models.family(config).data(config)
    model = ft.emulate(torch_models.family(config).build(config), "mixed_float16")
    logits = model(torch.from_numpy(x[:4]))
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                      torch.from_numpy(y[:4]).reshape(-1)).backward()
    got = h.reshape(-1, h.shape[-1]).double().T @ g.reshape(-1, g.shape[-1]).double()
    np.testing.assert_allclose(got.T.numpy(), model.logits.weight.grad.numpy(), rtol=2e-3,
                               atol=1e-6)
