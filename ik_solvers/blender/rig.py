"""Rig I/O: an armature's bone chain → core ``Chain`` and joint variables → pose-bone rotation channels.

The chain read is a :class:`~.rig_chain.RigChain` (also importable from here).

Conventions (they live here alone):

- Blender bones point along their local +Y axis; a bone's tail is ``(0, length, 0)`` in its frame.
- The chain is expressed in its *root space*: the armature space of the start bone's parent, i.e.
  the parent pose bone's current frame (``pose_bone.matrix``), or armature space when the start
  bone has no parent. The core chain's root frame is the identity there, and lengths are in
  armature-space units. ``root_space.root_matrices_world`` gives that frame in world space.
- Blender evaluates ``pose = parent_pose @ offset @ matrix_basis`` with
  ``offset = parent.matrix_local⁻¹ @ bone.matrix_local`` (bone roll included). A chain joint's rest
  rotation is ``offset``'s rotation and its variable rotation ``R_i(q)`` is the rotation part of
  ``matrix_basis``. A posed location of a disconnected bone is folded into the joint offsets
  (connected bones ignore location in Blender too); a chain bone with non-unit pose scale is
  refused.
- Blender's per-bone IK settings decide the joint kinds: ``lock_ik_*`` removes axes (3 free →
  BALL, 2 → UNIVERSAL turning about the first free axis then the second, in x, y, z order, 1 →
  HINGE). A bone with all three axes locked is held fixed at its current rotation: it is folded
  into the next joint's offset (or the tip) and gets no joint variables. ``use_ik_limit_*`` with
  ``ik_min_*``/``ik_max_*`` become the limits, ``ik_stiffness_*`` the weights ``1 − stiffness``.
  A hinge's Limit Rotation constraint narrows its limits; one on another joint is refused
  (``checks.rotation_constraint_limits``).
- Rotation channels are read and written in float64 from / to Blender's float32 storage: reading
  the channels directly (not the float32 ``matrix_basis``) and writing values continuous with the
  current ones makes a read → write round trip of an unchanged pose change nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from ..core import Chain, IKInputError, JointKind
from ..core.kinematics import local_quaternions
from ..core.rotations import (
    matrices_from_quaternions,
    rotvecs_from_quaternions,
)
from .checks import rotation_constraint_limits
from .errors import IKSolversError
from .euler import (
    BONE_AXIS,
    EULER_ORDERS,
    continuous_axis_angles,
    continuous_eulers,
    continuous_quaternions,
    euler_solutions,
    quaternions_from_eulers,
    wrap_angles,
)
from .rig_chain import RigChain
from .root_space import root_matrices_world, uniform_scale

if TYPE_CHECKING:
    import bpy
    from mathutils import Matrix

ROTATION_MODES = ("QUATERNION", *EULER_ORDERS, "AXIS_ANGLE")
_AXIS_NAMES = "xyz"

MIN_WEIGHT = 0.01
"""Floor of a joint weight ``1 − ik_stiffness``: Blender caps ``ik_stiffness`` at 0.99, so this
is Blender's own floor; it also absorbs float32 rounding of 0.99 (0.99000001)."""

UNIT_SCALE_TOLERANCE = 1e-6
"""Largest deviation of a chain bone's pose scale from 1 accepted (float32 noise is ~6e-8)."""


# --------------------------------------------------------------------------- channels
def _current_channels(pose_bone: bpy.types.PoseBone) -> np.ndarray:
    """The rotation channel of ``pose_bone`` in its rotation mode, float64 (4,) or (3,)."""
    mode = pose_bone.rotation_mode
    if mode == "QUATERNION":
        return np.array(pose_bone.rotation_quaternion, dtype=float)
    if mode == "AXIS_ANGLE":
        return np.array(pose_bone.rotation_axis_angle, dtype=float)
    return np.array(pose_bone.rotation_euler, dtype=float)


_IDENTITY_QUATERNION = np.array([1.0, 0.0, 0.0, 0.0])


def basis_quaternion(pose_bone: bpy.types.PoseBone) -> np.ndarray:
    """Unit quaternion ``(4,)`` (w, x, y, z) of ``pose_bone.matrix_basis``'s rotation, in float64
    from the bone's channels (a zero quaternion or axis counts as no rotation, as in Blender)."""
    return channels_quaternion(pose_bone.rotation_mode, _current_channels(pose_bone))


