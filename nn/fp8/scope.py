"""Where a recipe applies: ``nn.fp8_autocast(recipe)`` and the layers of a recipe policy.

The active recipe is per thread (a ContextVar holding a ``Run``). ``matmul`` and ``linear``
(so Dense, Linear, Conv2D through im2col, and attention's products) ask ``active_run()``; when
a run is active they become quantized matmuls (``nn.fp8.ops``).

- ``with nn.fp8_autocast(recipe):`` (Transformer Engine's ``fp8_autocast``): every matmul
  inside runs under ``recipe`` (a Recipe or a policy name such as "fp8_hybrid_delayed"),
  whatever the policy of the layer it runs in. ``enabled=False`` runs every matmul inside
  unquantized: it switches off an outer block and the layers' recipe policies alike.
- A layer whose policy carries a recipe (``nn.Policy("mxfp8")``) runs its own matmuls under it;
  a layer with a plain policy inside such a layer runs without one (Keras's per-layer dtypes:
  a final ``Dense(dtype="float32")`` stays fp32). An explicit ``fp8_autocast`` wins over both.

Tensor names: the state (and log rows) of an operand are keyed by where it is used:
``"<scope>/<Op>/<operand>"`` (``nn.engine.sites.fp8_tensor``), e.g. ``"dense/Linear/input"``; the
k-th use of the same op in one scope during one forward pass gets ``"<Op>_k"``. A pass starts
at the outermost layer of a recipe policy, at each outermost layer call inside an
``fp8_autocast`` block (so ``with fp8_autocast(recipe): model.fit(...)`` gives every step the
same tensor names), or at the block itself for bare ops outside layers; one forward pass is
one step of every tensor's state.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from nn.engine import sites
from nn.fp8.meta import _LAYER
from nn.fp8.recipes import DelayedScaling, Recipe, get_recipe


class Run:
    """One forward pass under a recipe: the recipe and how often each op site was used.
    ``recipe`` None: an ``fp8_autocast(enabled=False)`` block (no recipe, policies ignored)."""

    def __init__(self, recipe: Recipe | None, explicit: bool,
                 modules: tuple[type, ...] | None = None) -> None:
        self.recipe = recipe
        self.explicit = explicit  # from fp8_autocast (beats layer policies)
        self.modules = modules  # only the matmuls of these layer types (None: every matmul)
        self._uses: dict[str, int] = {}

    def covers(self, layer: Any) -> bool:
        """Whether the matmuls run by ``layer`` (None: outside any layer) are this run's."""
        return self.modules is None or isinstance(layer, self.modules)

    def new_pass(self) -> None:
        """Start counting op uses again: a new forward pass inside the same block."""
        self._uses.clear()

    def op_site(self, op_name: str) -> str:
        """``"<scope>/<Op>"`` for this use of the op (``"<Op>_k"`` for the k-th repeat)."""
        base = sites.scoped(sites.current_scope(), op_name)
        k = self._uses.get(base, 0)
        self._uses[base] = k + 1
        return base if k == 0 else f"{base}_{k}"


_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("nn_fp8_run", default=None)
# (the innermost layer being called, ``_LAYER``, lives in nn.fp8.meta: it owns the op sites it
# runs, ``Recipe.claim``, and a layer with its own ``fp8_meta`` the states of their tensors)


def active_run() -> Run | None:
    """The recipe run of this thread's innermost fp8 scope, else None (also inside
    ``fp8_autocast(enabled=False)``)."""
    run = _RUN.get()
    if run is None or run.recipe is None or not run.covers(_LAYER.get()):
        return None
    return run


def active_recipe() -> Recipe | None:
    """The recipe of this thread's innermost fp8 scope, else None (also inside
    ``fp8_autocast(enabled=False)``); a block of ``modules=`` gives its recipe everywhere."""
    run = _RUN.get()
    return None if run is None else run.recipe


