"""Issue 22's evidence on the rig Rigify generates from the human metarig: our body solve baked onto
its FK controls toward its own IK controls, against Rigify's own IK on the same animated controls.

The body (:func:`generated_body`): the generated rig's FK controls as chains (``thigh_fk → shin_fk``
to the ankle, ``upper_arm_fk → forearm_fk`` to the wrist, the chest's ``spine_fk.003``), the
``torso`` control as the body root, priorities feet 2 > hands 1 > chest 0; goals: the IK controls
``foot_ik.L/R`` and ``hand_ik.L/R`` as bone targets (their heads sit on the ankles and wrists) and an
Empty for the chest (each of the rig's controls there hangs from the chest or the torso). The IK
controls' parent switch (an Armature constraint listing the torso among its parents) is muted: as
generated, a body that moves the torso refuses them as goals, in one sentence. With the limbs' IK/FK
switch on FK, Rigify's ORG and DEF bones follow the FK keys the bake writes: the IK → FK bake.

Rigify's IK: the same controls animated, the IK/FK switch on IK (stretch on, as generated); the torso
is not animated, as an animator would have to move it.

Paths (``--frames`` each; Rigify's human faces −Y): ``crouch`` (hands and chest goal 0.3 m down and
0.08 m forward, feet planted), ``reach`` (the left hand 0.3 m beyond the arm in front of the shoulder,
the chest goal leaning with it), ``walk`` (the feet ±0.25 m fore and aft, the swing foot lifted 0.08 m:
beyond the legs unless the hips drop). Measures, every one from Blender's evaluation: each goal's
largest distance from the tip of the ORG bones that follow the chain (what deforms), frames with a
knee or elbow bent > 1° against its rest bend, the ORG limb bones' largest stretch, how far the
torso moved; and our bake's time. Writes ``OUT/rows.json`` and ``OUT/table.md``; ``--doc FILE``
pastes the table between ``<!-- body-generated:start -->`` and ``<!-- body-generated:end -->``.

    .venv/bin/python scripts/compare_body_generated.py --out DIR [--frames 40] [--doc docs/body-solve.md]
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import backward_joints, bend_angles, check_markers, markers, paste_between_markers
from _measure import format_number as _fmt
from _rigify_rigs import add_empty, chain_bones, fresh_scene, generate_human_rig, rest_geometry

if TYPE_CHECKING:
    import bpy

GENERATED_MARKERS = markers("body-generated")
CHAINS = {  # name → (tip bone, bones, priority, goal: the rig's own control, or None for an Empty at the tip)
    "leg.L": ("shin_fk.L", 2, 2, "foot_ik.L"),
    "leg.R": ("shin_fk.R", 2, 2, "foot_ik.R"),
    "arm.L": ("forearm_fk.L", 2, 1, "hand_ik.L"),
    "arm.R": ("forearm_fk.R", 2, 1, "hand_ik.R"),
    "chest": ("spine_fk.003", 1, 0, None),
}
BODY_ROOT = "torso"
PARENT_SWITCHES = ("MCH-foot_ik.parent.L", "MCH-foot_ik.parent.R", "MCH-hand_ik.parent.L", "MCH-hand_ik.parent.R")
"""The bones whose ``SWITCH_PARENT`` Armature constraint carries each IK control."""
FOLLOWERS = {"leg.L": "ORG-shin.L", "leg.R": "ORG-shin.R", "arm.L": "ORG-forearm.L", "arm.R": "ORG-forearm.R",
             "chest": "ORG-spine.003"}
"""The ORG bone whose tail follows each chain's tip (the limbs' IK/FK switch on FK)."""
IK_FK_SWITCHES = ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")
"""The bones holding each limb's ``IK_FK`` property (1: FK)."""
PATHS = ("crouch", "reach", "walk")
SOLVERS = ("ours", "Rigify IK")


def generated_body(*, mute_parent_switches: bool = True) -> bpy.types.Object:
    """The generated rig (limbs on FK) with the five chains, goals at their tips, solved together from
    the torso; the IK controls' parent switch muted unless ``mute_parent_switches`` is False."""
    import bpy

    _, rig = generate_human_rig()
    assert rig.pose is not None  # an armature
    if mute_parent_switches:
        for name in PARENT_SWITCHES:
            rig.pose.bones[name].constraints["SWITCH_PARENT"].mute = True
    for name, (tip, count, priority, control) in CHAINS.items():
        chain = rig.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.priority = name, tip, count, priority
        if control is None:
            chain.target = add_empty(f"goal.{name}", rig.matrix_world @ rig.pose.bones[tip].tail)
        else:
            chain.target, chain.target_bone = rig, control
    rig.ik_solvers.solve_together = True
    rig.ik_solvers.body_root = BODY_ROOT
    assert bpy.context.view_layer is not None  # fresh_scene() opened one
    bpy.context.view_layer.objects.active = rig
    bpy.context.view_layer.update()
    return rig


