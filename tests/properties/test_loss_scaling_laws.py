"""Laws of loss scaling in training: it is transparent, it rescues underflow, skipping is safe.

Models are drawn small (one or two ``Dense`` layers under mixed_float16, fp32 master weights)
with inputs and targets of controlled exponents. "No gradient under- or overflowed" is read
from ``fpsim.monitor`` around the backward pass: every gradient rounding of nn happens at a
monitor site (activation gradients at ``<layer>/grad_activation``, weight gradients at
``<layer>/grad_kernel`` and ``<layer>/grad_bias``), and a rounding that overflowed, flushed a
non-zero value to 0 (underflow) or produced a subnormal (gradual underflow, where fp16 loses
bits) counts as an event there.
"""

from __future__ import annotations

import numba
import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import fpsim
import nn
from fpsim.testing import INF, NAN, gradient_arrays
from nn.engine.tensor import Tensor, Variable
from nn.losses import mean_squared_error
from nn.precision.grad_scaler import GradScaler
from nn.precision.loss_scale import LossScaleOptimizer

from ._law import broke
from ._scalers import make_optimizer

RANGE_EVENTS = ("overflow", "underflow", "subnormal", "nan_created")


@st.composite
def small_models(draw: st.DrawFn) -> dict:
    """A model spec: 1-2 Dense layers (relu or linear), a batch of inputs and targets whose
    magnitudes are 2**-4 .. 2**4 (zeros mixed in), and a weight seed."""
    batch, n_in = draw(st.integers(1, 4), label="batch"), draw(st.integers(1, 4), label="n_in")
    layers = draw(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([None, "relu"])),
                           min_size=1, max_size=2), label="layers")
    n_out = layers[-1][0]
    x = draw(gradient_arrays(-4, 3, min_size=batch * n_in, max_size=batch * n_in), label="x")
    y = draw(gradient_arrays(-4, 3, min_size=batch * n_out, max_size=batch * n_out), label="y")
    return {"layers": layers, "seed": draw(st.integers(0, 2**16), label="seed"),
            "x": x.reshape(batch, n_in), "y": y.reshape(batch, n_out)}


class Run:
    """One forward and backward pass of a drawn model, with the monitor on the backward."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.layers = [nn.Dense(units, activation=act, dtype="mixed_float16",
                                seed=spec["seed"] + i)
                       for i, (units, act) in enumerate(spec["layers"])]

    def __call__(self, loss_factor: float, scale: float) -> dict:
        """Gradients of ``loss * loss_factor * scale``: fp32 master gradients, fp16 activation
        gradients, and the monitor's event totals."""
        for layer in self.layers:
            for v in layer.trainable_variables:
                v.zero_grad()
        h = Tensor(self.spec["x"], fmt=fpsim.FP32)
        outputs = []
        for layer in self.layers:
            h = layer(h)
            outputs.append(h)
        loss = mean_squared_error(self.spec["y"], h).mean() * loss_factor
        scaled = loss * scale  # the scaled loss, S * loss, in fp32
        threads = numba.get_num_threads()
        numba.set_num_threads(1)  # fpsim's counting kernels are parallel: for arrays this
        try:  # small, waking a second thread costs milliseconds on a busy machine
            with fpsim.monitor() as m, np.errstate(over="ignore", invalid="ignore"):
                scaled.backward()
        finally:
            numba.set_num_threads(threads)
        masters = [v.grad.data.copy() for layer in self.layers
                   for v in layer.trainable_variables]
        activations = [o.grad.data.copy() for o in outputs]
        return {"masters": masters, "activations": activations, "events": m.total()}


def _range_events(run: dict) -> dict[str, int]:
    return {k: run["events"][k] for k in RANGE_EVENTS if run["events"][k]}


def _nonzero(run: dict) -> int:
    return sum(int(np.count_nonzero(g)) for g in run["masters"] + run["activations"])


@given(small_models(), st.integers(0, 12), st.integers(0, 6))
def test_loss_scaling_is_transparent_when_no_gradient_under_or_overflows(spec, k, m):
    """backward(S * loss) / S gives the fp32 master gradients of backward(loss) bit for bit,
    for a power-of-two S, whenever neither run had a gradient under- or overflow."""
    model, scale, factor = Run(spec), 2.0**k, 2.0**-m
    plain, scaled = model(factor, 1.0), model(factor, scale)
    assume(not _range_events(plain) and not _range_events(scaled))
    for i, (g1, gs) in enumerate(zip(plain["masters"], scaled["masters"], strict=True)):
        unscaled = (gs / np.float32(scale)).astype(np.float32)
        assert unscaled.tobytes() == g1.tobytes(), broke(
            "loss scaling is transparent when nothing over- or underflows", layers=spec["layers"],
            seed=spec["seed"], x=spec["x"], y=spec["y"], loss_factor=factor, scale=scale,
            master_gradient=i, without_scaling=g1, scaled_then_divided=unscaled)


