"""Reduced keys in real Blender (SPEC §9): after replacing a bake's per-frame rotation keys by reduced
Bézier keys, Blender's own evaluation (``scene.frame_set`` and the pose bones' matrices) keeps every
joint and the tip within the bound of the unreduced bake at every frame; nothing else changes."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from bench_keys import catmull_rom
from conftest import add_empty
from test_bake import action_state, add_chain, arm_with_extra_bone, key_path

from ik_solvers.blender import bake, verify
from ik_solvers.blender.key_reduction import reduce_rotation_keys, reduction_sentence
from ik_solvers.blender.rig import read_chain
from ik_solvers.core.key_reduction import FLOAT32_MARGIN

FRAMES = np.arange(1, 122)
JOINTS = ("upper_arm", "forearm")


@pytest.fixture
def baking(addon):
    return addon


def target_path(seed: int, jitter: float) -> np.ndarray:
    """A hand-keyed target (random reachable poses every 12 frames, Catmull-Rom between) plus
    per-frame noise of ``jitter`` (m) like recorded motion."""
    rng = np.random.default_rng(seed)
    keys = np.array([0.3, 0.05, 1.4]) + rng.uniform(-0.15, 0.15, size=(11, 3))
    return catmull_rom(keys, 12) + rng.normal(scale=jitter, size=(121, 3))


def chain_points(obj) -> np.ndarray:
    """Blender's evaluated world joint heads and the tip at the current frame, ``(3, 3)``."""
    bones = [obj.pose.bones[name] for name in JOINTS]
    world = obj.matrix_world
    return np.array([np.array(world @ b.head) for b in bones] + [np.array(world @ bones[-1].tail)])


def evaluated_points(scene, obj) -> np.ndarray:
    out = []
    for frame in FRAMES:
        scene.frame_set(int(frame))
        out.append(chain_points(obj))
    return np.array(out)


def merged_segments(reduced) -> int:
    """Segments merged with free handle times: some channel's handles not at a third of the segment."""
    starts, ends = reduced.frames[:-1, None], reduced.frames[1:, None]
    free = [~np.isclose(times[:, 0] - starts, (ends - starts) / 3.0, atol=1e-4).all(axis=1)
            for times in reduced.handle_frames]
    return int(np.logical_or.reduce(free).sum())


def written_handles(fcurve_keys) -> tuple[np.ndarray, np.ndarray]:
    """The stored left and right handles ``(K, 2)`` (frame, value) of keys read by ``fcurve_state``."""
    return np.array([k[1] for k in fcurve_keys]), np.array([k[2] for k in fcurve_keys])


def curve_points(obj, rig) -> np.ndarray:
    """Root-space joints and tip ``(N, 3, 3)`` at every frame through the core's forward kinematics
    of Blender's own evaluation of the chain's rotation F-curves (``FCurve.evaluate``)."""
    from ik_solvers.blender import compat
    from ik_solvers.blender.key_reduction import rotations_of_mode
    from ik_solvers.blender.keyframes import rotation_data_path
    from ik_solvers.core.key_points import chain_points

    bag = compat.channelbag_for_assigned_slot(obj.animation_data)
    rotations = []
    for name in JOINTS:
        bone = obj.pose.bones[name]
        curves = sorted((f for f in bag.fcurves if f.data_path == rotation_data_path(bone)), key=lambda f: f.array_index)
        values = np.array([[f.evaluate(float(frame)) for f in curves] for frame in FRAMES])
        rotations.append(rotations_of_mode(bone.rotation_mode)(values))
    return chain_points(rig.chain, rotations)


def baked_arm(scene, mode: str, jitter: float, seed: int = 0):
    obj = arm_with_extra_bone()
    spine = obj.pose.bones["spine"]
    for frame in (1, 60, 121):  # another bone's keys: must stay exactly as they are
        spine.rotation_quaternion = (np.cos(frame / 100), np.sin(frame / 100), 0.0, 0.0)
        spine.keyframe_insert("rotation_quaternion", frame=frame)
    for name in JOINTS:
        obj.pose.bones[name].rotation_mode = mode
    target = add_empty()
    key_path(target, FRAMES, target_path(seed, jitter))
    add_chain(obj, target, method="HI")
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}  # HI's reference pose
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=121, step=1) == {"FINISHED"}
    return obj


