"""Small-vector algebra whose results never depend on the batch size.

numpy's reductions (``einsum``, ``linalg.norm``, BLAS-backed products of
strided stacks) pick summation orders by memory layout and batch shape, so a
target solved alone can differ in the last bit from the same target solved in
a batch. History independence (SPEC §5) and ``ik_batch --jobs`` promise bit
identity, so the solvers sum short axes here, term by term, in a fixed order.
"""

from __future__ import annotations

import numpy as np

_NEXT = np.array([1, 2, 0])
_AFTER_NEXT = np.array([2, 0, 1])


def unit_stride(a: np.ndarray) -> np.ndarray:
    """A fresh contiguous copy, for the inputs of transcendental ufuncs.

    numpy's SIMD sin / cos / arctan2 read unit-stride operands directly but send
    strided ones (a column of a batch) through a buffered scalar loop, and the
    two round differently in the last bit; a one-element slice counts as
    contiguous while its batch's column does not. Copying first gives every
    element the same code path whatever the batch.
    """
    return np.array(a, dtype=float, copy=True, order="C")


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``Σ_k a[..., k] b[..., k]`` summed in index order."""
    total = a[..., 0] * b[..., 0]
    for k in range(1, a.shape[-1]):
        total = total + a[..., k] * b[..., k]
    return total


def norm(a: np.ndarray) -> np.ndarray:
    """Euclidean length over the last axis."""
    return np.sqrt(dot(a, a))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of ``(..., 3)`` arrays."""
    return a[..., _NEXT] * b[..., _AFTER_NEXT] - a[..., _AFTER_NEXT] * b[..., _NEXT]


def matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``m @ v`` for ``m (..., r, c)`` and ``v (..., c)`` → ``(..., r)``."""
    total = m[..., :, 0] * v[..., None, 0]
    for k in range(1, m.shape[-1]):
        total = total + m[..., :, k] * v[..., None, k]
    return total


def tmatvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``mᵀ @ v`` for ``m (..., r, c)`` and ``v (..., r)`` → ``(..., c)``."""
    total = m[..., 0, :] * v[..., 0, None]
    for k in range(1, m.shape[-2]):
        total = total + m[..., k, :] * v[..., k, None]
    return total
