"""Shared pytest set-up: hypothesis profiles and the tests folder on sys.path."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

# "ci" (default): the whole suite fits the CI budget. "thorough": FPSIM_HYPOTHESIS=thorough.
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("FPSIM_HYPOTHESIS", "ci"))
