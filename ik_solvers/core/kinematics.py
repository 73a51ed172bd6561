"""Batched forward kinematics, geometric Jacobians and joint-variable updates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .array_ops import NUMPY_OPS
from .chain import Chain, JointKind
from .rotations import (
    matrices_from_quaternions,
    matrices_from_rotvecs,
    quaternion_about_axis,
    quaternion_products,
    quaternions_from_rotvecs,
    rotvecs_from_quaternions,
    skew,
)
from .vectors import cross, matmul, matvec, norm, stack3, unit_stride


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


def local_quaternions(chain: Chain, q: np.ndarray, joints: np.ndarray | int | None = None) -> np.ndarray:
    """Variable part of joint rotations as quaternions ``(N, len(joints), 4)`` ``(w, x, y, z)``.

    ``joints`` defaults to every joint. Built as half-angle quaternions, vectorised
    across joints: much cheaper than composing 3×3 Rodrigues matrices.
    """
    q = np.asarray(q, dtype=float)
    joints = np.arange(chain.n_joints) if joints is None else np.atleast_1d(joints)
    codes = chain.dof_stride_joints[joints]
    starts = chain.dof_start[joints]
    out = np.zeros((q.shape[0], joints.size, 4))
    angled = np.flatnonzero(codes != JointKind.BALL.value)
    if angled.size:
        first = starts[angled]
        out[:, angled] = stack3(quaternion_about_axis(NUMPY_OPS, q[:, first], chain.axes[first].T))
        universal = np.flatnonzero(codes == JointKind.UNIVERSAL.value)
        if universal.size:
            second = starts[universal] + 1
            turn = stack3(quaternion_about_axis(NUMPY_OPS, q[:, second], chain.axes[second].T))
            out[:, universal] = quaternion_products(out[:, universal], turn)
    balls = np.flatnonzero(codes == JointKind.BALL.value)
    if balls.size:
        idx = starts[balls][:, None] + np.arange(3)
        out[:, balls] = quaternions_from_rotvecs(q[:, idx])
    return out


def local_rotations(chain: Chain, q: np.ndarray, joints: np.ndarray | int | None = None) -> np.ndarray:
    """Variable part ``R_i(q)`` of joint rotations as matrices ``(N, len(joints), 3, 3)``."""
    return matrices_from_quaternions(local_quaternions(chain, q, joints))


@dataclass(frozen=True, eq=False)
class _AngleJointBasis:
    """Precomputed data that makes joint-local matrices of hinge / universal joints one matmul.

    A fixed-axis rotation is ``R(θ) = (I + K²) + cos θ (−K²) + sin θ K``, so
    ``rest @ R(θ1) @ R(θ2)`` is linear in the nine products of ``(1, cos θ1, sin θ1)``
    and ``(1, cos θ2, sin θ2)``; ``basis`` holds the matching matrices.
    """

    joints: np.ndarray  # (m,) joint indices
    first: np.ndarray  # (m,) variable index of each joint's first angle
    second: np.ndarray  # (m,) variable index of the second angle (first again for hinges)
    basis: np.ndarray  # (m, 9, 9): feature → flattened 3×3 local matrix (rest folded in)


_BASES: dict[int, tuple[Chain, _AngleJointBasis | None]] = {}


def _angle_joint_basis(chain: Chain) -> _AngleJointBasis | None:
    cached = _BASES.get(id(chain))
    if cached is not None and cached[0] is chain:
        return cached[1]
    joints = np.flatnonzero(chain.dof_stride_joints != JointKind.BALL.value)
    basis = None
    if joints.size:
        first = chain.dof_start[joints]
        universal = chain.dof_stride_joints[joints] == JointKind.UNIVERSAL.value
        second = np.where(universal, first + 1, first)
        terms = np.zeros((joints.size, 3, 3, 3, 3))
        for row, (joint, f, s, u) in enumerate(zip(joints, first, second, universal)):
            k1 = skew(chain.axes[f])
            c1 = (np.eye(3) + k1 @ k1, -(k1 @ k1), k1)
            if u:
                k2 = skew(chain.axes[s])
                c2 = (np.eye(3) + k2 @ k2, -(k2 @ k2), k2)
            else:
                c2 = (np.eye(3), np.zeros((3, 3)), np.zeros((3, 3)))
            for a in range(3):
                for b in range(3):
                    terms[row, a, b] = chain.rest_rotations[joint] @ c1[a] @ c2[b]
        basis = _AngleJointBasis(joints, first, second, terms.reshape(joints.size, 9, 9))
    if len(_BASES) > 256:
        _BASES.clear()
    _BASES[id(chain)] = (chain, basis)
    return basis


def _angle_features(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The nine products of ``(1, cos a, sin a)`` and ``(1, cos b, sin b)``, shape ``first.shape + (9,)``."""
    # Contiguous in and out: strided operands of sin/cos round differently (vectors.unit_stride).
    first, second = unit_stride(first), unit_stride(second)
    f1 = np.empty(first.shape + (3, 1))
    f1[..., 0, 0] = 1.0
    f1[..., 1, 0] = np.cos(first)
    f1[..., 2, 0] = np.sin(first)
    f2 = np.empty(second.shape + (1, 3))
    f2[..., 0, 0] = 1.0
    f2[..., 0, 1] = np.cos(second)
    f2[..., 0, 2] = np.sin(second)
    return (f1 * f2).reshape(first.shape + (9,))


