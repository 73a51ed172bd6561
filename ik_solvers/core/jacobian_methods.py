"""Jacobian-based steps: transpose, pseudo-inverse, DLS and SVD-adaptive DLS (SPEC §3.2).

Each step works in weight-scaled variables ``y = W^{-1/2} Δq`` so per-joint
weights (``1 − stiffness``) enter every method the same way.
"""

from __future__ import annotations

import numpy as np

from .kinematics import (
    apply_increments,
    clamp_step,
    forward_kinematics,
    increments_toward,
    jacobian,
    joint_step_angles,
    position_jacobian,
)
from .linear_algebra import PINV_RCOND, gram_matrices, smallest_eigenvalues, solve_spd3
from .rotations import rotvecs_from_matrices
from .step_input import StepInput
from .vectors import dot, matmul, matvec, norm, ordered_sum, tmatvec

# Least damping λ² as a fraction of trace(J Jᵀ): far above the rounding of the Gram matrix's
# eigenvalues (~1e-16 of the trace), far below any damping that slows convergence (λ ≈ 1e-6 √trace).
DAMPING_FLOOR = 1e-12
# Armijo constant of the backtracking line search (Nocedal & Wright use 1e-4).
ARMIJO = 1e-4
# Halvings before the line search gives up and takes no step.
MAX_BACKTRACKS = 30


