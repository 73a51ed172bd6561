"""Where the keys go (SPEC §9, :mod:`.key_reduction`): greedy longest segments, grown from both ends
of the frames at once, every search window of a round fitted and checked in one batch.

A round of fit and check costs about the same whatever its size (numpy's per-call overhead), so
the search runs as many windows per round as it usefully can: the next key's from the first frame
forward and the next key's from the last frame backward (two chains, each about half the keys),
and the windows of the keys that would follow if every segment were as long as the last one
(speculation: a search depends only on its start, its last segment's length and the next forced
key, so a speculative one that turns out to be the right one is used as it is). Where the two
chains meet they are joined by the segment between a key of each that leaves the fewest keys.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from .key_reduction import _Problem

FIRST_GUESS = 8
"""Segment length (samples) around which the first key's candidates are tried; later keys start
around the length of the segment before."""

SPECULATIVE_ROWS = 80
"""Rows (frames of candidate segments) a chain may add to a batch for the windows of the keys
that would follow if every next segment were as long as the last one."""


class _Search:
    """The search for the longest segment from key ``a`` (forward, or backward to earlier frames)
    at most to ``limit``, one window of lengths at a time: every length from half to twice
    ``guess`` first; while the longest of a window holds, the next window doubles it; when none
    holds, every shorter length is tried; the longest that holds is taken (a segment without inner
    frames always holds). ``found``: the other key, the segment's controls ``(4, C)`` (from its
    earlier key to its later one) and the world error of the frames between its keys."""

    def __init__(self, problem: _Problem, a: int, limit: int, guess: int, step: int) -> None:
        self.problem, self.a, self.step, self.most = problem, a, step, abs(limit - a)
        self.held: tuple[int, np.ndarray, np.ndarray] | None = None  # the longest that held so far
        self.high = min(self.most, 2 * guess)
        self.low = min(max(2, guess // 2), max(2, self.high))  # up to a forced key nearer than half the guess

    @property
    def found(self) -> tuple[int, np.ndarray, np.ndarray]:
        """The other key, the segment's controls and its inner frames' world error (a segment
        without inner frames when none held)."""
        if self.held is None:
            return self.a + self.step, self.problem.straight(min(self.a, self.a + self.step)), np.zeros(0)
        return self.held

    @property
    def done(self) -> bool:
        return self.low > self.high

    def lengths(self) -> np.ndarray:
        """The current window's segment lengths (samples), increasing."""
        return np.arange(self.low, self.high + 1)

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """The current window's candidates: their earlier and later keys ``(k,)`` each."""
        ends = self.a + self.step * self.lengths()
        fixed = np.full(len(ends), self.a)
        return (fixed, ends) if self.step > 0 else (ends, fixed)

    def update(self, controls: np.ndarray, largest: np.ndarray, errors: np.ndarray, budget: float) -> None:
        """Take the window's results (:meth:`_Problem.segments` of :meth:`segments`) and move on."""
        lengths = self.lengths()
        held = np.flatnonzero(largest <= budget)
        held_before = self.held is not None
        if held.size:
            best = int(held[-1])
            start = int((lengths[:best] - 1).sum())
            length = int(lengths[best])
            self.held = self.a + self.step * length, controls[best], errors[start:start + length - 1]
        if held.size and best == len(lengths) - 1:
            self.low, self.high = self.high + 1, min(self.most, 2 * self.high)
        elif held.size or self.low == 2 or held_before:
            # (held before: a window below this one held, so every length still untried is shorter
            # than the longest that held; trying them again would find the same)
            self.low = self.high + 1
        else:  # nothing from ``low`` on held: only shorter lengths are left
            self.low, self.high, self.most = 2, self.low - 1, self.low - 1


