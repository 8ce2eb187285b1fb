"""``import nn.faces.torch as torch``: each PyTorch idiom of issue 25 run as the same script in
real torch 2.13 (CPU) and in the face, compared value by value.

Each script takes the module ``T`` (``torch`` or the face) and returns numpy arrays; where every
op is exact in fp32 the results are compared to fp32 rounding (the two libraries sum in
different orders), under bfloat16 autocast to a bfloat16 ulp. The rest of the face (small
names, saving, schedulers, refusals) is in test_torch_face_names.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)
X = RNG.normal(size=(6, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 6)


def as_np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().float().numpy()
    return np.asarray(value, dtype=np.float32)


def weights() -> dict[str, np.ndarray]:
    face.manual_seed(5)
    model = face.nn.Sequential(face.nn.Linear(4, 8), face.nn.ReLU(), face.nn.Linear(8, 3))
    return {k: np.array(v) for k, v in model.state_dict().items()}


def build(T: Any) -> Any:
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 3))
    model.load_state_dict({k: T.tensor(v) for k, v in weights().items()})
    return model


# --- the gradient-penalty recipe (PyTorch's "Automatic Mixed Precision examples") ------------

def gradient_penalty(T: Any, amp: bool, penalty: bool = True, steps: int = 3
                     ) -> dict[str, np.ndarray]:
    model = build(T)
    optimizer = T.optim.SGD(model.parameters(), lr=0.1)
    scaler = T.amp.GradScaler("cpu", init_scale=256.0)
    loss_fn = T.nn.CrossEntropyLoss()
    for _ in range(steps):
        optimizer.zero_grad()
        with T.autocast(device_type="cpu", dtype=T.bfloat16, enabled=amp):
            output = model(T.tensor(X))
            loss = loss_fn(output, T.tensor(Y))
        scaled_grad_params = T.autograd.grad(outputs=scaler.scale(loss),
                                             inputs=model.parameters(), create_graph=True)
        inv_scale = 1.0 / scaler.get_scale()
        grad_params = [p * inv_scale for p in scaled_grad_params]
        with T.autocast(device_type="cpu", dtype=T.bfloat16, enabled=amp):
            grad_norm = 0
            for grad in grad_params:
                grad_norm += grad.pow(2).sum()
            grad_norm = grad_norm.sqrt()
            if penalty:
                loss = loss + grad_norm
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return {k: as_np(v) for k, v in model.state_dict().items()}


def test_gradient_penalty_recipe_gives_torchs_weights_in_fp32():
    mine, theirs = gradient_penalty(face, amp=False), gradient_penalty(torch, amp=False)
    without = gradient_penalty(torch, amp=False, penalty=False)
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # the penalty's gradient is in there: without it the weights differ well beyond that
    assert max(np.abs(without[k] - theirs[k]).max() for k in theirs) > 1e-3


def test_gradient_penalty_recipe_under_bfloat16_autocast_follows_torch_cpu():
    mine, theirs = gradient_penalty(face, amp=True), gradient_penalty(torch, amp=True)
    for k in theirs:  # bf16 activations: the two may round a sum differently by one ulp
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2 ** -7, atol=2 ** -9, err_msg=k)


def test_gradient_penalty_graph_is_freed_after_the_backward_as_torch():
    for T in (face, torch):
        model = build(T)
        loss = model(T.tensor(X)).sum()
        (g,) = T.autograd.grad(loss, [next(iter(model.parameters()))], create_graph=True)
        (g * g).sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


# --- custom Functions under autocast ----------------------------------------------------------

def custom_mm(T: Any, cast_inputs: Any) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    decorate = (T.amp.custom_fwd(device_type="cpu") if cast_inputs is None else
                T.amp.custom_fwd(device_type="cpu", cast_inputs=getattr(T, cast_inputs)))

    class MyMM(T.autograd.Function):
        @staticmethod
        @decorate
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a.mm(b)

        @staticmethod
        @T.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad.mm(b.t()), a.t().mm(grad)

    a = T.tensor(X, requires_grad=True)
    b = T.tensor(X.T.copy(), requires_grad=True)
    with T.autocast("cpu", dtype=T.bfloat16):
        out = MyMM.apply(a, b)
    (out * T.tensor(X @ X.T)).sum().backward()
    return str(out.dtype).removeprefix("torch."), as_np(out), as_np(a.grad), as_np(b.grad)


@pytest.mark.parametrize("cast_inputs", [None, "bfloat16", "float32"])
def test_a_custom_fwd_function_under_autocast_runs_and_returns_as_torch(cast_inputs):
    (dtype, out, ga, gb), (t_dtype, t_out, t_ga, t_gb) = (custom_mm(face, cast_inputs),
                                                         custom_mm(torch, cast_inputs))
    assert dtype == t_dtype == ("float32" if cast_inputs == "float32" else "bfloat16")
    np.testing.assert_array_equal(out, t_out)  # bf16 products, fp32 sums: one rounding
    np.testing.assert_allclose(ga, t_ga, rtol=2 ** -7)
    np.testing.assert_allclose(gb, t_gb, rtol=2 ** -7)


def test_a_custom_function_without_custom_fwd_runs_its_ops_under_autocast_as_torch():
    for T in (face, torch):
        class Double(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a.mm(a.t()) * 2.0

            @staticmethod
            def backward(ctx, grad):
                return None

        with T.autocast("cpu", dtype=T.bfloat16):
            out = Double.apply(T.tensor(X, requires_grad=True))
        assert out.dtype == T.bfloat16


def test_a_custom_function_output_outside_its_format_is_refused():
    """Ours: refused (ValueError), not rounded, so a port's missing rounding shows."""
    import fpsim
    from nn.engine.tensor import Tensor

    class Unrounded(face.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return Tensor._make(np.float32([0.1, 0.5]), fpsim.FP16)  # 0.1 is no fp16 number

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(ValueError, match="Unrounded.forward returned values that are not "
                                         "float16 numbers"):
        Unrounded.apply(face.tensor([1.0, 2.0], requires_grad=True))


def test_an_nn_function_defined_outside_nn_must_round_its_output():
    import fpsim
    import nn

    class Labelled(nn.Function):
        @staticmethod
        def output_format(*fmts: Any, **params: Any) -> Any:
            return fpsim.FP16

        @staticmethod
        def forward(ctx, a):
            return a * np.float32(1.1)  # not rounded to the fp16 it claims

    with pytest.raises(ValueError, match="Labelled.forward returned values that are not "
                                         "float16 numbers.*round the output"):
        Labelled.apply(nn.Tensor([1.0, 3.0]))


# --- a custom Module with Conv2d, LayerNorm and functional --------------------------------------

def conv_net(T: Any, x: np.ndarray, kernel: np.ndarray, fc: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    class Net(T.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = T.nn.Conv2d(2, 3, 3, padding=1)
            self.norm = T.nn.LayerNorm(48)
            self.fc = T.nn.Linear(48, 5)

        def forward(self, x: Any) -> Any:
            h = T.relu(self.conv(x))
            h = self.norm(h.reshape(x.shape[0], 48))
            return T.nn.functional.log_softmax(self.fc(h), dim=-1)

    net = Net()
    net(T.tensor(x))  # (builds nn's LayerNorm; a no-op forward for torch)
    # the same weights on both sides, in PyTorch's layouts: the conv's (out, in, kh, kw)
    net.conv.load_state_dict({"weight": T.tensor(kernel), "bias": T.zeros(3)})
    net.fc.load_state_dict({"weight": T.tensor(fc), "bias": T.zeros(5)})
    xt = T.tensor(x, requires_grad=True)
    out = net(xt)
    out.sum().backward()
    return as_np(out), as_np(xt.grad)


def test_a_custom_module_with_conv_layernorm_and_functional_equals_torchs():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 2, 4, 4)).astype(np.float32)
    kernel = (rng.normal(size=(3, 2, 3, 3)) * 0.3).astype(np.float32)
    fc = (rng.normal(size=(5, 48)) * 0.2).astype(np.float32)
    mine, theirs = conv_net(face, x, kernel, fc), conv_net(torch, x, kernel, fc)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(m, t, rtol=1e-4, atol=1e-5)


def test_layernorm_has_torchs_weight_and_bias_at_construction_and_loads_torchs_state_dict():
    """torch.nn.LayerNorm's parameters exist before any input and are named weight and bias:
    a torch state_dict loads unchanged and the outputs and gradients agree."""
    rng = np.random.default_rng(5)
    theirs = torch.nn.LayerNorm((3, 4), eps=1e-5)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(rng.normal(size=(3, 4)).astype(np.float32)))
        theirs.bias.copy_(torch.tensor(rng.normal(size=(3, 4)).astype(np.float32)))
    mine = face.nn.LayerNorm((3, 4), eps=1e-5)
    assert [n for n, _ in mine.named_parameters()] == ["weight", "bias"]
    assert mine.weight.shape == (3, 4) and mine.bias.shape == (3, 4)
    mine.load_state_dict({k: face.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})
    x = rng.normal(size=(2, 3, 4)).astype(np.float32) * 3
    xt, xm = torch.tensor(x, requires_grad=True), face.tensor(x, requires_grad=True)
    (theirs(xt) ** 2).sum().backward()
    (mine(xm) ** 2).sum().backward()
    np.testing.assert_allclose(as_np(mine(face.tensor(x))), theirs(torch.tensor(x)).detach(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as_np(xm.grad), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(as_np(mine.weight.grad), theirs.weight.grad.numpy(), rtol=1e-4,
                               atol=1e-5)
    plain = face.nn.LayerNorm(4, elementwise_affine=False)
    assert plain.weight is None and plain.bias is None and list(plain.state_dict()) == []
