"""``vectors``' sums of products take an accumulated form on small operands (one target in live
mode): the same bits as the term-by-term loop of large batches, and a fresh contiguous result
like the loop's (transcendental ufuncs round strided operands differently)."""

from __future__ import annotations

import numpy as np
import pytest

from ik_solvers.core import vectors


def _loop_dot(a, b):
    total = a[..., 0] * b[..., 0]
    for k in range(1, a.shape[-1]):
        total = total + a[..., k] * b[..., k]
    return total


def _loop_matvec(m, v):
    total = m[..., :, 0] * v[..., None, 0]
    for k in range(1, m.shape[-1]):
        total = total + m[..., :, k] * v[..., None, k]
    return total


def _loop_tmatvec(m, v):
    total = m[..., 0, :] * v[..., 0, None]
    for k in range(1, m.shape[-2]):
        total = total + m[..., k, :] * v[..., k, None]
    return total


@pytest.mark.parametrize("rows", [1, 2, 7, 31])
def test_small_sums_of_products_give_the_loops_bits_in_contiguous_arrays(rows):
    rng = np.random.default_rng(rows)
    for terms in (2, 3, 4, 5):
        a, b = rng.normal(size=(2, rows, terms)) * rng.uniform(1e-3, 1e3, (2, rows, 1))
        m = rng.normal(size=(rows, terms, terms))
        for got, expected in ((vectors.dot(a, b), _loop_dot(a, b)), (vectors.dot(a, b[0]), _loop_dot(a, b[0])),
                              (vectors.matvec(m, a), _loop_matvec(m, a)), (vectors.tmatvec(m, a), _loop_tmatvec(m, a)),
                              (vectors.matvec(m[0], a), _loop_matvec(m[0], a))):
            assert got.tobytes() == expected.tobytes() and got.flags.c_contiguous


def test_small_cross_products_give_the_large_paths_bits():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 2000, 3))
    whole = vectors.cross(a, b)  # ≥ 3000 elements: the component-by-component path
    for row in range(0, 2000, 97):
        assert vectors.cross(a[row:row + 1], b[row:row + 1]).tobytes() == whole[row:row + 1].tobytes()
        assert vectors.cross(a[row], b[row]).tobytes() == whole[row].tobytes()
