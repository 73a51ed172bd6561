"""The panel shows only what applies (issue 20): no empty Method Settings subpanel for HI, no "Not
solved yet" beside a finished bake, and Blender IK settings the add-on does not honour (IK Stretch;
with HI, joint limits and IK stiffness) named in the panel and in the solve's and the bake's reports."""

from __future__ import annotations

import bpy
import pytest
from conftest import add_empty, build_arm
from test_panel import draw_all

from ik_solvers.blender import bake_operator, operators, panel


@pytest.fixture
def arm_chain(addon):
    obj = build_arm()
    bpy.context.view_layer.objects.active = obj
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length = "Arm", "forearm", 2
    chain.target = add_empty(location=(0.4, 0.1, 1.3))
    return obj, chain


def test_the_method_settings_subpanel_hides_for_hi_and_shows_for_the_others(arm_chain):
    _, chain = arm_chain
    for method, shown in (("HI", False), ("SDLS", True), ("CCD", True), ("ANALYTIC", True)):
        chain.method = method
        assert panel.VIEW3D_PT_ik_solvers_method.poll(bpy.context) is shown, method


def test_not_solved_yet_is_not_drawn_beside_a_finished_bake(arm_chain):
    _, chain = arm_chain
    assert "Not solved yet" in [text for text, _ in draw_all(bpy.context).labels]
    chain.bake_frames, chain.bake_converged = 20, 20
    texts = [text for text, _ in draw_all(bpy.context).labels]
    assert "Not solved yet" not in texts and "Last bake: 20 frames" in texts


class _StandIn:
    """Calls an operator's execute with our own report list (Blender's reports are not readable)."""

    def __init__(self, cls, **properties):
        self.__dict__.update(properties, reports=[], options=type("Options", (), {"is_invoke": False})())
        self._cls = cls

    def report(self, kind, message):
        self.reports.append((kind, message))

    def __getattr__(self, name):
        return getattr(self._cls, name).__get__(self)


def test_ik_stretch_is_named_in_the_panel_and_the_solve_and_bake_reports(arm_chain):
    obj, chain = arm_chain
    chain.method = "SDLS"
    assert not [text for text, icon in draw_all(bpy.context).labels if "IK Stretch" in text]
    operator = _StandIn(operators.IK_SOLVERS_OT_solve, all_chains=False)
    assert operators.IK_SOLVERS_OT_solve.execute(operator, bpy.context) == {"FINISHED"}
    assert not [message for _, message in operator.reports if "IK Stretch" in message]

    obj.pose.bones["forearm"].ik_stretch = 0.2
    labels = [(text, icon) for text, icon in draw_all(bpy.context).labels if "IK Stretch" in text]
    assert labels == [("IK Stretch on bone(s) 'forearm' is not honoured: the add-on keeps every bone's length.",
                       "ERROR")]
    operator = _StandIn(operators.IK_SOLVERS_OT_solve, all_chains=False)
    assert operators.IK_SOLVERS_OT_solve.execute(operator, bpy.context) == {"FINISHED"}
    assert ({"WARNING"}, f"Chain 'Arm': {labels[0][0]}") in operator.reports

    operator = _StandIn(bake_operator.IK_SOLVERS_OT_bake, frame_start=1, frame_end=3, step=1, all_chains=False, chain="",
                        reduce_keys=False, key_error=0.0)
    assert bake_operator.IK_SOLVERS_OT_bake.execute(operator, bpy.context) == {"FINISHED"}
    assert ({"WARNING"}, f"Chain 'Arm': {labels[0][0]}") in operator.reports


def hi_sentences(context) -> list[str]:
    return [text for text, icon in draw_all(context).labels if text.startswith("HI does not apply") and icon == "ERROR"]


def test_joint_limits_and_stiffness_hi_does_not_apply_are_named_and_the_solve_shows_why(arm_chain):
    """HI keeps only each joint's bend sense: a forearm limited to ±0.1 rad (IK limits) is bent past
    them, and the panel and the solve's report say so; SDLS, which keeps them, gets no such line."""
    import numpy as np

    obj, chain = arm_chain
    chain.method = "HI"
    assert hi_sentences(bpy.context) == []
    forearm = obj.pose.bones["forearm"]
    for axis in "xz":
        setattr(forearm, f"use_ik_limit_{axis}", True)
        setattr(forearm, f"ik_min_{axis}", -0.1)
        setattr(forearm, f"ik_max_{axis}", 0.1)
    obj.pose.bones["upper_arm"].ik_stiffness_y = 0.5
    limits = ("HI does not apply the joint limits of bone(s) 'forearm' (IK limits, Limit Rotation): it may bend "
              "them past; SDLS, CCD or FABRIK keep them.")
    stiffness = "HI does not apply the IK stiffness of bone(s) 'upper_arm'."
    assert hi_sentences(bpy.context) == [limits, stiffness]
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    operator = _StandIn(operators.IK_SOLVERS_OT_solve, all_chains=False)
    assert operators.IK_SOLVERS_OT_solve.execute(operator, bpy.context) == {"FINISHED"}
    assert ({"WARNING"}, f"Chain 'Arm': {limits}") in operator.reports
    assert ({"WARNING"}, f"Chain 'Arm': {stiffness}") in operator.reports
    bpy.context.view_layer.update()
    bend = np.array(forearm.rotation_quaternion.to_euler())
    assert np.abs(bend).max() > 0.1  # what the sentence warns of: the solve went past the limits

    chain.method = "SDLS"
    assert hi_sentences(bpy.context) == []
    operator = _StandIn(operators.IK_SOLVERS_OT_solve, all_chains=False)
    assert operators.IK_SOLVERS_OT_solve.execute(operator, bpy.context) == {"FINISHED"}
    assert not [message for _, message in operator.reports if "HI does not apply" in message]
    forearm.use_ik_limit_x = forearm.use_ik_limit_z = False
    constraint = forearm.constraints.new("LIMIT_ROTATION")
    constraint.use_limit_x = True
    chain.method = "HI"
    assert hi_sentences(bpy.context) == [limits, stiffness]
    constraint.mute = True
    assert hi_sentences(bpy.context) == [stiffness]
