"""``fpsim.torch.emulate(module, policy)``: a torch module's products in a policy's formats.

While the module runs forward, a ``torch.overrides.TorchFunctionMode`` catches the products
listed in ``PRODUCTS`` (``F.linear`` behind ``nn.Linear``, ``conv1d``/``conv2d`` behind
``nn.Conv1d``/``nn.Conv2d``, ``matmul``/``@``/``mm``/``bmm``/``baddbmm`` and
``F.scaled_dot_product_attention``) and runs each as one autograd Function:

- forward: each operand rounded to the policy's input format (a block format: blocks along
  the axis the product reduces over), the product computed by torch in float32 (fp32
  accumulation; with ``emulate(..., accumulator=...)`` in the chosen accumulator model, as
  ``fpsim.torch.accumulate`` computes it), the output rounded once to the compute format;
- backward: the output gradient rounded to the policy's gradient format, the backward
  products computed by torch in float32 from the rounded operands, and each operand's
  gradient rounded to the compute format (the format the operand was read in; the fp32
  master receives it unchanged, as a cast's backward gives it).

Everything else (activations, softmax, norms, losses, the optimizer) runs in float32 as torch
runs it, as PyTorch's autocast and Keras's mixed policies leave it. Parameters stay fp32
masters, so ``torch.amp.GradScaler`` works unchanged: a scaled gradient that overflows the
gradient format becomes inf, and the scaler skips that step.

Monitor sites (``fpsim.monitor``), with ``scope`` the submodule's name in the emulated module
(``"fc1"``, ``"blocks.0.attn"``; the op alone at the top): ``scope/op/<operand>`` for each
rounded operand (``input``, ``weight``, ``bias``; ``a``, ``b``; ``query``, ``key``,
``value``), ``scope/op`` for the output, ``scope/op/grad_output`` and
``scope/op/grad_<operand>`` in backward. A backward pass counts in the monitors that counted
its forward pass (``fpsim.monitor.counting_in``): torch runs the backward of CUDA tensors on a
thread of its own, where the caller's monitors are not active, and so the counts are the same
on every device (with forward and backward inside one ``with fpsim.monitor()`` block, as
usual, it makes no difference).

Products inside a torch functional that dispatches ``__torch_function__`` itself and then
computes them (``F.multi_head_attention_forward``, behind ``nn.MultiheadAttention`` and so
``nn.TransformerEncoderLayer``'s attention) are caught too: a mode sees such a call once, from
outside, and torch pops the mode while it handles it, so the mode runs the functional again with
itself pushed back, through a copy of the function whose own "has anyone overridden me?" check
answers no (``OPENED``). Its in- and out-projections are then ``linear`` products and its
attention products ``bmm``/``baddbmm`` (need_weights=True, the default) or
``scaled_dot_product_attention``, at the MultiheadAttention module's scope.

Per-tensor fp8 recipes (``"fp8_hybrid_delayed"`` ...): ``linear`` and ``matmul`` products
(``SCALED``) run as ``fpsim.torch.fp8.ScaledProduct``, each tensor with its scaling state in
``Emulation.states``; the other products in the compute format.

Block recipes: the output gradient is block-quantized once, along the axis the input
gradient's product reduces over, and the weight gradient's product reuses it (nn.fp8
quantizes a transposed copy along the other axis); attention's probabilities are not rounded
(torch computes them inside scaled_dot_product_attention).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fpsim.formats import Format
from fpsim.monitor import active_monitors, counting_in
from fpsim.monitor import is_active as monitor_is_active
from fpsim.mx import BlockFormat
from fpsim.rounding import RoundingMode
from fpsim.torch import mx
from fpsim.torch.accumulate import PRODUCT_FUNCTIONS, resolve_accumulator
from fpsim.torch.fp8 import ScaledProduct, ScalingState
from fpsim.torch.policy import TorchPolicy, get_policy
from fpsim.torch.rounding import round_checked

Axes = Callable[[list[Any]], tuple[int | None, ...]]


@dataclass(frozen=True)
class Product:
    """A product torch computes: its operands' names, the axis each one's product reduces over
    (for block formats; None: not block-quantized, rounded to the compute format), and the
    axis of the output gradient that the input gradient's product reduces over."""

    name: str
    operands: tuple[str, ...]
    axes: Axes
    grad_axis: int


