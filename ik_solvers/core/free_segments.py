"""Bézier segments with free handle times (SPEC §9, issue 23; used by :mod:`.key_merge`): their
evaluation as Blender's, their derivatives, and the chain's Jacobian at their values.

A segment from key frame ``t0`` to ``t1`` (``Δ = t1 − t0``) has, per channel, a right handle at
``(t0 + a Δ, h0)`` on its first key and a left handle at ``(t1 − b Δ, h1)`` on its last: four
unknowns per channel (the reduction's segments fix ``a = b = 1/3`` and fit ``h0, h1`` only). Blender
evaluates such a segment as ``fcurve.cc`` does: ``BKE_fcurve_correct_bezpart`` shortens handles
whose times overlap (``a + b > 1``; the fit keeps ``a + b ≤ 1 −`` :data:`TIME_GAP` on the float32
handle frames, so it never applies), ``findzero`` solves the time cubic
``x(u) = 3(1−u)²u·a + 3(1−u)u²·(1−b) + u³ = s`` for ``u`` and ``berekeny`` evaluates the value cubic
of ``(y0, h0, h1, y1)`` at it. :func:`free_values` does the same in float64 (``x`` is increasing on
``[0, 1]`` for ``a, b ≥ 0, a + b ≤ 1``: one root, found by safeguarded Newton); Blender's float32
arithmetic there stays within :data:`.key_reduction.FLOAT32_MARGIN` (measured in
tests/blender/test_key_reduction.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .key_reduction import _Problem

TIME_GAP = 0.02
"""Least handle time (a fraction of the segment) and least gap between the two handles' times."""

DIFFERENCE = 1e-6
"""Step of the forward difference of a joint's rotation conversion (channel units)."""


def time_parameters(s: np.ndarray, a: np.ndarray, b: np.ndarray, u: np.ndarray | None = None,
                    iterations: int = 40) -> np.ndarray:
    """The roots ``u (R, C)`` in [0, 1] of ``x(u) = s`` (``s (R, 1)`` or ``(R, C)``; handle times
    ``a, b (R, C)``). From ``u``: ``iterations`` Newton steps (a warm start, near the root); without:
    Newton's method kept inside a bisection bracket from ``s`` until ``|x(u) − s| ≤ 1e-15`` (each
    root stops moving there, so a row's root does not depend on the others)."""
    # x(u) = ((c3 u + c2) u + c1) u: the Bernstein form's power coefficients
    c1, c2, c3 = 3.0 * a, 3.0 * (1.0 - b) - 6.0 * a, 3.0 * (a + b) - 2.0
    if u is not None:
        for _ in range(iterations):
            f = ((c3 * u + c2) * u + c1) * u - s
            u = np.clip(u - f / np.maximum((3.0 * c3 * u + 2.0 * c2) * u + c1, 1e-300), 0.0, 1.0)
        return u
    u = np.broadcast_to(s, a.shape).copy()
    low, high = np.zeros_like(a), np.ones_like(a)
    for _ in range(iterations):
        f = ((c3 * u + c2) * u + c1) * u - s
        going = np.abs(f) > 1e-15
        if not going.any():
            break
        high, low = np.where(f > 0.0, u, high), np.where(f > 0.0, low, u)
        step = u - f / np.maximum((3.0 * c3 * u + 2.0 * c2) * u + c1, 1e-300)
        inside = (step >= low) & (step <= high)
        u = np.where(going, np.where(inside, step, 0.5 * (low + high)), u)
    return u


