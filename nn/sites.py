"""Telemetry site names: the one place that spells them.

Every rounding in nn happens at a named ``fpsim.monitor`` site. Layers tag their tensors with
these names, the autograd engine rounds gradients under them, and ``fit``'s telemetry reads the
counts back by them; all three ask this module, so a renamed site cannot silently record zeros.

- ``activation_grad("dense")`` -> ``"dense/grad_activation"``: the gradient of a layer's output.
- ``weight_grad("dense/kernel")`` -> ``"dense/grad_kernel"``: the gradient of a weight as read
  through its Cast into the compute format.
- ``variable_grad("dense/kernel")`` -> ``"dense/kernel/grad"``: the gradient of the variable
  itself (in its variable format).
- ``scoped(scope, what)`` -> ``"<scope>/<what>"``: an op's own rounding inside a name scope.

>>> activation_grad("dense"), weight_grad("dense/kernel"), variable_grad("dense/kernel")
('dense/grad_activation', 'dense/grad_kernel', 'dense/kernel/grad')
"""

from __future__ import annotations

ACTIVATION = "activation"
WEIGHT = "weight"


def scoped(scope: str, what: str) -> str:
    """``"<scope>/<what>"``, or ``what`` alone outside any scope."""
    return f"{scope}/{what}" if scope else what


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
