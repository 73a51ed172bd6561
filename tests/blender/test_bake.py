"""The bake (``ik_solvers.bake``) in real Blender: only the chain's rotation channels change, a cancel
or an error leaves the action exactly as it was, Blender's evaluation of the baked keys equals the
current-frame solve, F-curve sampling equals Blender's evaluation, no NaN reaches a key, keys stay
continuous, undo works, and repeated bakes do not grow memory."""

from __future__ import annotations

import gc
import json
import math

import bpy
import mathutils
import numpy as np
import psutil
import pytest
from conftest import add_empty, build_arm, build_armature, build_long_chain, build_two_arms

from ik_solvers.blender import bake, bake_operator, compat, sampling
from ik_solvers.blender.chains import capture_preferred_pose
from ik_solvers.blender.errors import IKSolversError
from ik_solvers.blender.frames import SolvedFrames
from ik_solvers.blender.keyframes import values_at_keys
from ik_solvers.blender.rig import read_chain
from ik_solvers.blender.spec import chain_spec
from ik_solvers.core import METHOD_FACTS, Method


@pytest.fixture
def baking(addon):
    """The add-on registered (the bake operator with it)."""
    return addon


# --------------------------------------------------------------------------- helpers
def add_chain(obj, target, tip="forearm", length=2, method="DLS", name="Arm"):
    chain = obj.ik_solvers.chains.add()
    chain.name = name
    chain.tip_bone = tip
    chain.chain_length = length
    chain.target = target
    chain.method = method
    obj.ik_solvers.active_chain_index = len(obj.ik_solvers.chains) - 1
    return chain


def key_path(obj, frames, positions):
    """Location keys (Bezier, as an animator sets them) on ``obj``."""
    for frame, position in zip(frames, positions):
        obj.location = tuple(position)
        obj.keyframe_insert("location", frame=int(frame))


def circling_target(target, frames, center=(0.3, 0.0, 1.4), radius=0.25, turns=1.0):
    """Key ``target`` on a tilted circle around ``center`` (reachable from the arm's shoulder)."""
    angles = 2.0 * math.pi * turns * (np.asarray(frames) - frames[0]) / max(frames[-1] - frames[0], 1)
    positions = np.array(center) + radius * np.stack(
        [np.cos(angles), np.sin(angles), 0.3 * np.sin(2 * angles)], 1)
    key_path(target, frames, positions)
    return positions


def fcurve_state(fcurve) -> tuple:
    """Everything stored per key, read attribute by attribute (independent of the bake's bulk I/O)."""
    return tuple(
        (tuple(k.co), tuple(k.handle_left), tuple(k.handle_right), k.handle_left_type, k.handle_right_type,
         k.interpolation, k.easing, k.type, k.back, k.amplitude, k.period,
         k.select_control_point, k.select_left_handle, k.select_right_handle)
        for k in fcurve.keyframe_points
    )


def action_state(obj) -> dict:
    """Every F-curve of the object's assigned slot with its group and keys, plus the action itself."""
    anim_data = obj.animation_data
    if anim_data is None or anim_data.action is None:
        return {"action": None, "actions": len(bpy.data.actions)}
    channelbag = anim_data.action.layers[0].strips[0].channelbag(anim_data.action_slot)
    return {
        "action": anim_data.action.name,
        "slot": anim_data.action_slot.identifier,
        "actions": len(bpy.data.actions),
        "groups": [g.name for g in channelbag.groups],
        "fcurves": {(f.data_path, f.array_index): (f.group.name if f.group else None, fcurve_state(f))
                    for f in channelbag.fcurves},
    }


def channelbag(obj):
    anim_data = obj.animation_data
    return anim_data.action.layers[0].strips[0].channelbag(anim_data.action_slot)


def evaluated_bone_matrices(obj, names) -> np.ndarray:
    bpy.context.view_layer.update()
    return np.array([np.array(obj.matrix_world @ obj.pose.bones[n].matrix) for n in names])


def assert_tip_on_target(obj, bone: str, target, atol: float = 3e-6) -> None:
    """At the current frame, Blender's evaluated tail of ``bone`` sits on ``target``'s world position."""
    tip = np.array(obj.matrix_world @ obj.pose.bones[bone].tail)
    np.testing.assert_allclose(tip, np.array(target.matrix_world.translation), atol=atol,
                               err_msg=f"{bone} at frame {bpy.context.scene.frame_current}")


def arm_with_extra_bone():
    """The 0.30 / 0.28 arm plus an unrelated 'spine' bone whose keys must survive the bake."""
    return build_armature([
        {"name": "spine", "head": (0.0, 0.0, 1.0), "tail": (0.0, 0.0, 1.35)},
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "roll": 0.4},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "roll": -0.7,
         "parent": "upper_arm"},
    ])


