"""The public entry point: validate, pick the method from the registry, solve a batch."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from .analytic import solve_analytic
from .chain import Chain, JointKind
from .errors import IKInputError
from .heuristic_methods import ccd_step, fabrik_step
from .iteration import classify, run_iterations
from .jacobian_methods import dls_step, pseudo_inverse_step, sdls_step, transpose_step
from .kinematics import forward_kinematics, root_joint_positions, world_axes
from .result import Method, SolveOptions, SolveResult, Status
from .step_input import StepFunction
from .vectors import dot, norm

SolverFunction = Callable[..., SolveResult]
"""``(chain, targets (N, 3), q0 (N, n_dof), options, *, reference (N, n_dof), **method_args) -> SolveResult``.

``reference`` is the pose ``options.reference_weight`` pulls toward; a solver without
such a secondary objective accepts and ignores it."""

SOLVERS: dict[Method, SolverFunction] = {}

CHUNK = 1024
"""Targets the iterative methods solve at a time: a 10-bone chain's working arrays for this many
targets fit in a 2 MB cache, and per-call overheads are still spread thinly (measured 128–5000)."""


ACCEPTED_KEYWORDS: dict[Method, frozenset[str] | None] = {}
"""Per method, the keyword arguments its solver takes (None: any), read off its signature once."""


def register_solver(method: Method, solver: SolverFunction) -> None:
    """Make ``solver`` the implementation of ``method`` (a later registration replaces an earlier one)."""
    SOLVERS[method] = solver
    ACCEPTED_KEYWORDS[method] = _accepted_keywords(solver)


def _iterative(method: Method, step: StepFunction, has_jacobian: bool) -> SolverFunction:
    def solver(
        chain: Chain,
        targets: np.ndarray,
        q0: np.ndarray,
        options: SolveOptions,
        *,
        target_rotations: np.ndarray | None = None,
        reference: np.ndarray | None = None,
    ) -> SolveResult:
        if target_rotations is not None:
            if not has_jacobian:
                raise IKInputError("target_rotations", f"{method.value} solves for the tip position only")
            target_rotations = checked_rotations(target_rotations, targets.shape[0])
        n_batch = targets.shape[0]
        if n_batch <= CHUNK or options.record_trajectory:
            return with_orientation_errors(chain, run_iterations(
                method, chain, targets, q0, options, step, has_jacobian=has_jacobian,
                target_rotations=target_rotations, warm_start=fabrik_step, reference=reference,
            ), target_rotations)
        # Cache-sized pieces: every operation is per target, so this changes no bit (tests/core).
        parts = [
            run_iterations(
                method, chain, targets[s], q0[s], options, step, has_jacobian=has_jacobian,
                target_rotations=None if target_rotations is None else target_rotations[s],
                warm_start=fabrik_step, reference=None if reference is None else reference[s],
            )
            for s in (slice(start, start + CHUNK) for start in range(0, n_batch, CHUNK))
        ]
        return with_orientation_errors(chain, concatenated(parts), target_rotations)

    solver.__name__ = f"solve_{method.value.lower()}"
    return solver


def checked_rotations(target_rotations: object, n_targets: int) -> np.ndarray:
    """Wanted tip frames ``(N, 3, 3)`` from one ``(3, 3)`` or one per target; IKInputError naming
    ``target_rotations`` unless they are finite proper rotations (to 1e-6)."""
    rotations = np.asarray(target_rotations, dtype=float)
    if rotations.shape not in ((3, 3), (1, 3, 3), (n_targets, 3, 3)):
        raise IKInputError("target_rotations", f"expected shape (N, 3, 3) or (3, 3), got {rotations.shape}")
    rotations = np.broadcast_to(rotations, (n_targets, 3, 3))
    if not np.all(np.isfinite(rotations)):
        raise IKInputError("target_rotations", "must be finite")
    gram = np.swapaxes(rotations, 1, 2) @ rotations
    if np.abs(gram - np.eye(3)).max() > 1e-6 or np.any(np.linalg.det(rotations) <= 0.0):
        raise IKInputError("target_rotations", "must be proper rotation matrices")
    return rotations


def orientation_errors(frames: np.ndarray, target_rotations: np.ndarray) -> np.ndarray:
    """Angles ``(N,)`` (radians, ``[0, π]``) between tip frames ``(N, 3, 3)`` and wanted ones ``(N, 3, 3)``."""
    # ‖A − B‖_F = 2√2 sin(θ/2): accurate for small angles, where arccos of the trace is not (√ε).
    chord = np.linalg.norm(frames - target_rotations, axis=(1, 2)) / (2.0 * np.sqrt(2.0))
    return 2.0 * np.arcsin(np.clip(chord, 0.0, 1.0))


def with_orientation_errors(chain: Chain, result: SolveResult, target_rotations: np.ndarray | None) -> SolveResult:
    """``result`` with its tip frames' ``orientation_error`` against ``target_rotations`` (unchanged without)."""
    if target_rotations is None:
        return result
    frames = forward_kinematics(chain, result.q).frames[:, -1]
    return replace(result, orientation_error=orientation_errors(frames, target_rotations))


