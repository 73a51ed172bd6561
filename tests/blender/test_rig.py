"""Rig reader / writer against Blender's own evaluation: chain geometry, every rotation mode,
IK locks / limits / stiffness, exact round trips, continuity of batched channel values, refusals."""

from __future__ import annotations

import math

import bpy
import mathutils
import numpy as np
import pytest
from conftest import (
    RIG_BUILDERS,
    add_empty,
    build_arm,
    build_leg,
    build_zero_length_segment,
    evaluated_head,
    evaluated_tip,
    float32_slack,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ik_solvers.blender import euler, rig, root_space
from ik_solvers.blender.errors import IKSolversError
from ik_solvers.core import JointKind, forward_kinematics
from ik_solvers.core.kinematics import local_rotations


def _randomise_pose(obj, rng, modes=rig.ROTATION_MODES):
    """Give every pose bone a random rotation in a mode taken round-robin from ``modes``."""
    for index, pose_bone in enumerate(obj.pose.bones):
        pose_bone.rotation_mode = modes[index % len(modes)]
        if pose_bone.rotation_mode == "QUATERNION":
            q = rng.normal(size=4)
            pose_bone.rotation_quaternion = q / np.linalg.norm(q)
        elif pose_bone.rotation_mode == "AXIS_ANGLE":
            pose_bone.rotation_axis_angle = rng.normal(size=4) * [3.0, 1.0, 1.0, 1.0]
        else:
            pose_bone.rotation_euler = rng.uniform(-4.0, 4.0, size=3)
    bpy.context.view_layer.update()


def _world_positions(obj, rig_chain, q):
    pose = forward_kinematics(rig_chain.chain, np.atleast_2d(q))
    root = root_space.root_matrices_world(obj, rig_chain)
    return pose.positions[0] @ root[:3, :3].T + root[:3, 3]


def _stored_channels(obj):
    return {
        b.name: (tuple(b.rotation_quaternion), tuple(b.rotation_euler), tuple(b.rotation_axis_angle))
        for b in obj.pose.bones
    }


@pytest.mark.parametrize("rig_name", sorted(RIG_BUILDERS))
def test_chain_geometry_matches_blenders_evaluated_pose(scene, rig_name):
    builder, tip, length = RIG_BUILDERS[rig_name]
    obj = builder()
    _randomise_pose(obj, np.random.default_rng(3))
    chain = rig.read_chain(obj, tip, length)
    positions = _world_positions(obj, chain, chain.q)
    blender = [evaluated_head(obj, name) for name in chain.joint_bones] + [evaluated_tip(obj, tip)]
    np.testing.assert_allclose(positions, np.array(blender), atol=float32_slack(obj, chain.bone_names))
    assert chain.bone_names == chain.joint_bones and len(chain.bone_names) == length


def test_bone_roll_and_disconnected_offsets_are_read(scene):
    obj = build_arm()
    chain = rig.read_chain(obj, "forearm", 2).chain
    # Rest rotation of the start joint is the bone's rest matrix (roll included).
    np.testing.assert_allclose(chain.rest_rotations[0], np.array(obj.data.bones["upper_arm"].matrix_local)[:3, :3],
                               atol=1e-6)
    # A connected child sits one parent length along the parent's +Y.
    np.testing.assert_allclose(chain.offsets[1], [0.0, 0.3, 0.0], atol=1e-6)
    np.testing.assert_allclose(chain.tip_offset, [0.0, obj.data.bones["forearm"].length, 0.0], atol=1e-7)

    leg = build_leg()
    thigh = rig.read_chain(leg, "foot", 3)
    assert thigh.parent_bone == "hip"
    # The thigh is disconnected from the hip: head 5 cm below the hip's head, expressed in its frame.
    hip_rest = np.array(leg.data.bones["hip"].matrix_local)
    expected = np.linalg.inv(hip_rest) @ np.array([0.1, 0.0, 0.95, 1.0])
    np.testing.assert_allclose(thigh.chain.offsets[0], expected[:3], atol=1e-6)


def test_posed_location_of_disconnected_bone_is_an_offset(scene):
    leg = build_leg()
    leg.pose.bones["thigh"].location = (0.02, -0.01, 0.03)
    leg.pose.bones["shin"].location = (0.5, 0.5, 0.5)  # connected: Blender ignores it
    chain = rig.read_chain(leg, "foot", 3)
    positions = _world_positions(leg, chain, chain.q)
    blender = [evaluated_head(leg, n) for n in chain.joint_bones] + [evaluated_tip(leg, "foot")]
    np.testing.assert_allclose(positions, blender, atol=float32_slack(leg, chain.bone_names))


def test_parent_bone_pose_moves_the_root_space(scene):
    leg = build_leg()
    leg.pose.bones["hip"].rotation_quaternion = mathutils.Euler((0.4, -0.2, 0.7)).to_quaternion()
    bpy.context.view_layer.update()
    chain = rig.read_chain(leg, "foot", 3)
    root = root_space.root_matrices_world(leg, chain)
    np.testing.assert_allclose(root, np.array(leg.matrix_world @ leg.pose.bones["hip"].matrix), atol=1e-7)
    np.testing.assert_allclose(_world_positions(leg, chain, chain.q)[-1], evaluated_tip(leg, "foot"),
                               atol=float32_slack(leg, chain.bone_names))


@pytest.mark.parametrize("rig_name", sorted(RIG_BUILDERS))
def test_read_write_round_trip_changes_nothing(scene, rig_name):
    builder, tip, length = RIG_BUILDERS[rig_name]
    obj = builder()
    rng = np.random.default_rng(11)
    for _ in range(5):
        _randomise_pose(obj, rng)
        # Unnormalised quaternions and axes, angles past ±π, an Euler at gimbal lock.
        first = obj.pose.bones[0]
        first.rotation_mode = "QUATERNION"
        first.rotation_quaternion = (0.5, -1.2, 0.3, 0.9)
        last = obj.pose.bones[tip]
        last.rotation_mode = "YXZ"
        last.rotation_euler = (math.pi / 2, 2.9, -7.0)  # X is the middle axis of YXZ
        before = _stored_channels(obj)
        chain = rig.read_chain(obj, tip, length)
        rig.write_pose(obj, chain, chain.q)
        after = _stored_channels(obj)
        for name in before:
            np.testing.assert_allclose(np.concatenate(after[name]), np.concatenate(before[name]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("mode", rig.ROTATION_MODES)
def test_written_pose_is_what_blender_evaluates(scene, mode):
    obj = build_arm(location=(0.3, -0.2, 0.1), rotation_euler=(0.1, 0.2, 0.3), scale=1.5)
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = mode
    chain = rig.read_chain(obj, "forearm", 2)
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = rng.normal(size=chain.chain.n_dof) * 1.5
        rig.write_pose(obj, chain, q)
        expected = _world_positions(obj, chain, q)
        blender = [evaluated_head(obj, "upper_arm"), evaluated_head(obj, "forearm"), evaluated_tip(obj, "forearm")]
        np.testing.assert_allclose(expected, blender, atol=float32_slack(obj, chain.bone_names))
        # Re-reading what was written gives the same rotations (rotation vectors may change branch).
        again = rig.read_chain(obj, "forearm", 2)
        np.testing.assert_allclose(local_rotations(chain.chain, again.q[None]), local_rotations(chain.chain, q[None]),
                                   atol=1e-6)


@pytest.mark.parametrize("order", euler.EULER_ORDERS)
def test_euler_conversions_agree_with_mathutils(order):
    rng = np.random.default_rng(2)
    angles = rng.uniform(-math.pi, math.pi, size=(50, 3))
    ours = euler.matrices_from_eulers(angles, order)
    theirs = np.array([np.array(mathutils.Euler(a, order).to_matrix()) for a in angles])
    np.testing.assert_allclose(ours, theirs, atol=1e-6)  # mathutils works in float32
    back = euler.continuous_eulers(ours, order, np.zeros(3))
    np.testing.assert_allclose(euler.matrices_from_eulers(back, order), ours, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    order=st.sampled_from(euler.EULER_ORDERS),
    rotvec=st.lists(st.floats(-4.0, 4.0), min_size=3, max_size=3),
    reference=st.lists(st.floats(-10.0, 10.0), min_size=3, max_size=3),
)
def test_continuous_eulers_stay_near_reference(order, rotvec, reference):
    from ik_solvers.core.rotations import matrices_from_rotvecs

    matrix = matrices_from_rotvecs(np.array(rotvec))[None]
    values = euler.continuous_eulers(matrix, order, np.array(reference))
    np.testing.assert_allclose(euler.matrices_from_eulers(values, order), matrix, atol=1e-9)
    # Whole turns were removed: no component is more than half a turn from the reference.
    assert np.all(np.abs(values[0] - reference) <= math.pi + 1e-9)


@pytest.mark.parametrize("order", euler.EULER_ORDERS)
def test_eulers_stay_continuous_through_gimbal_lock(order):
    # The middle angle rises to exactly 90° and stays (a limit clamped there) while the outer
    # ones keep turning: gimbal frames must continue from the frames before, not the reference.
    t = np.linspace(0.0, 1.5, 60)
    angles = np.zeros((t.size, 3))
    first, middle, last = (euler._axis_index(letter) for letter in reversed(order))
    angles[:, middle] = math.pi / 2 - 0.3 * np.maximum(0.0, 1.0 - t / 0.75)
    angles[:, first] = 0.3 + 0.8 * t
    angles[:, last] = -0.5 * t
    matrices = euler.matrices_from_eulers(angles, order)
    values = euler.continuous_eulers(matrices, order, angles[0])
    np.testing.assert_allclose(euler.matrices_from_eulers(values, order), matrices, atol=1e-12)
    assert np.abs(np.diff(values, axis=0)).max() < 0.05  # steps of the motion itself, no jumps


@pytest.mark.parametrize("mode", rig.ROTATION_MODES)
def test_batched_channel_values_are_continuous_and_correct(scene, mode):
    obj = build_arm()
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = mode
    chain = rig.read_chain(obj, "forearm", 2)
    # Two full turns of the forearm about a tilted axis plus a wobble of the upper arm, 400 frames.
    t = np.linspace(0.0, 4.0 * math.pi, 400)
    axis = np.array([0.3, 0.8, -0.52]) / np.linalg.norm([0.3, 0.8, -0.52])
    q = np.zeros((t.size, chain.chain.n_dof))
    q[:, 3:6] = t[:, None] * axis
    q[:, 0:3] = 0.8 * np.stack([np.sin(t), np.cos(2 * t), np.sin(3 * t)], -1)
    values = rig.rotation_channel_values(obj, chain, q)
    rotations = local_rotations(chain.chain, q)
    for joint, name in enumerate(chain.joint_bones):
        v = values[name]
        if mode == "QUATERNION":
            assert v.shape == (t.size, 4)
            assert np.all(np.einsum("ni,ni->n", v[1:], v[:-1]) > 0.0)
            theirs = np.array([np.array(mathutils.Quaternion(x).to_matrix()) for x in v])
        elif mode == "AXIS_ANGLE":
            assert v.shape == (t.size, 4)
            assert np.abs(np.diff(v, axis=0)).max() < 0.5
            theirs = np.array([np.array(mathutils.Quaternion(x[1:], x[0]).to_matrix()) for x in v])
        else:
            assert v.shape == (t.size, 3)
            assert np.abs(np.diff(v, axis=0)).max() < 0.5  # smooth motion: no ±180° / 360° jumps
            theirs = np.array([np.array(mathutils.Euler(x, mode).to_matrix()) for x in v])
        np.testing.assert_allclose(theirs, rotations[:, joint], atol=2e-6)


def test_ik_locks_limits_and_stiffness_shape_the_chain(scene):
    leg = build_leg()
    thigh, shin, foot = (leg.pose.bones[n] for n in ("thigh", "shin", "foot"))
    thigh.lock_ik_y = True  # no twist: a universal joint, X then Z
    thigh.use_ik_limit_x, thigh.ik_min_x, thigh.ik_max_x = True, -0.5, 1.2
    thigh.ik_stiffness_z = 0.75
    shin.lock_ik_y = shin.lock_ik_z = True  # a knee hinge about X
    shin.use_ik_limit_x, shin.ik_min_x, shin.ik_max_x = True, 0.0, 2.5
    foot.ik_stiffness_x = foot.ik_stiffness_y = foot.ik_stiffness_z = 0.99
    chain = rig.read_chain(leg, "foot", 3).chain
    assert chain.kinds == (JointKind.UNIVERSAL, JointKind.HINGE, JointKind.BALL)
    np.testing.assert_array_equal(chain.axes[:3], [[1, 0, 0], [0, 0, 1], [1, 0, 0]])
    np.testing.assert_allclose(chain.lower[:3], [-0.5, -np.inf, 0.0], atol=1e-7)
    np.testing.assert_allclose(chain.upper[:3], [1.2, np.inf, 2.5], atol=1e-7)
    np.testing.assert_allclose(chain.weights, [1.0, 0.25, 1.0, 0.01, 0.01, 0.01], atol=1e-7)


def test_fully_locked_bone_is_held_fixed(scene):
    leg = build_leg()
    shin = leg.pose.bones["shin"]
    shin.rotation_quaternion = mathutils.Euler((0.6, 0.1, -0.2)).to_quaternion()
    shin.lock_ik_x = shin.lock_ik_y = shin.lock_ik_z = True
    chain = rig.read_chain(leg, "foot", 3)
    assert chain.joint_bones == ("thigh", "foot") and chain.bone_names == ("thigh", "shin", "foot")
    positions = _world_positions(leg, chain, chain.q)
    blender = [evaluated_head(leg, "thigh"), evaluated_head(leg, "foot"), evaluated_tip(leg, "foot")]
    np.testing.assert_allclose(positions, blender, atol=float32_slack(leg, chain.bone_names))
    assert set(rig.rotation_channel_values(leg, chain, chain.q[None])) == {"thigh", "foot"}


def test_hinge_and_universal_variables_read_back_exactly(scene):
    leg = build_leg()
    thigh, shin = leg.pose.bones["thigh"], leg.pose.bones["shin"]
    thigh.lock_ik_y = True
    shin.lock_ik_y = shin.lock_ik_z = True
    thigh.rotation_mode, shin.rotation_mode = "YZX", "XYZ"  # Blender 'YZX' = Rx @ Rz @ Ry
    thigh.rotation_euler = (0.4, 0.0, -0.3)
    shin.rotation_euler = (1.1, 0.0, 0.0)
    chain = rig.read_chain(leg, "foot", 3)
    np.testing.assert_allclose(chain.q[:3], [0.4, -0.3, 1.1], atol=1e-7)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: setattr(o, "scale", (1.0, 2.0, 1.0)), "non-uniform scale"),
        (lambda o: setattr(o.pose.bones["shin"], "scale", (1.0, 1.5, 1.0)), "pose scale"),
        (lambda o: setattr(o.data.bones["shin"], "use_inherit_rotation", False), "inherit rotation"),
    ],
)
def test_unusable_rigs_are_refused(scene, edit, message):
    leg = build_leg()
    edit(leg)
    bpy.context.view_layer.update()
    with pytest.raises(IKSolversError, match=message):
        rig.read_chain(leg, "foot", 3)


