"""Issue 22's random reachable goal sets: a five-goal body on Rigify's human metarig, our body solve
against Blender's tree IK, on goals that Blender's own forward kinematics put where a pose exists.

Each goal set is one frame. Its pose: a random rotation of every chain bone (the metarig has no IK
limits, so within the ranges of ``POSE_RANGES_DEGREES``, a rotation vector in the bone's local frame
scaled by ``--spread``) and of the hips (``spine``, the body root), plus a random hips offset of up
to ``--hips-offset`` per axis. Blender evaluates that pose; the goals are the evaluated tips: both
feet (``thigh → shin → foot``, position and orientation of the foot), the head (``spine.001 → spine.006``,
position and orientation) and both wrists (``upper_arm → forearm``, position), keyed on Empties.
The pose is then cleared and each solver bakes every frame from the rest pose.

Ours: those chains with ``solve_together``, body root ``spine``, priorities feet 2 > head 1 > hands 0,
every weight 1, baked with ``ik_solvers.bake``. Blender: IK constraints on the same tips (rotation
on for the feet and the head; the arms' chains reach down to ``spine.001`` so the head and arms are
one tree), baked with ``nla.bake``; its bones only rotate, so the hips stay where the rest pose has
them. Every figure is read from Blender's evaluation of the baked keys: a set is met when every
goal is within ``--tolerance-mm`` (0.01 mm) and every orientation within ``--tolerance-degrees``
(0.05°).

Writes ``OUT/random_sets.csv`` (a row per set, solver and goal), ``OUT/summary.json``,
``OUT/table.md`` and ``OUT/random_sets.png`` (each goal's error distribution per solver); ``--doc
FILE`` pastes the table between ``<!-- body-random:start -->`` and ``<!-- body-random:end -->``.

    .venv/bin/python scripts/compare_body_random.py --out DIR [--sets 300] [--seed 0] [--solvers ours,blender]
"""

from __future__ import annotations

import csv
import json
import sys
import time
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import backward_joints, bend_angles, check_markers, markers, paste_between_markers
from _measure import format_number as _fmt
from _rigify_rigs import add_empty, chain_bones, fresh_scene, metarig, rest_geometry
from _rigify_runs import nla_bake
from _rigs import key_path

if TYPE_CHECKING:
    import bpy
    from mathutils import Quaternion

RANDOM_MARKERS = markers("body-random")
BODY_ROOT = "spine"


@dataclass(frozen=True)
class Goal:
    """One goal of the body: its chain's tip bone and length, priority, whether its orientation counts,
    and the length of Blender's IK constraint on the same tip."""

    tip: str
    bones: int
    priority: int
    rotation: bool
    blender_bones: int
    bend_joint: int | None
    """The chain's knee or elbow (inner joint index) counted for backward bends; None: none (the spine)."""


GOALS = {
    "foot.L": Goal("foot.L", 3, 2, True, 3, 0),
    "foot.R": Goal("foot.R", 3, 2, True, 3, 0),
    "head": Goal("spine.006", 6, 1, True, 6, None),
    "wrist.L": Goal("forearm.L", 2, 0, False, 6, 0),
    "wrist.R": Goal("forearm.R", 2, 0, False, 6, 0),
}
POSE_RANGES_DEGREES = {  # bone-name prefix → the largest rotation about each local axis (x, y, z)
    "spine.00": (12.0, 12.0, 12.0),  # spine.001 … spine.006 (chest, neck, head): a little more below
    "spine": (10.0, 10.0, 10.0),  # the hips
    "thigh": (35.0, 15.0, 25.0),
    "shin": (60.0, 15.0, 10.0),
    "foot": (25.0, 10.0, 15.0),
    "upper_arm": (45.0, 30.0, 45.0),
    "forearm": (60.0, 30.0, 20.0),
}
NECK_AND_HEAD = {"spine.004": 1.5, "spine.005": 1.5, "spine.006": 1.7}
"""Bones that turn more than the ``spine.00`` range: its multiple (a neck bends more than a chest bone)."""
SOLVERS = {"ours": "ours", "blender": "Blender tree IK"}


