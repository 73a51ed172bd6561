"""Issue 21: a hinge whose Limit Rotation excludes its rest pose. Every frame used to start from the
rest pose, so where the target sat at the rest pose's tip the solve returned it "converged",
outside the limits, and only the check after the bake saw Blender's constraint move it. Every
solve now starts inside the limits and stays there; the report says what was reached."""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, evaluated_tip

LOW, HIGH = 0.3, 1.2


def limited_hinge_arm():
    """The arm with the forearm a hinge about Z limited to [0.3, 1.2] rad, its target keyed from the
    rest pose's tip (frame 1) inward; the chain added as a user would (preferred pose captured at rest)."""
    obj = build_arm()
    rest_tip = evaluated_tip(obj, "forearm")
    forearm = obj.pose.bones["forearm"]
    forearm.lock_ik_x = forearm.lock_ik_y = True
    limit = forearm.constraints.new("LIMIT_ROTATION")
    limit.owner_space, limit.use_limit_z, limit.min_z, limit.max_z = "LOCAL", True, LOW, HIGH
    target = add_empty(location=tuple(rest_tip))
    for frame, dx in ((1, 0.0), (10, -0.1)):
        target.location.x = rest_tip[0] + dx
        target.keyframe_insert("location", frame=frame)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target = "Arm", "forearm", 2, target
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    bpy.context.scene.frame_set(1)
    return obj, chain


def hinge_angle(obj) -> float:
    return obj.pose.bones["forearm"].rotation_quaternion.to_euler("XYZ").z


@pytest.mark.parametrize("method", ["SDLS", "DLS", "CCD", "ANALYTIC"])
def test_a_bake_of_a_hinge_whose_limits_exclude_its_rest_stays_inside_them(addon, method):
    obj, chain = limited_hinge_arm()
    chain.method = method
    assert bpy.ops.ik_solvers.bake(frame_start=1, frame_end=10) == {"FINISHED"}
    report = json.loads(chain.last_bake_report)
    assert report["evaluated_mismatch_frames"] == []
    assert report["status_counts"]["CONVERGED"] < 10  # the rest pose's tip is out of the limits' reach
    for frame in range(1, 11):
        bpy.context.scene.frame_set(frame)
        assert LOW - 1e-6 <= hinge_angle(obj) <= HIGH + 1e-6, frame


def test_a_solve_at_the_rest_pose_tip_is_inside_the_limits_and_not_converged(addon):
    obj, chain = limited_hinge_arm()
    chain.method = "SDLS"
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert LOW - 1e-6 <= hinge_angle(obj) <= HIGH + 1e-6
    assert chain.last_status != "CONVERGED"
    tip = evaluated_tip(obj, "forearm")
    assert np.linalg.norm(tip - np.array(chain.target.location)) == pytest.approx(chain.last_error, abs=1e-5)
