"""Keras optimizers (SGD, RMSprop, Adam) that update variables in place, in fp32 arithmetic.

Numerics (the same for every optimizer):

- The update is computed in the variable's carrier dtype (float32; float64 under the "float64"
  policy) with Keras's formulas, and the slot variables (momentum, velocity, ...) live in that
  dtype too: fp32 slots even when the variable itself holds fp16 or bf16 values.
- Under a mixed policy the variables are fp32 master weights and nothing else is rounded.
- Under the pure "float16"/"bfloat16" policies the variable's values lie in that format: the new
  value ``w - update`` is rounded once to it with ``fpsim.round`` (nearest-even). An update
  smaller than half an ulp of ``w`` is then lost (*swamping*: fp16 keeps 11 significant bits,
  so ``w + lr*g == w`` once ``w`` is about 2048x larger than ``lr*g``).
- Every element whose non-zero update left the weight unchanged is counted in
  ``swamped_updates`` (and per variable name in ``swamped_counts``), for every format.
- Remedies from the literature for pure bf16/fp16 weights (Zamirai et al. 2020), options of
  every optimizer, off by default: ``update_rounding="stochastic"`` (unbiased rounding of the
  new weight, drawn from ``seed``) and ``kahan=True`` (compensated summation of the updates in
  a ``compensation`` slot); see ``nn.optimizers.remedies``.

Two calling conventions share one implementation:

- Keras: ``opt.apply_gradients(zip(grads, variables))``; a ``None`` gradient skips its
  variable; ``iterations`` counts calls.
- PyTorch: ``opt = SGD(model.parameters(), lr=0.1, momentum=0.9)`` (or ``params=`` by
  keyword); ``opt.step()`` applies each param's ``.grad``; ``opt.zero_grad()``. This is what
  ``nn.GradScaler.step(opt)`` calls. ``lr`` is accepted as well as ``learning_rate`` (both:
  an error), and an error names the argument as it was written. When the parameters come
  first, PyTorch's defaults apply (SGD lr=1e-3; Adam ``betas``, ``eps=1e-8`` with PyTorch's
  placement of eps); the SGD and RMSprop formulas stay Keras's, which equal PyTorch's up to
  rounding for a constant learning rate (Keras's momentum holds -lr times PyTorch's buffer).
  Arguments after the first are keyword-only, so ``SGD(params, 0.1)`` cannot be misread.

Example (``w`` an ``nn.Variable``)::

    opt = SGD(learning_rate=0.1)
    opt.apply_gradients(zip([np.ones(w.shape, np.float32)], [w]))   # w.data -= 0.1
"""

from __future__ import annotations

from nn.engine.registry import OPTIMIZERS
from nn.optimizers.base import Optimizer, gradient_array, learning_rate_args
from nn.optimizers.base import _name_of as _name_of  # re-exported for nn.grad_scaler
from nn.optimizers.base import _needs_rounding as _needs_rounding
from nn.optimizers.rules import SGD, Adam, RMSprop

__all__ = ["SGD", "Adam", "Optimizer", "RMSprop", "get", "gradient_array", "learning_rate_args",
           "names"]


def get(identifier: str | Optimizer) -> Optimizer:
    """An optimizer from a registered name ("sgd", "rmsprop", "adam", or a class name; Keras
    defaults) or an instance (returned as it is)."""
    if isinstance(identifier, Optimizer):
        return identifier
    opt: Optimizer = OPTIMIZERS.get(identifier)
    return opt


def names() -> list[str]:
    """The short names ``get`` accepts ("adam", ...; class names work too), sorted."""
    return OPTIMIZERS.aliases()
