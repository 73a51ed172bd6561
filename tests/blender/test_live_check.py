"""Issue 22, live statuses are honest: live mode checks Blender's evaluation of what it wrote, as the Solve
operator does, and says so in the chain's message (the panel's status) where a constraint on a chain
bone puts the tip elsewhere; a chain Blender shows where the solve put it gets no warning.

Headless Blender runs no timers: where the add-on arms ``live_check.check_written`` (Blender's event
loop runs it after the update that wrote), the tests call it as the loop would.
"""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, evaluated_tip
from test_body_metarig import CHAINS, REACHED, _target, _tip_error, body  # noqa: F401  # the fixture
from test_panel import draw_all

from ik_solvers.blender import live, live_check, live_state
from ik_solvers.blender.verify import overridden_sentence

pytestmark = pytest.mark.usefixtures("rigify_enabled")  # Rigify off after this module (conftest)

SENTENCE = "'{}': Blender's evaluated tip differs from the solve by "


def live_arm(method: str):
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, method
    bpy.context.view_layer.objects.active = obj
    if method == "HI":
        assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    return obj, target, chain


def move(target, location) -> None:
    target.location = location
    bpy.context.view_layer.update()  # depsgraph_update_post → live solve → pose written and evaluated


def said_offset(chain) -> float:
    """The offset the chain's message says (the Solve operator's sentence)."""
    message = chain.last_message
    assert message.startswith(SENTENCE.format(chain.name)), message
    offset = float(message.split(" by ")[1].split(";")[0])
    assert message == overridden_sentence(chain.name, offset)
    return offset


def gap(obj, target) -> float:
    return float(np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.matrix_world.translation)))


def turner(rotation=(0.0, 0.0, 0.7)):
    obj = add_empty("Turner")
    obj.rotation_euler = rotation
    bpy.context.view_layer.update()
    return obj


@pytest.mark.parametrize("method", ["DLS", "HI"])  # the quick path's sampled solve and its one-target HI solve
def test_no_warning_where_blender_shows_the_solve(addon, method):
    obj, target, chain = live_arm(method)
    for location in ((0.35, 0.2, 1.25), (0.25, 0.3, 1.2), (0.45, -0.1, 1.35)):
        move(target, location)
        assert live.state.chains[(obj.session_uid, "Arm")].quick is not None  # the quick path served the move
        live_check.check_written()
        assert chain.last_message == "" and chain.last_status == "CONVERGED"
        assert gap(obj, target) <= 1e-5
    assert live.state.chains[(obj.session_uid, "Arm")].checked


@pytest.mark.parametrize("method", ["DLS", "HI"])
def test_a_copy_rotation_on_the_forearm_of_a_live_chain_is_said_with_its_offset(addon, method):
    """Added while live: the update that sees it has nothing to solve and checks Blender's evaluation at
    once; a target move keeps the warning until the timer checks the new write; gone with the constraint
    (after the timer's check of the solve the removal's update made)."""
    obj, target, chain = live_arm(method)
    assert chain.last_message == ""
    constraint = obj.pose.bones["forearm"].constraints.new("COPY_ROTATION")
    constraint.target = turner()
    bpy.context.view_layer.update()
    assert chain.last_status == "CONVERGED"  # the solve reached; Blender shows the tip elsewhere
    assert gap(obj, target) > 1e-3
    assert said_offset(chain) == pytest.approx(gap(obj, target), rel=1e-2)
    labels = draw_all(bpy.context).labels  # the panel's status: the solve's, then the warning
    assert ("Status: Converged", "NONE") in labels and (chain.last_message, "ERROR") in labels

    move(target, (0.3, 0.25, 1.2))
    assert chain.last_message.startswith(SENTENCE.format("Arm"))  # the last verdict, until this write is checked
    live_check.check_written()
    assert said_offset(chain) == pytest.approx(gap(obj, target), rel=1e-2)

    obj.pose.bones["forearm"].constraints.remove(constraint)
    bpy.context.view_layer.update()  # a full update: the target moved since its last solve, it solves again
    live_check.check_written()
    assert chain.last_message == "" and gap(obj, target) <= 1e-5


