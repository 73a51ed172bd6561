"""Lower bounds on each goal's error: triangle inequalities along the bones (the body solve's honest statuses).

Two points of one rigid body of bones are never farther apart than the bones between them allow:
the tip of a chain is within ``D`` (the lengths along the tree from it to a point) of that point.
The points that pin a goal down are the fixed root (when no body root moves) and the tips of the
higher-priority goals reached on the frame. ``bound = max(0, |goal − point| − D)`` over them.
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


def reach_from_root(body: Body, tip: int) -> tuple[np.ndarray, float]:
    """The fixed head of ``tip``'s tree root (world, when no body root moves) and the longest distance
    from it to ``tip``'s tail."""
    up = body.ancestors(tip)
    top = up[-1]
    anchor = body.root_position + body.root_rotation @ body.offsets[top]
    return anchor, float(norm(body.tails[tip])) + sum(float(norm(body.offsets[b])) for b in up[:-1])


def goal_bounds(body: Body, tips: list[int], positions: list[np.ndarray], priorities: list[int],
                reached: list[np.ndarray], root: int | None, tolerance: float) -> list[np.ndarray]:
    """Per goal ``(N,)``: the least error any pose allows given the fixed root (``root`` None) and the
    strictly higher-priority goals ``reached (N,)`` on the frame (their tips taken at their goals, less
    ``tolerance``)."""
    out = []
    for i, (tip, goal) in enumerate(zip(tips, positions)):
        bound = np.zeros(goal.shape[0])
        if root is None:
            anchor, length = reach_from_root(body, tip)
            bound = np.maximum(bound, norm(goal - anchor) - length)
        for j, (other, pinned) in enumerate(zip(tips, positions)):
            if priorities[j] <= priorities[i] or j == i:
                continue
            length = reach_along(body, tip, other, root)
            if np.isfinite(length):
                gap = norm(goal - pinned) - length - tolerance
                bound = np.maximum(bound, np.where(reached[j], gap, 0.0))
        out.append(bound)
    return out
