"""One registry per kind of nn object: the one place that maps names to classes.

Layers, optimizers, losses, metrics and activations each have a ``Registry``; a class joins its
kind's registry with one decorator where it is defined, and everything that turns a name or a
saved config back into an object (``compile("adam", ...)``, ``nn.load_model``, the CLI) asks
the registry, so no other file lists the classes (Keras's ``register_keras_serializable`` /
``serialize`` / ``deserialize``).

>>> reg = Registry("widget")
>>> @reg.register(aliases=("w",))
... class Widget:
...     def __init__(self, size: int = 1) -> None:
...         self.size = size
...     def get_config(self) -> dict:
...         return {"size": self.size}
...     @classmethod
...     def from_config(cls, config: dict) -> "Widget":
...         return cls(**config)
>>> reg.deserialize(reg.serialize(Widget(3))).size
3
>>> reg.get("w").size, reg.names(), reg.aliases()
(1, ['Widget', 'w'], ['w'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Registry:
    """Names -> classes (or functions) of one kind.

    - ``register`` (a decorator) adds a class under its ``__name__`` and optional lower-case
      ``aliases`` (e.g. "adam" for Adam); a name taken by another object raises ValueError.
    - ``get(name)`` returns a new instance with default arguments (``get_class`` the class);
      an unknown name raises ValueError listing the known ones.
    - ``serialize(obj)`` -> ``{"class_name": ..., "config": obj.get_config()}``;
      ``deserialize`` calls ``from_config`` of the registered class.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._aliases: dict[str, tuple[str, dict[str, Any]]] = {}

    def register(self, obj: Any = None, *, name: str | None = None,
                 aliases: tuple[str, ...] = (),
                 alias_config: dict[str, dict[str, Any]] | None = None) -> Any:
        """Decorator: ``@registry.register`` or ``@registry.register(aliases=("adam",))``.

        ``alias_config`` maps an alias to constructor arguments it implies (e.g. the metric
        alias "acc" builds ``Accuracy(name="acc")``).
        """
        def add(target: T) -> T:
            key = name or getattr(target, "__name__", None)
            if not isinstance(key, str) or not key:
                raise ValueError(f"cannot register {target!r} as a {self.kind}: it has no name")
            for k in (key, *aliases):
                held = self._entries.get(k)
                if held is None and k in self._aliases:
                    held = self._entries[self._aliases[k][0]]
                if held is not None and held is not target:
                    raise ValueError(f"the {self.kind} name {k!r} is already registered to "
                                     f"{held!r}")
            self._entries[key] = target
            for a in aliases:
                self._aliases[a] = (key, dict((alias_config or {}).get(a, {})))
            return target

        return add if obj is None else add(obj)

    def names(self) -> list[str]:
        """Every name ``get`` accepts: class names and aliases, sorted."""
        return sorted([*self._entries, *self._aliases])

    def aliases(self) -> list[str]:
        """The lower-case short names ("adam", "mse", ...), sorted: what a CLI offers."""
        return sorted(self._aliases)

    def classes(self) -> dict[str, Any]:
        """Class name -> registered class (aliases left out)."""
        return dict(self._entries)

    def _unknown(self, what: object, noun: str = "") -> ValueError:
        known = self.names() if not noun else sorted(self._entries)
        return ValueError(f"unknown {self.kind}{noun} {what!r}; known: {', '.join(known)}")

    def get_class(self, name: str) -> Any:
        """The class registered under ``name`` (a class name, or an alias in any case)."""
        if isinstance(name, str):
            if name in self._entries:
                return self._entries[name]
            alias = self._aliases.get(name.lower())
            if alias is not None:
                return self._entries[alias[0]]
        raise self._unknown(name)

    def get(self, name: str) -> Any:
        """A new instance for ``name`` with default arguments (plus what the alias implies);
        for a registry of functions, the function itself."""
        if isinstance(name, str):
            alias = self._aliases.get(name.lower())
            if name not in self._entries and alias is not None:
                cls, kwargs = self._entries[alias[0]], alias[1]
            else:
                cls, kwargs = self.get_class(name), {}
            return cls(**kwargs) if isinstance(cls, type) else cls
        raise self._unknown(name)

    def is_registered(self, obj: Any) -> bool:
        """True when ``type(obj)`` (exactly) is registered here under its class name."""
        return self._entries.get(type(obj).__name__) is type(obj)

    def serialize(self, obj: Any) -> dict[str, Any]:
        """``{"class_name", "config"}``; ValueError if ``type(obj)`` is not registered."""
        if not self.is_registered(obj):
            raise ValueError(
                f"{type(obj).__name__} is not a registered {self.kind}, so it cannot be saved; "
                f"decorate the class with @nn.engine.registry.{self.kind.upper()}S.register")
        return {"class_name": type(obj).__name__, "config": obj.get_config()}

    def deserialize(self, config: Any) -> Any:
        """A new object from ``serialize``'s output."""
        name = config.get("class_name") if isinstance(config, dict) else None
        if not isinstance(name, str) or name not in self._entries:
            raise self._unknown(name, " class")
        cfg = config.get("config", {})
        if not isinstance(cfg, dict):
            raise ValueError(f"the config of {self.kind} {name!r} must be a dict, got {cfg!r}")
        return self._entries[name].from_config(dict(cfg))


LAYERS = Registry("layer")
OPTIMIZERS = Registry("optimizer")
LOSSES = Registry("loss")
METRICS = Registry("metric")
ACTIVATIONS = Registry("activation")

register_layer: Callable[..., Any] = LAYERS.register
register_optimizer: Callable[..., Any] = OPTIMIZERS.register
register_loss: Callable[..., Any] = LOSSES.register
register_metric: Callable[..., Any] = METRICS.register
