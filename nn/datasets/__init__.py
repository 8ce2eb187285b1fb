"""Datasets: bundled and user-supplied data, and re-iterable input pipelines.

- ``load_digits()``: scikit-learn's bundled 8x8 digits; ``load_mnist(path)``: MNIST from files
  you have (IDX or npz), scaled to [0, 1] (``nn.datasets.files``).
- ``mnist.load_data(path=...)``: Keras's ``mnist.npz`` as Keras returns it (raw uint8).
- ``text.load_python_docs()``, ``text.char_dataset(T, n)``: Python's own documentation (shipped
  with CPython) as character ids for a small language model (``nn.datasets.text``).
- ``Dataset``: ``from_tensor_slices((x, y)).shuffle(buffer_size, seed).batch(n)``, iterated once
  per epoch; ``batches(x, y, ...)`` builds one (``nn.datasets.dataset``).
- For loops that consume datasets: ``check_nonempty_epoch``, ``epoch_steps`` and
  ``require_reiterable`` turn a zero-step epoch into an error.
"""

from nn.datasets import mnist, text
from nn.datasets.dataset import (
    AUTOTUNE,
    Dataset,
    batches,
    buffer_shuffle,
    check_nonempty_epoch,
    epoch_steps,
    require_reiterable,
)
from nn.datasets.files import load_digits, load_mnist, read_idx

__all__ = [
    "AUTOTUNE", "Dataset", "batches", "buffer_shuffle", "check_nonempty_epoch", "epoch_steps",
    "load_digits", "load_mnist", "mnist", "read_idx", "require_reiterable", "text",
]