# --------------------------------------------------------------------------- what changes, what does not
def test_bake_writes_only_the_chains_rotation_channels(baking):
    scene = baking
    obj = arm_with_extra_bone()
    target = add_empty(location=(0.4, 0.1, 1.3))
    circling_target(target, np.arange(1, 101, 9))
    add_chain(obj, target)
    forearm, upper, spine = (obj.pose.bones[n] for n in ("forearm", "upper_arm", "spine"))
    forearm.rotation_mode = "XZY"
    # Keys the bake must leave alone: constant location keys on a chain bone (they would move the
    # disconnected upper arm), another bone's rotation, a custom property.
    for frame in (1, 40, 120):
        upper.keyframe_insert("location", frame=frame)
        spine.rotation_quaternion = (math.cos(frame / 100), math.sin(frame / 100), 0.0, 0.0)
        spine.keyframe_insert("rotation_quaternion", frame=frame)
        obj["weight"] = frame / 7.0
        obj.keyframe_insert('["weight"]', frame=frame)
    # Rotation keys of the chain: those in [20, 80] are replaced, those outside kept.
    for frame in (5, 30, 70, 95):
        upper.rotation_quaternion = (1.0, 0.0, 0.0, 0.01 * frame)
        upper.keyframe_insert("rotation_quaternion", frame=frame)
    before = action_state(obj)
    scene.frame_set(50)

    assert bpy.ops.ik_solvers.bake(frame_start=20, frame_end=80, step=1) == {"FINISHED"}

    after = action_state(obj)
    assert after["action"] == before["action"] and after["actions"] == before["actions"]
    upper_path = upper.path_from_id("rotation_quaternion")
    forearm_path = forearm.path_from_id("rotation_euler")
    baked = {(upper_path, i) for i in range(4)} | {(forearm_path, i) for i in range(3)}
    for key, (group, keys) in before["fcurves"].items():
        if key not in baked:
            assert after["fcurves"][key] == (group, keys), key
    assert set(after["fcurves"]) == set(before["fcurves"]) | baked
    for key in baked:
        group, keys = after["fcurves"][key]
        assert group == key[0].split('"')[1]
        frames = [k[0][0] for k in keys]
        assert frames == sorted(frames)
        assert [f for f in frames if 20 <= f <= 80] == list(range(20, 81))
        assert all(k[5] == "LINEAR" for k in keys if 20 <= k[0][0] <= 80)
        if key[0] == upper_path:  # the kept keys outside the range, co unchanged
            kept_before = [k[0] for k in before["fcurves"][key][1] if not 20 <= k[0][0] <= 80]
            assert [k[0] for k in keys if not 20 <= k[0][0] <= 80] == kept_before
    assert scene.frame_current == 50


def test_bake_creates_action_and_slot_once_and_reuses_them(baking):
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    circling_target(target, np.arange(1, 31, 5))
    add_chain(obj, target)
    assert obj.animation_data is None
    bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30)
    action, slot = obj.animation_data.action, obj.animation_data.action_slot
    assert action is not None and slot is not None and slot.target_id_type == "OBJECT"
    count = len(bpy.data.actions)
    state = action_state(obj)
    bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30)
    assert obj.animation_data.action == action and len(bpy.data.actions) == count
    again = action_state(obj)
    assert {key: len(keys) for key, (_, keys) in again["fcurves"].items()} == {
        key: len(keys) for key, (_, keys) in state["fcurves"].items()}  # keys replaced, not added
    assert len(channelbag(obj).fcurves) == 8  # two quaternion bones


# --------------------------------------------------------------------------- cancel and errors
def _prepared_arm(scene, with_action: bool):
    obj = arm_with_extra_bone()
    target = add_empty(location=(0.4, 0.1, 1.3))
    circling_target(target, np.arange(1, 61, 7))
    add_chain(obj, target)
    if with_action:
        spine = obj.pose.bones["spine"]
        for frame in (1, 30):
            spine.rotation_euler = (0.1 * frame, 0.0, 0.0)
            spine.keyframe_insert("rotation_euler", frame=frame)
            obj.pose.bones["upper_arm"].keyframe_insert("rotation_quaternion", frame=frame + 5)
    return obj, target


@pytest.mark.parametrize("with_action", [False, True])
def test_cancel_after_writing_restores_the_action_exactly(baking, with_action):
    scene = baking
    obj, _ = _prepared_arm(scene, with_action)
    scene.frame_set(12)
    obj.pose.bones["spine"].location = (0.0, 0.05, 0.0)  # an unkeyed pose edit the bake must not lose
    edited = tuple(obj.pose.bones["spine"].location)
    before = action_state(obj)
    actions = len(bpy.data.actions)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 60, 1, ("Arm",)))
    assert job.advance()  # sampled, solved and written
    assert action_state(obj) != before
    job.cancel()
    assert action_state(obj) == before
    assert len(bpy.data.actions) == actions
    assert (obj.animation_data is None) == (not with_action)
    assert scene.frame_current == 12
    assert tuple(obj.pose.bones["spine"].location) == edited


def test_cancel_while_sampling_frame_by_frame_restores_everything(baking):
    scene = baking
    obj, target = _prepared_arm(scene, with_action=True)
    target.parent = add_empty("Holder", location=(0.01, 0.0, 0.0))  # forces per-frame evaluation
    scene.frame_set(3)
    before = action_state(obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 60, 1, ("Arm",)))
    assert job.advance(time_budget=0.0) is False  # one frame sampled, nothing written yet
    assert 0 < job.done_steps < job.total_steps
    job.cancel()
    assert action_state(obj) == before
    assert scene.frame_current == 3


def _bad_location_key(target, frame, value):
    fcurves = compat.channelbag_for_assigned_slot(target.animation_data).fcurves
    fcurve = fcurves.find("location", index=1)
    point = min(fcurve.keyframe_points, key=lambda k: abs(k.co[0] - frame))
    point.co = (point.co[0], value)
    fcurve.update()


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("parented", [False, True], ids=["fcurve-sampling", "evaluated"])
def test_non_finite_target_is_refused_and_the_action_is_unchanged(baking, parented, value):
    scene = baking
    obj, target = _prepared_arm(scene, with_action=True)
    if parented:
        target.parent = add_empty("Holder")
    _bad_location_key(target, 29, value)
    scene.frame_set(1)
    before = action_state(obj)
    pose_before = [tuple(b.rotation_quaternion) for b in obj.pose.bones]
    with pytest.raises(RuntimeError, match="target location is not finite"):
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=60)
    assert action_state(obj) == before
    assert [tuple(b.rotation_quaternion) for b in obj.pose.bones] == pose_before
    assert scene.frame_current == 1


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("no_target", "has no target"),
        ("deleted_tip", "not found"),
        ("too_long", "too long"),
        ("unknown_chain", "no IK chain named"),
        ("reversed_range", "before the start frame"),
    ],
)
def test_unusable_chains_are_refused_with_the_scene_unchanged(baking, breakage, message):
    obj, target = _prepared_arm(baking, with_action=True)
    chain = obj.ik_solvers.chains[0]
    kwargs = {"frame_start": 1, "frame_end": 20}
    if breakage == "no_target":
        chain.target = None
    elif breakage == "deleted_tip":
        chain.tip_bone = "gone"
    elif breakage == "too_long":
        chain.chain_length = 5
    elif breakage == "unknown_chain":
        kwargs["chain"] = "Leg"
    else:
        kwargs.update(frame_start=30, frame_end=20)
    before = action_state(obj)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.ik_solvers.bake(**kwargs)
    assert action_state(obj) == before


