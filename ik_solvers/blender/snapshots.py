"""Snapshots that put things back exactly: one of an object's action, one of an armature's pose."""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np

from . import compat
from .keyframes import read_keyframes, write_keyframes


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
    _backup_channelbag: bpy.types.ActionChannelbag | None = None
    _seen: set[tuple[str, int]] = field(default_factory=set)

    def channelbag(self) -> bpy.types.ActionChannelbag:
        """The channel bag of the object's assigned action slot, creating action / slot / bag as needed.

        An existing action is always reused: a bake never leaves an extra Action behind.
        """
        obj = self.obj
        if obj.animation_data is None:
            obj.animation_data_create()
            self.created_animation_data = True
        anim_data = obj.animation_data
        assert anim_data is not None  # created just above if it was missing
        if anim_data.action is None:
            self.created_action = bpy.data.actions.new(f"{obj.name}Action")
            anim_data.action = self.created_action
        action = anim_data.action
        if anim_data.action_slot is None:
            slot = compat.first_suitable_slot(action, obj.id_type)
            if slot is None:
                slot = self.created_slot = action.slots.new(obj.id_type, obj.name)
            anim_data.action_slot = slot
            self.assigned_slot = True
        return compat.ensure_channelbag(action, anim_data.action_slot)

    def remember(self, channelbag: bpy.types.ActionChannelbag, data_path: str, index: int, group: str) -> None:
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
                self._backup_channelbag = compat.ensure_channelbag(self.backup, slot)
            backup = str(len(self.channels))
            assert self._backup_channelbag is not None  # made with the backup action
            compat.copy_fcurve(self._backup_channelbag, fcurve, backup)
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
        channelbag = compat.channelbag_for_assigned_slot(anim_data)
        if channelbag is not None:
            for snapshot in reversed(self.channels):
                fcurve = channelbag.fcurves.find(snapshot.data_path, index=snapshot.index)
                if snapshot.backup is None:
                    if fcurve is not None:
                        channelbag.fcurves.remove(fcurve)
                elif fcurve is not None:
                    assert self._backup_channelbag is not None  # it holds this channel's backup
                    write_keyframes(fcurve, read_keyframes(self._backup_channelbag.fcurves.find(snapshot.backup, index=snapshot.index)))
            for name in self.created_groups:
                group = channelbag.groups.get(name)
                if group is not None and len(group.channels) == 0:
                    channelbag.groups.remove(group)
        if anim_data is not None:
            if self.assigned_slot:
                anim_data.action_slot = None
            if self.created_slot is not None:
                assert anim_data.action is not None  # the slot was created in the assigned action
                anim_data.action.slots.remove(self.created_slot)
            if self.created_action is not None:
                anim_data.action = None
                bpy.data.actions.remove(self.created_action)
            if self.created_animation_data:
                obj.animation_data_clear()
        if obj.animation_data is not None and obj.animation_data.action is not None:
            obj.animation_data.action.update_tag()
        self.release()



class PoseSnapshot:
    """Every pose bone's transform channels (float32 as stored), put back bit for bit by :meth:`restore`.

    The solve operator restores it when a chain fails; a bake when it ends, to undo what frame
    changes did to unkeyed values.
    """

    PROPS = (("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
             ("scale", 3))
    ROTATIONS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")

    def __init__(self, obj: bpy.types.Object) -> None:
        self.obj = obj
        assert obj.pose is not None  # the solve's or the bake's armature
        bones = obj.pose.bones
        self.names = [b.name for b in bones]
        self.values: dict[str, np.ndarray] = {}
        for prop, width in self.PROPS:
            values = np.empty(len(bones) * width, dtype=np.float32)
            bones.foreach_get(prop, values)
            self.values[prop] = values.reshape(-1, width)

    def restore(self, keep_rotation_of: frozenset[str] | set[str] = frozenset(),
                keep_location_of: frozenset[str] | set[str] = frozenset()) -> None:
        """Put every channel back, except the rotations of the bones in ``keep_rotation_of`` and the
        locations of those in ``keep_location_of`` (a body bake's root)."""
        assert self.obj.pose is not None  # it had one when the snapshot was taken
        bones = self.obj.pose.bones
        keep_rotation = np.array([name in keep_rotation_of for name in self.names], dtype=bool)
        keep_location = np.array([name in keep_location_of for name in self.names], dtype=bool)
        for prop, width in self.PROPS:
            values = self.values[prop].copy()
            keep = keep_rotation if prop in self.ROTATIONS else keep_location if prop == "location" else None
            if keep is not None and keep.any():
                current = np.empty(len(bones) * width, dtype=np.float32)
                bones.foreach_get(prop, current)
                values[keep] = current.reshape(-1, width)[keep]
            bones.foreach_set(prop, values.ravel())