def goal_location(rig: bpy.types.Object, name: str) -> np.ndarray:
    """Chain ``name``'s goal as Blender evaluates it now (world)."""
    chain = rig.ik_solvers.chains[name]  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
    if chain.target_bone:
        assert rig.pose is not None  # an armature
        return np.array(rig.matrix_world @ rig.pose.bones[chain.target_bone].head)
    return np.array(chain.target.matrix_world.translation)


def control_paths(rig: bpy.types.Object, frames: int) -> dict[str, dict[str, np.ndarray]]:
    """Per path, the offset ``(frames, 3)`` of each animated control (``hand_ik.L`` …, and ``chest``
    for the chest's Empty) from its rest, in the armature's axes (the rig is not transformed)."""
    assert rig.pose is not None  # an armature
    bones = rig.pose.bones
    t = np.linspace(0.0, 1.0, frames)
    rise, swing = np.sin(math.pi * t)[:, None], np.sin(2 * math.pi * t)[:, None]
    forward, up = np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    shoulder = np.array(bones["upper_arm_fk.L"].head)
    arm = np.linalg.norm(np.array(bones["forearm_fk.L"].head) - shoulder) + bones["forearm_fk.L"].length
    far = shoulder + (arm + 0.3) * forward - np.array(bones["hand_ik.L"].head)
    dip = rise * (-0.3 * up + 0.08 * forward)
    lift = 0.08 * up
    return {
        "crouch": {"hand_ik.L": dip, "hand_ik.R": dip, "chest": dip},
        "reach": {"hand_ik.L": rise * far, "chest": rise * (0.15 * forward - 0.05 * up)},
        "walk": {"foot_ik.L": 0.25 * swing * forward + lift * np.clip(swing, 0.0, None),
                 "foot_ik.R": -0.25 * swing * forward + lift * np.clip(-swing, 0.0, None)},
    }


def key_controls(rig: bpy.types.Object, frames: int, paths: tuple[str, ...] = PATHS) -> None:
    """Key every control of ``control_paths`` at every frame of ``paths``, one after another from frame 1."""
    assert rig.pose is not None  # an armature
    offsets = control_paths(rig, frames)
    controls = sorted({control for path in paths for control in offsets[path]})
    chest = rig.ik_solvers.chains["chest"].target  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
    owners = {control: chest if control == "chest" else rig.pose.bones[control] for control in controls}
    rest = {control: np.array(owner.location) for control, owner in owners.items()}
    for index, path in enumerate(paths):
        for k in range(frames):
            for control, owner in owners.items():
                offset = offsets[path].get(control)
                owner.location = (rest[control] + (0.0 if offset is None else offset[k])).tolist()
                owner.keyframe_insert("location", frame=1 + index * frames + k)


def bake(rig: bpy.types.Object, first: int, last: int) -> float:
    """Our bake of the body over ``first … last``; seconds."""
    import bpy

    started = time.perf_counter()
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        baked = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=first, frame_end=last, all_chains=True)  # type: ignore[attr-defined]  # an operator registered at runtime
    assert baked == {"FINISHED"}, baked
    return time.perf_counter() - started


def evaluate(rig: bpy.types.Object, frame_end: int) -> dict[str, np.ndarray]:
    """Blender's evaluation at frames 1 … ``frame_end``: ``error_<chain> (F,)`` (the ORG follower's tip
    from the goal), ``backward (F,)`` (a knee or elbow of the ORG limbs bent > 1° against its rest
    bend), ``stretch (F,)`` (the ORG limb bones' largest length change, relative) and ``torso (F, 3)``."""
    import bpy

    scene = bpy.context.scene
    assert scene is not None and rig.pose is not None  # the setup's scene and armature
    world = np.array(rig.matrix_world)
    limbs = {name: chain_bones(rig, FOLLOWERS[name], 2) for name in FOLLOWERS if name != "chest"}
    rest_axes = {name: rest_geometry(rig, bones)[1] for name, bones in limbs.items()}
    lengths = {bone: rig.pose.bones[bone].bone.length for bones in limbs.values() for bone in bones}
    out: dict[str, list] = {key: [] for key in [f"error_{name}" for name in CHAINS] + ["stretch", "torso"]}
    joints: dict[str, list] = {name: [] for name in limbs}
    turns: dict[str, list] = {name: [] for name in limbs}
    for frame in range(1, frame_end + 1):
        scene.frame_set(frame)
        for name, follower in FOLLOWERS.items():
            tip = world[:3, :3] @ np.array(rig.pose.bones[follower].tail) + world[:3, 3]
            out[f"error_{name}"].append(np.linalg.norm(tip - goal_location(rig, name)))
        for name, bones in limbs.items():
            pose = [rig.pose.bones[b] for b in bones]
            joints[name].append([np.array(b.head) for b in pose] + [np.array(pose[-1].tail)])
            turns[name].append([(m := np.array(b.matrix)[:3, :3]) / np.linalg.norm(m, axis=0) for b in pose])
        out["stretch"].append(max(abs(np.linalg.norm(np.array(rig.pose.bones[b].tail) - np.array(rig.pose.bones[b].head))
                                      / length - 1.0) for b, length in lengths.items()))
        out["torso"].append(np.array(rig.pose.bones[BODY_ROOT].head))
    backward = np.zeros(frame_end, dtype=bool)
    for name in limbs:
        backward |= backward_joints(bend_angles(np.array(joints[name]), np.array(turns[name]), rest_axes[name])).any(axis=1)
    result = {key: np.array(values) for key, values in out.items()}
    result["backward"] = backward
    return result


