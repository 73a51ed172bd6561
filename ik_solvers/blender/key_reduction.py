"""Reduced keys (SPEC §9): a bake's per-frame rotation keys of a chain replaced by the fewest Bézier keys
that keep every joint and the tip within a world-space bound (:mod:`..core.key_reduction`).

The keys' handles (type ``FREE``) sit at 1/3 and 2/3 of their segments in time, or, on segments
merged with free handle times, at each channel's own times inside the segment; either way Blender's
Bézier evaluation is the curve the core checked, and nothing recomputes them: no
``fcurve.update()`` (it would keep FREE handles anyway, but would move the AUTO handles of keys
kept outside the baked range).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

import bpy
import numpy as np

from ..core.key_points import chain_points, default_key_error
from ..core.key_reduction import ReducedKeys, reduction_steps
from ..core.key_rotations import RotationsOf, axis_angle_rotations, quaternion_rotations
from ..core.key_search import finished
from . import compat
from .errors import IKSolversError
from .euler import matrices_from_eulers
from .keyframes import (
    KEYFRAME_ATTRIBUTES,
    CurveWriter,
    key_coordinates,
    read_keyframes,
    rotation_data_path,
    values_at_keys,
    write_keyframes,
)
from .rig_chain import RigChain
from .root_space import root_matrices_world, uniform_scale


def _enum_value(prop: str, identifier: str) -> int:
    return cast("bpy.types.EnumProperty", bpy.types.Keyframe.bl_rna.properties[prop]).enum_items[identifier].value


BEZIER = _enum_value("interpolation", "BEZIER")
FREE = _enum_value("handle_left_type", "FREE")


def rotations_of_mode(mode: str) -> RotationsOf:
    """Channel values ``(M, k)`` → rotation matrices ``(M, 3, 3)`` for a bone in rotation mode ``mode``."""
    if mode == "QUATERNION":
        return quaternion_rotations
    if mode == "AXIS_ANGLE":
        return axis_angle_rotations
    return lambda values: matrices_from_eulers(values, mode)


def channel_fcurves(obj: bpy.types.Object, bone: str, path: str, width: int) -> list[bpy.types.FCurve]:
    """The F-curves of channel ``path`` (``width`` of them, index order) of ``bone`` in ``obj``'s assigned
    action slot; IKSolversError if one is missing."""
    channelbag = compat.channelbag_for_assigned_slot(obj.animation_data)
    fcurves = [None if channelbag is None else channelbag.fcurves.find(path, index=i) for i in range(width)]
    if any(fcurve is None for fcurve in fcurves):
        channel = "location" if path.endswith("location") else "rotation"
        raise IKSolversError(f"Bone '{bone}' has no keyed {channel} to reduce.")
    return cast("list[bpy.types.FCurve]", fcurves)


def _chain_fcurves(obj: bpy.types.Object, rig: RigChain) -> list[list[bpy.types.FCurve]]:
    """Per joint bone, its rotation channel's F-curves (index order); IKSolversError if one is missing."""
    assert obj.pose is not None  # the chain was read from this armature
    out = []
    for bone in rig.joint_bones:
        pose_bone = obj.pose.bones[bone]
        width = 4 if pose_bone.rotation_mode in ("QUATERNION", "AXIS_ANGLE") else 3
        out.append(channel_fcurves(obj, bone, rotation_data_path(pose_bone), width))
    return out


def curve_tips(obj: bpy.types.Object, rig: RigChain, key_frames: np.ndarray) -> np.ndarray:
    """The chain's tip ``(N, 3)`` in its root space (chain units) at ``key_frames (N,)`` (action time)
    as Blender evaluates its rotation F-curves there (``FCurve.evaluate``: the reduced Bézier
    segments between the keys), through the core's forward kinematics, which equals Blender's pose
    of those bones to float32 rounding (the bake's check compares the two on its ``frame_set`` frames)."""
    assert obj.pose is not None  # the chain was read from this armature
    rotations = []
    for bone, curves in zip(rig.joint_bones, _chain_fcurves(obj, rig)):
        values = np.array([[fcurve.evaluate(frame) for fcurve in curves] for frame in key_frames.tolist()])
        rotations.append(rotations_of_mode(obj.pose.bones[bone].rotation_mode)(values))
    return chain_points(rig.chain, rotations)[:, -1]


def reduce_rotation_keys(obj: bpy.types.Object, rig: RigChain, frames: np.ndarray, key_error: float | None = None,
                         scale: float | None = None) -> ReducedKeys:
    """Replace the keys at ``frames (N,)`` of the chain's rotation channels by reduced Bézier keys.

    Every frame must be a key of every channel (as a bake without reduction leaves them): those
    keys are the unreduced bake, read as Blender stores them. Keys at other frames are kept with
    all their data. ``key_error``, ``scale``: as :func:`reduced_rotation_keys`. Returns the
    reduction with its per-frame world error. IKSolversError if a channel is not keyed at every
    frame or a curve has modifiers.
    """
    frames = np.asarray(frames, dtype=float)
    fcurves = _chain_fcurves(obj, rig)
    values = {}
    for bone, curves in zip(rig.joint_bones, fcurves):
        columns = [values_at_keys(fcurve, frames) for fcurve in curves]
        if any(column is None for column in columns):
            raise IKSolversError(f"Bone '{bone}' is not keyed at every frame to reduce (or its curves have modifiers).")
        values[bone] = np.column_stack(cast("list[np.ndarray]", columns)).astype(float)
    reduced = finished(reduced_rotation_keys(obj, rig, frames, values, key_error, scale))
    write = reduced_curve_writer(reduced, joint_groups(rig), float(frames[0]), float(frames[-1]))
    for bone, curves in zip(rig.joint_bones, fcurves):
        for index, fcurve in enumerate(curves):
            write(fcurve, bone, index)
    return reduced


