"""Key reduction benchmark (issue 23, SPEC §9): our world-bounded reduced keys against Blender's
Graph Editor › Decimate (mode Error) at the same world error, side by side in one run.

Rigs: the demo's arm and leg (``demo.build_scene``) and the Rigify human metarig's arm and leg
(``_rigify_rigs``), each baked with HI over two target paths: ``smooth`` (an animator's target keyed
every 12 frames, Catmull-Rom between) and ``recorded`` (the same plus jitter of about 1 mm per
frame², like recorded motion). Per bound E: our bake with Reduce Keys at E, and the full bake
decimated with its margin bisected to the largest one whose world error stays within E. The world
error is Blender's evaluation (``frame_set`` and the pose bones' matrices): the farthest joint or
tip from the full bake, per frame.

Writes ``DIR/bench_keys.csv``, ``DIR/bench_keys.json``, ``DIR/bench_keys.md`` (the table of
docs/key-reduction.md: keys kept, ours / Decimate's, and their ratio) and ``DIR/bench_keys.png``
(keys kept against E for both methods; one curve before / after and the error per frame against E).

    .venv/bin/python scripts/bench_keys.py --out DIR [--quick]
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _cli import Parser, import_bpy, run_main
from _measure import evaluate_chain

BOUNDS_MM = (0.1, 0.3, 1.0, 2.0, 5.0)
"""The world-space bounds E (mm at the rigs' metre scale)."""
KEY_EVERY = 12
"""Frames between the smooth path's keys (the target itself has 1/12 = 8.3 % of the frames keyed)."""
JITTER = 0.4e-3
"""Per-axis noise (m) of the recorded path: its second difference is √6 · 0.4 ≈ 1 mm per frame²."""
BISECTIONS = 14
"""Steps of the bisection of Decimate's margin (in log space between 1e-7 and 1)."""
TIMING_REPEATS = 3
"""Bakes timed per measurement, the fastest kept (the machine may be shared)."""


# --------------------------------------------------------------------------- paths
def catmull_rom(points: np.ndarray, every: int) -> np.ndarray:
    """Catmull-Rom through ``points (P, 3)``, ``every`` frames per span: ``((P - 1) · every + 1, 3)``."""
    padded = np.concatenate([2 * points[:1] - points[1:2], points, 2 * points[-1:] - points[-2:-1]])
    t = (np.arange(every) / every)[:, None]
    spans = [0.5 * (2 * p1 + (p2 - p0) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t ** 2
                    + (3 * p1 - p0 - 3 * p2 + p3) * t ** 3)
             for p0, p1, p2, p3 in (padded[k:k + 4] for k in range(len(points) - 1))]
    return np.concatenate([*spans, points[-1:]])


def target_path(root: np.ndarray, tip: np.ndarray, reach: float, spans: int, jitter: float, seed: int) -> np.ndarray:
    """Reachable random poses around the rest tip every :data:`KEY_EVERY` frames, Catmull-Rom
    between, plus ``jitter`` (m) of per-frame noise: ``(spans · KEY_EVERY + 1, 3)`` world positions."""
    rng = np.random.default_rng(seed)
    rest = (tip - root) / np.linalg.norm(tip - root)
    keys = 0.72 * rest + rng.uniform(-0.3, 0.3, size=(spans + 1, 3))
    lengths = np.linalg.norm(keys, axis=1, keepdims=True)
    keys = root + reach * keys / lengths * np.clip(lengths, 0.5, 0.88)
    path = catmull_rom(keys, KEY_EVERY)
    return path + rng.normal(scale=jitter, size=path.shape)


# --------------------------------------------------------------------------- rigs
def demo_limb(chain: str) -> Callable[[], tuple[Any, str, tuple[str, ...], Any]]:
    """The demo scene's ``chain`` (``Arm`` or ``Leg``): (armature, chain name, bones, target)."""
    def build() -> tuple[Any, str, tuple[str, ...], Any]:
        import demo

        rig, targets = demo.build_scene(2)
        bones = ("upper_arm", "forearm") if chain == "Arm" else ("thigh", "shin")
        return rig, chain, bones, targets[chain]
    return build


def rigify_limb(builder: str) -> Callable[[], tuple[Any, str, tuple[str, ...], Any]]:
    """A Rigify human metarig limb (``_rigify_rigs.human_arm`` / ``human_leg``) with an HI chain."""
    def build() -> tuple[Any, str, tuple[str, ...], Any]:
        import _rigify_rigs

        bpy = import_bpy()
        _rigify_rigs.fresh_scene()
        setup = getattr(_rigify_rigs, builder)(2)
        chain = setup.rig.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length = "Limb", setup.bones[-1], len(setup.bones)
        chain.target, chain.method = setup.target, "HI"
        with operator_context(setup.rig):
            assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
        return setup.rig, "Limb", setup.bones, setup.target
    return build


RIGS = {"demo_arm": demo_limb("Arm"), "demo_leg": demo_limb("Leg"),
        "rigify_arm": rigify_limb("human_arm"), "rigify_leg": rigify_limb("human_leg")}


def operator_context(obj: Any) -> Any:
    bpy = import_bpy()
    bpy.context.view_layer.objects.active = obj
    return bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj])


