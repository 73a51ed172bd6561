"""Issue 10, linked and overridden rigs, with the library and override files built here with bpy:
a linked armature is refused by every operator that would change it, with a message saying how to
make a library override; a library override bakes, and its keys survive a save and a reload."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm

from ik_solvers.blender.checks import bakeable_armature

OVERRIDE_HINT = "make a library override first (Object > Library Override > Make)"


def write_library(path):
    """A library .blend: collection 'RigColl' holding the arm 'Rig' with a chain 'Arm' and its target."""
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    collection = bpy.data.collections.new("RigColl")
    for item in (obj, target):
        collection.objects.link(item)
    bpy.data.libraries.write(str(path), {collection}, fake_user=True)


def link_rig(path):
    """A fresh file with the library's collection linked into the scene; the linked armature."""
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(str(path), link=True) as (_source, data):
        data.collections = ["RigColl"]
    collection = data.collections[0]
    bpy.context.scene.collection.children.link(collection)
    obj = bpy.data.objects["Rig", str(path)] if ("Rig", str(path)) in bpy.data.objects else bpy.data.objects["Rig"]
    bpy.context.view_layer.objects.active = obj
    return collection, obj


def keyed_frames(obj) -> dict:
    anim_data = obj.animation_data
    if anim_data is None or anim_data.action is None:
        return {}
    channelbag = anim_data.action.layers[0].strips[0].channelbag(anim_data.action_slot)
    return {(f.data_path, f.array_index): [k.co[0] for k in f.keyframe_points] for f in channelbag.fcurves}


OPERATORS = {
    "solve": lambda: bpy.ops.ik_solvers.solve(),
    "bake": lambda: bpy.ops.ik_solvers.bake(frame_start=1, frame_end=5),
    "live": lambda: bpy.ops.ik_solvers.live_toggle(),
    "chain_add": lambda: bpy.ops.ik_solvers.chain_add(),
    "capture": lambda: bpy.ops.ik_solvers.capture_preferred_pose(),
    "chain_remove": lambda: bpy.ops.ik_solvers.chain_remove(),
}


@pytest.mark.parametrize("operator", list(OPERATORS))
def test_a_linked_armature_is_refused_with_how_to_override_it(addon, tmp_path, operator):
    write_library(tmp_path / "lib.blend")
    _, obj = link_rig(tmp_path / "lib.blend")
    assert obj.library is not None and not obj.is_editable
    chains = len(obj.ik_solvers.chains)
    with pytest.raises(RuntimeError) as excinfo:
        OPERATORS[operator]()
    text = str(excinfo.value)
    assert "Armature 'Rig' is linked from" in text and OVERRIDE_HINT in text and "Traceback" not in text
    assert keyed_frames(obj) == {} and len(obj.ik_solvers.chains) == chains
    assert not obj.ik_solvers.chains[0].use_live
    assert not bakeable_armature(obj)


def test_a_library_override_bakes_and_its_keys_survive_save_and_reload(addon, tmp_path):
    write_library(tmp_path / "lib.blend")
    collection, linked = link_rig(tmp_path / "lib.blend")
    collection.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer)
    override = next(o for o in bpy.context.scene.objects if o.type == "ARMATURE" and o.override_library)
    assert override.override_library is not None and override.library is None
    assert bakeable_armature(override) and not bakeable_armature(linked)
    bpy.context.view_layer.objects.active = override
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=8) == {"FINISHED"}
    keys = keyed_frames(override)
    assert keys and all(frames == [float(f) for f in range(1, 9)] for frames in keys.values())
    main = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(main))

    bpy.ops.wm.open_mainfile(filepath=str(main))
    reloaded = next(o for o in bpy.context.scene.objects if o.type == "ARMATURE" and o.override_library)
    assert reloaded.override_library is not None
    assert keyed_frames(reloaded) == keys
    bpy.context.scene.frame_set(4)
    tip = np.array(reloaded.matrix_world @ reloaded.pose.bones["forearm"].tail)
    target = next(o for o in bpy.context.scene.objects if o.type == "EMPTY")
    assert np.linalg.norm(tip - np.array(target.matrix_world.translation)) < 1e-5
