"""A chain's Influence in real Blender (issue 20): per joint, the rotation a fraction ``influence`` of
the way from the FK pose (the bones' rotations at the frame before the solve writes them) to the
solve (quaternion slerp), as the IK constraint's Influence — in a solve, a bake (animated influence,
the blend keyed) and live mode (the FK pose is the one before live mode's writes, no drift). Every
rotation is read from Blender's evaluated pose-bone matrices."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, evaluated_tip
from mathutils import Quaternion

BONES = ("upper_arm", "forearm")
FK = {"upper_arm": (0.95, 0.1, 0.2, 0.2), "forearm": (0.9, 0.0, 0.1, -0.42)}


def fk_arm(name="Rig", influence=1.0):
    obj = build_arm(name=name)
    for bone, rotation in FK.items():
        obj.pose.bones[bone].rotation_quaternion = Quaternion(rotation).normalized()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method = "Arm", "forearm", 2, "SDLS"
    chain.target, chain.influence = add_empty(f"{name}Target", location=(0.35, 0.3, 1.25)), influence
    bpy.context.view_layer.update()
    return obj, chain


def evaluated_rotations(obj) -> dict[str, Quaternion]:
    """Each chain bone's rotation relative to its rest, from Blender's evaluated pose matrices."""
    bpy.context.view_layer.update()
    rotations = {}
    for name in BONES:
        pose_bone, bone = obj.pose.bones[name], obj.data.bones[name]
        rest = bone.matrix_local if bone.parent is None else (
            pose_bone.parent.matrix @ bone.parent.matrix_local.inverted() @ bone.matrix_local)
        rotations[name] = (rest.inverted() @ pose_bone.matrix).to_quaternion()
    return rotations


def assert_rotations_close(actual: dict, expected: dict, atol=1e-6):
    for name in BONES:
        assert abs(actual[name].rotation_difference(expected[name]).angle) < atol, name


def solved(obj) -> dict[str, Quaternion]:
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    return evaluated_rotations(obj)


@pytest.mark.parametrize("influence", [0.0, 0.5, 0.8])
def test_solve_blends_the_fk_pose_with_the_solve(addon, influence):
    full_obj, _ = fk_arm("Full")
    fk = evaluated_rotations(full_obj)
    full = solved(full_obj)
    obj, chain = fk_arm("Blend", influence)
    blend = solved(obj)
    assert_rotations_close(blend, {name: fk[name].slerp(full[name], influence) for name in BONES})
    if influence == 0.0:
        assert_rotations_close(blend, fk, atol=1e-7)
    tip_error = np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(chain.target.location))
    assert bool(tip_error > 1e-3) == (influence < 1.0)


def test_influence_one_is_the_solve_bit_for_bit(addon):
    first, _ = fk_arm("First")
    second, chain = fk_arm("Second")
    chain.influence = 1.0
    solved(first), solved(second)
    for name in BONES:
        assert tuple(first.pose.bones[name].rotation_quaternion) == tuple(second.pose.bones[name].rotation_quaternion)


def test_bake_keys_the_blend_with_an_animated_influence(addon):
    scene = bpy.context.scene
    fk_keys = {1: FK, 11: {"upper_arm": (0.9, -0.2, 0.3, 0.1), "forearm": (0.95, 0.1, 0.0, -0.3)}}
    arms = {}
    for name in ("Full", "Blend"):
        obj, chain = fk_arm(name)
        for frame, pose in fk_keys.items():
            for bone, rotation in pose.items():
                obj.pose.bones[bone].rotation_quaternion = Quaternion(rotation).normalized()
                obj.pose.bones[bone].keyframe_insert("rotation_quaternion", frame=frame)
        chain.target.location = (0.35, 0.3, 1.25)
        chain.target.keyframe_insert("location", frame=1)
        chain.target.location = (0.2, 0.4, 1.45)
        chain.target.keyframe_insert("location", frame=11)
        arms[name] = (obj, chain)
    blend_chain = arms["Blend"][1]
    for frame, influence in ((1, 0.0), (11, 1.0)):
        blend_chain.influence = influence
        arms["Blend"][0].keyframe_insert(f'{blend_chain.path_from_id()}.influence', frame=frame)
    fk_by_frame = {}
    for frame in range(1, 12):
        scene.frame_set(frame)
        fk_by_frame[frame] = evaluated_rotations(arms["Blend"][0])
        influence_at = blend_chain.influence
        assert abs(influence_at - (frame - 1) / 10) < 0.2  # animated (Bézier)
    for obj, _ in arms.values():
        bpy.context.view_layer.objects.active = obj
        assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=11) == {"FINISHED"}
    assert blend_chain.bake_mismatch_frames == 0
    for frame in range(1, 12):
        scene.frame_set(frame)
        influence = blend_chain.influence
        full, blend = evaluated_rotations(arms["Full"][0]), evaluated_rotations(arms["Blend"][0])
        expected = {name: fk_by_frame[frame][name].slerp(full[name], influence) for name in BONES}
        assert_rotations_close(blend, expected, atol=2e-6)
    scene.frame_set(1)
    assert_rotations_close(evaluated_rotations(arms["Blend"][0]), fk_by_frame[1], atol=2e-6)


def test_live_mode_blends_with_the_fk_pose_before_its_writes(addon):
    full_obj, _ = fk_arm("Full")
    fk = evaluated_rotations(full_obj)
    obj, chain = fk_arm("Blend", 0.5)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    for location in ((0.3, 0.25, 1.3), (0.25, 0.35, 1.2)):
        chain.target.location = location
        bpy.context.view_layer.update()
        for other in (full_obj,):
            for bone, rotation in FK.items():
                other.pose.bones[bone].rotation_quaternion = Quaternion(rotation).normalized()
            other.ik_solvers.chains[0].target.location = location
        full = solved(full_obj)
        bpy.context.view_layer.objects.active = obj
        assert_rotations_close(evaluated_rotations(obj), {name: fk[name].slerp(full[name], 0.5) for name in BONES})
    assert chain.use_live