def joint_local_matrices(chain: Chain, q: np.ndarray) -> np.ndarray:
    """Each joint's rotation relative to its parent, ``rest_i @ R_i(q)``, as ``(N, n, 3, 3)``."""
    n_batch = q.shape[0]
    local = np.empty((n_batch, chain.n_joints, 3, 3))
    basis = _angle_joint_basis(chain)
    if basis is not None:
        features = _angle_features(q[:, basis.first], q[:, basis.second])
        local[:, basis.joints] = matmul(features[:, :, None, :], basis.basis).reshape(n_batch, -1, 3, 3)
    balls = chain.ball_joints
    if balls.size:
        idx = chain.dof_start[balls][:, None] + np.arange(3)
        local[:, balls] = matmul(chain.rest_rotations[balls], matrices_from_rotvecs(q[:, idx]))
    return local


def joint_local_matrix(chain: Chain, q: np.ndarray, joint: int) -> np.ndarray:
    """One joint's ``rest @ R(q)`` as ``(N, 3, 3)`` (cheaper than all joints when only one changed)."""
    start = chain.dof_start[joint]
    if chain.kinds[joint] is JointKind.BALL:
        return matmul(chain.rest_rotations[joint], matrices_from_rotvecs(q[:, start : start + 3]))
    basis = _angle_joint_basis(chain)
    assert basis is not None  # the chain has this hinge / universal joint
    row = int(np.searchsorted(basis.joints, joint))
    features = _angle_features(q[:, basis.first[row]], q[:, basis.second[row]])
    # (N, 1, 9) stacked products, not one (N, 9) BLAS product: the result must not depend on N.
    return matmul(features[:, None, :], basis.basis[row]).reshape(-1, 3, 3)


