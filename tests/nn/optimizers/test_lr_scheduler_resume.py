"""``last_epoch=`` of the PyTorch face's LR schedulers resumes a schedule as torch 2.13's does:
the learning rates of every param group, bit for bit, and torch's KeyError when a group lacks
its ``initial_lr``."""

from __future__ import annotations

from typing import Any

import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")

SCHEDULERS = {
    "StepLR": lambda T, o, e: T.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.3,
                                                          last_epoch=e),
    "LambdaLR": lambda T, o, e: T.optim.lr_scheduler.LambdaLR(
        o, [lambda k: 1 / (1 + k), lambda k: 0.95 ** k], last_epoch=e),
    "CosineAnnealingLR": lambda T, o, e: T.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=4, eta_min=0.01, last_epoch=e),
}


def optimizer(T: Any) -> Any:
    a, b = T.tensor([1.0], requires_grad=True), T.tensor([2.0], requires_grad=True)
    return T.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.07}], lr=0.1, momentum=0.9)


def resumed(T: Any, make: Any, epochs: int, more: int) -> list[list[float]]:
    opt = optimizer(T)
    sched = make(T, opt, -1)
    for _ in range(epochs):
        opt.step()
        sched.step()
    state = opt.state_dict()  # holds each group's lr and initial_lr
    opt = optimizer(T)
    opt.load_state_dict(state)
    sched = make(T, opt, epochs - 1)
    seq = [sched.get_last_lr()]
    for _ in range(more):
        opt.step()
        sched.step()
        seq.append(sched.get_last_lr())
    return seq


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("epochs", [1, 3, 5])
def test_last_epoch_resumes_the_lr_sequence_of_every_group_as_torch(name, epochs):
    make = SCHEDULERS[name]
    assert resumed(face, make, epochs, 9) == resumed(torch, make, epochs, 9)


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_last_epoch_without_initial_lr_raises_torchs_key_error(name):
    for T in (torch, face):
        with pytest.raises(KeyError, match=r"initial_lr' is not specified in param_groups\[0\]"):
            SCHEDULERS[name](T, optimizer(T), 4)


def test_last_epoch_must_be_an_integer_from_minus_one():
    for bad in (-2, 1.5, True):
        with pytest.raises(ValueError, match="last_epoch must be an integer >= -1"):
            face.optim.lr_scheduler.StepLR(optimizer(face), step_size=2, last_epoch=bad)