class _Chain:
    """Keys found greedily from one end of the frames (``step`` +1: forward from the first, −1:
    backward from the last), with the searches run so far (speculative ones included)."""

    def __init__(self, problem: _Problem, first: int, limits: np.ndarray, step: int) -> None:
        self.problem, self.limits, self.step = problem, limits, step
        self.keys = [first]
        self.found: list[tuple[np.ndarray, np.ndarray]] = []  # per segment: controls, inner errors
        self.searches: dict[tuple[int, int], _Search] = {}

    def search(self, a: int, guess: int) -> _Search:
        """The search from key ``a`` after a segment of ``guess`` samples, as far as it has got."""
        if (a, guess) not in self.searches:
            self.searches[a, guess] = _Search(self.problem, a, int(self.limits[a]), guess, self.step)
        return self.searches[a, guess]

    @property
    def guess(self) -> int:
        return abs(self.keys[-1] - self.keys[-2]) if len(self.keys) > 1 else FIRST_GUESS

    def take(self, stop: int) -> None:
        """Add the keys whose searches are done, until one reaches ``stop``."""
        while (self.keys[-1] - stop) * self.step < 0:
            search = self.search(self.keys[-1], self.guess)
            if not search.done:
                return
            other, controls, errors = search.found
            self.keys.append(other)
            self.found.append((controls, errors))

    def pending(self, stop: int) -> list[_Search]:
        """The searches to run next: the chain's next key's, then the speculative ones after it."""
        a, guess = self.keys[-1], self.guess
        out, rows = [self.search(a, guess)], 0
        for start in self._likely_next(a, guess, stop):
            following = self.search(start, guess)
            if following.done:
                continue
            rows += int((following.lengths() - 1).sum())
            if rows > SPECULATIVE_ROWS:
                break
            out.append(following)
        return out

    def _likely_next(self, a: int, guess: int, stop: int) -> Iterator[int]:
        start = a
        while ((start + self.step * guess) - stop) * self.step < 0 and abs(self.limits[start] - start) >= guess:
            start += self.step * guess
            yield start


def _advance(problem: _Problem, searches: list[_Search], budget: float) -> None:
    """One window of every search, all fitted and checked in one batch."""
    pairs = [search.segments() for search in searches]
    starts, ends = np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])
    windows = np.repeat(np.arange(len(searches)), [len(p[0]) for p in pairs])
    controls, largest, errors = problem.segments(starts, ends, budget, windows)
    first, row = 0, 0
    for (window_starts, window_ends), search in zip(pairs, searches):
        count, rows = len(window_starts), int((window_ends - window_starts - 1).sum())
        search.update(controls[first:first + count], largest[first:first + count], errors[row:row + rows], budget)
        first, row = first + count, row + rows


Result = TypeVar("Result")


