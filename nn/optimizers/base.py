"""The optimizer base class (both calling conventions, slots, swamping telemetry, state) and
the argument rules shared by the optimizers (``learning_rate`` vs ``lr``, params first)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

import fpsim
from nn.engine.checks import count, number
from nn.engine.formats import resolve_format
from nn.engine.tensor import Tensor
from nn.layers.module import clear_grads  # the one rule, shared with Module.zero_grad
from nn.optimizers.param_groups import ParamGroup
from nn.optimizers.remedies import needs_rounding as _needs_rounding
from nn.optimizers.remedies import weight_update
from nn.optimizers.schedules import LearningRateSchedule
from nn.optimizers.schedules import deserialize as _deserialize_schedule
from nn.optimizers.schedules import serialize as _serialize_schedule


def _name_of(var: Any) -> str:
    return str(getattr(var, "name", None) or f"<variable {id(var):#x}>")


def gradient_array(grad: Any) -> np.ndarray:
    """The ndarray behind a gradient: an ``nn.Tensor``'s ``.data`` or an array-like itself."""
    data = grad.data if hasattr(grad, "data") and not isinstance(grad, np.ndarray) else grad
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"a gradient must be numeric, got an array of dtype {arr.dtype}")
    return arr


_PARAMS_HINT = ("pass them first, SGD(model.parameters(), lr=0.1), or as params=[...], or use "
                "apply_gradients(zip(grads, variables))")


def _is_params(value: object) -> bool:
    """True for what a PyTorch optimizer takes first: an iterable of variables (a list, a
    generator such as ``model.parameters()``), not a number, string or array."""
    return hasattr(value, "__iter__") and not isinstance(value, (str, bytes, np.ndarray))


def learning_rate_args(cls_name: str, first: Any, lr: Any, params: Iterable[Any] | None,
                       extra: tuple[Any, ...], keras_default: float, torch_default: float
                       ) -> tuple[float | LearningRateSchedule, Iterable[Any] | None, bool]:
    """(learning rate, params, PyTorch face?) from both calling conventions.

    ``first`` is the first positional argument: a learning rate (Keras) or the parameters
    (PyTorch). ``lr`` and ``learning_rate`` together raise; a bad value raises a ValueError
    naming the argument as the user wrote it.
    """
    if extra:
        raise TypeError(f"{cls_name}: only the first argument may be positional; pass the "
                        f"others by keyword, e.g. {cls_name}(model.parameters(), lr=0.1) or "
                        f"{cls_name}(learning_rate=0.1) (got extra positional {extra!r})")
    torch_face = first is not None and _is_params(first)
    if torch_face:
        if params is not None:
            raise ValueError(f"{cls_name}: parameters given twice (first argument and params=)")
        params, first = first, None
    if first is not None and lr is not None:
        raise ValueError(f"{cls_name}: got both learning_rate={first!r} and lr={lr!r}; pass one "
                         "(lr is PyTorch's spelling, learning_rate Keras's)")
    if lr is not None:
        written, value = "lr", lr
    elif first is not None:
        written, value = "learning_rate", first
    else:
        written = "lr" if torch_face else "learning_rate"
        value = torch_default if torch_face else keras_default
    if isinstance(value, LearningRateSchedule):  # Keras's learning_rate=schedule
        return value, params, torch_face
    return number(f"{cls_name}: {written}", value, lo=0.0, hi=math.inf), params, torch_face


