"""Property tests: the laws of the formats and of loss scaling, one hypothesis test per law.

Each test is named after the law it states, and a failure says which law broke and shows the
drawn example in plain numbers. The strategies come from ``fpsim.testing``.

Profiles (registered in tests/conftest.py):

- ``ci`` (the default): the whole folder runs in well under two minutes on a 2-core machine::

      .venv/bin/python -m pytest tests/properties -q

- ``thorough``: 2000 examples per test (longer event streams are replayed too)::

      FPSIM_HYPOTHESIS=thorough .venv/bin/python -m pytest tests/properties -q

Hypothesis keeps its example database in ``.hypothesis/`` (git-ignored), so a failure found
once is replayed first on the next run.
"""
