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
from ..vectors import unit_stride
from .in_plane_constants import InPlaneConstants
from .plane_chain import path_parameter, plane_tip, solve_path_parameters
from .sphere import PreferredPose


class Bent(NamedTuple):
    """One in-plane pose per target: the preferred pose with each joint bent about ``n0``.

    Along the joint axis (``ArrayOps.joints``: lists for one target, ``(N, …)`` arrays for a batch):
    ``bends``, each joint's turn about ``n0`` from its preferred angle (``n``, radians); ``xs, hs, ys``,
    the joints' and the tip's coordinates (``n + 1``, the start joint's ``0.0`` first) in the basis
    ``(a0, n0, n0 × a0)`` of the preferred plane. ``tip_turn``: the angle about ``n0`` from ``a0`` to
    the bent chain's tip; ``iterations``: root-finding steps (1 for the closed form).
    """

    bends: Any
    xs: Any
    hs: Any
    ys: Any
    tip_turn: Real
    iterations: Real


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


def chain_paths(xp: ArrayOps, k: InPlaneConstants, r: Real) -> tuple[Real, Real, Any, Any]:
    """The distance a longer chain solves for (``r`` clipped to what it reaches), whether it lies on the
    outer path (straight → preferred turns, solved from its end) and that path's bases and directions.

    The crossing nearest the preferred turns: the outer path ends at them, the inner one starts there.
    """
    curled, preferred, reach = k.distances
    wanted = xp.minimum(xp.maximum(r, curled), reach)
    outer = wanted >= preferred
    joints = xp.joints
    return wanted, outer, joints.where(outer, k.outer_bases, k.turns), joints.where(outer, k.turns, k.inner_directions)


def chain_bent(xp: ArrayOps, k: InPlaneConstants, r: Real, bases: Any, directions: Any, t: Real, steps: Real) -> Bent:
    """The longer chain's pose at path parameter ``t`` (the root finder's): exactly straight beyond the
    reach; every bent joint keeps its preferred sense."""
    joints = xp.joints
    turns = joints.where(r >= k.distances[2], k.outer_bases, joints.lerp(bases, t, directions))
    _, _, along, across = plane_tip(xp, k.lengths, turns)
    xs, ys = joints.prepend(0.0, joints.cumsum(along)), joints.prepend(0.0, joints.cumsum(across))
    bends = joints.prepend(k.first_bend, joints.sub(turns, k.turns))
    return Bent(bends, xs, joints.prepend(0.0, joints.cumsum(k.heights)), ys,
                xp.atan2(joints.at(ys, -1), joints.at(xs, -1)), steps)


def in_plane(pref: PreferredPose, r: np.ndarray) -> Bent:
    """The batch's in-plane poses for distances ``r (N,)``: the closed form for two bones, else the root
    finder along the paths (``plane_chain``): where several turns meet ``r``, the one nearest the
    preferred turns along the path (to within one of its samples)."""
    k = pref.in_plane_constants
    if pref.chain.n_joints == 2:
        return two_bone_bent(NUMPY_OPS, k, r)
    wanted, outer, bases, directions = chain_paths(NUMPY_OPS, k, r)
    samples = np.where(outer[:, None], pref.path_samples[0], pref.path_samples[1])
    t, steps = solve_path_parameters(pref.in_plane_lengths, bases, directions, wanted, samples, from_end=outer)
    return chain_bent(NUMPY_OPS, k, r, bases, directions, unit_stride(t), steps)


def row_bent(xp: ArrayOps, pref: PreferredPose, r: float) -> Bent:
    """One target's in-plane pose on Python floats (``xp``: ``SCALAR_OPS`` for live mode's one-target
    solve, ``ROW_OPS`` for a one-frame batch): :func:`in_plane`'s steps for one row."""
    k = pref.in_plane_constants
    if k.two_bone:
        return two_bone_bent(xp, k, r)
    wanted, outer, bases, directions = chain_paths(xp, k, r)
    t, steps = path_parameter(k.lengths, bases, directions, wanted, k.samples[0 if outer else 1],
                              k.distance_tolerance, outer, xp)
    return chain_bent(xp, k, r, bases, directions, t, steps)
