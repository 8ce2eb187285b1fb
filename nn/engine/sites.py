"""Telemetry site names: the one place that spells them.

Every rounding in nn happens at a named ``fpsim.monitor`` site. Layers tag their tensors with
these names, the autograd engine rounds gradients under them, and ``fit``'s telemetry reads the
counts back by them; all three ask this module, so a renamed site cannot silently record zeros.

- ``activation_grad("dense")`` -> ``"dense/grad_activation"``: the gradient of a layer's output.
- ``weight_grad("dense/kernel")`` -> ``"dense/grad_kernel"``: the gradient of a weight as read
  through its Cast into the compute format.
- ``variable_grad("dense/kernel")`` -> ``"dense/kernel/grad"``: the gradient of the variable
  itself (in its variable format).
- ``scoped(scope, what)`` -> ``"<scope>/<what>"``: an op's own rounding inside a name scope;
  ``op_output("Add")`` names an op's output rounding, ``op_input_grad("Linear", 0)`` ->
  ``"grad_Linear_input0"`` the gradient of an op's input that no layer named, and an op's
  backward runs in the scope ``scoped(scope, GRAD)``.
- ``name_scope("dense")`` and ``current_scope()``: the scope ops run in now (per thread and
  per asyncio task: a ``contextvars.ContextVar``), here beside the names it prefixes.
- ``fp8_tensor("dense/Linear", "input")`` -> ``"dense/Linear/input"``: an operand of a quantized
  matmul (``nn.fp8``), the key of its scaling state and telemetry rows (the fpsim.mx monitor
  site of a block-scaled operand too).

>>> activation_grad("dense"), weight_grad("dense/kernel"), variable_grad("dense/kernel")
('dense/grad_activation', 'dense/grad_kernel', 'dense/kernel/grad')
"""

from __future__ import annotations

import contextvars

ACTIVATION = "activation"
WEIGHT = "weight"
GRAD = "grad"  # the name scope of a backward pass, and the site of an unnamed root's gradient


def scoped(scope: str, what: str) -> str:
    """``"<scope>/<what>"``, or ``what`` alone outside any scope."""
    return f"{scope}/{what}" if scope else what


def op_output(op_name: str) -> str:
    """Where an op rounds its output (inside the current name scope): the op's name."""
    return op_name


def op_input_grad(op_name: str, index: int) -> str:
    """Where the gradient of input ``index`` of an op is rounded, when its tensor has no site."""
    return f"{GRAD}_{op_name}_input{index}"


def fp8_tensor(op_site: str, operand: str) -> str:
    """The name of a quantized matmul's operand (``"input"``, ``"weight"``, ``"a"``, ``"b"``,
    ``"grad_output"``; ``"_t"`` appended for a block recipe's backward copy)."""
    return f"{op_site}/{operand}"


def activation_grad(layer_name: str) -> str:
    """Where the gradient of a layer's output is rounded."""
    return f"{layer_name}/grad_activation"


def weight_grad(variable_name: str) -> str:
    """Where the gradient of a weight read through its Cast is rounded (``layer/grad_<w>``)."""
    layer, sep, weight = variable_name.partition("/")
    return f"{layer}/grad_{weight}" if sep else variable_name


def variable_grad(variable_name: str) -> str:
    """Where the gradient of the variable itself is rounded."""
    return f"{variable_name}/grad"


def layer_sites(layer_name: str, variable_names: list[str]) -> dict[str, list[str]]:
    """The sites of one layer's telemetry: ``{"activation": [...], "weight": [...]}``."""
    weights: list[str] = []
    for name in variable_names:
        weights += [weight_grad(name), variable_grad(name)]
    return {ACTIVATION: [activation_grad(layer_name)], WEIGHT: weights}


# --- the name scope ops run in (per thread / task) ------------------------------------------

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("nn_name_scope", default="")


def current_scope() -> str:
    """The name scope ops run in now ("" outside any scope)."""
    return _SCOPE.get()


class name_scope:  # noqa: N801 (used like a function: ``with name_scope("dense"):``)
    """Prefix the monitor site names of the ops run inside (layers use their own name);
    ``absolute=True`` sets the scope to ``name`` itself (a backward pass: ``"<scope>/grad"``)."""

    __slots__ = ("scope", "_token")

    def __init__(self, name: str, absolute: bool = False) -> None:
        self.scope = name if absolute else scoped(_SCOPE.get(), name)
        self._token: contextvars.Token[str] | None = None

    def __enter__(self) -> str:
        self._token = _SCOPE.set(self.scope)
        return self.scope

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _SCOPE.reset(self._token)
            self._token = None
