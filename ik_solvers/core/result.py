"""Solve statuses, options and the batched result record (SPEC §3.3)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .errors import IKInputError


class PlaneDiagnostics(Protocol):
    """Per-frame diagnostics of a solver that bends each chain in a solver plane (``Method.HI``:
    ``core.hi.HISolveResult``), as the generic result holds them: every array ``(N, …)``.

    The result names only what its readers use, structurally, so it imports no solver's types.
    """

    @property
    def ee_axes_sphere(self) -> np.ndarray: ...  # (N, 3) EE axes in the sphere's coordinates

    @property
    def solver_normals(self) -> np.ndarray: ...  # (N, 3) solver-plane normals (solving frame)

    @property
    def pole_angles(self) -> np.ndarray: ...  # (N,) radians to the map's nearer singular point

    @property
    def pole_warnings(self) -> np.ndarray: ...  # (N,) bool

    @property
    def singular_directions(self) -> np.ndarray | None: ...  # (N, 3) or None: the sphere's poles

    @property
    def sphere(self) -> Any: ...  # the sphere frame (``a0``, ``n0``)

    @property
    def against_bend(self) -> np.ndarray: ...  # (N, n) bool: joints bent against their preferred sense


class Status(enum.Enum):
    """How a solve ended, per target."""

    CONVERGED = "CONVERGED"
    """Target error ≤ tolerance."""
    UNREACHABLE = "UNREACHABLE"
    """Outside the reachable set, and the error is within tolerance of the geometric lower bound."""
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    """Iteration budget used up while still making progress."""
    STALLED = "STALLED"
    """No progress: zero or vanishing step (e.g. a straight chain pointing past a target in front of it)."""
    DIVERGED = "DIVERGED"
    """The error ended larger than at the start."""
    SOLVER_LIMIT = "SOLVER_LIMIT"
    """Above the geometric lower bound, at the method's own least error (``lower_bound`` stays the
    geometric one; HI: ``hi.own_bounds``): the target is nearer the chain's reach than this method gets."""


class Method(enum.Enum):
    """The solver methods; values are the Blender enum identifiers (SPEC §6)."""

    ANALYTIC = "ANALYTIC"
    CCD = "CCD"
    FABRIK = "FABRIK"
    JACOBIAN_TRANSPOSE = "JACOBIAN_TRANSPOSE"
    PSEUDO_INVERSE = "PSEUDO_INVERSE"
    DLS = "DLS"
    SDLS = "SDLS"
    HI = "HI"


@dataclass(frozen=True)
class SolveOptions:
    """Parameters shared by the iterative methods, plus each method's own.

    Attributes
    ----------
    max_iterations : int
        Iteration budget (a CCD / FABRIK iteration is one full sweep).
    tolerance : float
        Target-error tolerance in chain units (Blender units).
    max_step_angle : float or None
        Largest rotation (radians) any joint may make in one iteration; None: no clamp.
    step : float or None
        Jacobian transpose η (None: backtracking line search); pseudo-inverse step scale α.
    damping : float
        DLS damping λ in chain units.
    damping_max : float
        SDLS: damping reached as the smallest singular value falls to 0.
    sigma_threshold : float
        SDLS: singular value σ₀ below which damping starts to grow.
    orientation_weight : float
        Weight (chain units per radian) of the tip-orientation error when
        target rotations are given; Jacobian methods stack the angular rows.
        The stop test stays on the position error.
    warm_start_passes : int
        FABRIK passes run before the method's own iterations (and counted in
        ``iterations``): a warm start that bends a straight or far-off chain
        toward the target, where Jacobian steps are small or singular.
    record_trajectory : bool
        Keep the joint variables after every iteration (``SolveResult.trajectory``).
    reference_weight : float
        Strength of the secondary objective that pulls the joints toward the
        reference pose (``solve(..., reference=)``, by default the initial pose)
        where the target leaves freedom; 0 turns it off. Each iteration of a
        Jacobian method adds this fraction of the way back to the reference,
        projected on the task's null space (``(I − J⁺J) · w · (q_ref − q)``, ball
        joints along the shorter arc) and within what ``max_step_angle`` leaves
        after the task step; 0.1–0.5 is a useful range. CCD and FABRIK do not
        apply it (they start from the initial pose), nor do ANALYTIC and HI.
    """

    max_iterations: int = 100
    tolerance: float = 1e-6
    max_step_angle: float | None = 0.5
    step: float | None = None
    damping: float = 0.05
    damping_max: float = 0.5
    sigma_threshold: float = 0.1
    orientation_weight: float = 0.0
    warm_start_passes: int = 0
    record_trajectory: bool = False
    reference_weight: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, (int, np.integer)) or self.max_iterations <= 0:
            raise IKInputError("max_iterations", "must be a positive integer")
        if not np.isfinite(self.orientation_weight) or self.orientation_weight < 0.0:
            raise IKInputError("orientation_weight", "must be finite and non-negative")
        if not np.isfinite(self.reference_weight) or self.reference_weight < 0.0:
            raise IKInputError("reference_weight", "must be finite and non-negative")
        if not isinstance(self.warm_start_passes, (int, np.integer)) or self.warm_start_passes < 0:
            raise IKInputError("warm_start_passes", "must be a non-negative integer")
        for name in ("tolerance", "damping_max", "sigma_threshold"):
            value = getattr(self, name)
            if not np.isfinite(value) or value <= 0.0:
                raise IKInputError(name, f"must be positive and finite, got {value!r}")
        if not np.isfinite(self.damping) or self.damping <= 0.0:
            raise IKInputError("damping", f"must be positive and finite, got {self.damping!r}")
        if self.step is not None and (not np.isfinite(self.step) or self.step <= 0.0):
            raise IKInputError("step", f"must be positive and finite, got {self.step!r}")
        if self.max_step_angle is not None and not (self.max_step_angle > 0.0):
            raise IKInputError("max_step_angle", f"must be positive, got {self.max_step_angle!r}")


