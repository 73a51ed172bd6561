"""Issue 22's evidence: a five-goal body on Rigify's human metarig, our body solve against Blender's tree IK.

Goals (Empties keyed along ``PATHS``): both ankles (``thigh → shin``), both wrists (``upper_arm →
forearm``) and the top of the head (``spine.001 → spine.006``). Ours: those five chains with
``solve_together`` and the hips (``spine``) as ``body_root``, priorities feet 2 > head 1 > hands 0,
baked with ``ik_solvers.bake``. Blender: IK constraints on the same tips, the arms' chains reaching
down the spine to ``spine.001`` so that they and the head's chain share bones and Blender merges them
into one tree (its bones only rotate: the hips stay put), baked with ``nla.bake``. Every figure is
read from Blender's evaluation of the baked keys.

Paths (``--frames`` each): ``crouch`` (feet planted, the head goal 0.35 m down and 0.1 m forward, the
hands with it), ``reach`` (the left hand 0.5 m beyond the arm's reach in front of the shoulder: more than the spine can bend; the head goal leans 0.3 m forward with it),
``walk`` (the ankles ±0.25 m fore and aft with the swing foot lifted: beyond the legs' reach unless
the hips drop), ``look`` (the head goal round a 0.12 m circle), ``crouch_step`` (the crouch's head and
hands with the walk's feet: a step while crouching).

Measures per solver and path: each goal's max error (mm), knees / elbows bent backward (frames with
a joint > 1° against its rest bend), flips (a knee's or elbow's bend normal turning by more than
``_measure.FLIP_TURN_DEGREES`` between frames; warned when our bake's report of that chain lists the
frame or the one before: its flip frames or frames bent against the preferred sense), the spine's
turns (the same of the head chain's joints, which have no bend sense and no warning, with the largest
bend of a joint that turned), the largest joint step per frame against the largest goal step
(pops), and the bake time of the whole range (least of ``--repeats``). Writes ``OUT/rows.json``,
``OUT/table.md``; ``--doc FILE`` pastes the table between ``<!-- body:start -->`` and
``<!-- body:end -->`` (docs/body-solve.md).

    .venv/bin/python scripts/compare_body.py --out DIR [--frames 40] [--repeats 3] [--doc docs/body-solve.md]
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import (
    FLIP_TURN_DEGREES,
    backward_joints,
    bend_angles,
    check_markers,
    flip_frames,
    joint_normals,
    markers,
    normal_turns,
    paste_between_markers,
)
from _measure import format_number as _fmt
from _rigify_rigs import add_empty, chain_bones, fresh_scene, metarig, rest_geometry
from _rigify_runs import bake_report, count_warned_flips, nla_bake
from _rigs import key_path

BODY_MARKERS = markers("body")
BODY_ROOT = "spine"
GOALS: dict[str, tuple[str, int, int]] = {
    "ankle.L": ("shin.L", 2, 2),
    "ankle.R": ("shin.R", 2, 2),
    "head": ("spine.006", 6, 1),
    "wrist.L": ("forearm.L", 2, 0),
    "wrist.R": ("forearm.R", 2, 0),
}
"""Goal → (tip bone, our chain's bones, priority)."""
BLENDER_CHAIN_COUNT = {"shin.L": 2, "shin.R": 2, "spine.006": 6, "forearm.L": 6, "forearm.R": 6}
"""Blender's IK constraints: the arms down to ``spine.001`` (forearm, upper arm, shoulder, three spine
bones), sharing the head chain's bones, so Blender solves the five as one tree."""
SOLVERS = ("ours", "Blender tree IK")


def goal_paths(rest_tips: dict[str, np.ndarray], shoulder: np.ndarray, arm_reach: float,
               frames: int) -> dict[str, dict[str, np.ndarray]]:
    """Per path, per goal, world positions ``(frames, 3)`` (metarig axes: up +Z, forward −Y)."""
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)[:, None]
    swing = np.sin(2 * math.pi * t)[:, None]
    still = {goal: np.repeat(tip[None], frames, axis=0) for goal, tip in rest_tips.items()}
    forward, up = np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    dip = rise * (-0.35 * up + 0.1 * forward)
    crouch = {**still, "head": still["head"] + dip, "wrist.L": still["wrist.L"] + dip, "wrist.R": still["wrist.R"] + dip}
    far = shoulder + (arm_reach + 0.5) * forward
    lean = rise * (0.3 * forward - 0.15 * up)  # the head leans into the reach (it outranks the hands)
    reach = {**still, "wrist.L": still["wrist.L"] + rise * (far - rest_tips["wrist.L"]), "head": still["head"] + lean}
    step = 0.25 * swing * forward
    lift = 0.08 * np.clip(swing, 0.0, None) * up
    walk = {**still, "ankle.L": still["ankle.L"] + step + lift,
            "ankle.R": still["ankle.R"] - step + 0.08 * np.clip(-swing, 0.0, None) * up}
    angle = 2 * math.pi * t
    circle = 0.12 * np.stack([np.cos(angle) - 1.0, np.sin(angle), np.zeros(frames)], axis=1)
    look = {**still, "head": still["head"] + circle}
    step = {**crouch, "ankle.L": walk["ankle.L"], "ankle.R": walk["ankle.R"]}  # a step while crouching
    return {"crouch": crouch, "reach": reach, "walk": walk, "look": look, "crouch_step": step}


