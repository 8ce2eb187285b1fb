"""Datasets: the bundled digits, MNIST from IDX/npz files written here, and batching."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from nn.datasets import batches, load_digits, load_mnist, read_idx

NAMES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
         "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def idx_bytes(arr: np.ndarray) -> bytes:
    """The IDX encoding, written independently: magic 0 0 <code> <ndim>, big-endian dims, data."""
    code = {np.uint8: 0x08, np.int16: 0x0B, np.float32: 0x0D}[arr.dtype.type]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def small_mnist():
    rng = np.random.default_rng(0)
    return {"x_train": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
            "y_train": rng.integers(0, 10, 5, dtype=np.uint8),
            "x_test": rng.integers(0, 256, (3, 28, 28), dtype=np.uint8),
            "y_test": rng.integers(0, 10, 3, dtype=np.uint8)}


def write_idx_dir(directory, arrays, gz: bool):
    for key, stem in NAMES.items():
        data = idx_bytes(arrays[key])
        if gz:
            (directory / (stem + ".gz")).write_bytes(gzip.compress(data))
        else:
            (directory / stem).write_bytes(data)


def check_split(loaded, arrays, flatten=True):
    (x, y), (xt, yt) = loaded
    for got, key in ((x, "x_train"), (xt, "x_test")):
        assert got.dtype == np.float32
        want = arrays[key].astype(np.float64) / 255
        np.testing.assert_allclose(got, want.reshape(len(want), -1) if flatten else want,
                                   rtol=1e-7)
    for got, key in ((y, "y_train"), (yt, "y_test")):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, arrays[key])


# ---- load_mnist --------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzipped"])
def test_load_mnist_reads_idx_files(tmp_path, gz):
    arrays = small_mnist()
    write_idx_dir(tmp_path, arrays, gz)
    check_split(load_mnist(tmp_path), arrays)
    check_split(load_mnist(str(tmp_path), flatten=False), arrays, flatten=False)


def test_load_mnist_accepts_the_dotted_idx_names(tmp_path):
    arrays = small_mnist()
    for key, stem in NAMES.items():
        (tmp_path / stem.replace("-idx", ".idx")).write_bytes(idx_bytes(arrays[key]))
    check_split(load_mnist(tmp_path), arrays)


def test_load_mnist_reads_an_npz(tmp_path):
    arrays = small_mnist()
    np.savez_compressed(tmp_path / "mnist.npz", **arrays)
    check_split(load_mnist(tmp_path / "mnist.npz"), arrays)


def test_read_idx_decodes_big_endian_types(tmp_path):
    for arr in (np.arange(-6, 6, dtype=np.int16).reshape(3, 4),
                np.linspace(-1, 1, 5, dtype=np.float32)):
        (tmp_path / "a.idx").write_bytes(idx_bytes(arr))
        got = read_idx(tmp_path / "a.idx")
        assert got.dtype.isnative and got.dtype == arr.dtype
        np.testing.assert_array_equal(got, arr)


def test_missing_mnist_file_raises_naming_it(tmp_path):
    arrays = small_mnist()
    write_idx_dir(tmp_path, arrays, gz=False)
    (tmp_path / NAMES["y_test"]).unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_mnist(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such"):
        load_mnist(tmp_path / "nothing.npz")


@pytest.mark.parametrize("corrupt, match", [
    (lambda b: b[:-10], "truncated"),
    (lambda b: b + b"\x00", "trailing bytes"),
    (lambda b: b"\x01" + b[1:], "not an IDX file"),
    (lambda b: b[:2] + b"\x42" + b[3:], "unknown IDX type code 0x42"),
    (lambda b: b[:6], "truncated IDX header"),
])
def test_corrupt_idx_raises_naming_the_file_and_the_problem(tmp_path, corrupt, match):
    arrays = small_mnist()
    write_idx_dir(tmp_path, arrays, gz=False)
    path = tmp_path / NAMES["x_train"]
    path.write_bytes(corrupt(path.read_bytes()))
    with pytest.raises(ValueError, match=f"train-images-idx3-ubyte.*{match}"):
        load_mnist(tmp_path)


def test_corrupt_gzip_raises_naming_the_file(tmp_path):
    arrays = small_mnist()
    write_idx_dir(tmp_path, arrays, gz=True)
    path = tmp_path / (NAMES["y_train"] + ".gz")
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz"):
        load_mnist(tmp_path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz"):
        load_mnist(tmp_path)


def test_mismatched_image_and_label_counts_raise(tmp_path):
    arrays = small_mnist()
    arrays["y_train"] = arrays["y_train"][:4]
    write_idx_dir(tmp_path, arrays, gz=False)
    with pytest.raises(ValueError, match="y_train: 4 labels for 5 images"):
        load_mnist(tmp_path)


def test_bad_npz_files_raise(tmp_path):
    arrays = small_mnist()
    np.savez(tmp_path / "partial.npz", x_train=arrays["x_train"], y_train=arrays["y_train"])
    with pytest.raises(ValueError, match=r"lacks \['x_test', 'y_test'\]"):
        load_mnist(tmp_path / "partial.npz")
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 this is no zip")
    with pytest.raises(ValueError, match="junk.npz: not a readable .npz"):
        load_mnist(tmp_path / "junk.npz")
    np.save(tmp_path / "single.npy", arrays["x_train"])
    with pytest.raises(ValueError, match="single array"):
        load_mnist(tmp_path / "single.npy")


# ---- load_digits -------------------------------------------------------------------------

def test_load_digits_shapes_ranges_and_types():
    (x, y), (xt, yt) = load_digits()
    assert x.shape == (1438, 64) and xt.shape == (359, 64)
    assert x.dtype == xt.dtype == np.float32 and y.dtype == yt.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0 and xt.min() >= 0.0 and xt.max() <= 1.0
    assert set(np.unique(y)) == set(range(10)) and set(np.unique(yt)) <= set(range(10))
    assert np.all(np.isin(x * 16, np.arange(17)))  # the 0..16 counts, exactly scaled


def test_load_digits_is_the_sklearn_data_split_without_overlap_or_loss():
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    (x, y), (xt, yt) = load_digits()
    got = np.concatenate([x, xt]) * 16
    key = lambda a, b: sorted(map(tuple, np.column_stack([a, b]).tolist()))  # noqa: E731
    assert key(got, np.concatenate([y, yt])) == key(bunch.data, bunch.target)


def test_load_digits_is_deterministic_and_the_seed_changes_the_split():
    (a, ya), _ = load_digits()
    (b, yb), _ = load_digits()
    (c, _), _ = load_digits(seed=1)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(a, c)


def test_load_digits_options():
    (x, _), (xt, _) = load_digits(test_fraction=0.5, flatten=False)
    assert x.shape[1:] == (8, 8) and len(x) + len(xt) == 1797 and abs(len(x) - len(xt)) <= 1
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits(test_fraction=1.0)


# ---- batches -----------------------------------------------------------------------------

def test_batches_cover_every_sample_once_with_a_short_last_batch():
    x, y = np.arange(10.0).reshape(10, 1), np.arange(10)
    got = list(batches(x, y, batch_size=4, shuffle=True, seed=3))
    assert [len(b) for b, _ in got] == [4, 4, 2]
    xs = np.concatenate([b for b, _ in got]).ravel()
    ys = np.concatenate([c for _, c in got])
    np.testing.assert_array_equal(xs, ys)  # pairs stay together
    assert sorted(ys) == list(range(10))


def test_batches_without_shuffle_keep_order_and_seed_fixes_the_shuffle():
    x, y = np.arange(7), np.arange(7)
    assert [list(b) for b, _ in batches(x, y, 3, shuffle=False)] == [[0, 1, 2], [3, 4, 5], [6]]
    first = [list(b) for b, _ in batches(x, y, 3, seed=5)]
    assert first == [list(b) for b, _ in batches(x, y, 3, seed=5)]


def test_batches_reject_bad_input():
    with pytest.raises(ValueError, match="same number of samples"):
        list(batches(np.zeros(3), np.zeros(4), 2))
    with pytest.raises(ValueError, match="batch_size"):
        list(batches(np.zeros(3), np.zeros(3), 0))
