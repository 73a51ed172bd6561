"""The solve / chain / capture operators in real Blender: every non-HI method reaches targets as
Blender evaluates the pose, locks and limits hold, failures leave the scene untouched, undo works."""

from __future__ import annotations

import math

import bpy
import mathutils
import numpy as np
import pytest
from conftest import (
    RIG_BUILDERS,
    add_empty,
    build_arm,
    build_armature,
    build_leg,
    build_zero_length_segment,
    evaluated_head,
    evaluated_tip,
    float32_slack,
    pose_snapshot,
)

from ik_solvers.core import METHOD_FACTS

METHODS = sorted(m.value for m, facts in METHOD_FACTS.items() if not facts.needs_preferred_pose)
TWO_JOINT_RIGS = {"arm", "transformed_arm"}


METHOD_SETTINGS = {
    # CCD converges linearly, slowly where two ball joints must both turn: a larger budget.
    "CCD": {"max_iterations": 3000},
    # First-order descent: its own, looser tolerance and a large budget.
    "JACOBIAN_TRANSPOSE": {"max_iterations": 5000, "tolerance": 1e-6},
    # Fixed damping crawls at the straight (singular) pose of an out-of-reach target, steps
    # shrinking like σ/λ²: a small λ and a large budget (SDLS is the method that adapts λ).
    "DLS": {"max_iterations": 3000, "damping": 0.002},
}
"""Per-method settings the tests use; everything else: 500 iterations, tolerance 1e-7."""


def add_chain(obj, tip, length, target, method="DLS", **settings):
    chain = obj.ik_solvers.chains.add()
    chain.name = f"{tip}_chain"
    chain.tip_bone, chain.chain_length, chain.target, chain.method = tip, length, target, method
    chain.max_iterations, chain.tolerance = 500, 1e-7
    for key, value in {**METHOD_SETTINGS.get(method, {}), **settings}.items():
        setattr(chain, key, value)
    obj.ik_solvers.active_chain_index = len(obj.ik_solvers.chains) - 1
    return chain


def chain_bones(obj, tip, length):
    names = [tip]
    while len(names) < length:
        names.append(obj.data.bones[names[-1]].parent.name)
    return names[::-1]


def world_reach(obj, names):
    """Σ segment lengths (head → next head, last bone's length) in world units, from Blender's rest data."""
    heads = [np.array(obj.data.bones[n].head_local) for n in names]
    segments = [np.linalg.norm(b - a) for a, b in zip(heads, heads[1:])]
    scale = float(np.cbrt(np.linalg.det(np.array(obj.matrix_world)[:3, :3])))
    return (sum(segments) + obj.data.bones[names[-1]].length) * scale


def random_reachable_target(obj, names, rng):
    """Pose the chain randomly in Blender, take the evaluated tip, reset the pose: reachable by construction."""
    for name in names:
        obj.pose.bones[name].rotation_quaternion = mathutils.Euler(rng.uniform(-0.9, 0.9, 3)).to_quaternion()
    tip = evaluated_tip(obj, names[-1])
    for name in names:
        obj.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    return tip


def rig_cases():
    for rig_name in sorted(RIG_BUILDERS):
        for method in METHODS:
            if method == "ANALYTIC" and rig_name not in TWO_JOINT_RIGS:
                continue
            yield pytest.param(rig_name, method, id=f"{rig_name}-{method}")


@pytest.mark.parametrize(("rig_name", "method"), list(rig_cases()))
def test_reachable_targets_are_reached_in_blenders_evaluation(addon, rig_name, method):
    builder, tip, length = RIG_BUILDERS[rig_name]
    obj = builder()
    names = chain_bones(obj, tip, length)
    rng = np.random.default_rng(7)
    target = add_empty()
    chain = add_chain(obj, tip, length, target, method)
    for _ in range(3):
        target.location = random_reachable_target(obj, names, rng)
        bpy.context.view_layer.update()
        # matrix_world, not location: the target is a world-space point.
        goal = np.array(target.matrix_world.translation)
        assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
        error = np.linalg.norm(evaluated_tip(obj, tip) - goal)
        assert chain.last_status == "CONVERGED"
        # Solver tolerance 1e-7 plus Blender's float32 evaluation (≤ 6.8e-7 measured on the 10-bone
        # chain, see float32_slack) stays inside 1e-6; JT converges to its own looser tolerance.
        bound = chain.tolerance + float32_slack(obj, names) if method == "JACOBIAN_TRANSPOSE" else 1e-6
        assert error <= bound
        assert abs(chain.last_error - error) <= float32_slack(obj, names)


