"""Chain management, single-frame solve and preferred-pose capture operators (SPEC §6)."""

from __future__ import annotations

import bpy
import numpy as np
from bpy.props import BoolProperty

from . import solving
from .rig import RigError, basis_quaternion, read_chain, root_matrices_world, write_pose


def posable_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object if it is an armature whose pose can be written (not in Edit Mode), else None."""
    obj = context.object
    if obj is None or obj.type != "ARMATURE" or obj.mode == "EDIT":
        return None
    return obj


def _unique_chain_name(settings, base: str) -> str:
    names = {chain.name for chain in settings.chains}
    if base not in names:
        return base
    index = 1
    while f"{base}.{index:03d}" in names:
        index += 1
    return f"{base}.{index:03d}"


# --------------------------------------------------------------------------- pose snapshots
def snapshot_rotations(obj, bone_names) -> list[tuple]:
    """The rotation channels of ``bone_names`` exactly as stored, for :func:`restore_rotations`."""
    out = []
    for name in dict.fromkeys(bone_names):
        pose_bone = obj.pose.bones.get(name)
        if pose_bone is not None:
            out.append((name, tuple(pose_bone.rotation_quaternion), tuple(pose_bone.rotation_euler),
                        tuple(pose_bone.rotation_axis_angle)))
    return out


def restore_rotations(obj, snapshot: list[tuple]) -> None:
    for name, quaternion, euler, axis_angle in snapshot:
        pose_bone = obj.pose.bones.get(name)
        if pose_bone is not None:
            pose_bone.rotation_quaternion = quaternion
            pose_bone.rotation_euler = euler
            pose_bone.rotation_axis_angle = axis_angle


# --------------------------------------------------------------------------- preferred pose
def capture_preferred_pose(obj, chain_settings, scene) -> None:
    """Store the chain's current pose as its preferred pose (RigError if the chain is unusable)."""
    rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    rotations = [basis_quaternion(obj.pose.bones[name]) for name in rig.bone_names]
    target = chain_settings.target
    parent = target.parent if target is not None else None
    root_world = root_matrices_world(obj, rig)
    chain_settings.preferred_pose.clear()
    for name, quaternion in zip(rig.bone_names, rotations):
        item = chain_settings.preferred_pose.add()
        item.bone_name = name
        item.rotation = quaternion
    chain_settings.preferred_root_world = root_world.T.reshape(-1)  # column-major, as Blender stores matrices
    parent_world = np.array(parent.matrix_world, dtype=float) if parent is not None else np.eye(4)
    chain_settings.preferred_target_parent_world = parent_world.T.reshape(-1)
    chain_settings.preferred_frame = scene.frame_current
    chain_settings.has_preferred_pose = True


# --------------------------------------------------------------------------- operators
class ActiveChainPoll:
    """Operators that act on the active chain: available when an armature (not in Edit Mode) has one."""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = posable_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        if obj.ik_solvers.active_chain is None:
            cls.poll_message_set("The armature has no IK chain")
            return False
        return True


