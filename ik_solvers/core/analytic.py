"""Closed-form two-bone IK: the planar table of both branches and the 3D chain solve (SPEC §3.2)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .alignment import _hinge_angles, align_joint
from .array_ops import NUMPY_OPS, ArrayOps, Real
from .chain import Chain, JointKind
from .errors import IKInputError
from .heuristic_methods import fabrik_step
from .iteration import run_iterations
from .kinematics import apply_increments, forward_kinematics, root_joint_positions
from .result import Method, SolveOptions, SolveResult
from .rotations import (
    minimal_rotation_rotvecs,
    quaternion_products,
    quaternions_from_rotvecs,
    rotate_about_axes,
    rotate_by_quaternions,
    rotvecs_from_quaternions,
)
from .step_input import StepInput
from .vectors import cross, dot, matvec, norm, tmatvec, unit_stride


@dataclass(frozen=True, eq=False)
class TwoBoneSolution:
    """Both elbow branches of a planar two-bone chain for a batch of targets.

    Attributes
    ----------
    branches : ndarray, shape (N, 2, 2)
        ``[k] = (θ1, θ2)`` radians; branch 0 bends with ``θ2 ≥ 0``
        (``s = +sqrt(1 − c²)``), branch 1 with ``θ2 ≤ 0``. Out of reach both
        hold the nearest pose.
    reachable : ndarray of bool, shape (N,)
        ``|l1 − l2| ≤ r ≤ l1 + l2`` (distances compared, not their squares).
    residual : ndarray, shape (N,)
        ``|r − clamp(r, |l1 − l2|, l1 + l2)|``: the least possible tip error.
    branch_count : ndarray of int, shape (N,)
        2 inside the annulus, 1 where the branches merge (on its boundary or out of reach).
    direction_unique : ndarray of bool, shape (N,)
        False for a target at the shoulder: every direction is equally good
        and ``θ1 = 0`` is a representative.
    """

    branches: np.ndarray
    reachable: np.ndarray
    residual: np.ndarray
    branch_count: np.ndarray
    direction_unique: np.ndarray


def two_bone_planar(l1: float, l2: float, targets: np.ndarray, *, first_branch_only: bool = False) -> TwoBoneSolution:
    """Closed-form angles of a planar two-bone chain (shoulder at the origin) for ``targets (N, 2)``.

    ``first_branch_only``: ``branches`` holds branch 0 alone, shape ``(N, 1, 2)`` (the same values;
    the HI solve bends one way only, and the other branch is half the work).
    """
    targets = np.atleast_2d(np.asarray(targets, dtype=float))
    if targets.shape[-1] != 2:
        raise IKInputError("targets", f"expected shape (N, 2), got {targets.shape}")
    for name, value in (("l1", l1), ("l2", l2)):
        if not np.isfinite(value) or value <= 0.0:
            raise IKInputError(name, f"bone length must be positive and finite, got {value!r}")
    scale = l1 + l2
    if min(l1, l2) < 1e-9 * scale:
        raise IKInputError("l1" if l1 < l2 else "l2", "bone length below 1e-9 of the chain length")
    if not np.all(np.isfinite(targets)):
        raise IKInputError("targets", "must be finite")
    x, y = unit_stride(targets[:, 0]), unit_stride(targets[:, 1])
    r = np.hypot(x, y)
    inner, outer = abs(l1 - l2), l1 + l2
    cos2, reach = elbow_cosine(NUMPY_OPS, l1, l2, r)
    heading = np.arctan2(y, x)  # atan2(0, 0) = 0: the representative direction
    signs = (1.0,) if first_branch_only else (1.0, -1.0)
    branches = np.empty((targets.shape[0], len(signs), 2))
    for k, sign in enumerate(signs):
        branches[:, k, 0], branches[:, k, 1] = planar_branch(NUMPY_OPS, l1, l2, sign, cos2, heading)[:2]
    merged = np.abs(cos2) >= 1.0
    # θ2 = ±π are one pose: report the merged branch once, identically.
    if not first_branch_only:
        branches[:, 1] = np.where(merged[:, None], branches[:, 0], branches[:, 1])
    return TwoBoneSolution(
        branches=branches,
        reachable=(r >= inner) & (r <= outer),
        residual=np.abs(r - reach),
        branch_count=np.where(merged, 1, 2),
        direction_unique=r > 0.0,
    )


def elbow_cosine(xp: ArrayOps, l1: float, l2: float, r: Real) -> tuple[Real, Real]:
    """The elbow's cosine (clipped to ``[−1, 1]``) putting the tip at distance ``r`` from the shoulder,
    or at the nearest distance the chain reaches, and that distance."""
    reach = xp.minimum(xp.maximum(r, abs(l1 - l2)), l1 + l2)
    return xp.minimum(xp.maximum((reach * reach - l1 * l1 - l2 * l2) / (2.0 * l1 * l2), -1.0), 1.0), reach


def planar_branch(xp: ArrayOps, l1: float, l2: float, sign: float, cos2: Real, heading: Real) -> tuple[Real, ...]:
    """One branch of the planar two-bone solve: ``θ1`` (wrapped to ``(−π, π]``) and ``θ2 = sign · acos(cos2)``,
    and the cosine and sine of ``θ2`` (``cos2``: the elbow's clipped cosine; ``heading``: the target's)."""
    theta2 = sign * xp.acos(cos2)
    c2, s2 = xp.cos(theta2), xp.sin(theta2)
    theta1 = heading - xp.atan2(l2 * s2, l1 + l2 * c2)
    return wrapped_angle(xp, theta1), theta2, c2, s2


def wrapped_angle(xp: ArrayOps, angle: Real) -> Real:
    """``angle`` (radians, within ``(−3π, 3π]``: a difference of two headings) wrapped to ``(−π, π]``."""
    return xp.where(angle <= -np.pi, angle + 2.0 * np.pi, xp.where(angle > np.pi, angle - 2.0 * np.pi, angle))


def two_link_step_bound(l1: float, l2: float, target: np.ndarray) -> float:
    """Global Jacobian-transpose step bound ``2 / L``, ``L = l1·l2 + l1·r + 2·l2·r`` (SPEC §3.2).

    For ``0 < η < 2/L`` the fixed-step descent on ``½|p − t|²`` of the planar
    two-link chain never raises the objective (``L`` bounds its Hessian).
    """
    r = float(np.linalg.norm(np.asarray(target, dtype=float)))
    return 2.0 / (l1 * l2 + l1 * r + 2.0 * l2 * r)


def _elbow_turns(u: np.ndarray, w: np.ndarray, axis: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Both turns ``(N, 2)`` of ``w`` about ``axis`` that put ``|u + w| = distance``.

    ``|u + w(Δ)|² = A + C cos Δ + S sin Δ``, so ``Δ = atan2(S, C) ± acos((d² − A)/√(C² + S²))``.
    """
    w_par = dot(w, axis)[:, None] * axis
    w_perp = w - w_par
    fixed = u + w_par
    c = 2.0 * dot(fixed, w_perp)
    s = 2.0 * dot(fixed, cross(axis, w_perp))
    a = dot(fixed, fixed) + dot(w_perp, w_perp)
    amplitude = np.hypot(c, s)
    spread = np.arccos(np.clip((distance**2 - a) / np.maximum(amplitude, 1e-300), -1.0, 1.0))
    centre = np.arctan2(s, c)
    return np.stack([centre + spread, centre - spread], -1)


