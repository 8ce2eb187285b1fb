"""The PyTorch face's param groups against torch 2.13 CPU: ``SGD``/``Adam`` built from group
dicts, ``add_param_group``, per-group hyperparameters used in the step, ``state_dict`` /
``load_state_dict`` with groups, and the LR schedulers acting on every group.

Both libraries get the same gradients (set on ``.grad``), so the steps compare the optimizers
alone. SGD's weights must equal torch's bit for bit (the face rounds each multiply-add that
PyTorch's CPU kernels fuse once, as they do: ``fused_multiply_add``, checked against torch's
kernels at the end); Adam's agree to fp32 rounding, since torch's vectorised CPU ``sqrt`` is
not correctly rounded (the module docstring of ``nn.faces.torch.optim``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
WEIGHTS = [RNG.normal(size=s).astype(np.float32) for s in [(4, 3), (4,), (2, 4), (2,)]]
GRADS = [[RNG.normal(size=w.shape).astype(np.float32) for w in WEIGHTS] for _ in range(6)]


def as_np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().float().numpy()
    return np.asarray(value, dtype=np.float32)


def params(T: Any) -> list[Any]:
    return [T.tensor(w.copy(), requires_grad=True) for w in WEIGHTS]


def make(T: Any, kind: str, ps: list[Any]) -> Any:
    if kind == "sgd":
        return T.optim.SGD([{"params": ps[:2], "weight_decay": 0.013},
                            {"params": ps[2:], "lr": 0.3, "momentum": 0.7, "nesterov": True,
                             "weight_decay": 0.01}],
                           lr=0.1, momentum=0.9)
    return T.optim.Adam([{"params": ps[:2], "betas": (0.8, 0.99)},
                         {"params": ps[2:], "lr": 0.003, "eps": 1e-6, "weight_decay": 0.01}],
                        lr=0.01)


def schedule(T: Any, opt: Any, name: str | None) -> Any:
    sched = T.optim.lr_scheduler
    return {None: lambda: None,
            "step": lambda: sched.StepLR(opt, step_size=2, gamma=0.5),
            "lambda": lambda: sched.LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]),
            "cosine": lambda: sched.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)}[name]()


def run(T: Any, kind: str, sched_name: str | None = None, steps: int = 6
        ) -> tuple[list[np.ndarray], list[list[float]]]:
    ps = params(T)
    opt = make(T, kind, ps)
    sched = schedule(T, opt, sched_name)
    lrs = []
    for grads in GRADS[:steps]:
        opt.zero_grad()
        for p, g in zip(ps, grads, strict=True):
            p.grad = T.tensor(g)
        opt.step()
        lrs.append([group["lr"] for group in opt.param_groups])
        if sched is not None:
            sched.step()
    return [as_np(p) for p in ps], lrs


@pytest.mark.parametrize("sched_name", [None, "step", "lambda", "cosine"])
def test_sgd_param_groups_step_as_torch_bit_for_bit(sched_name):
    mine, lrs = run(face, "sgd", sched_name)
    theirs, t_lrs = run(torch, "sgd", sched_name)
    assert lrs == t_lrs
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)


@pytest.mark.parametrize("kind,sched_name", [("adam", None), ("adam", "cosine")])
def test_adam_param_groups_follow_torch_to_fp32_rounding(kind, sched_name):
    mine, lrs = run(face, kind, sched_name)
    theirs, t_lrs = run(torch, kind, sched_name)
    assert lrs == t_lrs  # the lr of every group, bit for bit
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(m, t, rtol=1e-6, atol=1e-7)


def test_each_group_uses_its_own_lr():
    """The independent oracle: plain SGD, w - lr_of_its_group * g, by hand."""
    ps = params(face)
    opt = face.optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5}], lr=0.25)
    for p, g in zip(ps, GRADS[0], strict=True):
        p.grad = face.tensor(g)
    opt.step()
    for p, w, g, lr in zip(ps, WEIGHTS, GRADS[0], [0.25, 0.25, 0.5, 0.5], strict=True):
        np.testing.assert_array_equal(as_np(p), w - np.float32(lr) * g)  # exact products


def group_keys(T: Any, kind: str) -> list[list[str]]:
    opt = make(T, kind, params(T))
    return [sorted(group) for group in opt.param_groups]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_param_groups_hold_torchs_keys(kind):
    assert group_keys(face, kind) == group_keys(torch, kind)


def added(T: Any, kind: str) -> tuple[list[np.ndarray], list[list[float]]]:
    """A group added after some steps: Adam's step count of its params starts at zero."""
    ps = params(T)
    opt = (T.optim.SGD(ps[:2], lr=0.1, momentum=0.9) if kind == "sgd"
           else T.optim.Adam(ps[:2], lr=0.01))
    sched = T.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    lrs = []
    for i, grads in enumerate(GRADS):
        if i == 2:
            opt.add_param_group({"params": ps[2:], "lr": 0.3, "initial_lr": 0.3})
        opt.zero_grad()
        for p, g in zip(ps, grads, strict=True):
            p.grad = T.tensor(g)
        opt.step()
        sched.step()
        lrs.append([group["lr"] for group in opt.param_groups])
    return [as_np(p) for p in ps], lrs


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_add_param_group_steps_the_new_group_as_torch(kind):
    mine, lrs = added(face, kind)
    theirs, t_lrs = added(torch, kind)
    assert lrs == t_lrs
    for m, t in zip(mine, theirs, strict=True):
        if kind == "sgd":
            np.testing.assert_array_equal(m, t)
        else:
            np.testing.assert_allclose(m, t, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_state_dict_with_groups_resumes_bit_identically(kind, tmp_path):
    ps_a = params(face)
    opt_a = make(face, kind, ps_a)
    sched_a = schedule(face, opt_a, "step")

    def steps(ps: list[Any], opt: Any, sched: Any, grads: list[Any]) -> None:
        for gs in grads:
            for p, g in zip(ps, gs, strict=True):
                p.grad = face.tensor(g)
            opt.step()
            sched.step()

    steps(ps_a, opt_a, sched_a, GRADS[:3])
    path = tmp_path / "ckpt.pt"
    face.save({"params": [p.data for p in ps_a], "optimizer": opt_a.state_dict(),
               "scheduler": sched_a.state_dict()}, path)
    state = face.load(path)
    ps_b = params(face)
    for p, saved in zip(ps_b, state["params"], strict=True):
        p.data[...] = saved
    opt_b = make(face, kind, ps_b)
    sched_b = schedule(face, opt_b, "step")
    opt_b.load_state_dict(state["optimizer"])
    sched_b.load_state_dict(state["scheduler"])
    assert [g["lr"] for g in opt_b.param_groups] == [g["lr"] for g in opt_a.param_groups]
    steps(ps_a, opt_a, sched_a, GRADS[3:])
    steps(ps_b, opt_b, sched_b, GRADS[3:])
    for a, b in zip(ps_a, ps_b, strict=True):
        np.testing.assert_array_equal(as_np(a), as_np(b))


def test_param_group_misuse_raises_as_torch_and_names_the_fix():
    ps = params(face)
    with pytest.raises(ValueError, match="more than one parameter group"):
        face.optim.SGD([{"params": ps[:2]}, {"params": ps[1:]}], lr=0.1)
    opt = face.optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5}], lr=0.1)
    state = opt.state_dict()
    one = face.optim.SGD(ps, lr=0.1)
    with pytest.raises(ValueError, match="must be 1 group"):
        one.load_state_dict(state)
    with pytest.raises(ValueError, match="lr"):
        opt.param_groups[1]["lr"] = -1.0
    with pytest.raises(NotImplementedError, match="dampening=0.5"):
        face.optim.SGD([{"params": ps, "dampening": 0.5}], lr=0.1)
    import nn
    with pytest.raises(TypeError, match="nn.faces.torch.optim.SGD"):
        nn.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5}], lr=0.1)


