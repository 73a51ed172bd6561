"""Bake: solve chains over a frame range as one batch and key their bones' rotation channels (SPEC §6).

The pipeline per chain: sample what the solve needs at every frame (the target, the pole and the
chain's root frame as Blender evaluates them), solve all frames at once with the core, then write
the joint bones' rotation channels into the object's action in bulk. Every F-curve a bake touches
is snapshotted first, so a cancel (Esc) or an error puts the action back exactly as it was.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field, fields

import bpy
import numpy as np
from bpy.props import BoolProperty, IntProperty, StringProperty
from bpy_extras import anim_utils

from ..core import Status, flips_from_normals
from . import live, solving
from .operators import posable_armature
from .rig import RigError, read_chain, rotation_channel_values


class BakeError(ValueError):
    """The bake cannot run or had to stop; the message is one sentence for the user."""


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class BakeOptions:
    """What to bake, as the operator's properties give it.

    Attributes
    ----------
    frame_start, frame_end : int
        Inclusive frame range; existing keys of the baked channels inside it are replaced.
    frame_step : int
        Key every ``frame_step``-th frame; the end frame is always keyed.
    chain_names : tuple of str
        Names of the chains of the object to bake, in order.
    """

    frame_start: int
    frame_end: int
    frame_step: int
    chain_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.frame_end < self.frame_start:
            raise BakeError(f"The end frame {self.frame_end} is before the start frame {self.frame_start}.")
        if self.frame_step < 1:
            raise BakeError("The frame step must be at least 1.")
        if not self.chain_names:
            raise BakeError("There is no chain to bake.")

    @property
    def frames(self) -> np.ndarray:
        """The keyed frames ``(N,)``: start, start + step, …, and the end frame."""
        frames = np.arange(self.frame_start, self.frame_end + 1, self.frame_step)
        if frames[-1] != self.frame_end:
            frames = np.append(frames, self.frame_end)
        return frames


# --------------------------------------------------------------------------- keyframe storage
KEYFRAME_ATTRIBUTES = (
    ("co", np.float32, 2),
    ("handle_left", np.float32, 2),
    ("handle_right", np.float32, 2),
    ("handle_left_type", np.int32, 1),
    ("handle_right_type", np.int32, 1),
    ("interpolation", np.int32, 1),
    ("easing", np.int32, 1),
    ("type", np.int32, 1),
    ("back", np.float32, 1),
    ("amplitude", np.float32, 1),
    ("period", np.float32, 1),
    ("select_control_point", bool, 1),
    ("select_left_handle", bool, 1),
    ("select_right_handle", bool, 1),
)
"""Every stored property of a ``Keyframe`` (``co_ui`` mirrors ``co``), with the numpy type
``foreach_get`` / ``foreach_set`` use for it and its values per key."""

LINEAR = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value


def read_keyframes(fcurve) -> dict[str, np.ndarray]:
    """All keyframe data of ``fcurve``: per attribute an array ``(K,)`` or ``(K, 2)``."""
    points = fcurve.keyframe_points
    count = len(points)
    keys = {}
    for name, dtype, width in KEYFRAME_ATTRIBUTES:
        values = np.empty(count * width, dtype=dtype)
        points.foreach_get(name, values)
        keys[name] = values.reshape(count, width) if width > 1 else values
    return keys


def write_keyframes(fcurve, keys: dict[str, np.ndarray]) -> None:
    """Replace all keys of ``fcurve`` by ``keys`` (as ``read_keyframes`` gives them), bit for bit.

    No ``fcurve.update()``: it would recompute the stored handles, and a restored curve must
    keep exactly the handles it had.
    """
    points = fcurve.keyframe_points
    points.clear()
    points.add(len(keys["co"]))
    for name, _dtype, _width in KEYFRAME_ATTRIBUTES:
        points.foreach_set(name, keys[name].ravel())


def replace_keys_in_range(fcurve, frames: np.ndarray, values: np.ndarray, start: float, end: float) -> None:
    """Key ``values (N,)`` at ``frames (N,)`` with linear interpolation, dropping the curve's keys in
    ``[start, end]`` and keeping every key outside it with all its data."""
    points = fcurve.keyframe_points
    x = np.empty(2 * len(points), dtype=np.float32)
    points.foreach_get("co", x)
    x = x[0::2]
    before, after = x < start, x > end
    n_before, n_after, count = int(before.sum()), int(after.sum()), len(frames)
    old = read_keyframes(fcurve) if n_before or n_after else None
    points.clear()
    points.add(n_before + count + n_after)  # fresh keys carry Blender's defaults
    co = np.column_stack([frames, values]).astype(np.float32)
    linear = np.full(count, LINEAR, dtype=np.int32)
    if n_before == n_after == 0:
        points.foreach_set("co", co.ravel())
        points.foreach_set("interpolation", linear)
        # Sorted, unique, linear keys need no fcurve.update() (as bpy_extras.anim_utils' bake notes).
        return
    new = slice(n_before, n_before + count)
    probe = points[n_before]
    for name, dtype, width in KEYFRAME_ATTRIBUTES:
        merged = np.empty((n_before + count + n_after, width), dtype=dtype)
        merged[:n_before] = old[name][before].reshape(-1, width)
        merged[new] = np.array(_stored_value(probe, name), dtype=dtype).reshape(-1, width)
        merged[new.stop:] = old[name][after].reshape(-1, width)
        if name == "co":
            merged[new] = co
        elif name == "interpolation":
            merged[new, 0] = linear
        points.foreach_set(name, merged.ravel())
    fcurve.update()  # handles of the new keys and of their kept neighbours


def _stored_value(keyframe, name: str):
    """A keyframe attribute as ``foreach_get`` gives it (enum identifiers as their integer values)."""
    value = getattr(keyframe, name)
    if isinstance(value, str):
        return bpy.types.Keyframe.bl_rna.properties[name].enum_items[value].value
    return tuple(value) if not isinstance(value, (bool, int, float)) else value


@dataclass
class _ChannelSnapshot:
    data_path: str
    index: int
    backup: str | None
    """Data path of the F-curve's copy in the backup action; None: the F-curve did not exist."""