@pytest.mark.parametrize(("rig_name", "method"), list(rig_cases()))
def test_unreachable_targets_end_at_the_lower_bound(addon, rig_name, method):
    builder, tip, length = RIG_BUILDERS[rig_name]
    obj = builder()
    names = chain_bones(obj, tip, length)
    start = evaluated_head(obj, names[0])
    reach = world_reach(obj, names)
    direction = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    target = add_empty(location=start + 1.4 * reach * direction)
    chain = add_chain(obj, tip, length, target, method)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    lower_bound = np.linalg.norm(np.array(target.matrix_world.translation) - start) - reach
    error = np.linalg.norm(evaluated_tip(obj, tip) - np.array(target.matrix_world.translation))
    slack = float32_slack(obj, names)
    assert lower_bound - slack <= error <= lower_bound + chain.tolerance + slack
    assert chain.last_status == "UNREACHABLE"
    assert abs(chain.last_lower_bound - lower_bound) <= slack


@pytest.mark.parametrize("mode", ["QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE"])
def test_every_rotation_mode_reaches_and_writes_only_its_channel(addon, mode):
    obj = build_arm()
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = mode
    target = add_empty(location=(0.25, 0.3, 1.2))
    chain = add_chain(obj, "forearm", 2, target, "DLS")
    before = pose_snapshot(obj)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    error = np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.location))
    assert error <= chain.tolerance + float32_slack(obj, ["upper_arm", "forearm"])
    channel = {"QUATERNION": 0, "AXIS_ANGLE": 2}.get(mode, 1)
    after = pose_snapshot(obj)
    for name in ("upper_arm", "forearm"):
        changed = [i for i in range(3) if after[name][i] != before[name][i]]
        assert changed == [channel]


@pytest.mark.parametrize("method", ["CCD", "FABRIK", "DLS", "PSEUDO_INVERSE", "SDLS"])
def test_ik_locks_and_limits_hold_in_blenders_evaluated_pose(addon, method):
    leg = build_leg()
    thigh, shin = leg.pose.bones["thigh"], leg.pose.bones["shin"]
    thigh.lock_ik_y = True
    thigh.use_ik_limit_x, thigh.ik_min_x, thigh.ik_max_x = True, -0.4, 0.9
    shin.lock_ik_y = shin.lock_ik_z = True
    shin.use_ik_limit_x, shin.ik_min_x, shin.ik_max_x = True, 0.0, 2.2
    target = add_empty()
    add_chain(leg, "foot", 3, target, method, max_iterations=200)  # locks matter here, not convergence
    rng = np.random.default_rng(1)
    hip_head = evaluated_head(leg, "thigh")
    rest = {n: np.array(leg.data.bones[n].matrix_local) for n in ("hip", "thigh", "shin")}
    knee_angles, hip_angles = [], []
    for _ in range(6):
        target.location = hip_head + rng.uniform([-0.4, -0.4, -0.9], [0.4, 0.4, -0.3])
        bpy.context.view_layer.update()
        assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
        bpy.context.view_layer.update()
        pose = {n: np.array(leg.pose.bones[n].matrix) for n in ("hip", "thigh", "shin")}
        # Each bone's rotation relative to its parent's evaluated frame and its own rest offset.
        knee = np.linalg.inv(pose["thigh"] @ np.linalg.inv(rest["thigh"]) @ rest["shin"]) @ pose["shin"]
        hip = np.linalg.inv(pose["hip"] @ np.linalg.inv(rest["hip"]) @ rest["thigh"]) @ pose["thigh"]
        np.testing.assert_allclose(knee[:3, 0], [1.0, 0.0, 0.0], atol=1e-5)  # a pure hinge about X
        knee_angle = math.atan2(knee[2, 1], knee[1, 1])
        # Blender 'YZX' is Rx @ Rz @ Ry: no twist means its Y angle is zero.
        hip_euler = mathutils.Matrix(hip[:3, :3].tolist()).to_euler("YZX")
        assert abs(hip_euler.y) < 1e-5
        knee_angles.append(knee_angle)
        hip_angles.append(hip_euler.x)
    assert min(knee_angles) >= -1e-5 and max(knee_angles) <= 2.2 + 1e-5
    assert min(hip_angles) >= -0.4 - 1e-5 and max(hip_angles) <= 0.9 + 1e-5