def pose_range(bone: str) -> np.ndarray:
    """The largest rotation (radians) about each local axis for ``bone``'s random poses."""
    prefix = max((p for p in POSE_RANGES_DEGREES if bone.startswith(p)), key=len)
    return np.radians(POSE_RANGES_DEGREES[prefix]) * NECK_AND_HEAD.get(bone, 1.0)


def quaternions_from_rotvecs(rotvecs: np.ndarray) -> np.ndarray:
    """``(..., 3)`` rotation vectors → ``(..., 4)`` unit quaternions (w, x, y, z)."""
    angle = np.linalg.norm(rotvecs, axis=-1, keepdims=True)
    axis = np.divide(rotvecs, angle, out=np.zeros_like(rotvecs), where=angle > 0)
    return np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=-1)


def random_poses(bones: list[str], count: int, rng: np.random.Generator, spread: float,
                 hips_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Rotations ``(count, len(bones), 4)`` from rest (pose-bone quaternions) and hips locations ``(count, 3)``."""
    limits = np.array([pose_range(bone) for bone in bones]) * spread
    rotvecs = rng.uniform(-1.0, 1.0, (count, len(bones), 3)) * limits
    return quaternions_from_rotvecs(rotvecs), rng.uniform(-hips_offset, hips_offset, (count, 3))


def rotation_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (degrees) between rotations ``a`` and ``b`` ``(..., 3, 3)``, accurate near zero."""
    return np.degrees(2.0 * np.arcsin(np.clip(np.linalg.norm(a - b, axis=(-2, -1)) / np.sqrt(8.0), 0.0, 1.0)))


def world_rotation(world: np.ndarray, pose_bone: bpy.types.PoseBone) -> np.ndarray:
    """A pose bone's world orientation (its matrix's columns normalised: no scale)."""
    m = world[:3, :3] @ np.array(pose_bone.matrix)[:3, :3]
    return m / np.linalg.norm(m, axis=0)


class RandomSetup:
    """The metarig, an Empty per goal keyed (location and rotation) at the evaluated tips of ``sets``
    random poses, frame ``k + 1`` for set ``k``; the pose put back to rest."""

    def __init__(self, sets: int, seed: int, spread: float, hips_offset: float) -> None:
        import bpy

        fresh_scene()
        self.rig = metarig("armature_human_metarig_add")
        self.sets = self.frame_end = sets
        self.chains = {goal: chain_bones(self.rig, spec.tip, spec.bones) for goal, spec in GOALS.items()}
        self.rest_axes = {goal: rest_geometry(self.rig, bones)[1] for goal, bones in self.chains.items()}
        self.posed = [BODY_ROOT] + sorted({b for bones in self.chains.values() for b in bones} - {BODY_ROOT})
        self.rotations, self.hips = random_poses(self.posed, sets, np.random.default_rng(seed), spread, hips_offset)
        self.positions, self.orientations = self._forward_kinematics()
        self.targets = {}
        for goal, spec in GOALS.items():
            target = add_empty(f"goal_{goal}", self.positions[goal][0])
            key_path(target, self.positions[goal])
            if spec.rotation:
                target.rotation_mode = "QUATERNION"
                for k, rotation in enumerate(self.orientations[goal]):
                    target.rotation_quaternion = _quaternion(rotation)
                    target.keyframe_insert("rotation_quaternion", frame=k + 1)
            self.targets[goal] = target
        scene = bpy.context.scene
        assert scene is not None  # fresh_scene() opened one
        scene.frame_start, scene.frame_end = 1, sets
        scene.frame_set(1)

    def _forward_kinematics(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Blender's evaluation of each random pose: every goal's tip ``(sets, 3)`` and tip bone's
        orientation ``(sets, 3, 3)``."""
        import bpy

        view_layer = bpy.context.view_layer
        assert view_layer is not None  # the setup's scene
        pose_bones = [self.rig.pose.bones[name] for name in self.posed]
        world = np.array(self.rig.matrix_world)
        positions: dict[str, list] = {goal: [] for goal in GOALS}
        orientations: dict[str, list] = {goal: [] for goal in GOALS}
        for rotations, hips in zip(self.rotations, self.hips):
            for pose_bone, rotation in zip(pose_bones, rotations):
                pose_bone.rotation_quaternion = rotation.tolist()
            pose_bones[0].location = hips.tolist()
            view_layer.update()
            for goal, spec in GOALS.items():
                tip = self.rig.pose.bones[spec.tip]
                positions[goal].append(world[:3, :3] @ np.array(tip.tail) + world[:3, 3])
                orientations[goal].append(world_rotation(world, tip))
        for pose_bone in pose_bones:
            pose_bone.rotation_quaternion, pose_bone.location = (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        view_layer.update()
        return ({goal: np.array(p) for goal, p in positions.items()},
                {goal: np.array(o) for goal, o in orientations.items()})


def _quaternion(rotation: np.ndarray) -> Quaternion:
    from mathutils import Matrix

    return Matrix(rotation.tolist()).to_quaternion()


def add_ours(setup: RandomSetup) -> None:
    """The body settings, then our five chains through ``chain_add`` (each with its target selected),
    rotation on for the feet and the head."""
    import bpy

    rig = setup.rig
    rig.ik_solvers.solve_together, rig.ik_solvers.body_root = True, BODY_ROOT
    for goal, spec in GOALS.items():
        rig.data.bones.active = rig.data.bones[spec.tip]
        selected = [rig, setup.targets[goal]]
        with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=selected):
            added = bpy.ops.ik_solvers.chain_add(chain_length=spec.bones)  # type: ignore[attr-defined]  # an operator registered at runtime
        assert added == {"FINISHED"}, (goal, added)
        chain = rig.ik_solvers.chains[-1]
        chain.name, chain.priority, chain.use_rotation = goal, spec.priority, spec.rotation


def bake_ours(setup: RandomSetup) -> float:
    """``ik_solvers.bake`` of the body over every set; seconds."""
    import bpy

    rig, started = setup.rig, time.perf_counter()
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        baked = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=setup.frame_end, all_chains=True)  # type: ignore[attr-defined]  # an operator registered at runtime
    assert baked == {"FINISHED"}, baked
    return time.perf_counter() - started


def add_blender(setup: RandomSetup) -> None:
    for goal, spec in GOALS.items():
        constraint = setup.rig.pose.bones[spec.tip].constraints.new("IK")
        constraint.chain_count = spec.blender_bones
        constraint.target = setup.targets[goal]
        constraint.use_rotation = spec.rotation


def bake_blender(setup: RandomSetup) -> float:
    keyed = {b for spec in GOALS.values() for b in chain_bones(setup.rig, spec.tip, spec.blender_bones)}
    return nla_bake(setup.rig, keyed, setup.frame_end)


def evaluate(setup: RandomSetup) -> dict[str, dict[str, np.ndarray]]:
    """Per goal, Blender's evaluation of every set (frame): ``error_mm (S,)``, ``angle_degrees (S,)``
    (zero for a position goal) and ``backward (S,)`` (the knee or elbow bent > 1° against its rest bend)."""
    import bpy

    scene, rig = bpy.context.scene, setup.rig
    assert scene is not None  # the setup's scene
    world = np.array(rig.matrix_world)
    tips: dict[str, list] = {goal: [] for goal in GOALS}
    turns: dict[str, list] = {goal: [] for goal in GOALS}
    joints: dict[str, list] = {goal: [] for goal in GOALS}
    frames: dict[str, list] = {goal: [] for goal in GOALS}
    for frame in range(1, setup.frame_end + 1):
        scene.frame_set(frame)
        for goal, bones in setup.chains.items():
            pose = [rig.pose.bones[b] for b in bones]
            local = np.array([b.head[:] for b in pose] + [pose[-1].tail[:]])
            joints[goal].append(local @ world[:3, :3].T + world[:3, 3])
            frames[goal].append([world_rotation(world, b) for b in pose])
            tips[goal].append(joints[goal][-1][-1])
            turns[goal].append(frames[goal][-1][-1])
    out = {}
    for goal, spec in GOALS.items():
        error = np.linalg.norm(np.array(tips[goal]) - setup.positions[goal], axis=1) * 1000.0
        angle = rotation_angles(np.array(turns[goal]), setup.orientations[goal]) if spec.rotation else np.zeros(len(error))
        backward = np.zeros(len(error), dtype=bool)
        if spec.bend_joint is not None:
            bends = bend_angles(np.array(joints[goal]), np.array(frames[goal]), setup.rest_axes[goal])
            backward = backward_joints(bends)[:, spec.bend_joint]
        out[goal] = {"error_mm": error, "angle_degrees": angle, "backward": backward}
    return out


def run(solver: str, sets: int, seed: int, spread: float, hips_offset: float) -> tuple[dict, dict]:
    """Set up, bake and evaluate one solver on the seeded goal sets: (its figures, per goal the arrays of :func:`evaluate`)."""
    import ik_solvers

    ik_solvers.register()
    try:
        setup = RandomSetup(sets, seed, spread, hips_offset)
        (add_ours if solver == "ours" else add_blender)(setup)
        seconds = (bake_ours if solver == "ours" else bake_blender)(setup)
        evaluated = evaluate(setup)
        statuses = ({} if solver != "ours" else
                    {goal: json.loads(setup.rig.ik_solvers.chains[goal].last_bake_report)["goals"]["status_counts"]
                     for goal in GOALS})
    finally:
        ik_solvers.unregister()
    return {"solver": SOLVERS[solver], "sets": sets, "bake_seconds": seconds, "statuses": statuses}, evaluated


def summarise(row: dict, evaluated: dict, tolerance_mm: float, tolerance_degrees: float) -> dict:
    """Adds to ``row`` the fraction of sets that meet every goal, per goal the fraction met and error
    percentiles, and the sets with a backward knee or elbow."""
    met = np.ones(row["sets"], dtype=bool)
    row["goals"] = {}
    for goal, parts in evaluated.items():
        ok = (parts["error_mm"] <= tolerance_mm) & (parts["angle_degrees"] <= tolerance_degrees)
        met &= ok
        row["goals"][goal] = {"met": float(ok.mean()),
                              **{f"error_mm_{name}": float(np.percentile(parts["error_mm"], q))
                                 for name, q in (("median", 50), ("p99", 99), ("max", 100))},
                              "angle_degrees_max": float(parts["angle_degrees"].max())}
    row["all_met"] = float(met.mean())
    row["not_met_sets"] = [int(k) for k in np.flatnonzero(~met)]
    row["backward_sets"] = int(np.any([parts["backward"] for parts in evaluated.values()], axis=0).sum())
    return row


def table_markdown(rows: list[dict], args: Namespace) -> str:
    caption = (
        f"`scripts/compare_body_random.py`, {args.sets} random reachable goal sets (seed {args.seed}, spread "
        f"{_fmt(args.spread)}, hips offset up to {_fmt(args.hips_offset * 1000.0)} mm per axis), every figure "
        "from Blender's evaluation of the baked keys. All met: the sets with every goal within "
        f"{_fmt(args.tolerance_mm)} mm and every orientation (feet, head) within {_fmt(args.tolerance_degrees)}°. "
        "Per goal: sets met, and the median / 99th percentile / largest distance from the goal (mm). "
        "Backward: sets with a knee or elbow bent > 1° against its rest bend.")
    goals = list(GOALS)
    lines = [caption, "", "| solver | all met | " + " | ".join(f"{g} met" for g in goals)
             + " | backward | bake ms / set |", "|---|---:|" + "---:|" * (len(goals) + 2)]
    for row in rows:
        lines.append(f"| {row['solver']} | {100.0 * row['all_met']:.1f} % | "
                     + " | ".join(f"{100.0 * row['goals'][g]['met']:.1f} %" for g in goals)
                     + f" | {row['backward_sets']} | {_fmt(row['bake_seconds'] / row['sets'] * 1000.0)} |")
    lines += ["", "| solver | goal | median mm | p99 mm | max mm | max ° |", "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        for goal in goals:
            cells = row["goals"][goal]
            angle = _fmt(cells["angle_degrees_max"]) if GOALS[goal].rotation else "–"
            lines.append(f"| {row['solver']} | {goal} | {_fmt(cells['error_mm_median'])} | {_fmt(cells['error_mm_p99'])} "
                         f"| {_fmt(cells['error_mm_max'])} | {angle} |")
    return "\n".join(lines) + "\n"


def write_csv(path: Path, results: list[tuple[dict, dict]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["set", "solver", "goal", "error_mm", "angle_degrees", "backward"])
        for row, evaluated in results:
            for goal, parts in evaluated.items():
                for k in range(row["sets"]):
                    writer.writerow([k, row["solver"], goal, f"{parts['error_mm'][k]:.6g}",
                                     f"{parts['angle_degrees'][k]:.6g}", int(parts["backward"][k])])


def plot(path: Path, results: list[tuple[dict, dict]], tolerance_mm: float, tolerance_degrees: float) -> None:
    """Each goal's position error distribution (left) and orientation error (right), per solver."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    for (row, evaluated), style in zip(results, ("-", ":")):
        for goal, parts in evaluated.items():
            errors = np.sort(np.maximum(parts["error_mm"], 1e-9))
            left.plot(errors, np.arange(1, errors.size + 1) / errors.size, style, label=f"{row['solver']}: {goal}")
            if GOALS[goal].rotation:
                angles = np.sort(np.maximum(parts["angle_degrees"], 1e-9))
                right.plot(angles, np.arange(1, angles.size + 1) / angles.size, style, label=f"{row['solver']}: {goal}")
    left.axvline(tolerance_mm, color="k", linestyle="--", linewidth=0.8)
    right.axvline(tolerance_degrees, color="k", linestyle="--", linewidth=0.8)
    for axis, what in ((left, "position error (mm)"), (right, "orientation error (°)")):
        axis.set_xscale("log")
        axis.set_xlabel(what)
        axis.set_ylabel("fraction of goal sets")
        axis.legend(fontsize=6)
    left.set_title(" / ".join(f"{row['solver']}: {100.0 * row['all_met']:.1f} % all met" for row, _ in results),
                   fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def measure_all(args: Namespace, log: Callable[[str], object] = print) -> list[dict]:
    results, started = [], time.perf_counter()
    for solver in args.solvers:
        row, evaluated = run(solver, args.sets, args.seed, args.spread, args.hips_offset)
        results.append((summarise(row, evaluated, args.tolerance_mm, args.tolerance_degrees), evaluated))
        log(f"{SOLVERS[solver]:16s} {time.perf_counter() - started:6.0f} s")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows = [row for row, _ in results]
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    (out / "table.md").write_text(table_markdown(rows, args))
    write_csv(out / "random_sets.csv", results)
    plot(out / "random_sets.png", results, args.tolerance_mm, args.tolerance_degrees)
    return rows


def main(argv: list[str]) -> int:
    return run_main("compare_body_random.py", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_body_random.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--sets", type=int, default=300, help="random goal sets (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--spread", type=float, default=1.0, help="scale of the random rotations (default 1)")
    parser.add_argument("--hips-offset", type=float, default=0.08,
                        help="largest random hips offset per axis, scene units (default 0.08)")
    parser.add_argument("--tolerance-mm", type=float, default=0.01, help="a goal is met within this (default 0.01)")
    parser.add_argument("--tolerance-degrees", type=float, default=0.05,
                        help="an orientation is met within this (default 0.05)")
    parser.add_argument("--solvers", default="ours,blender", help="comma-separated: ours, blender (default both)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the table into, between the markers "
                                                 f"{RANDOM_MARKERS[0]} and {RANDOM_MARKERS[1]}")
    args = parser.parse_args(argv)
    args.solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    if args.sets < 1 or args.spread < 0 or args.hips_offset < 0 or args.tolerance_mm <= 0 or args.tolerance_degrees <= 0:
        raise UsageError("--sets must be at least 1, --spread and --hips-offset not negative, the tolerances positive")
    if not args.solvers or any(s not in SOLVERS for s in args.solvers):
        raise UsageError(f"--solvers takes a comma-separated list of {', '.join(SOLVERS)}")
    if args.doc is not None:
        check_markers(args.doc, *RANDOM_MARKERS)
    import_bpy(register_addon=False)  # each solver registers the add-on in its own fresh scene
    rows = measure_all(args)
    table = table_markdown(rows, args)
    if args.doc is not None:
        paste_between_markers(args.doc, *RANDOM_MARKERS, table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
