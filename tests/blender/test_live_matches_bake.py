"""Issue 12: what live mode shows at a frame is what the bake keys at that frame.

Both go through the same ``prepare_solve`` / ``run_solve`` with the same spec, and the core starts
every frame from the reference pose (history independence) and solves a batch exactly as it
solves each target alone, so the targets solved for and the joint values agree bit for bit
(float64, checked here). Both are then stored as Blender's float32 channels: live mode keeps the
length the bone's quaternion had (``rig.write_pose``, so that writing back what was read changes
nothing) while the bake keys unit quaternions, in the hemisphere of the previous key, so the
stored channels are the same rotation up to the sign of the quaternion and one float32 rounding
(≤ 1.2e-7, checked too). A target dragged without a frame change takes live mode's quick path,
whose one-target HI solve has the batch solve's bits: its joint rotations equal the baked ones.
"""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature

FRAMES = 12


def four_bone_chain():
    heads = [(0.0, 0.0, 1.0), (0.2, 0.02, 1.0), (0.38, 0.0, 1.03), (0.55, -0.03, 1.0), (0.7, 0.0, 1.02)]
    bones = [{"name": f"b{i}", "head": heads[i], "tail": heads[i + 1], "parent": f"b{i - 1}" if i else None,
              "roll": 0.1 * i} for i in range(4)]
    return build_armature(bones)


def keyed_target(frames: int):
    target = add_empty(location=(0.5, 0.1, 1.2))
    t = np.linspace(0.0, 2.0 * np.pi, frames, endpoint=False)
    for frame, angle in zip(range(1, frames + 1), t):
        target.location = (0.45 + 0.15 * np.cos(angle), 0.1 + 0.2 * np.sin(2 * angle), 1.0 + 0.1 * np.sin(angle))
        target.keyframe_insert("location", frame=frame)
    return target


def bone_quaternions(obj, names) -> np.ndarray:
    return np.array([tuple(obj.pose.bones[name].rotation_quaternion) for name in names], dtype=np.float32)


@pytest.mark.parametrize(("method", "reference_weight"), [("HI", 0.0), ("SDLS", 0.1), ("DLS", 0.0), ("FABRIK", 0.0)])
def test_the_live_pose_at_a_frame_is_the_baked_key_of_that_frame(addon, monkeypatch, method, reference_weight):
    from ik_solvers.blender import bake, live

    solved = {"live": [], "bake": []}
    for module, name in ((live, "live"), (bake, "bake")):
        monkeypatch.setattr(module, "run_solve", _recording(module.run_solve, solved[name]))
    obj = four_bone_chain()
    target = keyed_target(FRAMES)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target = "Chain", "b3", 4, target
    chain.method, chain.reference_weight = method, reference_weight
    names = [f"b{i}" for i in range(4)]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = obj
    if method == "HI":  # the default method: live mode keeps its spec between updates (live._live_spec)
        assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    live_poses = {}
    for frame in (5, 1, FRAMES, 7, 2):  # out of order: each frame's live pose stands alone
        scene.frame_set(frame)
        live_poses[frame] = bone_quaternions(obj, names)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=FRAMES) == {"FINISHED"}
    frames_live = [1, 5, 1, FRAMES, 7, 2]  # live_toggle solves at frame 1, then each frame_set
    assert len(solved["live"]) == len(frames_live) and len(solved["bake"]) == 1
    baked_targets, baked_q = solved["bake"][0]
    for frame, (targets, q) in zip(frames_live, solved["live"]):
        np.testing.assert_array_equal(targets[0], baked_targets[frame - 1], err_msg=f"target, frame {frame}")
        np.testing.assert_array_equal(q[0], baked_q[frame - 1], err_msg=f"joint values, frame {frame}")
    for frame, live_pose in live_poses.items():
        keyed = np.empty((4, 4), dtype=np.float32)
        for row, name in enumerate(names):
            for index in range(4):
                fcurve = _fcurve(obj, f'pose.bones["{name}"].rotation_quaternion', index)
                values = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
                fcurve.keyframe_points.foreach_get("co", values)
                keys = dict(zip(values[0::2], values[1::2]))
                keyed[row, index] = keys[np.float32(frame)]
        # The bake keeps consecutive keys in one hemisphere (no flips between keys): q and −q are one rotation.
        keyed *= np.where(np.sum(keyed * live_pose, axis=1) < 0.0, -1.0, 1.0).astype(np.float32)[:, None]
        np.testing.assert_allclose(live_pose, keyed, rtol=0, atol=1.2e-7, err_msg=f"frame {frame}")


def _recording(run_solve, into: list):
    def recording(prepared):
        result = run_solve(prepared)
        into.append((prepared.targets.copy(), result.q.copy()))
        return result

    return recording


