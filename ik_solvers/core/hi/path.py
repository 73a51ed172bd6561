"""The in-plane solve's path: relative turns from straight through the preferred ones to the curled pose,
then on to the folded pose, the distance moving strictly along it (SPEC §5, continuity and reach
honesty; issue 20).

One pose per distance, a continuous function of it through the preferred pose: each half of the path
is a flow from the preferred turns (:func:`monotone_path`), the inner half going on past the curled
pose (every bent joint keeping its sense) with a flow in the free box to the folded pose (the nearest
the tip gets to the root with any turns: there joints may bend against their preferred sense, and
the solve flags them). Computed once per preferred pose (``PreferredPose.path``); the in-plane solve
finds the target's distance on one of its segments (``plane_chain.segment_parameters``).
"""

from __future__ import annotations

import numpy as np

from .plane_chain import CURL_TIE, PATH_SAMPLES, curled_turns, folded_onto_root, plane_distances

# The monotone path (SPEC §5, continuity): a flow step moves the joints this far (fraction of the
# in-plane reach, root-mean-square over the joints), at most this many steps.
FLOW_STEP = 0.02
FLOW_MAX_STEPS = 4000
# How fast (a fraction of the fastest rate per joint motion) the path's distance must move at least.
FLOW_MARGIN = 0.8
# A path segment is checked at this many points inside it.
PATH_CHECKS = 8
# A straight preferred pose (a bend direction's) has no distance slope to flow along: the inner flow
# starts this fraction of the way from it to the curled pose (its first segment, from straight).
STRAIGHT_START = 1e-3
# The escape from a chain folded flat (``_escape``): the turn step of its Hessian's differences
# (radians), and the least negative curvature (per unit of the reach) that counts as a way down.
ESCAPE_DIFFERENCE = 1e-4
ESCAPE_CURVATURE = 1e-6


