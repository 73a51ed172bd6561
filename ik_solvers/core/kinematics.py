"""Batched forward kinematics, geometric Jacobians and joint-variable updates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .chain import Chain, JointKind
from .rotations import (
    matrices_from_axis_angles,
    matrices_from_rotvecs,
    quaternions_from_rotvecs,
    rotvecs_from_quaternions,
)


@dataclass(frozen=True, eq=False)
class Pose:
    """World-space frames and positions of a batch of chain poses.

    Attributes
    ----------
    frames : ndarray, shape (N, n + 1, 3, 3)
        World rotations: index 0 is the root frame, index ``i + 1`` joint ``i``'s frame.
    positions : ndarray, shape (N, n + 1, 3)
        World positions: joints ``0 .. n-1`` then the tip (end effector) at index ``n``.
    """

    frames: np.ndarray
    positions: np.ndarray

    @property
    def tips(self) -> np.ndarray:
        """End-effector positions ``(N, 3)``."""
        return self.positions[:, -1]


def local_rotations(chain: Chain, q: np.ndarray, joints: np.ndarray | None = None) -> np.ndarray:
    """Variable part ``R_i(q)`` of joint rotations, ``(N, len(joints), 3, 3)``, from ``q (N, n_dof)``.

    ``joints`` defaults to every joint (then the shape is ``(N, n, 3, 3)``).
    """
    q = np.asarray(q, dtype=float)
    joints = np.arange(chain.n_joints) if joints is None else np.atleast_1d(joints)
    codes = chain.dof_stride_joints[joints]
    starts = chain.dof_start[joints]
    out = np.broadcast_to(np.eye(3), (q.shape[0], joints.size, 3, 3)).copy()
    angled = np.flatnonzero(codes != JointKind.BALL.value)
    if angled.size:
        first = starts[angled]
        out[:, angled] = matrices_from_axis_angles(chain.axes[first], q[:, first])
        universal = np.flatnonzero(codes == JointKind.UNIVERSAL.value)
        if universal.size:
            second = starts[universal] + 1
            out[:, universal] = out[:, universal] @ matrices_from_axis_angles(chain.axes[second], q[:, second])
    balls = np.flatnonzero(codes == JointKind.BALL.value)
    if balls.size:
        idx = starts[balls][:, None] + np.arange(3)
        out[:, balls] = matrices_from_rotvecs(q[:, idx])
    return out


def forward_kinematics(chain: Chain, q: np.ndarray) -> Pose:
    """World frames and joint / tip positions for joint variables ``q (N, n_dof)``.

    ``Q_i = Q_{i-1} R_rest_i R_i(q)``, ``p_{i+1} = p_i + Q_i l_i`` (SPEC §3.1).
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    n_batch, n = q.shape[0], chain.n_joints
    local = chain.rest_rotations @ local_rotations(chain, q)
    frames = np.empty((n_batch, n + 1, 3, 3))
    positions = np.empty((n_batch, n + 1, 3))
    frames[:, 0] = chain.root_rotation
    positions[:, 0] = chain.root_position + chain.root_rotation @ chain.offsets[0]
    segments = np.concatenate([chain.offsets[1:], chain.tip_offset[None]], 0)
    for i in range(n):
        frames[:, i + 1] = frames[:, i] @ local[:, i]
        positions[:, i + 1] = positions[:, i] + frames[:, i + 1] @ segments[i]
    return Pose(frames=frames, positions=positions)


def world_axes(chain: Chain, pose: Pose) -> np.ndarray:
    """World rotation axis ``(N, n_dof, 3)`` of each joint variable (the angular Jacobian columns).

    Ball joints contribute their current frame's three axes: increments are
    applied as rotations in that frame, so there is no gimbal lock.
    """
    frames = pose.frames[:, chain.dof_frame_index]
    return np.einsum("ndij,dj->ndi", frames, chain.dof_frame_vectors)


def position_jacobian(chain: Chain, pose: Pose, axes: np.ndarray | None = None) -> np.ndarray:
    """Tip position Jacobian ``(N, 3, n_dof)``: column ``a_k × (x − p_j)`` (SPEC §3.1)."""
    if axes is None:
        axes = world_axes(chain, pose)
    lever = pose.tips[:, None, :] - pose.positions[:, chain.dof_joint]
    return np.swapaxes(np.cross(axes, lever), 1, 2)


