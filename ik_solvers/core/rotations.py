"""Batched rotation conversions (matrices, rotation vectors, quaternions ``(w, x, y, z)``)."""

from __future__ import annotations

import numpy as np

from .vectors import cross, dot, norm

# Below this angle (radians) the Rodrigues series terms are replaced by their
# Taylor expansions: sin(x)/x and (1 - cos x)/x^2 lose all precision near 0.
_SMALL_ANGLE = 1e-6


def skew(vectors: np.ndarray) -> np.ndarray:
    """Cross-product matrices ``[v]x`` of shape ``(..., 3, 3)`` for vectors ``(..., 3)``."""
    x, y, z = vectors[..., 0], vectors[..., 1], vectors[..., 2]
    zero = np.zeros_like(x)
    return np.stack(
        [np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1), np.stack([-y, x, zero], -1)],
        -2,
    )


def matrices_from_axis_angles(axes: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices about unit ``axes (..., 3)`` by ``angles (...)`` radians → ``(..., 3, 3)``."""
    k = skew(axes)
    s = np.sin(angles)[..., None, None]
    c = np.cos(angles)[..., None, None]
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


def matrices_from_rotvecs(rotvecs: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from rotation vectors ``(..., 3)`` (axis × angle, radians)."""
    angle = norm(rotvecs)
    small = angle < _SMALL_ANGLE
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0 - angle**2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - angle**2 / 24.0, (1.0 - np.cos(safe)) / safe**2)
    k = skew(rotvecs)
    return np.eye(3) + a[..., None, None] * k + b[..., None, None] * (k @ k)


def quaternions_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` with ``w >= 0`` from rotation matrices."""
    m = matrices
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    # Pick, per matrix, the largest of the four squared components to divide by
    # (Shepperd's method): always well conditioned.
    cand = np.stack(
        [trace, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1
    )
    choice = np.argmax(cand, axis=-1)
    q = np.empty(m.shape[:-2] + (4,))
    r = np.sqrt(np.maximum(1.0 + 2.0 * np.take_along_axis(cand, choice[..., None], -1)[..., 0] - trace, 0.0))
    r = np.maximum(r, 1e-300)
    s = 0.5 / r
    m21, m12 = m[..., 2, 1], m[..., 1, 2]
    m02, m20 = m[..., 0, 2], m[..., 2, 0]
    m10, m01 = m[..., 1, 0], m[..., 0, 1]
    w = np.select(
        [choice == 0, choice == 1, choice == 2, choice == 3],
        [0.5 * r, (m21 - m12) * s, (m02 - m20) * s, (m10 - m01) * s],
    )
    x = np.select(
        [choice == 0, choice == 1, choice == 2, choice == 3],
        [(m21 - m12) * s, 0.5 * r, (m01 + m10) * s, (m02 + m20) * s],
    )
    y = np.select(
        [choice == 0, choice == 1, choice == 2, choice == 3],
        [(m02 - m20) * s, (m01 + m10) * s, 0.5 * r, (m12 + m21) * s],
    )
    z = np.select(
        [choice == 0, choice == 1, choice == 2, choice == 3],
        [(m10 - m01) * s, (m02 + m20) * s, (m12 + m21) * s, 0.5 * r],
    )
    q[..., 0], q[..., 1], q[..., 2], q[..., 3] = w, x, y, z
    q /= norm(q)[..., None]
    return canonical_quaternions(q)


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
    angle = 2.0 * np.arctan2(s, q[..., 0])
    small = s < _SMALL_ANGLE
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
    half_sinc = np.where(small, 0.5 - angle**2 / 48.0, np.sin(angle / 2.0) / np.where(small, 1.0, angle))
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


def quaternion_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products ``a * b`` of quaternions ``(..., 4)`` ``(w, x, y, z)``.

    Written as ``L(a) @ b``: three array operations whatever the batch size,
    which matters for the per-target (batch of one) solves.
    """
    left = a[..., _PRODUCT_GATHER] * _PRODUCT_SIGNS
    return (left @ b[..., None])[..., 0]


def canonical_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """The same rotations ``(..., 4)`` with ``w >= 0`` (the hemisphere of the identity)."""
    return np.where(quaternions[..., :1] < 0.0, -quaternions, quaternions)
