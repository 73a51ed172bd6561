"""Batched rotation conversions (matrices, rotation vectors, quaternions ``(w, x, y, z)``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .vectors import cross, dot, matvec, norm, unit_stride

# Below this angle (radians) the Rodrigues series terms are replaced by their
# Taylor expansions: sin(x)/x and (1 - cos x)/x^2 lose all precision near 0.
_SMALL_ANGLE = 1e-6


# [v]x read off (x, y, z, 0): entry k takes component _SKEW_GATHER[k] times _SKEW_SIGNS[k].
_SKEW_GATHER = np.array([3, 2, 1, 2, 3, 0, 1, 0, 3])
_SKEW_SIGNS = np.array([0.0, -1, 1, 1, 0, -1, -1, 1, 0])
# The off-diagonal entries of ``[v]x`` (flattened index, component of v, sign).
_SKEW_OFF = np.array([1, 2, 3, 5, 6, 7])
# From this many rotation-vector components up, matrices_from_rotvecs works entry by entry.
_ROTVEC_COMPONENTS = 192
_SKEW_OFF_GATHER = _SKEW_GATHER[_SKEW_OFF]
_SKEW_OFF_SIGNS = _SKEW_SIGNS[_SKEW_OFF]


def skew(vectors: np.ndarray) -> np.ndarray:
    """Cross-product matrices ``[v]x`` of shape ``(..., 3, 3)`` for vectors ``(..., 3)``."""
    padded = np.concatenate([vectors, np.zeros(vectors.shape[:-1] + (1,))], -1)
    # C order whatever the batch: a fancy index puts the batch axis innermost (vectors.matmul).
    return np.ascontiguousarray((padded[..., _SKEW_GATHER] * _SKEW_SIGNS).reshape(vectors.shape[:-1] + (3, 3)))


def _outer_products(v: np.ndarray) -> np.ndarray:
    """``v vᵀ`` of shape ``(..., 3, 3)`` for vectors ``(..., 3)``, elementwise."""
    return v[..., :, None] * v[..., None, :]


def matrices_from_axis_angles(axes: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices about unit ``axes (..., 3)`` by ``angles (...)`` radians → ``(..., 3, 3)``.

    ``R = cos θ I + sin θ [a]× + (1 − cos θ) a aᵀ`` (Rodrigues), elementwise.
    """
    angles = unit_stride(angles)
    s = np.sin(angles)[..., None, None]
    c = np.cos(angles)[..., None, None]
    return c * np.eye(3) + s * skew(axes) + (1.0 - c) * _outer_products(axes)


