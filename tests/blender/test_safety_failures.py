"""Issue 10, "failures never escape as tracebacks": any exception inside a solve, a bake (headless
and modal), a capture, a chain set-up, the live toggle or live mode's handlers becomes one sentence,
with the pose / action as it was; live mode turns itself off for a chain that fails."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, pose_snapshot
from test_bake import _ModalStandIn, _tick, action_state

from ik_solvers.blender import bake, live, live_quick, operators, solving, verify


def arm_chain(obj, target, name="Arm"):
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = name, "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    return chain


def keyed_arm():
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    for frame, x in ((1, 0.4), (30, 0.3)):
        target.location.x = x
        target.keyframe_insert("location", frame=frame)
    obj.pose.bones["upper_arm"].rotation_quaternion = (0.9, 0.1, 0.2, 0.0)
    obj.pose.bones["upper_arm"].keyframe_insert("rotation_quaternion", frame=10)
    return obj, target, arm_chain(obj, target)


def failing(error):
    def solve(*_args, **_kwargs):
        raise error
    return solve


def assert_one_sentence(excinfo, *parts):
    text = str(excinfo.value)
    assert "Traceback" not in text and all(part in text for part in parts), text


@pytest.mark.parametrize("error", [np.linalg.LinAlgError("SVD did not converge"), RuntimeError("boom")],
                         ids=["LinAlgError", "RuntimeError"])
def test_a_solver_failure_is_one_sentence_and_the_pose_is_unchanged(addon, monkeypatch, error):
    obj = build_arm()
    arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    before = pose_snapshot(obj)
    monkeypatch.setattr(solving, "solve", failing(error))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.solve()
    assert_one_sentence(excinfo, "Chain 'Arm': the SDLS solver failed", type(error).__name__)
    assert pose_snapshot(obj) == before


def test_a_solver_failure_cancels_the_bake_with_the_action_unchanged(addon, monkeypatch):
    obj, _, _ = keyed_arm()
    before = action_state(obj)
    monkeypatch.setattr(solving, "solve", failing(np.linalg.LinAlgError("SVD did not converge")))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30)
    assert_one_sentence(excinfo, "LinAlgError")
    assert action_state(obj) == before


def test_an_unexpected_error_after_keying_puts_the_action_back(addon, monkeypatch):
    obj, _, _ = keyed_arm()
    before = action_state(obj)
    monkeypatch.setattr(verify.BakedCheck, "_check", failing(ZeroDivisionError("oops")))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=30)
    assert_one_sentence(excinfo, "Unexpected ZeroDivisionError (oops); nothing was changed.")
    assert action_state(obj) == before


def test_the_modal_bake_turns_a_failure_into_one_sentence(addon, monkeypatch):
    obj, _, _ = keyed_arm()
    before = action_state(obj)
    operator = _ModalStandIn(bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 30, 1, ("Arm",))))
    monkeypatch.setattr(solving, "solve", failing(RuntimeError("boom")))
    while (result := _tick(operator, "TIMER")) == {"RUNNING_MODAL"}:
        pass
    assert result == {"CANCELLED"}
    (kind, message), = operator.reports
    assert kind == {"ERROR"} and "the SDLS solver failed (RuntimeError: boom)" in message
    assert action_state(obj) == before


def test_capture_and_chain_add_report_unexpected_errors(addon, monkeypatch):
    obj = build_arm()
    chain = arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    monkeypatch.setattr(operators, "capture_preferred_pose", failing(KeyError("bone")))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.capture_preferred_pose()
    assert_one_sentence(excinfo, "Unexpected KeyError")
    assert not chain.has_preferred_pose
    monkeypatch.setattr(operators, "set_up_new_chain", failing(ValueError("bad")))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.chain_add()
    assert_one_sentence(excinfo, "Unexpected ValueError (bad)")
    assert [c.name for c in obj.ik_solvers.chains] == ["Arm"]


def test_live_mode_turns_itself_off_for_a_failing_chain_with_the_reason(addon, monkeypatch, capfd):
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    chain = arm_chain(obj, target)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and chain.use_live
    before = pose_snapshot(obj)
    for module in (live, live_quick):  # the full update's solve and the quick path's (a target move)
        monkeypatch.setattr(module, "run_solve", failing(np.linalg.LinAlgError("SVD did not converge")))
    target.location.x += 0.05
    bpy.context.view_layer.update()  # nothing may escape into Blender's handler loop
    assert not chain.use_live  # the move's solve failed: off at once
    for frame in (2, 3, 4):
        bpy.context.scene.frame_set(frame)
    assert not chain.use_live
    assert chain.last_status == "ERROR"
    assert "LinAlgError" in chain.last_message and chain.last_message.endswith("Live IK turned off.")
    assert pose_snapshot(obj) == before
    assert "Traceback" not in capfd.readouterr().err


def test_the_live_toggle_refuses_a_chain_whose_first_solve_fails(addon, monkeypatch):
    obj = build_arm()
    chain = arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    monkeypatch.setattr(live, "run_solve", failing(RuntimeError("boom")))
    with pytest.raises(RuntimeError) as excinfo:
        bpy.ops.ik_solvers.live_toggle()
    assert_one_sentence(excinfo, "boom", "Live IK turned off.")
    assert not chain.use_live


def test_an_error_outside_any_chain_turns_live_off_once_without_a_traceback(addon, monkeypatch, capfd):
    obj = build_arm()
    chain = arm_chain(obj, add_empty(location=(0.4, 0.1, 1.3)))
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    real = live.live_chains
    calls = []

    def broken(scene):
        calls.append(scene)
        if len(calls) == 1:
            raise MemoryError("no room")
        return real(scene)

    monkeypatch.setattr(live, "live_chains", broken)
    live.on_frame_change(bpy.context.scene)
    assert not chain.use_live and "MemoryError" in chain.last_message
    assert "Traceback" not in capfd.readouterr().err


def test_esc_while_the_keys_are_checked_puts_the_action_and_frame_back(addon):
    obj, _, _ = keyed_arm()
    bpy.context.scene.frame_set(7)
    before = action_state(obj)
    operator = _ModalStandIn(bake.BakeJob(bpy.context, obj, bake.BakeOptions(1, 30, 1, ("Arm",))))
    while operator._job.chains[0]._check is None or operator._job.chains[0]._check.done < 5:
        assert _tick(operator, "TIMER") == {"RUNNING_MODAL"}
    assert action_state(obj) != before  # keyed, being checked
    assert _tick(operator, "ESC") == {"CANCELLED"}
    assert action_state(obj) == before and bpy.context.scene.frame_current == 7
