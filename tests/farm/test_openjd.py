"""The farm job bundle farm/ik_bake (issues 13 and 21), run for real by the Open Job Description CLI
(``openjd``, the local runner of the job format Deadline Cloud runs): the templates validate; ``openjd
run`` bakes three .blend files built here, one task each, and gathers one summary; every output's keys
equal, bit for bit, those of ik_batch run on the file directly; a file with a bad chain is recorded, not
failed (so no farm retries it), the other files bake as they would without it, and the Summary step
writes summary.json and fails the job; two inputs of one file name, or tools without ik_batch's modules,
are refused before any work; chain names stay one argument each; reports are 0644; the packed bundle
runs on its own tools, and Deadline Cloud's client (``deadline``) reads it."""

from __future__ import annotations

import importlib.util
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
BUNDLE = REPO / "farm" / "ik_bake"
TEMPLATE = BUNDLE / "template.yaml"
QUEUE_ENVIRONMENT = REPO / "farm" / "queue_env_bpy.yaml"
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
    """``openjd ARGS --job-param PARAMS`` under the usual umask (022), so report modes are comparable."""
    command = [OPENJD, *map(str, args)]
    if params is not None:
        command += ["--job-param", json.dumps(params)]
    process = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=600, umask=0o022)
    if check_rc is not None:
        assert process.returncode == check_rc, process.stdout[-4000:] + process.stderr[-2000:]
    return process


def job_params(files: list[Path], out: Path, tools: Path | None = REPO) -> dict:
    """The job's parameters; ``tools=None`` leaves ToolsDir at its default, the bundle's own tools/."""
    params = {"InputFiles": [str(f) for f in files], "OutputDir": str(out), "Command": sys.executable}
    if tools is not None:
        params["ToolsDir"] = str(tools)
    return params


def pack_bundle(bundle: Path) -> Path:
    """``python farm/pack_bundle.py BUNDLE``: a complete job bundle there."""
    process = subprocess.run([sys.executable, str(REPO / "farm" / "pack_bundle.py"), str(bundle)],
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    return bundle


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


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
                                 capture_output=True, text=True, timeout=300,
                                 env={k: v for k, v in os.environ.items() if k != "IK_SOLVERS_OPENJD"})
        assert process.returncode == 0, process.stderr
        assert "openjd_" not in process.stdout + process.stderr  # OpenJD lines only inside the farm job
    files["direct"] = direct
    return files


def test_templates_validate():
    assert "passes validation" in openjd("check", TEMPLATE).stdout
    assert "passes validation" in openjd("check", QUEUE_ENVIRONMENT).stdout


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
    # What the farm monitor shows: progress per chain (two chains a file) and a status line.
    assert "openjd_progress: 50.0" in run.stdout and "openjd_progress: 100.0" in run.stdout
    assert "openjd_status: file 1/1 shot_c.blend: chain 2/2 Rig:Leg baked (40 frames)" in run.stdout
    # Readable by the farm's other users and steps, as any new file (mkstemp would make them 0600).
    assert {mode(p) for p in (out / "reports").glob("*.json")} == {0o644}
    assert mode(out / "summary.json") == 0o644


def test_a_bad_file_is_recorded_not_retried_and_the_summary_fails_the_job(shots, tmp_path):
    """One session, as `openjd run` and a worker run it: the bad file's task records ik_batch's exit 2 and
    succeeds (so no farm retries it, and the session goes on), the file after it bakes exactly as alone,
    the Summary step writes summary.json naming the failure and exits 2: the job ends failed."""
    out = tmp_path / "farm"
    files = [shots["bad"], shots["shot_c"]]
    run = openjd("run", TEMPLATE, params=job_params(files, out), check_rc=None)
    assert run.returncode != 0, run.stdout[-4000:]
    assert run.stdout.count("Running Task") == 2 + 1, run.stdout[-4000:]  # the task after the bad one ran too
    assert "openjd_fail: ik_batch: " in run.stdout and "has no target" in run.stdout  # ik_batch's reason
    assert "openjd_status: FAILED (exit 2, recorded in" in run.stdout
    assert "openjd_fail: 1 of 2 files failed" in run.stdout and "exited with code: 2" in run.stdout  # Summary
    assert not (out / "bad.blend").exists()
    assert baked_keys(out / "shot_c.blend") == baked_keys(shots["direct"] / "shot_c.blend")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["files"], summary["files_ok"], summary["files_failed"]) == (2, 1, 1)
    (failed,) = summary["failed_files"]
    assert failed["input"] == str(shots["bad"]) and "chain 'Rig:Leg' has no target" in failed["error"]
    report = json.loads((out / "reports" / "bad.json").read_text())
    assert report["exit_code"] == 2 and report["files"][0]["ok"] is False


def test_two_inputs_of_one_file_name_are_refused_before_any_work(shots, tmp_path):
    """a/shot.blend and b/shot.blend would both be saved as OutputDir/shot.blend: the job's environment
    refuses them before any task runs, naming both, and nothing is written."""
    inputs = []
    for folder, source in (("a", shots["shot_a"]), ("b", shots["shot_b"])):
        (tmp_path / folder).mkdir()
        inputs.append(Path(shutil.copy(source, tmp_path / folder / "shot.blend")))
    out = tmp_path / "farm"
    run = openjd("run", TEMPLATE, params=job_params(inputs, out), check_rc=None)
    assert run.returncode != 0
    assert f"openjd_fail: {inputs[0]} and {inputs[1]} share the file name shot" in run.stdout
    assert "Running Task" not in run.stdout
    assert not out.exists() or not any(out.rglob("*"))


