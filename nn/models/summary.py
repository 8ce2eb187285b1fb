"""``Model.summary``'s table: each layer's name and type, output shape, parameters, compute and
variable formats, and for a functional model the layers each one is connected to.

Output shapes come from symbolic tensors (``nn.layers.symbolic``): a functional model keeps
them; a Sequential model is traced from the input shape its first layer was built with. An
unbuilt model shows ``?`` (or ``(None, units)`` for a layer that knows its width).
"""

from __future__ import annotations

from typing import Any

from nn.engine.autograd import no_grad
from nn.engine.formats import default_tensor_format, format_name
from nn.layers.symbolic import SymbolicTensor


def _traced_shapes(layers: list[Any]) -> list[str] | None:

    first = layers[0] if layers else None
    shape = getattr(first, "_build_input_shape", None)
    if shape is None or not all(getattr(layer, "built", False) for layer in layers):
        return None
    shapes = []
    x: Any = SymbolicTensor(shape, default_tensor_format())
    with no_grad():
        for layer in layers:
            x = layer(x)
            shapes.append(str(x.shape))
    return shapes


def _rows(model: Any) -> list[tuple[Any, str, str | None]]:
    """(layer, output shape, connected-to or None) per row."""
    if hasattr(model, "summary_rows"):
        return list(model.summary_rows())
    # one row per top-level layer (as Keras): a composite layer such as TransformerBlock is one
    # row with all its sub-layers' parameters; a chain of layers (Sequential) is traced as the
    # model calls it; the children of a custom model are not a chain (its call may be anything)
    layers: list[Any] = list(model.children()) or [model]
    chain = isinstance(getattr(model, "layers", None), list)
    shapes = (_traced_shapes(layers) if chain else None) or [
        "?" if not getattr(layer, "units", None) else f"(None, {layer.units})"
        for layer in layers]
    return [(layer, shape, None) for layer, shape in zip(layers, shapes, strict=True)]


def summary_text(model: Any) -> str:
    """The table ``Model.summary`` prints."""
    rows = _rows(model)
    graph = any(connected is not None for _, _, connected in rows)
    header = ["layer (type)", "output shape", "params", "compute", "variables"]
    table = [header + (["connected to"] if graph else [])]
    total = 0
    for layer, shape, connected in rows:
        params = sum(v.size for v in layer.weights)
        total += params
        policy = layer.policy
        row = [f"{layer.name} ({type(layer).__name__})", shape, f"{params:,}",
               format_name(policy.compute_format), format_name(policy.variable_format)]
        table.append(row + ([connected or ""] if graph else []))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    left = {0, 1, 5}
    lines = [f'Model "{getattr(model, "name", type(model).__name__)}"']
    for k, r in enumerate(table):
        cells = [c.ljust(w) if i in left else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("-" * len(lines[-1]))
    trainable = sum(v.size for v in model.trainable_variables)
    lines.append(f"total params: {total:,} (trainable: {trainable:,})")
    return "\n".join(lines)