@dataclass
class ActionSnapshot:
    """What a bake changed in one object's animation data, to put back exactly on cancel or error."""

    obj: bpy.types.Object
    created_animation_data: bool = False
    created_action: bpy.types.Action | None = None
    created_slot: bpy.types.ActionSlot | None = None
    assigned_slot: bool = False
    channels: list[_ChannelSnapshot] = field(default_factory=list)
    created_groups: list[str] = field(default_factory=list)
    backup: bpy.types.Action | None = None
    """Holds copies of the F-curves before their first change (copied in C: the snapshot of
    thousands of keys costs next to nothing); removed when the bake ends either way."""
    _backup_channelbag: object = None
    _seen: set = field(default_factory=set)

    def channelbag(self):
        """The channel bag of the object's assigned action slot, creating action / slot / bag as needed.

        An existing action is always reused: a bake never leaves an extra Action behind.
        """
        obj = self.obj
        if obj.animation_data is None:
            obj.animation_data_create()
            self.created_animation_data = True
        anim_data = obj.animation_data
        if anim_data.action is None:
            self.created_action = bpy.data.actions.new(f"{obj.name}Action")
            anim_data.action = self.created_action
        action = anim_data.action
        if anim_data.action_slot is None:
            slot = anim_utils.action_get_first_suitable_slot(action, obj.id_type)
            if slot is None:
                slot = self.created_slot = action.slots.new(obj.id_type, obj.name)
            anim_data.action_slot = slot
            self.assigned_slot = True
        return anim_utils.action_ensure_channelbag_for_slot(action, anim_data.action_slot)

    def remember(self, channelbag, data_path: str, index: int, group: str) -> None:
        """Copy a channel's F-curve before its first change in this bake."""
        if (data_path, index) in self._seen:
            return
        self._seen.add((data_path, index))
        fcurve = channelbag.fcurves.find(data_path, index=index)
        backup = None
        if fcurve is not None:
            if self.backup is None:
                self.backup = bpy.data.actions.new("IK Solvers bake backup")
                slot = self.backup.slots.new(self.obj.id_type, "backup")
                self._backup_channelbag = anim_utils.action_ensure_channelbag_for_slot(self.backup, slot)
            backup = str(len(self.channels))
            self._backup_channelbag.fcurves.new_from_fcurve(fcurve, data_path=backup)
        self.channels.append(_ChannelSnapshot(data_path, index, backup))
        if channelbag.groups.get(group) is None and group not in self.created_groups:
            self.created_groups.append(group)

    def release(self) -> None:
        """Forget the snapshot (the bake is kept): drop the backup action."""
        if self.backup is not None:
            bpy.data.actions.remove(self.backup)
        self.backup = self._backup_channelbag = None
        self.channels.clear()
        self._seen.clear()

    def restore(self) -> None:
        """Put the animation data back as it was before the bake."""
        obj = self.obj
        anim_data = obj.animation_data
        channelbag = anim_utils.animdata_get_channelbag_for_assigned_slot(anim_data)
        if channelbag is not None:
            for snapshot in reversed(self.channels):
                fcurve = channelbag.fcurves.find(snapshot.data_path, index=snapshot.index)
                if snapshot.backup is None:
                    if fcurve is not None:
                        channelbag.fcurves.remove(fcurve)
                elif fcurve is not None:
                    write_keyframes(fcurve, read_keyframes(self._backup_channelbag.fcurves.find(snapshot.backup, index=snapshot.index)))
            for name in self.created_groups:
                group = channelbag.groups.get(name)
                if group is not None and len(group.channels) == 0:
                    channelbag.groups.remove(group)
        if anim_data is not None:
            if self.assigned_slot:
                anim_data.action_slot = None
            if self.created_slot is not None:
                anim_data.action.slots.remove(self.created_slot)
            if self.created_action is not None:
                anim_data.action = None
                bpy.data.actions.remove(self.created_action)
            if self.created_animation_data:
                obj.animation_data_clear()
        if obj.animation_data is not None and obj.animation_data.action is not None:
            obj.animation_data.action.update_tag()
        self.release()


def rotation_data_path(pose_bone) -> str:
    """The F-curve data path of ``pose_bone``'s rotation channel in its rotation mode."""
    mode = pose_bone.rotation_mode
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
    return pose_bone.path_from_id(prop)


