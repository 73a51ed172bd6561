"""What one iteration's method step sees, shared by the loop and both method families (SPEC §3.2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .chain import Chain
from .kinematics import Pose
from .result import SolveOptions


@dataclass(frozen=True, eq=False)
class StepInput:
    """What a method step sees for the ``M`` still-active targets.

    Attributes
    ----------
    chain : Chain
    q : ndarray, shape (M, n_dof)
    pose : Pose
        Forward kinematics of ``q``.
    targets : ndarray, shape (M, 3)
    aims : ndarray, shape (M, 3)
        The targets, or for those out of reach the nearest point of the
        reachable shell: Jacobian methods then solve a problem with a zero
        residual instead of crawling toward the bound.
    residuals : ndarray, shape (M, 3)
        ``tip − aim``.
    options : SolveOptions
    rows : ndarray of int, shape (M,)
        Where these targets sit in the whole batch (to pick per-target extras).
    target_rotations : ndarray, shape (M, 3, 3), or None
        World orientations wanted for the tip frame (weighted by ``options.orientation_weight``).
    reference : ndarray, shape (M, n_dof), or None
        Joint variables of the reference pose the secondary objective pulls
        toward (``options.reference_weight``); None when the weight is 0.
    """

    chain: Chain
    q: np.ndarray
    pose: Pose
    targets: np.ndarray
    aims: np.ndarray
    residuals: np.ndarray
    options: SolveOptions
    rows: np.ndarray
    target_rotations: np.ndarray | None = None
    reference: np.ndarray | None = None


StepFunction = Callable[[StepInput], np.ndarray]
"""Maps the active state to the new joint variables ``(M, n_dof)`` (already clamped)."""
