"""``keras.datasets.mnist.load_data`` over Keras's cached file; nothing is downloaded::

    from nn.datasets import mnist
    (x_train, y_train), (x_test, y_test) = mnist.load_data()
    x_train = x_train.reshape(60000, 784).astype("float32") / 255   # the guide's own scaling
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nn.datasets.files import read_mnist_npz

Split = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def keras_datasets_dir() -> Path:
    """Where Keras caches datasets: ``$KERAS_HOME/datasets``, else ``~/.keras/datasets``."""
    home = os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")
    return Path(home).expanduser() / "datasets"


def load_data(path: str | os.PathLike = "mnist.npz") -> Split:
    """``(x_train, y_train), (x_test, y_test)`` exactly as stored in Keras's ``mnist.npz``.

    - ``path`` as Keras reads it: relative to Keras's cache directory (``~/.keras/datasets``,
      or ``$KERAS_HOME/datasets``); an absolute path (``~`` expanded) is used as it is.
    - The arrays come back raw, as Keras returns them: uint8 images of shape (n, 28, 28) and
      uint8 labels; no scaling, no flattening (``nn.datasets.load_mnist`` does both).
    - Nothing is downloaded. A missing file raises FileNotFoundError saying where Keras keeps
      it; a file without the four arrays raises ValueError naming the file.
    """
    given = Path(path).expanduser()
    file = given if given.is_absolute() else keras_datasets_dir() / given
    if not file.is_file():
        raise FileNotFoundError(
            f"{file}: no such file. nn does not download; Keras keeps MNIST at "
            f"{keras_datasets_dir() / 'mnist.npz'} (after keras.datasets.mnist.load_data() has "
            "run once): copy it there or pass its absolute path as path=")
    arrays = read_mnist_npz(file)
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim < 1 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(f"{file}: x_{split} of shape {x.shape} and y_{split} of shape "
                             f"{y.shape} do not pair up (one label per image)")
    return (arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"])
