"""Issue 20's evidence on every chain of Rigify's metarigs: the chain as ``chain_add`` sets it up against
Blender's IK constraint, measured on Blender's evaluation.

Chains (``CHAINS``): 26 chains of 2–5 bones on the human, horse, wolf, cat, bird and shark metarigs —
arms, legs with foot and toe, spines, necks, tails, wings, fins. Per chain and solver (ours: what
``ik_solvers.chain_add`` gives the chain; Blender: the IK constraint, Standard solver, no pole):

- **add**: ``chain_add_with_target`` + Solve (Blender: an IK constraint on an Empty at the tip): how
  far any joint moves (a new chain keeps its pose);
- **sweep**: the target along the rest root → tip axis across the rest distance in 0.5 mm steps
  (``_rigify_paths.sweep_path``, one path's frames): the largest joint step per frame;
- **paths** (the chain's smooth target paths, ``_rigify_paths``; 1 frame = a short step along a path):
  the max error on reachable frames (free-joint geometric bound 0), misses (> 1 mm) and how many of
  them our bake reports as not reached, the largest joint step between consecutive frames, reachable
  frames with a joint bent > 1° the wrong way, flips (unwarned / warned, as ``compare_rigify.py``),
  and out of reach the max excess over the geometric bound. ``near_root`` (zigzag chains only) draws
  the target in below the least distance the chain reaches with every joint bent its own way;
- **Rotation** (limbs of 3+ bones, ours and Blender's with Rotation on): the target keeps the tip
  bone's rest orientation (a foot flat, a hand level) along the same paths; the largest angle of the
  tip bone off it.

Writes ``OUT/rows.json``, ``OUT/rows.csv``, ``OUT/table.md``; ``--doc FILE`` pastes the table between
``<!-- metarigs:start -->`` and ``<!-- metarigs:end -->`` (docs/comparison.md).

    .venv/bin/python scripts/compare_metarigs.py --out DIR [--frames 40] [--chains NAME …] [--doc docs/comparison.md]
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import MISSED_MM, check_markers, markers, paste_between_markers, rest_lower_bounds
from _measure import format_number as _fmt
from _rigify_paths import (
    arm_paths,
    axis_paths,
    free_min_ratio,
    leg_paths,
    min_preferred_ratio,
    near_root_path,
    spine_paths,
    sweep_path,
    with_fold,
)
from _rigify_rigs import RigifySetup, add_empty, chain_bones, fresh_scene, make_setup, metarig, rest_geometry
from _rigify_runs import add_blender_ik, bake_ours, bake_report, count_warned_flips, measure, pole_warning_frames

if TYPE_CHECKING:
    import bpy

METARIG_MARKERS = markers("metarigs")

HUMAN, HORSE, WOLF = "armature_human_metarig_add", "armature_horse_metarig_add", "armature_wolf_metarig_add"
CAT, BIRD, SHARK = "armature_cat_metarig_add", "armature_bird_metarig_add", "armature_shark_metarig_add"
CHAINS: dict[str, tuple[str, str, int, str]] = {
    "human_arm": (HUMAN, "forearm.L", 2, "arm"),
    "human_arm_hand": (HUMAN, "hand.L", 3, "arm"),
    "human_leg": (HUMAN, "shin.L", 2, "leg"),
    "human_leg_foot": (HUMAN, "foot.L", 3, "leg"),
    "human_leg_toe": (HUMAN, "toe.L", 4, "leg"),
    "human_spine": (HUMAN, "spine.003", 4, "spine"),
    "human_neck": (HUMAN, "spine.006", 3, "axis"),
    "horse_front_leg": (HORSE, "f_hoof.L", 5, "quadruped"),
    "horse_hind_leg": (HORSE, "hind_foot.L", 3, "quadruped"),
    "horse_hind_leg_toe": (HORSE, "r_hoof.L", 5, "quadruped"),
    "horse_tail": (HORSE, "tail.005", 5, "axis"),
    "horse_neck": (HORSE, "head", 5, "axis"),
    "wolf_front_leg": (WOLF, "front_toe.L", 4, "quadruped"),
    "wolf_hind_leg": (WOLF, "foot.L", 3, "quadruped"),
    "wolf_hind_leg_toe": (WOLF, "toe.L", 4, "quadruped"),
    "wolf_tail": (WOLF, "spine", 4, "axis"),
    "wolf_neck": (WOLF, "spine.011", 3, "axis"),
    "cat_front_leg": (CAT, "f_toe.L", 4, "quadruped"),
    "cat_hind_leg": (CAT, "r_toe.L", 4, "quadruped"),
    "cat_tail": (CAT, "tail.004", 4, "axis"),
    "bird_wing": (BIRD, "Wing.002.L", 3, "axis"),
    "bird_leg": (BIRD, "toe.L", 4, "leg"),
    "bird_neck": (BIRD, "head", 3, "axis"),
    "shark_tail": (SHARK, "spine", 3, "axis"),
    "shark_body": (SHARK, "spine.005", 3, "axis"),
    "shark_fin": (SHARK, "back_fin.T.002.Bk", 3, "axis"),
}
"""Chain name → (metarig operator, tip bone, bones, kind of paths)."""
NEAR_ROOT_GAP = 0.05
"""``near_root`` is added where the least distance with every joint bent its own way exceeds the
free-joint one by this much (of the reach): the zigzag chains."""
SOLVERS = ("ours", "Blender IK", "ours + Rotation", "Blender IK + Rotation")
"""The rows per chain; the Rotation rows (the target keeping the tip bone's rest orientation: a foot
flat, a hand level) only on limbs of three or more bones (``ROTATION_KINDS``)."""
ROTATION_KINDS = ("arm", "leg", "quadruped")


def chain_paths(joints: np.ndarray, kind: str, frames: int) -> dict[str, np.ndarray]:
    """The chain's smooth paths by kind, the fold, ``near_root`` on zigzag chains, the sweep, and out
    of reach last."""
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    if kind == "arm":
        paths = arm_paths(joints[0], reach, frames)
    elif kind == "spine":
        paths = spine_paths(joints[0], reach, frames)
    elif kind == "axis":
        paths = axis_paths(joints, frames)
    else:
        low = max(0.35, 1.25 * min_preferred_ratio(joints))
        paths = leg_paths(joints[0], reach, frames, low, quadruped=(kind == "quadruped"))
    paths = with_fold(paths, joints, frames)
    out_of_reach = paths.pop("out_of_reach")
    if min_preferred_ratio(joints) - free_min_ratio(joints) > NEAR_ROOT_GAP:
        paths["near_root"] = near_root_path(joints, frames)
    paths["sweep"] = sweep_path(joints, frames)
    paths["out_of_reach"] = out_of_reach
    return paths


def setup_chain(name: str, frames: int) -> RigifySetup:
    """A fresh scene with the chain's metarig and its target keyed along :func:`chain_paths`."""
    operator, tip, count, kind = CHAINS[name]
    fresh_scene()
    rig = metarig(operator)
    bones = chain_bones(rig, tip, count)
    joints, _ = rest_geometry(rig, bones)
    return make_setup(name, rig, bones, chain_paths(joints, kind, frames))


