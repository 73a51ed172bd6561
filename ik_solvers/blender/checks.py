"""Checks of a rig before anything is posed or keyed (issue 10): an armature whose pose and
animation we may change and save, Limit Rotation constraints on chain bones (honoured as joint
limits where that is exact, else refused), and targets that depend on the chain (a cycle)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from .errors import IKSolversError

if TYPE_CHECKING:
    import bpy

    from .rig_chain import RigChain

OVERRIDE_HINT = "make a library override first (Object > Library Override > Make)"


def check_editable(obj: bpy.types.Object | None) -> None:
    """IKSolversError unless ``obj``'s pose and animation can be changed and saved.

    A linked armature (from a library, not overridden) can be posed in memory, but nothing written
    to it is saved: keys would vanish with the file. A library override can be baked.
    """
    if obj is None:
        return
    if obj.library is not None or not obj.is_editable:
        library = f" from '{obj.library.filepath}'" if obj.library is not None else ""
        raise IKSolversError(f"Armature '{obj.name}' is linked{library} and cannot be changed; {OVERRIDE_HINT}.")


def bakeable_armature(obj: bpy.types.Object | None) -> bool:
    """True for an armature whose pose and keys can be written and saved (what a batch may offer)."""
    if obj is None or obj.type != "ARMATURE":
        return False
    try:
        check_editable(obj)
    except IKSolversError:
        return False
    return True


# --------------------------------------------------------------------------- constraints
_AXES = "xyz"


def _active(constraint: bpy.types.Constraint) -> bool:
    return not constraint.mute and constraint.influence > 0.0


def rotation_constraint_limits(pose_bone: bpy.types.PoseBone, free: list[int]) -> dict[int, tuple[float, float]]:
    """Per free IK axis of ``pose_bone``, the ``(min, max)`` its Limit Rotation constraints impose.

    Honoured exactly only for a hinge (one free IK axis): its rotation is about that axis alone, so
    any Euler decomposition reads the hinge angle on it and zero on the others, and a solve kept
    inside ``[min, max]`` leaves the constraint nothing to do. That holds for a constraint in Local
    Space at full influence whose range lies within ±180° and whose other limited axes allow 0.
    Anything else is refused, naming the bone and the constraint.
    """
    limits: dict[int, tuple[float, float]] = {}
    for constraint in pose_bone.constraints:
        if constraint.type != "LIMIT_ROTATION" or not _active(constraint):
            continue
        axes = [k for k in range(3) if getattr(constraint, f"use_limit_{_AXES[k]}")]
        if not axes:
            continue
        where = f"bone '{pose_bone.name}' has Limit Rotation constraint '{constraint.name}'"
        if len(free) != 1:
            raise IKSolversError(
                f"{where}, which cannot be honoured on a joint with {len(free)} free IK axes; lock all IK axes "
                "but one (Bone > Inverse Kinematics) or use the bone's IK limits instead of the constraint.")
        if constraint.owner_space != "LOCAL" or constraint.influence < 1.0:
            raise IKSolversError(f"{where}, which can be honoured only in Local Space at full influence; "
                                 "change it or use the bone's IK limits instead.")
        for k in axes:
            low, high = (getattr(constraint, f"{bound}_{_AXES[k]}") for bound in ("min", "max"))
            if k == free[0]:
                if not -math.pi <= low <= high <= math.pi:
                    raise IKSolversError(f"{where} with a range beyond ±180° about the hinge axis; narrow it.")
                old = limits.get(k, (-math.inf, math.inf))
                limits[k] = (max(old[0], low), min(old[1], high))
            elif not low <= 0.0 <= high:
                raise IKSolversError(f"{where} that forbids the hinge's rest on the {_AXES[k].upper()} axis; "
                                     "allow 0 there or remove the limit.")
    return limits


def constraint_limits_hold(obj: bpy.types.Object, rig: RigChain) -> bool:
    """Whether a chain read earlier (live mode keeps one) still has the limits the joint bones'
    Limit Rotation constraints impose now; IKSolversError for a constraint that cannot be honoured."""
    chain = rig.chain
    assert obj.pose is not None  # the chain was read from this armature's pose
    for joint, name in enumerate(rig.joint_bones):
        pose_bone = obj.pose.bones.get(name)
        if pose_bone is None or not len(pose_bone.constraints):
            continue
        start = chain.dof_start[joint]
        dofs = range(start, start + chain.kinds[joint].value)
        free = [int(abs(chain.axes[d]).argmax()) for d in dofs]
        limits = rotation_constraint_limits(pose_bone, free)
        for d, axis in zip(dofs, free):
            if axis in limits and (chain.lower[d] < limits[axis][0] or chain.upper[d] > limits[axis][1]):
                return False
    return True


# --------------------------------------------------------------------------- dependency cycles
def _moves_with_chain(obj: bpy.types.Object, bone_name: str, start_bone: str) -> bool:
    bone = cast("bpy.types.Armature", obj.data).bones.get(bone_name)  # obj is the chain's armature
    while bone is not None:
        if bone.name == start_bone:
            return True
        bone = bone.parent
    return False


def _constraint_dependencies(constraints: Any, owner: str) -> Iterator[tuple[bpy.types.Object, str, str]]:
    """(object, bone name or '', how) that the active ``constraints`` of ``owner`` follow."""
    for constraint in constraints:
        if not _active(constraint):
            continue
        targets = [(t.target, getattr(t, "subtarget", "")) for t in getattr(constraint, "targets", ())]
        if getattr(constraint, "target", None) is not None:
            targets.append((constraint.target, getattr(constraint, "subtarget", "")))
        for target, subtarget in targets:
            if target is not None:
                yield target, subtarget or "", f"constraint '{constraint.name}' of {owner} follows"


def _dependencies(point: bpy.types.Object) -> Iterator[tuple[bpy.types.Object, str, str]]:
    """(object, bone name or '', how) that ``point``'s transform depends on directly."""
    if point.parent is not None:
        bone = point.parent_bone if point.parent_type == "BONE" else ""
        yield point.parent, bone, f"'{point.name}' is parented to"
    yield from _constraint_dependencies(getattr(point, "constraints", ()), f"'{point.name}'")
    anim_data = getattr(point, "animation_data", None)
    for fcurve in () if anim_data is None else anim_data.drivers:
        for variable in fcurve.driver.variables:
            for target in variable.targets:
                if isinstance(target.id, type(point)):  # objects only (an armature's bones, other objects)
                    yield (target.id, getattr(target, "bone_target", "") or "",
                           f"the driver of '{point.name}' {fcurve.data_path} reads")


