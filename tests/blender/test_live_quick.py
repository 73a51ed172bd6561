"""Live mode's quick path (``live_quick.quick_update``) in real Blender: a move of the target alone re-solves
without the full update's checks of the armature, and poses exactly as the full update does; anything
that may have changed what those checks found sends the update through the full path."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, build_leg, build_two_arms, evaluated_tip

from ik_solvers.blender import live, live_quick
from ik_solvers.core.kinematics import local_quaternions

ARM_PATH = [(0.45, 0.1, 1.3), (0.3, 0.35, 1.55), (0.2, -0.2, 1.1), (0.5, 0.0, 1.45), (0.1, 0.1, 1.6)]
LEG_PATH = [(0.15, -0.1, 0.2), (0.3, 0.1, 0.3), (0.05, -0.3, 0.35), (0.1, 0.0, 0.1)]


@pytest.fixture
def paths(addon, monkeypatch):
    """Counts the updates that took the quick path and those that ran in full: read ``.quick`` / ``.full``."""
    from types import SimpleNamespace

    counter = SimpleNamespace(quick=0, full=0)
    quick, full = live_quick.quick_solve, live.update_live_chains

    def counting_quick(*args, **kwargs):
        counter.quick += 1
        return quick(*args, **kwargs)

    def counting_full(*args, **kwargs):
        counter.full += 1
        return full(*args, **kwargs)

    monkeypatch.setattr(live_quick, "quick_solve", counting_quick)
    monkeypatch.setattr(live, "update_live_chains", counting_full)
    counter.rotations = []  # the joints' local rotations (n, 4) each path wrote, in order
    write_quaternion_joints, write_pose = live_quick.write_quaternion_joints, live.write_pose

    def recording_quick_write(obj, rotations, indices):
        counter.rotations.append(np.array(rotations, dtype=float))
        return write_quaternion_joints(obj, rotations, indices)

    def recording_full_write(obj, rig, q):
        counter.rotations.append(local_quaternions(rig.chain, np.asarray(q)[None])[0])
        return write_pose(obj, rig, q)

    monkeypatch.setattr(live_quick, "write_quaternion_joints", recording_quick_write)
    for module in (live, live_quick):  # the full update's write, and the quick path's for other rotation modes
        monkeypatch.setattr(module, "write_pose", recording_full_write)
    return counter


def live_hi_chain(obj, tip: str, length: int, target, name: str = "Chain"):
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = name, tip, length, target, "HI"
    bpy.context.view_layer.objects.active = obj
    obj.ik_solvers.active_chain_index = len(obj.ik_solvers.chains) - 1
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    assert chain.use_live
    return chain


def channels(obj) -> list[tuple[float, ...]]:
    return [tuple(pose_bone.rotation_quaternion) for pose_bone in obj.pose.bones]


def assert_full_update_writes_the_same(paths) -> None:
    """The full update, forced to solve the current inputs again, writes the same joint rotations
    bit for bit as the quick path's last write (the channels may differ in the last float32 place:
    a written quaternion keeps the length of the one it replaces)."""
    written = len(paths.rotations)
    live.update_live_chains(bpy.context.scene, bpy.context.evaluated_depsgraph_get(), force=True)
    assert len(paths.rotations) == written + 1
    assert paths.rotations[-1].tobytes() == paths.rotations[-2].tobytes()
    bpy.context.view_layer.update()  # that write, made outside a depsgraph update, is an update of the armature


@pytest.mark.parametrize("rig", ["arm", "leg", "arm with a pole-object map", "arm with an Euler forearm",
                                 "arm solved by DLS"])
def test_target_moves_take_the_quick_path_and_pose_as_the_full_update(paths, rig):
    obj, tip, length, path = ((build_leg(), "foot", 3, LEG_PATH) if rig == "leg"
                              else (build_arm(), "forearm", 2, ARM_PATH))
    target = add_empty(location=path[-1])
    if rig == "arm with an Euler forearm":  # written by write_pose, the one-target solve still
        obj.pose.bones["forearm"].rotation_mode = "YXZ"
    chain = live_hi_chain(obj, tip, length, target)
    if rig == "arm solved by DLS":  # no one-target solve: sampled and solved as in the full update
        chain.method = "DLS"
        bpy.context.view_layer.update()
    if rig == "leg":  # a root that is not the identity: the hip bone turned
        obj.pose.bones["hip"].rotation_quaternion = (0.96, 0.1, -0.2, 0.15)
        bpy.context.view_layer.update()
    if rig == "arm with a pole-object map":
        chain.pole_target = add_empty("Pole", location=(0.3, -0.5, 1.0))
        chain.zero_plane_map = "POLE_OBJECT"
        bpy.context.view_layer.update()
    for location in path:
        quick, full = paths.quick, paths.full
        target.location = location
        bpy.context.view_layer.update()
        assert (paths.quick, paths.full) == (quick + 1, full)
        assert chain.last_status in ("CONVERGED", "UNREACHABLE")
        if chain.last_status == "CONVERGED":
            np.testing.assert_allclose(evaluated_tip(obj, tip), location, atol=2e-6)
        assert_full_update_writes_the_same(paths)


@pytest.mark.parametrize("setting, value, moves_plane", [("swivel_angle", 0.7, True),
                                                         ("zero_plane_map", "POLE_OBJECT", True),
                                                         ("tolerance", 1e-3, False)])
def test_a_setting_changed_between_moves_is_solved_with(paths, setting, value, moves_plane):
    """A chain setting set from Python (or the UI) makes the next update a full one, which solves with it."""
    obj = build_arm()
    target = add_empty(location=ARM_PATH[0])
    chain = live_hi_chain(obj, "forearm", 2, target)
    chain.pole_target = add_empty("Pole", location=(0.3, -0.5, 1.0))  # only the pole-object map reads it
    bpy.context.view_layer.update()
    target.location = ARM_PATH[1]
    bpy.context.view_layer.update()
    before, quick = paths.rotations[-1], paths.quick
    setattr(chain, setting, value)
    assert not live.state.quick
    target.location = ARM_PATH[2]
    bpy.context.view_layer.update()
    target.location = ARM_PATH[1]
    bpy.context.view_layer.update()
    assert paths.quick == quick + 1  # the first move after the change ran in full, the second quick
    assert (paths.rotations[-1].tobytes() != before.tobytes()) == moves_plane
    assert_full_update_writes_the_same(paths)


def test_an_armature_update_runs_in_full_and_the_next_move_is_quick_again(paths):
    obj = build_leg()
    target = add_empty(location=LEG_PATH[0])
    live_hi_chain(obj, "foot", 3, target)
    full = paths.full
    obj.pose.bones["hip"].rotation_quaternion = (0.9, 0.0, 0.3, 0.3)  # the chain's root turns
    bpy.context.view_layer.update()
    assert paths.full == full + 1
    np.testing.assert_allclose(evaluated_tip(obj, "foot"), LEG_PATH[0], atol=2e-6)
    quick = paths.quick
    target.location = LEG_PATH[1]
    bpy.context.view_layer.update()
    assert paths.quick == quick + 1
    np.testing.assert_allclose(evaluated_tip(obj, "foot"), LEG_PATH[1], atol=2e-6)


def test_a_chain_whose_root_hangs_from_another_live_chain_is_never_quick(paths):
    obj = build_leg()
    knee_target = add_empty("Knee", location=(0.1, -0.05, 0.45))
    foot_target = add_empty("Foot", location=LEG_PATH[0])
    live_hi_chain(obj, "thigh", 2, knee_target, name="Upper")  # hip → thigh (no bone shared with Lower)
    live_hi_chain(obj, "foot", 1 + 1, foot_target, name="Lower")  # shin → foot: its root is the thigh
    assert (obj.session_uid, "Lower") not in live.state.quick and live.state.quick_scene is None
    quick, full = paths.quick, paths.full
    foot_target.location = LEG_PATH[1]
    bpy.context.view_layer.update()
    assert (paths.quick, paths.full) == (quick, full + 1)


def test_independent_chains_of_one_armature_are_both_quick(paths):
    obj = build_two_arms()
    targets = {side: add_empty(side, (0.45, y, 1.3)) for side, y in (("l", 0.3), ("r", -0.3))}
    for side in "lr":
        live_hi_chain(obj, f"{side}_fore", 2, targets[side], name=side)
    assert set(live.state.quick) == {(obj.session_uid, "l"), (obj.session_uid, "r")}
    quick = paths.quick
    targets["l"].location.z = 1.5
    bpy.context.view_layer.update()
    assert paths.quick == quick + 2  # both chains looked at; only the left one's inputs changed
    for side in "lr":
        np.testing.assert_allclose(evaluated_tip(obj, f"{side}_fore"), np.array(targets[side].location), atol=2e-6)


def test_undo_and_a_live_toggle_forget_the_quick_path(paths):
    obj = build_arm()
    target = add_empty(location=ARM_PATH[0])
    chain = live_hi_chain(obj, "forearm", 2, target)
    assert live.state.quick
    live.on_undo_redo()
    assert not live.state.quick
    full = paths.full
    target.location = ARM_PATH[1]
    bpy.context.view_layer.update()
    assert paths.full == full + 1 and live.state.quick
    chain.use_live = False
    assert not live.state.quick


def test_a_target_made_to_depend_on_the_chain_turns_live_off(paths):
    obj = build_arm()
    target = add_empty(location=ARM_PATH[0])
    chain = live_hi_chain(obj, "forearm", 2, target)
    constraint = target.constraints.new("COPY_LOCATION")
    constraint.target, constraint.subtarget = obj, "forearm"
    bpy.context.view_layer.update()
    assert not chain.use_live
    assert "depends on the chain" in chain.last_message


def test_an_armature_taken_out_of_the_scene_is_not_solved_by_the_next_move(paths):
    obj = build_arm()
    target = add_empty(location=ARM_PATH[0])
    live_hi_chain(obj, "forearm", 2, target)
    bpy.context.scene.collection.objects.unlink(obj)
    bpy.context.view_layer.update()
    written, quick = len(paths.rotations), paths.quick
    target.location = ARM_PATH[1]
    bpy.context.view_layer.update()
    assert (len(paths.rotations), paths.quick) == (written, quick)


def test_the_transform_tools_translate_moves_the_target_by_the_quick_path(paths):
    """``transform.translate`` (the viewport's Move, here run without a window) tags the moved object
    alone, so its moves take the quick path: what a user dragging the target gets."""
    obj = build_arm()
    target = add_empty(location=ARM_PATH[0])
    live_hi_chain(obj, "forearm", 2, target)
    for selected in bpy.context.view_layer.objects:
        selected.select_set(False)
    target.select_set(True)  # selecting is an update of the scene, which forgets the quick path
    bpy.context.view_layer.objects.active = target
    bpy.context.view_layer.update()
    full = paths.full
    assert bpy.ops.transform.translate(value=(0.02, 0.01, -0.01)) == {"FINISHED"}
    bpy.context.view_layer.update()
    assert paths.full == full + 1  # the first move after it runs in full, and offers the quick path again
    for _ in range(3):
        quick = paths.quick
        assert bpy.ops.transform.translate(value=(-0.03, 0.02, 0.01)) == {"FINISHED"}
        bpy.context.view_layer.update()
        assert paths.quick == quick + 1
        np.testing.assert_allclose(evaluated_tip(obj, "forearm"), np.array(target.matrix_world.translation), atol=2e-6)


def test_a_turn_of_the_targets_parent_re_solves_in_ik_target_parent_space(paths):
    """With the IK Target parent space the sphere rides with the target's parent: turning the parent
    about the target (which stays where it is) turns the solver plane, and the quick path, which
    samples every input for such a chain, solves it again as the full update would."""
    obj = build_arm()
    holder = add_empty("Holder", location=ARM_PATH[1])
    target = add_empty(location=(0.0, 0.0, 0.0))
    target.parent = holder
    chain = live_hi_chain(obj, "forearm", 2, target)
    chain.parent_space = "IK_TARGET"
    bpy.context.view_layer.update()
    before, quick = paths.rotations[-1], paths.quick
    holder.rotation_euler = (0.0, 0.0, 0.6)
    bpy.context.view_layer.update()
    assert paths.quick == quick + 1
    assert paths.rotations[-1].tobytes() != before.tobytes()
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), ARM_PATH[1], atol=2e-6)
    assert_full_update_writes_the_same(paths)
