"""The sidebar panel View3D › Sidebar › "IK": chain list, method settings, HI section, status (SPEC §6)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import bpy

from ..core import METHOD_FACTS
from .chains import method_reason, unhonoured_settings
from .properties import ITERATIVE_METHODS, METHOD_ITEMS

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import RegionTypeItems, SpaceTypeItems

    from .properties import IK_SOLVERS_PG_chain

BAKE_OPERATOR = "ik_solvers.bake"
LIVE_OPERATOR = "ik_solvers.live_toggle"

STEP_METHODS = frozenset(method.value for method, facts in METHOD_FACTS.items() if facts.uses_step)
DAMPING_METHODS = frozenset(method.value for method, facts in METHOD_FACTS.items() if facts.uses_damping)
METHODS_WITH_SETTINGS = ITERATIVE_METHODS | STEP_METHODS | DAMPING_METHODS | {"ANALYTIC"}
"""Methods the Method Settings subpanel draws something for (the analytic method: its pole target)."""
METHOD_NAMES = {identifier: name for identifier, name, _ in METHOD_ITEMS}


def _armature(context: bpy.types.Context) -> bpy.types.Object | None:
    obj = context.object
    return obj if obj is not None and obj.type == "ARMATURE" else None


def _active_chain(context: bpy.types.Context) -> IK_SOLVERS_PG_chain | None:
    obj = _armature(context)
    return None if obj is None else obj.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)


def pole_warning(chain: IK_SOLVERS_PG_chain) -> str | None:
    """The flip warning for the last solve, or None: the EE axis came within the flip threshold of a pole."""
    if chain.method != "HI" or not chain.last_status:
        return None
    if chain.last_pole_distance < chain.flip_threshold:
        return f"Target axis {math.degrees(chain.last_pole_distance):.1f}° from a pole: the plane may flip"
    return None


class IK_SOLVERS_UL_chains(bpy.types.UIList):
    """The armature's IK chains."""

    def draw_item(self, context: bpy.types.Context, layout: bpy.types.UILayout, data: Any, item: IK_SOLVERS_PG_chain,  # type: ignore[override]  # stub: index, flt_flag required; Blender passes them only if taken
                  icon: int | None, active_data: Any, active_propname: str | None, index: int | None = 0) -> None:
        row = layout.row(align=True)
        row.prop(item, "enabled", text="")
        row.prop(item, "name", text="", emboss=False)
        row.label(text=METHOD_NAMES.get(item.method, item.method))


class _SidebarPanel:
    bl_space_type: SpaceTypeItems = "VIEW_3D"
    bl_region_type: RegionTypeItems = "UI"
    bl_category = "IK"


class _ChainSubpanel(_SidebarPanel):
    """A subpanel of the IK panel about the active chain: shown only when there is one."""

    bl_parent_id = "VIEW3D_PT_ik_solvers"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _active_chain(context) is not None


class VIEW3D_PT_ik_solvers(_SidebarPanel, bpy.types.Panel):
    """IK chains of the active armature."""

    bl_label = "IK Solvers"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _armature(context) is not None

    def draw(self, context: bpy.types.Context) -> None:
        layout, obj = self.layout, _armature(context)
        assert layout is not None and obj is not None  # Blender sets the layout to draw in; poll() found the armature
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        row = layout.row()
        row.template_list("IK_SOLVERS_UL_chains", "", settings, "chains", settings, "active_chain_index", rows=3)
        buttons = row.column(align=True)
        buttons.operator("ik_solvers.chain_add", icon="ADD", text="")
        buttons.operator("ik_solvers.chain_add_with_target", icon="EMPTY_AXIS", text="")
        buttons.operator("ik_solvers.chain_remove", icon="REMOVE", text="")
        chain = _active_chain(context)
        if chain is None:
            layout.label(text="Add a chain: select its tip bone and target Empty first")
            return
        layout.use_property_split = True
        col = layout.column()
        col.prop_search(chain, "tip_bone", obj.data, "bones")
        col.prop(chain, "chain_length")
        col.prop(chain, "target")
        if chain.target is not None and chain.target.type == "ARMATURE":
            col.prop_search(chain, "target_bone", chain.target.data, "bones", text="Bone")
        col.prop(chain, "influence", slider=True)
        col.prop(chain, "use_rotation")
        if chain.use_rotation and chain.method != "HI":
            col.prop(chain, "rotation_weight")
        col.prop(chain, "method")
        col.label(text=method_reason(chain), icon="INFO")
        for sentence in unhonoured_settings(obj, chain):
            col.label(text=sentence, icon="ERROR")
        row = layout.row(align=True)
        row.operator("ik_solvers.solve", icon="CON_KINEMATIC").all_chains = False
        row.operator("ik_solvers.solve", text="Solve All").all_chains = True
        row = layout.row(align=True)
        row.operator(BAKE_OPERATOR, icon="KEYINGSET")
        row.operator(LIVE_OPERATOR, text="Live", icon="PLAY", depress=chain.use_live)
        row.operator("ik_solvers.capture_preferred_pose", icon="ARMATURE_DATA")
        layout.operator("ik_solvers.snap_target_to_tip", icon="SNAP_ON")


