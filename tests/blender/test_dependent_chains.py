"""Issue 22, first part: dependent chains solved in sequence (without solve_together) are history
independent. A chain reads the pose its parent's chain is solved to on that frame, never keys left
from an earlier bake, so a range baked in one go, in parts, in parts in reverse order, or by
``ik_batch --jobs 2`` gets the same keys bit for bit, over an already keyed pose or none.

The rig is the measurement of the issue: five chains on Rigify's human metarig (spine to head, both
arms under it, both legs) with hinge elbows and knees, listed children first. Before the fix the arms
were baked before the spine and sampled its stale keys (20 of the 72 curves changed when the range
was baked in two parts), and a part baked before the part ahead of it kept the quaternion hemisphere
of the stale key it started from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import bpy
import mathutils
import numpy as np
import pytest
from conftest import add_empty, build_arm, evaluated_tip

from ik_solvers.blender import compat
from ik_solvers.blender.chains import capture_preferred_pose
from ik_solvers.blender.keyframes import KEYFRAME_ATTRIBUTES, read_keyframes

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import _rigify_rigs as rr  # noqa: E402
from _rigs import key_path  # noqa: E402

FRAMES = (1, 40)
CHAINS = (  # children first: the order must not matter
    ("ArmL", "hand.L", 3, "SDLS"),
    ("ArmR", "hand.R", 3, "SDLS"),
    ("LegL", "foot.L", 3, "SDLS"),
    ("LegR", "foot.R", 3, "SDLS"),
    ("Spine", "spine.006", 6, "HI"),
)
"""(name, tip bone, length, method): spine.001 … spine.006 carry the shoulders, so both arms hang
from the spine chain; the legs hang from the hips bone ``spine``, keyed but in no chain."""
LOOP_RADIUS = 0.06
"""Metres: each target's loop, starting at its chain's rest tip."""
BEZIER = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["BEZIER"].value
HINGES = ("forearm.L", "forearm.R", "shin.L", "shin.R")
KEYED_FRAMES = (-4, 1, 12, 25, 40, 48)
"""Frames of the pose keyed before the bake: inside the range and on both sides of it."""
SPLITS = {
    "one": [(1, 40)],
    "two": [(1, 20), (21, 40)],
    "two reversed": [(21, 40), (1, 20)],
    "three shuffled": [(14, 26), (27, 40), (1, 13)],
    "frame by frame, shuffled": [(frame, frame) for frame in np.random.default_rng(5).permutation(np.arange(1, 41))],
}


@pytest.fixture(scope="module", autouse=True)
def rigify_enabled():
    """Rigify on for this module's tests (the metarig operator), off afterwards."""
    import addon_utils

    was_loaded = addon_utils.check("rigify")[1]
    yield
    if not was_loaded and addon_utils.check("rigify")[1]:
        addon_utils.disable("rigify", default_set=True)
        # Rigify 5.0 leaves its load_post handler behind, which then fails on every file loaded later
        # (its Armature properties are gone) and prints a traceback other tests read as an error.
        handlers = bpy.app.handlers.load_post
        for handler in [h for h in handlers if getattr(h, "__module__", "").startswith("rigify")]:
            handlers.remove(handler)


def build_body(keyed: bool, current_frame: int = 30):
    """The metarig with the five chains (preferred pose: the rest pose), each target an Empty keyed
    along its own loop; with ``keyed`` every bone keyed at ``KEYED_FRAMES`` first, to random
    rotations in alternating quaternion hemispheres (so the chains' bones hold keys their solve
    differs from). The scene is left at ``current_frame``, inside the range."""
    rr.enable_rigify()
    assert bpy.ops.object.armature_human_metarig_add() == {"FINISHED"}
    obj = bpy.context.object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    bpy.context.view_layer.update()
    for name in HINGES:
        obj.pose.bones[name].lock_ik_y = obj.pose.bones[name].lock_ik_z = True
    frames = np.arange(FRAMES[0], FRAMES[1] + 1)
    for index, (name, tip, length, method) in enumerate(CHAINS):
        rest_tip = np.array(obj.matrix_world @ obj.data.bones[tip].tail_local)
        angle = 2.0 * np.pi * (frames - 1) / (len(frames) - 1) + index
        loop = np.column_stack([np.sin(angle), np.cos(angle), 0.5 * np.sin(2 * angle)])
        target = add_empty(f"{name}Target", tuple(rest_tip))
        key_path(target, rest_tip + LOOP_RADIUS * (loop - loop[0]))  # from the rest tip at frame 1
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method = name, tip, length, method
        chain.target, chain.tolerance = target, 1e-5
        capture_preferred_pose(obj, chain, scene)
    if keyed:
        rng = np.random.default_rng(22)
        for pose_bone in obj.pose.bones:
            for count, frame in enumerate(KEYED_FRAMES):
                quaternion = np.array([1.0, *(0.3 * rng.normal(size=3))])
                pose_bone.rotation_quaternion = (-1) ** count * quaternion / np.linalg.norm(quaternion)
                pose_bone.keyframe_insert("rotation_quaternion", frame=frame)
    scene.frame_set(current_frame)
    return obj