def world_joints(rig: bpy.types.Object, bones: Sequence[str]) -> np.ndarray:
    """World joints ``(n + 1, 3)`` as Blender evaluates them now."""
    import bpy

    view_layer = bpy.context.view_layer
    assert view_layer is not None and rig.pose is not None  # a scene's armature
    view_layer.update()
    world = np.array(rig.matrix_world)
    pose = [rig.pose.bones[b] for b in bones]
    local = np.array([b.head[:] for b in pose] + [pose[-1].tail[:]])
    return local @ world[:3, :3].T + world[:3, 3]


def add_move(name: str, solver: str) -> tuple[float, str]:
    """How far (scene units) any joint moves when the chain is added with a target on its tip and
    solved; and the method ``chain_add`` chose (ours)."""
    import bpy

    operator, tip, count, _ = CHAINS[name]
    fresh_scene()
    rig = metarig(operator)
    bones = chain_bones(rig, tip, count)
    before = world_joints(rig, bones)
    method = "Blender IK"
    if solver == "ours":
        _make_active(rig, tip)
        assert bpy.ops.ik_solvers.chain_add_with_target(chain_length=count) == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
        method = rig.ik_solvers.active_chain.method
        assert bpy.ops.ik_solvers.solve() == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime
    else:
        assert rig.pose is not None  # an armature
        constraint = cast("bpy.types.KinematicConstraint", rig.pose.bones[tip].constraints.new("IK"))
        constraint.chain_count = count
        constraint.target = add_empty("TipTarget", before[-1])
    return float(np.abs(world_joints(rig, bones) - before).max()), method


def _make_active(rig: bpy.types.Object, bone: str) -> None:
    """The rig the active object and ``bone`` its active bone (where ``chain_add`` reads the tip)."""
    import bpy

    assert bpy.context.view_layer is not None  # a scene is open
    bpy.context.view_layer.objects.active = rig
    armature = cast("bpy.types.Armature", rig.data)
    armature.bones.active = armature.bones[bone]


def wants_rotation_rows(name: str) -> bool:
    _, _, count, kind = CHAINS[name]
    return kind in ROTATION_KINDS and count >= 3


