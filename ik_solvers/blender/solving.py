"""From a chain spec and sampled inputs to a core solve: build the problem, solve, check.

Shared by the solve operator, live mode and the bake. Every method goes through the core's one
``solve(...)``: it starts each frame from the spec's reference pose (the captured preferred pose,
else the rest pose), so the same inputs give the same pose whatever was posed before, and for the
HI method that pose is its preferred pose; the HI diagnostics come back in ``result.hi``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..core import IKInputError, Method, ParentSpace, SolveResult, solve, sphere_rotations_for_parent_space
from ..core.kinematics import local_quaternions
from .errors import IKSolversError
from .rig import joint_variables_from_quaternions
from .rig_chain import RigChain
from .root_space import KeptResults, uniform_scale, world_to_root
from .sampling import FrameInputs
from .spec import ChainSpec

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Blender stores an infinite location as ±FLT_MAX: a coordinate that large stands for infinity."""


@dataclass(frozen=True, eq=False)
class PreparedSolve:
    """A core problem built from a chain spec and its inputs, ready for :func:`run_solve`.

    Attributes
    ----------
    spec : ChainSpec
    rig : RigChain
        The chain solved (the spec's, or one read at another frame's bone locations).
    inputs : FrameInputs
    targets : ndarray, shape (N, 3)
        Targets in the chain's root space (armature units).
    method_args : dict
        Extra keyword arguments of the method (``bend_directions`` for ANALYTIC; for HI
        ``swivel``, ``zero_plane_map``, ``poles``, ``sphere_rotations``, ``warning_angle``).
    world_scale : ndarray, shape (N,)
        Scene units per root-space unit, per frame (the root frame's uniform scale).
    """

    spec: ChainSpec
    rig: RigChain
    inputs: FrameInputs
    targets: np.ndarray
    method_args: dict[str, Any] = field(default_factory=dict)
    world_scale: np.ndarray = field(default_factory=lambda: np.ones(1))

    @property
    def initial(self) -> np.ndarray:
        """The spec's reference pose, every frame ``(N, n_dof)`` (a new array each time)."""
        return np.broadcast_to(self.spec.reference, (len(self.targets), self.rig.chain.n_dof)).copy()


def prepare_solve(spec: ChainSpec, inputs: FrameInputs, rig: RigChain | None = None) -> PreparedSolve:
    """Check the inputs and build the core problem of ``spec`` at the frames of ``inputs``.

    Raises
    ------
    IKSolversError
        Naming the chain: a non-finite target, pole or swivel, a non-uniform scale, an HI setting
        that lacks what it needs.
    """
    rig = spec.rig if rig is None else rig
    target_world = checked_target_world(spec, inputs.target_world)
    n = target_world.shape[0]
    root_world = np.asarray(inputs.root_world, dtype=float)
    if root_world.shape != (n, 4, 4):
        root_world = np.broadcast_to(root_world, (n, 4, 4))
    world_scale = root_scales(spec, root_world)
    targets = world_to_root(target_world, root_world)
    method_args = _method_args(spec, rig, inputs, root_world)
    if spec.use_rotation:
        method_args["target_rotations"] = rotations_in_root(spec, inputs, root_world)
    return PreparedSolve(spec=spec, rig=rig, inputs=inputs, targets=targets, method_args=method_args,
                         world_scale=world_scale)


def checked_target_world(spec: ChainSpec, target_world: ArrayLike) -> np.ndarray:
    """Target locations ``(N, 3)`` (world) from any array of N × 3 numbers; IKSolversError naming the
    chain if one is not finite."""
    target_world = np.asarray(target_world, dtype=float).reshape(-1, 3)
    finite = np.abs(target_world) < FLOAT32_MAX  # False for NaN and ±inf too
    if not finite.all():
        _target_not_finite(spec, int(np.flatnonzero(~finite.all(axis=1))[0]))
    return target_world


def checked_target_point(spec: ChainSpec, point: tuple[float, float, float]) -> tuple[float, float, float]:
    """:func:`checked_target_world` for one target location, on Python floats (a live update)."""
    if not all(abs(coordinate) < FLOAT32_MAX for coordinate in point):  # False for NaN and ±inf too
        _target_not_finite(spec, 0)
    return point


def _target_not_finite(spec: ChainSpec, frame: int) -> None:
    raise IKSolversError(f"the target location is not finite (frame {frame} of the batch).", chain=spec.name)


def root_scales(spec: ChainSpec, root_world: np.ndarray) -> np.ndarray:
    """Scene units per root-space unit ``(N,)`` of root frames ``(N, 4, 4)``; IKSolversError naming the
    chain for a frame that is not finite, not uniformly scaled or mirrored."""
    if not np.isfinite(root_world).all():
        raise IKSolversError("the armature's world transform is not finite.", chain=spec.name)
    return _batch_uniform_scale(root_world)  # named by the caller's errors.chain_context


