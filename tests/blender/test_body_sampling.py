"""A body bake reads its goals from F-curves where that is exactly Blender's evaluation (issue 22's bake
speed): the same bits as evaluating every frame, a sparse after-bake check, and every frame evaluated
(densely checked) as soon as something the body reads changes between frames."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest

from ik_solvers.blender import verify
from ik_solvers.blender.body import BodyInputs, read_body, sample_body
from ik_solvers.blender.body_sampling import body_sampling_blockers, keys_alone_move_the_body, sample_body_fcurves
from ik_solvers.blender.keyframes import assigned_fcurves

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import compare_body

FRAMES = 20
"""Per path of compare_body (crouch, reach, walk, look): 80 frames, more than a sparse check takes."""

pytestmark = pytest.mark.usefixtures("rigify_enabled")


@pytest.fixture
def setup(addon):
    """compare_body's metarig: five goal Empties keyed along its paths, the five chains solved together."""
    body = compare_body.BodySetup(FRAMES)
    compare_body.add_ours(body)
    return body


def _evaluated(rig, spec, frames) -> BodyInputs:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    inputs = []
    for frame in frames:
        bpy.context.scene.frame_set(int(frame))
        inputs.append(sample_body(rig, spec, depsgraph))
    bpy.context.scene.frame_set(1)
    return BodyInputs.stack(inputs)


def _bake(setup) -> dict:
    compare_body.bake_ours(setup)
    return json.loads(setup.rig.ik_solvers.chains["wrist.L"].last_bake_report)


def test_goals_from_fcurves_are_the_evaluated_goals_bit_for_bit_and_the_check_is_sparse(setup):
    rig, scene = setup.rig, bpy.context.scene
    frames = np.arange(1, setup.frame_end + 1)
    for baked in (False, True):  # the body's own keys (a bake before) block nothing
        spec = read_body(rig)
        blockers = body_sampling_blockers(scene, rig, spec)
        assert blockers == [] and keys_alone_move_the_body(rig, spec, blockers)
        ours = BodyInputs.stack(sample_body_fcurves(rig, spec, frames, bpy.context.evaluated_depsgraph_get()))
        blender = _evaluated(rig, spec, frames)
        for a, b in zip(ours.positions, blender.positions):
            assert np.array_equal(a, b)
        assert np.array_equal(ours.fixed_q, blender.fixed_q) and np.array_equal(ours.swivels, blender.swivels)
        if not baked:
            report = _bake(setup)
            assert report["sampling"] == "fcurves" and report["sampling_reasons"] == []
            assert report["evaluated_frames_checked"] <= 2 * verify.SPARSE_LIMIT < setup.frame_end
            assert report["evaluated_mismatch_frames"] == []


def test_an_animated_fixed_link_or_swivel_evaluates_every_frame(setup):
    rig, scene = setup.rig, bpy.context.scene
    shoulder = rig.pose.bones["shoulder.L"]  # a fixed link the left arm hangs from
    shoulder.rotation_mode = "QUATERNION"
    for frame, angle in ((1, 0.0), (setup.frame_end, 0.2)):
        shoulder.rotation_quaternion = (np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2))
        shoulder.keyframe_insert("rotation_quaternion", frame=frame)
    scene.frame_set(1)
    spec = read_body(rig)
    blockers = body_sampling_blockers(scene, rig, spec)
    assert 'the armature animates pose.bones["shoulder.L"].rotation_quaternion' in blockers
    assert not keys_alone_move_the_body(rig, spec, blockers)
    report = _bake(setup)
    assert report["sampling"] == "evaluated" and report["evaluated_frames_checked"] == setup.frame_end
    rig.animation_data_clear()
    rig.ik_solvers.chains["wrist.R"].keyframe_insert("swivel_angle", frame=1)
    assert any("swivel_angle" in reason for reason in body_sampling_blockers(scene, rig, read_body(rig)))


def test_a_muted_root_location_curve_makes_the_check_dense(setup):
    rig = setup.rig
    _bake(setup)
    spec = read_body(rig)
    assert keys_alone_move_the_body(rig, spec, [])
    curve = next(f for f in assigned_fcurves(rig) if f.data_path == 'pose.bones["spine"].location')
    curve.mute = True
    assert not keys_alone_move_the_body(rig, spec, [])