def test_solve_all_poses_chains_in_order(addon):
    # Chain A (spine) carries chain B's root; solving all in list order reaches both targets.
    obj = build_armature([
        {"name": "spine1", "head": (0, 0, 1.0), "tail": (0, 0, 1.2)},
        {"name": "spine2", "head": (0, 0, 1.2), "tail": (0, 0, 1.4), "parent": "spine1"},
        {"name": "upper", "head": (0, 0, 1.4), "tail": (0.3, 0, 1.4), "parent": "spine2", "roll": 0.3},
        {"name": "lower", "head": (0.3, 0, 1.4), "tail": (0.6, 0, 1.4), "parent": "upper"},
    ])
    spine_target = add_empty("SpineTarget", location=(0.1, 0.05, 1.37))
    arm_target = add_empty("ArmTarget", location=(0.35, 0.3, 1.2))
    add_chain(obj, "spine2", 2, spine_target, "DLS")
    add_chain(obj, "lower", 2, arm_target, "ANALYTIC")
    skipped = add_chain(obj, "lower", 1, arm_target, "CCD", enabled=False)
    assert bpy.ops.ik_solvers.solve(all_chains=True) == {"FINISHED"}
    assert np.linalg.norm(evaluated_tip(obj, "spine2") - np.array(spine_target.location)) < 1e-6
    assert np.linalg.norm(evaluated_tip(obj, "lower") - np.array(arm_target.location)) < 1e-6
    assert skipped.last_status == ""


def _failure_cases():
    def nan_target(obj, chain):
        chain.target.location = (float("nan"), 0.0, 0.0)

    def inf_target(obj, chain):
        chain.target.location = (0.0, float("inf"), 0.0)  # Blender stores it as FLT_MAX

    def missing_target(obj, chain):
        chain.target = None

    def too_long(obj, chain):
        chain.chain_length = 3

    def deleted_tip(obj, chain):
        bpy.ops.object.mode_set(mode="EDIT")
        obj.data.edit_bones.remove(obj.data.edit_bones["forearm"])
        bpy.ops.object.mode_set(mode="OBJECT")

    def analytic_on_one_bone(obj, chain):
        chain.method, chain.chain_length, chain.tip_bone = "ANALYTIC", 1, "upper_arm"

    return [
        pytest.param(nan_target, "target location is not finite", id="nan-target"),
        pytest.param(inf_target, "target location is not finite", id="inf-target"),
        pytest.param(missing_target, "has no target", id="missing-target"),
        pytest.param(too_long, "too long", id="chain-too-long"),
        pytest.param(deleted_tip, "Tip bone 'forearm' not found", id="deleted-tip"),
        pytest.param(analytic_on_one_bone, "exactly 2 moving bones", id="analytic-one-bone"),
    ]