def continue_from_previous_key(fcurves: list, values: np.ndarray, mode: str, start: float) -> np.ndarray:
    """Shift baked channel values ``(N, k)`` so they continue the curve's last kept key before ``start``.

    The values are already continuous among themselves; a quaternion block may still sit in the
    other hemisphere than the key before it, an Euler block a whole turn away: both evaluate to the
    same rotation but would make Blender interpolate the long way round at the boundary.
    """
    previous = []
    for fcurve in fcurves:
        if fcurve is None or len(fcurve.keyframe_points) == 0:
            return values
        co = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
        fcurve.keyframe_points.foreach_get("co", co)
        x = co[0::2]
        kept = np.flatnonzero(x < start)
        if kept.size == 0:
            return values
        previous.append(float(co[2 * kept[-1] + 1]))
    previous = np.array(previous)
    if mode == "QUATERNION":
        return -values if float(previous @ values[0]) < 0.0 else values
    if mode == "AXIS_ANGLE":
        return values
    turns = np.round((previous - values[0]) / (2.0 * math.pi))
    return values + 2.0 * math.pi * turns


# --------------------------------------------------------------------------- sampling
TRANSFORM_PATHS = frozenset(
    {
        "location",
        "rotation_euler",
        "rotation_quaternion",
        "rotation_axis_angle",
        "scale",
        "delta_rotation_euler",
        "delta_rotation_quaternion",
        "delta_scale",
    }
)
"""Object F-curve paths that cannot move an unparented, unconstrained object's origin away from
``location`` (``delta_location`` can, so it is not here)."""


def _animation_blockers(id_data, what: str) -> list[str]:
    """Why ``id_data``'s animation is not a plain action evaluated at the scene frame."""
    anim_data = getattr(id_data, "animation_data", None)
    if anim_data is None:
        return []
    reasons = []
    if len(anim_data.drivers):
        reasons.append(f"{what} has drivers")
    if len(anim_data.nla_tracks) or anim_data.use_tweak_mode:
        reasons.append(f"{what} has NLA tracks")
    if anim_data.action is not None:
        if anim_data.action_blend_type != "REPLACE" or anim_data.action_influence != 1.0:
            reasons.append(f"{what}'s action is blended")
        if anim_data.action.use_cyclic:
            reasons.append(f"{what}'s action is cyclic")
    return reasons


def _fcurves(id_data) -> list:
    anim_data = getattr(id_data, "animation_data", None)
    channelbag = anim_utils.animdata_get_channelbag_for_assigned_slot(anim_data)
    return [] if channelbag is None else list(channelbag.fcurves)


def _point_blockers(point, what: str) -> list[str]:
    reasons = _animation_blockers(point, what)
    if point.parent is not None:
        reasons.append(f"{what} has a parent")
    if len(point.constraints):
        reasons.append(f"{what} has constraints")
    for fcurve in _fcurves(point):
        if fcurve.data_path not in TRANSFORM_PATHS:
            reasons.append(f"{what} animates {fcurve.data_path}")
    return reasons


def _bone_prefixes(obj, names) -> dict[str, str]:
    """F-curve path prefix ``'pose.bones["name"].'`` → bone name."""
    return {obj.pose.bones[name].path_from_id() + ".": name for name in names}


def _bone_of_path(prefixes: dict[str, str], path: str) -> tuple[str | None, str]:
    for prefix, name in prefixes.items():
        if path.startswith(prefix):
            return name, path[len(prefix):]
    return None, path


def fcurve_sampling_blockers(scene, obj, rig, chain_settings) -> list[str]:
    """Reasons the chain's inputs cannot be read straight from F-curves (empty: they can).

    Sampling F-curves is exactly Blender's evaluation when every sampled point (target, pole) is
    an unparented, unconstrained, driver-free object animated only by its own action's transform
    F-curves, and the chain's root frame and geometry cannot change over time: the armature has
    no parent, constraints, drivers or NLA, and its action keys neither the object transform, nor
    the chain's ancestor bones, nor anything but rotation on the chain's bones, nor the chain
    settings (e.g. an animated swivel angle). Anything else is sampled by evaluating each frame.
    """
    reasons = []
    render = scene.render
    if render.frame_map_old != render.frame_map_new:
        reasons.append("the scene remaps time")
    for what, point in (("the target", chain_settings.target), ("the pole target", chain_settings.pole_target)):
        if point is not None:
            reasons += _point_blockers(point, what)
    reasons += _animation_blockers(obj, "the armature")
    reasons += _animation_blockers(obj.data, "the armature data")
    if obj.parent is not None:
        reasons.append("the armature has a parent")
    if len(obj.constraints):
        reasons.append("the armature has constraints")
    if _fcurves(obj.data):
        reasons.append("the armature data is animated")
    ancestors = []
    bone = obj.data.bones[rig.bone_names[0]].parent
    while bone is not None:
        ancestors.append(bone.name)
        bone = bone.parent
    for name in (*rig.bone_names, *ancestors):
        if len(obj.pose.bones[name].constraints):
            reasons.append(f"bone '{name}' has constraints")
    chain_prefixes = _bone_prefixes(obj, rig.bone_names)
    ancestor_prefixes = _bone_prefixes(obj, ancestors)
    settings_prefix = chain_settings.path_from_id() + "."
    rotations = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    for fcurve in _fcurves(obj):
        path = fcurve.data_path
        in_chain, prop = _bone_of_path(chain_prefixes, path)
        if in_chain is not None:
            moves = prop not in rotations  # rotations are what the bake replaces; never read per frame
        else:
            # Other bones' channels, custom properties and other chains' settings cannot reach this
            # chain without a driver or a constraint, both refused above.
            moves = (_bone_of_path(ancestor_prefixes, path)[0] is not None or path in TRANSFORM_PATHS
                     or path == "delta_location" or path.startswith(settings_prefix))
        if moves:
            reasons.append(f"the armature animates {path}")
    return reasons


