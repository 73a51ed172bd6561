"""Why smooth keyed targets keep 17-21 % of the keys at 0.1 mm (issue 23, SPEC §9): per span of the
target's keys, the largest world error of ONE Bézier segment over it, fitted five ways.

For each rig (``bench_keys.RIGS``) on the smooth path (keyed every 12 frames, Catmull-Rom between),
the bake is reduced at E = 0.1 mm as the benchmark does, and the core's problem (the baked channels,
rotation modes and chain) is captured. Then every 12-frame span between two of the target's keys is
fitted as a single segment with exact keys at its ends:

- ``linear LS``: the reduction's plain fit (handle values in the world metric ``JᵀJ`` at the samples);
- ``linear minimax``: that fit with 12 rounds of Lawson's reweighting (the reduction runs up to 3);
- ``exact minimax``: the same two handle values per channel, fitted by Levenberg-Marquardt on the
  exact world offsets (forward kinematics at every step) with Lawson's reweighting;
- ``free times``: as ``exact minimax``, and each channel's two handle *times* free too (Blender keys
  with FREE handles of any length within the segment: 4 unknowns per channel instead of 2),
  evaluated as Blender does (the time parameter solved from the handles' cubic in time); its
  controls are then written to F-curves and the world error is measured on ``FCurve.evaluate``.
- ``batched Gauss-Newton``: the same unknowns as ``free times``, all spans of a rig fitted in one
  batch by Gauss-Newton with the chain's Jacobian taken at the fitted curves at every step (15
  steps; the time it takes is printed), also measured on ``FCurve.evaluate``.

With ``--merge``, the reduction's kept keys are then merged greedily with such segments (from each
key, the farthest later kept key whose single segment with free handle times holds the bound),
every merged segment measured on ``FCurve.evaluate`` too.

    .venv/bin/python scripts/bench_keys_spans.py [--rigs demo_leg rigify_arm] [--out FILE.md] [--spans N] [--merge]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _cli import Parser, import_bpy, run_main

BOUND = 1e-4
"""The bound of the reduction whose problem is captured (0.1 mm)."""


def captured_problem(rig_name: str) -> tuple[Any, np.ndarray]:
    """The core's key reduction problem of ``rig_name``'s smooth path and the keys its search keeps at
    :data:`BOUND` (before the merge with free handle times)."""
    import bench_keys
    from _measure import evaluate_chain
    from _rigs import key_path

    from ik_solvers.blender import key_reduction
    from ik_solvers.core.key_points import KeyedPoints
    from ik_solvers.core.key_reduction import _Problem
    from ik_solvers.core.key_reduction import reduce_keys as core_reduce

    bpy = import_bpy()
    rig, chain, bones, target = bench_keys.RIGS[rig_name]()
    frames = 10 * bench_keys.KEY_EVERY + 1
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames
    bpy.context.scene.frame_set(1)
    rest, _, _ = evaluate_chain(rig, bones, target, [1])
    reach = float(np.linalg.norm(np.diff(rest[0], axis=0), axis=1).sum())
    key_path(target, bench_keys.target_path(rest[0, 0], rest[0, -1], reach, 10, 0.0, 0))
    captured: dict[str, Any] = {}
    fit = key_reduction.reduction_steps

    def capture(*args: Any, **kwargs: Any) -> Any:
        frames_, values, rotations, chain_, key_error = args[:5]
        scale = kwargs.get("scale", args[5] if len(args) > 5 else 1.0)
        captured["problem"] = _Problem(frames_, values, rotations, KeyedPoints(chain_), scale)
        # the search's keys (handles at thirds), before the product's merge with free handle times
        captured["keys"] = core_reduce(frames_, values, rotations, chain_, key_error, scale=scale, merge=False).indices
        return fit(*args, **kwargs)

    key_reduction.reduction_steps = capture
    try:
        bench_keys.bake(rig, chain, frames, BOUND, repeats=1)
    finally:
        key_reduction.reduction_steps = fit
    bpy.ops.wm.read_homefile(use_empty=True)
    return captured["problem"], captured["keys"]


def bezier_values(s: np.ndarray, y0: np.ndarray, y1: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Values ``(P, M, C)`` at segment times ``s (M,)`` (0..1) of ``P`` parameter sets ``params
    (P, 4C)``: per channel the right handle's time and the left handle's (fractions of the segment
    from their keys), then the two handle values; the time parameter solved by bisection."""
    channels = y0.shape[0]
    early, late = params[:, None, :channels], 1.0 - params[:, None, channels:2 * channels]
    low, high = np.zeros(early.shape[:1] + s.shape + (channels,)), np.ones(early.shape[:1] + s.shape + (channels,))
    for _ in range(48):
        u = 0.5 * (low + high)
        r = 1.0 - u
        beyond = 3 * r * r * u * early + 3 * r * u * u * late + u ** 3 > s[None, :, None]
        high, low = np.where(beyond, u, high), np.where(beyond, low, u)
    u = 0.5 * (low + high)
    r = 1.0 - u
    return (r ** 3 * y0 + 3 * r * r * u * params[:, None, 2 * channels:3 * channels]
            + 3 * r * u * u * params[:, None, 3 * channels:] + u ** 3 * y1)