def rotate_about_axes(axes: np.ndarray, angles: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``vectors (..., 3)`` turned by ``angles (...)`` about unit ``axes (..., 3)`` (Rodrigues' formula)."""
    angles = unit_stride(angles)
    c, s = np.cos(angles)[..., None], np.sin(angles)[..., None]
    return vectors * c + cross(axes, vectors) * s + axes * (dot(axes, vectors)[..., None] * (1.0 - c))


def rotate_by_quaternions(quaternions: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``vectors (..., 3)`` rotated by unit quaternions ``(..., 4)`` ``(w, x, y, z)``: ``v + 2w(r×v) + 2r×(r×v)``."""
    r = quaternions[..., 1:]
    turn = cross(r, vectors)
    return vectors + 2.0 * quaternions[..., :1] * turn + 2.0 * cross(r, turn)


def matrices_from_rotvecs(rotvecs: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from rotation vectors ``(..., 3)`` (axis × angle, radians).

    ``R = cos θ I + (sin θ / θ) [v]× + ((1 − cos θ) / θ²) v vᵀ`` for ``v = θ a``, elementwise.
    """
    angle = norm(rotvecs)
    small = angle < _SMALL_ANGLE
    if small.any():
        safe = np.where(small, 1.0, angle)
        cos = np.cos(safe)
        c = np.where(small, 1.0 - 0.5 * angle**2, cos)
        a = np.where(small, 1.0 - angle**2 / 6.0, np.sin(safe) / safe)
        b = np.where(small, 0.5 - angle**2 / 24.0, (1.0 - cos) / safe**2)
    else:  # the same values with fewer array operations (no Taylor branch to select)
        c = np.cos(angle)
        a = np.sin(angle) / angle
        b = (1.0 - c) / angle**2
    # Entry by entry, the same sums of the same products as ``c I + a [v]x + b v vᵀ`` (IEEE
    # addition commutes and a sign flip is exact, so the bits are those of the matrix form): on
    # large stacks far cheaper than broadcasting 3-wide axes; on small ones fewer calls win.
    if rotvecs.size < _ROTVEC_COMPONENTS:
        out = b[..., None, None] * _outer_products(rotvecs)
        flat = out.reshape(out.shape[:-2] + (9,))
        flat[..., ::4] += c[..., None]
        flat[..., _SKEW_OFF] += (a[..., None] * rotvecs)[..., _SKEW_OFF_GATHER] * _SKEW_OFF_SIGNS
        return out
    x, y, z = rotvecs[..., 0], rotvecs[..., 1], rotvecs[..., 2]
    out = np.empty(rotvecs.shape[:-1] + (3, 3))
    for i, u in enumerate((x, y, z)):
        np.add(c, b * (u * u), out=out[..., i, i])
    for (i, j, k), w in (((0, 1, 2), z), ((0, 2, 1), y), ((1, 2, 0), x)):
        ordered = b * (rotvecs[..., i] * rotvecs[..., j])
        turn = a * w
        # [v]x: +v_k above the diagonal where (i, j, k) is cyclic, −v_k where it is not.
        if (i, j, k) == (0, 2, 1):
            np.add(ordered, turn, out=out[..., i, j])
            np.subtract(ordered, turn, out=out[..., j, i])
        else:
            np.subtract(ordered, turn, out=out[..., i, j])
            np.add(ordered, turn, out=out[..., j, i])
    return out


# Each row of K = 4 q qᵀ as indices into the ten distinct entries quaternions_from_matrices computes:
# the four diagonal ones, then m21 − m12, m02 − m20, m10 − m01, m01 + m10, m02 + m20, m12 + m21.
_SHEPPERD_ROWS = np.array([[0, 4, 5, 6], [4, 1, 7, 8], [5, 7, 2, 9], [6, 8, 9, 3]])


def quaternions_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` with ``w >= 0`` from rotation matrices.

    Shepperd's method: of the four rows of ``K = 4 q qᵀ`` (each proportional
    to q), take the one with the largest diagonal entry (the first of equal ones),
    so the division is always well conditioned. Each entry is summed in the order
    :func:`quaternion_from_matrix` sums it (``0.0 +`` … ``+ 0.0`` turn −0.0 into +0.0).
    """
    flat = matrices.reshape(matrices.shape[:-2] + (9,))
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = (flat[..., i] for i in range(9))
    entries = np.empty(flat.shape[:-1] + (10,))
    entries[..., 0] = 1.0 + m00 + m11 + m22
    entries[..., 1] = 1.0 + m00 - m11 - m22
    entries[..., 2] = 1.0 + m11 - m00 - m22
    entries[..., 3] = 1.0 + m22 - m00 - m11
    entries[..., 4] = 0.0 + m21 - m12 + 0.0
    entries[..., 5] = 0.0 + m02 - m20 + 0.0
    entries[..., 6] = 0.0 + m10 - m01 + 0.0
    entries[..., 7] = 0.0 + m01 + m10 + 0.0
    entries[..., 8] = 0.0 + m02 + m20 + 0.0
    entries[..., 9] = 0.0 + m12 + m21 + 0.0
    choice = np.argmax(entries[..., :4], axis=-1)
    row = np.take_along_axis(entries, _SHEPPERD_ROWS[choice], -1)
    return canonical_quaternions(row / norm(row)[..., None])


def quaternion_from_matrix(matrix: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    """:func:`quaternions_from_matrices` for one rotation matrix (rows of Python floats), with its bits.

    Each K entry is summed as the batch sums it (``0.0 +`` … ``+ 0.0`` turn −0.0 into +0.0 in
    both); the row of the first largest diagonal entry (``np.argmax``), its length summed in index
    order (``vectors.norm``), and the sign flip to ``w ≥ 0``.
    """
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = matrix
    diagonal = (1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22, 1.0 + m11 - m00 - m22, 1.0 + m22 - m00 - m11)
    choice = 0
    for i in (1, 2, 3):
        if diagonal[i] > diagonal[choice]:
            choice = i
    if choice == 0:
        w, x, y, z = diagonal[0], 0.0 + m21 - m12 + 0.0, 0.0 + m02 - m20 + 0.0, 0.0 + m10 - m01 + 0.0
    elif choice == 1:
        w, x, y, z = 0.0 + m21 - m12 + 0.0, diagonal[1], 0.0 + m01 + m10 + 0.0, 0.0 + m02 + m20 + 0.0
    elif choice == 2:
        w, x, y, z = 0.0 + m02 - m20 + 0.0, 0.0 + m01 + m10 + 0.0, diagonal[2], 0.0 + m12 + m21 + 0.0
    else:
        w, x, y, z = 0.0 + m10 - m01 + 0.0, 0.0 + m02 + m20 + 0.0, 0.0 + m12 + m21 + 0.0, diagonal[3]
    length = math.sqrt(w * w + x * x + y * y + z * z)  # correctly rounded, as np.sqrt
    w, x, y, z = w / length, x / length, y / length, z / length
    return (-w, -x, -y, -z) if w < 0.0 else (w, x, y, z)


def matrices_from_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from quaternions ``(..., 4)`` ``(w, x, y, z)`` (normalised here).

    ``R = (w² − v·v) I + 2 v vᵀ + 2 w [v]×``.
    """
    q = quaternions / norm(quaternions)[..., None]
    w = q[..., 0, None, None]
    v = q[..., 1:]
    outer = v[..., :, None] * v[..., None, :]
    return (w * w - (v * v).sum(-1)[..., None, None]) * np.eye(3) + 2.0 * outer + 2.0 * w * skew(v)


def rotvecs_from_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(..., 3)`` with angle in ``[0, π]`` from quaternions ``(w, x, y, z)``."""
    q = canonical_quaternions(quaternions)
    v = q[..., 1:]
    s = norm(v)
    angle = 2.0 * np.arctan2(s, unit_stride(q[..., 0]))
    small = s < _SMALL_ANGLE
    if not small.any():  # the same values with fewer array operations
        return v * (angle / s)[..., None]
    # angle / sin(angle/2) → 2 as the angle → 0 (w → 1).
    factor = np.where(small, 2.0 / np.maximum(q[..., 0], 1e-300), angle / np.where(small, 1.0, s))
    return v * factor[..., None]


def rotvecs_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(..., 3)`` (angle in ``[0, π]``) from rotation matrices ``(..., 3, 3)``."""
    return rotvecs_from_quaternions(quaternions_from_matrices(matrices))


def quaternions_from_rotvecs(rotvecs: np.ndarray) -> np.ndarray:
    """Quaternions ``(..., 4)`` ``(w, x, y, z)`` from rotation vectors ``(..., 3)``."""
    angle = norm(rotvecs)
    small = angle < _SMALL_ANGLE
    if small.any():
        half_sinc = np.where(small, 0.5 - angle**2 / 48.0, np.sin(angle / 2.0) / np.where(small, 1.0, angle))
    else:  # the same values with fewer array operations
        half_sinc = np.sin(angle / 2.0) / angle
    return np.concatenate([np.cos(angle / 2.0)[..., None], rotvecs * half_sinc[..., None]], -1)


def minimal_rotation_rotvecs(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(..., 3)`` of the shortest-arc rotation taking direction ``u`` to ``v``.

    Zero where either vector vanishes (the direction is undefined, so nothing
    is rotated). For opposite vectors any perpendicular axis is valid; one is
    chosen deterministically.
    """
    nu = norm(u)
    nv = norm(v)
    axis = cross(u, v)
    sin = norm(axis)
    cos = dot(u, v)
    angle = np.arctan2(sin, cos)
    degenerate_axis = sin <= 1e-12 * np.maximum(nu * nv, 1e-300)
    # Opposite directions: rotate about an axis perpendicular to u.
    fallback = cross(u, np.where(np.abs(u[..., :1]) < 0.9 * nu[..., None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]))
    axis = np.where(degenerate_axis[..., None], fallback, axis)
    axis_norm = norm(axis)
    unit = axis / np.maximum(axis_norm, 1e-300)[..., None]
    valid = (nu > 1e-300) & (nv > 1e-300) & (axis_norm > 0.0)
    return np.where(valid[..., None], unit * angle[..., None], 0.0)


# Hamilton product a * b as a matrix acting on b: L(a)[i, j] = SIGNS[i, j] * a[GATHER[i, j]].
_PRODUCT_GATHER = np.array([[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]])
_PRODUCT_SIGNS = np.array([[1.0, -1, -1, -1], [1, 1, -1, 1], [1, 1, 1, -1], [1, -1, 1, 1]])
# From this many quaternion components on, quaternion_products works component by component.
_PRODUCT_COMPONENTS = 256


def quaternion_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products ``a * b`` of quaternions ``(..., 4)`` ``(w, x, y, z)``.

    Written as ``L(a) b``, summed term by term (``vectors.matvec``): a few array
    operations whatever the batch size, which matters for the per-target (batch
    of one) solves, and the same bits in any batch.
    """
    if a.size < _PRODUCT_COMPONENTS:
        left = a[..., _PRODUCT_GATHER] * _PRODUCT_SIGNS
        return matvec(left, b)
    # Component by component on large stacks: the same products summed in the same order (a sign
    # flip is exact and x + (−y) is x − y), without the gathered (…, 4, 4) matrices.
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    for row, (gather, signs) in enumerate(zip(_PRODUCT_GATHER, _PRODUCT_SIGNS)):
        total = a[..., gather[0]] * b[..., 0]
        for k in range(1, 4):
            term = a[..., gather[k]] * b[..., k]
            total = total + term if signs[k] > 0 else total - term
        out[..., row] = total
    return out


def quaternion_product(
    a: Sequence[float], b: Sequence[float]
) -> tuple[float, float, float, float]:
    """:func:`quaternion_products` for one pair of Python-float quaternions ``(w, x, y, z)``, with its bits.

    Row ``i`` of ``L(a) b`` summed in index order; a negative sign as a subtraction (``x − y`` is
    ``x + (−y)`` in IEEE arithmetic, and negation is exact).
    """
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        ax * bw + aw * bx - az * by + ay * bz,
        ay * bw + az * bx + aw * by - ax * bz,
        az * bw - ay * bx + ax * by + aw * bz,
    )


def canonical_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """The same rotations ``(..., 4)`` with ``w >= 0`` (the hemisphere of the identity)."""
    return np.where(quaternions[..., :1] < 0.0, -quaternions, quaternions)