def sample_point_fcurves(point, frames: np.ndarray) -> np.ndarray:
    """World positions ``(N, 3)`` of an unparented, unconstrained object from its location F-curves.

    Only valid where ``fcurve_sampling_blockers`` found nothing. Unkeyed (or muted) components keep
    their current value, and ``delta_location`` is added in float32 as Blender's object matrix does.
    """
    positions = np.tile(np.array(point.location, dtype=np.float32), (len(frames), 1))
    frame_list = frames.tolist()
    for fcurve in _fcurves(point):
        muted = fcurve.mute or (fcurve.group is not None and fcurve.group.mute)
        if fcurve.data_path == "location" and not muted:
            evaluate = fcurve.evaluate
            positions[:, fcurve.array_index] = [evaluate(f) for f in frame_list]
    return (positions + np.array(point.delta_location, dtype=np.float32)).astype(float)


def sample_fcurves(obj, chain_settings, rig, frames: np.ndarray) -> solving.FrameInputs:
    """The chain's inputs for ``frames (N,)`` read from F-curves (see ``fcurve_sampling_blockers``)."""
    current = solving.sample_inputs(obj, chain_settings, rig)
    n = len(frames)
    pole = chain_settings.pole_target
    return solving.FrameInputs(
        target_world=sample_point_fcurves(chain_settings.target, frames),
        root_world=np.broadcast_to(current.root_world, (n, 4, 4)),
        pole_world=None if pole is None else sample_point_fcurves(pole, frames),
        target_parent_world=np.broadcast_to(np.eye(4), (n, 4, 4)),
        swivel_angle=np.full(n, current.swivel_angle[0]),
    )


def _geometry_key(obj, rig) -> bytes:
    """The pose values besides rotation that shape the chain (location, scale of its bones)."""
    values = []
    for name in rig.bone_names:
        pose_bone = obj.pose.bones[name]
        values.extend(pose_bone.location)
        values.extend(pose_bone.scale)
    return np.array(values, dtype=np.float32).tobytes()


# --------------------------------------------------------------------------- the job's values
def select_frames(inputs: solving.FrameInputs, rows: np.ndarray) -> solving.FrameInputs:
    """The inputs at ``rows`` (indices into their batch axis), optional fields staying None."""

    def pick(value):
        return None if value is None else np.asarray(value)[rows]

    return solving.FrameInputs(
        target_world=pick(inputs.target_world),
        root_world=pick(inputs.root_world),
        pole_world=pick(inputs.pole_world),
        target_parent_world=pick(inputs.target_parent_world),
        swivel_angle=pick(inputs.swivel_angle),
    )


@dataclass(frozen=True, eq=False)
class SampledFrames:
    """One chain's solve inputs at some frames, as :meth:`BakeJob.sample` read them.

    Attributes
    ----------
    frames : ndarray of int, shape (M,)
        The sampled frames, in the order asked for.
    inputs : solving.FrameInputs
        Target, root frame, pole, … per frame (world space, batch axis ``M``).
    geometry : ndarray of bytes (dtype object), shape (M,)
        Per frame, the key of the chain's shape (its bones' pose location and scale) there: frames
        with one key are solved with one rig.
    """

    frames: np.ndarray
    inputs: solving.FrameInputs
    geometry: np.ndarray


@dataclass(frozen=True, eq=False)
class HIFrames:
    """What flip detection needs of an HI solve, per frame (batch axis ``M`` first).

    Attributes
    ----------
    solver_normals : ndarray, shape (M, 3)
        Solver-plane normals in the solving frame.
    ee_axes_sphere : ndarray, shape (M, 3)
        Unit EE axes in the swivel sphere's coordinates.
    pole_angles : ndarray, shape (M,)
        Angle from the EE axis to the nearer pole (radians).
    pole_warnings : ndarray of bool, shape (M,)
        The HI solve's warning that the pole angle is below its warning angle.
    poles : ndarray, shape (M, 3)
        The sphere's pole ``n0`` each frame was solved with (one per chain shape).
    singular_directions : ndarray, shape (M, 3)
        Where the zero-plane map in use is singular (±n0 for the default map, the
        pole target's line for the pole-object map): what a pole crossing crosses.
    """

    solver_normals: np.ndarray
    ee_axes_sphere: np.ndarray
    pole_angles: np.ndarray
    pole_warnings: np.ndarray
    poles: np.ndarray
    singular_directions: np.ndarray


@dataclass(frozen=True, eq=False)
class SolvedFrames:
    """One chain's solve at some frames, as :meth:`BakeJob.solve` gives it and
    :meth:`BakeJob.write_solved` keys it (possibly solved in another process and gathered with
    :meth:`concatenate`).

    Attributes
    ----------
    frames : ndarray of int, shape (M,)
        The solved frames.
    q : ndarray, shape (M, n_dof)
        Joint variables per frame (radians; ball joints as rotation vectors).
    status : ndarray of Status (dtype object), shape (M,)
    error, bound : ndarray, shape (M,)
        Tip error and its lower bound per frame (scene units).
    hi : HIFrames or None
        The HI extras (None for other methods).
    seconds : float
        Time the solve took (the report adds the writing to it).
    """

    frames: np.ndarray
    q: np.ndarray
    status: np.ndarray
    error: np.ndarray
    bound: np.ndarray
    hi: HIFrames | None
    seconds: float

    @classmethod
    def concatenate(cls, parts: list["SolvedFrames"]) -> "SolvedFrames":
        """One solve from consecutive parts (all of one chain and method), in the order given."""

        def joined(values):
            return np.concatenate(list(values))

        hi = None
        if parts[0].hi is not None:
            hi = HIFrames(**{f.name: joined(getattr(p.hi, f.name) for p in parts) for f in fields(HIFrames)})
        return cls(
            frames=joined(p.frames for p in parts),
            q=joined(p.q for p in parts),
            status=joined(p.status for p in parts),
            error=joined(p.error for p in parts),
            bound=joined(p.bound for p in parts),
            hi=hi,
            seconds=sum(p.seconds for p in parts),
        )


