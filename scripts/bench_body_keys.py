"""Key reduction of a body bake (issues 22 and 23, SPEC §8, §9): Rigify's human metarig with five goals
baked as one body, its keys reduced within a world bound E, against
Blender's Graph Editor › Decimate (mode Error) of the full bake at the same world error, side by side.

Goals: ``compare_body``'s crouch (feet planted, head and hands down and forward; every goal reached), as
``bench_keys.py``'s paths: ``smooth`` (keyed every 12 frames, Catmull-Rom between) and
``recorded`` (the same plus ~1 mm per frame² of jitter). Per bound E: our
body bake with Reduce Keys at E, and the full bake decimated with its margin bisected to the largest one
whose world error stays within E. The world error is Blender's evaluation (``frame_set``, pose bones):
the farthest joint or tip of any chain from the full bake, per frame. Keys count every curve the bake
wrote (every chain bone's rotation, the hips' location and rotation). Times: the full and the reduced
bake alternately, the fastest of each, and the reduction's own share.

Writes ``DIR/bench_body_keys.csv``, ``.json``, ``.md`` (docs/key-reduction.md's body table) and ``.png``.

    .venv/bin/python scripts/bench_body_keys.py --out DIR [--spans 10] [--quick]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _cli import Parser, import_bpy, run_main
from bench_keys import BISECTIONS, JITTER, KEY_EVERY, TIMING_REPEATS, catmull_rom, decimated_within, write_rows

BOUNDS_MM = (0.1, 0.3, 1.0, 3.0)
"""The world-space bounds E (mm at the metarig's metre scale)."""
MOTION = "crouch"
"""``compare_body``'s path the goals follow: a deep crouch, feet planted, head and hands going down and forward."""


class Body:
    """The metarig with the five chains of ``compare_body`` solved together from the hips, goals keyed."""

    def __init__(self, path: str, spans: int, seed: int) -> None:
        import compare_body
        from _rigify_rigs import add_empty, fresh_scene, metarig, rest_geometry
        from _rigs import key_path

        bpy = import_bpy()
        fresh_scene()
        self.rig = metarig("armature_human_metarig_add")
        self.frames = spans * KEY_EVERY + 1
        self.chains = {goal: compare_body.chain_bones(self.rig, tip, count)
                       for goal, (tip, count, _) in compare_body.GOALS.items()}
        rest = {goal: rest_geometry(self.rig, bones)[0] for goal, bones in self.chains.items()}
        arm = rest["wrist.L"]
        motions = compare_body.goal_paths({goal: joints[-1] for goal, joints in rest.items()}, arm[0],
                                          float(np.linalg.norm(np.diff(arm, axis=0), axis=1).sum()), self.frames)
        rng = np.random.default_rng(seed)
        self.targets = {}
        for goal in self.chains:
            # keyed every 12 frames
            positions = motions[MOTION][goal]
            positions = catmull_rom(positions[::KEY_EVERY], KEY_EVERY)
            if path == "recorded":
                positions = positions + rng.normal(scale=JITTER, size=positions.shape)
            self.targets[goal] = add_empty(f"goal_{goal}", positions[0])
            key_path(self.targets[goal], positions)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, self.frames
        scene.frame_set(1)
        compare_body.add_ours(self)  # type: ignore[arg-type]  # the setup's rig and targets are all it reads

    def bake(self, key_error: float = 0.0) -> tuple[float, float]:
        """Bake the body over every frame (keys reduced within ``key_error`` unless 0): seconds, and of them
        the seconds the reduction took (the core's ``body_reduction_steps``)."""
        from ik_solvers.blender import body_keys

        bpy = import_bpy()
        reduce, spent = body_keys.body_reduction_steps, [0.0]

        def timed(*args: Any, **kwargs: Any) -> Any:
            steps = reduce(*args, **kwargs)
            while True:
                started = time.perf_counter()
                try:
                    next(steps)
                except StopIteration as done:
                    return done.value
                finally:
                    spent[0] += time.perf_counter() - started
                yield

        body_keys.body_reduction_steps = timed
        try:
            with bpy.context.temp_override(active_object=self.rig, object=self.rig, selected_objects=[self.rig]):
                started = time.perf_counter()
                result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=self.frames,
                                                 all_chains=True, reduce_keys=key_error > 0.0, key_error=key_error)
                seconds = time.perf_counter() - started
        finally:
            body_keys.body_reduction_steps = reduce
        assert result == {"FINISHED"}, result
        return seconds, spent[0]

    def points(self) -> np.ndarray:
        """Blender's evaluation at every frame ``(F, P, 3)``: every chain bone's head and every chain's tip."""
        bpy = import_bpy()
        scene, out = bpy.context.scene, []
        for frame in range(1, self.frames + 1):
            scene.frame_set(frame)
            world = np.array(self.rig.matrix_world)
            local = []
            for bones in self.chains.values():
                pose = [self.rig.pose.bones[b] for b in bones]
                local += [b.head[:] for b in pose] + [pose[-1].tail[:]]
            out.append(np.array(local) @ world[:3, :3].T + world[:3, 3])
        scene.frame_set(1)
        return np.array(out)

    def curves(self) -> list[Any]:
        from ik_solvers.blender.keyframes import assigned_fcurves

        return list(assigned_fcurves(self.rig))


