"""The version shims in ``ik_solvers.blender.compat`` against the Blender that runs them.

Each function is tested on Blender's own path where this Blender has it ("native") and on the
fallback 4.4 / 4.5 take ("fallback", forced here by hiding the 5.0 helper), so a run on 5.0 also
checks what 4.4 does; on 4.4 / 4.5 both cases run the fallback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from conftest import build_arm

from ik_solvers.blender import compat

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["native", "fallback"])
def path(request, monkeypatch):
    """Which implementation compat uses: Blender's own (where it exists) or the 4.4 / 4.5 one."""
    if request.param == "fallback":
        for name in ("animdata_get_channelbag_for_assigned_slot", "action_get_first_suitable_slot",
                     "action_ensure_channelbag_for_slot"):
            monkeypatch.delattr(compat.anim_utils, name, raising=False)
        monkeypatch.setattr(compat, "HAS_NEW_FROM_FCURVE", False)
        monkeypatch.setattr(compat, "HAS_NEW_GROUP_NAME", False)
    return request.param


def new_action_and_slot(name="Action", id_type="OBJECT"):
    action = bpy.data.actions.new(name)
    return action, action.slots.new(id_type, name)


def keyframe_arrays(fcurve) -> dict[str, bytes]:
    """Every stored keyframe attribute as raw bytes (bit-for-bit comparison)."""
    points, arrays = fcurve.keyframe_points, {}
    for prop in bpy.types.Keyframe.bl_rna.properties:
        if prop.identifier == "rna_type":
            continue
        dtype = {"FLOAT": np.float32, "BOOLEAN": bool}.get(prop.type, np.int32)
        values = np.empty(len(points) * max(getattr(prop, "array_length", 1), 1), dtype=dtype)
        points.foreach_get(prop.identifier, values)
        arrays[prop.identifier] = values.tobytes()
    return arrays


def varied_fcurve(channelbag):
    """An F-curve with 7 keys whose every attribute varies, handles moved off their automatic place."""
    fcurve = channelbag.fcurves.new('pose.bones["upper_arm"].rotation_quaternion', index=2)
    rng = np.random.default_rng(3)
    points = fcurve.keyframe_points
    points.add(7)
    co = np.column_stack([np.arange(7) * 3.5 + 0.25, rng.normal(size=7)])
    points.foreach_set("co", co.astype(np.float32).ravel())
    for i, key in enumerate(points):
        key.interpolation = ("BEZIER", "LINEAR", "CONSTANT", "ELASTIC", "BACK", "SINE", "BOUNCE")[i]
        key.easing = ("AUTO", "EASE_IN", "EASE_OUT", "EASE_IN_OUT")[i % 4]
        key.type = ("KEYFRAME", "BREAKDOWN", "JITTER", "EXTREME")[i % 4]
        key.handle_left_type, key.handle_right_type = ("FREE", "ALIGNED", "VECTOR", "AUTO_CLAMPED")[i % 4], "FREE"
        key.handle_left = (key.co[0] - 1.1, key.co[1] + float(rng.normal()))
        key.handle_right = (key.co[0] + 0.9, key.co[1] + float(rng.normal()))
        key.back, key.amplitude, key.period = 1.0 + i / 7, 0.3 * i, 2.0 + i
        key.select_control_point, key.select_left_handle, key.select_right_handle = i % 2 == 0, i % 3 == 0, i % 2 == 1
    fcurve.extrapolation, fcurve.mute, fcurve.lock, fcurve.hide = "LINEAR", True, True, True
    fcurve.color_mode, fcurve.color, fcurve.auto_smoothing = "CUSTOM", (0.1, 0.7, 0.3), "CONT_ACCEL"
    return fcurve


# --------------------------------------------------------------------------- channel bags and slots
def test_channelbag_for_assigned_slot_is_none_until_action_slot_and_bag_exist(scene, path):
    obj = build_arm()
    assert compat.channelbag_for_assigned_slot(obj.animation_data) is None  # no animation data
    anim_data = obj.animation_data_create()
    assert compat.channelbag_for_assigned_slot(anim_data) is None  # no action
    action, slot = new_action_and_slot()
    anim_data.action = action
    anim_data.action_slot = slot
    assert compat.channelbag_for_assigned_slot(anim_data) is None  # no layer, strip or bag yet
    bag = compat.ensure_channelbag(action, slot)
    assert compat.channelbag_for_assigned_slot(anim_data) == bag == action.layers[0].strips[0].channelbag(slot)
    anim_data.action_slot = None
    assert compat.channelbag_for_assigned_slot(anim_data) is None  # no slot


def test_ensure_channelbag_creates_layer_strip_and_bag_once(scene, path):
    action, slot = new_action_and_slot()
    other = action.slots.new("OBJECT", "Other")
    bag = compat.ensure_channelbag(action, slot)
    assert bag.slot == slot
    assert compat.ensure_channelbag(action, slot) == bag
    other_bag = compat.ensure_channelbag(action, other)
    assert other_bag.slot == other and other_bag != bag
    assert len(action.layers) == 1 and len(action.layers[0].strips) == 1
    assert len(action.layers[0].strips[0].channelbags) == 2