def _flip_frames(solved: SolvedFrames, warning_angle: float) -> list[dict]:
    """Solver-plane flips of an HI solve over its frames in order, within each chain shape.

    A shape is told by the sphere pole its frames were solved with; across two shapes the normals
    live in different spheres, and the shape change itself would count as a turn. Per flip: frame,
    turn (degrees), whether it crosses a pole, the pole distance (degrees) and whether the pole
    warning was on at either side of it.
    """
    hi = solved.hi
    if hi is None:
        return []
    flips = []
    shapes = np.unique(hi.poles, axis=0)
    for pole in shapes:
        rows = np.flatnonzero(np.all(hi.poles == pole, axis=1))
        report = flips_from_normals(
            hi.solver_normals[rows], hi.ee_axes_sphere[rows], pole, warning_angle=warning_angle,
            singular_directions=hi.singular_directions[rows],
        )
        for k, turn, crossing in zip(report.frames, report.turns, report.pole_crossing):
            before, after = rows[k - 1], rows[k]
            flips.append({
                "frame": int(solved.frames[after]),
                "turn_degrees": float(np.degrees(turn)),
                "pole_crossing": bool(crossing),
                "pole_distance_degrees": float(np.degrees(min(hi.pole_angles[before], hi.pole_angles[after]))),
                "warned": bool(hi.pole_warnings[before] or hi.pole_warnings[after]),
            })
    return sorted(flips, key=lambda flip: flip["frame"])


# --------------------------------------------------------------------------- the job
@dataclass(eq=False)
class ChainBake:
    """One chain of a bake.

    Attributes
    ----------
    settings
        The chain's settings (an item of ``obj.ik_solvers.chains``).
    rig : RigChain
        The chain as read when the bake started: its bones, and the pose every frame starts from.
    report : dict or None
        The chain's bake report once :meth:`BakeJob.write_solved` keyed it.
    """

    settings: object
    rig: object
    report: dict | None = None
    _rigs: dict = field(default_factory=dict)
    """geometry key → RigChain read at a frame with that geometry (the first: the rig above)."""
    _blockers: list[str] | None = None
    """Why F-curve sampling is not exact, found just before sampling (an earlier chain of the
    same bake may have keyed this chain's ancestors); empty: sample F-curves."""
    _sampling: "_Sampling | None" = None
    """The operator's resumable sampling of every frame."""


@dataclass(eq=False)
class _Sampling:
    """A chain's sampling at some frames, resumable frame by frame."""

    frames: np.ndarray
    inputs: list = field(default_factory=list)
    geometry: list = field(default_factory=list)
    sampled: SampledFrames | None = None


