"""Orientation goals in real Blender (issue 20, SPEC §5/§6): with ``use_rotation`` the tip bone's world
axes take the target's, measured on Blender's evaluated pose-bone matrices — HI by the leg-and-foot
split (a foot kept flat through a squat), the Jacobian methods by their angular rows — and the
orientation error is reported in the chain's status and the bake report."""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature, build_leg
from mathutils import Matrix


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (radians) between two rotation matrices (scale removed)."""
    ua, _, va = np.linalg.svd(a[:3, :3])
    ub, _, vb = np.linalg.svd(b[:3, :3])
    relative = (ua @ va) @ (ub @ vb).T
    return float(2.0 * np.arcsin(min(1.0, np.linalg.norm(relative - np.eye(3)) / (2.0 * np.sqrt(2.0)))))


def _foot_world(obj) -> np.ndarray:
    bpy.context.view_layer.update()
    return np.array(obj.matrix_world @ obj.pose.bones["foot"].matrix)


def _leg_chain(method: str, bent_knee: bool = True):
    """The 3-bone leg (thigh, shin, foot below a hip), its preferred pose a bent knee, a target Empty
    with the foot's rest orientation ("flat") at the foot's tip."""
    obj = build_leg()
    bpy.context.view_layer.objects.active = obj
    flat = _foot_world(obj)
    tip = np.array(obj.matrix_world @ obj.pose.bones["foot"].tail)
    if bent_knee:
        obj.pose.bones["thigh"].rotation_quaternion = (0.97, -0.24, 0.0, 0.0)
        obj.pose.bones["shin"].rotation_quaternion = (0.9, 0.43, 0.0, 0.0)
    bpy.context.view_layer.update()
    target = add_empty("Target", tuple(tip))
    target.rotation_mode = "QUATERNION"
    target.rotation_quaternion = Matrix(flat[:3, :3].tolist()).to_quaternion()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Leg", "foot", 3, target, method
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    return obj, chain, target


def test_hi_keeps_the_foot_flat_through_a_squat_and_reaches_the_target(addon):
    obj, chain, target = _leg_chain("HI")
    chain.use_rotation = True
    start = np.array(target.location)
    frames = list(range(1, 31))
    for frame in frames:  # the foot rises toward the hip: the leg squats
        target.location = tuple(start + np.array([0.0, 0.0, 0.5 * (frame - 1) / 29]))
        target.keyframe_insert("location", frame=frame)
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30) == {"FINISHED"}, chain.last_message
    worst_angle, worst_offset = 0.0, 0.0
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        foot = _foot_world(obj)
        worst_angle = max(worst_angle, _angle(foot, np.array(target.matrix_world)))
        tail = np.array(obj.matrix_world @ obj.pose.bones["foot"].tail)
        worst_offset = max(worst_offset, float(np.linalg.norm(tail - np.array(target.matrix_world.translation))))
    assert np.degrees(worst_angle) <= 0.1
    assert worst_offset <= 1e-5
    report = json.loads(chain.last_bake_report)
    assert report["max_orientation_error_degrees"] <= 0.1
    assert chain.bake_max_orientation_error == pytest.approx(np.radians(report["max_orientation_error_degrees"]))
    # The knee bent its preferred way the whole squat (no pop to the other side).
    assert report["status_counts"]["CONVERGED"] == 30


def test_without_rotation_the_squat_turns_the_foot(addon):
    obj, chain, target = _leg_chain("HI")
    target.location = tuple(np.array(target.location) + np.array([0.0, 0.0, 0.4]))
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert np.degrees(_angle(_foot_world(obj), np.array(target.matrix_world))) > 5.0
    chain.use_rotation = True
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}, chain.last_message
    measured = _angle(_foot_world(obj), np.array(target.matrix_world))
    assert np.degrees(measured) <= 0.1
    assert chain.last_orientation_error == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("method", ["SDLS", "DLS"])
def test_jacobian_methods_turn_the_tip_bone_to_a_turned_target_and_report_the_error(addon, method):
    obj, chain, target = _leg_chain(method)
    target.location = tuple(np.array(target.location) + np.array([0.05, 0.05, 0.25]))
    target.rotation_quaternion = (Matrix.Rotation(0.4, 3, "X") @ target.rotation_quaternion.to_matrix()).to_quaternion()
    bpy.context.view_layer.update()
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    off = _angle(_foot_world(obj), np.array(target.matrix_world))
    chain.use_rotation, chain.max_iterations = True, 500
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}, chain.last_message
    measured = _angle(_foot_world(obj), np.array(target.matrix_world))
    assert measured < 0.1 * off
    assert np.degrees(measured) <= 1.0
    assert chain.last_orientation_error == pytest.approx(measured, abs=1e-5)
    tail = np.array(obj.matrix_world @ obj.pose.bones["foot"].tail)
    assert np.linalg.norm(tail - np.array(target.matrix_world.translation)) <= 1e-3


@pytest.mark.parametrize(("method", "length"), [("CCD", 3), ("FABRIK", 3), ("HI", 2)])
def test_a_chain_that_cannot_take_the_rotation_is_refused_naming_it(addon, method, length):
    obj, chain, target = _leg_chain("HI")
    chain.chain_length = length
    chain.method = method
    chain.use_rotation = True
    before = _foot_world(obj)
    with pytest.raises(RuntimeError, match="Rotation"):
        bpy.ops.ik_solvers.solve()
    np.testing.assert_array_equal(_foot_world(obj), before)


@pytest.mark.parametrize("method", ["HI", "SDLS"])
def test_a_target_bone_gives_its_world_orientation_under_a_turned_hip_and_a_moved_armature(addon, method):
    obj, chain, target = _leg_chain(method)
    obj.rotation_euler, obj.location = (0.1, -0.2, 0.3), (0.2, 0.1, -0.1)
    obj.pose.bones["hip"].rotation_quaternion = (0.96, 0.1, -0.2, 0.15)
    bpy.context.view_layer.update()
    tip = np.array(obj.matrix_world @ obj.pose.bones["foot"].tail) + np.array([0.02, -0.03, 0.35])
    controls = build_armature([{"name": "foot_ik", "head": tuple(tip), "tail": tuple(tip + [0.0, 0.1, 0.0])}],
                              name="Controls", rotation_euler=(0.0, 0.0, 0.0))
    controls.pose.bones["foot_ik"].rotation_mode = "QUATERNION"
    controls.pose.bones["foot_ik"].rotation_quaternion = (0.9, 0.3, -0.2, 0.25)
    bpy.context.view_layer.objects.active = obj
    chain.target, chain.target_bone, chain.use_rotation, chain.max_iterations = controls, "foot_ik", True, 500
    bpy.context.view_layer.update()
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}, chain.last_message
    goal = np.array(controls.matrix_world @ controls.pose.bones["foot_ik"].matrix)
    measured = _angle(_foot_world(obj), goal)
    assert np.degrees(measured) <= (0.1 if method == "HI" else 1.0)
    assert chain.last_orientation_error == pytest.approx(measured, abs=1e-5)
    tail = np.array(obj.matrix_world @ obj.pose.bones["foot"].tail)
    assert np.linalg.norm(tail - goal[:3, 3]) <= (1e-5 if method == "HI" else 1e-3)


def test_the_panel_draws_rotation_settings_and_the_orientation_errors(addon):
    from test_panel import assert_everything_resolves, draw_all

    obj, chain, target = _leg_chain("SDLS")
    drawn = draw_all(bpy.context)
    assert (chain, "use_rotation") in drawn.props and (chain, "rotation_weight") not in drawn.props
    assert not [text for text, _ in drawn.labels if "Orientation error" in text]
    chain.use_rotation = True
    target.location = tuple(np.array(target.location) + np.array([0.0, 0.0, 0.2]))
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=2) == {"FINISHED"}
    drawn = draw_all(bpy.context)
    assert_everything_resolves(drawn)
    assert (chain, "rotation_weight") in drawn.props
    degrees = np.degrees(chain.last_orientation_error)
    assert f"Orientation error: {degrees:.3g}°" in [text for text, _ in drawn.labels]
    assert [text for text, _ in drawn.labels if text.startswith("Max orientation error: ")]
    chain.method = "HI"
    assert (chain, "rotation_weight") not in draw_all(bpy.context).props  # HI aligns exactly: no weight


@pytest.mark.parametrize("method", ["HI", "SDLS"])
def test_live_mode_follows_a_target_that_only_turns(addon, method):
    obj, chain, target = _leg_chain(method)
    chain.use_rotation, chain.max_iterations = True, 500
    target.location = tuple(np.array(target.location) + np.array([0.0, 0.0, 0.3]))
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    _foot_world(obj)
    for angle in (0.3, -0.25):  # the second turn takes live mode's quick path (a move of an Empty only)
        target.rotation_quaternion = (Matrix.Rotation(angle, 3, "Y") @ target.rotation_quaternion.to_matrix()
                                      ).to_quaternion()
        foot = _foot_world(obj)
        assert chain.use_live, chain.last_message
        assert np.degrees(_angle(foot, np.array(target.matrix_world))) <= (0.1 if method == "HI" else 1.0)
        assert chain.last_orientation_error == pytest.approx(_angle(foot, np.array(target.matrix_world)), abs=1e-5)