@pytest.mark.parametrize(("break_it", "message"), _failure_cases())
def test_failures_report_and_leave_the_pose_unchanged(addon, break_it, message):
    obj = build_arm()
    obj.pose.bones["upper_arm"].rotation_quaternion = (0.9, 0.2, -0.1, 0.3)
    chain = add_chain(obj, "forearm", 2, add_empty(location=(0.3, 0.2, 1.3)), "DLS")
    chain.last_status = "CONVERGED"
    break_it(obj, chain)
    bpy.context.view_layer.update()
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.ik_solvers.solve()
    assert pose_snapshot(obj) == before
    assert chain.last_status == "CONVERGED"


def test_errors_name_the_chain_once_and_keep_the_cores_field(addon):
    """Issue 9: one error type (IKSolversError) whose message names the chain once ("Chain 'Arm':
    Chain 'Arm': …" before) and keeps the core's IKInputError field."""
    from ik_solvers.blender.chains import capture_preferred_pose
    from ik_solvers.blender.errors import IKSolversError
    from ik_solvers.blender.sampling import sample_inputs
    from ik_solvers.blender.solving import prepare_solve, run_solve
    from ik_solvers.blender.spec import chain_spec

    obj = build_arm()
    chain = add_chain(obj, "forearm", 2, add_empty(location=(0.3, 0.2, 1.3)), "DLS")
    chain.tip_bone = "gone"
    with pytest.raises(IKSolversError) as refused:
        chain_spec(obj, chain)
    assert str(refused.value).count("forearm_chain") == 1 and "Tip bone 'gone' not found" in str(refused.value)
    chain.tip_bone, chain.method = "forearm", "HI"
    capture_preferred_pose(obj, chain, bpy.context.scene)
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = True  # HI refuses a hinge start
    spec = chain_spec(obj, chain)
    with pytest.raises(IKSolversError) as refused:
        run_solve(prepare_solve(spec, sample_inputs(obj, spec)))
    assert refused.value.field is not None and refused.value.chain == "forearm_chain"
    assert str(refused.value).count("forearm_chain") == 1 and "ball start joint" in str(refused.value)


def test_zero_length_segment_is_reported(addon):
    obj = build_zero_length_segment()
    add_chain(obj, "b", 2, add_empty(location=(0.2, 0.2, 0.0)), "DLS")
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match="zero-length or too short segment"):
        bpy.ops.ik_solvers.solve()
    assert pose_snapshot(obj) == before


def test_a_failing_chain_in_solve_all_restores_the_ones_solved_before(addon):
    obj = build_leg()
    add_chain(obj, "shin", 2, add_empty("T1", location=(0.2, -0.2, 0.6)), "DLS")
    add_chain(obj, "foot", 1, add_empty("T2", location=(float("nan"), 0, 0)), "DLS")
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match="not finite"):
        bpy.ops.ik_solvers.solve(all_chains=True)
    assert pose_snapshot(obj) == before


def test_undo_after_solve_restores_the_pose(addon):
    # Background Blender starts without an undo stack: undo_push initialises it. The operator must
    # be called with undo=True (as the UI does) for Blender to push its step after execute().
    obj = build_arm()
    chain = add_chain(obj, "forearm", 2, add_empty(location=(0.3, 0.2, 1.3)), "DLS")
    bpy.ops.ed.undo_push(message="initial")
    obj.pose.bones["upper_arm"].rotation_quaternion = (0.9, 0.2, -0.1, 0.3)
    bpy.ops.ed.undo_push(message="posed by hand")
    before = pose_snapshot(obj)
    assert bpy.ops.ik_solvers.solve("EXEC_DEFAULT", True) == {"FINISHED"}
    solved = pose_snapshot(bpy.data.objects["Rig"])
    assert solved != before
    bpy.ops.ed.undo()
    obj = bpy.data.objects["Rig"]  # undo reloads data: old Python references are stale
    assert pose_snapshot(obj) == before  # exactly the hand pose, not the initial rest pose
    assert obj.ik_solvers.chains[0].last_status == ""
    bpy.ops.ed.redo()
    assert pose_snapshot(bpy.data.objects["Rig"]) == solved
    del chain


