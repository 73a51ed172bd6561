"""farm/ik_bake.yaml (issue 13), run for real by the Open Job Description CLI (``openjd``, the local
runner of the job format Deadline Cloud runs): the template validates; ``openjd run`` bakes three
.blend files built here, one task each, and gathers one summary; every output's keys equal, bit for
bit, those of ik_batch run on the file directly; a file with a bad chain fails its own task and
leaves the other files' outputs as they would be without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from _rigs import build_armature, key_location_every_frame

import ik_solvers

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "farm" / "ik_bake.yaml"
IK_BATCH = REPO / "scripts" / "ik_batch.py"
OPENJD = shutil.which("openjd", path=str(Path(sys.executable).parent)) or shutil.which("openjd")
FRAMES = 40

# openjd-cli is pinned in the test group: a missing one is a broken install (`make venv`), never a skip.
assert OPENJD is not None, "openjd-cli is not installed in this environment; run `make venv`"


def build_shot(path: Path, method: str, phase: float, with_target: bool = True) -> Path:
    """A saved shot: a two-bone arm and a three-bone leg chain reaching for Empties keyed on every frame
    along circles that leave the arm's reach (``phase`` makes each shot different)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    rig = build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4)},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
        {"name": "thigh", "head": (0.1, 0.0, 0.95), "tail": (0.1, -0.03, 0.52)},
        {"name": "shin", "head": (0.1, -0.03, 0.52), "tail": (0.1, 0.0, 0.1), "parent": "thigh"},
        {"name": "foot", "head": (0.1, 0.0, 0.1), "tail": (0.1, -0.14, 0.03), "parent": "shin"},
    ])
    angles = np.linspace(0.0, 2.0 * np.pi, FRAMES) + phase
    circle = np.column_stack([np.cos(angles), np.sin(angles), 0.3 * np.sin(2.0 * angles)])
    targets = {}
    for name, center, radius in (("HandTarget", (0.35, 0.0, 1.4), 0.35), ("FootTarget", (0.1, -0.2, 0.35), 0.2)):
        empty = bpy.data.objects.new(name, None)
        scene.collection.objects.link(empty)
        key_location_every_frame(empty, np.asarray(center) + radius * circle)
        targets[name] = empty
    for name, tip, length, target, chain_method in (("Arm", "forearm", 2, targets["HandTarget"], method),
                                                    ("Leg", "foot", 3, targets["FootTarget"], "SDLS")):
        chain = rig.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method = name, tip, length, chain_method
        chain.target = target if with_target or name == "Arm" else None
    scene.frame_start, scene.frame_end = 1, FRAMES
    bpy.context.preferences.filepaths.save_version = 0
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def baked_keys(path: Path) -> dict[tuple[str, int], bytes]:
    """Every armature F-curve in ``path``: (data path, index) → its keyframe co as float32 bytes."""
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    keys = {}
    for obj in bpy.data.objects:
        if obj.type != "ARMATURE" or obj.animation_data is None or obj.animation_data.action is None:
            continue
        action = obj.animation_data.action
        for fcurve in action.layers[0].strips[0].channelbag(obj.animation_data.action_slot).fcurves:
            co = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
            fcurve.keyframe_points.foreach_get("co", co)
            keys[(fcurve.data_path, fcurve.array_index)] = co.tobytes()
    return keys


def openjd(*args: str | Path, params: dict | None = None, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    command = [OPENJD, *map(str, args)]
    if params is not None:
        command += ["--job-param", json.dumps(params)]
    process = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=600)
    if check_rc is not None:
        assert process.returncode == check_rc, process.stdout[-4000:] + process.stderr[-2000:]
    return process


def job_params(files: list[Path], out: Path) -> dict:
    return {"InputFiles": [str(f) for f in files], "OutputDir": str(out), "IkBatch": str(IK_BATCH),
            "Command": sys.executable}


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> dict[str, Path]:
    """Three good shots and one whose Leg chain has no target, plus ik_batch's direct outputs."""
    folder = tmp_path_factory.mktemp("shots")
    ik_solvers.register()
    try:
        files = {name: build_shot(folder / f"{name}.blend", method, phase)
                 for name, method, phase in (("shot_a", "DLS", 0.0), ("shot_b", "ANALYTIC", 1.0), ("shot_c", "FABRIK", 2.0))}
        files["bad"] = build_shot(folder / "bad.blend", "DLS", 0.5, with_target=False)
    finally:
        ik_solvers.unregister()
    direct = folder / "direct"
    for name in ("shot_a", "shot_b", "shot_c"):
        process = subprocess.run([sys.executable, str(IK_BATCH), str(files[name]), "--output", str(direct)],
                                 capture_output=True, text=True, env=dict(os.environ), timeout=300)
        assert process.returncode == 0, process.stderr
    files["direct"] = direct
    return files


def test_template_validates():
    assert "passes validation" in openjd("check", TEMPLATE).stdout