@pytest.mark.parametrize("mode", ["QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
@pytest.mark.parametrize("jitter", [0.0, 3e-4])
def test_reduced_keys_stay_within_the_bound_at_every_frame_as_blender_evaluates_them(baking, mode, jitter):
    scene = baking
    obj = baked_arm(scene, mode, jitter)
    reference = evaluated_points(scene, obj)
    rig = read_chain(obj, "forearm", 2)
    kept, merged, agreement = {}, 0, 0.0
    for key_error in (1e-3, 1e-4):  # the coarser first: the finer then reduces the reduced keys' frames again
        obj = baked_arm(scene, mode, jitter) if kept else obj
        before, full_curves = action_state(obj), curve_points(obj, rig)
        reduced = reduce_rotation_keys(obj, rig, FRAMES, key_error=key_error)
        errors = np.linalg.norm(evaluated_points(scene, obj) - reference, axis=-1).max(axis=1)
        assert errors.max() <= key_error, (mode, key_error, errors.max(), int(np.argmax(errors)) + 1)
        np.testing.assert_allclose(reduced.errors, errors, atol=2e-6)  # the core saw what Blender shows
        # FCurve.evaluate alone (the same forward kinematics on both sides): within FLOAT32_MARGIN
        on_curves = np.linalg.norm(curve_points(obj, rig) - full_curves, axis=-1).max(axis=1)
        assert np.abs(reduced.errors - on_curves).max() <= FLOAT32_MARGIN * key_error
        agreement = max(agreement, float(np.abs(reduced.errors - on_curves).max()) / key_error)
        merged += merged_segments(reduced)
        after = action_state(obj)
        joint = 0
        for key, (group, keys) in before["fcurves"].items():
            if JOINTS[0] in key[0] or JOINTS[1] in key[0]:
                written = after["fcurves"][key][1]
                assert [k[0][0] for k in written] == reduced.frames.tolist()
                assert all(k[3] == k[4] == "FREE" and k[5] == "BEZIER" for k in written)
                joint = 0 if JOINTS[0] in key[0] else 1
                left, right = written_handles(written)
                times, values = reduced.handle_times(joint), reduced.handles(joint)
                np.testing.assert_array_equal(left[:, 0], times[0][:, key[1]])  # the handles' frames and values
                np.testing.assert_array_equal(right[:, 0], times[1][:, key[1]])  # as the core fitted them
                np.testing.assert_array_equal(left[:, 1], values[0][:, key[1]])
                np.testing.assert_array_equal(right[:, 1], values[1][:, key[1]])
            else:
                assert after["fcurves"][key] == (group, keys), key
        assert set(after["fcurves"]) == set(before["fcurves"])
        kept[key_error] = reduced.kept_fraction
        bpy.data.objects.remove(obj)
    print(f"{mode}, jitter {jitter * 1e3:.1f} mm: kept {kept[1e-4]:.1%} of the keys at 0.1 mm, "
          f"{kept[1e-3]:.1%} at 1 mm; {merged} merged segments; the core's world error within "
          f"{agreement:.3%} of the bound of FCurve.evaluate's (FLOAT32_MARGIN {FLOAT32_MARGIN:.0%})")
    assert kept[1e-3] <= kept[1e-4] < 1.0
    assert merged > 0  # segments with free handle times among those Blender evaluated


def test_keys_outside_the_reduced_frames_are_kept_with_their_data(baking):
    scene = baking
    obj = baked_arm(scene, "QUATERNION", 0.0)
    rig = read_chain(obj, "forearm", 2)
    before = action_state(obj)
    reduced = reduce_rotation_keys(obj, rig, FRAMES[20:80])
    after = action_state(obj)
    for key, (_group, keys) in after["fcurves"].items():
        if "upper_arm" in key[0] or "forearm" in key[0]:
            old = before["fcurves"][key][1]
            assert keys[:20] == old[:20] and keys[-41:] == old[-41:]
            assert [k[0][0] for k in keys[20:-41]] == reduced.frames.tolist()
    assert reduced.keys_before == 60 and reduced.keys_after < 20 and merged_segments(reduced) > 0
    assert reduced.max_error <= 1e-4 * (0.3 + 0.28)  # the default: 0.1 mm per metre of reach


@pytest.mark.parametrize("mode", ["QUATERNION", "YXZ"])
def test_a_bake_with_reduce_keys_holds_the_bound_and_its_check_finds_no_mismatch(baking, mode):
    scene = baking
    obj = baked_arm(scene, mode, 0.0, seed=3)
    reference = evaluated_points(scene, obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
    assert job.advance()
    report = job.finish()[0]
    reduced = job.chains[0].reduced
    assert reduced is not None and reduced.keys_after < 0.4 * reduced.keys_before and merged_segments(reduced) > 0
    # Every frame through Blender's F-curve evaluation, frame_set on the kept keys and the peaks only
    assert report.evaluated_mismatch_frames == [] and report.evaluated_frames_checked <= verify.SPARSE_LIMIT
    errors = np.linalg.norm(evaluated_points(scene, obj) - reference, axis=-1).max(axis=1)
    assert errors.max() <= 1e-4
    assert reduction_sentence("Arm", reduced).startswith(f"Reduced the keys of 'Arm' from 121 to {reduced.keys_after}")


def test_the_check_of_reduced_keys_finds_a_segment_that_leaves_the_bound_between_the_frames_it_sets(baking):
    """The check evaluates every frame's curves (``FCurve.evaluate``), not only its ``frame_set``
    frames: a handle moved in one segment after the bake shows as mismatches in that segment."""
    scene = baking
    obj = baked_arm(scene, "QUATERNION", 0.0, seed=3)
    full_tips = evaluated_points(scene, obj)[:, -1]
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
    assert job.advance()
    job.finish()
    chain = job.chains[0]
    reduced = chain.reduced
    segment = int(np.argmax(np.diff(reduced.indices)))
    first, last = int(reduced.frames[segment]), int(reduced.frames[segment + 1])
    fcurve = obj.animation_data.action.layers[0].strips[0].channelbag(obj.animation_data.action_slot).fcurves.find(
        obj.pose.bones["forearm"].path_from_id("rotation_quaternion"), index=1)
    key = next(k for k in fcurve.keyframe_points if k.co[0] == first)
    key.handle_right[1] += 0.02
    offsets = np.linalg.norm(evaluated_points(scene, obj)[:, -1] - full_tips, axis=1)
    outside = FRAMES[offsets > 1.2e-4]  # Blender's tip clearly farther than the bound from the full bake's
    assert outside.size and first < outside.min() and outside.max() < last
    check = verify.BakedCheck(scene, obj, chain.spec, chain._rigs, chain._solved, np.zeros(121, dtype=bool),
                              keys_alone=True, reduced=reduced, key_frames=FRAMES.astype(float))
    assert check.advance()
    mismatches = check.result().mismatch_frames
    assert set(outside.tolist()) <= set(mismatches) and first < min(mismatches) and max(mismatches) < last
    assert check.done <= verify.SPARSE_LIMIT and not set(outside.tolist()) <= {int(FRAMES[r]) for r in check.rows}


def test_the_check_of_reduced_keys_finds_a_prediction_that_is_not_blenders_pose(baking, monkeypatch):
    """Between the F-curves and the pose the check trusts the core's forward kinematics only as far
    as its ``frame_set`` frames confirm it: a channel conversion off by 0.2 mrad (well within the
    bound, so only that comparison can see it) is a mismatch on every frame it sets."""
    from dataclasses import replace

    from ik_solvers.blender import key_reduction
    from ik_solvers.core.key_rotations import quaternion_rotations
    from ik_solvers.core.rotations import matrices_from_rotvecs

    scene = baking
    obj = baked_arm(scene, "QUATERNION", 0.0, seed=3)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
    assert job.advance()
    job.finish()
    chain = job.chains[0]
    loose = replace(chain.reduced, key_error=2e-3)  # the every-frame bound cannot see a 0.2 mrad turn
    turn = matrices_from_rotvecs(np.array([2e-4, 0.0, 0.0]))
    for wrong in (False, True):
        if wrong:
            monkeypatch.setattr(key_reduction, "rotations_of_mode", lambda mode: lambda v: quaternion_rotations(v) @ turn)
        check = verify.BakedCheck(scene, obj, chain.spec, chain._rigs, chain._solved, np.zeros(121, dtype=bool),
                                  keys_alone=True, reduced=loose, key_frames=FRAMES.astype(float))
        assert check.advance()
        mismatches = check.result().mismatch_frames
        assert mismatches == (sorted(int(FRAMES[r]) for r in check.rows) if wrong else []), wrong


@pytest.mark.parametrize("mode", ["QUATERNION", "ZXY"])
def test_a_reduced_bake_writes_only_the_keys_that_reducing_a_full_bake_leaves(baking, mode):
    """A reduced bake keys the reduction straight from the solve, as the keys would store it, never a
    key per frame first: the same curves, bit for bit in every key attribute, as a full bake whose
    keys are then reduced; and over part of the range, the keys outside it exactly as they were."""
    scene = baking
    reduced_state, states = None, []
    for reduce_first in (True, False):
        obj = baked_arm(scene, mode, 3e-4, seed=5)
        rig = read_chain(obj, "forearm", 2)
        if reduce_first:
            job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True))
            assert job.advance()
            job.finish()
            reduced_state = job.chains[0].reduced
        else:
            assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=121, step=1) == {"FINISHED"}
            reduced = reduce_rotation_keys(obj, rig, FRAMES)
            assert reduced_state is not None and np.array_equal(reduced.indices, reduced_state.indices)
        states.append(action_state(obj))
        bpy.data.objects.remove(obj)
    assert states[0]["fcurves"] == states[1]["fcurves"]
    curves = [key for key in states[0]["fcurves"] if "forearm" in key[0] or "upper_arm" in key[0]]
    assert len(curves) == (8 if mode == "QUATERNION" else 6)
    assert all(len(states[0]["fcurves"][key][1]) == reduced_state.keys_after < 60 for key in curves)

    obj = baked_arm(scene, mode, 3e-4, seed=5)
    before = action_state(obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(21, 80, 1, ("Arm",), reduce_keys=True))
    assert job.advance()
    job.finish()
    after = action_state(obj)
    for key in curves:
        old, new = before["fcurves"][key][1], after["fcurves"][key][1]
        assert new[:20] == old[:20] and new[-41:] == old[-41:]
        assert [k[0][0] for k in new[20:-41]] == job.chains[0].reduced.frames.tolist()