def hold_rest_orientation(setup: RigifySetup) -> None:
    """Give the target Empty the tip bone's rest world orientation on every frame."""
    from mathutils import Matrix

    rig = setup.rig
    assert rig.pose is not None  # an armature
    rest = np.array(rig.matrix_world @ rig.pose.bones[setup.bones[-1]].matrix)[:3, :3]
    setup.target.rotation_mode = "QUATERNION"
    setup.target.rotation_quaternion = Matrix((rest / np.linalg.norm(rest, axis=0)).tolist()).to_quaternion()


def run(name: str, solver: str, frames: int) -> dict:
    """One row: the add move, then the paths in a fresh scene, measured from Blender's evaluation."""
    import bpy

    import ik_solvers

    rotation = solver.endswith("+ Rotation")
    ik_solvers.register()
    try:
        moved, method = add_move(name, solver.removesuffix(" + Rotation"))
        setup = setup_chain(name, frames)
        if rotation:
            hold_rest_orientation(setup)
        label = solver if not solver.startswith("ours") else solver.replace("ours", f"ours ({method})")
        row: dict = {"chain": name, "solver": label,
                     "bones": len(setup.bones), "reach_m": setup.reach, "add_move_mm": moved * 1000.0}
        report, warnings = None, set()
        if solver.startswith("ours"):
            _make_active(setup.rig, setup.bones[-1])
            with bpy.context.temp_override(active_object=setup.rig, object=setup.rig,
                                           selected_objects=[setup.rig, setup.target]):
                assert bpy.ops.ik_solvers.chain_add(chain_length=len(setup.bones)) == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime
            chain = setup.rig.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
            chain.use_rotation = rotation
            bake_ours(setup, chain.name)
            result, (joint_steps, turned) = measure(setup), walk_frames(setup)
            report = bake_report(chain)
            # Clears the keys (measured before). Its F-curve sampling has no target rotation: the
            # Rotation rows count every flip unwarned (none is measured on them).
            warnings = set() if rotation else pole_warning_frames(setup, chain)
        else:
            constraint = add_blender_ik(setup, pole=False)
            constraint.use_rotation = rotation  # type: ignore[attr-defined]  # the IK constraint add_blender_ik made
            result, (joint_steps, turned) = measure(setup), walk_frames(setup)
    finally:
        ik_solvers.unregister()
    bounds = result.bounds
    if rotation:  # the goal of the chain up to the tip bone: its head, the tip bone held at the target's turn
        targets = np.concatenate(list(setup.paths.values()))
        bounds = rest_lower_bounds(setup.rest_joints[:-1], targets - (setup.rest_joints[-1] - setup.rest_joints[-2]))
    reachable = bounds <= 0.0
    reachable[setup.path_frames("out_of_reach") - 1] = False
    errors_mm = result.errors * 1000.0
    missed = np.flatnonzero(reachable & (errors_mm > MISSED_MM)) + 1
    smooth = [p for p in setup.paths if p not in ("sweep", "out_of_reach")]
    warned = count_warned_flips(setup.frame_end, result.flips, report, warnings) if report is not None else 0
    outside = setup.path_frames("out_of_reach") - 1
    row.update(
        max_reachable_mm=float(errors_mm[reachable].max()),
        misses=len(missed), reachable_frames=int(reachable.sum()),
        misses_reported=(None if report is None else
                         int(sum(int(f) in set(report.get("not_reached_frames", ())) for f in missed))),
        near_root_max_mm=(float(errors_mm[setup.path_frames("near_root") - 1].max())
                          if "near_root" in setup.paths else None),
        sweep_step_mm=joint_steps["sweep"],
        path_step_mm=max(joint_steps[p] for p in smooth),
        target_step_mm=max(float(np.linalg.norm(np.diff(setup.paths[p], axis=0), axis=1).max()) * 1000.0
                           for p in smooth),
        backward_frames=int(result.backward[reachable].any(axis=1).sum()),
        flips_unwarned=len(result.flips) - warned, flips_warned=warned,
        max_excess_mm=None if rotation else float(((result.errors - result.bounds) * 1000.0)[outside].max()),
        backward_by_path={p: int((result.backward & reachable[:, None])[setup.path_frames(p) - 1].any(axis=1).sum())
                          for p in setup.paths},
        step_mm_by_path=joint_steps,
        orientation_max_degrees=float(turned.max()) if rotation else None,
    )
    return row


