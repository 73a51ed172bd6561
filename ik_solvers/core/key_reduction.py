"""Key reduction with a world-space error bound (SPEC §9): the fewest Bézier keys for a baked chain
such that every joint and the tip stay within ``E`` of the unreduced bake at every frame.

The curves are Bézier segments whose handles sit at 1/3 and 2/3 of each segment in time (handle x = key x ±
Δ/3). Blender's Bézier evaluation of such a segment has a linear time parameter, so its value is the cubic
Bernstein polynomial of the four control values (a cubic Hermite): this module evaluates exactly what Blender
will, with the control values rounded to float32 as Blender stores them; its float32 arithmetic and handle
frames move the result a little, so part of the bound is kept free (:meth:`_Problem.float32_allowance`).

The error is measured in world space through the chain: all rotation channels of the chain share their keys,
and a candidate segment is accepted only when forward kinematics of every frame of the segment (all joints
evaluated together, so a parent's error shows at its children and the tip) stays within the bound. Segments
are grown greedily from the first frame, the longest that holds taken: every length from half to twice the
last segment's tried in one batch, the batch moved up (doubled) or down until the longest length that holds is
inside it. Keys are the baked samples themselves (every kept key is exact), so segments are independent; the
handles of all channels of a segment are fitted together, a weighted least-squares fit of the unreduced values
between its keys in the chain's world metric (``JᵀJ``: a channel error counts as far as it moves the joints
and the tip), reweighted toward the smallest largest world error (Lawson).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

import numpy as np

from .bezier_segments import SegmentBatch
from .chain import Chain
from .errors import IKInputError
from .key_merge import merge_steps, thirds
from .key_points import Attachments, KeyedPoints
from .key_rotations import RotationsOf
from .key_search import finished, flatten_holds, hold_runs, search_steps

FLOAT32_MARGIN = 0.02
"""Fraction of the bound left free for Blender's float32 evaluation of the curves and pose (at least)."""

CHANNEL_WEIGHT = 3e-4
"""Weight (relative to the world metric's mean) of plain channel errors added to the world metric:
keeps the fitted curves near the samples' values where the world does not see them."""


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
        next key's value (float32-representable).
    handle_frames : list of ndarray, shape (K - 1, 2, k_j)
        Per joint bone, per segment, per channel: the frames (the units of ``frames``, float32-representable)
        of the key's right handle and of the next key's left handle; at 1/3 and 2/3 of the segment, except on
        segments merged with free handle times (:mod:`.key_merge`), where each channel's handles have their
        own times, strictly inside the segment and not overlapping (so Blender corrects nothing).
    errors : ndarray, shape (N,)
        World distance (scene units) of the farthest joint or tip (or attached point; each times its weight,
        with ``weights``) from the unreduced bake, per frame.
    key_error : float
        The bound asked for (scene units).
    allowance : float
        The part of ``key_error`` kept free for Blender's float32 evaluation (scene units): ``errors``
        stay within ``key_error - allowance``, Blender's evaluation within ``allowance`` of them.
    """

    indices: np.ndarray
    frames: np.ndarray
    controls: list[np.ndarray]
    handle_frames: list[np.ndarray]
    errors: np.ndarray
    key_error: float
    allowance: float

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

    def handle_times(self, joint: int) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``(K, k_j)`` of the left and right handles of joint ``joint``'s keys, float32 (the
        first key's left and the last key's right handle mirror their other handle in time too)."""
        times = self.handle_frames[joint]
        right = np.concatenate([times[:, 0], 2.0 * self.frames[-1:, None] - times[-1:, 1]])
        left = np.concatenate([2.0 * self.frames[:1, None] - times[:1, 0], times[:, 1]])
        return left.astype(np.float32).astype(float), right.astype(np.float32).astype(float)


