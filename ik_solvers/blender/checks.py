"""Checks of a rig before anything is posed or keyed (issue 10): an armature whose pose and
animation we may change and save, Limit Rotation constraints on chain bones (honoured as joint
limits where that is exact, else refused), and targets that depend on the chain (a cycle)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import bpy

from .chain_order import chain_bones
from .errors import IKSolversError

if TYPE_CHECKING:
    from .rig_chain import RigChain

OVERRIDE_HINT = "make a library override first (Object > Library Override > Make)"


def check_editable(obj: bpy.types.Object | None) -> None:
    """IKSolversError unless ``obj``'s pose and animation can be changed and saved.

    A linked armature (from a library, not overridden) can be posed in memory, but nothing written
    to it is saved: keys would vanish with the file. A library override can be baked. An armature
    whose data comes from a library file that is missing has no bones to read: said so, not as a
    missing tip bone.
    """
    if obj is None:
        return
    data = obj.data
    if data is not None and data.is_missing:
        library = f" from '{data.library.filepath}'" if data.library is not None else ""
        raise IKSolversError(f"Armature '{obj.name}' needs its data '{data.name}'{library}, and that library is "
                             "missing; find it (File > External Data > Find Missing Files) or relink it.")
    if obj.library is not None or not obj.is_editable:
        library = f" from '{obj.library.filepath}'" if obj.library is not None else ""
        raise IKSolversError(f"Armature '{obj.name}' is linked{library} and cannot be changed; {OVERRIDE_HINT}.")


def check_action_keyable(obj: bpy.types.Object) -> None:
    """IKSolversError when the action a bake keys into (the armature's assigned action, or the tweaked
    NLA strip's) is linked from a library or otherwise not editable: keys written to it are refused
    or lost with the file. A missing action is fine (the bake makes a local one)."""
    anim_data = obj.animation_data
    action = None if anim_data is None else anim_data.action
    if action is None or (action.library is None and action.is_editable):
        return
    library = f" from '{action.library.filepath}'" if action.library is not None else ""
    raise IKSolversError(f"The action '{action.name}' of armature '{obj.name}' is linked{library} and cannot be "
                         "keyed; make the action local or override it first.")


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


def constraint_active(constraint: bpy.types.Constraint) -> bool:
    """Whether the constraint acts at all (not muted, some influence)."""
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
        if constraint.type != "LIMIT_ROTATION" or not constraint_active(constraint):
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


_PATH_STEP = re.compile(r"""\.?[A-Za-z_][A-Za-z0-9_]*|\[(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\d+)\]""")
_POSE_BONE = re.compile(r"""pose\.bones\[(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\]""")


def pose_bone_of_path(path: str) -> str | None:
    """The bone a path that starts ``pose.bones["name"]`` reads a pose property of: None for
    another path and for a bone's custom property (``pose.bones["name"]["prop"]``), which no pose moves."""
    bone = _POSE_BONE.match(path)
    if bone is None or path[bone.end():].startswith("["):
        return None
    return bpy.utils.unescape_identifier(bone.group(1) if bone.group(1) is not None else bone.group(2))


def constraint_targets(constraint: bpy.types.Constraint) -> list[tuple[bpy.types.Object, str]]:
    """(object, bone or vertex group name or '') that ``constraint`` follows: its target(s) and pole."""
    targets = [(t.target, getattr(t, "subtarget", "") or "") for t in getattr(constraint, "targets", ())]
    for name, sub in (("target", "subtarget"), ("pole_target", "pole_subtarget"), ("camera", ""),
                      ("depth_object", "")):
        linked = getattr(constraint, name, None)
        if linked is not None:
            targets.append((linked, (getattr(constraint, sub, "") or "") if sub else ""))
    return [(target, subtarget) for target, subtarget in targets if target is not None]


def path_dependency(base: bpy.types.bpy_struct | None, path: str) -> tuple[bpy.types.Object, str] | None:
    """The object a driver's RNA ``path`` from ``base`` reads (the last one along the path) and the
    pose bone it reads of that object ('' for none, or for a bone's custom property, which no pose
    moves); None when the path passes no object."""
    if base is None:
        return None
    found: tuple[bpy.types.Object, int] | None = (base, 0) if isinstance(base, bpy.types.Object) else None
    prefix = ""
    for step in _PATH_STEP.finditer(path):
        prefix += step.group()
        try:
            value = base.path_resolve(prefix.lstrip("."))
        except ValueError:
            break
        if isinstance(value, bpy.types.Object):
            found = (value, step.end())
    if found is None:
        return None
    owner, rest = found[0], path[found[1]:].lstrip(".")
    return owner, pose_bone_of_path(rest) or ""


def variable_target_base(target: bpy.types.DriverTarget, variable_type: str) -> bpy.types.bpy_struct | None:
    """Where a driver variable's data path starts: its ID, or the scene or view layer it is evaluated in."""
    if variable_type != "CONTEXT_PROP":
        return target.id
    return bpy.context.scene if target.context_property == "ACTIVE_SCENE" else bpy.context.view_layer


def _driver_dependencies(id_data: bpy.types.ID | None, owner: str, pose_bone: str | None = None,
                         ) -> Iterator[tuple[bpy.types.Object, str, str]]:
    """(object, bone name or '', how) the drivers of ``id_data`` read, any variable type: with
    ``pose_bone``, only the drivers of that pose bone's pose (its channels, constraints, …); without,
    those of everything else (a bone's custom property included: anything may read it). A driver of
    a bone's pose moves that bone, not the object: it counts for a point that follows the bone
    (:func:`_bone_dependencies`), not for every point that follows the armature (the finger drivers
    of a Rigify rig do not move its hand_ik bone)."""
    anim_data = getattr(id_data, "animation_data", None)
    for fcurve in () if anim_data is None else anim_data.drivers:
        if pose_bone_of_path(fcurve.data_path) != pose_bone:
            continue
        how = f"the driver of '{owner}' {fcurve.data_path} reads"
        for variable in fcurve.driver.variables:
            for target in variable.targets:
                if variable.type in {"SINGLE_PROP", "CONTEXT_PROP"}:
                    found = path_dependency(variable_target_base(target, variable.type), target.data_path)
                    if found is not None:
                        yield found[0], found[1], how
                elif isinstance(target.id, bpy.types.Object):
                    yield target.id, target.bone_target or "", how


_GEOMETRY_PARENTS = frozenset({"VERTEX", "VERTEX_3"})
_ALL_VERTICES: tuple[int, ...] = ()


def _dependencies(point: bpy.types.Object) -> Iterator[tuple[bpy.types.Object, str, str, tuple[int, ...] | None]]:
    """(object, bone name or '', how, vertices) that ``point``'s transform depends on directly;
    ``vertices``: None for the object's transform, else the vertex indices of its evaluated
    geometry that are followed (``_ALL_VERTICES``: any of them)."""
    if point.parent is not None:
        bone = point.parent_bone if point.parent_type == "BONE" else ""
        if point.parent_type in _GEOMETRY_PARENTS:
            count = 1 if point.parent_type == "VERTEX" else 3
            yield (point.parent, "", f"'{point.name}' is parented to vertices of '{point.parent.name}'",
                   tuple(point.parent_vertices[:count]))
        yield point.parent, bone, f"'{point.name}' is parented to", None
    for constraint in getattr(point, "constraints", ()):
        if not constraint_active(constraint):
            continue
        for target, subtarget in constraint_targets(constraint):
            how = f"constraint '{constraint.name}' of '{point.name}' follows"
            if target.type != "ARMATURE" and (subtarget or constraint.type == "SHRINKWRAP"):
                # A vertex group or the surface: the target's evaluated geometry, deformed or not.
                yield target, "", f"{how} the geometry of '{target.name}'", _ALL_VERTICES
            yield target, subtarget or "", how, None
    for other, bone, how in _driver_dependencies(point, point.name):
        yield other, bone, how, None


def _vertex_group_names(obj: bpy.types.Object, vertices: tuple[int, ...]) -> list[str]:
    """Names of the vertex groups that weigh ``vertices`` of ``obj``'s mesh (every group for
    ``_ALL_VERTICES`` or geometry that is not a mesh)."""
    mesh = obj.data
    if vertices == _ALL_VERTICES or not isinstance(mesh, bpy.types.Mesh):
        return [group.name for group in obj.vertex_groups]
    names = []
    for index in vertices:
        if 0 <= index < len(mesh.vertices):
            names += [obj.vertex_groups[g.group].name for g in mesh.vertices[index].groups
                      if g.weight > 0.0 and g.group < len(obj.vertex_groups)]
    return names


def _deformers(obj: bpy.types.Object, vertices: tuple[int, ...], reason: str,
               ) -> Iterator[tuple[bpy.types.Object, str, str, tuple[int, ...] | None]]:
    """(object, bone name or '', how, vertices) that move ``vertices`` of ``obj``'s evaluated
    geometry: armature deformation by the bones weighing them (every deforming bone with
    envelopes), hooks, any other modifier's object (its geometry, to be safe), shape-key drivers."""
    armatures = [(modifier.object, modifier.name, modifier.use_vertex_groups, modifier.use_bone_envelopes)
                 for modifier in getattr(obj, "modifiers", ())
                 if modifier.type == "ARMATURE" and (modifier.show_viewport or modifier.show_render)]
    if obj.parent is not None and obj.parent_type == "ARMATURE":
        armatures.append((obj.parent, "armature parent", True, True))
    groups = None
    for armature, name, use_groups, use_envelopes in armatures:
        if armature is None or armature.type != "ARMATURE":
            continue
        if groups is None:
            groups = set(_vertex_group_names(obj, vertices))
        how = f"{reason}, which modifier '{name}' deforms with"
        for deforming in cast("bpy.types.Armature", armature.data).bones:
            if deforming.use_deform and ((use_groups and deforming.name in groups) or use_envelopes):
                yield armature, deforming.name, how, None
        yield armature, "", how, None
    for modifier in getattr(obj, "modifiers", ()):
        if modifier.type == "ARMATURE" or not (modifier.show_viewport or modifier.show_render):
            continue
        how = f"{reason}, which modifier '{modifier.name}' moves with"
        for attribute in ("object", "target"):
            other = getattr(modifier, attribute, None)
            if isinstance(other, bpy.types.Object):
                yield other, getattr(modifier, "subtarget", "") or "", how, _ALL_VERTICES
    data = obj.data
    for id_data in (data, getattr(data, "shape_keys", None)):
        for other, bone, how in _driver_dependencies(id_data, obj.name):
            yield other, bone, f"{reason}, and {how}", None


def _bone_dependencies(armature: bpy.types.Object, bone_name: str,
                       ) -> Iterator[tuple[bpy.types.Object, str, str, tuple[int, ...] | None]]:
    """(object, bone name or '', how, None) that a bone of ``armature`` (not the chain's) follows
    through its and its parents' constraints and drivers."""
    pose_bone = armature.pose.bones.get(bone_name) if armature.pose is not None else None
    while pose_bone is not None:
        for constraint in pose_bone.constraints:
            if constraint_active(constraint):
                for target, subtarget in constraint_targets(constraint):
                    yield (target, subtarget, f"constraint '{constraint.name}' of bone '{pose_bone.name}' of "
                           f"'{armature.name}' follows", None)
        for other, bone, how in _driver_dependencies(armature, armature.name, pose_bone.name):
            yield other, bone, how, None
        pose_bone = pose_bone.parent


def check_target_independent(obj: bpy.types.Object, start_bone: str, point: bpy.types.Object | None, what: str) -> None:
    """IKSolversError when ``point`` (the target or pole) moves with the chain: parented,
    constrained or driven (directly or through other objects) by the chain's bones or bones below them.

    Drivers count with every variable type (a Single Property or Context Property path into
    ``pose.bones["…"]`` of the armature reads that bone; a bone's custom property does not move with
    the pose). Geometry counts too: a vertex parent, or a constraint on a vertex group or surface,
    follows a mesh that the chain's bones may deform (Armature modifier or parent by the bones
    weighing those vertices, every deforming bone with envelopes; hooks; shape-key drivers). The
    error is one sentence naming the point and the bone.
    """
    if point is None:
        return
    seen: set[tuple[str, tuple[int, ...] | None, str]] = set()
    todo: list[tuple[bpy.types.Object, tuple[int, ...] | None, str, str]] = [(point, None, "", "")]
    while todo:
        current, vertices, reason, of_bone = todo.pop()  # of_bone: a bone of another armature, what it follows
        if (current.name_full, vertices, of_bone) in seen:
            continue
        seen.add((current.name_full, vertices, of_bone))
        found = list(_bone_dependencies(current, of_bone) if of_bone else _dependencies(current))
        if vertices is not None:
            found += _deformers(current, vertices, reason)
        for other, bone, how, other_vertices in found:
            if other == obj and bone and _moves_with_chain(obj, bone, start_bone):
                raise IKSolversError(
                    f"{what} '{point.name}' depends on the chain: {how} bone '{bone}', which the chain moves "
                    "(a dependency cycle); parent or constrain it to something outside the chain.")
            if other != obj:
                todo.append((other, other_vertices, how, ""))
                if bone and other.type == "ARMATURE":
                    todo.append((other, None, how, bone))


def check_target_bone_independent(obj: bpy.types.Object, start_bone: str, target: bpy.types.Object, bone_name: str,
                                  what: str, _seen: set[tuple[str, str]] | None = None) -> None:
    """IKSolversError when the bone ``bone_name`` of the armature ``target`` is missing or moves with
    the chain of ``obj`` starting at ``start_bone``: it is a chain bone or below one, or it (or a bone
    it hangs from) follows such a bone through constraints, directly or through other bones and
    objects. The armature object itself (its parent, constraints and drivers, bones' drivers
    included) is checked by :func:`check_target_independent`."""
    if target.pose is None or bone_name not in target.pose.bones:
        raise IKSolversError(f"{what} bone '{bone_name}' is not a bone of '{target.name}'; pick one of its bones.")
    seen = set() if _seen is None else _seen
    if (target.name_full, bone_name) in seen:
        return
    seen.add((target.name_full, bone_name))
    if target == obj and _moves_with_chain(obj, bone_name, start_bone):
        raise IKSolversError(
            f"{what} bone '{bone_name}' depends on the chain: it is moved by the chain (a dependency cycle); "
            "pick a bone outside the chain and its children.")
    for other, bone, how, _vertices in _bone_dependencies(target, bone_name):
        if other == obj and bone and _moves_with_chain(obj, bone, start_bone):
            raise IKSolversError(
                f"{what} bone '{bone_name}' depends on the chain: {how} bone '{bone}', which the chain moves "
                "(a dependency cycle); pick a bone outside the chain and its children.")
        if bone and other.type == "ARMATURE" and other.pose is not None and bone in other.pose.bones:
            check_target_bone_independent(obj, start_bone, other, bone, what, seen)
        if other != obj:
            check_target_independent(obj, start_bone, other, what)


# --------------------------------------------------------------------------- chains on the same bones
ChainBones = tuple[str, Sequence[str]]
"""A chain's name and its bones (start → tip)."""


def enabled_chain_bones(obj: bpy.types.Object, leaving_out: Iterable[str] = ()) -> list[ChainBones]:
    """Every enabled chain of ``obj`` but those named in ``leaving_out``, with the bones its settings
    name now (the tip bone and its parents; none for a tip bone not found)."""
    skip = set(leaving_out)
    return [(chain.name, chain_bones(obj, chain.tip_bone, chain.chain_length))
            for chain in obj.ik_solvers.chains  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
            if chain.enabled and chain.name not in skip]


def check_chains_apart(solved: Sequence[ChainBones], others: Sequence[ChainBones] = ()) -> None:
    """IKSolversError when two of the ``solved`` chains, or one of them and one of ``others``, share a
    bone: the later one would overwrite the earlier one's pose and keys, and both would be reported
    solved. A body (``solve_together``, ``body.read_body``) keeps its chains apart too: its chains may
    hang from one another's bones (a limb from the spine's tip), never share one, since each bone has
    one chain whose goal and settings pose it."""
    pool = [*solved, *others]
    for index, (name, bones) in enumerate(solved):
        for other, other_bones in pool[index + 1:]:
            shared = [bone for bone in bones if bone in set(other_bones)]
            if shared:
                raise IKSolversError(
                    f"chain '{other}' moves bone '{shared[0]}' too, so one chain would overwrite the other's pose "
                    "and keys; disable one of them or give them different bones (chains that share no bone "
                    "and hang from one another can be solved together as one body: Solve Together).", chain=name)