class BodySetup:
    """The metarig, a keyed Empty per goal, the paths one after another on the timeline."""

    def __init__(self, frames: int) -> None:
        import bpy

        fresh_scene()
        self.rig = metarig("armature_human_metarig_add")
        self.frames = frames
        self.chains = {goal: chain_bones(self.rig, tip, count) for goal, (tip, count, _) in GOALS.items()}
        rest = {goal: rest_geometry(self.rig, bones) for goal, bones in self.chains.items()}
        self.rest_joints = {goal: joints for goal, (joints, _) in rest.items()}
        self.rest_axes = {goal: axes for goal, (_, axes) in rest.items()}
        arm = self.rest_joints["wrist.L"]
        self.paths = goal_paths({goal: joints[-1] for goal, joints in self.rest_joints.items()}, arm[0],
                                float(np.linalg.norm(np.diff(arm, axis=0), axis=1).sum()), frames)
        self.targets = {}
        for goal in GOALS:
            self.targets[goal] = add_empty(f"goal_{goal}", self.rest_joints[goal][-1])
            key_path(self.targets[goal], np.concatenate([path[goal] for path in self.paths.values()]))
        scene = bpy.context.scene
        assert scene is not None  # fresh_scene() opened one
        scene.frame_start, scene.frame_end = 1, self.frame_end
        scene.frame_set(1)

    @property
    def frame_end(self) -> int:
        return self.frames * len(self.paths)

    def bones(self) -> list[str]:
        """Every bone a solve may key: the chains' and the hips."""
        return [BODY_ROOT] + [b for bones in self.chains.values() for b in bones if b != BODY_ROOT]


def add_ours(setup: BodySetup) -> None:
    """Our five chains through ``chain_add`` (target selected, length as the operator's), then the body settings."""
    import bpy

    rig = setup.rig
    assert bpy.context.view_layer is not None  # the setup's scene
    bpy.context.view_layer.objects.active = rig
    for goal, (tip, count, priority) in GOALS.items():
        rig.data.bones.active = rig.data.bones[tip]
        with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig, setup.targets[goal]]):
            assert bpy.ops.ik_solvers.chain_add(chain_length=count) == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime
        chain = rig.ik_solvers.active_chain
        chain.name, chain.priority = goal, priority
    rig.ik_solvers.solve_together = True
    rig.ik_solvers.body_root = BODY_ROOT


def bake_ours(setup: BodySetup) -> float:
    import bpy

    rig = setup.rig
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        started = time.perf_counter()
        result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=setup.frame_end, all_chains=True)  # type: ignore[attr-defined]  # an operator registered at runtime
        seconds = time.perf_counter() - started
    assert result == {"FINISHED"}, result
    return seconds


def add_blender(setup: BodySetup) -> None:
    for goal, (tip, _, _) in GOALS.items():
        constraint = setup.rig.pose.bones[tip].constraints.new("IK")
        constraint.chain_count = BLENDER_CHAIN_COUNT[tip]
        constraint.target = setup.targets[goal]


def bake_blender(setup: BodySetup) -> float:
    keyed = set(setup.bones()) | {b for tip, count in BLENDER_CHAIN_COUNT.items() for b in chain_bones(setup.rig, tip, count)}
    return nla_bake(setup.rig, keyed, setup.frame_end)


