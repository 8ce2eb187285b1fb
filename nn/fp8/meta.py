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
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

from fpsim import get_format
from nn.fp8.state import ScalingState

# the innermost layer being called (``nn.fp8.scope.layer_scope``), or the layer whose matmul's
# backward runs (``nn.fp8.ops``): the owner of the tensors quantized now
_LAYER: contextvars.ContextVar[Any] = contextvars.ContextVar("nn_fp8_layer", default=None)
# TE's slots of ``fp8_meta["scaling_fwd"]`` and ``["scaling_bwd"]`` (a Linear's GEMM)
FP8_NAMES = ("float8_e4m3fn", "float8_e5m2")  # the formats of per-tensor scaling states
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
        # every live state ever updated here under a callable ``amax_compute_algo``, by role
        self._callable: dict[str, weakref.WeakValueDictionary[int, ScalingState]] = {
            "forward": weakref.WeakValueDictionary(), "backward": weakref.WeakValueDictionary()}

    def stage(self, state: ScalingState, role: str, amax: float) -> None:
        state.stage(amax)
        self._staged[role][id(state)] = state

    def replace(self, old: ScalingState, new: ScalingState) -> None:
        """``new`` (a resized state) takes ``old``'s place in the buffers."""
        for staged in self._staged.values():
            if staged.pop(id(old), None) is not None:
                staged[id(new)] = new
        for known in self._callable.values():
            if known.pop(id(old), None) is not None and callable(new.algo):
                known[id(new)] = new

    def flush(self, role: str) -> None:
        """The update of every state of ``role`` staged since its last one (TE's fused
        ``reduce_and_update_fp8_tensors``).

        A callable ``amax_compute_algo`` takes TE's unfused update, which rolls the history of
        every module registered with the autocast's recipe, also of one that did not run in the
        block (the fused kernel skips a history with no new amax, as here). That difference is
        refused: when a state updated earlier under a callable algorithm is still alive and
        has staged nothing while another callable-algorithm state has, NotImplementedError is
        raised before anything updates (the staged amaxes stay for the next update)."""
        staged = self._staged[role]
        known = self._callable[role]
        if any(callable(st.algo) for st in staged.values()):
            idle = [st for key, st in list(known.items())
                    if key not in staged and callable(st.algo)]
            if idle:
                raise NotImplementedError(
                    f"amax_compute_algo is a callable and {len(idle)} {role} tensor(s) updated "
                    "under it before did not run in this te.autocast block: TE's unfused update "
                    "would roll their amax histories too, which is not modelled here. Run every "
                    "te.Linear in each block, or pass amax_compute_algo='max' or 'most_recent' "
                    "(TE's fused update, where a module that did not run keeps its history)")
        self._staged[role] = {}
        for key, state in staged.items():
            state.update(0.0)
            if callable(state.algo):
                known[key] = state

    def forget(self, states: Iterator[ScalingState] | list[ScalingState]) -> None:
        """Drop ``states`` from the buffers and the registry (a module's state was reset or
        replaced by a loaded one)."""
        for st in states:
            for table in (*self._staged.values(), *self._callable.values()):
                table.pop(id(st), None)


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
        UPDATES.forget(list(self.states.values()))
        self.states.clear()
        self.kind = None

    def state_dict(self) -> dict[str, Any]:
        """The module's fp8 state as JSON-able values (what ``te.Linear`` saves as its
        ``_extra_state``, TE's entry for its fp8 meta): ``kind`` ("delayed", "current" or
        None) and ``states``, each operand's ``ScalingState.state_dict()`` (format, scale,
        steps, amax history; an amax staged in the current block is in position 0). The
        history length, margin and algorithm are the recipe's: on the next use a recipe of
        other settings carries the state on as when the recipe object changes."""
        return {"kind": self.kind,
                "states": {op: st.state_dict() for op, st in self.states.items()}}

    def load_state_dict(self, state: Any, where: str = "fp8_meta") -> None:
        """Restore ``state_dict()``, all checked before anything changes: a bad field raises
        ValueError naming ``<where>.<field>``, the value and what is allowed."""
        if not isinstance(state, dict) or sorted(state) != ["kind", "states"]:
            got = sorted(state) if isinstance(state, dict) else state
            raise ValueError(f"{where} must be a mapping of kind and states "
                             f"(ModuleScaling.state_dict()), got {got!r:.80}")
        kind, saved = state["kind"], state["states"]
        if kind not in (None, "delayed", "current"):
            raise ValueError(f"{where}.kind must be 'delayed', 'current' or None, got {kind!r}")
        if not isinstance(saved, dict) or (kind is None and saved):
            raise ValueError(f"{where}.states must be a mapping of operand -> state (empty when "
                             f"kind is None), got {saved!r:.80}")
        states: dict[str, ScalingState] = {}
        for operand, entry in saved.items():
            at = f"{where}.states[{operand!r}]"
            name = entry.get("format") if isinstance(entry, dict) else None
            fmt = get_format(name) if name in FP8_NAMES else None
            history = entry.get("amax_history") if isinstance(entry, dict) else None
            if fmt is None or not isinstance(history, list) or not history:
                raise ValueError(f"{at} must hold a format name (float8_e4m3fn, float8_e5m2) and "
                                 f"a non-empty amax_history list, got {entry!r:.80}")
            st = ScalingState(fmt.max, len(history), "max", 0, fmt)
            st.load_state_dict(entry, at)
            states[operand] = st
        UPDATES.forget(list(self.states.values()))
        self.kind, self.states = kind, states

    def __repr__(self) -> str:
        return f"ModuleScaling(kind={self.kind!r}, states={sorted(self.states)})"