class Optimizer:
    """Base class: variable tracking, slots, swamping telemetry, state and both faces.

    Subclasses set ``slot_names`` and implement ``_update(g, w, slots, t)``, which updates the
    slots in place (passing each through ``_store``) and returns the amount to subtract from
    ``w`` (in w's dtype).

    ``slot_dtype`` (None or a format name, e.g. "float16"): None keeps the slots in the
    variable's carrier dtype (fp32, what Keras and PyTorch do); a format stores every slot
    rounded to it (nearest-even) right after each update, and the constant that lives beside
    them (epsilon) rounded to it too, as an optimizer whose state is kept in that format:
    in fp16 Adam's epsilon 1e-8 is 0 and a second moment below 2**-24 (a gradient below about
    2**-12) is 0, so the step divides by zero.

    ``update_rounding`` ("nearest_even", the default, or "stochastic", drawn from ``seed``) and
    ``kahan`` (compensated summation, a ``compensation`` slot) choose how ``w - update`` is
    written into a weight narrower than its carrier (pure bf16/fp16 weights): see
    ``nn.optimizers.remedies``.
    """

    slot_names: tuple[str, ...] = ()

    supports_param_groups: ClassVar[bool] = False
    """True for an optimizer whose update reads each param group's hyperparameters (the
    PyTorch face's SGD and Adam: ``SGD([{"params": ..., "lr": ...}, ...])``,
    ``add_param_group``); the others hold one group, whose ``"lr"`` is their learning rate."""

    def __init__(self, learning_rate: float | LearningRateSchedule, *,
                 params: Iterable[Any] | None = None, name: str | None = None,
                 slot_dtype: str | None = None, update_rounding: str = "nearest_even",
                 kahan: bool = False, seed: int | None = None) -> None:
        self.name = name or type(self).__name__
        self.slot_dtype, self.slot_format = _slot_format(self.name, slot_dtype)
        self.weight_update = weight_update(self.name, update_rounding, kahan, seed)
        self.slot_names = (*self.slot_names, *self.weight_update.slot_names)
        self.learning_rate = learning_rate
        self.iterations = 0
        self.swamped_updates = 0
        self.swamped_counts: dict[str, int] = {}
        self._variables: list[Any] = []
        self._index: dict[int, int] = {}
        self._slots: list[dict[str, np.ndarray]] = []
        self._group_index: dict[int, int] = {}
        self.params: list[Any] | None = None
        self._param_groups: list[ParamGroup] | None = None
        if params is not None:
            specs = self._group_specs(params)
            self.params = [p for spec in specs for p in spec["params"]]
            if not self.params:
                raise ValueError(
                    f"{self.name}: params= is an empty list. An nn model builds its weights on "
                    "its first call, so a model whose layers build on their first call "
                    "(Dense(units), Linear without in_features...) has no parameters yet: call "
                    "model(x) (or model.build(input_shape)) first, or make it from nn.Input, "
                    "then build the optimizer from model.parameters() / "
                    "model.trainable_variables")
            self._param_groups = []
            for spec in specs:
                self._add_group(spec)

    # ---- validated attributes ------------------------------------------------------------
    @property
    def learning_rate(self) -> float:
        """The step size, a finite number >= 0 (checked on every assignment); for a Keras
        ``LearningRateSchedule`` (``nn.optimizers.schedules``), its value at ``iterations``
        (the updates applied before the next one), as Keras 3 reads it."""
        rate = self._learning_rate
        if isinstance(rate, LearningRateSchedule):
            return float(rate(self.iterations))
        return rate

    @learning_rate.setter
    def learning_rate(self, value: float | LearningRateSchedule) -> None:
        self._learning_rate: float | LearningRateSchedule = (
            value if isinstance(value, LearningRateSchedule)
            else number("learning_rate", value, lo=0.0, hi=math.inf))

    @property
    def iterations(self) -> int:
        """Updates applied so far (Adam's bias correction uses it); an integer >= 0."""
        return self._iterations

    @iterations.setter
    def iterations(self, value: int) -> None:
        self._iterations = count(f"{self.name}: iterations", value)

    @property
    def lr(self) -> float:
        """PyTorch's name for ``learning_rate`` (checked under that name when set)."""
        return self.learning_rate

    @lr.setter
    def lr(self, value: float) -> None:
        self._learning_rate = number("lr", value, lo=0.0, hi=math.inf)

    @property
    def param_groups(self) -> list[ParamGroup]:
        """PyTorch's ``optimizer.param_groups``: a list of groups, each a mapping of
        ``"params"`` and the group's hyperparameters. The first group's ``"lr"`` *is* this
        optimizer's learning rate (reading it reads ``lr``, writing it sets ``lr``: what LR
        schedulers do); other entries are stored as written (``initial_lr``). Optimizers
        without ``supports_param_groups`` hold that one group only."""
        if self._param_groups is None:
            self._param_groups = [ParamGroup(self, None, self._group_defaults(), live_lr=True)]
        return self._param_groups

    # ---- param groups --------------------------------------------------------------------
    def _group_defaults(self) -> dict[str, Any]:
        """The hyperparameters (PyTorch's names) a new group takes unless it names its own,
        besides ``"lr"``: PyTorch's ``optimizer.defaults``. None for the one-group optimizers."""
        return {}

    def _checked_group(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` of a new group (``"lr"`` and the defaults filled in), validated: the
        optimizers with param groups refuse a value they do not support."""
        return options

    def _group_specs(self, params: Iterable[Any]) -> list[dict[str, Any]]:
        """PyTorch's ``params`` argument (an iterable of tensors, or of dicts, one per group)
        as a list of group dicts, each with a list under ``"params"``."""
        items = list(params)
        if not any(isinstance(item, dict) for item in items):
            return [{"params": items}]
        if not all(isinstance(item, dict) for item in items):
            raise TypeError(f"{self.name}: params mixes tensors and param-group dicts; pass "
                            "either tensors or dicts such as {'params': [...], 'lr': 0.1}")
        if not self.supports_param_groups and (len(items) > 1 or set(items[0]) != {"params"}):
            raise TypeError(f"{self.name} holds one param group (Keras's formulas, one set of "
                            "hyperparameters); per-group hyperparameters are the PyTorch "
                            "face's: nn.faces.torch.optim.SGD / Adam([{'params': ...}, ...])")
        return items

    def _add_group(self, spec: dict[str, Any]) -> list[Any]:
        if "params" not in spec:
            raise ValueError(f"{self.name}: a param group must have a 'params' entry, got keys "
                             f"{sorted(spec)}")
        found = spec["params"]
        params = [found] if isinstance(found, Tensor) else list(found)
        for p in params:
            if id(p) in self._group_index or sum(q is p for q in params) > 1:
                raise ValueError(f"{self.name}: some parameters appear in more than one "
                                 f"parameter group ({_name_of(p)})")
        assert self._param_groups is not None
        first = not self._param_groups
        options = self._group_defaults() | {"lr": self.lr} | {
            k: v for k, v in spec.items() if k != "params"}
        options = self._checked_group(options)
        if first:  # its lr is the optimizer's (which may be a Keras schedule: kept unless set)
            lr = options.pop("lr")
            if "lr" in spec:
                self.lr = lr
        group = ParamGroup(self, params, options, live_lr=first)
        self.build(params)
        for p in params:
            self._group_index[id(p)] = len(self._param_groups)
        self._param_groups.append(group)
        return params

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """PyTorch's ``add_param_group``: a new group of params with its own hyperparameters
        (the optimizer's defaults for the ones it leaves out); optimizers with
        ``supports_param_groups`` only."""
        if not isinstance(param_group, dict):
            raise TypeError(f"{self.name}.add_param_group: param_group must be a dict such as "
                            f"{{'params': [...], 'lr': 0.01}}, got {type(param_group).__name__}")
        if not self.supports_param_groups:
            raise TypeError(f"{self.name} holds one param group; add_param_group is the "
                            "PyTorch face's: nn.faces.torch.optim.SGD / Adam")
        if self.params is None:
            raise RuntimeError(f"{self.name}.add_param_group: build the optimizer from params "
                               f"first; {_PARAMS_HINT}")
        self.params.extend(self._add_group(param_group))

    def _group_of(self, var: Any) -> ParamGroup:
        """The group ``var`` belongs to (the first group for a variable given only through
        ``apply_gradients``)."""
        return self.param_groups[self._group_index.get(id(var), 0)]

    # ---- variables and slots -------------------------------------------------------------
    @property
    def variables(self) -> list[Any]:
        """The variables this optimizer holds slots for, in the order they were first seen."""
        return list(self._variables)

    def build(self, variables: Iterable[Any]) -> None:
        """Create zero slots (in each variable's carrier dtype) for variables not yet seen."""
        for var in variables:
            if id(var) in self._index:
                continue
            data = getattr(var, "data", None)
            if not isinstance(data, np.ndarray) or data.dtype not in (np.float32, np.float64):
                raise TypeError(f"{self.name}: {_name_of(var)} is not a variable with a "
                                f"float32/float64 .data array (got {type(var).__name__})")
            self._index[id(var)] = len(self._variables)
            self._variables.append(var)
            self._slots.append({s: self._zero_slot(s, data) for s in self.slot_names})

    def _zero_slot(self, slot_name: str, like: np.ndarray) -> np.ndarray:
        """A fresh slot for a variable whose values are ``like``: zeros of its shape and
        dtype (a subclass may keep a scalar slot, such as a step count)."""
        return np.zeros_like(like)

    def get_slot(self, var: Any, slot_name: str) -> np.ndarray:
        """The slot array (live, not a copy) named ``slot_name`` of ``var``."""
        if id(var) not in self._index:
            raise KeyError(f"{self.name} holds no slots for {_name_of(var)}")
        if slot_name not in self.slot_names:
            raise KeyError(f"{self.name} has slots {self.slot_names}, not {slot_name!r}")
        return self._slots[self._index[id(var)]][slot_name]

    def preview_update(self, var: Any, grad: Any, weight: np.ndarray | None = None
                       ) -> np.ndarray:
        """The update (``delta``; the step stores ``weight - delta``, rounded to the
        variable's format) that the next ``apply_gradients`` would make to ``var`` for
        ``grad``, computed on a copy of ``var``'s slots: nothing changes (slots,
        ``iterations``, the variable). ``weight`` (default ``var.data``) is the value the
        update starts from; an optimizer with no slots for ``var`` yet starts from zero slots,
        as its first step would. The result is in ``weight``'s carrier dtype (float32 or
        float64)."""
        w = np.array(var.data if weight is None else weight, copy=True)
        g = gradient_array(grad)
        if g.shape != w.shape:
            raise ValueError(f"{self.name}.preview_update: grad for {_name_of(var)} has shape "
                             f"{g.shape}, expected the variable's shape {w.shape}")
        held = self._slots[self._index[id(var)]] if id(var) in self._index else None
        slots = ({s: self._zero_slot(s, w) for s in self.slot_names} if held is None
                 else {k: a.copy() for k, a in held.items()})
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asarray(self._update_in_group(g.astype(w.dtype, copy=False), w, slots,
                                                    self.iterations + 1, self._group_of(var)))

    # ---- the Keras face -----------------------------------------------------------------
    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> int:
        """Apply one update to every variable whose gradient is not None; returns iterations.

        - Gradients may be ``nn.Tensor``, ndarray or None (None: the variable is skipped).
        - Each gradient must have its variable's shape (no broadcasting).
        - Everything is validated before any variable changes.
        - ``iterations`` increases by one per call.
        """
        self._apply_prepared(self._prepare(grads_and_vars))
        return self.iterations

    def _prepare(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> list[tuple[np.ndarray, Any]]:
        pairs = list(grads_and_vars)
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"{self.name}.apply_gradients takes (gradient, variable) pairs, "
                                f"e.g. zip(grads, variables); got an element {pair!r:.80}")
        present = [(g, v) for g, v in pairs if g is not None]
        if not present:
            names = ", ".join(_name_of(v) for _, v in pairs) or "none given"
            raise ValueError(f"{self.name}: no gradients provided for any variable ({names})")
        prepared = []
        for g, var in present:
            w = var.data
            arr = gradient_array(g)
            if arr.shape != w.shape:
                raise ValueError(f"{self.name}: gradient for {_name_of(var)} has shape "
                                 f"{arr.shape}, expected the variable's shape {w.shape}")
            prepared.append((arr.astype(w.dtype, copy=False), var))
        return prepared

    def _apply_prepared(self, prepared: list[tuple[np.ndarray, Any]]) -> None:
        self.build(var for _, var in prepared)
        t = self.iterations + 1  # Keras's local_step
        for g, var in prepared:
            w = var.data
            if getattr(var, "overwrite_with_gradient", False):  # Keras 3's: its new value
                var.assign(g)
                continue
            slots = self._slots[self._index[id(var)]]
            group = self._group_of(var)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                delta = self._update_in_group(g, w, slots, t, group)
                new = self._new_weight(g, w, delta, var, slots, t, group)
            swamped = int(np.count_nonzero((new == w) & (delta != 0)))
            if swamped:
                self.swamped_updates += swamped
                key = _name_of(var)
                self.swamped_counts[key] = self.swamped_counts.get(key, 0) + swamped
            np.copyto(w, new)
        self.iterations += 1

    def _update(self, g: np.ndarray, w: np.ndarray, slots: dict[str, np.ndarray],
                t: int) -> np.ndarray:
        raise NotImplementedError

    def _new_weight(self, g: np.ndarray, w: np.ndarray, delta: np.ndarray, var: Any,
                    slots: dict[str, np.ndarray], t: int, group: ParamGroup) -> np.ndarray:
        """The value ``w`` takes after the update ``delta`` (``_update_in_group``'s, with the
        slots already updated): ``w - delta`` into the variable's format by ``weight_update``'s
        rule. The PyTorch face's SGD overrides it to round PyTorch's fused ``w - lr * step``
        once."""
        return self.weight_update.new_value(w, delta, getattr(var, "fmt", None), slots, t,
                                            self._index[id(var)])

    def _update_in_group(self, g: np.ndarray, w: np.ndarray, slots: dict[str, np.ndarray],
                         t: int, group: ParamGroup) -> np.ndarray:
        """``_update`` with the hyperparameters of ``group`` (the variable's param group): the
        one-group optimizers read their own attributes; those with ``supports_param_groups``
        override this."""
        return self._update(g, w, slots, t)

    def _store(self, slot: np.ndarray) -> np.ndarray:
        """``slot`` (just updated in place) rounded in place to ``slot_dtype`` when one is set,
        so the rest of the update reads the stored value; returns ``slot``."""
        if self.slot_format is not None:
            fpsim.round(slot, self.slot_format, out=slot)
        return slot

    def _state_constant(self, value: float, dtype: np.dtype) -> Any:
        """A constant that lives beside the slots (epsilon) in ``dtype``, rounded to
        ``slot_dtype`` when one is set: Adam's 1e-8 is 0 in fp16."""
        c = dtype.type(value)
        if self.slot_format is not None:
            c = dtype.type(fpsim.round(np.asarray(c), self.slot_format))
        return c

    # ---- the PyTorch face ---------------------------------------------------------------
    def _require_params(self, what: str) -> list[Any]:
        """The params this optimizer knows: those it was built with, else the variables it
        has updated through ``apply_gradients``; none: a RuntimeError saying how to pass them."""
        if self.params is not None:
            return self.params
        if self._variables:
            return list(self._variables)
        raise RuntimeError(f"{self.name}.{what} does not know any parameters yet: "
                           f"{_PARAMS_HINT}")

    def step(self) -> None:
        """Apply each param's ``.grad`` (params without a gradient are skipped; none: no-op)."""
        params = self._require_params("step()")
        pairs = [(p.grad, p) for p in params if p.grad is not None]
        if pairs:
            self.apply_gradients(pairs)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the ``.grad`` of every param this optimizer knows (built with, or updated
        through ``apply_gradients``): to None, or with ``set_to_none=False`` to zeros in place.

        Backward passes accumulate into ``.grad`` (as in PyTorch), so a loop calls this once
        per step."""

        clear_grads(self._require_params("zero_grad()"), set_to_none)

    # ---- config and state ---------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments (Keras style); ``type(opt).from_config(cfg)`` rebuilds it."""
        rate = self._learning_rate
        config: dict[str, Any] = {"name": self.name, "learning_rate": (
            _serialize_schedule(rate) if isinstance(rate, LearningRateSchedule) else rate)}
        if self.slot_dtype is not None:
            config["slot_dtype"] = self.slot_dtype
        return config | self.weight_update.config()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        if isinstance(config.get("learning_rate"), dict):  # a serialized schedule
            config = {**config, "learning_rate": _deserialize_schedule(config["learning_rate"])}
        return cls(**config)

    def state_dict(self) -> dict[str, Any]:
        """Copies of the mutable state: ``iterations``, variable names and slots (in order),
        and ``param_groups``: each group's hyperparameters (the learning rate and what
        schedulers stored beside it) and, as PyTorch's, its params as indices into
        ``variables``."""
        groups = []
        for group in self.param_groups:
            saved = {k: group[k] for k in group if k != "params"}
            if group.holds_params:
                saved["params"] = [self._index[id(p)] for p in group["params"]]
            groups.append(saved)
        return {
            "iterations": self.iterations,
            "variables": [_name_of(v) for v in self._variables],
            "slots": [{k: a.copy() for k, a in s.items()} for s in self._slots],
            "param_groups": groups,
        }

    def load_state_dict(self, state: dict[str, Any], variables: Iterable[Any] | None = None
                        ) -> None:
        """Restore ``state_dict()`` output; ``variables`` (same order as saved) are built first.

        Raises ValueError, changing nothing, if the number of variables, a slot name, a shape
        or a dtype differs.
        """
        if variables is not None:
            self.build(variables)
        try:
            iterations = state["iterations"]
            slots = list(state["slots"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{self.name}: not an optimizer state dict ({e!r}); expected keys "
                             "'iterations' and 'slots'") from None
        iterations = count(f"{self.name}: iterations", iterations)
        groups = state.get("param_groups")
        if groups is not None:  # (absent from states saved before param_groups existed)
            self._check_groups(groups)
        if not slots and iterations == 0:
            # saved before the first step: nothing was built, and fresh slots (zeros) are
            # exactly what that optimizer would have built
            for mine in self._slots:
                for arr in mine.values():
                    arr[...] = 0
            self.iterations = 0
            if groups is not None:
                self._load_groups(groups)
            return
        if len(slots) != len(self._slots):
            raise ValueError(f"{self.name}: state holds slots for {len(slots)} variables, this "
                             f"optimizer tracks {len(self._slots)}; pass variables= to build")
        for i, (saved, mine) in enumerate(zip(slots, self._slots, strict=True)):
            name = _name_of(self._variables[i])
            if set(saved) != set(mine):
                raise ValueError(f"{self.name}: slots of {name} are {sorted(saved)}, "
                                 f"expected {sorted(mine)}")
            for k, arr in saved.items():
                arr = np.asarray(arr)
                if arr.shape != mine[k].shape or arr.dtype != mine[k].dtype:
                    raise ValueError(f"{self.name}: slot {k!r} of {name} is {arr.dtype}"
                                     f"{arr.shape}, expected {mine[k].dtype}{mine[k].shape}")
        for saved, mine in zip(slots, self._slots, strict=True):
            for k, arr in saved.items():
                np.copyto(mine[k], arr)
        self.iterations = iterations
        if groups is not None:
            self._load_groups(groups)

    def _check_groups(self, groups: Any) -> None:
        """Refuse (ValueError) saved ``param_groups`` that do not match this optimizer's: the
        number of groups, an lr, the size of a group (PyTorch's checks)."""
        mine = self.param_groups
        if not (isinstance(groups, (list, tuple)) and len(groups) == len(mine)
                and all(isinstance(g, dict) and "lr" in g for g in groups)):
            raise ValueError(f"{self.name}: param_groups must be {len(mine)} group(s) with an "
                             f"'lr' each, as this optimizer holds; got {groups!r:.100}")
        for i, (saved, group) in enumerate(zip(groups, mine, strict=True)):
            number(f"param_groups[{i}]['lr']", saved["lr"], lo=0.0, hi=math.inf)
            if "params" in saved and group.holds_params and len(saved["params"]) != len(
                    group["params"]):
                raise ValueError(f"{self.name}: loaded state dict contains a parameter group "
                                 f"that doesn't match the size of optimizer's group {i} "
                                 f"({len(saved['params'])} params, expected "
                                 f"{len(group['params'])})")

    def _load_groups(self, groups: list[dict[str, Any]]) -> None:
        for saved, group in zip(groups, self.param_groups, strict=True):
            for k, v in saved.items():
                if k != "params":
                    group[k] = v

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def _slot_format(cls_name: str, slot_dtype: str | None) -> tuple[str | None, Any]:
    """(name, Format) of ``slot_dtype``: None keeps the slots in the variable's carrier dtype
    (fp32); a narrower format name ("float16", "bfloat16", ...) stores them rounded to it."""
    if slot_dtype is None:
        return None, None

    fmt = resolve_format(slot_dtype, f"{cls_name}: slot_dtype")
    if fmt is None:
        raise ValueError(f"{cls_name}: slot_dtype={slot_dtype!r} is the float64 carrier; pass "
                         "None for slots in the variable's dtype, or a narrower format name "
                         "such as 'float16' or 'bfloat16'")
    return fmt.name, (fmt if _needs_rounding(fmt) else None)


def _alias(cls_name: str, keras: tuple[str, Any, Any], torch: tuple[str, Any]) -> tuple[str, Any]:
    """(name as written, value) of an argument with a Keras and a PyTorch spelling; ``keras``
    is (name, value, its default). Both spellings given: a ValueError."""
    (k_name, k_value, k_default), (t_name, t_value) = keras, torch
    if t_value is None:
        return k_name, k_value
    if k_value != k_default:
        raise ValueError(f"{cls_name}: got both {k_name}={k_value!r} and {t_name}={t_value!r}; "
                         f"pass one ({t_name} is PyTorch's spelling, {k_name} Keras's)")
    return t_name, t_value
