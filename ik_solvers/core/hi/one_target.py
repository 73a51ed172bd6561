"""One target's HI solve on Python floats (live mode, issue 12): ``solve_hi``'s math for N = 1.

On one target ``solve_hi``'s numpy calls on one-row arrays cost ~1 µs each. Here the same per-target
functions run on Python floats with ``array_ops.SCALAR_OPS``, in the batch's order: planes (EE axis,
pole angle), zero_plane (the built-in maps, the normal's check and clean-up, the swivel), in_plane
and plane_chain (the bends, the root finder), placement (the pose, the joint rotations and
variables), rotations, the lower bound and the status. This module only gathers the inputs and the
per-pose constants and calls them.

What equals what (``array_ops``): the batch's bits, every field, wherever ``math``'s cosine and sine
round as numpy's (they do on this machine: tests/core/test_hi_one_target.py); elsewhere a few float64
roundings apart.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..array_ops import SCALAR_OPS as xp
from ..chain import JointKind
from ..result import SolveOptions, Status
from ..rotations import quaternion_about_axis, quaternion_from_rotvec, quaternion_product
from ..vectors import cross3, norm3, tmatvec3, unit3, vec3
from ..zero_plane import (
    ZERO_PLANE_MAPS,
    DefaultZeroPlaneMap,
    PoleObjectZeroPlaneMap,
    pole_direction,
)
from .in_plane import lifted_quaternions, row_bent
from .parent_space import rotation_rows
from .placement import bent_quaternions, bent_variables, placed_point, start_rotation
from .planes import pole_angle, row_plane
from .reach import HI_STATUSES, reach_status
from .sphere import PreferredPose


class OneTargetHI(NamedTuple):
    """One target's HI solve (Python floats): ``solve_hi``'s row 0 (its bits where ``math``'s cosine is numpy's).

    Attributes
    ----------
    q : tuple of float, length n_dof
        Joint variables (``result.q[0]``).
    local_quaternions : tuple of (w, x, y, z), length n
        ``kinematics.local_quaternions(chain, q)``: what a rig writer sets.
    error : float
        Tip-to-target distance (chain units).
    lower_bound : float
        The geometric lower bound on the error at this distance (``result.lower_bound[0]``).
    status : Status
    iterations : int
        Root-finding steps of the in-plane solve (1 for two bones).
    pole_angle : float
        Angle between the EE axis and the nearer singular point of the map (radians, ``[0, π/2]``).
    """

    q: tuple[float, ...]
    local_quaternions: tuple[tuple[float, float, float, float], ...]
    error: float
    lower_bound: float
    status: Status
    iterations: int
    pole_angle: float


def solve_hi_one(
    pref: PreferredPose,
    target: Any,
    *,
    swivel: float = 0.0,
    zero_plane_map: Any = "DEFAULT",
    pole: Any = None,
    sphere_rotation: Any = None,
    tolerance: float = SolveOptions().tolerance,
) -> OneTargetHI | None:
    """``solve_hi(pref.chain, [target], pref, ...)`` for one target, on Python floats.

    Parameters
    ----------
    pref : PreferredPose (its chain is solved)
    target, pole : three floats
        Tip target and pole-target position in the solving frame (chain units), as one row of
        ``solve_hi``'s ``targets`` and ``poles``.
    swivel : float
        Swivel angle (radians).
    zero_plane_map : str
        ``"DEFAULT"`` or ``"POLE_OBJECT"`` (or another name for one of those two built-in maps).
    sphere_rotation : (3, 3) rotation, optional
        ``solve_hi``'s ``sphere_rotations`` for the one frame; default the chain's root rotation.
    tolerance : float
        ``SolveOptions.tolerance`` (positive: as ``SolveOptions`` checks it).

    Returns
    -------
    OneTargetHI, or None where the caller must run ``solve_hi`` instead: a custom zero-plane
    map (a factory, or a name registered for another map); the pole map without a pole; any
    input ``solve_hi`` would refuse or might (non-finite target, pole or swivel, a
    ``sphere_rotation`` not clearly a proper rotation, a map normal its check rejects) —
    ``solve_hi`` then raises its ``IKInputError`` or decides the borderline case.
    """
    factory = ZERO_PLANE_MAPS.get(zero_plane_map) if isinstance(zero_plane_map, str) else None
    if factory is not DefaultZeroPlaneMap and factory is not PoleObjectZeroPlaneMap:
        return None
    target, swivel = vec3(target), float(swivel)
    if not all(map(math.isfinite, (*target, swivel))):
        return None
    rotation = pref.root_rows
    if sphere_rotation is not None:
        rotation = rotation_rows(sphere_rotation)
        if rotation is None:
            return None
    start, n0 = pref.start_floats, pref.sphere_floats[1]
    offset = (target[0] - start[0], target[1] - start[1], target[2] - start[2])
    r = norm3(xp, offset)
    pole_sphere = None
    if factory is PoleObjectZeroPlaneMap:
        if pole is None:
            return None
        pole = vec3(pole)
        if not all(map(math.isfinite, pole)):
            return None
        pole = (pole[0] - start[0], pole[1] - start[1], pole[2] - start[2])
        pole_sphere = pole if rotation is None else tmatvec3(rotation, pole)
        singular_direction = unit3(xp, pole_direction(xp, pole_sphere, n0))
    else:
        if pole is not None and not all(map(math.isfinite, vec3(pole))):
            return None
        singular_direction = pref.unit_n0_floats
    plane = row_plane(xp, pref, offset, r, rotation, pole_sphere, swivel)
    if plane is None:
        return None
    axis, axis_sphere, _, plane_normal = plane

    bent = row_bent(xp, pref, r)
    side = cross3(plane_normal, axis)
    tip_turn = bent.tip_turn
    tip = placed_point(axis, plane_normal, side, start, xp.cos(tip_turn), xp.sin(tip_turn),
                       bent.xs[-1], bent.hs[-1], bent.ys[-1])
    rows = start_rotation(xp, axis, plane_normal, side, pref.start_parent_rows, bent.bends[0] - tip_turn, pref.start_basis_rows)
    quats = bent_quaternions(xp, pref, rows, bent.bends)
    lift = pref.in_plane_constants.lift
    if bent.lifts is not None and lift is not None:  # past the in-plane reach: the heights give way (in_plane.lifted)
        quats = lifted_quaternions(xp, lift, quats, bent.lifts)
    q = bent_variables(xp, pref, quats, bent.bends)
    error = norm3(xp, (tip[0] - target[0], tip[1] - target[1], tip[2] - target[2]))
    lower, _, index = reach_status(xp, pref, error, r, tolerance)
    status = HI_STATUSES[index]
    return OneTargetHI(tuple(q), _local_quaternions(pref, q), error, lower, status, bent.iterations,
                       pole_angle(xp, axis_sphere, singular_direction))


def _local_quaternions(pref: PreferredPose, q: list[float]) -> tuple[tuple[float, float, float, float], ...]:
    """``kinematics.local_quaternions(chain, q)`` for one pose: each joint kind's quaternion from the
    rotations functions it calls."""
    out, ball = [], JointKind.BALL
    for kind, first in pref.joint_kinds:
        if kind is ball:
            out.append(quaternion_from_rotvec(xp, q[first : first + 3]))
        else:
            turn = quaternion_about_axis(xp, q[first], pref.joint_axes[first])
            if kind is JointKind.UNIVERSAL:
                turn = quaternion_product(turn, quaternion_about_axis(xp, q[first + 1], pref.joint_axes[first + 1]))
            out.append(turn)
    return tuple(out)
