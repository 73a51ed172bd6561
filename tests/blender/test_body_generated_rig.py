"""The body solve (issue 22, SPEC §8) on the rig Rigify generates from the human metarig, its own IK
controls as bone goals.

The body: the generated rig's FK controls as chains (``thigh_fk → shin_fk`` to the ankle,
``upper_arm_fk → forearm_fk`` to the wrist, the chest's ``spine_fk.003``), its ``torso`` control as
the body root, and as goals the rig's IK controls ``foot_ik.L/R`` and ``hand_ik.L/R`` (bone targets:
their heads sit on the ankles and wrists) and an Empty for the chest. With the limbs' IK/FK switch
on FK, Rigify's ORG and DEF bones follow the FK controls, so baking the IK controls' animation into
FK keys is the IK → FK bake an animator of such a rig asks for.

What the product refuses on that rig, each in one sentence: Rigify's IK controls as they come (their
parent switch, an Armature constraint, lists the torso among its parents: they would ride on the
body's root the moment an animator switched parent), and the head control as the chest's goal (it
hangs from the chest). With the IK controls' parent switch muted (they then stay in the rig's space,
as at their default parent ``root`` while the root bone is not posed), they are the body's goals.
Chains on the ORG bones, which Copy Transforms constraints pose after our keys, are baked and each
chain's mismatch with Blender's evaluation is said in one sentence.

Every position is read from Blender's own evaluation of the pose or of the baked keys.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from bpy_extras.anim_utils import animdata_get_channelbag_for_assigned_slot
from conftest import add_empty, pose_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import _rigify_rigs as rr
from _measure import backward_joints, bend_angles

CHAINS = {  # name → (tip bone, bones, priority, goal: the rig's own control, or None for an Empty at the tip)
    "leg.L": ("shin_fk.L", 2, 2, "foot_ik.L"),
    "leg.R": ("shin_fk.R", 2, 2, "foot_ik.R"),
    "arm.L": ("forearm_fk.L", 2, 1, "hand_ik.L"),
    "arm.R": ("forearm_fk.R", 2, 1, "hand_ik.R"),
    "chest": ("spine_fk.003", 1, 0, None),
}
BODY_ROOT = "torso"
PARENT_SWITCHES = ("MCH-foot_ik.parent.L", "MCH-foot_ik.parent.R", "MCH-hand_ik.parent.L", "MCH-hand_ik.parent.R")
"""The bones whose ``SWITCH_PARENT`` Armature constraint carries each IK control."""
FOLLOWERS = {"leg.L": "ORG-shin.L", "leg.R": "ORG-shin.R", "arm.L": "ORG-forearm.L", "arm.R": "ORG-forearm.R"}
"""The ORG bone whose tail follows each limb chain's tip (the limbs' IK/FK switch on FK)."""
REACHED = 1e-5
"""0.01 mm on the ~1.9 m rig: Blender's float32 evaluation sits well inside it."""
FRAMES = 6
"""Frames per path (crouch, then reach)."""

pytestmark = pytest.mark.usefixtures("rigify_enabled")


def generated_body(*, mute_parent_switches: bool = True):
    """The generated rig with the five chains, goals at their tips, solved together from the torso."""
    _, rig = rr.generate_human_rig()
    if mute_parent_switches:
        for name in PARENT_SWITCHES:
            rig.pose.bones[name].constraints["SWITCH_PARENT"].mute = True
    for name, (tip, count, priority, control) in CHAINS.items():
        chain = rig.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.priority = name, tip, count, priority
        if control is None:
            chain.target = add_empty(f"goal.{name}", rig.matrix_world @ rig.pose.bones[tip].tail)
        else:
            chain.target, chain.target_bone = rig, control
    rig.ik_solvers.solve_together = True
    rig.ik_solvers.body_root = BODY_ROOT
    bpy.context.view_layer.objects.active = rig
    bpy.context.view_layer.update()
    return rig


@pytest.fixture
def rig(addon):
    return generated_body()


def _goal(rig, name) -> np.ndarray:
    chain = rig.ik_solvers.chains[name]
    if chain.target_bone:
        return np.array(rig.matrix_world @ rig.pose.bones[chain.target_bone].head)
    return np.array(chain.target.matrix_world.translation)


def _errors(rig) -> dict[str, float]:
    """Each goal's distance from its chain's tip, and each limb's ORG follower's (``ORG:`` names)."""
    bpy.context.view_layer.update()
    out = {}
    for name, (tip, _, _, _) in CHAINS.items():
        out[name] = float(np.linalg.norm(np.array(rig.matrix_world @ rig.pose.bones[tip].tail) - _goal(rig, name)))
        if name in FOLLOWERS:
            follower = np.array(rig.matrix_world @ rig.pose.bones[FOLLOWERS[name]].tail)
            out[f"ORG:{name}"] = float(np.linalg.norm(follower - _goal(rig, name)))
    return out


def _one_sentence(error: RuntimeError) -> str:
    text = str(error).strip()
    assert "\n" not in text and text.endswith("."), text
    return text