def test_tools_without_ik_batchs_modules_are_refused_with_advice(shots, tmp_path):
    """A job upload of ik_batch.py alone cannot run (it imports its modules and ik_solvers): the job's
    environment says what ToolsDir must hold, before any task, with no traceback."""
    lone = tmp_path / "tools" / "scripts"
    lone.mkdir(parents=True)
    shutil.copy(IK_BATCH, lone)
    run = openjd("run", TEMPLATE, params=job_params([shots["shot_a"]], tmp_path / "farm", tools=lone.parent),
                 check_rc=None)
    assert run.returncode != 0
    assert "has no scripts/farm_summary.py" in run.stdout and "ik_batch.py alone cannot run" in run.stdout
    assert "Traceback" not in run.stdout and "Running Task" not in run.stdout


def test_the_packed_bundle_runs_on_its_own_tools_and_keeps_chain_names_whole(tmp_path):
    """farm/pack_bundle.py makes a complete bundle whose ToolsDir default is its own tools/ (resolved
    beside the template, as Deadline Cloud resolves it in the bundle), and a bake runs from there alone.
    Chains is a list: 'Character:Left Arm' is one chain (armature Character), '*' a chain named '*',
    neither split on spaces nor expanded as a glob."""
    ik_solvers.register()
    try:
        shot = build_shot(tmp_path / "names.blend", "DLS", 0.3)
        bpy.data.objects["Rig"].name = "Character"
        chains = bpy.data.objects["Character"].ik_solvers.chains
        chains["Arm"].name, chains["Leg"].name = "Left Arm", "*"
        bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    finally:
        ik_solvers.unregister()
    bundle = pack_bundle(tmp_path / "bundle")
    assert (bundle / "tools" / "scripts" / "_openjd.py").is_file() and (bundle / "tools" / "ik_solvers").is_dir()
    out = tmp_path / "farm"
    params = dict(job_params([shot], out, tools=None), Chains=["Character:Left Arm", "*"], Frames="1 5")
    run = openjd("run", bundle / "template.yaml", params=params)
    assert f"with {bundle / 'tools'}" in run.stdout
    report = json.loads((out / "reports" / "names.json").read_text())
    assert [(c["armature"], c["chain"], c["frames"]) for c in report["files"][0]["chains"]] == [
        ("Character", "Left Arm", 5), ("Character", "*", 5)]


@pytest.mark.skipif(importlib.util.find_spec("deadline") is None,
                    reason="the deadline client is not installed (pyproject.toml's test-tools group pins it)")
def test_deadline_cloud_reads_the_bundle(tmp_path):
    """Deadline Cloud's client parses the bundle as `deadline bundle submit` would before submitting:
    `deadline bundle info`, the parameters with parameter_values.yaml applied and ToolsDir resolved inside
    the bundle, and a user-interface control for every parameter."""
    from deadline.client.job_bundle.parameters import (
        get_ui_control_for_parameter_definition,
        read_job_bundle_parameters,
    )

    bundle = pack_bundle(tmp_path / "bundle")
    info = subprocess.run([sys.executable, "-m", "deadline", "bundle", "info", str(bundle), "--output", "json"],
                          capture_output=True, text=True, env=dict(os.environ, HOME=str(tmp_path)), timeout=120)
    assert info.returncode == 0, info.stderr
    info = json.loads(info.stdout)
    template_names = [p["name"] for p in yaml_load(TEMPLATE)["parameterDefinitions"]]
    assert (info["name"], info["steps"]) == ("IK bake", ["Bake", "Summary"])
    assert [p["name"] for p in info["parameters"]] == template_names
    parameters = {p["name"]: p for p in read_job_bundle_parameters(str(bundle))}
    assert parameters["ToolsDir"]["value"] == str(bundle / "tools")
    assert parameters["deadline:maxRetriesPerTask"]["value"] == 2
    controls = {name: get_ui_control_for_parameter_definition(parameters[name]) for name in template_names}
    assert controls["InputFiles"] == "CHOOSE_INPUT_FILE_LIST" and controls["Chains"] == "LINE_EDIT_LIST"
    assert parameters["InputFiles"]["userInterface"]["fileFilters"][0]["patterns"] == ["*.blend"]


def yaml_load(path: Path) -> dict:
    import yaml  # openjd-cli's dependency

    return yaml.safe_load(path.read_text())


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
    from ik_solvers.core import METHOD_FACTS

    (method,) = [p for p in yaml_load(TEMPLATE)["parameterDefinitions"] if p["name"] == "Method"]
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
    # The farm template's Summary step: the summary is written, and a failed file fails the step (exit 2).
    out.unlink()
    assert farm_summary.main(["farm_summary.py", "--reports", str(reports), "--out", str(out), "--fail-if-any-failed",
                              "/s/a.blend", "/s/crashed.blend"]) == 2
    assert json.loads(out.read_text())["files_failed"] == 1
    assert farm_summary.main(["farm_summary.py", "--reports", str(reports), "--out", str(out), "--fail-if-any-failed",
                              "/s/a.blend"]) == 0
    # Without the input list every report is read: the unreadable one is an error of this step (exit 2).
    assert farm_summary.main(["farm_summary.py", "--reports", str(reports), "--out", str(out)]) == 2
