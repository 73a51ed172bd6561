"""Blender rotation values ↔ rotations: Euler angles in Blender's six orders, and baked sequences of
quaternions, Euler angles and axis-angle values kept continuous (no ±180° jumps, one hemisphere)."""

from __future__ import annotations

import numpy as np

from ..core.rotations import matrices_from_axis_angles, quaternion_products

BONE_AXIS = np.array([0.0, 1.0, 0.0])
"""Direction a Blender bone points in its own frame (head → tail)."""

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")

GIMBAL_COS = 1e-9
"""Below this |cos(middle angle)| an Euler decomposition is at gimbal lock: the first angle is
taken from the reference (previous frame) and the third absorbs the rest, exactly."""


def _axis_index(letter: str) -> int:
    return "XYZ".index(letter)


def matrices_from_eulers(angles: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from Blender Euler angles ``(..., 3)`` (x, y, z; radians).

    Blender's order ``'XYZ'`` turns about X first, then Y, then Z: ``R = Rz @ Ry @ Rx``.
    """
    angles = np.asarray(angles, dtype=float)
    out = None
    for letter in order:  # each later axis multiplies from the left
        k = _axis_index(letter)
        axis = np.zeros(3)
        axis[k] = 1.0
        m = matrices_from_axis_angles(np.broadcast_to(axis, angles.shape), angles[..., k])
        out = m if out is None else m @ out
    assert out is not None  # an order names three axes
    return out


def quaternions_from_eulers(angles: np.ndarray, order: str) -> np.ndarray:
    """Quaternions ``(..., 4)`` (w, x, y, z) of Blender Euler angles ``(..., 3)`` in ``order``."""
    angles = np.asarray(angles, dtype=float)
    out = None
    for letter in order:  # each later axis multiplies from the left, as in matrices_from_eulers
        k = _axis_index(letter)
        half = 0.5 * angles[..., k]
        turn = np.zeros(angles.shape[:-1] + (4,))
        turn[..., 0] = np.cos(half)
        turn[..., 1 + k] = np.sin(half)
        out = turn if out is None else quaternion_products(turn, out)
    assert out is not None  # an order names three axes
    return out


def euler_solutions(matrices: np.ndarray, order: str, first_fill: np.ndarray) -> np.ndarray:
    """Both Euler solutions ``(..., 2, 3)`` (x, y, z angles) of ``matrices (..., 3, 3)``.

    Writes ``R = R_i(a) R_j(b) R_k(c)`` with ``(i, j, k)`` the order reversed, so that
    ``R[i, k] = e sin b``, ``R[j, k] = −e sin a cos b``, ``R[k, k] = cos a cos b``,
    ``R[i, j] = −e cos b sin c``, ``R[i, i] = cos b cos c`` (``e`` = ±1, the parity of
    ``(i, j, k)``). Solution 0 has ``|b| ≤ π/2``, solution 1 is ``(a + π, π − b, c + π)``. At
    gimbal lock (``cos b`` < ``GIMBAL_COS``) ``a`` is ``first_fill (...)`` and ``c`` is solved
    exactly from ``R_k(c) = R_j(b)ᵀ R_i(a)ᵀ R``.
    """
    i, j, k = (_axis_index(letter) for letter in reversed(order))
    parity = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    m = matrices
    sin_b = np.clip(parity * m[..., i, k], -1.0, 1.0)
    cos_b = np.hypot(m[..., k, k], m[..., j, k])
    gimbal = cos_b < GIMBAL_COS
    out = np.empty(m.shape[:-2] + (2, 3))
    for branch, sign in ((0, 1.0), (1, -1.0)):
        out[..., branch, j] = np.arctan2(sin_b, sign * cos_b)
        out[..., branch, i] = np.arctan2(-parity * sign * m[..., j, k], sign * m[..., k, k])
        out[..., branch, k] = np.arctan2(-parity * sign * m[..., i, j], sign * m[..., i, i])
    if np.any(gimbal):
        rows = m[gimbal]
        a = np.broadcast_to(first_fill, gimbal.shape)[gimbal]
        unit_i, unit_j = np.eye(3)[i], np.eye(3)[j]
        ri = matrices_from_axis_angles(np.broadcast_to(unit_i, a.shape + (3,)), a)
        k1, k2 = (k + 1) % 3, (k + 2) % 3
        for branch in (0, 1):
            b = out[..., branch, j][gimbal]
            rj = matrices_from_axis_angles(np.broadcast_to(unit_j, b.shape + (3,)), b)
            rest = np.swapaxes(rj, -1, -2) @ np.swapaxes(ri, -1, -2) @ rows
            solved = out[..., branch, :][gimbal]
            solved[:, i] = a
            solved[:, k] = np.arctan2(rest[:, k2, k1], rest[:, k1, k1])
            view = out[..., branch, :]
            view[gimbal] = solved
    return out


def wrap_angles(angles: np.ndarray) -> np.ndarray:
    return (angles + np.pi) % (2.0 * np.pi) - np.pi


def continuous_eulers(matrices: np.ndarray, order: str, reference: np.ndarray) -> np.ndarray:
    """Euler angles ``(N, 3)`` of ``matrices (N, 3, 3)``, each frame continuous with the previous.

    Frame 0 continues from ``reference (3,)`` (the channel's current value). Per frame the Euler
    solution nearest the previous frame is chosen and unwrapped by whole turns, so a sequence
    never jumps by ±180° / ±360° and an unchanged rotation gives back ``reference`` exactly.
    """
    reference = np.asarray(reference, dtype=float)
    i = _axis_index(order[-1])  # the first angle of the product R_i R_j R_k
    candidates = euler_solutions(matrices, order, np.full(matrices.shape[0], reference[i]))
    previous = np.concatenate([reference[None, None].repeat(2, 1), candidates[:-1]], 0)
    # cost[k, s_prev, s]: turning distance from frame k-1's solution s_prev to frame k's solution s.
    diff = wrap_angles(candidates[:, None, :, :] - previous[:, :, None, :])
    cost = np.abs(diff).sum(-1)
    best = np.argmin(cost, axis=-1)  # (N, 2): best s given s_prev
    # Follow the choices frame by frame; only frames that switch a solution need a step.
    choice = np.empty(matrices.shape[0], dtype=int)
    state, start = 0, 0  # at frame 0 both "previous" rows are the reference
    for frame in np.flatnonzero((best[:, 0] != 0) | (best[:, 1] != 1)).tolist():
        choice[start:frame] = state
        state = int(best[frame, state])
        choice[frame] = state
        start = frame + 1
    choice[start:] = state
    chosen = candidates[np.arange(matrices.shape[0]), choice]
    # At gimbal lock only a combination of the first and third angle is defined: keep the
    # previous frame's first angle (the reference's for frame 0, which makes a round trip of an
    # unchanged pose exact) and let the third take the rest. Rare (|cos| < 1e-9, e.g. a limit
    # clamped at exactly 90°), so a loop in frame order is fine.
    j, k = _axis_index(order[1]), _axis_index(order[0])
    cos_middle = np.hypot(matrices[:, k, k], matrices[:, j, k])
    for frame in np.flatnonzero(cos_middle < GIMBAL_COS):
        before = chosen[frame - 1] if frame else reference
        options = euler_solutions(matrices[frame : frame + 1], order, np.array([before[i]]))[0]
        chosen[frame] = options[np.argmin(np.abs(wrap_angles(options - before)).sum(-1))]
    return np.unwrap(np.concatenate([reference[None], chosen], 0), axis=0)[1:]


def continuous_quaternions(quaternions: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Quaternions ``(N, 4)`` sign-flipped so each lies in the hemisphere of the previous one.

    Frame 0 follows ``reference (4,)``.
    """
    previous = np.concatenate([np.asarray(reference, float)[None], quaternions[:-1]], 0)
    flips = np.einsum("ni,ni->n", quaternions, previous) < 0.0
    # A flip of frame k-1 reverses its relation to frame k: signs compose along the sequence.
    signs = np.where(np.cumsum(flips) % 2 == 1, -1.0, 1.0)
    return quaternions * signs[:, None]


def continuous_axis_angles(rotvecs: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Axis-angle values ``(N, 4)`` as (angle, x, y, z) of rotation vectors ``(N, 3)``, continuous
    from ``reference (4,)``.

    The axis keeps the previous frame's hemisphere (a flip negates the angle too) and the angle
    is unwrapped by whole turns; a zero rotation keeps a neighbouring frame's axis.
    """
    reference = np.asarray(reference, dtype=float)
    rotvecs = np.asarray(rotvecs, dtype=float)
    angle = np.linalg.norm(rotvecs, axis=-1)
    ref_axis = reference[1:]
    ref_norm = float(np.linalg.norm(ref_axis))
    fallback = ref_axis / ref_norm if ref_norm > 0.0 else BONE_AXIS
    has_axis = angle > 0.0
    axis = np.where(has_axis[:, None], rotvecs / np.where(has_axis, angle, 1.0)[:, None], np.nan)
    # A zero rotation has no axis: take the last defined one, leading ones the first defined
    # one (so a bake's first key does not swing its axis), or the reference's if none is.
    idx = np.where(has_axis, np.arange(angle.size), -1)
    np.maximum.accumulate(idx, out=idx)
    if has_axis.any():
        idx[idx < 0] = int(np.argmax(has_axis))
        axis = axis[idx]
    else:
        axis = np.broadcast_to(fallback, axis.shape).copy()
    previous = np.concatenate([fallback[None], axis[:-1]], 0)
    flips = np.einsum("ni,ni->n", axis, previous) < 0.0
    signs = np.where(np.cumsum(flips) % 2 == 1, -1.0, 1.0)
    axis = axis * signs[:, None]
    angle = np.unwrap(np.concatenate([reference[:1], angle * signs]))[1:]
    return np.concatenate([angle[:, None], axis], -1)