def channels_quaternion(mode: str, values: np.ndarray) -> np.ndarray:
    """:func:`basis_quaternion` of rotation channel ``values`` (float64 ``(4,)`` or ``(3,)``) in rotation ``mode``."""
    if mode == "QUATERNION":
        norm = np.linalg.norm(values)
        return values / norm if norm > 0.0 else _IDENTITY_QUATERNION.copy()
    if mode == "AXIS_ANGLE":
        norm = np.linalg.norm(values[1:])
        if norm == 0.0:
            return _IDENTITY_QUATERNION.copy()
        half = 0.5 * values[0]
        return np.concatenate([[np.cos(half)], np.sin(half) * values[1:] / norm])
    return quaternions_from_eulers(values, mode)


def _values_in_mode(mode: str, reference: np.ndarray, quaternions: np.ndarray, keep_norm: bool) -> np.ndarray:
    """Channel values ``(N, 3|4)`` in rotation mode ``mode`` for quaternions ``(N, 4)``, continuous
    from ``reference`` (a channel value, float64 ``(4,)`` or ``(3,)``: the current one, or a bake's seed)."""
    if mode == "QUATERNION":
        norm = quaternion_length(reference.tolist())
        if norm == 0.0:
            reference, norm = np.array([1.0, 0.0, 0.0, 0.0]), 1.0
        values = continuous_quaternions(quaternions, reference)
        return values * norm if keep_norm else values
    if mode == "AXIS_ANGLE":
        values = continuous_axis_angles(rotvecs_from_quaternions(quaternions), reference)
        axis_length = np.linalg.norm(reference[1:])
        if keep_norm and axis_length > 0.0:
            values[:, 1:] *= axis_length
        return values
    return continuous_eulers(matrices_from_quaternions(quaternions), mode, reference)


def rotation_channel_values(obj: bpy.types.Object, rig: RigChain, q: np.ndarray,
                            seeds: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Rotation-channel values of every joint bone for joint variables ``q (N, n_dof)``.

    Returns, per bone name, an array in the bone's current ``rotation_mode``: ``(N, 4)``
    quaternions (w, x, y, z) kept in one hemisphere, ``(N, 3)`` Euler angles (x, y, z; radians)
    without ±180° jumps, or ``(N, 4)`` axis-angle (angle, x, y, z). Frame 0 continues from the
    bone's value in ``seeds`` (channel values in its mode; a bake's are ``keyframes.bake_seeds``), else
    from the channel's current value; each later frame from the one before. Fully locked (fixed) bones are not included: their channels never change.
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    if q.shape[-1] != rig.chain.n_dof:
        raise IKSolversError(f"Expected {rig.chain.n_dof} joint values per frame, got {q.shape[-1]}.")
    rotations = local_quaternions(rig.chain, q)
    bones = _pose_bones(obj, rig.joint_bones)
    return {
        name: _values_in_mode(pose_bone.rotation_mode,
                              _current_channels(pose_bone) if seeds is None else np.asarray(seeds[name], dtype=float),
                              rotations[:, joint], keep_norm=False)
        for joint, (name, pose_bone) in enumerate(zip(rig.joint_bones, bones))
    }


def quaternion_length(quaternion: Sequence[float]) -> float:
    """Length of a quaternion given as four floats: the one formula the writes keep a channel's length
    with (summed in order, one correctly rounded square root)."""
    w, x, y, z = quaternion
    return math.sqrt(((w * w + x * x) + y * y) + z * z)


def _quaternion_values(references: Iterable[Sequence[float]], quaternions: Iterable[Iterable[float]],
                       ) -> list[tuple[float, float, float, float]]:
    """Quaternion channel values of B bones, each one frame: what ``_values_in_mode`` gives per bone
    with ``keep_norm`` (``continuous_quaternions`` for a single frame flips the quaternion into the
    reference's hemisphere, then it takes the reference's length), on Python floats instead of its
    ~10 array calls per bone.

    ``references``: B channels' current values, four floats each; ``quaternions``: B unit (w, x, y, z).
    IKSolversError if a value is not finite (nothing has been written then).
    """
    values = []
    for reference, quaternion in zip(references, quaternions):
        norm = quaternion_length(reference)
        w, x, y, z = reference if norm else (1.0, 0.0, 0.0, 0.0)  # a zero quaternion reads as identity
        norm = norm or 1.0
        qw, qx, qy, qz = map(float, quaternion)
        # (q · ±1) · |r| and q · (±|r|) are the same numbers: the sign is exact.
        scale = -norm if ((qw * w + qx * x) + qy * y) + qz * z < 0.0 else norm
        value = (qw * scale, qx * scale, qy * scale, qz * scale)
        if not all(map(math.isfinite, value)):
            raise IKSolversError("The solve produced non-finite rotations; the pose was not changed.")
        values.append(value)
    return values


