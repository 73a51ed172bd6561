"""HI reach honesty (issue 20) measured on Rigify's metarigs and on a non-planar 10-bone chain.

Near the root: per chain, ``--frames`` targets nearer the start joint than the chain reaches with every
joint bent its rest way (and farther than the free chain's least distance, so the geometric bound is 0),
baked with HI through the add-on and read back from Blender's evaluated pose bones: the largest error,
the statuses and the frames the bake report lists as bending a joint against its preferred way. Out of
reach (core only): a random non-planar 10-bone chain, targets 1.0–1.5 of its reach: the largest gap
between HI's error and the geometric bound ``r − ΣB``. Prints a table, writes ``DIR/hi_reach.json``.

    .venv/bin/python scripts/hi_reach.py [--out DIR] [--frames 40]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main

if TYPE_CHECKING:
    from _rigify_rigs import RigifySetup

CHAINS = {
    # name: (metarig operator, chain bones root → tip)
    "horse hind leg": ("armature_horse_metarig_add", ("thigh.L", "lower_leg.L", "hind_foot.L")),
    "wolf hind leg": ("armature_wolf_metarig_add", ("thigh.L", "shin.L", "foot.L")),
    "cat hind leg": ("armature_cat_metarig_add", ("thigh.L", "shin.L", "foot.L")),
    "shark tail": ("armature_shark_metarig_add", ("spine.002", "spine.001", "spine")),
    "shark tail fin": ("armature_shark_metarig_add", ("back_fin.T.Bk", "back_fin.T.001.Bk", "back_fin.T.002.Bk")),
}


def near_root_paths(joints: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Targets ``(frames, 3)`` nearer the start joint than the chain reaches with every joint bent its
    rest way, farther than the free chain's least distance: along the rest EE axis, swinging ±0.3 rad
    toward the first inner joint."""
    from _rigify_paths import min_preferred_ratio

    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    reach = lengths.sum()
    least = max(0.0, 2.0 * lengths.max() - reach)
    curled = min_preferred_ratio(joints) * reach
    r = np.linspace(least + 0.05 * reach, curled - 0.03 * reach, frames)
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    offset = joints[1] - joints[0]
    side = offset - (offset @ axis) * axis
    side /= np.linalg.norm(side)
    swing = np.linspace(-0.3, 0.3, frames)
    directions = np.cos(swing)[:, None] * axis + np.sin(swing)[:, None] * side
    return {"near_root": joints[0] + r[:, None] * directions}


def near_root_setup(name: str, frames: int) -> RigifySetup:
    """A fresh scene with the chain's metarig and its target keyed along :func:`near_root_paths`."""
    import _rigify_rigs as rr
    import bpy

    operator, bones = CHAINS[name]
    rr.fresh_scene()
    assert getattr(bpy.ops.object, operator)() == {"FINISHED"}, operator
    rig = bpy.context.object
    view_layer = bpy.context.view_layer
    assert view_layer is not None  # a scene's view layer, always there headless
    view_layer.update()
    joints, _ = rr.rest_geometry(rig, bones)
    return rr.make_setup(name.replace(" ", "_"), rig, bones, near_root_paths(joints, frames), {"near_root": True})


def measure_near_root(name: str, frames: int) -> dict:
    """HI baked on :func:`near_root_setup`'s chain, read back from Blender's evaluation."""
    import _rigify_runs as runs

    setup = near_root_setup(name, frames)
    chain = runs.add_chain(setup, "HI")
    runs.bake_ours(setup, chain.name)
    measured = runs.measure(setup, np.arange(1, setup.frame_end + 1))
    report = runs.bake_report(chain) or {}
    return {"chain": name, "frames": int(setup.frame_end), "max_error_mm": float(measured.errors.max() * 1000.0),
            "max_bound_mm": float(measured.bounds.max() * 1000.0), "status_counts": report.get("status_counts", {}),
            "against_bend_frames": report.get("against_bend_frame_count")}


def out_of_reach_gap(seed: int = 5) -> dict:
    """Core only: HI's error less the geometric bound on a random non-planar 10-bone chain out of reach."""
    from ik_solvers.core import Chain, JointKind, preferred_pose, solve_hi

    rng = np.random.default_rng(seed)
    chain = Chain.straight(rng.uniform(0.05, 0.15, 10), JointKind.BALL)
    pref = preferred_pose(chain, rng.uniform(-0.4, 0.4, chain.n_dof))
    directions = rng.normal(size=(500, 3))
    r = rng.uniform(1.0, 1.5, 500) * chain.reach
    result = solve_hi(chain, directions / np.linalg.norm(directions, axis=1, keepdims=True) * r[:, None], pref).result
    gap = result.error - (r - chain.segment_lengths.sum())
    return {"chain": "non-planar 10 bones, out of reach", "in_plane_reach_mm": pref.in_plane_reach * 1000.0,
            "reach_mm": float(chain.reach * 1000.0), "max_gap_mm": float(np.abs(gap).max() * 1000.0),
            "statuses": sorted({s.value for s in result.status})}


def main(argv: list[str] | None = None) -> int:
    return run_main("hi_reach.py", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="hi_reach.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/hi_reach"), help="folder for hi_reach.json")
    parser.add_argument("--frames", type=int, default=40, help="near-root targets per chain (default 40)")
    args = parser.parse_args(argv)
    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    import_bpy()
    rows = [measure_near_root(name, args.frames) for name in CHAINS]
    gap = out_of_reach_gap()
    print(f"{'chain':<16} {'frames':>6} {'max error mm':>13} {'bound mm':>9} {'against bend':>12}  statuses")
    for row in rows:
        counts = ", ".join(f"{n} {s.lower()}" for s, n in row["status_counts"].items() if n)
        print(f"{row['chain']:<16} {row['frames']:>6} {row['max_error_mm']:>13.4g} {row['max_bound_mm']:>9.3g} "
              f"{row['against_bend_frames']!s:>12}  {counts}")
    print(f"{gap['chain']}: in-plane reach {gap['in_plane_reach_mm']:.1f} mm of {gap['reach_mm']:.1f} mm; "
          f"largest |error − (r − ΣB)| {gap['max_gap_mm']:.3g} mm; statuses {', '.join(gap['statuses'])}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hi_reach.json").write_text(json.dumps({"near_root": rows, "out_of_reach": gap}, indent=2) + "\n")
    print(f"wrote {args.out / 'hi_reach.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