def test_chain_add_remove_and_capture(addon):
    obj = build_leg()
    target = add_empty()
    target.select_set(True)
    obj.data.bones.active = obj.data.bones["foot"]
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}
    assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}
    chains = obj.ik_solvers.chains
    assert [c.name for c in chains] == ["Chain", "Chain.001"]
    first = chains[0]
    assert (first.tip_bone, first.chain_length, first.target) == ("foot", 2, target)
    assert first.has_preferred_pose and [p.bone_name for p in first.preferred_pose] == ["shin", "foot"]

    shin = obj.pose.bones["shin"]
    shin.rotation_mode = "XZY"
    shin.rotation_euler = (0.5, -0.2, 0.1)
    obj.ik_solvers.active_chain_index = 0
    bpy.context.scene.frame_set(7)
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    stored = mathutils.Quaternion(first.preferred_pose[0].rotation)
    assert stored.rotation_difference(mathutils.Euler((0.5, -0.2, 0.1), "XZY").to_quaternion()).angle < 1e-6
    assert first.preferred_frame == 7

    obj.ik_solvers.active_chain_index = 1
    assert bpy.ops.ik_solvers.chain_remove() == {"FINISHED"}
    assert [c.name for c in chains] == ["Chain"] and obj.ik_solvers.active_chain_index == 0


def _plane_normal_of(obj, names) -> np.ndarray:
    """Unit normal of the plane through Blender's evaluated shoulder, elbow and tip."""
    shoulder, elbow = (evaluated_head(obj, name) for name in names)
    normal = np.cross(elbow - shoulder, evaluated_tip(obj, names[-1]) - elbow)
    return normal / np.linalg.norm(normal)


def _add_chain_by_operator(obj, tip, target=None):
    if target is not None:
        target.select_set(True)
    obj.data.bones.active = obj.data.bones[tip]
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}
    return obj.ik_solvers.chains[-1]


def test_a_new_two_bone_chain_is_hi_and_keeps_its_bend_plane(addon):
    """Issue 11 / SPEC §5: a new two-bone chain defaults to HI with the preferred pose captured at
    creation and a swivel that keeps the solver plane where it is in the viewport."""
    obj = build_arm()
    obj.pose.bones["upper_arm"].rotation_quaternion = mathutils.Euler((0.3, -0.2, 0.5)).to_quaternion()
    obj.pose.bones["forearm"].rotation_quaternion = mathutils.Euler((0.0, 0.4, 0.9)).to_quaternion()
    bpy.context.view_layer.update()
    names = ("upper_arm", "forearm")
    before = _plane_normal_of(obj, names)
    shoulder = evaluated_head(obj, "upper_arm")
    target = add_empty(location=shoulder + np.array([0.25, 0.2, -0.2]))
    chain = _add_chain_by_operator(obj, "forearm", target)
    assert chain.method == "HI" and chain.has_preferred_pose
    assert [p.bone_name for p in chain.preferred_pose] == list(names)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"} and chain.last_status == "CONVERGED"
    axis = (np.array(target.location) - shoulder) / np.linalg.norm(np.array(target.location) - shoulder)
    expected = before - (before @ axis) * axis
    assert _plane_normal_of(obj, names) @ (expected / np.linalg.norm(expected)) == pytest.approx(1.0, abs=1e-6)


def test_a_new_chain_at_its_tip_does_not_move(addon):
    obj = build_arm()
    obj.pose.bones["forearm"].rotation_quaternion = mathutils.Euler((0.2, 0.1, 0.7)).to_quaternion()
    bpy.context.view_layer.update()
    target = add_empty(location=evaluated_tip(obj, "forearm"))
    heads = [evaluated_head(obj, name) for name in ("upper_arm", "forearm")]
    _add_chain_by_operator(obj, "forearm", target)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    np.testing.assert_allclose([evaluated_head(obj, name) for name in ("upper_arm", "forearm")], heads, atol=1e-6)
    np.testing.assert_allclose(evaluated_tip(obj, "forearm"), np.array(target.location), atol=1e-6)


