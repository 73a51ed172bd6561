"""Every operator of the add-on (SPEC §6): chains, solve, preferred-pose capture, bake, live mode.

Operators only read the context, call the logic modules and turn an ``IKSolversError`` into one
short ``self.report`` sentence with the scene untouched; the logic modules never import this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import bpy
import numpy as np
from bpy.props import BoolProperty, IntProperty

from . import live, live_state, properties
from .body import goals_sentence, solve_body_pose, solves_together
from .chains import (
    capture_preferred_pose,
    chain_bones_changed,
    new_target_at_tip,
    set_up_new_chain,
    snap_target_to_tip,
    solve_chains,
    store_solve_outcome,
    unhonoured_settings,
)
from .checks import check_editable
from .errors import IKSolversError, chain_context, failure_sentence
from .identity import remember
from .root_space import uniform_scale
from .sampling import sample_inputs
from .solving import prepare_solve
from .spec import chain_spec
from .verify import evaluated_goal_excess, posed_tip_offset

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems

    from .properties import IK_SOLVERS_PG_chain, IK_SOLVERS_PG_settings

__all__ = ("capture_preferred_pose", "classes", "posable_armature", "register", "unregister")
"""``capture_preferred_pose`` is re-exported: ``tests/blender/test_ik_batch.py`` imports it from here."""


def posable_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object if it is an armature whose pose can be written (not in Edit Mode), else None."""
    obj = context.object
    if obj is None or obj.type != "ARMATURE" or obj.mode == "EDIT":
        return None
    return obj


def _unique_chain_name(settings: IK_SOLVERS_PG_settings, base: str) -> str:
    names = {chain.name for chain in settings.chains}
    if base not in names:
        return base
    index = 1
    while f"{base}.{index:03d}" in names:
        index += 1
    return f"{base}.{index:03d}"


# --------------------------------------------------------------------------- operators
class ActiveChainPoll:
    """Operators that act on the active chain: available when an armature (not in Edit Mode) has one."""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = posable_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")  # type: ignore[attr-defined]  # from the Operator this mixin goes with
            return False
        if obj.ik_solvers.active_chain is None:  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
            cls.poll_message_set("The armature has no IK chain")  # type: ignore[attr-defined]  # from the Operator this mixin goes with
            return False
        return True


