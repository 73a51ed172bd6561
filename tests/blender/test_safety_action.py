"""Issue 21: the action a bake keys into. A local rig whose action is linked from a library is
refused up front, naming the cause (before: a finished bake with a warning about constraints or
NLA); in NLA tweak mode the keys go into the action's own time, mapped through the strip."""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm

from ik_solvers.blender.bake import BakeJob, BakeOptions
from ik_solvers.blender.errors import IKSolversError


def arm_chain(obj, target):
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    return chain


def linked_action(path):
    """An action 'Walk' keying the forearm, written to the library ``path`` and linked into a fresh file."""
    action = bpy.data.actions.new("Walk")
    obj = build_arm()
    obj.animation_data_create().action = action
    obj.pose.bones["forearm"].keyframe_insert("rotation_quaternion", frame=1)
    obj.animation_data.action = None
    bpy.data.libraries.write(str(path), {action}, fake_user=True)
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(str(path), link=True) as (_source, data):
        data.actions = ["Walk"]
    return data.actions[0]


LINKED = (r"The action 'Walk' of armature 'Rig' is linked from '.*lib\.blend' and cannot be keyed; "
          r"make the action local or override it first\.")


def test_a_local_rig_with_a_linked_action_is_refused_naming_the_action(addon, tmp_path):
    action = linked_action(tmp_path / "lib.blend")
    obj = build_arm()
    obj.animation_data_create().action = action
    assert action.library is not None
    chain = arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    keys = [tuple(k.co) for f in action.layers[0].strips[0].channelbags[0].fcurves for k in f.keyframe_points]
    with pytest.raises(RuntimeError, match=LINKED):
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=5)
    with pytest.raises(IKSolversError, match=LINKED):
        BakeJob(bpy.context, obj, BakeOptions(1, 5, 1, ("Arm",)))
    assert chain.last_bake_report == ""
    assert [tuple(k.co) for f in action.layers[0].strips[0].channelbags[0].fcurves for k in f.keyframe_points] == keys
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}  # posing at one frame keys nothing: allowed
