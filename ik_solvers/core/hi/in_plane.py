"""The in-plane solve: bends about n0 that put the tip at the target's distance from the start joint (SPEC §5).

Written once per target in an array namespace (``array_ops``): :func:`two_bone_bent` and
:func:`chain_bent` serve the batch (``(N,)`` arrays, :func:`in_plane`) and live mode's one-target
solve (Python floats, ``one_target``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..analytic import elbow_cosine, planar_branch
from ..array_ops import NUMPY_OPS, ArrayOps, Real
from ..rotations import turned_quaternions
from ..vectors import unit_stride
from .in_plane_constants import InPlaneConstants, Lift
from .plane_chain import plane_tip, segment_parameter, segment_parameters
from .sphere import PreferredPose

# Safeguarded Newton steps on the lifted chain's reach (:func:`lift_factor`): quadratic from the first
# steps, a bisection where Newton leaves the bracket; a fixed count, so every row of a batch and one
# target alone take the same steps.
LIFT_STEPS = 40


class Bent(NamedTuple):
    """One in-plane pose per target: the preferred pose with each joint bent about ``n0``.

    Along the joint axis (``ArrayOps.joints``: lists for one target, ``(N, …)`` arrays for a batch):
    ``bends``, each joint's turn about ``n0`` from its preferred angle (``n``, radians); ``xs, hs, ys``,
    the joints' and the tip's coordinates (``n + 1``, the start joint's ``0.0`` first) in the basis
    ``(a0, n0, n0 × a0)`` of the preferred plane. ``tip_turn``: the angle about ``n0`` from ``a0`` to
    the bent chain's tip; ``iterations``: root-finding steps (1 for the closed form). ``lifts``: past the
    in-plane reach of a non-planar chain (:func:`lifted`), each joint's turn about ``n0 × a0`` (in its
    frame: ``Lift.axes``) from the straight in-plane pose (``n``, radians; zeros on other rows of a
    batch); None where no target is lifted.
    """

    bends: Any
    xs: Any
    hs: Any
    ys: Any
    tip_turn: Real
    iterations: Real
    lifts: Any = None


def two_bone_bent(xp: ArrayOps, k: InPlaneConstants, r: Real) -> Bent:
    """Closed-form bends putting the tip at distance ``r`` along ``a0``, bending as the preferred pose
    (``analytic``'s planar branch 0, θ2 ≥ 0, for the target ``(r, 0)``: no tip turn)."""
    l1, l2, shoulder0, elbow0 = k.two_bone
    shoulder, elbow, _, _ = planar_branch(xp, l1, l2, 1.0, elbow_cosine(xp, l1, l2, r)[0], 0.0)
    heading = shoulder + elbow
    x1, y1 = l1 * xp.cos(shoulder), l1 * xp.sin(shoulder)
    pack = xp.joints.pack
    return Bent(pack([shoulder - shoulder0, elbow - elbow0]), pack([0.0, x1, x1 + l2 * xp.cos(heading)]),
                pack([0.0, 0.0, 0.0]), pack([0.0, y1, y1 + l2 * xp.sin(heading)]), 0.0, 1)


def chain_distance(xp: ArrayOps, k: InPlaneConstants, r: Real) -> tuple[Real, Real]:
    """The distance a longer chain solves for (``r`` clipped to what it reaches) and whether it lies on
    the outer part of the path (straight → preferred turns; searched from the preferred vertex back)."""
    curled, preferred, reach = k.distances
    wanted = xp.minimum(xp.maximum(r, curled), reach)
    return wanted, wanted >= preferred


def chain_bent(xp: ArrayOps, k: InPlaneConstants, r: Real, bases: Any, directions: Any, t: Real, steps: Real) -> Bent:
    """The longer chain's pose at path parameter ``t`` (the root finder's): exactly straight beyond the
    reach; every bent joint keeps its preferred sense down to the curled pose's distance, nearer
    than that the path bends some against it (``reach.against_bend``)."""
    joints = xp.joints
    turns = joints.where(r >= k.distances[2], k.outer_bases, joints.lerp(bases, t, directions))
    _, _, along, across = plane_tip(xp, k.lengths, turns)
    xs, ys = joints.prepend(0.0, joints.cumsum(along)), joints.prepend(0.0, joints.cumsum(across))
    bends = joints.prepend(k.first_bend, joints.sub(turns, k.turns))
    return Bent(bends, xs, joints.prepend(0.0, joints.cumsum(k.heights)), ys,
                xp.atan2(joints.at(ys, -1), joints.at(xs, -1)), steps)


def in_plane(pref: PreferredPose, r: np.ndarray) -> Bent:
    """The batch's in-plane poses for distances ``r (N,)``: the closed form for two bones, else the root
    finder on the path's segment (``plane_chain``) whose distances bracket ``r``, the one nearest the
    preferred vertex (the path's distance falls strictly along it, so the only one, but where a flow
    stopped short of its end)."""
    k = pref.in_plane_constants
    if pref.chain.n_joints == 2:
        return two_bone_bent(NUMPY_OPS, k, r)
    wanted, outer = chain_distance(NUMPY_OPS, k, r)
    vertices, steps, distances, p = pref.path
    last = distances.size - 2
    # Outer: the last vertex before the preferred one still above r; inner: the first after it below r.
    above = distances[None, :p] > wanted[:, None]
    below = distances[None, p + 1 :] < wanted[:, None]
    # A straight preferred pose is the path's first vertex (p = 0): only the reach lies outer, on segment 0.
    segment_out = np.where(above.any(axis=1), p - 1 - np.argmax(above[:, ::-1], axis=1), 0) if p else 0
    segment_in = np.where(below.any(axis=1), p + np.argmax(below, axis=1), last)
    segment = np.where(outer, segment_out, segment_in)
    bases, directions = vertices[segment], steps[segment]
    t, used = segment_parameters(pref.in_plane_lengths, bases, directions, wanted, distances[segment] - wanted,
                                 distances[segment + 1] - wanted)
    bent = chain_bent(NUMPY_OPS, k, r, bases, directions, unit_stride(t), used)
    if k.lift is None or not np.any(r > k.distances[2]):
        return bent
    rows = np.flatnonzero(r > k.distances[2])
    factors = np.zeros(rows.size)  # from ΣB on the chain is straight: no steps to take
    partial = np.flatnonzero(r[rows] < k.lift.reach)
    with np.errstate(divide="ignore", invalid="ignore"):
        if partial.size:
            factors[partial] = lift_factor(NUMPY_OPS, k.lift, r[rows][partial])
        xs, hs, lifts = lifted(NUMPY_OPS, k.lift, factors)
    all_xs, all_hs, all_lifts = bent.xs.copy(), np.broadcast_to(bent.hs, bent.xs.shape).copy(), np.zeros(bent.bends.shape)
    all_xs[rows], all_hs[rows], all_lifts[rows] = xs, hs, lifts
    return bent._replace(xs=all_xs, hs=all_hs, lifts=all_lifts)


def row_bent(xp: ArrayOps, pref: PreferredPose, r: float) -> Bent:
    """One target's in-plane pose on Python floats (``xp``: ``SCALAR_OPS`` for live mode's one-target
    solve, ``ROW_OPS`` for a one-frame batch): :func:`in_plane`'s steps for one row."""
    k = pref.in_plane_constants
    if k.two_bone:
        return two_bone_bent(xp, k, r)
    wanted, outer = chain_distance(xp, k, r)
    distances, p = k.vertex_distances, k.preferred_vertex
    if outer:
        segment = next((j for j in reversed(range(p)) if distances[j] > wanted), 0)
    else:
        segment = next((j for j in range(p, len(distances) - 1) if distances[j + 1] < wanted), len(distances) - 2)
    bases, directions = k.vertices[segment], k.segment_steps[segment]
    t, steps = segment_parameter(xp, k.lengths, bases, directions, wanted, distances[segment] - wanted,
                                 distances[segment + 1] - wanted, k.distance_tolerance)
    bent = chain_bent(xp, k, r, bases, directions, t, steps)
    if k.lift is None or not r > k.distances[2]:
        return bent
    xs, hs, lifts = lifted(xp, k.lift, 0.0 if r >= k.lift.reach else lift_factor(xp, k.lift, r))
    return bent._replace(xs=xs, hs=hs, lifts=lifts)


def lift_factor(xp: ArrayOps, lift: Lift, r: Real) -> Real:
    """Past the in-plane reach ``ΣL`` of a non-planar chain, short of ``ΣB``: the factor ``u = s²`` by which
    the straight in-plane pose's bone heights ``h`` shrink (squared) so that the tip reaches ``r`` along
    the EE axis (SPEC §5: out of reach, the geometric bound). It solves ``Σ √(B² − u·h²) = r`` (decreasing
    and concave in ``u``, ``u = 1`` at ``ΣL``: continuous with the in-plane pose; ``u = 0`` at ``ΣB``, which
    the callers take from there on without steps: straight)."""
    joints, divide = xp.joints, xp.divide
    lo, hi = r * 0.0, r * 0.0 + 1.0
    u = lo
    pairs = list(zip(lift.squares, lift.height_squares))
    for _ in range(LIFT_STEPS):
        roots = [xp.sqrt(xp.maximum(b2 - u * h2, 0.0)) for b2, h2 in pairs]
        f = joints.total(joints.pack(roots)) - r
        slope = -0.5 * joints.total(joints.pack([divide(h2, root) for (_, h2), root in zip(pairs, roots)]))
        lo, hi = xp.where(f > 0.0, u, lo), xp.where(f > 0.0, hi, u)
        newton = u - divide(f, slope)
        u = xp.where((newton > lo) & (newton < hi), newton, 0.5 * (lo + hi))
    return u


def lifted(xp: ArrayOps, lift: Lift, u: Real) -> tuple[Any, Any, Any]:
    """The straight in-plane pose with every bone height ``h`` shrunk to ``√u·h`` (:func:`lift_factor`).

    Returns the joints' ``xs`` and ``hs`` (``n + 1``, as ``Bent``'s) and each joint's turn about
    ``n0 × a0`` (``n``, ``Bent.lifts``: the change of its bone's elevation less its parent's)."""
    joints = xp.joints
    scale = xp.sqrt(u)
    along = [xp.sqrt(xp.maximum(b2 - u * h2, 0.0)) for b2, h2 in zip(lift.squares, lift.height_squares)]
    heights = [scale * h for h in lift.heights]
    elevations = xp.atan2_all(heights, along)
    turns = [e0 - e for e0, e in zip(lift.elevations, elevations)]
    lifts = [turns[0], *(turn - before for before, turn in zip(turns, turns[1:]))]
    return (joints.prepend(0.0, joints.cumsum(joints.pack(along))), joints.prepend(0.0, joints.cumsum(joints.pack(heights))),
            joints.pack(lifts))


def lifted_quaternions(xp: ArrayOps, lift: Lift, quats: list, lifts: Any) -> list:
    """Joint rotations ``(w, x, y, z)`` per joint turned on by their lifts (``Bent.lifts``, ``n``) about
    ``Lift.axes``: ``R_j · Rot(axis_j, lift_j)`` (``w ≥ 0``; components floats, or ``(M,)`` arrays)."""
    # A batch's columns halved: fresh unit-stride arrays, as the cosine and sine need (vectors.unit_stride).
    halves = [0.5 * lift_j for lift_j in (lifts if isinstance(lifts, list) else list(lifts.T))]
    return turned_quaternions(quats, [xp.cos(h) for h in halves], [xp.sin(h) for h in halves], lift.axes,
                              canonical=True)
