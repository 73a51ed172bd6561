"""Batched rotation conversions (matrices, rotation vectors, quaternions ``(w, x, y, z)``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .array_ops import NUMPY_OPS, ArrayOps, Real
from .vectors import Rows3, Vec3, cross, dot, matrix_rows, matvec, norm, stack3, unit_stride

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


Quat = tuple[Real, Real, Real, Real]


def quaternion_from_rows(xp: ArrayOps, m: Rows3) -> Quat:
    """Unit quaternion ``(w, x, y, z)``, ``w ≥ 0``, of a rotation matrix given by rows of components.

    Shepperd's method: of the four rows of ``K = 4 q qᵀ`` (each proportional to q), take the one
    with the largest diagonal entry (the first of equal ones), so the division is always well
    conditioned. ``0.0 +`` … ``+ 0.0`` turn −0.0 into +0.0.
    """
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = m
    d0, d1 = 1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22
    d2, d3 = 1.0 + m11 - m00 - m22, 1.0 + m22 - m00 - m11
    e21, e02, e10 = 0.0 + m21 - m12 + 0.0, 0.0 + m02 - m20 + 0.0, 0.0 + m10 - m01 + 0.0
    e01, e0s, e12 = 0.0 + m01 + m10 + 0.0, 0.0 + m02 + m20 + 0.0, 0.0 + m12 + m21 + 0.0
    rows = ((d0, e21, e02, e10), (e21, d1, e01, e0s), (e02, e01, d2, e12), (e10, e0s, e12, d3))
    first = d1 > d0
    best = xp.where(first, d1, d0)
    second = d2 > best
    third = d3 > xp.where(second, d2, best)
    w, x, y, z = xp.choose(third, rows[3], xp.choose(second, rows[2], xp.choose(first, rows[1], rows[0])))
    length = xp.sqrt(w * w + x * x + y * y + z * z)
    return canonical_quaternion(xp, (w / length, x / length, y / length, z / length))


def canonical_quaternion(xp: ArrayOps, q: Quat) -> Quat:
    """The same rotation with ``w ≥ 0`` (the hemisphere of the identity)."""
    w, x, y, z = q
    sign = 1.0 - 2.0 * (w < 0.0)  # ±1.0: exact, and no select call (one target's floats)
    return (w * sign, x * sign, y * sign, z * sign)


def quaternions_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` with ``w >= 0`` from rotation matrices
    (:func:`quaternion_from_rows` on every matrix)."""
    return stack3(quaternion_from_rows(NUMPY_OPS, matrix_rows(matrices)))


def rotvec_from_quaternion(xp: ArrayOps, q: Quat) -> Vec3:
    """Rotation vector (angle in ``[0, π]``) of a quaternion ``(w, x, y, z)`` in components."""
    return rotvecs_from_quaternion_list(xp, [q])[0]


def rotvecs_from_quaternion_list(xp: ArrayOps, quats: Sequence[Quat], canonical: bool = False) -> list[Vec3]:
    """:func:`rotvec_from_quaternion` of each quaternion (their arctangents in one ``atan2_all``);
    ``canonical``: every ``w`` is already ``≥ 0`` (:func:`canonical_quaternion` would change nothing)."""
    if not canonical:
        quats = [canonical_quaternion(xp, q) for q in quats]
    sqrt, choose, maximum = xp.sqrt, xp.choose, xp.maximum
    sines = [sqrt(x * x + y * y + z * z) for _, x, y, z in quats]
    out = []
    for (w, x, y, z), s, half in zip(quats, sines, xp.atan2_all(sines, [q[0] for q in quats])):
        # angle / sin(angle/2) → 2 as the angle → 0 (w → 1): below the small angle 2 / w.
        top, bottom = choose(s < _SMALL_ANGLE, (2.0, maximum(w, 1e-300)), (2.0 * half, s))
        factor = top / bottom
        out.append((x * factor, y * factor, z * factor))
    return out


def quaternion_from_rotvec(xp: ArrayOps, v: Sequence[Real]) -> Quat:
    """Quaternion ``(w, x, y, z)`` of a rotation vector in components (the Taylor form below a small angle)."""
    x, y, z = v
    angle = xp.sqrt(x * x + y * y + z * z)
    half = angle / 2.0
    # sin(θ/2) / θ, its Taylor form below the small angle (divided by 1.0: exact).
    top, bottom = xp.choose(angle < _SMALL_ANGLE, (0.5 - angle * angle / 48.0, 1.0), (xp.sin(half), angle))
    half_sinc = top / bottom
    return (xp.cos(half), x * half_sinc, y * half_sinc, z * half_sinc)


def quaternion_about_axis(xp: ArrayOps, angle: Real, axis: Sequence[Real]) -> Quat:
    """Quaternion ``(cos ½θ, sin ½θ · axis)`` of a turn by ``angle`` about a unit ``axis`` (components)."""
    half = 0.5 * angle
    return turn_quaternion(xp.cos(half), xp.sin(half), axis)


def turn_quaternion(cos: Real, sin: Real, axis: Sequence[Real]) -> Quat:
    """:func:`quaternion_about_axis` from the half angle's cosine and sine."""
    return (cos, sin * axis[0], sin * axis[1], sin * axis[2])