def bake(obj, ranges) -> None:
    for start, end in ranges:
        with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
            assert bpy.ops.ik_solvers.bake(frame_start=start, frame_end=end, all_chains=True) == {"FINISHED"}


def _evaluated_keyframes(fcurve) -> bytes:
    """Every stored property of the curve's keys that its evaluation reads, as bytes: all of them but
    the handles no segment uses (a key's right handle unless it is Bézier, its left one unless the key
    before it is). Those are Blender's defaults on keys written without ``fcurve.update()``, computed on
    keys another part's update passed over: a bake in parts may leave either."""
    keys = read_keyframes(fcurve)
    bezier = keys["interpolation"] == BEZIER
    keys["handle_right"][~bezier] = 0.0
    keys["handle_left"][~np.concatenate([[False], bezier[:-1]])] = 0.0
    return b"".join(keys[name].tobytes() for name, _, _ in KEYFRAME_ATTRIBUTES)


def rotation_keys(obj) -> dict[tuple[str, int], bytes]:
    """Every bone rotation curve's keys as their evaluation reads them: equal means bit for bit."""
    channelbag = compat.channelbag_for_assigned_slot(obj.animation_data)
    return {(fcurve.data_path, fcurve.array_index): _evaluated_keyframes(fcurve)
            for fcurve in channelbag.fcurves if fcurve.data_path.endswith("rotation_quaternion")}


def chain_curves(obj) -> set[tuple[str, int]]:
    """The 72 rotation curves of the five chains' bones (18 bones, 4 channels each)."""
    from ik_solvers.blender.rig import read_chain

    bones = {bone for _, tip, length, _ in CHAINS for bone in read_chain(obj, tip, length).joint_bones}
    return {(obj.pose.bones[bone].path_from_id("rotation_quaternion"), index) for bone in bones for index in range(4)}


def baked_keys(keyed: bool, ranges) -> dict[tuple[str, int], bytes]:
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = build_body(keyed)
    bake(obj, ranges)
    keys = rotation_keys(obj)
    assert chain_curves(obj) <= set(keys) and len(chain_curves(obj)) == 72
    return keys


def changed_curves(reference: dict, other: dict) -> list[tuple[str, int]]:
    return sorted(key for key in reference.keys() | other.keys() if reference.get(key) != other.get(key))


def parents_listed_first(obj) -> None:
    chains = obj.ik_solvers.chains
    chains.move(chains.find("Spine"), 0)
    assert chains[0].name == "Spine"


def solve_at(obj, frame: int, names=None) -> list[np.ndarray]:
    """The five tips after the solve operator at ``frame``: every chain (``names`` None), else the named
    chains one by one in that order."""
    bpy.context.scene.frame_set(frame)
    chains = obj.ik_solvers.chains
    for name in [None] if names is None else names:
        if name is not None:
            obj.ik_solvers.active_chain_index = chains.find(name)
        with bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj]):
            assert bpy.ops.ik_solvers.solve(all_chains=name is None) == {"FINISHED"}
        bpy.context.view_layer.update()
    return [evaluated_tip(obj, tip) for _, tip, _, _ in CHAINS]


@pytest.mark.parametrize("keyed", [True, False], ids=["over-keys", "no-keys"])
def test_a_range_baked_in_parts_in_any_order_gets_the_same_keys_bit_for_bit(addon, keyed):
    one = baked_keys(keyed, SPLITS["one"])
    for split, ranges in SPLITS.items():
        if split != "one":
            assert changed_curves(one, baked_keys(keyed, ranges)) == [], split


def test_a_parent_chain_keyed_unlike_its_solve_is_read_as_solved(addon):
    """The spine's keys before the bake differ from its solve; the arms, listed before it, still see it
    solved: their keys are the ones of a bake of the same chains listed parents first, and of a
    re-bake on the first bake's keys."""
    obj = build_body(keyed=True)
    spine_path = obj.pose.bones["spine.003"].path_from_id("rotation_quaternion")
    before = rotation_keys(obj)[(spine_path, 1)]
    bake(obj, SPLITS["one"])
    first = rotation_keys(obj)
    assert first[(spine_path, 1)] != before
    bake(obj, SPLITS["one"])
    assert changed_curves(first, rotation_keys(obj)) == []
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = build_body(keyed=True)
    parents_listed_first(obj)
    bake(obj, SPLITS["one"])
    assert changed_curves(first, rotation_keys(obj)) == []


def test_the_child_chains_tip_is_where_a_fresh_solve_on_that_frame_puts_it(addon):
    """Blender's evaluation of the baked keys puts each hand where solving the spine and then the arm
    on that frame alone, on the unbaked scene, puts it (the solve operator; frames where the arm's
    iterative solve ran out of iterations are left out: there float32 noise of its root moves it)."""
    frames = (1, 9, 20, 21, 33, 40)
    obj = build_body(keyed=True)
    bake(obj, SPLITS["two reversed"])
    baked = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        baked[frame] = [evaluated_tip(obj, tip) for _, tip, _, _ in CHAINS]
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = build_body(keyed=True)
    compared = 0
    for frame in frames:
        fresh = solve_at(obj, frame, ["Spine", "ArmL", "ArmR"])
        for (name, tip, _, _), at_bake, at_solve in zip(CHAINS, baked[frame], fresh):
            settled = name == "Spine" or (name in ("ArmL", "ArmR")
                                          and obj.ik_solvers.chains[name].last_status != "BUDGET_EXHAUSTED")
            if settled:
                np.testing.assert_allclose(at_bake, at_solve, rtol=0.0, atol=2e-6, err_msg=f"{tip}, frame {frame}")
                compared += 1
    assert compared >= len(frames) + 4  # the spine at every frame, the arms at most


