"""Straight-rest rigs in real Blender (issue 20, SPEC §5 "A straight preferred pose", §6 ``bend_direction``):
a BVH capture imported with Blender's own ``io_anim_bvh`` (T-pose OFFSETs) gets HI chains whose bend
direction comes from the capture, and the bake keeps every knee and elbow on the captured side; a
hand-built straight arm bends toward its bend direction (the bone roll convention) and the other way
once flipped; a hinge start joint gets SDLS with the reason named."""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature, evaluated_head, evaluated_tip

from ik_solvers.blender.bend_source import ROLL_CONVENTION
from ik_solvers.blender.chains import method_reason

FRAMES = 61
"""BVH frames: the first is the T-pose (every rotation zero, as captures start), then two walk cycles."""
REACHED = 1e-5
"""Largest tip error on the evaluated bake (scene units = metres here): 0.01 mm."""
LIMBS = {"leg": ("LeftUpLeg", "LeftLeg"), "arm": ("LeftArm", "LeftForeArm", "LeftHand")}
"""Chain bones, start → tip, per limb of the capture."""

HIERARCHY = """HIERARCHY
ROOT Hips
{
  OFFSET 0.0 0.0 0.0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT LeftUpLeg
  {
    OFFSET 0.1 0.0 0.0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT LeftLeg
    {
      OFFSET 0.0 -0.45 0.0
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {
        OFFSET 0.0 -0.42 0.0
      }
    }
  }
  JOINT Spine
  {
    OFFSET 0.0 0.5 0.0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT LeftArm
    {
      OFFSET 0.2 0.0 0.0
      CHANNELS 3 Zrotation Xrotation Yrotation
      JOINT LeftForeArm
      {
        OFFSET 0.3 0.0 0.0
        CHANNELS 3 Zrotation Xrotation Yrotation
        JOINT LeftHand
        {
          OFFSET 0.27 0.0 0.0
          CHANNELS 3 Zrotation Xrotation Yrotation
          End Site
          {
            OFFSET 0.1 0.0 0.0
          }
        }
      }
    }
  }
}
"""


def walk_bvh(path: Path) -> None:
    """A BVH capture (Y up, metres): a straight leg and arm in T-pose at frame 0, then a walk: the hip
    swinging ±25°, the knee bent 10–45° (forward), the arm swinging with its elbow bent 10–50° and
    wrist 5–15° the same way."""
    rows = [[0.0, 0.9, 0.0] + [0.0] * 21]
    for f in range(1, FRAMES):
        t = 2.0 * math.pi * f / 30.0
        hips = [0.02 * math.sin(2 * t), 0.9 + 0.02 * math.cos(2 * t), 0.05 * f, 0.0, 0.0, 0.0]
        up_leg = [2.0 * math.sin(t), -25.0 * math.sin(t), 5.0 * math.sin(t)]
        leg = [0.0, 10.0 + 17.5 * (1.0 + math.sin(t + 1.2)), 0.0]
        spine = [0.0, 3.0 * math.sin(t), 0.0]
        arm = [-40.0 + 10.0 * math.sin(t), 0.0, 20.0 * math.sin(t)]
        fore_arm = [0.0, 0.0, -(10.0 + 20.0 * (1.0 + math.sin(t)))]
        hand = [0.0, 0.0, -(5.0 + 5.0 * (1.0 + math.sin(t + 0.5)))]
        rows.append(hips + up_leg + leg + spine + arm + fore_arm + hand)
    motion = "\n".join(" ".join(f"{value:.6f}" for value in row) for row in rows)
    path.write_text(f"{HIERARCHY}MOTION\nFrames: {FRAMES}\nFrame Time: 0.033333\n{motion}\n")


def import_bvh(path: Path):
    import addon_utils

    if not addon_utils.check("io_anim_bvh")[1]:
        addon_utils.enable("io_anim_bvh", default_set=True)
    assert bpy.ops.import_anim.bvh(filepath=str(path), update_scene_fps=False, update_scene_duration=True) == {"FINISHED"}
    return bpy.context.object


def limb_joints(obj, bones) -> np.ndarray:
    """Blender's evaluated world positions ``(n + 1, 3)`` of the limb's joints and tip."""
    bpy.context.view_layer.update()
    return np.array([evaluated_head(obj, name) for name in bones] + [evaluated_tip(obj, bones[-1])])


def bulges(joints: np.ndarray) -> np.ndarray:
    """The middle joints' offsets ``(n − 1, 3)`` across the start-to-tip axis."""
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    offsets = joints[1:-1] - joints[0]
    return offsets - (offsets @ axis)[:, None] * axis