def _path_slopes(lengths: np.ndarray, turns: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """At relative ``turns (n − 1,)`` of a plane chain: the root-to-tip distance, its slope ``(n − 1,)``
    along each turn, and the metric ``(n − 1, n − 1)`` of the joints' motion per turn (``AᵀA``, ``A`` each
    joint's velocity once the chain is turned about the root to keep its tip on the EE axis)."""
    headings = np.concatenate([[0.0], np.add.accumulate(turns)])
    points = np.zeros((lengths.size + 1, 2))
    points[1:, 0] = np.add.accumulate(lengths * np.cos(headings))
    points[1:, 1] = np.add.accumulate(lengths * np.sin(headings))
    tip = points[-1]
    distance = float(np.hypot(tip[0], tip[1]))
    # Turn j swings the points after joint j about it: velocity perp(p_k − p_j) for k > j.
    offsets = points[None, :, :] - points[1:-1, None, :]
    velocity = np.stack([-offsets[..., 1], offsets[..., 0]], axis=-1)  # (n − 1, n + 1, 2)
    velocity[np.arange(lengths.size + 1)[None, :] <= np.arange(1, lengths.size)[:, None]] = 0.0
    tip_velocity = velocity[:, -1]
    slope = tip_velocity @ tip / max(distance, 1e-300)
    # The placement turns the chain by −(tip heading) about the root: take that turn's velocity off.
    heading_rate = (tip[0] * tip_velocity[:, 1] - tip[1] * tip_velocity[:, 0]) / max(distance * distance, 1e-300)
    velocity -= heading_rate[:, None, None] * np.stack([-points[:, 1], points[:, 0]], axis=-1)[None]
    motion = velocity.reshape(velocity.shape[0], -1)
    return distance, slope, motion @ motion.T


def _steepest(slope: np.ndarray, metric: np.ndarray) -> tuple[np.ndarray, float]:
    """The turn direction moving the distance fastest per joint motion (``metric⁻¹ · slope``, unit in the
    metric) and that rate."""
    ridge = 1e-12 * max(float(np.trace(metric)), 1e-300)
    way = np.linalg.solve(metric + ridge * np.eye(slope.size), slope)
    rate = float(np.sqrt(max(float(slope @ way), 0.0)))
    return way / max(rate, 1e-300), rate


def _flow(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, start: np.ndarray, goal: np.ndarray,
          sense: float) -> list[np.ndarray]:
    """Turns from ``start`` toward ``goal`` in the box, each step moving the distance strictly down
    (``sense`` −1) or up (+1): the direction to the goal, tilted toward the fastest one (per joint
    motion) just enough that the distance moves at ``FLOW_MARGIN`` of the fastest rate at least. Stops
    near the goal, or where the distance stops moving (an extremum in the box)."""
    scale = float(lengths.sum())
    turns = start.copy()
    distance, slope, metric = _path_slopes(lengths, turns)
    vertices = [turns]
    step = FLOW_STEP * scale
    for _ in range(FLOW_MAX_STEPS):
        to_goal = goal - turns
        if float(np.sqrt(max(float(to_goal @ metric @ to_goal), 0.0))) <= FLOW_STEP * scale:
            break
        way = _flow_direction(turns, lower, upper, to_goal, sense * slope, metric)
        size = float(np.sqrt(max(float(way @ metric @ way), 0.0)))
        if size <= 1e-12 * scale:
            break
        # The last step's length, grown again where it had to shrink (fewer trials than from the full step).
        step = min(FLOW_STEP * scale, 2.0 * step)
        for _ in range(30):
            moved = np.clip(turns + (step / size) * way, lower, upper)
            moved_distance, moved_slope, moved_metric = _path_slopes(lengths, moved)
            if sense * (moved_distance - distance) > 1e-14 * scale:
                break
            step *= 0.5
        else:
            break
        turns, distance, slope, metric = moved, moved_distance, moved_slope, moved_metric
        vertices.append(turns)
    return vertices


def _flow_direction(turns: np.ndarray, lower: np.ndarray, upper: np.ndarray, to_goal: np.ndarray, rising: np.ndarray,
                    metric: np.ndarray) -> np.ndarray:
    """The flow's turn direction: toward the goal, tilted toward the fastest rise of the distance's
    ``rising`` slope (per joint motion) to ``FLOW_MARGIN`` of it; the joints at a box end that it would
    push out held, and the direction found again for the others (zero where nothing rises)."""
    free = np.ones(turns.size, dtype=bool)
    way = np.zeros(turns.size)
    for _ in range(turns.size):
        way = np.zeros(turns.size)
        sub = np.ix_(free, free)
        fastest, rate = _steepest(rising[free], metric[sub])
        if rate <= 1e-12:
            return np.zeros(turns.size)
        goal = to_goal[free]
        gap = float(np.sqrt(max(float(goal @ metric[sub] @ goal), 0.0)))
        toward = goal / gap if gap > 0.0 else np.zeros(goal.size)
        way[free] = toward + max(0.0, FLOW_MARGIN - float(rising[free] @ toward) / rate) * fastest
        pushed = free & (((turns <= lower) & (way < 0.0)) | ((turns >= upper) & (way > 0.0)))
        if not pushed.any():
            return way
        free &= ~pushed
        if not free.any():
            return np.zeros(turns.size)
    return way


def _line(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """``PATH_SAMPLES + 1`` turns evenly from ``start`` to ``end`` (both exactly)."""
    return [start] + [start + (k / PATH_SAMPLES) * (end - start) for k in range(1, PATH_SAMPLES)] + [end]


def monotone_path(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, preferred: np.ndarray,
                  curled: np.ndarray, folded: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """The in-plane solve's path of relative turns ``(K + 1, n − 1)`` from straight through ``preferred`` to
    ``curled`` (then on to ``folded``, when given and not ``curled``), and the index of ``preferred`` on
    it: one pose per distance, the distance falling along it.

    Each half is a :func:`_flow` from the preferred turns, up toward straight and down toward the
    curled pose, then the line from where it stops to its end (a flow reaching its end: a few steps,
    the distance still moving the same way; one stopping at an extremum in the box: the only part
    where the distance may turn back). The distance is continuous along the path, so every distance
    from the curled pose's to the reach is met; where it moves strictly, the pose is a continuous
    function of the distance, through the preferred pose.

    The third part, from ``curled`` to ``folded`` (reach honesty): the same flow, down, in the free box
    ``[−π, π]``: nearer than the curled pose a joint bends against its preferred sense only as far as
    the distance needs, and the pose still moves continuously with it.
    """
    outer = _flow_to(lengths, lower, upper, preferred, np.zeros_like(preferred), 1.0)
    if not np.any(preferred) and np.any(curled):  # straight: the first segment leads off it toward the curl
        inner = [preferred] + _flow_to(lengths, lower, upper, STRAIGHT_START * curled, curled, -1.0)
    else:
        inner = _flow_to(lengths, lower, upper, preferred, curled, -1.0)
    if folded is not None and np.any(folded != curled):
        free_lower, free_upper = free_box(curled)
        part = _flow(lengths, free_lower, free_upper, curled, folded, -1.0)
        if len(part) == 1:  # the curled pose is stationary (a joint folded flat): no first-order way down
            escaped = _escape(lengths, curled, folded)
            if escaped is not None:
                part = [curled, *_flow(lengths, free_lower, free_upper, escaped, folded, -1.0)]
        if np.any(part[-1] != folded):
            part += _line(part[-1], folded)[1:]
        inner += part[1:]
    return np.array(outer[::-1] + inner[1:]), len(outer) - 1


def folded_pose(lengths: np.ndarray, curled: np.ndarray) -> np.ndarray | None:
    """The path's far end: turns ``(n − 1,)`` in :func:`free_box` bringing the tip nearest the root, the
    nearest such to ``curled`` (``plane_chain.curled_turns`` from there, then closed onto the root where
    the free chain can close); None where it is no nearer than ``curled`` (within the search's tie)."""
    folded = curled_turns(lengths, *free_box(curled), curled)
    if 2.0 * lengths.max() <= lengths.sum():  # the free chain closes: the tip goes onto the root
        folded = folded_onto_root(lengths, folded)
    near = plane_distances(lengths, np.stack([curled, folded]))
    return None if near[1] >= near[0] - CURL_TIE * lengths.sum() else folded


def free_box(curled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box ``[curled − π, curled + π]`` of the path's third part: every turn free, and a joint folded
    flat in the curled pose (a turn of ±π) may fold on through it (against its preferred sense)."""
    return curled - np.pi, curled + np.pi


def _escape(lengths: np.ndarray, start: np.ndarray, goal: np.ndarray) -> np.ndarray | None:
    """From turns ``start`` where the distance does not move at first order (a chain folded flat): a
    step along the direction it falls fastest at second order (the distance's Hessian's most negative
    eigenvector, the sign toward ``goal``), as long as the distance falls all along it; None where
    no direction falls."""
    m, h = start.size, ESCAPE_DIFFERENCE
    signs = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    eye = np.eye(m)
    # Central differences of the distance, every pair of turns (four points each) in one call.
    points = start + h * (signs[:, 0, None, None, None] * eye[None, :, None, :]
                          + signs[:, 1, None, None, None] * eye[None, None, :, :])
    values = plane_distances(lengths, points.reshape(-1, m)).reshape(4, m, m)
    hessian = (values[0] - values[1] - values[2] + values[3]) / (4.0 * h * h)
    curvatures, vectors = np.linalg.eigh(0.5 * (hessian + hessian.T))
    if curvatures[0] >= -ESCAPE_CURVATURE * lengths.sum():
        return None
    way = vectors[:, 0] * (1.0 if vectors[:, 0] @ (goal - start) >= 0.0 else -1.0)
    base = plane_distances(lengths, start[None])[0]
    size = FLOW_STEP * np.sqrt(m)
    for _ in range(30):
        line = start + (size * np.arange(1, PATH_CHECKS + 1) / PATH_CHECKS)[:, None] * way
        distances = plane_distances(lengths, line)
        if np.all(np.diff(np.concatenate([[base], distances])) < 0.0):
            return line[-1]
        size *= 0.5
    return None


def _flow_to(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, start: np.ndarray, goal: np.ndarray,
             sense: float) -> list[np.ndarray]:
    """:func:`_flow` from ``start`` toward ``goal``, then the line from where it stops to ``goal`` exactly."""
    part = _flow(lengths, lower, upper, start, goal, sense)
    if np.any(part[-1] != goal):
        part += _line(part[-1], goal)[1:]
    return part
