"""How an optimizer writes ``w - update`` into a low-precision weight: the remedies for pure
bf16 (or fp16) weights without fp32 master copies.

A weight held in bf16 keeps 8 significant bits: once ``w`` is about 256 times larger than an
update, ``round(w - update) == w`` and the update is lost (*swamping*). Two remedies from the
literature keep such updates without an fp32 master copy (Zamirai, Zhang, Aberger, De Sa,
"Revisiting BFloat16 Training", arXiv:2010.06192, 2020):

- ``update_rounding="stochastic"``: the new value is rounded stochastically to the weight's
  format (up with probability equal to the dropped fraction of the last place), so
  ``E[new] = w - update`` exactly: small updates survive on average instead of never.
  ``w - update`` is formed in float64 (exact for float32 operands within 29 binades of each
  other) and rounded once. The random draws of step ``t`` for variable number ``i`` (in the
  optimizer's order) come from ``numpy.random.default_rng([seed, t, i])``: a function of the
  seed and the position only, so a resumed run draws what the uninterrupted one drew (the seed
  is in the optimizer's config, ``t`` its ``iterations``).
- ``kahan=True``: compensated (Kahan) summation of the updates. A slot ``compensation`` (in
  the weight's format, as the paper keeps it in bf16) holds what the rounding of the previous
  steps lost; each step (``c`` the compensation, ``u = -update``, computed in float64 like the
  stochastic update, each result rounded once to the weight's format where marked)::

      y = u - c
      s = round(w + y)          # the new weight
      c = round((s - w) - y)    # what this step added beyond y (its rounding error)
      w = s

  so ``w - c`` tracks ``w0 + sum(u)`` to about the compensation's own precision, and an
  update far below half an ulp of ``w`` accumulates in ``c`` until it moves ``w``. (In fp16 a
  compensation below fp16's smallest subnormal, 2^-24, is lost.)

The default, ``"nearest_even"`` without Kahan, is one nearest-even rounding of ``w - update``
(computed in the carrier) to the weight's format: what Keras and PyTorch do. Both remedies act
only where the weight's format is narrower than its carrier (a float32 weight is unchanged by
them). They cannot be combined here (one or the other, as in the paper's comparisons).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fpsim
from nn.engine.checks import count
from nn.engine.random import spawn_generator

NEAREST_EVEN, STOCHASTIC = "nearest_even", "stochastic"
COMPENSATION = "compensation"  # the Kahan slot's name


def needs_rounding(fmt: Any) -> bool:
    """True when values of ``fmt`` are a strict subset of the carrier's (fp16, bf16, fp8...)."""
    return fmt is not None and fmt != fpsim.FP32


@dataclass(frozen=True)
class WeightUpdate:
    """An optimizer's rule for ``w <- w - delta``: the rounding mode and whether updates are
    Kahan-compensated. Built (and validated) by ``weight_update``."""

    rounding: str = NEAREST_EVEN
    kahan: bool = False
    seed: int | None = None

    @property
    def slot_names(self) -> tuple[str, ...]:
        """The slots this rule adds to the optimizer's own."""
        return (COMPENSATION,) if self.kahan else ()

    def config(self) -> dict[str, Any]:
        """The optimizer config fields of this rule (none for the default)."""
        out: dict[str, Any] = {}
        if self.rounding != NEAREST_EVEN:
            out["update_rounding"], out["seed"] = self.rounding, self.seed
        if self.kahan:
            out["kahan"] = True
        return out

    def new_value(self, w: np.ndarray, delta: np.ndarray, fmt: Any,
                  slots: dict[str, np.ndarray], step: int, index: int) -> np.ndarray:
        """The new value of a weight ``w`` (carrier array, values in ``fmt``) after subtracting
        ``delta``; updates the compensation slot in place when ``kahan``."""
        if not needs_rounding(fmt):
            return w - delta
        if self.kahan:
            return _kahan(w, delta, fmt, slots[COMPENSATION])
        return _ROUNDINGS[self.rounding](self, w, delta, fmt, step, index)


def _nearest_even(rule: WeightUpdate, w: np.ndarray, delta: np.ndarray, fmt: Any, step: int,
                  index: int) -> np.ndarray:
    return np.asarray(fpsim.round(w - delta, fmt))  # one rounding into the variable's format


def _stochastic(rule: WeightUpdate, w: np.ndarray, delta: np.ndarray, fmt: Any, step: int,
                index: int) -> np.ndarray:
    exact = w.astype(np.float64) - delta.astype(np.float64)
    rng = np.random.default_rng([int(rule.seed or 0), step, index])
    return np.asarray(fpsim.round(exact, fmt, "stochastic", rng=rng), dtype=w.dtype)


_ROUNDINGS: dict[str, Callable[..., np.ndarray]] = {NEAREST_EVEN: _nearest_even,
                                                    STOCHASTIC: _stochastic}
UPDATE_ROUNDINGS = tuple(_ROUNDINGS)


def _kahan(w: np.ndarray, delta: np.ndarray, fmt: Any, c: np.ndarray) -> np.ndarray:
    w64 = w.astype(np.float64)
    y = -delta.astype(np.float64) - c  # float64: exact for float32 operands of close exponents
    s = np.asarray(fpsim.round(w64 + y, fmt))
    c[...] = fpsim.round((s - w64) - y, fmt)
    return s.astype(w.dtype)


def weight_update(owner: str, update_rounding: Any = NEAREST_EVEN, kahan: Any = False,
                  seed: Any = None) -> WeightUpdate:
    """The validated rule for an optimizer named ``owner``; errors name the argument, the
    value and what is allowed. ``seed=None`` with stochastic rounding draws a seed from nn's
    global generator (``nn.set_random_seed`` makes it reproducible) without consuming from it."""
    if not isinstance(update_rounding, str) or update_rounding not in _ROUNDINGS:
        raise ValueError(f"{owner}: update_rounding must be one of {list(UPDATE_ROUNDINGS)}, "
                         f"got {update_rounding!r}")
    if not isinstance(kahan, (bool, np.bool_)):
        raise TypeError(f"{owner}: kahan must be True or False, got {kahan!r}")
    if kahan and update_rounding != NEAREST_EVEN:
        raise ValueError(f"{owner}: kahan=True and update_rounding={update_rounding!r} are two "
                         "remedies for the same loss; choose one (kahan=True with "
                         "update_rounding='nearest_even', or kahan=False)")
    if update_rounding != STOCHASTIC:
        if seed is not None:
            raise ValueError(f"{owner}: seed={seed!r} drives update_rounding='stochastic' "
                             f"only; with update_rounding={update_rounding!r} leave it None")
        return WeightUpdate(update_rounding, bool(kahan), None)
    if seed is None:
        seed = int(spawn_generator().integers(2**63))
    return WeightUpdate(update_rounding, False, count(f"{owner}: seed", seed))
