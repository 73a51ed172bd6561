"""Settings stored on the armature object: ``Object.ik_solvers.chains`` (SPEC §6), and the one table
of the chain settings a solve reads (:data:`SOLVE_SETTINGS`).

The properties' annotations are evaluated (no ``from __future__ import annotations``): the table's
settings get their ``update`` hook from the table itself, after the classes are defined.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core import METHOD_FACTS, Method, ParentSpace

METHOD_ITEMS = tuple((method.value, facts.label, facts.description) for method, facts in METHOD_FACTS.items())
"""Enum items from ``core.METHOD_FACTS``; identifiers are ``ik_solvers.core.Method`` values."""

ZERO_PLANE_MAP_ITEMS = (
    ("DEFAULT", "Default", "Zero plane from the preferred pose's solver plane, carried along meridians"),
    ("POLE_OBJECT", "Pole Object", "Zero plane through the pole target"),
)

PARENT_SPACE_ITEMS = (
    ("START_JOINT", "Start Joint", "The swivel sphere rides with the start joint's parent"),
    ("IK_TARGET", "IK Target", "The swivel sphere rides with the IK target's parent"),
)

ITERATIVE_METHODS = frozenset(method.value for method, facts in METHOD_FACTS.items() if facts.iterative)
"""Methods that use ``max_iterations`` and ``tolerance``."""


@dataclass(frozen=True)
class SolveSetting:
    """One chain setting a solve reads, and how it enters the chain spec (``spec.chain_spec``).

    Attributes
    ----------
    name : str
        The property of ``IK_SOLVERS_PG_chain``.
    enters : str
        The ``ChainSpec`` field it makes: ``'options'`` (a ``SolveOptions`` field, :attr:`option`),
        ``'reference'`` (the reference pose), else the spec's field of that name.
    convert : callable
        The spec's value from the stored one (ValueError: the stored value is not a known one).
    option : str or None
        The ``SolveOptions`` field, for ``enters == 'options'``.
    per_scene_unit : bool
        A distance in scene units: divided by the armature's scale (root-space units).
    per_frame : bool
        Animatable: sampling reads it at every frame (``ChainSpec.per_frame_value``).
    items : tuple of str
        For a collection: the item properties read (each item's, in order).
    """

    name: str
    enters: str
    convert: Callable[[Any], Any] = lambda value: value
    option: str | None = None
    per_scene_unit: bool = False
    per_frame: bool = False
    items: tuple[str, ...] = ()


def _or_none(value: float) -> float | None:
    """0 means "not set" (automatic step, no step limit)."""
    return float(value) or None


def _direction_or_none(value: Any) -> tuple[float, float, float] | None:
    """The zero vector means "not set" (the preferred pose's own plane)."""
    x, y, z = (float(component) for component in value)
    return (x, y, z) if x or y or z else None


SOLVE_SETTINGS: tuple[SolveSetting, ...] = (
    SolveSetting("name", "name", str),
    SolveSetting("tip_bone", "tip_bone", str),
    SolveSetting("chain_length", "chain_length", int),
    SolveSetting("target", "target"),
    SolveSetting("target_bone", "target_bone", str),
    SolveSetting("pole_target", "pole"),
    SolveSetting("method", "method", Method),
    SolveSetting("max_iterations", "options", int, option="max_iterations"),
    SolveSetting("tolerance", "options", float, option="tolerance", per_scene_unit=True),
    SolveSetting("max_step_angle", "options", _or_none, option="max_step_angle"),
    SolveSetting("step", "options", _or_none, option="step"),
    SolveSetting("damping", "options", float, option="damping", per_scene_unit=True),
    SolveSetting("reference_weight", "options", float, option="reference_weight"),
    SolveSetting("swivel_angle", "swivel_angle", float, per_frame=True),
    SolveSetting("influence", "influence", float, per_frame=True),
    SolveSetting("use_rotation", "use_rotation", bool),
    SolveSetting("rotation_weight", "rotation_weight", float),
    SolveSetting("zero_plane_map", "zero_plane_map", str),
    SolveSetting("parent_space", "parent_space", ParentSpace),
    SolveSetting("flip_threshold", "flip_threshold", float),
    SolveSetting("bend_direction", "bend_direction", _direction_or_none),
    SolveSetting("has_preferred_pose", "reference", bool),
    SolveSetting("preferred_pose", "reference", items=("bone_name", "rotation")),
)
"""Every chain setting a solve reads, once: ``spec.chain_spec`` builds the spec from it, each gets
the ``update`` hook below, and live mode tells a changed setting by ``spec.settings_key``."""

solve_setting_listeners: list[Callable[[], None]] = []
"""Called when a setting of :data:`SOLVE_SETTINGS` (or ``use_live``) changes: live mode adds its
own at register time (this module imports nothing of live mode)."""


chain_bones_listeners: list[Callable[[bpy.types.PropertyGroup, bpy.types.Context], None]] = []
"""Called with the chain's settings when its ``tip_bone`` or ``chain_length`` changed, before the
solve-setting listeners: the operators module adds the chain's set-up again (this module imports
nothing of it)."""

CHAIN_BONE_SETTINGS = ("tip_bone", "chain_length")
"""The settings that choose the chain's bones."""


def _chain_bones_changed(settings: bpy.types.PropertyGroup, context: bpy.types.Context) -> None:
    for listener in chain_bones_listeners:
        listener(settings, context)
    _solve_setting_changed(settings, context)


def _solve_setting_changed(_settings: bpy.types.PropertyGroup, _context: bpy.types.Context) -> None:
    """A setting a chain's solve reads changed: tell the listeners (live mode forgets its quick path).

    These settings change without any depsgraph update of their own, so live mode's quick path
    (which a target move takes) would not see the change otherwise.
    """
    for listener in solve_setting_listeners:
        listener()


class IK_SOLVERS_PG_preferred_bone(bpy.types.PropertyGroup):
    """One bone's rotation in the captured preferred pose."""

    bone_name: StringProperty(name="Bone", description="Bone whose rotation this is")
    rotation: FloatVectorProperty(
        name="Rotation",
        description="The bone's pose rotation (quaternion w, x, y, z) relative to its rest orientation",
        size=4,
        default=(1.0, 0.0, 0.0, 0.0),
        subtype="QUATERNION",
    )


class IK_SOLVERS_PG_chain(bpy.types.PropertyGroup):
    """One IK chain: bones, target, method and its parameters, HI settings, last-solve status."""

    name: StringProperty(name="Name", description="Name of the chain", default="Chain")
    enabled: BoolProperty(name="Enabled", description="Solve this chain when solving all chains", default=True)
    tip_bone: StringProperty(
        name="Tip Bone", description="Last bone of the chain; its tail reaches for the target",
    )
    chain_length: IntProperty(
        name="Chain Length", description="Number of bones in the chain, counted from the tip bone up",
        default=2, min=1, soft_max=32,
    )
    target: PointerProperty(
        name="Target", description="Object whose location the tip reaches for (an armature: its Target Bone's head)",
        type=bpy.types.Object,
    )
    target_bone: StringProperty(
        name="Target Bone",
        description="Bone of the target armature whose head the tip reaches for (as the IK constraint's bone); "
        "empty: the armature object's origin",
    )
    # SDLS by default: as accurate as DLS on reachable targets, and unlike fixed damping it
    # reaches the lower bound quickly when the target is out of reach (docs/solver-race.md).
    method: EnumProperty(
        name="Method", description="IK method", items=METHOD_ITEMS, default=Method.SDLS.value,
    )
    max_iterations: IntProperty(
        name="Max Iterations", description="Iteration budget of the iterative methods", default=100, min=1,
        soft_max=1000,
    )
    tolerance: FloatProperty(
        name="Tolerance", description="Distance from tip to target counted as reached (scene units)",
        default=1e-6, min=1e-9, soft_max=0.01, precision=7, subtype="DISTANCE",
    )
    step: FloatProperty(
        name="Step",
        description="Jacobian transpose step size / pseudo-inverse step scale; 0 chooses it automatically",
        default=0.0, min=0.0, soft_max=10.0, precision=4,
    )
    damping: FloatProperty(
        name="Damping", description="Damped least squares damping (scene units)", default=0.05, min=1e-6,
        soft_max=1.0, precision=4,
    )
    max_step_angle: FloatProperty(
        name="Max Step Angle", description="Largest turn of any joint in one iteration; 0 means no limit",
        default=0.5, min=0.0, max=math.pi, subtype="ANGLE",
    )
    reference_weight: FloatProperty(
        name="Reference Weight",
        description=(
            "Pull toward the reference pose (the captured preferred pose, else the rest pose) where the "
            "target leaves the chain freedom; 0 turns it off. Keeps knees and elbows bending their rest way"
        ),
        default=0.0, min=0.0, soft_max=1.0, precision=3,
    )
    swivel_angle: FloatProperty(
        name="Swivel Angle", description="Rotation of the solver plane about the start-to-target axis",
        default=0.0, subtype="ANGLE", options={"ANIMATABLE"},
    )
    influence: FloatProperty(
        name="Influence",
        description=(
            "Blend between the FK pose (the chain's rotations at the frame before the solve writes them) and "
            "the solve, per joint, as the IK constraint's Influence: 0 keeps the FK pose, 1 is the solve"
        ),
        default=1.0, min=0.0, max=1.0, subtype="FACTOR", options={"ANIMATABLE"},
    )
    use_rotation: BoolProperty(
        name="Rotation",
        description=(
            "The tip bone also takes the target's orientation (its axes the target's axes, as the IK "
            "constraint's Rotation): HI solves the others to the tip bone's head and aligns it, the "
            "Jacobian methods weigh the orientation by Rotation Weight"
        ),
        default=False,
    )
    rotation_weight: FloatProperty(
        name="Rotation Weight",
        description=(
            "Jacobian methods: weight of the orientation error against the position error, a radian counting "
            "as the chain's length; HI aligns the tip bone exactly"
        ),
        default=1.0, min=0.0, soft_max=10.0, precision=3,
    )
    zero_plane_map: EnumProperty(
        name="Zero-Plane Map", description="How the zero solver plane follows the target", items=ZERO_PLANE_MAP_ITEMS,
        default="DEFAULT",
    )
    pole_target: PointerProperty(
        name="Pole Target", description="Object the solver plane passes through (Pole Object map)",
        type=bpy.types.Object,
    )
    parent_space: EnumProperty(
        name="Parent Space", description="What the swivel sphere rides with", items=PARENT_SPACE_ITEMS,
        default="START_JOINT",
    )
    flip_threshold: FloatProperty(
        name="Flip Threshold", description="Warn when the start-to-target axis is closer than this to a pole",
        default=math.radians(10.0), min=0.0, max=math.pi / 2, subtype="ANGLE",
    )
    bend_direction: FloatVectorProperty(
        name="Bend Direction",
        description="Where the middle joints (knee, elbow) move when a straight chain bends, in the start "
        "bone's rest axes (HI; zero: none; a bent preferred pose bends its own way)",
        size=3, default=(0.0, 0.0, 0.0), subtype="XYZ",
    )
    setup_note: StringProperty(
        name="Set-up Note", description="How the chain was set up: why HI could not drive it, or where its "
        "bend direction came from", default="",
    )
    # Chain identity (identity.py): a uuid tagging the chain's bones and their names when remembered.
    chain_id: StringProperty(name="Chain ID", description="Identifies the chain in its bones' tags")
    chain_bones: StringProperty(name="Chain Bones", description="The chain's bones, start to tip, as remembered (JSON)")
    # Not read by a solve but by live mode (which chains it solves): toggled, the quick path is forgotten.
    use_live: BoolProperty(
        name="Live", description="Re-solve when the target moves or the frame changes", default=False,
        update=_solve_setting_changed,
    )

    # The body solve (SPEC §8): read by blender/body.py only when the armature solves its chains together.
    # Not in SOLVE_SETTINGS (no ChainSpec field); the hook tells live mode's listeners all the same.
    weight: FloatProperty(
        name="Weight", description="How hard this chain's goal pulls in a body solve (1: reach it whenever possible)",
        default=1.0, min=0.0, max=1.0, subtype="FACTOR", update=_solve_setting_changed,
    )
    priority: IntProperty(
        name="Priority", description="Body solve: higher goals are met first, lower ones in what they leave free "
        "(feet over hips over hands)", default=0, soft_min=-10, soft_max=10, update=_solve_setting_changed,
    )
    last_goal_status: StringProperty(
        name="Goal Status", description="Body solve: the goal's status at the last solve (reached, limited, out of reach)",
        default="",
    )

    # The preferred pose: per-bone rotations at capture time (the HI solver's and every method's reference).
    has_preferred_pose: BoolProperty(name="Has Preferred Pose", default=False)
    preferred_pose: CollectionProperty(type=IK_SOLVERS_PG_preferred_bone)
    preferred_frame: IntProperty(name="Captured At Frame", description="Scene frame the preferred pose was captured on")

    # Last solve (written by the operators; drawn read-only).
    last_status: StringProperty(name="Status", description="Status of the last solve", default="")
    last_message: StringProperty(name="Message", description="Problem met by the last solve, if any", default="")
    last_error: FloatProperty(name="Error", description="Tip-to-target distance after the last solve", subtype="DISTANCE", precision=7)
    last_lower_bound: FloatProperty(
        name="Lower Bound", description="Least possible tip-to-target distance for the last target", subtype="DISTANCE",
        precision=7,
    )
    last_orientation_error: FloatProperty(
        name="Orientation Error", description="Angle between the tip bone's and the target's orientation after "
        "the last solve (with Rotation)", subtype="ANGLE", precision=4,
    )
    last_iterations: IntProperty(name="Iterations", description="Iterations the last solve used")
    last_pole_distance: FloatProperty(
        name="Pole Distance", description="Angle between the start-to-target axis and the nearer pole (HI)",
        subtype="ANGLE", default=math.pi / 2,
    )

    # Last bake (written by ik_solvers.bake).
    last_bake_report: StringProperty(name="Bake Report", description="Per-frame report of the last bake (JSON)")
    bake_frames: IntProperty(name="Frames", description="Frames solved by the last bake")
    bake_converged: IntProperty(name="Converged", description="Frames that reached the target")
    bake_unreachable: IntProperty(name="Unreachable", description="Frames out of reach, error at the lower bound")
    bake_budget_exhausted: IntProperty(name="Budget Exhausted", description="Frames that ran out of iterations")
    bake_stalled: IntProperty(name="Stalled", description="Frames that stopped making progress")
    bake_diverged: IntProperty(name="Diverged", description="Frames whose error grew")
    bake_solver_limit: IntProperty(
        name="Solver Limit", description="Frames the method left above the geometric bound, at its own reach")
    bake_max_excess: FloatProperty(
        name="Max Excess", description="Largest error above the lower bound over the baked frames",
        subtype="DISTANCE", precision=7,
    )
    bake_max_orientation_error: FloatProperty(
        name="Max Orientation Error", description="Largest angle between the tip bone's and the target's "
        "orientation over the baked frames (with Rotation)", subtype="ANGLE", precision=4,
    )
    bake_flip_frames: IntProperty(name="Flip Frames", description="Frames where the solver plane flipped")
    bake_against_bend_frames: IntProperty(
        name="Against Bend Frames",
        description="HI frames with a joint bent against its preferred way (targets near the start joint)")
    bake_mismatch_frames: IntProperty(
        name="Mismatch Frames",
        description="Frames where Blender's evaluation of the baked keys differs from the solve (constraints, drivers)",
    )
    bake_evaluated_error: FloatProperty(
        name="Evaluated Error",
        description="Largest error over the lower bound in Blender's own evaluation of the baked keys",
        subtype="DISTANCE", precision=7,
    )
    bake_keys_before: IntProperty(
        name="Keys Before", description="Rotation keys of the chain's bones before the last bake's key reduction "
        "(every curve counted; 0: keys not reduced)")
    bake_keys_after: IntProperty(name="Keys After", description="Rotation keys kept by the last bake's key reduction")
    bake_key_error: FloatProperty(name="Key Error", description="The bound of the last bake's reduced keys",
                                  subtype="DISTANCE", precision=7)
    bake_reduced_max_error: FloatProperty(
        name="Reduced Max Error", description="Largest world distance of the chain's joints and tip, as Blender "
        "evaluates the reduced keys, from the unreduced bake", subtype="DISTANCE", precision=7)
    bake_reduced_error_p99: FloatProperty(
        name="Reduced Error p99", description="99th percentile over the frames of that distance",
        subtype="DISTANCE", precision=7)


def _hook_solve_settings() -> None:
    """Give every setting of :data:`SOLVE_SETTINGS` the ``update`` hook (collections: their items')."""
    for setting in SOLVE_SETTINGS:
        owner: Any = IK_SOLVERS_PG_chain
        names: tuple[str, ...] = (setting.name,)
        if setting.items:  # a collection: its items' properties (the collection has no update hook)
            owner, names = owner.__annotations__[setting.name].keywords["type"], setting.items
        for name in names:
            prop = owner.__annotations__[name]
            update = _chain_bones_changed if name in CHAIN_BONE_SETTINGS else _solve_setting_changed
            owner.__annotations__[name] = prop.function(**{**prop.keywords, "update": update})


_hook_solve_settings()


class IK_SOLVERS_PG_settings(bpy.types.PropertyGroup):
    """All IK chains of an armature object (``Object.ik_solvers``)."""

    chains: CollectionProperty(name="Chains", type=IK_SOLVERS_PG_chain)
    active_chain_index: IntProperty(name="Active Chain", default=0, min=0)
    solve_together: BoolProperty(
        name="Solve Together",
        description="Solve and bake every enabled chain as one body (SPEC §8): goals by weight and priority, "
        "the body root carried along",
        default=False, update=_solve_setting_changed,
    )
    body_root: StringProperty(
        name="Body Root",
        description="Bone whose location and rotation the body solve may move (Rigify's hips: spine); "
        "empty: it stays put",
        default="", update=_solve_setting_changed,
    )

    @property
    def active_chain(self) -> IK_SOLVERS_PG_chain | None:
        if 0 <= self.active_chain_index < len(self.chains):
            return self.chains[self.active_chain_index]
        return None


classes = (IK_SOLVERS_PG_preferred_bone, IK_SOLVERS_PG_chain, IK_SOLVERS_PG_settings)

_register_classes: Callable[[], None]
_unregister_classes: Callable[[], None]
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)  # type: ignore[func-returns-value, misc]  # stub: returns None


def register() -> None:
    """Register the settings classes and add ``Object.ik_solvers``."""
    _register_classes()
    bpy.types.Object.ik_solvers = PointerProperty(type=IK_SOLVERS_PG_settings)  # type: ignore[attr-defined, func-returns-value]  # a runtime property; stub: PointerProperty returns None


def unregister() -> None:
    """Remove ``Object.ik_solvers`` and unregister the settings classes."""
    del bpy.types.Object.ik_solvers  # type: ignore[attr-defined]  # registered at runtime
    _unregister_classes()