def test_a_solve_refused_during_the_bake_names_the_chain_once(baking):
    """Issue 9: "Chain 'Arm', frames from 1: Chain 'Arm': …" named the chain twice."""
    obj, _target = _prepared_arm(baking, with_action=True)
    chain = obj.ik_solvers.chains[0]
    chain.method = "HI"
    capture_preferred_pose(obj, chain, baking)
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = True  # no ball start joint
    before = action_state(obj)
    with pytest.raises(RuntimeError, match="ball start joint") as refused:
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=20)
    assert str(refused.value).count("'Arm'") == 1 and "Chain 'Arm' at frame 1:" in str(refused.value)
    assert action_state(obj) == before


# --------------------------------------------------------------------------- baked = solved
def _live_solve_matrices(obj, frames, names, initial_rotations):
    """At each frame: reset the chain to the initial pose, run the current-frame solve, read Blender's pose."""
    scene = bpy.context.scene
    out = []
    for frame in frames:
        scene.frame_set(int(frame))
        for name, rotation in zip(names, initial_rotations):
            obj.pose.bones[name].rotation_quaternion = rotation
        assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
        out.append(evaluated_bone_matrices(obj, names))
    for name, rotation in zip(names, initial_rotations):
        obj.pose.bones[name].rotation_quaternion = rotation
    return np.array(out)


@pytest.mark.parametrize("method", ["ANALYTIC", "DLS", "FABRIK", "HI"])
@pytest.mark.parametrize("moving_root", [False, True], ids=["static-root", "animated-root-and-parented-target"])
def test_baked_keys_evaluate_to_the_current_frame_solve(baking, method, moving_root):
    scene = baking
    obj = build_arm()
    obj.pose.bones["forearm"].rotation_quaternion = (math.cos(0.3), 0.0, 0.0, math.sin(0.3))  # a bend to keep
    target = add_empty(location=(0.4, 0.1, 1.3))
    frames = np.arange(1, 41)
    if moving_root:
        holder = add_empty("Holder", location=(0.0, 0.0, 0.0))
        target.parent = holder
        key_path(holder, [1, 40], [(0.0, 0.0, 0.0), (0.05, -0.03, 0.02)])
        key_path(obj, [1, 40], [(0.0, 0.0, 0.0), (0.1, 0.05, -0.02)])
    circling_target(target, frames[::6], center=(0.3, 0.1, 1.3), radius=0.2)
    add_chain(obj, target, method=method)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}  # HI's reference; others ignore it
    names = ("upper_arm", "forearm")
    initial = [tuple(obj.pose.bones[n].rotation_quaternion) for n in names]
    check_frames = [1, 7, 20, 33, 40]
    expected = _live_solve_matrices(obj, check_frames, names, initial)
    scene.frame_set(1)

    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=40) == {"FINISHED"}
    report = json.loads(obj.ik_solvers.chains[0].last_bake_report)
    assert report["sampling"] == ("evaluated" if moving_root else "fcurves")

    for frame, live in zip(check_frames, expected):
        scene.frame_set(frame)
        baked = evaluated_bone_matrices(obj, names)
        np.testing.assert_allclose(baked, live, atol=2e-6, err_msg=f"frame {frame}")
        assert_tip_on_target(obj, "forearm", target)


def test_animated_location_of_a_disconnected_chain_bone_is_followed(baking):
    """A keyed location of the (disconnected) upper arm changes the chain per frame."""
    scene = baking
    obj = build_arm()
    upper = obj.pose.bones["upper_arm"]
    key_path(upper, [1, 30], [(0.0, 0.0, 0.0), (0.0, 0.06, 0.03)])
    target = add_empty(location=(0.4, 0.1, 1.3))
    frames = np.arange(1, 31)
    circling_target(target, frames[::5], radius=0.15)
    add_chain(obj, target)
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30) == {"FINISHED"}
    for frame in (1, 13, 30):
        scene.frame_set(frame)
        assert_tip_on_target(obj, "forearm", target)


def test_ten_bone_chain_bake_reaches_every_frames_target(baking):
    scene = baking
    obj = build_long_chain()
    target = add_empty()
    rig_chain = read_chain(obj, "b9", 10)
    base = np.array(obj.data.bones["b0"].head_local)
    frames = np.arange(1, 61)
    positions = circling_target(target, frames[::10], center=tuple(base + [0.8, 0.2, 0.1]), radius=0.3)
    add_chain(obj, target, tip="b9", length=10, method="SDLS").max_iterations = 300
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=60) == {"FINISHED"}
    chain = obj.ik_solvers.chains[0]
    assert chain.bake_frames == 60 and chain.bake_converged == 60, chain.last_bake_report
    for frame in (1, 22, 60):
        scene.frame_set(frame)
        assert_tip_on_target(obj, "b9", target, atol=1e-5)
    assert positions.shape == (6, 3) and rig_chain.chain.n_joints == 10


# --------------------------------------------------------------------------- sampling
def _evaluated_inputs(obj, chain, frames):
    scene = bpy.context.scene
    rig_chain = read_chain(obj, chain.tip_bone, chain.chain_length)
    spec = chain_spec(obj, chain, rig_chain)
    samples = []
    for frame in frames:
        scene.frame_set(int(frame))
        samples.append(sampling.sample_inputs(obj, spec, rig_chain, bpy.context.evaluated_depsgraph_get()))
    return rig_chain, sampling.FrameInputs.stack(samples)


