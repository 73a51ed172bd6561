"""CCD and FABRIK steps (SPEC §3.2), both ending in joint variables, not bare positions."""

from __future__ import annotations

import numpy as np

from .alignment import align_joint
from .chain import Chain
from .kinematics import forward_kinematics, joint_local_matrix
from .step_input import StepInput
from .vectors import matmul, matvec, norm, tmatvec


def ccd_step(state: StepInput) -> np.ndarray:
    """One tip-to-root sweep: each joint turns (tip − joint) toward (target − joint)."""
    chain, q = state.chain, state.q
    frames, positions = state.pose.frames, state.pose.positions
    tips = positions[:, -1].copy()
    for j in reversed(range(chain.n_joints)):
        joint_position = positions[:, j]
        old_frame = frames[:, j + 1]
        q = align_joint(
            chain, q, j, frames[:, j], old_frame, tips - joint_position, state.targets - joint_position,
            state.options.max_step_angle,
        )
        # Joints nearer the root are untouched by this one, so their frames stay
        # valid; only the tip moves, by joint j's own turn.
        new_frame = matmul(frames[:, j], joint_local_matrix(chain, q, j))
        relative = tmatvec(old_frame, tips - joint_position)
        tips = joint_position + matvec(new_frame, relative)
    return q


def pose_from_positions(
    chain: Chain,
    q: np.ndarray,
    desired: np.ndarray,
    max_step_angle: float | None = None,
) -> np.ndarray:
    """Joint variables ``(N, n_dof)`` whose joints follow ``desired (N, n + 1, 3)`` root to tip.

    Each joint turns its segment toward the next desired point (limits and
    the per-step angle applied), so the result is a real pose with exact bone
    lengths even where the desired points are not reachable by it.
    """
    segments = chain.segment_vectors
    parent = np.broadcast_to(chain.root_rotation, (q.shape[0], 3, 3))
    position = np.broadcast_to(chain.root_position + chain.root_rotation @ chain.offsets[0], (q.shape[0], 3))
    frames = forward_kinematics(chain, q).frames
    for j in range(chain.n_joints):
        # Joints before j have moved, so j's world frame is its parent's times its own local turn.
        frame = matmul(parent, matmul(np.swapaxes(frames[:, j], 1, 2), frames[:, j + 1]))
        carried = matvec(frame, segments[j])
        q = align_joint(chain, q, j, parent, frame, carried, desired[:, j + 1] - position, max_step_angle)
        parent = matmul(parent, joint_local_matrix(chain, q, j))
        position = position + matvec(parent, segments[j])
    return q


def _directions(vectors: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Unit vectors; where a vector vanishes, the unit ``fallback`` direction instead."""
    length = norm(vectors)[..., None]
    return np.where(length > 1e-300, vectors / np.maximum(length, 1e-300), fallback)


def fabrik_step(state: StepInput) -> np.ndarray:
    """One backward and forward reaching pass on positions, converted back to a pose."""
    chain = state.chain
    lengths = chain.segment_lengths
    old = state.pose.positions
    points = old.copy()
    n = chain.n_joints
    bone_dirs = _directions(np.diff(old, axis=1), np.array([1.0, 0.0, 0.0]))
    points[:, n] = state.targets
    for i in reversed(range(n)):
        d = _directions(points[:, i] - points[:, i + 1], -bone_dirs[:, i])
        points[:, i] = points[:, i + 1] + lengths[i] * d
    points[:, 0] = old[:, 0]
    for i in range(n):
        d = _directions(points[:, i + 1] - points[:, i], bone_dirs[:, i])
        points[:, i + 1] = points[:, i] + lengths[i] * d
    return pose_from_positions(chain, state.q, points, state.options.max_step_angle)