class _ChainAdd:
    """What the chain-add operators share: the chain's length (redo panel) and where its target comes from."""

    chain_length: IntProperty(
        name="Chain Length", description="Bones in the chain, counted from the active bone up (at most as many as there are)",
        default=2, min=1, soft_max=32,
    )
    new_target: BoolProperty(
        name="New Target at Tip", description="Create an Empty at the tip bone's tail as the chain's target",
        default=False,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return posable_armature(context) is not None

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj, scene = posable_armature(context), context.scene
        assert obj is not None and scene is not None  # poll() found the armature in the scene
        try:
            check_editable(obj)
        except IKSolversError as error:
            self.report({"ERROR"}, str(error))  # type: ignore[attr-defined]  # from the Operator this mixin goes with
            return {"CANCELLED"}
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        name = _unique_chain_name(settings, "Chain")
        chain = settings.chains.add()
        chain.name = name
        bone = cast("bpy.types.Armature", obj.data).bones.active  # posable_armature: an armature
        if bone is not None:
            chain.tip_bone = bone.name
            chain.chain_length = min(int(self.chain_length), 1 + len(bone.parent_recursive))
        if self.new_target and bone is not None:
            chain.target = new_target_at_tip(context, obj, bone.name)
        else:
            empties = [o for o in context.selected_objects if o.type == "EMPTY"]
            if empties:
                chain.target = empties[0]
        settings.active_chain_index = len(settings.chains) - 1
        try:
            set_up_new_chain(obj, chain, scene)
        except Exception as error:  # the chain is not added, one sentence
            settings.chains.remove(len(settings.chains) - 1)
            settings.active_chain_index = max(0, len(settings.chains) - 1)
            self.report({"ERROR"}, failure_sentence(error))  # type: ignore[attr-defined]  # from the Operator this mixin goes with
            return {"CANCELLED"}
        if chain.setup_note:  # why not HI, or where a straight chain's bend direction came from
            self.report({"INFO"}, f"{chain.name}: {chain.setup_note}.")  # type: ignore[attr-defined]  # from the Operator this mixin goes with
        return {"FINISHED"}


class IK_SOLVERS_OT_chain_add(_ChainAdd, bpy.types.Operator):
    """Add an IK chain ending at the active bone, with a selected Empty as its target (HI, keeping
    the current pose and bend plane; SVD-adaptive DLS where HI cannot drive the chain)"""

    bl_idname = "ik_solvers.chain_add"
    bl_label = "Add IK Chain"
    bl_options = {"REGISTER", "UNDO"}


class IK_SOLVERS_OT_chain_add_with_target(_ChainAdd, bpy.types.Operator):
    """Add an IK chain ending at the active bone with a new Empty at its tip as the target (as
    Shift+I does): the first solve moves nothing"""

    bl_idname = "ik_solvers.chain_add_with_target"
    bl_label = "Add IK Chain with Target"
    bl_options = {"REGISTER", "UNDO"}

    new_target: BoolProperty(
        name="New Target at Tip", description="Create an Empty at the tip bone's tail as the chain's target",
        default=True,
    )


class IK_SOLVERS_OT_chain_remove(ActiveChainPoll, bpy.types.Operator):
    """Remove the active IK chain"""

    bl_idname = "ik_solvers.chain_remove"
    bl_label = "Remove IK Chain"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj = posable_armature(context)
        assert obj is not None  # poll() found it
        try:
            check_editable(obj)
        except IKSolversError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        settings.chains.remove(settings.active_chain_index)
        settings.active_chain_index = max(0, min(settings.active_chain_index, len(settings.chains) - 1))
        return {"FINISHED"}


class IK_SOLVERS_OT_solve(bpy.types.Operator):
    """Solve the active IK chain (or all enabled chains) at the current frame and set the bones' rotations"""

    bl_idname = "ik_solvers.solve"
    bl_label = "Solve IK Chain"
    bl_options = {"REGISTER", "UNDO"}

    all_chains: BoolProperty(name="All Chains", default=False,
                             description="Solve every enabled chain, in list order but each after the chains "
                                         "that move its parent bones")

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = posable_armature(context)
        return obj is not None and len(obj.ik_solvers.chains) > 0  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj, view_layer = posable_armature(context), context.view_layer
        assert obj is not None and view_layer is not None  # poll() found the armature in the view layer
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        if self.all_chains:
            chains = [chain for chain in settings.chains if chain.enabled]
        else:
            chains = [c for c in (settings.active_chain,) if c is not None]
        if not chains:
            self.report({"ERROR"}, "No IK chain to solve.")
            return {"CANCELLED"}
        if self.all_chains and solves_together(obj):
            return self._solve_body(obj, view_layer, chains)
        try:
            outcomes = solve_chains(obj, chains, view_layer)
        except Exception as error:  # one sentence, the pose already put back
            self.report({"ERROR"}, failure_sentence(error))
            return {"CANCELLED"}
        for chain, (result, prepared) in zip(chains, outcomes):
            store_solve_outcome(chain, result.status[0].value, "", result, prepared)
        summary = ", ".join(f"{c.name}: {result.status[0].value}" for c, (result, _) in zip(chains, outcomes))
        self.report({"INFO"}, f"Solved {summary}.")
        report_unhonoured(self, obj, chains)
        view_layer.update()
        for result, prepared in outcomes:
            self._report_overridden(prepared.spec.name, posed_tip_offset(obj, prepared.spec, prepared.rig, result.q[0]))
        return {"FINISHED"}

    def _solve_body(self, obj: bpy.types.Object, view_layer: bpy.types.ViewLayer,
                    chains: list[IK_SOLVERS_PG_chain]) -> set[OperatorReturnItems]:
        """Every enabled chain as one body (``solve_together``): one line with each goal's status."""
        try:
            spec, result = solve_body_pose(obj, view_layer)
        except Exception as error:  # one sentence, the pose already put back
            self.report({"ERROR"}, failure_sentence(error))
            return {"CANCELLED"}
        self.report({"INFO"}, goals_sentence(obj, result))
        report_unhonoured(self, obj, chains)
        scale = uniform_scale(np.array(obj.matrix_world, dtype=float))
        for chain, goal in zip(spec.specs, result.goals):  # solve_body_pose updated the view layer
            self._report_overridden(chain.name, evaluated_goal_excess(obj, chain, float(goal.error[0]) * scale))
        return {"FINISHED"}

    def _report_overridden(self, chain: str, offset: float | None) -> None:
        """One warning where Blender's evaluation moved the chain's tip ``offset`` from the solve's."""
        if offset is not None:
            self.report({"WARNING"}, f"'{chain}': Blender's evaluated tip differs from the solve by {offset:.3g}; "
                                     "a constraint, driver or NLA strip on the chain changes the solved pose.")


def report_unhonoured(operator: bpy.types.Operator, obj: bpy.types.Object, chains: list[IK_SOLVERS_PG_chain]) -> None:
    """A warning per Blender IK setting the add-on does not honour on the chains' bones."""
    for chain in chains:
        for sentence in unhonoured_settings(obj, chain):
            operator.report({"WARNING"}, f"Chain '{chain.name}': {sentence}")


class _ActiveChainAction(ActiveChainPoll):
    """An operator that does one thing to the active chain (:meth:`act`) and says so in one sentence."""

    def act(self, context: bpy.types.Context, obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain) -> str:
        """Do it (IKSolversError: nothing done); the sentence to report."""
        raise NotImplementedError

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj = posable_armature(context)
        assert obj is not None  # poll() found it
        chain = obj.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        try:
            message = self.act(context, obj, chain)
        except Exception as error:  # one sentence, never a traceback
            self.report({"ERROR"}, failure_sentence(error))  # type: ignore[attr-defined]  # from the Operator this mixin goes with
            return {"CANCELLED"}
        self.report({"INFO"}, message)  # type: ignore[attr-defined]  # from the Operator this mixin goes with
        return {"FINISHED"}


class IK_SOLVERS_OT_capture_preferred_pose(_ActiveChainAction, bpy.types.Operator):
    """Store the chain's current pose as its preferred pose (the HI solver's reference)"""

    bl_idname = "ik_solvers.capture_preferred_pose"
    bl_label = "Capture Preferred Pose"
    bl_options = {"REGISTER", "UNDO"}

    def act(self, context: bpy.types.Context, obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain) -> str:
        assert context.scene is not None  # poll() found the armature in the scene
        capture_preferred_pose(obj, chain, context.scene)
        return f"Captured the preferred pose of '{chain.name}'."


class IK_SOLVERS_OT_flip_bend_direction(_ActiveChainAction, bpy.types.Operator):
    """Bend the active chain's straight preferred pose the other way (negate its bend direction)"""

    bl_idname = "ik_solvers.flip_bend_direction"
    bl_label = "Flip Bend Direction"
    bl_options = {"REGISTER", "UNDO"}

    def act(self, context: bpy.types.Context, obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain) -> str:
        check_editable(obj)
        chain.bend_direction = [-component for component in chain.bend_direction]
        return f"Flipped the bend direction of '{chain.name}'."


class IK_SOLVERS_OT_snap_target_to_tip(_ActiveChainAction, bpy.types.Operator):
    """Move the active chain's target (or its target bone) to the tip of the chain as it is posed now (FK to IK)"""

    bl_idname = "ik_solvers.snap_target_to_tip"
    bl_label = "Snap Target to Tip"
    bl_options = {"REGISTER", "UNDO"}

    def act(self, context: bpy.types.Context, obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain) -> str:
        assert context.view_layer is not None  # poll() found the armature in the view layer
        context.view_layer.update()  # the tip where the current pose puts it
        snap_target_to_tip(obj, chain)
        return f"Moved the target of '{chain.name}' to its tip."


class IK_SOLVERS_OT_live_toggle(ActiveChainPoll, bpy.types.Operator):
    """Turn live mode on or off for the active chain: re-solve whenever its target moves or the frame changes"""

    bl_idname = "ik_solvers.live_toggle"
    bl_label = "Toggle Live IK"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj, scene = context.object, context.scene
        assert obj is not None and scene is not None  # poll() found the armature in the scene
        chain = obj.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        if chain.use_live:
            chain.use_live = False
            live_state.forget(obj, chain.name)
            self.report({"INFO"}, f"Live IK off for '{chain.name}'.")
            return {"FINISHED"}
        try:
            with chain_context(chain.name):
                spec = chain_spec(obj, chain)
                prepare_solve(spec, sample_inputs(obj, spec))  # refuse a chain that cannot solve now
        except Exception as error:  # one sentence, never a traceback
            self.report({"ERROR"}, failure_sentence(error))
            return {"CANCELLED"}
        chain.use_live = True
        chain.last_message = ""
        # Setting use_live is an update of the armature: the depsgraph handler may have solved the chain
        # already while the depsgraph was evaluated, and then this call finds nothing new to solve.
        live.update_live_chains(scene, context.evaluated_depsgraph_get(), force=False)
        if not chain.use_live:  # the first live solve failed and turned it off again
            self.report({"ERROR"}, chain.last_message)
            return {"CANCELLED"}
        remember(obj, chain, spec.bone_names)
        self.report({"INFO"}, f"Live IK on for '{chain.name}'.")
        return {"FINISHED"}


classes = (
    IK_SOLVERS_OT_chain_add,
    IK_SOLVERS_OT_chain_add_with_target,
    IK_SOLVERS_OT_chain_remove,
    IK_SOLVERS_OT_flip_bend_direction,
    IK_SOLVERS_OT_solve,
    IK_SOLVERS_OT_capture_preferred_pose,
    IK_SOLVERS_OT_snap_target_to_tip,
    IK_SOLVERS_OT_live_toggle,
)

_register_classes: Callable[[], None]
_unregister_classes: Callable[[], None]
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)  # type: ignore[func-returns-value, misc]  # stub: returns None


def register() -> None:
    """Register the operators and set chains up again when their length changes."""
    _register_classes()
    if chain_bones_changed not in properties.chain_bones_listeners:
        properties.chain_bones_listeners.append(chain_bones_changed)


def unregister() -> None:
    """Stop listening to chain lengths and unregister the operators."""
    if chain_bones_changed in properties.chain_bones_listeners:
        properties.chain_bones_listeners.remove(chain_bones_changed)
    _unregister_classes()
