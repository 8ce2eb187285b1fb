"""nn.plot: training figures whose artists carry the history's numbers.

Oracles: hand-built ``History`` objects (every number chosen here) and their own fields.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import nn.plot  # noqa: E402
from nn.history import History  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _history() -> History:
    h = History()
    for epoch, loss in enumerate([2.0, 1.0, 0.5]):
        h.record_epoch(epoch, {"loss": loss})
    for scale, skipped in [(2.0**15, False), (2.0**16, True), (2.0**15, False), (2.0**15, False)]:
        h.record_step(0.1, scale, skipped)
    sites = {"dense": {"activation": ["dense/grad_activation"]}}
    for under in (30, 10, 0):
        row = {"elements": 100, "underflow": under, "subnormal": 5, "overflow": 0}
        h.record_events({"dense/grad_activation": row}, sites)
    h.record_gradients("activation", np.float32([2.0**-30, 2.0**-30, 2.0**-20, 1.0]))
    return h


def test_loss_scale_timeline_steps_through_each_scale_and_marks_skipped_steps():
    ax = nn.plot.loss_scale_timeline(_history())
    line, marks = ax.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), [15, 16, 15, 15])
    np.testing.assert_array_equal(marks.get_xdata(), [1])
    np.testing.assert_array_equal(marks.get_ydata(), [16])
    assert marks.get_label() == "skipped steps (1)"


def test_loss_curves_plot_each_runs_epoch_losses_divided_by_the_scale():
    ax = nn.plot.loss_curves({"a": _history()}, scale=0.5)
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), [1, 2, 3])
    np.testing.assert_array_equal(line.get_ydata(), [4.0, 2.0, 1.0])
    assert ax.get_yscale() == "log"


def test_gradient_events_timeline_shows_each_epochs_shares():
    ax = nn.plot.gradient_events_timeline(_history())
    by_label = {ln.get_label(): ln.get_ydata() for ln in ax.get_lines()}
    np.testing.assert_allclose(by_label["underflow"], [0.30, 0.10, 0.0])
    np.testing.assert_allclose(by_label["subnormal"], [0.05, 0.05, 0.05])
    np.testing.assert_allclose(by_label["overflow"], [0.0, 0.0, 0.0])


def test_gradient_exponents_histograms_the_recorded_exponents_against_the_format():
    ax = nn.plot.gradient_exponents(_history(), "fp16")
    heights = [p.get_height() for p in ax.patches if p.get_height() > 0 and p.get_width() == 1]
    assert sorted(heights) == [1, 1, 2]  # 2^-30 twice, 2^-20 and 2^0 once each
    assert ax.get_title() == "float16: 50.0% underflow to 0, 0.0% overflow"