def test_one_task_per_file_bit_identical_to_ik_batch(shots, tmp_path):
    out = tmp_path / "farm"
    good = [shots[name] for name in ("shot_a", "shot_b", "shot_c")]
    run = openjd("run", TEMPLATE, params=job_params(good, out))
    assert run.stdout.count("Running Task") == 3 + 1  # three Bake tasks, one Summary
    for source in good:
        keys, direct = baked_keys(out / source.name), baked_keys(shots["direct"] / source.name)
        assert len(keys) == 5 * 4  # five bones, quaternion rotation
        assert keys == direct, source.name
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["files"], summary["files_ok"], summary["files_failed"], summary["chains"]) == (3, 3, 0, 6)
    assert summary["frames"] == 6 * FRAMES == sum(summary["status_counts"].values())
    assert summary["status_counts"]["UNREACHABLE"] > 0  # the hand's circle leaves the arm's reach
    worst = summary["worst_frames"]
    assert len(worst) == 6 and worst[0]["error_over_lower_bound"] >= worst[-1]["error_over_lower_bound"]
    assert {Path(w["input"]).name for w in worst} == {f.name for f in good}
    assert sorted(Path(p).name for p in summary["outputs"]) == sorted(f.name for f in good)


def test_a_bad_chain_fails_its_task_only(shots, tmp_path):
    """As a farm runs them, one session per task: the bad file's task fails (exit 2 from ik_batch),
    the others bake exactly as alone, and the summary names the failure."""
    out = tmp_path / "farm"
    files = [shots["shot_a"], shots["bad"], shots["shot_c"]]
    params = job_params(files, out)
    for source in files:
        task = openjd("run", TEMPLATE, "--step", "Bake", "--task-param", f"File={source}", params=params,
                      check_rc=None)
        if source == shots["bad"]:
            assert task.returncode != 0
            assert "exited with code: 2" in task.stdout and "has no target" in task.stdout
        else:
            assert task.returncode == 0, task.stdout[-4000:]
    assert not (out / "bad.blend").exists()
    for source in (shots["shot_a"], shots["shot_c"]):
        assert baked_keys(out / source.name) == baked_keys(shots["direct"] / source.name), source.name
    openjd("run", TEMPLATE, "--step", "Summary", "--no-run-dependencies", params=params)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["files"], summary["files_ok"], summary["files_failed"]) == (3, 2, 1)
    (failed,) = summary["failed_files"]
    assert failed["input"] == str(shots["bad"]) and "chain 'Rig:Leg' has no target" in failed["error"]


def test_a_retried_task_rewrites_its_own_output_with_the_same_keys(shots, tmp_path):
    """A farm retries a task (or a job is run again) over the outputs of the first run: the template
    passes --overwrite, so the task succeeds, its keys are bit for bit the first run's, and the first
    output is kept as Blender's .blend1 backup."""
    out = tmp_path / "farm"
    params = job_params([shots["shot_b"]], out)
    task = ("run", TEMPLATE, "--step", "Bake", "--task-param", f"File={shots['shot_b']}")
    openjd(*task, params=params)
    first = (out / "shot_b.blend").read_bytes()
    openjd(*task, params=params)
    assert (out / "shot_b.blend1").read_bytes() == first
    assert baked_keys(out / "shot_b.blend") == baked_keys(shots["direct"] / "shot_b.blend")
    report = json.loads((out / "reports" / "shot_b.json").read_text())
    assert report["schema_version"] == 2 and report["exit_code"] == 0


def test_template_offers_the_cores_methods():
    """The template's Method choices are the core's method table (plus "" for each chain's own)."""
    import yaml  # openjd-cli's dependency

    from ik_solvers.core import METHOD_FACTS

    template = yaml.safe_load(TEMPLATE.read_text())
    (method,) = [p for p in template["parameterDefinitions"] if p["name"] == "Method"]
    assert method["allowedValues"] == ["", *(m.value for m in METHOD_FACTS)]


def test_summary_lists_a_file_without_report_as_failed(tmp_path):
    """A task that crashed leaves no report: the summary names its file rather than skipping it."""
    import farm_summary

    reports = tmp_path / "reports"
    reports.mkdir()
    chain = {"armature": "Rig", "chain": "Arm", "method": "DLS", "frames": 3, "status_counts": {"CONVERGED": 3},
             "max_error": 0.2, "max_error_over_lower_bound": 0.1, "max_error_over_lower_bound_frame": 2, "flips": []}
    (reports / "a.json").write_text(json.dumps({"files": [
        {"input": "/s/a.blend", "output": "/o/a.blend", "ok": True, "chains": [chain], "seconds": 1.0}]}))
    (reports / "junk.json").write_text("not json")
    out = tmp_path / "summary.json"
    assert farm_summary.main(["farm_summary.py", "--reports", str(reports), "--out", str(out),
                              "/s/a.blend", "/s/crashed.blend"]) == 0
    summary = json.loads(out.read_text())
    assert (summary["files"], summary["files_ok"], summary["frames"]) == (2, 1, 3)
    (failed,) = summary["failed_files"]
    assert failed["input"] == "/s/crashed.blend" and "no report" in failed["error"]
    assert summary["worst_frames"][0]["frame"] == 2
    # Without the input list every report is read: the unreadable one is an error of this step (exit 2).
    assert farm_summary.main(["farm_summary.py", "--reports", str(reports), "--out", str(out)]) == 2