def _fcurve(obj, data_path: str, index: int):
    from ik_solvers.blender import compat

    channelbag = compat.channelbag_for_assigned_slot(obj.animation_data)
    fcurve = channelbag.fcurves.find(data_path, index=index)
    assert fcurve is not None, f"no F-curve {data_path}[{index}]"
    return fcurve


def test_live_mode_keeps_the_spec_chain_spec_would_build(addon, monkeypatch):
    """Live mode builds a chain's spec again only when what it is built from changed
    (``spec.chain_spec(..., reuse=)``: its ``source``); after every kind of edit the spec it solves
    with is the one ``chain_spec`` builds from scratch."""
    from ik_solvers.blender import live
    from ik_solvers.blender import spec as spec_module
    from ik_solvers.blender.properties import SOLVE_SETTINGS
    from ik_solvers.blender.spec import chain_spec

    built = []
    real_built = spec_module._built
    monkeypatch.setattr(spec_module, "_built", lambda *args: built.append(1) or real_built(*args))
    used = []
    real_prepare = live.prepare_solve
    monkeypatch.setattr(live, "prepare_solve", lambda spec, inputs: used.append(spec) or real_prepare(spec, inputs))
    obj = four_bone_chain()
    target = add_empty(location=(0.5, 0.1, 1.2))
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Chain", "b3", 4, target, "HI"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    scene, view_layer = bpy.context.scene, bpy.context.view_layer

    before = 0

    def check(expect_rebuilt: bool) -> None:
        # Counted from the previous check: an edit that sets a chain setting is an update of the
        # armature, which the handler may meet (and rebuild the spec for) before this check runs.
        nonlocal before
        view_layer.update()
        live.update_live_chains(scene, bpy.context.evaluated_depsgraph_get(), force=True)
        assert (len(built) > before) == expect_rebuilt
        fresh = chain_spec(obj, chain, used[-1].rig)
        before = len(built)  # after the fresh build
        kept = used[-1]
        assert kept.source == fresh.source
        for name in {"settings_path", *(setting.enters for setting in SOLVE_SETTINGS)} - {"reference"}:
            assert getattr(kept, name) == getattr(fresh, name), name
        np.testing.assert_array_equal(kept.reference, fresh.reference)

    before = len(built)
    check(expect_rebuilt=False)  # live_toggle built it
    target.location = (0.45, 0.2, 1.1)
    check(expect_rebuilt=False)
    chain.swivel_angle = 0.3
    check(expect_rebuilt=True)
    chain.tolerance = 1e-5
    check(expect_rebuilt=True)
    pole = add_empty(location=(0.3, 1.0, 1.0))
    chain.pole_target = pole
    check(expect_rebuilt=True)
    obj.pose.bones["b1"].rotation_quaternion = (0.99, 0.0, 0.0, 0.14)
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    check(expect_rebuilt=True)
    obj.scale = (2.0, 2.0, 2.0)
    check(expect_rebuilt=True)
    target.location = (0.5, 0.0, 1.2)
    check(expect_rebuilt=False)


def test_a_target_dragged_to_each_keyed_location_poses_as_the_bake_keys(addon, monkeypatch):
    """The quick path a target move takes (``live_quick.quick_update``: the one-target HI solve) writes,
    for the target at each baked frame's location, the joint rotations of that frame's baked q, bit
    for bit (float64, before Blender stores them as float32)."""
    from ik_solvers.blender import bake, live, live_quick
    from ik_solvers.core.kinematics import local_quaternions

    baked = []
    monkeypatch.setattr(bake, "run_solve", _recording(bake.run_solve, baked))
    quick_writes = []
    write_quaternion_joints = live_quick.write_quaternion_joints

    def recording(obj, rotations, indices):
        quick_writes.append(np.array(rotations, dtype=float))
        return write_quaternion_joints(obj, rotations, indices)

    monkeypatch.setattr(live_quick, "write_quaternion_joints", recording)
    obj = four_bone_chain()
    target = keyed_target(FRAMES)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Chain", "b3", 4, target, "HI"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=FRAMES) == {"FINISHED"}
    (_, baked_q), = baked
    locations = []
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        locations.append(tuple(target.matrix_world.translation))
    scene.frame_set(1)
    target.animation_data_clear()  # the target now moves only when dragged
    obj.animation_data_clear()  # and the chain is posed by live mode alone
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    chain_model = live.state.chains[(obj.session_uid, "Chain")].spec.rig.chain
    for frame in (5, 1, FRAMES, 7, 2):  # out of order: each pose stands alone
        target.location = locations[frame - 1]
        bpy.context.view_layer.update()
        expected = local_quaternions(chain_model, baked_q[frame - 1:frame])[0]
        assert quick_writes[-1].tobytes() == expected.tobytes(), f"frame {frame}"
    assert len(quick_writes) == 5