def _solve(rig):
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        return bpy.ops.ik_solvers.solve(all_chains=True)


def _bake(rig, first, last):
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        return bpy.ops.ik_solvers.bake(frame_start=first, frame_end=last, all_chains=True)


def test_rigify_ik_controls_that_can_switch_parent_to_the_torso_are_refused_in_one_sentence(addon):
    rig = generated_body(mute_parent_switches=False)
    before = pose_snapshot(rig)
    with pytest.raises(RuntimeError) as refused:
        _solve(rig)
    assert ("the target bone 'foot_ik.L' depends on the chain: constraint 'SWITCH_PARENT' of bone "
            "'MCH-foot_ik.parent.L' of 'rig' follows bone 'torso'") in _one_sentence(refused.value)
    with pytest.raises(RuntimeError, match="SWITCH_PARENT"):
        _bake(rig, 1, 3)
    assert pose_snapshot(rig) == before and rig.animation_data.action is None


def test_the_head_control_as_the_chests_goal_is_refused_in_one_sentence(rig):
    chest = rig.ik_solvers.chains["chest"]
    chest.target, chest.target_bone = rig, "head"  # the head hangs from the chest (spine_fk.003 → neck → head)
    with pytest.raises(RuntimeError) as refused:
        _solve(rig)
    assert "the target bone 'head' depends on the chain" in _one_sentence(refused.value)


def test_the_rigs_own_drivers_do_not_refuse_its_controls_but_one_that_reads_a_chain_bone_does(rig):
    """The generated rig's finger drivers read finger bones that hang from the arms: they move those
    fingers, not the hand_ik control (refused before, as if the whole armature followed them)."""
    assert any("f_index" in fcurve.data_path for fcurve in rig.animation_data.drivers)
    assert _solve(rig) == {"FINISHED"}
    fcurve = rig.pose.bones["MCH-hand_ik.parent.L"].driver_add("location", 0)
    variable = fcurve.driver.variables.new()
    variable.type = "TRANSFORMS"
    variable.targets[0].id, variable.targets[0].bone_target = rig, "forearm_fk.L"
    fcurve.driver.expression = f"0.0 * {variable.name}"
    with pytest.raises(RuntimeError) as refused:
        _solve(rig)
    assert ("the target bone 'hand_ik.L' depends on the chain: the driver of 'rig' "
            "pose.bones[\"MCH-hand_ik.parent.L\"].location reads bone 'forearm_fk.L'") in _one_sentence(refused.value)


def test_goals_at_their_tips_move_nothing(rig):
    before = np.array([[rig.matrix_world @ b.head, rig.matrix_world @ b.tail] for b in rig.pose.bones])
    assert _solve(rig) == {"FINISHED"}
    bpy.context.view_layer.update()
    after = np.array([[rig.matrix_world @ b.head, rig.matrix_world @ b.tail] for b in rig.pose.bones])
    assert np.abs(after - before).max() < REACHED
    assert all(chain.last_goal_status == "REACHED" for chain in rig.ik_solvers.chains)


def _key_controls(rig):
    """Frames 1 … FRAMES: a crouch (hands and chest goal down 0.25 m and a little forward, the feet
    planted); then FRAMES more: the left hand reaches 0.15 m beyond the arm, forward of the shoulder,
    the chest goal leaning with it."""
    bones = rig.pose.bones
    hands = {side: bones[f"hand_ik.{side}"] for side in "LR"}
    chest = rig.ik_solvers.chains["chest"].target
    rest = {side: np.array(hand.location) for side, hand in hands.items()}
    chest_rest = np.array(chest.location)
    shoulder = np.array(rig.matrix_world @ bones["upper_arm_fk.L"].head)
    arm = np.linalg.norm(shoulder - np.array(rig.matrix_world @ bones["forearm_fk.L"].head)) + bones["forearm_fk.L"].length
    wrist = _goal(rig, "arm.L")
    forward, down = np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, -1.0])  # Rigify's human faces −Y
    far = shoulder + (arm + 0.15) * forward
    for k in range(FRAMES):
        t = k / (FRAMES - 1)
        for side, hand in hands.items():
            hand.location = rest[side] + t * (0.25 * down + 0.05 * forward)
            hand.keyframe_insert("location", frame=1 + k)
        chest.location = chest_rest + t * (0.25 * down + 0.05 * forward)
        chest.keyframe_insert("location", frame=1 + k)
        hands["L"].location = rest["L"] + t * (far - wrist)  # the armature's axes: the rig is not transformed
        hands["R"].location = rest["R"]
        for hand in hands.values():
            hand.keyframe_insert("location", frame=1 + FRAMES + k)
        chest.location = chest_rest + t * (0.1 * forward + 0.05 * down)
        chest.keyframe_insert("location", frame=1 + FRAMES + k)


