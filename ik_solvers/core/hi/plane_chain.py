"""The HI solver's plane chain: bones turning about n0 alone, described by their relative turns.

A chain of in-plane lengths ``L (n,)`` whose bone ``j ≥ 1`` turns by ``α_j``
relative to bone ``j − 1`` (bone 0 along +x): its tip is
``Σ_j L_j (cos ψ_j, sin ψ_j)`` with headings ``ψ = (0, α_1, α_1 + α_2, …)``.
Each bent joint keeps the sense of its preferred bend, ``α_j ∈ [0, π]`` or
``[−π, 0]`` (a joint straight in the preferred pose may turn either way), so
the turns live in a box; straight (all zero) is its farthest pose.

The in-plane solve looks for the root-to-tip distance ``r`` along a path in that
box, from straight through the preferred turns to the *curled* pose nearest the
root (:func:`curled_turns`), the distance moving strictly along it (``path.py``).
The distance is continuous along the path, so every distance between the curled
pose's and the full in-plane reach is met (intermediate values). The path is a
polyline; the segment whose ends' distances bracket the root (the one nearest the
preferred vertex) is searched by Newton's method on the distance's exact slope,
kept inside the bracket and falling back to bisection (Numerical Recipes'
``rtsafe``: :func:`segment_parameters`; :func:`solve_path_parameters` does the
same on a straight path sampled at ``PATH_SAMPLES`` points). Every step is
elementwise per frame and a frame stops when its own bracket is tight, so a frame's
bends never depend on its batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..array_ops import NUMPY_OPS, ROW_OPS, SCALAR_OPS, ArrayOps, Real
from ..vectors import unit_stride

# Root finding stops where the distance is this close (relative to the in-plane reach):
# a few units in the last place of the sum of the bones.
DISTANCE_TOLERANCE = 4e-16
# … or where the bracket on the path parameter is this narrow.
PARAMETER_TOLERANCE = 1e-16
# A cap far above what is needed: a Newton step that does not halve the last step gives way to
# a bisection, so the bracket shrinks to PARAMETER_TOLERANCE in well under this (measured over
# random chains from a sampled bracket: ~3 steps, up to 44 where the distance is flat, next to the full reach).
MAX_ROOT_STEPS = 240
# Samples of each path's distance (t = k / PATH_SAMPLES): a bracket of 1/32 of the path takes
# Newton ~2 steps fewer than the whole path (measured over random chains: 4.8 steps against 6.6).
PATH_SAMPLES = 32
# Curled-pose search: at most this many coordinate-descent sweeps (it stops once a sweep brings
# no start's tip nearer by CURL_SETTLED of the reach); every box corner as a start up to
# CURL_CORNER_JOINTS joints, plus CURL_RANDOM_STARTS fixed pseudo-random starts.
CURL_SWEEPS = 200
CURL_SETTLED = 1e-13
CURL_CORNER_JOINTS = 5
CURL_RANDOM_STARTS = 64
# Ends of the search this close (fraction of the reach) count as equally near the root.
CURL_TIE = 1e-9
# Turns this near (radians) a flat fold's 0 or ±π are tried exactly there (_flat_snapped).
FLAT_SNAP = 1e-3
# Gauss–Newton steps closing a free chain's tip onto its root (folded_onto_root).
FOLD_STEPS = 30


def plane_tip(xp: ArrayOps, lengths: Any, turns: Any) -> tuple[Real, Real, Any, Any]:
    """Tip ``x, y`` of a plane chain with relative ``turns`` (``n − 1`` along the joint axis, ``xp.joints``),
    and each bone's ``along`` and ``across`` parts ``L_j cos ψ_j``, ``L_j sin ψ_j`` (headings summed in
    joint order)."""
    joints = xp.joints
    headings = joints.prepend(0.0, joints.cumsum(turns))
    along, across = joints.polar(lengths, headings)
    return joints.total(along), joints.total(across), along, across


def plane_distances(lengths: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Root-to-tip distances ``(M,)`` of plane chains with relative ``turns (M, n − 1)`` (:func:`plane_tip`)."""
    x, y, _, _ = plane_tip(NUMPY_OPS, lengths, np.ascontiguousarray(turns, dtype=float))
    return np.sqrt(x * x + y * y)