def _matmul_axes(ops: list[Any]) -> tuple[int | None, ...]:
    b = ops[1]
    return (-1, -2 if b is not None and b.ndim >= 2 else -1)


_LINEAR = Product("linear", ("input", "weight", "bias"), lambda ops: (-1, -1, None), -1)
_CONV1D = Product("conv1d", ("input", "weight", "bias"), lambda ops: (1, 1, None), 1)
_CONV2D = Product("conv2d", ("input", "weight", "bias"), lambda ops: (1, 1, None), 1)
_MATMUL = Product("matmul", ("a", "b"), _matmul_axes, -1)
_ATTENTION = Product("attention", ("query", "key", "value"), lambda ops: (-1, -1, -2), -1)
# input + batch1 @ batch2 (beta and alpha as keywords): the added input is rounded like a bias
_BADDBMM = Product("baddbmm", ("input", "batch1", "batch2"), lambda ops: (None, -1, -2), -1)

# the torch functions emulate catches, each with its Product (one table; a test checks that
# each entry is caught inside a module)
PRODUCTS: dict[Callable[..., Any], Product] = {
    F.linear: _LINEAR,
    F.conv1d: _CONV1D,
    F.conv2d: _CONV2D,
    torch.matmul: _MATMUL,
    torch.Tensor.matmul: _MATMUL,
    torch.Tensor.__matmul__: _MATMUL,
    torch.mm: _MATMUL,
    torch.Tensor.mm: _MATMUL,
    torch.bmm: _MATMUL,
    torch.Tensor.bmm: _MATMUL,
    torch.baddbmm: _BADDBMM,
    torch.Tensor.baddbmm: _BADDBMM,
    F.scaled_dot_product_attention: _ATTENTION,
}