def test_a_pose_that_is_no_longer_ours_is_not_checked(addon):
    """While live mode holds still (a bake stepping through frames: ``live_state.paused``) a chain bone is
    posed otherwise and evaluated; the timer's check then finds the bones not as written: no warning,
    though Blender's tip is off the target (a check of that pose would warn)."""
    obj, target, chain = live_arm("DLS")
    move(target, (0.3, 0.25, 1.2))
    with live_state.paused():
        obj.pose.bones["forearm"].rotation_quaternion = (0.9, 0.0, 0.0, 0.436)
        bpy.context.view_layer.update()
    live_check.check_written()
    assert gap(obj, target) > 1e-3 and chain.last_message == ""
    assert live.state.chains[(obj.session_uid, "Arm")].written is None  # forgotten: its pose is gone


def test_a_frame_change_that_keys_the_bones_elsewhere_is_no_false_alarm(addon):
    obj, target, chain = live_arm("DLS")
    obj.pose.bones["upper_arm"].keyframe_insert("rotation_quaternion", frame=1)  # resets the bone every frame
    for frame in (5, 9, 2):
        bpy.context.scene.frame_set(frame)
        live_check.check_written()
        assert chain.last_message == "" and gap(obj, target) <= 1e-5


def test_a_live_body_with_a_copy_rotation_on_the_left_shin_warns_for_leg_l_alone(body):  # noqa: F811  # the fixture
    """As the Solve operator's test (test_body_metarig): the warning names leg.L alone, with how much
    farther Blender's tip is from its goal than the solve said."""
    body.ik_solvers.active_chain_index = list(CHAINS).index("arm.L")
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    _target(body, "chest").location.z -= 0.1
    bpy.context.view_layer.update()
    live_check.check_written()
    assert all(chain.last_message == "" for chain in body.ik_solvers.chains)

    shin = body.pose.bones["shin.L"].constraints.new("COPY_ROTATION")
    shin.target = turner((0.6, 0.0, 0.0))
    bpy.context.view_layer.update()  # nothing to solve: checked at once
    chains = body.ik_solvers.chains
    assert _tip_error(body, "leg.L") > 1e-3 and _tip_error(body, "leg.R") <= REACHED
    assert said_offset(chains["leg.L"]) == pytest.approx(_tip_error(body, "leg.L") - chains["leg.L"].last_error, rel=1e-2)
    assert [chain.name for chain in chains if chain.last_message] == ["leg.L"]

    _target(body, "arm.L").location.z -= 0.05
    bpy.context.view_layer.update()
    live_check.check_written()
    assert said_offset(chains["leg.L"]) == pytest.approx(_tip_error(body, "leg.L") - chains["leg.L"].last_error, rel=1e-2)
    assert [chain.name for chain in chains if chain.last_message] == ["leg.L"]


def test_on_rigifys_generated_rig_the_fk_arm_is_quiet_and_a_chain_on_its_org_bones_warns(addon):
    """The generated rig's FK arm (its root under MCH bones with constraints and drivers): Blender shows
    the live solve, no warning. A live chain on the ORG arm, which Copy Transforms pose after the FK
    controls: the solve converges, Blender shows the tip where the FK arm holds it, and the status says
    by how much."""
    import _rigify_rigs as rr
    import _rigify_runs as runs

    rr.enable_rigify()
    setup = rr.generated_fk_arm(frames=8)
    rig, fk = setup.rig, runs.add_chain(setup, "HI")
    setup.target.animation_data_clear()
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    for location in setup.paths["reach_across"][1::3]:
        move(setup.target, tuple(location))
        live_check.check_written()
        assert fk.last_status == "CONVERGED" and fk.last_message == ""
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and not fk.use_live

    org = rig.ik_solvers.chains.add()
    target = add_empty("ORG target", location=tuple(setup.paths["reach_across"][2]))
    org.name, org.tip_bone, org.chain_length, org.target, org.method = "ORG arm", "ORG-forearm.L", 2, target, "DLS"
    rig.ik_solvers.active_chain_index = len(rig.ik_solvers.chains) - 1
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and org.use_live
    move(target, tuple(setup.paths["reach_across"][4]))
    live_check.check_written()
    tip = np.array(rig.matrix_world @ rig.pose.bones["ORG-forearm.L"].tail)
    off = float(np.linalg.norm(tip - np.array(target.matrix_world.translation)))
    assert org.last_status == "CONVERGED" and off > 1e-3
    assert said_offset(org) == pytest.approx(off, rel=1e-2)