def select_tip(obj, bone: str, target) -> None:
    bpy.context.view_layer.objects.active = obj
    for other in bpy.context.selected_objects:
        other.select_set(False)
    target.select_set(True)
    obj.data.bones.active = obj.data.bones[bone]


def bake_capture(tmp_path: Path, method: str) -> tuple[float, dict[str, int]]:
    """Import the walk, key targets on the captured tips, add a chain per limb on the T-pose frame
    (``chain_add``, then ``method``), bake, and read Blender's evaluation: the largest tip error and the
    middle joints per limb on the wrong side of the captured bend (frames where the capture bends them)."""
    scene = bpy.context.scene
    walk_bvh(tmp_path / "walk.bvh")
    obj = import_bvh(tmp_path / "walk.bvh")
    scene.frame_start, scene.frame_end = 1, FRAMES
    captured: dict[str, list[np.ndarray]] = {limb: [] for limb in LIMBS}
    targets = {limb: add_empty(f"{limb} target") for limb in LIMBS}
    for frame in range(1, FRAMES + 1):  # the capture's tips become the targets' keys
        scene.frame_set(frame)
        for limb, bones in LIMBS.items():
            joints = limb_joints(obj, bones)
            captured[limb].append(joints)
            targets[limb].location = joints[-1]
            targets[limb].keyframe_insert("location", frame=frame)
    scene.frame_set(1)  # the T-pose: straight limbs, the preferred pose chain_add captures
    for limb, bones in LIMBS.items():
        assert np.abs(bulges(limb_joints(obj, bones))).max() <= 1e-6  # straight indeed
        select_tip(obj, bones[-1], targets[limb])
        assert bpy.ops.ik_solvers.chain_add(chain_length=len(bones)) == {"FINISHED"}
        chain = obj.ik_solvers.active_chain
        assert chain.method == "HI", chain.setup_note
        assert chain.setup_note.startswith("Straight chain: bend direction from frame ")
        assert any(chain.bend_direction)
        chain.method = method
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=FRAMES, all_chains=True) == {"FINISHED"}
    for chain in obj.ik_solvers.chains:
        assert chain.last_status != "ERROR", chain.last_message
    backward = {limb: 0 for limb in LIMBS}
    worst = 0.0
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        for limb, bones in LIMBS.items():
            joints = limb_joints(obj, bones)
            worst = max(worst, float(np.linalg.norm(joints[-1] - captured[limb][frame - 1][-1])))
            wanted = bulges(captured[limb][frame - 1])
            bent = np.linalg.norm(wanted, axis=1) > 1e-3  # the capture bends this joint off the axis
            backward[limb] += int(np.sum(np.sum(bulges(joints) * wanted, axis=1)[bent] <= 0.0))
    return worst, backward


def test_a_bvh_capture_bakes_with_hi_and_every_knee_and_elbow_on_the_captured_side(addon, tmp_path):
    """Measured: HI 0 of 60 knees and 0 of 120 elbows and wrists backward, tips 0.0005 mm off; SDLS on
    the same chains 18 knees backward (the measure tells)."""
    worst, backward = bake_capture(tmp_path, "HI")
    assert worst <= REACHED
    assert backward == {"leg": 0, "arm": 0}


def test_sdls_on_the_same_capture_bends_knees_backward(addon, tmp_path):
    worst, backward = bake_capture(tmp_path, "SDLS")
    assert worst <= REACHED
    assert backward["leg"] > 0


def straight_arm():
    """A straight two-bone arm along +X (no roll): upper 0.30, forearm 0.28."""
    return build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4)},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.58, 0.0, 1.4), "parent": "upper_arm"},
    ])


def test_a_straight_arm_bends_toward_its_bend_direction_through_a_reach_sweep(addon):
    obj = straight_arm()
    target = add_empty(location=evaluated_tip(obj, "forearm"))
    select_tip(obj, "forearm", target)
    assert bpy.ops.ik_solvers.chain_add(chain_length=2) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.method == "HI" and "roll convention" in chain.setup_note
    assert tuple(chain.bend_direction) == ROLL_CONVENTION
    # The start bone's rest axes: local −Z of upper_arm in the world.
    toward = -np.array(obj.data.bones["upper_arm"].matrix_local.to_3x3())[:, 2]
    shoulder = evaluated_head(obj, "upper_arm")
    for sense in (1.0, -1.0):
        elbows = []
        for reach in np.linspace(0.57, 0.1, 25):
            target.location = shoulder + np.array([reach, 0.0, 0.0])
            assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
            assert np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.location)) <= REACHED
            elbows.append(bulges(limb_joints(obj, ("upper_arm", "forearm")))[0])
        assert (np.array(elbows) @ (sense * toward) > 0.0).all()
        assert bpy.ops.ik_solvers.flip_bend_direction() == {"FINISHED"}
    assert tuple(chain.bend_direction) == ROLL_CONVENTION  # flipped twice