class fp8_autocast:  # noqa: N801 (Transformer Engine's spelling, used as ``with``)
    """Run every matmul inside under ``recipe`` (see the module docstring).

    Parameters
    ----------
    recipe:
        A ``Recipe``, or a policy name from ``POLICY_RECIPES`` (a new recipe each time: keep
        the object to read its log). Default: a new ``DelayedScaling()`` (1024 amaxes), as
        Transformer Engine's default recipe before Blackwell. (``nn.faces.te.fp8_autocast``
        has TE's argument order and one default recipe per process.)
    enabled:
        False runs the block without any recipe (switching off an enclosing one).
    modules:
        Layer types whose matmuls the block quantizes (None, the default: every matmul). The
        Transformer Engine face passes its modules: in TE only TE's modules run in fp8 inside
        ``autocast``; other layers run there as outside the block.

    Blocks nest; an inner block of the same recipe continues the outer pass.

    >>> from nn.fp8 import DelayedScaling
    >>> with fp8_autocast(DelayedScaling()) as ctx:
    ...     active_recipe() is ctx.recipe
    True
    """

    def __init__(self, recipe: Recipe | str | None = None, enabled: bool = True,
                 modules: tuple[type, ...] | None = None) -> None:
        if modules is not None and not (isinstance(modules, tuple) and modules
                                        and all(isinstance(t, type) for t in modules)):
            raise TypeError(f"fp8_autocast: modules must be None or a tuple of layer classes, "
                            f"got {modules!r}")
        if not isinstance(enabled, bool):
            raise TypeError(f"fp8_autocast: enabled must be True or False, got {enabled!r}")
        if isinstance(recipe, bool):
            raise TypeError(f"nn.fp8_autocast takes the recipe first: nn.fp8_autocast(recipe, "
                            f"enabled=...), got the recipe {recipe!r}; Transformer Engine's "
                            "order, fp8_autocast(enabled, calibrating, fp8_recipe), is "
                            "nn.faces.te.fp8_autocast")
        if recipe is None:
            recipe = DelayedScaling()
        self.recipe = get_recipe(recipe)
        self.enabled = enabled
        self.modules = modules
        # (the entering thread, the token that restores its outer run), innermost last
        self._tokens: list[tuple[int, contextvars.Token[Run | None]]] = []

    def __enter__(self) -> fp8_autocast:
        outer = _RUN.get()
        run: Run | None
        if not self.enabled:
            run = Run(None, explicit=True)
        elif outer is not None and outer.recipe is self.recipe \
                and outer.modules == self.modules:
            run = outer  # nested block of the same recipe: the same pass
        else:
            run = Run(self.recipe, explicit=True, modules=self.modules)
        self._tokens.append((threading.get_ident(), _RUN.set(run)))
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._tokens:
            raise RuntimeError("fp8_autocast: exited without being entered")
        ident, token = self._tokens[-1]
        if ident != threading.get_ident():
            raise RuntimeError(
                "fp8_autocast: exited from a thread that did not enter it; each thread enters "
                "and exits its own block (the block stays active in the thread that entered "
                "it, whose own exit still works)")
        try:
            _RUN.reset(token)
        except ValueError as e:  # same thread, another contextvars Context (e.g. a task)
            raise RuntimeError("fp8_autocast: exited in another context than the one that "
                               "entered it (an asyncio task or contextvars.Context.run); the "
                               "entering context's own exit still works") from e
        self._tokens.pop()

    def __repr__(self) -> str:
        modules = "" if self.modules is None else f", modules={self.modules!r}"
        return f"fp8_autocast({self.recipe!r}, enabled={self.enabled}{modules})"


_KEEP = object()  # (layer_scope: the run stays as it is)


@contextlib.contextmanager
def _set(run: Run | None | object, layer: Any) -> Iterator[None]:
    token = None if run is _KEEP else _RUN.set(run)  # type: ignore[arg-type]
    layer_token = _LAYER.set(layer)
    try:
        yield
    finally:
        _LAYER.reset(layer_token)
        if token is not None:
            _RUN.reset(token)


def owner_scope(layer: Any) -> contextlib.AbstractContextManager[None]:
    """``layer`` as the owner of the tensors quantized inside (a matmul's backward, which runs
    outside its layer's call); the active run stays as it is."""
    return _set(_KEEP, layer)


def layer_scope(policy: Any, layer: Any = None) -> contextlib.AbstractContextManager[None]:
    """What ``layer``'s call runs inside: its policy's recipe (unless an explicit
    ``fp8_autocast`` is active, which wins), or no recipe for a plain policy inside a recipe
    layer; and ``layer`` as the owner of the op sites it runs (``current_layer``)."""
    active = _RUN.get()
    run: Run | None | object = _KEEP
    recipe = getattr(policy, "recipe", None)
    if active is None and recipe is None:
        return contextlib.nullcontext()  # no recipe here: nothing to own
    if active is not None and active.explicit:
        if _LAYER.get() is None:  # an outermost layer: a new forward pass of the block
            active.new_pass()
        if not active.covers(layer):
            # a block of other modules' matmuls: this layer runs as outside it (its own
            # recipe policy, if any); a covered layer inside it still finds the block
            run = _KEEP if recipe is None else Run(recipe, explicit=False)
    elif recipe is None:
        run = _KEEP if active is None else None
    elif active is None or active.recipe is not recipe:
        run = Run(recipe, explicit=False)
    return _set(run, layer)


def recipes_of(model: Any) -> list[Recipe]:
    """The recipes of ``model``'s policies and those of every layer inside it, each once, in
    depth-first order: where their telemetry logs are (``[r.log for r in recipes_of(m)]``).

    Layers built under one Policy object (``nn.set_global_policy("mxfp8")``) share one recipe;
    layers given ``dtype="mxfp8"`` one by one each have their own.
    """
    found: dict[int, Recipe] = {}
    for layer in model.modules():  # the layer tree's walk
        recipe = getattr(layer.policy, "recipe", None)
        if recipe is not None:
            found.setdefault(id(recipe), recipe)
    return list(found.values())


@contextlib.contextmanager
def epoch_telemetry(model: Any, history: Any) -> Iterator[None]:
    """Around one epoch's training steps of ``fit``: on a normal exit, ``history.record_fp8``
    gets the summary per tensor (``TelemetryLog.summary``) of the log rows the block added to
    the recipes of ``model``'s policies and to the recipe of an enclosing ``fp8_autocast``."""
    recipes = recipes_of(model)
    run = _RUN.get()
    if run is not None and run.explicit and run.recipe is not None \
            and all(r is not run.recipe for r in recipes):
        recipes.append(run.recipe)
    starts = [len(r.log) for r in recipes]
    yield
    summary: dict[str, Any] = {}
    for recipe, start in zip(recipes, starts, strict=True):
        summary.update(recipe.log.summary(start))
    history.record_fp8(summary)
