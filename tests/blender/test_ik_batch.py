"""scripts/ik_batch.py (SPEC §7): argument parsing of both invocation styles, and real headless runs
of the bpy-module style as a subprocess: --jobs N equals --jobs 1 bit for bit, the input is never
touched, bad files exit 2 while the good ones are still baked, the report's numbers match the keys."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_armature, evaluated_tip

from ik_solvers.blender.operators import capture_preferred_pose

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ik_batch.py"

_spec = importlib.util.spec_from_file_location("ik_batch", SCRIPT)
ik_batch = importlib.util.module_from_spec(_spec)
sys.modules["ik_batch"] = ik_batch  # dataclasses look their module up while the class is built
_spec.loader.exec_module(ik_batch)

FRAMES = (1, 90)


# --------------------------------------------------------------------------- scene files
def _key_circle(target, center, radius, phase=0.0):
    for frame in range(FRAMES[0], FRAMES[1] + 1, 8):
        angle = 2.0 * math.pi * (frame - FRAMES[0]) / (FRAMES[1] - FRAMES[0]) + phase
        target.location = (center[0] + radius * math.cos(angle), center[1] + radius * math.sin(angle),
                           center[2] + 0.3 * radius * math.sin(2 * angle))
        target.keyframe_insert("location", frame=frame)


def build_scene_file(path: Path, arm_method: str = "DLS", leg_target: bool = True) -> Path:
    """A saved scene: one armature with an arm chain (``arm_method``) and a 3-bone leg chain (HI),
    both reaching for keyed Empties that leave the arm's reach for part of the circle."""
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    obj = build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "roll": 0.4},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "roll": -0.7, "parent": "upper_arm"},
        {"name": "thigh", "head": (0.1, 0.0, 0.95), "tail": (0.1, -0.03, 0.52)},
        {"name": "shin", "head": (0.1, -0.03, 0.52), "tail": (0.1, 0.0, 0.1), "parent": "thigh"},
        {"name": "foot", "head": (0.1, 0.0, 0.1), "tail": (0.1, -0.14, 0.03), "parent": "shin"},
    ])
    hand, foot = add_empty("HandTarget"), add_empty("FootTarget")
    _key_circle(hand, (0.35, 0.0, 1.4), 0.35)  # reaches 0.70 from the shoulder: beyond 0.58 at one side
    _key_circle(foot, (0.1, -0.2, 0.35), 0.2, phase=1.0)
    for name, tip, length, target, method in (("Arm", "forearm", 2, hand, arm_method),
                                              ("Leg", "foot", 3, foot if leg_target else None, "HI")):
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method = name, tip, length, method
        chain.target = target
        capture_preferred_pose(obj, chain, scene)
    scene.frame_start, scene.frame_end = FRAMES
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture
def scene_file(addon, tmp_path) -> Path:
    return build_scene_file(tmp_path / "shot.blend")


def run_batch(*args, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    """The bpy-module style, as CI and a pipeline run it: the venv's python on the script."""
    process = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                             env=dict(os.environ), timeout=300)
    if check_rc is not None:
        assert process.returncode == check_rc, process.stderr
    return process


def problems(process: subprocess.CompletedProcess) -> str:
    """stderr without the progress lines (``[ik_batch] ...``): the problems, one line each."""
    return "\n".join(line for line in process.stderr.splitlines() if not line.startswith("[ik_batch]")).strip()


def baked_a_chain(process: subprocess.CompletedProcess) -> bool:
    """Whether a run's progress lines say it baked a chain."""
    return any(line.startswith("[ik_batch]") and ": chain " in line for line in process.stderr.splitlines())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def baked_keys(path: Path) -> dict[tuple[str, int], np.ndarray]:
    """Every F-curve of every armature action in ``path``: (data path, index) → keyframe co (K, 2) float32."""
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    keys = {}
    for obj in bpy.data.objects:
        if obj.type != "ARMATURE" or obj.animation_data is None or obj.animation_data.action is None:
            continue
        channelbag = obj.animation_data.action.layers[0].strips[0].channelbag(obj.animation_data.action_slot)
        for fcurve in channelbag.fcurves:
            co = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
            fcurve.keyframe_points.foreach_get("co", co)
            keys[(fcurve.data_path, fcurve.array_index)] = co.reshape(-1, 2)
    return keys


def operator_baked_keys(obj, tmp_path: Path) -> dict[tuple[str, int], np.ndarray]:
    """The keys the add-on's own bake operator writes for all of ``obj``'s chains over ``FRAMES``,
    saved as a copy and read back as :func:`baked_keys` reads the batch's outputs."""
    with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
        assert bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=FRAMES[0], frame_end=FRAMES[1],
                                       all_chains=True) == {"FINISHED"}
    operator = tmp_path / "operator.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(operator), copy=True)
    return baked_keys(operator)


# --------------------------------------------------------------------------- argument parsing
def test_blender_style_takes_the_arguments_after_the_double_dash():
    argv = ["/opt/blender/blender", "-b", "shot.blend", "--python", "scripts/ik_batch.py", "--",
            "--jobs", "3", "--output", "out", "other.blend"]
    assert ik_batch.script_args(argv) == ["--jobs", "3", "--output", "out", "other.blend"]
    options = ik_batch.parse_options(ik_batch.script_args(argv), opened_file=Path("shot.blend"))
    assert options.files == (Path("shot.blend"), Path("other.blend"))  # the opened file first
    assert options.jobs == 3 and options.output == Path("out")
    assert options.output_path(Path("shot.blend")) == Path("out/shot.blend")


