"""Chain set-up and single-frame posing: a new chain's defaults, preferred-pose capture, solving and
writing chains at the current frame, and the last-solve status kept on the settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import bpy
import numpy as np

from ..core import (
    METHOD_FACTS,
    IKInputError,
    JointKind,
    Method,
    SolveResult,
    forward_kinematics,
    pose_plane_normals,
    preferred_pose,
    swivel_for_plane,
)
from ..core.hi.orientation import MIN_SPLIT_JOINTS
from .bend_source import carried_bend_direction, found_bend_direction
from .chain_order import chain_bones, parents_first
from .checks import check_chains_apart, check_editable, constraint_active, enabled_chain_bones
from .errors import IKSolversError, chain_context, failure_sentence
from .identity import remember
from .rig import basis_quaternion, read_chain, write_pose
from .rig_chain import RigChain
from .root_space import root_matrices_world, uniform_scale, world_to_root
from .sampling import goal_world, sample_inputs
from .snapshots import PoseSnapshot
from .solving import PreparedSolve, prepare_solve, run_solve, world_errors
from .spec import chain_spec, goal_bone

if TYPE_CHECKING:
    from .properties import IK_SOLVERS_PG_chain

DEFAULT_REFERENCE_WEIGHT = 0.0
"""Pull toward the reference pose a new SDLS chain gets: none. Measured on the Rigify rigs of three
or more bones (docs/comparison.md, the reference_weight sweep), every weight above 0 gave more
backward knees and flips on five of six rigs, left out-of-reach frames short of the bound and baked
about 5× slower; the setting stays for chains where a user finds it helps."""


def default_method(n_bones: int) -> Method:
    """The method a new chain of ``n_bones`` bones gets: HI from two bones on, SVD-adaptive DLS for one.

    HI keeps every joint bent its preferred way at any chain length (0 backward joints and 0 flips
    on every Rigify rig measured, where SDLS, pulled or not, bends leg-and-foot knees backward), and
    is history independent. A chain HI cannot drive falls back to SDLS (:func:`set_up_new_chain`).
    """
    return Method.HI if n_bones >= 2 else Method.SDLS


def method_reason(chain_settings: IK_SOLVERS_PG_chain) -> str:
    """One line for the panel: which method the chain uses and why."""
    method = Method(chain_settings.method)
    label = METHOD_FACTS[method].label
    n_bones = int(chain_settings.chain_length)
    if method is default_method(n_bones):
        if method is Method.HI:
            return f"{label}: default (history independent, every joint keeps its bend)"
        return f"{label}: default for a single bone"
    if method is Method.SDLS and chain_settings.setup_note:
        return f"{label}: {chain_settings.setup_note}"
    return f"{label}: chosen for this chain"


def unhonoured_settings(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain) -> list[str]:
    """One sentence per kind of Blender IK setting of the chain's bones the add-on does not honour, naming the bones.

    IK Stretch never (every bone keeps its length); where HI poses the chain (its method, or a limb
    of a body: :func:`posed_by_hi`), the bones' IK limits and Limit Rotation constraints (HI keeps
    only each joint's bend sense) and their IK stiffness.
    """
    names = chain_bones(obj, chain_settings.tip_bone, chain_settings.chain_length)
    pose_bones = [obj.pose.bones[name] for name in names] if obj.pose is not None else []
    sentences = []
    stretching = [bone.name for bone in pose_bones if bone.ik_stretch > 0.0]
    if stretching:
        sentences.append(f"IK Stretch on bone(s) {_quoted(stretching)} is not honoured: the add-on keeps every "
                         "bone's length.")
    if pose_bones and posed_by_hi(obj, chain_settings, names):
        limited = [bone.name for bone in pose_bones if _limited_axes(bone)]
        stiff = [bone.name for bone in pose_bones if any(getattr(bone, f"ik_stiffness_{axis}") > 0.0
                                                         for axis in _free_axis_names(bone))]
        if limited:
            sentences.append(f"HI does not apply the joint limits of bone(s) {_quoted(limited)} (IK limits, Limit "
                             "Rotation): it may bend them past; SDLS, CCD or FABRIK keep them.")
        if stiff:
            sentences.append(f"HI does not apply the IK stiffness of bone(s) {_quoted(stiff)}.")
    return sentences


def posed_by_hi(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, names: Sequence[str]) -> bool:
    """Whether HI poses the chain of bones ``names``: its method is HI, or it is a limb of a body
    (``solve_together``: enabled, two bones or more, no other enabled chain hanging below it; the
    body's trunk chains honour limits and stiffness, ``core.body``)."""
    settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
    if not (settings.solve_together and chain_settings.enabled):
        return bool(chain_settings.method == Method.HI.value)
    bones = cast("bpy.types.Armature", obj.data).bones
    own = set(names)
    for other in settings.chains:
        other_names = chain_bones(obj, other.tip_bone, other.chain_length) if other.enabled else []
        if other.name != chain_settings.name and other_names:
            if any(parent.name in own for parent in bones[other_names[0]].parent_recursive):
                return False
    return len(names) >= 2


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _free_axis_names(pose_bone: bpy.types.PoseBone) -> list[str]:
    return [axis for axis in "xyz" if not getattr(pose_bone, f"lock_ik_{axis}")]


def _limited_axes(pose_bone: bpy.types.PoseBone) -> bool:
    """Whether IK limits or an active Limit Rotation constraint bound one of the bone's free IK axes."""
    free = _free_axis_names(pose_bone)
    if any(getattr(pose_bone, f"use_ik_limit_{axis}") for axis in free):
        return True
    return any(constraint.type == "LIMIT_ROTATION" and constraint_active(constraint)
               and any(getattr(constraint, f"use_limit_{axis}") for axis in "xyz")
               for constraint in pose_bone.constraints)


def snap_target_to_tip(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain) -> None:
    """Move the chain's target so its goal is the tip bone's tail where the pose puts it now (FK → IK):
    the target object, or its target bone (whose head then sits there). IKSolversError naming the
    chain for no target, a missing tip or target bone, or a target that cannot be changed."""
    with chain_context(chain_settings.name):
        target = chain_settings.target
        if target is None:
            raise IKSolversError("the chain has no target; pick an object (an Empty, or an armature and its bone).")
        check_editable(target)
        tip = obj.pose.bones.get(chain_settings.tip_bone) if obj.pose is not None else None
        if tip is None:
            raise IKSolversError(f"the tip bone '{chain_settings.tip_bone}' is not a bone of '{obj.name}'.")
        tip_world = obj.matrix_world @ tip.tail
        bone_name = goal_bone(target, chain_settings.target_bone)
        if not bone_name:
            matrix = target.matrix_world.copy()
            matrix.translation = tip_world
            target.matrix_world = matrix
            return
        pose_bone = target.pose.bones.get(bone_name) if target.pose is not None else None
        if pose_bone is None:
            raise IKSolversError(f"the target bone '{bone_name}' is not a bone of '{target.name}'; pick one of its bones.")
        matrix = pose_bone.matrix.copy()
        matrix.translation = target.matrix_world.inverted() @ tip_world
        pose_bone.matrix = matrix


def capture_preferred_pose(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, scene: bpy.types.Scene) -> None:
    """Store the chain's current pose as its preferred pose (IKSolversError if the chain is unusable)."""
    with chain_context(chain_settings.name):
        check_editable(obj)
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    assert obj.pose is not None  # read_chain read the chain from it
    rotations = [basis_quaternion(obj.pose.bones[name]) for name in rig.bone_names]
    chain_settings.preferred_pose.clear()
    for name, quaternion in zip(rig.bone_names, rotations):
        item = chain_settings.preferred_pose.add()
        item.bone_name = name
        item.rotation = quaternion
    chain_settings.preferred_frame = scene.frame_current
    chain_settings.has_preferred_pose = True
    remember(obj, chain_settings, rig.bone_names)


def _keeping_swivel(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, rig: RigChain) -> float:
    """The swivel angle whose solver plane is the current pose's (SPEC §5: a new chain keeps its plane)."""
    positions = forward_kinematics(rig.chain, rig.q[None]).positions
    normal = pose_plane_normals(positions)
    if not np.all(np.isfinite(normal)):
        return 0.0  # a straight chain has no plane to keep
    target = chain_settings.target
    if target is None:
        goal = positions[:, -1]
    else:
        goal = world_to_root(goal_world(target, goal_bone(target, chain_settings.target_bone))[None],
                             root_matrices_world(obj, rig))
    swivel = swivel_for_plane(rig.chain, goal, rig.q, normal, zero_plane_map=chain_settings.zero_plane_map,
                              bend_direction=_bend_direction(chain_settings))
    return float(swivel[0]) if np.all(np.isfinite(swivel)) else 0.0


def set_up_new_chain(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, scene: bpy.types.Scene) -> None:
    """A new chain's defaults (issue 11): HI with the preferred pose captured now and the swivel set
    so that adding the chain does not move it; SDLS where HI cannot drive the chain (one bone, a
    hinge start joint). A straight chain (T-pose, BVH rigs) without a bend direction gets one
    (:func:`~.bend_source.found_bend_direction`). ``setup_note`` says why HI was not chosen, or where
    the bend direction came from. A chain without a usable tip bone yet keeps the settings' defaults."""
    try:
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    except IKSolversError:
        return  # no usable tip bone yet: set up once the user picks one
    if chain_settings.has_preferred_pose and len(chain_settings.preferred_pose) and any(chain_settings.bend_direction):
        # Set up again from another start bone: the same direction, in the new start bone's rest axes.
        chain_settings.bend_direction = carried_bend_direction(
            obj, chain_settings.bend_direction, chain_settings.preferred_pose[0].bone_name, rig.bone_names[0])
    capture_preferred_pose(obj, chain_settings, scene)
    method = default_method(len(rig.bone_names))
    note = ""
    if method is Method.HI:
        note = hinge_start_reason(obj, rig)
        if note:
            method = Method.SDLS
    if method is Method.HI:
        points = _straight_points(rig)
        if points and not any(chain_settings.bend_direction):
            direction, source = found_bend_direction(obj, rig, points)
            chain_settings.bend_direction = direction
            note = f"Straight chain: bend direction from {source}"
        try:
            preferred_pose(rig.chain, rig.q, _bend_direction(chain_settings))  # the core's checks of an HI preferred pose
            chain_settings.swivel_angle = _keeping_swivel(obj, chain_settings, rig)
        except (IKInputError, IKSolversError) as error:
            method, note = Method.SDLS, f"HI cannot drive this chain ({error}): SDLS chosen"
    chain_settings.method = method.value
    chain_settings.setup_note = note
    if method is Method.SDLS:
        chain_settings.reference_weight = DEFAULT_REFERENCE_WEIGHT


def hinge_start_reason(obj: bpy.types.Object, rig: RigChain) -> str:
    """Why HI cannot drive ``rig``: its start joint is not free in every axis (the swivel turns it about
    any), naming the bone and its IK locks; '' when it is."""
    if rig.chain.kinds[0] is JointKind.BALL:
        return ""
    assert obj.pose is not None  # the rig was read from it
    bone = obj.pose.bones[rig.joint_bones[0]]
    locks = ", ".join(axis.upper() for axis in "xyz" if getattr(bone, f"lock_ik_{axis}"))
    return (f"HI needs the start bone '{bone.name}' free to turn about every axis, and its IK is locked in {locks}: "
            "SDLS chosen (unlock them for HI)")


def _straight_points(rig: RigChain) -> int:
    """How many of the chain's joint positions (tip last) span no plane in the current pose
    (:func:`pose_plane_normals`): all of them for a straight chain; all but the tip where the chain up to
    its last joint is straight (HI with Rotation solves that part: a T-pose leg with its foot); else 0."""
    positions = forward_kinematics(rig.chain, rig.q[None]).positions
    for points in (positions.shape[1], positions.shape[1] - 1)[: 2 if rig.chain.n_joints >= MIN_SPLIT_JOINTS else 1]:
        if not np.all(np.isfinite(pose_plane_normals(positions[:, :points]))):
            return points
    return 0


def _bend_direction(chain_settings: IK_SOLVERS_PG_chain) -> np.ndarray | None:
    return np.array(chain_settings.bend_direction, dtype=float) if any(chain_settings.bend_direction) else None


def set_up_again(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, scene: bpy.types.Scene) -> None:
    """A set-up chain whose bones changed with its tip bone or length: set up as a new chain of those bones
    (:func:`set_up_new_chain`: preferred pose captured now, method chosen, swivel keeping the plane),
    so nothing moves and the next solve needs no capture. A chain never set up (no preferred pose:
    a script filling in its settings), or one whose preferred pose has exactly its bones, is kept."""
    if not chain_settings.has_preferred_pose:
        return
    try:
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    except IKSolversError:
        return  # not a usable chain (yet): the next solve says why
    if [item.bone_name for item in chain_settings.preferred_pose] != list(rig.bone_names):
        set_up_new_chain(obj, chain_settings, scene)


def new_target_at_tip(context: bpy.types.Context, obj: bpy.types.Object, tip_bone: str) -> bpy.types.Object:
    """A new Empty at the evaluated tail of ``tip_bone`` (world space), in the armature's collection."""
    pose_bone = cast("bpy.types.Pose", obj.evaluated_get(context.evaluated_depsgraph_get()).pose).bones[tip_bone]
    empty = bpy.data.objects.new(f"IK_{tip_bone}", None)
    empty.empty_display_type = "SPHERE"
    empty.empty_display_size = max(0.05 * pose_bone.length * uniform_scale(np.array(obj.matrix_world)), 1e-3)
    empty.location = obj.matrix_world @ pose_bone.tail
    collection = obj.users_collection[0] if obj.users_collection else cast("bpy.types.Scene", context.scene).collection
    collection.objects.link(empty)
    return empty


def chain_bones_changed(chain_settings: bpy.types.PropertyGroup, context: bpy.types.Context) -> None:
    """A chain's tip bone or length changed (``properties.chain_bones_listeners``): set it up again
    (:func:`set_up_again`); what fails goes to the chain's status, never out of Blender's update."""
    obj, scene = chain_settings.id_data, context.scene
    if not isinstance(obj, bpy.types.Object) or obj.type != "ARMATURE" or scene is None:
        return
    try:
        set_up_again(obj, cast("IK_SOLVERS_PG_chain", chain_settings), scene)
    except Exception as error:  # an update hook must not raise
        cast("IK_SOLVERS_PG_chain", chain_settings).last_message = failure_sentence(error)


def store_solve_outcome(chain_settings: IK_SOLVERS_PG_chain, status: str, message: str, result: SolveResult | None = None,
                        prepared: PreparedSolve | None = None) -> None:
    """Keep a solve's outcome on the chain's settings (:func:`store_outcome`).

    HI chains also get the pole distance, so the panel's flip warning follows the live pose.
    """
    if result is None:
        store_outcome(chain_settings, status, message)
        return
    assert prepared is not None  # a result comes with the solve it was prepared by
    error, lower_bound = world_errors(prepared, result)
    store_outcome(chain_settings, status, message, float(error[0]), float(lower_bound[0]), int(result.iterations[0]),
                  None if result.hi is None else float(result.hi.pole_angles[0]),
                  None if result.orientation_error is None else float(result.orientation_error[0]))


def store_outcome(chain_settings: IK_SOLVERS_PG_chain, status: str, message: str, error: float | None = None,
                  lower_bound: float | None = None, iterations: int | None = None,
                  pole_distance: float | None = None, orientation_error: float | None = None) -> None:
    """Keep a solve's status, message and (scene-unit) error, lower bound, iterations, HI pole
    distance and orientation error (radians, with Rotation) on the chain's settings, writing only
    what changed (each write is an update)."""
    values: dict[str, str | float | int] = {"last_status": status, "last_message": message}
    if error is not None and lower_bound is not None and iterations is not None:
        values.update(last_error=error, last_lower_bound=lower_bound, last_iterations=iterations)
    if pole_distance is not None:
        values["last_pole_distance"] = pole_distance
    if orientation_error is not None:
        values["last_orientation_error"] = orientation_error
    for name, value in values.items():
        if getattr(chain_settings, name) != value:
            setattr(chain_settings, name, value)


def solve_chains(obj: bpy.types.Object, chains: Sequence[IK_SOLVERS_PG_chain], view_layer: bpy.types.ViewLayer,
                 ) -> list[tuple[SolveResult, PreparedSolve]]:
    """Solve and write ``chains`` (settings) one after another (each sees the ones before it posed), a
    chain after the chains that move its ancestor bones (``chain_order.parents_first``: it sees them solved).

    Returns per chain, in the order given, the core ``SolveResult`` and its ``PreparedSolve``. On an
    IKSolversError every channel written so far is put back exactly before it propagates.
    """
    specs = [chain_spec(obj, chain) for chain in chains]  # every chain checked before any is posed
    check_chains_apart([(spec.name, spec.bone_names) for spec in specs],
                       enabled_chain_bones(obj, (spec.name for spec in specs)))
    order = parents_first(obj, list(range(len(chains))), lambda index: specs[index].bone_names)
    chains, specs = [chains[index] for index in order], [specs[index] for index in order]
    snapshot = PoseSnapshot(obj)
    outcomes = []
    try:
        for index, spec in enumerate(specs):
            if index:
                view_layer.update()  # the next chain reads its rig and root from the pose just written
                spec = chain_spec(obj, chains[index])
            with chain_context(spec.name):
                prepared = prepare_solve(spec, sample_inputs(obj, spec))
                result = run_solve(prepared)
            write_pose(obj, spec.rig, result.q[0])
            outcomes.append((result, prepared))
    except Exception:  # anything: the pose goes back before the error propagates
        snapshot.restore()
        view_layer.update()
        raise
    for chain, (_, prepared) in zip(chains, outcomes):
        remember(obj, chain, prepared.spec.bone_names)
    return [outcomes[order.index(index)] for index in range(len(order))]
