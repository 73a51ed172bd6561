"""What every in-plane solve with one preferred pose reads, as Python floats (``PreferredPose.in_plane_constants``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .plane_chain import DISTANCE_TOLERANCE


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
    distances: tuple[float, float, float]  # curled, preferred, in-plane reach
    first_bend: float
    distance_tolerance: float  # the root finder's: DISTANCE_TOLERANCE · ΣL (numpy's sum, as the batch's)
    two_bone: tuple[float, ...]  # l1, l2, preferred shoulder heading and elbow turn (two bones), else ()

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
                   (pref.curled_distance, pref.preferred_distance, pref.in_plane_reach),
                   float(-pref.bone_headings[0]), float(DISTANCE_TOLERANCE * pref.in_plane_lengths.sum()), two_bone)