@dataclass(frozen=True, eq=False)
class SolveResult:
    """A batched solve's outcome; every array has the batch axis ``N`` first.

    Attributes
    ----------
    method : Method
    q : ndarray, shape (N, n_dof)
        Joint variables (radians; ball joints as rotation vectors).
    rotations : ndarray, shape (N, n, 4)
        Each joint's rotation relative to its rest orientation, quaternions ``(w, x, y, z)``.
    positions : ndarray, shape (N, n + 1, 3)
        World positions of the joints and, last, the tip.
    status : ndarray of Status, shape (N,)
    error : ndarray, shape (N,)
        Distance from tip to target.
    lower_bound : ndarray, shape (N,)
        Geometric lower bound on ``error`` (free joints).
    iterations : ndarray of int, shape (N,)
    length_error : ndarray, shape (N,)
        Largest bone-length deviation of the final pose.
    objective_increases : ndarray of int, shape (N,)
        Iterations where ``½|p − t|²`` rose by more than 1e-12.
    sigma_min : ndarray, shape (N,)
        Smallest singular value of the last Jacobian (NaN for methods without one).
    trajectory : ndarray, shape (iterations + 1, N, n_dof), or None
        Joint variables from the start on, when ``record_trajectory`` was set.
    direction_unique : ndarray of bool, shape (N,)
        False where the answer is one of infinitely many (e.g. a two-bone target at the root).
    orientation_error : ndarray, shape (N,), or None
        Angle (radians) between the tip frame and the wanted one, when target rotations were given.
    hi : PlaneDiagnostics or None
        The HI solver's swivel-sphere diagnostics (its ``HISolveResult``: EE axes, solver-plane
        normals, pole angles and warnings, …); None for the other methods.
    """

    method: Method
    q: np.ndarray
    rotations: np.ndarray
    positions: np.ndarray
    status: np.ndarray
    error: np.ndarray
    lower_bound: np.ndarray
    iterations: np.ndarray
    length_error: np.ndarray
    objective_increases: np.ndarray
    sigma_min: np.ndarray
    trajectory: np.ndarray | None = None
    direction_unique: np.ndarray | None = field(default=None)
    orientation_error: np.ndarray | None = None
    hi: PlaneDiagnostics | None = None

    @property
    def tips(self) -> np.ndarray:
        return self.positions[:, -1]

    def count(self, status: Status) -> int:
        """How many targets ended with ``status``."""
        return int(np.sum(self.status == status))

    @property
    def success(self) -> np.ndarray:
        """True ``(N,)`` where the target was reached, or approached to its lower bound."""
        return (self.status == Status.CONVERGED) | (self.status == Status.UNREACHABLE)
