"""The PyTorch face's smaller names (issue 25) and issue 26's GradScaler item, each run as the
same script in torch 2.13 CPU and in ``nn.faces.torch``: dtypes, tensor methods, param_groups
and LR schedulers (the lr sequences bit for bit), SGD/Adam steps, clip_grad_norm_, save/load of
a dict of state dicts; and the idioms the face refuses, naming our spelling."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import nn
import nn.faces.torch as face

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2)
X = RNG.normal(size=(5, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 5)
INTS = np.array([[1.0, -2.0, 3.0], [4.0, 0.5, -1.0]], np.float32)  # products exact in fp32


def as_np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().float().numpy()
    return np.asarray(value, dtype=np.float32)


def model_for(T: Any) -> Any:
    face.manual_seed(1)
    init = face.nn.Sequential(face.nn.Linear(4, 6), face.nn.ReLU(), face.nn.Linear(6, 3))
    model = T.nn.Sequential(T.nn.Linear(4, 6), T.nn.ReLU(), T.nn.Linear(6, 3))
    model.load_state_dict({k: T.tensor(np.array(v)) for k, v in init.state_dict().items()})
    return model


# --- dtypes and tensor methods ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "half", "float"])
def test_dtypes_round_as_torchs(name):
    values = np.array([0.1, 1e-6, 70000.0, -3.3e-5], np.float32)
    mine = face.tensor(values, dtype=getattr(face, name))
    theirs = torch.tensor(values, dtype=getattr(torch, name))
    assert mine.dtype == getattr(face, name)
    assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(as_np(mine), as_np(theirs))


def tensor_methods(T: Any) -> list[np.ndarray]:
    a = T.tensor(INTS)
    return [as_np(r) for r in (a.pow(2), a.mm(a.t()), a.t(), a.sum(dim=1, keepdim=True),
                               a.mean(dim=0), a.to(T.float16), a.half(), a.float())]


def test_tensor_methods_equal_torchs():
    for mine, theirs in zip(tensor_methods(face), tensor_methods(torch), strict=True):
        assert mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)


def test_size_dim_and_numel_answer_as_torchs():
    for shape in [(2, 3), (4,), (), (2, 0, 5)]:
        mine, theirs = face.zeros(shape), torch.zeros(shape)
        assert mine.size() == tuple(theirs.size()) == theirs.shape
        assert mine.dim() == theirs.dim() and mine.numel() == theirs.numel()
        for d in range(-len(shape), len(shape)):
            assert mine.size(d) == theirs.size(d)
        for bad in (len(shape), -len(shape) - 1):
            with pytest.raises(IndexError, match="Dimension") as theirs_error:
                theirs.size(bad)
            with pytest.raises(IndexError, match="Dimension") as mine_error:
                mine.size(bad)
            assert str(theirs_error.value) in str(mine_error.value)


def test_size_without_a_call_keeps_nns_meaning_the_element_count():
    x = nn.Tensor(np.zeros((2, 3)))
    assert x.size == 6 and isinstance(x.size, int) and x.size + 1 == 7
    assert np.zeros(x.size).shape == (6,)


def test_nn_tensor_takes_dtype_as_torch_and_keras_spell_it():
    t = nn.Tensor([0.1], dtype="float16")
    assert t.dtype == "float16" and t.item() == float(np.float16(0.1))
    assert nn.Tensor([0.1], dtype=face.bfloat16).dtype == "bfloat16"
    with pytest.raises(ValueError, match="both fmt='float16' and dtype='float32'"):
        nn.Tensor([0.1], fmt="float16", dtype="float32")


def test_top_level_nn_names_keep_working_and_are_the_faces():
    assert face.nn.Linear is nn.Linear and face.amp.GradScaler is nn.GradScaler
    assert face.autocast is nn.autocast and face.no_grad is nn.no_grad


# --- optimizers, param_groups, schedulers ---------------------------------------------------

def train(T: Any, opt_name: str, steps: int, schedule: str | None = None, clip: float = 0.0
          ) -> tuple[list[float], dict[str, np.ndarray], list[float]]:
    model = model_for(T)
    if opt_name == "sgd":
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    elif opt_name == "nesterov":
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    else:
        opt = T.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)
    sched = {None: lambda: None,
             "step": lambda: T.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
             "lambda": lambda: T.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e),
             "cosine": lambda: T.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3,
                                                                      eta_min=0.001)}[schedule]()
    lrs, norms = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = T.nn.CrossEntropyLoss()(model(T.tensor(X)), T.tensor(Y))
        loss.backward()
        if clip:
            norms.append(float(T.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
        if sched is not None:
            sched.step()
    return lrs, {k: as_np(v) for k, v in model.state_dict().items()}, norms


@pytest.mark.parametrize("opt_name,schedule", [("sgd", "step"), ("nesterov", "cosine"),
                                               ("adam", "lambda"), ("sgd", None)])
def test_optimizers_and_schedulers_follow_torchs_steps(opt_name, schedule):
    lrs, mine, _ = train(face, opt_name, 7, schedule)
    t_lrs, theirs, _ = train(torch, opt_name, 7, schedule)
    assert lrs == t_lrs  # the lr sequence, bit for bit
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2e-5, atol=1e-6, err_msg=k)


def lr_sequence(T: Any, make: Any, n: int) -> list[float]:
    opt = T.optim.SGD([T.tensor([1.0], requires_grad=True)], lr=0.1)
    sched = make(T, opt)
    seq = [opt.param_groups[0]["lr"]]
    for _ in range(n):
        opt.step()
        sched.step()
        seq.append(sched.get_last_lr()[0])
    return seq


@pytest.mark.parametrize("make", [
    lambda T, o: T.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.1),
    lambda T, o: T.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e)),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4),
], ids=["StepLR", "LambdaLR", "CosineAnnealingLR", "CosineAnnealingLR-no-eta"])
def test_scheduler_lr_sequences_equal_torchs_bit_for_bit(make):
    assert lr_sequence(face, make, 13) == lr_sequence(torch, make, 13)  # past T_max, restarts


def test_param_groups_lr_is_the_learning_rate_the_step_uses():
    for T in (face, torch):
        w = T.tensor([1.0], requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1)
        opt.param_groups[0]["lr"] = 0.5
        (w * 2.0).sum().backward()
        opt.step()
        assert as_np(w)[0] == 0.0  # 1 - 0.5 * 2


def test_clip_grad_norm_returns_and_clips_as_torch():
    _, mine, norms = train(face, "sgd", 3, clip=0.5)
    _, theirs, t_norms = train(torch, "sgd", 3, clip=0.5)
    np.testing.assert_allclose(norms, t_norms, rtol=1e-6)
    assert max(norms) > 0.5  # some steps clip
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2e-5, atol=1e-6, err_msg=k)


# --- save / load ------------------------------------------------------------------------------

def run(model: Any, opt: Any, scaler: Any, steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad()
        with face.autocast("cpu", dtype=face.float16):
            loss = face.nn.CrossEntropyLoss()(model(face.tensor(X * 300.0)), face.tensor(Y))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def test_save_load_of_model_optimizer_and_scaler_resumes_bit_identically(tmp_path):
    def fresh() -> tuple[Any, Any, Any]:
        model = model_for(face)
        opt = face.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return model, opt, face.amp.GradScaler("cpu", init_scale=2.0 ** 20, growth_interval=2)

    model, opt, scaler = fresh()
    run(model, opt, scaler, 6)
    model_a, opt_a, scaler_a = fresh()
    run(model_a, opt_a, scaler_a, 3)
    path = tmp_path / "ckpt.pt"
    face.save({"model": model_a.state_dict(), "optimizer": opt_a.state_dict(),
               "scaler": scaler_a.state_dict(), "epoch": 3}, path)
    state = face.load(path)
    model_b, opt_b, scaler_b = fresh()
    model_b.load_state_dict(state["model"])
    opt_b.load_state_dict(state["optimizer"])
    scaler_b.load_state_dict(state["scaler"])
    assert state["epoch"] == 3 and scaler_b.get_scale() == scaler_a.get_scale()
    run(model_b, opt_b, scaler_b, 3)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(model_b.state_dict()[k], v)
    assert scaler_b.get_scale() == scaler.get_scale()


def test_save_refuses_a_non_state_object_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    face.save({"epoch": 1}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"obj\['model'\] is a Sequential.*state_dict"):
        face.save({"model": model_for(face)}, path)
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="weights_only=False"):
        face.load(path, weights_only=False)


def test_save_keeps_floats_exactly_including_inf_and_nan(tmp_path):
    path = tmp_path / "s.pt"
    face.save({"a": [0.1, math.inf], "b": (np.float32(2.5), None, "x", True)}, path)
    got = face.load(path)
    assert got["a"] == [0.1, math.inf] and got["b"] == (2.5, None, "x", True)


# --- GradScaler (issue 26) and warnings -----------------------------------------------------

@pytest.mark.parametrize("bad", ["False", 0, None])
def test_grad_scaler_enabled_must_be_a_bool(bad):
    with pytest.raises(TypeError, match=f"enabled must be True or False, got {bad!r}"):
        face.amp.GradScaler("cpu", enabled=bad)


def test_overflow_steps_print_no_numpy_runtime_warnings():
    """An inf - inf in a sum of an overflowed fp16 step is the emulated result (NaN), not a
    bug: no numpy RuntimeWarning."""
    model = model_for(face)
    opt = face.optim.SGD(model.parameters(), lr=0.1)
    scaler = face.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(model, opt, scaler, 2)
    assert scaler.get_scale() < 2.0 ** 40  # the steps did overflow


# --- refused idioms name our spelling ---------------------------------------------------------

def test_unsupported_idioms_raise_naming_what_to_write():
    x = face.tensor(INTS)
    with pytest.raises(AttributeError, match="nn.faces.torch has no 'fft'"):
        _ = face.fft
    with pytest.raises(TypeError, match=r"spell it max\(axis=1\)"):
        x.max(dim=1)
    with pytest.raises(TypeError, match="no device"):
        x.to("cuda")
    with pytest.raises(ValueError, match="live on the CPU"):
        face.tensor(INTS, device="cuda")
    with pytest.raises(AttributeError, match="nn.faces.torch.nn has no 'GRU'"):
        _ = face.nn.GRU


def test_an_optimizer_built_before_a_lazy_models_first_call_says_so():
    model = nn.Sequential([nn.Dense(3)])
    with pytest.raises(ValueError, match="build on their first call.*call model\\(x\\)"):
        nn.SGD(params=model.trainable_variables, lr=0.1)
    with pytest.raises(ValueError, match="has no weights yet.*model\\(x\\)"):
        face.optim.SGD(model.parameters(), lr=0.1)


def test_no_grad_records_nothing_and_enable_grad_records_inside_it_as_torch():
    for T in (face, torch):
        w = T.tensor([2.0], requires_grad=True)
        with T.no_grad():
            assert not (w * w).requires_grad
            with T.enable_grad():
                assert (w * w).requires_grad
        assert (w * w).requires_grad and T.is_grad_enabled()
