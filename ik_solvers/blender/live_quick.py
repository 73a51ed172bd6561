"""Live mode's quick path: a move of objects other than armatures re-solves the chains the last full
update checked, without checking the armature again.

The last full update (``live.update_live_chains``) offers each chain it checked whose root no other
live chain moves (:func:`offer_quick`). Only an update of the armature, which the handler sees and
runs in full, changes what that update checked or the chain's root frame; a setting a solve reads,
live mode toggled, an undo, a bake, or any updated data that is not an object forget the quick path
(``live_state.forget_quick``). :func:`quick_update` then reads and checks the target and its inputs as
the full update does and solves. An HI chain with a built-in zero-plane map whose sphere rides with
the start joint's parent (the default) maps its target through the root frame the full update read
and solves with the core's one-target HI solve (the batch solve's bits), writing in bulk; any other
chain samples its inputs and solves as the full update does, only without its checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import bpy
import numpy as np

from ..core import Method, ParentSpace, solve_hi_one
from .chains import store_outcome, store_solve_outcome
from .errors import chain_context
from .live_check import note_chain_write
from .live_state import ChainKey, LiveChain, QuickChain, after_write, inputs_key, kept_fk_pose, state, turn_off
from .rig import write_pose, write_quaternion_joints
from .root_space import point_to_root, single_inverse
from .sampling import FrameInputs, goal_world, sample_inputs
from .solving import checked_swivel, checked_target_point, poles_in_root, prepare_solve, root_scales, run_solve
from .spec import ChainSpec, check_points

if TYPE_CHECKING:
    from .properties import IK_SOLVERS_PG_chain

QUICK_ZERO_PLANE_MAPS = ("DEFAULT", "POLE_OBJECT")


def offer_quick(obj: bpy.types.Object, checked: list[tuple[ChainKey, ChainSpec, FrameInputs]]) -> bool:
    """Offer the quick path to the chains of ``obj`` just checked; False if one of them cannot take it.

    A chain can when no other live chain of the armature moves a bone its root hangs from (each
    chain's write would move the next one's root, which the quick path takes as the full update read
    it). The one-target HI solve serves it when it is HI with a built-in zero-plane map, the sphere
    rides with the start joint's parent (so with the root), there is no orientation goal and the
    influence is full (the other chains take the sampled solve).
    """
    bones = cast("bpy.types.Armature", obj.data).bones  # the chains' armature
    pose = obj.pose
    assert pose is not None  # the full update read these chains from this armature's pose
    offered = True
    for key, spec, inputs in checked:
        others = {name for other_key, other, _ in checked if other_key != key for name in other.rig.joint_bones}
        root = bones.get(spec.rig.parent_bone) if spec.rig.parent_bone else None
        above: set[str] = set() if root is None else {root.name, *(bone.name for bone in root.parent_recursive)}
        if above & others:
            offered = False
            continue
        one_target = (spec.method is Method.HI and not spec.use_rotation and spec.zero_plane_map in QUICK_ZERO_PLANE_MAPS
                      and spec.parent_space is ParentSpace.START_JOINT
                      and (inputs.influence is None or bool(np.all(inputs.influence >= 1.0))))
        root_world = np.asarray(inputs.root_world, dtype=float).reshape(1, 4, 4)
        indices = [pose.bones.find(name) for name in spec.rig.joint_bones]
        state.chains[key].quick = QuickChain(
            obj.name, spec.hi_preferred_pose() if one_target else None, indices,
            all(pose.bones[index].rotation_mode == "QUATERNION" for index in indices), root_world,
            single_inverse(root_world)[0].tolist(), float(root_scales(spec, root_world)[0]))
    return offered


def quick_update(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> bool:
    """Re-solve every live chain of ``scene`` after a move of objects other than armatures, without
    the full update's checks of the armature: the last full update checked it, and only an update of
    the armature (which this handler would see) changes what they checked or the chain's root frame,
    and a changed setting (``properties.SOLVE_SETTINGS``, ``use_live``) forgets the quick path. The
    target's independence and the inputs are read again.

    Returns False, having done nothing, when a chain is not as the last full update left it (then
    the full update runs).
    """
    if state.quick_scene != scene.session_uid:
        return False
    chains: list[tuple[bpy.types.Object, Any, LiveChain, QuickChain, ChainSpec]] = []
    for key, record in state.chains.items():
        quick, spec = record.quick, record.spec
        if quick is None or spec is None:
            continue  # not offered: the full update that set ``quick_scene`` did not check it
        # By name in the blend file's objects (a scan, as the scene's would be, but of a flat list):
        # an object leaves the scene only with an update of the scene, which runs in full.
        obj = bpy.data.objects.get(quick.object_name)
        if obj is None or obj.session_uid != key[0]:
            return False
        chain = obj.ik_solvers.chains.get(key[1])  # where the outcome is stored
        if chain is None:
            return False
        chains.append((obj, chain, record, quick, spec))
    if not chains:
        return False
    state.busy = True
    try:
        for obj, chain, record, quick, spec in chains:
            try:
                with chain_context(spec.name):
                    quick_solve(obj, chain, record, quick, spec, depsgraph)
            except Exception as error:  # never into Blender's handler loop
                turn_off(obj, chain, error)
    finally:
        state.busy = False
    return True


def quick_solve(obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain, record: LiveChain, quick: QuickChain, spec: ChainSpec,
                depsgraph: bpy.types.Depsgraph) -> None:
    """One chain's quick update: the target's independence checked, then target, pole and swivel read
    and checked as the full update does. With the one-target HI solve (``quick.preferred``) they are
    taken to the root frame the full update read and solved with the batch solve's bits; otherwise the
    inputs are sampled and solved as in the full update. ``chain`` (the settings) only takes the outcome."""
    check_points(obj, spec.rig, spec.target, spec.pole, spec.goal_bone)
    pole = spec.pole
    if quick.preferred is None:
        # Only the armature's update changes its bones, and that runs in full: they hold our write.
        inputs = kept_fk_pose(record, sample_inputs(obj, spec, depsgraph=depsgraph), True, obj, spec.rig)
        sampled = inputs_key(inputs)
        if record.quick_solved != sampled:
            _solve_as_in_full(obj, chain, record, spec, inputs, sampled)
        return
    target_world = checked_target_point(spec, _goal_location(spec, depsgraph))
    pole_world = None if pole is None else _location(pole, depsgraph)
    swivel = checked_swivel(spec, spec.per_frame_value(obj, "swivel_angle"))
    signature = (target_world, pole_world, swivel)
    if record.quick_solved == signature:
        return
    poles = None if pole_world is None else poles_in_root(spec, pole_world, quick.root_world)
    target_root = point_to_root(target_world, quick.root_inverse)
    solved = solve_hi_one(quick.preferred, target_root, swivel=swivel, zero_plane_map=spec.zero_plane_map,
                          pole=None if poles is None else poles[0], tolerance=spec.options.tolerance)
    if solved is None:  # input the one-target solve leaves to the batch solve (which refuses it, or decides)
        _solve_as_in_full(obj, chain, record, spec, sample_inputs(obj, spec, depsgraph=depsgraph), signature)
        return
    # Non-finite joint values make non-finite rotations, which the writes refuse before writing.
    if quick.quaternion_joints:
        written = write_quaternion_joints(obj, solved.local_quaternions, quick.bone_indices)
    else:
        written = write_pose(obj, spec.rig, np.array(solved.q))
    scale = quick.world_scale
    store_outcome(chain, solved.status.value, record.overridden, solved.error * scale, solved.lower_bound * scale,
                  solved.iterations, solved.pole_angle)
    _remember_write(obj, record, written, signature)
    note_chain_write(obj, record, spec, solved.q, quick.bone_indices)


def _goal_location(spec: ChainSpec, depsgraph: bpy.types.Depsgraph) -> tuple[float, float, float]:
    """The evaluated goal (the target's location, or its target bone's head) as three Python floats."""
    if not spec.goal_bone:
        return _location(spec.target, depsgraph)
    x, y, z = goal_world(spec.target, spec.goal_bone, depsgraph).tolist()
    return (x, y, z)


def _location(point: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> tuple[float, float, float]:
    """The evaluated world location of ``point`` as three Python floats."""
    x, y, z = cast(Any, point.evaluated_get(depsgraph).matrix_world.translation)
    return (x, y, z)


def _solve_as_in_full(obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain, record: LiveChain, spec: ChainSpec, inputs: FrameInputs,
                      signature: object) -> None:
    """Prepare, solve, write and store as the full update does (without its checks of the armature)."""
    prepared = prepare_solve(spec, inputs)
    result = run_solve(prepared)
    written = write_pose(obj, spec.rig, result.q[0])
    store_solve_outcome(chain, result.status[0].value, record.overridden, result, prepared)
    _remember_write(obj, record, written, signature)
    note_chain_write(obj, record, spec, result.q[0])


def _remember_write(obj: bpy.types.Object, record: LiveChain, written: tuple[str, ...], signature: object) -> None:
    """What the quick solve read, and the rig key after its write (the next full update reuses the chain read)."""
    assert record.rig_values is not None  # read by the full update that offered the quick path
    record.quick_solved = signature
    record.rig_key = after_write(obj, record.rig_values, written)

