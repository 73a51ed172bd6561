"""Keys in bulk: keyframe I/O, the rotation channels' data paths, continuity with the key before a bake."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, cast

import bpy
import numpy as np

from . import compat
from .errors import IKSolversError

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


class RememberingAction(Protocol):
    """What :func:`key_rotations` needs of the bake's :class:`~.snapshots.ActionSnapshot` (which
    imports this module): the channel bag to key into, and a copy of each F-curve before its first change."""

    def channelbag(self) -> bpy.types.ActionChannelbag: ...

    def remember(self, channelbag: bpy.types.ActionChannelbag, data_path: str, index: int, group: str) -> None: ...


LINEAR = cast("bpy.types.EnumProperty", bpy.types.Keyframe.bl_rna.properties["interpolation"]).enum_items["LINEAR"].value


def read_keyframes(fcurve: bpy.types.FCurve) -> dict[str, np.ndarray]:
    """All keyframe data of ``fcurve``: per attribute an array ``(K,)`` or ``(K, 2)``."""
    points = fcurve.keyframe_points
    count = len(points)
    keys = {}
    for name, dtype, width in KEYFRAME_ATTRIBUTES:
        values = np.empty(count * width, dtype=dtype)
        points.foreach_get(name, values)
        keys[name] = values.reshape(count, width) if width > 1 else values
    return keys


def write_keyframes(fcurve: bpy.types.FCurve, keys: dict[str, np.ndarray]) -> None:
    """Replace all keys of ``fcurve`` by ``keys`` (as ``read_keyframes`` gives them), bit for bit.

    No ``fcurve.update()``: it would recompute the stored handles, and a restored curve must
    keep exactly the handles it had.
    """
    points = fcurve.keyframe_points
    points.clear()
    points.add(len(keys["co"]))
    for name, _dtype, _width in KEYFRAME_ATTRIBUTES:
        points.foreach_set(name, keys[name].ravel())


def key_coordinates(fcurve: bpy.types.FCurve) -> np.ndarray:
    """Frame and value of every key of ``fcurve``, ``(K, 2)`` float32 as Blender stores them."""
    points = fcurve.keyframe_points
    co = np.empty(2 * len(points), dtype=np.float32)
    points.foreach_get("co", co)
    return co.reshape(-1, 2)


def values_at_keys(fcurve: bpy.types.FCurve, frames: np.ndarray) -> np.ndarray | None:
    """``fcurve``'s values ``(N,)`` (float32) at ``frames (N,)`` read from its keys, or None unless
    every frame is a key's own frame of an unmodified curve.

    At a key's own frame Blender's evaluation is that key's value, whatever the interpolation and
    handles (tests/blender/test_bake.py checks it against ``FCurve.evaluate``), and one bulk
    read costs what a few ``evaluate`` calls do.
    """
    if len(fcurve.modifiers) or len(fcurve.keyframe_points) == 0:
        return None
    x, y = key_coordinates(fcurve).T
    if np.any(np.diff(x) <= 0.0):
        return None
    index = np.minimum(np.searchsorted(x, frames), len(x) - 1)
    return y[index] if np.array_equal(x[index], frames) else None


def stored_values(values: np.ndarray) -> np.ndarray:
    """Channel ``values`` (any shape) as a key stores them: float32, read back as float64.

    + 0.0 makes a -0.0 (a zero channel of a quaternion turned into the other hemisphere) +0.0: the
    same keys whichever way, and how often, a block was turned (:func:`_continue_kept_keys`).
    """
    return (np.asarray(values, dtype=np.float64) + 0.0).astype(np.float32).astype(np.float64)


CurveWriter = Callable[[bpy.types.FCurve, str, int], None]
"""Writes one rotation (or location) curve's keys in a block's range, ``(fcurve, bone, channel index)``,
keeping the others."""


def replace_keys_in_range(fcurve: bpy.types.FCurve, frames: np.ndarray, values: np.ndarray, start: float, end: float,
                          coordinates: np.ndarray | None = None) -> None:
    """Key ``values (N,)`` at ``frames (N,)`` with linear interpolation, dropping the curve's keys in
    ``[start, end]`` and keeping every key outside it with all its data. ``coordinates``: the
    curve's :func:`key_coordinates` when already read."""
    points = fcurve.keyframe_points
    x = (key_coordinates(fcurve) if coordinates is None else coordinates)[:, 0]
    before, after = x < start, x > end
    n_before, n_after, count = int(before.sum()), int(after.sum()), len(frames)
    old = read_keyframes(fcurve) if n_before or n_after else None
    points.clear()
    points.add(n_before + count + n_after)  # fresh keys carry Blender's defaults
    co = np.column_stack([frames, stored_values(values)]).astype(np.float32)
    linear = np.full(count, LINEAR, dtype=np.int32)
    if n_before == n_after == 0:
        points.foreach_set("co", co.ravel())
        points.foreach_set("interpolation", linear)
        # Sorted, unique, linear keys need no fcurve.update() (as bpy_extras.anim_utils' bake notes): their
        # handles stay Blender's defaults until some update computes them, and no segment reads them.
        return
    new = slice(n_before, n_before + count)
    probe = points[n_before]
    assert old is not None  # read above: there are kept keys
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


