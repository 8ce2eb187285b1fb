"""Dynamic loss scaling as a state machine: DynamicLossScale, LossScaleOptimizer, GradScaler.

Each face is driven by events ("finite", "inf", "nan" training steps) and compared with
``ReferenceScale`` (tests/properties/_scalers.py), which keeps the scale as an exact power of
two in integer exponents. The state machines check every law at every step; the tests below
them state each law on its own.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fpsim.testing import (
    FINITE,
    INF,
    NAN,
    SCALER_EVENTS,
    EventStream,
    scaler_event_streams,
    scaler_events,
)

from ._law import broke
from ._scalers import DLSDriver, GSDriver, LSODriver, ReferenceScale

OPTIMIZERS = ["sgd", "rmsprop", "adam"]
# a float32 power of two for a scale: tiny (the no-floor collapse is near), ordinary, or huge
SCALE_EXPONENTS = st.one_of(st.integers(-149, -140), st.integers(-4, 24), st.integers(118, 127))


def _long_stream_examples() -> int:
    """Examples for the 10**5-event laws: a few under "ci", more under "thorough"."""
    return max(2, settings().max_examples // 25)


# --- the state machines ---------------------------------------------------------------------------
class _ScalerMachine(RuleBasedStateMachine):
    """Rules shared by the three faces: a step, and a state_dict round trip at any point."""

    driver: DLSDriver | LSODriver | GSDriver
    ref: ReferenceScale
    law: str

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    @rule(event=st.sampled_from(SCALER_EVENTS))
    def step(self, event: str) -> None:
        self.events.append(event)
        applied = self.driver.step(event)
        expected = self.ref.step(event)
        assert applied == expected, broke(
            "a step is applied exactly when its gradients are finite", face=self.law,
            events=self.events, applied=applied)

    @rule()
    def state_dict_round_trip(self) -> None:
        self.events.append("state_dict round trip")
        before, after = self.driver.round_trip()
        assert before == after, broke("state_dict round-trips at any point", face=self.law,
                                      events=self.events, saved=before, loaded=after)

    @invariant()
    def scale_and_counter_match_the_reference(self) -> None:
        got = (self.driver.scale, self.driver.counter)
        want = (self.ref.scale, self.ref.counter)
        assert got == want, broke(
            "the scale after any event sequence is the reference model's", face=self.law,
            events=self.events, scale=got[0], counter=got[1], reference_scale=want[0],
            reference_counter=want[1])


class DynamicLossScaleMachine(_ScalerMachine):
    law = "DynamicLossScale"

    @initialize(e=SCALE_EXPONENTS, interval=st.integers(1, 5), grow=st.integers(1, 3),
                back=st.integers(1, 3), floor_below=st.none() | st.integers(0, 6),
                cap_above=st.none() | st.integers(0, 6))
    def build(self, e, interval, grow, back, floor_below, cap_above) -> None:
        floor = None if floor_below is None else max(e - floor_below, -149)
        cap = None if cap_above is None else min(e + cap_above, 127)
        config = {"initial_scale": 2.0**e, "growth_interval": interval,
                  "growth_factor": 2.0**grow, "backoff_factor": 2.0**-back,
                  "min_scale": None if floor is None else 2.0**floor,
                  "max_scale": None if cap is None else 2.0**cap}
        self.driver = DLSDriver(config)
        self.ref = ReferenceScale(e, interval, grow, back, floor, cap)


class LossScaleOptimizerMachine(_ScalerMachine):
    law = "LossScaleOptimizer"

    @initialize(e=st.integers(0, 24) | st.integers(118, 127), interval=st.integers(1, 5),
                inner=st.sampled_from(OPTIMIZERS))
    def build(self, e, interval, inner) -> None:
        self.driver = LSODriver(2.0**e, interval, inner)
        self.ref = ReferenceScale(e, interval, floor=0)  # tf.keras: never below 1

    @invariant()
    def iterations_count_every_step_skipped_or_not(self) -> None:
        steps = sum(ev in SCALER_EVENTS for ev in self.events)
        assert self.driver.opt.iterations == steps, broke(
            "iterations count every step, skipped or not (tf.keras)", events=self.events,
            iterations=self.driver.opt.iterations)


class GradScalerMachine(_ScalerMachine):
    law = "GradScaler"

    @initialize(e=SCALE_EXPONENTS, interval=st.integers(1, 5), grow=st.integers(1, 2),
                back=st.integers(1, 2), inner=st.sampled_from(OPTIMIZERS))
    def build(self, e, interval, grow, back, inner) -> None:
        self.driver = GSDriver(2.0**e, interval, 2.0**grow, 2.0**-back, inner)
        self.ref = ReferenceScale(e, interval, grow, back)  # PyTorch: no floor

    @rule(k=st.integers(-10, 30))
    def set_scale(self, k: int) -> None:
        """``update(new_scale)`` sets the scale and leaves the growth tracker alone."""
        self.events.append(f"update(new_scale=2**{k})")
        self.driver.scaler.scale(np.float32(1.0))
        self.driver.scaler.update(2.0**k)
        self.ref.e = k


TestDynamicLossScaleFollowsTheReferenceModel = DynamicLossScaleMachine.TestCase
TestLossScaleOptimizerFollowsTheReferenceModel = LossScaleOptimizerMachine.TestCase
TestGradScalerFollowsTheReferenceModel = GradScalerMachine.TestCase


# --- one law per test -----------------------------------------------------------------------------
def _driver(face: str, e: int, interval: int, inner: str = "sgd"):
    if face == "DynamicLossScale":
        return DLSDriver({"initial_scale": 2.0**e, "growth_interval": interval,
                          "growth_factor": 2.0, "backoff_factor": 0.5})
    if face == "LossScaleOptimizer":
        return LSODriver(2.0**e, interval, inner)
    return GSDriver(2.0**e, interval, inner=inner)


FACES = st.sampled_from(["DynamicLossScale", "LossScaleOptimizer", "GradScaler"])


@given(FACES, st.integers(0, 20), st.integers(1, 12), scaler_events(max_size=20))
def test_scale_doubles_exactly_after_n_consecutive_finite_steps(face, e, n, prefix):
    """After a non-finite step (which resets the count), n - 1 finite steps leave the scale
    alone and the n-th doubles it."""
    d = _driver(face, e, n)
    for event in [*prefix, INF]:
        d.step(event)
    start = d.scale
    scales = []
    for _ in range(n):
        d.step(FINITE)
        scales.append(d.scale)
    want = [start] * (n - 1) + [2 * start]
    assert scales == want, broke("growth exactly after N consecutive finite steps", face=face,
                                 N=n, events_before=[*prefix, INF], scales=scales, expected=want)


@given(FACES, st.integers(1, 24), st.integers(1, 5), scaler_events(max_size=20),
       st.sampled_from([INF, NAN]))
def test_scale_halves_on_inf_and_on_nan(face, e, interval, prefix, bad):
    """A step with an inf or a NaN gradient is skipped and halves the scale (above 1)."""
    d = _driver(face, e, interval)
    for event in prefix:
        d.step(event)
    before = d.scale
    applied = d.step(bad)
    want = before / 2 if face != "LossScaleOptimizer" else max(before / 2, 1.0)
    assert not applied and d.scale == want and d.counter == 0, broke(
        "a non-finite step is skipped and halves the scale", face=face, event=bad,
        events_before=prefix, scale_before=before, scale_after=d.scale, applied=applied)


@given(st.integers(0, 20), st.integers(1, 60), st.sampled_from(OPTIMIZERS))
def test_loss_scale_optimizer_scale_never_goes_below_one(e, k, inner):
    """k non-finite steps in a row take the scale 2**e to max(2**(e - k), 1), never below."""
    d = LSODriver(2.0**e, 2000, inner)
    for i in range(k):
        d.step(INF if i % 2 else NAN)
    assert d.scale == max(2.0 ** (e - k), 1.0), broke(
        "LossScaleOptimizer's scale has a floor of 1", initial_scale=2.0**e, nonfinite_steps=k,
        scale=d.scale)


@given(st.integers(-10, 20), st.integers(1, 200))
def test_grad_scaler_has_no_floor(e, k):
    """k non-finite steps in a row take the scale 2**e to 2**(e - k), down to float32's
    smallest subnormal 2**-149 and then to 0: nothing holds it at 1."""
    d = GSDriver(2.0**e, 2000)
    for i in range(k):
        d.step(INF if i % 2 else NAN)
    want = 2.0 ** (e - k) if e - k >= -149 else 0.0
    assert d.scale == want, broke("GradScaler's scale has no floor", initial_scale=2.0**e,
                                  nonfinite_steps=k, scale=d.scale, expected=want)


@given(FACES, st.integers(0, 20), st.integers(1, 5), scaler_events(max_size=30),
       scaler_events(max_size=30), st.sampled_from(OPTIMIZERS))
def test_state_dict_round_trips_at_any_point(face, e, interval, before, after, inner):
    """Saving the state after any events and loading it into a fresh scaler continues with
    exactly the scales of the scaler that was never interrupted."""
    straight, resumed = _driver(face, e, interval, inner), _driver(face, e, interval, inner)
    for event in before:
        straight.step(event)
        resumed.step(event)
    resumed.round_trip()
    a, b = [], []
    for event in after:
        straight.step(event)
        resumed.step(event)
        a.append((straight.scale, straight.counter))
        b.append((resumed.scale, resumed.counter))
    assert a == b, broke("state_dict round-trips at any point", face=face, events_before=before,
                         events_after=after, uninterrupted=a, resumed=b)


def _replay(driver, ref: ReferenceScale, stream: EventStream, law: str,
            bad: tuple[float, ...]) -> None:
    """Feed every event of ``stream`` to ``driver`` and ``ref``; the scale must match the
    reference and never take a value in ``bad`` (0.0 is checked via ==, inf and NaN below)."""
    for i, event in enumerate(stream):
        driver.step(event)
        ref.step(event)
        s = driver.scale
        if s != ref.scale or not np.isfinite(s) or s in bad:
            raise AssertionError(broke(law, stream=stream, counts=stream.counts(), step=i,
                                       scale=s, reference_scale=ref.scale))


@settings(max_examples=_long_stream_examples())
@given(scaler_event_streams(length=10**5))
def test_loss_scale_optimizer_scale_never_becomes_zero_inf_or_nan_over_long_streams(stream):
    """Under the documented defaults (2**15, 2000 steps, floor 1), 10**5 steps of any mix of
    finite and non-finite gradients keep the scale a finite power of two >= 1."""
    _replay(LSODriver(), ReferenceScale(15, 2000, floor=0), stream,
            "LossScaleOptimizer's scale never becomes 0, inf or NaN", bad=(0.0,))


@settings(max_examples=_long_stream_examples())
@given(scaler_event_streams(length=10**5))
def test_grad_scaler_scale_never_becomes_inf_or_nan_over_long_streams(stream):
    """Under PyTorch's defaults (2**16, 2000 steps, no floor) the scale over 10**5 steps stays
    finite and equals the reference; it is 0 only after more than 16 + 149 halvings net, which
    only long bursts of non-finite steps produce (the documented absence of a floor)."""
    _replay(GSDriver(), ReferenceScale(16, 2000), stream,
            "GradScaler's scale never becomes inf or NaN", bad=())


@settings(max_examples=_long_stream_examples())
@given(st.integers(0, 2**32 - 1), st.integers(-40, 20), st.integers(1, 12))
def test_grad_scaler_scale_never_becomes_zero_when_only_overflow_skips_steps(seed, centre,
                                                                           spread):
    """When a step is non-finite only because scale * gradient overflows fp16 (65504), the
    scale never collapses to 0 over 10**5 steps: a back-off needs scale >= 65520 / |g|, and
    every finite float32 gradient keeps that above 0. Gradient magnitudes are 2**x with x
    drawn around ``centre`` with the given spread (in binades)."""
    rng = np.random.default_rng(seed)
    exps = np.clip(np.rint(rng.normal(centre, spread, 10**5)), -126, 127)
    mags = np.ldexp(1.0, exps.astype(int))
    d = GSDriver()
    for i, g in enumerate(mags.tolist()):
        with np.errstate(over="ignore"):
            overflow = not np.isfinite(np.float16(g * d.scale))
        d.step(INF if overflow else FINITE)
        if not (np.isfinite(d.scale) and d.scale > 0):
            raise AssertionError(broke(
                "GradScaler's scale never becomes 0 when only overflow skips steps", seed=seed,
                centre=centre, spread=spread, step=i, gradient=g, scale=d.scale))
