"""The one iteration loop every iterative method shares (SPEC §3.2).

FK → error → stop test → method step (Jacobian or heuristic) → joint update →
clamps (per-step angle, joint limits), on the still-active part of the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array_ops import NUMPY_OPS, ArrayOps, Real
from .chain import Chain
from .kinematics import (
    Pose,
    bone_length_errors,
    error_lower_bounds,
    forward_kinematics,
    local_quaternions,
    position_jacobian,
    root_joint_positions,
)
from .linear_algebra import gram_matrices, smallest_eigenvalues
from .result import Method, SolveOptions, SolveResult, Status
from .rotations import canonical_quaternions
from .step_input import StepFunction, StepInput
from .vectors import norm

# A step that moves no joint variable by more than this (radians) is no
# progress: the gradient vanished or the heuristic found no direction.
STALL_STEP = 1e-13
# F = ½|p − t|² must rise by more than this to count as an increase (SPEC §4.1).
OBJECTIVE_RISE = 1e-12
# Relative rounding of a far target's error and bound: both are distances of ~r computed
# apart, each good to a few units in the last place, so "at the bound" allows this much of it
# (a target 1e12 of the reach away has error − bound ~ 1e-4 from rounding alone).
DISTANCE_ROUNDING = 1e-14


def run_iterations(
    method: Method,
    chain: Chain,
    targets: np.ndarray,
    q0: np.ndarray,
    options: SolveOptions,
    step: StepFunction,
    *,
    has_jacobian: bool = False,
    target_rotations: np.ndarray | None = None,
    warm_start: StepFunction | None = None,
    reference: np.ndarray | None = None,
) -> SolveResult:
    """Iterate ``step`` from ``q0 (N, n_dof)`` toward ``targets (N, 3)`` and classify each outcome.

    ``warm_start`` (the FABRIK step, passed in by the registry) runs
    ``options.warm_start_passes`` times before the method's own iterations.
    ``reference (N, n_dof)`` is the pose the steps pull toward where the target
    leaves freedom (``options.reference_weight``; ignored when that is 0).
    """
    q = np.array(q0, dtype=float)
    pose = forward_kinematics(chain, q)
    start_error = norm(pose.tips - targets)
    lower = error_lower_bounds(chain, targets)
    aims = nearest_reachable_points(chain, targets, lower)
    n_batch = q.shape[0]
    everyone = np.arange(n_batch)
    if options.reference_weight == 0.0:
        reference = None
    if options.warm_start_passes and warm_start is not None:
        for _ in range(options.warm_start_passes):
            q = warm_start(StepInput(chain, q, pose, targets, aims, pose.tips - aims, options, everyone))
            pose = forward_kinematics(chain, q)
    frames, positions = pose.frames, pose.positions
    error = norm(positions[:, -1] - targets)
    iterations = np.full(n_batch, options.warm_start_passes if warm_start is not None else 0, dtype=int)
    increases = np.zeros(n_batch, dtype=int)
    stalled = np.zeros(n_batch, dtype=bool)
    done_below = finish_levels(lower, options.tolerance)
    active = error > done_below
    trajectory = [q.copy()] if options.record_trajectory else None

    for _ in range(options.max_iterations):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        if idx.size == n_batch:
            # The whole batch is active: plain arrays, no gathers or scatters.
            q_old = q
            state = StepInput(
                chain, q, pose, targets, aims, pose.tips - aims, options, idx, target_rotations, reference
            )
        else:
            q_old = q[idx]
            sub_pose = Pose(frames=frames[idx], positions=positions[idx])
            sub_aims = aims[idx]
            state = StepInput(
                chain, q_old, sub_pose, targets[idx], sub_aims, sub_pose.tips - sub_aims, options, idx,
                None if target_rotations is None else target_rotations[idx],
                None if reference is None else reference[idx],
            )
        q_new = step(state)
        moved = np.abs(q_new - q_old).max(axis=1) > STALL_STEP
        new_pose = forward_kinematics(chain, q_new)
        new_error = norm(new_pose.tips - state.targets)
        # F = ½e² rose by more than OBJECTIVE_RISE  ⇔  e² rose by more than twice that.
        rose = new_error * new_error > error[idx] ** 2 + 2.0 * OBJECTIVE_RISE
        still = moved & (new_error > done_below[idx])
        if idx.size == n_batch:
            q, pose, error = q_new, new_pose, new_error
            frames, positions = pose.frames, pose.positions
            increases += rose
            iterations += 1
            stalled = ~moved
            active = still
        else:
            q[idx], frames[idx], positions[idx], error[idx] = q_new, new_pose.frames, new_pose.positions, new_error
            pose = Pose(frames=frames, positions=positions)
            increases[idx] += rose
            iterations[idx] += 1
            stalled[idx] = ~moved
            active[idx] = still
        if trajectory is not None:
            trajectory.append(q.copy())

    final = Pose(frames=frames, positions=positions)
    status = classify(error, start_error, lower, stalled, options.tolerance)
    sigma = smallest_singular_values(chain, final) if has_jacobian else np.full(n_batch, np.nan)
    return SolveResult(
        method=method,
        q=q,
        rotations=canonical_quaternions(local_quaternions(chain, q)),
        positions=positions,
        status=status,
        error=error,
        lower_bound=lower,
        iterations=iterations,
        length_error=bone_length_errors(chain, final),
        objective_increases=increases,
        sigma_min=sigma,
        trajectory=None if trajectory is None else np.stack(trajectory),
        direction_unique=np.ones(n_batch, dtype=bool),
    )


def nearest_reachable_points(chain: Chain, targets: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Targets ``(N, 3)``, with those out of reach moved onto the nearest reachable shell.

    The shell is the sphere about joint 0 of radius ``Σl`` (target too far) or
    ``d_min`` (too near); a target at joint 0 itself keeps its place.
    """
    root = root_joint_positions(chain)
    offset = targets - root
    r = norm(offset)
    lengths = chain.segment_lengths
    radius = np.where(r > lengths.sum(), lengths.sum(), max(0.0, 2.0 * lengths.max() - lengths.sum()))
    moved = root + offset * (radius / np.maximum(r, 1e-300))[:, None]
    return np.where(((lower > 0.0) & (r > 0.0))[:, None], moved, targets)