# --- the fused multiply-add of PyTorch's CPU kernels --------------------------------------------

def test_fused_multiply_add_rounds_once_where_float64_would_round_twice():
    """The exact a*b + c lies just below the midpoint of two float32 neighbours; float64 rounds
    it onto the midpoint (2**-54 is lost), and nearest-even then goes up: round-to-odd does
    not."""
    from nn.faces.torch.optim.fused import fused_multiply_add

    a = np.float32(2.0 ** -12 * (1 + 2.0 ** -15))
    b = np.float32(2.0 ** -12 * (1 - 2.0 ** -15))
    c = np.float32(1 + 2.0 ** -23)  # a * b = 2**-24 - 2**-54 exactly
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == np.float32(1 + 2.0 ** -22)
    assert fused_multiply_add(a, b, c) == c
    theirs = torch.full((64,), float(c)).add_(torch.full((64,), float(b)), alpha=float(a))
    assert set(theirs.tolist()) == {float(c)}


def test_fused_multiply_add_equals_torchs_add_alpha_lerp_and_addcmul():
    from nn.faces.torch.optim.fused import fused_multiply_add

    rng = np.random.default_rng(8)
    w, g, m = (rng.normal(size=10007).astype(np.float32) for _ in range(3))
    v = np.abs(m)
    T = torch.tensor
    pairs = [
        (T(w).add_(T(g), alpha=-0.1), fused_multiply_add(-0.1, g, w)),
        (T(m).lerp_(T(g), 0.1), fused_multiply_add(np.float32(0.1), g - m, m)),
        (T(v).addcmul_(T(g), T(g), value=0.001), fused_multiply_add(np.float32(0.001) * g, g, v)),
    ]
    for theirs, mine in pairs:
        np.testing.assert_array_equal(mine, as_np(theirs))
    assert np.any(pairs[0][1] != w - np.float32(0.1) * g)  # rounding twice would differ
