"""A second way to the goals for frames the trunk solve leaves unmet (SPEC §8): the goals approached in
stages from where the reference pose puts the tips.

The trunk's Gauss-Newton heads from the reference straight for the goals; where they lie far from it the
steps can end in a poor basin — on Rigify's metarig, a step while crouching left the head 224 mm short on
2 of 40 frames, its neighbours reached (``compare_body.py``'s ``crouch_step``). Solved again in
``stages`` — the goals a ``k / stages`` of the way from the reference tips (positions along the line,
orientations along the shortest turn), each stage started from and pulled toward the one before — the same
frames are reached. A frame keeps whichever result is better by priority (``trunk._better``), so this only
ever helps; it runs on the unmet frames alone, each from its own goals and reference (the result is
independent of the batch, as every trunk solve).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..rotations import matrices_from_rotvecs, rotvecs_from_matrices
from ..vectors import matmul
from .forward import BodyPose
from .model import Body
from .trunk import SETTLED_ERROR, TrunkProblem, _better, _gauss_newton, level_errors, solve_trunk

STAGES = 2
"""Stages of the second way (2 and 3 both reach the metarig's crouch_step frames; 2 costs less)."""
GROSS = 0.005
"""A frame is solved again where a goal above the lowest priority is still off by more than this (a fraction of
the body's size, its rest pose's bounding-box diagonal: 12 mm on the metarig's 2.3 m). The poor basins this
is for leave goals far off (224 mm on the crouch_step frames; 15.8 mm on the one of bench_body's 10,000 sets
that missed); a goal truly out of reach sits near its best (the look path's head, at most 8.2 mm off on
40 % of its frames: tried again, they cost 64 % more solve time on compare_body's five paths for 1.6 mm)."""

Goal = tuple[np.ndarray, "np.ndarray | None", float, int]


def staged_goals(goal: Goal, tip: np.ndarray, frame: np.ndarray, rows: np.ndarray, share: float) -> Goal:
    """``goal`` at the frames ``rows`` a ``share`` of the way from the tip ``(n, 3)`` and its frame ``(n, 3, 3)`` at
    the reference."""
    positions, rotations, weight, priority = goal
    staged = tip + share * (positions[rows] - tip)
    if rotations is None:
        return staged, None, weight, priority
    turn = rotvecs_from_matrices(matmul(np.swapaxes(frame, 1, 2), rotations[rows]))
    return staged, matmul(frame, matrices_from_rotvecs(share * turn)), weight, priority


def retry_in_stages(problem: TrunkProblem, x: np.ndarray, x_ref: np.ndarray, steps: np.ndarray, body: Body,
                    reference_pose: Callable[[np.ndarray], BodyPose], tips: Sequence[int], goals: Sequence[Goal],
                    problem_for: Callable[[np.ndarray, list[Goal]], TrunkProblem], pull_steps: int,
                    stages: int = STAGES) -> tuple[np.ndarray, np.ndarray]:
    """Trunk variables ``x (N, m)`` (solved from ``x_ref``, ``steps`` each) with the frames left unmet solved
    again in ``stages`` where that is better by priority, and the steps each frame took.

    ``reference_pose(rows)``: the body's pose at the reference on those frames; ``tips``: each goal's tip
    bone; ``problem_for(rows, goals)``: the trunk problem of ``goals`` (on the frames ``rows``)."""
    frames = np.arange(x.shape[0])
    errors = level_errors(problem, x, frames)
    tolerance = SETTLED_ERROR * problem.body_scale
    # Goals of the lowest priority alone left unmet are most often out of reach (a hand thrown off): those
    # frames are not tried again (measured on 1,000 bodies with a hand thrown off: 2.7 times the solve
    # time, the head met 0.1 % more often and the other hand 0.9 % less).
    asked = errors[:, :-1] if errors.shape[1] > 1 else errors
    rows = np.flatnonzero(asked.max(axis=1, initial=0.0) > GROSS * problem.body_scale)
    if rows.size == 0 or stages < 2:
        return x, steps
    pose = reference_pose(rows)
    at = [pose.tails(body, [tip])[:, 0] for tip in tips]
    turned = [np.ascontiguousarray(pose.frames[:, tip]) for tip in tips]
    staged, taken = x_ref[rows], np.zeros(rows.size, dtype=int)
    for stage in range(1, stages + 1):
        sub = problem_for(rows, [staged_goals(goal, tip, frame, rows, stage / stages)
                                 for goal, tip, frame in zip(goals, at, turned)])
        if stage < stages:  # a way point: Gauss-Newton alone (the second path and the polish are for the end)
            staged, more = _gauss_newton(sub, staged, pull_steps)
        else:
            staged, more = solve_trunk(sub, staged, pull_steps)
        taken += more
    take = _better(level_errors(problem, staged, rows), errors[rows], tolerance)
    x, steps = x.copy(), steps + np.bincount(rows, taken, minlength=x.shape[0]).astype(int)
    x[rows[take]] = staged[take]
    return x, steps
