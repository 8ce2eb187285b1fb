"""fpsim.torch.emulate(..., accumulator=...): products accumulated in a chosen model.

Oracles: an fp16 accumulator replayed in exact rational arithmetic (fpsim.round_scalar, the
specification, after every addition, in the order the docstring gives); integer-valued data
whose every sum is exact, where the result must equal torch's own product (shapes, padding,
strides, groups, backward); fpsim.matmul for the accumulator models."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import fpsim.torch as ft  # noqa: E402


def _fp16(t: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(fpsim.round(t.detach().cpu().numpy(), "fp16"))


def _sequential_fp16(terms: list[Fraction]) -> Fraction:
    """s = t0; s = fp16(s + tk), each addition rounded exactly (the specification)."""
    s = Fraction(fpsim.round_scalar(terms[0], "fp16"))
    for t in terms[1:]:
        s = Fraction(fpsim.round_scalar(s + t, "fp16"))
    return s


def _seeded(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def test_linear_with_an_fp16_accumulator_is_the_sequential_fp16_sum_plus_bias_rounded_once():
    layer = torch.nn.Linear(24, 3)
    with torch.no_grad():
        layer.weight.copy_(_seeded(3, 24, seed=1, scale=4.0))
    x = _seeded(5, 24, seed=2, scale=30.0)
    xq, wq, bq = _fp16(x), _fp16(layer.weight), _fp16(layer.bias)
    want = np.empty((5, 3))
    for i in range(5):
        for j in range(3):
            acc = _sequential_fp16([Fraction(float(xq[i, k])) * Fraction(float(wq[j, k]))
                                    for k in range(24)])
            want[i, j] = fpsim.round_scalar(acc + Fraction(float(bq[j])), "fp16")
    ft.emulate(layer.to(DEVICE), "mixed_float16", accumulator="float16")
    got = layer(x.to(DEVICE)).detach().cpu().numpy()
    np.testing.assert_array_equal(got, want)
    plain = F.linear(x, layer.weight.detach().cpu(), layer.bias.detach().cpu()).numpy()
    assert not np.array_equal(got, _fp16(torch.from_numpy(plain)).numpy())  # it mattered


def test_conv2d_kernel_gradient_sums_batch_times_positions_products_in_the_fp16_accumulator():
    """The kernel gradient of a convolution is one dot product over (image, output row,
    output column), in that order, rounded after every addition, then rounded once."""
    conv = torch.nn.Conv2d(2, 2, 3, bias=False)
    with torch.no_grad():
        conv.weight.copy_(_seeded(2, 2, 3, 3, seed=3))
    x = _seeded(2, 2, 5, 5, seed=4, scale=100.0)
    g = _seeded(2, 2, 3, 3, seed=5, scale=10.0)
    ft.emulate(conv.to(DEVICE), "mixed_float16", accumulator={"conv2d": "float16"})
    conv(x.to(DEVICE)).backward(g.to(DEVICE))
    got = conv.weight.grad.cpu().numpy()
    xq, gq = _fp16(x).numpy(), _fp16(g).numpy()
    want = np.empty((2, 2, 3, 3))
    for o, c, ki, kj in np.ndindex(2, 2, 3, 3):
        terms = [Fraction(float(gq[n, o, i, j])) * Fraction(float(xq[n, c, i + ki, j + kj]))
                 for n in range(2) for i in range(3) for j in range(3)]
        want[o, c, ki, kj] = fpsim.round_scalar(_sequential_fp16(terms), "fp16")
    np.testing.assert_array_equal(got, want)


def _integers(*shape: int, seed: int) -> torch.Tensor:
    return torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(seed)).float()


CONVS = [
    ("conv2d same", lambda: torch.nn.Conv2d(4, 6, 3, padding="same"), (2, 4, 6, 5)),
    ("conv2d same even kernel", lambda: torch.nn.Conv2d(2, 2, (2, 4), padding="same"),
     (1, 2, 5, 7)),
    ("conv2d stride dilation pad", lambda: torch.nn.Conv2d(4, 2, 3, stride=2, padding=1,
                                                           dilation=2), (2, 4, 9, 8)),
    ("conv2d groups", lambda: torch.nn.Conv2d(4, 6, 3, groups=2, bias=False), (2, 4, 5, 5)),
    ("conv2d unbatched", lambda: torch.nn.Conv2d(3, 2, 2), (3, 4, 4)),
    ("conv1d", lambda: torch.nn.Conv1d(3, 4, 3, padding=1, stride=2), (2, 3, 9)),
    ("conv1d same", lambda: torch.nn.Conv1d(3, 4, 4, padding="same"), (2, 3, 9)),
    ("linear 3-D input", lambda: torch.nn.Linear(5, 4), (2, 3, 5)),
]


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")  # (torch's own)
@pytest.mark.parametrize("name,make,shape", CONVS, ids=[c[0] for c in CONVS])
def test_products_with_exact_sums_equal_torchs_own_forward_and_backward(name, make, shape):
    """Integer data in -3..3: every sum is exact in fp16, so the accumulated product must be
    torch's own, values and every gradient; this checks the patches, padding, strides,
    groups and the gradients' shapes and order."""
    torch.manual_seed(0)
    plain = make()
    with torch.no_grad():
        for p in plain.parameters():
            p.copy_(_integers(*p.shape, seed=p.numel()))
    emulated = make()
    emulated.load_state_dict(plain.state_dict())
    ft.emulate(emulated.to(DEVICE), "mixed_float16", accumulator="float16")
    x = _integers(*shape, seed=7)
    xe = x.clone().to(DEVICE).requires_grad_(True)
    xp = x.clone().requires_grad_(True)
    ye, yp = emulated(xe), plain(xp)
    assert torch.equal(ye.cpu(), yp.detach())
    g = _integers(*yp.shape, seed=8)
    ye.backward(g.to(DEVICE))
    yp.backward(g)
    assert torch.equal(xe.grad.cpu(), xp.grad)
    for (n, pe), pp in zip(emulated.named_parameters(), plain.parameters(), strict=True):
        assert torch.equal(pe.grad.cpu(), pp.grad), n