@pytest.mark.parametrize("mode", ["QUATERNION", "XZY", "AXIS_ANGLE"])
def test_a_held_target_keeps_the_holds_ends_as_keys_and_blender_shows_the_held_pose_exactly(baking, mode):
    """The target holds still on frames 40-70 (a planted foot): the reduced keys have the hold's first
    and last frame and none between, and on every frame of the hold Blender's evaluated joints and tip
    are the full bake's bit for bit (elsewhere they may move within the bound)."""
    scene = baking
    obj = arm_with_extra_bone()
    for name in JOINTS:
        obj.pose.bones[name].rotation_mode = mode
    target = add_empty()
    path = target_path(4, 0.0)
    path[39:70] = path[39]
    key_path(target, FRAMES, path)
    add_chain(obj, target, method="HI")
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=121, step=1) == {"FINISHED"}
    full = evaluated_points(scene, obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
    assert job.advance()
    report = job.finish()[0]
    kept = job.chains[0].reduced.frames.tolist()
    assert {40, 70} <= set(kept) and not any(40 < frame < 70 for frame in kept) and len(kept) < 40
    reduced = evaluated_points(scene, obj)
    np.testing.assert_array_equal(reduced[39:70], full[39:70])
    offsets = np.linalg.norm(reduced - full, axis=-1).max(axis=1)
    assert offsets.max() <= 1e-4 and offsets[70:].max() > 0.0
    assert report.evaluated_mismatch_frames == []


def test_a_reduced_bake_goes_on_round_by_round_and_writes_nothing_until_its_reduction_is_done(baking):
    """The reduction runs in rounds between a modal bake's timer ticks (a long one can be cancelled):
    with no time per tick the bake returns between rounds, the chain's curves untouched until the
    reduction ends, and the keys are those of a bake in one go, bit for bit; a cancel then leaves
    the action as it was."""
    scene = baking
    states = []
    for budget in (None, 0.0):
        obj = baked_arm(scene, "QUATERNION", 3e-4, seed=2)
        before = action_state(obj)
        job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
        ticks, reducing = 0, 0
        while not job.advance(budget):
            ticks += 1
            chain = job.chains[0]
            if chain._writing is not None and chain._check is None:
                reducing += 1
                assert action_state(obj)["fcurves"] == before["fcurves"]
        if budget is not None:
            assert reducing >= 5, (ticks, reducing)
        job.finish()
        states.append(action_state(obj)["fcurves"])
        bpy.data.objects.remove(obj)
    assert states[0] == states[1]

    obj = baked_arm(scene, "QUATERNION", 3e-4, seed=2)
    before = action_state(obj)
    job = bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 121, 1, ("Arm",), reduce_keys=True, key_error=1e-4))
    while job.chains[0]._writing is None or job.chains[0]._writing.reduction is None:
        assert not job.advance(0.0)
    assert not job.advance(0.0)  # one round further in
    job.cancel()
    assert action_state(obj) == before


