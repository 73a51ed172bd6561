"""Small-vector algebra whose results never depend on the batch size.

numpy's reductions (``einsum``, ``linalg.norm``, BLAS-backed products of
strided stacks) pick summation orders by memory layout and batch shape, and its
SIMD transcendental functions round strided operands differently from
contiguous ones, so a target solved alone can differ in the last bit from the
same target solved in a batch. History independence (SPEC §5) and
``ik_batch --jobs`` promise bit identity, so the solvers sum short axes here,
term by term, in a fixed order, and copy transcendental inputs to unit stride.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .array_ops import ArrayOps, Real

_NEXT = np.array([1, 2, 0])
_AFTER_NEXT = np.array([2, 0, 1])
_CYCLE = np.array([1, 2, 0, 1])  # [:3] is _NEXT, [1:] is _AFTER_NEXT: one gather per operand


def unit_stride(a: np.ndarray) -> np.ndarray:
    """A fresh contiguous copy, for the inputs of transcendental ufuncs.

    numpy's SIMD sin / cos / arctan2 read unit-stride operands directly but send
    strided ones (a column of a batch) through a buffered scalar loop, and the
    two round differently in the last bit; a one-element slice counts as
    contiguous while its batch's column does not. Copying first gives every
    element the same code path whatever the batch.
    """
    return np.array(a, dtype=float, copy=True, order="C")


# From this many terms on, a sum in index order is one np.add.accumulate (strictly sequential, so
# the same bits as the term-by-term loop) instead of a Python loop of array operations.
_ACCUMULATE_TERMS = 6

# Up to this many elements per operand the accumulation wins for any number of terms: a loop of
# per-term slices costs ~5 array calls more, and on one target (live mode) the call overhead is
# all there is; on large batches accumulating along a short strided axis is the slower one.
_ACCUMULATE_SMALL = 96


def _small(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are small enough for the accumulated form at any number of terms."""
    return a.size <= _ACCUMULATE_SMALL and b.size <= _ACCUMULATE_SMALL


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``Σ_k a[..., k] b[..., k]`` summed in index order."""
    if a.shape[-1] >= _ACCUMULATE_TERMS:
        return np.add.accumulate(a * b, axis=-1)[..., -1]
    if _small(a, b):
        # A fresh contiguous array as the loop below returns: the last column of the
        # accumulation is strided, and transcendental ufuncs round strided operands differently.
        return np.add.accumulate(a * b, axis=-1)[..., -1].copy()
    total = a[..., 0] * b[..., 0]
    for k in range(1, a.shape[-1]):
        total = total + a[..., k] * b[..., k]
    return total


def norm(a: np.ndarray) -> np.ndarray:
    """Euclidean length over the last axis."""
    return np.sqrt(dot(a, a))


# Above this many elements per operand, three component products beat the
# gathered form (fewer large copies); below, the gathered form's fewer calls win.
# Both compute a_i b_j − a_j b_i exactly alike, so the switch changes no bit.
_CROSS_BY_COMPONENTS = 3000


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of ``(..., 3)`` arrays."""
    if max(a.size, b.size) < _CROSS_BY_COMPONENTS:
        a4, b4 = a[..., _CYCLE], b[..., _CYCLE]  # a[..., _NEXT] is a4[..., :3], a[..., _AFTER_NEXT] a4[..., 1:]
        return a4[..., :3] * b4[..., 1:] - a4[..., 1:] * b4[..., :3]
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    np.subtract(a1 * b2, a2 * b1, out=out[..., 0])
    np.subtract(a2 * b0, a0 * b2, out=out[..., 1])
    np.subtract(a0 * b1, a1 * b0, out=out[..., 2])
    return out


def matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``m @ v`` for ``m (..., r, c)`` and ``v (..., c)`` → ``(..., r)``."""
    if m.shape[-1] >= _ACCUMULATE_TERMS:
        return np.add.accumulate(m * v[..., None, :], axis=-1)[..., -1]
    if _small(m, v):  # contiguous, as the loop's result (see dot)
        return np.add.accumulate(m * v[..., None, :], axis=-1)[..., -1].copy()
    total = m[..., :, 0] * v[..., None, 0]
    for k in range(1, m.shape[-1]):
        total = total + m[..., :, k] * v[..., None, k]
    return total


def tmatvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``mᵀ @ v`` for ``m (..., r, c)`` and ``v (..., r)`` → ``(..., c)``."""
    if m.shape[-2] >= _ACCUMULATE_TERMS:
        return np.add.accumulate(m * v[..., :, None], axis=-2)[..., -1, :]
    if _small(m, v):  # contiguous, as the loop's result (see dot)
        return np.add.accumulate(m * v[..., :, None], axis=-2)[..., -1, :].copy()
    total = m[..., 0, :] * v[..., 0, None]
    for k in range(1, m.shape[-2]):
        total = total + m[..., k, :] * v[..., k, None]
    return total



