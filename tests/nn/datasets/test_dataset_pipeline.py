"""nn.datasets.Dataset (tf.data's spirit), the epoch helpers, and Keras's mnist.load_data."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.datasets import (
    Dataset,
    batches,
    buffer_shuffle,
    check_nonempty_epoch,
    epoch_steps,
    load_mnist,
    mnist,
    require_reiterable,
)

X = np.arange(20.0).reshape(10, 2)
Y = np.arange(10)


def _epoch_labels(ds: Dataset) -> list[int]:
    return [int(v) for _, yb in ds for v in np.atleast_1d(yb)]


# ---- structure and batching ----------------------------------------------------------------

def test_elements_keep_the_structure_they_were_sliced_from():
    x0, y0 = next(iter(Dataset.from_tensor_slices((X, Y))))
    np.testing.assert_array_equal(x0, X[0])
    assert y0 == 0
    d = next(iter(Dataset.from_tensor_slices({"image": X, "label": Y}).batch(3)))
    assert list(d) == ["image", "label"] and d["image"].shape == (3, 2)
    single = list(Dataset.from_tensor_slices(nn.Tensor([1.0, 2.0])))
    assert [float(v) for v in single] == [1.0, 2.0]


def test_batches_cover_every_sample_once_and_only_the_last_is_short():
    ds = Dataset.from_tensor_slices((X, Y)).batch(4)
    got = list(ds)
    assert len(ds) == 3 and [len(yb) for _, yb in got] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([xb for xb, _ in got]), X)


def test_drop_remainder_drops_the_short_batch():
    ds = Dataset.from_tensor_slices((X, Y)).batch(4, drop_remainder=True)
    assert len(ds) == 2 and [len(yb) for _, yb in ds] == [4, 4]


def test_mismatched_and_scalar_components_raise_naming_the_shapes():
    with pytest.raises(ValueError,
                       match=r"same number of samples.*\(10, 2\) at \[0\], \(9,\) at \[1\]"):
        Dataset.from_tensor_slices((X, Y[:9]))
    with pytest.raises(ValueError, match="cannot slice a scalar"):
        Dataset.from_tensor_slices((X, np.float32(1.0)))


def test_bad_arguments_raise_naming_them():
    ds = Dataset.from_tensor_slices((X, Y))
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        ds.batch(0)
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 1"):
        ds.shuffle(0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        ds.shuffle(4, seed=-1)
    with pytest.raises(ValueError, match=r"write \.shuffle\(buffer_size\)\.batch\(n\)"):
        ds.batch(2).shuffle(4)
    with pytest.raises(ValueError, match="batched already"):
        ds.batch(2).batch(2)
    with pytest.raises(NotImplementedError, match="loop over epochs"):
        ds.repeat()


def test_prefetch_and_cache_change_nothing():
    ds = Dataset.from_tensor_slices((X, Y)).batch(3)
    assert ds.prefetch(nn.datasets.AUTOTUNE) is ds and ds.cache() is ds


# ---- epochs and shuffling ------------------------------------------------------------------

def test_every_iteration_is_a_full_new_epoch():
    ds = Dataset.from_tensor_slices((X, Y)).shuffle(10, seed=1).batch(3)
    epochs = [_epoch_labels(ds) for _ in range(5)]
    assert all(sorted(e) == list(range(10)) for e in epochs)


def test_epoch_k_order_is_a_function_of_seed_and_k_only():
    def epochs(seed: int) -> list[list[int]]:
        ds = Dataset.from_tensor_slices((X, Y)).shuffle(10, seed=seed).batch(4)
        return [_epoch_labels(ds) for _ in range(4)]

    first = epochs(3)
    assert epochs(3) == first  # the same seed replays the same epochs
    assert len({tuple(e) for e in first}) == 4  # consecutive epochs differ
    assert epochs(4) != first
    # independent oracle: a full buffer is numpy's permutation from default_rng([seed, k])
    assert first == [list(np.random.default_rng([3, k]).permutation(10)) for k in range(4)]


def test_without_reshuffle_every_epoch_has_epoch_zeros_order():
    ds = Dataset.from_tensor_slices((X, Y)).shuffle(10, seed=2, reshuffle_each_iteration=False)
    assert _epoch_labels(ds) == _epoch_labels(ds) == list(np.random.default_rng([2, 0])
                                                          .permutation(10))


def test_an_unseeded_shuffle_is_reproducible_under_set_random_seed():
    def order() -> list[int]:
        nn.set_random_seed(11)
        return _epoch_labels(Dataset.from_tensor_slices((X, Y)).shuffle(10).batch(2))

    assert order() == order()


@pytest.mark.parametrize("buffer_size", [1, 2, 5, 50])
def test_buffer_shuffle_emits_a_permutation_drawn_from_the_buffer_window(buffer_size):
    n = 50
    order = buffer_shuffle(n, buffer_size, np.random.default_rng(0))
    assert sorted(order) == list(range(n))
    # the element emitted at step i was among the first i + buffer_size inputs
    assert all(order[i] < i + buffer_size for i in range(n))
    if buffer_size == 1:
        assert list(order) == list(range(n))


def test_a_small_buffer_mixes_less_than_a_full_one():
    rng = np.random.default_rng(1)
    small = np.mean([np.abs(buffer_shuffle(200, 4, rng) - np.arange(200)).mean()
                     for _ in range(20)])
    full = np.mean([np.abs(buffer_shuffle(200, 200, rng) - np.arange(200)).mean()
                    for _ in range(20)])
    assert small < 10 < full  # a uniform permutation moves elements ~n/3 = 67 on average


# ---- zero-step epochs --------------------------------------------------------------------

def test_an_epoch_with_zero_steps_raises():
    with pytest.raises(ValueError, match="0 steps"):
        iter(Dataset.from_tensor_slices((X[:0], Y[:0])).batch(2))
    with pytest.raises(ValueError, match="drop_remainder=True.*0 steps"):
        iter(Dataset.from_tensor_slices((X, Y)).batch(16, drop_remainder=True))


def test_epoch_helpers_reject_empty_epochs_and_one_shot_iterators():
    with pytest.raises(ValueError, match="fit ran 0 steps"):
        check_nonempty_epoch(0, "fit")
    check_nonempty_epoch(3, "fit")
    with pytest.raises(ValueError, match="ran 0 steps"):
        list(epoch_steps(iter([])))
    assert list(epoch_steps([1, 2])) == [1, 2]
    with pytest.raises(TypeError, match="one-shot generator"):
        require_reiterable((b for b in [1]), "fit")
    require_reiterable(Dataset.from_tensor_slices((X, Y)).batch(2), "fit")
    require_reiterable([1, 2], "fit")


def test_batches_is_re_iterable_and_reshuffles_every_epoch():
    ds = batches(X, Y, batch_size=4, seed=5)
    epochs = [_epoch_labels(ds) for _ in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs) and epochs[0] != epochs[1]
    assert [_epoch_labels(batches(X, Y, 4, shuffle=False))] == [list(range(10))]
    gen = batches(X, Y, 4, seed=np.random.default_rng(0))
    assert sorted(_epoch_labels(gen)) == list(range(10))


# ---- files ---------------------------------------------------------------------------------

def _write_mnist_npz(path, n_train=6, n_test=4):
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
              "x_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              "y_test": rng.integers(0, 10, n_test, dtype=np.uint8)}
    np.savez(path, **arrays)
    return arrays


def test_load_mnist_expands_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    stored = _write_mnist_npz(tmp_path / "mnist.npz")
    (x, y), _ = load_mnist("~/mnist.npz")
    np.testing.assert_array_equal(x, stored["x_train"].reshape(6, -1) / np.float32(255))
    np.testing.assert_array_equal(y, stored["y_train"])


def test_keras_load_data_returns_the_raw_uint8_arrays(tmp_path):
    stored = _write_mnist_npz(tmp_path / "mnist.npz")
    (x, y), (xt, yt) = mnist.load_data(path=tmp_path / "mnist.npz")
    for got, key in ((x, "x_train"), (y, "y_train"), (xt, "x_test"), (yt, "y_test")):
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, stored[key])
    assert x.shape == (6, 28, 28)


def test_keras_load_data_reads_a_relative_path_from_keras_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "kh"))
    (tmp_path / "kh" / "datasets").mkdir(parents=True)
    stored = _write_mnist_npz(tmp_path / "kh" / "datasets" / "mnist.npz")
    (_, y), _ = mnist.load_data()
    np.testing.assert_array_equal(y, stored["y_train"])


def test_keras_load_data_without_the_file_says_where_keras_keeps_it(tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"does not download.*\.keras/datasets/mnist\.npz"):
        mnist.load_data()


def test_keras_load_data_rejects_a_file_without_the_four_arrays(tmp_path):
    np.savez(tmp_path / "bad.npz", x_train=np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(ValueError, match="lacks"):
        mnist.load_data(path=tmp_path / "bad.npz")


# ---- nested structures (tf.data's nest: tuples and dicts of tuples and dicts) ---------------

def test_a_dict_of_a_tuple_slices_each_leaf_along_its_own_first_axis():
    xb = X * 2
    got = list(Dataset.from_tensor_slices({"a": (X, xb)}))
    assert len(got) == 10
    for i, el in enumerate(got):
        assert list(el) == ["a"] and isinstance(el["a"], tuple) and len(el["a"]) == 2
        np.testing.assert_array_equal(el["a"][0], X[i])
        np.testing.assert_array_equal(el["a"][1], xb[i])


def test_nested_inputs_and_labels_keep_their_structure_through_shuffle_and_batch():
    xa, xb = X, -X[:, :1]
    ds = Dataset.from_tensor_slices(((xa, xb), Y)).shuffle(10, seed=3).batch(4)
    seen = []
    for (ba, bb), yb in ds:
        assert ba.shape[1:] == (2,) and bb.shape[1:] == (1,) and len(ba) == len(bb) == len(yb)
        np.testing.assert_array_equal(ba, xa[yb])  # each leaf row belongs to its label's sample
        np.testing.assert_array_equal(bb, xb[yb])
        seen.extend(int(v) for v in yb)
    assert sorted(seen) == list(range(10))


def test_a_namedtuple_element_is_rebuilt_as_its_own_type():
    from collections import namedtuple
    Pair = namedtuple("Pair", ["image", "label"])
    el = next(iter(Dataset.from_tensor_slices(Pair(X, Y)).batch(2)))
    assert isinstance(el, Pair) and el.image.shape == (2, 2) and list(el.label) == [0, 1]


def test_nested_leaves_with_different_first_dimensions_raise_naming_each_path():
    with pytest.raises(ValueError, match=r"\(10, 2\) at \[0\]\[0\], \(9, 2\) at \[0\]\[1\], "
                                         r"\(10,\) at \[1\]"):
        Dataset.from_tensor_slices(((X, X[:9]), Y))
    with pytest.raises(ValueError, match=r"cannot slice a scalar.* at \['a'\]\[1\]"):
        Dataset.from_tensor_slices({"a": (X, np.float32(1.0))})


def test_a_structure_without_arrays_is_refused():
    with pytest.raises(ValueError, match="structure without arrays"):
        Dataset.from_tensor_slices({"a": ()})


def test_fit_on_a_dataset_with_nested_x_names_the_structure_instead_of_misreading_it():
    model = nn.Sequential([nn.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = X.astype(np.float32)
    y = Y.astype(np.float32)[:, None]
    with pytest.raises(TypeError, match=r"x is a nested structure \(a tuple of 2\)"):
        model.fit(Dataset.from_tensor_slices(((x, x), y)).batch(4), verbose=0)
    with pytest.raises(TypeError, match=r"got a dict with keys \['a', 'b'\]"):
        model.fit(Dataset.from_tensor_slices({"a": x, "b": y}).batch(4), verbose=0)