class BakeJob:
    """A bake in progress: sample → solve → write, chain after chain, resumable in chunks.

    ``advance()`` does a bounded amount of work (a modal operator calls it per timer tick, a
    headless run until it returns True); ``finish()`` or ``cancel()`` ends the job. Until
    ``finish()`` the action can be put back exactly with ``cancel()``.

    The steps are public for callers that split the frames themselves (``scripts/ik_batch.py``
    solves chunks of frames in other processes): :meth:`sample` the chain at some frames,
    :meth:`solve` them, gather the parts with :meth:`SolvedFrames.concatenate` and key them
    all with :meth:`write_solved`. Every frame starts from the same pose, so the split does not
    change the keys.
    """

    def __init__(self, context, obj, options: BakeOptions):
        self.scene = context.scene
        self.view_layer = context.view_layer
        self.obj = obj
        self.options = options
        self.frames = options.frames
        self.reports: list[dict] = []
        self._chains: list[ChainBake] = []
        by_name = {chain.name: chain for chain in obj.ik_solvers.chains}
        for name in options.chain_names:
            settings = by_name.get(name)
            if settings is None:
                raise BakeError(f"Armature '{obj.name}' has no IK chain named '{name}'.")
            if settings.target is None:
                raise BakeError(f"Chain '{name}' has no target; pick an Empty.")
            try:
                rig = read_chain(obj, settings.tip_bone, settings.chain_length)
            except RigError as error:
                raise BakeError(f"Chain '{name}': {error}") from None
            chain = ChainBake(settings, rig)
            chain._rigs[_geometry_key(obj, rig)] = rig
            self._chains.append(chain)
        self._depsgraph = context.evaluated_depsgraph_get()
        self._frame = (self.scene.frame_current, self.scene.frame_subframe)
        self._pose = _PoseSnapshot(obj)
        self.action = ActionSnapshot(obj)
        self._index = 0
        self._finished = False

    @property
    def chains(self) -> tuple[ChainBake, ...]:
        """The chains to bake, in the options' order."""
        return tuple(self._chains)

    # ------------------------------------------------------------------ progress
    @property
    def total_steps(self) -> int:
        """Frames to sample plus one solve-and-write step, per chain."""
        return len(self._chains) * (len(self.frames) + 1)

    @property
    def done_steps(self) -> int:
        done = self._index * (len(self.frames) + 1)
        if self._index < len(self._chains):
            sampling = self._chains[self._index]._sampling
            if sampling is not None:
                done += len(self.frames) if sampling.sampled is not None else len(sampling.inputs)
        return done

    # ------------------------------------------------------------------ work
    def advance(self, time_budget: float | None = None) -> bool:
        """Work for about ``time_budget`` seconds (None: to the end); True once every chain is baked.

        Raises BakeError (after which ``cancel()`` restores everything).
        """
        deadline = None if time_budget is None else time.perf_counter() + time_budget
        while self._index < len(self._chains):
            chain = self._chains[self._index]
            if chain._sampling is None:
                chain._sampling = _Sampling(self.frames)
            if not self._continue_sampling(chain, chain._sampling, deadline):
                return False
            self.write_solved(chain, self.solve(chain, chain._sampling.sampled))
            self._index += 1
            if deadline is not None and time.perf_counter() > deadline:
                return self._index == len(self._chains)
        return True

    def sample(self, chain: ChainBake, frames: np.ndarray | None = None) -> SampledFrames:
        """What ``chain``'s solve reads at ``frames (M,)`` (default: every frame of the bake).

        From the F-curves where that is exactly Blender's evaluation, else by evaluating each
        frame (the current frame is put back afterwards). Raises BakeError.
        """
        sampling = _Sampling(self.frames if frames is None else np.asarray(frames))
        self._continue_sampling(chain, sampling, None)
        return sampling.sampled

    def _continue_sampling(self, chain: ChainBake, sampling: _Sampling, deadline: float | None) -> bool:
        """Sample until done (True) or past ``deadline`` (False: call again to go on)."""
        if sampling.sampled is not None:
            return True
        if not self._sampling_blockers(chain):
            inputs = sample_fcurves(self.obj, chain.settings, chain.rig, sampling.frames)
            geometry = [next(iter(chain._rigs))] * len(sampling.frames)
        else:
            with live.paused():  # also while the frame goes back: live chains must not solve on it
                if not self._sample_evaluated(chain, sampling, deadline):
                    return False
                self._restore_frame()
            inputs = solving.FrameInputs.stack(sampling.inputs)
            geometry = sampling.geometry
        sampling.sampled = SampledFrames(sampling.frames, inputs, np.array(geometry, dtype=object))
        sampling.inputs, sampling.geometry = [], []
        return True

    def _sampling_blockers(self, chain: ChainBake) -> list[str]:
        if chain._blockers is None:
            chain._blockers = fcurve_sampling_blockers(self.scene, self.obj, chain.rig, chain.settings)
        return chain._blockers

    def _sample_evaluated(self, chain: ChainBake, sampling: _Sampling, deadline: float | None) -> bool:
        depsgraph = self._depsgraph
        frames = sampling.frames.tolist()
        while len(sampling.inputs) < len(frames):
            frame = frames[len(sampling.inputs)]
            self.scene.frame_set(frame)
            key = _geometry_key(self.obj, chain.rig)
            if key not in chain._rigs:
                try:
                    chain._rigs[key] = read_chain(self.obj, chain.settings.tip_bone, chain.settings.chain_length)
                except RigError as error:
                    raise BakeError(f"Chain '{chain.settings.name}' at frame {frame}: {error}") from None
            sampling.geometry.append(key)
            sampling.inputs.append(solving.sample_inputs(self.obj, chain.settings, chain.rig, depsgraph))
            if deadline is not None and time.perf_counter() > deadline and len(sampling.inputs) < len(frames):
                return False
        return True

    def solve(self, chain: ChainBake, sampled: SampledFrames) -> SolvedFrames:
        """Solve the sampled frames as one batch per chain shape, each from the bake's start pose.

        Raises BakeError for a non-finite target or input the solver refuses.
        """
        started = time.perf_counter()
        name = chain.settings.name
        frames, inputs = sampled.frames, sampled.inputs
        bad = np.flatnonzero(~np.all(np.isfinite(np.asarray(inputs.target_world)), axis=1))
        if bad.size:
            raise BakeError(f"Chain '{name}': the target location is not finite at frame {int(frames[bad[0]])}.")
        n = len(frames)
        q = np.empty((n, chain.rig.chain.n_dof))
        status = np.empty(n, dtype=object)
        error, bound = np.empty(n), np.empty(n)
        hi = None
        for key, rig in chain._rigs.items():
            rows = np.flatnonzero(sampled.geometry == key)
            if rows.size == 0:
                continue
            subset = inputs if rows.size == n else select_frames(inputs, rows)
            try:
                prepared = solving.prepare_solve(self.obj, chain.settings, subset, rig=rig, initial=chain.rig.q)
                outcome = solving.run_solve_full(prepared)
            except RigError as error_:
                raise BakeError(f"Chain '{name}', frames from {int(frames[rows[0]])}: {error_}") from None
            result = outcome.result
            q[rows] = result.q
            status[rows] = result.status
            error[rows], bound[rows] = solving.world_errors(prepared, result)
            if outcome.hi is not None:
                if hi is None:
                    hi = HIFrames(solver_normals=np.empty((n, 3)), ee_axes_sphere=np.empty((n, 3)),
                                  pole_angles=np.empty(n), pole_warnings=np.empty(n, dtype=bool),
                                  poles=np.empty((n, 3)), singular_directions=np.empty((n, 3)))
                for name_ in ("solver_normals", "ee_axes_sphere", "pole_angles", "pole_warnings",
                              "singular_directions"):
                    getattr(hi, name_)[rows] = getattr(outcome.hi, name_)
                hi.poles[rows] = outcome.hi.sphere.n0
        return SolvedFrames(frames=frames, q=q, status=status, error=error, bound=bound, hi=hi,
                            seconds=time.perf_counter() - started)

    def write_solved(self, chain: ChainBake, solved: SolvedFrames) -> dict:
        """Key ``chain``'s joint bones from ``solved`` (every frame of the bake, in order); its report.

        Raises BakeError (nothing of this chain keyed) for a solve of other frames or a rotation
        that is not finite.
        """
        started = time.perf_counter()
        name = chain.settings.name
        if not np.array_equal(solved.frames, self.frames):
            raise BakeError(f"Chain '{name}': the solved frames are not the bake's frames.")
        self._sampling_blockers(chain)  # for the report; before our keys when sampled elsewhere
        try:
            values = rotation_channel_values(self.obj, chain.rig, solved.q)
        except RigError as error_:
            raise BakeError(f"Chain '{name}': {error_}") from None
        for bone, channel in values.items():
            bad = np.flatnonzero(~np.all(np.isfinite(channel), axis=1))
            if bad.size:
                raise BakeError(f"Chain '{name}': bone '{bone}' got a non-finite rotation at frame {int(self.frames[bad[0]])}.")
        self._write(values)
        chain.report = self._report(chain, solved, solved.seconds + time.perf_counter() - started)
        self.reports.append(chain.report)
        return chain.report

    def _write(self, values: dict[str, np.ndarray]) -> None:
        channelbag = self.action.channelbag()
        frames = self.frames.astype(np.float64)
        start, end = float(self.options.frame_start), float(self.options.frame_end)
        for bone, channel in values.items():
            pose_bone = self.obj.pose.bones[bone]
            path = rotation_data_path(pose_bone)
            width = channel.shape[1]
            for index in range(width):
                self.action.remember(channelbag, path, index, bone)
            fcurves = [channelbag.fcurves.find(path, index=index) for index in range(width)]
            channel = continue_from_previous_key(fcurves, channel, pose_bone.rotation_mode, start)
            for index, fcurve in enumerate(fcurves):
                if fcurve is None:
                    fcurve = channelbag.fcurves.new(path, index=index, group_name=bone)
                replace_keys_in_range(fcurve, frames, channel[:, index], start, end)

    def _report(self, chain: ChainBake, solved: SolvedFrames, seconds: float) -> dict:
        status, error = solved.status, solved.error
        counts = Counter(s.value for s in status)
        excess = np.maximum(error - solved.bound, 0.0)
        blockers = self._sampling_blockers(chain)
        worst = int(np.argmax(excess))
        report = {
            "chain": chain.settings.name,
            "method": chain.settings.method,
            "frames": int(len(self.frames)),
            "frame_start": self.options.frame_start,
            "frame_end": self.options.frame_end,
            "frame_step": self.options.frame_step,
            "sampling": "fcurves" if not blockers else "evaluated",
            "sampling_reasons": blockers[:5],
            "status_counts": {s.value: int(counts.get(s.value, 0)) for s in Status},
            "max_error": float(error.max()),
            "max_excess": float(excess[worst]),
            "max_excess_frame": int(self.frames[worst]),
            "not_reached_frames": [int(f) for f in self.frames[~_reached(status)][:100]],
            "flip_frames": _flip_frames(solved, float(chain.settings.flip_threshold)),
            "seconds": seconds,
        }
        return report

    # ------------------------------------------------------------------ ending
    def _restore_frame(self) -> None:
        frame, subframe = self._frame
        if (self.scene.frame_current, self.scene.frame_subframe) != (frame, subframe):
            self.scene.frame_set(frame, subframe=subframe)

    def finish(self) -> list[dict]:
        """Store the reports on the chains, restore the current frame and the unbaked pose."""
        self._restore_frame()
        self.view_layer.update()
        baked = {bone for chain in self._chains for bone in chain.rig.joint_bones}
        self._pose.restore(keep_rotation_of=baked)
        for chain in self._chains:
            if chain.report is not None:
                _store_report(chain.settings, chain.report)
        self._finished = True
        self.action.release()
        return self.reports

    def cancel(self) -> None:
        """Put the action, the frame and the pose back exactly as they were."""
        if self._finished:
            return
        self.action.restore()
        self._restore_frame()
        self._pose.restore()
        self.view_layer.update()
        self._finished = True