def test_fcurve_sampling_equals_blenders_evaluation(baking):
    scene = baking
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    target.delta_location = (0.01, -0.02, 0.005)
    frames = np.arange(1, 200, 3)
    circling_target(target, frames[::8], radius=0.3, turns=1.5)
    for frame in (1, 100):  # rotation / scale keys cannot move an unparented Empty's origin
        target.rotation_euler = (0.0, frame * 0.01, 0.0)
        target.keyframe_insert("rotation_euler", frame=frame)
    fcurves = compat.channelbag_for_assigned_slot(target.animation_data).fcurves
    fcurves.find("location", index=2).modifiers.new("NOISE")
    other = add_chain(obj, target, method="HI", name="Other")
    other.keyframe_insert("swivel_angle", frame=1)  # another chain's setting
    obj["switch"] = 1.0
    obj.keyframe_insert('["switch"]', frame=1)  # a custom property (no driver reads it)
    chain = add_chain(obj, target, method="DLS")
    chain.pole_target = add_empty("Pole", location=(0.3, 0.5, 1.4))
    key_path(chain.pole_target, [1, 150], [(0.3, 0.5, 1.4), (0.2, 0.6, 1.7)])
    rig_chain, evaluated = _evaluated_inputs(obj, chain, frames)

    spec = chain_spec(obj, chain, rig_chain)
    assert sampling.fcurve_sampling_blockers(scene, obj, rig_chain, spec) == []
    sampled = sampling.sample_fcurves(obj, spec, rig_chain, frames)
    np.testing.assert_array_equal(sampled.target_world, evaluated.target_world)
    np.testing.assert_array_equal(sampled.pole_world, evaluated.pole_world)
    np.testing.assert_array_equal(sampled.root_world, evaluated.root_world)


def test_a_target_keyed_at_every_frame_is_read_from_its_keys_as_blender_evaluates_it(baking):
    """Keys at every sampled frame, of every interpolation and handle type: the bulk read of the
    keys (keyframes.values_at_keys) gives Blender's evaluation exactly."""
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    frames = np.arange(1, 120)
    circling_target(target, frames, radius=0.3, turns=2.0)
    fcurves = list(compat.channelbag_for_assigned_slot(target.animation_data).fcurves)
    interpolations = ["CONSTANT", "LINEAR", "BEZIER", "ELASTIC", "BOUNCE", "SINE", "BACK"]
    handles = ["FREE", "ALIGNED", "VECTOR", "AUTO", "AUTO_CLAMPED"]
    for k, fcurve in enumerate(fcurves):
        for i, point in enumerate(fcurve.keyframe_points):
            point.interpolation = interpolations[(i + k) % len(interpolations)]
            point.handle_left_type = point.handle_right_type = handles[(2 * i + k) % len(handles)]
            if point.handle_left_type == "FREE":
                point.handle_left = (point.co[0] - 0.3, point.co[1] + 0.2 * math.sin(i))
        fcurve.update()
        keyed = values_at_keys(fcurve, frames.astype(float))
        assert keyed is not None
        np.testing.assert_array_equal(keyed, [fcurve.evaluate(float(frame)) for frame in frames])
        assert values_at_keys(fcurve, np.array([1.5])) is None  # between keys: evaluated
    chain = add_chain(obj, target)
    rig_chain, evaluated = _evaluated_inputs(obj, chain, frames)
    sampled = sampling.sample_fcurves(obj, chain_spec(obj, chain, rig_chain), rig_chain, frames)
    np.testing.assert_array_equal(sampled.target_world, evaluated.target_world)
    fcurves[0].modifiers.new("NOISE")
    assert values_at_keys(fcurves[0], frames.astype(float)) is None


@pytest.mark.parametrize(
    "change, reason",
    [
        ("target_parent", "the target has a parent"),
        ("target_constraint", "the target has constraints"),
        ("target_driver", "the target has drivers"),
        ("delta_location_keys", "the target animates delta_location"),
        ("armature_moves", "the armature animates location"),
        ("swivel_keys", "the armature animates ik_solvers"),
    ],
)
def test_fcurve_sampling_is_refused_where_it_would_differ(baking, change, reason):
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    key_path(target, [1, 10], [(0.4, 0.1, 1.3), (0.3, 0.2, 1.3)])
    chain = add_chain(obj, target)
    if change == "target_parent":
        target.parent = add_empty("Holder")
    elif change == "target_constraint":
        target.constraints.new("COPY_LOCATION")
    elif change == "target_driver":
        target.driver_add("location", 0)
    elif change == "delta_location_keys":
        target.keyframe_insert("delta_location", frame=1)
    elif change == "armature_moves":
        obj.keyframe_insert("location", frame=1)
    else:
        chain.keyframe_insert("swivel_angle", frame=1)
    rig_chain = read_chain(obj, "forearm", 2)
    reasons = sampling.fcurve_sampling_blockers(bpy.context.scene, obj, rig_chain, chain_spec(obj, chain, rig_chain))
    assert any(r.startswith(reason) for r in reasons), reasons


