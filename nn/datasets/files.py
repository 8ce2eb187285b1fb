"""Data files: scikit-learn's bundled 8x8 digits and MNIST from files a user has.

Both loaders return ``(x_train, y_train), (x_test, y_test)`` like ``keras.datasets``, with
float32 pixels scaled to [0, 1] (integer pixels divided by their maximum code: 16 for digits,
255 for MNIST) and int64 labels. ``flatten=True`` (the default) gives one row per image, ready
for ``Dense``; ``flatten=False`` keeps the image shape.
"""

from __future__ import annotations

import gzip
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

Split = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def load_digits(*, test_fraction: float = 0.2, seed: int = 0, flatten: bool = True) -> Split:
    """The 1797 8x8 handwritten digits shipped with scikit-learn (no download).

    - Split: a permutation from ``numpy.random.default_rng(seed)``; the first
      ``round(test_fraction * 1797)`` shuffled samples are the test set (359 by default).
    - Pixels: the 0..16 counts divided by 16, float32 in [0, 1]; labels int64 in 0..9.
    - Shapes: (n, 64) with ``flatten=True``, else (n, 8, 8).

    >>> (x, y), (xt, yt) = load_digits()
    >>> x.shape, xt.shape, x.dtype, y.dtype
    ((1438, 64), (359, 64), dtype('float32'), dtype('int64'))
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        raise ImportError("load_digits needs scikit-learn (its bundled digits data): "
                          "pip install 'fpsim[data]'") from None
    bunch = sk_load_digits()
    x = (bunch.images.astype(np.float32) / np.float32(16.0))
    y = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    if flatten:
        x = x.reshape(len(x), -1)
    return (x[train], y[train]), (x[test], y[test])


# ---- MNIST ------------------------------------------------------------------------------------

# IDX header: 0x00 0x00 <type code> <number of dimensions>, then one big-endian uint32 per dim.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

_MNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (gzipped if its name ends in .gz) into a native-endian array.

    Raises FileNotFoundError if it is missing and ValueError naming the file if it is corrupt
    (bad magic, unknown type code, truncated, trailing bytes, broken gzip stream).
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error) as e:  # includes gzip.BadGzipFile
        raise ValueError(f"{path}: cannot read the file ({e})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (it must start with two zero bytes)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        known = ", ".join(f"{k:#04x}" for k in _IDX_TYPES)
        raise ValueError(f"{path}: unknown IDX type code {code:#04x}; known codes: {known}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes, {ndim} dimensions)")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        problem = "truncated" if len(raw) < expected else "has trailing bytes"
        raise ValueError(f"{path}: IDX data {problem}: shape {shape} of {dtype.str} needs "
                         f"{expected} bytes, the file has {len(raw)}")
    data = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def _find_idx(directory: Path, stem: str) -> Path:
    candidates = [stem, stem + ".gz", stem.replace("-idx", ".idx"),
                  stem.replace("-idx", ".idx") + ".gz"]
    for name in candidates:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"{directory}: no MNIST file {stem!r}; looked for "
                            f"{', '.join(candidates)}")


def _load_mnist_arrays(path: Path) -> dict[str, np.ndarray]:
    if path.is_dir():
        return {key: read_idx(_find_idx(path, stem)) for key, stem in _MNIST_FILES.items()}
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such MNIST directory or .npz file")
    return read_mnist_npz(path)


def read_mnist_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays ``x_train``, ``y_train``, ``x_test``, ``y_test`` of an npz (Keras's
    mnist.npz layout), as stored; ValueError naming the file if it is unreadable or lacks one."""
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single array, not named arrays")
        with npz:
            files = list(npz.files)
            arrays = {k: npz[k] for k in _MNIST_FILES if k in files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{path}: not a readable .npz file ({e})") from None
    missing = [k for k in _MNIST_FILES if k not in arrays]
    if missing:
        raise ValueError(f"{path}: the npz lacks {missing}; it needs {list(_MNIST_FILES)} "
                         f"(it has {files})")
    return arrays


def _images(x: np.ndarray, name: str, flatten: bool) -> np.ndarray:
    if x.ndim < 2:
        raise ValueError(f"{name}: images must have at least 2 dimensions, got shape {x.shape}")
    if x.dtype.kind in "iu":
        x = x.astype(np.float32) / np.float32(255.0)
    elif x.dtype.kind == "f":
        x = x.astype(np.float32)
    else:
        raise ValueError(f"{name}: pixels must be numbers, got dtype {x.dtype}")
    return x.reshape(len(x), -1) if flatten else x


def _labels(y: np.ndarray, name: str, n: int) -> np.ndarray:
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(f"{name}: labels must be a 1-D integer array, got {y.dtype}{y.shape}")
    if len(y) != n:
        raise ValueError(f"{name}: {len(y)} labels for {n} images")
    return y.astype(np.int64)


def load_mnist(path: str | os.PathLike, *, flatten: bool = True) -> Split:
    """MNIST (or Fashion-MNIST) from files you have; nothing is downloaded.

    ``path`` (``~`` is expanded) is either

    - a directory holding the four IDX files ``train-images-idx3-ubyte``,
      ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``
      (each may be gzipped, ``.gz``, and ``-idx`` may be spelled ``.idx``), or
    - an ``.npz`` with ``x_train``, ``y_train``, ``x_test``, ``y_test`` (Keras's mnist.npz).

    Integer pixels are divided by 255 (float pixels are kept) into float32; labels are int64;
    ``flatten=True`` gives (n, 784). Missing files raise FileNotFoundError; corrupt ones or
    mismatched image/label counts raise ValueError naming the file.
    """
    arrays = _load_mnist_arrays(Path(path).expanduser())
    x_train = _images(arrays["x_train"], "x_train", flatten)
    x_test = _images(arrays["x_test"], "x_test", flatten)
    y_train = _labels(arrays["y_train"], "y_train", len(x_train))
    y_test = _labels(arrays["y_test"], "y_test", len(x_test))
    return (x_train, y_train), (x_test, y_test)