MODE_NAMES = {0: "QUATERNION", -1: "AXIS_ANGLE", **{k + 1: order for k, order in enumerate(EULER_ORDERS)}}
"""``rotation_mode`` as ``foreach_get`` reads it (Blender's ``ROT_MODE_*`` values) → its name."""

CHANNELS = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}
"""Rotation mode → (channel property, width); every Euler order uses ``("rotation_euler", 3)``."""
_EULER_CHANNEL = ("rotation_euler", 3)


def _bone_indices(obj: bpy.types.Object | None, names: Sequence[str]) -> list[int]:
    """Indices of pose bones ``names`` in ``obj.pose.bones``; IKSolversError for a missing one."""
    if obj is None or obj.type != "ARMATURE" or obj.pose is None:
        raise IKSolversError("The object is not an armature.")
    indices = [obj.pose.bones.find(name) for name in names]
    if -1 in indices:
        name = names[indices.index(-1)]
        raise IKSolversError(f"Bone '{name}' no longer exists in armature '{obj.name}'.")
    return indices


def write_pose(obj: bpy.types.Object, rig: RigChain, q: np.ndarray) -> tuple[str, ...]:
    """Set the joint bones' rotation channels to joint variables ``q (n_dof,)``; returns the channel
    properties written (``rotation_quaternion`` …: the others kept every value).

    Everything is computed and checked before the first channel is touched: a non-finite ``q``
    or a bone that vanished raises ``IKSolversError`` and leaves the pose as it was. A quaternion or
    axis keeps the length it had, so writing back the values just read changes nothing.

    Channels are read and written in bulk (``foreach_get`` / ``foreach_set`` over all pose bones,
    one call per channel kind in use): per-bone property access cost more than the arithmetic. The
    other bones get back exactly what was read (float32 → float64 → float32 is exact).
    """
    q = np.asarray(q, dtype=float).reshape(-1)
    if q.shape != (rig.chain.n_dof,):
        raise IKSolversError(f"Expected {rig.chain.n_dof} joint values, got {q.size}.")
    if not np.all(np.isfinite(q)):
        raise IKSolversError("The solve produced non-finite joint values; the pose was not changed.")
    rotations = local_quaternions(rig.chain, q[None])
    indices = _bone_indices(obj, rig.joint_bones)
    assert obj.pose is not None  # _bone_indices refused an object without a pose
    pose_bones = obj.pose.bones
    count = len(pose_bones)
    mode_ids = np.empty(count, dtype=np.int32)
    pose_bones.foreach_get("rotation_mode", mode_ids)
    modes = [MODE_NAMES[int(mode_ids[index])] for index in indices]
    channels: dict[str, np.ndarray] = {}  # property → all bones' values, (count, width) float64
    for mode in modes:
        name, width = CHANNELS.get(mode, _EULER_CHANNEL)
        if name not in channels:
            channels[name] = np.empty((count, width), dtype=np.float64)
            pose_bones.foreach_get(name, channels[name].reshape(-1))
    # The joint bones' rows of these (our own copies) are replaced; nothing reaches Blender before
    # every value is computed and checked.
    quaternion_joints = [joint for joint, mode in enumerate(modes) if mode == "QUATERNION"]
    if quaternion_joints:
        rows = [indices[joint] for joint in quaternion_joints]
        channels["rotation_quaternion"][rows] = _quaternion_values(channels["rotation_quaternion"][rows].tolist(),
                                                                   rotations[0, quaternion_joints])
    for joint, (index, mode) in enumerate(zip(indices, modes)):
        if mode == "QUATERNION":
            continue
        name = CHANNELS.get(mode, _EULER_CHANNEL)[0]
        value = _values_in_mode(mode, channels[name][index], rotations[:, joint], keep_norm=True)[0]
        _check_finite(value)
        channels[name][index] = value
    for name, values in channels.items():
        pose_bones.foreach_set(name, values.reshape(-1))
    # foreach_set skips the properties' update callbacks, which tag the pose for re-evaluation.
    obj.update_tag(refresh={"DATA"})
    return tuple(channels)


