"""From a chain's settings to a core solve: sample the scene, build the core problem, solve, check.

Shared by the solve / capture operators, the bake and live mode. Scene sampling
(:func:`sample_inputs`) is kept apart from problem building (:func:`prepare_solve`), so a bake can
evaluate N frames its own way and hand them over as one :class:`FrameInputs` batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import IKInputError, Method, SolveOptions, SolveResult, solve
from ..core.hi_solver import HISolveResult, solve_hi, sphere_rotations_for_parent_space
from ..core.kinematics import forward_kinematics
from .rig import (
    RigChain,
    RigError,
    joint_variables_from_quaternions,
    read_chain,
    root_matrices_world,
    uniform_scale,
    world_to_root,
)


FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Blender stores an infinite location as ±FLT_MAX: a coordinate that large stands for infinity."""


@dataclass(frozen=True, eq=False)
class FrameInputs:
    """Everything a solve reads from the evaluated scene, for N frames (world space).

    Attributes
    ----------
    target_world : ndarray, shape (N, 3)
        The target's world location per frame.
    root_world : ndarray, shape (N, 4, 4)
        World matrix of the chain's root space (``rig.root_matrices_world``) per frame.
    pole_world : ndarray, shape (N, 3), or None
        The pole target's world location per frame (None without a pole target).
    target_parent_world : ndarray, shape (N, 4, 4), or None
        World matrix of the target's parent per frame (identity rows when it has none); None
        when the solve does not need it.
    swivel_angle : ndarray, shape (N,), or None
        The chain's swivel angle per frame (radians); None: the setting's current value.
    """

    target_world: np.ndarray
    root_world: np.ndarray
    pole_world: np.ndarray | None = None
    target_parent_world: np.ndarray | None = None
    swivel_angle: np.ndarray | None = None

    @property
    def frame_count(self) -> int:
        return int(self.target_world.shape[0])

    @classmethod
    def stack(cls, frames: list["FrameInputs"]) -> "FrameInputs":
        """One batch from single-frame inputs (all with or all without each optional field)."""

        def joined(name: str):
            values = [getattr(f, name) for f in frames]
            return None if values[0] is None else np.concatenate(values, 0)

        return cls(**{name: joined(name) for name in
                      ("target_world", "root_world", "pole_world", "target_parent_world", "swivel_angle")})


@dataclass(frozen=True, eq=False)
class PreparedSolve:
    """A core problem built from a chain's settings, ready for :func:`run_solve`.

    Attributes
    ----------
    rig : RigChain
    inputs : FrameInputs
    targets : ndarray, shape (N, 3)
        Targets in the chain's root space (armature units).
    method : Method
    options : SolveOptions
        Tolerance and damping converted from scene units to root-space units.
    initial : ndarray, shape (N, n_dof)
        Starting joint variables (the pose at read time unless given).
    method_args : dict
        Extra keyword arguments of the method (``bend_directions`` for ANALYTIC; for HI the
        keyword arguments of ``core.hi_solver.solve_hi``: ``preferred``, ``swivel``,
        ``zero_plane_map``, ``poles``, ``sphere_rotations``, ``warning_angle``).
    world_scale : ndarray, shape (N,)
        Scene units per root-space unit, per frame (the root frame's uniform scale).
    """

    rig: RigChain
    inputs: FrameInputs
    targets: np.ndarray
    method: Method
    options: SolveOptions
    initial: np.ndarray
    method_args: dict = field(default_factory=dict)
    world_scale: np.ndarray = field(default_factory=lambda: np.ones(1))


# --------------------------------------------------------------------------- sampling
def _matrix(m) -> np.ndarray:
    return np.array(m, dtype=float)


def _evaluated(obj, depsgraph):
    return obj.evaluated_get(depsgraph) if depsgraph is not None else obj


def sample_inputs(obj, chain_settings, rig: RigChain, depsgraph=None) -> FrameInputs:
    """The current evaluation of everything the chain's solve reads, as a batch of one frame.

    Raises RigError when the chain has no target.
    """
    target = chain_settings.target
    if target is None:
        raise RigError(f"Chain '{chain_settings.name}' has no target; pick an Empty.")
    target_eval = _evaluated(target, depsgraph)
    target_world = np.array(target_eval.matrix_world.translation, dtype=float)[None]
    pole = chain_settings.pole_target
    pole_world = None
    if pole is not None:
        pole_world = np.array(_evaluated(pole, depsgraph).matrix_world.translation, dtype=float)[None]
    parent = target_eval.parent
    target_parent_world = (_matrix(parent.matrix_world) if parent is not None else np.eye(4))[None]
    return FrameInputs(
        target_world=target_world,
        root_world=root_matrices_world(obj, rig, depsgraph)[None],
        pole_world=pole_world,
        target_parent_world=target_parent_world,
        swivel_angle=np.array([chain_settings.swivel_angle], dtype=float),
    )


