"""Issue 21: a library override whose library file is missing. Its armature data is a placeholder
without bones; the error names the missing library (before: "Tip bone 'forearm' not found")."""

from __future__ import annotations

import os

import bpy
import pytest
from test_safety_linked import link_rig, write_library

from ik_solvers.blender.bake import BakeJob, BakeOptions
from ik_solvers.blender.errors import IKSolversError

MISSING = (r"Armature 'Rig' needs its data 'Rig' from '//lib\.blend', and that library is missing; find it "
           r"\(File > External Data > Find Missing Files\) or relink it\.")


def test_an_override_whose_library_is_missing_is_refused_naming_the_library(addon, tmp_path):
    write_library(tmp_path / "lib.blend")
    collection, _ = link_rig(tmp_path / "lib.blend")
    collection.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"), relative_remap=True)
    os.remove(tmp_path / "lib.blend")
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "shot.blend"))
    obj = next(o for o in bpy.context.scene.objects if o.type == "ARMATURE" and o.override_library)
    assert obj.data.is_missing
    bpy.context.view_layer.objects.active = obj
    for call in (bpy.ops.ik_solvers.solve, lambda: bpy.ops.ik_solvers.bake(frame_start=1, frame_end=3),
                 bpy.ops.ik_solvers.live_toggle):
        with pytest.raises(RuntimeError, match=MISSING):
            call()
    with pytest.raises(IKSolversError, match=MISSING):
        BakeJob(bpy.context, obj, BakeOptions(1, 3, 1, ("Arm",)))
