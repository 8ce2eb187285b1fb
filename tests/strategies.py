"""Shared hypothesis strategies: formats, values of a format, carrier floats, modes.

They live in ``fpsim.testing`` (importable by users); this module keeps the names the tests
have always imported from here.
"""

from __future__ import annotations

from fpsim.testing import (
    DETERMINISTIC_MODES,
    SMALL_CATALOG,
    catalog_formats,
    custom_formats,
    finite_values,
    float32_arrays,
    float32s,
    formats,
    gradient_arrays,
    modes,
    power_of_two_scales,
    scaler_event_streams,
    scaler_events,
)
from fpsim.testing import value_arrays as representable_arrays
from fpsim.testing import values_of as representable

__all__ = [
    "DETERMINISTIC_MODES", "SMALL_CATALOG", "catalog_formats", "custom_formats",
    "finite_values", "float32_arrays", "float32s", "formats", "gradient_arrays", "modes",
    "power_of_two_scales", "representable", "representable_arrays", "scaler_event_streams",
    "scaler_events",
]
