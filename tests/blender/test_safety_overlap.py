"""Issue 21: two enabled chains on the same bones are refused by bake (the operator and
``bake.BakeJob``, which ``scripts/ik_batch.py`` uses), solve and live mode, naming both chains —
before, both were reported baked and the first chain's keys were overwritten."""

from __future__ import annotations

import bpy
import pytest
from conftest import add_empty, build_arm, pose_snapshot

from ik_solvers.blender.bake import BakeJob, BakeOptions
from ik_solvers.blender.errors import IKSolversError

OVERLAP = (r"Chain 'Arm': chain 'Arm Copy' moves bone '(upper_arm|forearm)' too, so one chain would overwrite the "
           r"other's pose and keys; disable one of them")


def two_chains_on_one_arm():
    obj = build_arm()
    chains = []
    for name, location in (("Arm", (0.4, 0.1, 1.3)), ("Arm Copy", (0.3, -0.2, 1.2))):
        chain = obj.ik_solvers.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.method = name, "forearm", 2, "SDLS"
        chain.target = add_empty(f"{name} Target", location)
        chains.append(chain)
    bpy.context.view_layer.objects.active = obj
    return obj, chains


@pytest.mark.parametrize("which", [{"all_chains": True}, {"chain": "Arm"}, {}])
def test_a_bake_of_a_chain_sharing_bones_with_another_enabled_chain_is_refused(addon, which):
    obj, _ = two_chains_on_one_arm()
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match=OVERLAP):
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=5, **which)
    assert obj.animation_data is None and pose_snapshot(obj) == before


def test_the_batchs_bake_job_refuses_overlapping_chains(addon):
    obj, _ = two_chains_on_one_arm()
    with pytest.raises(IKSolversError, match=OVERLAP):
        BakeJob(bpy.context, obj, BakeOptions(1, 5, 1, ("Arm",)))


@pytest.mark.parametrize("all_chains", [True, False])
def test_a_solve_of_overlapping_chains_is_refused(addon, all_chains):
    obj, _ = two_chains_on_one_arm()
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match=OVERLAP):
        bpy.ops.ik_solvers.solve(all_chains=all_chains)
    assert pose_snapshot(obj) == before


def test_a_disabled_overlapping_chain_does_not_stop_the_other(addon):
    obj, (_, copy) = two_chains_on_one_arm()
    copy.enabled = False
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=5) == {"FINISHED"}
    assert bpy.ops.ik_solvers.solve(all_chains=True) == {"FINISHED"}


def test_a_second_live_chain_on_the_same_bones_is_refused_naming_both(addon):
    obj, (arm, copy) = two_chains_on_one_arm()
    copy.enabled = False  # live mode refuses overlapping live chains, enabled or not
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and arm.use_live
    obj.ik_solvers.active_chain_index = 1
    with pytest.raises(RuntimeError, match=r"Chain 'Arm Copy': chain 'Arm' moves bone '(upper_arm|forearm)' too"):
        bpy.ops.ik_solvers.live_toggle()
    assert arm.use_live and not copy.use_live
    bpy.context.scene.frame_set(2)
    assert arm.use_live and arm.last_status != "ERROR"