# --------------------------------------------------------------------------- building
def options_from_settings(chain_settings, scale: float) -> SolveOptions:
    """Core options from a chain's settings; distances divided by ``scale`` (scene → root units)."""
    try:
        return SolveOptions(
            max_iterations=int(chain_settings.max_iterations),
            tolerance=float(chain_settings.tolerance) / scale,
            max_step_angle=float(chain_settings.max_step_angle) or None,
            step=float(chain_settings.step) or None,
            damping=float(chain_settings.damping) / scale,
        )
    except IKInputError as error:
        raise RigError(f"Chain '{chain_settings.name}': invalid setting {error}.") from None


def prepare_solve(
    obj,
    chain_settings,
    inputs: FrameInputs | None = None,
    *,
    rig: RigChain | None = None,
    depsgraph=None,
    initial: np.ndarray | None = None,
) -> PreparedSolve:
    """Read the chain, check the inputs and build the core problem.

    Parameters
    ----------
    inputs : FrameInputs, optional
        Already-evaluated per-frame data (a bake's N frames); default: :func:`sample_inputs`.
    rig : RigChain, optional
        The chain already read (default: read now from ``chain_settings``).
    initial : ndarray, shape (n_dof,) or (N, n_dof), optional
        Starting joint variables; default the pose at read time.

    Raises
    ------
    RigError
        Anything that stops the solve, in one sentence: bad rig, no / non-finite target,
        non-uniform scale, an unknown method.
    """
    if rig is None:
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    if inputs is None:
        inputs = sample_inputs(obj, chain_settings, rig, depsgraph)
    name = chain_settings.name
    target_world = np.asarray(inputs.target_world, dtype=float).reshape(-1, 3)
    n = target_world.shape[0]
    finite = np.all(np.isfinite(target_world) & (np.abs(target_world) < FLOAT32_MAX), axis=1)
    if not np.all(finite):
        bad = int(np.flatnonzero(~finite)[0])
        raise RigError(f"Chain '{name}': the target location is not finite (frame {bad} of the batch).")
    root_world = np.broadcast_to(np.asarray(inputs.root_world, dtype=float), (n, 4, 4))
    if not np.all(np.isfinite(root_world)):
        raise RigError(f"Chain '{name}': the armature's world transform is not finite.")
    world_scale = _batch_uniform_scale(root_world)
    targets = world_to_root(target_world, root_world)
    try:
        method = Method(chain_settings.method)
    except ValueError:
        raise RigError(f"Chain '{name}': unknown method '{chain_settings.method}'.") from None
    # Distances in the settings are scene units; convert with the armature object's own scale,
    # not the batch's root frames: a frame's result must not depend on which frames share its
    # batch (ik_batch --jobs chunks), and posed root bones carry float32 noise in their scale.
    options = options_from_settings(chain_settings, uniform_scale(np.array(obj.matrix_world)))
    method_args = _method_args(method, chain_settings, rig, inputs, root_world, world_scale, targets)
    if method is Method.HI:
        initial = method_args["preferred"]  # history independent: every frame starts from it
    q0 = rig.q if initial is None else np.asarray(initial, dtype=float)
    q0 = np.broadcast_to(q0, (n, rig.chain.n_dof)).copy()
    return PreparedSolve(
        rig=rig, inputs=inputs, targets=targets, method=method, options=options, initial=q0,
        method_args=method_args, world_scale=world_scale,
    )


def _batch_uniform_scale(root_world: np.ndarray) -> np.ndarray:
    """Uniform scale ``(N,)`` of N root frames; RigError if any is non-uniform or mirrored."""
    singular = np.linalg.svd(root_world[:, :3, :3], compute_uv=False)
    det = np.linalg.det(root_world[:, :3, :3])
    if np.any(det <= 0.0) or np.any(singular[:, 0] - singular[:, -1] > 1e-4 * singular[:, 0]):
        bad = int(np.flatnonzero((det <= 0.0) | (singular[:, 0] - singular[:, -1] > 1e-4 * singular[:, 0]))[0])
        uniform_scale(root_world[bad])  # raises with the user-facing message
    return np.cbrt(det)


def _joint0_root(rig: RigChain) -> np.ndarray:
    return rig.chain.root_position + rig.chain.root_rotation @ rig.chain.offsets[0]


def preferred_q(chain_settings, rig: RigChain) -> np.ndarray:
    """The chain's captured preferred pose as joint variables ``(n_dof,)`` of ``rig``."""
    name = chain_settings.name
    if not chain_settings.has_preferred_pose:
        raise RigError(f"Chain '{name}' has no preferred pose; capture one first.")
    stored = {item.bone_name: np.array(item.rotation, dtype=float) for item in chain_settings.preferred_pose}
    missing = [bone for bone in rig.joint_bones if bone not in stored]
    if missing:
        raise RigError(f"Chain '{name}': the preferred pose lacks bone '{missing[0]}'; capture it again.")
    return joint_variables_from_quaternions(rig, stored)