def jacobian(
    chain: Chain,
    pose: Pose,
    effectors: Sequence[tuple[int, np.ndarray]] | None = None,
    orientation: bool = False,
) -> np.ndarray:
    """Stacked geometric Jacobian for several end effectors, ``(N, 3E [+3], n_dof)``.

    Parameters
    ----------
    effectors : sequence of (joint index, offset (3,)), optional
        Points riding on a joint's frame; default: the tip alone.
    orientation : bool
        Append the angular rows (the world axes) for the last joint's frame.
    """
    axes = world_axes(chain, pose)
    if effectors is None:
        blocks = [position_jacobian(chain, pose, axes)]
    else:
        blocks = []
        for joint, offset in effectors:
            point = pose.positions[:, joint] + pose.frames[:, joint + 1] @ np.asarray(offset, float)
            lever = point[:, None, :] - pose.positions[:, chain.dof_joint]
            columns = np.cross(axes, lever) * (chain.dof_joint <= joint)[None, :, None]
            blocks.append(np.swapaxes(columns, 1, 2))
    if orientation:
        blocks.append(np.swapaxes(axes, 1, 2))
    return np.concatenate(blocks, axis=1)


def joint_step_angles(chain: Chain, dq: np.ndarray) -> np.ndarray:
    """Rotation angle ``(N, n)`` each joint turns by under increments ``dq (N, n_dof)``."""
    squared = np.zeros((dq.shape[0], chain.n_joints))
    np.add.at(squared.T, chain.dof_joint, (dq**2).T)
    return np.sqrt(squared)


def clamp_step(chain: Chain, dq: np.ndarray, max_step_angle: float | None) -> np.ndarray:
    """Scale each row of ``dq (N, n_dof)`` so that no joint turns more than ``max_step_angle``.

    The whole step is scaled (not each joint alone) so its direction, and so
    the descent property of gradient-type steps, is kept.
    """
    if max_step_angle is None or not np.isfinite(max_step_angle):
        return dq
    largest = joint_step_angles(chain, dq).max(axis=1)
    scale = np.minimum(1.0, max_step_angle / np.maximum(largest, 1e-300))
    return dq * scale[:, None]


def clamp_limits(chain: Chain, q: np.ndarray) -> np.ndarray:
    """Joint variables clipped to ``[lower, upper]`` (ball joints: per rotation-vector component)."""
    return np.clip(q, chain.lower, chain.upper)


def apply_increments(chain: Chain, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """Joint variables after increments ``dq (N, n_dof)``, then clipped to the limits.

    Hinge / universal angles add. A ball joint's increment is a rotation
    vector in its current frame: ``R ← R exp(dq)``, composed as quaternions.
    """
    out = q + dq
    balls = np.flatnonzero(chain.dof_stride_joints == JointKind.BALL.value)
    if balls.size:
        idx = chain.dof_start[balls][:, None] + np.arange(3)
        a = quaternions_from_rotvecs(q[:, idx])
        b = quaternions_from_rotvecs(dq[:, idx])
        out[:, idx] = rotvecs_from_quaternions(quaternion_products(a, b))
    return clamp_limits(chain, out)


def quaternion_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products ``a * b`` of quaternions ``(..., 4)`` ``(w, x, y, z)``."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def root_joint_positions(chain: Chain) -> np.ndarray:
    """World position ``(3,)`` of joint 0, which no joint variable moves."""
    return chain.root_position + chain.root_rotation @ chain.offsets[0]


def error_lower_bounds(chain: Chain, targets: np.ndarray) -> np.ndarray:
    """Geometric lower bound ``(N,)`` on the tip-to-target distance for free joints.

    ``max(0, r − Σl, d_min − r)`` with ``d_min = max(0, 2·max(l) − Σl)``,
    ``r = |target − p_0|`` (SPEC §3.3). Joint limits can only raise the true minimum.
    """
    lengths = chain.segment_lengths
    total = lengths.sum()
    d_min = max(0.0, 2.0 * lengths.max() - total)
    r = np.linalg.norm(np.asarray(targets, float) - root_joint_positions(chain), axis=-1)
    return np.maximum(0.0, np.maximum(r - total, d_min - r))


def bone_length_errors(chain: Chain, pose: Pose) -> np.ndarray:
    """Largest deviation ``(N,)`` of any segment's length from the chain's own."""
    lengths = np.linalg.norm(np.diff(pose.positions, axis=1), axis=-1)
    return np.abs(lengths - chain.segment_lengths).max(axis=1)