class VIEW3D_PT_ik_solvers_method(_ChainSubpanel, bpy.types.Panel):
    """Parameters of the active chain's method (hidden for a method without any, such as HI)."""

    bl_label = "Method Settings"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        chain = _active_chain(context)
        return chain is not None and chain.method in METHODS_WITH_SETTINGS

    def draw(self, context: bpy.types.Context) -> None:
        layout, chain = self.layout, _active_chain(context)
        assert layout is not None and chain is not None  # Blender sets the layout to draw in; poll() found the chain
        layout.use_property_split = True
        method = chain.method
        col = layout.column()
        if method in ITERATIVE_METHODS:
            col.prop(chain, "max_iterations")
            col.prop(chain, "tolerance")
            col.prop(chain, "max_step_angle")
        if method in STEP_METHODS:
            col.prop(chain, "step")
        if method in DAMPING_METHODS:
            col.prop(chain, "damping")
        if method in ITERATIVE_METHODS:
            col.prop(chain, "reference_weight")
        if method == "ANALYTIC":
            col.prop(chain, "pole_target")


class VIEW3D_PT_ik_solvers_hi(_ChainSubpanel, bpy.types.Panel):
    """HI solver: swivel angle, zero-plane map, pole, parent space, bend direction, flip warning."""

    bl_label = "HI Solver"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        chain = _active_chain(context)
        return chain is not None and chain.method == "HI"

    def draw(self, context: bpy.types.Context) -> None:
        layout, chain = self.layout, _active_chain(context)
        assert layout is not None and chain is not None  # Blender sets the layout to draw in; poll() found the chain
        layout.use_property_split = True
        col = layout.column()
        col.prop(chain, "swivel_angle")
        col.prop(chain, "zero_plane_map")
        col.prop(chain, "pole_target")
        col.prop(chain, "parent_space")
        col.prop(chain, "flip_threshold")
        row = col.row(align=True)
        row.prop(chain, "bend_direction")
        row.operator("ik_solvers.flip_bend_direction", text="", icon="ARROW_LEFTRIGHT")
        if chain.setup_note:
            col.label(text=chain.setup_note, icon="INFO")
        if not chain.has_preferred_pose:
            col.label(text="No preferred pose: capture one", icon="INFO")
        warning = pole_warning(chain)
        if warning is not None:
            box = layout.box()
            box.alert = True
            box.label(text=warning, icon="ERROR")