# --------------------------------------------------------------------------- keys
def rotation_curves(rig: Any, bones: tuple[str, ...]) -> list[Any]:
    """The baked rotation F-curves of ``bones``."""
    from ik_solvers.blender import compat
    from ik_solvers.blender.keyframes import rotation_data_path

    channelbag = compat.channelbag_for_assigned_slot(rig.animation_data)
    assert channelbag is not None, "the bake keyed the rig"
    paths = {rotation_data_path(rig.pose.bones[bone]) for bone in bones}
    return [fcurve for fcurve in channelbag.fcurves if fcurve.data_path in paths]


def bake(rig: Any, chain: str, frames: int, key_error: float = 0.0, repeats: int = TIMING_REPEATS
         ) -> tuple[float, float, float]:
    """Bake ``chain`` over 1..``frames`` with the add-on's operator (keys reduced within
    ``key_error`` unless 0), ``repeats`` times: the fastest bake's seconds, and of
    those the seconds the reduction itself took (the core's ``reduction_steps``; 0 without it) and of
    those the merge with free handle times (the core's ``merge_steps``)."""
    from ik_solvers.blender import key_reduction
    from ik_solvers.core import key_reduction as core

    bpy = import_bpy()
    fit, merge = key_reduction.reduction_steps, core.merge_steps
    timings: list[list[float]] = []

    def timed(steps_of: Any, column: int) -> Any:
        """``steps_of`` (a computation in steps) with the time of every step added to ``column``."""
        def run(*args: Any, **kwargs: Any) -> Any:
            steps = steps_of(*args, **kwargs)
            while True:
                started = time.perf_counter()
                try:
                    next(steps)
                except StopIteration as done:
                    return done.value
                finally:
                    timings[-1][column] += time.perf_counter() - started
                yield
        return run

    key_reduction.reduction_steps, core.merge_steps = timed(fit, 1), timed(merge, 2)
    try:
        for _ in range(repeats):
            timings.append([0.0, 0.0, 0.0])
            started = time.perf_counter()
            with operator_context(rig):
                result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=frames, chain=chain,
                                                 reduce_keys=key_error > 0.0, key_error=key_error)
            timings[-1][0] = time.perf_counter() - started
            assert result == {"FINISHED"}, result
    finally:
        key_reduction.reduction_steps, core.merge_steps = fit, merge
    seconds, reducing, merging = min(timings)
    return seconds, reducing, merging


