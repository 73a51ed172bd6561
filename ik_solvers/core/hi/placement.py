"""Placing the in-plane pose on the solver plane and reading off every joint's rotation (SPEC §5).

Written once per target in an array namespace (``array_ops``): the batch (:func:`placed_pose`,
:func:`joint_quaternions`, :func:`joint_variables`) and the one-target solve both call
:func:`placed_point`, :func:`start_rotation`, :func:`bent_quaternions` (``rotations.turned_quaternions``)
and :func:`bent_variables`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..array_ops import NUMPY_OPS, ROW_OPS, ArrayOps, Real
from ..rotations import (
    Quat,
    quaternion_from_rows,
    rotvecs_from_quaternion_list,
    turned_quaternions,
)
from ..vectors import Rows3, Vec3, columns3, cross3, matmul3, tmatvec3, vec3
from .in_plane import Bent
from .planes import SolverPlanes
from .sphere import PreferredPose


def placed_point(axis: Vec3, normal: Vec3, side: Vec3, start: Vec3, c: Real, s: Real, x: Real, h: Real, y: Real) -> Vec3:
    """An in-plane point ``(x, h, y)`` turned rigidly about the start joint so that the tip direction
    (turned ``tip_turn`` from ``a0``, cosine ``c`` and sine ``s``) goes onto the EE axis and ``n0`` onto
    the solver normal; ``side`` is ``normal × axis``."""
    along, across = c * x + s * y, c * y - s * x
    return (along * axis[0] + h * normal[0] + across * side[0] + start[0],
            along * axis[1] + h * normal[1] + across * side[1] + start[1],
            along * axis[2] + h * normal[2] + across * side[2] + start[2])


def start_rotation(xp: ArrayOps, axis: Vec3, normal: Vec3, side: Vec3, parent: Rows3 | None, turn: Real,
                   start_basis: Rows3) -> Rows3:
    """The start joint's local rotation (rows): ``Q0 = G · Rot(n0, bend0) · Q0_pref`` with
    ``Q0_pref = F · (Fᵀ Q0_pref)``, ``F = [a0, n0, n0 × a0]``, taken into its parent frame ``P``
    (``Pᵀ Q0``; None: the identity). ``turn``: the start joint's bend less the tip turn."""
    if parent is not None:
        axis, normal, side = tmatvec3(parent, axis), tmatvec3(parent, normal), tmatvec3(parent, side)
    c, s = xp.cos(turn), xp.sin(turn)
    columns = ((c * axis[0] + s * side[0], normal[0], c * side[0] - s * axis[0]),
               (c * axis[1] + s * side[1], normal[1], c * side[1] - s * axis[1]),
               (c * axis[2] + s * side[2], normal[2], c * side[2] - s * axis[2]))
    return matmul3(columns, start_basis)


def bent_quaternions(xp: ArrayOps, pref: PreferredPose, start_rows: Rows3, bends: Sequence[Real]) -> list[Quat]:
    """One target's local rotations ``(w, x, y, z)``, ``w ≥ 0``: the start joint's from its rotation
    rows (:func:`quaternion_from_rows`), the later joints' ``R_j = R_j^pref · Rot(bend_axes[j], bends[j])``
    from their half bends' cosines and sines in one ``rotations.turned_quaternions`` call."""
    halves = [0.5 * bend for bend in bends[1:]]
    preferred, axes = pref.bend_factors
    return [quaternion_from_rows(xp, start_rows),
            *turned_quaternions(preferred, xp.joints.cos(halves), xp.joints.sin(halves), axes, canonical=True)]


def bent_variables(xp: ArrayOps, pref: PreferredPose, quats: Sequence[Quat], bends: Sequence[Real]) -> list[Real]:
    """One target's joint variables: ball joints' rotation vectors from their quaternions
    (:func:`bent_quaternions`'s, ``w ≥ 0``), the bend added to the other joints' last variable (with
    the sign of its axis along the bend axis)."""
    q: list[Real] = list(pref.q_floats)
    balls, bent_dofs = pref.variable_layout
    for (_, first), rotvec in zip(balls, rotvecs_from_quaternion_list(xp, [quats[j] for j, _ in balls], canonical=True)):
        q[first : first + 3] = rotvec
    for j, last, sign in bent_dofs:
        q[last] = q[last] + sign * bends[j]
    return q


