"""Batched small linear algebra whose results never depend on the batch: Gram matrices,
smallest eigenvalues and symmetric positive definite solves (closed forms for k ≤ 3)."""

from __future__ import annotations

import numpy as np

from .vectors import cross, dot, matmul, matvec, unit_stride

# Singular values below this fraction of the largest are treated as zero by
# the pseudo-inverse (the usual rank cut-off, in the spirit of numpy.linalg.pinv's rcond).
PINV_RCOND = 1e-10


def gram_matrices(j: np.ndarray) -> np.ndarray:
    """The smaller Gram matrix of each ``j (N, r, c)``: ``J Jᵀ (N, r, r)`` when ``c ≥ r``, else ``Jᵀ J (N, c, c)``.

    Both share their nonzero eigenvalues, the squared singular values of ``J``.
    """
    jt = np.swapaxes(j, 1, 2)
    return matmul(j, jt) if j.shape[2] >= j.shape[1] else matmul(jt, j)


def smallest_eigenvalues(gram: np.ndarray) -> np.ndarray:
    """Smallest eigenvalue ``(N,)`` of symmetric positive semi-definite ``(N, k, k)`` matrices.

    Closed form for k = 3 (the trigonometric solution of the characteristic
    cubic, Smith 1961) and k ≤ 2; LAPACK's ``eigvalsh`` otherwise.
    """
    k = gram.shape[-1]
    if k == 1:
        return gram[:, 0, 0]
    if k == 2:
        mean = 0.5 * (gram[:, 0, 0] + gram[:, 1, 1])
        return mean - np.hypot(0.5 * (gram[:, 0, 0] - gram[:, 1, 1]), unit_stride(gram[:, 0, 1]))
    if k != 3:
        return np.linalg.eigvalsh(gram)[:, 0]
    a = gram
    p1 = a[:, 0, 1] ** 2 + a[:, 0, 2] ** 2 + a[:, 1, 2] ** 2
    mean = (a[:, 0, 0] + a[:, 1, 1] + a[:, 2, 2]) / 3.0
    d0, d1, d2 = a[:, 0, 0] - mean, a[:, 1, 1] - mean, a[:, 2, 2] - mean
    p = np.sqrt((d0**2 + d1**2 + d2**2 + 2.0 * p1) / 6.0)
    safe_p = np.where(p > 0.0, p, 1.0)
    b00, b11, b22 = d0 / safe_p, d1 / safe_p, d2 / safe_p
    b01, b02, b12 = a[:, 0, 1] / safe_p, a[:, 0, 2] / safe_p, a[:, 1, 2] / safe_p
    det_b = b00 * (b11 * b22 - b12**2) - b01 * (b01 * b22 - b12 * b02) + b02 * (b01 * b12 - b11 * b02)
    phi = np.arccos(np.clip(det_b / 2.0, -1.0, 1.0)) / 3.0
    smallest = mean + 2.0 * p * np.cos(phi + 2.0 * np.pi / 3.0)
    return np.where(p > 0.0, smallest, mean)


def solve_spd3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve batched symmetric positive definite systems ``a (N, k, k) x = b (N, k)``.

    For k = 3 in closed form by the adjugate (the rows of ``a⁻¹ det a`` are
    cross products of columns): about twenty array operations whatever the
    batch size, where ``numpy.linalg.solve`` pays a LAPACK call per matrix.
    Elementwise only, so a target's result never depends on its batch
    (history independence and ``--jobs`` chunking are bit-exact). The damping
    keeps these systems far from singular (condition ≤ (σ²max + λ²) / λ²).
    """
    if a.shape[-1] != 3:
        return np.linalg.solve(a, b[..., None])[..., 0]
    columns = np.swapaxes(a, 1, 2)
    adjugate_rows = cross(columns[:, _NEXT_ROW], columns[:, _AFTER_NEXT_ROW])
    determinant = dot(columns[:, 0], adjugate_rows[:, 0])
    # A singular system (only where the caller's damping underflowed) gives no step, not 0/0.
    singular = determinant == 0.0
    x = matvec(adjugate_rows, b) / np.where(singular, 1.0, determinant)[:, None]
    return np.where(singular[:, None], 0.0, x)


_NEXT_ROW = np.array([1, 2, 0])
_AFTER_NEXT_ROW = np.array([2, 0, 1])
