"""scripts/ik_batch.py, issue 21: what it reads — a rig playing a linked Action, ``--chain`` with names
containing ``:`` or brackets, a missing library — is refused before any work with what is wrong, or
picked as asked. (What it writes: test_ik_batch_outputs.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import bpy
import pytest
import test_ik_batch
from test_ik_batch import baked_a_chain, build_scene_file, ik_batch, problems, run_batch

assert ik_batch  # importing it put scripts/ on sys.path
from _batch_rigs import ChainSelector, RigError, select_chains  # noqa: E402

library_files = test_ik_batch.library_files  # the fixture: rig.blend, a shot linking it, one overriding it


def test_a_rig_playing_a_linked_action_is_refused_before_any_work(addon, tmp_path):
    """A local rig whose Action is linked: the batch exited 2 (the keys, written into the linked Action,
    were not saved) but still wrote the output. Now it is refused before anything is baked, with how
    to fix it, and nothing is written."""
    library = tmp_path / "walk.blend"
    bpy.ops.wm.read_homefile(use_empty=True)
    empty = bpy.data.objects.new("Walker", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.keyframe_insert("location", frame=1)
    empty.animation_data.action.name = "Walk"
    bpy.ops.wm.save_as_mainfile(filepath=str(library))
    shot = build_scene_file(tmp_path / "shot.blend")
    with bpy.data.libraries.load(str(library), link=True) as (_source, data):
        data.actions = ["Walk"]
    rig = bpy.data.objects["Rig"]
    rig.animation_data_create()
    rig.animation_data.action = data.actions[0]
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    out = tmp_path / "out.blend"
    process = run_batch(shot, "--output", out, "--report", tmp_path / "r.json", check_rc=2)
    assert problems(process) == (
        f"ik_batch: {shot}: chain 'Rig:Arm': armature 'Rig' plays the Action 'Walk' linked from {library}, "
        "whose keys cannot be changed or saved; make the Action local (Outliner in Blender File view: "
        "right-click the Action > Make Local) or give the armature a local Action, and bake that")
    assert not baked_a_chain(process)
    assert sorted(os.listdir(tmp_path)) == ["r.json", "shot.blend", "shot.blend1", "walk.blend"]
    (entry,) = json.loads((tmp_path / "r.json").read_text())["files"]
    assert entry["ok"] is False and entry["output"] is None and entry["chains"] == []


def two_rigs_with_colons_and_brackets(path):
    """``Rig`` with chains ``Arm`` and ``Left:Arm`` (the leg), and a copy of it named ``Rig [v2]``
    (a local armature, not a linked one) with them renamed ``Hand`` and ``Leg``."""
    build_scene_file(path)
    rig = bpy.data.objects["Rig"]
    rig.ik_solvers.chains["Leg"].name = "Left:Arm"
    copy = rig.copy()
    copy.data = rig.data.copy()
    copy.name = "Rig [v2]"
    bpy.context.scene.collection.objects.link(copy)
    copy.ik_solvers.chains["Arm"].name, copy.ik_solvers.chains["Left:Arm"].name = "Hand", "Leg"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_chain_names_with_colons_and_armatures_with_brackets_can_be_picked(addon, tmp_path):
    """``--chain :Arm`` said "no IK chain 'Arm'" although it exists, and a chain name with ``:`` or an
    armature named ``Rig [v2]`` could not be picked: ARMATURE:NAME is split where the left part names
    an armature that has the chain, else the whole text is a chain name, and ``:NAME`` is NAME on any
    armature."""
    path = two_rigs_with_colons_and_brackets(tmp_path / "rigs.blend")
    report = tmp_path / "r.json"
    run_batch(path, "--dry-run", "--quiet", "--frames", "1", "3", "--report", report, "--chain", ":Arm",
              "--chain", "Left:Arm", "--chain", "Rig [v2]:Leg", "--chain", "Rig [v2]:Hand")
    chains = json.loads(report.read_text())["files"][0]["chains"]
    assert [(c["armature"], c["chain"]) for c in chains] == [
        ("Rig", "Arm"), ("Rig", "Left:Arm"), ("Rig [v2]", "Leg"), ("Rig [v2]", "Hand")]

    objects = list(bpy.data.objects)  # the file as the run saw it, still open here
    for text, picked in ((":Arm", ("Rig", "Arm")), ("Rig:Left:Arm", ("Rig", "Left:Arm")),
                         (":Left:Arm", ("Rig", "Left:Arm")), ("Rig [v2]:Leg", ("Rig [v2]", "Leg")),
                         ("Hand", ("Rig [v2]", "Hand"))):
        ((obj, chain),) = select_chains(objects, [ChainSelector.parse(text)])
        assert (obj.name, chain.name) == picked, text
    for text, message in (("Rgi:Arm", "no IK chain 'Rgi:Arm'"), ("Rig:Spine", "armature 'Rig' has no IK chain 'Spine'"),
                          (":Spine", "no IK chain ':Spine'"), ("Rig [v2]:Arm", "armature 'Rig [v2]' has no IK chain 'Arm'")):
        with pytest.raises(RigError, match=f"^{message}$".replace("[", r"\[").replace("]", r"\]")):
            select_chains(objects, [ChainSelector.parse(text)])
    with pytest.raises(ik_batch.UsageError, match="empty chain name"):
        ChainSelector.parse("Rig:")


def test_a_missing_library_is_named_not_reported_as_a_missing_bone(library_files, tmp_path):
    """The rig's library moved away: Blender loads its linked data as empty placeholders, and the batch
    said "Tip bone 'forearm' not found" (an override) or "no enabled IK chain" (a linked rig). Now the
    file is refused before any work naming the missing library, its path as stored and resolved."""
    library = library_files["rig"]
    library.rename(tmp_path / "moved.blend")
    for name in ("override", "linked"):
        out = tmp_path / f"{name}_baked.blend"
        process = run_batch(library_files[name], "--output", out, check_rc=2)
        assert problems(process) == (
            f"ik_batch: {library_files[name]}: the library //rig.blend is missing ({library}): what the file links "
            "from it could not be loaded; put the file back or relocate the library (Outliner in Blender File view: "
            "right-click it > Relocate)")
        assert not baked_a_chain(process) and not out.exists()


def test_ik_batch_alone_says_what_it_needs_without_a_traceback(tmp_path):
    """``ik_batch.py`` copied alone (what a job upload of one FILE carries) ended in an ImportError
    traceback. Now it exits 1 (retrying cannot help) with one line naming what is missing."""
    lone = tmp_path / "ik_batch.py"
    shutil.copy(ik_batch.__file__, lone)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    process = subprocess.run([sys.executable, str(lone), "--help"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in process.stderr
    assert process.stderr.count("\n") == 1 and "lacks this project's scripts/ modules" in process.stderr