def test_new_chains_hi_cannot_drive_default_to_sdls_without_a_pull(addon):
    """SDLS with no reference pull: on the Rigify legs the pull bent knees backward more often (issue 11)."""
    obj = build_arm()
    one_bone = _add_chain_by_operator(obj, "upper_arm")  # a chain of one bone
    assert one_bone.chain_length == 1 and one_bone.method == "SDLS" and one_bone.reference_weight == 0.0
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = True
    hinge_start = _add_chain_by_operator(obj, "forearm")  # HI needs a ball start joint
    assert hinge_start.chain_length == 2 and hinge_start.method == "SDLS" and hinge_start.reference_weight == 0.0


def test_capture_of_a_broken_chain_reports_and_keeps_the_old_pose(addon):
    obj = build_arm()
    chain = add_chain(obj, "forearm", 2, add_empty(), "HI")
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    chain.tip_bone = "nope"
    with pytest.raises(RuntimeError, match="Tip bone 'nope' not found"):
        bpy.ops.ik_solvers.capture_preferred_pose()
    assert [p.bone_name for p in chain.preferred_pose] == ["upper_arm", "forearm"]


def test_polls_refuse_non_armatures_and_edit_mode(addon):
    assert not bpy.ops.ik_solvers.solve.poll()  # nothing active
    empty = add_empty()
    bpy.context.view_layer.objects.active = empty
    assert not bpy.ops.ik_solvers.chain_add.poll()
    obj = build_arm()
    assert bpy.ops.ik_solvers.chain_add.poll() and not bpy.ops.ik_solvers.solve.poll()  # no chain yet
    add_chain(obj, "forearm", 2, empty)
    assert bpy.ops.ik_solvers.solve.poll()
    bpy.ops.object.mode_set(mode="EDIT")
    assert not bpy.ops.ik_solvers.solve.poll()
    bpy.ops.object.mode_set(mode="OBJECT")


def test_operators_are_searchable_and_undoable(addon):
    for idname in ("chain_add", "chain_remove", "solve", "capture_preferred_pose"):
        rna = getattr(bpy.ops.ik_solvers, idname).get_rna_type()
        assert rna.name and rna.description  # F3 search shows the label, the tooltip the docstring
        cls = bpy.types.Operator.bl_rna_get_subclass_py(f"IK_SOLVERS_OT_{idname}")
        assert {"REGISTER", "UNDO"} <= set(cls.bl_options)


# --------------------------------------------------------------------------- HI solver
def _hi_arm(**armature):
    """An arm with an HI chain whose preferred pose is the (bent) rest pose; returns obj, chain, target."""
    obj = build_arm(**armature)
    target = add_empty()
    chain = add_chain(obj, "forearm", 2, target, "HI")
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    return obj, chain, target


def _plane_normal(obj):
    """Unit normal of the plane through Blender's evaluated shoulder, elbow and wrist."""
    p0, p1 = evaluated_head(obj, "upper_arm"), evaluated_head(obj, "forearm")
    p2 = evaluated_tip(obj, "forearm")
    n = np.cross(p1 - p0, p2 - p1)
    return n / np.linalg.norm(n)


def test_hi_reaches_with_the_pole_distance_of_the_preferred_plane(addon):
    obj, chain, target = _hi_arm()
    n0 = _plane_normal(obj)
    shoulder = evaluated_head(obj, "upper_arm")
    for offset in ([0.2, 0.3, 0.1], [0.1, -0.2, 0.35], [0.45, 0.05, 0.0]):
        target.location = shoulder + np.array(offset)
        bpy.context.view_layer.update()
        assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
        assert chain.last_status == "CONVERGED"
        assert np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.location)) <= (
            chain.tolerance + float32_slack(obj, ["upper_arm", "forearm"]))
        axis = np.array(offset) / np.linalg.norm(offset)
        assert chain.last_pole_distance == pytest.approx(math.acos(abs(axis @ n0)), abs=1e-5)