def test_solving_all_chains_solves_the_spine_before_the_arms_listed_above_it(addon):
    """The solve operator's All Chains orders the chains as the bake does: its pose is the one of
    solving the spine first, then each other chain, bit for bit."""
    obj = build_body(keyed=True)
    together = solve_at(obj, 9)
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = build_body(keyed=True)
    one_by_one = solve_at(obj, 9, ["Spine", "ArmL", "ArmR", "LegL", "LegR"])
    np.testing.assert_array_equal(together, one_by_one)


def test_ik_batch_in_two_processes_writes_the_keys_of_a_parents_first_bake(addon, tmp_path):
    """``ik_batch --jobs 2`` of the chains listed children first (chunks of 15 frames sampled and solved in
    two worker processes, the spine's keys written before the arms are sampled) saves the keys the bake
    operator writes for the chains listed parents first, bit for bit."""
    obj = build_body(keyed=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "body.blend"))
    parents_listed_first(obj)
    bake(obj, SPLITS["one"])
    expected = rotation_keys(obj)
    process = subprocess.run([sys.executable, str(REPO / "scripts" / "ik_batch.py"), str(tmp_path / "body.blend"),
                              "--output", str(tmp_path / "out.blend"), "--chunk-size", "15", "--jobs", "2"],
                             capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert process.returncode == 0, process.stderr
    assert "capped" not in process.stderr  # two workers did run
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    assert changed_curves(expected, rotation_keys(bpy.data.objects["metarig"])) == []


@pytest.mark.parametrize("mode", ["QUATERNION", "XYZ"])
def test_a_part_baked_before_the_part_ahead_of_it_is_turned_to_continue_it(addon, mode):
    """An arm keyed at frame 1 plainly, after it the other way round (Euler: the other solution of each
    rotation, plus whole turns; quaternion: the other hemisphere). Baking frames 11-20 first continues
    the key at 5; baking 1-10 then turns 11-20
    (and the key kept after them) to continue frame 10: the curves are continuous across the parts,
    every key holds the rotation the one-go bake keys there, quaternions to the bit (Euler keys turned
    in float32 may differ from the one-go bake's by a rounding)."""
    def baked(ranges):
        bpy.ops.wm.read_homefile(use_empty=True)
        obj = build_arm()
        target = add_empty(location=(0.4, 0.1, 1.3))
        for frame in range(1, 21):
            target.location = (0.3 + 0.1 * np.cos(frame / 3), 0.15 * np.sin(frame / 3), 1.3)
            target.keyframe_insert("location", frame=frame)
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method, chain.target = "Arm", "forearm", 2, "DLS", target
        for pose_bone in obj.pose.bones:
            pose_bone.rotation_mode = mode
            for frame in (1, 5, 15, 25):  # frame 1 as written plainly, the others the other way
                rotation = mathutils.Euler((0.3, -0.2, 0.4), "XYZ")
                if mode == "QUATERNION":
                    pose_bone.rotation_quaternion = rotation.to_quaternion() * (1 if frame == 1 else -1)
                    pose_bone.keyframe_insert("rotation_quaternion", frame=frame)
                else:  # (a + π, π − b, c + π) and a turn more: the same rotation
                    pose_bone.rotation_euler = (0.3, -0.2, 0.4) if frame == 1 else (0.3 + 3 * np.pi, np.pi + 0.2,
                                                                                    0.4 - np.pi)
                    pose_bone.keyframe_insert("rotation_euler", frame=frame)
        bpy.context.scene.frame_set(1)
        bake(obj, ranges)
        channelbag = compat.channelbag_for_assigned_slot(obj.animation_data)
        return {(f.data_path, f.array_index): read_keyframes(f)["co"] for f in channelbag.fcurves
                if f.data_path.startswith("pose.bones")}

    one, parts = baked([(1, 20)]), baked([(11, 20), (1, 10)])
    assert one.keys() == parts.keys()
    for bone in ("upper_arm", "forearm"):
        paths = sorted(key for key in one if f'"{bone}"' in key[0])
        values = {name: np.stack([curves[key][:, 1] for key in paths], 1) for name, curves in (("one", one),
                                                                                               ("parts", parts))}
        assert np.abs(np.diff(values["parts"][:20], axis=0)).max() < 0.5, bone  # frames 1-20: no jump at 10-11
        if mode == "QUATERNION":
            np.testing.assert_array_equal(values["parts"], values["one"])
        else:
            np.testing.assert_allclose(values["parts"], values["one"], rtol=0.0, atol=1e-5)