def _analytic_step(state: StepInput, bend_directions: np.ndarray | None) -> np.ndarray:
    chain, q = state.chain, state.q.copy()
    frames, positions = state.pose.frames, state.pose.positions
    p0 = positions[:, 0]
    lengths = chain.segment_lengths
    r = norm(state.targets - p0)
    distance = np.clip(r, abs(lengths[0] - lengths[1]), lengths.sum())

    # Elbow: the turn that gives the shoulder-to-tip distance, the smaller of
    # the two branches so the chain keeps the sense it already bends in.
    u = positions[:, 1] - p0
    w = positions[:, 2] - positions[:, 1]
    start = chain.dof_start[1]
    if chain.kinds[1] is JointKind.BALL:
        normal = cross(u, w)
        if bend_directions is not None:
            normal = np.where(norm(normal)[:, None] > 1e-12, normal, cross(u, bend_directions))
        fallback = cross(u, np.where(np.abs(u[:, :1]) < 0.9 * norm(u)[:, None], [1.0, 0, 0], [0, 1.0, 0]))
        normal = np.where(norm(normal)[:, None] > 1e-12, normal, fallback)
        axis = normal / norm(normal)[:, None]
    else:
        axis = matvec(frames[:, 1], chain.dof_frame_vectors[start])
    turns = _elbow_turns(u, w, axis, distance)
    turns = np.angle(np.exp(1j * turns))
    turn = np.where(np.abs(turns[:, 0]) <= np.abs(turns[:, 1]), turns[:, 0], turns[:, 1])
    if chain.kinds[1] is JointKind.BALL:
        dq = np.zeros_like(q)
        dq[:, start : start + 3] = tmatvec(frames[:, 2], axis * turn[:, None])
        q = apply_increments(chain, q, dq)
        limited = np.any(np.isfinite(chain.lower[start : start + 3]) | np.isfinite(chain.upper[start : start + 3]))
        # Limits may have clipped the rotation vector: then only FK knows where the tip went.
        tip = forward_kinematics(chain, q).tips if limited else positions[:, 1] + rotate_about_axes(axis, turn, w)
    else:
        before = q[:, start].copy()
        q[:, start] = np.clip(before + turn, chain.lower[start], chain.upper[start])
        tip = positions[:, 1] + rotate_about_axes(axis, q[:, start] - before, w)

    # Shoulder: point the (now right-length) shoulder-to-tip vector at the target.
    carried = tip - p0
    desired = state.targets - p0
    if chain.kinds[0] is not JointKind.BALL:
        return align_joint(chain, q, 0, frames[:, 0], frames[:, 1], carried, desired)
    swing = quaternions_from_rotvecs(minimal_rotation_rotvecs(carried, desired))
    if bend_directions is not None:
        heading = desired / np.maximum(norm(desired), 1e-300)[:, None]
        elbow = rotate_by_quaternions(swing, u)
        twist = _hinge_angles(heading, elbow, bend_directions) * (r > 0.0)
        swing = quaternion_products(quaternions_from_rotvecs(heading * twist[:, None]), swing)
    # A rotation vector turns like a vector: the world turn seen in joint 0's frame.
    delta = tmatvec(frames[:, 1], rotvecs_from_quaternions(swing))
    dq = np.zeros_like(q)
    dq[:, :3] = delta
    return apply_increments(chain, q, dq)