def _opened(func: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of the torch functional ``func`` (its code, defaults and closure) whose globals
    answer ``has_torch_function(...)`` with False: called under the mode, it computes instead
    of dispatching to the mode again, and the torch functions it calls reach the mode."""
    names = dict(func.__globals__)
    if "has_torch_function" not in names:  # (a torch whose functional no longer checks so)
        raise RuntimeError(f"fpsim.torch.emulate cannot open {func.__qualname__}: it no "
                           "longer checks has_torch_function")
    names["has_torch_function"] = lambda ops: False
    opened = types.FunctionType(func.__code__, names, func.__name__, func.__defaults__,
                                func.__closure__)
    opened.__kwdefaults__ = func.__kwdefaults__
    return opened


PRODUCT_NAMES = frozenset(p.name for p in PRODUCTS.values())

# the products a per-tensor fp8 recipe scales to fp8 (nn.fp8 and TE's Linear scale these)
SCALED = (_LINEAR, _MATMUL)


# torch functionals that handle __torch_function__ themselves and compute products inside:
# the mode runs each one's opened copy with the mode pushed back (see the module docstring)
OPENED: dict[Callable[..., Any], Callable[..., Any]] = {
    F.multi_head_attention_forward: _opened(F.multi_head_attention_forward),
}


def _to(x: torch.Tensor, fmt: Format | BlockFormat, axis: int | None, compute: Format,
        site: str) -> torch.Tensor:
    """x rounded to fmt (a block format: along axis; no axis: to the compute format)."""
    counting = monitor_is_active()
    if isinstance(fmt, BlockFormat):
        if axis is None:
            fmt = compute
        else:
            return mx.quantize(x, fmt, axis=axis, site=site)
    return round_checked(x, fmt, RoundingMode.NEAREST_EVEN, None, fmt.subnormals,
                         fmt.overflow or "inf", site, counting)


class _EmulatedProduct(torch.autograd.Function):
    """One product under a policy (see the module docstring); ``call`` is the _Call."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *operands: torch.Tensor | None) -> torch.Tensor:
        p, product = call.policy, call.product
        axes = product.axes(list(operands))
        leaves: list[torch.Tensor | None] = []
        for x, name, axis in zip(operands, product.operands, axes, strict=True):
            if x is None:
                leaves.append(None)
                continue
            q = _to(x.detach(), p.inputs, axis, p.compute_format, f"{call.site}/{name}")
            leaves.append(q.requires_grad_(x.requires_grad))
        with torch.enable_grad():
            out = call.fn(*leaves)
        ctx.call = call
        ctx.graph = (out, leaves)
        ctx.monitors = active_monitors()
        # (an accumulator's products are float64; the rounded output lies in float32)
        return _to(out.detach(), p.compute_format, None, p.compute_format,
                   call.site).to(torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        with counting_in(ctx.monitors):  # (on CUDA tensors torch runs this on its own thread)
            return _EmulatedProduct._backward(ctx, grad)

    @staticmethod
    def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        call: _Call = ctx.call
        p, product = call.policy, call.product
        out, leaves = ctx.graph
        g = _to(grad, p.grads, product.grad_axis, p.compute_format, f"{call.site}/grad_output")
        wanted = [x for x in leaves if x is not None and x.requires_grad]
        found = iter(torch.autograd.grad(out, wanted, g.to(out.dtype)) if wanted else ())
        grads: list[torch.Tensor | None] = []
        for x, name in zip(leaves, product.operands, strict=True):
            if x is None or not x.requires_grad:
                grads.append(None)
                continue
            gx = next(found)
            grads.append(_to(gx, p.compute_format, None, p.compute_format,
                             f"{call.site}/grad_{name}"))
        ctx.graph = None
        return (None, *grads)


@dataclass(frozen=True)
class _Call:
    fn: Callable[..., torch.Tensor]  # the torch function with its other arguments bound
    product: Product
    policy: TorchPolicy
    site: str


class _Mode(TorchFunctionMode):
    """Catches PRODUCTS while the emulated module runs forward."""

    def __init__(self, emulation: Emulation) -> None:
        super().__init__()
        self.emulation = emulation

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        product = PRODUCTS.get(func)
        if func in OPENED and self.emulation.policy.rounds:
            with self:  # (torch popped the mode while this handler runs)
                return OPENED[func](*args, **kwargs)
        if product is None or not self.emulation.policy.rounds:
            return func(*args, **kwargs)
        args = list(args)
        operands = [args[i] if i < len(args) else kwargs.pop(name, None)
                    for i, name in enumerate(product.operands)]
        rest = args[len(product.operands):]
        if not all(x is None or (isinstance(x, torch.Tensor) and x.dtype == torch.float32)
                   for x in operands):
            return func(*args, **kwargs)  # only float32 products are emulated

        scope = self.emulation.scope()
        site = f"{scope}/{product.name}" if scope else product.name
        acc = self.emulation.accumulator(scope, product.name)
        if acc is None:
            def fn(*ops: torch.Tensor | None) -> torch.Tensor:
                return func(*ops, *rest, **kwargs)
        else:
            accumulated = PRODUCT_FUNCTIONS[product.name]

            def fn(*ops: torch.Tensor | None) -> torch.Tensor:
                return accumulated(acc, *ops, *rest, **kwargs)
        policy = self.emulation.policy
        if policy.scaling is not None and product in SCALED:
            def states(name: str, backward: bool) -> ScalingState:
                return self.emulation.state(f"{site}/{name}", backward)
            bias = operands[2] if len(operands) > 2 else None
            return ScaledProduct.apply(fn, states, site, policy.compute_format,
                                       product.operands, operands[0], operands[1], bias)
        call = _Call(fn, product, policy, site)
        return _EmulatedProduct.apply(call, *operands)


class Emulation:
    """The hooks ``emulate`` put on a module (``module.fpsim_emulation``); ``remove()`` takes
    them off again."""

    def __init__(self, module: torch.nn.Module, policy: TorchPolicy,
                 accumulators: dict[str, Any] | None = None) -> None:
        self.policy = policy
        self.module = module
        # scope or product name ("" for every product) -> accumulator (see ``emulate``)
        self.accumulators: dict[str, Any] = dict(accumulators or {})
        self._mode = _Mode(self)
        self._scopes: list[str] = []
        self._depth = 0
        # per-tensor fp8 recipes: each tensor's scaling state, by "<site>/<operand>"
        self.states: dict[str, ScalingState] = {}
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        for name, sub in module.named_modules():
            self._handles.append(sub.register_forward_pre_hook(self._enter(name)))
            self._handles.append(sub.register_forward_hook(self._exit, always_call=True))

    def scope(self) -> str:
        """The name of the innermost submodule running now ("" for the top)."""
        return self._scopes[-1] if self._scopes else ""

    def accumulator(self, scope: str, product: str) -> Any:
        """The accumulator of a product at ``scope``: the longest key of ``accumulators``
        that names the scope or a module around it, else the product's name, else ``""``;
        None: torch's own float32 product."""
        table = self.accumulators
        if not table:
            return None
        around = [k for k in table if k and k not in PRODUCT_NAMES
                  and (scope == k or scope.startswith(k + "."))]
        key = max(around, key=len) if around else product if product in table else ""
        acc = table.get(key)
        if acc is not None and product not in PRODUCT_FUNCTIONS:
            raise NotImplementedError(
                f"{product} (at scope {scope or '(top)'!r}) takes no accumulator: torch computes "
                "it in one call; give accumulator= a dict naming the scopes or products that "
                f"take one ({', '.join(sorted(PRODUCT_FUNCTIONS))})")
        return acc

    def state(self, name: str, backward: bool) -> ScalingState:
        """The scaling state of tensor ``name`` under a per-tensor fp8 policy (made on first
        use: scale 1, a zero amax history)."""
        found = self.states.get(name)
        if found is None:
            scaling = self.policy.scaling
            assert scaling is not None
            found = self.states[name] = ScalingState(scaling, scaling.format(backward))
        return found

    def _enter(self, name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any) -> None:
            if self._depth == 0:
                self._mode.__enter__()
            self._depth += 1
            self._scopes.append(name)
        return hook

    def _exit(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self._scopes.pop()
        self._depth -= 1
        if self._depth == 0:
            self._mode.__exit__(None, None, None)

    def remove(self) -> None:
        """Take the hooks off: the module runs in plain float32 again."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if getattr(self.module, "fpsim_emulation", None) is self:
            delattr(self.module, "fpsim_emulation")


def emulate(module: torch.nn.Module, policy: TorchPolicy | str, *,
            accumulator: Any = None) -> torch.nn.Module:
    """``module`` with its products run in ``policy``'s formats (see the module docstring);
    the same module, changed in place (hooks), returned for chaining.

    ``accumulator``: None (ours, the default: torch's float32 products, fp32 accumulation),
    one accumulator for every product, or a dict from submodule names (a name covers the
    modules inside it; the longest name wins) or product names (``"linear"``, ``"conv2d"``,
    ``"matmul"``, ``"baddbmm"``) to accumulators; an accumulator is what
    ``fpsim.matmul(..., accumulate=)`` takes: a Format or format name (``"float16"``: rounded
    after every addition), an ``fpsim.accumulators`` model, or a preset name
    (``fpsim.accumulators.PRESETS``, e.g. ``"hopper_fp8_promote128"``). Those products are
    computed as ``fpsim.torch.accumulate`` says, forward and backward, bit for bit
    ``fpsim.matmul``'s accumulator values, on the CPU.

    >>> model = fpsim.torch.emulate(torch.nn.Linear(4, 2), "mixed_float16")
    >>> model.fpsim_emulation.policy.compute_format.name
    'float16'

    ``module.fpsim_emulation.remove()`` undoes it. A module already emulated is refused (remove
    the first emulation first).
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    existing = getattr(module, "fpsim_emulation", None)
    if isinstance(existing, Emulation):
        raise ValueError(f"module is already emulated (policy {existing.policy.name!r}); call "
                         "module.fpsim_emulation.remove() first")
    p = get_policy(policy)
    accumulators = _accumulators(module, accumulator)
    setattr(module, "fpsim_emulation",  # noqa: B010  (a plain attribute)
            Emulation(module, p, accumulators))
    return module


def _accumulators(module: torch.nn.Module, accumulator: Any) -> dict[str, Any]:
    """``emulate``'s ``accumulator=`` as {key: resolved accumulator}, keys checked."""
    if accumulator is None:
        return {}
    if not isinstance(accumulator, dict):
        return {"": resolve_accumulator(accumulator)}
    scopes = {name for name, _ in module.named_modules() if name}
    out: dict[str, Any] = {}
    for key, value in accumulator.items():
        if not isinstance(key, str) or key not in scopes | PRODUCT_NAMES:
            raise ValueError(
                f"accumulator: {key!r} is neither a submodule of the module nor a product "
                f"name; products: {', '.join(sorted(PRODUCT_FUNCTIONS))}; submodules: "
                f"{', '.join(sorted(scopes)) or '(none)'}")
        if key in PRODUCT_NAMES and key not in PRODUCT_FUNCTIONS:
            raise ValueError(f"accumulator: {key} takes no accumulator (torch computes it in "
                             f"one call); products that do: {', '.join(sorted(PRODUCT_FUNCTIONS))}")
        out[key] = resolve_accumulator(value)
    return out
