"""The HI solve's entry: one batch of frames, history independent (SPEC §5); ``orientation`` registers it as ``Method.HI``."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from ..array_ops import NUMPY_OPS, ROW_OPS
from ..chain import Chain
from ..errors import IKInputError
from ..kinematics import Pose, bone_length_errors
from ..result import Method, SolveOptions, SolveResult
from ..solve import validated_targets
from ..vectors import matvec, norm
from ..zero_plane import ZERO_PLANE_MAPS, PoleObjectZeroPlaneMap, ZeroPlaneMapFactory, swivel_angles
from .in_plane import in_plane, lifted_quaternions, row_bent
from .placement import joint_quaternions, joint_variables, one_frame_pose, placed_pose
from .planes import DEFAULT_WARNING_ANGLE, SolverPlanes, pole_angles, solver_planes
from .reach import HI_STATUSES, against_bend, reach_status
from .sphere import PreferredPose, SphereFrame, preferred_pose

_HI_STATUS_ARRAY = np.array(HI_STATUSES, dtype=object)


# ---------------------------------------------------------------- solve
def hi_preferred_pose(chain: Chain, preferred: np.ndarray, *, bend_direction: ArrayLike | None = None,
                      zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT", with_poles: bool = False) -> PreferredPose:
    """:func:`~.sphere.preferred_pose` for a solve with these keywords (``with_poles``: pole positions given):
    where the pole map has poles, every frame's plane comes from the pole, so a straight preferred pose
    needs no ``bend_direction``."""
    from_poles = (with_poles and isinstance(zero_plane_map, str)
                  and ZERO_PLANE_MAPS.get(zero_plane_map) is PoleObjectZeroPlaneMap)
    return preferred_pose(chain, preferred, bend_direction, any_plane=from_poles)


@dataclass(frozen=True, eq=False)
class HISolveResult:
    """An HI solve's outcome: the core result plus the swivel-sphere extras, batch axis ``N`` first.

    Attributes
    ----------
    result : SolveResult
        Pose, status, errors (``method`` is ``Method.HI``).
    ee_axes : ndarray, shape (N, 3)
        Unit EE axes (start joint → target) in the solving frame.
    ee_axes_sphere : ndarray, shape (N, 3)
        The same in the sphere's coordinates (where the zero-plane map works).
    zero_plane_normals : ndarray, shape (N, 3)
        Zero-plane normals in the solving frame (computed on first use, as ``map_singular``).
    solver_normals : ndarray, shape (N, 3)
        Solver-plane normals in the solving frame (the zero plane turned by the swivel).
    swivel : ndarray, shape (N,)
        Swivel angle used per frame (radians).
    pole_angles : ndarray, shape (N,)
        Angle between the EE axis and the nearer singular point of the zero-plane map —
        the sphere's poles ``±n0`` for the default map, the pole target's line for the
        pole-object map (radians, ``[0, π/2]``).
    pole_warnings : ndarray of bool, shape (N,)
        ``pole_angles`` below the warning angle: the solver plane may flip here.
    map_singular : ndarray of bool, shape (N,)
        Where the zero-plane map itself says it is singular.
    sphere : SphereFrame
    planes : SolverPlanes
        The batch's solver planes (``zero_plane_normals`` and ``map_singular`` are computed from
        them on first use).
    singular_directions : ndarray, shape (N, 3), or None
        Per frame, the unit direction (sphere coordinates) whose ends are the map's
        singular points; None means the sphere's poles ``±n0``.
    own_bounds : ndarray, shape (N,)
        HI's own least error at each target's distance (``reach.own_bound``): the
        geometric ``result.lower_bound`` for a planar chain; where it is more and the error
        sits at it, the status is ``SOLVER_LIMIT``.
    against_bend : ndarray of bool, shape (N, n)
        Joints bent against their preferred sense (SPEC §5, reach honesty: a target nearer
        the start joint than the chain reaches with every bend its preferred way); the start
        joint never. ``against_bend_counts`` counts the joints per frame.
    """

    result: SolveResult
    ee_axes: np.ndarray
    ee_axes_sphere: np.ndarray
    solver_normals: np.ndarray
    swivel: np.ndarray
    pole_angles: np.ndarray
    pole_warnings: np.ndarray
    sphere: SphereFrame
    planes: SolverPlanes = field(repr=False)
    singular_directions: np.ndarray | None = None
    own_bounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    against_bend: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))

    # Diagnostics a live solve does not read, computed on first use from the solver planes (the
    # same operations, so the same bits, whenever they run).
    @cached_property
    def zero_plane_normals(self) -> np.ndarray:
        return matvec(self.planes.to_solving, self.planes.zero_normals_sphere)

    @cached_property
    def map_singular(self) -> np.ndarray:
        return self.planes.singular

    @property
    def against_bend_counts(self) -> np.ndarray:
        """Joints bent against their preferred sense per frame ``(N,)`` (int)."""
        return np.count_nonzero(self.against_bend, axis=1)


def solve_hi(
    chain: Chain,
    targets: np.ndarray,
    preferred: np.ndarray | PreferredPose,
    *,
    swivel: np.ndarray | float = 0.0,
    zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT",
    poles: np.ndarray | None = None,
    map_data: dict | None = None,
    sphere_rotations: np.ndarray | None = None,
    options: SolveOptions | None = None,
    warning_angle: float = DEFAULT_WARNING_ANGLE,
    bend_direction: ArrayLike | None = None,
) -> HISolveResult:
    """Solve a batch of frames with the HI solver.

    Parameters
    ----------
    chain : Chain
        Ball start joint; later joints ball joints or hinges about the preferred plane's normal.
    targets : array_like, shape (N, 3)
        Tip targets in the solving frame (chain units).
    preferred : array_like, shape (n_dof,), or PreferredPose
        The preferred pose (joint variables), or one already checked by :func:`preferred_pose`.
    swivel : float or array_like, shape (N,)
        Swivel angle ψ per frame, radians: the solver plane is the zero plane turned by ψ
        about the EE axis (right-handed).
    zero_plane_map : str or factory
        A name registered with ``register_zero_plane_map`` or a factory ``(a0, n0) -> map``.
    poles : array_like, shape (N, 3) or (3,), optional
        Pole-target positions in the solving frame; passed to the map (as vectors from the
        start joint in sphere coordinates, keyword ``poles``). ``"POLE_OBJECT"`` needs them.
    map_data : dict of arrays, optional
        Further per-frame keywords for a custom map, passed as given.
    sphere_rotations : array_like, shape (N, 3, 3) or (3, 3), optional
        The parent space (see :func:`sphere_rotations_for_parent_space`); default the chain's
        root rotation every frame (``START_JOINT``).
    options : SolveOptions, optional
        Only the tolerance is read (it sets the status): the in-plane solve runs to
        machine precision whatever the budget.
    warning_angle : float
        Pole distance (radians) under which ``pole_warnings`` is set; default 10°.
    bend_direction : array_like, shape (3,), optional
        Where a straight preferred pose bends (the knee's or elbow's way, in the start joint's rest
        frame; :func:`hi_preferred_pose`); ignored for a bent preferred pose or a PreferredPose given.
    """
    options = SolveOptions() if options is None else options
    pref = preferred if isinstance(preferred, PreferredPose) else hi_preferred_pose(
        chain, preferred, bend_direction=bend_direction, zero_plane_map=zero_plane_map, with_poles=poles is not None)
    if pref.chain is not chain:
        raise IKInputError("preferred", "the PreferredPose was made for another chain")
    if not np.isfinite(warning_angle) or warning_angle < 0.0:
        raise IKInputError("warning_angle", f"must be a non-negative angle, got {warning_angle!r}")
    targets = validated_targets(targets)
    chain = pref.chain
    plane = solver_planes(pref, targets, swivel, zero_plane_map, poles, map_data, sphere_rotations)

    n_frames = targets.shape[0]
    if n_frames == 1:  # live mode's full update: the same per-target functions on floats
        bent = row_bent(ROW_OPS, pref, float(plane.r[0]))
        positions, quats, q = one_frame_pose(pref, plane, bent)
    else:
        bent = in_plane(pref, plane.r)
        start_rows, positions = placed_pose(pref, plane, bent)
        quats = joint_quaternions(pref, start_rows, bent.bends)
        q = None
    lift = pref.in_plane_constants.lift
    if bent.lifts is not None and lift is not None:  # past the in-plane reach: the heights give way (in_plane.lifted)
        rows = np.flatnonzero(plane.r > pref.in_plane_reach)  # in_plane's lifted rows (the others' lifts are 0)
        lifts = np.asarray(bent.lifts, dtype=float).reshape(n_frames, -1)[rows]
        turned = lifted_quaternions(NUMPY_OPS, lift, [tuple(quats[rows, j, k] for k in range(4))
                                                      for j in range(quats.shape[1])], lifts)
        for j, components in enumerate(turned):
            for k, value in enumerate(components):
                quats[rows, j, k] = value
        q = None
    if q is None:
        q = joint_variables(pref, quats, np.asarray(bent.bends, dtype=float).reshape(n_frames, -1))
    pose = Pose(frames=np.empty((n_frames, 0, 3, 3)), positions=positions)  # only positions are read below
    error = norm(pose.tips - targets)
    lower, own, index = reach_status(NUMPY_OPS, pref, error, plane.r, options.tolerance)
    status = _HI_STATUS_ARRAY[index]
    result = SolveResult(
        method=Method.HI,
        q=q,
        rotations=quats,
        positions=pose.positions,
        status=status,
        error=error,
        lower_bound=lower,
        iterations=np.broadcast_to(bent.iterations, (n_frames,)).copy(),
        length_error=bone_length_errors(chain, pose),
        objective_increases=np.zeros(n_frames, dtype=int),
        sigma_min=np.full(n_frames, np.nan),
        direction_unique=plane.r > pref.centre_radius,
    )
    angles = pole_angles(plane.axes_sphere, plane.singular_directions)
    return HISolveResult(
        result=result,
        ee_axes=plane.axes,
        ee_axes_sphere=plane.axes_sphere,
        solver_normals=plane.normals,
        swivel=plane.swivel,
        pole_angles=angles,
        pole_warnings=angles < warning_angle,
        sphere=pref.sphere,
        singular_directions=plane.singular_directions,
        planes=plane,
        own_bounds=own,
        against_bend=against_bend(pref, np.asarray(bent.bends, dtype=float).reshape(n_frames, -1)),
    )


# ------------------------------------------------------- swivel helpers
def swivel_for_plane(
    chain: Chain,
    targets: np.ndarray,
    preferred: np.ndarray | PreferredPose,
    plane_normals: np.ndarray,
    *,
    zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT",
    poles: np.ndarray | None = None,
    map_data: dict | None = None,
    sphere_rotations: np.ndarray | None = None,
    bend_direction: ArrayLike | None = None,
) -> np.ndarray:
    """Swivel angles ``(N,)`` whose solver plane has the given normals ``(N, 3)`` (solving frame).

    Creating a new chain uses this so the solver plane stays where it is in the
    viewport: pass the current pose's normals (:func:`pose_plane_normals`) and
    the current tip as the target. (Re-assigning the start joint instead keeps ψ.)
    Only the part of each normal ⟂ the EE axis counts.
    """
    pref = preferred if isinstance(preferred, PreferredPose) else hi_preferred_pose(
        chain, preferred, bend_direction=bend_direction, zero_plane_map=zero_plane_map, with_poles=poles is not None)
    targets = validated_targets(targets)
    normals = np.asarray(plane_normals, dtype=float)
    normals = np.broadcast_to(normals, targets.shape) if normals.ndim == 1 else normals
    if normals.shape != targets.shape or not np.all(np.isfinite(normals)):
        raise IKInputError("plane_normals", f"expected finite normals of shape {targets.shape}")
    plane = solver_planes(pref, targets, 0.0, zero_plane_map, poles, map_data, sphere_rotations)
    return swivel_angles(plane.axes, plane.normals, normals)