def decimate(curves: list[Any], margin: float) -> None:
    """Blender's Graph Editor › Decimate (mode Error) of ``curves``' keys (every other key deselected),
    headless: the home file's Dope Sheet turned into a Graph Editor showing every curve."""
    bpy = import_bpy()
    window = bpy.context.window_manager.windows[0]
    area = next(a for a in window.screen.areas if a.type in ("DOPESHEET_EDITOR", "GRAPH_EDITOR"))
    area.type = "GRAPH_EDITOR"
    space = area.spaces.active
    space.mode = "FCURVES"
    space.dopesheet.show_only_selected = False
    space.dopesheet.show_hidden = True
    for action in bpy.data.actions:  # only the chain's keys are decimated
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    for fcurve in bag.fcurves:
                        select_keys(fcurve, False)
    for fcurve in curves:
        select_keys(fcurve, True)
    region = next(r for r in area.regions if r.type == "WINDOW")
    with bpy.context.temp_override(window=window, area=area, region=region):
        assert bpy.ops.graph.decimate(mode="ERROR", remove_error_margin=margin) == {"FINISHED"}


def decimated_within(bound: float, curves: Callable[[], list[Any]], full: list[dict[str, np.ndarray]],
                     world_errors: Callable[[], np.ndarray], bisections: int,
                     frames: int) -> tuple[float, int, np.ndarray]:
    """Decimate's largest margin whose world error holds ``bound`` (bisected in log space between 1e-7 and
    1, ``bisections`` steps, each from the full bake's keys ``full`` of ``curves()``), the keys it keeps and
    the world error per frame (``world_errors()``: Blender's evaluation); no margin holding: 0, every key."""
    from ik_solvers.blender.keyframes import write_keyframes

    low, high, best = np.log(1e-7), np.log(1.0), None
    for _ in range(bisections):
        margin = float(np.exp(0.5 * (low + high)))
        for fcurve, keys in zip(curves(), full):
            fcurve.keyframe_points.clear()
            fcurve.keyframe_points.add(len(keys["co"]))
            write_keyframes(fcurve, keys)
        decimate(curves(), margin)
        errors = world_errors()
        if errors.max() <= bound:
            low, best = np.log(margin), (margin, sum(len(f.keyframe_points) for f in curves()), errors)
        else:
            high = np.log(margin)
    return best if best is not None else (0.0, sum(len(keys["co"]) for keys in full), np.zeros(frames))


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as a CSV file, their keys the columns."""
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def select_keys(fcurve: Any, selected: bool) -> None:
    fcurve.select = selected
    count = len(fcurve.keyframe_points)
    for name in ("select_control_point", "select_left_handle", "select_right_handle"):
        fcurve.keyframe_points.foreach_set(name, np.full(count, selected))


def world_errors(rig: Any, bones: tuple[str, ...], target: Any, frames: int, reference: np.ndarray) -> np.ndarray:
    """Per frame ``(frames,)``: the farthest joint or tip of Blender's evaluation from ``reference``."""
    joints, _, _ = evaluate_chain(rig, bones, target, range(1, frames + 1))
    return np.linalg.norm(joints - reference, axis=-1).max(axis=1)