@given(small_models(), st.integers(10, 34))
def test_loss_scaling_loses_no_nonzero_gradient_when_unscaled_ones_underflow(spec, m):
    """If gradients underflow without scaling, the smallest power-of-two scale that removes
    every underflow (without overflowing) leaves at least as many non-zero gradient values
    (fp16 activation gradients and fp32 master gradients counted together).

    Not strictly more: an underflow inside the backward pass (one term of a sum flushed to
    zero) can leave the summed gradient non-zero all the same (seen: seed 11023, m = 22,
    26 non-zero values either way)."""
    model, factor = Run(spec), 2.0**-m
    plain = model(factor, 1.0)
    assume(plain["events"]["underflow"] > 0)
    for k in range(1, 60):
        scaled = model(factor, 2.0**k)
        ev = scaled["events"]
        if ev["overflow"] or ev["nan_created"]:
            assume(False)  # no scale clears the underflow before something overflows
        if ev["underflow"] == 0:
            break
    else:
        assume(False)
    assert _nonzero(scaled) >= _nonzero(plain), broke(
        "loss scaling loses no non-zero gradient when unscaled ones underflow",
        layers=spec["layers"], seed=spec["seed"], x=spec["x"], y=spec["y"], loss_factor=factor,
        scale=2.0**k, nonzero_without=_nonzero(plain), nonzero_with=_nonzero(scaled),
        underflows_without=plain["events"]["underflow"])


# --- skipping ---------------------------------------------------------------------------------
def _bits(arrays: list[np.ndarray]) -> list[bytes]:
    return [np.ascontiguousarray(a).tobytes() for a in arrays]


def _slots(opt) -> list[np.ndarray]:
    return [a for slots in opt.state_dict()["slots"] for a in slots.values()]


@st.composite
def _skip_case(draw: st.DrawFn) -> dict:
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3), label="variable_sizes")
    grads = st.tuples(*[gradient_arrays(-20, 4, min_size=n, max_size=n) for n in sizes])
    warmup = draw(st.lists(grads, min_size=1, max_size=3), label="finite_steps")
    bad = list(draw(grads, label="bad_step"))
    which = draw(st.integers(0, len(sizes) - 1), label="bad_variable")
    where = draw(st.integers(0, sizes[which] - 1), label="bad_index")
    bad[which][where] = draw(st.sampled_from([np.inf, -np.inf, np.nan]), label="bad_value")
    return {"sizes": sizes, "warmup": warmup, "bad": bad}


@given(_skip_case(), st.sampled_from(["sgd", "rmsprop", "adam"]),
       st.sampled_from(["LossScaleOptimizer", "GradScaler"]))
def test_skipped_step_leaves_every_variable_and_optimizer_slot_bit_identical(case, inner, face):
    """On a step whose gradients hold inf or NaN, every variable and every slot of SGD
    (momentum), RMSprop and Adam is bit-identical before and after."""
    ws = [Variable(np.linspace(-1, 1, n, dtype=np.float32), fmt=fpsim.FP32, name=f"w{i}")
          for i, n in enumerate(case["sizes"])]
    if face == "LossScaleOptimizer":
        opt = LossScaleOptimizer(make_optimizer(inner), initial_scale=2.0**4)
        inner_opt = opt.inner_optimizer

        def step(grads: list[np.ndarray]) -> None:
            opt.apply_gradients(zip(grads, ws, strict=True))
    else:
        inner_opt = make_optimizer(inner, params=ws)
        scaler = GradScaler(init_scale=2.0**4)

        def step(grads: list[np.ndarray]) -> None:
            scaler.scale(np.float32(1.0))
            for w, g in zip(ws, grads, strict=True):
                w.grad = Tensor._make(g * np.float32(scaler.get_scale()), fpsim.FP32)
            scaler.step(inner_opt)
            scaler.update()

    with np.errstate(all="ignore"):
        for grads in case["warmup"]:
            step([g.copy() for g in grads])
        before = _bits([w.data for w in ws]), _bits(_slots(inner_opt))
        step([g.copy() for g in case["bad"]])
    after = _bits([w.data for w in ws]), _bits(_slots(inner_opt))
    bad_kind = INF if any(np.isinf(g).any() for g in case["bad"]) else NAN
    assert after == before, broke(
        "skipping a non-finite step loses nothing", face=face, optimizer=inner,
        finite_steps=[list(g) for g in case["warmup"]], bad_step=case["bad"], bad=bad_kind,
        variables_after=[w.data for w in ws])