def _reached(status: np.ndarray) -> np.ndarray:
    return (status == Status.CONVERGED) | (status == Status.UNREACHABLE)


def _store_report(settings, report: dict) -> None:
    counts = report["status_counts"]
    settings.last_bake_report = json.dumps(report)
    settings.bake_frames = report["frames"]
    settings.bake_converged = counts[Status.CONVERGED.value]
    settings.bake_unreachable = counts[Status.UNREACHABLE.value]
    settings.bake_budget_exhausted = counts[Status.BUDGET_EXHAUSTED.value]
    settings.bake_stalled = counts[Status.STALLED.value]
    settings.bake_diverged = counts[Status.DIVERGED.value]
    settings.bake_max_excess = report["max_excess"]
    settings.bake_flip_frames = len(report["flip_frames"])


def report_sentence(report: dict) -> str:
    """One line for ``self.report``: frames, statuses, worst excess, flips."""
    counts = ", ".join(f"{count} {status.lower().replace('_', ' ')}"
                       for status, count in report["status_counts"].items() if count)
    text = (f"Baked '{report['chain']}' over {report['frames']} frames: {counts}; "
            f"max error over lower bound {report['max_excess']:.3g}")
    if report["flip_frames"]:
        text += f"; plane flips at frames {', '.join(str(f['frame']) for f in report['flip_frames'][:5])}"
    return text + "."