def test_blender_style_without_script_arguments_bakes_the_opened_file():
    argv = ["blender", "-b", "/data/shot.blend", "--python", "ik_batch.py", "--", "--in-place"]
    options = ik_batch.parse_options(ik_batch.script_args(argv), opened_file=Path("/data/shot.blend"))
    assert options.files == (Path("/data/shot.blend"),)
    assert options.output_path(Path("/data/shot.blend")) == Path("/data/shot.blend")


def test_module_style_takes_everything_after_the_script():
    argv = ["scripts/ik_batch.py", "a.blend", "b.blend", "--chain", "Rig:Arm", "--chain", "Leg",
            "--frames", "5", "40", "--step", "2", "--method", "hi", "--output", "baked", "--report", "r.json"]
    options = ik_batch.parse_options(ik_batch.script_args(argv))
    assert options.files == (Path("a.blend"), Path("b.blend"))
    assert [str(c) for c in options.chains] == ["Rig:Arm", "Leg"]
    assert options.chains[0].armature == "Rig" and options.chains[1].armature is None
    assert options.frames == (5, 40) and options.step == 2 and options.method == "HI"
    assert options.output_path(Path("x/b.blend")) == Path("baked/b.blend")
    assert options.report == Path("r.json")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a.blend"], "say where to save"),
        (["a.blend", "--output", "a.blend"], "would overwrite the input"),
        (["a.blend", "--output", "x.blend", "--in-place"], "not allowed with"),
        (["a.blend", "--dry-run", "--frames", "9", "3"], "before the start frame"),
        (["a.blend", "--dry-run", "--jobs", "0"], "--jobs must be at least 1"),
        (["a.blend", "--dry-run", "--step", "0"], "--step must be at least 1"),
        (["a.blend", "b.blend", "--output", "x.blend"], "must be a directory"),
        (["a.blend", "--dry-run", "--method", "NEWTON"], "invalid choice"),
        (["a.blend", "--dry-run", "--bogus"], "unrecognized arguments"),
        (["--dry-run"], "no input file"),
        (["d1/a.blend", "d2/a.blend", "--output", "out"], "share a file name"),
    ],
)
def test_usage_errors(args, message):
    with pytest.raises(ik_batch.UsageError, match=message):
        ik_batch.parse_options(args)


def test_manifest_lists_inputs_with_their_outputs(tmp_path):
    (tmp_path / "shots").mkdir()
    text = tmp_path / "shots" / "list.txt"
    text.write_text("# shot list\na.blend\tbaked/a_ik.blend\n\n/abs/b.blend\n")
    options = ik_batch.parse_options(["x.blend", "--manifest", str(text), "--output", "out"])
    shots = (tmp_path / "shots").resolve()
    assert options.files == (Path("x.blend"), shots / "a.blend", Path("/abs/b.blend"))
    assert options.output_path(shots / "a.blend") == shots / "baked" / "a_ik.blend"  # next to the manifest
    assert options.output_path(Path("/abs/b.blend")) == Path("out/b.blend")
    assert options.output_path(Path("x.blend")) == Path("out/x.blend")

    data = tmp_path / "list.json"
    data.write_text(json.dumps([{"input": "a.blend", "output": "a_out.blend"}, {"input": "b.blend"}, "c.blend"]))
    options = ik_batch.parse_options(["--manifest", str(data), "--dry-run"])
    assert [f.name for f in options.files] == ["a.blend", "b.blend", "c.blend"]
    assert options.output_path(options.files[0]) is None  # --dry-run saves nothing
    # Every input with its own output: nothing else needed.
    data.write_text(json.dumps([{"input": "a.blend", "output": "o/a.blend"}, {"input": "b.blend", "output": "o/b.blend"}]))
    options = ik_batch.parse_options(["--manifest", str(data)])
    assert [options.output_path(f) for f in options.files] == [tmp_path.resolve() / "o" / n for n in ("a.blend", "b.blend")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot be read"),
        ("[1, 2", "not valid JSON"),
        ("[]", "lists no input file"),
        ('[{"input": 3}]', "entry 1 is not an input path"),
        ('[{"input": "a.blend", "output": "a.blend"}]', "--manifest would overwrite the input"),
        ('[{"input": "a.blend", "output": "o.blend"}, {"input": "b.blend", "output": "o.blend"}]',
         "would both be saved to"),
        ("a.blend\nb.blend\n", "say where to save"),
        ("a.blend\ta1.blend\na.blend\ta2.blend\n", "given twice"),
    ],
)
def test_manifest_usage_errors(tmp_path, content, message):
    manifest = tmp_path / "list.json"
    if content is not None:
        manifest.write_text(content)
    with pytest.raises(ik_batch.UsageError, match=message):
        ik_batch.parse_options(["--manifest", str(manifest)])


def test_chunks_depend_on_the_frames_alone():
    frames = np.arange(1, 251)
    chunks = ik_batch.plan_chunks(frames, 100)
    assert [c[0] for c in chunks] == [1, 101, 201] and [len(c) for c in chunks] == [100, 100, 50]
    assert np.array_equal(np.concatenate(chunks), frames)
    assert ik_batch.assign_chunks(5, 2) == [[0, 2, 4], [1, 3]]
    assert ik_batch.assign_chunks(2, 8) == [[0], [1]]