def finish_levels(lower: np.ndarray, tolerance: float) -> np.ndarray:
    """Error ``(N,)`` at or below which a target needs no more iterations.

    The tolerance; or, out of reach, the lower bound plus a small fraction of
    the tolerance, since nothing better than the bound exists (so that
    UNREACHABLE means "at the bound").
    """
    return np.where(lower > 0.0, np.maximum(tolerance, lower * (1.0 + DISTANCE_ROUNDING) + 1e-3 * tolerance), tolerance)


def classify(
    error: np.ndarray,
    start_error: np.ndarray,
    lower: np.ndarray,
    stalled: np.ndarray,
    tolerance: float,
) -> np.ndarray:
    """Status ``(N,)`` of each target from its final and starting errors (SPEC §3.3)."""
    return _STATUS_ARRAY[status_index(NUMPY_OPS, error, start_error, lower, stalled, tolerance)]


_STATUSES = (Status.BUDGET_EXHAUSTED, Status.STALLED, Status.DIVERGED, Status.UNREACHABLE, Status.CONVERGED)
_STATUS_ARRAY = np.array(_STATUSES, dtype=object)


def status_of(xp: ArrayOps, error: float, start_error: float, lower: float, stalled: bool, tolerance: float) -> Status:
    """:func:`classify` of one target (floats)."""
    return _STATUSES[status_index(xp, error, start_error, lower, stalled, tolerance)]


def status_index(xp: ArrayOps, error: Real, start_error: Real, lower: Real, stalled: Real, tolerance: float) -> Any:
    """:func:`classify` in an array namespace, as indices into ``_STATUSES`` (integers: numpy selects
    them ~2× faster than enum objects); the later tests win."""
    status = xp.where(stalled, 1, 0)
    status = xp.where(error > start_error + OBJECTIVE_RISE, 2, status)
    status = xp.where((lower > 0.0) & (error - lower <= tolerance + DISTANCE_ROUNDING * lower), 3, status)
    return xp.where(error <= tolerance, 4, status)


def smallest_singular_values(chain: Chain, pose: Pose) -> np.ndarray:
    """σ_min ``(N,)`` of the tip position Jacobian (0 where it loses rank)."""
    j = position_jacobian(chain, pose)
    gram = gram_matrices(j)
    return np.sqrt(np.maximum(smallest_eigenvalues(gram), 0.0))
