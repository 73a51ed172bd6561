"""The chain spec: a chain's settings and rig packed once, at the edge, into a frozen value.

Everything downstream (the solve operator, live mode, the bake and ``scripts/ik_batch.py``) takes a
:class:`ChainSpec`, never the settings PropertyGroup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core import METHOD_FACTS, IKInputError, Method, SolveOptions
from .checks import check_editable, check_target_independent, constraint_limits_hold
from .errors import IKSolversError
from .identity import check_bones, follow_renamed_tip
from .rig import RigChain, joint_variables_from_quaternions, read_chain
from .root_space import uniform_scale

if TYPE_CHECKING:
    import bpy


@dataclass(frozen=True, eq=False)
class ChainSpec:
    """What a chain's solve needs from its settings, resolved and checked.

    Attributes
    ----------
    name : str
        The chain's name (errors name it once).
    settings_path : str
        RNA path of the chain's settings from the armature object (``'ik_solvers.chains[0]'``):
        where per-frame (animated) settings such as the swivel angle are read while sampling.
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
        the rest pose (zeros). For the HI method it is the preferred pose.
    target, pole
        The target and pole target objects (``bpy.types.Object``; pole None without one).
    swivel_angle : float
        The swivel angle at build time (radians); sampling reads the animated value per frame.
    zero_plane_map : str
    parent_space : str
        ``'START_JOINT'`` or ``'IK_TARGET'``.
    flip_threshold : float
        The HI pole warning angle (radians).
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
    pole: bpy.types.Object | None
    swivel_angle: float
    zero_plane_map: str
    parent_space: str
    flip_threshold: float

    @property
    def bone_names(self) -> tuple[str, ...]:
        """Every bone of the chain, start → tip."""
        return self.rig.bone_names

    def read_rig(self, obj) -> RigChain:
        """The chain read again from ``obj`` (another frame's bone locations / scales)."""
        try:
            return read_chain(obj, self.tip_bone, self.chain_length)
        except IKSolversError as error:
            raise error.about(self.name) from None

    def signature(self) -> bytes:
        """Bytes that change whenever anything a solve reads from the settings changes (live mode)."""
        values = (self.tip_bone, self.chain_length, self.method.value, self.options, self.zero_plane_map,
                  self.parent_space, self.flip_threshold, self.swivel_angle,
                  None if self.pole is None else self.pole.name)
        return repr(values).encode() + np.ascontiguousarray(self.reference).tobytes()


def preferred_q(chain_settings, rig: RigChain) -> np.ndarray:
    """The chain's captured preferred pose as joint variables ``(n_dof,)`` of ``rig``."""
    name = chain_settings.name
    if not chain_settings.has_preferred_pose:
        raise IKSolversError("the chain has no preferred pose; capture one first.", chain=name)
    stored = {item.bone_name: np.array(item.rotation, dtype=float) for item in chain_settings.preferred_pose}
    missing = [bone for bone in rig.joint_bones if bone not in stored]
    if missing:
        raise IKSolversError(f"the preferred pose lacks bone '{missing[0]}'; capture it again.", chain=name)
    return joint_variables_from_quaternions(rig, stored)


def options_from_settings(chain_settings, scale: float) -> SolveOptions:
    """Core options from a chain's settings; distances divided by ``scale`` (scene → root units)."""
    try:
        return SolveOptions(
            max_iterations=int(chain_settings.max_iterations),
            tolerance=float(chain_settings.tolerance) / scale,
            max_step_angle=float(chain_settings.max_step_angle) or None,
            step=float(chain_settings.step) or None,
            damping=float(chain_settings.damping) / scale,
            reference_weight=float(chain_settings.reference_weight),
        )
    except IKInputError as error:
        raise IKSolversError(f"invalid setting {error}.", field=error.field, chain=chain_settings.name) from None


def chain_spec(obj, chain_settings, rig: RigChain | None = None) -> ChainSpec:
    """The frozen spec of ``chain_settings`` (an item of ``obj.ik_solvers.chains``).

    Parameters
    ----------
    obj : bpy.types.Object
        The armature the settings belong to.
    rig : RigChain, optional
        The chain already read (default: read now).

    Raises
    ------
    IKSolversError
        Naming the chain: a linked (not overridden) armature, bones other than the ones the chain
        remembers (``identity.check_bones``; a renamed tip bone is followed first), a Limit
        Rotation that cannot be honoured, an unusable rig, no target, a target that moves with the
        chain, an unknown method, an invalid setting, an HI chain without preferred pose, an
        analytic chain without exactly two moving bones.
    """
    name = chain_settings.name
    try:
        check_editable(obj)
        if rig is not None and not constraint_limits_hold(obj, rig):
            rig = None  # a chain read before a Limit Rotation changed (live mode): read it again
        if rig is None:
            follow_renamed_tip(obj, chain_settings)
            rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
        check_bones(obj, chain_settings, rig.bone_names)
    except IKSolversError as error:
        raise error.about(name) from None
    if chain_settings.target is None:
        raise IKSolversError("the chain has no target; pick an Empty.", chain=name)
    try:
        for what, point in (("the target", chain_settings.target), ("the pole target", chain_settings.pole_target)):
            check_target_independent(obj, rig.bone_names[0], point, what)
    except IKSolversError as error:
        raise error.about(name) from None
    try:
        method = Method(chain_settings.method)
    except ValueError:
        raise IKSolversError(f"unknown method '{chain_settings.method}'.", field="method", chain=name) from None
    if method is Method.ANALYTIC and rig.chain.n_joints != 2:
        raise IKSolversError(f"the analytic method needs exactly 2 moving bones, the chain has {rig.chain.n_joints}.",
                             field="method", chain=name)
    # Distances in the settings are scene units; convert with the armature object's own scale,
    # not the batch's root frames: a frame's result must not depend on which frames share its
    # batch (ik_batch --jobs chunks), and posed root bones carry float32 noise in their scale.
    try:
        scale = uniform_scale(np.array(obj.matrix_world))
    except IKSolversError as error:
        raise error.about(name) from None
    options = options_from_settings(chain_settings, scale)
    if METHOD_FACTS[method].needs_preferred_pose or chain_settings.has_preferred_pose:
        reference = preferred_q(chain_settings, rig)
    else:
        reference = np.zeros(rig.chain.n_dof)
    reference.setflags(write=False)
    return ChainSpec(
        name=name,
        settings_path=chain_settings.path_from_id(),
        tip_bone=chain_settings.tip_bone,
        chain_length=int(chain_settings.chain_length),
        rig=rig,
        method=method,
        options=options,
        reference=reference,
        target=chain_settings.target,
        pole=chain_settings.pole_target,
        swivel_angle=float(chain_settings.swivel_angle),
        zero_plane_map=chain_settings.zero_plane_map,
        parent_space=chain_settings.parent_space,
        flip_threshold=float(chain_settings.flip_threshold),
    )