def test_the_script_uses_only_public_names_of_other_modules():
    """ik_batch drives the bake through BakeJob's public steps: a private attribute of the bake (or
    of anything else) reached from here breaks when the add-on changes its insides."""
    tree = ast.parse(SCRIPT.read_text())
    private = sorted({node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                      and node.attr.startswith("_") and not node.attr.endswith("__")})
    assert private == []
    bases = [ast.unparse(base) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for base in node.bases]
    assert not [base for base in bases if "Bake" in base or "bake" in base]  # overriding is reaching in too
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module and node.module.startswith("ik_solvers") for alias in node.names}
    assert imported and not any(name.startswith("_") for name in imported)


def test_usage_error_exits_1_with_one_line(tmp_path):
    process = run_batch(tmp_path / "a.blend", "--frames", "3", check_rc=1)
    assert process.stderr.count("\n") == 1 and process.stderr.startswith("ik_batch: ")
    assert not (tmp_path / "a.blend").exists()


# --------------------------------------------------------------------------- real runs
BLENDER_PYTHON = '''
import sys

# The project as Blender's own Python sees it: not installed (the editable install's finder gone).
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in type(finder).__module__
                    and "editable" not in getattr(finder, "__module__", "")]
sys.path.remove("")  # `blender --python FILE` puts neither the cwd nor the script's folder on sys.path
script, sys.argv = sys.argv[1], ["blender", "-b", "--python", sys.argv[1], "--", *sys.argv[2:]]
exec(compile(open(script).read(), script, "exec"), {"__name__": "__main__", "__file__": script})
'''