def free_values(s: np.ndarray, y0: np.ndarray, y1: np.ndarray, params: np.ndarray, u: np.ndarray | None = None,
                iterations: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values ``(R, C)`` at segment times ``s (R,)`` (0..1) of rows whose segments have ends ``y0, y1
    (R, C)`` and ``params (R, 4, C)`` (handle times ``a, b``, handle values ``h0, h1``), their
    derivatives ``(R, C, 4)`` with respect to the four, and the time parameters ``u (R, C)``."""
    a, b, h0, h1 = params[:, 0], params[:, 1], params[:, 2], params[:, 3]
    u = time_parameters(s[:, None], a, b, u, iterations)
    r = 1.0 - u
    slope = np.maximum(3.0 * r * r * a + 6.0 * r * u * (1.0 - a - b) + 3.0 * u * u * b, 1e-300)  # d x / d u
    first, second = 3.0 * r * r * u, 3.0 * r * u * u
    values = r * r * r * y0 + first * h0 + second * h1 + u * u * u * y1
    along = 3.0 * r * r * (h0 - y0) + 6.0 * r * u * (h1 - h0) + 3.0 * u * u * (y1 - h1)  # d value / d u
    return values, np.stack([-along * first / slope, along * second / slope, first, second], axis=2), u


ANALYTIC_TURNS: dict[object, Callable[[np.ndarray], np.ndarray]] = {}
"""Rotation conversions (:data:`.key_rotations.RotationsOf`) whose local turns per channel are known
in closed form (registered by :mod:`.key_rotations`); the others by a forward difference."""


def points_and_jacobian(problem: _Problem, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The moving points (:meth:`.key_points.KeyedPoints.first_moving` on: the joints the channels move, the tip,
    the attached points) ``(R, P, 3)`` of channel values ``(R, C)`` at samples ``rows (R,)`` and their
    derivatives ``(R, P, 3, C)`` with respect to the channels (chain units): forward kinematics once; each
    joint's local turn per channel (:data:`ANALYTIC_TURNS`, or a forward difference of its conversion alone);
    a joint's turn about a world axis ``w`` moves a point ``p`` below it by ``w × (p − joint)``, a location
    moves every point alike."""
    count, groups = len(values), problem.joints(values)
    joints = groups[problem.located:]
    rotations: list[np.ndarray] = [np.empty(0)] * len(joints)
    turns: list[np.ndarray] = [np.empty(0)] * len(joints)
    for rotate, members in problem.groups:  # each mode's joints, exact and shifted, in one conversion
        width, analytic = joints[members[0]].shape[1], ANALYTIC_TURNS.get(rotate)
        shifted = [] if analytic else [joints[j][None] + DIFFERENCE * np.eye(width)[:, None, :] for j in members]
        stacked = rotate(np.concatenate([joints[j] for j in members] + [s.reshape(-1, width) for s in shifted]))
        for place, joint in enumerate(members):
            exact = rotations[joint] = stacked[place * count:(place + 1) * count]
            if analytic:
                turns[joint] = analytic(joints[joint])
                continue
            first = (len(members) + place * width) * count
            moved = stacked[first:first + width * count].reshape(width, count, 3, 3)
            local = (exact[None, :, :, :, None] * moved[:, :, :, None, :]).sum(axis=2)  # Rᵀ R(c + ε): (k, R, 3, 3)
            axes = 0.5 * np.stack([local[..., 2, 1] - local[..., 1, 2], local[..., 0, 2] - local[..., 2, 0],
                                   local[..., 1, 0] - local[..., 0, 1]], axis=-1) / DIFFERENCE  # (k, R, 3)
            turns[joint] = axes.transpose(1, 0, 2)
    geometry = problem.geometry
    frames, points = geometry.frames_and_points(rotations, groups[0] if problem.located else None, rows)
    first = geometry.first_moving
    jacobian = np.zeros((count, points.shape[1] - first, 3, values.shape[1]))
    if problem.located:
        start, stop = problem.slices[0]
        jacobian[..., start:stop] = geometry.location_axes
    for joint, (start, stop) in enumerate(problem.slices[problem.located:]):
        world = (frames[joint][:, None, :, :] * turns[joint][:, :, None, :]).sum(axis=3)  # (R, k, 3)
        below = geometry.moved_by[joint]
        arms = points[:, below] - points[:, joint:joint + 1]  # (R, moved, 3)
        moved = np.cross(world[:, None, :, :], arms[:, :, None, :])  # (R, moved, k, 3)
        jacobian[:, below - first, :, start:stop] = moved.transpose(0, 1, 3, 2)
    if geometry.weights is not None:  # as the problem's points count them (:meth:`.key_reduction._Problem.points`)
        weights = geometry.weights[rows][:, first:]
        return points[:, first:] * weights[:, :, None], jacobian * weights[:, :, None, None]
    return points[:, first:], jacobian


def stored_parameters(params: np.ndarray, t0: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Segment parameters ``(k, 4, C)`` (handle times, handle values) kept inside their segments from
    frames ``t0 (k,)`` over ``spans (k,)`` (handle times at least :data:`TIME_GAP`, :data:`TIME_GAP`
    apart: no correction applies) and rounded as Blender stores them: the handles' frames and values
    in float32."""
    times = np.clip(params[:, :2], TIME_GAP, 1.0 - 2.0 * TIME_GAP)
    times = times * np.minimum(1.0, (1.0 - TIME_GAP) / times.sum(axis=1))[:, None]
    frames = handle_frames(times, t0, spans)
    start, span = t0[:, None], spans[:, None]
    times = np.stack([(frames[:, 0] - start) / span, (start + span - frames[:, 1]) / span], axis=1)
    return np.concatenate([times, params[:, 2:].astype(np.float32).astype(float)], axis=1)


def handle_frames(times: np.ndarray, t0: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """The frames ``(k, 2, C)`` (float32) of handle times ``(k, 2, C)``: the first key's right handle, the last key's left."""
    start, span = t0[:, None], spans[:, None]
    return np.stack([start + times[:, 0] * span, start + span - times[:, 1] * span], axis=1).astype(np.float32).astype(float)


def curve_values(key_frames: np.ndarray, controls: np.ndarray, handles: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Values ``(N, C)`` at ``frames (N,)`` (from the first key to the last) of curves keyed at ``key_frames (K,)``,
    segment by segment ``controls (K − 1, 4, C)`` (key value, right handle, next key's left handle, next key's
    value) with handle frames ``handles (K − 1, 2, C)``, as Blender evaluates them (:func:`free_values`)."""
    segment = np.clip(np.searchsorted(key_frames, frames, side="right") - 1, 0, len(key_frames) - 2)
    start, span = key_frames[segment][:, None], np.diff(key_frames)[segment][:, None]
    ours, times = controls[segment], handles[segment]
    params = np.stack([(times[:, 0] - start) / span, (start + span - times[:, 1]) / span, ours[:, 1], ours[:, 2]],
                      axis=1)
    return free_values((frames - start[:, 0]) / span[:, 0], ours[:, 0], ours[:, 3], params)[0]
