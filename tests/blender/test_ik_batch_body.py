"""scripts/ik_batch.py on a body (issue 22, SPEC §7, §8): Rigify's human metarig with five chains solved
together from the hips (``solve_together``, ``body_root``), saved as a .blend and baked headless.

``--jobs 1`` and ``--jobs 2`` give the same keys bit for bit (and the add-on's own bake operator the same
keys), the report has each goal's section and passes the schema, ``--chain`` naming one chain of the body
bakes the whole body and says so (``--reduce-keys`` on a body: tests/blender/test_body_keys.py), and a bad body root
exits 2 naming ``body_root``. Every key is read back from the saved file.
"""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from conftest import evaluated_tip
from test_body_metarig import CHAINS, metarig_body
from test_ik_batch import REPO, baked_keys, problems, run_batch

pytestmark = pytest.mark.usefixtures("rigify_enabled")
FRAMES = (1, 12)
MOVES = {"chest": (0.05, -0.2), "arm.L": (0.1, -0.2), "arm.R": (0.0, -0.25)}
"""Per goal (x, z) over the frames: a crouch with the feet planted (scene units)."""
REACHED = 1e-5
"""0.01 mm on the ~1.8 m metarig (as test_body_metarig); CHAINS: its five chains, feet over hands over chest."""


def build_body_file(path: Path, body_root: str = "spine") -> Path:
    """The metarig with the five chains, their goals keyed on a crouch over ``FRAMES``, saved to ``path``."""
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = metarig_body(body_root)
    count = FRAMES[1] - FRAMES[0]
    for name, (dx, dz) in MOVES.items():
        target = obj.ik_solvers.chains[name].target
        rest = np.array(target.location)
        for frame in range(FRAMES[0], FRAMES[1] + 1):
            target.location = rest + np.array([dx, 0.0, dz]) * (frame - FRAMES[0]) / count
            target.keyframe_insert("location", frame=frame)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = FRAMES
    bpy.context.scene.frame_set(FRAMES[0])
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture
def body_file(addon, tmp_path) -> Path:
    return build_body_file(tmp_path / "body.blend")


def _channels(keys) -> set[str]:
    return {path for path, _ in keys}


def test_jobs_1_and_2_bake_the_body_bit_for_bit_with_each_goals_report(body_file, tmp_path):
    import jsonschema

    one, two = tmp_path / "one.blend", tmp_path / "two.blend"
    run_batch(body_file, "--output", one, "--chunk-size", "5", "--report", tmp_path / "one.json")
    run_batch(body_file, "--output", two, "--chunk-size", "5", "--jobs", "2", "--report", tmp_path / "two.json")
    keys_one, keys_two = baked_keys(one), baked_keys(two)
    assert keys_one.keys() == keys_two.keys()
    for channel, co in keys_one.items():
        assert co.tobytes() == keys_two[channel].tobytes(), channel
    paths = _channels(keys_one)
    assert 'pose.bones["spine"].location' in paths  # the body root moves
    assert {f'pose.bones["{b}"].rotation_quaternion' for b in ("thigh.L", "shin.R", "upper_arm.L", "spine.003",
                                                               "spine")} <= paths
    assert not any("shoulder" in p or "pelvis" in p for p in paths)  # fixed links keep their pose

    reports = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two")]
    schema = json.loads((REPO / "docs" / "batch-report.schema.json").read_text())
    for report in reports:
        jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)
    chains = reports[0]["files"][0]["chains"]
    assert [entry["chain"] for entry in chains] == list(CHAINS)
    obj = bpy.data.objects["metarig"]  # the saved file's own evaluation of the keys, as the report has it
    for entry, other in zip(chains, reports[1]["files"][0]["chains"]):
        assert entry["method"] == "BODY" and entry["frames"] == FRAMES[1] - FRAMES[0] + 1
        goals = entry["goals"]
        assert goals["priority"] == CHAINS[entry["chain"]][2] and goals["weight"] == 1.0
        assert goals == other["goals"] and entry["evaluated_mismatch_frames"] == []
        missed = {miss["frame"]: miss for miss in goals["not_reached"]}
        assert goals["status_counts"]["REACHED"] == entry["frames"] - len(missed)
        for frame in range(FRAMES[0], FRAMES[1] + 1):
            bpy.context.scene.frame_set(frame)
            chain = obj.ik_solvers.chains[entry["chain"]]
            error = np.linalg.norm(evaluated_tip(obj, chain.tip_bone) - np.array(chain.target.matrix_world.translation))
            assert abs(error - missed[frame]["error"]) <= REACHED if frame in missed else error <= REACHED
    by_name = {entry["chain"]: entry["goals"] for entry in chains}
    for name in ("leg.L", "leg.R", "arm.L", "arm.R"):  # the higher priorities: met on every frame
        assert by_name[name]["not_reached"] == [], name
    assert {miss["status"] for miss in by_name["chest"]["not_reached"]} == {"LIMITED"}  # the chest gives way
    broken = json.loads(json.dumps(reports[0]))
    broken["files"][0]["chains"][0]["goals"]["status_counts"] = {"CONVERGED": 12}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator)


def test_the_batch_keys_equal_the_bake_operators(body_file, tmp_path):
    out = tmp_path / "batch.blend"
    run_batch(body_file, "--output", out, "--chunk-size", "4")
    batch = baked_keys(out)
    bpy.ops.wm.open_mainfile(filepath=str(body_file), load_ui=False)
    obj = bpy.data.objects["metarig"]
    with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
        assert bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=FRAMES[0], frame_end=FRAMES[1],
                                       all_chains=True) == {"FINISHED"}
    operator = tmp_path / "operator.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(operator), copy=True)
    keys = baked_keys(operator)
    assert keys.keys() == batch.keys()
    for channel, co in keys.items():
        assert co.tobytes() == batch[channel].tobytes(), channel


def test_a_chain_of_the_body_bakes_the_whole_body_and_says_so(body_file, tmp_path):
    out = tmp_path / "arm.blend"
    process = run_batch(body_file, "--output", out, "--chain", "arm.L", "--method", "DLS", "--report",
                        tmp_path / "r.json")
    assert "'metarig:arm.L' is solved together" in process.stderr and "baking its whole body" in process.stderr
    assert "does not apply to the body" in process.stderr
    entries = json.loads((tmp_path / "r.json").read_text())["files"][0]["chains"]
    assert [entry["chain"] for entry in entries] == list(CHAINS)
    assert 'pose.bones["thigh.R"].rotation_quaternion' in _channels(baked_keys(out))
    assert [chain.method for chain in bpy.data.objects["metarig"].ik_solvers.chains] == ["HI"] * 5  # kept


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_bad_body_root_exits_2_naming_it_and_saves_nothing(addon, tmp_path, jobs):
    bad = build_body_file(tmp_path / "bad.blend", body_root="hand.L")  # no chain hangs from a hand
    out = tmp_path / "out.blend"
    process = run_batch(bad, "--output", out, "--jobs", jobs, "--chunk-size", "4", "--report", tmp_path / "r.json",
                        check_rc=2)
    assert "body root 'hand.L'" in problems(process) and problems(process).count("\n") == 0
    entry = json.loads((tmp_path / "r.json").read_text())["files"][0]
    assert entry["error_field"] == "body_root" and entry["output"] is None and not out.exists()