# --------------------------------------------------------------------------- one case
def run_case(rig_name: str, path_name: str, spans: int, bounds: tuple[float, ...], bisections: int,
             seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every bound of one rig and path: the table rows and the per-frame data for the figure."""
    from _rigs import key_path

    from ik_solvers.blender.keyframes import read_keyframes

    bpy = import_bpy()
    rig, chain, bones, target = RIGS[rig_name]()
    frames = spans * KEY_EVERY + 1
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames
    bpy.context.scene.frame_set(1)
    rest, _, _ = evaluate_chain(rig, bones, target, [1])
    reach = float(np.linalg.norm(np.diff(rest[0], axis=0), axis=1).sum())
    jitter = JITTER if path_name == "recorded" else 0.0
    key_path(target, target_path(rest[0, 0], rest[0, -1], reach, spans, jitter, seed))
    bake(rig, chain, frames, repeats=1)
    reference, _, _ = evaluate_chain(rig, bones, target, range(1, frames + 1))
    curves = rotation_curves(rig, bones)
    full = [read_keyframes(fcurve) for fcurve in curves]
    keys_before = sum(len(fcurve.keyframe_points) for fcurve in curves)
    shown = curves[-len(curves) // len(bones)]  # the tip bone's first channel
    figure: dict[str, Any] = {"full": full[curves.index(shown)]["co"][:, 1].tolist(), "curve": shown.data_path,
                              "reduced": {}, "errors": {}}
    rows = []
    for bound_mm in bounds:
        bound = bound_mm * 1e-3
        # Full and reduced bakes alternately (the reduced one last), the fastest of each: the
        # machine's load then weighs on both alike.
        pairs = [(bake(rig, chain, frames, repeats=1)[0], bake(rig, chain, frames, bound, repeats=1))
                 for _ in range(TIMING_REPEATS)]
        full_seconds = min(pair[0] for pair in pairs)
        ours_seconds, reduce_seconds, merge_seconds = min(pair[1] for pair in pairs)
        ours = world_errors(rig, bones, target, frames, reference)
        curves = rotation_curves(rig, bones)
        ours_keys = sum(len(fcurve.keyframe_points) for fcurve in curves)
        shown = curves[-len(curves) // len(bones)]
        figure["reduced"][bound_mm] = [shown.evaluate(f) for f in range(1, frames + 1)]
        figure["errors"][bound_mm] = ours.tolist()
        best = decimated_within(bound, functools.partial(rotation_curves, rig, bones), full,
                                functools.partial(world_errors, rig, bones, target, frames, reference), bisections, frames)
        rows.append({
            "rig": rig_name, "path": path_name, "E_mm": bound_mm, "frames": frames, "keys_full": keys_before,
            "ours_keys": ours_keys, "ours_fraction": ours_keys / keys_before,
            "ours_max_mm": float(ours.max() * 1e3), "ours_p99_mm": float(np.percentile(ours, 99) * 1e3),
            "decimate_keys": best[1], "decimate_fraction": best[1] / keys_before, "decimate_margin": best[0],
            "decimate_max_mm": float(best[2].max() * 1e3), "ratio": ours_keys / best[1],
            "full_bake_seconds": full_seconds, "reduced_bake_seconds": ours_seconds, "reduce_seconds": reduce_seconds,
            "reduced_bake_ratio": ours_seconds / full_seconds, "reduce_ratio": reduce_seconds / full_seconds,
            "merge_seconds": merge_seconds, "merge_share": merge_seconds / reduce_seconds,
        })
        print(f"{rig_name:10s} {path_name:8s} E {bound_mm:4.1f} mm: ours {ours_keys:5d}/{keys_before} "
              f"({ours_keys / keys_before:6.1%}, max {ours.max() * 1e3:.3f} mm), decimate {best[1]:5d} "
              f"({best[1] / keys_before:6.1%}), ratio {ours_keys / best[1]:.2f}; bake {full_seconds * 1e3:.0f} ms, "
              f"reduced {ours_seconds * 1e3:.0f} ms ({ours_seconds / full_seconds:.1f}x; reducing "
              f"{reduce_seconds * 1e3:.0f} ms, of it merging {merge_seconds * 1e3:.0f} ms)", flush=True)
    bpy.ops.wm.read_homefile(use_empty=True)
    return rows, figure


# --------------------------------------------------------------------------- outputs
def plot(path: Path, rows: list[dict[str, Any]], figure: dict[str, Any], title: str) -> None:
    """Keys kept against E (both methods, every case); the figure case's curve before / after and
    its error per frame against E."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    cases = sorted({(r["rig"], r["path"]) for r in rows})
    for index, case in enumerate(cases):
        mine = [r for r in rows if (r["rig"], r["path"]) == case]
        color = f"C{index}"
        e = [r["E_mm"] for r in mine]
        axes[0].plot(e, [100 * r["ours_fraction"] for r in mine], "-o", color=color, label=f"{case[0]} {case[1]}")
        axes[0].plot(e, [100 * r["decimate_fraction"] for r in mine], "--x", color=color)
    axes[0].set(xscale="log", xlabel="E (mm)", ylabel="keys kept (%)",
                title="keys kept: ours (solid) vs Decimate (dashed)")
    axes[0].legend(fontsize=7)
    axes[1].plot(np.arange(1, len(figure["full"]) + 1), figure["full"], color="0.6", lw=3, label="full bake")
    for bound, values in figure["reduced"].items():
        axes[1].plot(np.arange(1, len(values) + 1), values, lw=1, label=f"reduced, E {bound} mm")
    axes[1].set(xlabel="frame", title=f"{title}: {figure['curve']}")
    axes[1].legend(fontsize=7)
    for bound, errors in figure["errors"].items():
        line, = axes[2].plot(np.arange(1, len(errors) + 1), 1e3 * np.asarray(errors), lw=1, label=f"E {bound} mm")
        axes[2].axhline(float(bound), color=line.get_color(), ls=":", lw=0.8)
    axes[2].set(yscale="log", xlabel="frame", ylabel="world error (mm)", title="error per frame (dotted: E)")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Per rig and path (rows) and bound (columns): our keys kept, Decimate's, and their ratio."""
    bounds = sorted({r["E_mm"] for r in rows})
    lines = ["| rig | path | " + " | ".join(f"E = {b:g} mm" for b in bounds) + " |",
             "|---|---|" + "---|" * len(bounds)]
    for case in dict.fromkeys((r["rig"], r["path"]) for r in rows):
        cells = {r["E_mm"]: f"{r['ours_fraction']:.1%} / {r['decimate_fraction']:.1%} ({r['ratio']:.2f}×)"
                 for r in rows if (r["rig"], r["path"]) == case}
        lines.append(f"| {case[0]} | {case[1]} | " + " | ".join(cells.get(b, "") for b in bounds) + " |")
    return "\n".join(lines) + "\n"


def timing_table(rows: list[dict[str, Any]]) -> str:
    """Per rig and path (rows): the full bake's time (timed next to the first bound's), and per bound
    the reduced bake's time as a ratio of the full bake timed next to it, with the reduction's own
    share (both ratios of that full bake) and the merge's share of the reduction."""
    bounds = sorted({r["E_mm"] for r in rows})
    lines = ["| rig | path | full bake | " + " | ".join(f"E = {b:g} mm" for b in bounds) + " |",
             "|---|---|---|" + "---|" * len(bounds)]
    for case in dict.fromkeys((r["rig"], r["path"]) for r in rows):
        mine = [r for r in rows if (r["rig"], r["path"]) == case]
        cells = {r["E_mm"]: f"{r['reduced_bake_ratio']:.1f}× ({r['reduce_ratio']:.1f}×, {r['merge_share']:.0%})"
                 for r in mine}
        lines.append(f"| {case[0]} | {case[1]} | {mine[0]['full_bake_seconds'] * 1e3:.0f} ms | "
                     + " | ".join(cells.get(b, "") for b in bounds) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return run_main("bench_keys", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="bench_keys.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSV, JSON and PNG")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny case (the demo arm, both paths, 3 spans, E 0.3 and 1 mm): a smoke test")
    parser.add_argument("--spans", type=int, default=10, help="key spans of the target path (12 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import_bpy()
    rigs, spans, bisections = tuple(RIGS), args.spans, BISECTIONS
    bounds: tuple[float, ...] = BOUNDS_MM
    if args.quick:
        rigs, spans, bounds, bisections = ("demo_arm",), 3, (0.3, 1.0), 5
    rows, figures = [], {}
    for rig_name in rigs:
        for path_name in ("smooth", "recorded"):
            case_rows, figures[f"{rig_name}/{path_name}"] = run_case(rig_name, path_name, spans, bounds, bisections,
                                                                     args.seed)
            rows.extend(case_rows)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "bench_keys.csv", rows)
    shown = "rigify_arm/smooth" if "rigify_arm/smooth" in figures else next(iter(figures))
    (args.out / "bench_keys.json").write_text(json.dumps({"rows": rows, "figure_case": shown,
                                                          "figure": figures[shown]}, indent=1))
    plot(args.out / "bench_keys.png", rows, figures[shown], shown)
    table = markdown_table(rows) + "\n" + timing_table(rows)
    (args.out / "bench_keys.md").write_text(table)
    print(table + f"wrote {args.out / 'bench_keys.csv'}, .json, .md, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
