"""What differs between the Blender versions the add-on supports (4.4, 4.5, 5.0+), in one place.

All have slotted actions (F-curves in channel bags); 4.4 / 4.5 lack 5.0's ``bpy_extras.anim_utils``
helpers and 5.0's ``ActionChannelbagFCurves`` arguments. Each function takes Blender's own path
where it exists (feature detection, not version numbers), else does the same with the 4.4 API.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import cast

import bpy
import numpy as np
from bpy_extras import anim_utils

_FCURVES_API = cast("bpy.types.Struct", bpy.types.ActionChannelbagFCurves.bl_rna).functions  # the stub types bl_rna as BlenderRNA
HAS_NEW_FROM_FCURVE = "new_from_fcurve" in _FCURVES_API  # 5.0+
HAS_NEW_GROUP_NAME = "group_name" in _FCURVES_API["new"].parameters  # 5.0+
FCURVE_SETTINGS = ("extrapolation", "color_mode", "color", "select", "lock", "mute", "hide", "auto_smoothing")
"""What ``new_from_fcurve`` copies besides keys and modifiers."""


def channelbag_for_assigned_slot(anim_data: bpy.types.AnimData | None) -> bpy.types.ActionChannelbag | None:
    """The channel bag of ``anim_data``'s action and slot; None if either (or the bag) is missing.

    5.0+: ``anim_utils.animdata_get_channelbag_for_assigned_slot``. 4.4 / 4.5 lack it (and 4.4's
    ``action_get_channelbag_for_slot`` does not accept None): the same look-up, guarded.
    """
    helper = getattr(anim_utils, "animdata_get_channelbag_for_assigned_slot", None)
    if helper is not None:
        return helper(anim_data)
    if anim_data is None or anim_data.action is None or anim_data.action_slot is None:
        return None
    return anim_utils.action_get_channelbag_for_slot(anim_data.action, anim_data.action_slot)  # type: ignore[func-returns-value]  # stub: returns None


def first_suitable_slot(action: bpy.types.Action, id_type: str) -> bpy.types.ActionSlot | None:
    """The first slot of ``action`` for ``id_type`` (or unspecified), else None.

    5.0+: ``anim_utils.action_get_first_suitable_slot``; 4.4 / 4.5: the same loop.
    """
    helper = getattr(anim_utils, "action_get_first_suitable_slot", None)
    if helper is not None:
        return helper(action, id_type)
    return next((s for s in action.slots if s.target_id_type in ("UNSPECIFIED", id_type)), None)


def ensure_channelbag(action: bpy.types.Action, slot: bpy.types.ActionSlot) -> bpy.types.ActionChannelbag:
    """The channel bag for ``slot`` in the action's first layer and strip, creating any of them.

    5.0+: ``anim_utils.action_ensure_channelbag_for_slot``; 4.4 / 4.5 have it only as the private
    ``_ensure_channelbag_exists``: the same steps with the public API.
    """
    helper = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    if helper is not None:
        return helper(action, slot)
    layer = action.layers[0] if len(action.layers) else action.layers.new("Layer")
    strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type="KEYFRAME")
    return cast("bpy.types.ActionKeyframeStrip", strip).channelbag(slot, ensure=True)  # 4.4–5.0 have keyframe strips only


def copy_fcurve(channelbag: bpy.types.ActionChannelbag, fcurve: bpy.types.FCurve, data_path: str,
                ) -> bpy.types.FCurve:
    """A copy of ``fcurve`` in ``channelbag`` under ``data_path``, same array index, in no group.

    5.0+: ``fcurves.new_from_fcurve`` (keys, ``FCURVE_SETTINGS``, modifiers). 4.4 / 4.5 lack it: a
    new F-curve with every keyframe attribute copied bit for bit and ``FCURVE_SETTINGS``; no modifiers.
    """
    if HAS_NEW_FROM_FCURVE:
        return channelbag.fcurves.new_from_fcurve(fcurve, data_path=data_path)
    copy = channelbag.fcurves.new(data_path, index=fcurve.array_index)
    for name in FCURVE_SETTINGS:
        setattr(copy, name, getattr(fcurve, name))
    source, target = fcurve.keyframe_points, copy.keyframe_points
    target.add(len(source))
    for prop in bpy.types.Keyframe.bl_rna.properties:
        if prop.is_readonly or prop.identifier == "co_ui":  # co_ui mirrors co
            continue
        dtype = {"FLOAT": np.float32, "BOOLEAN": bool}.get(prop.type, np.int32)  # INT, ENUM: int32
        values = np.empty(len(source) * max(getattr(prop, "array_length", 1), 1), dtype=dtype)
        source.foreach_get(prop.identifier, values)
        target.foreach_set(prop.identifier, values)
    return copy


def new_fcurve(channelbag: bpy.types.ActionChannelbag, data_path: str, index: int, group_name: str,
               ) -> bpy.types.FCurve:
    """A new F-curve in ``channelbag`` in the group ``group_name``, created if missing.

    5.0+: ``fcurves.new(..., group_name=)``; 4.4 / 4.5 lack the argument: ``fcurve.group = …``.
    """
    if HAS_NEW_GROUP_NAME:
        return channelbag.fcurves.new(data_path, index=index, group_name=group_name)
    fcurve = channelbag.fcurves.new(data_path, index=index)
    fcurve.group = channelbag.groups.get(group_name) or channelbag.groups.new(group_name)
    return fcurve


def select_pose_bone(pose_bone: bpy.types.PoseBone, select: bool = True) -> None:
    """Select or deselect a pose bone: 5.0+ keeps selection on the pose bone, 4.4 / 4.5 on its bone."""
    (pose_bone if "select" in bpy.types.PoseBone.bl_rna.properties else pose_bone.bone).select = select  # type: ignore[union-attr]  # Bone.select: 4.4 / 4.5 only, not in the 5.0 stubs


def unregister_at_exit(unregister: Callable[[], None]) -> None:
    """Call ``unregister`` (the add-on's, ``ik_solvers.unregister``) at Python's exit if the add-on is
    still registered then (repeat calls are harmless).

    For scripts running Blender as the ``bpy`` module: Blender shuts down when the ``bpy`` module
    object is freed, and registered classes or handlers keep it alive; bpy 4.5 then hangs at exit
    (a static destructor waits on a condition variable a bpy worker thread waits on). 4.4 and 5.0 exit.
    The caller passes ``unregister``: the package's registration imports this module, not the other way.
    """
    atexit.register(_unregister_if_registered, unregister)


def _unregister_if_registered(unregister: Callable[[], None]) -> None:
    if hasattr(bpy.types.Object, "ik_solvers"):
        unregister()
