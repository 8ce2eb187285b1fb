"""The PyTorch AMP recipe, line by line, with what a PyTorch user expects at every step, and the
silently-wrong cases of issue 15 on the PyTorch side.

Oracles: float64 numpy for the forward, the loss, the gradients and the norm; numpy float16 for
the fp16 rounding; PyTorch's SGD formula written out for the update.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import nn

LR, MOMENTUM, MAX_NORM = 0.1, 0.9, 0.4  # the norm starts near 0.44: some steps clip
N_IN, N_HIDDEN, N_OUT, BATCH = 8, 16, 4, 32


def make_model(seed: int) -> nn.Sequential:
    nn.set_random_seed(seed)
    return nn.Sequential([nn.Linear(N_IN, N_HIDDEN), nn.ReLU(), nn.Linear(N_HIDDEN, N_OUT)])


def batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [(rng.normal(size=(BATCH, N_IN)).astype(np.float32), rng.integers(0, N_OUT, BATCH))
            for _ in range(n)]


def f16(a: np.ndarray) -> np.ndarray:
    """Round to fp16 (numpy's conversion, the oracle) and back to float64."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float64)


def reference_forward(x, w1, b1, w2, b2):
    """The autocast forward in float64 with numpy fp16 roundings: fp16 operands, exact
    accumulation, one rounding to fp16 per linear; relu exact."""
    h = f16(np.maximum(f16(x) @ f16(w1).T + f16(b1), 0))
    return h, f16(h @ f16(w2).T + f16(b2))


def reference_loss_and_grads(x, y, w1, b1, w2, b2):
    """Mean cross-entropy of the reference logits and its float64 gradients (backprop by hand)."""
    h, z = reference_forward(x, w1, b1, w2, b2)
    shifted = z - z.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    dz = np.exp(logp)
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    dh = (dz @ f16(w2)) * (h > 0)
    return loss, z, [dh.T @ f16(x), dh.sum(0), dz.T @ h, dz.sum(0)]


def train_steps(model, opt, scaler, data, check=None):
    """The canonical PyTorch AMP loop; ``check(step, stage, **values)`` sees every stage."""
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for step, (x, y) in enumerate(data):
        opt.zero_grad()
        if check:
            check(step, "zero_grad")
        with nn.autocast(device_type="cpu", dtype="float16"):
            out = model(x)
            loss = loss_fn(out, y)
        if check:
            check(step, "forward", x=x, y=y, out=out, loss=loss)
        scaler.scale(loss).backward()
        if check:
            check(step, "backward")
        scaler.unscale_(opt)
        if check:
            check(step, "unscale")
        norm = nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        if check:
            check(step, "clip", norm=norm)
        scaler.step(opt)
        scaler.update()
        if check:
            check(step, "step")
        losses.append(loss.item())
    return losses


def test_amp_recipe_every_step_matches_what_a_pytorch_user_expects():
    model = make_model(0)
    params = list(model.parameters())
    assert [k for k, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight",
                                                         "2.bias"]
    assert params[0].shape == (N_HIDDEN, N_IN) and params[1].shape == (N_HIDDEN,)
    opt = nn.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    scaler = nn.GradScaler("cpu")
    buffers = [np.zeros(p.shape) for p in params]  # PyTorch's momentum buffers, the oracle
    seen: dict[str, object] = {}

    def check(step, stage, **v):
        if stage == "zero_grad":
            assert all(p.grad is None for p in params)  # nothing leaks from the last step
            seen["before"] = [p.data.astype(np.float64) for p in params]
        elif stage == "forward":
            out, loss = v["out"], v["loss"]
            assert out.fmt.name == "float16" and loss.fmt.name == "float32"
            ref_loss, ref_out, ref_grads = reference_loss_and_grads(v["x"], v["y"],
                                                                    *seen["before"])
            np.testing.assert_allclose(out.data, ref_out, rtol=2**-10)
            np.testing.assert_allclose(loss.item(), ref_loss, rtol=1e-5)
            seen["ref_grads"] = ref_grads
        elif stage == "backward":  # scaled gradients on the fp32 master weights
            assert all(p.grad.fmt.name == "float32" for p in params)
            g0 = np.abs(params[0].grad.data).max()
            assert g0 > 1000 * np.abs(seen["ref_grads"][0]).max()
        elif stage == "unscale":
            grads = [p.grad.data.astype(np.float64) for p in params]
            assert all(np.isfinite(g).all() for g in grads)
            for g, ref in zip(grads, seen["ref_grads"], strict=True):  # fp16 activation grads
                np.testing.assert_allclose(g, ref, rtol=2e-2, atol=2e-4)
            seen["unclipped"] = grads
        elif stage == "clip":
            total = np.sqrt(sum((g**2).sum() for g in seen["unclipped"]))
            assert v["norm"].fmt.name == "float32"
            np.testing.assert_allclose(v["norm"].item(), total, rtol=1e-6)
            coef = min(1.0, MAX_NORM / (total + 1e-6))
            seen["clipped_steps"] = seen.get("clipped_steps", 0) + (coef < 1)
            for p, g in zip(params, seen["unclipped"], strict=True):
                np.testing.assert_allclose(p.grad.data, g * coef, rtol=1e-6, atol=1e-12)
            seen["clipped"] = [p.grad.data.astype(np.float64) for p in params]
        elif stage == "step":
            assert scaler.get_scale() == 2.0**16  # finite steps: no backoff, growth after 2000
            for i, (p, g) in enumerate(zip(params, seen["clipped"], strict=True)):
                buffers[i] = MOMENTUM * buffers[i] + g  # PyTorch: buf = m * buf + g
                expected = seen["before"][i] - LR * buffers[i]
                np.testing.assert_allclose(p.data, expected, rtol=1e-5, atol=1e-7)

    losses = train_steps(model, opt, scaler, batches(6), check)
    assert losses[-1] < losses[0]
    assert 0 < seen["clipped_steps"] < 6  # both branches of the clip were checked


def test_amp_recipe_resumes_bit_identically_from_state_dicts(tmp_path):
    data = batches(8)
    model = make_model(0)
    opt = nn.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    scaler = nn.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    train_steps(model, opt, scaler, data[:4])
    path = tmp_path / "checkpoint.pkl"
    with open(path, "wb") as f:
        pickle.dump({"model": model.state_dict(), "optimizer": opt.state_dict(),
                     "scaler": scaler.state_dict()}, f)

    resumed = make_model(123)  # other initial weights and other automatic layer names
    assert not np.array_equal(resumed.layers[0].weight.data, model.layers[0].weight.data)
    opt2 = nn.SGD(resumed.parameters(), lr=LR, momentum=MOMENTUM)
    scaler2 = nn.GradScaler("cpu")
    with open(path, "rb") as f:
        state = pickle.load(f)
    assert resumed.load_state_dict(state["model"]) == ([], [])
    opt2.load_state_dict(state["optimizer"])
    scaler2.load_state_dict(state["scaler"])
    assert scaler2.get_scale() == scaler.get_scale()

    original = train_steps(model, opt, scaler, data[4:])
    again = train_steps(resumed, opt2, scaler2, data[4:])
    assert original == again
    for a, b in zip(model.parameters(), resumed.parameters(), strict=True):
        assert a.data.tobytes() == b.data.tobytes()
    assert scaler.state_dict() == scaler2.state_dict()


def test_zero_grad_clears_gradients_so_steps_do_not_accumulate():
    model = make_model(0)
    opt = nn.SGD(model.parameters(), lr=LR)
    x, y = batches(1)[0]
    loss_fn = nn.CrossEntropyLoss()
    loss_fn(model(x), y).backward()
    once = [p.grad.data.copy() for p in model.parameters()]
    loss_fn(model(x), y).backward()  # without zero_grad, backward accumulates (as in PyTorch)
    np.testing.assert_allclose(model.layers[0].weight.grad.data, 2 * once[0], rtol=1e-6)
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    loss_fn(model(x), y).backward()
    for p, g in zip(model.parameters(), once, strict=True):
        np.testing.assert_array_equal(p.grad.data, g)


def test_zero_grad_works_for_an_optimizer_that_only_saw_apply_gradients():
    w = nn.Variable(np.ones(3, np.float32), name="w")
    opt = nn.RMSprop()
    with pytest.raises(RuntimeError, match="apply_gradients"):
        opt.zero_grad()  # it knows no parameters yet: the message says how to pass them
    (w * w).sum().backward()
    opt.apply_gradients([(w.grad, w)])
    opt.zero_grad()
    assert w.grad is None


def test_autocast_makes_a_model_built_under_float32_compute_in_float16():
    model = make_model(0)  # built under the float32 policy
    x = batches(1)[0][0]
    with nn.policy_scope("mixed_float16"):
        trap = model(x)  # policy_scope only sets the policy of layers created inside it
    assert trap.fmt.name == "float32"
    with nn.autocast("cpu", dtype="float16"):
        out = model(x)
    assert out.fmt.name == "float16"
    w = [p.data.astype(np.float64) for p in model.parameters()]
    np.testing.assert_allclose(out.data, reference_forward(x, *w)[1], rtol=2**-10)
    assert not np.array_equal(out.data, trap.data)  # fp16 rounding really happened