def evaluate(setup: BodySetup) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per goal, Blender's evaluation at every frame: chain joints ``(F, n + 1, 3)``, bone world rotations
    ``(F, n, 3, 3)`` and the goal ``(F, 3)``; plus ``"hips"``: the hips' head ``(F, 1, 3)``."""
    import bpy

    scene, rig = bpy.context.scene, setup.rig
    assert scene is not None  # the setup's scene
    out: dict[str, list] = {goal: [[], [], []] for goal in GOALS}
    hips = []
    for frame in range(1, setup.frame_end + 1):
        scene.frame_set(frame)
        world = np.array(rig.matrix_world)
        for goal, bones in setup.chains.items():
            pose = [rig.pose.bones[b] for b in bones]
            local = np.array([b.head[:] for b in pose] + [pose[-1].tail[:]])
            out[goal][0].append(local @ world[:3, :3].T + world[:3, 3])
            rotations = [world[:3, :3] @ np.array(b.matrix)[:3, :3] for b in pose]
            out[goal][1].append([m / np.linalg.norm(m, axis=0) for m in rotations])
            out[goal][2].append(np.array(setup.targets[goal].matrix_world.translation))
        hips.append([np.array(rig.pose.bones[BODY_ROOT].head) @ world[:3, :3].T + world[:3, 3]])
    result = {goal: tuple(np.array(part) for part in parts) for goal, parts in out.items()}
    result["hips"] = (np.array(hips), np.zeros((0,)), np.zeros((0,)))
    return result  # type: ignore[return-value]  # three arrays per goal


def run(solver: str, frames: int, repeats: int) -> dict:
    import ik_solvers

    ik_solvers.register()
    try:
        setup = BodySetup(frames)
        if solver == "ours":
            add_ours(setup)
            bake = bake_ours
        else:
            add_blender(setup)
            bake = bake_blender
        seconds = bake(setup)
        evaluated = evaluate(setup)
        reports = our_reports(setup) if solver == "ours" else {}
        seconds = min([seconds] + [bake(setup) for _ in range(repeats - 1)])
    finally:
        ik_solvers.unregister()
    row: dict = {"solver": solver, "frames": setup.frame_end, "bake_seconds": seconds, "paths": {}}
    for k, path in enumerate(setup.paths):
        row["paths"][path] = path_cells(setup, evaluated, reports, slice(k * frames, (k + 1) * frames))
    return row


def our_reports(setup: BodySetup) -> dict[str, dict | None]:
    """Our last bake's report of each goal's chain."""
    return {goal: bake_report(setup.rig.ik_solvers.chains[goal]) for goal in GOALS}


def path_cells(setup: BodySetup, evaluated: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
               reports: dict[str, dict | None], span: slice) -> dict:
    """One path's figures (the frames ``span`` of ``evaluate``'s arrays; ``reports``: our bake's report per
    goal, empty for Blender's): errors, backward frames, the limbs' flips (warned: listed by the report) and
    the spine's bend turns with the largest bend of a joint that turned, joint and goal steps, the hips' move."""
    cells: dict = {"error_mm": {}, "backward_frames": 0, "limb_flips": 0, "limb_flips_warned": 0, "spine_turns": 0,
                   "spine_turn_bend_deg": 0.0}
    joint_steps, goal_steps = [0.0], [0.0]
    for goal in GOALS:
        joints, rotations, targets = (part[span] for part in evaluated[goal])
        cells["error_mm"][goal] = float(np.linalg.norm(joints[:, -1] - targets, axis=1).max() * 1000.0)
        flips = [span.start + f + 1 for f in flip_frames(normal_turns(joint_normals(joints)))]
        if goal == "head":  # the spine: ball joints, no bend sense, no flip warning (trunk)
            cells["spine_turns"] += len(flips)
            cells["spine_turn_bend_deg"] = max([cells["spine_turn_bend_deg"], *_turning_bends(joints)])
        else:  # knees and elbows
            bends = bend_angles(joints, rotations, setup.rest_axes[goal])
            cells["backward_frames"] += int(backward_joints(bends).any(axis=1).sum())
            cells["limb_flips"] += len(flips)
            if reports.get(goal) is not None:
                cells["limb_flips_warned"] += count_warned_flips(setup.frame_end, flips, reports[goal], set())
        joint_steps.append(float(np.linalg.norm(np.diff(joints[:, :-1], axis=0), axis=2).max()))
        goal_steps.append(float(np.linalg.norm(np.diff(targets, axis=0), axis=1).max()))
    hips = evaluated["hips"][0][span, 0]
    cells["hips_moved_mm"] = float(np.linalg.norm(hips - hips[0], axis=1).max() * 1000.0)
    cells["joint_step_mm"], cells["goal_step_mm"] = max(joint_steps) * 1000.0, max(goal_steps) * 1000.0
    return cells