def curled_turns(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, preferred: np.ndarray) -> np.ndarray:
    """Relative turns ``(n − 1,)`` in the box ``[lower, upper]`` bringing the tip nearest the root.

    Coordinate descent, each joint's best turn in closed form (the tip circles that
    joint, so its distance to the root is least where the joint-to-tip vector points
    back at the root, or at the box end nearest that). Started from the preferred
    turns first, then from straight, the box's corners (short chains) and fixed
    pseudo-random points, the nearest result is kept: computed once per preferred
    pose (~1–5 ms). A search, not a proof: tests/core/test_hi_in_plane.py checks it
    against targets sampled from random bend-sense-keeping poses.
    """
    m = preferred.size
    if m == 0:
        return preferred.copy()
    if m == 1:  # two bones: folded the preferred way (or either way for a free joint)
        return np.array([-np.pi if upper[0] <= 0.0 else np.pi])
    starts = [preferred, np.clip(np.zeros(m), lower, upper)]
    finite_lower = np.where(np.isfinite(lower), lower, -np.pi)
    finite_upper = np.where(np.isfinite(upper), upper, np.pi)
    if m <= CURL_CORNER_JOINTS:
        starts += [np.where(np.array(c, bool), finite_upper, finite_lower) for c in itertools.product((0, 1), repeat=m)]
    # Corners alone can all settle on one local minimum (measured: a 5-bone zig-zag stuck at 0.125
    # while 0 was reachable); fixed pseudo-random starts inside the box find the others.
    starts += list(np.random.default_rng(0).uniform(finite_lower, finite_upper, (CURL_RANDOM_STARTS, m)))
    turns = np.array(starts, dtype=float)
    before = plane_distances(lengths, turns)
    for _ in range(CURL_SWEEPS):
        for j in range(m):
            turns[:, j] = _best_turn(lengths, turns, j, finite_lower[j], finite_upper[j])
        now = plane_distances(lengths, turns)
        # Every start settled (no sweep brings any of them nearer), or one already at the root.
        if np.all(now > before - CURL_SETTLED * lengths.sum()) or now.min() <= 10.0 * CURL_SETTLED * lengths.sum():
            break
        before = now
    distances = plane_distances(lengths, turns)
    # Of the starts that end (within rounding) nearest the root, the one whose turns are nearest
    # the preferred ones: the curled pose then differs from the preferred pose only where it must
    # (a leg folds its knee and keeps its ankle bent, the foot's angle not mattering there).
    nearest = np.flatnonzero(distances <= distances.min() + CURL_TIE * lengths.sum())
    change = np.add.accumulate((turns[nearest] - preferred) ** 2, axis=1)[:, -1]
    return _flat_snapped(lengths, lower, upper, turns[nearest[int(np.argmin(change))]])


