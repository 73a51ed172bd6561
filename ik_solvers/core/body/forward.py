"""Batched forward kinematics of a bone tree and the geometric Jacobian columns of its variables."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..chain import Chain, JointKind
from ..kinematics import joint_local_matrices
from ..rotations import matrices_from_rotvecs
from ..vectors import cross, matmul, matvec
from .model import Body, variable_chain

__all__ = ["BodyPose", "VariableColumns", "body_pose", "body_variables", "variable_chain", "variable_columns"]


def body_variables(body: Body) -> Chain:
    """Every bone's variables as one :func:`~.model.variable_chain` (rest rotations included)."""
    return body.variables


@dataclass(frozen=True, eq=False)
class BodyPose:
    """World frames and heads of a batch of body poses.

    Attributes
    ----------
    frames : ndarray, shape (N, B, 3, 3)
        Each bone's world frame ``Q_i``.
    heads : ndarray, shape (N, B, 3)
        Each bone's head ``p_i`` (world, chain units).
    """

    frames: np.ndarray
    heads: np.ndarray

    def tails(self, body: Body, bones: np.ndarray | list[int]) -> np.ndarray:
        """Tails ``(N, len(bones), 3)`` of ``bones``."""
        return self.heads[:, bones] + matvec(self.frames[:, bones], body.tails[bones])

    def parent_frame(self, body: Body, bone: int) -> tuple[np.ndarray, np.ndarray]:
        """The frame ``bone`` hangs from: its parent's rotation ``(N, 3, 3)`` and head ``(N, 3)`` (the
        body's root frame for a tree root)."""
        parent = body.parents[bone]
        n = self.frames.shape[0]
        if parent < 0:
            return (np.broadcast_to(body.root_rotation, (n, 3, 3)).copy(),
                    np.broadcast_to(body.root_position, (n, 3)).copy())
        return np.ascontiguousarray(self.frames[:, parent]), np.ascontiguousarray(self.heads[:, parent])


def body_pose(body: Body, variables: Chain, q: np.ndarray, root_bone: int | None = None,
              root_location: np.ndarray | None = None) -> BodyPose:
    """Forward kinematics for joint variables ``q (N, n_dof)``.

    ``root_location (N, 3)``: the body root's displacement in its own rest frame (Blender's pose-bone
    location), added to its head's offset as ``rest_rotations[root] @ root_location``.
    """
    q = np.ascontiguousarray(q, dtype=float)
    n_batch, n = q.shape[0], body.n_bones
    if variables.ball_joints.size == variables.n_joints:  # balls alone (a trunk): no gather, no scatter
        local = matmul(variables.rest_rotations, matrices_from_rotvecs(q.reshape(n_batch, n, 3)))
    else:
        local = joint_local_matrices(variables, q)
    frames = np.empty((n_batch, n, 3, 3))
    heads = np.empty((n_batch, n, 3))
    moved = root_bone if root_location is not None else None
    for i, parent in enumerate(body.parents):
        if parent < 0:
            frames[:, i] = matmul(body.root_rotation, local[:, i])
        else:
            np.matmul(frames[:, parent], local[:, i], out=frames[:, i])  # row-major blocks (vectors.matmul)
    # Every bone's offset turned into the world in one product (elementwise, as bone by bone).
    hanging = body.hanging_bones
    segments = matvec(frames[:, body.hanging_parents], body.offsets[hanging]) if hanging.size else None
    slot = body.hanging_slots
    for i, parent in enumerate(body.parents):
        if i == moved:
            assert root_location is not None
            offset = body.offsets[i] + matvec(body.rest_rotations[i], root_location)
            if parent < 0:
                heads[:, i] = body.root_position + matvec(body.root_rotation, offset)
            else:
                heads[:, i] = heads[:, parent] + matvec(frames[:, parent], offset)
        elif parent < 0:
            heads[:, i] = body.root_position + matvec(body.root_rotation, body.offsets[i])
        else:
            assert segments is not None
            np.add(heads[:, parent], segments[:, slot[i]], out=heads[:, i])
    return BodyPose(frames, heads)


