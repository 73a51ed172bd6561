"""The chain spec: a chain's settings and rig packed once, at the edge, into a frozen value.

Everything downstream (the solve operator, live mode, the bake and ``scripts/ik_batch.py``) takes a
:class:`ChainSpec`, never the settings PropertyGroup. The spec is built from the settings
``properties.SOLVE_SETTINGS`` lists, each as that table says it enters the spec; a spec keeps what it
was built from (:attr:`ChainSpec.source`), so live mode builds it again only when that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import bpy
import numpy as np

from ..core import (
    METHOD_FACTS,
    IKInputError,
    JointKind,
    Method,
    ParentSpace,
    PreferredPose,
    SolveOptions,
    hi_preferred_pose,
)
from ..core.hi.orientation import MIN_SPLIT_JOINTS
from .checks import check_editable, check_target_bone_independent, check_target_independent, constraint_limits_hold
from .errors import IKSolversError, chain_context
from .identity import check_bones, follow_renamed_tip
from .properties import SOLVE_SETTINGS, SolveSetting
from .rig import RigChain, joint_variables_from_quaternions, read_chain
from .root_space import uniform_scale

if TYPE_CHECKING:
    from .properties import IK_SOLVERS_PG_chain

PER_FRAME_SETTINGS = {setting.enters: setting for setting in SOLVE_SETTINGS if setting.per_frame}
"""Spec field → the setting sampling reads at every frame (the animatable swivel angle)."""


@dataclass(frozen=True, eq=False)
class ChainSpec:
    """What a chain's solve needs from its settings, resolved and checked.

    Attributes
    ----------
    name : str
        The chain's name (errors name it once).
    settings_path : str
        RNA path of the chain's settings from the armature object (``'ik_solvers.chains[0]'``):
        where per-frame (animated) settings such as the swivel angle are read while sampling
        (:meth:`per_frame_value`).
    tip_bone : str
    chain_length : int
        Bones counted from the tip bone up.
    rig : RigChain
        The chain as read when the spec was built (bones, joints, current pose).
    method : Method
    options : SolveOptions
        Distances converted from scene units to the chain's root-space units.
    reference : ndarray, shape (n_dof,)
        The pose every frame starts from and is pulled toward: the captured preferred pose, else
        the rest pose (zeros), clamped into the joint limits (so every solve stays inside them).
        For the HI method it is the preferred pose.
    target, pole
        The target and pole target objects (``bpy.types.Object``; pole None without one).
    target_bone : str
        The bone of an armature target whose head is the goal, as stored (see :attr:`goal_bone`).
    swivel_angle : float
        The swivel angle at build time (radians); sampling reads the animated value per frame.
    influence : float
        The blend of the FK pose with the solve (0–1) at build time; sampling reads it per frame.
    zero_plane_map : str
        A name of the core's zero-plane map registry (``core.zero_plane.ZERO_PLANE_MAPS``, open
        to new maps: the core has no enum of them).
    parent_space : ParentSpace
    flip_threshold : float
        The HI pole warning angle (radians).
    use_rotation : bool
        The tip bone's world orientation is wanted equal to the target's (its target bone's):
        sampling reads the target's rotation and the solve gets ``target_rotations``.
    rotation_weight : float
        As stored; ``options.orientation_weight`` is it times the chain's reach (root units per
        radian), so a radian weighs as much as the chain's length whatever the rig's scale.
    bend_direction : tuple of 3 floats, or None
        Where a straight HI chain bends (the start bone's rest axes); None: not set.
    source : tuple
        What the spec was built from: the chain read (its identity), the armature's world matrix
        and :func:`settings_key`. Another spec with the same source is this spec.
    """

    name: str
    settings_path: str
    tip_bone: str
    chain_length: int
    rig: RigChain
    method: Method
    options: SolveOptions
    reference: np.ndarray
    target: bpy.types.Object
    target_bone: str
    pole: bpy.types.Object | None
    swivel_angle: float
    influence: float
    zero_plane_map: str
    parent_space: ParentSpace
    flip_threshold: float
    use_rotation: bool
    rotation_weight: float
    bend_direction: tuple[float, float, float] | None = None
    source: tuple = ()

    @property
    def bone_names(self) -> tuple[str, ...]:
        """Every bone of the chain, start → tip."""
        return self.rig.bone_names

    @property
    def goal_bone(self) -> str:
        """The target bone whose head is the goal; '' when the goal is the target object's origin
        (no bone named, or a target that is not an armature)."""
        return goal_bone(self.target, self.target_bone)

    def read_rig(self, obj: bpy.types.Object) -> RigChain:
        """The chain read again from ``obj`` (another frame's bone locations / scales)."""
        return read_chain(obj, self.tip_bone, self.chain_length)

    def hi_preferred_pose(self) -> PreferredPose:
        """The HI solve's preferred pose of this spec (the core's cached derivation the solve reads)."""
        return hi_preferred_pose(self.rig.chain, self.reference, bend_direction=self.bend_direction,
                                 zero_plane_map=self.zero_plane_map, with_poles=self.pole is not None)

    def per_frame_value(self, obj: bpy.types.Object, field: str) -> Any:
        """The spec's ``field`` as the current frame animates its setting (``SolveSetting.per_frame``)."""
        setting = PER_FRAME_SETTINGS[field]
        return setting.convert(obj.path_resolve(f"{self.settings_path}.{setting.name}"))


def goal_bone(target: bpy.types.Object | None, target_bone: str) -> str:
    """``target_bone`` where it names the goal (an armature target), else ''."""
    return target_bone if target is not None and target.type == "ARMATURE" else ""


def _plain(value: Any) -> Any:
    """A stored value as a comparable one: an object by its ``session_uid``, an array as a tuple."""
    if isinstance(value, bpy.types.ID):
        return value.session_uid
    if isinstance(value, str) or not hasattr(value, "__len__"):
        return value
    return tuple(value)


def _stored(chain_settings: IK_SOLVERS_PG_chain, setting: SolveSetting) -> Any:
    value = getattr(chain_settings, setting.name)
    if setting.items:
        return tuple(tuple(_plain(getattr(item, name)) for name in setting.items) for item in value)
    return _plain(value)


def settings_key(chain_settings: IK_SOLVERS_PG_chain) -> tuple:
    """Every setting of ``SOLVE_SETTINGS`` as stored (and where the settings are): equal keys, equal specs
    of the same chain read and armature scale."""
    return (chain_settings.path_from_id(), *(_stored(chain_settings, setting) for setting in SOLVE_SETTINGS))


def preferred_q(chain_settings: IK_SOLVERS_PG_chain, rig: RigChain) -> np.ndarray:
    """The chain's captured preferred pose as joint variables ``(n_dof,)`` of ``rig``."""
    if not chain_settings.has_preferred_pose:
        raise IKSolversError("the chain has no preferred pose; capture one first.")
    stored = {item.bone_name: np.array(item.rotation, dtype=float) for item in chain_settings.preferred_pose}
    missing = [bone for bone in rig.joint_bones if bone not in stored]
    if missing:
        raise IKSolversError(f"the preferred pose lacks bone '{missing[0]}'; capture it again.")
    return joint_variables_from_quaternions(rig, stored)


def _checked_rig(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, rig: RigChain | None) -> RigChain:
    """The checks of the scene around the chain, made at every build (and every live update): an
    editable armature, the remembered bones, Limit Rotation limits, a target independent of the chain.
    Returns ``rig``, or the chain read again when ``rig`` is None or its limits changed."""
    check_editable(obj)
    if rig is not None and not constraint_limits_hold(obj, rig):
        rig = None  # a chain read before a Limit Rotation changed (live mode): read it again
    if rig is None:
        follow_renamed_tip(obj, chain_settings)
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    check_bones(obj, chain_settings, rig.bone_names)
    if chain_settings.target is None:
        raise IKSolversError("the chain has no target; pick an object (an Empty, or an armature and its bone).")
    check_points(obj, rig, chain_settings.target, chain_settings.pole_target,
                 goal_bone(chain_settings.target, chain_settings.target_bone))
    return rig


def check_points(obj: bpy.types.Object, rig: RigChain, target: bpy.types.Object,
                 pole: bpy.types.Object | None, target_bone: str = "") -> None:
    """IKSolversError when the target (its ``target_bone``, if named) or the pole moves with the chain
    (also checked at every quick live update: parenting or constraining the target is a move of
    objects only)."""
    if target_bone:
        check_target_bone_independent(obj, rig.bone_names[0], target, target_bone, "the target")
    for what, point in (("the target", target), ("the pole target", pole)):
        check_target_independent(obj, rig.bone_names[0], point, what)


def chain_spec(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, rig: RigChain | None = None, *,
               reuse: ChainSpec | None = None) -> ChainSpec:
    """The frozen spec of ``chain_settings`` (an item of ``obj.ik_solvers.chains``).

    Parameters
    ----------
    obj : bpy.types.Object
        The armature the settings belong to.
    rig : RigChain, optional
        The chain already read (default: read now).
    reuse : ChainSpec, optional
        A spec built before (live mode): returned (with ``rig``) when built from the same
        :attr:`~ChainSpec.source`; the checks of the scene around the chain run either way.

    Raises
    ------
    IKSolversError
        Naming the chain: a linked (not overridden) armature, bones other than the ones the chain
        remembers (``identity.check_bones``; a renamed tip bone is followed first), a Limit
        Rotation that cannot be honoured, an unusable rig, no target, a target that moves with the
        chain, an unknown method, an invalid setting, an HI chain without preferred pose, an
        analytic chain without exactly two moving bones.
    """
    with chain_context(chain_settings.name):
        rig = _checked_rig(obj, chain_settings, rig)
        world = np.array(obj.matrix_world, dtype=float)
        source = ((id(rig.chain), rig.joint_bones, rig.bone_names, rig.parent_bone), world.tobytes(),
                  settings_key(chain_settings))
        if reuse is not None and reuse.source == source:
            return reuse if reuse.rig is rig else replace(reuse, rig=rig)
        return _built(chain_settings, rig, world, source)


def _built(chain_settings: IK_SOLVERS_PG_chain, rig: RigChain, world: np.ndarray, source: tuple) -> ChainSpec:
    """The spec from the settings as ``SOLVE_SETTINGS`` says each enters it."""
    # Distances in the settings are scene units; convert with the armature object's own scale,
    # not the batch's root frames: a frame's result must not depend on which frames share its
    # batch (ik_batch --jobs chunks), and posed root bones carry float32 noise in their scale.
    scale = uniform_scale(world)
    fields: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for setting in SOLVE_SETTINGS:
        if setting.enters == "reference":
            continue
        stored = getattr(chain_settings, setting.name)
        try:
            value = setting.convert(stored)
        except ValueError as error:
            raise IKSolversError(f"unknown {setting.name.replace('_', ' ')} '{stored}'.",
                                 field=setting.name) from error
        if setting.enters == "options":
            options[str(setting.option)] = value / scale if setting.per_scene_unit else value
        else:
            fields[setting.enters] = value
    method = fields["method"]
    if method is Method.ANALYTIC and rig.chain.n_joints != 2:
        raise IKSolversError(f"the analytic method needs exactly 2 moving bones, the chain has {rig.chain.n_joints}.",
                             field="method")
    if fields["use_rotation"]:
        check_rotation_goal(rig, method)
        options["orientation_weight"] = fields["rotation_weight"] * rig.chain.reach
    try:
        solve_options = SolveOptions(**options)
    except IKInputError as error:
        raise IKSolversError(f"invalid setting {error}.", field=error.field) from error
    if METHOD_FACTS[method].needs_preferred_pose or chain_settings.has_preferred_pose:
        reference = preferred_q(chain_settings, rig)
    else:
        reference = np.zeros(rig.chain.n_dof)
    # A start outside the limits (a hinge whose Limit Rotation excludes its rest) would be returned as
    # it is where the target already sits at its tip: "converged", and Blender's constraint moves it.
    reference = np.clip(reference, rig.chain.lower, rig.chain.upper)
    reference.setflags(write=False)
    return ChainSpec(settings_path=chain_settings.path_from_id(), rig=rig, options=solve_options,
                     reference=reference, source=source, **fields)


def check_rotation_goal(rig: RigChain, method: Method) -> None:
    """IKSolversError (field ``use_rotation``) where the chain cannot take the target's orientation:
    a position-only method, a tip bone with every IK axis locked, or HI without a ball-jointed last
    bone after at least two others (the leg-and-foot split, ``core.hi.solve_hi_oriented``)."""
    if method is not Method.HI and not METHOD_FACTS[method].jacobian:
        raise IKSolversError(f"Rotation needs HI or a Jacobian method; {method.value} reaches for the position only.",
                             field="use_rotation")
    if rig.joint_bones[-1] != rig.bone_names[-1]:
        raise IKSolversError(f"Rotation turns the tip bone '{rig.bone_names[-1]}', whose IK axes are all locked.",
                             field="use_rotation")
    if method is Method.HI and (rig.chain.n_joints < MIN_SPLIT_JOINTS or rig.chain.kinds[-1] is not JointKind.BALL):
        raise IKSolversError(f"HI with Rotation aligns a last bone free in every axis after at least "
                             f"{MIN_SPLIT_JOINTS - 1} others; use a Jacobian method or lengthen the chain.",
                             field="use_rotation")