def solve_analytic(
    chain: Chain,
    targets: np.ndarray,
    q0: np.ndarray,
    options: SolveOptions,
    *,
    bend_directions: np.ndarray | None = None,
    reference: np.ndarray | None = None,
) -> SolveResult:
    """Exact two-bone solve in 3D, one closed-form step from ``q0``.

    ``reference`` is accepted and ignored: the answer is closed form (its bend
    plane comes from ``q0`` or ``bend_directions``).

    Parameters
    ----------
    bend_directions : ndarray, shape (N, 3), optional
        World directions the elbow should bend toward (from joint 0, e.g. a
        pole target minus the shoulder). Default: keep the current bend plane.
        Used when the shoulder is a ball joint.
    """
    if chain.n_joints != 2:
        raise IKInputError("chain", f"the analytic solver needs exactly 2 joints, got {chain.n_joints}")
    if bend_directions is not None:
        bend_directions = np.broadcast_to(np.asarray(bend_directions, float), targets.shape)
        if not np.all(np.isfinite(bend_directions)):
            raise IKInputError("bend_directions", "must be finite")
    one_step = replace(options, max_iterations=1, max_step_angle=None)
    result = run_iterations(
        Method.ANALYTIC, chain, targets, q0, one_step,
        lambda state: _analytic_step(state, None if bend_directions is None else bend_directions[state.rows]),
        warm_start=fabrik_step,
    )
    r = norm(targets - root_joint_positions(chain))
    return replace(result, direction_unique=r > 1e-12 * chain.reach)
