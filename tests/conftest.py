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

# Tests write only to temporary directories: a file that appears at the repository root during
# the run (not a dot-folder such as .pytest_cache or .hypothesis) fails the run.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BEFORE: set[str] = set()


def _root_entries() -> set[str]:
    return {name for name in os.listdir(_ROOT) if not name.startswith(".")}


def pytest_sessionstart(session):  # noqa: ANN001, ANN201 (pytest's hook signature)
    _BEFORE.update(_root_entries())


def pytest_sessionfinish(session, exitstatus):  # noqa: ANN001, ANN201
    new = sorted(_root_entries() - _BEFORE)
    if new and not hasattr(session.config, "workerinput"):  # the controller (or a plain run)
        print(f"\ntests wrote {new} at the repository root; write to tmp_path instead")
        session.exitstatus = 1