def exact_minimax(problem: Any, a: int, b: int, start: np.ndarray, free_times: bool,
                  steps: int = 25, rounds: int = 6) -> tuple[float, np.ndarray]:
    """The smallest largest world error found for the segment ``a → b`` (Levenberg-Marquardt on the
    exact world offsets, Lawson's reweighting between), from handle values ``start (2, C)``."""
    channels = problem.values.shape[1]
    rows = np.arange(a + 1, b)
    s = (problem.frames[rows] - problem.frames[a]) / (problem.frames[b] - problem.frames[a])
    y0, y1, reference = problem.values[a], problem.values[b], problem.reference[rows]
    params = np.concatenate([np.full(2 * channels, 1.0 / 3.0), start.ravel()])
    free = np.arange(params.size) if free_times else np.arange(2 * channels, params.size)

    def offsets(sets: np.ndarray) -> np.ndarray:  # (P, M, points, 3)
        values = bezier_values(s, y0, y1, sets).reshape(-1, channels)
        return problem.scale * (problem.points(values, np.tile(rows, len(sets))).reshape(len(sets), len(rows), -1, 3)
                                - reference)

    weights, best, best_params = np.ones(len(rows)), np.inf, params
    for _ in range(rounds):
        damping = 1e-3
        for _ in range(steps):
            trial = np.repeat(params[None], len(free) + 1, axis=0)
            trial[np.arange(1, len(free) + 1), free] += 1e-7
            r = offsets(trial) * np.sqrt(weights)[None, :, None, None]
            residual = r[0].ravel()
            jacobian = ((r[1:].reshape(len(free), -1) - residual) / 1e-7).T
            normal = jacobian.T @ jacobian
            step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12), -jacobian.T @ residual)
            candidate = params.copy()
            candidate[free] += step
            times = np.clip(candidate[:2 * channels], 0.01, 0.99)
            total = np.maximum(1.0, times[:channels] + times[channels:])  # no overlap: x(u) increasing
            candidate[:2 * channels] = times / np.concatenate([total, total])
            after = offsets(candidate[None])[0] * np.sqrt(weights)[:, None, None]
            if (after * after).sum() < (residual * residual).sum():
                params, damping = candidate, damping * 0.3
            else:
                damping *= 10.0
        errors = np.sqrt((offsets(params[None])[0] ** 2).sum(axis=-1).max(axis=-1))
        if errors.max() < best:
            best, best_params = float(errors.max()), params
        weights = weights * (errors / errors.max()) ** 1.3
        weights /= weights.mean()
    return best, best_params


def blender_error(problem: Any, a: int, b: int, params: np.ndarray) -> float:
    """The largest world error of the segment ``a → b`` with ``params`` as Blender evaluates it:
    two keys with FREE handles per channel on an empty's custom property, ``FCurve.evaluate``."""
    from ik_solvers.blender import compat

    bpy = import_bpy()
    channels = problem.values.shape[1]
    holder = bpy.data.objects.new("spans", None)
    bpy.context.scene.collection.objects.link(holder)
    holder["v"] = [0.0] * channels
    t0, t1 = problem.frames[a], problem.frames[b]
    for frame in (t0, t1):
        holder.keyframe_insert('["v"]', frame=frame)
    bag = compat.channelbag_for_assigned_slot(holder.animation_data)
    assert bag is not None
    curves = sorted(bag.fcurves, key=lambda fcurve: fcurve.array_index)
    span = t1 - t0
    for c, fcurve in enumerate(curves):
        first, last = fcurve.keyframe_points
        for key in (first, last):
            key.interpolation, key.handle_left_type, key.handle_right_type = "BEZIER", "FREE", "FREE"
        first.co, last.co = (t0, problem.values[a, c]), (t1, problem.values[b, c])
        first.handle_right = (t0 + params[c] * span, params[2 * channels + c])
        last.handle_left = (t1 - params[channels + c] * span, params[3 * channels + c])
    rows = np.arange(a + 1, b)
    values = np.array([[fcurve.evaluate(problem.frames[row]) for fcurve in curves] for row in rows])
    bpy.data.objects.remove(holder)
    return float(problem.errors(rows, values).max())