@dataclass(frozen=True, eq=False)
class VariableColumns:
    """Geometric Jacobian data of a set of variables in one pose.

    Attributes
    ----------
    axes : ndarray, shape (N, m, 3)
        World rotation axis of each rotational variable (zero for translations).
    pivots : ndarray, shape (N, m, 3)
        The point each turns about (its bone's head).
    moves : ndarray, shape (N, m, 3)
        World displacement per unit of each translational variable (zero for rotations).
    """

    axes: np.ndarray
    pivots: np.ndarray
    moves: np.ndarray

    def position_rows(self, points: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Jacobian ``(N, 3, m)`` of ``points (N, 3)`` moved by the variables where ``mask (m,)`` is set."""
        columns = (cross(self.axes, points[:, None, :] - self.pivots) + self.moves) * mask[None, :, None]
        return np.ascontiguousarray(np.swapaxes(columns, 1, 2))

    def angle_rows(self, mask: np.ndarray) -> np.ndarray:
        """Angular Jacobian ``(N, 3, m)`` of a frame turned by the variables where ``mask (m,)`` is set."""
        return np.ascontiguousarray(np.swapaxes(self.axes * mask[None, :, None], 1, 2))


def variable_columns(body: Body, pose: BodyPose, dofs: np.ndarray, root_bone: int | None,
                     translations: bool) -> VariableColumns:
    """:class:`VariableColumns` of ``[root location (3) if translations] + the variables dofs``.

    Axes as :func:`~..kinematics.world_axes` reads them: a hinge (or a universal joint's first angle)
    about ``Q_parent @ rest @ axis``; a universal joint's second angle and a ball joint's three about
    the bone's own frame (ball increments turn it in that frame).
    """
    n_batch = pose.frames.shape[0]
    layout = column_layout(body, dofs)
    m = dofs.size + (3 if translations else 0)
    first = 3 if translations else 0
    axes = np.zeros((n_batch, m, 3))
    pivots = np.zeros((n_batch, m, 3))
    moves = np.zeros((n_batch, m, 3))
    if translations:
        assert root_bone is not None
        if body.parents[root_bone] < 0:  # hung from the body's root frame: the same every frame (kept)
            moves[:, :3] = body.kept(("root moves", root_bone),
                                     lambda: _root_moves(body, root_bone, body.root_rotation[None].copy()))
        else:
            moves[:, :3] = _root_moves(body, root_bone, pose.parent_frame(body, root_bone)[0])
    # One product for every variable (elementwise: the bits of one product per variable).
    inside, unit = layout.inside, layout.unit
    if unit.size:  # an axis along a frame's own axis: that column of the frame (the product's value exactly)
        axes[:, first + unit] = np.swapaxes(pose.frames, 2, 3)[:, layout.frame_bones[unit], layout.unit_columns]
    if inside.size:
        axes[:, first + inside] = matvec(pose.frames[:, layout.frame_bones[inside]], layout.local_axes[inside])
    if layout.outside.size:
        axes[:, first + layout.outside] = matvec(body.root_rotation, layout.local_axes[layout.outside])
    pivots[:, first:] = pose.heads[:, layout.bones]
    return VariableColumns(axes, pivots, moves)


def _root_moves(body: Body, root_bone: int, parent: np.ndarray) -> np.ndarray:
    """World displacement ``(N, 3, 3)`` per unit of the root's location, as rows: its parent frame
    ``parent (N, 3, 3)`` times its rest rotation (one BLAS product per frame, whose bits do not depend
    on the batch)."""
    return np.swapaxes(matmul(parent, body.rest_rotations[root_bone]), 1, 2)  # columns as rows


@dataclass(frozen=True, eq=False)
class ColumnLayout:
    """Which frame turns each variable's axis, and the axis in that frame (constants of the body).

    Attributes
    ----------
    bones : ndarray of int, shape (m,)
        The bone each variable belongs to (its head is the pivot).
    frame_bones : ndarray of int, shape (m,)
        The bone whose world frame carries the axis (-1: the body's root frame).
    local_axes : ndarray, shape (m, 3)
        The axis in that frame.
    inside, outside : ndarray of int
        The variables whose frame is a bone's (other than ``unit``), and those whose frame is the root frame.
    unit, unit_columns : ndarray of int
        The variables whose axis is a bone frame's own axis (a ball joint's three), and which axis.
    """

    bones: np.ndarray
    frame_bones: np.ndarray
    local_axes: np.ndarray
    inside: np.ndarray
    outside: np.ndarray
    unit: np.ndarray
    unit_columns: np.ndarray


_LAYOUTS: dict[tuple[int, bytes], tuple[Body, ColumnLayout]] = {}


def column_layout(body: Body, dofs: np.ndarray) -> ColumnLayout:
    """The :class:`ColumnLayout` of the variables ``dofs`` (kept per body and variables)."""
    key = (id(body), np.asarray(dofs, dtype=np.int64).tobytes())
    kept = _LAYOUTS.get(key)
    if kept is not None and kept[0] is body:
        return kept[1]
    bone_of = np.searchsorted(body.dof_start, dofs, side="right") - 1
    frame_bones = np.empty(dofs.size, dtype=int)
    local_axes = np.empty((dofs.size, 3))
    for k, (dof, bone) in enumerate(zip(dofs, bone_of)):
        kind, local = body.kinds[bone], int(dof - body.dof_start[bone])
        if kind is JointKind.BALL or local == 1:
            frame_bones[k], local_axes[k] = bone, body.axes[dof]
        else:
            frame_bones[k], local_axes[k] = body.parents[bone], body.rest_rotations[bone] @ body.axes[dof]
    # A unit axis reads the frame's column instead of a product with it (x·1 + y·0 + z·0 is x, up to a zero's sign).
    along = np.array([int(np.flatnonzero(a)[0]) if np.count_nonzero(a) == 1 and a.max() == 1.0 else -1
                      for a in local_axes], dtype=int)
    unit = np.flatnonzero((frame_bones >= 0) & (along >= 0))
    layout = ColumnLayout(bone_of, frame_bones, local_axes, np.flatnonzero((frame_bones >= 0) & (along < 0)),
                          np.flatnonzero(frame_bones < 0), unit, along[unit])
    if len(_LAYOUTS) > 64:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (body, layout)
    return layout
