"""``nn.GradientTape``: TensorFlow's way to take gradients, which never touches ``.grad``.

The Keras custom training loop (the mixed-precision guide's)::

    opt = nn.LossScaleOptimizer(nn.Adam())
    with nn.GradientTape() as tape:
        loss = loss_fn(y, model(x))
        scaled_loss = opt.get_scaled_loss(loss)
    scaled_grads = tape.gradient(scaled_loss, model.trainable_variables)
    grads = opt.get_unscaled_gradients(scaled_grads)
    opt.apply_gradients(zip(grads, model.trainable_variables))

Decisions (where nn's engine differs from TensorFlow's):

- ``tape.gradient`` returns fresh ``nn.Tensor`` s (no history, each owning its array), one per
  source, in the source's format (float32 for master weights under the mixed policies, as TF
  gives gradients in the variable's dtype); a source the target does not depend on gets None.
  No ``.grad`` is read or written, so gradients cannot accumulate from one step into the next
  (``.grad`` belongs to the PyTorch face: ``backward()`` accumulates, ``zero_grad()`` clears).
- nn records the graph whenever an op's input requires a gradient, as PyTorch does, so the tape
  does not limit what is recorded; it is how the Keras face *takes* gradients. Trainable
  variables are differentiable without ``watch``; ``watch(t)`` makes a plain tensor
  differentiable for ops run after it, until the ``with`` block ends.
- A non-persistent tape (the default) answers ``gradient`` once, as TF's; a second call raises.
  ``GradientTape(persistent=True)`` answers any number of times.
- A non-scalar target is differentiated as its sum (TF's rule); ``output_gradients`` sets the
  upstream gradient instead.
- Nested tapes take higher derivatives, as TF's: ``gradient`` called while another tape of this
  thread is recording (inside its ``with``) records its own computation (the engine's
  ``create_graph``), so the outer tape can differentiate the answer::

      with nn.GradientTape() as outer:
          with nn.GradientTape() as inner:
              y = w * w * w
          dy = inner.gradient(y, w)      # 3 w^2, recorded
      d2y = outer.gradient(dy, w)        # 6 w: 18 at w = 3

  An op whose backward is not written in differentiable ops raises there, naming the op.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from nn.engine.autograd import gradients, no_grad
from nn.engine.tensor import Tensor
from nn.precision.autocast import disabled as autocast_disabled

_RECORDING: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar(
    "nn_tapes", default=())  # ids of this thread's tapes inside their ``with`` block


class GradientTape:
    """A context manager whose ``gradient(target, sources)`` returns fresh gradients.

    ``persistent``: allow several ``gradient`` calls (default False: one, as TF).
    ``watch_accessed_variables``: True (default) differentiates every trainable variable; False
    gives gradients only for what was passed to ``watch``, None for other sources.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        for name, value in (("persistent", persistent),
                            ("watch_accessed_variables", watch_accessed_variables)):
            if not isinstance(value, bool):
                raise TypeError(f"GradientTape: {name} must be True or False, got {value!r}")
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self._watched: dict[int, Tensor] = {}
        self._restore: list[Tensor] = []  # plain tensors watch() made differentiable
        self._used = False

    def __enter__(self) -> GradientTape:
        _RECORDING.set((*_RECORDING.get(), id(self)))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = list(_RECORDING.get())
        if id(self) in stack:
            stack.reverse()
            stack.remove(id(self))
            stack.reverse()
            _RECORDING.set(tuple(stack))
        for t in self._restore:
            t.requires_grad = False
        self._restore.clear()

    def watch(self, tensor: Tensor | list[Tensor] | tuple[Tensor, ...]) -> None:
        """Differentiate through ``tensor`` (or each of a list), as ``tf.GradientTape.watch``:
        ops run on it afterwards record the graph, until the ``with`` block ends."""
        for t in tensor if isinstance(tensor, (list, tuple)) else [tensor]:
            if not isinstance(t, Tensor):
                raise TypeError(f"GradientTape.watch takes nn.Tensor objects, got "
                                f"{type(t).__name__}; wrap arrays with nn.Tensor(x) first")
            self._watched[id(t)] = t
            if not t.requires_grad:
                t.requires_grad = True
                self._restore.append(t)

    def stop_recording(self) -> contextlib.AbstractContextManager[None]:
        """Ops run inside record no graph (``nn.no_grad``)."""
        return no_grad()

    def gradient(self, target: Tensor, sources: Any, output_gradients: Any = None) -> Any:
        """d(target)/d(source) for ``sources``: a Tensor, a list/tuple (-> list) or a dict
        (-> dict with the same keys). Each gradient is a fresh Tensor or None."""
        if self._used and not self.persistent:
            raise RuntimeError(
                "a non-persistent GradientTape answers gradient() once (as TensorFlow's); use "
                "nn.GradientTape(persistent=True) to take several gradients from one tape")
        if not isinstance(target, Tensor):
            raise TypeError(f"GradientTape.gradient: target must be one nn.Tensor (e.g. the "
                            f"loss), got {type(target).__name__}; sum several targets first")
        flat, rebuild = _flatten(sources)
        self._used = True
        # recorded (a higher derivative) when another tape of this thread is recording
        nested = any(t != id(self) for t in _RECORDING.get())
        with autocast_disabled():  # a backward runs each op in its forward's formats
            grads = gradients(target, flat, output_gradients, frozenset(self._watched),
                              create_graph=nested)
        if not self.watch_accessed_variables:
            watched = self._watched
            grads = [g if id(s) in watched else None for g, s in zip(grads, flat, strict=True)]
        return rebuild(grads)


def _flatten(sources: Any) -> tuple[list[Tensor], Any]:
    """The source tensors as a list, and a function giving the answers the sources' shape."""
    if isinstance(sources, Tensor):
        return [sources], lambda g: g[0]
    if isinstance(sources, Mapping):
        keys = list(sources)
        return _checked(list(sources.values())), lambda g: dict(zip(keys, g, strict=True))
    if isinstance(sources, (list, tuple)) or isinstance(sources, Iterator):
        return _checked(list(sources)), list
    raise TypeError(f"GradientTape.gradient: sources must be a Tensor, a list/tuple or a dict "
                    f"of Tensors (e.g. model.trainable_variables), got {type(sources).__name__}")


def _checked(sources: list[Any]) -> list[Tensor]:
    for i, s in enumerate(sources):
        if not isinstance(s, Tensor):
            raise TypeError(f"GradientTape.gradient: sources[{i}] is a {type(s).__name__}, not "
                            "an nn.Tensor or nn.Variable")
    return sources