def _rotations(matrices: np.ndarray) -> np.ndarray:
    """Rotation parts ``(N, 3, 3)`` of (possibly scaled) transforms ``(N, 4, 4)`` (polar factor)."""
    u, _, vt = np.linalg.svd(np.asarray(matrices, dtype=float)[:, :3, :3])
    return u @ vt


def _hi_args(chain_settings, rig: RigChain, inputs: FrameInputs, root_world: np.ndarray) -> dict:
    name = chain_settings.name
    n = root_world.shape[0]
    args = {
        "preferred": preferred_q(chain_settings, rig),
        "swivel": (np.full(n, float(chain_settings.swivel_angle)) if inputs.swivel_angle is None
                   else np.asarray(inputs.swivel_angle, dtype=float).reshape(-1)),
        "zero_plane_map": chain_settings.zero_plane_map,
        "warning_angle": float(chain_settings.flip_threshold),
    }
    if not np.all(np.isfinite(args["swivel"])):
        raise RigError(f"Chain '{name}': the swivel angle is not finite.")
    if inputs.pole_world is not None:
        poles = world_to_root(np.asarray(inputs.pole_world, float).reshape(-1, 3), root_world)
        if not np.all(np.isfinite(poles)):
            raise RigError(f"Chain '{name}': the pole target location is not finite.")
        args["poles"] = poles
    elif chain_settings.zero_plane_map == "POLE_OBJECT":
        raise RigError(f"Chain '{name}': the Pole Object zero-plane map needs a pole target.")
    if chain_settings.parent_space == "IK_TARGET":
        if inputs.target_parent_world is None:
            raise RigError(f"Chain '{name}': the IK Target parent space needs the target's parent frames.")
        root_rotations = _rotations(root_world)
        target_parent = np.broadcast_to(np.asarray(inputs.target_parent_world, float), (n, 4, 4))
        args["sphere_rotations"] = sphere_rotations_for_parent_space(
            "IK_TARGET", root_rotations, _rotations(target_parent), solving_rotations=root_rotations,
        )
    return args


def _method_args(method: Method, chain_settings, rig: RigChain, inputs: FrameInputs,
                 root_world: np.ndarray, world_scale: np.ndarray, targets: np.ndarray) -> dict:
    if method is Method.HI:
        return _hi_args(chain_settings, rig, inputs, root_world)
    if method is Method.ANALYTIC:
        if rig.chain.n_joints != 2:
            raise RigError(
                f"Chain '{chain_settings.name}': the analytic method needs exactly 2 moving bones, "
                f"the chain has {rig.chain.n_joints}."
            )
        if inputs.pole_world is None:
            return {}
        poles = world_to_root(np.asarray(inputs.pole_world, float).reshape(-1, 3), root_world)
        if not np.all(np.isfinite(poles)):
            raise RigError(f"Chain '{chain_settings.name}': the pole target location is not finite.")
        return {"bend_directions": poles - _joint0_root(rig)}
    return {}


# --------------------------------------------------------------------------- solving
@dataclass(frozen=True, eq=False)
class SolveOutcome:
    """A solve's result plus, for the HI method, its extras (pole angles, normals, swivel)."""

    result: SolveResult
    hi: HISolveResult | None = None


def run_solve_full(prepared: PreparedSolve) -> SolveOutcome:
    """Solve the prepared batch, keeping the HI extras; RigError for refused input or a non-finite answer."""
    hi = None
    try:
        if prepared.method is Method.HI:
            hi = solve_hi(prepared.rig.chain, prepared.targets, options=prepared.options, **prepared.method_args)
            result = hi.result
        else:
            result = solve(
                prepared.rig.chain, prepared.targets, prepared.method, prepared.options,
                initial=prepared.initial, **prepared.method_args,
            )
    except IKInputError as error:
        raise RigError(f"The solver refused the input: {error}.") from None
    if not np.all(np.isfinite(result.q)):
        raise RigError("The solver produced non-finite joint values; nothing was changed.")
    return SolveOutcome(result=result, hi=hi)


def run_solve(prepared: PreparedSolve) -> SolveResult:
    """Solve the prepared batch; RigError for input the core refuses or a non-finite answer."""
    return run_solve_full(prepared).result


def world_errors(prepared: PreparedSolve, result: SolveResult) -> tuple[np.ndarray, np.ndarray]:
    """Tip error and its lower bound ``(N,)`` each, in scene units."""
    return result.error * prepared.world_scale, result.lower_bound * prepared.world_scale


def tip_world(prepared: PreparedSolve, result: SolveResult) -> np.ndarray:
    """The solved tips ``(N, 3)`` in world space (our FK; for reports, not for tests)."""
    tips = forward_kinematics(prepared.rig.chain, result.q).tips
    root = np.broadcast_to(np.asarray(prepared.inputs.root_world, float), (tips.shape[0], 4, 4))
    return np.einsum("nij,nj->ni", root[:, :3, :3], tips) + root[:, :3, 3]
