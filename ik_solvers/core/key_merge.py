"""Merging kept keys with free handle times (SPEC §9, issue 23): after :func:`.key_search.search_steps`,
kept keys are removed where ONE Bézier segment whose handle **times** are free too holds the bound
over the frames between the surviving keys.

The segments are those of :mod:`.free_segments` (four unknowns per channel: the two handles' times
and values), evaluated as Blender evaluates them. The fit of a candidate is Gauss–Newton on the
world offsets of its frames (shortened steps), all running candidates in one batch: the chain's
Jacobian at the fitted curves at every step (:func:`.free_segments.points_and_jacobian`: forward
kinematics once, the points' derivatives analytic), the segment's derivatives analytic (the time
parameter's by the implicit function theorem), Lawson's reweighting toward the smallest largest
error, starting from the fixed-time fit's handles. Sums run over contiguous rows with ``reduceat``
and the systems are solved by :func:`.bezier_segments.solve_positive_definite` (no BLAS, no
LAPACK): the same keys bit for bit in every process.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from .bezier_segments import solve_positive_definite
from .free_segments import free_values, handle_frames, points_and_jacobian, stored_parameters

if TYPE_CHECKING:
    from .key_reduction import _Problem

MERGE_SPANS = (2,)
"""Kept segments that one merged candidate replaces, tried from every kept key; a candidate that
holds adds the one a kept segment longer."""

STEPS = 15
"""Gauss–Newton steps per candidate at most (a candidate leaves as soon as it holds)."""

STEP = 0.7
"""Fraction of the Gauss–Newton step taken (a full step overshoots on the first steps from the
fixed-time fit's handles)."""

MAX_TIME_STEP = 0.2
"""Largest change of a handle time (a fraction of the segment) in one step: the step is shortened to it."""

DAMPING = 1e-6
"""Damping of the normal equations, relative to their mean diagonal."""

REWEIGHT_EVERY = 5
"""Steps between Lawson's reweightings (each frame's weight times its relative world error to the power 1.3)."""

HOPELESS = ((5, 20.0), (8, 8.0), (11, 3.0))
"""(step, bounds): a candidate whose best largest error is still beyond that many bounds after that
many steps leaves (the first steps raise the error many times over before it falls)."""

WARM_NEWTON = 3
"""Newton steps of the time cubic per Gauss–Newton step, from the last step's roots (the final
errors solve it to convergence)."""


class _Candidates:
    """Merged candidate segments from sample ``starts[i]`` to ``ends[i]`` (``(k,)``) and their rows
    (the samples between the keys, candidate after candidate)."""

    def __init__(self, problem: _Problem, starts: np.ndarray, ends: np.ndarray) -> None:
        self.problem, self.starts, self.ends = problem, starts, ends
        self.lengths = lengths = ends - starts - 1
        self.segment = np.repeat(np.arange(len(starts)), lengths)
        self.first = np.cumsum(lengths) - lengths
        self.rows = np.repeat(starts - self.first + 1, lengths) + np.arange(self.segment.size)
        frames = problem.frames
        self.t0, self.spans = frames[starts], frames[ends] - frames[starts]
        self.s = (frames[self.rows] - self.t0[self.segment]) / self.spans[self.segment]
        stored = problem.values.astype(np.float32).astype(float)  # the keys as Blender stores them
        self.y0, self.y1 = stored[starts], stored[ends]

    def subset(self, chosen: np.ndarray) -> _Candidates:
        """The candidates ``chosen`` (indices, increasing) and their rows, in order."""
        sub = _Candidates.__new__(_Candidates)
        sub.problem, sub.starts, sub.ends = self.problem, self.starts[chosen], self.ends[chosen]
        sub.lengths = lengths = self.lengths[chosen]
        sub.segment = np.repeat(np.arange(len(chosen)), lengths)
        sub.first = np.cumsum(lengths) - lengths
        at = np.repeat(self.first[chosen] - sub.first, lengths) + np.arange(sub.segment.size)  # their rows in ours
        sub.rows, sub.s = self.rows[at], self.s[at]
        sub.t0, sub.spans, sub.y0, sub.y1 = self.t0[chosen], self.spans[chosen], self.y0[chosen], self.y1[chosen]
        return sub

    def offsets(self, params: np.ndarray, u: np.ndarray | None, iterations: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """World offsets ``(R, 3n)`` of every row from the unreduced bake with stored ``params (k, 4, C)``,
        their derivatives ``(R, 3n, C)`` with respect to the channels, the segments' derivatives
        ``(R, C, 4)`` and the time parameters ``(R, C)``."""
        problem, segment = self.problem, self.segment
        values, derivatives, u = free_values(self.s, self.y0[segment], self.y1[segment], params[segment], u, iterations)
        points, jacobian = points_and_jacobian(problem, values, self.rows)
        moving = problem.reference[self.rows, problem.geometry.first_moving:]
        offsets = problem.scale * (points - moving).reshape(len(values), -1)
        return offsets, problem.scale * jacobian.reshape(len(values), offsets.shape[1], -1), derivatives, u

    def errors(self, params: np.ndarray) -> np.ndarray:
        """World error ``(R,)`` of every row with stored ``params``, the time cubic solved to convergence."""
        values, _, _ = free_values(self.s, self.y0[self.segment], self.y1[self.segment], params[self.segment])
        return self.problem.errors(self.rows, values)


@functools.lru_cache(maxsize=8)
def _triangle(channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The upper triangle of a ``4C × 4C`` normal matrix (unknowns channel by channel): each entry's
    channels and parameters, and where each entry of the full matrix is in the triangle."""
    rows, columns = np.triu_indices(4 * channels)
    place = np.zeros((4 * channels, 4 * channels), dtype=int)
    place[rows, columns] = np.arange(len(rows))
    return rows // 4, rows % 4, columns // 4, columns % 4, np.maximum(place, place.T)


def _normal_equations(first: np.ndarray, weights: np.ndarray, metric: np.ndarray, pull: np.ndarray,
                      derivatives: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, ``JᵀWJ (k, 4C, 4C)`` and ``JᵀWe (k, 4C)`` of the weighted world offsets from each
    row's chain metric ``(R, C, C)``, pull ``(R, C)`` and segment derivatives ``(R, C, 4)`` (each
    candidate's rows from ``first (k,)`` on), the unknowns channel by channel (``a, b, h0, h1`` of
    channel 0, then of channel 1, …); only the symmetric matrix's upper triangle is summed."""
    count, channels = derivatives.shape[:2]
    c, p, d, q, place = _triangle(channels)
    weighted = derivatives * weights[:, None, None]
    products = metric[:, c, d] * weighted[:, c, p] * derivatives[:, d, q]
    normal = np.add.reduceat(products, first, axis=0)[:, place]
    return normal, np.add.reduceat((weighted * pull[:, :, None]).reshape(count, -1), first, axis=0)


class _Fits:
    """Free-time fits of candidate segments, all running candidates stepped together in one batch;
    candidates join at any step (:meth:`add`) and each follows its own schedule (its steps, Lawson's
    reweightings, :data:`HOPELESS`), so a candidate's result does not depend on the others."""

    def __init__(self, problem: _Problem, budget: float) -> None:
        self.problem, self.budget, channels = problem, budget, problem.values.shape[1]
        self.starts, self.ends = np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        self.params, self.best = np.zeros((0, 4, channels)), np.zeros((0, 4, channels))
        self.best_largest, self.age = np.zeros(0), np.zeros(0, dtype=int)
        self.running = np.zeros(0, dtype=bool)
        self.u, self.weights = np.zeros((0, channels)), np.zeros(0)
        self.batch = _Candidates(problem, self.starts, self.ends)

    def add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Candidates from sample ``starts`` to ``ends (k,)``, starting from the plain fixed-time fit's handles."""
        k, channels = len(starts), self.problem.values.shape[1]
        fixed, _, _ = self.problem.segments(starts, ends, np.inf, np.arange(k))  # one round: the plain fit
        new = _Candidates(self.problem, starts, ends)
        start = np.concatenate([np.full((k, 2, channels), 1.0 / 3.0), fixed[:, 1:3]], axis=1)
        params = stored_parameters(start, new.t0, new.spans)
        self.starts, self.ends = np.concatenate([self.starts, starts]), np.concatenate([self.ends, ends])
        self.params, self.best = np.concatenate([self.params, params]), np.concatenate([self.best, params])
        self.best_largest = np.concatenate([self.best_largest, np.full(k, np.inf)])
        self.age, self.running = np.concatenate([self.age, np.zeros(k, dtype=int)]), np.concatenate([self.running, np.ones(k, dtype=bool)])
        self.u = np.concatenate([self.u, np.repeat(new.s[:, None], channels, axis=1)])  # the root at times 1/3
        self.weights = np.concatenate([self.weights, np.ones(len(new.rows))])
        self.batch = _Candidates(self.problem, self.starts, self.ends)

    def step(self) -> np.ndarray:
        """One step of every running candidate; the candidates that stopped in it (indices)."""
        batch, budget, channels = self.batch, self.budget, self.problem.values.shape[1]
        active = np.flatnonzero(self.running)
        rows = np.flatnonzero(self.running[batch.segment])
        sub = batch.subset(active)
        offsets, jacobian, derivatives, self.u[rows] = sub.offsets(self.params[active], self.u[rows], WARM_NEWTON)
        errors = np.sqrt((offsets.reshape(len(offsets), -1, 3) ** 2).sum(axis=2).max(axis=1))
        largest = np.maximum.reduceat(errors, sub.first)
        better = largest < self.best_largest[active]
        self.best[active[better]], self.best_largest[active[better]] = self.params[active[better]], largest[better]
        age = self.age[active]
        limit = np.array([min([bounds for at, bounds in HOPELESS if a >= at], default=np.inf) for a in age])
        going = (self.best_largest[active] > budget) & (self.best_largest[active] <= limit * budget) & (age < STEPS)
        self.running[active[~going]] = False
        if not going.any():
            return active
        lawson = (age % REWEIGHT_EVERY == REWEIGHT_EVERY - 1)[sub.segment]  # toward the smallest largest error
        scaled = self.weights[rows] * np.where(lawson, errors / largest[sub.segment], 1.0) ** 1.3
        self.weights[rows] = scaled / (np.bincount(sub.segment, scaled)[sub.segment] / sub.lengths[sub.segment])
        at = going[sub.segment]
        offsets, jacobian, derivatives, rows = offsets[at], jacobian[at], derivatives[at], rows[at]
        moving = active[going]
        sub = batch.subset(moving)
        metric = (jacobian[:, :, :, None] * jacobian[:, :, None, :]).sum(axis=1)
        pull = (jacobian * offsets[:, :, None]).sum(axis=1)
        normal, gradient = _normal_equations(sub.first, self.weights[rows], metric, pull, derivatives)
        diagonal = np.diagonal(normal, axis1=1, axis2=2)
        damped = normal + (DAMPING * diagonal.mean(axis=1))[:, None, None] * np.eye(4 * channels)
        delta = solve_positive_definite(damped, gradient).reshape(len(moving), channels, 4).transpose(0, 2, 1)
        reach = np.abs(delta[:, :2]).max(axis=(1, 2))  # the handle times' largest change
        delta *= (STEP * np.minimum(1.0, MAX_TIME_STEP / np.maximum(reach, 1e-300)))[:, None, None]
        self.params[moving] = stored_parameters(self.params[moving] - delta, sub.t0, sub.spans)
        self.age[moving] += 1
        return active[~going]

    def results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every candidate's best stored parameters ``(k, 4, C)`` (handle times as fractions of the
        segment, handle values), handle frames ``(k, 2, C)``, largest world error ``(k,)`` and the
        world error of its rows ``(R,)``, candidate after candidate (the time cubic solved to convergence)."""
        batch = self.batch
        errors = batch.errors(self.best)
        return self.best, handle_frames(self.best[:, :2], batch.t0, batch.spans), np.maximum.reduceat(errors, batch.first), errors


def fit_free_times(problem: _Problem, starts: np.ndarray, ends: np.ndarray, budget: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Free-time segments from sample ``starts`` to ``ends (k,)`` (each more than one sample past its
    start), all fitted in one batch (:meth:`_Fits.results`). A candidate leaves the steps once it
    holds ``budget`` or is too far off (:data:`HOPELESS`)."""
    fits = _Fits(problem, budget)
    fits.add(starts, ends)
    while fits.running.any():
        fits.step()
    return fits.results()


MergedKeys = tuple[list[int], list[np.ndarray], list[np.ndarray], np.ndarray]
"""Keys, every segment's controls ``(4, C)``, its handles' frames ``(2, C)``, the world error of every sample."""


def merge_steps(problem: _Problem, keys: list[int], controls: list[np.ndarray], errors: np.ndarray,
                forced: np.ndarray, budget: float) -> Generator[None, None, MergedKeys]:
    """The kept ``keys`` (sample indices) with those removed where one free-time segment holds
    ``budget`` over the frames between the surviving keys, the fewest keys over the candidates
    tried: every run of :data:`MERGE_SPANS` kept segments that passes no ``forced`` key, and one
    kept segment longer as soon as a run holds, all running candidates stepped in one batch.

    ``controls``: the kept segments' controls ``(4, C)`` (handles at a third of the segment),
    ``errors (N,)``: the world error of every sample. Returns the keys, every segment's controls
    ``(4, C)`` (key, right handle, next left handle, next key values), its handles' frames
    ``(2, C)`` (the key's right handle, the next key's left; a third of the segment where not
    merged) and the world error of every sample; in steps, one Gauss–Newton step of every running
    candidate each (:func:`.key_search.finished`)."""
    count = len(keys)
    index = np.array(keys)
    inside = np.cumsum(forced[index])  # forced keys up to each kept key
    fits, pairs = _Fits(problem, budget), []

    def add(new: list[tuple[int, int]]) -> None:
        new = [(i, j) for i, j in new if j < count and inside[j - 1] == inside[i]]  # no forced key between
        if new:
            pairs.extend(new)
            fits.add(index[[i for i, _ in new]], index[[j for _, j in new]])

    add([(i, i + span) for i in range(count) for span in MERGE_SPANS])
    while fits.running.any():
        stopped = fits.step()
        add([(pairs[c][0], pairs[c][1] + 1) for c in stopped.tolist()
             if fits.best_largest[c] <= budget and pairs[c][1] - pairs[c][0] >= max(MERGE_SPANS)])
        yield
    params, handles, largest, row_errors = fits.results()
    held: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    row = 0
    for c, (i, j) in enumerate(pairs):
        length = int(index[j] - index[i] - 1)
        if largest[c] <= budget:
            y0, y1 = problem.values[index[i]], problem.values[index[j]]
            segment = np.stack([y0, params[c, 2], params[c, 3], y1]).astype(np.float32).astype(float)
            held[i, j] = segment, handles[c], row_errors[row:row + length]
        row += length
    # The fewest keys: kept segments always hold, merged ones where they did.
    fewest, previous = [0] + [count] * (count - 1), [0] * count
    for j in range(1, count):
        for i in range(j):
            if (j == i + 1 or (i, j) in held) and fewest[i] + 1 < fewest[j]:
                fewest[j], previous[j] = fewest[i] + 1, i
    path = [count - 1]
    while path[-1] > 0:
        path.append(previous[path[-1]])
    path.reverse()
    fixed = thirds(problem, keys, controls)
    out_controls, out_handles, out_errors = [], [], errors.copy()
    for i, j in zip(path[:-1], path[1:]):
        if j == i + 1:
            out_controls.append(controls[i])
            out_handles.append(fixed[i])
        else:
            segment, handles, inner = held[i, j]
            out_controls.append(segment)
            out_handles.append(handles)
            out_errors[index[i] + 1:index[j]] = inner
    return [keys[i] for i in path], out_controls, out_handles, out_errors


def thirds(problem: _Problem, keys: list[int], controls: list[np.ndarray]) -> list[np.ndarray]:
    """The handles' frames ``(2, C)`` of the search's segments between ``keys``: at a third of each."""
    if len(keys) < 2:
        return []
    starts, ends = np.array(keys[:-1]), np.array(keys[1:])
    t0 = problem.frames[starts]
    times = np.full((len(starts), 2, controls[0].shape[1]), 1.0 / 3.0)
    return list(handle_frames(times, t0, problem.frames[ends] - t0))