def test_hi_swivel_turns_the_solver_plane_about_the_target_axis(addon):
    obj, chain, target = _hi_arm()
    shoulder = evaluated_head(obj, "upper_arm")
    n0 = _plane_normal(obj)
    # On the preferred EE axis the zero plane is the preferred plane itself (rule A).
    target.location = shoulder + 0.9 * (evaluated_tip(obj, "forearm") - shoulder)
    bpy.context.view_layer.update()
    bpy.ops.ik_solvers.solve()
    zero = _plane_normal(obj)
    np.testing.assert_allclose(zero, n0, atol=1e-5)
    chain.swivel_angle = 0.5
    bpy.ops.ik_solvers.solve()
    turned = _plane_normal(obj)
    axis = np.array(target.location) - shoulder
    axis /= np.linalg.norm(axis)
    assert math.atan2(axis @ np.cross(zero, turned), zero @ turned) == pytest.approx(0.5, abs=1e-5)


@pytest.mark.parametrize("parent_space", ["START_JOINT", "IK_TARGET"])
def test_hi_parent_space_decides_what_the_plane_rides_with(addon, parent_space):
    obj, chain, target = _hi_arm()
    chain.parent_space = parent_space
    shoulder = evaluated_head(obj, "upper_arm")
    offset = np.array([0.2, 0.3, -0.1])
    target.location = shoulder + offset
    bpy.context.view_layer.update()
    bpy.ops.ik_solvers.solve()
    before = _plane_normal(obj)
    turn = mathutils.Matrix.Rotation(0.6, 3, "Z")
    obj.rotation_euler = (0.0, 0.0, 0.6)  # rotate the start joint's parent (the armature)
    bpy.context.view_layer.update()
    moved_shoulder = evaluated_head(obj, "upper_arm")
    if parent_space == "START_JOINT":
        # Target carried along: the whole solved chain turns with the armature.
        target.location = moved_shoulder + np.array(turn @ mathutils.Vector(offset))
        expected = np.array(turn @ mathutils.Vector(before))
    else:
        # Target kept at the same place relative to the shoulder: the chain holds still in world.
        target.location = moved_shoulder + offset
        expected = before
    bpy.context.view_layer.update()
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    np.testing.assert_allclose(_plane_normal(obj), expected, atol=1e-5)


def test_hi_without_preferred_pose_or_with_a_hinge_start_is_refused(addon):
    obj = build_arm()
    chain = add_chain(obj, "forearm", 2, add_empty(location=(0.3, 0.2, 1.3)), "HI")
    before = pose_snapshot(obj)
    with pytest.raises(RuntimeError, match="no preferred pose; capture one first"):
        bpy.ops.ik_solvers.solve()
    bpy.ops.ik_solvers.capture_preferred_pose()
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = True
    with pytest.raises(RuntimeError, match="ball start joint"):
        bpy.ops.ik_solvers.solve()
    assert pose_snapshot(obj) == before
    chain.zero_plane_map = "POLE_OBJECT"
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = False
    with pytest.raises(RuntimeError, match="needs a pole target"):
        bpy.ops.ik_solvers.solve()
    assert pose_snapshot(obj) == before


def test_hi_pole_object_map_bends_the_elbow_toward_the_pole(addon):
    obj, chain, target = _hi_arm()
    shoulder = evaluated_head(obj, "upper_arm")
    target.location = shoulder + np.array([0.35, 0.2, -0.15])
    pole = add_empty("Pole", location=shoulder + np.array([0.2, -0.1, 0.5]))
    chain.zero_plane_map, chain.pole_target = "POLE_OBJECT", pole
    bpy.context.view_layer.update()
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    axis = np.array(target.location) - shoulder
    to_pole = np.array(pole.location) - shoulder
    expected = np.cross(axis, to_pole)
    assert abs(_plane_normal(obj) @ expected / np.linalg.norm(expected)) == pytest.approx(1.0, abs=1e-6)
    elbow = evaluated_head(obj, "forearm") - shoulder
    unit = axis / np.linalg.norm(axis)
    assert (elbow - (elbow @ unit) * unit) @ (to_pole - (to_pole @ unit) * unit) > 0.0
