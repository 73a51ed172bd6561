"""Bone targets in real Blender (issue 20): an armature target with ``target_bone`` reaches for that
bone's evaluated head — on a second armature (moved by its own action and a constraint) and on a bone
of the chain's own armature that does not depend on the chain — in a solve, a bake and live mode;
bones that move with the chain are refused as a dependency cycle; the panel offers the bone search."""

from __future__ import annotations

from types import SimpleNamespace

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, build_armature, build_two_arms, evaluated_head, evaluated_tip
from test_panel import Recording, RecordingLayout

from ik_solvers.blender import panel


def build_controls():
    """A second armature: ``ctrl_root`` → ``ctrl`` (the goal bone, disconnected), away from the arm."""
    return build_armature([
        {"name": "ctrl_root", "head": (0.0, 0.0, 0.0), "tail": (0.0, 0.0, 0.1)},
        {"name": "ctrl", "head": (0.1, 0.0, 0.0), "tail": (0.1, 0.0, 0.1), "parent": "ctrl_root", "connect": False},
    ], name="Controls", location=(0.3, 0.1, 1.2))


def bone_chain(obj, target, bone, length=2, tip="forearm"):
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method = "Arm", tip, length, "SDLS"
    chain.target, chain.target_bone = target, bone
    bpy.context.view_layer.objects.active = obj
    return chain


def test_solve_reaches_a_bone_of_a_second_armature(addon):
    controls = build_controls()
    controls.pose.bones["ctrl_root"].rotation_quaternion = (0.96, 0.0, 0.0, 0.28)  # the goal hangs from it
    obj = build_arm()
    chain = bone_chain(obj, controls, "ctrl")
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    goal = evaluated_head(controls, "ctrl")
    assert np.linalg.norm(goal - np.array(controls.matrix_world.translation)) > 0.05  # not the object's origin
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), goal, atol=2e-6)
    assert chain.last_status == "CONVERGED"


def test_solve_reaches_an_independent_bone_of_the_same_armature(addon):
    obj = build_two_arms()
    obj.pose.bones["r_upper"].rotation_quaternion = (0.98, 0.0, 0.0, 0.2)
    bone_chain(obj, obj, "r_fore", tip="l_fore")
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    np.testing.assert_allclose(evaluated_tip(obj, "l_fore"), evaluated_head(obj, "r_fore"), atol=2e-6)


def test_bake_follows_a_target_bone_moved_by_its_action_and_a_constraint(addon):
    controls = build_controls()
    driver = add_empty("Driver", location=(0.0, 0.0, 0.0))
    follow = controls.pose.bones["ctrl_root"].constraints.new("COPY_LOCATION")
    follow.target, follow.use_offset = driver, True
    pose_bone = controls.pose.bones["ctrl"]
    for frame, location in ((1, (0.0, 0.0, 0.0)), (10, (0.05, 0.1, -0.05)), (20, (-0.1, 0.05, 0.1))):
        pose_bone.location = location
        pose_bone.keyframe_insert("location", frame=frame)
    for frame, location in ((1, (0.0, 0.0, 0.0)), (20, (0.0, 0.08, 0.0))):
        driver.location = location
        driver.keyframe_insert("location", frame=frame)
    obj = build_arm()
    chain = bone_chain(obj, controls, "ctrl")
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=20) == {"FINISHED"}
    assert chain.bake_mismatch_frames == 0 and chain.bake_frames == 20
    scene = bpy.context.scene
    for frame in (1, 5, 10, 15, 20):
        scene.frame_set(frame)
        np.testing.assert_allclose(evaluated_tip(obj, "forearm"), evaluated_head(controls, "ctrl"), atol=2e-5)


def test_live_mode_follows_a_moved_target_bone(addon):
    controls = build_controls()
    obj = build_arm()
    chain = bone_chain(obj, controls, "ctrl")
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    controls.pose.bones["ctrl"].location = (0.02, 0.1, -0.05)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), evaluated_head(controls, "ctrl"), atol=2e-6)
    controls.location = (0.25, 0.15, 1.25)  # the target armature itself moves
    bpy.context.view_layer.update()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), evaluated_head(controls, "ctrl"), atol=2e-6)
    assert chain.use_live


def _leg_with_extra_bones():
    return build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4)},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
        {"name": "hand", "head": (0.57, 0.08, 1.39), "tail": (0.65, 0.08, 1.39), "parent": "forearm"},
        {"name": "free", "head": (0.4, 0.2, 1.2), "tail": (0.4, 0.2, 1.3)},
    ])


@pytest.mark.parametrize("case", ["chain_bone", "child_of_chain", "constrained_to_chain", "driven_by_chain",
                                  "via_other_armature"])
def test_target_bones_that_move_with_the_chain_are_refused(addon, case):
    obj = _leg_with_extra_bones()
    target, bone = obj, {"chain_bone": "forearm", "child_of_chain": "hand"}.get(case, "free")
    if case == "constrained_to_chain":
        constraint = obj.pose.bones["free"].constraints.new("COPY_LOCATION")
        constraint.target, constraint.subtarget = obj, "forearm"
    if case == "driven_by_chain":
        fcurve = obj.pose.bones["free"].driver_add("location", 0)
        variable = fcurve.driver.variables.new()
        variable.type = "TRANSFORMS"
        variable.targets[0].id, variable.targets[0].bone_target = obj, "forearm"
        fcurve.driver.expression = variable.name
    if case == "via_other_armature":
        target = build_controls()
        bone = "ctrl"
        constraint = target.pose.bones["ctrl_root"].constraints.new("CHILD_OF")
        constraint.target, constraint.subtarget = obj, "hand"
    bone_chain(obj, target, bone)
    bpy.context.view_layer.objects.active = obj
    before = {b.name: tuple(b.rotation_quaternion) for b in obj.pose.bones}
    with pytest.raises(RuntimeError, match="depends on the chain"):
        bpy.ops.ik_solvers.solve()
    assert before == {b.name: tuple(b.rotation_quaternion) for b in obj.pose.bones}


def test_a_missing_target_bone_is_refused_in_one_sentence(addon):
    controls = build_controls()
    obj = build_arm()
    bone_chain(obj, controls, "nope")
    with pytest.raises(RuntimeError, match="'nope' is not a bone of 'Controls'"):
        bpy.ops.ik_solvers.solve()


def test_the_panel_offers_the_bone_search_only_for_an_armature_target(addon):
    controls = build_controls()
    obj = build_arm()
    chain = bone_chain(obj, add_empty(), "")

    def drawn_props():
        recording = Recording()
        panel.VIEW3D_PT_ik_solvers.draw(SimpleNamespace(layout=RecordingLayout(recording)), bpy.context)
        return [name for _, name in recording.props]

    assert "target_bone" not in drawn_props()
    chain.target = controls
    props = drawn_props()
    assert "target_bone" in props and "bones" in props


def test_changing_the_target_bone_while_live_reaches_the_new_bone(addon):
    controls = build_controls()
    obj = build_arm()
    chain = bone_chain(obj, controls, "ctrl")
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), evaluated_head(controls, "ctrl"), atol=2e-6)
    chain.target_bone = "ctrl_root"
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), evaluated_head(controls, "ctrl_root"), atol=2e-6)
    assert chain.use_live