def matrices_from_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from quaternions ``(..., 4)`` ``(w, x, y, z)`` (normalised here).

    ``R = (w² − v·v) I + 2 v vᵀ + 2 w [v]×``.
    """
    q = quaternions / norm(quaternions)[..., None]
    w = q[..., 0, None, None]
    v = q[..., 1:]
    outer = v[..., :, None] * v[..., None, :]
    return (w * w - (v * v).sum(-1)[..., None, None]) * np.eye(3) + 2.0 * outer + 2.0 * w * skew(v)


# Up to this many components, rotvecs_from_quaternions and quaternions_from_rotvecs work on whole arrays
# (fewer calls: ~40 % less time on one frame's joints), above on components (unit-stride streams: on
# 1,000 frames of 7 joints ~30 % less); both the same operations, the same bits.
_WHOLE_ARRAY_COMPONENTS = 2048


def rotvecs_from_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(..., 3)`` with angle in ``[0, π]`` from quaternions ``(w, x, y, z)``
    (:func:`rotvec_from_quaternion` on each: the same operations on whole arrays, in fewer calls — a
    trunk step converts a few joints of one frame several times, where the calls are the cost)."""
    q = np.asarray(quaternions, dtype=float)
    if q.size > _WHOLE_ARRAY_COMPONENTS:  # large stacks: unit-stride components stream faster
        return stack3(rotvec_from_quaternion(NUMPY_OPS, (q[..., 0], q[..., 1], q[..., 2], q[..., 3])))
    sign = 1.0 - 2.0 * (q[..., 0] < 0.0)  # canonical_quaternion's hemisphere
    w = q[..., 0] * sign  # fresh, unit stride: arctan2 rounds as in rotvec_from_quaternion
    v = q[..., 1:] * sign[..., None]
    s = np.sqrt(dot(v, v))
    half = np.arctan2(s, w)
    small = s < _SMALL_ANGLE
    factor = np.where(small, 2.0, 2.0 * half) / np.where(small, np.maximum(w, 1e-300), s)
    return v * factor[..., None]


def rotvecs_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(..., 3)`` (angle in ``[0, π]``) from rotation matrices ``(..., 3, 3)``."""
    return rotvecs_from_quaternions(quaternions_from_matrices(matrices))


def quaternions_from_rotvecs(rotvecs: np.ndarray) -> np.ndarray:
    """Quaternions ``(..., 4)`` ``(w, x, y, z)`` from rotation vectors ``(..., 3)`` (:func:`quaternion_from_rotvec`:
    the same operations on whole arrays, in fewer calls)."""
    v = np.asarray(rotvecs, dtype=float)
    if v.size > _WHOLE_ARRAY_COMPONENTS:  # large stacks: unit-stride components stream faster
        return stack3(quaternion_from_rotvec(NUMPY_OPS, (v[..., 0], v[..., 1], v[..., 2])))
    angle = np.sqrt(dot(v, v))
    half = angle / 2.0  # fresh, unit stride: sin and cos round as in quaternion_from_rotvec
    small = angle < _SMALL_ANGLE
    half_sinc = np.where(small, 0.5 - angle * angle / 48.0, np.sin(half)) / np.where(small, 1.0, angle)
    out = np.empty(v.shape[:-1] + (4,))
    out[..., 0] = np.cos(half)
    out[..., 1:] = v * half_sinc[..., None]
    return out


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
    return stack3(quaternion_product((a[..., 0], a[..., 1], a[..., 2], a[..., 3]), (b[..., 0], b[..., 1], b[..., 2], b[..., 3])))


def quaternion_product(a: Sequence[Real], b: Sequence[Real]) -> Quat:
    """Hamilton product ``a * b`` of quaternions ``(w, x, y, z)`` in components (floats or arrays):
    :func:`turned_quaternions` of ``a`` by ``b``'s scalar part and ``1.0 ×`` its vector part (exact)."""
    return turned_quaternions((a,), (b[0],), (1.0,), (b[1:],))[0]


def turned_quaternions(quats: Sequence[Sequence[Real]], coss: Sequence[Real], sins: Sequence[Real],
                       axes: Sequence[Sequence[Real]], canonical: bool = False) -> list[Quat]:
    """Each ``quats[j] * (coss[j], sins[j] · axes[j])`` (a turn about a unit axis from its half angle's
    cosine and sine: :func:`turn_quaternion`), with ``w ≥ 0`` where ``canonical`` (components: floats,
    or arrays alike; one call for a chain's joints).

    Row ``i`` of ``L(a) b`` summed in index order, as :func:`quaternion_products` sums it; a negative
    sign as a subtraction (``x − y`` is ``x + (−y)`` in IEEE arithmetic, and negation is exact). The
    hemisphere as :func:`canonical_quaternion` picks it, by a sign ``±1.0`` (exact; no select call).
    """
    out = []
    for (aw, ax, ay, az), bw, s, (ex, ey, ez) in zip(quats, coss, sins, axes):
        bx, by, bz = s * ex, s * ey, s * ez
        w = aw * bw - ax * bx - ay * by - az * bz
        x = ax * bw + aw * bx - az * by + ay * bz
        y = ay * bw + az * bx + aw * by - ax * bz
        z = az * bw - ay * bx + ax * by + aw * bz
        if canonical:
            sign = 1.0 - 2.0 * (w < 0.0)
            out.append((w * sign, x * sign, y * sign, z * sign))
        else:
            out.append((w, x, y, z))
    return out


def canonical_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """The same rotations ``(..., 4)`` with ``w >= 0`` (the hemisphere of the identity)."""
    return np.where(quaternions[..., :1] < 0.0, -quaternions, quaternions)
