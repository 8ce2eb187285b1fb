"""Interactive explorers for the tutorials (ipywidgets), with a static rendering when headless.

- ``bit_explorer(fmt, value)``: click the bits of a code; see value, class and ``fpsim.explain``.
- ``value_slider(fmt, lo, hi, value)``: x between its neighbours, the rounded value, the error.
- ``format_builder(E, M, bias, nan, subnormals)``: a format's range and its number line.
- ``loss_scale_slider(gradients, fmt, log2_scale)``: a gradient histogram scaled by 2^k against
  the format's range, with the share that underflows or overflows.
- ``rounding_comparer(x, fmt)``: x rounded in every mode.

Each returns an ipywidgets box in a live notebook and a ``StaticView`` (text and a figure) when
nobody can click: see ``fpsim.widgets.render`` for the rule (``FPSIM_WIDGETS``, ipywidgets
missing, no kernel, a non-interactive ``MPLBACKEND``). Their callbacks are the pure functions of
``fpsim.widgets.logic``. ipywidgets is optional (the ``tutorials`` extra) and imported lazily.
"""

from fpsim.widgets.logic import (
    CodeView,
    ModeResult,
    Neighbourhood,
    ScaledFates,
    bit_roles,
    build_format,
    compare_modes,
    decode_code,
    format_facts,
    neighbourhood,
    scaled_fates,
    to_code,
    toggle_bit,
)
from fpsim.widgets.render import StaticView, rendering
from fpsim.widgets.ui import (
    bit_explorer,
    format_builder,
    loss_scale_slider,
    rounding_comparer,
    value_slider,
)
