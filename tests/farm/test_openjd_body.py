"""The farm bundle farm/ik_bake on a body (issue 22, SPEC §8): a shot whose armature solves its chains
together (Rigify's human metarig, five goals on issue 22's paths, the hips as body root) bakes through
``openjd run`` of the template, one task, with the keys ik_batch writes on the file directly, bit for
bit; the report has each goal's section and the summary counts the body's five chains."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bpy
import pytest
from compare_body import GOALS, BodySetup, add_ours
from test_openjd import IK_BATCH, TEMPLATE, baked_keys, job_params, openjd

import ik_solvers

FRAMES_PER_PATH = 4
"""``compare_body``'s paths (crouch, reach, walk, look, crouch_step) of this many frames each."""
FRAMES = 5 * FRAMES_PER_PATH


@pytest.fixture(scope="module")
def body_shot(tmp_path_factory) -> Path:
    import addon_utils

    folder = tmp_path_factory.mktemp("body")
    was_loaded = addon_utils.check("rigify")[1]
    ik_solvers.register()
    try:
        setup = BodySetup(FRAMES_PER_PATH)
        assert setup.frame_end == FRAMES == len(setup.paths) * FRAMES_PER_PATH
        add_ours(setup)
        bpy.context.preferences.filepaths.save_version = 0
        bpy.ops.wm.save_as_mainfile(filepath=str(folder / "body.blend"))
    finally:
        ik_solvers.unregister()
        if not was_loaded and addon_utils.check("rigify")[1]:
            addon_utils.disable("rigify", default_set=True)
    return folder / "body.blend"


def test_a_body_bakes_through_the_template_as_ik_batch_bakes_it(body_shot, tmp_path):
    direct = tmp_path / "direct"
    process = subprocess.run([sys.executable, str(IK_BATCH), str(body_shot), "--output", str(direct)],
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    out = tmp_path / "farm"
    run = openjd("run", TEMPLATE, params=job_params([body_shot], out))
    assert run.stdout.count("Running Task") == 1 + 1  # one Bake task, the Summary
    names = ", ".join(GOALS)
    assert f"openjd_status: file 1/1 body.blend: chain 1/1 metarig:body ({names}) baked ({FRAMES} frames)" in run.stdout
    keys = baked_keys(out / body_shot.name)
    assert 'pose.bones["spine"].location' in {path for path, _ in keys}  # the body root's keys
    assert keys == baked_keys(direct / body_shot.name)
    report = json.loads((out / "reports" / "body.json").read_text())
    chains = report["files"][0]["chains"]
    assert [c["chain"] for c in chains] == list(GOALS) and {c["method"] for c in chains} == {"BODY"}
    frames = FRAMES
    assert all(sum(c["goals"]["status_counts"].values()) == frames for c in chains)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["files_ok"], summary["chains"], summary["frames"]) == (1, len(GOALS), len(GOALS) * frames)


def test_a_body_reduces_its_keys_through_the_template_as_ik_batch_reduces_them(body_shot, tmp_path):
    direct = tmp_path / "direct"
    process = subprocess.run([sys.executable, str(IK_BATCH), str(body_shot), "--output", str(direct),
                              "--reduce-keys", "0.001"], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    out = tmp_path / "farm"
    openjd("run", TEMPLATE, params={**job_params([body_shot], out), "ReduceKeys": "0.001"})
    keys = baked_keys(out / body_shot.name)
    assert keys == baked_keys(direct / body_shot.name)
    chains = json.loads((out / "reports" / "body.json").read_text())["files"][0]["chains"]
    assert all(c["key_error"] == 0.001 and 0 < c["keys_after"] < c["keys_before"] for c in chains)