def test_scaled_parent_scales_the_chain_unless_scale_is_not_inherited(scene):
    leg = build_leg()
    leg.pose.bones["hip"].scale = (1.5, 1.5, 1.5)
    bpy.context.view_layer.update()
    chain = rig.read_chain(leg, "foot", 3)  # the root space carries the parent's scale
    np.testing.assert_allclose(_world_positions(leg, chain, chain.q)[-1], evaluated_tip(leg, "foot"),
                               atol=float32_slack(leg, chain.bone_names) * 1.5)
    leg.data.bones["thigh"].inherit_scale = "NONE"
    with pytest.raises(IKSolversError, match="does not fully inherit the scale"):
        rig.read_chain(leg, "foot", 3)


def test_missing_bones_and_bad_lengths_are_refused(scene):
    leg = build_leg()
    with pytest.raises(IKSolversError, match="Tip bone 'toe' not found"):
        rig.read_chain(leg, "toe", 2)
    with pytest.raises(IKSolversError, match="too long"):
        rig.read_chain(leg, "foot", 5)
    with pytest.raises(IKSolversError, match="not an armature"):
        rig.read_chain(add_empty(), "foot", 2)


def test_zero_length_segment_is_refused(scene):
    obj = build_zero_length_segment()
    with pytest.raises(IKSolversError, match="zero-length or too short segment"):
        rig.read_chain(obj, "b", 2)