def free_times_values(s: np.ndarray, y0: np.ndarray, y1: np.ndarray, params: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Values ``(R, C)`` at segment times ``s (R,)`` of rows whose segments have ends ``y0, y1 (R, C)``
    and ``params (R, 4, C)`` (right and left handle times, then values, as :func:`bezier_values`),
    and their derivatives ``(R, 4, C)`` with respect to the four (the time parameter by Newton's
    method; its derivative by the implicit function theorem)."""
    early, late, h0, h1 = params[:, 0], 1.0 - params[:, 1], params[:, 2], params[:, 3]
    u = np.repeat(s[:, None], y0.shape[1], axis=1)
    for _ in range(8):
        r = 1.0 - u
        slope = np.maximum(3 * r * r * early + 6 * r * u * (late - early) + 3 * u * u * (1.0 - late), 1e-9)
        u = np.clip(u - (3 * r * r * u * early + 3 * r * u * u * late + u ** 3 - s[:, None]) / slope, 0.0, 1.0)
    r = 1.0 - u
    slope = np.maximum(3 * r * r * early + 6 * r * u * (late - early) + 3 * u * u * (1.0 - late), 1e-9)
    basis = (r ** 3, 3 * r * r * u, 3 * r * u * u, u ** 3)
    values = basis[0] * y0 + basis[1] * h0 + basis[2] * h1 + basis[3] * y1
    along = 3 * r * r * (h0 - y0) + 6 * r * u * (h1 - h0) + 3 * u * u * (y1 - h1)  # d value / d u
    return values, np.stack([-along * basis[1] / slope, along * basis[2] / slope, basis[1], basis[2]], axis=1)


def batched_gauss_newton(problem: Any, starts: np.ndarray, ends: np.ndarray, plain: np.ndarray,
                         steps: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """Free handle times for all segments ``starts → ends (k,)`` at once: Gauss-Newton on the world
    offsets, the chain's Jacobian (forward differences) taken at the fitted curves at every step,
    Lawson's reweighting every fifth step, from the reduction's plain fit ``plain (k, 4, C)``. The
    smallest largest world error ``(k,)`` per segment and its parameters ``(k, 4C)`` (as
    :func:`bezier_values`)."""
    channels, lengths = problem.values.shape[1], ends - starts - 1
    segment = np.repeat(np.arange(len(starts)), lengths)
    first = np.cumsum(lengths) - lengths
    rows = np.concatenate([np.arange(a + 1, b) for a, b in zip(starts, ends)])
    s = (problem.frames[rows] - problem.frames[starts][segment]) / (problem.frames[ends] - problem.frames[starts])[segment]
    y0, y1 = problem.values[starts][segment], problem.values[ends][segment]
    params = np.concatenate([np.full((len(starts), 2, channels), 1.0 / 3.0), plain[:, 1:3]], axis=1)
    best, best_params, weights = np.full(len(starts), np.inf), params.copy(), np.ones(len(rows))
    for step in range(steps):
        values, derivatives = free_times_values(s, y0, y1, params[segment])
        shifted = np.concatenate([values] + [values + 1e-6 * np.eye(channels)[c] for c in range(channels)])
        points = problem.points(shifted, np.tile(rows, channels + 1)).reshape(channels + 1, len(rows), -1)
        offsets = problem.scale * (points[0] - problem.reference[rows].reshape(len(rows), -1))
        chain_jacobian = (problem.scale * (points[1:] - points[0]) / 1e-6).transpose(1, 2, 0)  # (R, 3P, C)
        errors = np.sqrt((offsets.reshape(len(rows), -1, 3) ** 2).sum(axis=-1).max(axis=-1))
        largest = np.maximum.reduceat(errors, first)
        better = largest < best
        best[better], best_params[better] = largest[better], params[better]
        if step % 5 == 4:
            weights = weights * (errors / largest[segment]) ** 1.3
            weights /= np.bincount(segment, weights)[segment] / lengths[segment]
        jacobian = (chain_jacobian[:, :, None, :] * derivatives[:, None]).reshape(len(rows), offsets.shape[1], -1)
        normal = np.add.reduceat(np.einsum("r,rkp,rkq->rpq", weights, jacobian, jacobian), first)
        gradient = np.add.reduceat(np.einsum("r,rkp,rk->rp", weights, jacobian, offsets), first)
        normal += 1e-6 * np.trace(normal, axis1=1, axis2=2)[:, None, None] / normal.shape[1] * np.eye(normal.shape[1])
        params = params - 0.7 * np.linalg.solve(normal, gradient[..., None])[..., 0].reshape(params.shape)
        times = np.clip(params[:, :2], 0.02, 0.98)
        params[:, :2] = times / np.maximum(1.0, times.sum(axis=1))[:, None]  # no overlap: time increasing
    return best, best_params.reshape(len(starts), -1)


def merged_keys(problem: Any, keys: np.ndarray, budget: float) -> tuple[list[int], float]:
    """The reduction's ``keys`` merged greedily with free handle times: from each kept key, the
    farthest later key whose single segment (fitted as in :func:`exact_minimax`) holds ``budget``;
    the merged keys and the largest world error of their segments as Blender evaluates them."""
    merged, i, largest = [int(keys[0])], 0, 0.0
    while i < len(keys) - 1:
        j, params = i + 1, None
        while j + 1 < len(keys):
            a, b = int(keys[i]), int(keys[j + 1])
            plain, _, _ = problem.segments(np.array([a]), np.array([b]), budget)
            error, fitted = exact_minimax(problem, a, b, plain[0, 1:3], True)
            if error > budget:
                break
            j, params = j + 1, fitted
        if params is not None:
            largest = max(largest, blender_error(problem, int(keys[i]), int(keys[j]), params))
        merged.append(int(keys[j]))
        i = j
    return merged, largest


def spans_table(rig_name: str, spans: int | None = None, merge: bool = False) -> str:
    """The markdown rows of ``rig_name``: per span (the first ``spans``; all by default) the five
    fits' largest error (mm); with ``merge``, the reduction's keys merged with free handle times."""
    from ik_solvers.core import key_reduction

    problem, keys = captured_problem(rig_name)
    every = 12
    starts = np.arange(0, len(problem.frames) - 1, every)[:spans]
    rounds, hopeless = key_reduction.MINIMAX_ROUNDS, key_reduction.HOPELESS
    try:
        key_reduction.MINIMAX_ROUNDS, key_reduction.HOPELESS = 1, (np.inf, np.inf)
        plain, linear_ls, _ = problem.segments(starts, starts + every, 1e-300, np.arange(len(starts)))
        key_reduction.MINIMAX_ROUNDS = 13
        _, linear_minimax, _ = problem.segments(starts, starts + every, 1e-300, np.arange(len(starts)))
    finally:
        key_reduction.MINIMAX_ROUNDS, key_reduction.HOPELESS = rounds, hopeless
    started = time.process_time()
    batched, batched_params = batched_gauss_newton(problem, starts, starts + every, plain)
    seconds = time.process_time() - started
    lines = [f"| {rig_name} | kept keys {len(keys)} ({len(keys) / len(problem.frames):.1%}), "
             f"frames after the target's key: {(keys % every).tolist()}; batched Gauss-Newton "
             f"{1e3 * seconds:.0f} ms for the {len(starts)} spans | | | | | | |"]
    for index, a in enumerate(starts):
        b = a + every
        exact, _ = exact_minimax(problem, a, b, plain[index, 1:3], False)
        free, params = exact_minimax(problem, a, b, plain[index, 1:3], True)
        lines.append(f"| {rig_name} | span {index} | {1e3 * linear_ls[index]:.3f} | {1e3 * linear_minimax[index]:.3f} | "
                     f"{1e3 * exact:.3f} | {1e3 * free:.3f} | {1e3 * blender_error(problem, a, b, params):.3f} | "
                     f"{1e3 * batched[index]:.3f} | {1e3 * blender_error(problem, a, b, batched_params[index]):.3f} |")
        print(lines[-1], flush=True)
    if merge:
        merged, largest = merged_keys(problem, keys, BOUND * (1.0 - key_reduction.FLOAT32_MARGIN))
        lines.append(f"| {rig_name} | the kept keys merged with free handle times: {len(keys)} → {len(merged)} "
                     f"({len(merged) / len(problem.frames):.1%}), keys {merged}, largest error as Blender "
                     f"evaluates it {1e3 * largest:.3f} mm | | | | | | |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return run_main("bench_keys_spans", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="bench_keys_spans.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rigs", nargs="+", default=["demo_leg", "rigify_arm"])
    parser.add_argument("--out", type=Path, help="write the markdown table here too")
    parser.add_argument("--spans", type=int, help="only the first SPANS spans of each rig (a smoke test)")
    parser.add_argument("--merge", action="store_true",
                        help="also merge the reduction's kept keys with free handle times")
    args = parser.parse_args(argv)
    import_bpy()
    header = ("| rig | span | linear LS (mm) | linear minimax (mm) | exact minimax (mm) | free times (mm) "
              "| free times, Blender's evaluation (mm) | free times, batched Gauss-Newton (mm) "
              "| its Blender's evaluation (mm) |\n|---|---|---|---|---|---|---|---|---|")
    table = header + "\n" + "\n".join(spans_table(rig, args.spans, args.merge) for rig in args.rigs) + "\n"
    if args.out:
        args.out.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
