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

from .plane_chain import (
    CURL_TIE,
    PATH_SAMPLES,
    curled_turns,
    folded_onto_root,
    plane_distances,
    plane_points,
    tip_jacobian,
)

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
# A part of the path ending near the root (``_close_onto_root``: its end within CLOSE_END of the reach
# from it) goes its last stretch, from within CLOSE_START, with the tip's distance and heading moving
# together (from within CLOSE_RADIAL onto the root itself, the heading held: less change near a fold):
# the distance's gap to the end's shrinking by CLOSE_RATIO per vertex (by FLOW_STEP of the
# reach at most) down to CLOSE_LAST (of the reach), then onto the end; each vertex by at most
# CLOSE_NEWTON Gauss–Newton steps.
CLOSE_END = 0.01
CLOSE_START = 0.3
CLOSE_RADIAL = 0.05
CLOSE_RATIO = 0.7
CLOSE_LAST = 1e-6
CLOSE_NEWTON = 8


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
        inner = [preferred] + _flow_to(lengths, lower, upper, STRAIGHT_START * curled, curled, -1.0, settle=True)
    else:
        inner = _flow_to(lengths, lower, upper, preferred, curled, -1.0, settle=True)
    if folded is not None and np.any(folded != curled):
        start = inner[-1]  # the curled pose, or one as near the root where the flow settled
        free_lower, free_upper = free_box(curled)
        part = _flow(lengths, free_lower, free_upper, start, folded, -1.0)
        if len(part) == 1:  # the curled pose is stationary (a joint folded flat): no first-order way down
            escaped = _escape(lengths, start, folded)
            if escaped is not None:
                part = [start, *_flow(lengths, free_lower, free_upper, escaped, folded, -1.0)]
        inner += _finish(lengths, free_lower, free_upper, part, folded, True)[1:]
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
             sense: float, settle: bool = False) -> list[np.ndarray]:
    """:func:`_flow` from ``start`` toward ``goal``, then on to ``goal`` (:func:`_finish`)."""
    return _finish(lengths, lower, upper, _flow(lengths, lower, upper, start, goal, sense), goal, settle)


def _finish(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, part: list[np.ndarray], goal: np.ndarray,
            settle: bool) -> list[np.ndarray]:
    """A flow ``part`` toward ``goal`` taken on to it: by the line from where it stops to ``goal`` exactly.

    ``settle`` (a part toward the root: ``goal`` the curled or the folded pose): an end near the root is
    approached as :func:`_close_onto_root` says; a flow that stops as near the root as ``goal`` (within
    ``CURL_TIE`` of the reach) ends there, not with a line to the search's pose (poses as near the
    root can be many, and the line between two of them may carry the tip away and back)."""
    if settle:
        closed = _close_onto_root(lengths, lower, upper, part, goal)
        if closed is not None:
            return closed
    if settle and np.any(part[-1] != goal):
        near = plane_distances(lengths, np.stack([part[-1], goal]))
        if near[0] <= near[1] + CURL_TIE * float(lengths.sum()):
            return part
    if np.any(part[-1] != goal):
        part += _line(part[-1], goal)[1:]
    return part


def _close_onto_root(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, part: list[np.ndarray],
                     goal: np.ndarray) -> list[np.ndarray] | None:
    """``part`` (a flow toward ``goal``, whose tip lies within ``CLOSE_END`` of the reach from the root)
    up to a vertex within ``CLOSE_START`` of it (``CLOSE_RADIAL`` where ``goal``'s tip is on the root) (the first after its start from which :func:`_closed_from` closes),
    then on to ``goal`` with the tip's heading turning in step with its distance. None where ``goal``
    is farther, no vertex comes that near, or no vertex closes (the caller's line then).

    Why (issue 20): the placement turns the chain about the root so its tip lies on the EE axis, so
    near the root a small sideways move of the tip turns the whole chain. A flow step could carry the
    tip through the root (the Rigify wolf's front leg: the chain turned half a turn between two
    vertices, a target 5 mm from the root moved the elbow 529 mm); a flow into a curled pose a few mm
    off the root swung the tip's heading by 87° over its last 40 mm, most of it in the last 10 (the
    shark's body: 347 mm for a 7.7 mm target step)."""
    scale = float(lengths.sum())
    end = float(plane_distances(lengths, goal[None])[0])
    if end > CLOSE_END * scale:
        return None
    distances = plane_distances(lengths, np.array(part))
    # Not the part's first vertex: a flat fold it may start from is where the tip's line is ill-posed.
    on_root = end <= CURL_TIE * scale
    near = (distances <= (CLOSE_RADIAL if on_root else CLOSE_START) * scale) & (distances > end + CLOSE_LAST * scale)
    for start in np.flatnonzero(near)[:PATH_CHECKS]:
        if start > 0:
            closed = _closed_from(lengths, lower, upper, part[start], goal, on_root)
            if closed is not None:
                return list(part[:start]) + closed
    return None


