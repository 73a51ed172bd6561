"""Reduced keys for a body bake (issues 22 and 23, SPEC §8, §9) on Rigify's human metarig: five chains and the
hips reduced within one world bound, every joint and tip of every chain checked by Blender's own evaluation
(``frame_set``) against the unreduced bake at every frame; ``ik_batch --reduce-keys`` writes the operator's keys.
"""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest
from test_body_metarig import CHAINS, metarig_body

from ik_solvers.blender.keyframes import assigned_fcurves

FRAMES = (1, 61)
BOUND = 2e-4
"""0.2 mm on the ~1.8 m metarig."""

pytestmark = pytest.mark.usefixtures("rigify_enabled")


def key_smooth_goals(obj) -> None:
    """The chest and hand goals keyed every 12 frames (Blender's Bézier keys between), the feet held."""
    offsets = {"chest": (0.02, 0.015, -0.06), "arm.L": (0.12, -0.15, -0.1), "arm.R": (-0.08, -0.2, 0.05)}
    for name, offset in offsets.items():
        target = obj.ik_solvers.chains[name].target
        rest = np.array(target.location)
        for k, frame in enumerate(range(FRAMES[0], FRAMES[1] + 1, 12)):
            target.location = rest + np.array(offset) * np.sin(0.9 * k)
            target.keyframe_insert("location", frame=frame)
    bpy.context.scene.frame_set(FRAMES[0])


def chain_points(obj) -> np.ndarray:
    """Blender's evaluation at every frame ``(F, P, 3)``: every chain bone's head and every chain's tip (world)."""
    scene = bpy.context.scene
    out = []
    for frame in range(FRAMES[0], FRAMES[1] + 1):
        scene.frame_set(frame)
        world = obj.matrix_world
        points = []
        for chain in obj.ik_solvers.chains:
            bones = [obj.pose.bones[b.name] for b in chain_bones(obj, chain)]
            points += [world @ bone.head for bone in bones] + [world @ bones[-1].tail]
        out.append(np.array(points))
    scene.frame_set(FRAMES[0])
    return np.array(out)


def chain_bones(obj, chain):
    bone = obj.data.bones[chain.tip_bone]
    bones = [bone]
    for _ in range(chain.chain_length - 1):
        bones.insert(0, bones[0].parent)
    return bones


def bake(obj, **options) -> None:
    with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
        assert bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=FRAMES[0], frame_end=FRAMES[1], all_chains=True,
                                       **options) == {"FINISHED"}


def rotation_keys(obj) -> dict[tuple[str, int], int]:
    return {(f.data_path, f.array_index): len(f.keyframe_points) for f in assigned_fcurves(obj)}


MODES = {"forearm.L": "XZY", "shin.R": "AXIS_ANGLE", "spine": "YXZ", "upper_arm.R": "ZYX", "thigh.L": "QUATERNION",
         "thigh.R": "AXIS_ANGLE"}
"""Rotation modes set on some body bones (the hips among them) for the mixed-mode case; the first bones of two
chains in Euler and axis-angle modes (their values are turned back for the reduced hips and spine above them)."""


@pytest.mark.parametrize("case", ["quaternions", "mixed modes", "no body root"])
def test_a_reduced_body_bake_keeps_every_chain_joint_and_tip_within_the_bound_as_blender_evaluates_it(addon, case):
    obj = metarig_body("" if case == "no body root" else "spine")
    if case == "mixed modes":
        for bone, mode in MODES.items():
            obj.pose.bones[bone].rotation_mode = mode
    key_smooth_goals(obj)
    bake(obj)
    full = chain_points(obj)
    frames = FRAMES[1] - FRAMES[0] + 1
    assert set(rotation_keys(obj).values()) == {frames}
    obj.animation_data_clear()
    for bone in obj.pose.bones:
        bone.location, bone.rotation_quaternion = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
        bone.rotation_euler, bone.rotation_axis_angle = (0.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0)
    bake(obj, reduce_keys=True, key_error=BOUND)
    errors = np.linalg.norm(chain_points(obj) - full, axis=-1)
    assert errors.max() <= BOUND, errors.max()
    keys = rotation_keys(obj)
    assert (('pose.bones["spine"].location', 1) in keys) == (case != "no body root")  # the hips' location too
    assert max(keys.values()) < frames / 2 and sum(keys.values()) < 0.4 * frames * len(keys), keys
    for chain in obj.ik_solvers.chains:
        report = json.loads(chain.last_bake_report)
        assert report["key_error"] == pytest.approx(BOUND) and report["evaluated_mismatch_frames"] == [], chain.name
        assert 0.0 < report["reduced_max_error"] <= BOUND and report["keys_after"] < report["keys_before"] / 2
    # the report's error is the measured one: the largest of each chain's points at any frame
    first = 0
    for chain in obj.ik_solvers.chains:
        count = chain.chain_length + 1
        measured = errors[:, first:first + count].max()
        first += count
        assert json.loads(chain.last_bake_report)["reduced_max_error"] == pytest.approx(measured, abs=2e-6)