def test_an_animated_locked_bone_is_sampled_per_frame_and_baked_as_blender_shows_it(baking):
    """A fully locked chain bone is held as read; animating its rotation moves the chain, so the
    inputs are evaluated frame by frame and the chain is read again where it changes."""
    obj = build_armature([
        {"name": "a", "head": (0.0, 0.0, 1.0), "tail": (0.3, 0.0, 1.0)},
        {"name": "b", "head": (0.3, 0.0, 1.0), "tail": (0.5, 0.05, 1.0), "parent": "a"},
        {"name": "c", "head": (0.5, 0.05, 1.0), "tail": (0.75, 0.1, 1.0), "parent": "b"},
    ])
    locked = obj.pose.bones["b"]
    locked.lock_ik_x = locked.lock_ik_y = locked.lock_ik_z = True
    locked.rotation_mode = "XYZ"
    for frame, angle in ((1, 0.0), (30, 0.8)):
        locked.rotation_euler = (0.0, 0.0, angle)
        locked.keyframe_insert("rotation_euler", frame=frame)
    target = add_empty(location=(0.45, 0.2, 1.05))
    chain = add_chain(obj, target, tip="c", length=3, method="SDLS")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30) == {"FINISHED"}
    report = json.loads(chain.last_bake_report)
    assert report["sampling"] == "evaluated"
    assert report["sampling_reasons"] == ['the armature animates pose.bones["b"].rotation_euler']
    assert report["evaluated_frames_checked"] == 30 and report["evaluated_mismatch_frames"] == []
    assert report["status_counts"]["CONVERGED"] == 30
    baking.frame_set(30)
    assert np.linalg.norm(np.array(obj.matrix_world @ obj.pose.bones["c"].tail)
                          - np.array(target.matrix_world.translation)) < 1e-5


# --------------------------------------------------------------------------- re-bakes
@pytest.mark.parametrize("method", [method.value for method in METHOD_FACTS])
@pytest.mark.parametrize("rotation_mode", ["QUATERNION", "XZY"])
def test_baking_the_same_range_twice_gives_bit_identical_keys(baking, method, rotation_mode):
    """Issue 11: every method starts each frame from the chain's reference pose, never from the pose
    at the current frame or the bake's start pose, so a re-bake (which starts on the first bake's
    keys) writes exactly the same keys, bit for bit."""
    scene = baking
    obj = build_arm()
    for bone in obj.pose.bones:
        bone.rotation_mode = rotation_mode
    target = add_empty(location=(0.4, 0.1, 1.3))
    circling_target(target, np.arange(1, 41, 6), radius=0.2)
    chain = add_chain(obj, target, method=method)
    if METHOD_FACTS[Method(method)].needs_preferred_pose:
        capture_preferred_pose(obj, chain, scene)
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=40) == {"FINISHED"}
    first = action_state(obj)
    assert len(first["fcurves"]) == 8 if rotation_mode == "QUATERNION" else 6
    scene.frame_set(1)  # the pose is now the first bake's keys
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=40) == {"FINISHED"}
    assert action_state(obj) == first


# --------------------------------------------------------------------------- keys
def test_keys_are_continuous_euler_and_single_hemisphere_quaternions(baking):
    obj = build_arm()
    obj.pose.bones["upper_arm"].rotation_mode = "ZYX"
    target = add_empty()
    frames = np.arange(1, 121)
    circling_target(target, frames[::4], center=(0.0, 0.0, 1.4), radius=0.4, turns=2.0)  # round the shoulder twice
    add_chain(obj, target, method="ANALYTIC")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=120) == {"FINISHED"}
    bag = channelbag(obj)

    def values(path, width):
        return np.array([[k.co[1] for k in bag.fcurves.find(path, index=i).keyframe_points] for i in range(width)]).T

    euler = values(obj.pose.bones["upper_arm"].path_from_id("rotation_euler"), 3)
    quaternion = values(obj.pose.bones["forearm"].path_from_id("rotation_quaternion"), 4)
    # Each key is the Euler triple nearest its predecessor among all triples of the same rotation,
    # with mathutils' own compatible-Euler conversion as the reference.
    for previous, current in zip(euler[:-1], euler[1:]):
        nearest = mathutils.Euler(current, "ZYX").to_matrix().to_euler("ZYX", mathutils.Euler(previous, "ZYX"))
        assert np.abs(current - previous).sum() <= np.abs(np.array(nearest) - previous).sum() + 1e-5
    assert np.ptp(euler, axis=0).max() > 2 * math.pi  # two full turns, unwrapped rather than wrapped
    assert np.all(np.einsum("ni,ni->n", quaternion[1:], quaternion[:-1]) > 0.0)


def test_baked_block_continues_the_key_kept_before_it(baking):
    obj = build_arm()
    upper = obj.pose.bones["upper_arm"]
    upper.rotation_mode = "XYZ"
    upper.rotation_euler = (0.0, 0.0, 2 * math.pi)  # a key a whole turn up
    upper.keyframe_insert("rotation_euler", frame=1)
    upper.rotation_euler = (0.0, 0.0, 0.0)
    target = add_empty(location=(0.35, 0.15, 1.35))
    add_chain(obj, target, method="ANALYTIC")
    assert bpy.ops.ik_solvers.bake(frame_start=10, frame_end=20) == {"FINISHED"}
    z = [k.co[1] for k in channelbag(obj).fcurves.find(upper.path_from_id("rotation_euler"), index=2).keyframe_points]
    assert z[0] == pytest.approx(2 * math.pi, abs=1e-6)
    assert all(abs(v - 2 * math.pi) < math.pi for v in z[1:])


def test_step_keys_every_nth_frame_and_the_end_frame(baking):
    obj = build_arm()
    upper = obj.pose.bones["upper_arm"]
    for frame in (3, 4, 40):
        upper.keyframe_insert("rotation_quaternion", frame=frame)
    target = add_empty()
    circling_target(target, np.arange(1, 41, 10))
    add_chain(obj, target)
    assert bpy.ops.ik_solvers.bake(frame_start=2, frame_end=20, step=5) == {"FINISHED"}
    frames = [k.co[0] for k in channelbag(obj).fcurves.find(upper.path_from_id("rotation_quaternion"), index=0)
              .keyframe_points]
    assert frames == [2, 7, 12, 17, 20, 40]


