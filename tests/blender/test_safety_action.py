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


def tweaked_strip(obj, start=20.0, scale=2.0, repeat=1.0):
    """``obj``'s action 'Walk' (forearm keyed at 1 and 11) in an NLA strip at ``start``, scaled and
    repeated, in tweak mode."""
    anim_data = obj.animation_data_create()
    action = anim_data.action = bpy.data.actions.new("Walk")
    for frame in (1, 11):
        obj.pose.bones["forearm"].keyframe_insert("rotation_quaternion", frame=frame)
    anim_data.action = None
    track = anim_data.nla_tracks.new()
    strip = track.strips.new("Walk", int(start), action)
    strip.scale, strip.repeat = scale, repeat
    strip.select = True
    anim_data.nla_tracks.active = track
    anim_data.use_tweak_mode = True
    assert anim_data.action == action
    return action, strip


def forearm_key_times(action):
    bag = action.layers[0].strips[0].channelbags[0]
    return [k.co[0] for k in bag.fcurves.find('pose.bones["forearm"].rotation_quaternion', index=0).keyframe_points]


def test_a_bake_in_nla_tweak_mode_keys_the_actions_own_time_and_blender_shows_the_solve(addon):
    obj = build_arm()
    action, strip = tweaked_strip(obj)
    target = add_empty(location=(0.4, 0.1, 1.3))
    for frame, x in ((20, 0.4), (40, 0.3)):
        target.location.x = x
        target.keyframe_insert("location", frame=frame)
    chain = arm_chain(obj, target)
    assert bpy.ops.ik_solvers.bake(frame_start=24, frame_end=36, step=2) == {"FINISHED"}
    # scene frames 24, 26, …, 36 play action frames 3, 4, …, 9; the keys at 1 and 11 outside stay
    np.testing.assert_allclose(forearm_key_times(action), [1.0, *range(3, 10), 11.0])
    report = json.loads(chain.last_bake_report)
    assert report["evaluated_mismatch_frames"] == [] and report["evaluated_frames_checked"] == 7
    bpy.context.scene.frame_set(30)
    tip = np.array(obj.matrix_world @ obj.pose.bones["forearm"].tail)
    assert np.linalg.norm(tip - np.array(target.matrix_world.translation)) < 1e-4


def test_a_bake_in_tweak_mode_of_a_reversed_strip_is_refused(addon):
    obj = build_arm()
    _, strip = tweaked_strip(obj, scale=1.0)
    obj.animation_data.use_tweak_mode = False
    strip.use_reverse = True
    obj.animation_data.use_tweak_mode = True
    arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    with pytest.raises(RuntimeError, match=r"In NLA tweak mode, frames 22-26 do not map one to one into the tweaked "
                                           r"strip's action"):
        bpy.ops.ik_solvers.bake(frame_start=22, frame_end=26)


def test_a_bake_in_tweak_mode_of_a_repeated_strip_is_refused(addon):
    obj = build_arm()
    action, _ = tweaked_strip(obj, scale=1.0, repeat=2.0)
    arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    with pytest.raises(RuntimeError, match=r"In NLA tweak mode the tweaked action plays in the repeated strip 'Walk'; "
                                           r"set its Repeat to 1 or leave tweak mode to bake\."):
        bpy.ops.ik_solvers.bake(frame_start=28, frame_end=36)
    assert forearm_key_times(action) == [1.0, 11.0]


def test_ik_batch_in_nla_tweak_mode_checks_the_keys_at_the_actions_own_time(addon, tmp_path):
    """ik_batch's after-save check looked for the keys at the scene's frames, so a bake in tweak mode
    (keys in the action's own time, not whole frames here: scale 2.0) failed with "lacks keys"."""
    from test_ik_batch import run_batch

    obj = build_arm()
    tweaked_strip(obj, start=20.0, scale=2.0)
    target = add_empty(location=(0.4, 0.1, 1.3))
    for frame, x in ((20, 0.4), (40, 0.3)):
        target.location.x = x
        target.keyframe_insert("location", frame=frame)
    arm_chain(obj, target)
    shot, out = tmp_path / "tweak.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    run_batch(shot, "--output", out, "--frames", 25, 31)
    bpy.ops.wm.open_mainfile(filepath=str(out))
    times = forearm_key_times(bpy.data.actions["Walk"])
    # scene frames 25, 26, …, 31 play action frames 3.5, 4, …, 6.5; the keys at 1 and 11 outside stay
    np.testing.assert_allclose(times, [1.0, *np.arange(3.5, 7.0, 0.5), 11.0], atol=1e-5)