def check_target_independent(obj: bpy.types.Object, start_bone: str, point: bpy.types.Object | None, what: str) -> None:
    """IKSolversError when ``point`` (the target or pole) moves with the chain: parented,
    constrained or driven (directly or through other objects) by the chain's bones or bones below them."""
    if point is None:
        return
    seen: set[str] = set()
    todo = [point]
    while todo:
        current = todo.pop()
        if current.name_full in seen:
            continue
        seen.add(current.name_full)
        for other, bone, how in _dependencies(current):
            if other == obj and bone and _moves_with_chain(obj, bone, start_bone):
                raise IKSolversError(
                    f"{what} '{point.name}' depends on the chain: {how} bone '{bone}', which the chain moves "
                    "(a dependency cycle); parent or constrain it to something outside the chain.")
            if other != obj:
                todo.append(other)


def _bone_dependencies(armature: bpy.types.Object, bone_name: str) -> Iterator[tuple[bpy.types.Object, str, str]]:
    """(object, bone name or '', how) that the bone ``bone_name`` of ``armature`` depends on through
    its own and its ancestors' constraints and drivers (its parents are followed by the caller)."""
    pose_bone = cast("bpy.types.Pose", armature.pose).bones[bone_name]
    yield from _constraint_dependencies(pose_bone.constraints, f"bone '{bone_name}'")
    anim_data = armature.animation_data
    prefix = pose_bone.path_from_id() + "."
    for fcurve in () if anim_data is None else anim_data.drivers:
        if fcurve.driver is None or not fcurve.data_path.startswith(prefix):
            continue
        for variable in fcurve.driver.variables:
            for target in variable.targets:
                if isinstance(target.id, type(armature)):
                    yield (target.id, getattr(target, "bone_target", "") or "",
                           f"the driver of bone '{bone_name}' {fcurve.data_path} reads")


def check_target_bone_independent(obj: bpy.types.Object, start_bone: str, target: bpy.types.Object, bone_name: str,
                                  what: str) -> None:
    """IKSolversError when the bone ``bone_name`` of the armature ``target`` is missing or moves with
    the chain of ``obj`` starting at ``start_bone``: it is a chain bone or below one, or it (or a bone
    it hangs from) is constrained or driven by such a bone, directly or through other bones and objects.
    The armature object itself is checked by :func:`check_target_independent`."""
    if target.pose is None or bone_name not in target.pose.bones:
        raise IKSolversError(f"{what} bone '{bone_name}' is not a bone of '{target.name}'; pick one of its bones.")
    seen: set[tuple[str, str]] = set()
    todo = [(target, bone_name)]
    while todo:
        armature, name = todo.pop()
        if (armature.name_full, name) in seen:
            continue
        seen.add((armature.name_full, name))
        if armature == obj and _moves_with_chain(obj, name, start_bone):
            how = "it is" if name == bone_name else f"it hangs from or follows bone '{name}', which is"
            raise IKSolversError(
                f"{what} bone '{bone_name}' depends on the chain: {how} moved by the chain (a dependency cycle); "
                "pick a bone outside the chain and its children.")
        bone = cast("bpy.types.Armature", armature.data).bones[name]
        for ancestor in (bone, *bone.parent_recursive):
            for other, other_bone, _how in _bone_dependencies(armature, ancestor.name):
                if other_bone and other.type == "ARMATURE" and other.pose is not None and other_bone in other.pose.bones:
                    todo.append((other, other_bone))
                else:
                    check_target_independent(obj, start_bone, other, what)