def test_a_live_straight_arm_follows_a_flipped_bend_direction(addon):
    obj = straight_arm()
    target = add_empty(location=(0.35, 0.05, 1.4))
    select_tip(obj, "forearm", target)
    assert bpy.ops.ik_solvers.chain_add(chain_length=2) == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    elbow = bulges(limb_joints(obj, ("upper_arm", "forearm")))[0]
    assert elbow[2] < -0.1  # toward local −Z: down
    obj.ik_solvers.active_chain.bend_direction = (0.0, 0.0, 1.0)
    elbow = bulges(limb_joints(obj, ("upper_arm", "forearm")))[0]
    assert elbow[2] > 0.1
    assert np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.location)) <= REACHED


def test_a_longer_chain_keeps_the_flipped_bend_direction_in_its_new_start_bone(addon):
    """Set up again from another start bone (``chain_length``), a flipped bend direction points the same
    way in the world, written in the new start bone's rest axes (here rolled 1 rad)."""
    obj = build_armature([
        {"name": "shoulder", "head": (-0.15, 0.0, 1.4), "tail": (0.0, 0.0, 1.4), "roll": 1.0},
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "parent": "shoulder"},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.58, 0.0, 1.4), "parent": "upper_arm"},
    ])
    select_tip(obj, "forearm", add_empty(location=(0.3, 0.1, 1.3)))
    assert bpy.ops.ik_solvers.chain_add(chain_length=2) == {"FINISHED"}
    assert bpy.ops.ik_solvers.flip_bend_direction() == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    bones = obj.data.bones
    world = np.array(bones["upper_arm"].matrix_local.to_3x3()) @ np.array(chain.bend_direction)
    chain.chain_length = 3
    assert chain.method == "HI" and [item.bone_name for item in chain.preferred_pose][0] == "shoulder"
    np.testing.assert_allclose(np.array(bones["shoulder"].matrix_local.to_3x3()) @ np.array(chain.bend_direction),
                               world, atol=1e-6)
    assert world[2] > 0.99  # flipped from the roll convention's local −Z (down): up
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert bulges(limb_joints(obj, ("shoulder", "upper_arm", "forearm")))[1][2] > 0.05  # the elbow up


def test_a_straight_leg_with_a_foot_gets_a_bend_direction_for_its_rotation_goal(addon):
    """Thigh and shin straight, the foot forward: the chain is bent (the foot gives it a plane), but HI
    with Rotation solves thigh and shin alone, straight; chain_add gives them a bend direction too."""
    obj = build_armature([
        {"name": "thigh", "head": (0.1, 0.0, 1.0), "tail": (0.1, 0.0, 0.55)},
        {"name": "shin", "head": (0.1, 0.0, 0.55), "tail": (0.1, 0.0, 0.1), "parent": "thigh"},
        {"name": "foot", "head": (0.1, 0.0, 0.1), "tail": (0.1, -0.15, 0.05), "parent": "shin"},
    ])
    target = add_empty(location=(0.1, -0.05, 0.25))  # above the foot's tail: the knee must bend
    target.rotation_mode = "QUATERNION"
    target.rotation_quaternion = obj.data.bones["foot"].matrix_local.to_quaternion()  # the foot's rest axes
    select_tip(obj, "foot", target)
    assert bpy.ops.ik_solvers.chain_add(chain_length=3) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.method == "HI" and "roll convention" in chain.setup_note
    chain.use_rotation = True
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}, chain.last_message
    assert np.linalg.norm(evaluated_tip(obj, "foot") - np.array(target.location)) <= REACHED
    toward = -np.array(obj.data.bones["thigh"].matrix_local.to_3x3())[:, 2]  # the thigh's local −Z
    assert bulges(limb_joints(obj, ("thigh", "shin")))[0] @ toward > 0.05


@pytest.mark.parametrize("locks", [("x", "y"), ("y", "z")])
def test_a_hinge_start_joint_gets_sdls_and_says_which_bone_and_locks(addon, locks):
    obj = straight_arm()
    for axis in locks:
        setattr(obj.pose.bones["upper_arm"], f"lock_ik_{axis}", True)
    select_tip(obj, "forearm", add_empty(location=(0.4, 0.1, 1.4)))
    assert bpy.ops.ik_solvers.chain_add(chain_length=2) == {"FINISHED"}
    chain = obj.ik_solvers.active_chain
    assert chain.method == "SDLS"
    named = f"'upper_arm' free to turn about every axis, and its IK is locked in {', '.join(a.upper() for a in locks)}"
    assert named in chain.setup_note
    assert named in method_reason(chain)  # the panel's method line