def placed_pose(pref: PreferredPose, plane: SolverPlanes, bent: Bent) -> tuple[Rows3, np.ndarray]:
    """Start-joint local rotations (rows of ``(N,)`` components) and positions ``(N, n + 1, 3)`` of the
    batch's HI poses."""
    axis, normal = columns3(plane.axes), columns3(plane.normals)
    side = cross3(normal, axis)
    tip_turn = bent.tip_turn
    c, s = NUMPY_OPS.cos(tip_turn), NUMPY_OPS.sin(tip_turn)
    # Every point at once: (N, n + 1) operands, the frame's components as (N, 1) columns.
    placed = placed_point(_column(axis), _column(normal), _column(side), pref.start_floats,
                          np.asarray(c)[..., None], np.asarray(s)[..., None], bent.xs, bent.hs, bent.ys)
    positions = np.empty((plane.r.size, np.shape(bent.xs)[-1], 3))
    for k, value in enumerate(placed):
        positions[..., k] = value
    parent = pref.start_parent_rows
    turn = NUMPY_OPS.joints.at(bent.bends, 0) - tip_turn
    return start_rotation(NUMPY_OPS, axis, normal, side, parent, turn, pref.start_basis_rows), positions


def _column(v: Vec3) -> Vec3:
    return (v[0][:, None], v[1][:, None], v[2][:, None])


def joint_quaternions(pref: PreferredPose, start_rows: Rows3, bends: np.ndarray) -> np.ndarray:
    """Local rotations ``(N, n, 4)`` ``(w, x, y, z)``, ``w ≥ 0``, of the batch's HI poses: the start joint's
    :func:`quaternion_from_rows`, every later joint's as :func:`bent_quaternions` computes them, in one call."""
    n_frames, n = bends.shape
    quats = np.empty((n_frames, n, 4))
    for k, value in enumerate(quaternion_from_rows(NUMPY_OPS, start_rows)):
        quats[:, 0, k] = value
    if n > 1:
        later = np.ascontiguousarray(bends[:, 1:])  # the transcendental functions' input: unit stride
        preferred, axis = pref.bend_factor_columns
        half = 0.5 * later
        # Every later joint at once: bent_quaternions' call on (N, n - 1) components.
        (bent,) = turned_quaternions((preferred,), (np.cos(half),), (np.sin(half),), (axis,), canonical=True)
        for k, value in enumerate(bent):
            quats[:, 1:, k] = value
    return quats


def joint_variables(pref: PreferredPose, quats: np.ndarray, bends: np.ndarray) -> np.ndarray:
    """Joint variables ``(N, n_dof)`` of the batch's HI poses: every ball joint's rotation vector in one
    call (``rotations.rotvecs_from_quaternion_list``), the bends added as :func:`bent_variables` adds them."""
    q = np.empty((quats.shape[0], pref.chain.n_dof))
    q[:] = pref.q
    balls, bent_dofs = pref.variable_layout
    joints = [j for j, _ in balls]
    # Fancy-indexed components: fresh unit-stride arrays, as the arctangent needs (vectors.unit_stride).
    (x, y, z), = rotvecs_from_quaternion_list(
        NUMPY_OPS, [(quats[:, joints, 0].copy(), quats[:, joints, 1].copy(), quats[:, joints, 2].copy(),
                     quats[:, joints, 3].copy())], canonical=True)
    for column, (_, first) in enumerate(balls):
        q[:, first], q[:, first + 1], q[:, first + 2] = x[:, column], y[:, column], z[:, column]
    for j, last, sign in bent_dofs:
        q[:, last] = q[:, last] + sign * bends[:, j]
    return q


def one_frame_pose(pref: PreferredPose, plane: SolverPlanes, bent: Bent) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`placed_pose`'s positions ``(1, n + 1, 3)``, :func:`joint_quaternions` ``(1, n, 4)`` and
    :func:`joint_variables` ``(1, n_dof)`` of a one-frame batch from its in-plane pose on floats
    (``in_plane.row_bent``): the per-target functions in ``ROW_OPS`` (numpy's transcendental
    functions), ~4× fewer µs than on one-element arrays, the same bits."""
    xp = ROW_OPS
    axis, normal = vec3(plane.axes[0]), vec3(plane.normals[0])
    side = cross3(normal, axis)
    tip_turn, bends = bent.tip_turn, bent.bends
    c, s, start = xp.cos(tip_turn), xp.sin(tip_turn), pref.start_floats
    positions = np.array([[placed_point(axis, normal, side, start, c, s, x, h, y) for x, h, y in zip(bent.xs, bent.hs, bent.ys)]])
    rows = start_rotation(xp, axis, normal, side, pref.start_parent_rows, bends[0] - tip_turn, pref.start_basis_rows)
    quats = bent_quaternions(xp, pref, rows, bends)
    return positions, np.array([quats]), np.array([bent_variables(xp, pref, quats, bends)])
