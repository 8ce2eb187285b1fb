"""``Dataset``: a re-iterable input pipeline in the ``tf.data`` spirit; epoch helpers for loops.

The guide builds its dataset once and loops over it every epoch::

    train = Dataset.from_tensor_slices((x_train, y_train)).shuffle(10000, seed=0).batch(8192)
    for epoch in range(5):
        for x, y in train:          # each ``for`` is one epoch, in a new order
            ...

Rules:

- Every ``iter(dataset)`` starts a new epoch over all the data (never a one-shot generator).
- ``shuffle(buffer_size, seed)``: tf.data's buffer shuffle (a buffer of ``buffer_size``
  elements; each output is drawn uniformly from the buffer and its slot refilled with the next
  element); ``buffer_size >= len(data)`` is a uniform permutation. Epoch k's order is a function
  of ``(seed, k)`` only (numpy's ``default_rng([seed, k])``): the same seed replays the same
  sequence of epochs, and consecutive epochs differ. ``seed=None`` draws a seed from nn's global
  generator (so ``nn.set_random_seed`` makes it reproducible) without consuming from it.
  ``reshuffle_each_iteration=False`` repeats epoch 0's order.
- ``batch(n, drop_remainder=False)`` stacks n consecutive elements; the last batch may be short.
- An epoch that would yield nothing raises ValueError when iterated: a loop that runs 0 steps
  (the old one-shot ``batches()`` trap: epochs 2-5 ran 0 steps with loss nan) is an error.
- ``prefetch`` and ``cache`` are accepted and do nothing (the data are in memory already).
- The elements are slices of the arrays given (``np.asarray``, not copies, to spare memory on
  MNIST-sized data): changing those arrays in place changes what later epochs see.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from nn.engine.checks import count
from nn.engine.random import spawn_generator

DEFAULT_BATCH_SIZE = 32  # Keras's default batch size (theirs): batches(), fit, evaluate, predict

AUTOTUNE = -1  # tf.data.AUTOTUNE: accepted by ``prefetch``, which has nothing to tune here

Structure = Any  # an array, or a nest of tuples and dicts whose leaves are arrays
Tree = Any  # a structure's shape: LEAF, ("tuple", type, children) or ("dict", keys, children)
LEAF = "leaf"


def _flatten(tensors: Structure, path: str, leaves: list[tuple[str, Any]]) -> Tree:
    """Append ``tensors``' leaves (with their paths, e.g. ``["a"][1]``) to ``leaves`` in
    order and return the tree that ``_unflatten`` rebuilds the structure from."""
    if isinstance(tensors, tuple):
        return ("tuple", type(tensors),
                [_flatten(t, f"{path}[{i}]", leaves) for i, t in enumerate(tensors)])
    if isinstance(tensors, Mapping):
        keys = list(tensors)
        return ("dict", keys, [_flatten(tensors[k], f"{path}[{k!r}]", leaves) for k in keys])
    leaves.append((path, tensors))
    return LEAF


def _unflatten(tree: Tree, values: Iterator[np.ndarray]) -> Structure:
    """The structure ``tree`` describes, with the next leaves of ``values`` in place."""
    if isinstance(tree, str):  # LEAF
        return next(values)
    kind, meta, children = tree
    parts = [_unflatten(c, values) for c in children]
    if kind == "dict":
        return dict(zip(meta, parts, strict=True))
    return meta(*parts) if hasattr(meta, "_fields") else meta(parts)  # a namedtuple or a tuple


def _at(path: str) -> str:
    return f" at {path}" if path else ""


class _Shuffle:
    """One shuffle stage: its parameters and the epoch counter its orders are drawn from."""

    def __init__(self, buffer_size: int, seed: int, reshuffle: bool) -> None:
        self.buffer_size, self.seed, self.reshuffle = buffer_size, seed, reshuffle
        self.epoch = 0

    def next_permutation(self, n: int) -> np.ndarray:
        k = self.epoch if self.reshuffle else 0
        self.epoch += 1
        return buffer_shuffle(n, self.buffer_size, np.random.default_rng([self.seed, k]))


def buffer_shuffle(n: int, buffer_size: int, rng: np.random.Generator) -> np.ndarray:
    """The order tf.data's ``shuffle(buffer_size)`` emits positions 0..n-1 in.

    Fill a buffer with the first ``buffer_size`` positions; repeatedly emit a uniformly chosen
    buffer entry and put the next unread position in its slot (once the input is exhausted, the
    buffer's last entry moves into the slot instead). ``buffer_size >= n``: ``rng.permutation``.
    """
    if buffer_size >= n:
        return rng.permutation(n)
    buf = list(range(buffer_size))
    u = rng.random(n)
    out = np.empty(n, dtype=np.int64)
    nxt = buffer_size
    for i in range(n):
        j = int(u[i] * len(buf))
        out[i] = buf[j]
        if nxt < n:
            buf[j] = nxt
            nxt += 1
        else:
            buf[j] = buf[-1]
            buf.pop()
    return out


class Dataset:
    """A finite, re-iterable dataset of slices of in-memory arrays (see the module docstring).

    Build one with ``Dataset.from_tensor_slices``; ``shuffle`` and ``batch`` return new
    datasets (the original is unchanged). ``len(ds)`` is the number of elements (or batches) in
    one epoch.
    """

    def __init__(self, components: list[np.ndarray], structure: Tree, n: int,
                 shuffles: tuple[_Shuffle, ...] = (), batch_size: int | None = None,
                 drop_remainder: bool = False) -> None:
        self._components, self._structure, self._n = components, structure, n
        self._shuffles, self._batch_size, self._drop = shuffles, batch_size, drop_remainder

    @staticmethod
    def from_tensor_slices(tensors: Structure) -> Dataset:
        """Slice ``tensors`` along its first dimension, as tf.data does: the structure is a
        nest of tuples and dicts (``(x, y)``, ``{"a": (x, x)}``, ``((xa, xb), y)``) whose
        leaves are arrays (or nn.Tensors); every leaf is sliced along its own axis 0 and every
        element (and batch) has the structure given. As in tf.data, a list is one array
        (``np.asarray``), not a structure. Every leaf must have the same first dimension."""
        leaves: list[tuple[str, Any]] = []
        tree = _flatten(tensors, "", leaves)
        if not leaves:
            raise ValueError(f"from_tensor_slices: got a structure without arrays "
                             f"({tensors!r}); pass an array, a tuple of arrays such as (x, y), "
                             f"or a dict of arrays")
        arrays = [np.asarray(p) for _, p in leaves]
        for (path, _), a in zip(leaves, arrays, strict=True):
            if a.ndim == 0:
                raise ValueError(f"from_tensor_slices: cannot slice a scalar (shape (), value "
                                 f"{a!r}{_at(path)}); every component needs a first dimension")
        if len({len(a) for a in arrays}) > 1:
            shapes = ", ".join(f"{a.shape}{_at(path)}"
                               for (path, _), a in zip(leaves, arrays, strict=True))
            raise ValueError(f"from_tensor_slices: every component must have the same number "
                             f"of samples (first dimension), got shapes {shapes}")
        return Dataset(arrays, tree, len(arrays[0]))

    # ---- transformations ----------------------------------------------------------------
    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> Dataset:
        """Elements in a new random order every epoch (see the module docstring)."""
        if self._batch_size is not None:
            raise ValueError("shuffle after batch is not supported: nn's Dataset shuffles "
                             "elements; write .shuffle(buffer_size).batch(n)")
        buffer_size = count("shuffle: buffer_size", buffer_size, minimum=1)
        if seed is None:

            seed = int(spawn_generator().integers(2**63))
        seed = count("shuffle: seed", seed)
        if not isinstance(reshuffle_each_iteration, bool):
            raise TypeError(f"shuffle: reshuffle_each_iteration must be True or False, got "
                            f"{reshuffle_each_iteration!r}")
        stage = _Shuffle(buffer_size, seed, reshuffle_each_iteration)
        return Dataset(self._components, self._structure, self._n, (*self._shuffles, stage))

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """Consecutive elements stacked into batches of ``batch_size`` (the last one shorter
        unless ``drop_remainder``)."""
        if self._batch_size is not None:
            raise ValueError("this dataset is batched already; nn's Dataset batches once")
        batch_size = count("batch: batch_size", batch_size, minimum=1)
        if not isinstance(drop_remainder, bool):
            raise TypeError(f"batch: drop_remainder must be True or False, got "
                            f"{drop_remainder!r}")
        return Dataset(self._components, self._structure, self._n, self._shuffles, batch_size,
                       drop_remainder)

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Dataset:
        """Accepted for tf.data code; does nothing (the data are in memory)."""
        return self

    def cache(self, filename: str = "") -> Dataset:
        """Accepted for tf.data code; does nothing (the data are in memory)."""
        return self

    def repeat(self, count: int | None = None) -> Dataset:
        """Not needed: every ``for`` over an nn Dataset is a new epoch."""
        raise NotImplementedError(
            "nn's Dataset is re-iterable: each `for batch in dataset` is one epoch, so loop "
            "over epochs instead of .repeat() (and drop steps_per_epoch)")

    # ---- iteration --------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._batch_size is None:
            return self._n
        full, rest = divmod(self._n, self._batch_size)
        return full + (1 if rest and not self._drop else 0)

    def __iter__(self) -> Iterator[Structure]:
        """One epoch (each call advances the shuffle's epoch counter)."""
        steps = len(self)
        if steps == 0:
            detail = (f"batch_size {self._batch_size} with drop_remainder=True"
                      if self._n and self._drop else "no samples")
            raise ValueError(f"this dataset yields nothing in an epoch ({self._n} samples, "
                             f"{detail}): a loop over it would run 0 steps")
        order: np.ndarray | None = None
        for stage in self._shuffles:
            perm = stage.next_permutation(self._n)
            order = perm if order is None else order[perm]
        return self._epoch(order, steps)

    def _epoch(self, order: np.ndarray | None, steps: int) -> Iterator[Structure]:
        size = self._batch_size
        for i in range(steps):
            idx: Any = i if size is None else slice(i * size, (i + 1) * size)
            if order is not None:
                idx = order[idx]
            yield self._element([a[idx] for a in self._components])

    def _element(self, values: list[np.ndarray]) -> Structure:
        return _unflatten(self._structure, iter(values))

    def as_numpy_iterator(self) -> Iterator[Structure]:
        """tf.data's spelling of ``iter(dataset)`` (the elements are numpy arrays already)."""
        return iter(self)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{a.dtype}{a.shape[1:]}" for a in self._components)
        extra = "".join(f".shuffle({s.buffer_size}, seed={s.seed})" for s in self._shuffles)
        if self._batch_size is not None:
            extra += f".batch({self._batch_size}, drop_remainder={self._drop})"
        return f"<Dataset of {self._n} elements ({shapes}){extra}>"


def batches(x: Any, y: Any, batch_size: int = DEFAULT_BATCH_SIZE, shuffle: bool = True,
            seed: int | np.random.Generator | None = None) -> Dataset:
    """``(x_batch, y_batch)`` pairs covering every sample once per epoch; re-iterable.

    The same as ``Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed).batch(batch_size)``
    (without the shuffle when ``shuffle=False``): each ``for`` over the result is a new epoch,
    in a new order drawn from ``(seed, epoch)``. A Generator ``seed`` gives one integer seed.
    """
    ds = Dataset.from_tensor_slices((x, y))
    if shuffle:
        if isinstance(seed, np.random.Generator):
            seed = int(seed.integers(2**63))
        ds = ds.shuffle(max(len(ds), 1), seed=seed)
    return ds.batch(batch_size)


def check_nonempty_epoch(steps: int, where: str = "epoch") -> None:
    """Raise ValueError if a loop over a dataset ran ``steps == 0`` steps (for loops that
    consume datasets, e.g. ``fit``: a zero-step epoch means an exhausted one-shot iterator or
    an empty dataset, never a result)."""
    if count("steps", steps) == 0:
        raise ValueError(f"{where} ran 0 steps: the data are empty or exhausted (a one-shot "
                         "generator or iterator yields nothing after its first epoch); pass "
                         "arrays or a re-iterable nn.datasets.Dataset")


def require_reiterable(data: Iterable[Any], where: str = "this loop") -> None:
    """Raise TypeError if ``data`` is a one-shot iterator (a generator, ``iter(...)``): its
    second epoch would silently run 0 steps. Datasets, lists and arrays pass."""
    if iter(data) is data:
        raise TypeError(f"{where} got a one-shot {type(data).__name__} (its second epoch would "
                        "run 0 steps); pass a re-iterable nn.datasets.Dataset, e.g. "
                        "Dataset.from_tensor_slices((x, y)).batch(32), or arrays")


def epoch_steps(data: Iterable[Any], where: str = "epoch") -> Iterator[Any]:
    """Iterate one epoch of ``data`` and raise (``check_nonempty_epoch``) if it yielded nothing.

    >>> sum(1 for _ in epoch_steps([1, 2, 3]))
    3
    """
    steps = 0
    for item in data:
        steps += 1
        yield item
    check_nonempty_epoch(steps, where)