def forward_kinematics(chain: Chain, q: np.ndarray) -> Pose:
    """World frames and joint / tip positions for joint variables ``q (N, n_dof)``.

    ``Q_i = Q_{i-1} R_rest_i R_i(q)``, ``p_{i+1} = p_i + Q_i l_i`` (SPEC §3.1).
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    n_batch, n = q.shape[0], chain.n_joints
    local = joint_local_matrices(chain, q)
    frames = np.empty((n_batch, n + 1, 3, 3))
    frames[:, 0] = chain.root_rotation
    # Slices of fresh C-order arrays: their 3×3 blocks are row-major for any batch, which is all
    # vectors.matmul would make sure of, so np.matmul takes its BLAS path directly (no checks per joint).
    for i in range(n):
        np.matmul(frames[:, i], local[:, i], out=frames[:, i + 1])
    positions = np.empty((n_batch, n + 1, 3))
    positions[:, 0] = chain.root_position + chain.root_rotation @ chain.offsets[0]
    segments = matvec(frames[:, 1:], chain.segment_vectors)
    np.cumsum(segments, axis=1, out=positions[:, 1:])
    positions[:, 1:] += positions[:, :1]
    return Pose(frames=frames, positions=positions)


def world_axes(chain: Chain, pose: Pose) -> np.ndarray:
    """World rotation axis ``(N, n_dof, 3)`` of each joint variable (the angular Jacobian columns).

    Ball joints contribute their current frame's three axes: increments are
    applied as rotations in that frame, so there is no gimbal lock.
    """
    columns = chain.frame_axis_columns
    if columns is not None:
        frame, column, sign = columns
        return np.swapaxes(pose.frames, 2, 3)[:, frame, column] * sign[:, None]
    return matvec(pose.frames[:, chain.dof_frame_index], chain.dof_frame_vectors)


def position_jacobian(chain: Chain, pose: Pose, axes: np.ndarray | None = None) -> np.ndarray:
    """Tip position Jacobian ``(N, 3, n_dof)``: column ``a_k × (x − p_j)`` (SPEC §3.1)."""
    if axes is None:
        axes = world_axes(chain, pose)
    lever = pose.tips[:, None, :] - pose.positions[:, chain.dof_joint]
    # Contiguous on purpose: products of strided stacks go through copies whose
    # alignment, and so BLAS's summation order, varies with the batch size.
    return np.ascontiguousarray(np.swapaxes(cross(axes, lever), 1, 2))


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
            point = pose.positions[:, joint] + matvec(pose.frames[:, joint + 1], np.asarray(offset, float))
            lever = point[:, None, :] - pose.positions[:, chain.dof_joint]
            columns = cross(axes, lever) * (chain.dof_joint <= joint)[None, :, None]
            blocks.append(np.swapaxes(columns, 1, 2))
    if orientation:
        blocks.append(np.swapaxes(axes, 1, 2))
    return np.concatenate(blocks, axis=1)


def joint_step_angles(chain: Chain, dq: np.ndarray) -> np.ndarray:
    """Rotation angle ``(N, n)`` each joint turns by under increments ``dq (N, n_dof)``."""
    # reduceat, not a matmul with a membership matrix: BLAS would sum in an
    # order that depends on the batch size, and results must not.
    return np.sqrt(np.add.reduceat(dq * dq, chain.dof_start, axis=1))


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
    balls = chain.ball_joints
    if balls.size:
        idx = chain.dof_start[balls][:, None] + np.arange(3)
        a = quaternions_from_rotvecs(q[:, idx])
        b = quaternions_from_rotvecs(dq[:, idx])
        out[:, idx] = rotvecs_from_quaternions(quaternion_products(a, b))
    return clamp_limits(chain, out)


def increments_toward(chain: Chain, q: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Increments ``(N, n_dof)`` that :func:`apply_increments` would turn ``q`` into ``goal`` with (no limits).

    Hinge / universal angles subtract; a ball joint's increment is the rotation
    vector of ``R(q)ᵀ R(goal)`` in its current frame (the shorter way round).
    """
    out = goal - q
    balls = chain.ball_joints
    if balls.size:
        idx = chain.dof_start[balls][:, None] + np.arange(3)
        now = quaternions_from_rotvecs(q[:, idx])
        inverse = now * np.array([1.0, -1.0, -1.0, -1.0])
        out[:, idx] = rotvecs_from_quaternions(quaternion_products(inverse, quaternions_from_rotvecs(goal[:, idx])))
    return out


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
    r = norm(np.asarray(targets, float) - root_joint_positions(chain))
    return np.maximum(0.0, np.maximum(r - total, d_min - r))


def bone_length_errors(chain: Chain, pose: Pose) -> np.ndarray:
    """Largest deviation ``(N,)`` of any segment's length from the chain's own."""
    lengths = norm(np.diff(pose.positions, axis=1))
    return np.abs(lengths - chain.segment_lengths).max(axis=1)
