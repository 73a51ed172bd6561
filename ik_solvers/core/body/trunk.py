"""The trunk solve: root and spine variables by task-priority Gauss-Newton from the reference pose (SPEC §8).

The variables ``x`` are the body root's location (3, when it is free) and the joint variables of
the root bone and of every chain other chains hang from. Each goal contributes residual rows: a
trunk chain its own tip error (position, and orientation scaled to length), a limb its *reach*
residual — how far its goal lies outside the shell of distances the HI solve reaches from the limb's
start joint (``PreferredPose.lower_bound``: zero whenever HI reaches exactly), signed, along the
start-to-goal direction. Rows are grouped by priority; each step solves the groups in turn, each in
the null space of the ones above (exact projections from a truncated eigen-decomposition: a lower
goal never leaks into a higher one), with Levenberg-Marquardt damping that grows with a level's
residual (so a goal out of reach stops pushing), and then pull toward the reference pose in what is
left (all the way for the first steps, then less and less: ``PULL_FULL``), toward the pose
nearest the reference (weighted by ``1 − stiffness``) that meets the goals by priority; the pull's fixed
number of steps need not reach it (docs/body-solve.md: the answer is the pose those steps reach, one per
goal set). A limb outside its reach is an inequality in the pulled steps (``LevelValues.released``). A
second phase repeats the steps without the pull, so limbs at the edge of their reach settle exactly there.

Every operation is per frame (elementwise, or numpy's stacked small-matrix routines, which work
matrix by matrix), and each frame stops on its own test: a frame's result is independent of the
batch it is solved in, and since every frame starts from its reference, of every other frame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..chain import Chain
from ..rotations import quaternion_products, quaternions_from_rotvecs, rotvecs_from_quaternions
from ..vectors import matvec, norm
from .forward import BodyPose, VariableColumns
from .priority import Level, Trail, level_rows, prioritised_step, resumed
from .rows import GoalRows, LevelRows, LevelValues

# No variable moves by more than this per step (radians, or body scales for the root location).
MAX_STEP = 0.25
PULL_ITERATIONS = 16
# Pulled step k (from 0) takes min(1, PULL_FULL / (k + 1)) of the way back: where the pull and the goals take
# turns, full steps swung the walk's hips ~10 cm a step to the last (pops); the same for every frame (smooth).
PULL_FULL = 8.0
SETTLE_ITERATIONS = 30
# A frame stops pulling when no variable moves by more than this in a step (radians / scales),
# and stops settling when every residual is this small (fraction of the body scale) or it stalls.
PULL_SETTLED = 1e-8
SETTLED = 1e-14
# A frame also stops when no variable moves by more than this in a step (radians / units): stationary.
STALLED = 1e-10
# A settling frame also stops when its largest residual has not fallen below PROGRESS times its best
# for PATIENCE steps: a goal out of reach keeps stepping (damped) without getting anywhere, and the
# polish (level by level, holding such goals) ends the solve better than more of those steps.
PROGRESS = 0.999
PATIENCE = 5
# After the second path, frames with a goal unmet are polished level by level (_polish), each pass up
# to POLISH_ITERATIONS steps (20: on 2,000 bodies with a hand thrown 0.8 m off, 10 left the head unmet
# in 0.25 % of them, 20 in none); its second pass holds the level's goal farthest off where it is
# unmet by more than POLISH_DROP (fraction of the body scale: 0.2 mm on 2 m).
POLISH_DROP = 1e-4
POLISH_ITERATIONS = 20
# How a step treats a goal per frame (``keep``): asked to meet it, asked to leave it where it is (its Jacobian
# with zero residuals: a goal out of reach, held while the levels below move round it), or left out (zeros).
ACTIVE, HELD, IGNORED = 1, 2, 0
_CONJUGATE = np.array([1.0, -1.0, -1.0, -1.0])  # a unit quaternion times this: its inverse
_NONE = np.zeros(0, dtype=int)
# A level whose residual norm is below this (fraction of the body scale) counts as met (0.1 µm on 2 m).
SETTLED_ERROR = 5e-8


@dataclass(frozen=True, eq=False)
class TrunkProblem:
    """What the trunk solve needs beyond the variables.

    Attributes
    ----------
    rows : GoalRows
        Goals' rows by priority, highest first.
    pose : callable
        ``pose(x (n, m), frames (n,)) -> (BodyPose, VariableColumns)``.
    rotations : Chain
        The rotational variables (``x[:, translations:]``) as a :func:`~.forward.variable_chain`.
    translations : int
        3 when the root location is free (the first three variables), else 0.
    scales : ndarray, shape (m,)
        ``sqrt(weight)`` per variable: the solve minimises ``Σ Δx² / weight``.
    body_scale : float
        The body's size (chain units): the root location's step bound and the settle tolerance.
    """

    rows: GoalRows
    pose: Callable[[np.ndarray, np.ndarray], tuple[BodyPose, VariableColumns]]
    rotations: Chain
    translations: int
    scales: np.ndarray
    body_scale: float

    @cached_property
    def ball_columns(self) -> np.ndarray:
        """The ball joints' variables ``(J, 3)`` among the rotational ones (``x[:, translations:]``)."""
        balls = self.rotations.ball_joints
        return self.rotations.dof_start[balls][:, None] + np.arange(3)

    @cached_property
    def ball_variables(self) -> np.ndarray:
        """:attr:`ball_columns` as columns of ``x`` ``(J, 3)``."""
        return self.translations + self.ball_columns

    @cached_property
    def limited(self) -> bool:
        """Whether any rotational variable has a finite limit (without, clipping changes nothing)."""
        return bool(np.isfinite(self.rotations.lower).any() or np.isfinite(self.rotations.upper).any())

    @cached_property
    def step_bounds(self) -> np.ndarray:
        """The largest move of each variable in one step ``(m,)``: :data:`MAX_STEP` radians, and as many
        body scales for the root location."""
        bound = np.full(self.scales.size, MAX_STEP)
        bound[:self.translations] *= self.body_scale
        return bound

    @property
    def levels(self) -> tuple[LevelRows, ...]:
        """The goals' priority levels, highest first."""
        return self.rows.levels


