"""Key reduction with a world-space error bound (SPEC §9): the fewest Bézier keys for a baked chain
such that every joint and the tip stay within ``E`` of the unreduced bake at every frame.

The curves are Bézier segments whose handles sit at 1/3 and 2/3 of each segment in time
(handle x = key x ± Δ/3). Blender's Bézier evaluation of such a segment has a linear time
parameter, so its value is the cubic Bernstein polynomial of the four control values (a cubic
Hermite): this module evaluates exactly what Blender will, with the control values rounded to
float32 as Blender stores them. Blender's own float32 arithmetic adds ~1e-7 relative noise:
:data:`FLOAT32_MARGIN` of the bound is kept free for it.

The error is measured in world space through the chain: all rotation channels of the chain share
their keys, and a candidate segment is accepted only when forward kinematics of every frame of
the segment (all joints evaluated together, so a parent's error shows at its children and the tip)
stays within the bound. Segments are grown greedily from the first frame, doubling then bisecting
their length; each segment starts at the previous segment's end key, and its two handles and its
end key's value are a least-squares fit of the unreduced channel values over the segment (the first
and last frame and frames asked to stay keys keep their exact values).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .chain import Chain
from .errors import IKInputError
from .rotations import matrices_from_axis_angles, matrices_from_quaternions

RotationsOf = Callable[[np.ndarray], np.ndarray]
"""Channel values ``(M, k)`` of one bone → its rotation matrices ``(M, 3, 3)`` as Blender forms them."""

DEFAULT_KEY_ERROR_PER_REACH = 1e-4
"""Default bound per unit of chain reach: 0.1 mm for a chain of 1 m (ACL's default 0.01 cm)."""

FLOAT32_MARGIN = 0.02
"""Fraction of the bound left free for Blender's float32 evaluation of the curves and pose."""

SLOPE_REGULARISATION = 1e-3
"""Weight (per frame of segment length) pulling a fitted slope toward the finite-difference slope:
only decides under-determined fits (segments with fewer than two inner frames)."""


# --------------------------------------------------------------------------- rotations
def quaternion_rotations(values: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(M, 3, 3)`` of quaternion channels ``(M, 4)`` (w, x, y, z), normalised as
    Blender does before use; a zero quaternion is the identity."""
    values = np.asarray(values, dtype=float)
    norms = np.linalg.norm(values, axis=-1, keepdims=True)
    unit = np.where(norms > 0.0, values / np.where(norms > 0.0, norms, 1.0), np.array([1.0, 0.0, 0.0, 0.0]))
    return matrices_from_quaternions(unit)


def axis_angle_rotations(values: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(M, 3, 3)`` of axis-angle channels ``(M, 4)`` (angle, x, y, z); the axis
    is normalised, a zero axis is the identity (as Blender)."""
    values = np.asarray(values, dtype=float)
    norms = np.linalg.norm(values[:, 1:], axis=-1, keepdims=True)
    axes = np.where(norms > 0.0, values[:, 1:] / np.where(norms > 0.0, norms, 1.0), np.array([1.0, 0.0, 0.0]))
    return matrices_from_axis_angles(axes, np.where(norms[:, 0] > 0.0, values[:, 0], 0.0))


def chain_points(chain: Chain, rotations: Sequence[np.ndarray]) -> np.ndarray:
    """Root-space joint origins and tip ``(M, n + 1, 3)`` for the joints' variable rotations,
    ``rotations[i]`` of shape ``(M, 3, 3)`` (the rotation part of each joint bone's basis matrix)."""
    count = rotations[0].shape[0]
    frame = np.broadcast_to(chain.root_rotation, (count, 3, 3))
    position = np.broadcast_to(chain.root_position, (count, 3))
    points = np.empty((count, chain.n_joints + 1, 3))
    for joint in range(chain.n_joints):
        position = position + frame @ chain.offsets[joint]
        points[:, joint] = position
        frame = frame @ chain.rest_rotations[joint] @ rotations[joint]
    points[:, -1] = position + frame @ chain.tip_offset
    return points


def chain_reach(chain: Chain) -> float:
    """Length of the chain from its first joint to the tip, in chain units."""
    return float(np.linalg.norm(chain.offsets[1:], axis=-1).sum() + np.linalg.norm(chain.tip_offset))


def default_key_error(chain: Chain, scale: float = 1.0) -> float:
    """The default bound in world units: :data:`DEFAULT_KEY_ERROR_PER_REACH` × the chain's reach × ``scale``."""
    return DEFAULT_KEY_ERROR_PER_REACH * chain_reach(chain) * scale


# --------------------------------------------------------------------------- Bézier segments
def bezier_values(x0: float, x1: float, controls: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Values ``(M, C)`` at ``frames (M,)`` of Bézier segments from key frame ``x0`` to ``x1`` whose
    handles sit at 1/3 and 2/3 in time; ``controls (4, C)``: key value, right handle, left handle of
    the next key, next key value, per channel."""
    s = (np.asarray(frames, dtype=float) - x0) / (x1 - x0)
    r = 1.0 - s
    basis = np.stack([r * r * r, 3.0 * r * r * s, 3.0 * r * s * s, s * s * s], axis=1)
    return basis @ controls


def _fit_controls(frames: np.ndarray, values: np.ndarray, slopes: np.ndarray, a: int, b: int, start: np.ndarray,
                  free_end: bool) -> np.ndarray:
    """Float32 control values ``(4, C)`` of the segment from sample ``a`` to ``b`` starting at the
    key value ``start (C,)``: the two handles (and, with ``free_end``, the end key's value) are a
    least-squares fit of the samples after ``a`` up to ``b``; else the end key is sample ``b``."""
    x0, x1 = float(frames[a]), float(frames[b])
    span = x1 - x0
    weight = np.sqrt(SLOPE_REGULARISATION * span)
    stop = b + 1 if free_end else b
    s = (frames[a + 1:stop] - x0) / span
    r = 1.0 - s
    # value = (B0 + B1) y0 + (B2 + B3) y1 + B1 (Δ/3) m0 − B2 (Δ/3) m1
    ends = 3.0 * r * s * s + s * s * s
    columns = [r * r * s * span, -r * s * s * span] + ([ends] if free_end else [])
    prior = np.eye(2, len(columns))
    design = np.concatenate([np.stack(columns, axis=1), weight * prior])
    base = np.outer(r * r * r + 3.0 * r * r * s, start)
    if not free_end:
        base += np.outer(ends, values[b])
    target = np.concatenate([values[a + 1:stop] - base, weight * slopes[[a, b]]])
    solution = np.linalg.lstsq(design, target, rcond=None)[0]
    m0, m1 = solution[0], solution[1]
    end = solution[2] if free_end else values[b]
    controls = np.stack([start, start + m0 * span / 3.0, end - m1 * span / 3.0, end])
    return controls.astype(np.float32).astype(float)


# --------------------------------------------------------------------------- the reduction
@dataclass(frozen=True, eq=False)
class ReducedKeys:
    """The kept keys of a chain's rotation channels and their world error.

    Attributes
    ----------
    indices : ndarray, shape (K,)
        Indices of the kept keys into the bake's frames (first and last always kept).
    frames : ndarray, shape (K,)
        The kept keys' frames.
    controls : list of ndarray, shape (K - 1, 4, k_j)
        Per joint bone, per segment: key value, right handle value, next key's left handle value,
        next key's value (float32-representable), handles at 1/3 and 2/3 of the segment in time.
    errors : ndarray, shape (N,)
        World distance (scene units) of the farthest joint or tip from the unreduced bake, per frame.
    key_error : float
        The bound asked for (scene units).
    """

    indices: np.ndarray
    frames: np.ndarray
    controls: list[np.ndarray]
    errors: np.ndarray
    key_error: float

    @property
    def keys_before(self) -> int:
        """Keys per curve before reduction (one per baked frame)."""
        return int(self.errors.shape[0])

    @property
    def keys_after(self) -> int:
        """Keys per curve after reduction."""
        return int(self.indices.shape[0])

    @property
    def kept_fraction(self) -> float:
        return self.keys_after / self.keys_before

    @property
    def max_error(self) -> float:
        return float(self.errors.max(initial=0.0))

    @property
    def error_p99(self) -> float:
        """99th percentile of the per-frame world error."""
        return float(np.percentile(self.errors, 99.0))

    def key_values(self, joint: int) -> np.ndarray:
        """Values ``(K, k_j)`` of joint ``joint``'s channels at the kept keys."""
        controls = self.controls[joint]
        return np.concatenate([controls[:, 0], controls[-1:, 3]])

    def handles(self, joint: int) -> tuple[np.ndarray, np.ndarray]:
        """Left and right handle values ``(K, k_j)`` of joint ``joint``'s keys (the first key's left
        and the last key's right handle mirror their other handle, so those keys stay smooth)."""
        controls = self.controls[joint]
        values = self.key_values(joint)
        right = np.concatenate([controls[:, 1], 2.0 * values[-1:] - controls[-1:, 2]])
        left = np.concatenate([2.0 * values[:1] - controls[:1, 1], controls[:, 2]])
        return left.astype(np.float32).astype(float), right.astype(np.float32).astype(float)


class _Problem:
    """The unreduced bake and the evaluation of candidate segments against it."""

    def __init__(self, frames: np.ndarray, values: Sequence[np.ndarray], rotations: Sequence[RotationsOf],
                 chain: Chain, scale: float) -> None:
        self.frames = np.asarray(frames, dtype=float)
        self.values = [np.asarray(v, dtype=float) for v in values]
        self.rotations = rotations
        self.chain = chain
        self.scale = scale
        self.reference = self.points(self.values)
        self.slopes = [np.gradient(v, self.frames, axis=0) if len(self.frames) > 1 else np.zeros_like(v)
                       for v in self.values]

    def points(self, values: Sequence[np.ndarray]) -> np.ndarray:
        return chain_points(self.chain, [rotate(v) for rotate, v in zip(self.rotations, values)])

    def errors(self, rows: np.ndarray, values: Sequence[np.ndarray]) -> np.ndarray:
        """World error ``(len(rows),)`` of channel ``values`` at sample ``rows``."""
        offsets = self.points(values) - self.reference[rows]
        return self.scale * np.linalg.norm(offsets, axis=-1).max(axis=-1)

    def segment(self, a: int, b: int, start: Sequence[np.ndarray], free_end: bool,
                ) -> tuple[list[np.ndarray], np.ndarray]:
        """Fitted controls per joint for the segment ``a → b`` from key values ``start`` and the world
        error ``(b − a,)`` of its frames after ``a`` (the last one: the end key's own error)."""
        controls = [_fit_controls(self.frames, v, m, a, b, y, free_end)
                    for v, m, y in zip(self.values, self.slopes, start)]
        x0, x1 = float(self.frames[a]), float(self.frames[b])
        rows = np.arange(a + 1, b + 1)
        curves = [bezier_values(x0, x1, c, self.frames[rows]) for c in controls]
        return controls, self.errors(rows, curves)


Segment = tuple[int, list[np.ndarray], np.ndarray]
"""End sample, controls per joint and world errors of a fitted segment."""


def _longest_segment(problem: _Problem, a: int, limit: int, start: Sequence[np.ndarray], forced: np.ndarray,
                     budget: float) -> Segment:
    """The longest segment found from sample ``a`` (at most to ``limit``) within ``budget``: its
    length doubled until it fails, then bisected between the last success and the failure."""
    def attempt(b: int) -> Segment | None:
        controls, errors = problem.segment(a, b, start, free_end=not forced[b])
        return (b, controls, errors) if errors.max() <= budget else None

    best: Segment = (a + 1, *problem.segment(a, a + 1, start, free_end=False))  # the end sample itself: exact
    good, bad, step = a + 1, None, 2
    while good < limit and bad is None:
        b = min(a + step, limit)
        found = attempt(b)
        if found is None:
            bad = b
        else:
            good, best, step = b, found, 2 * step
    while bad is not None and bad - good > 1:
        b = (good + bad) // 2
        found = attempt(b)
        if found is None:
            bad = b
        else:
            good, best = b, found
    return best


def reduce_keys(frames: np.ndarray, values: Sequence[np.ndarray], rotations: Sequence[RotationsOf], chain: Chain,
                key_error: float, scale: float = 1.0, keep: np.ndarray | None = None) -> ReducedKeys:
    """The fewest shared keys found for a chain's baked rotation channels within ``key_error``.

    Parameters
    ----------
    frames : ndarray, shape (N,)
        The baked frames, increasing.
    values : sequence of ndarray, shape (N, k_j)
        Per joint of ``chain`` (start → tip), its bone's channel values at every frame, continuous
        (one quaternion hemisphere, no Euler jumps), as keyed by the unreduced bake.
    rotations : sequence of callables
        Per joint, channel values ``(M, k_j)`` → rotation matrices ``(M, 3, 3)``.
    chain : Chain
        The chain in its root space; its joints' rest frames and offsets.
    key_error : float
        The bound ``E`` on every joint's and the tip's world distance from the unreduced bake at
        every frame (scene units).
    scale : float
        World units per chain unit (the root space's uniform scale).
    keep : ndarray of int, optional
        Indices of frames that must stay keys (contacts).
    """
    problem = _Problem(frames, values, rotations, chain, scale)
    count = len(problem.frames)
    if count < 2 or np.any(np.diff(problem.frames) <= 0.0):
        raise IKInputError("frames", "key reduction needs at least two increasing frames")
    budget = key_error * (1.0 - FLOAT32_MARGIN)
    forced = np.zeros(count, dtype=bool)
    forced[[0, count - 1]] = True
    if keep is not None:
        forced[np.asarray(keep, dtype=int)] = True
    errors = np.zeros(count)
    keys, segments = [0], []
    start = [v[0].astype(np.float32).astype(float) for v in problem.values]
    errors[0] = problem.errors(np.array([0]), [y[None] for y in start])[0]
    while keys[-1] < count - 1:
        a = keys[-1]
        limit = int(np.flatnonzero(forced[a + 1:])[0]) + a + 1
        b, controls, segment_errors = _longest_segment(problem, a, limit, start, forced, budget)
        errors[a + 1:b + 1] = segment_errors
        keys.append(b)
        segments.append(controls)
        start = [c[3] for c in controls]
    indices = np.array(keys)
    stacked = [np.stack([segment[joint] for segment in segments]) for joint in range(chain.n_joints)]
    return ReducedKeys(indices=indices, frames=problem.frames[indices], controls=stacked, errors=errors,
                       key_error=key_error)
