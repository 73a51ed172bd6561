"""Chain set-up in real Blender (issue 20): ``chain_add`` at any length (an operator property, the
redo panel's), a new target at the tip (as Shift+I), and a changed length setting the chain up again
(preferred pose, method, swivel) so that a solve with the target on the tip moves nothing."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, build_leg, evaluated_head, evaluated_tip


def joints(obj, names):
    bpy.context.view_layer.update()
    return np.array([evaluated_head(obj, name) for name in names] + [evaluated_tip(obj, names[-1])])


def select_tip(obj, bone):
    bpy.context.view_layer.objects.active = obj
    obj.data.bones.active = obj.data.bones[bone]


def bent_leg():
    obj = build_leg()
    obj.pose.bones["thigh"].rotation_quaternion = (0.98, 0.15, 0.0, 0.05)
    obj.pose.bones["shin"].rotation_quaternion = (0.95, -0.3, 0.02, 0.0)
    obj.pose.bones["foot"].rotation_quaternion = (0.97, 0.2, 0.1, 0.0)
    bpy.context.view_layer.update()
    return obj


@pytest.mark.parametrize("build, tip, length, bones", [
    (build_arm, "forearm", 2, ("upper_arm", "forearm")),
    (bent_leg, "foot", 3, ("thigh", "shin", "foot")),
])
def test_a_chain_added_with_a_target_at_its_tip_does_not_move_when_solved(addon, build, tip, length, bones):
    obj = build()
    select_tip(obj, tip)
    assert bpy.ops.ik_solvers.chain_add_with_target(chain_length=length) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.chain_length == length and chain.target is not None and chain.target.type == "EMPTY"
    np.testing.assert_allclose(np.array(chain.target.matrix_world.translation), evaluated_tip(obj, tip), atol=1e-6)
    before = joints(obj, bones)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert chain.method == "HI"
    np.testing.assert_allclose(joints(obj, bones), before, atol=1e-6)


def test_chain_add_takes_its_length_and_clips_it_to_the_bones_there_are(addon):
    obj = bent_leg()
    select_tip(obj, "foot")
    assert bpy.ops.ik_solvers.chain_add(chain_length=3) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.chain_length == 3 and chain.has_preferred_pose
    assert [item.bone_name for item in chain.preferred_pose] == ["thigh", "shin", "foot"]
    assert bpy.ops.ik_solvers.chain_add(chain_length=9) == {"FINISHED"}
    assert obj.ik_solvers.active_chain.chain_length == 4  # hip, thigh, shin, foot
    assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}
    assert obj.ik_solvers.active_chain.chain_length == 2  # the default, as before


def test_changing_the_length_sets_the_chain_up_again_and_nothing_moves(addon):
    obj = bent_leg()
    select_tip(obj, "foot")
    target = add_empty(location=tuple(evaluated_tip(obj, "foot")))
    target.select_set(True)
    assert bpy.ops.ik_solvers.chain_add(chain_length=2) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.target == target
    chain.method = "SDLS"
    chain.chain_length = 3
    assert [item.bone_name for item in chain.preferred_pose] == ["thigh", "shin", "foot"]
    assert chain.method == "HI"  # chosen as for a new chain of three bones
    before = joints(obj, ("thigh", "shin", "foot"))
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}, chain.last_message
    np.testing.assert_allclose(joints(obj, ("thigh", "shin", "foot")), before, atol=1e-6)
    chain.chain_length = 2
    assert [item.bone_name for item in chain.preferred_pose] == ["shin", "foot"]
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    np.testing.assert_allclose(joints(obj, ("thigh", "shin", "foot")), before, atol=1e-6)


def test_a_chain_never_set_up_keeps_its_settings_when_its_length_is_set(addon):
    obj = build_leg()
    chain = obj.ik_solvers.chains.add()
    chain.tip_bone, chain.method = "foot", "DLS"
    chain.chain_length = 3
    assert chain.method == "DLS" and not chain.has_preferred_pose


def test_snap_target_to_tip_moves_a_parented_empty_to_the_tip(addon):
    holder = add_empty("Holder", location=(0.2, -0.1, 0.3))
    holder.rotation_euler, holder.scale = (0.3, -0.2, 0.8), (1.4, 1.4, 1.4)
    target = add_empty(location=(0.1, 0.2, 0.3))
    target.parent = holder
    obj = build_arm()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.snap_target_to_tip() == {"FINISHED"}
    bpy.context.view_layer.update()
    np.testing.assert_allclose(np.array(target.matrix_world.translation), evaluated_tip(obj, "forearm"), atol=1e-6)
    assert target.parent == holder


def test_snap_target_to_tip_moves_a_target_bone(addon):
    from test_bone_targets import build_controls

    controls = build_controls()
    controls.pose.bones["ctrl_root"].rotation_quaternion = (0.96, 0.0, 0.0, 0.28)
    obj = build_arm()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method = "Arm", "forearm", 2, "SDLS"
    chain.target, chain.target_bone = controls, "ctrl"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.snap_target_to_tip() == {"FINISHED"}
    np.testing.assert_allclose(evaluated_head(controls, "ctrl"), evaluated_tip(obj, "forearm"), atol=1e-6)


def test_snap_target_to_tip_without_a_target_is_refused(addon):
    obj = build_arm()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone = "Arm", "forearm"
    bpy.context.view_layer.objects.active = obj
    with pytest.raises(RuntimeError, match="has no target"):
        bpy.ops.ik_solvers.snap_target_to_tip()