def write_quaternion_joints(obj: bpy.types.Object, rotations: Iterable[Iterable[float]], indices: list[int],
                            ) -> tuple[str, ...]:
    """:func:`write_pose` for joint bones all in quaternion mode (the caller knows they are: a change
    of rotation mode is an update of the armature), at ``indices`` in ``obj.pose.bones``, from their
    local rotations ``(n, 4)`` ``(w, x, y, z)`` (``local_quaternions(rig.chain, q)`` for the ``q``
    written): the same channel values. Returns the channel properties written.

    Live mode writes a pose per target move, so this costs what it must and no more: one bulk read
    of the channels, one bulk write, and a transform tag. The tag re-evaluates the pose and what it
    deforms as setting each bone's channel does (its update tags the geometry, which on a 10-bone
    chain costs Blender ~30 µs more per update; tests/blender/test_live_quick.py checks Blender's
    evaluated tip after every such write).
    """
    assert obj.pose is not None  # live mode read the chain from this armature's pose
    pose_bones = obj.pose.bones
    # Blender keeps the channels as float32: a float32 buffer is copied whole both ways (a float64
    # one or a list converts each value, ~3× dearer on a 1,000-bone rig), and numpy's cast to float32
    # rounds as Blender's own cast of a float does.
    channels = np.empty(4 * len(pose_bones), dtype=np.float32)
    pose_bones.foreach_get("rotation_quaternion", channels)
    values = _quaternion_values([channels[4 * index : 4 * index + 4].tolist() for index in indices], rotations)
    for index, value in zip(indices, values):
        channels[4 * index : 4 * index + 4] = value
    pose_bones.foreach_set("rotation_quaternion", channels)
    obj.update_tag(refresh={"OBJECT"})
    return ("rotation_quaternion",)


def _check_finite(values: np.ndarray) -> None:
    if not np.isfinite(values).all():
        raise IKSolversError("The solve produced non-finite rotations; the pose was not changed.")


# --------------------------------------------------------------------------- reading
def bone_offset(bone: bpy.types.Bone, pose_bone: bpy.types.PoseBone, with_location: bool = True) -> np.ndarray:
    """The bone's frame ``(4, 4)`` in its parent's rest frame before its rotation (armature space for a
    root bone): ``parent.matrix_local⁻¹ @ bone.matrix_local``, with a disconnected bone's pose location
    folded in unless ``with_location`` is False (a body root, whose location the body solve sets)."""
    local = _matrix(bone.matrix_local)
    offset = local if bone.parent is None else np.linalg.inv(_matrix(bone.parent.matrix_local)) @ local
    if with_location and not bone.use_connect:
        location = np.array(pose_bone.location, dtype=float)
        if bone.use_local_location:
            offset[:3, 3] += offset[:3, :3] @ location
        else:
            offset[:3, 3] += location
    return offset


def _pose_bones(obj: bpy.types.Object | None, names: Iterable[str]) -> list[bpy.types.PoseBone]:
    if obj is None or obj.type != "ARMATURE" or obj.pose is None:
        raise IKSolversError("The object is not an armature.")
    out: list[bpy.types.PoseBone] = []
    for name in names:
        pose_bone = obj.pose.bones.get(name)
        if pose_bone is None:
            raise IKSolversError(f"Bone '{name}' no longer exists in armature '{obj.name}'.")
        out.append(pose_bone)
    return out


def _matrix(m: Matrix) -> np.ndarray:
    return np.array(m, dtype=float)


def _free_axes(pose_bone: bpy.types.PoseBone) -> list[int]:
    return [k for k, axis in enumerate(_AXIS_NAMES) if not getattr(pose_bone, f"lock_ik_{axis}")]


