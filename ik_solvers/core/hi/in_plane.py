"""The in-plane solve: bends about n0 that put the tip at the target's distance from the start joint (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analytic import two_bone_planar
from ..vectors import unit_stride
from .plane_chain import solve_path_parameters
from .sphere import PreferredPose


@dataclass(frozen=True, eq=False)
class InPlane:
    """A batch of in-plane poses: the preferred pose with each joint bent about ``n0``.

    Attributes
    ----------
    bends : ndarray, shape (N, n)
        Turn of each joint about ``n0`` from its preferred angle (radians).
    coordinates : ndarray, shape (N, n + 1, 3)
        Joint and tip positions relative to the start joint in the basis
        ``(a0, n0, n0 × a0)`` of the preferred plane.
    tip_turns : ndarray, shape (N,)
        Angle about ``n0`` from ``a0`` to the bent chain's tip.
    iterations : ndarray of int, shape (N,)
        Root-finding steps of the in-plane solve (1 for closed forms).
    """

    bends: np.ndarray
    coordinates: np.ndarray
    tip_turns: np.ndarray
    iterations: np.ndarray


def plane_basis(pref: PreferredPose) -> np.ndarray:
    """Rows ``(3, 3)``: ``a0``, ``n0``, ``n0 × a0`` in the solving frame (read-only, kept on ``pref``)."""
    return pref.plane_basis


def two_bone_in_plane(pref: PreferredPose, r: np.ndarray) -> InPlane:
    """Closed-form bends putting the tip at distance ``r`` along ``a0``, bending as the preferred pose."""
    lengths = pref.chain.segment_lengths
    planar = np.zeros((r.size, 2))  # (r, 0) rows, as np.stack([r, zeros]) built them, in two calls
    planar[:, 0] = r
    # Branch 0 (θ2 ≥ 0) bends as the preferred pose (elbow > 0).
    angles = two_bone_planar(lengths[0], lengths[1], planar, first_branch_only=True).branches[:, 0]
    coordinates = np.zeros((r.size, 3, 3))
    heading = angles[:, 0] + angles[:, 1]
    shoulder_angles = unit_stride(angles[:, 0])
    coordinates[:, 1, 0] = lengths[0] * np.cos(shoulder_angles)
    coordinates[:, 1, 2] = lengths[0] * np.sin(shoulder_angles)
    coordinates[:, 2, 0] = coordinates[:, 1, 0] + lengths[1] * np.cos(heading)
    coordinates[:, 2, 2] = coordinates[:, 1, 2] + lengths[1] * np.sin(heading)
    # two_bone_planar puts the tip on the heading of (r, 0): along a0, no tip turn.
    return InPlane(angles - pref.two_bone_angles, coordinates, np.zeros_like(r), np.ones(r.size, dtype=int))


def chain_in_plane(pref: PreferredPose, r: np.ndarray) -> InPlane:
    """Bends of a longer chain putting the tip at distance ``r`` from the start joint (or as near as it gets).

    A deterministic 1-D solve (``plane_chain``): the relative turns run from
    straight to the preferred ones (``t · preferred``) for ``r`` between the
    preferred distance and the in-plane reach, and from the preferred to the
    curled pose below that; a bracketing root finder picks ``t``: where several
    turns meet ``r``, the one nearest the preferred turns along the path (to within
    one of its samples). Every bent
    joint keeps its preferred sense. Beyond the reach the chain is straight,
    nearer than the curled pose it is curled: the nearest poses there.
    """
    lengths = pref.in_plane_lengths
    preferred, curled = pref.relative_turns, pref.curled_turns
    wanted = np.clip(r, pref.curled_distance, pref.in_plane_reach)
    outer = wanted >= pref.preferred_distance
    bases = np.where(outer[:, None], 0.0, preferred)
    directions = np.where(outer[:, None], preferred, curled - preferred)
    samples = np.where(outer[:, None], pref.path_samples[0], pref.path_samples[1])
    # The crossing nearest the preferred turns: the outer path ends at them, the inner one starts there.
    t, steps = solve_path_parameters(lengths, bases, directions, wanted, samples, from_end=outer)
    turns = bases + unit_stride(t)[:, None] * directions
    turns = np.where((r >= pref.in_plane_reach)[:, None], 0.0, turns)  # exactly straight out of reach

    headings = np.zeros((r.size, lengths.size))
    np.add.accumulate(turns, axis=1, out=headings[:, 1:])
    coordinates = np.zeros((r.size, lengths.size + 1, 3))
    np.add.accumulate(lengths * np.cos(headings), axis=1, out=coordinates[:, 1:, 0])
    np.add.accumulate(np.broadcast_to(pref.bone_heights, headings.shape), axis=1, out=coordinates[:, 1:, 1])
    np.add.accumulate(lengths * np.sin(headings), axis=1, out=coordinates[:, 1:, 2])
    tip_turns = np.arctan2(unit_stride(coordinates[:, -1, 2]), unit_stride(coordinates[:, -1, 0]))
    bends = np.empty_like(headings)
    bends[:, 0] = -pref.bone_headings[0]
    bends[:, 1:] = turns - preferred
    return InPlane(bends, coordinates, tip_turns, steps)