def _baked_keys(rig) -> dict[tuple[str, int], bytes]:
    """Every baked curve (the chains' bones and the torso), its keys' bytes."""
    keyed = _keyed_bones(rig)
    out = {}
    for fcurve in animdata_get_channelbag_for_assigned_slot(rig.animation_data).fcurves:
        if any(fcurve.data_path.startswith(f'pose.bones["{bone}"]') for bone in keyed):
            values = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
            fcurve.keyframe_points.foreach_get("co", values)
            out[(fcurve.data_path, fcurve.array_index)] = values.tobytes()
    return out


def _keyed_bones(rig) -> set[str]:
    return {BODY_ROOT} | {bone for tip, count, _, _ in CHAINS.values() for bone in rr.chain_bones(rig, tip, count)}


def _unbake(rig, start):
    """Take the baked curves off (the controls keep theirs) and put the keyed bones' channels back."""
    channelbag = animdata_get_channelbag_for_assigned_slot(rig.animation_data)
    keyed = _keyed_bones(rig)
    for fcurve in [f for f in channelbag.fcurves if any(f.data_path.startswith(f'pose.bones["{b}"]') for b in keyed)]:
        channelbag.fcurves.remove(fcurve)
    for name in keyed:
        bone = rig.pose.bones[name]
        bone.rotation_quaternion, bone.rotation_euler, bone.rotation_axis_angle, bone.location = start[name][:4]


def test_crouch_and_reach_on_the_controls_bake_to_every_goal_with_no_backward_knee_in_any_chunking(rig):
    _key_controls(rig)
    last = 2 * FRAMES
    bpy.context.scene.frame_set(1)
    start = pose_snapshot(rig)
    assert _bake(rig, 1, last) == {"FINISHED"}
    one_go = _baked_keys(rig)
    assert ('pose.bones["torso"].location', 2) in one_go and ('pose.bones["thigh_fk.L"].rotation_quaternion', 0) in one_go
    for chain in rig.ik_solvers.chains:
        report = json.loads(chain.last_bake_report)
        assert report["method"] == "BODY" and report["evaluated_mismatch_frames"] == [], chain.name
    limbs = {name: rr.chain_bones(rig, tip, count) for name, (tip, count, _, _) in CHAINS.items() if name in FOLLOWERS}
    rest_axes = {name: rr.rest_geometry(rig, bones)[1] for name, bones in limbs.items()}
    world = np.array(rig.matrix_world)
    joints: dict[str, list] = {name: [] for name in limbs}
    rotations: dict[str, list] = {name: [] for name in limbs}
    torso = []
    for frame in range(1, last + 1):
        bpy.context.scene.frame_set(frame)
        errors = _errors(rig)
        for name in ("leg.L", "leg.R", "arm.L", "arm.R", "ORG:leg.L", "ORG:leg.R", "ORG:arm.L", "ORG:arm.R"):
            assert errors[name] <= REACHED, (frame, name, errors[name])
        if frame <= FRAMES:  # the crouch: the chest's goal too (the reach leaves it to the hand, of higher priority)
            assert errors["chest"] <= REACHED, (frame, errors["chest"])
        for name, bones in limbs.items():
            pose = [rig.pose.bones[b] for b in bones]
            joints[name].append([world[:3, :3] @ np.array(b.head) + world[:3, 3] for b in pose]
                                + [world[:3, :3] @ np.array(pose[-1].tail) + world[:3, 3]])
            rotations[name].append([(m := world[:3, :3] @ np.array(b.matrix)[:3, :3]) / np.linalg.norm(m, axis=0)
                                    for b in pose])
        torso.append(np.array(rig.pose.bones[BODY_ROOT].head))
    for name in limbs:
        bends = bend_angles(np.array(joints[name]), np.array(rotations[name]), rest_axes[name])
        assert not backward_joints(bends).any(), (name, bends.min())
    assert torso[0][2] - torso[FRAMES - 1][2] > 0.1  # the hips went down in the crouch
    assert np.linalg.norm(torso[-1] - torso[FRAMES]) > 0.01  # and followed the hand in the reach
    _unbake(rig, start)
    assert _bake(rig, 1, FRAMES + 2) == {"FINISHED"} and _bake(rig, FRAMES + 3, last) == {"FINISHED"}
    assert _baked_keys(rig) == one_go  # two chunks: the same keys, bit for bit


def test_a_body_on_the_org_bones_bakes_and_says_each_chain_blender_poses_otherwise(addon):
    """Rigify's ORG bones copy the FK (or IK) controls' transforms after our keys: the bake goes
    through and each limb's report and warning say, in one sentence, that Blender's evaluation
    differs from the solve."""
    rig = generated_body()
    for chain in rig.ik_solvers.chains:
        chain.tip_bone = FOLLOWERS.get(chain.name, "ORG-spine.003")
    hand = rig.pose.bones["hand_ik.L"]
    hand.keyframe_insert("location", frame=1)
    hand.location.z -= 0.2
    hand.keyframe_insert("location", frame=3)
    assert _bake(rig, 1, 3) == {"FINISHED"}
    for name in FOLLOWERS:
        chain = rig.ik_solvers.chains[name]
        assert json.loads(chain.last_bake_report)["evaluated_mismatch_frames"], name
        assert chain.bake_mismatch_frames > 0, name
