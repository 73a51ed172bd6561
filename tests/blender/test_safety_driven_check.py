"""Issue 21: the after-bake check (and sampling) on driven rigs. Drivers and constraints that read
nothing changing between frames (Rigify's: custom properties, bones nothing animates) no longer make
every frame evaluated twice: the keys alone move the chain there, so sampling reads F-curves and the
check asks Blender at a spread sample. Anything that follows animation, the frame or the chain's own
keys keeps the frame-by-frame path, and every frame is still checked."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature

from ik_solvers.blender import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import _measure
import _rigify_rigs as rr
import _rigify_runs as runs

FRAMES = 120


def driven_arm():
    """An arm below a shoulder whose Copy Rotation (toward an Empty 'Ctrl') has its influence driven by
    a custom property of the armature, as Rigify drives its switches; a target circling over FRAMES."""
    obj = build_armature([
        {"name": "leg", "head": (0.0, 0.1, 1.0), "tail": (0.0, 0.1, 0.5)},
        {"name": "shoulder", "head": (0.0, 0.0, 1.3), "tail": (0.0, 0.0, 1.4)},
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "parent": "shoulder"},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
    ])
    control = add_empty("Ctrl")
    control.rotation_euler = (0.0, 0.0, 0.2)
    follow = obj.pose.bones["shoulder"].constraints.new("COPY_ROTATION")
    follow.target = control
    obj["follow"] = 0.5
    driver = follow.driver_add("influence").driver
    variable = driver.variables.new()
    variable.targets[0].id, variable.targets[0].data_path = obj, '["follow"]'
    driver.expression = variable.name
    target = add_empty(location=(0.4, 0.1, 1.3))
    for frame in range(1, FRAMES + 1, 10):
        angle = 2.0 * math.pi * frame / FRAMES
        target.location = (0.25 + 0.2 * math.cos(angle), 0.1 + 0.2 * math.sin(angle), 1.3)
        target.keyframe_insert("location", frame=frame)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    bpy.context.scene.frame_set(1)
    return obj, chain, control, driver


def bake(chain):
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=FRAMES) == {"FINISHED"}
    return json.loads(chain.last_bake_report)


def assert_tip_on_target(obj, chain, frames):
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        tip = np.array(obj.matrix_world @ obj.pose.bones["forearm"].tail)
        assert np.linalg.norm(tip - np.array(chain.target.matrix_world.translation)) < 1e-4, frame


def test_drivers_and_constraints_on_nothing_that_changes_keep_the_cheap_path(addon):
    obj, chain, _, _ = driven_arm()
    report = bake(chain)
    assert report["sampling"] == "fcurves" and report["sampling_reasons"] == []
    assert report["evaluated_frames_checked"] <= 2 * verify.SPARSE_LIMIT
    assert report["evaluated_mismatch_frames"] == []
    assert_tip_on_target(obj, chain, range(1, FRAMES + 1, 7))


def test_an_animated_bone_that_cannot_reach_the_chain_keeps_the_cheap_path(addon):
    obj, chain, _, _ = driven_arm()
    leg = obj.pose.bones["leg"]
    leg.keyframe_insert("rotation_quaternion", frame=1)
    leg.rotation_quaternion = (0.9, 0.3, 0.0, 0.0)
    leg.keyframe_insert("rotation_quaternion", frame=FRAMES)
    report = bake(chain)
    assert report["sampling"] == "fcurves" and report["evaluated_frames_checked"] <= 2 * verify.SPARSE_LIMIT
    assert report["evaluated_mismatch_frames"] == []
    assert_tip_on_target(obj, chain, range(1, FRAMES + 1, 7))


@pytest.mark.parametrize("change", ["animated control", "frame in the driver", "driver reads the chain",
                                    "animated property", "animated bone the shoulder follows",
                                    "driver reads an animated bone"])
def test_anything_that_changes_between_frames_keeps_every_frame_evaluated(addon, change):
    obj, chain, control, driver = driven_arm()
    if change == "animated control":
        control.keyframe_insert("rotation_euler", frame=1)
        control.rotation_euler.z = 0.8
        control.keyframe_insert("rotation_euler", frame=FRAMES)
    elif change == "frame in the driver":
        driver.expression = "0.5 + 0.4 * sin(frame / 10)"
    elif change == "driver reads the chain":
        variable = driver.variables[0]
        variable.targets[0].data_path = 'pose.bones["forearm"].rotation_quaternion[3]'
        driver.expression = f"0.5 + {variable.name}"
    elif change == "animated bone the shoulder follows":
        follow = obj.pose.bones["shoulder"].constraints[0]
        follow.target, follow.subtarget = obj, "leg"
    elif change == "driver reads an animated bone":
        variable = driver.variables[0]
        variable.targets[0].data_path = 'pose.bones["leg"].rotation_quaternion[1]'
        driver.expression = f"0.5 + {variable.name}"
    else:
        obj.keyframe_insert('["follow"]', frame=1)
        obj["follow"] = 1.0
        obj.keyframe_insert('["follow"]', frame=FRAMES)
    if change in ("animated bone the shoulder follows", "driver reads an animated bone"):
        leg = obj.pose.bones["leg"]
        leg.keyframe_insert("rotation_quaternion", frame=1)
        leg.rotation_quaternion = (0.9, 0.3, 0.0, 0.0)
        leg.keyframe_insert("rotation_quaternion", frame=FRAMES)
    bpy.context.scene.frame_set(1)
    report = bake(chain)
    assert report["sampling"] == "evaluated" and report["sampling_reasons"]
    assert report["evaluated_frames_checked"] == FRAMES
    if change != "driver reads the chain":  # there the chain moves its own root: reported, not reached
        assert report["evaluated_mismatch_frames"] == []
        assert_tip_on_target(obj, chain, range(1, FRAMES + 1, 7))


@pytest.fixture
def rigify(addon):
    import addon_utils

    was_loaded = addon_utils.check("rigify")[1]
    rr.enable_rigify()
    yield addon
    rr.unregister_generated_rig_ui()
    if not was_loaded and addon_utils.check("rigify")[1]:
        addon_utils.disable("rigify", default_set=True)


def test_the_generated_rigify_rig_is_sampled_from_fcurves_and_checked_at_a_sample(rigify):
    setup = rr.generated_fk_arm(frames=20)
    chain = runs.add_chain(setup)
    runs.bake_ours(setup)
    report = json.loads(chain.last_bake_report)
    assert report["sampling"] == "fcurves", report["sampling_reasons"]
    assert report["evaluated_frames_checked"] <= 2 * verify.SPARSE_LIMIT < setup.frame_end
    assert report["evaluated_mismatch_frames"] == []
    joints, _, _ = runs.evaluate(setup)
    reachable = setup.reachable_mask()
    errors = _measure.tip_errors(joints, setup.targets)
    assert errors[reachable].max() < 1e-4


def test_an_armature_hanging_from_another_armatures_bone_that_follows_an_animated_empty_is_evaluated(addon):
    obj, chain, _, _ = driven_arm()
    holder = build_armature([{"name": "carrier", "head": (0.0, 0.0, 0.0), "tail": (0.0, 0.0, 0.2)}], name="Holder")
    mover = add_empty("Mover")
    mover.keyframe_insert("location", frame=1)
    mover.location = (0.05, 0.0, 0.0)
    mover.keyframe_insert("location", frame=FRAMES)
    holder.pose.bones["carrier"].constraints.new("COPY_LOCATION").target = mover
    obj.parent, obj.parent_type, obj.parent_bone = holder, "BONE", "carrier"
    bpy.context.view_layer.update()
    obj.matrix_parent_inverse = (obj.matrix_world @ obj.matrix_basis.inverted()).inverted()  # keep its place
    bpy.context.view_layer.objects.active = obj
    bpy.context.scene.frame_set(1)
    report = bake(chain)
    assert report["sampling"] == "evaluated" and "the armature has a parent that moves" in report["sampling_reasons"]
    assert report["evaluated_frames_checked"] == FRAMES and report["evaluated_mismatch_frames"] == []
    assert_tip_on_target(obj, chain, range(1, FRAMES + 1, 7))