class _Problem:
    """The unreduced bake and the evaluation of candidate segments against it (every joint's
    channels side by side in one ``(N, C)`` array)."""

    def __init__(self, frames: np.ndarray, values: Sequence[np.ndarray], rotations: Sequence[RotationsOf | None],
                 geometry: KeyedPoints, scale: float) -> None:
        self.frames = np.asarray(frames, dtype=float)
        self.values = np.concatenate([np.asarray(v, dtype=float) for v in values], axis=1)
        bounds = np.cumsum([0] + [np.shape(v)[1] for v in values]).tolist()
        self.slices = list(zip(bounds[:-1], bounds[1:]))
        self.geometry = geometry
        self.located = 1 if geometry.translation else 0  # channel groups before the rotations: the location's
        groups: dict[RotationsOf, list[int]] = {}
        for joint, rotate in enumerate(rotations[self.located:]):
            assert rotate is not None  # only a location has no rotation
            groups.setdefault(rotate, []).append(joint)
        self.groups = list(groups.items())
        self.scale = scale
        self.positions = self.frames_and_points(self.values, np.arange(len(self.frames)))[1]  # the points unweighted
        weights = geometry.weights
        self.reference = self.positions if weights is None else self.positions * weights[:, :, None]
        self.slopes = np.gradient(self.values, self.frames, axis=0)
        self.metric = self._metric()
        self.metric_upper = self.metric[(slice(None), *np.triu_indices(self.values.shape[1]))]  # once, not per batch
        self.metric_mean = float(np.trace(self.metric, axis1=1, axis2=2).mean()) / self.values.shape[1]

    def _metric(self, step: float = 1e-6) -> np.ndarray:
        """``JᵀJ (N, C, C)``: the world metric of channel errors at every frame (J: the joints' and the tip's world
        positions with respect to the channels, by forward differences: the metric only weighs the fit, so their
        1e-6 relative error costs nothing, and they take half the forward kinematics of central ones)."""
        count, channels = self.values.shape
        steps = step * np.eye(channels)[:, None, :]
        points = self.points((self.values + steps).reshape(-1, channels), np.tile(np.arange(count), channels))
        points = points.reshape(channels, count, -1)
        jacobian = ((points - self.reference.reshape(count, -1)) / step).transpose(1, 0, 2)  # (N, C, 3 (n + 1))
        metric = (jacobian[:, :, None] * jacobian[:, None]).sum(axis=3)  # not einsum: see bezier_segments.SegmentBatch
        mean = np.trace(metric, axis1=1, axis2=2).mean() / channels
        return metric + CHANNEL_WEIGHT * mean * np.eye(channels)

    def joints(self, values: np.ndarray) -> list[np.ndarray]:
        """Channels ``(..., C)`` split per channel group (the location's, with one, then each joint's rotation)."""
        return [values[..., start:stop] for start, stop in self.slices]

    def frames_and_points(self, values: np.ndarray, rows: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The joints' frames and the points (:meth:`.key_points.KeyedPoints.frames_and_points`) of channel values
        ``(M, C)`` at samples ``rows (M,)``; joints sharing a rotation mode are converted in one call (fewer calls)."""
        groups, count = self.joints(values), values.shape[0]
        joints = groups[self.located:]
        rotations: list[np.ndarray] = [np.empty(0)] * len(joints)
        for rotate, members in self.groups:
            stacked = rotate(np.concatenate([joints[j] for j in members]) if len(members) > 1 else joints[members[0]])
            for place, joint in enumerate(members):
                rotations[joint] = stacked[place * count:(place + 1) * count]
        return self.geometry.frames_and_points(rotations, groups[0] if self.located else None, rows)

    def points(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The points ``(M, P, 3)`` of channel values ``(M, C)`` at samples ``rows (M,)``: joints, tip, attached (times
        their :class:`.key_points.KeyedPoints` weights: every error and the fit's metric count them so)."""
        points, weights = self.frames_and_points(values, rows)[1], self.geometry.weights
        return points if weights is None else points * weights[rows][:, :, None]

    def float32_allowance(self, key_error: float) -> float:
        """The part of ``key_error`` kept free for Blender's float32 evaluation: :data:`FLOAT32_MARGIN` of it, or if
        more how far rounding a handle's frame to float32 can move a curve: half a float32 step of the last frame
        at the samples' fastest world speed (2.7 % of 0.01 mm measured at frame 128, a radian in 12 frames: 23 %),
        each point's times its larger weight of the two frames."""
        moved, weights = np.linalg.norm(np.diff(self.positions, axis=0), axis=-1), self.geometry.weights
        if weights is not None:
            moved = moved * np.maximum(weights[1:], weights[:-1])
        speed = (moved.max(axis=1) / np.diff(self.frames)).max()
        half_step = float(np.spacing(np.float32(np.abs(self.frames).max()))) / 2.0
        return max(FLOAT32_MARGIN * key_error, self.scale * float(speed) * half_step)

    def errors(self, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """World error ``(len(rows),)`` of channel ``values (len(rows), C)`` at sample ``rows``."""
        first = self.geometry.first_moving  # without a location the first joint does not move
        offsets = self.points(values, rows)[:, first:] - self.reference[rows, first:]
        return self.scale * np.sqrt((offsets * offsets).sum(axis=-1).max(axis=-1))

    def segments(self, starts: np.ndarray | int, ends: np.ndarray, budget: float, windows: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fitted controls ``(k, 4, C)`` of the candidate segments from sample ``starts`` (one, or
        one per candidate) to each of ``ends (k,)`` (each more than one sample past its start),
        each candidate's largest world error ``(k,)`` over the frames between its keys and the
        world error of those frames, candidate after candidate ``(R,)``; all candidates evaluated
        in one batch. ``windows (k,)``: the search window of each candidate (candidates of one
        window contiguous, their ends increasing; default: one window).

        The fit aims at the largest error, not the sum of squares: up to :data:`MINIMAX_ROUNDS`
        rounds, the plain fit and Lawson's reweighting (each frame's weight times its relative world
        error to the power :data:`LAWSON_POWER`), the round with the smallest largest error kept per
        candidate. A candidate leaves the rounds once it holds
        ``budget`` (it is taken as it is), when a longer one of its window holds (only the longest
        that holds is taken) or its largest error is beyond :data:`HOPELESS` × ``budget``. A
        candidate's result does not depend on the others in the batch."""
        starts = np.broadcast_to(np.asarray(starts), ends.shape)
        windows = np.zeros(len(ends), dtype=int) if windows is None else windows
        change = windows[1:] != windows[:-1]
        window_first = np.flatnonzero(np.concatenate([[True], change]))
        window_of = np.concatenate([[0], np.cumsum(change)])
        lengths = ends - starts - 1
        batch = SegmentBatch(self.frames, self.values, self.slopes, self.metric, self.metric_mean, starts, ends,
                             self.metric_upper)
        best = np.empty((len(ends), 4, self.values.shape[1]))
        best_largest = np.full(len(ends), np.inf)
        best_errors = np.empty(int(lengths.sum()))
        active, weights, mask = np.arange(len(ends)), None, None
        candidates, firsts = active, batch.starts
        rows, segment, basis, at = batch.rows, batch.segment, batch.basis, np.arange(len(batch.rows))
        for round_ in range(MINIMAX_ROUNDS):
            controls = batch.fit(weights, active, mask)
            errors = self.errors(rows, np.einsum("ri,ric->rc", basis, controls[segment]))
            largest = np.maximum.reduceat(errors, firsts)  # the rows are contiguous per candidate
            better = largest < best_largest[active]
            improved = active[better]
            best[improved] = controls[better]
            best_largest[improved] = largest[better]
            better_rows = better[segment]
            best_errors[at[better_rows]] = errors[better_rows]
            held = np.maximum.reduceat(np.where(best_largest <= budget, candidates, -1), window_first)
            kept_largest = best_largest[active]
            going = ((active > held[window_of[active]])  # only the longest that holds is taken
                     & (kept_largest > budget) & (kept_largest <= HOPELESS[min(round_, len(HOPELESS) - 1)] * budget))
            if not going.any():
                break
            counts = lengths[active]
            row_largest = largest[segment]
            scaled = (errors + 1e-3 * row_largest) / np.maximum(row_largest, 1e-300)
            scaled = scaled ** LAWSON_POWER
            weights = scaled if weights is None else weights * scaled
            sums = np.bincount(segment, weights)[segment]  # 0 only where every error is 0: held, leaving
            weights /= np.where(sums > 0.0, sums, 1.0) / counts[segment]
            kept = going[segment]
            if mask is None:
                mask = kept
            else:
                mask = mask.copy()
                mask[mask] = kept
            weights, active, at = weights[kept], active[going], at[kept]
            counts = counts[going]
            rows, segment, basis = rows[kept], np.repeat(np.arange(len(active)), counts), basis[kept]
            firsts = np.cumsum(counts) - counts
        return best, best_largest, best_errors

    def straight(self, a: int) -> np.ndarray:
        """Controls ``(4, C)`` of the segment ``a → a + 1`` (no frame between its keys): straight handles."""
        y0, y1 = self.values[a], self.values[a + 1]
        controls = np.stack([y0, (2.0 * y0 + y1) / 3.0, (y0 + 2.0 * y1) / 3.0, y1])
        return controls.astype(np.float32).astype(float)


MINIMAX_ROUNDS = 3
"""Fits per candidate segment: least squares, then Lawson reweightings toward the smallest largest error."""

LAWSON_POWER = 1.3
"""Each reweighting multiplies a frame's weight by its world error (relative to the largest) to this
power: a little more than Lawson's 1 converges in fewer rounds (on the benchmark's paths three
rounds at 1.3 keep 731 keys where four at 1 keep 730, in 15 % fewer rounds)."""

HOPELESS = (2.0, 1.2)
"""After the plain fit and after the first reweighting: a candidate whose largest error is beyond
this many bounds leaves the rounds (the first reweighting brings the largest error down by up to
half, the second by a few per cent; on the benchmark's paths 731 keys against 730 at 3 bounds
throughout, in 13 % fewer rounds)."""


def reduce_keys(frames: np.ndarray, values: Sequence[np.ndarray], rotations: Sequence[RotationsOf | None], chain: Chain,
                key_error: float, scale: float = 1.0, keep: np.ndarray | None = None, merge: bool = True, *,
                translation: bool = False, attachments: Attachments | None = None,
                weights: np.ndarray | None = None) -> ReducedKeys:
    """The fewest shared keys found for a chain's baked rotation channels within ``key_error``
    (:func:`reduction_steps` run to the end).

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
        Indices of frames that must stay keys.
    merge : bool
        Merge the search's keys with free handle times (:func:`.key_merge.merge_steps`; False: the
        search's keys, every handle at a third of its segment). A merge never passes a forced key
        (``keep``, the first and last frame, a hold's ends), so holds stay flat.

    translation : bool
        ``values[0]`` is the first joint bone's location ``(N, 3)`` (in its rest frame: a body root's), and
        ``rotations[0]`` None; the joints' rotations follow. Its keys are ``controls[0]`` of the result.
    attachments : Attachments, optional
        Points riding on the chain's bones at every frame, held within ``key_error`` too (the first joints
        of the units below a body's unit: :mod:`.body.keys`).
    weights : ndarray, shape (N, n + 1 + P), optional
        How many times each point's distance counts at each frame (joints, tip, attached points): held
        within ``key_error`` over its weight there.

    Holds — runs of at least :data:`.key_search.HOLD_FRAMES` frames whose channel values are all equal (a foot
    planted, a hand on a still prop: a reached goal that holds still gives the same pose on every
    frame) — keep their first and last frame as keys and a flat segment between (every control
    the held value), so Blender evaluates the held pose on every frame of the hold exactly.
    """
    return finished(reduction_steps(frames, values, rotations, chain, key_error, scale, keep, merge,
                                    translation=translation, attachments=attachments, weights=weights))


def reduction_steps(frames: np.ndarray, values: Sequence[np.ndarray], rotations: Sequence[RotationsOf | None],
                    chain: Chain, key_error: float, scale: float = 1.0, keep: np.ndarray | None = None,
                    merge: bool = True, *, translation: bool = False, attachments: Attachments | None = None,
                    weights: np.ndarray | None = None) -> Generator[None, None, ReducedKeys]:
    """:func:`reduce_keys` in rounds (one batch of fit and check, or one step of the merge's fit, each:
    :func:`.key_search.finished`); the problem is set up, and bad input refused, at the first ``next()``."""
    problem = _Problem(frames, values, rotations, KeyedPoints(chain, translation, attachments, weights), scale)
    count = len(problem.frames)
    if count < 2 or np.any(np.diff(problem.frames) <= 0.0):
        raise IKInputError("frames", "key reduction needs at least two increasing frames")
    forced = np.zeros(count, dtype=bool)
    forced[[0, count - 1]] = True
    if keep is not None:
        forced[np.asarray(keep, dtype=int)] = True
    held = np.all(problem.values[1:] == problem.values[:-1], axis=1)  # frame i + 1 holds frame i's values
    starts, ends = hold_runs(held)
    forced[starts] = forced[ends] = True
    allowance = problem.float32_allowance(key_error)
    budget = key_error - allowance
    keys, controls, errors = yield from search_steps(problem, forced, budget)
    flatten_holds(problem, held, keys, controls, errors)
    if merge:
        keys, controls, handles, errors = yield from merge_steps(problem, keys, controls, errors, forced, budget)
    else:
        handles = thirds(problem, keys, controls)
    indices = np.array(keys)
    errors[indices] = problem.errors(indices, problem.values[indices].astype(np.float32).astype(float))
    segments, times = [problem.joints(segment) for segment in controls], [problem.joints(h) for h in handles]
    return ReducedKeys(indices=indices, frames=problem.frames[indices],
                       controls=[np.stack([segment[group] for segment in segments]) for group in range(len(values))],
                       handle_frames=[np.stack([time[group] for time in times]) for group in range(len(values))],
                       errors=errors, key_error=key_error, allowance=allowance)
