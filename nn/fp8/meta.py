"""Scaling state owned by a module, as Transformer Engine keeps it: a MODEL of TE's module
``fp8_meta`` (transformer_engine/pytorch/module/base.py: ``init_fp8_metadata``,
``set_meta_tensor``, ``adjust_amax_history_length``; NVIDIA/TransformerEngine at d0067d0).

In TE a recipe is configuration only: every module owns the ``ScalingState`` of each of its
tensors (input, weight, grad_output), so two modules under one recipe object keep separate
histories, and a module keeps its state when the next ``autocast`` gets another recipe object
of the same kind. ``ModuleScaling`` is that state for one layer (``te.Linear.fp8_meta``);
a per-tensor recipe asks the layer that runs the matmul for it (``Recipe.state``), forward and
backward alike (``nn.fp8.ops`` keeps the layer for the backward).

TE's rules when a recipe reaches a module that already has state:

- a recipe of the other per-tensor kind (delayed <-> current scaling) starts from fresh states
  (TE builds a new ``RecipeState``; ``inherit_state_from`` refuses another class);
- a recipe of the same kind keeps each tensor's scale, window and steps; the update follows the
  new recipe's format, margin and ``amax_compute_algo``; a new ``amax_history_len`` truncates
  the window to its first entries or pads it with zeros at the end
  (``adjust_amax_history_length``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

from nn.fp8.state import ScalingState

# the innermost layer being called (``nn.fp8.scope.layer_scope``), or the layer whose matmul's
# backward runs (``nn.fp8.ops``): the owner of the tensors quantized now
_LAYER: contextvars.ContextVar[Any] = contextvars.ContextVar("nn_fp8_layer", default=None)
# TE's slots of ``fp8_meta["scaling_fwd"]`` and ``["scaling_bwd"]`` (a Linear's GEMM)
SLOTS = {"scaling_fwd": ("input", "weight", "output"),
         "scaling_bwd": ("grad_output", "grad_input")}


class Block:
    """An outermost TE ``autocast`` block (nested ones share it): whether its first module has
    run yet (TE's ``is_first_fp8_module``; that module's backward updates the gradients)."""

    def __init__(self) -> None:
        self.first = True

    def take_first(self) -> bool:
        """True for the first caller only."""
        first, self.first = self.first, False
        return first


class DelayedUpdates:
    """TE's global amax buffers of delayed scaling (``FP8GlobalStateManager``), for states a
    module owns inside a TE ``autocast`` block: each cast stages its amax
    (``ScalingState.stage``) and the state is updated later, once: forward tensors at the exit
    of the outermost block when gradients are enabled (TE: ``torch.is_grad_enabled()``; under
    ``no_grad`` the staged amaxes wait for the next such exit), gradients at the end of the
    backward of the block's first module. Every cast of one tensor in one block uses the scale
    the block started with; its one update takes the largest amax staged."""

    def __init__(self) -> None:
        self._staged: dict[str, dict[int, ScalingState]] = {"forward": {}, "backward": {}}

    def stage(self, state: ScalingState, role: str, amax: float) -> None:
        state.stage(amax)
        self._staged[role][id(state)] = state

    def replace(self, old: ScalingState, new: ScalingState) -> None:
        """``new`` (a resized state) takes ``old``'s place in the buffers."""
        for staged in self._staged.values():
            if staged.pop(id(old), None) is not None:
                staged[id(new)] = new

    def flush(self, role: str) -> None:
        """The update of every state of ``role`` staged since its last one (TE's fused
        ``reduce_and_update_fp8_tensors``)."""
        staged, self._staged[role] = self._staged[role], {}
        for state in staged.values():
            state.update(0.0)


UPDATES = DelayedUpdates()  # one per process, as TE's FP8GlobalStateManager
_BLOCK: contextvars.ContextVar[Block | None] = contextvars.ContextVar("nn_fp8_te_block",
                                                                      default=None)


def deferring_block() -> Block | None:
    """The TE ``autocast`` block whose casts stage their amaxes here, else None."""
    return _BLOCK.get()


@contextlib.contextmanager
def block_scope(block: Block | None) -> Iterator[None]:
    """Casts inside stage their amaxes for ``block`` (None: they update at once)."""
    token = _BLOCK.set(block)
    try:
        yield
    finally:
        _BLOCK.reset(token)


def current_layer() -> Any:
    """The layer that owns the tensors quantized here (None outside any layer)."""
    return _LAYER.get()


def module_scaling() -> ModuleScaling | None:
    """The ``ModuleScaling`` of that layer (its ``fp8_meta``), if it keeps its own states."""
    meta = getattr(_LAYER.get(), "fp8_meta", None)
    return meta if isinstance(meta, ModuleScaling) else None


class ModuleScaling:
    """The per-tensor scaling states of one module, keyed by operand ("input", "weight",
    "grad_output"; "a", "b" for a bare matmul), made by the recipe that first uses them.

    >>> from nn.fp8 import DelayedScaling
    >>> meta = ModuleScaling()
    >>> meta.state("input", "forward", DelayedScaling(amax_history_len=2)).update(2.0)
    224.0
    >>> meta.state("input", "forward", DelayedScaling(amax_history_len=4)).amax_history
    array([0., 2., 0., 0.], dtype=float32)
    """

    def __init__(self) -> None:
        self.kind: str | None = None  # "delayed" or "current": the kind that made the states
        self.states: dict[str, ScalingState] = {}

    def state(self, operand: str, role: str, recipe: Any) -> ScalingState:
        """The state of ``operand`` under ``recipe`` (a per-tensor recipe), made on first use
        and carried across recipe objects by TE's rules (see the module docstring)."""
        kind = "current" if recipe.current else "delayed"
        if kind != self.kind:
            self.states.clear()
            self.kind = kind
        found = self.states.get(operand)
        fmt = recipe.format(role)
        settings = (fmt, recipe.amax_history_len, recipe.amax_compute_algo, recipe.margin)
        if found is not None and (found.fmt, found.history_len, found.algo,
                                  found.margin) == settings:
            return found
        fresh: ScalingState = recipe.new_state(role)
        if found is not None:
            fresh.scale, fresh.steps = found.scale, found.steps
            kept = found.amax_history[:fresh.history_len]
            fresh.amax_history = np.zeros(fresh.history_len, np.float32)
            fresh.amax_history[:kept.size] = kept
            UPDATES.replace(found, fresh)
        self.states[operand] = fresh
        return fresh

    def __getitem__(self, key: str) -> SimpleNamespace:
        """TE's ``fp8_meta["scaling_fwd"]`` / ``["scaling_bwd"]`` as a copy: ``scale`` (one per
        slot: input, weight, output / grad_output, grad_input) and ``amax_history`` (history
        length x slots); a slot nothing quantized holds scale 1 and zeros, as in TE."""
        if key not in SLOTS:
            raise KeyError(f"fp8_meta has {sorted(SLOTS)} (TE's per-tensor scaling state), got "
                           f"{key!r}")
        found = [self.states.get(slot) for slot in SLOTS[key]]
        rows = max((st.history_len for st in found if st is not None), default=0)
        history = np.zeros((rows, len(found)), np.float32)
        scale = np.ones(len(found), np.float32)
        for i, st in enumerate(found):
            if st is not None:
                history[:, i], scale[i] = st.amax_history, st.scale
        return SimpleNamespace(scale=scale, amax_history=history)

    def reset(self) -> None:
        """Forget every state (the next recipe starts from scale 1)."""
        self.states.clear()
        self.kind = None

    def __repr__(self) -> str:
        return f"ModuleScaling(kind={self.kind!r}, states={sorted(self.states)})"