def _row_major_blocks(a: np.ndarray) -> np.ndarray:
    """``a`` itself when each of its last-two-axis matrices is row-major with unit stride, else a C-order copy."""
    if type(a) is not np.ndarray or a.dtype != np.float64:
        a = np.asarray(a, dtype=float)
    strides = a.strides
    if a.ndim >= 2 and strides[-1] == 8 and strides[-2] >= 8 * a.shape[-1] and strides[-2] % 8 == 0:
        return a
    return np.ascontiguousarray(a)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` for stacks of small matrices ``a (..., r, k)``, ``b (..., k, c)`` → ``(..., r, c)``.

    numpy's ``matmul`` sends each matrix of a stack to BLAS when its last two
    strides allow (unit stride along rows) and through its own loop otherwise,
    and the two round differently (BLAS fuses multiply-adds). Operands built by
    fancy indexing (``x[..., idx]``) or transposed views have a layout that
    depends on the batch size (a batch of one is "contiguous", a batch of many
    is not), so the same matrix went one way alone and the other in a batch:
    measured on AVX-512, a target's pose differed in the last bit. Here every
    operand's matrices are row-major (copied when not), so every matrix goes to
    BLAS, one call per matrix; BLAS's result for one small matrix does not
    depend on where it sits in memory (checked for 3×3 … 12×12 at every 8-byte
    offset and batch slice).
    """
    return np.matmul(_row_major_blocks(a), _row_major_blocks(b), out=out)


def unit(a: np.ndarray) -> np.ndarray:
    """``a`` divided by its length over the last axis (no guard: zero rows give NaN)."""
    return a / norm(a)[..., None]


def ordered_sum(a: np.ndarray, axis: int) -> np.ndarray:
    """Sum over ``axis`` added strictly in index order.

    ``np.sum`` adds long axes pairwise in blocks whose shape follows the memory
    layout; an accumulation is always sequential, whatever the batch.
    """
    return np.take(np.add.accumulate(a, axis=axis), -1, axis=axis)


# ------------------------------------------- vectors in components (HI's per-target math, array_ops)
# Three values, each a Python float (one target) or an (N,) array (a batch): plain arithmetic, which
# both support, summed in index order as the batch functions above sum; cross is ``a_i b_j − a_j b_i``.
Vec3 = tuple[Real, Real, Real]
Rows3 = tuple[Vec3, Vec3, Vec3]


def vec3(v: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """Three Python floats (from an array row or a sequence)."""
    return (float(v[0]), float(v[1]), float(v[2]))


def rows3(m: Sequence[Sequence[float]] | np.ndarray) -> Rows3:
    """A 3×3 matrix as rows of Python floats."""
    return (vec3(m[0]), vec3(m[1]), vec3(m[2]))


def columns3(a: np.ndarray) -> Vec3:
    """The three components of ``(..., 3)`` vectors as unit-stride arrays (transcendental-safe)."""
    return (unit_stride(a[..., 0]), unit_stride(a[..., 1]), unit_stride(a[..., 2]))


def stack3(v: Sequence[Real]) -> np.ndarray:
    """Components back into ``(..., k)`` vectors."""
    if all(isinstance(c, np.ndarray) and c.shape == v[0].shape for c in v):
        return np.stack(v, axis=-1)
    return np.stack(np.broadcast_arrays(*v), axis=-1)


def dot3(a: Sequence[Real], b: Sequence[Real]) -> Real:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def norm3(xp: ArrayOps, a: Sequence[Real]) -> Real:
    return xp.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def unit3(xp: ArrayOps, a: Sequence[Real]) -> Vec3:
    length = norm3(xp, a)
    return (a[0] / length, a[1] / length, a[2] / length)


def cross3(a: Sequence[Real], b: Sequence[Real]) -> Vec3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def matvec3(m: Rows3, v: Sequence[Real]) -> Vec3:
    """``m @ v`` of one matrix given by rows (each entry a float or an (N,) array)."""
    return (dot3(m[0], v), dot3(m[1], v), dot3(m[2], v))


def tmatvec3(m: Rows3, v: Sequence[Real]) -> Vec3:
    """``mᵀ @ v`` of one matrix given by rows."""
    (a, b, c), (d, e, f), (g, h, i) = m
    x, y, z = v
    return (a * x + d * y + g * z, b * x + e * y + h * z, c * x + f * y + i * z)


def matmul3(a: Rows3, b: Rows3) -> Rows3:
    """``a @ b`` of 3×3 matrices given by rows, each entry summed in index order (no fused multiply-adds)."""
    (b00, b01, b02), (b10, b11, b12), (b20, b21, b22) = b
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = a
    return ((a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22),
            (a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22),
            (a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22))


def matrix_rows(m: np.ndarray) -> Rows3:
    """``(..., 3, 3)`` matrices as rows of components (views: arithmetic only)."""
    return tuple(tuple(m[..., i, j] for j in range(3)) for i in range(3))  # type: ignore[return-value]