def test_first_suitable_slot_matches_the_id_type(scene, path):
    action, material_slot = new_action_and_slot("Mixed", "MATERIAL")
    assert compat.first_suitable_slot(action, "OBJECT") is None
    object_slot = action.slots.new("OBJECT", "Rig")
    assert compat.first_suitable_slot(action, "OBJECT") == object_slot
    assert compat.first_suitable_slot(action, "MATERIAL") == material_slot


# --------------------------------------------------------------------------- F-curves
def test_copy_fcurve_copies_every_key_bit_for_bit_and_the_settings(scene, path):
    action, slot = new_action_and_slot()
    source_bag = compat.ensure_channelbag(action, slot)
    source = varied_fcurve(source_bag)
    before = keyframe_arrays(source)
    backup, backup_slot = new_action_and_slot("Backup")
    backup_bag = compat.ensure_channelbag(backup, backup_slot)

    copy = compat.copy_fcurve(backup_bag, source, "0")

    assert (copy.data_path, copy.array_index, copy.group) == ("0", 2, None)
    assert keyframe_arrays(copy) == before
    assert keyframe_arrays(source) == before  # the source is untouched
    for name in compat.FCURVE_SETTINGS:
        copied, original = getattr(copy, name), getattr(source, name)
        assert copied == original if isinstance(original, (str, bool)) else tuple(copied) == tuple(original), name
    assert backup_bag.fcurves.find("0", index=2) == copy
    assert len(source_bag.fcurves) == 1


def test_copy_fcurve_of_a_curve_without_keys(scene, path):
    action, slot = new_action_and_slot()
    bag = compat.ensure_channelbag(action, slot)
    source = bag.fcurves.new("location", index=1)
    copy = compat.copy_fcurve(bag, source, "copy")
    assert (copy.data_path, copy.array_index, len(copy.keyframe_points)) == ("copy", 1, 0)


def test_new_fcurve_creates_its_group_once_and_joins_it(scene, path):
    action, slot = new_action_and_slot()
    bag = compat.ensure_channelbag(action, slot)
    loose = bag.fcurves.new("location", index=0)
    path_q = 'pose.bones["forearm"].rotation_quaternion'
    curves = [compat.new_fcurve(bag, path_q, index, "forearm") for index in range(4)]
    other = compat.new_fcurve(bag, 'pose.bones["upper_arm"].rotation_euler', 1, "upper_arm")

    assert [g.name for g in bag.groups] == ["forearm", "upper_arm"]
    assert [(f.data_path, f.array_index) for f in bag.groups["forearm"].channels] == [(path_q, i) for i in range(4)]
    assert list(bag.groups["upper_arm"].channels) == [other]
    assert all(f.group == bag.groups["forearm"] for f in curves)
    assert loose.group is None
    assert len(bag.fcurves) == 6


def test_new_fcurve_joins_a_group_that_already_exists(scene, path):
    action, slot = new_action_and_slot()
    bag = compat.ensure_channelbag(action, slot)
    group = bag.groups.new("upper_arm")
    fcurve = compat.new_fcurve(bag, 'pose.bones["upper_arm"].rotation_euler', 0, "upper_arm")
    assert fcurve.group == group and len(bag.groups) == 1


# --------------------------------------------------------------------------- pose selection
def test_select_pose_bone_is_what_nla_bake_sees(scene):
    obj = build_arm()
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in obj.pose.bones:
        compat.select_pose_bone(pose_bone)
    compat.select_pose_bone(obj.pose.bones["upper_arm"], False)
    result = bpy.ops.nla.bake(frame_start=1, frame_end=2, only_selected=True, bake_types={"POSE"})
    bpy.ops.object.mode_set(mode="OBJECT")
    assert result == {"FINISHED"}
    bag = compat.channelbag_for_assigned_slot(obj.animation_data)
    assert {f.data_path.split('"')[1] for f in bag.fcurves} == {"forearm"}  # only the selected bone


# --------------------------------------------------------------------------- exit
@pytest.mark.parametrize("unregister_first", [False, True])
def test_a_script_with_the_add_on_registered_exits(tmp_path, unregister_first):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "import bpy\n"
        "import ik_solvers\n"
        "from ik_solvers.blender import compat\n"
        "ik_solvers.register()\n"
        "compat.unregister_at_exit(ik_solvers.unregister)\n"
        "compat.unregister_at_exit(ik_solvers.unregister)\n"
        + ("ik_solvers.unregister()\n" if unregister_first else "")
        + "print('registered' if hasattr(bpy.types.Object, 'ik_solvers') else 'unregistered')\n"
        "raise SystemExit(3)\n"
    )
    process = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ),
                             timeout=120)  # bpy 4.5 without unregister_at_exit: hangs here
    assert process.returncode == 3, process.stderr
    assert process.stdout.split() == ["unregistered" if unregister_first else "registered"]
    assert "Traceback" not in process.stderr