def _accepted_keywords(solver: SolverFunction) -> frozenset[str] | None:
    """The keyword arguments ``solver`` takes beyond the common ones; None: any (``**kwargs``)."""
    parameters = inspect.signature(solver).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


register_solver(Method.ANALYTIC, solve_analytic)
register_solver(Method.CCD, _iterative(Method.CCD, ccd_step, False))
register_solver(Method.FABRIK, _iterative(Method.FABRIK, fabrik_step, False))
register_solver(Method.JACOBIAN_TRANSPOSE, _iterative(Method.JACOBIAN_TRANSPOSE, transpose_step, True))
register_solver(Method.PSEUDO_INVERSE, _iterative(Method.PSEUDO_INVERSE, pseudo_inverse_step, True))
register_solver(Method.DLS, _iterative(Method.DLS, dls_step, True))
register_solver(Method.SDLS, _iterative(Method.SDLS, sdls_step, True))


def solve(
    chain: Chain,
    targets: np.ndarray,
    method: Method | str = Method.DLS,
    options: SolveOptions | None = None,
    *,
    initial: np.ndarray | None = None,
    reference: np.ndarray | None = None,
    **method_args: object,
) -> SolveResult:
    """Solve IK for a batch of tip targets.

    Parameters
    ----------
    chain : Chain
    targets : array_like, shape (N, 3) or (3,)
        World-space tip targets (chain units).
    method : Method or its name
    options : SolveOptions, optional
    initial : array_like, shape (N, n_dof) or (n_dof,), optional
        Starting joint variables; default the rest pose. (For ``Method.HI``, the preferred pose.)
    reference : array_like, shape (N, n_dof) or (n_dof,), optional
        The pose ``options.reference_weight`` pulls toward where the target leaves
        freedom; default ``initial``. The Jacobian methods add the pull's part in the
        null space of the task to every step; CCD and FABRIK do not apply it (they
        start from ``initial``, which the Blender layer sets to the reference pose);
        ANALYTIC and HI are closed form, with their own bend rules.
    **method_args
        Extras a method takes: ``bend_directions (N, 3)`` for ANALYTIC;
        ``target_rotations (N, 3, 3)`` (the wanted frame of the last joint, as the
        tip frame ``Pose.frames[:, -1]``) for the Jacobian methods (weighted by
        ``options.orientation_weight``) and for HI (the last bone aligned exactly,
        the others solved to its head: ``core.hi.solve_hi_oriented``); then
        ``result.orientation_error`` holds the angle left (radians). HI's swivel
        keywords (``core.hi.solve_hi``).

    Raises
    ------
    IKInputError
        Before computing anything, for non-finite or mis-shaped input, a keyword the method
        does not take, or a goal it cannot honour (``target_rotations`` for CCD / FABRIK /
        ANALYTIC; HI on one bone). (A planar
        chain given a target off its plane reaches the nearest point it can and
        reports ``UNREACHABLE`` with the distance to it as the lower bound.)
    """
    try:
        method = Method(method)
    except ValueError:
        raise IKInputError("method", f"unknown method {method!r}; choose from {[m.value for m in Method]}") from None
    if method not in SOLVERS:
        raise IKInputError("method", f"{method.value} has no registered solver")
    accepted = ACCEPTED_KEYWORDS[method]
    for name in method_args:
        if accepted is not None and name not in accepted:
            raise IKInputError(name, f"the {method.value} method does not take {name}")
    options = SolveOptions() if options is None else options
    targets = validated_targets(targets)
    q0 = chain.zero_pose(targets.shape[0]) if initial is None else _poses(chain, initial, targets.shape[0], "initial")
    method_args["reference"] = q0 if reference is None else _poses(chain, reference, targets.shape[0], "reference")
    normal = plane_normal(chain, q0)
    if normal is None:
        return SOLVERS[method](chain, targets, q0, options, **method_args)
    # A planar chain reaches only its plane: solve for each target's foot on it, then
    # measure against the target itself (its height adds to the error and the bound).
    heights = dot(targets - root_joint_positions(chain), normal)
    feet = targets - heights[:, None] * normal
    return _measured_off_plane(chain, SOLVERS[method](chain, feet, q0, options, **method_args), targets, q0, heights, options)