@pytest.mark.parametrize("op", ["matmul", "bmm", "baddbmm", "broadcast"])
def test_tensor_products_with_exact_sums_equal_torchs_own(op):
    class Product(torch.nn.Module):
        def forward(self, a, b, c):
            if op == "matmul":
                return a[0] @ b[0]
            if op == "bmm":
                return torch.bmm(a, b)
            if op == "baddbmm":
                return torch.baddbmm(c, a, b, beta=2.0, alpha=-1.0)
            return torch.matmul(a, b[0])  # b broadcast over a's batch

    a, b, c = _integers(3, 4, 5, seed=1), _integers(3, 5, 2, seed=2), _integers(3, 4, 2, seed=3)
    _check_against_torch(Product, (a, b), (c,))


def _check_against_torch(product: type, operands: tuple, constants: tuple = ()) -> None:
    """``product()`` emulated with an fp16 accumulator against plain torch on sums exact in
    fp16: the same values, and the same gradient for every operand."""
    want = [t.clone().requires_grad_(True) for t in operands]
    got = [t.clone().to(DEVICE).requires_grad_(True) for t in operands]
    y_plain = product()(*want, *constants)
    y = ft.emulate(product(), "mixed_float16", accumulator="float16")(
        *got, *(t.to(DEVICE) for t in constants))
    assert torch.equal(y.detach().cpu(), y_plain.detach())
    g = _integers(*y_plain.shape, seed=4)
    y.backward(g.to(DEVICE))
    y_plain.backward(g)
    for t, w in zip(got, want, strict=True):
        assert torch.equal(t.grad.cpu(), w.grad)