def test_the_bake_operator_reduces_keys_and_says_so(baking):
    obj = baked_arm(baking, "QUATERNION", 0.0)
    path = obj.pose.bones["forearm"].path_from_id("rotation_quaternion")
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=121, step=1, reduce_keys=True) == {"FINISHED"}
    fcurve = obj.animation_data.action.layers[0].strips[0].channelbag(obj.animation_data.action_slot).fcurves.find(path)
    assert 2 <= len(fcurve.keyframe_points) < 60
    assert {k.interpolation for k in fcurve.keyframe_points} == {"BEZIER"}


# --------------------------------------------------------------------------- ik_batch --reduce-keys
def bezier_keys(path) -> dict[tuple[str, int], bytes]:
    """Every armature F-curve of the file at ``path``: (data path, index) → its keys' co and handles as stored."""
    from ik_solvers.blender import compat

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    curves = [fcurve for obj in bpy.data.objects if obj.type == "ARMATURE" and obj.animation_data is not None
              for fcurve in compat.channelbag_for_assigned_slot(obj.animation_data).fcurves]
    return {(fcurve.data_path, fcurve.array_index):
            np.array([[k.co[:], k.handle_left[:], k.handle_right[:]] for k in fcurve.keyframe_points],
                     dtype=np.float32).tobytes() for fcurve in curves}