def test_runs_under_a_python_that_has_not_the_project_installed(scene_file, tmp_path):
    """``blender -b FILE --python scripts/ik_batch.py -- ...`` runs Blender's own Python, where the
    project is not installed and the script's text is exec'd: the script finds its checkout itself
    (emulated: the editable install hidden, the script exec'd from another folder)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run([sys.executable, "-c", BLENDER_PYTHON, str(SCRIPT), str(scene_file), "--dry-run",
                              "--chain", "Arm", "--frames", "1", "5", "--report", str(tmp_path / "r.json")],
                             cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert process.returncode == 0, process.stderr
    (entry,) = json.loads((tmp_path / "r.json").read_text())["files"][0]["chains"]
    assert entry["chain"] == "Arm" and entry["frames"] == 5


def test_jobs_2_equals_jobs_1_bit_for_bit_and_input_is_untouched(scene_file, tmp_path):
    before = sha256(scene_file)
    one, two = tmp_path / "one.blend", tmp_path / "two.blend"
    run_batch(scene_file, "--output", one, "--chunk-size", "20", "--report", tmp_path / "one.json")
    run_batch(scene_file, "--output", two, "--chunk-size", "20", "--jobs", "2", "--report", tmp_path / "two.json")
    assert sha256(scene_file) == before

    keys_one, keys_two = baked_keys(one), baked_keys(two)
    bones = {"upper_arm", "forearm", "thigh", "shin", "foot"}
    baked_paths = {path for path, _index in keys_one}
    assert baked_paths == {f'pose.bones["{b}"].rotation_quaternion' for b in bones}
    assert keys_one.keys() == keys_two.keys()
    for channel, co in keys_one.items():
        assert co.shape == (FRAMES[1] - FRAMES[0] + 1, 2)
        assert co[:, 1].tobytes() == keys_two[channel][:, 1].tobytes(), channel
    assert baked_keys(scene_file) == {}  # the input still has no bone keys

    report_one = json.loads((tmp_path / "one.json").read_text())
    report_two = json.loads((tmp_path / "two.json").read_text())
    for a, b in zip(report_one["files"][0]["chains"], report_two["files"][0]["chains"]):
        for field in ("status_counts", "max_error", "median_error", "max_error_over_lower_bound", "flips"):
            assert a[field] == b[field], field


def test_baked_keys_put_blenders_own_tip_on_the_target(scene_file, tmp_path):
    out = tmp_path / "baked.blend"
    run_batch(scene_file, "--output", out, "--report", tmp_path / "r.json", "--chain", "Arm", "--method", "ANALYTIC")
    report = json.loads((tmp_path / "r.json").read_text())["files"][0]
    (arm,) = report["chains"]
    assert arm["method"] == "ANALYTIC" and arm["frames"] == 90
    counts = arm["status_counts"]
    assert counts["CONVERGED"] > 0 and counts["UNREACHABLE"] > 0  # the circle leaves the reach
    assert counts["CONVERGED"] + counts["UNREACHABLE"] == 90
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    obj, target = bpy.data.objects["Rig"], bpy.data.objects["HandTarget"]
    assert obj.ik_solvers.chains["Arm"].method == "DLS"  # the override is not saved into the file
    errors = []
    for frame in range(FRAMES[0], FRAMES[1] + 1, 7):
        bpy.context.scene.frame_set(frame)
        tip = evaluated_tip(obj, "forearm")
        goal = np.array(target.matrix_world.translation)
        reach = 0.3 + np.linalg.norm(np.array([0.27, 0.08, -0.01]))
        shoulder = np.array([0.0, 0.0, 1.4])
        bound = max(0.0, np.linalg.norm(goal - shoulder) - reach)
        errors.append(np.linalg.norm(tip - goal) - bound)
    # Keys are float32 and evaluated in float32: a few 1e-7 of slack on a 0.6 reach.
    assert max(errors) < 2e-6
    assert arm["max_error_over_lower_bound"] < 1e-9


def test_bad_files_exit_2_and_the_good_one_is_still_baked(scene_file, tmp_path):
    missing = tmp_path / "missing.blend"
    text = tmp_path / "notes.blend"
    text.write_text("not a blend file\n")
    corrupt = tmp_path / "corrupt.blend"
    corrupt.write_bytes(scene_file.read_bytes()[:400])
    out = tmp_path / "out"
    process = run_batch(missing, text, scene_file, corrupt, "--output", out, "--report", tmp_path / "r.json",
                        check_rc=2)
    problems = [line for line in process.stderr.splitlines() if line.startswith("ik_batch: ")]
    assert len(problems) == 3
    assert "missing.blend: no such file" in problems[0]
    assert "notes.blend: not a .blend file" in problems[1]
    assert "corrupt.blend: cannot be opened" in problems[2]
    assert (out / "shot.blend").is_file() and not (out / "corrupt.blend").exists()
    report = json.loads((tmp_path / "r.json").read_text())
    assert [f["ok"] for f in report["files"]] == [False, False, True, False]
    assert [c["chain"] for c in report["files"][2]["chains"]] == ["Arm", "Leg"]
    assert len(baked_keys(out / "shot.blend")) == 5 * 4


def test_missing_chain_and_missing_target_exit_2(addon, tmp_path):
    good = build_scene_file(tmp_path / "good.blend")
    no_target = build_scene_file(tmp_path / "no_target.blend", leg_target=False)
    process = run_batch(good, "--chain", "Spine", "--dry-run", check_rc=2)
    assert problems(process) == f"ik_batch: {good}: no IK chain 'Spine'"
    process = run_batch(no_target, good, "--output", tmp_path / "out", check_rc=2)
    assert problems(process) == f"ik_batch: {no_target}: chain 'Rig:Leg' has no target"
    assert (tmp_path / "out" / "good.blend").is_file() and not (tmp_path / "out" / "no_target.blend").exists()


def test_manifest_bakes_every_file_in_one_process_as_alone(scene_file, tmp_path):
    """Two shots (one with an HI arm) listed with their outputs in a manifest: one process bakes both,
    with the keys a run per file gives, and a bad entry fails alone (exit 2)."""
    other = build_scene_file(tmp_path / "other.blend", arm_method="HI")
    alone = tmp_path / "alone"
    for source in (scene_file, other):
        run_batch(source, "--output", alone)
    manifest = tmp_path / "shots.json"
    manifest.write_text(json.dumps([{"input": "shot.blend", "output": "baked/shot_ik.blend"},
                                    {"input": "missing.blend", "output": "baked/missing.blend"},
                                    {"input": str(other), "output": str(tmp_path / "elsewhere" / "other.blend")}]))
    process = run_batch("--manifest", manifest, "--report", tmp_path / "r.json", check_rc=2)
    assert problems(process) == f"ik_batch: {tmp_path / 'missing.blend'}: no such file"
    outputs = {scene_file: tmp_path / "baked" / "shot_ik.blend", other: tmp_path / "elsewhere" / "other.blend"}
    for source, output in outputs.items():
        keys, reference = baked_keys(output), baked_keys(alone / source.name)
        assert keys.keys() == reference.keys() and len(keys) == 5 * 4, source.name
        for channel, co in reference.items():
            assert co.tobytes() == keys[channel].tobytes(), (source.name, channel)
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(f["ok"], f["output"]) for f in report["files"]] == [
        (True, str(outputs[scene_file])), (False, None), (True, str(outputs[other]))]


def test_in_place_rewrites_the_input(scene_file, tmp_path):
    before = sha256(scene_file)
    run_batch(scene_file, "--in-place", "--chain", "Rig:Leg", "--frames", "10", "20")
    assert sha256(scene_file) != before
    keys = baked_keys(scene_file)
    assert {path for path, _ in keys} == {f'pose.bones["{b}"].rotation_quaternion' for b in ("thigh", "shin", "foot")}
    assert all(co[0, 0] == 10 and co[-1, 0] == 20 and len(co) == 11 for co in keys.values())


def test_hi_report_lists_flips_with_pole_distances(addon, tmp_path):
    """A target swinging straight through the HI arm's pole (the preferred plane's normal) flips the
    solver plane there: the report names the frame, its pole distance and the warning."""
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    obj = build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4)},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.5, 0.2, 1.4), "parent": "upper_arm"},
    ])  # bent in the xy plane: the poles are ±z from the shoulder
    target = add_empty("Target")
    for frame, x in ((1, 0.3), (41, -0.3)):  # a line passing right above the shoulder, through +z
        target.location = (x, 0.0, 1.8)
        target.keyframe_insert("location", frame=frame)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method, chain.target = "Arm", "forearm", 2, "HI", target
    capture_preferred_pose(obj, chain, scene)
    scene.frame_start, scene.frame_end = 1, 41
    path = tmp_path / "flip.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    run_batch(path, "--dry-run", "--report", tmp_path / "r.json", "--chunk-size", "7", "--jobs", "2")
    (entry,) = json.loads((tmp_path / "r.json").read_text())["files"][0]["chains"]
    assert len(entry["flips"]) == 1
    (flip,) = entry["flips"]
    assert flip["frame"] in (21, 22) and flip["pole_crossing"] and flip["warned"]
    assert flip["turn_degrees"] > 90.0 and flip["pole_distance_degrees"] < 10.0
    assert entry["pole_warning_frames"] > 0


def test_keys_equal_the_bake_operators_whatever_the_chunking(scene_file, tmp_path):
    """Every frame is solved from the same start pose, so chunks of 7 frames in 2 processes, one
    chunk of the whole range, and the add-on's own bake operator key the same values, bit for bit."""
    chunked, whole = tmp_path / "chunked.blend", tmp_path / "whole.blend"
    run_batch(scene_file, "--output", chunked, "--chunk-size", "7", "--jobs", "2")
    run_batch(scene_file, "--output", whole, "--chunk-size", "1000")
    bpy.ops.wm.open_mainfile(filepath=str(scene_file), load_ui=False)
    obj = bpy.data.objects["Rig"]
    bpy.context.view_layer.objects.active = obj
    reference = operator_baked_keys(obj, tmp_path)
    assert len(reference) == 5 * 4
    for other in (baked_keys(chunked), baked_keys(whole)):
        assert other.keys() == reference.keys()
        for channel, co in reference.items():
            assert co.tobytes() == other[channel].tobytes(), channel