def run(solver: str, frames: int) -> dict:
    """Set up the generated rig, animate its controls, bake (ours) or switch the limbs to IK (Rigify's),
    and measure every path."""
    import ik_solvers

    ik_solvers.register()
    try:
        fresh_scene()
        rig = generated_body()
        assert rig.pose is not None  # an armature
        key_controls(rig, frames)
        frame_end = frames * len(PATHS)
        seconds, statuses = None, {}
        if solver == "ours":
            seconds = bake(rig, 1, frame_end)
            statuses = {chain.name: json.loads(chain.last_bake_report)["goals"]["status_counts"]
                        for chain in rig.ik_solvers.chains}  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
        else:
            for name in IK_FK_SWITCHES:
                rig.pose.bones[name]["IK_FK"] = 0.0
        evaluated = evaluate(rig, frame_end)
    finally:
        ik_solvers.unregister()
    row: dict = {"solver": solver, "frames": frame_end, "bake_seconds": seconds, "statuses": statuses, "paths": {}}
    for k, path in enumerate(PATHS):
        span = slice(k * frames, (k + 1) * frames)
        torso = evaluated["torso"][span]
        row["paths"][path] = {
            "error_mm": {name: float(evaluated[f"error_{name}"][span].max() * 1000.0) for name in CHAINS
                         if solver == "ours" or name != "chest"},
            "backward_frames": int(evaluated["backward"][span].sum()),
            "stretch_percent": float(evaluated["stretch"][span].max() * 100.0),
            "torso_moved_mm": float(np.linalg.norm(torso - torso[0], axis=1).max() * 1000.0),
        }
    return row


def table_markdown(rows: list[dict], frames: int) -> str:
    caption = (
        f"`scripts/compare_body_generated.py`, {frames} frames per path on the rig Rigify generates from the "
        "human metarig, every figure from Blender's evaluation. Errors: the largest distance over the path of "
        "each goal (the IK controls' heads; the chest's Empty) from the tip of the ORG bones that follow the "
        "chain (mm; '–': Rigify has no chest goal). Backward: frames with a knee or elbow bent > 1° against its "
        "rest bend. Stretch: the ORG limb bones' largest length change. Torso: how far it moved.")
    names = list(CHAINS)
    lines = [caption, "", "| path | solver | " + " | ".join(f"{n} mm" for n in names)
             + " | backward | stretch % | torso moved mm |", "|---|---|" + "---:|" * (len(names) + 3)]
    for path in PATHS:
        for row in rows:
            cells = row["paths"][path]
            lines.append(f"| {path} | {row['solver']} | " + " | ".join(_fmt(cells["error_mm"].get(n)) for n in names)
                         + f" | {cells['backward_frames']} | {_fmt(cells['stretch_percent'])} "
                           f"| {_fmt(cells['torso_moved_mm'])} |")
    ours = next(row for row in rows if row["solver"] == "ours")
    lines += ["", f"Our bake: {_fmt(ours['bake_seconds'] / ours['frames'] * 1000.0)} ms per frame "
                  f"({ours['frames']} frames)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return run_main("compare_body_generated.py", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_body_generated.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=40, help="frames per path (default 40)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the table into, between the markers "
                                                 f"{GENERATED_MARKERS[0]} and {GENERATED_MARKERS[1]}")
    args = parser.parse_args(argv)
    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    if args.doc is not None:
        check_markers(args.doc, *GENERATED_MARKERS)
    import_bpy(register_addon=False)  # each solver registers the add-on in its own fresh scene
    rows = [run(solver, args.frames) for solver in SOLVERS]
    table = table_markdown(rows, args.frames)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=2))
    (args.out / "table.md").write_text(table)
    if args.doc is not None:
        paste_between_markers(args.doc, *GENERATED_MARKERS, table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