def test_ik_batch_reduce_keys_on_a_body_writes_the_operators_keys(addon, tmp_path):
    from test_ik_batch import run_batch
    from test_ik_batch_body import FRAMES as BODY_FRAMES
    from test_ik_batch_body import build_body_file
    from test_key_reduction import bezier_keys

    body_file = build_body_file(tmp_path / "body.blend")
    out, report = tmp_path / "batch.blend", tmp_path / "r.json"
    process = run_batch(body_file, "--output", out, "--reduce-keys", BOUND, "--chunk-size", "4", "--report", report)
    assert process.stdout.count(f"(bound {BOUND:.3g})") == len(CHAINS) + 1  # and the body root
    batch = bezier_keys(out)
    bpy.ops.wm.open_mainfile(filepath=str(body_file), load_ui=False)
    obj = bpy.data.objects["metarig"]
    bpy.context.view_layer.objects.active = obj
    scene = bpy.context.scene
    with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
        assert bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=scene.frame_start, frame_end=scene.frame_end,
                                       all_chains=True, reduce_keys=True, key_error=BOUND) == {"FINISHED"}
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "operator.blend"), copy=True)
    operator = bezier_keys(tmp_path / "operator.blend")
    assert batch.keys() == operator.keys() and ('pose.bones["spine"].location', 0) in operator
    for channel, keys in operator.items():
        assert batch[channel] == keys, channel
    import jsonschema
    from test_ik_batch import REPO

    document = json.loads(report.read_text())
    jsonschema.validate(document, json.loads((REPO / "docs" / "batch-report.schema.json").read_text()))
    for entry in document["files"][0]["chains"]:
        assert entry["key_error"] == BOUND and 0.0 < entry["reduced_max_error"] <= BOUND
        assert entry["keys_after"] < entry["keys_before"]
    (root,) = document["files"][0]["body_roots"]  # the hips' location and rotation: 7 curves
    assert root["bone"] == "spine" and root["key_error"] == BOUND and 0.0 < root["reduced_max_error"] <= BOUND
    assert root["keys_before"] == 7 * (BODY_FRAMES[1] - BODY_FRAMES[0] + 1) and root["keys_after"] < root["keys_before"]
    assert f"body root 'spine'; keys {root['keys_before']} -> {root['keys_after']}" in process.stdout


def test_a_reduced_body_bake_goes_on_round_by_round_writes_nothing_until_done_and_a_cancel_leaves_the_action(addon):
    """The body's reduction runs in rounds between a modal bake's ticks: with no time per tick the bake
    returns between rounds with the armature's action untouched, ends with the keys of a bake in one go
    (bit for bit), and a cancel in the middle leaves the action as it was."""
    from test_bake import action_state

    from ik_solvers.blender.bake import BakeOptions
    from ik_solvers.blender.body_bake import BodyBakeJob

    obj = metarig_body()
    key_smooth_goals(obj)
    options = BakeOptions(FRAMES[0], FRAMES[1], 1, tuple(CHAINS), reduce_keys=True, key_error=BOUND)
    states = []
    for budget in (None, 0.0):
        job = BodyBakeJob(bpy.context, obj, options)
        reducing = 0
        while not job.advance(budget):
            if job._writing is not None and job._writing.reduction is not None:
                reducing += 1
                assert action_state(obj).get("fcurves", {}) == {}
        if budget is not None:
            assert reducing >= 5, reducing
        job.finish()
        states.append(action_state(obj)["fcurves"])
        obj.animation_data_clear()
    assert states[0] == states[1] and states[0]
    before = action_state(obj)
    job = BodyBakeJob(bpy.context, obj, options)
    while job._writing is None or job._writing.reduction is None:
        assert not job.advance(0.0)
    assert not job.advance(0.0)  # one round further in
    job.cancel()
    assert action_state(obj) == before


def test_the_status_panel_shows_a_reduced_bakes_keys_and_world_error(addon):
    from test_panel import draw_all

    obj = metarig_body()
    key_smooth_goals(obj)
    bake(obj, reduce_keys=True, key_error=BOUND)
    report = json.loads(obj.ik_solvers.active_chain.last_bake_report)
    labels = [text for text, _ in draw_all(bpy.context).labels]
    assert f"Reduced keys: {report['keys_before']} → {report['keys_after']}" in " | ".join(labels), labels
    assert any(text.startswith("World error max") and "(bound 0.0002)" in text for text in labels), labels
