"""Live mode in real Blender: moving the target or changing the frame re-solves (Blender's evaluated
tip follows the target), our own writes never trigger another solve, the handlers leave with the
add-on, and a file load neither breaks nor stops a live chain."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, build_two_arms, evaluated_tip

import ik_solvers
from ik_solvers.blender import live, properties


@pytest.fixture
def living(addon):
    """The add-on registered (live mode's handlers and operator with it)."""
    return addon


def live_arm(method="DLS", target_location=(0.4, 0.1, 1.3)):
    obj = build_arm()
    target = add_empty(location=target_location)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, method
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    assert chain.use_live
    return obj, target, chain


def target_of(target) -> np.ndarray:
    return np.array(target.matrix_world.translation)


def test_turning_live_on_solves_at_once(living):
    obj, target, chain = live_arm()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), target_of(target), atol=2e-6)
    assert chain.last_status == "CONVERGED"


def test_moving_the_target_resolves_once_and_our_write_does_not_loop(living, live_solves):
    obj, target, chain = live_arm()
    solves = live_solves.count
    target.location = (0.25, 0.3, 1.2)
    bpy.context.view_layer.update()  # depsgraph_update_post → live solve → pose written
    assert live_solves.count == solves + 1
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), target_of(target), atol=2e-6)
    for _ in range(5):  # the written pose and status are depsgraph updates too: no further solve
        obj.ik_solvers.chains[0].last_message = obj.ik_solvers.chains[0].last_message
        bpy.context.view_layer.update()
    assert live_solves.count == solves + 1


def test_moving_the_armature_resolves(living):
    obj, target, chain = live_arm()
    obj.location = (0.05, -0.05, 0.02)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), target_of(target), atol=2e-6)


def test_frame_change_resolves_animated_target_and_keyed_bones(living, live_solves):
    obj, target, chain = live_arm()
    path = [(0.4, 0.1, 1.3), (0.2, 0.35, 1.5), (0.45, -0.2, 1.2)]
    for frame, location in zip((1, 10, 20), path):
        target.location = location
        target.keyframe_insert("location", frame=frame)
    obj.pose.bones["upper_arm"].keyframe_insert("rotation_quaternion", frame=1)  # resets the bone every frame
    scene = bpy.context.scene
    for frame in (10, 15, 20, 3):
        solves = live_solves.count
        scene.frame_set(frame)
        assert live_solves.count == solves + 1
        np.testing.assert_allclose(evaluated_tip(obj, "forearm"), target_of(target), atol=2e-6)


def test_two_live_chains_solve_without_recursion(living, live_solves):
    obj = build_two_arms()
    targets = {}
    for side, y in (("l", 0.3), ("r", -0.3)):
        targets[side] = add_empty(side, (0.4, y, 1.3))
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.target = side, f"{side}_fore", 2, targets[side]
        chain.use_live = True
    solves = live_solves.count
    targets["l"].location.z = 1.5
    targets["r"].location.z = 1.1
    bpy.context.view_layer.update()
    assert live_solves.count == solves + 2
    bpy.context.view_layer.update()
    assert live_solves.count == solves + 2
    for side in "lr":
        np.testing.assert_allclose(evaluated_tip(obj, f"{side}_fore"), target_of(targets[side]), atol=2e-6)


def test_a_chain_that_cannot_solve_reports_instead_of_raising(living):
    obj, target, chain = live_arm()
    pose = [tuple(b.rotation_quaternion) for b in obj.pose.bones]
    chain.tip_bone = "gone"
    target.location.x += 0.05
    bpy.context.view_layer.update()  # must not raise into Blender's handler loop
    assert chain.last_status == "ERROR" and "not found" in chain.last_message
    assert [tuple(b.rotation_quaternion) for b in obj.pose.bones] == pose


def test_live_toggle_refuses_a_chain_without_target(living):
    obj = build_arm()
    chain = obj.ik_solvers.chains.add()
    chain.tip_bone, chain.chain_length = "forearm", 2
    with pytest.raises(RuntimeError, match="has no target"):
        bpy.ops.ik_solvers.live_toggle()
    assert not chain.use_live


def test_toggling_off_stops_following(living):
    obj, target, chain = live_arm()
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    assert not chain.use_live
    tip = evaluated_tip(obj, "forearm")
    target.location.x -= 0.1
    bpy.context.view_layer.update()
    np.testing.assert_array_equal(evaluated_tip(obj, "forearm"), tip)


def test_unregister_removes_every_handler(living):
    obj, target, chain = live_arm()
    assert all(handler in getattr(bpy.app.handlers, name) for name, handler in live.HANDLERS)
    ik_solvers.unregister()
    try:
        for name, handler in live.HANDLERS:
            assert handler not in getattr(bpy.app.handlers, name)
        assert not hasattr(bpy.types, "IK_SOLVERS_OT_live_toggle")
        assert live.state.chains == {}
        assert live.forget_quick not in properties.solve_setting_listeners
        target.location = (0.2, 0.2, 1.2)
        bpy.context.view_layer.update()  # nothing left to react
        assert live.state.chains == {}
    finally:
        ik_solvers.register()  # the addon fixture unregisters at the end


def test_live_chain_survives_saving_and_loading_the_file(living, tmp_path):
    obj, target, chain = live_arm()
    path = str(tmp_path / "live.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    live.state.chains[(0, "stale entry")] = live.LiveChain(solved=((), b"x"))
    bpy.ops.wm.open_mainfile(filepath=path)
    assert (0, "stale entry") not in live.state.chains and not live.state.loading
    obj, target = bpy.data.objects["Rig"], bpy.data.objects["Target"]
    assert obj.ik_solvers.chains[0].use_live
    target.location = (0.3, -0.25, 1.45)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), target_of(target), atol=2e-6)


def test_live_hi_chain_keeps_the_pole_distance_current_for_the_flip_warning(living):
    from ik_solvers.blender.panel import pole_warning

    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "HI"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    far = chain.last_pole_distance
    assert far > chain.flip_threshold and pole_warning(chain) is None
    # The rest pose's plane normal n0 ∝ (0, 0.003, 0.024) from the shoulder (0, 0, 1.4): put the
    # target on that pole, as in the bake's pole-crossing test.
    n0 = np.array([0.0, 0.003, 0.024]) / np.linalg.norm([0.0, 0.003, 0.024])
    target.location = tuple(np.array([0.0, 0.0, 1.4]) + 0.4 * n0 + (0.01, 0.0, 0.0))
    bpy.context.view_layer.update()
    assert chain.last_pole_distance < np.radians(3.0)
    assert pole_warning(chain) is not None
