"""Placing the in-plane pose on the solver plane and reading off every joint's rotation (SPEC §5)."""

from __future__ import annotations

import numpy as np

from ..rotations import canonical_quaternions, quaternion_products, quaternions_from_matrices, rotvecs_from_quaternions
from ..vectors import cross, matmul, tmatvec
from .in_plane import InPlane
from .planes import SolverPlanes
from .sphere import PreferredPose


def placed_pose(pref: PreferredPose, plane: SolverPlanes, bent: InPlane) -> tuple[np.ndarray, np.ndarray]:
    """Start-joint local rotations ``(N, 3, 3)`` and positions ``(N, n + 1, 3)`` of the HI pose.

    The in-plane pose turned rigidly about the start joint so that its tip
    direction goes onto the EE axis ``a`` and ``n0`` onto the solver normal ``n``:
    the basis ``(a0, n0, n0 × a0)`` turned by ``−tip_turn`` about ``n0`` maps to
    ``(a, n, n × a)``.
    """
    a, nrm = plane.axes, plane.normals
    side = cross(nrm, a)
    c, s = np.cos(bent.tip_turns)[:, None], np.sin(bent.tip_turns)[:, None]
    coordinates = bent.coordinates
    x, h, y = coordinates[..., 0], coordinates[..., 1], coordinates[..., 2]
    along, across = c * x + s * y, c * y - s * x
    # Coordinate by coordinate: (N, n + 1) operands instead of broadcasts over a last axis of three
    # (~3× faster), the same elementwise sums in the same order.
    positions = np.empty(x.shape + (3,))
    for k in range(3):
        positions[..., k] = along * a[:, k, None] + h * nrm[:, k, None] + across * side[:, k, None] + pref.start[k]
    # Q0 = G · Rot(n0, bend0) · Q0_pref with Q0_pref = F · (Fᵀ Q0_pref), F = [a0, n0, n0 × a0];
    # the local rotation is Pᵀ Q0 for the start joint's parent frame P (root · rest).
    parent = pref.start_parent  # constant: None for the identity
    if parent is not None:
        a, nrm, side = (tmatvec(parent, vectors) for vectors in (a, nrm, side))
    turn = bent.bends[:, 0] - bent.tip_turns
    c, s = np.cos(turn)[:, None], np.sin(turn)[:, None]
    columns = np.empty(a.shape + (3,))  # the C-ordered stack of the three columns, filled in place
    columns[..., 0], columns[..., 1], columns[..., 2] = c * a + s * side, nrm, c * side - s * a
    return matmul(columns, pref.start_basis), positions


def joint_quaternions(pref: PreferredPose, start_rotations: np.ndarray, bends: np.ndarray) -> np.ndarray:
    """Local rotations ``(N, n, 4)`` ``(w, x, y, z)``, ``w ≥ 0``, of the HI pose.

    Start joint from its local rotation matrices; joint ``j ≥ 1``:
    ``R_j = R_j^pref · Rot(bend_axes[j], bends[j])``.
    """
    n_frames, n = bends.shape
    quats = np.empty((n_frames, n, 4))
    quats[:, 0] = quaternions_from_matrices(start_rotations)
    if n > 1:
        pref_quats = pref.local_quaternions
        half = 0.5 * bends[:, 1:]
        bend_quats = np.empty((n_frames, n - 1, 4))  # (cos, sin · axis), filled in place
        bend_quats[..., 0], bend_quats[..., 1:] = np.cos(half), np.sin(half)[..., None] * pref.bend_axes[1:]
        quats[:, 1:] = canonical_quaternions(quaternion_products(pref_quats[1:], bend_quats))
    return quats


def joint_variables(pref: PreferredPose, quats: np.ndarray, bends: np.ndarray) -> np.ndarray:
    """Joint variables ``(N, n_dof)``: ball joints from their quaternions, hinge-like joints by adding the bend."""
    chain = pref.chain
    q = np.empty((quats.shape[0], chain.n_dof))
    q[:] = pref.q
    balls, bent_dofs = pref.joint_layout
    # Every ball joint in one call: rotvecs_from_quaternions is elementwise (its transcendental
    # inputs copied to unit stride), so the same bits as joint by joint.
    rotvecs = rotvecs_from_quaternions(quats[:, balls])
    for k, j in enumerate(balls):
        q[:, chain.dof_start[j] : chain.dof_start[j] + 3] = rotvecs[:, k]
    for j, last, sign in bent_dofs:
        q[:, last] += sign * bends[:, j]
    return q
