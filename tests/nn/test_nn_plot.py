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
from nn.training.history import History  # noqa: E402


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


def _history_by_epoch() -> History:
    h = History()
    epochs = [np.float32([2.0**-30, 2.0**-30, 1.0]), np.float32([2.0**-20]),
              np.float32([2.0**-20, 2.0**-20, 2.0**-30, 4.0])]
    for epoch, values in enumerate(epochs):
        h.record_gradients("activation", values[: len(values) // 2])  # two steps an epoch
        h.record_gradients("activation", values[len(values) // 2:])
        h.record_epoch(epoch, {"loss": 1.0})
    return h


def test_epoch_exponent_counts_hold_each_epochs_gradients_and_sum_to_the_run():
    h = _history_by_epoch()
    per_epoch = h.epoch_exponent_counts["activation"]
    assert len(per_epoch) == 3
    np.testing.assert_array_equal(np.sum(per_epoch, axis=0), h.exponent_counts["activation"])
    bin_of = {e: e - int(h.exponent_edges[0]) for e in (-30, -20, 0, 2)}
    assert {e: int(per_epoch[0][b]) for e, b in bin_of.items()} == {-30: 2, -20: 0, 0: 1, 2: 0}
    assert {e: int(per_epoch[1][b]) for e, b in bin_of.items()} == {-30: 0, -20: 1, 0: 0, 2: 0}
    assert {e: int(per_epoch[2][b]) for e, b in bin_of.items()} == {-30: 1, -20: 2, 0: 0, 2: 1}


def test_gradient_exponents_over_time_colours_each_epochs_share_of_each_bin():
    h = _history_by_epoch()
    ax = nn.plot.gradient_exponents_over_time(h, "fp16")
    mesh = ax.collections[0]
    shares = np.asarray(mesh.get_array()).reshape(-1, 3)  # rows: exponents -30..2, cols: epochs
    rows = {e: e + 30 for e in (-30, -20, 0, 2)}
    np.testing.assert_allclose(shares[rows[-30]], [2 / 3, 0, 1 / 4])
    np.testing.assert_allclose(shares[rows[-20]], [0, 1, 2 / 4])
    np.testing.assert_allclose(shares[rows[0]], [1 / 3, 0, 0])
    np.testing.assert_allclose(shares[rows[2]], [0, 0, 1 / 4])
    np.testing.assert_allclose(shares.sum(axis=0), [1, 1, 1])
    assert sorted(line.get_ydata()[0] for line in ax.get_lines()) == [-24, -14, np.log2(65504)]


def test_gradient_exponents_over_time_without_telemetry_says_how_to_get_it():
    h = History()
    h.record_epoch(0, {"loss": 1.0})
    with pytest.raises(ValueError, match="telemetry=True"):
        nn.plot.gradient_exponents_over_time(h)


# --- the experiment picture: every seed, the verdict in the title, no empty panel -----------
def _seeded(name, config):
    from nn.experiments import seeds

    return seeds.run_seeds(name, [0, 1], config=config, processes=1)


def test_the_experiment_picture_marks_a_diverged_run_and_carries_the_verdict():
    import matplotlib.pyplot as plt

    from nn.experiments import LMConfig
    from nn.plot import experiment_draw

    tiny = LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=3)
    seeded = _seeded("adam-state", tiny)
    fig = experiment_draw(seeded)
    try:
        title = fig._suptitle.get_text()
        assert "Adam, fp16 slots > Adam, fp32 slots: shown" in title and "seeds 0, 1" in title
        curves = fig.axes[0]
        legend = [t.get_text() for t in curves.get_legend().get_texts()]
        assert legend[1] == "Adam, fp16 slots (loss not finite from step 1: 2 of 2 seeds)"
        # one thin line per seed and run, one mean per run, an x where each seed diverged
        markers = [ln for ln in curves.get_lines() if ln.get_marker() == "x"]
        assert len(markers) == 2 and all(ln.get_xdata()[0] == 1 for ln in markers)
        assert len(fig.axes) == 2  # the second moments against fp16's range
    finally:
        plt.close(fig)


def test_an_experiment_with_nothing_for_the_second_panel_draws_one_panel():
    import matplotlib.pyplot as plt

    from nn.experiments import CNNConfig
    from nn.plot import experiment_draw

    # master-weights trains without gradient telemetry and has no extra array to show
    small = CNNConfig(filters=(4, 8), batch_size=16, steps=2, optimizer="adam",
                      learning_rate=3e-4)
    fig = experiment_draw(_seeded("master-weights", small))
    try:
        assert len(fig.axes) == 1
        assert all(line.get_xydata().size for line in fig.axes[0].get_lines())
    finally:
        plt.close(fig)
