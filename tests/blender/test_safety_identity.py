"""Issue 10, chain identity: a chain remembers its bones. A deleted middle bone or a re-parented bone
is refused naming what changed (before, the chain silently grew to the next parent and replaced its
rotation keys); a renamed tip bone is followed; a tip bone or length the user picks is a new chain."""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature, evaluated_tip, pose_snapshot

from ik_solvers.blender.identity import TAG


def three_bone_arm():
    return build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "roll": 0.4},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
        {"name": "hand", "head": (0.57, 0.08, 1.39), "tail": (0.66, 0.1, 1.37), "parent": "forearm"},
        {"name": "other", "head": (0.0, 0.5, 1.4), "tail": (0.3, 0.5, 1.4)},
    ])


def added_chain(obj, target):
    """The chain added the way a user does: tip bone active, target selected, Add IK Chain."""
    obj.data.bones.active = obj.data.bones["hand"]
    target.select_set(True)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}
    chain = obj.ik_solvers.chains[0]
    chain.method = "SDLS"
    assert json.loads(chain.chain_bones) == ["forearm", "hand"]
    assert obj.data.bones["forearm"][TAG][chain.chain_id] == 0 and obj.data.bones["hand"][TAG][chain.chain_id] == 1
    return chain


def edit(obj, change):
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    change(obj.data.edit_bones)
    bpy.ops.object.mode_set(mode="OBJECT")


def test_a_deleted_middle_bone_is_refused_not_grown_into(addon):
    obj = three_bone_arm()
    chain = added_chain(obj, add_empty(location=(0.55, 0.15, 1.35)))
    edit(obj, lambda bones: bones.remove(bones["forearm"]))
    assert obj.data.bones["hand"].parent.name == "upper_arm"  # the chain would now reach the upper arm
    before = pose_snapshot(obj)
    message = ("Chain 'Chain': the chain's bones changed (bone 'forearm' was deleted): it would now run "
               "upper_arm → hand instead of forearm → hand; set its tip bone and length again.")
    for call in (bpy.ops.ik_solvers.solve, lambda: bpy.ops.ik_solvers.bake(frame_start=1, frame_end=3),
                 bpy.ops.ik_solvers.live_toggle):
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            call()
    assert pose_snapshot(obj) == before and obj.animation_data is None
    chain.tip_bone = "hand"  # the user sets the chain again: a new chain, remembered as it is now
    chain.chain_length = 1
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert json.loads(chain.chain_bones) == ["hand"]


def test_a_reparented_bone_is_refused_naming_the_new_parent(addon):
    obj = three_bone_arm()
    added_chain(obj, add_empty(location=(0.55, 0.15, 1.35)))

    def reparent(bones):
        bones["hand"].use_connect = False
        bones["hand"].parent = bones["other"]

    edit(obj, reparent)
    with pytest.raises(RuntimeError, match="bone 'hand' now has parent 'other' instead of 'forearm'"):
        bpy.ops.ik_solvers.solve()


def test_a_renamed_tip_bone_is_followed(addon):
    obj = three_bone_arm()
    target = add_empty(location=(0.55, 0.15, 1.35))
    chain = added_chain(obj, target)
    chain.method = "HI"  # reads the preferred pose by bone name: it must follow the renames too
    obj.data.bones["hand"].name = "hand.L"
    obj.data.bones["forearm"].name = "forearm.L"
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert chain.tip_bone == "hand.L"
    assert json.loads(chain.chain_bones) == ["forearm.L", "hand.L"]
    assert {item.bone_name for item in chain.preferred_pose} == {"forearm.L", "hand.L"}
    np.testing.assert_allclose(evaluated_tip(obj, "hand.L"), np.array(target.location), atol=1e-5)


def test_picking_another_tip_bone_or_length_is_a_new_chain_not_a_change(addon):
    obj = three_bone_arm()
    chain = added_chain(obj, add_empty(location=(0.45, 0.1, 1.35)))
    chain.has_preferred_pose = False  # captured for two bones by chain_add
    chain.chain_length = 3
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert json.loads(chain.chain_bones) == ["upper_arm", "forearm", "hand"]
    chain.tip_bone, chain.chain_length = "forearm", 2
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert json.loads(chain.chain_bones) == ["upper_arm", "forearm"]
    assert chain.chain_id not in obj.data.bones["hand"][TAG]  # its stale tag is gone


def test_a_live_chain_follows_its_renamed_tip_bone(addon):
    obj = three_bone_arm()
    target = add_empty(location=(0.55, 0.15, 1.35))
    chain = added_chain(obj, target)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    obj.data.bones["hand"].name = "hand.L"
    target.location.x -= 0.05
    bpy.context.view_layer.update()
    assert chain.use_live and chain.tip_bone == "hand.L" and chain.last_status != "ERROR", chain.last_message
    np.testing.assert_allclose(evaluated_tip(obj, "hand.L"), np.array(target.location), atol=1e-5)