def test_ik_batch_reduce_keys_writes_the_operators_keys_and_checks_the_kept_frames_after_saving(addon, tmp_path):
    """``ik_batch --reduce-keys E`` and the bake operator with Reduce Keys at E write the same keys
    (values and handles, bit for bit); the report carries keys before / after and the world error;
    the after-save check wants a key on exactly the kept frames."""
    import json

    import jsonschema
    from test_ik_batch import FRAMES as BATCH_FRAMES
    from test_ik_batch import REPO, build_scene_file, ik_batch, run_batch

    bound = 5e-4
    scene_file = build_scene_file(tmp_path / "shot.blend", arm_method="HI")
    out, report = tmp_path / "batch.blend", tmp_path / "r.json"
    process = run_batch(scene_file, "--output", out, "--reduce-keys", bound, "--chunk-size", "30", "--report", report)
    assert process.stdout.count(f"(bound {bound:.3g})") == 2 and "; keys 720 -> " in process.stdout  # per chain
    batch = bezier_keys(out)
    bpy.ops.wm.open_mainfile(filepath=str(scene_file), load_ui=False)
    obj = bpy.data.objects["Rig"]
    bpy.context.view_layer.objects.active = obj
    with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
        assert bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=BATCH_FRAMES[0], frame_end=BATCH_FRAMES[1],
                                       all_chains=True, reduce_keys=True, key_error=bound) == {"FINISHED"}
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "operator.blend"), copy=True)
    operator = bezier_keys(tmp_path / "operator.blend")
    assert len(operator) == 5 * 4 and batch.keys() == operator.keys()
    for channel, keys in operator.items():
        assert batch[channel] == keys, channel
    free = 0  # segments merged with free handle times among them: handles not at a third of the segment
    for keys in operator.values():
        points = np.frombuffer(keys, dtype=np.float32).reshape(-1, 3, 2).astype(float)  # co, left, right
        gaps = np.diff(points[:, 0, 0])
        free += int((~np.isclose(points[:-1, 2, 0] - points[:-1, 0, 0], gaps / 3.0, atol=1e-4)).sum())
    assert free > 0

    data = json.loads(report.read_text())
    jsonschema.validate(data, json.loads((REPO / "docs" / "batch-report.schema.json").read_text()))
    frames = BATCH_FRAMES[1] - BATCH_FRAMES[0] + 1
    for entry, bones in zip(data["files"][0]["chains"], (2, 3)):
        assert entry["keys_before"] == frames * 4 * bones and 0 < entry["keys_after"] < entry["keys_before"] / 2
        assert entry["key_error"] == bound and 0.0 < entry["reduced_error_p99"] <= entry["reduced_max_error"] <= bound

    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    forearm = next(f for f in bpy.data.objects["Rig"].animation_data.action.layers[0].strips[0]
                   .channelbag(bpy.data.objects["Rig"].animation_data.action_slot).fcurves
                   if f.data_path == 'pose.bones["forearm"].rotation_quaternion')
    kept = tuple(float(k.co[0]) for k in forearm.keyframe_points)
    assert len(kept) < frames / 2

    def chain(frames_):
        return ik_batch.BakedChain("Rig", "Arm", ("upper_arm", "forearm"), tuple(frames_))

    ik_batch.save_checked(tmp_path / "again.blend", [chain(kept)], replace=False)  # exactly the kept keys
    with pytest.raises(ik_batch.BatchError, match=r"lacks keys on \d+ baked frames"):
        ik_batch.save_checked(tmp_path / "all.blend", [chain(range(BATCH_FRAMES[0], BATCH_FRAMES[1] + 1))],
                              replace=False)
    with pytest.raises(ik_batch.BatchError, match="has 1 keys in the baked range that the bake did not write"):
        ik_batch.save_checked(tmp_path / "fewer.blend", [chain(kept[:1] + kept[2:])], replace=False)


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_ik_batch_reduce_keys_must_be_a_distance(value):
    from test_ik_batch import ik_batch

    with pytest.raises(ik_batch.UsageError, match="--reduce-keys must be a distance of at least 0"):
        ik_batch.parse_options(["shot.blend", "--dry-run", "--reduce-keys", value])
    assert ik_batch.parse_options(["shot.blend", "--dry-run"]).reduce_keys == 0.0


def test_the_bound_is_taken_as_the_bake_dialog_holds_it_and_one_beyond_float32_is_refused():
    # The dialog's Key Error is a float32 property: 0.0002 typed there reads back as 0.00019999999494757503, and
    # ik_batch's 0.0002 must reduce within the same bits to write the same keys (a body's weights use E's bits).
    from ik_solvers.blender.errors import IKSolversError

    typed = bake.BakeOptions(1, 10, 1, ("Arm",), reduce_keys=True, key_error=2e-4)
    held = bake.BakeOptions(1, 10, 1, ("Arm",), reduce_keys=True, key_error=float(np.float32(2e-4)))
    assert typed.key_error == held.key_error == 2e-4
    assert bake.BakeOptions(1, 10, 1, ("Arm",), key_error=1.0 / 3.0).key_error == float(str(np.float32(1.0 / 3.0)))
    for bad in (1e39, -1e-3, float("nan")):
        with pytest.raises(IKSolversError, match="key error bound"):
            bake.BakeOptions(1, 10, 1, ("Arm",), reduce_keys=True, key_error=bad)