def finished(steps: Generator[None, None, Result]) -> Result:
    """Run ``steps`` to the end; their result. A computation in steps (``…_steps``) runs one round per
    ``next()``, so a caller may stop between rounds and go on later (a bake between timer ticks);
    its result is the generator's return value."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def search_steps(problem: _Problem, forced: np.ndarray, budget: float
                 ) -> Generator[None, None, tuple[list[int], list[np.ndarray], np.ndarray]]:
    """The kept keys (sample indices, increasing), every segment's controls ``(4, C)`` and the world
    error of every sample ``(N,)`` (0 at the keys) for keys that must include ``forced (N,)`` (bool;
    the first and the last sample among them), every segment within ``budget``; in rounds, one
    batch of fit and check each (:func:`finished`)."""
    count = len(forced)
    at = np.flatnonzero(forced)
    index = np.arange(count)
    after = at[np.searchsorted(at, index, side="right").clip(max=len(at) - 1)]  # the next forced key
    before = at[(np.searchsorted(at, index, side="left") - 1).clip(min=0)]  # the forced key before
    # Each chain runs to the middle frame (not to the other's frontier): where they meet, and so the
    # keys, do not depend on how many windows a batch runs.
    middle = count // 2
    chains = _Chain(problem, 0, after, 1), _Chain(problem, count - 1, before, -1)
    while True:
        pending = []
        for chain in chains:
            chain.take(middle)
            if (chain.keys[-1] - middle) * chain.step < 0:
                pending += chain.pending(middle)
        if not pending:
            return _join(problem, *chains, after, budget)
        _advance(problem, pending, budget)
        yield


HOLD_FRAMES = 3
"""Frames of equal channel values from which a hold keeps its first and last frame as keys (:func:`.key_reduction.reduce_keys`)."""


def hold_runs(held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last sample ``(H,)`` each of every hold: ``held (N - 1,)`` says sample ``i + 1`` has
    sample ``i``'s values; a hold is a run of at least :data:`HOLD_FRAMES` such samples."""
    edges = np.diff(np.concatenate([[0], held.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # run of held[starts:stops]
    long = stops - starts >= HOLD_FRAMES - 1
    return starts[long], stops[long]


def flatten_holds(problem: _Problem, held: np.ndarray, keys: list[int], controls: list[np.ndarray],
                  errors: np.ndarray) -> None:
    """Make every segment between ``keys`` inside a hold (``held``: as :func:`hold_runs` takes it) flat:
    all four controls the held value, so every frame there is exactly the held pose; ``controls``
    and the world ``errors (N,)`` are changed in place."""
    for index, (a, b) in enumerate(zip(keys[:-1], keys[1:])):
        if held[a:b].all():
            controls[index] = np.broadcast_to(problem.values[a], controls[index].shape).astype(np.float32).astype(float)
            if b - a > 1:
                errors[a + 1:b] = problem.errors(np.arange(a + 1, b), controls[index][np.zeros(b - a - 1, dtype=int)])


def _join(problem: _Problem, forward: _Chain, backward: _Chain, after: np.ndarray, budget: float
          ) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """The keys of both chains joined where that leaves the fewest: at a key they share, or by a
    segment that holds from a forward key to a later backward one (all such segments near where the
    chains met fitted and checked in one batch); the forward chain on to the last frame if none does."""
    ahead, behind = forward.keys, backward.keys
    longest = max(abs(b - a) for keys in (ahead, behind) for a, b in zip(keys[:-1], keys[1:]))
    # (keys kept, forward keys used, backward keys used, the segment between or None: a shared key)
    options: list[tuple[int, int, int, tuple[int, int] | None]] = []
    for i, a in enumerate(ahead):
        for j, b in enumerate(behind):
            if a == b:
                options.append((i + j + 1, i, j, None))
            elif a < b <= min(a + 2 * longest, int(after[a])):
                options.append((i + j + 2, i, j, (a, b)))
    # Segments worth checking: those that would keep fewer keys than a shared key.
    meeting = min((kept for kept, _, _, between in options if between is None), default=len(ahead) + len(behind))
    candidates = sorted({between for kept, _, _, between in options
                         if between is not None and between[1] - between[0] > 1 and kept < meeting})
    held = _holding(problem, candidates, budget)
    for a, b in {between for _, _, _, between in options if between is not None and between[1] - between[0] == 1}:
        held[a, b] = problem.straight(a), np.zeros(0)  # no frame between: always holds
    usable = [option for option in options if option[3] is None or option[3] in held]
    if not usable:  # not met (a segment's length that holds need not make a shorter one hold)
        while forward.keys[-1] < len(after) - 1:
            forward.take(len(after) - 1)
            if forward.keys[-1] < len(after) - 1:
                _advance(problem, forward.pending(len(after) - 1), budget)
        return _assembled(problem, forward.keys, forward.found)
    _, i, j, between = min(usable, key=lambda option: (option[0], option[1] - option[2]))
    keys = ahead[:i + 1] + behind[:j + 1][::-1]
    found = forward.found[:i] + backward.found[:j][::-1]
    if between is None:
        keys.pop(i + 1)  # the shared key
    else:
        found.insert(i, held[between])
    return _assembled(problem, keys, found)


def _holding(problem: _Problem, segments: list[tuple[int, int]], budget: float
             ) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """The ``segments`` (earlier and later key) that hold, all fitted and checked in one batch (each
    its own window): their controls and the world error of the frames between their keys."""
    held: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    if segments:
        starts, ends = np.array(segments).T
        controls, largest, errors = problem.segments(starts, ends, budget, np.arange(len(segments)))
        row = 0
        for c, (a, b) in enumerate(segments):
            if largest[c] <= budget:
                held[a, b] = controls[c], errors[row:row + b - a - 1]
            row += b - a - 1
    return held


def _assembled(problem: _Problem, keys: list[int], found: list[tuple[np.ndarray, np.ndarray]]
               ) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    errors = np.zeros(len(problem.frames))
    for a, b, (_, inner) in zip(keys[:-1], keys[1:], found):
        errors[a + 1:b] = inner
    return keys, [controls for controls, _ in found], errors
