"""HI with an orientation goal: the leg-and-foot split (SPEC §5), and the core entry registered as ``Method.HI``.

With ``target_rotations`` the chain without its last bone is solved by :func:`~.solve.solve_hi` toward
the last joint's position the goal implies (the target minus the wanted last frame applied to the
last bone), then the last joint turns so its frame is the wanted one. Both steps are per frame and
closed form on top of the HI solve, so history independence and bit-identity in any order hold.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..chain import Chain, JointKind
from ..errors import IKInputError
from ..iteration import classify
from ..kinematics import bone_length_errors, clamp_limits, forward_kinematics, local_quaternions
from ..result import Method, SolveOptions, SolveResult
from ..rotations import rotvecs_from_matrices
from ..solve import checked_rotations, orientation_errors, register_solver, validated_targets
from ..vectors import matmul, matvec, norm
from .solve import HISolveResult, solve_hi

MIN_SPLIT_JOINTS = 3
"""Joints a chain needs for the split: the HI solve of the others needs two."""

_SUB_CHAINS: dict[bytes, tuple[Chain, Chain]] = {}


def without_last_joint(chain: Chain) -> Chain:
    """The chain up to the last joint's position (its tip there), kept per chain content."""
    kept = _SUB_CHAINS.get(chain.content_key)
    if kept is not None and kept[0] is chain:
        return kept[1]
    n_dof = int(chain.dof_start[-1])
    sub = Chain(
        kinds=chain.kinds[:-1], offsets=chain.offsets[:-1], rest_rotations=chain.rest_rotations[:-1],
        axes=chain.axes[:n_dof], lower=chain.lower[:n_dof], upper=chain.upper[:n_dof],
        weights=chain.weights[:n_dof], tip_offset=chain.offsets[-1],
        root_position=chain.root_position, root_rotation=chain.root_rotation,
    )
    if len(_SUB_CHAINS) >= 16:
        _SUB_CHAINS.clear()
    _SUB_CHAINS[chain.content_key] = (chain, sub)
    return sub


def solve_hi_oriented(
    chain: Chain,
    targets: np.ndarray,
    preferred: np.ndarray,
    target_rotations: np.ndarray,
    *,
    options: SolveOptions | None = None,
    **hi_args: Any,
) -> tuple[SolveResult, HISolveResult]:
    """HI toward tip targets ``(N, 3)`` with the last joint's frame wanted as ``target_rotations (N, 3, 3)``.

    Parameters are those of :func:`~.solve.solve_hi` (``preferred (n_dof,)``), all in the solving
    frame. The last joint must be a ball joint (its limits clip the rotation vector, as everywhere);
    the chain needs at least three joints. Returns the full chain's result (``error`` to the tip
    target, ``lower_bound`` the bound of the last joint's position, which the tip error equals
    whenever the orientation is met) and the HI diagnostics of the chain without its last joint.
    """
    options = SolveOptions() if options is None else options
    if chain.n_joints < MIN_SPLIT_JOINTS:
        raise IKInputError("target_rotations", f"HI takes an orientation goal on chains of {MIN_SPLIT_JOINTS} "
                           f"or more bones (the last one aligned), this one has {chain.n_joints}")
    if chain.kinds[-1] is not JointKind.BALL:
        raise IKInputError("target_rotations", "HI aligns the last bone through a ball joint; "
                           "unlock the last bone's IK axes")
    targets = validated_targets(targets)
    rotations = checked_rotations(target_rotations, targets.shape[0])
    sub = without_last_joint(chain)
    n_sub = sub.n_dof
    heads = targets - matvec(rotations, chain.tip_offset)
    solved = solve_hi(sub, heads, np.asarray(preferred, float)[:n_sub], options=options, **hi_args)
    head_result = solved.result
    parent_frames = forward_kinematics(sub, head_result.q).frames[:, -1]
    q = np.empty((targets.shape[0], chain.n_dof))
    q[:, :n_sub] = head_result.q
    wanted_local = matmul(np.swapaxes(matmul(parent_frames, chain.rest_rotations[-1]), 1, 2), rotations)
    q[:, n_sub:] = rotvecs_from_matrices(wanted_local)
    q[:, n_sub:] = clamp_limits(chain, q)[:, n_sub:]
    pose = forward_kinematics(chain, q)
    error = norm(pose.tips - targets)
    lower = head_result.lower_bound
    status = classify(error, error, lower, np.zeros(targets.shape[0], dtype=bool), options.tolerance)
    last = local_quaternions(chain, q, chain.n_joints - 1)
    result = replace(
        head_result, q=q, rotations=np.concatenate([head_result.rotations, last], 1), positions=pose.positions,
        status=status, error=error, length_error=bone_length_errors(chain, pose),
        orientation_error=orientation_errors(pose.frames[:, -1], rotations), hi=solved,
    )
    return result, solved


def solve_hi_registered(
    chain: Chain,
    targets: np.ndarray,
    q0: np.ndarray,
    options: SolveOptions,
    *,
    reference: np.ndarray | None = None,
    target_rotations: np.ndarray | None = None,
    swivel: np.ndarray | float = 0.0,
    zero_plane_map: Any = "DEFAULT",
    poles: np.ndarray | None = None,
    map_data: dict | None = None,
    sphere_rotations: np.ndarray | None = None,
    warning_angle: float | None = None,
    bend_direction: Any = None,
) -> SolveResult:
    """``solve(..., Method.HI, initial=preferred, ...)``: the initial pose is the preferred pose.

    The keywords are :func:`~.solve.solve_hi`'s, plus ``target_rotations`` (the leg-and-foot
    split, :func:`solve_hi_oriented`). A one-bone chain is refused (IKInputError, field ``chain``):
    it has no plane to bend in. ``reference`` is ignored: the preferred pose decides every bend.
    """
    if chain.n_joints < 2:
        raise IKInputError("chain", "the HI solver needs at least 2 moving bones; pick another method")
    if q0.shape[0] > 1 and np.any(q0 != q0[:1]):
        raise IKInputError("initial", "the HI solver takes one preferred pose for the whole batch (all rows equal)")
    hi_args: dict[str, Any] = {"swivel": swivel, "zero_plane_map": zero_plane_map, "poles": poles,
                               "map_data": map_data, "sphere_rotations": sphere_rotations,
                               "bend_direction": bend_direction}
    if warning_angle is not None:
        hi_args["warning_angle"] = warning_angle
    if target_rotations is not None:
        return solve_hi_oriented(chain, targets, q0[0], target_rotations, options=options, **hi_args)[0]
    solved = solve_hi(chain, targets, q0[0], options=options, **hi_args)
    return replace(solved.result, hi=solved)


register_solver(Method.HI, solve_hi_registered)