def reduced_rotation_keys(obj: bpy.types.Object, rig: RigChain, frames: np.ndarray, values: dict[str, np.ndarray],
                          key_error: float | None = None, scale: float | None = None
                          ) -> Generator[None, None, ReducedKeys]:
    """The reduced keys of the chain's rotation channel ``values`` (joint bone → ``(N, k)``, as the keys
    store them: :func:`~.keyframes.stored_values`) at ``frames (N,)``, in rounds
    (:func:`~..core.key_reduction.reduction_steps`: a bake goes on with them between timer ticks, so a
    long reduction can be cancelled); nothing is written.

    ``key_error``: the bound in world units (default :func:`~..core.key_reduction.default_key_error`);
    ``scale``: world units per armature unit of the chain's root space (default: its current scale).
    """
    if scale is None:
        scale = uniform_scale(root_matrices_world(obj, rig))
    if key_error is None:
        key_error = default_key_error(rig.chain, scale)
    assert obj.pose is not None  # the chain was read from this armature
    rotations = [rotations_of_mode(obj.pose.bones[bone].rotation_mode) for bone in rig.joint_bones]
    return reduction_steps(np.asarray(frames, dtype=float), [values[bone] for bone in rig.joint_bones], rotations,
                           rig.chain, key_error, scale=scale)


def reduced_curve_writer(reduced: ReducedKeys, joint_of: dict[str, int], start: float, end: float) -> CurveWriter:
    """A :data:`~.keyframes.CurveWriter` for :func:`~.keyframes.key_rotations` that writes ``reduced``'s keys
    (of the bones ``joint_of`` names, each with its channel group in ``reduced``: a chain's joint bones
    in order, :func:`joint_groups`) in ``[start, end]`` instead of a key per frame
    (:func:`write_bezier_keys`): values, handle values and handle frames."""
    per_joint: dict[int, tuple[np.ndarray, ...]] = {}  # each joint's keys, formed once for all its channels

    def write(fcurve: bpy.types.FCurve, bone: str, index: int) -> None:
        joint = joint_of[bone]
        if joint not in per_joint:
            per_joint[joint] = (reduced.key_values(joint), *reduced.handles(joint), *reduced.handle_times(joint))
        values, left, right, left_frames, right_frames = per_joint[joint]
        write_bezier_keys(fcurve, reduced.frames, values[:, index],
                          np.column_stack([left_frames[:, index], left[:, index]]),
                          np.column_stack([right_frames[:, index], right[:, index]]), start, end)
    return write


def joint_groups(rig: RigChain) -> dict[str, int]:
    """Each joint bone of ``rig`` and its channel group in the chain's :class:`ReducedKeys` (joint order)."""
    return {bone: joint for joint, bone in enumerate(rig.joint_bones)}


def write_bezier_keys(fcurve: bpy.types.FCurve, frames: np.ndarray, values: np.ndarray, left: np.ndarray,
                      right: np.ndarray, start: float, end: float) -> None:
    """Key ``values (K,)`` at ``frames (K,)`` as Bézier keys with FREE handles at ``left`` / ``right
    (K, 2)`` (frame, value), replacing the curve's keys in ``[start, end]`` and keeping every other
    key with all its data."""
    x = key_coordinates(fcurve)[:, 0]
    before, after = x < start, x > end
    n_before, n_after, count = int(before.sum()), int(after.sum()), len(frames)
    ours = {"co": np.column_stack([frames, values]), "handle_left": left, "handle_right": right,
            "handle_left_type": np.full(count, FREE), "handle_right_type": np.full(count, FREE),
            "interpolation": np.full(count, BEZIER)}
    points = fcurve.keyframe_points
    if n_before == n_after == 0:  # fresh keys carry Blender's defaults in every other attribute
        points.clear()
        points.add(count)
        for name, dtype, _width in KEYFRAME_ATTRIBUTES:
            if name in ours:
                points.foreach_set(name, ours[name].astype(dtype).ravel())
        return
    old = read_keyframes(fcurve)
    points.clear()
    points.add(n_before + count + n_after)
    keys = read_keyframes(fcurve)  # fresh keys: Blender's defaults for every attribute
    new = slice(n_before, n_before + count)
    for name, column in keys.items():
        column[:n_before] = old[name][before]
        column[new.stop:] = old[name][after]
        if name in ours:
            column[new] = ours[name]
    write_keyframes(fcurve, keys)


def reduction_sentence(chain: str, reduced: ReducedKeys) -> str:
    """One line for the report: keys before / after and the world error against the bound."""
    return (f"Reduced the keys of '{chain}' from {reduced.keys_before} to {reduced.keys_after} per curve "
            f"({reduced.kept_fraction:.1%}): world error max {reduced.max_error:.3g}, 99th percentile "
            f"{reduced.error_p99:.3g} (bound {reduced.key_error:.3g}).")
