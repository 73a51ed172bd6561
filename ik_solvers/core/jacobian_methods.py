"""Jacobian-based steps: transpose, pseudo-inverse, DLS and SVD-adaptive DLS (SPEC §3.2).

Each step works in weight-scaled variables ``y = W^{-1/2} Δq`` so per-joint
weights (``1 − stiffness``) enter every method the same way.
"""

from __future__ import annotations

import numpy as np

from .iteration import StepInput
from .kinematics import apply_increments, clamp_step, forward_kinematics, jacobian, position_jacobian
from .rotations import rotvecs_from_matrices
from .vectors import cross, dot, matvec, norm, tmatvec, unit_stride

# Singular values below this fraction of the largest are treated as zero by
# the pseudo-inverse (the usual rank cut-off, in the spirit of numpy.linalg.pinv's rcond).
PINV_RCOND = 1e-10
# Armijo constant of the backtracking line search (Nocedal & Wright use 1e-4).
ARMIJO = 1e-4
# Halvings before the line search gives up and takes no step.
MAX_BACKTRACKS = 30


def _scaled_problem(state: StepInput, residuals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        angular = rotvecs_from_matrices(tip_frames @ np.swapaxes(state.target_rotations, 1, 2))
        residuals = np.concatenate([residuals, weight * angular], 1)
    return (j if root_w is None else j * root_w), residuals, root_w


def _finish(state: StepInput, y: np.ndarray, root_w: np.ndarray | None) -> np.ndarray:
    """Clamp and apply a step given in weight-scaled variables ``y``."""
    dq = y if root_w is None else y * root_w
    dq = clamp_step(state.chain, dq, state.options.max_step_angle)
    return apply_increments(state.chain, state.q, dq)


def transpose_step(state: StepInput) -> np.ndarray:
    """``Δq = −η W Jᵀ (p − t)``; with ``step=None`` η comes from a backtracking line search.

    The gradient of ``F = ½|p − t|²`` toward the real target (not the shell
    aim the other Jacobian methods use), so a line search on F is a true descent.
    """
    j, residuals, root_w = _scaled_problem(state, state.pose.tips - state.targets)
    gradient = tmatvec(j, residuals)  # in scaled variables
    if state.options.step is not None:
        return _finish(state, -state.options.step * gradient, root_w)
    return _line_search(state, j, residuals, gradient, root_w)


def _line_search(
    state: StepInput, j: np.ndarray, residuals: np.ndarray, gradient: np.ndarray, root_w: np.ndarray
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
    """Gauss–Newton ``Δq = −α J⁺ e`` through the SVD (never an explicit inverse)."""
    j, residuals, root_w = _scaled_problem(state, state.residuals)
    u, s, vt = np.linalg.svd(j, full_matrices=False)
    inverse_s = np.where(s > PINV_RCOND * s[:, :1], 1.0 / np.maximum(s, 1e-300), 0.0)
    y = -tmatvec(vt, inverse_s * tmatvec(u, residuals))
    alpha = 1.0 if state.options.step is None else state.options.step
    return _finish(state, alpha * y, root_w)


def _damped_step(
    state: StepInput, j: np.ndarray, residuals: np.ndarray, root_w: np.ndarray, damping_squared: np.ndarray | float
) -> np.ndarray:
    """``Δq = −W Jᵀ (J W Jᵀ + λ² I)⁻¹ e`` (wide form) or ``−W (W Jᵀ J + λ² I)⁻¹ Jᵀ e`` (tall form)."""
    lam2 = damping_squared if np.isscalar(damping_squared) else damping_squared[:, None, None]
    rows, cols = j.shape[1], j.shape[2]
    if cols >= rows:
        system = j @ np.swapaxes(j, 1, 2) + lam2 * np.eye(rows)
        x = solve_spd3(system, residuals)
        y = -tmatvec(j, x)
    else:
        system = np.swapaxes(j, 1, 2) @ j + lam2 * np.eye(cols)
        y = -np.linalg.solve(system, tmatvec(j, residuals)[..., None])[..., 0]
    return _finish(state, y, root_w)


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
    gram = j @ np.swapaxes(j, 1, 2) if j.shape[2] >= j.shape[1] else np.swapaxes(j, 1, 2) @ j
    eig = smallest_eigenvalues(gram)
    opts = state.options
    error = norm(residuals)
    lam = sdls_damping(np.sqrt(np.maximum(eig, 0.0)), opts.damping, opts.damping_max, opts.sigma_threshold, error)
    # Keep the system positive definite where both σ_min and the error vanish.
    floor = (PINV_RCOND * np.trace(gram, axis1=1, axis2=2)) ** 2 + 1e-300
    return _damped_step(state, j, residuals, root_w, np.maximum(lam**2, floor))


def smallest_eigenvalues(gram: np.ndarray) -> np.ndarray:
    """Smallest eigenvalue ``(N,)`` of symmetric positive semi-definite ``(N, k, k)`` matrices.

    Closed form for k = 3 (the trigonometric solution of the characteristic
    cubic, Smith 1961) and k ≤ 2; LAPACK's ``eigvalsh`` otherwise.
    """
    k = gram.shape[-1]
    if k == 1:
        return gram[:, 0, 0]
    if k == 2:
        mean = 0.5 * (gram[:, 0, 0] + gram[:, 1, 1])
        return mean - np.hypot(0.5 * (gram[:, 0, 0] - gram[:, 1, 1]), unit_stride(gram[:, 0, 1]))
    if k != 3:
        return np.linalg.eigvalsh(gram)[:, 0]
    a = gram
    p1 = a[:, 0, 1] ** 2 + a[:, 0, 2] ** 2 + a[:, 1, 2] ** 2
    mean = (a[:, 0, 0] + a[:, 1, 1] + a[:, 2, 2]) / 3.0
    d0, d1, d2 = a[:, 0, 0] - mean, a[:, 1, 1] - mean, a[:, 2, 2] - mean
    p = np.sqrt((d0**2 + d1**2 + d2**2 + 2.0 * p1) / 6.0)
    safe_p = np.where(p > 0.0, p, 1.0)
    b00, b11, b22 = d0 / safe_p, d1 / safe_p, d2 / safe_p
    b01, b02, b12 = a[:, 0, 1] / safe_p, a[:, 0, 2] / safe_p, a[:, 1, 2] / safe_p
    det_b = b00 * (b11 * b22 - b12**2) - b01 * (b01 * b22 - b12 * b02) + b02 * (b01 * b12 - b11 * b02)
    phi = np.arccos(np.clip(det_b / 2.0, -1.0, 1.0)) / 3.0
    smallest = mean + 2.0 * p * np.cos(phi + 2.0 * np.pi / 3.0)
    return np.where(p > 0.0, smallest, mean)


def solve_spd3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve batched symmetric positive definite systems ``a (N, k, k) x = b (N, k)``.

    For k = 3 in closed form by the adjugate (the rows of ``a⁻¹ det a`` are
    cross products of columns): about twenty array operations whatever the
    batch size, where ``numpy.linalg.solve`` pays a LAPACK call per matrix.
    Elementwise only, so a target's result never depends on its batch
    (history independence and ``--jobs`` chunking are bit-exact). The damping
    keeps these systems far from singular (condition ≤ (σ²max + λ²) / λ²).
    """
    if a.shape[-1] != 3:
        return np.linalg.solve(a, b[..., None])[..., 0]
    columns = np.swapaxes(a, 1, 2)
    adjugate_rows = cross(columns[:, _NEXT_ROW], columns[:, _AFTER_NEXT_ROW])
    determinant = dot(columns[:, 0], adjugate_rows[:, 0])
    return matvec(adjugate_rows, b) / determinant[:, None]


_NEXT_ROW = np.array([1, 2, 0])
_AFTER_NEXT_ROW = np.array([2, 0, 1])