class _PoseSnapshot:
    """Every pose bone's transform channels, to undo what frame changes did to unkeyed values."""

    PROPS = (("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
             ("scale", 3))
    ROTATIONS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")

    def __init__(self, obj):
        self.obj = obj
        bones = obj.pose.bones
        self.names = [b.name for b in bones]
        self.values = {}
        for prop, width in self.PROPS:
            values = np.empty(len(bones) * width, dtype=np.float32)
            bones.foreach_get(prop, values)
            self.values[prop] = values.reshape(-1, width)

    def restore(self, keep_rotation_of: set[str] = frozenset()) -> None:
        bones = self.obj.pose.bones
        keep = np.array([name in keep_rotation_of for name in self.names], dtype=bool)
        for prop, width in self.PROPS:
            values = self.values[prop].copy()
            if prop in self.ROTATIONS and keep.any():
                current = np.empty(len(bones) * width, dtype=np.float32)
                bones.foreach_get(prop, current)
                values[keep] = current.reshape(-1, width)[keep]
            bones.foreach_set(prop, values.ravel())


# --------------------------------------------------------------------------- the operator
class IK_SOLVERS_OT_bake(bpy.types.Operator):
    """Bake the IK chain over a frame range into rotation keys of its bones (Esc cancels)"""

    bl_idname = "ik_solvers.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start Frame", description="First frame to bake", min=0, max=1048574, default=1)
    frame_end: IntProperty(name="End Frame", description="Last frame to bake", min=0, max=1048574, default=250)
    step: IntProperty(
        name="Frame Step", description="Key every this many frames (the end frame is always keyed)",
        min=1, max=1000, default=1,
    )
    all_chains: BoolProperty(name="All Chains", description="Bake every enabled chain, in list order", default=False)
    chain: StringProperty(
        name="Chain", description="Name of the chain to bake; empty: the active chain (ignored with All Chains)",
        default="",
    )

    TIME_PER_TICK = 0.05
    """Seconds of work per modal timer tick: long enough to make progress, short enough for Esc."""

    @classmethod
    def poll(cls, context) -> bool:
        obj = posable_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        if not len(obj.ik_solvers.chains):
            cls.poll_message_set("The armature has no IK chain")
            return False
        return True

    def invoke(self, context, _event):
        scene = context.scene
        if scene.use_preview_range:
            self.frame_start, self.frame_end = scene.frame_preview_start, scene.frame_preview_end
        else:
            self.frame_start, self.frame_end = scene.frame_start, scene.frame_end
        return context.window_manager.invoke_props_dialog(self)

    def _bake_options(self, obj) -> BakeOptions:
        settings = obj.ik_solvers
        if self.all_chains:
            names = tuple(chain.name for chain in settings.chains if chain.enabled)
        elif self.chain:
            names = (self.chain,)
        else:
            active = settings.active_chain
            names = () if active is None else (active.name,)
        return BakeOptions(self.frame_start, self.frame_end, self.step, names)

    def execute(self, context):
        obj = posable_armature(context)
        try:
            self._job = BakeJob(context, obj, self._bake_options(obj))
        except BakeError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        wm = context.window_manager
        wm.progress_begin(0, self._job.total_steps)
        if self.options.is_invoke and context.window is not None and not bpy.app.background:
            self._timer = wm.event_timer_add(0.001, window=context.window)
            wm.modal_handler_add(self)
            return {"RUNNING_MODAL"}
        try:
            self._job.advance()
        except BakeError as error:
            return self._fail(context, str(error))
        except Exception:
            self._job.cancel()
            wm.progress_end()
            raise
        return self._done(context)

    def modal(self, context, event):
        if event.type == "ESC":
            self._job.cancel()
            self._end(context)
            self.report({"WARNING"}, "Bake cancelled; the action is as it was.")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            finished = self._job.advance(self.TIME_PER_TICK)
        except BakeError as error:
            return self._fail(context, str(error))
        except Exception:
            self._job.cancel()
            self._end(context)
            raise
        context.window_manager.progress_update(self._job.done_steps)
        return self._done(context) if finished else {"RUNNING_MODAL"}

    def cancel(self, context):
        """Blender ends the modal bake (file load, window closed): leave the action as it was."""
        self._job.cancel()
        self._end(context)

    def _end(self, context) -> None:
        wm = context.window_manager
        timer = getattr(self, "_timer", None)
        if timer is not None:
            wm.event_timer_remove(timer)
            self._timer = None
        wm.progress_end()

    def _fail(self, context, message: str):
        self._job.cancel()
        self._end(context)
        self.report({"ERROR"}, message)
        return {"CANCELLED"}

    def _done(self, context):
        reports = self._job.finish()
        self._end(context)
        for report in reports:
            self.report({"INFO"}, report_sentence(report))
        return {"FINISHED"}


classes = (IK_SOLVERS_OT_bake,)
