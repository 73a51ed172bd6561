"""Jacobian-based steps: transpose, pseudo-inverse, DLS and SVD-adaptive DLS (SPEC §3.2).

Each step works in weight-scaled variables ``y = W^{-1/2} Δq`` so per-joint
weights (``1 − stiffness``) enter every method the same way.
"""

from __future__ import annotations

import numpy as np

from .chain import Chain
from .iteration import StepInput
from .kinematics import apply_increments, clamp_step, forward_kinematics, position_jacobian

# Singular values below this fraction of the largest are treated as zero by
# the pseudo-inverse (the usual rank cut-off, in the spirit of numpy.linalg.pinv's rcond).
PINV_RCOND = 1e-10
# Armijo constant of the backtracking line search (Nocedal & Wright use 1e-4).
ARMIJO = 1e-4
# Halvings before the line search gives up and takes no step.
MAX_BACKTRACKS = 30


def _scaled_jacobian(state: StepInput) -> tuple[np.ndarray, np.ndarray]:
    root_w = np.sqrt(state.chain.weights)
    return position_jacobian(state.chain, state.pose) * root_w, root_w


def _finish(state: StepInput, dq: np.ndarray) -> np.ndarray:
    dq = clamp_step(state.chain, dq, state.options.max_step_angle)
    return apply_increments(state.chain, state.q, dq)


def transpose_step(state: StepInput) -> np.ndarray:
    """``Δq = −η W Jᵀ (p − t)``; with ``step=None`` η comes from a backtracking line search."""
    j, root_w = _scaled_jacobian(state)
    gradient = np.einsum("nid,ni->nd", j, state.residuals)  # in scaled variables
    if state.options.step is not None:
        return _finish(state, -state.options.step * gradient * root_w)
    return _line_search(state, j, gradient, root_w)


def _line_search(state: StepInput, j: np.ndarray, gradient: np.ndarray, root_w: np.ndarray) -> np.ndarray:
    """Backtracking on ``F = ½|p − t|²`` from the step that is exact for the linear model."""
    jg = np.einsum("nid,nd->ni", j, gradient)
    g2 = np.einsum("nd,nd->n", gradient, gradient)
    alpha = g2 / np.maximum(np.einsum("ni,ni->n", jg, jg), 1e-300)
    f0 = 0.5 * np.einsum("ni,ni->n", state.residuals, state.residuals)
    q_out = state.q.copy()
    pending = np.flatnonzero(g2 > 0.0)
    for _ in range(MAX_BACKTRACKS):
        if pending.size == 0:
            break
        dq = clamp_step(state.chain, -alpha[pending, None] * gradient[pending] * root_w, state.options.max_step_angle)
        trial = apply_increments(state.chain, state.q[pending], dq)
        tips = forward_kinematics(state.chain, trial).tips
        f = 0.5 * np.sum((tips - state.aims[pending]) ** 2, axis=-1)
        ok = f <= f0[pending] - ARMIJO * alpha[pending] * g2[pending]
        q_out[pending[ok]] = trial[ok]
        pending = pending[~ok]
        alpha[pending] *= 0.5
    return q_out


def pseudo_inverse_step(state: StepInput) -> np.ndarray:
    """Gauss–Newton ``Δq = −α J⁺ e`` through the SVD (never an explicit inverse)."""
    j, root_w = _scaled_jacobian(state)
    u, s, vt = np.linalg.svd(j, full_matrices=False)
    inverse_s = np.where(s > PINV_RCOND * s[:, :1], 1.0 / np.maximum(s, 1e-300), 0.0)
    y = -np.einsum("nkd,nk,nik,ni->nd", vt, inverse_s, u, state.residuals)
    alpha = 1.0 if state.options.step is None else state.options.step
    return _finish(state, alpha * y * root_w)


def dls_step(state: StepInput) -> np.ndarray:
    """``Δq = −W Jᵀ (J W Jᵀ + λ² I)⁻¹ e``, solved as a linear system."""
    j, root_w = _scaled_jacobian(state)
    system = j @ np.swapaxes(j, 1, 2) + state.options.damping**2 * np.eye(j.shape[1])
    x = solve_spd3(system, state.residuals)
    return _finish(state, -np.einsum("nid,ni->nd", j, x) * root_w)


def sdls_damping(sigma_min: np.ndarray, damping: float, damping_max: float, threshold: float) -> np.ndarray:
    """Damping ``(N,)`` growing as σ_min falls below σ₀ (Nakamura & Hanafusa's schedule).

    ``λ² = λ_min²`` for ``σ_min ≥ σ₀``, ``λ_min² + (1 − (σ_min/σ₀)²) λ_max²`` below it.
    """
    ratio = np.clip(sigma_min / threshold, 0.0, 1.0)
    return np.sqrt(damping**2 + (1.0 - ratio**2) * damping_max**2)


def sdls_step(state: StepInput) -> np.ndarray:
    """DLS with damping chosen per target from the Jacobian's smallest singular value."""
    j, root_w = _scaled_jacobian(state)
    u, s, vt = np.linalg.svd(j, full_matrices=False)
    opts = state.options
    lam = sdls_damping(s[:, -1], opts.damping, opts.damping_max, opts.sigma_threshold)
    gain = s / (s**2 + lam[:, None] ** 2)
    y = -np.einsum("nkd,nk,nik,ni->nd", vt, gain, u, state.residuals)
    return _finish(state, y * root_w)


def solve_spd3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve batched symmetric positive definite 3×3 systems ``a (N, 3, 3) x = b (N, 3)``.

    Closed-form Cholesky: ``numpy.linalg.solve`` pays a LAPACK call per
    matrix, which dominates a batched DLS step at this size.
    """
    if a.shape[-1] != 3:
        return np.linalg.solve(a, b[..., None])[..., 0]
    l00 = np.sqrt(a[:, 0, 0])
    l10 = a[:, 1, 0] / l00
    l20 = a[:, 2, 0] / l00
    l11 = np.sqrt(a[:, 1, 1] - l10**2)
    l21 = (a[:, 2, 1] - l20 * l10) / l11
    l22 = np.sqrt(a[:, 2, 2] - l20**2 - l21**2)
    y0 = b[:, 0] / l00
    y1 = (b[:, 1] - l10 * y0) / l11
    y2 = (b[:, 2] - l20 * y0 - l21 * y1) / l22
    x2 = y2 / l22
    x1 = (y1 - l21 * x2) / l11
    x0 = (y0 - l10 * x1 - l20 * x2) / l00
    return np.stack([x0, x1, x2], -1)
