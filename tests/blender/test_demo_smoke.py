"""scripts/demo.py end to end (a shorter animation): the files it writes, the report's content, and
the baked keys in demo.blend checked on Blender's own evaluation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bpy
import matplotlib.image
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
FRAMES = 60
ARM_REACH = 0.30 + 0.28  # upper arm and forearm of the demo's character (bones 0.3027 and 0.2828 long)


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("demo")
    process = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--out", str(out),
                              "--frames", str(FRAMES)], capture_output=True, text=True, env=dict(os.environ),
                             timeout=240)
    assert process.returncode == 0, process.stderr
    return out, process


def test_writes_the_files_and_prints_a_table(demo_out):
    out, process = demo_out
    for name in ("demo.blend", "report.json", "error_per_frame.png", "pole_distance.png", "side_view.png",
                 "body-solve.png"):
        assert (out / name).is_file(), name
    for name in ("error_per_frame.png", "pole_distance.png", "side_view.png"):
        image = matplotlib.image.imread(out / name)
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 500
        assert image[..., :3].std() > 0.05  # not a blank canvas
    assert "method" in process.stdout and "Arm   HI" in process.stdout and "Leg   HI" in process.stdout
    assert str(out / "demo.blend") in process.stdout


def test_report_content(demo_out):
    out, _ = demo_out
    report = json.loads((out / "report.json").read_text())
    assert report["frames"] == FRAMES
    assert list(report["chains"]["Arm"]) == ["DLS", "CCD", "FABRIK", "ANALYTIC", "HI"]
    for chain in ("Arm", "Leg"):
        for method, run in report["chains"][chain].items():
            assert sum(run["bake"]["status_counts"].values()) == FRAMES, (chain, method)
            assert run["bake"]["method"] == method
    hi = report["chains"]["Arm"]["HI"]
    counts = hi["bake"]["status_counts"]
    # The hand leaves the arm's reach and comes back; the closed form meets every frame's bound.
    assert counts["UNREACHABLE"] > 0 and counts["CONVERGED"] > 0
    assert counts["UNREACHABLE"] + counts["CONVERGED"] == FRAMES
    assert hi["evaluated"]["max_error_reachable"] < 1e-4
    assert hi["evaluated"]["max_excess_out_of_reach"] < 1e-4
    per_frame = report["hi_arm_per_frame"]
    assert len(per_frame["pole_distance_degrees"]) == FRAMES == len(per_frame["pole_warning"])
    # The hand passes over the shoulder: the EE axis comes near the pole and the frames are warned.
    warned = np.array(per_frame["pole_warning"])
    distance = np.array(per_frame["pole_distance_degrees"])
    assert warned.any() and np.array_equal(warned, distance < per_frame["warning_threshold_degrees"])
    # The bend-plane flips seen in Blender's evaluation are the ones the bake reported, and the
    # ones it calls pole crossings fall on warned frames.
    reported = hi["bake"]["flip_frames"]
    assert [f["frame"] for f in reported] == hi["evaluated"]["flip_frames"] and reported
    for flip, warned_flip in zip(reported, hi["evaluated"]["flips_warned"]):
        assert warned_flip or not flip["pole_crossing"]


def test_demo_blend_holds_the_bake(demo_out, addon):
    out, _ = demo_out
    bpy.ops.wm.open_mainfile(filepath=str(out / "demo.blend"), load_ui=False)
    rig = bpy.data.objects["Character"]
    chains = rig.ik_solvers.chains
    assert [c.name for c in chains] == ["Arm", "Leg"] and chains["Arm"].method == "HI"
    assert chains["Leg"].pole_target is not None and chains["Leg"].zero_plane_map == "POLE_OBJECT"
    channelbag = rig.animation_data.action.layers[0].strips[0].channelbag(rig.animation_data.action_slot)
    for bone in ("upper_arm", "forearm", "thigh", "shin"):
        fcurve = channelbag.fcurves.find(f'pose.bones["{bone}"].rotation_quaternion', index=0)
        assert fcurve is not None and len(fcurve.keyframe_points) == FRAMES, bone
    scene, target = bpy.context.scene, bpy.data.objects["HandTarget"]
    shoulder = np.array(rig.matrix_world @ rig.data.bones["upper_arm"].head_local)
    checked = 0
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        goal = np.array(target.matrix_world.translation)
        tip = np.array(rig.matrix_world @ rig.pose.bones["forearm"].tail)
        distance = np.linalg.norm(goal - shoulder)
        if distance < ARM_REACH - 0.01:
            assert np.linalg.norm(tip - goal) < 1e-5, frame
            checked += 1
        elif distance > ARM_REACH + 0.01:  # straight at the target, the error is the overshoot
            direction = (tip - shoulder) / np.linalg.norm(tip - shoulder)
            assert direction @ ((goal - shoulder) / distance) > 1 - 1e-6, frame
    assert checked > FRAMES // 2


def test_body_scene_picture_and_goals(demo_out):
    """The body scene (issue 22): Rigify's metarig posed by one body solve; the picture is drawn and the
    report has each goal's outcome — the feet, head and right hand met, the far left hand limited."""
    out, process = demo_out
    image = matplotlib.image.imread(out / "body-solve.png")
    assert image.ndim == 3 and image.shape[0] > 500 and image.shape[1] > 800 and image[..., :3].std() > 0.05
    report = json.loads((out / "report.json").read_text())
    assert report["figures"]["body_solve"] == "body-solve.png"
    body = report["body"]
    assert set(body) == {"ankle.L", "ankle.R", "head", "wrist.L", "wrist.R"}
    for goal in ("ankle.L", "ankle.R", "head", "wrist.R"):
        assert body[goal]["status"] == "REACHED" and body[goal]["error_mm"] < 0.01, goal
    assert body["wrist.L"]["status"] == "LIMITED" and body["wrist.L"]["error_mm"] > 10
    assert "Body solve (Rigify's human metarig" in process.stdout