# --------------------------------------------------------------------------- report, several chains
def test_report_counts_unreachable_frames_and_is_stored(baking):
    obj = build_arm()
    target = add_empty()
    key_path(target, [1, 20], [(0.3, 0.1, 1.4), (1.5, 0.0, 1.4)])  # leaves the arm's reach (0.58)
    add_chain(obj, target, method="ANALYTIC")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=20) == {"FINISHED"}
    chain = obj.ik_solvers.chains[0]
    report = json.loads(chain.last_bake_report)
    counts = report["status_counts"]
    assert sum(counts.values()) == 20 == chain.bake_frames
    assert counts["UNREACHABLE"] == chain.bake_unreachable > 0
    assert counts["CONVERGED"] == chain.bake_converged > 0
    assert report["max_excess"] == pytest.approx(chain.bake_max_excess) and report["max_excess"] < 1e-6
    assert report["flip_frames"] == [] and chain.bake_flip_frames == 0


def test_all_chains_bakes_each_enabled_chain(baking):
    obj = build_two_arms()
    left, right = add_empty("L", (0.4, 0.3, 1.3)), add_empty("R", (0.4, -0.3, 1.5))
    key_path(left, [1, 10], [(0.4, 0.3, 1.3), (0.3, 0.4, 1.5)])
    add_chain(obj, left, tip="l_fore", name="Left")
    add_chain(obj, right, tip="r_fore", name="Right")
    disabled = add_chain(obj, right, tip="r_fore", name="Off")
    disabled.enabled = False
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=10, all_chains=True) == {"FINISHED"}
    groups = sorted(g.name for g in channelbag(obj).groups)
    assert groups == ["l_fore", "l_upper", "r_fore", "r_upper"]
    assert [c.bake_frames for c in obj.ik_solvers.chains] == [10, 10, 0]


# --------------------------------------------------------------------------- undo, memory
def test_undo_after_bake_restores_the_action(baking):
    obj = build_arm()
    target = add_empty()
    circling_target(target, np.arange(1, 21, 5))
    add_chain(obj, target)
    obj.pose.bones["upper_arm"].keyframe_insert("rotation_quaternion", frame=5)
    bpy.ops.ed.undo_push(message="before bake")
    before = action_state(obj)
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=20) == {"FINISHED"}
    # Called from Python an operator pushes no undo step (the UI pushes one for 'UNDO' operators).
    bpy.ops.ed.undo_push(message="Bake IK")
    assert action_state(bpy.data.objects["Rig"]) != before
    bpy.ops.ed.undo()
    assert action_state(bpy.data.objects["Rig"]) == before


def test_repeated_bakes_do_not_grow_memory(baking):
    scene = baking
    obj = build_long_chain()
    target = add_empty()
    base = np.array(obj.data.bones["b0"].head_local)
    circling_target(target, np.arange(1, 1001, 50), center=tuple(base + [0.8, 0.2, 0.1]), radius=0.3)
    add_chain(obj, target, tip="b9", length=10, method="DLS")
    process = psutil.Process()

    def bake_once():
        assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=1000) == {"FINISHED"}
        gc.collect()
        return process.memory_info().rss

    for _ in range(3):  # warm-up: allocator pools, caches
        bake_once()
    start = process.memory_info().rss
    rss = np.array([bake_once() for _ in range(10)]) / 1e6
    actions = len(bpy.data.actions)
    # nla.bake adds about 7 MB per bake of this size (a new Action each time): 70 MB over ten.
    # Ours replaces keys in place; what remains is the allocator's pools coming and going (swings
    # of up to ~10 MB seen here, flat over 60 bakes), hence the bound of about two nla.bakes.
    assert rss.max() - start / 1e6 < 15.0, rss
    assert actions == 2  # the armature's and the target's
    assert len(channelbag(obj).fcurves[0].keyframe_points) == 1000
    assert scene.frame_current == 1


def arm_reaching_across_its_pole(method: str = "HI"):
    """The arm (preferred pose captured) and a target keyed linearly across the HI pole, frames 1–41."""
    obj = build_arm()
    target = add_empty()
    chain = add_chain(obj, target, method=method)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}  # HI's reference; others ignore it
    # The rest pose's plane through shoulder (0, 0, 1.4), elbow (0.3, 0, 1.4) and tip
    # (0.57, 0.08, 1.39) has normal n0 ∝ (0, 0.003, 0.024): the target passes 0.4 from the
    # shoulder along n0 at frame 21, sweeping across the pole.
    n0 = np.array([0.0, 0.003, 0.024]) / np.linalg.norm([0.0, 0.003, 0.024])
    pole_point = np.array([0.0, 0.0, 1.4]) + 0.4 * n0
    key_path(target, [1, 41], [pole_point - (0.2, 0, 0), pole_point + (0.2, 0, 0)])
    for point in compat.channelbag_for_assigned_slot(target.animation_data).fcurves[0].keyframe_points:
        point.interpolation = "LINEAR"
    return obj, target, chain


def test_pole_object_map_flips_are_told_by_the_pole_line_not_the_preferred_poles(baking):
    """With the pole-object map the singular direction is the shoulder→pole line: crossing it is a
    warned pole crossing, while crossing the preferred pose's poles ±n0 is nothing special."""
    obj, target, chain = arm_reaching_across_its_pole()
    shoulder = np.array([0.0, 0.0, 1.4])
    pole = add_empty("Pole", location=tuple(shoulder + (0.0, -0.5, 0.0)))
    chain.zero_plane_map, chain.pole_target = "POLE_OBJECT", pole
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=41) == {"FINISHED"}
    across_n0 = json.loads(chain.last_bake_report)
    assert across_n0["flip_frames"] == []

    # Now a path that sweeps across the pole line, 0.4 from the shoulder, at frame 21.
    line_point = shoulder + 0.4 * np.array([0.0, -1.0, 0.0])
    target.animation_data_clear()
    key_path(target, [1, 41], [line_point - (0.0, 0.0, 0.2), line_point + (0.0, 0.0, 0.2)])
    for point in compat.channelbag_for_assigned_slot(target.animation_data).fcurves[0].keyframe_points:
        point.interpolation = "LINEAR"
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=41) == {"FINISHED"}
    flips = json.loads(chain.last_bake_report)["flip_frames"]
    assert flips and {flip["frame"] for flip in flips} <= {21, 22}
    assert all(flip["pole_crossing"] and flip["warned"] for flip in flips)