def test_a_chain_hanging_from_another_sees_its_keys(addon, tmp_path):
    """The hand chain's root is the forearm, which the arm chain bakes first: the workers of the hand
    chain must start from a snapshot with the arm's keys, as the operator's sequential bake does."""
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    obj = build_armature([
        {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "roll": 0.4},
        {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "parent": "upper_arm"},
        {"name": "hand", "head": (0.57, 0.08, 1.39), "tail": (0.65, 0.08, 1.39), "parent": "forearm"},
    ])
    arm_target, hand_target = add_empty("ArmTarget"), add_empty("HandTarget")
    _key_circle(arm_target, (0.3, 0.0, 1.4), 0.2)
    _key_circle(hand_target, (0.3, 0.0, 1.4), 0.25, phase=0.5)
    for name, tip, length, target in (("Arm", "forearm", 2, arm_target), ("Hand", "hand", 1, hand_target)):
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method, chain.target = name, tip, length, "DLS", target
    scene.frame_start, scene.frame_end = FRAMES
    path = tmp_path / "hand.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    reference = operator_baked_keys(obj, tmp_path)
    whole, one, two = tmp_path / "whole.blend", tmp_path / "one.blend", tmp_path / "two.blend"
    run_batch(path, "--output", whole, "--chunk-size", "1000")
    run_batch(path, "--output", one, "--chunk-size", "13")
    run_batch(path, "--output", two, "--chunk-size", "13", "--jobs", "2")
    keys_whole, keys_one, keys_two = baked_keys(whole), baked_keys(one), baked_keys(two)
    assert keys_whole.keys() == reference.keys() == keys_two.keys() and len(reference) == 3 * 4
    for channel, co in reference.items():
        assert co.tobytes() == keys_whole[channel].tobytes(), channel
        assert keys_one[channel].tobytes() == keys_two[channel].tobytes(), channel
        # Chunks of 13 differ from the whole range in the last bits (1.6e-16 measured on a
        # component that is 0): solving.prepare_solve scales tolerance and damping by the batch's
        # largest root-frame scale, which carries float32 noise here (the root is the forearm).
        assert np.abs(co - keys_two[channel]).max() < 1e-12, channel


# --------------------------------------------------------------------------- paths (issue 10)
def test_report_never_lands_on_an_input_or_an_output(scene_file, tmp_path):
    """Today `--report shot.blend` turned the input into JSON with exit 0, and `--report baked.blend`
    replaced the output: every written path is checked before any work (exit 1, nothing touched)."""
    before = sha256(scene_file)
    out = tmp_path / "baked.blend"
    link = tmp_path / "link.json"
    link.symlink_to(scene_file)
    hard = tmp_path / "hard.json"
    os.link(scene_file, hard)
    for report, message in ((scene_file, "is the input"), (link, "is the input"), (hard, "is the input"),
                            (out, "is the output of")):
        process = run_batch(scene_file, "--output", out, "--report", report, check_rc=1)
        assert problems(process).count("\n") == 0 and message in process.stderr, process.stderr
        assert "Traceback" not in process.stderr and "[ik_batch]" not in process.stderr  # before any work
    assert sha256(scene_file) == before and not out.exists()
    # An output that is another input (through a symlink) is refused too.
    other = build_scene_file(tmp_path / "other.blend")
    alias = tmp_path / "alias.blend"
    alias.symlink_to(other)
    manifest = tmp_path / "m.txt"
    manifest.write_text(f"{scene_file}\t{alias}\n{other}\t{tmp_path / 'o.blend'}\n")
    process = run_batch("--manifest", manifest, check_rc=1)
    assert "is another input" in process.stderr


def test_report_replaces_only_a_report_of_ours(scene_file, tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}\n')
    process = run_batch(scene_file, "--dry-run", "--chain", "Arm", "--report", notes, check_rc=1)
    assert "is not an ik_batch report" in process.stderr and notes.read_text() == '{"my": "notes"}\n'
    report = tmp_path / "r.json"
    run_batch(scene_file, "--dry-run", "--chain", "Arm", "--report", report)
    run_batch(scene_file, "--dry-run", "--chain", "Leg", "--report", report)  # an earlier report: replaced
    assert [c["chain"] for c in json.loads(report.read_text())["files"][0]["chains"]] == ["Leg"]


def test_existing_output_is_replaced_only_with_overwrite_keeping_a_backup(scene_file, tmp_path):
    """Today `--output` onto an unrelated .blend replaced it silently."""
    out = tmp_path / "precious.blend"
    out.write_bytes(scene_file.read_bytes()[:64] + b"someone else's work")
    before = sha256(out)
    process = run_batch(scene_file, "--output", out, check_rc=1)
    assert "exists; pass --overwrite" in process.stderr and sha256(out) == before
    run_batch(scene_file, "--output", out, "--overwrite")
    assert sha256(tmp_path / "precious.blend1") == before  # Blender's own backup of the replaced file
    assert len(baked_keys(out)) == 5 * 4


