"""The in-plane solve: bends about n0 that put the tip at the target's distance from the start joint (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..analytic import two_bone_planar
from ..result import Method, SolveOptions
from ..solve import solve
from ..vectors import cross, matvec
from .sphere import PreferredPose

# Damping (fraction of the reach) of the in-plane DLS solve of longer chains: small enough
# to converge like Gauss–Newton (measured 4–6 iterations to 1e-6 on a 4-bone arm), large
# enough to bound the step where the chain straightens. The caller's own damping is for DLS proper.
IN_PLANE_DAMPING = 1e-3


# -------------------------------------------------------- in-plane solve
# _unit_stride_inputs: a transcendental ufunc (arctan2, sin, …) given a strided operand goes
# through numpy's buffered loop, and there an element's last bit depends on where the buffer
# lands in memory: the same call on the same values gave results an ULP apart from one call to
# the next (measured on numpy 1.26 / AVX-512). Column slices of a batch are strided, and a
# one-row slice keeps its parent's stride although numpy calls it contiguous (so
# ``np.ascontiguousarray`` does not copy it): a lone frame's rotation vectors differed in the
# last bit from the same frame's in a batch. Such operands are therefore fresh unit-stride
# copies, which the ufuncs read directly, the same way for every batch size.
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
    status, iterations, objective_increases, sigma_min : ndarray, shape (N,)
        From the in-plane solve; for closed-form frames ``status`` is None
        (judged by the final error alone), one iteration, σ_min NaN.
    """

    bends: np.ndarray
    coordinates: np.ndarray
    tip_turns: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    objective_increases: np.ndarray
    sigma_min: np.ndarray

    @classmethod
    def closed_form(cls, bends: np.ndarray, coordinates: np.ndarray, tip_turns: np.ndarray) -> "InPlane":
        n_frames = bends.shape[0]
        return cls(
            bends, coordinates, tip_turns, np.full(n_frames, None, dtype=object), np.ones(n_frames, dtype=int),
            np.zeros(n_frames, dtype=int), np.full(n_frames, np.nan),
        )


def plane_basis(pref: PreferredPose) -> np.ndarray:
    """Rows ``(3, 3)``: ``a0``, ``n0``, ``n0 × a0`` in the solving frame."""
    return np.stack([pref.a0_world, pref.n0_world, cross(pref.n0_world, pref.a0_world)])


def two_bone_in_plane(pref: PreferredPose, r: np.ndarray) -> InPlane:
    """Closed-form bends putting the tip at distance ``r`` along ``a0``, bending as the preferred pose."""
    upper, lower = matvec(plane_basis(pref), np.diff(pref.positions, axis=0))
    shoulder = np.arctan2(upper[2], upper[0])
    elbow = np.arctan2(upper[0] * lower[2] - upper[2] * lower[0], upper[0] * lower[0] + upper[2] * lower[2])
    lengths = pref.chain.segment_lengths
    planar = np.stack([r, np.zeros_like(r)], -1)
    angles = two_bone_planar(lengths[0], lengths[1], planar).branches[:, 0]  # θ2 ≥ 0 bends as preferred (elbow > 0)
    coordinates = np.zeros((r.size, 3, 3))
    heading = angles[:, 0] + angles[:, 1]
    shoulder_angles = angles[:, 0].copy()  # unit-stride rows for arctan2 (vectors.unit_stride)
    coordinates[:, 1, 0] = lengths[0] * np.cos(shoulder_angles)
    coordinates[:, 1, 2] = lengths[0] * np.sin(shoulder_angles)
    coordinates[:, 2, 0] = coordinates[:, 1, 0] + lengths[1] * np.cos(heading)
    coordinates[:, 2, 2] = coordinates[:, 1, 2] + lengths[1] * np.sin(heading)
    # two_bone_planar puts the tip on the heading of (r, 0): along a0, no tip turn.
    return InPlane.closed_form(angles - np.array([shoulder, elbow]), coordinates, np.zeros_like(r))


def chain_in_plane(pref: PreferredPose, r: np.ndarray, options: SolveOptions, method: Method) -> InPlane:
    """Bends of a longer chain putting the tip at distance ``r`` along ``a0`` (or as near as it gets).

    Beyond the in-plane reach the answer is the chain straightened in the plane
    (every bone's in-plane part along ``a0``), in closed form; every other frame
    gets an in-plane solve of the plane chain from the preferred angles (bends 0).
    """
    n_frames, n = r.size, pref.chain.n_joints
    out = InPlane.closed_form(np.empty((n_frames, n)), np.zeros((n_frames, n + 1, 3)), np.zeros(n_frames))
    straight = r >= pref.in_plane_reach
    out.bends[straight] = -np.concatenate([pref.bone_headings[:1], np.angle(np.exp(1j * np.diff(pref.bone_headings)))])
    out.coordinates[straight, 1:, 0] = np.cumsum(pref.in_plane_lengths)
    out.coordinates[straight, 1:, 1] = np.cumsum(pref.plane_chain.segment_vectors[:, 2])
    rows = np.flatnonzero(~straight)
    if rows.size:
        planar_targets = np.zeros((rows.size, 3))
        planar_targets[:, 0] = r[rows]
        options = replace(options, damping=IN_PLANE_DAMPING * pref.chain.reach)
        inner = solve(pref.plane_chain, planar_targets, method, options, initial=np.zeros((rows.size, n)))
        coordinates = inner.positions[..., [0, 2, 1]]  # to the (a0, n0, n0 × a0) order used here
        out.bends[rows] = inner.q
        out.coordinates[rows] = coordinates
        tips = coordinates[:, -1].T.copy()  # unit-stride rows for arctan2 (vectors.unit_stride)
        out.tip_turns[rows] = np.arctan2(tips[2], tips[0])
        out.status[rows] = inner.status
        out.iterations[rows] = inner.iterations
        out.objective_increases[rows] = inner.objective_increases
        out.sigma_min[rows] = inner.sigma_min
    return out