def _flat_snapped(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """``turns`` ``(n − 1,)`` with each turn within ``FLAT_SNAP`` of 0 or ±π set to it exactly (in the box),
    where that brings the tip no farther from the root. Why: near a flat fold the distance is flat to
    second order, so the coordinate descent creeps toward it and stops ~1e-4 rad short (measured: 1.7e-9
    of the reach above a non-closable chain's least distance ``2·max L − ΣL``, which is the bound the
    status compares with)."""
    flat = np.round(turns / np.pi) * np.pi
    snapped = np.clip(np.where(np.abs(turns - flat) <= FLAT_SNAP, flat, turns), lower, upper)
    distances = plane_distances(lengths, np.stack([turns, snapped]))
    return snapped if distances[1] <= distances[0] else turns


def folded_onto_root(lengths: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Turns ``(n − 1,)`` near ``turns`` putting the tip on the root, by Gauss–Newton steps on the tip
    (each the least turn change, kept only while the tip comes nearer): where the free chain can close
    (``2·max L ≤ ΣL``), :func:`curled_turns`' coordinate descent creeps toward that pose (measured:
    4e-5 of the reach left after its sweeps on a near-flat triangle), Newton's steps then close it."""
    scale = float(lengths.sum())
    best = turns.copy()
    for _ in range(FOLD_STEPS):
        points, jacobian = tip_jacobian(lengths, best)
        tip = points[-1]
        if np.hypot(tip[0], tip[1]) <= CURL_SETTLED * scale:
            break
        moved = best - np.linalg.lstsq(jacobian, tip, rcond=None)[0]
        if plane_distances(lengths, moved[None])[0] >= np.hypot(tip[0], tip[1]):
            break
        best = moved
    return best


def plane_points(lengths: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """The plane chain's joints and tip ``(n + 1, 2)``, the root at the origin, bone 0 along +x."""
    headings = np.concatenate([[0.0], np.add.accumulate(turns)])
    return np.concatenate([[[0.0, 0.0]], np.add.accumulate(lengths[:, None] * np.stack(
        [np.cos(headings), np.sin(headings)], axis=1), axis=0)])


def tip_jacobian(lengths: np.ndarray, turns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plane chain's points ``(n + 1, 2)`` (:func:`plane_points`) and the tip's derivative by each
    turn ``(2, n − 1)``: turn j swings the part from joint j + 1 to the tip about that joint."""
    points = plane_points(lengths, turns)
    arms = points[-1] - points[1:-1]
    return points, np.stack([-arms[:, 1], arms[:, 0]])


def _best_turn(lengths: np.ndarray, turns: np.ndarray, j: int, low: float, high: float) -> np.ndarray:
    """Joint ``j + 1``'s turn ``(S,)`` in ``[low, high]`` (span ≤ 2π) nearest the root, the others held."""
    headings = np.zeros((turns.shape[0], lengths.size))
    np.add.accumulate(turns, axis=1, out=headings[:, 1:])
    px = np.add.accumulate(lengths * np.cos(headings), axis=1)
    py = np.add.accumulate(lengths * np.sin(headings), axis=1)
    # Joint j + 1 sits at the end of bone j; the part it turns runs from there to the tip.
    # Unit-stride copies: strided operands of arctan2 round differently (vectors.unit_stride),
    # and every process must find the same curled pose.
    jx, jy = unit_stride(px[:, j]), unit_stride(py[:, j])
    wx, wy = px[:, -1] - jx, py[:, -1] - jy
    # Best: w pointing from the joint back at the root, i.e. heading atan2(−jy, −jx).
    best = turns[:, j] + np.arctan2(-jy, -jx) - np.arctan2(wy, wx)
    shifted = low + np.mod(best - low, 2.0 * np.pi)
    inside = shifted <= high
    # Outside the box, the end nearer (on the circle) to the best heading.
    gap_low = np.abs(np.mod(low - best + np.pi, 2.0 * np.pi) - np.pi)
    gap_high = np.abs(np.mod(high - best + np.pi, 2.0 * np.pi) - np.pi)
    chosen = np.where(inside, shifted, np.where(gap_low <= gap_high, low, high))
    # A joint on the root (or a turned part of zero length) moves the tip no nearer: it keeps its turn.
    flat = (np.hypot(jx, jy) <= 1e-12 * lengths.sum()) | (np.hypot(wx, wy) <= 1e-12 * lengths.sum())
    return np.where(flat, turns[:, j], chosen)


def path_distances(lengths: np.ndarray, bases: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Distances ``(..., PATH_SAMPLES + 1)`` at ``t = k / PATH_SAMPLES`` along the paths of relative
    turns ``bases + t · directions`` (each ``(..., n − 1)``), as the root finder computes them."""
    t = np.arange(PATH_SAMPLES + 1) / PATH_SAMPLES
    turns = bases[..., None, :] + t[:, None] * directions[..., None, :]
    return plane_distances(lengths, turns.reshape(-1, turns.shape[-1])).reshape(turns.shape[:-1])


def solve_path_parameters(
    lengths: np.ndarray,
    bases: np.ndarray,
    directions: np.ndarray,
    r: np.ndarray,
    samples: np.ndarray | None = None,
    from_end: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Path parameters ``t (M,)`` in ``[0, 1]`` with ``distance(bases + t · directions) = r``, and steps used.

    Needs ``distance(bases) ≥ r ≥ distance(bases + directions)`` per row (a bracket).
    ``samples (M, PATH_SAMPLES + 1)``: each row's :func:`path_distances` (computed here if not
    given). The bracket is the pair of samples around ``r`` nearest the path's start (where
    ``from_end (M,)`` is set: nearest its end); the first guess its false position; then Newton
    steps on the distance's slope (the headings move at the ``rates``, the directions summed)
    while they stay inside the bracket and each is at most half the last, bisections otherwise
    (:func:`root_step`, the one-target solve's too). Each row stops on its own test.
    """
    if samples is None:
        samples = path_distances(lengths, bases, directions)
    if from_end is None:
        from_end = np.zeros(r.shape, dtype=bool)
    tolerance = float(DISTANCE_TOLERANCE * lengths.sum())
    if r.shape == (1,):  # one row (a live update's full solve): the same steps on floats, ~3× fewer µs
        t, used = path_parameter(lengths.tolist(), bases[0].tolist(), directions[0].tolist(), float(r[0]),
                                 samples[0].tolist(), tolerance, bool(from_end[0]), ROW_OPS)
        return np.array([t]), np.array([used])
    f = samples - r[:, None]
    # Nearest the start: the first sample below r, after one that is not; nearest the end: the
    # last sample above r, before one that is not (comparisons only: path_parameter's search).
    below, above = f[:, 1:] < 0.0, f[:, :-1] > 0.0
    from_start = np.where(below.any(axis=1), np.argmax(below, axis=1), PATH_SAMPLES - 1)
    last_above = np.where(above.any(axis=1), PATH_SAMPLES - 1 - np.argmax(above[:, ::-1], axis=1), 0)
    segment = np.where(from_end, last_above, from_start)
    every = np.arange(r.size)
    state = root_start(NUMPY_OPS, segment / PATH_SAMPLES, (segment + 1) / PATH_SAMPLES, f[every, segment],
                       f[every, segment + 1], tolerance)
    return _root_rows(lengths, bases, directions, r, state, tolerance)


def _root_rows(lengths: np.ndarray, bases: np.ndarray, directions: np.ndarray, r: np.ndarray, state: RootState,
               tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """The batch's root-finding loop from ``state``: each row steps until its own test stops it."""
    bases, directions = np.ascontiguousarray(bases, dtype=float), np.ascontiguousarray(directions, dtype=float)
    rates = path_rates(NUMPY_OPS, directions)
    steps = np.zeros(r.shape, dtype=int)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero slope, or the root itself: bisections
        for _ in range(MAX_ROOT_STEPS):
            active = state.active
            if not active.any():
                break
            # While every row is active (always, for a single target) the whole arrays stand for the rows.
            if active.all():
                steps += 1
                state = root_step(NUMPY_OPS, lengths, bases, directions, rates, r, state, tolerance)
                continue
            steps[active] += 1
            rows = np.flatnonzero(active)
            part = RootState(*(np.asarray(value)[rows] for value in state))
            stepped = root_step(NUMPY_OPS, lengths, bases[rows], directions[rows], rates[rows], r[rows], part, tolerance)
            for value, new in zip(state, stepped):
                value[rows] = new
    return root_answer(NUMPY_OPS, state), steps


def path_rates(xp: ArrayOps, directions: Any) -> Any:
    """How fast each bone's heading moves along a path of turns ``bases + t · directions`` (per unit ``t``)."""
    return xp.joints.prepend(0.0, xp.joints.cumsum(directions))


class RootState(NamedTuple):
    """The root finder's state per row (floats for one target, ``(M,)`` arrays for a batch)."""

    lo: Real
    hi: Real
    f_lo: Real
    f_hi: Real
    c: Real  # the next point tried
    last: Real  # the last step's length
    active: Real  # bool: not yet within tolerance


def root_start(xp: ArrayOps, lo: Real, hi: Real, f_lo: Real, f_hi: Real, tolerance: float) -> RootState:
    """The bracket ``[lo, hi]`` on the path parameter with its ends' distances less ``r``, and the
    first guess (its false position); ``tolerance``: ``DISTANCE_TOLERANCE · ΣL``."""
    guess = lo + f_lo * (hi - lo) / xp.where(f_lo > f_hi, f_lo - f_hi, 1.0)  # rows left inactive keep any guess
    c = xp.where((guess > lo) & (guess < hi), guess, 0.5 * (lo + hi))
    return RootState(lo, hi, f_lo, f_hi, c, hi - lo, (f_lo > tolerance) & (f_hi < -tolerance))


def root_step(xp: ArrayOps, lengths: Any, bases: Any, directions: Any, rates: Any, r: Real, state: RootState,
              tolerance: float) -> RootState:
    """One step of the in-plane root finder: the distance at ``c``, the bracket shrunk to the side of
    the root, then a Newton step where it stays inside and is at most half the last, else a bisection."""
    lo, hi, f_lo, f_hi, c, last, _ = state
    joints, divide = xp.joints, xp.divide
    x, y, along, across = plane_tip(xp, lengths, joints.lerp(bases, c, directions))
    x_rate = joints.dot(across, rates)  # dx/dt, negated
    y_rate = joints.dot(along, rates)
    distance = xp.sqrt(x * x + y * y)
    slope = divide(y * y_rate - x * x_rate, distance)  # at the root: no slope (a bisection)
    fc = distance - r
    lo, f_lo, hi, f_hi = xp.choose(fc > 0.0, (c, fc, hi, f_hi), (lo, f_lo, c, fc))
    step = divide(fc, slope)  # a zero slope: a bisection
    newton = c - step
    take = (newton > lo) & (newton < hi) & (abs(step) <= 0.5 * abs(last))
    active = (abs(fc) > tolerance) & (hi - lo > PARAMETER_TOLERANCE)  # the distance is finite: no NaN here
    c, last = xp.choose(take, (newton, step), (0.5 * (lo + hi), 0.5 * (hi - lo)))
    return RootState(lo, hi, f_lo, f_hi, c, last, active)


def root_answer(xp: ArrayOps, state: RootState) -> Real:
    """The bracket's end nearer the root."""
    return xp.where(abs(state.f_lo) <= abs(state.f_hi), state.lo, state.hi)


def path_parameter(
    lengths: Sequence[float],
    bases: Sequence[float],
    directions: Sequence[float],
    r: float,
    samples: Sequence[float],
    distance_tolerance: float,
    from_end: bool = False,
    xp: ArrayOps = SCALAR_OPS,
) -> tuple[float, int]:
    """:func:`solve_path_parameters` for one row on Python floats (live mode): ``t`` and the steps used.

    ``samples``: the row's :func:`path_distances`; ``distance_tolerance``:
    ``DISTANCE_TOLERANCE · lengths.sum()``; ``from_end``: the bracket nearest the path's end. The
    same search (comparisons), :func:`root_start` and :func:`root_step` as the batch. ``xp``: a
    namespace on floats (``SCALAR_OPS``, or ``ROW_OPS`` for a batch of one: numpy's cosine and sine).
    """
    if from_end:
        segment = next((k for k in reversed(range(PATH_SAMPLES)) if samples[k] - r > 0.0), 0)
    else:
        segment = next((k for k in range(PATH_SAMPLES) if samples[k + 1] - r < 0.0), PATH_SAMPLES - 1)
    state = root_start(xp, segment / PATH_SAMPLES, (segment + 1) / PATH_SAMPLES, samples[segment] - r,
                       samples[segment + 1] - r, distance_tolerance)
    return _root_one(xp, lengths, bases, directions, r, state, distance_tolerance)


def _root_one(xp: ArrayOps, lengths: Sequence[float], bases: Sequence[float], directions: Sequence[float], r: float,
              state: RootState, distance_tolerance: float) -> tuple[float, int]:
    """One row's root-finding loop from ``state`` (floats), as :func:`_root_rows` steps a row."""
    steps = 0
    if state.active:
        rates = path_rates(xp, directions)
        while state.active and steps < MAX_ROOT_STEPS:
            state = root_step(xp, lengths, bases, directions, rates, r, state, distance_tolerance)
            steps += 1
    return root_answer(xp, state), steps


def segment_parameters(lengths: np.ndarray, bases: np.ndarray, directions: np.ndarray, r: np.ndarray,
                       f_lo: np.ndarray, f_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters ``u (M,)`` in ``[0, 1]`` with ``distance(bases + u · directions) = r`` on one path segment
    per row, and the steps used; ``f_lo, f_hi (M,)``: the segment ends' distances less ``r`` (a bracket,
    ``f_lo ≥ 0 ≥ f_hi``). The same root finder as :func:`solve_path_parameters`, the bracket given."""
    tolerance = float(DISTANCE_TOLERANCE * lengths.sum())
    state = root_start(NUMPY_OPS, np.zeros(r.shape), np.ones(r.shape), f_lo, f_hi, tolerance)
    return _root_rows(lengths, bases, directions, r, state, tolerance)


def segment_parameter(xp: ArrayOps, lengths: Sequence[float], bases: Sequence[float], directions: Sequence[float],
                      r: float, f_lo: float, f_hi: float, distance_tolerance: float) -> tuple[float, int]:
    """:func:`segment_parameters` for one row on Python floats (``xp``: ``SCALAR_OPS`` or ``ROW_OPS``)."""
    return _root_one(xp, lengths, bases, directions, r, root_start(xp, 0.0, 1.0, f_lo, f_hi, distance_tolerance),
                     distance_tolerance)
