"""Rig scenes shared by the Blender comparison scripts (bench_bake.py, compare_native.py): build an
armature from bone specs, key a target at every frame, bake a pose with Blender's own ``nla.bake``.

Import ``bpy`` the way the calling script needs (user folders, add-on) before calling these.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np


def build_armature(bones: Sequence[dict], name: str = "Rig"):
    """An armature object from ``{name, head, tail, parent?, connect?}`` dicts (a bone with a parent
    is connected to it unless ``connect`` is False); linked to the scene, active, selected, object mode."""
    import bpy

    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for spec in bones:
        bone = data.edit_bones.new(spec["name"])
        bone.head, bone.tail = tuple(spec["head"]), tuple(spec["tail"])
        if spec.get("parent"):
            bone.parent = data.edit_bones[spec["parent"]]
            bone.use_connect = spec.get("connect", True)
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def key_location_every_frame(obj, positions: np.ndarray) -> None:
    """Linear location keys on ``obj`` at frames 1..N for ``positions`` ``(N, 3)``, written in bulk."""
    key_path(obj, positions, frame_start=1)


def key_path(obj, positions: np.ndarray, frame_start: int = 1) -> None:
    """Linear location keys on ``obj`` at frames ``frame_start …`` for ``positions (N, 3)``, in bulk
    (slotted action, ``keyframe_points.add`` + ``foreach_set``)."""
    import bpy

    from ik_solvers.blender import compat

    obj.animation_data_create()
    action = bpy.data.actions.new(f"{obj.name}Path")
    obj.animation_data.action = action
    slot = action.slots.new(obj.id_type, obj.name)
    obj.animation_data.action_slot = slot
    channelbag = compat.ensure_channelbag(action, slot)
    n = len(positions)
    frames = np.arange(frame_start, frame_start + n, dtype=np.float64)
    interpolation = bpy.types.Keyframe.bl_rna.properties["interpolation"]
    assert isinstance(interpolation, bpy.types.EnumProperty)
    linear = interpolation.enum_items["LINEAR"].value
    for axis in range(3):
        fcurve = channelbag.fcurves.new("location", index=axis)
        fcurve.keyframe_points.add(n)
        co = np.column_stack([frames, positions[:, axis]]).astype(np.float32)
        fcurve.keyframe_points.foreach_set("co", co.ravel())
        fcurve.keyframe_points.foreach_set("interpolation", np.full(n, linear, np.int32))
        fcurve.update()


def nla_bake_pose(obj, frames: int, clear_constraints: bool) -> float:
    """Blender's own bake of every pose bone of ``obj`` over frames 1..``frames`` (``nla.bake`` with
    visual keying); returns the seconds the operator took. Leaves ``obj`` active in object mode."""
    import bpy

    from ik_solvers.blender import compat

    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in obj.pose.bones:
        compat.select_pose_bone(pose_bone)
    started = time.perf_counter()
    result = bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=True, visual_keying=True,
                              clear_constraints=clear_constraints, bake_types={"POSE"})
    seconds = time.perf_counter() - started
    bpy.ops.object.mode_set(mode="OBJECT")
    assert result == {"FINISHED"}, result
    return seconds