class IK_SOLVERS_OT_chain_add(bpy.types.Operator):
    """Add an IK chain ending at the active bone, with a selected Empty as its target"""

    bl_idname = "ik_solvers.chain_add"
    bl_label = "Add IK Chain"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return posable_armature(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posable_armature(context)
        settings = obj.ik_solvers
        name = _unique_chain_name(settings, "Chain")
        chain = settings.chains.add()
        chain.name = name
        bone = obj.data.bones.active
        if bone is not None:
            chain.tip_bone = bone.name
            depth, parent = 1, bone.parent
            while parent is not None and depth < 2:
                depth, parent = depth + 1, parent.parent
            chain.chain_length = depth
        empties = [o for o in context.selected_objects if o.type == "EMPTY"]
        if empties:
            chain.target = empties[0]
        settings.active_chain_index = len(settings.chains) - 1
        try:
            capture_preferred_pose(obj, chain, context.scene)
        except RigError:
            pass  # no usable tip bone yet: the preferred pose is captured once the chain is set up
        return {"FINISHED"}


class IK_SOLVERS_OT_chain_remove(ActiveChainPoll, bpy.types.Operator):
    """Remove the active IK chain"""

    bl_idname = "ik_solvers.chain_remove"
    bl_label = "Remove IK Chain"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posable_armature(context)
        settings = obj.ik_solvers
        settings.chains.remove(settings.active_chain_index)
        settings.active_chain_index = max(0, min(settings.active_chain_index, len(settings.chains) - 1))
        return {"FINISHED"}


class IK_SOLVERS_OT_solve(bpy.types.Operator):
    """Solve the active IK chain (or all enabled chains) at the current frame and set the bones' rotations"""

    bl_idname = "ik_solvers.solve"
    bl_label = "Solve IK Chain"
    bl_options = {"REGISTER", "UNDO"}

    all_chains: BoolProperty(name="All Chains", description="Solve every enabled chain, in list order", default=False)

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = posable_armature(context)
        return obj is not None and len(obj.ik_solvers.chains) > 0

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posable_armature(context)
        settings = obj.ik_solvers
        if self.all_chains:
            chains = [chain for chain in settings.chains if chain.enabled]
        else:
            chains = [c for c in (settings.active_chain,) if c is not None]
        if not chains:
            self.report({"ERROR"}, "No IK chain to solve.")
            return {"CANCELLED"}
        try:
            outcomes = solve_chains(obj, chains, context.view_layer)
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        for chain, (status, error, lower_bound, iterations, pole_distance) in zip(chains, outcomes):
            chain.last_status = status
            chain.last_error = error
            chain.last_lower_bound = lower_bound
            chain.last_iterations = iterations
            chain.last_message = ""
            if pole_distance is not None:
                chain.last_pole_distance = pole_distance
        summary = ", ".join(f"{c.name}: {o[0]}" for c, o in zip(chains, outcomes))
        self.report({"INFO"}, f"Solved {summary}.")
        return {"FINISHED"}


def solve_chains(obj, chains, view_layer) -> list[tuple[str, float, float, int, float | None]]:
    """Solve and write ``chains`` one after another (each sees the ones before it posed).

    Returns per chain (status, error, lower bound, iterations, pole distance or None), errors in
    scene units, the pole distance (radians) for HI chains. On a RigError every rotation written
    so far is put back exactly before it propagates.
    """
    bone_names = []
    for chain in chains:
        try:
            bone_names += read_chain(obj, chain.tip_bone, chain.chain_length).bone_names
        except RigError as error:
            raise RigError(f"Chain '{chain.name}': {error}") from None
    snapshot = snapshot_rotations(obj, bone_names)
    outcomes = []
    try:
        for index, chain in enumerate(chains):
            if index:
                view_layer.update()  # the next chain reads its root from the pose just written
            prepared = solving.prepare_solve(obj, chain)
            outcome = solving.run_solve_full(prepared)
            result = outcome.result
            write_pose(obj, prepared.rig, result.q[0])
            error, lower_bound = solving.world_errors(prepared, result)
            pole_distance = None if outcome.hi is None else float(outcome.hi.pole_angles[0])
            outcomes.append((result.status[0].value, float(error[0]), float(lower_bound[0]),
                             int(result.iterations[0]), pole_distance))
    except RigError:
        restore_rotations(obj, snapshot)
        view_layer.update()
        raise
    return outcomes


class IK_SOLVERS_OT_capture_preferred_pose(ActiveChainPoll, bpy.types.Operator):
    """Store the chain's current pose as its preferred pose (the HI solver's reference)"""

    bl_idname = "ik_solvers.capture_preferred_pose"
    bl_label = "Capture Preferred Pose"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posable_armature(context)
        chain = obj.ik_solvers.active_chain
        try:
            capture_preferred_pose(obj, chain, context.scene)
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Captured the preferred pose of '{chain.name}'.")
        return {"FINISHED"}


classes = (
    IK_SOLVERS_OT_chain_add,
    IK_SOLVERS_OT_chain_remove,
    IK_SOLVERS_OT_solve,
    IK_SOLVERS_OT_capture_preferred_pose,
)
