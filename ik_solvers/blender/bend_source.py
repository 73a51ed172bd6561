"""Where a new straight chain bends (SPEC §5, the ``bend_direction`` chain setting of §6): from the most
bent frame of the armature's action, else the bone roll convention of Rigify's metarigs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import bpy
import numpy as np

from ..core import forward_kinematics, pose_plane_normals
from ..core.vectors import cross, matvec, norm
from .compat import channelbag_for_assigned_slot
from .rig import CHANNELS, channels_quaternion, joint_variables_from_quaternions
from .rig_chain import RigChain

ROLL_CONVENTION = (0.0, 0.0, -1.0)
"""The bend direction of a straight chain whose action never bends it: the start bone's local −Z.
Measured on Rigify's human metarig (``armature_human_metarig_add``): the knee (``thigh.L → shin.L``)
and the elbow (``upper_arm.L → forearm.L``) bulge toward their start bone's local −Z (0.997 and 0.96
of the unit bulge, both sides), bending about its local +X."""

MAX_SAMPLED_FRAMES = 1000
"""Frames of the action read at most (evenly spread over its range)."""

MIN_BEND = 1e-3
"""A frame counts as bent when a middle joint is this far (fraction of the reach) from the EE axis."""


def found_bend_direction(obj: bpy.types.Object, rig: RigChain, points: int) -> tuple[tuple[float, float, float], str]:
    """A bend direction for a chain whose preferred pose (the current one) is straight in its first
    ``points`` joint positions (tip last: all of them, or up to the last joint), and its source (the
    end of a sentence "bend direction from …").

    The armature's action is read bone by bone from its F-curves (the pose is not touched) at up to
    :data:`MAX_SAMPLED_FRAMES` frames; at the most bent one, the bulge of those points (where the
    middle ones stand off the axis through the first and last) seen from the start bone is carried to
    the current pose's start bone. Without a bent frame: :data:`ROLL_CONVENTION`.
    """
    from_action = _from_action(obj, rig, points)
    if from_action is not None:
        return from_action
    return ROLL_CONVENTION, "the bone roll convention (the start bone's local −Z, as on Rigify's metarigs)"


def carried_bend_direction(obj: bpy.types.Object, direction: Sequence[float], from_bone: str,
                           to_bone: str) -> tuple[float, float, float]:
    """``direction`` in ``from_bone``'s rest axes, written in ``to_bone``'s (bones of the armature ``obj``;
    as given for the same bone, or when either is gone)."""
    bones = cast("bpy.types.Armature", obj.data).bones
    old, new = bones.get(from_bone), bones.get(to_bone)
    if old is None or new is None or from_bone == to_bone:
        return (float(direction[0]), float(direction[1]), float(direction[2]))
    rest = np.array(new.matrix_local.to_3x3(), dtype=float).T @ np.array(old.matrix_local.to_3x3(), dtype=float)
    x, y, z = (float(component) for component in rest @ np.asarray(direction, dtype=float))
    return x, y, z


def _from_action(obj: bpy.types.Object, rig: RigChain, points: int) -> tuple[tuple[float, float, float], str] | None:
    anim_data = obj.animation_data
    bag = channelbag_for_assigned_slot(anim_data)
    if anim_data is None or anim_data.action is None or bag is None:
        return None
    start, end = float(anim_data.action.frame_range[0]), float(anim_data.action.frame_range[1])
    frames = np.unique(np.round(np.linspace(start, end, min(MAX_SAMPLED_FRAMES, int(end - start) + 1))))
    q = _chain_poses(obj, rig, bag, frames)
    if q is None:
        return None
    chain = rig.chain
    pose = forward_kinematics(chain, q)
    positions = pose.positions[:, :points]
    offsets = positions[:, 1:-1] - positions[:, :1]
    axes = positions[:, -1] - positions[:, 0]
    axes /= np.maximum(norm(axes), 1e-300)[:, None]
    spread = norm(offsets - np.sum(offsets * axes[:, None], axis=-1)[..., None] * axes[:, None]).max(axis=1)
    normals = pose_plane_normals(positions)
    spread[~np.all(np.isfinite(normals), axis=1)] = 0.0
    best = int(np.argmax(spread))
    if spread[best] <= MIN_BEND * chain.reach:
        return None
    bulge = cross(axes[best], normals[best])  # the chain bulges toward a × n (pose_plane_normals)
    # Seen from the start bone at that frame, then from the start bone in the current (preferred) pose,
    # written in its rest axes (root · rest₀): the setting's frame.
    current = forward_kinematics(chain, rig.q[None]).frames[0, 1]
    seen = matvec(current, matvec(pose.frames[best, 1].T, bulge))
    direction = matvec((chain.root_rotation @ chain.rest_rotations[0]).T, seen)
    x, y, z = (float(component) for component in direction)
    return (x, y, z), f"frame {int(frames[best])} of the action '{anim_data.action.name}'"


def _chain_poses(obj: bpy.types.Object, rig: RigChain, bag: bpy.types.ActionChannelbag,
                 frames: np.ndarray) -> np.ndarray | None:
    """Joint variables ``(F, n_dof)`` of the chain at ``frames`` from the action's F-curves (a bone
    without rotation curves keeps its current rotation), or None when no joint bone is animated."""
    assert obj.pose is not None  # the rig was read from it
    quaternions: dict[str, np.ndarray] = {}
    animated = False
    for name in rig.joint_bones:
        pose_bone = obj.pose.bones[name]
        mode = pose_bone.rotation_mode
        prop, width = CHANNELS.get(mode, ("rotation_euler", 3))
        values = np.tile(np.array(getattr(pose_bone, prop), dtype=float), (frames.size, 1))
        for index in range(width):
            fcurve = bag.fcurves.find(f'pose.bones["{name}"].{prop}', index=index)
            if fcurve is not None:
                animated = True
                values[:, index] = [fcurve.evaluate(frame) for frame in frames]
        quaternions[name] = np.array([channels_quaternion(mode, row) for row in values])
    if not animated:
        return None
    return np.array([joint_variables_from_quaternions(rig, {name: rows[k] for name, rows in quaternions.items()})
                     for k in range(frames.size)])