def walk_frames(setup: RigifySetup) -> tuple[dict[str, float], np.ndarray]:
    """From Blender's evaluation: per path, the largest move of an inner joint (knee, ankle …: not the
    root, nor the tip, which follows the target) between consecutive frames (mm); and per frame the
    angle (degrees) between the tip bone's world orientation and the target's."""
    import bpy

    steps, scene, turned = {}, bpy.context.scene, []
    assert scene is not None and setup.rig.pose is not None  # the setup's scene and armature
    tip = setup.rig.pose.bones[setup.bones[-1]]
    for path in setup.paths:
        frames = setup.path_frames(path)
        joints = []
        for frame in frames:
            scene.frame_set(int(frame))
            joints.append(world_joints(setup.rig, setup.bones))
            bone = np.array(setup.rig.matrix_world @ tip.matrix)[:3, :3]
            relative = (bone / np.linalg.norm(bone, axis=0)) @ np.array(setup.target.matrix_world)[:3, :3].T
            turned.append(np.degrees(np.arccos(np.clip((np.trace(relative) - 1.0) / 2.0, -1.0, 1.0))))
        moves = np.linalg.norm(np.diff(np.array(joints)[:, 1:-1], axis=0), axis=2)
        steps[path] = float(moves.max() * 1000.0)
    return steps, np.array(turned)


def measure_all(out_dir: Path | None, frames: int, chains: Sequence[str] | None,
                log: Callable[[str], object] = print) -> list[dict]:
    rows, started = [], time.perf_counter()
    for name in chains or CHAINS:
        for solver in SOLVERS:
            if solver.endswith("+ Rotation") and not wants_rotation_rows(name):
                continue
            rows.append(run(name, solver, frames))
            log(f"{name:20s} {rows[-1]['solver']:16s} {time.perf_counter() - started:6.0f} s")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "rows.json").write_text(json.dumps(rows, indent=2))
        with open(out_dir / "rows.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (out_dir / "table.md").write_text(table_markdown(rows, frames))
    return rows


def table_markdown(rows: list[dict], frames: int) -> str:
    caption = (
        f"`scripts/compare_metarigs.py`, {frames} frames per path; every figure from Blender's evaluation "
        "(ours: the baked keys of the chain as `chain_add` sets it up; Blender: the IK constraint, no pole). "
        "Add: the largest joint move when the chain is added with its target on the tip and solved. "
        f"Misses: reachable frames (free-joint bound 0) off by > {MISSED_MM:g} mm (reported: of them, listed "
        "as not reached in our bake report). Near root: the max error where the target is drawn in below "
        "the least distance with every joint bent its own way (zigzag chains). Sweep step: the largest inner-joint (knee, ankle …) "
        "step for a 0.5 mm target step across the rest distance; path step: the largest inner-joint step between "
        "frames of the smooth paths (target: the target's largest step there). Backward: reachable frames with a joint bent > 1° against its rest "
        "bend. Flips: a joint's bend normal turning > 30° between frames, unwarned / warned (warned: the frame or the "
        "one before is in our bake report's flip frames or its frames bending a joint against its preferred way, "
        "or has HI's pole warning on). Excess: out of reach, over the geometric bound. Rotation rows: the target "
        "keeps the tip bone's rest orientation (a foot flat, a hand level): reachable frames are those whose "
        "ankle or wrist point (the target less the tip bone) is in reach; turn: the tip bone's largest angle "
        "off the target's orientation over every frame.")
    header = ("| chain | solver | add mm | max reachable error mm | misses (reported) | near root mm "
              "| sweep step mm | path step mm (target) | backward | flips | excess mm | turn ° |")
    lines = [caption, "", header, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        misses = f"{row['misses']} of {row['reachable_frames']}"
        if row["misses_reported"] is not None and row["misses"]:
            misses += f" ({row['misses_reported']})"
        near = "–" if row["near_root_max_mm"] is None else _fmt(row["near_root_max_mm"])
        lines.append(
            f"| {row['chain']} ({row['bones']}) | {row['solver']} | {_fmt(row['add_move_mm'])} "
            f"| {_fmt(row['max_reachable_mm'])} | {misses} | {near} | {_fmt(row['sweep_step_mm'])} "
            f"| {_fmt(row['path_step_mm'])} ({_fmt(row['target_step_mm'])}) | {row['backward_frames']} "
            f"| {row['flips_unwarned']} / {row['flips_warned']} "
            f"| {'–' if row['max_excess_mm'] is None else _fmt(max(row['max_excess_mm'], 0.0))} "
            f"| {'–' if row['orientation_max_degrees'] is None else _fmt(row['orientation_max_degrees'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return run_main("compare_metarigs.py", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_metarigs.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=40, help="frames per smooth path (default 40)")
    parser.add_argument("--chains", nargs="+", choices=tuple(CHAINS), help="chains (default: all)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the table into, between the markers "
                                                 f"{METARIG_MARKERS[0]} and {METARIG_MARKERS[1]}")
    args = parser.parse_args(argv)
    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    if args.doc is not None:
        check_markers(args.doc, *METARIG_MARKERS)
    import_bpy(register_addon=False)  # each row registers the add-on in its own fresh scene
    rows = measure_all(args.out, args.frames, args.chains)
    table = table_markdown(rows, args.frames)
    if args.doc is not None:
        paste_between_markers(args.doc, *METARIG_MARKERS, table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