def _batch_uniform_scale(root_world: np.ndarray) -> np.ndarray:
    """Uniform scale ``(N,)`` of N root frames; IKSolversError if any is non-uniform or mirrored."""
    if len(root_world) > 1 and np.all(root_world == root_world[0]):  # one frame for the whole batch, as F-curve sampling gives
        return np.broadcast_to(_batch_uniform_scale(root_world[:1]), root_world.shape[:1])
    return _single_uniform_scale(root_world) if len(root_world) == 1 else _uniform_scales(root_world)


def _uniform_scales(root_world: np.ndarray) -> np.ndarray:
    singular = np.linalg.svd(root_world[:, :3, :3], compute_uv=False)
    det = np.linalg.det(root_world[:, :3, :3])
    bad = (det <= 0.0) | (singular[:, 0] - singular[:, -1] > 1e-4 * singular[:, 0])
    if np.any(bad):
        uniform_scale(root_world[int(np.flatnonzero(bad)[0])])  # raises with the user-facing message
    return np.cbrt(det)


_single_uniform_scale = KeptResults(_uniform_scales)
""":func:`_uniform_scales` of one root frame ``(1, 4, 4)`` (a live update): the same bits, kept."""


def _joint0_root(rig: RigChain) -> np.ndarray:
    return rig.chain.root_position + rig.chain.root_rotation @ rig.chain.offsets[0]


def _rotations(matrices: np.ndarray) -> np.ndarray:
    """Rotation parts ``(N, 3, 3)`` of (possibly scaled) transforms ``(N, 4, 4)`` (polar factor)."""
    u, _, vt = np.linalg.svd(np.asarray(matrices, dtype=float)[:, :3, :3])
    return u @ vt


def rotations_in_root(spec: ChainSpec, inputs: FrameInputs, root_world: np.ndarray) -> np.ndarray:
    """The goal's orientations ``(N, 3, 3)`` in the chain's root space: the tip bone's frame there
    (``Pose.frames[:, -1]``) that puts its world axes on the target's; IKSolversError naming the chain
    if they were not sampled or are not finite."""
    if inputs.target_rotation_world is None:
        raise IKSolversError("the target's rotation was not sampled.", chain=spec.name)
    world = np.broadcast_to(np.asarray(inputs.target_rotation_world, float), (root_world.shape[0], 3, 3))
    if not np.isfinite(world).all():
        raise IKSolversError("the target's rotation is not finite.", chain=spec.name)
    return np.swapaxes(_rotations(root_world), 1, 2) @ world


def poles_in_root(spec: ChainSpec, pole_world: ArrayLike, root_world: np.ndarray) -> np.ndarray:
    """Pole target locations ``(N, 3)`` in the chain's root space; IKSolversError naming the chain if
    one is not finite."""
    poles = world_to_root(np.asarray(pole_world, float).reshape(-1, 3), root_world)
    if not np.isfinite(poles).all():
        raise IKSolversError("the pole target location is not finite.", chain=spec.name)
    return poles


def checked_swivels(spec: ChainSpec, swivel: ArrayLike) -> np.ndarray:
    """Swivel angles ``(N,)`` (radians) from any array of N numbers; IKSolversError naming the chain if
    one is not finite."""
    swivel = np.asarray(swivel, dtype=float).reshape(-1)
    if not np.isfinite(swivel).all():
        _swivel_not_finite(spec)
    return swivel


def checked_swivel(spec: ChainSpec, swivel: float) -> float:
    """:func:`checked_swivels` for one angle, on a Python float (a live update)."""
    if not math.isfinite(swivel):
        _swivel_not_finite(spec)
    return swivel


def _swivel_not_finite(spec: ChainSpec) -> None:
    raise IKSolversError("the swivel angle is not finite.", chain=spec.name)


def _hi_args(spec: ChainSpec, inputs: FrameInputs, root_world: np.ndarray) -> dict[str, Any]:
    n = root_world.shape[0]
    args: dict[str, Any] = {
        "swivel": checked_swivels(spec, np.full(n, spec.swivel_angle) if inputs.swivel_angle is None
                                  else inputs.swivel_angle),
        "zero_plane_map": spec.zero_plane_map,
        "warning_angle": spec.flip_threshold,
        "bend_direction": spec.bend_direction,
    }
    if inputs.pole_world is not None:
        args["poles"] = poles_in_root(spec, inputs.pole_world, root_world)
    elif spec.zero_plane_map == "POLE_OBJECT":
        raise IKSolversError("the Pole Object zero-plane map needs a pole target.", chain=spec.name)
    if spec.parent_space is ParentSpace.IK_TARGET:
        if inputs.target_parent_world is None:
            raise IKSolversError("the IK Target parent space needs the target's parent frames.", chain=spec.name)
        root_rotations = _rotations(root_world)
        target_parent = np.broadcast_to(np.asarray(inputs.target_parent_world, float), (n, 4, 4))
        args["sphere_rotations"] = sphere_rotations_for_parent_space(
            spec.parent_space, root_rotations, _rotations(target_parent), solving_rotations=root_rotations,
        )
    return args