def _closed_from(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, turns: np.ndarray, goal: np.ndarray,
                 on_root: bool) -> list[np.ndarray] | None:
    """Vertices from ``turns`` to ``goal`` (:func:`_close_onto_root`), ``turns`` first: tips at distances
    whose gap to the goal's shrinks by ``CLOSE_RATIO`` per vertex, the heading's gap in the same ratio
    (Gauss–Newton, the least turn change); then ``goal``, or (``on_root``) a pose with the tip on the
    root found the same way. None where a vertex misses its tip inside the box."""
    scale = float(lengths.sum())
    tip, end_tip = plane_points(lengths, turns)[-1], plane_points(lengths, goal)[-1]
    start_distance, end_distance = float(np.hypot(tip[0], tip[1])), float(np.hypot(end_tip[0], end_tip[1]))
    heading = float(np.arctan2(tip[1], tip[0]))
    # On the root the end's heading is the start's (the tip's line); off it, the shorter way round.
    turn = 0.0 if on_root else float(np.remainder(np.arctan2(end_tip[1], end_tip[0]) - heading + np.pi, 2.0 * np.pi) - np.pi)
    gap = start_distance - end_distance
    vertices = [turns]
    fraction = max(CLOSE_RATIO, 1.0 - FLOW_STEP * scale / gap)
    while True:
        last = fraction * gap <= CLOSE_LAST * scale
        if last and not on_root:
            return vertices + [goal]
        angle = heading + (1.0 - fraction) * turn
        wanted = np.zeros(2) if last else (end_distance + fraction * gap) * np.array([np.cos(angle), np.sin(angle)])
        for _ in range(CLOSE_NEWTON):
            turns = _bounded_newton_step(lengths, lower, upper, turns, wanted)
        miss = plane_points(lengths, turns)[-1] - wanted
        if np.hypot(miss[0], miss[1]) > (CURL_TIE * scale if last else 1e-3 * fraction * gap):
            return None
        vertices.append(turns)
        if last:
            return vertices
        # Steps of at most FLOW_STEP of the reach in distance, as the flow's.
        fraction = max(fraction * CLOSE_RATIO, fraction - FLOW_STEP * scale / gap)


def _bounded_newton_step(lengths: np.ndarray, lower: np.ndarray, upper: np.ndarray, turns: np.ndarray,
                         wanted: np.ndarray) -> np.ndarray:
    """One Gauss–Newton step (the least turn change) of turns ``(n − 1,)`` moving the plane chain's tip
    onto ``wanted`` ``(2,)``, kept in the box ``[lower, upper]``: turns the step would carry out of the box
    stay on their bound and the others take the step solved without them. Why: clipping the full step
    alone leaves the free turns short of their share, so a close whose curled end has a turn on its bound
    (a joint straight) converged linearly and ended ~1e-9 of the reach off the root, not at rounding."""
    points, jacobian = tip_jacobian(lengths, turns)
    miss = points[-1] - wanted
    moved = turns - np.linalg.lstsq(jacobian, miss, rcond=None)[0]
    pinned = (moved < lower) | (moved > upper)
    if pinned.any() and not pinned.all():
        moved = turns.copy()
        moved[~pinned] -= np.linalg.lstsq(jacobian[:, ~pinned], miss, rcond=None)[0]
    return np.clip(moved, lower, upper)