def _joint_variables(quaternion: np.ndarray, free: list[int]) -> np.ndarray:
    """Joint variables of a bone with free axes ``free`` and basis rotation ``quaternion (4,)``.

    A ball joint takes the rotation vector; a hinge the twist angle about its axis; a universal
    joint ``R = R_a(t1) R_b(t2) R_c(t3)`` the first two angles. A pose with rotation about a
    locked axis (set by hand) is projected: those parts are dropped, as Blender's IK does.
    """
    if len(free) == 3:
        return rotvecs_from_quaternions(quaternion)
    if len(free) == 1:
        return np.array([wrap_angles(2.0 * np.arctan2(quaternion[1 + free[0]], quaternion[0]))])
    locked = ({0, 1, 2} - set(free)).pop()
    # Blender order string whose product reads R_free0 R_free1 R_locked.
    order = "".join("XYZ"[k] for k in (locked, free[1], free[0]))
    angles = euler_solutions(matrices_from_quaternions(quaternion)[None], order, np.zeros(1))[0, 0]
    return angles[free]


def joint_variables_from_quaternions(rig: RigChain, quaternions: dict[str, np.ndarray]) -> np.ndarray:
    """Joint variables ``(n_dof,)`` of the chain for basis rotations per joint bone, given as unit
    quaternions ``(4,)`` (w, x, y, z).

    Each joint reads its bone's rotation the way :func:`read_chain` reads the current pose (ball:
    rotation vector, hinge: angle about its axis, universal: its two angles). IKSolversError if a joint
    bone is missing from ``quaternions``.
    """
    chain = rig.chain
    q: list[float] = []
    for joint, name in enumerate(rig.joint_bones):
        if name not in quaternions:
            raise IKSolversError(f"No rotation given for bone '{name}'.")
        start, kind = chain.dof_start[joint], chain.kinds[joint]
        free = [int(np.argmax(np.abs(chain.axes[start + k]))) for k in range(kind.value)]
        quaternion = np.asarray(quaternions[name], dtype=float)
        q.extend(_joint_variables(quaternion / np.linalg.norm(quaternion), free))
    return np.array(q, dtype=float)


def read_pose(obj: bpy.types.Object, rig: RigChain) -> np.ndarray:
    """The joint bones' current rotations as joint variables ``(n_dof,)`` of an already read chain.

    The cheap part of :func:`read_chain` for callers that keep a ``RigChain`` while only the pose
    changes (live mode). It does not notice rest-pose, lock or limit edits: re-read the chain then.
    """
    bones = _pose_bones(obj, rig.joint_bones)
    return joint_variables_from_quaternions(rig, {b.name: basis_quaternion(b) for b in bones})