def _analytic_args(spec: ChainSpec, rig: RigChain, inputs: FrameInputs, root_world: np.ndarray) -> dict[str, Any]:
    if inputs.pole_world is None:
        return {}
    return {"bend_directions": poles_in_root(spec, inputs.pole_world, root_world) - _joint0_root(rig)}


METHOD_ARGS = {
    Method.HI: lambda spec, rig, inputs, root_world: _hi_args(spec, inputs, root_world),
    Method.ANALYTIC: _analytic_args,
}
"""Builders of the extra keyword arguments of the core's ``solve`` for the methods that take any."""


def _method_args(spec: ChainSpec, rig: RigChain, inputs: FrameInputs, root_world: np.ndarray) -> dict[str, Any]:
    build = METHOD_ARGS.get(spec.method)
    return {} if build is None else build(spec, rig, inputs, root_world)


def run_solve(prepared: PreparedSolve) -> SolveResult:
    """Solve the prepared batch through the core's ``solve`` (``result.hi``: the HI diagnostics).

    Raises IKSolversError (keeping the core's ``field``) for input the core refuses, any other
    failure inside the solver (e.g. numpy's ``LinAlgError``) or a non-finite answer.
    """
    spec = prepared.spec
    try:
        result = solve(prepared.rig.chain, prepared.targets, spec.method, spec.options,
                       initial=prepared.initial, **prepared.method_args)
    except IKInputError as error:
        raise IKSolversError.from_input(error, chain=spec.name) from error
    except Exception as error:  # a solver failure (LinAlgError, …) is one sentence, never a traceback
        raise IKSolversError(f"the {spec.method.value} solver failed ({type(error).__name__}: {error}); "
                             "nothing was changed.", chain=spec.name) from error
    if not np.all(np.isfinite(result.q)):
        raise IKSolversError("the solver produced non-finite joint values; nothing was changed.", chain=spec.name)
    influence, fk_pose = prepared.inputs.influence, prepared.inputs.fk_pose
    if influence is not None and fk_pose is not None and np.any(influence < 1.0):
        result = replace(result, q=blended_with_fk(prepared.rig, np.asarray(fk_pose, float), result.q,
                                                   np.asarray(influence, float)))
    return result


def _slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` a fraction ``t (..., 1)`` of the shorter way from ``a`` to ``b``."""
    b = np.where(np.sum(a * b, axis=-1, keepdims=True) < 0.0, -b, b)
    cos = np.clip(np.sum(a * b, axis=-1, keepdims=True), -1.0, 1.0)
    angle = np.arccos(cos)
    sin = np.sin(angle)
    near = sin < 1e-9  # (almost) the same rotation: the linear blend is exact to roundoff
    safe = np.where(near, 1.0, sin)
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * angle) / safe)
    wb = np.where(near, t, np.sin(t * angle) / safe)
    out = wa * a + wb * b
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def blended_with_fk(rig: RigChain, fk_pose: np.ndarray, solved: np.ndarray, influence: np.ndarray) -> np.ndarray:
    """Joint variables ``(N, n_dof)``: per joint the rotation a fraction ``influence (N,)`` of the way
    from the FK pose ``fk_pose (N, n_dof)`` to the solve ``solved (N, n_dof)`` (quaternion slerp), as
    Blender's IK constraint blends by its Influence. Rows at influence 1 are the solve, at 0 the FK pose."""
    out = np.array(solved, dtype=float, copy=True)
    partial = np.flatnonzero((influence < 1.0) & (influence > 0.0))
    out[influence <= 0.0] = fk_pose[influence <= 0.0]
    if partial.size:
        chain = rig.chain
        blended = _slerp(local_quaternions(chain, fk_pose[partial]), local_quaternions(chain, solved[partial]),
                         influence[partial, None, None])
        for row, rotations in zip(partial, blended):
            out[row] = joint_variables_from_quaternions(rig, dict(zip(rig.joint_bones, rotations)))
    return out


def world_errors(prepared: PreparedSolve, result: SolveResult) -> tuple[np.ndarray, np.ndarray]:
    """Tip error and its lower bound ``(N,)`` each, in scene units."""
    return result.error * prepared.world_scale, result.lower_bound * prepared.world_scale
