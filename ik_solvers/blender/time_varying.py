"""What can change a chain's surroundings from frame to frame (issue 21: driven rigs).

A driver or a constraint does not by itself make the chain's root frame, its geometry or Blender's
evaluation of the baked keys differ between frames: the rig Rigify generates has hundreds of them,
all reading custom properties and bones that nothing animates. What does change over time is
animation (actions, NLA), the frame itself (a driver's ``frame``, a path to a scene's frame),
simulations and caches (rigid bodies, time-based constraints and modifiers), and the chain's own
keys. :class:`TimeVariance` finds, for one chain, the drivers and constraints that read any of
those (directly or through other objects and bones); only they make sampling and the after-bake
check evaluate frame by frame (``sampling.fcurve_sampling_blockers``). Where nothing does, the
chain's surroundings are the same at every frame: read once, with the keys alone moving the chain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import bpy

from .checks import constraint_targets, path_dependency, pose_bone_of_path, variable_target_base

if TYPE_CHECKING:
    from .rig_chain import RigChain

TIME_CONSTRAINTS = frozenset({"TRANSFORM_CACHE", "CAMERA_SOLVER", "OBJECT_SOLVER", "FOLLOW_TRACK"})
"""Constraints whose result follows the frame without any animation."""

TIME_MODIFIERS = frozenset({"CLOTH", "SOFT_BODY", "MESH_CACHE", "MESH_SEQUENCE_CACHE", "OCEAN", "WAVE", "EXPLODE",
                            "FLUID", "DYNAMIC_PAINT", "PARTICLE_SYSTEM", "NODES", "COLLISION"})
"""Modifiers that may follow the frame (simulations, caches, time inputs) without any animation."""

_FRAME = re.compile(r"\bframe\b")


def _animated(id_data: bpy.types.ID | None) -> bool:
    anim_data = getattr(id_data, "animation_data", None)
    if anim_data is None:
        return False
    return anim_data.action is not None or bool(len(anim_data.nla_tracks)) or anim_data.use_tweak_mode


class TimeVariance:
    """For the chain ``rig`` of the armature ``obj``: which drivers and constraints may give another
    result at another frame. Built once per chain and bake; every answer is kept."""

    def __init__(self, obj: bpy.types.Object, rig: RigChain, animated_bones: Iterable[str] = ()) -> None:
        """``animated_bones``: bones of ``obj`` whose channels its action keys (they move too)."""
        self.obj = obj
        self._animated_bones = set(animated_bones)
        self._objects: dict[str, bool] = {}
        self._moving: set[str] | None = None
        self._upstream: set[str] | None = None
        self._start, self._tip = rig.bone_names[0], rig.bone_names[-1]

    # ------------------------------------------------------------------ bones of the armature
    def moving_bones(self) -> set[str]:
        """Bones of the armature whose pose may differ between frames: the chain's bones and those
        below them (the keys move them), the animated bones, and every bone following one of
        those, or a changing object, through its parent or a constraint."""
        if self._moving is not None:
            return self._moving
        obj = self.obj
        assert obj.pose is not None  # the chain was read from this armature's pose
        dependents: dict[str, list[str]] = {}
        moving = set(self._animated_bones)
        below = [cast("bpy.types.Armature", obj.data).bones[self._start]]
        while below:  # the start bone and every bone below it (Bone.children_recursive is slow in Python)
            bone = below.pop()
            moving.add(bone.name)
            below += bone.children
        for pose_bone in obj.pose.bones:
            if pose_bone.parent is not None:
                dependents.setdefault(pose_bone.parent.name, []).append(pose_bone.name)
            for constraint in pose_bone.constraints:
                if constraint.mute or constraint.influence == 0.0:
                    continue
                if constraint.type in TIME_CONSTRAINTS:
                    moving.add(pose_bone.name)
                for target, subtarget in constraint_targets(constraint):
                    if target == obj:
                        if subtarget:
                            dependents.setdefault(subtarget, []).append(pose_bone.name)
                    elif self.object_varies(target):
                        moving.add(pose_bone.name)
        todo = list(moving)
        while todo:
            for dependent in dependents.get(todo.pop(), ()):
                if dependent not in moving:
                    moving.add(dependent)
                    todo.append(dependent)
        self._moving = moving
        return moving

    def upstream_bones(self) -> set[str]:
        """Bones whose pose can reach the chain: the chain's bones and their parents, and every bone
        a constraint of one of those follows, with its parents, and so on."""
        if self._upstream is not None:
            return self._upstream
        obj = self.obj
        assert obj.pose is not None  # the chain was read from this armature's pose
        upstream: set[str] = set()
        todo = [self._tip]
        while todo:
            pose_bone = obj.pose.bones.get(todo.pop())
            while pose_bone is not None and pose_bone.name not in upstream:
                upstream.add(pose_bone.name)
                for constraint in pose_bone.constraints:
                    todo += [subtarget for target, subtarget in constraint_targets(constraint)
                             if target == obj and subtarget]
                pose_bone = pose_bone.parent
        self._upstream = upstream
        return upstream

    def drives_the_chain(self, path: str, bones_prefix: str) -> bool:
        """Whether a driver of ``path`` (on the armature, whose bones' paths start with
        ``bones_prefix``: ``pose.bones[`` or, on its data, ``bones[``) can move the chain: anything
        but a property of a bone that cannot reach the chain (:meth:`upstream_bones`)."""
        if not path.startswith(bones_prefix):
            return True
        bone = pose_bone_of_path("pose." + path if bones_prefix == "bones[" else path)
        return bone is None or bone in self.upstream_bones()  # None: a custom property, anything may read it

    # ------------------------------------------------------------------ drivers
    def driver_reason(self, fcurve: bpy.types.FCurve) -> str | None:
        """Why the driver ``fcurve`` may give another value at another frame (None: it cannot)."""
        driver = fcurve.driver
        if driver is None:
            return None
        if driver.use_self:
            return "reads its own owner"
        if driver.type == "SCRIPTED" and _FRAME.search(driver.expression):
            return "reads the frame"
        for variable in driver.variables:
            for target in variable.targets:
                reason = self._variable_reason(variable.type, target)
                if reason is not None:
                    return reason
        return None

    def _variable_reason(self, variable_type: str, target: bpy.types.DriverTarget) -> str | None:
        obj = self.obj
        if variable_type not in {"SINGLE_PROP", "CONTEXT_PROP"}:
            other = target.id
            if other == obj:
                bone = target.bone_target
                return f"reads bone '{bone}', which moves" if bone and bone in self.moving_bones() else None
            return f"reads '{other.name}', which changes" if isinstance(other, bpy.types.Object) and \
                self.object_varies(other) else None
        path = target.data_path
        if "frame" in path:
            return "reads the frame"
        base = variable_target_base(target, variable_type)
        if base == obj:  # the common case, read without resolving the path
            read = pose_bone_of_path(path)  # None: the armature's or a bone's custom property, keyed only by its action
            return f"reads bone '{read}', which moves" if read is not None and read in self.moving_bones() else None
        found = path_dependency(base, path)
        if found is None:
            return f"reads {path}, which is animated" if isinstance(base, bpy.types.ID) and _animated(base) else None
        other, bone = found
        if other == obj:
            return f"reads bone '{bone}', which moves" if bone and bone in self.moving_bones() else None
        return f"reads '{other.name}', which changes" if self.object_varies(other) else None

    # ------------------------------------------------------------------ other objects
    def object_varies(self, other: bpy.types.Object) -> bool:
        """Whether ``other`` (not the chain's armature) may move or change shape between frames."""
        known = self._objects.get(other.name_full)
        if known is not None:
            return known
        self._objects[other.name_full] = False  # a cycle among objects adds nothing
        varies = (_animated(other) or other.rigid_body is not None or _animated(other.data)
                  or _animated(getattr(other.data, "shape_keys", None)) or self.relations_vary(other)
                  or any(self.drivers_reasons(id_data) for id_data in (other, other.data,
                                                                       getattr(other.data, "shape_keys", None))))
        self._objects[other.name_full] = varies
        return varies

    def drivers_reasons(self, id_data: bpy.types.ID | None, bones_prefix: str = "") -> list[tuple[str, str]]:
        """(driven path, why) for every driver of ``id_data`` that may change between frames; with
        ``bones_prefix`` (``id_data`` is the armature or its data) only those that can move the chain."""
        anim_data = getattr(id_data, "animation_data", None)
        found = []
        for fcurve in () if anim_data is None else anim_data.drivers:
            if bones_prefix and not self.drives_the_chain(fcurve.data_path, bones_prefix):
                continue
            reason = self.driver_reason(fcurve)
            if reason is not None:
                found.append((fcurve.data_path, reason))
        return found

    def relations_vary(self, other: bpy.types.Object) -> bool:
        """Whether the parent, constraints or modifiers of ``other`` follow anything that changes."""
        obj = self.obj
        parent = other.parent
        if parent is not None:
            if parent == obj:
                if other.parent_type != "BONE" or other.parent_bone in self.moving_bones():
                    return True
            elif self.object_varies(parent):
                return True
        if self._constraints_vary(other, other.constraints):
            return True
        pose = other.pose if other.type == "ARMATURE" and other != obj else None
        if pose is not None and any(self._constraints_vary(other, bone.constraints) for bone in pose.bones):
            return True  # another armature: its bones may move what hangs from them
        for modifier in getattr(other, "modifiers", ()):
            if modifier.type in TIME_MODIFIERS or (modifier.type == "ARMATURE" and modifier.object == obj):
                return True
            linked = getattr(modifier, "object", None)
            if isinstance(linked, bpy.types.Object) and linked != obj and self.object_varies(linked):
                return True
        return False

    def _constraints_vary(self, owner: bpy.types.Object, constraints: Iterable[bpy.types.Constraint]) -> bool:
        """Whether any of ``constraints`` (of ``owner`` or one of its bones) follows something that changes."""
        obj = self.obj
        for constraint in constraints:
            if constraint.mute or constraint.influence == 0.0:
                continue
            if constraint.type in TIME_CONSTRAINTS:
                return True
            for target, subtarget in constraint_targets(constraint):
                if target == obj:
                    if owner != obj and (not subtarget or subtarget in self.moving_bones()):
                        return True
                elif target != owner and self.object_varies(target):
                    return True
        return False