@pytest.mark.parametrize("preset", ["hopper_fp8_fast", "hopper_fp8_promote128"])
def test_an_accumulator_model_gives_fpsim_matmuls_accumulator_values(preset):
    layer = torch.nn.Linear(300, 2, bias=False)
    x = _seeded(3, 300, seed=9, scale=5.0)
    ft.emulate(layer.to(DEVICE), "mixed_bfloat16", accumulator=preset)
    got = layer(x.to(DEVICE)).detach().cpu().numpy()
    xq = fpsim.round(x.numpy(), "bf16")
    wq = fpsim.round(layer.weight.detach().cpu().numpy(), "bf16")
    values = np.asarray(fpsim.matmul(fpsim.array(xq, "bf16"), fpsim.array(wq.T, "bf16"),
                                     accumulate=preset, fmt="float32"), dtype=np.float64)
    np.testing.assert_array_equal(got, fpsim.round(values, "bf16"))
    fp32 = fpsim.round(x.numpy().astype(np.float64) @ wq.T.astype(np.float64), "bf16")
    assert not np.array_equal(got, fp32)  # the model's truncation shows at K = 300


def test_a_scope_key_covers_the_modules_inside_it_and_the_longest_key_wins():
    model = torch.nn.Sequential()
    model.add_module("body", torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)))
    model.add_module("head", torch.nn.Linear(2, 2))
    em = ft.emulate(model, "mixed_float16",
                    accumulator={"body": "float16", "body.1": "bfloat16", "linear": "e5m2"})
    acc = em.fpsim_emulation.accumulator
    assert acc("body.0", "linear").name == "float16"
    assert acc("body.1", "linear").name == "bfloat16"
    assert acc("head", "linear").name == "float8_e5m2"
    assert ft.emulate(torch.nn.Linear(2, 2), "mixed_float16",
                      accumulator="float32").fpsim_emulation.accumulator("", "linear") is None


def test_bad_accumulator_arguments_are_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="neither a submodule.*products: baddbmm, conv1d"):
        ft.emulate(torch.nn.Linear(2, 2), "mixed_float16", accumulator={"fc9": "float16"})
    with pytest.raises(ValueError, match="attention takes no accumulator"):
        ft.emulate(torch.nn.Linear(2, 2), "mixed_float16", accumulator={"attention": "fp16"})
    with pytest.raises(ValueError, match="preset name"):
        ft.emulate(torch.nn.Linear(2, 2), "mixed_float16", accumulator="no_such_format")


def test_attention_under_an_accumulator_for_every_product_is_refused_at_the_call():
    class Attend(torch.nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q)

    model = ft.emulate(Attend(), "mixed_float16", accumulator="float16")
    with pytest.raises(NotImplementedError, match="attention .* takes no accumulator"):
        model(torch.ones(1, 2, 3, 4, device=DEVICE))


def test_a_per_tensor_fp8_recipe_takes_an_accumulator_with_exact_sums_unchanged():
    plain = torch.nn.Linear(8, 3)
    with torch.no_grad():
        for p in plain.parameters():
            p.copy_(_integers(*p.shape, seed=p.numel()))
    emulated = torch.nn.Linear(8, 3)
    emulated.load_state_dict(plain.state_dict())
    x = _integers(4, 8, seed=3)
    want = ft.emulate(plain.to(DEVICE), "fp8_hybrid_current")(x.to(DEVICE))
    got = ft.emulate(emulated.to(DEVICE), "fp8_hybrid_current",
                     accumulator="hopper_fp8_promote128")(x.to(DEVICE))
    assert got.dtype == torch.float32 and torch.equal(got, want)


@pytest.mark.parametrize("sa,sb", [((1, 4, 5), (3, 5, 2)), ((2, 1, 4, 5), (3, 5, 2)),
                                   ((5,), (3, 5, 2)), ((3, 4, 5), (5,)), ((4, 5), (2, 3, 5, 2))])
def test_matmul_broadcasting_of_every_kind_gives_torchs_values_and_gradients(sa, sb):
    """numpy's matmul broadcasting (a batch of one, a missing batch, 1-D operands), forward
    and backward, on sums exact in fp16."""
    class Product(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    _check_against_torch(Product, (_integers(*sa, seed=11), _integers(*sb, seed=12)))


def test_every_product_with_an_accumulator_function_is_one_emulate_catches():
    from fpsim.torch.accumulate import PRODUCT_FUNCTIONS
    from fpsim.torch.emulate import PRODUCT_NAMES

    assert set(PRODUCT_FUNCTIONS) < PRODUCT_NAMES  # (attention is the one without)
    assert PRODUCT_NAMES - set(PRODUCT_FUNCTIONS) == {"attention"}