def _scaled_problem(state: StepInput, residuals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Weight-scaled Jacobian ``(M, r, n_dof)``, residual ``(M, r)`` and ``sqrt(W)``.

    ``r = 3``, or 6 with the tip-orientation rows: the world axes as angular
    Jacobian and the rotation vector of ``Q_tip R_targetᵀ`` as residual, both
    times ``orientation_weight``.
    """
    root_w = state.chain.root_weights
    weight = state.options.orientation_weight
    if state.target_rotations is None or weight == 0.0:
        j = position_jacobian(state.chain, state.pose)
    else:
        j = jacobian(state.chain, state.pose, orientation=True)
        j[:, 3:] *= weight
        tip_frames = state.pose.frames[:, -1]
        angular = rotvecs_from_matrices(matmul(tip_frames, np.swapaxes(state.target_rotations, 1, 2)))
        residuals = np.concatenate([residuals, weight * angular], 1)
    return (j if root_w is None else j * root_w), residuals, root_w


def _reference_pull(state: StepInput, root_w: np.ndarray | None) -> np.ndarray | None:
    """The step ``z (M, n_dof)`` toward the reference pose, in weight-scaled variables, or None.

    ``reference_weight`` of the way from the current pose to the reference per
    iteration (ball joints along the shorter arc); the methods keep only its part
    in the null space of the task, so the target still sets the pose wherever it can.
    """
    if state.reference is None:
        return None
    pull = state.options.reference_weight * increments_toward(state.chain, state.q, state.reference)
    return pull if root_w is None else pull / root_w


def _null_space_part(j: np.ndarray, pull: np.ndarray) -> np.ndarray:
    """``(I − J⁺ J) z``: the part of ``z (M, n_dof)`` that leaves the task unchanged to first order.

    ``J⁺`` regularised only by ``DAMPING_FLOOR`` (an exact projector away from
    singular directions): a projector damped like the task step would leak
    ``λ²``-sized pulls into the task and hold DLS off its target for good.
    """
    return pull + _damped_solve(j, matvec(j, pull), 0.0)


def _finish(state: StepInput, y: np.ndarray, root_w: np.ndarray | None, pull: np.ndarray | None = None) -> np.ndarray:
    """Clamp and apply a step given in weight-scaled variables ``y``, plus a null-space ``pull``.

    The task step is clamped to ``max_step_angle`` first; the pull gets what is left
    of that angle (so the sum never turns a joint further, and the task comes first).
    """
    dq = y if root_w is None else y * root_w
    dq = clamp_step(state.chain, dq, state.options.max_step_angle)
    if pull is not None:
        pull = pull if root_w is None else pull * root_w
        limit = state.options.max_step_angle
        if limit is not None and np.isfinite(limit):
            room = np.maximum(limit - joint_step_angles(state.chain, dq).max(axis=1), 0.0)
            largest = joint_step_angles(state.chain, pull).max(axis=1)
            pull = pull * np.minimum(1.0, room / np.maximum(largest, 1e-300))[:, None]
        dq = dq + pull
    return apply_increments(state.chain, state.q, dq)


def transpose_step(state: StepInput) -> np.ndarray:
    """``Δq = −η W Jᵀ (p − t)``; with ``step=None`` η comes from a backtracking line search.

    The gradient of ``F = ½|p − t|²`` toward the real target (not the shell
    aim the other Jacobian methods use), so a line search on F is a true descent.
    A pull toward the reference pose is projected on the task's null space and
    added after the step.
    """
    j, residuals, root_w = _scaled_problem(state, state.pose.tips - state.targets)
    gradient = tmatvec(j, residuals)  # in scaled variables
    pull = _reference_pull(state, root_w)
    if pull is not None:
        pull = _null_space_part(j, pull)
    if state.options.step is not None:
        return _finish(state, -state.options.step * gradient, root_w, pull)
    q = _line_search(state, j, residuals, gradient, root_w)
    if pull is None:
        return q
    dq = clamp_step(state.chain, pull if root_w is None else pull * root_w, state.options.max_step_angle)
    return apply_increments(state.chain, q, dq)


def _line_search(
    state: StepInput, j: np.ndarray, residuals: np.ndarray, gradient: np.ndarray, root_w: np.ndarray | None
) -> np.ndarray:
    """Backtracking on ``F = ½|p − t|²`` from the step that is exact for the linear model."""
    jg = matvec(j, gradient)
    g2 = dot(gradient, gradient)
    alpha = g2 / np.maximum(dot(jg, jg), 1e-300)
    f0 = 0.5 * dot(residuals[:, :3], residuals[:, :3])
    q_out = state.q.copy()
    pending = np.flatnonzero(g2 > 0.0)
    for _ in range(MAX_BACKTRACKS):
        if pending.size == 0:
            break
        scaled = -alpha[pending, None] * gradient[pending]
        dq = clamp_step(state.chain, scaled if root_w is None else scaled * root_w, state.options.max_step_angle)
        trial = apply_increments(state.chain, state.q[pending], dq)
        tips = forward_kinematics(state.chain, trial).tips
        miss = tips - state.targets[pending]
        f = 0.5 * dot(miss, miss)
        ok = f <= f0[pending] - ARMIJO * alpha[pending] * g2[pending]
        q_out[pending[ok]] = trial[ok]
        pending = pending[~ok]
        alpha[pending] *= 0.5
    return q_out


def pseudo_inverse_step(state: StepInput) -> np.ndarray:
    """Gauss–Newton ``Δq = −α J⁺ e`` through the SVD (never an explicit inverse).

    With a pull ``z`` toward the reference, its null-space part ``(I − J⁺ J) z`` is added.
    """
    j, residuals, root_w = _scaled_problem(state, state.residuals)
    u, s, vt = np.linalg.svd(j, full_matrices=False)
    inverse_s = np.where(s > PINV_RCOND * s[:, :1], 1.0 / np.maximum(s, 1e-300), 0.0)
    alpha = 1.0 if state.options.step is None else state.options.step
    y = -alpha * tmatvec(vt, inverse_s * tmatvec(u, residuals))
    pull = _reference_pull(state, root_w)
    if pull is not None:
        pull = pull - tmatvec(vt, inverse_s * tmatvec(u, matvec(j, pull)))
    return _finish(state, y, root_w, pull)


def _damped_solve(
    j: np.ndarray, residuals: np.ndarray, damping_squared: np.ndarray | float, gram: np.ndarray | None = None
) -> np.ndarray:
    """``y = −Jᵀ (J Jᵀ + λ² I)⁻¹ e`` (wide form) or ``−(Jᵀ J + λ² I)⁻¹ Jᵀ e`` (tall form).

    ``λ²`` is floored at ``DAMPING_FLOOR`` of the Gram matrix's trace, so the
    system stays positive definite in floating point whatever the chain's scale
    or the damping asked for (a singular pose with a vanishing residual gave a
    singular system: ``LinAlgError`` or a 0/0 in the closed-form solve).
    """
    gram = gram_matrices(j) if gram is None else gram
    lam2 = damping_squared[:, None, None] if isinstance(damping_squared, np.ndarray) else damping_squared
    trace = ordered_sum(np.diagonal(gram, axis1=1, axis2=2), 1)
    lam2 = np.maximum(lam2, (DAMPING_FLOOR * trace + 1e-300)[:, None, None])
    system = gram + lam2 * np.eye(gram.shape[-1])
    if j.shape[2] >= j.shape[1]:
        return -tmatvec(j, solve_spd3(system, residuals))
    return -np.linalg.solve(system, tmatvec(j, residuals)[..., None])[..., 0]


def _damped_step(
    state: StepInput,
    j: np.ndarray,
    residuals: np.ndarray,
    root_w: np.ndarray | None,
    damping_squared: np.ndarray | float,
    gram: np.ndarray | None = None,
) -> np.ndarray:
    """The damped step (weights ``W`` folded into ``j``), plus the null-space part ``(I − J⁺ J) z`` of the reference pull."""
    pull = _reference_pull(state, root_w)
    y = _damped_solve(j, residuals, damping_squared, gram)
    return _finish(state, y, root_w, None if pull is None else _null_space_part(j, pull))


def dls_step(state: StepInput) -> np.ndarray:
    """Damped least squares with the fixed damping ``λ = options.damping``, solved as a linear system."""
    j, residuals, root_w = _scaled_problem(state, state.residuals)
    return _damped_step(state, j, residuals, root_w, state.options.damping**2)


def sdls_damping(
    sigma_min: np.ndarray, damping: float, damping_max: float, threshold: float, error: np.ndarray
) -> np.ndarray:
    """Damping ``(N,)`` growing as σ_min falls below σ₀, never above the error itself.

    ``λ² = λ_min²`` for ``σ_min ≥ σ₀``, ``λ_min² + (1 − (σ_min/σ₀)²) λ_max²`` below it
    (Nakamura & Hanafusa's schedule), capped at ``|e|²``: damping that shrinks
    with the residual keeps Levenberg–Marquardt's fast final convergence even
    at a singular pose, such as a chain stretched toward a target out of reach
    (Yamashita & Fukushima; Sugihara 2011).
    """
    ratio = np.clip(sigma_min / threshold, 0.0, 1.0)
    scheduled = damping**2 + (1.0 - ratio**2) * damping_max**2
    return np.sqrt(np.minimum(scheduled, error**2))


def sdls_step(state: StepInput) -> np.ndarray:
    """DLS with the damping chosen per target from the Jacobian's smallest singular value."""
    j, residuals, root_w = _scaled_problem(state, state.residuals)
    gram = gram_matrices(j)
    eig = smallest_eigenvalues(gram)
    opts = state.options
    error = norm(residuals)
    lam = sdls_damping(np.sqrt(np.maximum(eig, 0.0)), opts.damping, opts.damping_max, opts.sigma_threshold, error)
    return _damped_step(state, j, residuals, root_w, lam**2, gram)
