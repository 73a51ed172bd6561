"""Turning one joint so that a point it carries heads toward a desired point.

Shared by CCD (carried point: the tip), FABRIK and the analytic solver (carried
point: the next joint), so every joint kind and limit is handled in one place.
"""

from __future__ import annotations

import numpy as np

from .chain import Chain, JointKind
from .kinematics import apply_increments
from .rotations import minimal_rotation_rotvecs, rotate_about_axes
from .vectors import cross, dot, matvec, norm, tmatvec


def _hinge_angles(axes: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Angle ``(N,)`` about unit world ``axes (N, 3)`` taking ``u``'s projection onto ``v``'s."""
    sin = dot(axes, cross(u, v))
    u_perp = u - dot(u, axes)[:, None] * axes
    v_perp = v - dot(v, axes)[:, None] * axes
    cos = dot(u_perp, v_perp)
    # Zero projections leave the angle undefined: do not turn.
    return np.where((sin == 0.0) & (cos == 0.0), 0.0, np.arctan2(sin, cos))


def _clamp_angle(values: np.ndarray, max_angle: float | None) -> np.ndarray:
    if max_angle is None:
        return values
    return np.clip(values, -max_angle, max_angle)


def align_joint(
    chain: Chain,
    q: np.ndarray,
    joint: int,
    parent_frames: np.ndarray,
    joint_frames: np.ndarray,
    carried: np.ndarray,
    desired: np.ndarray,
    max_angle: float | None = None,
) -> np.ndarray:
    """Joint variables ``(N, n_dof)`` after turning ``joint`` so ``carried`` heads toward ``desired``.

    Parameters
    ----------
    q : ndarray, shape (N, n_dof)
        Current variables; only ``joint``'s are changed (a copy is returned).
    parent_frames, joint_frames : ndarray, shape (N, 3, 3)
        World frames of the joint's parent (root frame for joint 0) and of the
        joint itself as posed by ``q``.
    carried, desired : ndarray, shape (N, 3)
        World vectors from the joint's origin: a point the joint carries, and
        where it should point. Ball joints take the shortest arc; hinges the
        best angle about their axis; universal joints the second axis, then the
        first. Each turn is clipped to ``max_angle`` and then to the limits.
    """
    q = q.copy()
    start = chain.dof_start[joint]
    kind = chain.kinds[joint]
    if kind is JointKind.BALL:
        world = minimal_rotation_rotvecs(carried, desired)
        angle = norm(world)
        if max_angle is not None:
            world = world * np.minimum(1.0, max_angle / np.maximum(angle, 1e-300))[:, None]
        delta = tmatvec(joint_frames, world)  # Q_jᵀ r: the increment in the joint frame
        dq = np.zeros_like(q)
        dq[:, start : start + 3] = delta
        return apply_increments(chain, q, dq)
    if kind is JointKind.UNIVERSAL:
        axis2 = matvec(joint_frames, chain.axes[start + 1])
        turn2 = _clamp_angle(_hinge_angles(axis2, carried, desired), max_angle)
        before = q[:, start + 1].copy()
        q[:, start + 1] = np.clip(before + turn2, chain.lower[start + 1], chain.upper[start + 1])
        applied = q[:, start + 1] - before
        carried = rotate_about_axes(axis2, applied, carried)
    axis1 = matvec(parent_frames, chain.dof_frame_vectors[start])  # rest rotation already folded in
    turn1 = _clamp_angle(_hinge_angles(axis1, carried, desired), max_angle)
    q[:, start] = np.clip(q[:, start] + turn1, chain.lower[start], chain.upper[start])
    return q
