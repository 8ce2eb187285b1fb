"""The fp8 recipes of a model in its checkpoint: what ``nn.saving.checkpoint`` writes and restores.

A checkpoint's config holds a list ``fp8``, one entry per recipe of the model's policies
(``recipes_of``, depth-first order): ``layers`` (the paths in the layer tree, ``"0"``,
``"body"``, of the layers whose policy carries that recipe -- their names up to checkpoint
version 3: one for ``dtype="fp8_hybrid_delayed"`` given per layer, several for layers
built under one Policy object, e.g. ``nn.set_global_policy``) and the recipe's
``state_dict()`` (``recipe``, ``states``, ``steps``): every amax history, scale and step count,
so training resumed from the checkpoint is bit-identical to an uninterrupted run.

On load the layers of one entry get one Policy object again (so one recipe, as when saved), and
its state is restored. A container model (``Sequential``, a functional ``Model``) keeps no
dtype in its config: it gets the global policy of the loading process, so it is left out of the
check (its own policy does not change its layers' numerics).

The recipe of an explicit ``nn.fp8_autocast(recipe)`` belongs to the caller, not to the model:
it is not in the checkpoint. Save ``recipe.state_dict()`` beside it (plain JSON-able values) and
``recipe.load_state_dict(...)`` into the recipe of the resumed run.
"""

from __future__ import annotations

from typing import Any

from nn.fp8.recipes import Recipe
from nn.fp8.scope import recipes_of

STATE_KEYS = ("recipe", "states", "steps")


def _is_container(layer: Any) -> bool:
    """A layer that holds other layers and no weights of its own (a model, a block)."""
    return not layer._weights and next(layer.children(), None) is not None


def fp8_entries(model: Any) -> list[dict[str, Any]]:
    """The ``fp8`` list of ``model``'s checkpoint (see the module docstring)."""
    layers = list(model.named_modules())  # the layer tree's walk
    return [{"layers": [path for path, layer in layers
                        if getattr(layer.policy, "recipe", None) is recipe],
             **recipe.state_dict()} for recipe in recipes_of(model)]


def stateful_layers(model: Any) -> list[str]:
    """The names of the layers whose recipe's next scale depends on earlier steps (delayed
    scaling)."""
    return [layer.name for layer in model.modules() if not _is_container(layer)
            and getattr(getattr(layer.policy, "recipe", None), "stateful", False)]


def restore_fp8(layers: dict[str, Any], entries: Any) -> None:
    """Share and restore the recipes of a model just built from its checkpoint, whose layers
    are ``layers`` (by path, or by name up to version 3), from its ``fp8`` list. A bad entry
    raises ValueError naming the field (``fp8[i].<field>``)."""
    if not isinstance(entries, list):
        raise ValueError(f"fp8 must be a list of recipe states, got {entries!r:.80}")
    covered: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"fp8[{i}]"
        if not isinstance(entry, dict) or sorted(entry) != sorted(("layers", *STATE_KEYS)):
            got = sorted(entry) if isinstance(entry, dict) else entry
            raise ValueError(f"{where} must be a mapping of layers, {', '.join(STATE_KEYS)}; "
                             f"got {got!r:.80}")
        names = entry["layers"]
        if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
            raise ValueError(f"{where}.layers must be a non-empty list of layer paths, got "
                             f"{names!r:.80}")
        unknown = [n for n in names if n not in layers]
        if unknown:
            raise ValueError(f"{where}.layers names layers the architecture lacks: {unknown}")
        own = [layers[n] for n in names if not _is_container(layers[n])]
        if not own:  # containers only: their policy is the loading process's global one
            own = [layers[n] for n in names if list(getattr(
                getattr(layers[n].policy, "recipe", None), "config", list)()) == entry["recipe"]]
            if not own:
                continue  # a recipe no loaded layer runs under: nothing to restore it into
        policy = own[0].policy
        recipe: Recipe | None = getattr(policy, "recipe", None)
        if recipe is None:
            raise ValueError(f"{where}.layers: layer {own[0].name!r} has policy "
                             f"{policy.name!r}, which carries no fp8 recipe")
        for name in names:
            layer = layers[name]
            if layer.policy.name == policy.name:
                layer.policy = policy  # one recipe again, as when saved
            elif not _is_container(layer):
                raise ValueError(f"{where}.layers: layer {name!r} has policy "
                                 f"{layer.policy.name!r}, the others {policy.name!r}")
        try:
            recipe.load_state_dict({k: entry[k] for k in STATE_KEYS})
        except ValueError as e:
            raise ValueError(f"{where}.{e}") from None
        covered.add(id(recipe))
    lacking = [layer.name for layer in layers.values() if not _is_container(layer)
               and getattr(layer.policy, "recipe", None) is not None
               and id(layer.policy.recipe) not in covered]
    if lacking:
        raise ValueError(f"fp8: the file holds no recipe state for the layers {lacking}, whose "
                         "policies carry a recipe")