def concatenated(parts: list[SolveResult]) -> SolveResult:
    """One result from the results of consecutive pieces of a batch (no trajectories, no HI diagnostics)."""
    first = parts[0]
    arrays = {name: np.concatenate([getattr(part, name) for part in parts])
              for name in ("q", "rotations", "positions", "status", "error", "lower_bound", "iterations",
                           "length_error", "objective_increases", "sigma_min", "direction_unique")}
    if first.orientation_error is not None:
        arrays["orientation_error"] = np.concatenate([part.orientation_error for part in parts])
    return replace(first, **arrays)


def _poses(chain: Chain, poses: np.ndarray, n_targets: int, field: str) -> np.ndarray:
    """Joint variables ``(N, n_dof)`` from one pose ``(n_dof,)`` or one per target, checked finite."""
    q = np.asarray(poses, dtype=float)
    if q.ndim not in (1, 2) or q.shape[-1] != chain.n_dof or (q.ndim == 2 and q.shape[0] not in (1, n_targets)):
        raise IKInputError(field, f"expected shape (N, {chain.n_dof}) or ({chain.n_dof},)")
    if not np.all(np.isfinite(q)):
        raise IKInputError(field, "must be finite")
    return np.broadcast_to(q if q.ndim == 2 else q[None], (n_targets, chain.n_dof)).copy()


def validated_targets(targets: np.ndarray) -> np.ndarray:
    """Targets as a finite float array ``(N, 3)`` (a single ``(3,)`` target becomes N = 1)."""
    targets = np.asarray(targets, dtype=float)
    if targets.ndim == 1:
        targets = targets[None]
    if targets.ndim != 2 or targets.shape[1] != 3 or targets.shape[0] == 0:
        raise IKInputError("targets", f"expected shape (N, 3) with N ≥ 1, got {targets.shape}")
    if not np.all(np.isfinite(targets)):
        raise IKInputError("targets", "must be finite (NaN or inf found)")
    return targets


def plane_normal(chain: Chain, q: np.ndarray) -> np.ndarray | None:
    """World normal ``(3,)`` of a planar chain (all hinges, parallel axes, joints in one plane), else None.

    Read off the first row of ``q``: the solve takes a chain as planar or not for the whole
    batch, so a batch's starting poses should agree on it (rest or reference poses do).
    """
    if any(kind is not JointKind.HINGE for kind in chain.kinds):
        return None
    pose = forward_kinematics(chain, q[:1])
    axes = world_axes(chain, pose)[0]
    normal = axes[0] / np.linalg.norm(axes[0])
    if np.abs(np.cross(axes, normal)).max() > 1e-12:
        return None
    heights = (pose.positions[0] - pose.positions[0, 0]) @ normal
    if np.abs(heights).max() > 1e-12 * chain.reach:
        return None
    return normal


def _measured_off_plane(
    chain: Chain, result: SolveResult, targets: np.ndarray, q0: np.ndarray, heights: np.ndarray, options: SolveOptions
) -> SolveResult:
    """A planar chain's result for the targets' feet on its plane, measured against the targets.

    The error is the distance to the target; the lower bound ``√(b² + h²)`` for the
    foot's own bound ``b`` and the target's height ``h`` off the plane (the nearest
    reachable point is the foot's). Off-plane targets are classified again, so they
    end ``UNREACHABLE`` at that bound, never ``CONVERGED``.
    """
    off = heights != 0.0
    if not np.any(off):
        return result
    error = norm(result.positions[:, -1] - targets)
    lower = np.where(off, np.hypot(result.lower_bound, heights), result.lower_bound)
    start_error = norm(forward_kinematics(chain, q0).tips - targets)
    again = classify(error, start_error, lower, result.status == Status.STALLED, options.tolerance)
    return replace(result, error=error, lower_bound=lower, status=np.where(off, again, result.status))