def test_hi_bake_reports_the_flip_where_the_target_crosses_the_pole(baking):
    obj, _target, chain = arm_reaching_across_its_pole()
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=41) == {"FINISHED"}
    report = json.loads(chain.last_bake_report)
    flips = report["flip_frames"]
    # Frame 21 sits on the pole itself (the map's singular point): the plane may jump into and out of it.
    assert flips and {flip["frame"] for flip in flips} <= {21, 22}
    assert all(flip["pole_crossing"] for flip in flips)
    assert sum(flip["turn_degrees"] for flip in flips) > 90
    assert chain.bake_flip_frames == len(flips)
    assert report["status_counts"]["CONVERGED"] == 41


def test_animated_swivel_angle_is_baked_frame_by_frame_in_pose_mode(baking):
    scene = baking
    obj = build_arm()
    target = add_empty(location=(0.35, 0.15, 1.3))
    chain = add_chain(obj, target, method="HI")
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    for frame, angle in ((1, 0.0), (30, 1.2)):
        chain.swivel_angle = angle
        chain.keyframe_insert("swivel_angle", frame=frame)
    bpy.ops.object.mode_set(mode="POSE")
    names = ("upper_arm", "forearm")
    check_frames = [1, 12, 30]
    expected = _live_solve_matrices(obj, check_frames, names, [(1.0, 0.0, 0.0, 0.0)] * 2)
    scene.frame_set(1)
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30) == {"FINISHED"}
    assert json.loads(chain.last_bake_report)["sampling"] == "evaluated"
    elbows = []
    for frame, live in zip(check_frames, expected):
        scene.frame_set(frame)
        baked = evaluated_bone_matrices(obj, names)
        np.testing.assert_allclose(baked, live, atol=2e-6, err_msg=f"frame {frame}")
        elbows.append(baked[1][:3, 3])
    # The target stands still: only the swivel moves the elbow, and it does.
    assert np.linalg.norm(elbows[2] - elbows[0]) > 0.05


def test_bench_bake_runs_and_writes_its_outputs(scene, tmp_path):
    """A small run of scripts/bench_bake.py: both systems per rig, ratios, CSV / JSON / PNG."""
    import csv
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_bake.py"
    spec = importlib.util.spec_from_file_location("bench_bake", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--out", str(tmp_path), "--frames", "60", "--repeats", "2"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "bench_bake.csv")))
    for rig in bench.RIGS:
        mine = [row for row in rows if row["rig"] == rig]
        assert mine[0]["system"] == "Blender IK + nla.bake" and mine[0]["actions_added"] == "2"
        ours = mine[1:]
        assert ours and all(row["actions_added"] in ("0", "1") for row in ours)  # 1: the first bake's action
        for row in ours:
            ratio = float(mine[0]["us_per_frame"]) / float(row["us_per_frame"])
            assert float(row["speedup_vs_blender"]) == pytest.approx(ratio)
            if row["method"] in ("ANALYTIC", "DLS"):
                assert float(row["tip_error_max"]) < 1e-5, row
    report = json.loads((tmp_path / "bench_bake.json").read_text())
    assert report["meta"]["frames"] == 60 and len(report["bakes"]) == len(rows)
    assert (tmp_path / "bench_bake.png").stat().st_size > 10_000
    assert bench.main(["--frames", "1"]) == 1


def test_live_chains_hold_still_while_the_bake_steps_through_frames(baking, live_solves):

    scene = baking
    obj, target = _prepared_arm(scene, with_action=False)
    target.parent = add_empty("Holder")  # per-frame evaluation: sixty frame changes
    scene.frame_set(1)  # the keyed target where frame 1 puts it
    chain = obj.ik_solvers.chains[0]
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and chain.use_live
    solves = live_solves.count
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=60) == {"FINISHED"}
    assert live_solves.count == solves
    scene.frame_set(33)  # live again afterwards, on top of the baked keys: the same pose
    assert live_solves.count == solves + 1
    assert_tip_on_target(obj, "forearm", target)


class _ModalStandIn:
    """The bake operator's modal() driven by hand: the headless module has no event loop."""

    TIME_PER_TICK = 0.0  # one frame per timer tick

    def __init__(self, job):
        self._job, self._timer, self.reports = job, None, []

    def report(self, kind, message):
        self.reports.append((kind, message))

    def __getattr__(self, name):  # _end, _fail, _done: the operator's own helpers, bound to us
        return getattr(bake_operator.IK_SOLVERS_OT_bake, name).__get__(self)


def _tick(operator, kind):
    return bake_operator.IK_SOLVERS_OT_bake.modal(operator, bpy.context, type("Event", (), {"type": kind})())


def test_modal_bake_advances_per_tick_and_esc_restores_the_action(baking):
    scene = baking
    obj, target = _prepared_arm(scene, with_action=True)
    target.parent = add_empty("Holder")
    scene.frame_set(7)
    before = action_state(obj)
    operator = _ModalStandIn(bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 60, 1, ("Arm",))))
    assert _tick(operator, "MOUSEMOVE") == {"RUNNING_MODAL"}
    for _ in range(10):
        assert _tick(operator, "TIMER") == {"RUNNING_MODAL"}
    assert 0 < operator._job.done_steps < operator._job.total_steps
    assert _tick(operator, "ESC") == {"CANCELLED"}
    assert operator.reports == [({"WARNING"}, "Bake cancelled; the action is as it was.")]
    assert action_state(obj) == before and scene.frame_current == 7

    operator = _ModalStandIn(bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 60, 1, ("Arm",))))
    ticks = 0
    while (result := _tick(operator, "TIMER")) == {"RUNNING_MODAL"}:
        ticks += 1
    # A frame sampled per tick (the 60th also solves and writes), then a frame of the keys checked
    # in Blender's evaluation per tick (issue 10: the check is resumable too, Esc stays responsive).
    assert result == {"FINISHED"} and ticks + 1 == 60 + 59
    assert operator.reports[0][1].startswith("Baked 'Arm' over 60 frames")
    assert obj.ik_solvers.chains[0].bake_frames == 60 and scene.frame_current == 7