def _stored_value(keyframe: bpy.types.Keyframe, name: str) -> int | float | bool | tuple[float, ...]:
    """A keyframe attribute as ``foreach_get`` gives it (enum identifiers as their integer values)."""
    value = getattr(keyframe, name)
    if isinstance(value, str):
        return cast("bpy.types.EnumProperty", bpy.types.Keyframe.bl_rna.properties[name]).enum_items[value].value
    return tuple(value) if not isinstance(value, (bool, int, float)) else value



def rotation_data_path(pose_bone: bpy.types.PoseBone) -> str:
    """The F-curve data path of ``pose_bone``'s rotation channel in its rotation mode."""
    mode = pose_bone.rotation_mode
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
    return pose_bone.path_from_id(prop)


REST_CHANNELS = {"QUATERNION": (1.0, 0.0, 0.0, 0.0), "AXIS_ANGLE": (0.0, 0.0, 1.0, 0.0)}
"""Rotation mode → the channel values of no rotation as Blender starts them (any Euler order: zeros)."""


def _rotation_fcurves(channelbag: bpy.types.ActionChannelbag | None, pose_bone: bpy.types.PoseBone,
                      ) -> tuple[str, list[bpy.types.FCurve | None]]:
    path = rotation_data_path(pose_bone)
    width = 4 if pose_bone.rotation_mode in REST_CHANNELS else 3
    return path, [None if channelbag is None else channelbag.fcurves.find(path, index=i) for i in range(width)]


def _last_keys_before(fcurves: Sequence[bpy.types.FCurve | None], start: float) -> np.ndarray | None:
    """Values ``(k,)`` of each curve's last key before ``start``; None unless every channel has one."""
    kept = []
    for fcurve in fcurves:
        keys = np.empty((0, 2), dtype=np.float32) if fcurve is None else key_coordinates(fcurve)
        before = np.flatnonzero(keys[:, 0] < start)
        if before.size == 0:
            return None
        kept.append(float(keys[before[-1], 1]))
    return np.array(kept)


def _whole_turns(reference: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per channel the whole turns (radians, ``(k,)``) that bring ``values`` nearest ``reference``."""
    return 2.0 * math.pi * np.round((np.asarray(reference) - values) / (2.0 * math.pi))


def bake_seeds(action: RememberingAction, obj: bpy.types.Object, bones: Sequence[str], start: float,
               ) -> dict[str, np.ndarray]:
    """Per bone the channel values ``(k,)`` a block baked from ``start`` continues from: the curves' last
    key before ``start`` where every channel has one, else no rotation (:data:`REST_CHANNELS`).

    Never the bone's current value: at the current frame that is whatever keys an earlier bake (or an
    earlier part of this range) left there, and the block's hemisphere or turns would follow it (issue 22).
    """
    channelbag = action.channelbag()
    assert obj.pose is not None  # the bones are of this armature's chain
    seeds = {}
    for bone in bones:
        pose_bone = obj.pose.bones[bone]
        kept = _last_keys_before(_rotation_fcurves(channelbag, pose_bone)[1], start)
        rest = REST_CHANNELS.get(pose_bone.rotation_mode, (0.0, 0.0, 0.0))
        seeds[bone] = np.array(rest, dtype=float) if kept is None else kept
    return seeds


def _euler_other_solution(order: str) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, offset)`` ``(3,)`` each: ``angles * scale + offset`` is the other Euler solution of the same
    rotation (``euler.euler_solutions``: the first and last angle turned by π, the middle one π − b)."""
    middle = "XYZ".index(order[1])
    scale, offset = np.ones(3), np.full(3, math.pi)
    scale[middle] = -1.0
    return scale, offset