def test_rerun_with_overwrite_gives_the_same_keys_bit_for_bit(scene_file, tmp_path):
    """A farm task retried over its own output: --overwrite, the same keys bit for bit,
    the first output kept as the backup. (The .blend's bytes themselves differ between two saves of the
    same data: Blender writes a memory address into the file's GLOB block and a per-session byte into
    every ID, so the keys are what is compared.)"""
    out = tmp_path / "baked.blend"
    run_batch(scene_file, "--output", out, "--chunk-size", "30", "--report", tmp_path / "r.json")
    first, first_keys = sha256(out), baked_keys(out)
    assert not (tmp_path / "baked.blend1").exists()  # a fresh output has no backup
    run_batch(scene_file, "--output", out, "--chunk-size", "30", "--jobs", "2", "--overwrite",
              "--report", tmp_path / "r.json")
    assert sha256(tmp_path / "baked.blend1") == first
    again = baked_keys(out)
    assert again.keys() == first_keys.keys() and len(again) == 5 * 4
    for channel, co in first_keys.items():
        assert co.tobytes() == again[channel].tobytes(), channel


@pytest.fixture
def readonly_folder(tmp_path) -> Path:
    """A folder this process cannot write into (root writes into a mode 555 folder: then a sysfs one)."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except OSError:
        return folder
    (folder / "probe").unlink()
    for candidate in (Path("/sys/kernel"), Path("/proc/self")):
        try:
            (candidate / "ik_batch_probe").touch()
        except OSError:
            return candidate
    raise AssertionError("no folder here refuses writing to this user (tried a mode 555 folder, /sys/kernel, /proc/self)")


def test_unwritable_folders_fail_before_the_bake_in_one_line(scene_file, tmp_path, readonly_folder):
    """Today a read-only output folder failed only after the whole bake, and a read-only report folder
    was a traceback with exit 1."""
    for args in (("--output", readonly_folder / "out" / "baked.blend"),
                 ("--dry-run", "--report", readonly_folder / "r.json"),
                 ("--output", scene_file / "baked.blend")):  # under a file
        process = run_batch(scene_file, *args, check_rc=2)
        assert "Traceback" not in process.stderr and "[ik_batch]" not in process.stderr  # nothing baked
        assert problems(process).startswith("ik_batch: cannot write ") and "\n" not in problems(process)


# --------------------------------------------------------------------------- exit codes (issues 10, 13)
def test_an_unexpected_exception_exits_3_with_one_line(addon, scene_file, tmp_path, monkeypatch, capsys):
    """A bug or the machine (not a bad input) is exit 3, which a farm retries; one line, no traceback,
    and the report says so."""
    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(ik_batch, "bake_file", broken)
    report = tmp_path / "r.json"
    assert ik_batch.main(["ik_batch.py", str(scene_file), "--dry-run", "--report", str(report)]) == 3
    err = capsys.readouterr().err
    assert err == f"ik_batch: {scene_file}: internal error: ZeroDivisionError: second line\n"
    data = json.loads(report.read_text())
    assert data["exit_code"] == 3 and data["files"][0]["ok"] is False
    monkeypatch.setattr(ik_batch, "run", broken)  # outside the per-file handling too
    assert ik_batch.main(["ik_batch.py"]) == 3
    assert capsys.readouterr().err == "ik_batch: internal error: ZeroDivisionError: second line\n"


def test_a_crashed_worker_exits_3_and_a_failed_one_2(addon, scene_file, monkeypatch, capsys):
    """A worker killed by a signal (memory, the machine) is worth a retry; one that reports a bad input
    (exit 2) is not."""
    args = ["ik_batch.py", str(scene_file), "--dry-run", "--quiet", "--chain", "Arm", "--jobs", "2",
            "--chunk-size", "30"]
    monkeypatch.setattr(ik_batch, "cap_jobs", lambda jobs: (jobs, None))  # two workers even on one CPU
    for code, status in (("import os; os.abort()", 3), ("import sys; print('ik_batch worker: bad', file=sys.stderr); sys.exit(2)", 2)):
        monkeypatch.setattr(ik_batch, "worker_command", lambda _task, code=code: [sys.executable, "-c", code])
        assert ik_batch.main(args) == status
        err = capsys.readouterr().err.splitlines()
        problem = [line for line in err if not line.startswith("[ik_batch]")]
        assert len(problem) == 1 and "a worker failed" in problem[0]
        assert ("internal error" in problem[0]) == (status == 3)


def test_exit_codes_are_documented_for_a_farm():
    text = ik_batch.build_parser().format_help()
    for line in ("0  ok", "1  usage error", "2  bad input or failed work", "3  internal error"):
        assert line in text
    farm = (REPO / "docs" / "farm.md").read_text()
    readme = (REPO / "README.md").read_text()
    assert "| 3 |" in farm and "exit 3" in readme.lower().replace("`", "")


def test_evaluated_mismatch_fails_the_file(addon, scene_file, tmp_path, monkeypatch, capsys):
    """The Blender layer's check of the baked keys on Blender's own evaluation: frames where it differs
    from the solve make the run exit 2 and are listed in the report (faked here until the layer has it)."""
    import _batch_report

    real = _batch_report.evaluated_fields

    def mismatching(bake_report):
        fields = real(bake_report)
        if bake_report.chain == "Arm":
            fields.update(evaluated_max_error=0.25, evaluated_mismatch_frames=[7, 8], evaluated_frames_checked=90)
        return fields

    monkeypatch.setattr(_batch_report, "evaluated_fields", mismatching)
    report = tmp_path / "r.json"
    assert ik_batch.main(["ik_batch.py", str(scene_file), "--dry-run", "--quiet", "--report", str(report)]) == 2
    assert "Blender's evaluation of the baked keys differs from the solve on 2 frames (first 7)" in capsys.readouterr().err
    (entry,) = json.loads(report.read_text())["files"]
    assert entry["ok"] is False and entry["chains"][0]["evaluated_mismatch_frames"] == [7, 8]


# --------------------------------------------------------------------------- bounds and progress
def test_frames_within_blenders_range_and_chunk_size_bounded():
    assert ik_batch.FRAME_MAX == bpy.types.Scene.bl_rna.properties["frame_end"].hard_max
    for args, message in ((["--frames", "1", "10000000"], "outside Blender's frame range"),
                          (["--frames", "-5", "3"], "outside Blender's frame range"),
                          (["--chunk-size", "0"], "--chunk-size must be between 1 and"),
                          (["--chunk-size", "2000000"], "--chunk-size must be between 1 and")):
        with pytest.raises(ik_batch.UsageError, match=message):
            ik_batch.parse_options(["a.blend", "--dry-run", *args])


def test_jobs_are_capped_by_cpus_and_memory(scene_file, monkeypatch):
    import _batch_progress

    cpus = len(os.sched_getaffinity(0))
    jobs, reason = _batch_progress.cap_jobs(64)
    assert jobs <= cpus and "--jobs 64 capped to" in reason
    assert _batch_progress.cap_jobs(1) == (1, None)
    monkeypatch.setitem(sys.modules, "psutil", None)  # Blender's Python: /proc/meminfo instead
    available = _batch_progress.available_memory()
    assert available is not None and available > 0
    monkeypatch.setattr(_batch_progress, "available_memory", lambda: 0.7 * 2**30)
    assert _batch_progress.cap_jobs(cpus + 4)[0] == 1  # room for one worker
    process = run_batch(scene_file, "--dry-run", "--chain", "Arm", "--jobs", "64", "--chunk-size", "10")
    assert f"[ik_batch] --jobs 64 capped to {min(cpus, 64)}" in process.stderr or "capped to" in process.stderr


def test_progress_on_stderr_with_time_left_and_quiet_stdout(scene_file, tmp_path):
    other = build_scene_file(tmp_path / "other.blend")
    process = run_batch(scene_file, other, "--dry-run", "--quiet")
    lines = [line for line in process.stderr.splitlines() if line.startswith("[ik_batch]")]
    assert "[ik_batch] file 1/2 shot.blend: opening" in lines
    assert any(line.startswith("[ik_batch] file 2/2 other.blend: opening; about ") for line in lines)
    chains = [line for line in lines if ": chain " in line]
    assert len(chains) == 4 and all(line.endswith("s left") for line in chains)
    assert "chain 2/2 Rig:Leg 90 frames" in chains[1]
    assert "Rig:Arm" not in process.stdout  # --quiet: no per-chain lines on stdout


def test_the_addon_is_unregistered_before_exit(tmp_path):
    """_cli.import_bpy registers the add-on and unregisters it at exit (bpy 4.5 hangs otherwise): an
    exit handler registered earlier runs later, and sees it gone."""
    code = ("import atexit, bpy\n"
            "atexit.register(lambda: print('registered at exit:', hasattr(bpy.types.Object, 'ik_solvers')))\n"
            "import _cli\n_cli.import_bpy()\nprint('registered:', hasattr(bpy.types.Object, 'ik_solvers'))\n")
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])})
    assert process.returncode == 0, process.stderr
    assert "registered: True" in process.stdout and "registered at exit: False" in process.stdout


# --------------------------------------------------------------------------- linked and overridden rigs
@pytest.fixture
def library_files(addon, tmp_path) -> dict[str, Path]:
    """rig.blend (the scene file's rig and targets in a collection), a shot linking that collection, and a
    shot with a library override of it (``override_hierarchy_create``): the linked original stays in the
    file behind the override, with the same name."""
    rig = build_scene_file(tmp_path / "rig.blend")
    collection = bpy.data.collections.new("RigColl")
    bpy.context.scene.collection.children.link(collection)
    for obj in list(bpy.context.scene.collection.objects):
        collection.objects.link(obj)
        bpy.context.scene.collection.objects.unlink(obj)
    bpy.ops.wm.save_as_mainfile(filepath=str(rig))
    files = {"rig": rig}
    for name in ("linked", "override"):
        bpy.ops.wm.read_homefile(use_empty=True)
        with bpy.data.libraries.load(str(rig), link=True) as (_source, data):
            data.collections = ["RigColl"]
        (linked,) = data.collections
        instance = bpy.data.objects.new("RigColl", None)
        instance.instance_type, instance.instance_collection = "COLLECTION", linked
        bpy.context.scene.collection.objects.link(instance)
        if name == "override":
            linked.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = FRAMES
        files[name] = tmp_path / f"{name}.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(files[name]))
    return files


def test_override_is_baked_and_its_linked_original_skipped(library_files, tmp_path):
    out = tmp_path / "baked.blend"
    run_batch(library_files["override"], "--output", out, "--report", tmp_path / "r.json")
    chains = json.loads((tmp_path / "r.json").read_text())["files"][0]["chains"]
    assert [(c["armature"], c["chain"]) for c in chains] == [("Rig", "Arm"), ("Rig", "Leg")]  # not twice
    assert len(baked_keys(out)) == 5 * 4  # the override's keys survived the save
    override = bpy.data.objects["Rig", None]
    assert override.override_library is not None and override.animation_data.action is not None
    process = run_batch(library_files["override"], "--dry-run", "--chain", "Rig:Arm")  # the override
    assert "Rig:Arm [DLS] 90 frames" in process.stdout


def test_linked_armature_is_refused_with_how_to_override(library_files, tmp_path):
    process = run_batch(library_files["linked"], "--output", tmp_path / "out.blend", check_rc=2)
    assert "is linked from" in problems(process) and "make a library override" in problems(process)
    assert not (tmp_path / "out.blend").exists()
    process = run_batch(library_files["override"], "--dry-run", "--chain", "Rig [rig.blend]:Arm", check_rc=2)
    assert problems(process) == (f"ik_batch: {library_files['override']}: chain 'Rig [rig.blend]:Arm': armature "
                                 "'Rig [rig.blend]' is linked from //rig.blend and cannot be keyed; make a library "
                                 "override (Object > Library Override > Make) and bake that")
    options = ik_batch.parse_options(["a.blend", "--dry-run", "--chain", "Rig[rig.blend]:Arm"])
    assert (options.chains[0].armature, options.chains[0].library, str(options.chains[0])) == (
        "Rig", "rig.blend", "Rig [rig.blend]:Arm")


def test_keys_missing_after_the_save_fail_the_file(scene_file, tmp_path):
    """The batch re-opens what it saved and checks every baked chain's rotation keys on the baked frames."""
    out = tmp_path / "baked.blend"
    run_batch(scene_file, "--output", out, "--chain", "Arm")
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    chain = ik_batch.BakedChain("Rig", "Arm", ("upper_arm", "forearm"), tuple(range(FRAMES[0], FRAMES[1] + 1)))
    ik_batch.save_checked(tmp_path / "again.blend", [chain], replace=False)  # all there
    from ik_solvers.blender import compat

    def forearm_curve():  # looked up again after every save_checked: it re-opens the saved file
        channelbag = compat.channelbag_for_assigned_slot(bpy.data.objects["Rig"].animation_data)
        fcurve = next(f for f in channelbag.fcurves if f.data_path == 'pose.bones["forearm"].rotation_quaternion')
        return channelbag, fcurve

    _channelbag, fcurve = forearm_curve()
    fcurve.keyframe_points.remove(fcurve.keyframe_points[10])
    with pytest.raises(ik_batch.BatchError, match=r"bone 'forearm' lacks keys on 1 baked frames \(first 11\)"):
        ik_batch.save_checked(tmp_path / "lost.blend", [chain], replace=False)
    assert not (tmp_path / "lost.blend").exists()  # a failed check leaves no output (issue 21)
    channelbag, fcurve = forearm_curve()
    channelbag.fcurves.remove(fcurve)
    with pytest.raises(ik_batch.BatchError, match="did not survive the save: .* no rotation keys on bone 'forearm'"):
        ik_batch.save_checked(tmp_path / "lost2.blend", [chain], replace=False)


# --------------------------------------------------------------------------- versioned report
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_refused_input_keeps_the_errors_field_in_the_report(addon, tmp_path, capsys, monkeypatch, jobs):
    """Issue 19: the error the add-on raises keeps the core's ``field`` up to the report (it was
    re-wrapped as a bare string), also from a worker; the sentence is the one the bake raised, named once."""
    path = build_scene_file(tmp_path / "hinge.blend", arm_method="HI")
    upper_arm = bpy.data.objects["Rig"].pose.bones["upper_arm"]
    upper_arm.lock_ik_x = upper_arm.lock_ik_y = True  # a hinge start joint, which HI refuses
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    report = tmp_path / "r.json"
    monkeypatch.setattr(ik_batch, "cap_jobs", lambda jobs: (jobs, None))  # two workers even on one CPU
    assert ik_batch.main(["ik_batch.py", str(path), "--dry-run", "--quiet", "--chain", "Arm", "--jobs", str(jobs),
                          "--chunk-size", "30", "--report", str(report)]) == 2
    (entry,) = json.loads(report.read_text())["files"]
    assert entry["ok"] is False and entry["error_field"] == "kinds"
    assert entry["error"].count("'Arm'") == 1 and "needs a ball start joint" in entry["error"]
    assert entry["error"] in capsys.readouterr().err
    schema = json.loads((REPO / "docs" / "batch-report.schema.json").read_text())
    assert schema["$defs"]["file"]["properties"]["error_field"]["type"] == ["string", "null"]


def test_report_validates_against_its_schema(scene_file, tmp_path):
    """A real report (one good file, one missing) against docs/batch-report.schema.json, with the
    versions it carries."""
    import tomllib

    import jsonschema  # the test group pins it (pyproject.toml); missing means `make venv` was not run

    report = tmp_path / "r.json"
    run_batch(scene_file, tmp_path / "missing.blend", "--output", tmp_path / "out", "--method", "HI",
              "--report", report, check_rc=2)
    data = json.loads(report.read_text())
    schema = json.loads((REPO / "docs" / "batch-report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    manifest = tomllib.loads((REPO / "blender_manifest.toml").read_text())
    assert (data["schema_version"], data["addon_version"], data["blender_version"], data["exit_code"]) == (
        2, manifest["version"], bpy.app.version_string, 2)
    good, missing = data["files"]
    assert good["ok"] and not missing["ok"] and "no such file" in missing["error"]
    assert good["error_field"] is missing["error_field"] is None
    assert {"evaluated_max_error", "evaluated_mismatch_frames", "evaluated_frames_checked"} <= set(good["chains"][0])
    broken = dict(data, files=[dict(good, ok="yes")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator)
