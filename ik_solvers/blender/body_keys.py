"""Reduced keys for a body bake (SPEC §8, §9): the body root and every chain reduced top down within one world
bound (:mod:`..core.body.keys`), written as Bézier keys, and each chain's error measured as Blender evaluates
the written curves.

The units are the body root (its ``location`` and rotation channels) and each chain (its joint bones'
rotation channels), reduced from the solve's values as the keys store them; every joint and tip of every
chain stays within the bound ``E`` of the unreduced bake at every frame. A body bake's default ``E`` is
the largest of its chains' (0.1 mm per metre of reach).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from ..core.body.forward import BodyPose, body_pose
from ..core.body.keys import (
    BodyKeys,
    ChannelsOf,
    KeyUnit,
    body_reduction_steps,
    pose_from_local,
    quaternion_channels,
    unit_errors,
)
from ..core.key_points import default_key_error
from ..core.kinematics import joint_local_matrices
from ..core.rotations import rotvecs_from_matrices
from .euler import continuous_axis_angles, continuous_eulers
from .key_reduction import channel_fcurves, reduced_curve_writer, rotations_of_mode
from .keyframes import CurveWriter, rotation_data_path

if TYPE_CHECKING:
    import bpy

    from .body import BodySpec


def channels_of_mode(mode: str) -> ChannelsOf:
    """A bone's rotation matrices and the channel values near them → its channel values in rotation mode
    ``mode``, continuous from the first of those values (:data:`~..core.body.keys.ChannelsOf`)."""
    if mode == "QUATERNION":
        return quaternion_channels
    if mode == "AXIS_ANGLE":
        return lambda basis, near: continuous_axis_angles(rotvecs_from_matrices(basis), near[0])
    return lambda basis, near: continuous_eulers(basis, mode, near[0])


def body_units(obj: bpy.types.Object, spec: BodySpec, values: dict[str, np.ndarray],
               root_location: np.ndarray) -> list[KeyUnit]:
    """The body root (with ``root_location (N, 3)``, if the body has a root) and each chain as reduction
    units, from every keyed bone's rotation channel ``values`` (bone → ``(N, k)``, as the keys store them)."""
    assert obj.pose is not None  # the body was read from this armature
    names = spec.body.names
    units = []
    if spec.root is not None and spec.root_rig is not None:
        mode = obj.pose.bones[spec.root].rotation_mode
        units.append(KeyUnit(spec.root, (names.index(spec.root),), spec.root_rig.chain,
                             [root_location, values[spec.root]], [None, rotations_of_mode(mode)],
                             channels_of_mode(mode), translation=True))
    for chain in spec.specs:
        bones = chain.rig.joint_bones
        units.append(KeyUnit(chain.name, tuple(names.index(b) for b in bones), chain.rig.chain,
                             [values[b] for b in bones],
                             [rotations_of_mode(obj.pose.bones[b].rotation_mode) for b in bones],
                             channels_of_mode(obj.pose.bones[bones[0]].rotation_mode),
                             tip=names.index(chain.rig.bone_names[-1])))
    return units


def default_body_key_error(spec: BodySpec, scale: float) -> float:
    """The default bound of a body bake (world units): the largest of its chains' defaults."""
    return max(default_key_error(chain.rig.chain, scale) for chain in spec.specs)


def _root_index(spec: BodySpec) -> int | None:
    return None if spec.root is None else spec.body.names.index(spec.root)


def _solved_pose(spec: BodySpec, q: np.ndarray, root_location: np.ndarray) -> BodyPose:
    root = _root_index(spec)
    return body_pose(spec.body, spec.body.variables, q, root, root_location if root is not None else None)


def solved_tips(spec: BodySpec, q: np.ndarray, root_location: np.ndarray) -> np.ndarray:
    """Each chain's tip ``(N, C, 3)`` as the solve puts it (armature space; chains in the body's order)."""
    tips = [spec.body.names.index(chain.rig.bone_names[-1]) for chain in spec.specs]
    return _solved_pose(spec, q, root_location).tails(spec.body, tips)


def body_reduction(spec: BodySpec, q: np.ndarray, root_location: np.ndarray, units: list[KeyUnit],
                   frames: np.ndarray, key_error: float, scale: float) -> Generator[None, None, BodyKeys]:
    """The units' reduction (:func:`~..core.body.keys.body_reduction_steps`, in rounds) against the unreduced
    bake of the solve's variables ``q (N, n_dof)`` and ``root_location (N, 3)`` at ``frames (N,)``."""
    pose = _solved_pose(spec, q, root_location)
    return body_reduction_steps(np.asarray(frames, dtype=float), spec.body, pose, units, key_error, scale)


def body_curve_writers(spec: BodySpec, units: list[KeyUnit], keys: BodyKeys, start: float,
                       end: float) -> tuple[CurveWriter, CurveWriter | None]:
    """Writers of the reduced keys for :func:`~.keyframes.key_rotations` (every unit's bones) and
    :func:`~.keyframes.key_locations` (the root's location; None without a root)."""
    by_bone: dict[str, CurveWriter] = {}
    location = None
    for unit, reduced in zip(units, keys.reduced):
        bones = [spec.body.names[b] for b in unit.bones]
        first = 1 if unit.translation else 0  # the location's channel group comes first
        write = reduced_curve_writer(reduced, {bone: first + k for k, bone in enumerate(bones)}, start, end)
        by_bone.update(dict.fromkeys(bones, write))
        if unit.translation:
            location = reduced_curve_writer(reduced, {bones[0]: 0}, start, end)

    def write_rotation(fcurve: bpy.types.FCurve, bone: str, index: int) -> None:
        by_bone[bone](fcurve, bone, index)

    return write_rotation, location


def evaluated_unit_errors(obj: bpy.types.Object, spec: BodySpec, units: list[KeyUnit], q: np.ndarray,
                          root_location: np.ndarray, key_frames: np.ndarray) -> np.ndarray:
    """Per unit and frame ``(U, N)``, the farthest of its joints and tip from the solve's pose (armature units)
    with every keyed bone posed as Blender evaluates its written F-curves at ``key_frames (N,)`` (action time;
    ``FCurve.evaluate``), through the core's forward kinematics (Blender's pose to float32 rounding)."""
    assert obj.pose is not None  # the body was read from this armature
    body, root = spec.body, _root_index(spec)
    exact = joint_local_matrices(body.variables, q)
    local = exact.copy()
    frames = key_frames.tolist()
    location = root_location
    for unit in units:
        for bone in unit.bones:
            pose_bone = obj.pose.bones[body.names[bone]]
            curves = channel_fcurves(obj, pose_bone.name, rotation_data_path(pose_bone),
                                     4 if pose_bone.rotation_mode in ("QUATERNION", "AXIS_ANGLE") else 3)
            values = np.array([[fcurve.evaluate(frame) for fcurve in curves] for frame in frames])
            local[:, bone] = body.rest_rotations[bone] @ rotations_of_mode(pose_bone.rotation_mode)(values)
        if unit.translation:
            curves = channel_fcurves(obj, body.names[unit.bones[0]],
                                     obj.pose.bones[body.names[unit.bones[0]]].path_from_id("location"), 3)
            location = np.array([[fcurve.evaluate(frame) for fcurve in curves] for frame in frames])
    reference = pose_from_local(body, exact, root, root_location if root is not None else None)
    return unit_errors(body, pose_from_local(body, local, root, location if root is not None else None), reference,
                       units)