def _tail_turn(mode: str, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, offset)`` ``(k,)`` that carry the kept keys after a block, as a whole, to the same rotations
    written nearest the block's last key ``last``, from the first of them ``first``: a quaternion into
    its hemisphere; Euler angles into the nearer of their two solutions, by whole turns."""
    if mode == "QUATERNION":
        sign = -1.0 if float(first @ last) < 0.0 else 1.0
        return np.full(4, sign), np.zeros(4)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for scale, offset in ((np.ones(3), np.zeros(3)), _euler_other_solution(mode)):
        moved = first * scale + offset
        offset = offset + _whole_turns(last, moved)
        distance = float(np.abs(first * scale + offset - last).sum())
        if best is None or distance < best[0]:
            best = (distance, scale, offset)
    assert best is not None  # two candidates
    return best[1], best[2]


def _continue_kept_keys(fcurves: list[bpy.types.FCurve], mode: str, end: float, last: np.ndarray) -> None:
    """Turn the keys kept after ``end`` as a whole so they continue the block's last key ``last (k,)``
    (:func:`_tail_turn`; handles alike, so every frame after the first kept key evaluates to the same
    rotation as before). Without it a part baked before the part ahead of it would keep the hemisphere,
    turns or Euler solution of the key it started from (issue 22). Axis-angle keys are left as they are.
    """
    if mode == "AXIS_ANGLE":
        return
    tails = []
    for fcurve in fcurves:
        coordinates = key_coordinates(fcurve)  # the keys' other properties only where they are turned
        after = coordinates[:, 0] > end
        if not after.any():
            return
        tails.append((fcurve, after, float(coordinates[np.argmax(after), 1])))
    first = np.array([value for _, _, value in tails])
    scales, offsets = _tail_turn(mode, first, np.asarray(last, dtype=float))
    for (fcurve, after, _), scale, offset in zip(tails, scales.tolist(), offsets.tolist()):
        if scale == 1.0 and offset == 0.0:
            continue
        keys = read_keyframes(fcurve)
        for name in ("co", "handle_left", "handle_right"):
            keys[name][after, 1] = (keys[name][after, 1].astype(np.float64) * scale + offset).astype(np.float32)
        write_keyframes(fcurve, keys)
        fcurve.update()  # the handles of the first kept key, which face the block's last key


def assigned_fcurves(id_data: bpy.types.ID | None) -> list[bpy.types.FCurve]:
    """The F-curves of the action slot assigned to ``id_data`` (empty without animation)."""
    anim_data = getattr(id_data, "animation_data", None)
    channelbag = compat.channelbag_for_assigned_slot(anim_data)
    return [] if channelbag is None else list(channelbag.fcurves)


def action_frames(obj: bpy.types.Object, frames: np.ndarray) -> np.ndarray:
    """The times ``(N,)`` in ``obj``'s action at which keys show at the scene ``frames (N,)``.

    The frames themselves, except in NLA tweak mode: there the action plays through the tweaked
    strip (its offset, scale, repeat, reversal), and each frame is mapped back through it as Blender
    maps a key inserted in tweak mode (``AnimData.nla_tweak_strip_time_to_scene``). IKSolversError
    for a strip of the action that repeats (Blender's evaluation of the later repeats does not
    follow that mapping), and when the mapped times do not rise with the frames or do not map back
    to them (a reversed strip): one key would land on another's time, or out of order.
    """
    frames = np.asarray(frames, dtype=np.float64)
    anim_data = obj.animation_data
    if anim_data is None or not anim_data.use_tweak_mode:
        return frames
    repeated = [strip.name for track in anim_data.nla_tracks for strip in track.strips
                if strip.action == anim_data.action and strip.repeat != 1.0]
    if repeated:  # a repeat plays the same keys at several frames: Blender's evaluation there is not one-to-one
        raise IKSolversError(f"In NLA tweak mode the tweaked action plays in the repeated strip '{repeated[0]}'; "
                             "set its Repeat to 1 or leave tweak mode to bake.")
    to_scene = anim_data.nla_tweak_strip_time_to_scene
    times = np.array([to_scene(frame, invert=True) for frame in frames.tolist()], dtype=np.float64)
    back = np.array([to_scene(time) for time in times.tolist()], dtype=np.float64)
    if np.any(np.diff(times) <= 0.0) or not np.allclose(back, frames, rtol=0.0, atol=1e-3):
        raise IKSolversError(
            f"In NLA tweak mode, frames {int(frames[0])}-{int(frames[-1])} do not map one to one into the tweaked "
            "strip's action (a reversed or repeated strip); bake a range the strip plays once, forward, or leave "
            "tweak mode.")
    return times


def key_rotations(action: RememberingAction, obj: bpy.types.Object, values: dict[str, np.ndarray], frames: np.ndarray,
                  start: float, end: float, write: CurveWriter | None = None) -> None:
    """Key rotation-channel ``values`` (bone → ``(N, k)``) at ``frames (N,)`` into ``obj``'s action.

    ``action`` is the bake's :class:`~.snapshots.ActionSnapshot`: it gives the channel bag and
    remembers each F-curve before its first change. Keys inside ``[start, end]`` are replaced, the
    others kept; ``values`` continue the key before ``start`` (:func:`bake_seeds`), and the keys kept
    after ``end`` are turned to continue the block (:func:`_continue_kept_keys`). ``write``: how each
    curve's keys in the range are written (default: a linear key per frame, :func:`replace_keys_in_range`;
    a reduced bake writes its Bézier keys instead, which keep the block's first and last value).
    """
    channelbag = action.channelbag()
    frames = np.asarray(frames, dtype=np.float64)
    assert obj.pose is not None  # the values are of the bones of this armature's chain
    for bone, channel in values.items():
        pose_bone = obj.pose.bones[bone]
        _key_channel(action, channelbag, bone, rotation_data_path(pose_bone), pose_bone.rotation_mode, channel,
                     frames, start, end, write)


def key_locations(action: RememberingAction, obj: bpy.types.Object, values: dict[str, np.ndarray],
                  frames: np.ndarray, start: float, end: float, write: CurveWriter | None = None) -> None:
    """:func:`key_rotations` for location channels (bone → ``(N, 3)``), as keyed in the bone's
    ``location`` (a body root's); ``write`` as there."""
    channelbag = action.channelbag()
    frames = np.asarray(frames, dtype=np.float64)
    assert obj.pose is not None  # the values are of the bones of this armature
    for bone, channel in values.items():
        _key_channel(action, channelbag, bone, obj.pose.bones[bone].path_from_id("location"), "LOCATION", channel,
                     frames, start, end, write)


def _key_channel(action: RememberingAction, channelbag: bpy.types.ActionChannelbag, bone: str, path: str, mode: str,
                 channel: np.ndarray, frames: np.ndarray, start: float, end: float,
                 write: CurveWriter | None = None) -> None:
    """Key one bone's channel ``(N, k)`` at ``path``, remembered first; a rotation's (``mode`` its rotation
    mode; ``'LOCATION'``: a location, as it is) kept keys after ``end`` turned to continue the block."""
    width = channel.shape[1]
    for index in range(width):
        action.remember(channelbag, path, index, bone)
    written = []
    for index in range(width):
        fcurve = channelbag.fcurves.find(path, index=index)
        if fcurve is None:
            fcurve = compat.new_fcurve(channelbag, path, index, bone)
        if write is None:
            replace_keys_in_range(fcurve, frames, channel[:, index], start, end)
        else:
            write(fcurve, bone, index)
        written.append(fcurve)
    if mode != "LOCATION":
        _continue_kept_keys(written, mode, end, channel[-1])