def solve_trunk(problem: TrunkProblem, reference: np.ndarray, pull_steps: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Trunk variables ``(N, m)`` from ``reference (N, m)``, and the steps each frame took ``(N,)``.

    Minimum-norm Gauss-Newton steps (``pull_steps`` of them first also pulled toward the reference).
    Frames that end with a goal unmet are solved once more the other way (with the pull if there was
    none, else without), and keep whichever result is better by priority (:func:`_better`): a second,
    fixed path out of a poor basin, decided per frame.
    """
    x, steps = _gauss_newton(problem, reference, pull_steps)
    frames = np.arange(x.shape[0])
    errors = level_errors(problem, x, frames)
    unmet = np.flatnonzero(errors.max(axis=1, initial=0.0) > SETTLED_ERROR * problem.body_scale)
    if unmet.size:
        other, more = _gauss_newton(problem, reference[unmet], 0 if pull_steps else PULL_ITERATIONS, unmet)
        take = _better(level_errors(problem, other, unmet), errors[unmet], SETTLED_ERROR * problem.body_scale)
        x[unmet[take]] = other[take]
        steps[unmet] += more
        x[unmet], more = _polish(problem, x[unmet], reference[unmet], unmet)
        steps[unmet] += more
    return x, steps


def _polish(problem: TrunkProblem, x: np.ndarray, reference: np.ndarray,
            frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x (n, m)`` polished level by level, highest priority first, and the steps it took ``(n,)``.

    A goal that cannot be met still steps (damped) every iteration, and each of its steps costs every
    goal above it a little (second order: millimetres on a body when a hand pulls the trunk round).
    So the levels are polished in turn, each with the goals kept above it and none below it: with all
    its goals (those only dragged off come back), then without its worst goal where that is still
    grossly unmet (a goal of the same level it dragged along is then met if it can be), then without
    every goal of the level still unmet. A goal left out is held for the passes after it (the levels
    below move in its rows' null space: it stays put to first order). A higher goal that can be met ends
    met, to the last bits.
    """
    steps = np.zeros(x.shape[0], dtype=int)
    first = 0
    keep = np.full((x.shape[0], sum(len(level) for level in problem.levels)), IGNORED, dtype=np.int8)
    for level in problem.levels:
        span = slice(first, first + len(level))
        first += len(level)
        for drop in ("none", "worst", "unmet"):
            errors = goal_errors(problem, x, frames)
            tried = keep.copy()
            tried[:, span] = _kept(errors[:, span], drop, problem.body_scale)
            # Frames whose kept goals are all met already take no step (exact zeros would move nothing).
            rows = np.flatnonzero((errors * (tried == ACTIVE)).max(axis=1) > SETTLED_ERROR * problem.body_scale)
            if rows.size:
                x[rows], more = _gauss_newton(problem, reference[rows], 0, frames[rows], start=x[rows],
                                              keep=tried[rows], budget=POLISH_ITERATIONS)
                steps[rows] += more
        keep = tried
    return x, steps


def _kept(errors: np.ndarray, drop: str, scale: float) -> np.ndarray:
    """How a polish treats the goals ``(n, g)`` of one level: all :data:`ACTIVE` (``drop="none"``), the one
    farthest off :data:`HELD` where it is unmet by more than ``POLISH_DROP`` (``"worst"``), or every goal
    still unmet (by more than ``SETTLED_ERROR``) held (``"unmet"``); fractions of the body ``scale``."""
    if drop == "unmet":
        return np.where(errors <= SETTLED_ERROR * scale, ACTIVE, HELD).astype(np.int8)
    keep = np.full(errors.shape, ACTIVE, dtype=np.int8)
    if drop == "worst":
        worst = np.argmax(errors, axis=1)
        far = np.flatnonzero(errors[np.arange(errors.shape[0]), worst] > POLISH_DROP * scale)
        keep[far, worst[far]] = HELD
    return keep


def _gauss_newton(problem: TrunkProblem, reference: np.ndarray, pull_steps: int, frames: np.ndarray | None = None,
                  start: np.ndarray | None = None, keep: np.ndarray | None = None,
                  budget: int = SETTLE_ITERATIONS) -> tuple[np.ndarray, np.ndarray]:
    """``pull_steps`` pulled steps, then plain ones until each frame settles (or ``budget`` ends), from
    ``start`` (default the reference), on the goals as ``keep (n, G)`` says (:data:`ACTIVE`, :data:`HELD`,
    :data:`IGNORED`; default all active). A settling frame stops when met, stationary, or without progress."""
    frames = np.arange(reference.shape[0]) if frames is None else frames
    x = (reference if start is None else start).copy()
    steps = np.zeros(x.shape[0], dtype=int)
    goal = _ball_quaternions(problem, reference) if pull_steps else None  # what the pull turns toward, once
    for pull, count in ((True, pull_steps), (False, budget)):
        active = np.ones(x.shape[0], dtype=bool)
        best = np.full(x.shape[0], np.inf)  # the smallest largest residual so far, and when it was
        since = np.zeros(x.shape[0], dtype=int)
        for k in range(count):
            share = min(1.0, PULL_FULL / (k + 1.0))  # of the way back to the reference this pulled step takes
            rows = np.flatnonzero(active)
            if rows.size == 0:
                break
            if rows.size == x.shape[0]:  # every frame steps: the arrays as they are, no copies
                new, moved, largest_residual = _step(problem, x, reference, frames, goal if pull else None, keep, share)
                x = new
            else:
                new, moved, largest_residual = _step(problem, x[rows], reference[rows], frames[rows],
                                                     goal[rows] if pull and goal is not None else None,
                                                     None if keep is None else keep[rows], share)
                x[rows] = new
            steps[rows] += 1
            if pull:
                done = moved <= PULL_SETTLED
            else:
                better = largest_residual < PROGRESS * best[rows]
                best[rows] = np.where(better, largest_residual, best[rows])
                since[rows] = np.where(better, 0, since[rows] + 1)
                done = ((largest_residual <= SETTLED * problem.body_scale) | (moved <= STALLED)
                        | (since[rows] >= PATIENCE))
            active[rows[done]] = False
    return x, steps


def goal_errors(problem: TrunkProblem, x: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """The residual norm ``(n, G)`` of each goal at ``x``, goals in level order (limbs: how far beyond their
    reach)."""
    pose, columns = problem.pose(x, frames)
    out = []
    for level, values in zip(problem.levels, problem.rows(pose, columns, frames)):
        residuals, first = values.residuals, 0
        for count in level.row_counts:
            out.append(norm(residuals[:, first:first + count]))
            first += count
    return np.stack(out, 1) if out else np.zeros((x.shape[0], 0))  # no goal (every weight 0): none unmet


def level_errors(problem: TrunkProblem, x: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """The residual norm ``(n, L)`` of each priority level at ``x``."""
    errors, out, first = goal_errors(problem, x, frames), np.zeros((x.shape[0], len(problem.levels))), 0
    for k, level in enumerate(problem.levels):
        out[:, k] = norm(errors[:, first:first + len(level)])
        first += len(level)
    return out


def _better(candidate: np.ndarray, current: np.ndarray, tolerance: float) -> np.ndarray:
    """Where ``candidate (n, L)`` beats ``current (n, L)``: smaller on the first level where they differ by
    more than ``tolerance`` (a lexicographic comparison, highest priority first)."""
    decided = np.zeros(candidate.shape[0], dtype=bool)
    wins = np.zeros(candidate.shape[0], dtype=bool)
    for k in range(candidate.shape[1]):
        differ = ~decided & (np.abs(candidate[:, k] - current[:, k]) > tolerance)
        wins |= differ & (candidate[:, k] < current[:, k])
        decided |= differ
    return wins


def _step(problem: TrunkProblem, x: np.ndarray, reference: np.ndarray, frames: np.ndarray, goal: np.ndarray | None,
          keep: np.ndarray | None = None, share: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step: the new variables, the largest variable move and the largest residual per frame (on the
    goals as ``keep (n, G)`` says, in level order; all active by default). ``goal``: the reference's ball
    joints as quaternions ``(n, J, 4)`` for a step pulled toward it, None for a plain step; ``share``:
    the part of the way back a pulled step takes (default all)."""
    pose, columns = problem.pose(x, frames)
    held: list[np.ndarray | None] = []
    if keep is None:
        levels = problem.rows(pose, columns, frames)
        held = [None] * len(levels)
    else:
        # A level every frame ignores adds exact zeros, which the step leaves out: without the pull (the
        # polish's steps) its rows are not even computed (the step is the same bits).
        spans = np.cumsum([0] + [len(level) for level in problem.levels])
        asked = [goal is not None or bool(np.any(keep[:, a:b] != IGNORED)) for a, b in zip(spans[:-1], spans[1:])]
        levels = []
        for level, values, a, b in zip([lv for lv, on in zip(problem.levels, asked) if on],
                                       problem.rows(pose, columns, frames, asked),
                                       spans[:-1][asked], spans[1:][asked]):
            modes = np.repeat(keep[:, a:b], level.row_counts, axis=1)
            levels.append(_masked(values, modes))
            held.append(modes == HELD)
    now = _ball_quaternions(problem, x)
    back = None if goal is None else _toward(problem, x, reference, now, goal)
    if back is not None and share != 1.0:  # the first PULL_FULL pulled steps and plain steps: no product
        back *= share
    # The largest residual (a maximum is exact: the same as level by level), in three calls.
    largest = (np.abs(np.concatenate([values.residuals for values in levels], 1)).max(axis=1, initial=0.0)
               if levels else np.zeros(x.shape[0]))  # no goal asks anything (every weight 0)
    if goal is not None:  # a pulled step: reach rows outside their edge as inequalities (LevelValues.released)
        levels = [values.released() for values in levels]
    stacked = [(values.residuals, values.jacobian, mask) for values, mask in zip(levels, held)]
    scales = np.empty(x.shape)
    scales[:] = problem.scales
    trail: Trail = []
    dx = prioritised_step(stacked, scales, back, problem.body_scale, trail)
    stacked, crossing, first = _guarded(levels, held, dx)
    if crossing.size:  # met rows the step would carry over their edge hold it instead (those frames alone,
        # from the first level whose rows changed: the levels above are the same bits as in the step)
        part = [level_rows(level, crossing) for level in stacked]
        dx[crossing] = prioritised_step(part, scales[crossing], None if back is None else back[crossing],
                                        problem.body_scale, resume=resumed(trail, first, crossing))
    new, clipped = _apply(problem, x, dx, now)
    again = np.nonzero(clipped.any(axis=1))[0] if problem.limited else _NONE
    if again.size:  # variables pushed into a limit take no part in a second try (those frames alone)
        scales = scales[again]
        scales[clipped[again]] = 0.0
        part = [level_rows(level, again) for level in stacked]
        dx[again] = prioritised_step(part, scales, None if back is None else back[again], problem.body_scale)
        new[again], _ = _apply(problem, x[again], dx[again], now[again])
    moved = np.abs(dx).max(axis=1)
    return new, moved, largest


def _masked(values: LevelValues, keep: np.ndarray) -> LevelValues:
    """A level's rows as ``keep (n, r)`` says per frame and row: as they are where :data:`ACTIVE`; where
    :data:`HELD`, their Jacobian with zero residuals (asking the levels below to leave the goal where it
    is, to first order); exact zeros (asking nothing) where :data:`IGNORED`."""
    on, asks = keep != IGNORED, keep == ACTIVE
    edge_asks = asks[:, values.edge_rows]
    return LevelValues(np.where(asks, values.residuals, 0.0), np.where(on[:, :, None], values.jacobian, 0.0),
                       values.edge_rows, np.where(edge_asks[:, :, None], values.edge_jacobian, 0.0),
                       np.where(edge_asks, values.edge_residual, 0.0), values.edge_sign)


def _guarded(levels: list[LevelValues], held: list[np.ndarray | None],
             dx: np.ndarray) -> tuple[list[Level], np.ndarray, int]:
    """The levels' stacked rows with every inequality row the step ``dx (n, m)`` would carry over its edge
    made an equality on that edge (an active set grown by one prediction), the frames where one was, and
    the first level where one was (the levels above keep their rows)."""
    stacked: list[Level] = []
    crossing = np.zeros(dx.shape[0], dtype=bool)
    first = len(levels)
    for k, (values, mask) in enumerate(zip(levels, held)):
        residuals, jacobian = values.residuals, values.jacobian
        rows = values.edge_rows
        if rows.size:
            sign = values.edge_sign
            over = (residuals[:, rows] == 0.0) & (sign * matvec(values.edge_jacobian, dx) < sign * values.edge_residual)
            if over.any():
                first = min(first, k)
                crossing |= over.any(axis=1)
                residuals, jacobian = residuals.copy(), jacobian.copy()
                residuals[:, rows] = np.where(over, values.edge_residual, residuals[:, rows])
                jacobian[:, rows] = np.where(over[:, :, None], values.edge_jacobian, jacobian[:, rows])
        stacked.append((residuals, jacobian, mask))
    return stacked, np.flatnonzero(crossing), first


def _ball_quaternions(problem: TrunkProblem, x: np.ndarray) -> np.ndarray:
    """The ball joints' rotations in ``x (n, m)`` as quaternions ``(n, J, 4)`` (read once a step: the pull
    and the step's composition both start from them)."""
    return quaternions_from_rotvecs(x[:, problem.ball_variables])


def _toward(problem: TrunkProblem, x: np.ndarray, reference: np.ndarray, now: np.ndarray,
            goal: np.ndarray) -> np.ndarray:
    """Increments ``(n, m)`` from ``x`` to the reference (ball joints the shorter way round: the rotation
    vector of ``R(x)ᵀ R(reference)`` in the current frame, from their quaternions ``now`` and ``goal``
    ``(n, J, 4)``), as :func:`~..kinematics.increments_toward` gives them."""
    out = reference - x
    if problem.ball_columns.size:
        inverse = now * _CONJUGATE
        out[:, problem.ball_variables] = rotvecs_from_quaternions(quaternion_products(inverse, goal))
    return out


def _apply(problem: TrunkProblem, x: np.ndarray, dx: np.ndarray, now: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` after the step ``dx`` bounded to :data:`MAX_STEP` (ball joints composed with their rotations
    ``now (n, J, 4)`` as :func:`~..kinematics.apply_increments` composes them, then every variable clipped
    to its limits), and where a limit clipped it ``(n, m)``."""
    t = problem.translations
    largest = (np.abs(dx) / problem.step_bounds).max(axis=1)
    dx = dx * np.minimum(1.0, 1.0 / np.maximum(largest, 1e-300))[:, None]
    free = x + dx
    balls = problem.ball_variables
    if balls.size:
        free[:, balls] = rotvecs_from_quaternions(quaternion_products(now, quaternions_from_rotvecs(dx[:, balls])))
    clipped = np.zeros(x.shape, dtype=bool)
    if not problem.limited:  # infinite limits clip nothing
        return free, clipped
    rot = problem.rotations
    new = free.copy()
    new[:, t:] = np.clip(free[:, t:], rot.lower, rot.upper)
    clipped[:, t:] = (free[:, t:] < rot.lower) | (free[:, t:] > rot.upper)
    return new, clipped
