"""HI's reach honesty (SPEC §5, issue 20): the path's folded end, the bounds, the status, the joints
flagged for bending against their preferred sense.

A target the chain reaches only by bending a joint against its preferred sense is reached (the path's
third part, ``path.monotone_path``) and the joint flagged (:func:`against_bend`); a non-planar chain
of ball joints straightens past its in-plane reach to the bones' full reach (``in_plane.lifted``). The
lower bound reported is always the geometric one; where HI's own bound is more and the error sits at
it, the status says so (``SOLVER_LIMIT``, :func:`reach_status`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..array_ops import ArrayOps, Real
from ..iteration import _STATUSES, DISTANCE_ROUNDING, status_index
from ..result import Status
from .path import folded_pose

if TYPE_CHECKING:
    from .sphere import PreferredPose

# The statuses :func:`reach_status` indexes: ``iteration.status_index``'s, then SOLVER_LIMIT.
HI_STATUSES = (*_STATUSES, Status.SOLVER_LIMIT)
# A joint turned past straight against its preferred sense by more than this (radians) is flagged
# (:func:`against_bend`): less is a straight joint's rounding (sphere.STRAIGHT_TOLERANCE), not a bend a rig shows.
AGAINST_TOLERANCE = 1e-6


def folded_turns(pref: PreferredPose) -> np.ndarray:
    """Turns ``(n − 1,)`` bringing the tip nearest the start joint with every joint free, the nearest such
    to ``pref.curled_turns`` (``path.folded_pose``): the curled turns themselves (the same array) where
    no bend sense holds the tip off (two bones, no bent joint, or no nearer pose found)."""
    curled = pref.curled_turns
    if pref.chain.n_joints == 2 or not np.any((pref.turn_lower == 0.0) | (pref.turn_upper == 0.0)):
        return curled
    folded = folded_pose(pref.in_plane_lengths, curled)
    return curled if folded is None else folded


def least_distance(pref: PreferredPose) -> float:
    """Start joint to tip in the folded pose, the path's end: the nearest the in-plane solve reaches
    (≤ ``pref.curled_distance``)."""
    return pref.curled_distance if pref.chain.n_joints == 2 else float(pref.path[2][-1])


def bound_ends(pref: PreferredPose) -> tuple[float, float, float, float]:
    """The geometric bound's ends (``kinematics.error_lower_bounds``: ``ΣB`` and ``max(0, 2·max B − ΣB)``
    of the bone lengths ``B``), then the HI pose's own: the farthest it reaches (``ΣL`` of the in-plane
    lengths, or ``ΣB`` where the heights give way: ``InPlaneConstants.lift``) and the nearest."""
    bones = pref.chain.segment_lengths
    total = float(bones.sum())
    lift = pref.in_plane_constants.lift
    return (total, max(0.0, 2.0 * float(bones.max()) - total), pref.in_plane_reach if lift is None else lift.reach,
            least_distance(pref))


def own_bound(xp: ArrayOps, pref: PreferredPose, r: Real) -> Real:
    """The least tip error of the HI pose at distance ``r`` (one, or ``(N,)``): ``max(0, r − reach,
    least − r)`` of :func:`bound_ends`' own ends — the geometric bound for a planar chain or one of ball
    joints, more where a hinge holds bones out of the plane or the folded pose stays off the root."""
    _, _, reach, least = pref._bound_ends
    return xp.maximum(0.0, xp.maximum(r - reach, least - r))


def reach_status(xp: ArrayOps, pref: PreferredPose, error: Real, r: Real, tolerance: float) -> tuple[Real, Real, Any]:
    """The geometric lower bound, HI's own bound (:func:`own_bound`) and the status index into
    :data:`HI_STATUSES` of tip errors ``error`` at distances ``r`` (one, or ``(N,)``): ``iteration``'s
    classification against the geometric bound (an HI solve starts at its answer and never stalls),
    and ``SOLVER_LIMIT`` where the error is above it but at HI's own bound."""
    lower, own = pref.lower_bound(xp, r), own_bound(xp, pref, r)
    index = status_index(xp, error, error, lower, False, tolerance)
    limited = (index == 0) & (error - own <= tolerance + DISTANCE_ROUNDING * own)
    return lower, own, xp.where(limited, len(HI_STATUSES) - 1, index)


def against_bend(pref: PreferredPose, bends: np.ndarray) -> np.ndarray:
    """Which joints bend against their preferred sense ``(N, n)`` (bool; the start joint never) in the
    in-plane poses with ``bends (N, n)`` (``in_plane.Bent.bends``): a bent joint (one whose box keeps a
    sense, ``pref.turn_lower`` or ``turn_upper`` 0) turned past straight the other way by more than
    ``AGAINST_TOLERANCE``. The path's third part turns in ``curled ± π``: turns are read modulo 2π."""
    senses = np.where(pref.turn_lower == 0.0, 1.0, np.where(pref.turn_upper == 0.0, -1.0, 0.0))
    turns = np.remainder(bends[:, 1:] + pref.relative_turns + np.pi, 2.0 * np.pi) - np.pi
    against = np.zeros(bends.shape, dtype=bool)
    against[:, 1:] = turns * senses < -AGAINST_TOLERANCE
    return against