def run_case(path: str, spans: int, bounds: tuple[float, ...], bisections: int, seed: int) -> list[dict[str, Any]]:
    """Every bound on one path: the table rows."""
    from ik_solvers.blender.keyframes import read_keyframes

    body = Body(path, spans, seed)
    body.bake()
    reference = body.points()
    curves = body.curves()
    full = [read_keyframes(fcurve) for fcurve in curves]
    keys_before = sum(len(fcurve.keyframe_points) for fcurve in curves)

    def world_error() -> np.ndarray:
        return np.linalg.norm(body.points() - reference, axis=-1).max(axis=1)

    rows = []
    for bound_mm in bounds:
        bound = bound_mm * 1e-3
        pairs = [(body.bake()[0], body.bake(bound)) for _ in range(TIMING_REPEATS)]  # alternately, fastest kept
        full_seconds = min(pair[0] for pair in pairs)
        ours_seconds, reduce_seconds = min(pair[1] for pair in pairs)
        ours = world_error()
        ours_keys = sum(len(fcurve.keyframe_points) for fcurve in body.curves())
        reports = [json.loads(chain.last_bake_report) for chain in body.rig.ik_solvers.chains]
        body.bake()
        best = decimated_within(bound, body.curves, full, world_error, bisections, body.frames)
        rows.append({
            "path": path, "E_mm": bound_mm, "frames": body.frames, "curves": len(curves), "keys_full": keys_before,
            "ours_keys": ours_keys, "ours_fraction": ours_keys / keys_before,
            "ours_max_mm": float(ours.max() * 1e3), "ours_p99_mm": float(np.percentile(ours, 99) * 1e3),
            "reported_max_mm": max(r["reduced_max_error"] for r in reports) * 1e3,
            "mismatch_frames": sum(len(r["evaluated_mismatch_frames"]) for r in reports),
            "decimate_keys": best[1], "decimate_fraction": best[1] / keys_before, "decimate_margin": best[0],
            "decimate_max_mm": float(best[2].max() * 1e3), "ratio": ours_keys / best[1],
            "full_bake_seconds": full_seconds, "reduced_bake_seconds": ours_seconds, "reduce_seconds": reduce_seconds,
            "reduced_bake_ratio": ours_seconds / full_seconds, "reduce_ratio": reduce_seconds / full_seconds,
        })
        print(f"body {path:8s} E {bound_mm:4.1f} mm: ours {ours_keys:5d}/{keys_before} ({ours_keys / keys_before:6.1%}, "
              f"max {ours.max() * 1e3:.3f} mm), decimate {best[1]:5d} ({best[1] / keys_before:6.1%}), ratio "
              f"{ours_keys / best[1]:.2f}; bake {full_seconds * 1e3:.0f} ms, reduced {ours_seconds * 1e3:.0f} ms "
              f"(reducing {reduce_seconds * 1e3:.0f} ms)", flush=True)
    return rows


def plot(path: Path, rows: list[dict[str, Any]]) -> None:
    """Keys kept against E, both methods, per path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.4, 4.6))
    for index, case in enumerate(dict.fromkeys(r["path"] for r in rows)):
        mine = [r for r in rows if r["path"] == case]
        e = [r["E_mm"] for r in mine]
        axis.plot(e, [100 * r["ours_fraction"] for r in mine], "-o", color=f"C{index}", label=f"ours, {case}")
        axis.plot(e, [100 * r["decimate_fraction"] for r in mine], "--x", color=f"C{index}",
                  label=f"Decimate, {case}")
    axis.set(xscale="log", xlabel="E (mm)", ylabel="keys kept (%)",
             title="metarig body (5 goals + hips): keys kept at world error E")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Per path and bound: keys kept (ours / Decimate's, ratio), our largest world error, and the times."""
    lines = ["| path | E | keys kept: ours / Decimate (ratio) | largest world error: ours (report) | "
             "reduced bake ÷ full bake (reduction alone) |", "|---|---:|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['path']} | {r['E_mm']:g} mm | {r['ours_fraction']:.1%} / {r['decimate_fraction']:.1%} "
                     f"({r['ratio']:.2f}×) | {r['ours_max_mm']:.3g} mm ({r['reported_max_mm']:.3g} mm) | "
                     f"{r['reduced_bake_ratio']:.1f}× ({r['reduce_ratio']:.1f}×) |")
    first = rows[0]
    lines.append(f"\n{first['frames']} frames, {first['curves']} curves ({first['keys_full']} keys unreduced); "
                 f"full bake {first['full_bake_seconds'] * 1e3:.0f} ms.")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return run_main("bench_body_keys", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="bench_body_keys.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSV, JSON, MD and PNG")
    parser.add_argument("--spans", type=int, default=10, help="key spans of the goal paths (12 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="3 spans, E 1 mm, the smooth path: a smoke test")
    args = parser.parse_args(argv)
    import_bpy()
    spans, bisections = args.spans, BISECTIONS
    bounds: tuple[float, ...] = BOUNDS_MM
    paths: tuple[str, ...] = ("smooth", "recorded")
    if args.quick:
        spans, bounds, bisections, paths = 3, (1.0,), 5, ("smooth",)
    rows = []
    for path in paths:
        rows += run_case(path, spans, bounds, bisections, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "bench_body_keys.csv", rows)
    (args.out / "bench_body_keys.json").write_text(json.dumps({"rows": rows}, indent=1))
    plot(args.out / "bench_body_keys.png", rows)
    table = markdown_table(rows)
    (args.out / "bench_body_keys.md").write_text(table)
    print(table + f"wrote {args.out / 'bench_body_keys.csv'}, .json, .md, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
