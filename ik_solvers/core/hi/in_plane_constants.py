"""What every in-plane solve with one preferred pose reads, as Python floats (``PreferredPose.in_plane_constants``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..chain import JointKind
from .plane_chain import DISTANCE_TOLERANCE
from .reach import least_distance

# Bones whose heights along n0 are all below this fraction of the reach lie in the plane: nothing to lift.
LIFT_TOLERANCE = 1e-12


class Lift(NamedTuple):
    """What straightens a non-planar chain past its in-plane reach (``in_plane.lifted``), as floats.

    Beyond ``ΣL`` (the in-plane lengths) the straight in-plane pose's bone heights ``h`` shrink by one
    factor ``s`` (their sum stays 0, the tip on the EE axis) and each bone keeps its length ``B``:
    its part along the axis is ``√(B² − s²h²)``, so the tip reaches ``ΣB``, the free-joint reach.
    """

    squares: tuple[float, ...]  # B², the bone lengths squared (L² + h²)
    height_squares: tuple[float, ...]  # h²
    heights: tuple[float, ...]  # h
    elevations: tuple[float, ...]  # atan2(h, L): each bone's angle out of the plane, straight in it
    axes: tuple[tuple[float, float, float], ...]  # n0 × a0 in each joint's frame in the straight pose
    reach: float  # ΣB in joint order


def lift_of(pref: Any) -> Lift | None:
    """The :class:`Lift` of a ``PreferredPose``: None for two bones, a chain in its plane, or one with a
    joint after the start joint that is not a ball joint (a hinge about n0 cannot lift its bone)."""
    chain, lengths, heights = pref.chain, pref.in_plane_lengths, pref.bone_heights
    if (chain.n_joints == 2 or np.abs(heights).max() <= LIFT_TOLERANCE * chain.reach
            or any(kind is not JointKind.BALL for kind in chain.kinds[1:])):
        return None
    squares = lengths * lengths + heights * heights
    a0, _, side = pref.plane_basis
    headings = pref.bone_headings[:, None]
    # The straight pose turns bone j by −heading_j about n0: n0 × a0 there, in the preferred frame.
    sides = np.cos(headings) * side - np.sin(headings) * a0
    axes = np.einsum("jik,ji->jk", pref.frames[1:], sides)
    return Lift(tuple(squares.tolist()), tuple((heights * heights).tolist()), tuple(heights.tolist()),
                tuple(np.arctan2(heights, lengths).tolist()), tuple(map(tuple, axes.tolist())),
                float(np.add.accumulate(np.sqrt(squares))[-1]))


@dataclass(frozen=True, eq=False)
class InPlaneConstants:
    """What every in-plane solve with a PreferredPose reads, as Python floats (``pref.in_plane_constants``)."""

    lengths: tuple[float, ...]  # in-plane bone lengths
    heights: tuple[float, ...]  # bone heights along n0
    turns: tuple[float, ...]  # preferred relative turns
    outer_bases: tuple[float, ...]  # the outer path's start: straight (zeros)
    vertices: tuple[tuple[float, ...], ...]  # the path's turns (PreferredPose.path), straight first
    segment_steps: tuple[tuple[float, ...], ...]  # each segment's step to the next vertex
    vertex_distances: tuple[float, ...]
    preferred_vertex: int
    distances: tuple[float, float, float]  # least (the folded pose's), preferred, in-plane reach
    first_bend: float
    distance_tolerance: float  # the root finder's: DISTANCE_TOLERANCE · ΣL (numpy's sum, as the batch's)
    two_bone: tuple[float, ...]  # l1, l2, preferred shoulder heading and elbow turn (two bones), else ()
    lift: Lift | None  # the heights giving way past the in-plane reach (a non-planar chain of ball joints)

    @classmethod
    def of(cls, pref: Any) -> InPlaneConstants:
        """The constants of a ``PreferredPose`` (kept on it: ``PreferredPose.in_plane_constants``)."""
        lengths = pref.chain.segment_lengths
        # Two bones take the closed form: no path.
        vertices, steps, distances, preferred = pref.path if pref.chain.n_joints != 2 else (np.zeros((0, 0)),) * 3 + (0,)
        two_bone = () if pref.chain.n_joints != 2 else (float(lengths[0]), float(lengths[1]), *pref.two_bone_angles.tolist())
        return cls(tuple(pref.in_plane_lengths.tolist()), tuple(pref.bone_heights.tolist()),
                   tuple(pref.relative_turns.tolist()), (0.0,) * pref.relative_turns.size,
                   tuple(map(tuple, vertices.tolist())), tuple(map(tuple, steps.tolist())),
                   tuple(distances.tolist()), preferred,
                   (least_distance(pref), pref.preferred_distance, pref.in_plane_reach),
                   float(-pref.bone_headings[0]), float(DISTANCE_TOLERANCE * pref.in_plane_lengths.sum()), two_bone, lift_of(pref))