def test_non_finite_pose_is_refused_before_writing(scene):
    obj = build_arm()
    chain = rig.read_chain(obj, "forearm", 2)
    before = _stored_channels(obj)
    q = np.full(chain.chain.n_dof, 0.3)
    q[-1] = np.nan
    with pytest.raises(IKSolversError, match="non-finite"):
        rig.write_pose(obj, chain, q)
    assert _stored_channels(obj) == before


def test_world_to_root_inverts_scaled_frames():
    rng = np.random.default_rng(4)
    rotation = np.array(mathutils.Euler(rng.normal(size=3)).to_matrix(), dtype=float)
    frame = np.eye(4)
    frame[:3, :3] = 2.5 * rotation
    frame[:3, 3] = rng.normal(size=3)
    local = rng.normal(size=(7, 3))
    world = local @ frame[:3, :3].T + frame[:3, 3]
    np.testing.assert_allclose(root_space.world_to_root(world, frame), local, atol=1e-12)
    np.testing.assert_allclose(root_space.world_to_root(world, np.broadcast_to(frame, (7, 4, 4))), local, atol=1e-12)


def test_read_pose_matches_a_fresh_read(scene):
    leg = build_leg()
    leg.pose.bones["shin"].lock_ik_y = leg.pose.bones["shin"].lock_ik_z = True
    chain = rig.read_chain(leg, "foot", 3)
    _randomise_pose(leg, np.random.default_rng(8))
    np.testing.assert_array_equal(rig.read_pose(leg, chain), rig.read_chain(leg, "foot", 3).q)