@pytest.mark.parametrize("mode", ["QUATERNION", "XYZ", "ZXY", "YZX", "AXIS_ANGLE"])
def test_every_rotation_mode_bakes_to_keys_that_reach_the_target(baking, mode):
    scene = baking
    obj = build_arm()
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = mode
    target = add_empty()
    circling_target(target, np.arange(1, 51, 7), center=(0.3, 0.1, 1.3), radius=0.2)
    add_chain(obj, target, method="DLS")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=50) == {"FINISHED"}
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
    bag = channelbag(obj)
    assert {f.data_path for f in bag.fcurves} == {obj.pose.bones[n].path_from_id(prop) for n in ("upper_arm", "forearm")}
    for frame in (1, 18, 50):
        scene.frame_set(frame)
        assert_tip_on_target(obj, "forearm", target)


def test_a_chain_rooted_on_an_earlier_chains_bones_follows_their_new_keys(baking):
    """Bake all: the arm hangs from the spine chain baked just before it in the same run."""
    scene = baking
    obj = build_armature([
        {"name": "spine1", "head": (0.0, 0.0, 1.0), "tail": (0.0, 0.0, 1.2)},
        {"name": "spine2", "head": (0.0, 0.0, 1.2), "tail": (0.0, 0.0, 1.4), "parent": "spine1"},
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "parent": "spine2",
         "connect": False},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
    ])
    chest, hand = add_empty("Chest"), add_empty("Hand")
    key_path(chest, [1, 30], [(0.05, 0.0, 1.39), (-0.1, 0.1, 1.36)])  # the spine leans
    key_path(hand, [1, 30], [(0.4, 0.1, 1.3), (0.2, 0.3, 1.5)])
    add_chain(obj, chest, tip="spine2", name="Spine")
    add_chain(obj, hand, tip="forearm", name="Arm")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30, all_chains=True) == {"FINISHED"}
    reports = [json.loads(c.last_bake_report) for c in obj.ik_solvers.chains]
    assert [r["sampling"] for r in reports] == ["fcurves", "evaluated"]  # the arm's root is now keyed
    for frame in (1, 11, 30):
        scene.frame_set(frame)
        for bone, target in (("spine2", chest), ("forearm", hand)):
            assert_tip_on_target(obj, bone, target)


# --------------------------------------------------------------------------- the public steps
def _without_seconds(report: dict) -> dict:
    return {name: value for name, value in report.items() if name != "seconds"}


@pytest.mark.parametrize("method", ["DLS", "HI"])
@pytest.mark.parametrize("sampling", ["fcurves", "evaluated", "two shapes"])
def test_steps_in_parts_key_and_report_what_advance_does(baking, method, sampling):
    """What scripts/ik_batch.py does: sample and solve uneven runs of frames, gather them and
    write once. The keys equal advance()'s bit for bit, and the report too, HI flips included:
    a flip at a part boundary is found, and with two alternating chain shapes (a keyed shoulder
    location) flips are found within each shape as in the whole solve."""
    obj, target, _chain = arm_reaching_across_its_pole(method)
    if sampling == "evaluated":
        target.parent = add_empty("Holder", location=(0.01, 0.0, 0.0))
    elif sampling == "two shapes":
        upper = obj.pose.bones["upper_arm"]
        for frame in range(1, 42):
            upper.location = (0.0, 0.02, 0.01) if (frame // 3) % 2 else (0.0, 0.0, 0.0)
            upper.keyframe_insert("location", frame=frame)
        upper.location = (0.0, 0.0, 0.0)
    options = bake.BakeOptions(1, 41, 1, ("Arm",))
    whole = bake.BakeJob(bpy.context, obj, options)
    assert whole.advance()
    expected_keys, (expected_report,) = action_state(obj), [r.to_dict() for r in whole.reports]
    whole.cancel()

    job = bake.BakeJob(bpy.context, obj, options)
    (chain,) = job.chains
    parts = [job.solve(chain, job.sample(chain, frames)) for frames in np.split(job.frames, [13, 21, 22])]
    assert [len(part.frames) for part in parts] == [13, 8, 1, 19]
    report = job.write_solved(chain, SolvedFrames.concatenate(parts)).to_dict()
    assert action_state(obj) == expected_keys
    job.finish()
    assert _without_seconds(report) == _without_seconds(expected_report)
    assert report["sampling"] == ("fcurves" if sampling == "fcurves" else "evaluated")
    assert json.loads(obj.ik_solvers.chains[chain.name].last_bake_report) == report
    if method == "HI":
        flips = report["flip_frames"]
        assert flips and all(20 <= flip["frame"] <= 25 and flip["pole_crossing"] for flip in flips)
        if sampling == "two shapes":
            # Shape (frame // 3) % 2: the target crosses the pole once, so each shape's own
            # sequence of frames flips there.
            assert {(flip["frame"] // 3) % 2 for flip in flips} == {0, 1}


def test_write_solved_refuses_a_solve_of_other_frames_and_keys_nothing(baking):
    obj, _target, _chain = arm_reaching_across_its_pole("DLS")
    before = action_state(obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 41, 1, ("Arm",)))
    (chain,) = job.chains
    half = job.solve(chain, job.sample(chain, job.frames[:20]))
    with pytest.raises(IKSolversError, match="the solved frames are not the bake's frames"):
        job.write_solved(chain, half)
    assert action_state(obj) == before
    job.cancel()
    assert chain.report is None and obj.ik_solvers.chains[chain.name].last_bake_report == ""