def read_chain(obj: bpy.types.Object | None, tip_bone: str, chain_length: int) -> RigChain:
    """Read the chain of ``chain_length`` bones ending at ``tip_bone`` from armature ``obj``.

    Raises
    ------
    IKSolversError
        Not an armature, unknown tip bone, a hierarchy shorter than ``chain_length``, a bone that
        does not inherit rotation, non-unit pose scale, non-uniform object scale, or a segment too
        short to have a direction.
    """
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise IKSolversError("The chain's object is not an armature.")
    if chain_length < 1:
        raise IKSolversError("The chain length must be at least 1 bone.")
    bones = cast("bpy.types.Armature", obj.data).bones  # an armature object's data is its Armature
    pose = obj.pose
    assert pose is not None  # every armature object has a pose
    tip = bones.get(tip_bone) if tip_bone else None
    if tip is None:
        raise IKSolversError(f"Tip bone '{tip_bone}' not found in armature '{obj.name}'.")
    chain_bones = [tip]
    while len(chain_bones) < chain_length:
        parent = chain_bones[-1].parent
        if parent is None:
            raise IKSolversError(
                f"Bone '{tip_bone}' has only {len(chain_bones)} bone(s) up to the root; "
                f"the chain length {chain_length} is too long."
            )
        chain_bones.append(parent)
    chain_bones.reverse()
    start_parent = chain_bones[0].parent

    kinds, offsets, rest_rotations, axes, lower, upper, weights = [], [], [], [], [], [], []
    q: list[float] | np.ndarray
    joint_bones, q = [], []
    fixed = np.eye(4)  # transform accumulated since the last joint frame by fully locked bones
    for bone in chain_bones:
        pose_bone = pose.bones[bone.name]
        if bone.parent is not None and not bone.use_inherit_rotation:
            raise IKSolversError(f"Bone '{bone.name}' does not inherit rotation; enable Inherit Rotation.")
        if np.abs(np.array(pose_bone.scale, dtype=float) - 1.0).max() > UNIT_SCALE_TOLERANCE:
            raise IKSolversError(f"Bone '{bone.name}' has a pose scale other than 1; reset it first.")
        before_rotation = fixed @ bone_offset(bone, pose_bone)
        rotation = basis_quaternion(pose_bone)
        free = _free_axes(pose_bone)
        if not free:
            step = np.eye(4)
            step[:3, :3] = matrices_from_quaternions(rotation)
            fixed = before_rotation @ step
            continue
        constraint_limits = rotation_constraint_limits(pose_bone, free)
        joint_bones.append(bone.name)
        offsets.append(before_rotation[:3, 3])
        rest_rotations.append(before_rotation[:3, :3])
        kinds.append({1: JointKind.HINGE, 2: JointKind.UNIVERSAL, 3: JointKind.BALL}[len(free)])
        q.extend(_joint_variables(rotation, free))
        for k in free:
            name = _AXIS_NAMES[k]
            axes.append(np.eye(3)[k])
            limited = getattr(pose_bone, f"use_ik_limit_{name}")
            low, high = constraint_limits.get(k, (-np.inf, np.inf))
            lower.append(max(getattr(pose_bone, f"ik_min_{name}"), low) if limited else low)
            upper.append(min(getattr(pose_bone, f"ik_max_{name}"), high) if limited else high)
            weights.append(max(1.0 - getattr(pose_bone, f"ik_stiffness_{name}"), MIN_WEIGHT))
        fixed = np.eye(4)
    if not kinds:
        raise IKSolversError("Every bone of the chain has all IK axes locked; unlock at least one.")
    tip_offset = (fixed @ np.append(BONE_AXIS * chain_bones[-1].length, 1.0))[:3]
    try:
        chain = Chain(
            kinds=tuple(kinds),
            offsets=np.array(offsets),
            rest_rotations=orthonormalised(np.array(rest_rotations)),
            axes=np.array(axes),
            lower=np.array(lower, dtype=float),
            upper=np.array(upper, dtype=float),
            weights=np.array(weights, dtype=float),
            tip_offset=tip_offset,
        )
    except IKInputError as error:
        raise IKSolversError(_chain_error_message(error, joint_bones), field=error.field) from error
    q = np.array(q, dtype=float)
    if not np.all(np.isfinite(q)):
        raise IKSolversError("The chain's current pose has non-finite rotations.")
    rig = RigChain(
        chain=chain,
        bone_names=tuple(b.name for b in chain_bones),
        q=q,
        joint_bones=tuple(joint_bones),
        parent_bone=None if start_parent is None else start_parent.name,
    )
    uniform_scale(root_matrices_world(obj, rig))
    start = chain_bones[0]
    if start_parent is not None and start.inherit_scale != "FULL":
        parent_scale = np.linalg.svd(_matrix(pose.bones[start_parent.name].matrix)[:3, :3], compute_uv=False)
        if np.abs(parent_scale - 1.0).max() > UNIT_SCALE_TOLERANCE:
            raise IKSolversError(
                f"Bone '{start.name}' does not fully inherit the scale of its scaled parent "
                f"'{start_parent.name}'; set Inherit Scale to Full or reset the parent's scale."
            )
    return rig


def orthonormalised(rotations: np.ndarray) -> np.ndarray:
    """Nearest rotations to ``(n, 3, 3)`` float32-rounded rest matrices.

    Blender stores rest matrices in float32 (orthonormal to ~1e-7); the polar factor differs
    from them by that much, far below what the evaluated pose can resolve, and keeps the core's
    rotation checks exact.
    """
    u, _, vt = np.linalg.svd(rotations)
    return u @ vt


def _chain_error_message(error: IKInputError, joint_bones: list[str]) -> str:
    text = str(error)
    if error.field in ("offsets", "tip_offset"):
        return f"The chain has a zero-length or too short segment ({text}); check bones {', '.join(joint_bones)}."
    return f"The chain cannot be built: {text}."