class VIEW3D_PT_ik_solvers_status(_ChainSubpanel, bpy.types.Panel):
    """The last solve's and the last bake's outcome."""

    bl_label = "Status"

    def draw(self, context: bpy.types.Context) -> None:
        layout, chain = self.layout, _active_chain(context)
        assert layout is not None and chain is not None  # Blender sets the layout to draw in; poll() found the chain
        col = layout.column(align=True)
        if not chain.last_status:
            if not chain.bake_frames:
                col.label(text="Not solved yet")
        else:
            col.label(text=f"Status: {chain.last_status.replace('_', ' ').title()}")
            col.label(text=f"Error: {chain.last_error:.3g}  (lower bound {chain.last_lower_bound:.3g})")
            col.label(text=f"Iterations: {chain.last_iterations}")
            if chain.use_rotation:
                col.label(text=f"Orientation error: {math.degrees(chain.last_orientation_error):.3g}°")
            if chain.method == "HI":
                col.label(text=f"Pole distance: {math.degrees(chain.last_pole_distance):.1f}°")
        if chain.last_message:
            col.label(text=chain.last_message, icon="ERROR")
        if chain.bake_frames:
            box = layout.box()
            box.label(text=f"Last bake: {chain.bake_frames} frames")
            counts = (
                ("Converged", chain.bake_converged), ("Unreachable", chain.bake_unreachable),
                ("Budget exhausted", chain.bake_budget_exhausted), ("Stalled", chain.bake_stalled),
                ("Diverged", chain.bake_diverged), ("At the solver's limit", chain.bake_solver_limit),
            )
            for label, count in counts:
                if count:
                    box.label(text=f"{label}: {count}")
            box.label(text=f"Max error over lower bound: {chain.bake_max_excess:.3g}")
            if chain.use_rotation:
                box.label(text=f"Max orientation error: {math.degrees(chain.bake_max_orientation_error):.3g}°")
            if chain.bake_keys_before:
                box.label(text=f"Reduced keys: {chain.bake_keys_before} → {chain.bake_keys_after} "
                               f"({chain.bake_keys_after / chain.bake_keys_before:.1%})")
                box.label(text=f"World error max {chain.bake_reduced_max_error:.3g}, p99 "
                               f"{chain.bake_reduced_error_p99:.3g} (bound {chain.bake_key_error:.3g})")
            if chain.bake_flip_frames:
                box.label(text=f"Plane flips: {chain.bake_flip_frames} frame(s)", icon="ERROR")
            if chain.bake_against_bend_frames:
                box.label(text=f"Bent against the preferred way: {chain.bake_against_bend_frames} frame(s)", icon="INFO")
            if chain.bake_mismatch_frames:
                alert = box.column(align=True)
                alert.alert = True
                alert.label(text=f"Blender's evaluation differs at {chain.bake_mismatch_frames} frame(s)", icon="ERROR")
                alert.label(text=f"Evaluated error over lower bound: {chain.bake_evaluated_error:.3g}")


class VIEW3D_PT_ik_solvers_body(_SidebarPanel, bpy.types.Panel):
    """The body solve (SPEC §8): solve the enabled chains together, the body root, each goal's weight,
    priority and last status."""

    bl_label = "Body"
    bl_parent_id = "VIEW3D_PT_ik_solvers"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = _armature(context)
        return obj is not None and len(obj.ik_solvers.chains) > 0  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)

    def draw(self, context: bpy.types.Context) -> None:
        layout, obj = self.layout, _armature(context)
        assert layout is not None and obj is not None  # Blender sets the layout to draw in; poll() found the armature
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        layout.prop(settings, "solve_together")
        col = layout.column()
        col.active = settings.solve_together
        col.prop_search(settings, "body_root", obj.pose, "bones", text="Root")
        for chain in settings.chains:
            if not chain.enabled:
                continue
            row = col.row(align=True)
            row.label(text=chain.name)
            row.prop(chain, "weight", text="")
            row.prop(chain, "priority", text="")
            status = chain.last_goal_status.replace("_", " ").title() if chain.last_goal_status else "—"
            row.label(text=status, icon="CHECKMARK" if chain.last_goal_status == "REACHED" else "NONE")


classes = (
    IK_SOLVERS_UL_chains,
    VIEW3D_PT_ik_solvers,
    VIEW3D_PT_ik_solvers_method,
    VIEW3D_PT_ik_solvers_hi,
    VIEW3D_PT_ik_solvers_status,
    VIEW3D_PT_ik_solvers_body,
)

register, unregister = bpy.utils.register_classes_factory(classes)  # type: ignore[func-returns-value, misc]  # stub: returns None
