"""Lower bounds on each goal's error: triangle inequalities along the bones (the body solve's honest statuses).

Two points of one rigid body of bones are never farther apart than the bones between them allow:
the tip of a chain is within ``D`` (the lengths along the tree from it to a point) of that point.
The points that pin a goal down are the nearest fixed point up the tree (the head of the highest
bone above the goal that moves, when no body root moves it) and the tips of the higher-priority
goals reached on the frame. ``bound = max(0, |goal − point| − D)`` over them.
"""

from __future__ import annotations

import numpy as np

from ..vectors import norm
from .model import Body


def reach_along(body: Body, tip: int, other: int, root: int | None) -> float:
    """Longest distance from bone ``tip``'s tail to bone ``other``'s tail the bones allow (inf where the
    body root's free location lies between them, or the bones share no tree)."""
    up_a, up_b = body.ancestors(tip), body.ancestors(other)
    common = next((b for b in up_a if b in up_b), None)
    if common is None:
        return np.inf
    total = 0.0
    anchors = []
    for up, end in ((up_a, tip), (up_b, other)):
        path = up[: up.index(common)]  # from the end bone up to the common bone's child
        if root is not None and root in path:
            return np.inf
        if not path:  # the common bone's own tail
            anchors.append(body.tails[common])
            continue
        total += float(norm(body.tails[end])) + sum(float(norm(body.offsets[b])) for b in path[:-1])
        anchors.append(body.offsets[path[-1]])  # the child's head, in the common bone's frame
    return total + float(norm(anchors[0] - anchors[1]))


def reach_from_fixed(body: Body, tip: int, moving: set[int], root: int | None) -> tuple[int, float] | None:
    """The bone whose head is the fixed point nearest ``tip`` up the tree (the highest bone that moves:
    its head rides on bones that never do), and the longest distance from that head to ``tip``'s tail;
    None where the body root's free location lies above ``tip``."""
    up = body.ancestors(tip)
    if root is not None and root in up:
        return None
    fixed = 0
    for bone in reversed(up):  # from the tree's root down, while nothing moves
        if bone in moving:
            break
        fixed += 1
    index = len(up) - fixed - 1
    return up[index], float(norm(body.tails[tip])) + sum(float(norm(body.offsets[b])) for b in up[:index])


def goal_bounds(body: Body, tips: list[int], positions: list[np.ndarray], priorities: list[int],
                reached: list[np.ndarray], root: int | None, moving: set[int], heads: np.ndarray,
                tolerance: float) -> list[np.ndarray]:
    """Per goal ``(N,)``: the least error any pose allows given the fixed bones (those in no chain above
    it, with ``heads (N, B, 3)`` the pose's heads; ``moving``: the chains' bones and the body root) and the
    strictly higher-priority goals ``reached (N,)`` on the frame (their tips taken at their goals, less
    ``tolerance``)."""
    out = []
    reaches = _reaches(body, tuple(tips), tuple(priorities), root, frozenset(moving))
    for goal, (fixed, along) in zip(positions, reaches):
        bound = np.zeros(goal.shape[0])
        if fixed is not None:
            bound = np.maximum(bound, norm(goal - heads[:, fixed[0]]) - fixed[1])
        for j, length in along:
            gap = norm(goal - positions[j]) - length - tolerance
            bound = np.maximum(bound, np.where(reached[j], gap, 0.0))
        out.append(bound)
    return out


def _reaches(body: Body, tips: tuple[int, ...], priorities: tuple[int, ...], root: int | None,
             moving: frozenset[int]) -> list[tuple[tuple[int, float] | None, list[tuple[int, float]]]]:
    """Per goal, :func:`reach_from_fixed` and ``(j, reach_along)`` for every strictly higher-priority goal
    ``j`` the bones tie it to (constants of the body and its chains: kept in ``body.memo``)."""
    def make() -> list[tuple[tuple[int, float] | None, list[tuple[int, float]]]]:
        out = []
        for i, tip in enumerate(tips):
            along = [(j, reach_along(body, tip, other, root)) for j, other in enumerate(tips)
                     if priorities[j] > priorities[i] and j != i]
            out.append((reach_from_fixed(body, tip, set(moving), root), [(j, d) for j, d in along if np.isfinite(d)]))
        return out

    return body.kept(("reaches", tips, priorities, root, moving), make)