def _turning_bends(joints: np.ndarray) -> list[float]:
    """Per flip of a single joint among ``joints (F, n + 1, 3)``, its bend (degrees) on the flip's frame: how
    far from straight a joint whose bend direction turned over was."""
    segments = np.diff(joints, axis=1)
    u, w = segments[:, :-1], segments[:, 1:]
    bends = np.degrees(np.arctan2(np.linalg.norm(np.cross(u, w), axis=-1), np.einsum("fji,fji->fj", u, w)))
    normals = joint_normals(joints)
    return [float(bends[f, j]) for j in range(normals.shape[1]) for f in flip_frames(normal_turns(normals[:, j]))]


def table_markdown(rows: list[dict], frames: int) -> str:
    caption = (
        f"`scripts/compare_body.py`, {frames} frames per path, every figure from Blender's evaluation of the "
        "baked keys. Errors: the largest distance of each goal's chain tip from the goal over the path (mm). "
        "Backward: frames with a knee or elbow bent > 1° against its rest bend. Flips: a knee's or elbow's bend "
        f"normal turning by more than {FLIP_TURN_DEGREES:g}° between frames, unwarned / warned by the bake's report. "
        "Spine turns: the same of a spine joint (head chain; a ball joint bent less than 1° has no normal), and "
        "in brackets the largest bend of a joint that turned (degrees). Steps: the largest move of "
        "any joint between frames (the chains' joints, tips excepted) and, in brackets, the largest goal "
        "move. Hips: how far the hips moved. Bake: the whole range, least of the timed bakes.")
    goals = list(GOALS)
    lines = [caption, "", "| path | solver | " + " | ".join(f"{g} mm" for g in goals)
             + " | backward | flips unwarned / warned | spine turns (bend °) | joint step mm (goal) | hips moved mm |",
             "|---|---|" + "---:|" * (len(goals) + 5)]
    for path in rows[0]["paths"]:
        for row in rows:
            cells = row["paths"][path]
            lines.append(f"| {path} | {row['solver']} | " + " | ".join(_fmt(cells["error_mm"][g]) for g in goals)
                         + f" | {cells['backward_frames']} | {cells['limb_flips'] - cells['limb_flips_warned']} / "
                           f"{cells['limb_flips_warned']} | {cells['spine_turns']} ({_fmt(cells['spine_turn_bend_deg'])}) "
                           f"| {_fmt(cells['joint_step_mm'])} "
                           f"({_fmt(cells['goal_step_mm'])}) | {_fmt(cells['hips_moved_mm'])} |")
    lines += ["", "| solver | bake ms / frame | bake ratio (Blender / this) |", "|---|---:|---:|"]
    blender = next(r for r in rows if r["solver"] != "ours")["bake_seconds"]
    for row in rows:
        lines.append(f"| {row['solver']} | {_fmt(row['bake_seconds'] / row['frames'] * 1000.0)} "
                     f"| {_fmt(blender / row['bake_seconds'], 2)} |")
    return "\n".join(lines) + "\n"


def measure_all(out_dir: Path, frames: int, repeats: int, log: Callable[[str], object] = print) -> list[dict]:
    rows, started = [], time.perf_counter()
    for solver in SOLVERS:
        rows.append(run(solver, frames, repeats))
        log(f"{solver:16s} {time.perf_counter() - started:6.0f} s")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rows.json").write_text(json.dumps(rows, indent=2))
    (out_dir / "table.md").write_text(table_markdown(rows, frames))
    return rows


def main(argv: list[str]) -> int:
    return run_main("compare_body.py", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_body.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=40, help="frames per path (default 40)")
    parser.add_argument("--repeats", type=int, default=3, help="bakes timed per solver, the least counts (default 3)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the table into, between the markers "
                                                 f"{BODY_MARKERS[0]} and {BODY_MARKERS[1]}")
    args = parser.parse_args(argv)
    if args.frames < 2 or args.repeats < 1:
        raise UsageError("--frames must be at least 2 and --repeats at least 1")
    if args.doc is not None:
        check_markers(args.doc, *BODY_MARKERS)
    import_bpy(register_addon=False)  # each solver registers the add-on in its own fresh scene
    rows = measure_all(args.out, args.frames, args.repeats)
    table = table_markdown(rows, args.frames)
    if args.doc is not None:
        paste_between_markers(args.doc, *BODY_MARKERS, table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
