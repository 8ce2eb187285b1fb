"""nn.engine.blas: BLAS threads sized by nn (threadpoolctl), read back independently.

Oracle: threadpoolctl's own ``threadpool_info`` after the limit."""

from __future__ import annotations

import pytest

from nn.engine import blas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info()
            if p.get("user_api") == "blas"]


def test_limit_blas_sets_the_thread_count_threadpoolctl_reports():
    if not _blas_threads():
        pytest.skip("numpy's BLAS is not visible to threadpoolctl")
    before = max(_blas_threads())
    try:
        assert blas.limit_blas(1) == 1
        assert _blas_threads() == [1] * len(_blas_threads())
    finally:
        blas.limit_blas(before)
    assert blas.blas_thread_count() == before


def test_limit_blas_none_leaves_blas_as_it_is():
    assert blas.limit_blas(None) == blas.blas_thread_count()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_limit_blas_refuses_a_count_that_is_not_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"limit_blas: threads must be an int >= 1 or None"):
        blas.limit_blas(bad)


def test_the_old_import_path_still_works():
    from nn.experiments import seeds

    assert seeds.limit_blas is blas.limit_blas
    assert seeds.blas_thread_count is blas.blas_thread_count
    assert seeds.BLAS_THREADS == blas.BLAS_THREADS == 1
